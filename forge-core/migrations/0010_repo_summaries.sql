-- Repository maps: a one-line summary of a file, by the SHA-256 of its
-- content (shared by every project and session that has that content).
CREATE TABLE repo_summaries (
    blob TEXT PRIMARY KEY,
    summary TEXT NOT NULL,
    model TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);

-- What models cost beside a conversation's own answers (repository
-- summaries, commit messages), counted in usage reports.
CREATE TABLE extra_usage (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    cwd TEXT NOT NULL,
    kind TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    usage TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
