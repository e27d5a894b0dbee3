-- Helper agents: a session a `task` call started names its parent (for
-- `ps`, usage roll-up and cancelling) and how it was asked to run (JSON:
-- call, description, agent type, depth, tools, instructions), NULL for a
-- session a user started.
ALTER TABLE sessions ADD COLUMN parent_id TEXT;
ALTER TABLE sessions ADD COLUMN helper TEXT;
CREATE INDEX sessions_parent ON sessions(parent_id) WHERE parent_id IS NOT NULL;
