-- The store's bound ([store] max_blob_mb): the order in which blobs were
-- last put (a sequence), so that the oldest rewind content goes first,
-- and the blobs that went, so that a rewind names them instead of
-- guessing why one is missing.
CREATE TABLE blob_use (
    hash TEXT PRIMARY KEY,
    used INTEGER NOT NULL
);
CREATE INDEX blob_use_by_use ON blob_use(used);
CREATE TABLE evicted_blobs (
    hash TEXT PRIMARY KEY,
    evicted_ms INTEGER NOT NULL
);
