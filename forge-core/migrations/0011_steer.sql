-- A queued row may be a steer: text for the running turn, joined at its
-- next safe point (or run first when the turn ends before one).
ALTER TABLE queued_messages ADD COLUMN steer INTEGER NOT NULL DEFAULT 0;
