-- Bookmarks: names for nodes of a session's tree (`forgectl bookmark`).
-- An edit that branches moves the edited node's bookmarks to the new node.
CREATE TABLE bookmarks (
    session_id  TEXT NOT NULL,
    name        TEXT NOT NULL,
    node_id     TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (session_id, name)
);
-- A fork's origin: the session and node it shares the path up to.
ALTER TABLE sessions ADD COLUMN forked_from TEXT;
ALTER TABLE sessions ADD COLUMN fork_node TEXT;
