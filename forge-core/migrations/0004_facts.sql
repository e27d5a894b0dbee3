-- The Librarian's facts: what summarized spans said (requests, files,
-- commands and their outcome, errors, decisions, names), searchable in
-- full text, each citing the node it came from. Written in the same
-- transaction as the summary node.
CREATE VIRTUAL TABLE facts USING fts5(
    text,
    kind UNINDEXED,
    session_id UNINDEXED,
    node_id UNINDEXED,
    summary_id UNINDEXED,
    tokenize = 'porter unicode61'
);
