-- Sessions: a movable head in a tree of message nodes.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    name        TEXT UNIQUE,
    cwd         TEXT NOT NULL,
    provider    TEXT NOT NULL,
    model       TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    head_id     TEXT,
    last_seq    INTEGER NOT NULL DEFAULT 0
);

-- History is a tree from day one: every node has a parent (NULL for a root).
CREATE TABLE nodes (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    parent_id   TEXT,
    role        TEXT NOT NULL,
    text        TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    -- provider, model, client, usage, error: JSON, grows without migrations
    meta        TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX nodes_by_session ON nodes(session_id);
CREATE INDEX nodes_by_parent ON nodes(parent_id);

-- The event log: everything clients saw, in order, persisted before they saw it.
CREATE TABLE events (
    session_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    ts_ms       INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

-- Messages sent while a turn ran; they run next, in order, even after a restart.
CREATE TABLE queued_messages (
    session_id  TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    text        TEXT NOT NULL,
    client      TEXT,
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (session_id, message_id)
);
