//! A git session's methods' params: its log, one commit, the diff a
//! merge would bring, merge, rebase and reword.

use serde::{Deserialize, Serialize};

use super::Addressed;
use super::{is_false, or_default};

params!(
    /// A session's turns as commits.
    GitLogParams {
        session: String,
        /// At most this many (default 100).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub limit: Option<u32>,
    }
);

params!(
    /// `git.diff`: what the session's branch would bring, or (`turn`)
    /// what the running turn changed so far.
    GitDiffParams {
        session: String,
        /// The changes in the session's worktree not committed yet (the
        /// running turn's, before its commit is final).
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub turn: bool,
    }
);

params!(
    /// `git.reword`: the last commit's new message.
    GitRewordParams {
        session: String,
        pub message: String,
    }
);

params!(
    /// `git.merge`: how the session's work comes to the user's branch.
    GitMergeParams {
        session: String,
        /// One commit holding all the session's work.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub squash: bool,
        /// Leave `.forge/sessions/*.json` out.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub without_state: bool,
        /// Work it out and say what it would bring (`marked` included);
        /// change nothing.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub dry_run: bool,
        /// Take the files that need the user's word (without it, a merge
        /// that brings any is refused with `git_marked`).
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub accept_marked: bool,
    }
);

params!(
    /// One commit of a git session.
    GitShowParams {
        /// A commit id (or prefix, branch, tag).
        pub commit: String,
        /// The repository: a directory in it (default: the daemon's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cwd: Option<String>,
    }
);
