-- What the provider needs sent back to continue after the answer (thinking
-- signatures, reasoning items), as JSON, recorded with the seal.
ALTER TABLE streams ADD COLUMN reasoning TEXT;
