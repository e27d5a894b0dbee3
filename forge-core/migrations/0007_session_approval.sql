-- A session's own approval rules (JSON): `mode` overriding [tools.approval]
-- mode, `always` the tools a user chose to allow always in this session.
ALTER TABLE sessions ADD COLUMN approval TEXT NOT NULL DEFAULT '{}';
