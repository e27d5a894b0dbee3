-- A session's own sampling parameters (JSON `{temperature, top_p}`), set
-- with `session new --temperature` or `session.configure`.
ALTER TABLE sessions ADD COLUMN sampling TEXT NOT NULL DEFAULT '{}';
