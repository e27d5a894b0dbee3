-- Rewind: what tools did to files. Contents are content-addressed blobs
-- (SHA-256, stored once). A change's row is written, with the file's
-- content before, before the tool touches the file; the content after is
-- filled in the transaction that records the tool's result.
CREATE TABLE blobs (
    hash  TEXT PRIMARY KEY,
    data  BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE file_changes (
    session_id   TEXT NOT NULL,
    -- the tool result node the change belongs to (allocated when the call
    -- starts, so a change is recorded before its result exists)
    node_id      TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    path         TEXT NOT NULL,
    -- NULL: the file did not exist
    before_hash  TEXT,
    before_mode  INTEGER,
    after_hash   TEXT,
    after_mode   INTEGER,
    -- 0 until the tool's result is recorded (after_* are then known)
    done         INTEGER NOT NULL DEFAULT 0,
    created_ms   INTEGER NOT NULL,
    PRIMARY KEY (node_id, path)
);
CREATE INDEX file_changes_by_session ON file_changes(session_id);
