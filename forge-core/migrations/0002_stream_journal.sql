-- The stream journal: one row per provider stream that is not yet committed
-- to history. Its deltas are the stream's `text_delta` events (persisted
-- before any client saw them); this row records the lifecycle:
-- open -> sealed (the provider finished: outcome known) -> committed (the
-- answer is a history node; the row is pruned in that same transaction).
CREATE TABLE streams (
    stream_id   TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    provider    TEXT NOT NULL,
    model       TEXT NOT NULL,
    -- seq of the session's `turn_started` event that opened the stream
    first_seq   INTEGER NOT NULL,
    state       TEXT NOT NULL,
    -- on seal: complete | error | cancelled, with the error text
    outcome     TEXT,
    error       TEXT,
    error_kind  TEXT,
    stop_reason TEXT,
    usage       TEXT,
    created_ms  INTEGER NOT NULL,
    sealed_ms   INTEGER
);
CREATE INDEX streams_by_session ON streams(session_id);

-- A tiny table the writer writes to prove the store works again after a
-- failure (`forgectl journal reset`).
CREATE TABLE journal_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
