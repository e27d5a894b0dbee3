-- What hooks added to a queued message for the model (kept apart from
-- the text the user typed).
ALTER TABLE queued_messages ADD COLUMN context TEXT;
