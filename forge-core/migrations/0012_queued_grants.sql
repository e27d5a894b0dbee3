-- What a command of one's own grants the turn of a queued message (its
-- front matter's model and allowed-tools, as JSON), kept until it runs.
ALTER TABLE queued_messages ADD COLUMN grants TEXT;
