//! Git-backed sessions on the wire: a session's branch, its turns as
//! commits, one commit's conversation and diff.

use serde::{Deserialize, Serialize};

/// A session in git mode: where its branch and worktree are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitSession {
    /// The user's repository (its top directory).
    pub repo: String,
    /// `forge/session/<id>`.
    pub branch: String,
    /// The commit the branch started from.
    pub base: String,
    /// The session's private worktree, where its tools work.
    pub worktree: String,
}

/// One turn's commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitCommit {
    pub id: String,
    /// The message's first line.
    pub summary: String,
    pub message: String,
    /// Seconds since the Unix epoch.
    pub time: i64,
    /// The session that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The turn's user message (a node of that session's tree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// Paths the turn changed, relative to the repository's top.
    #[serde(default)]
    pub files: Vec<String>,
}

/// `git.log`: a session's turns, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitLog {
    pub branch: String,
    pub commits: Vec<GitCommit>,
    /// The tips an undo, a checkout, a reword or a rebase left on
    /// `refs/forge/session/<id>/prev-N`, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<GitKept>,
}

/// A tip kept when the session's branch moved away from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitKept {
    /// `prev-N`.
    pub name: String,
    pub commit: GitCommit,
}

/// `git.show`: one commit, the session state it holds and its diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitShown {
    pub commit: GitCommit,
    /// `.forge/sessions/<id>.json` as the commit holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
    /// The commit's changes as a patch (the state file left out).
    pub diff: String,
}

/// `git.diff`: what merging the session's branch would bring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitDiff {
    pub branch: String,
    pub diff: String,
    /// The files in it that need a look before they are taken (see
    /// [`GitMarked`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marked: Vec<GitMarked>,
}

/// A file a merge (or a diff) brings that needs the user's word: it runs
/// code later (git hooks, `.gitattributes`, `.gitmodules`, Claude's or
/// Forge's project settings, `.mcp.json`, `.envrc`, pre-commit and
/// lefthook files), it is a symbolic link out of the repository, or a
/// binary over 1 MiB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitMarked {
    pub path: String,
    /// `runs_later`, `link_out` or `large_binary`.
    pub why: String,
    /// The same in words (the link's target, the size).
    pub detail: String,
}

/// `git.merge`: the session's work on the user's current branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitMerged {
    pub session_id: String,
    /// The user's branch the work went to.
    pub into: String,
    /// Its tip now, and before.
    pub commit: String,
    pub previous: String,
    /// `fast_forward`, `merge`, `squash` or `up_to_date`.
    pub how: String,
    /// Files it changed in the user's working tree.
    pub files: Vec<String>,
    /// Of those, the ones that needed the user's word (taken with
    /// `accept_marked`, or listed by a dry run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marked: Vec<GitMarked>,
    /// A dry run: nothing was changed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// `git.rebase`: the session's branch on top of the user's current branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitRebased {
    pub session_id: String,
    pub branch: String,
    /// Its tip now and before, and the ref keeping the old tip (absent
    /// when it was on top already).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}
