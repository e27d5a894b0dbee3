-- A session's active files (JSON `[{path, bytes}]`): their whole text goes
-- with every request.
ALTER TABLE sessions ADD COLUMN active_files TEXT NOT NULL DEFAULT '[]';
