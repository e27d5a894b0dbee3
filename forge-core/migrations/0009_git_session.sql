-- Git mode: the session's repository, branch, base commit and worktree
-- (JSON), NULL for a session working in its directory itself.
ALTER TABLE sessions ADD COLUMN git TEXT;
