-- The images of a queued message (ImageInfo JSON; their bytes are blobs),
-- kept until it runs.
ALTER TABLE queued_messages ADD COLUMN images TEXT;
