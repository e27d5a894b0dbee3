//! Bringing a session's work back: merging its branch into the user's
//! current branch (fast-forward when possible, or squashed), and rebasing
//! its branch and worktree onto the user's current branch. Both work in
//! memory first and change nothing when they meet a conflict: the
//! conflicting files are named and the user's repository, and the
//! session's branch, are as they were.

use std::path::Path;

use crate::{GitError, Moved, open_user};

/// What a merge did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The user's branch the work went to.
    pub into: String,
    /// Its tip now, and before.
    pub commit: String,
    pub previous: String,
    /// `fast_forward`, `merge`, `squash` or `up_to_date`.
    pub how: &'static str,
    /// Files it changed in the user's tree.
    pub files: Vec<String>,
    /// What it brought (added or changed files, links, sizes): for the
    /// caller to mark what needs the user's word.
    pub brought: Vec<crate::Brought>,
}

/// How to merge.
#[derive(Debug, Clone, Copy, Default)]
pub struct MergeOptions {
    /// One commit on the user's branch holding all the session's work.
    pub squash: bool,
    /// Leave `.forge/sessions/*.json` out of what is brought over.
    pub without_state: bool,
    /// Work it out and say what it would bring; change nothing.
    pub dry_run: bool,
}

fn conflict(index: &git2::Index, what: &str) -> GitError {
    let mut files: Vec<String> = index
        .conflicts()
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|c| c.our.or(c.their).or(c.ancestor))
        .map(|e| String::from_utf8_lossy(&e.path).into_owned())
        .collect();
    files.dedup();
    GitError::Conflict { what: what.to_string(), files }
}

/// The user's current branch and its tip; refused when detached or when
/// tracked files hold changes.
fn users_branch<'r>(repo: &'r git2::Repository, dir: &Path) -> Result<(String, git2::Commit<'r>), GitError> {
    let head = repo.head()?;
    if !head.is_branch() {
        return Err(GitError::NotOnBranch { dir: dir.display().to_string() });
    }
    let name = head.shorthand().unwrap_or("HEAD").to_string();
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(false).include_ignored(false);
    let dirty: Vec<String> =
        repo.statuses(Some(&mut opts))?.iter().filter_map(|s| s.path().ok().map(str::to_string)).collect();
    if !dirty.is_empty() {
        return Err(GitError::UserTreeDirty { dir: dir.display().to_string(), files: dirty });
    }
    Ok((name, head.peel_to_commit()?))
}

/// `tree` without the session state files, taken back to `base`'s.
fn without_state(repo: &git2::Repository, tree: &git2::Tree, base: &git2::Tree) -> Result<git2::Oid, GitError> {
    let mut index = git2::Index::new()?;
    index.read_tree(tree)?;
    let states: Vec<Vec<u8>> =
        index.iter().map(|e| e.path).filter(|p| p.starts_with(b".forge/sessions/") && p.ends_with(b".json")).collect();
    for path in states {
        let p = Path::new(std::str::from_utf8(&path).unwrap_or_default());
        index.remove_path(p)?;
        if let Ok(entry) = base.get_path(p) {
            let blob = repo.find_blob(entry.id())?;
            let mut e = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: entry.filemode() as u32,
                uid: 0,
                gid: 0,
                file_size: blob.content().len() as u32,
                id: entry.id(),
                flags: 0,
                flags_extended: 0,
                path: path.clone(),
            };
            e.flags = (path.len().min(0xfff)) as u16;
            index.add(&e)?;
        }
    }
    Ok(index.write_tree_to(repo)?)
}

fn changed_files(repo: &git2::Repository, from: &git2::Tree, to: &git2::Tree) -> Result<Vec<String>, GitError> {
    let diff = repo.diff_tree_to_tree(Some(from), Some(to), None)?;
    Ok(diff
        .deltas()
        .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()).map(|p| p.display().to_string()))
        .collect())
}

/// Merges session `session`'s branch into the user's current branch of
/// the repository at `repo_dir`: a fast-forward when the branch is ahead
/// (and neither `squash` nor `without_state` asks for a commit of its
/// own), else a merge commit, or with `squash` one commit of all the
/// session's work. Refused when the user's tracked files hold changes or
/// HEAD is detached; a conflict changes nothing and names the files.
pub fn merge_session(repo_dir: &Path, branch: &str, session: &str, o: MergeOptions) -> Result<Merged, GitError> {
    let repo = open_user(repo_dir)?;
    let (into, head) = users_branch(&repo, repo_dir)?;
    let tip = repo.find_reference(&format!("refs/heads/{branch}"))?.peel_to_commit()?;
    let previous = head.id().to_string();
    let base = repo.merge_base(head.id(), tip.id())?;
    let done = |commit: git2::Oid, how, files, brought| Merged {
        into: into.clone(),
        commit: commit.to_string(),
        previous: previous.clone(),
        how,
        files,
        brought,
    };
    if base == tip.id() {
        return Ok(done(head.id(), "up_to_date", Vec::new(), Vec::new()));
    }
    let head_tree = head.tree()?;
    let fast = base == head.id() && !o.squash && !o.without_state;
    let (tree_id, how) = if fast {
        (tip.tree_id(), "fast_forward")
    } else {
        let mut index = repo.merge_commits(&head, &tip, None)?;
        if index.has_conflicts() {
            return Err(conflict(&index, &format!("merging {branch} into {into}")));
        }
        let tree = repo.find_tree(index.write_tree_to(&repo)?)?;
        let tree = match o.without_state {
            true => without_state(&repo, &tree, &head_tree)?,
            false => tree.id(),
        };
        (tree, if o.squash { "squash" } else { "merge" })
    };
    let tree = repo.find_tree(tree_id)?;
    let files = changed_files(&repo, &head_tree, &tree)?;
    let brought = crate::brought(&repo, &head_tree, &tree)?;
    if o.dry_run {
        return Ok(done(head.id(), how, files, brought));
    }
    let commit = match how {
        "fast_forward" => tip.id(),
        _ => {
            let sig = repo.signature().or_else(|_| git2::Signature::now("Forge", "forge@localhost"))?;
            let subjects = subjects(&repo, base, tip.id())?;
            let (message, parents): (String, Vec<&git2::Commit>) = match how {
                "squash" => (format!("Forge session {session}, squashed\n\n{subjects}"), vec![&head]),
                _ => (format!("Merge forge session {session} ({branch})\n\n{subjects}"), vec![&head, &tip]),
            };
            repo.commit(None, &sig, &sig, &message, &tree, &parents)?
        }
    };
    // The files first (a file of the user's in the way stops it here,
    // nothing written), then the branch.
    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.safe();
    repo.checkout_tree(tree.as_object(), Some(&mut checkout)).map_err(|e| match e.code() {
        git2::ErrorCode::Conflict => GitError::Conflict {
            what: format!("merging {branch} into {into}"),
            files: vec![format!("a file of yours not committed ({})", e.message())],
        },
        _ => GitError::Git(e),
    })?;
    let refname = format!("refs/heads/{into}");
    repo.reference_matching(&refname, commit, true, head.id(), &format!("forge: {how} of session {session}"))?;
    Ok(done(commit, how, files, brought))
}

/// The subjects of the commits from `base` (excluded) to `tip`, oldest
/// first, as a list.
fn subjects(repo: &git2::Repository, base: git2::Oid, tip: git2::Oid) -> Result<String, GitError> {
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.hide(base)?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    let mut out = Vec::new();
    for id in walk {
        let c = repo.find_commit(id?)?;
        out.push(format!("- {}", c.summary().ok().flatten().unwrap_or_default()));
    }
    Ok(out.join("\n"))
}

/// Rebases session `session`'s branch (checked out in `worktree`) onto the
/// user's current branch: each of its commits since their merge base is
/// made again on top, in memory; a conflict changes nothing and names the
/// files. Then the branch and the worktree move there, the old tip kept
/// as `refs/forge/session/<id>/prev-N`.
pub fn rebase_session(
    repo_dir: &Path,
    worktree: &Path,
    branch: &str,
    session: &str,
) -> Result<Option<Moved>, GitError> {
    let repo = open_user(repo_dir)?;
    let head = repo.head()?.peel_to_commit()?;
    let onto_name = repo.head()?.shorthand().unwrap_or("HEAD").to_string();
    let tip = repo.find_reference(&format!("refs/heads/{branch}"))?.peel_to_commit()?;
    let base = repo.merge_base(head.id(), tip.id())?;
    if base == head.id() {
        return Ok(None);
    }
    let mut walk = repo.revwalk()?;
    walk.push(tip.id())?;
    walk.hide(base)?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    let mut onto = head.clone();
    for id in walk {
        let c = repo.find_commit(id?)?;
        let mut index = repo.cherrypick_commit(&c, &onto, 0, None)?;
        if index.has_conflicts() {
            let what = format!(
                "rebasing {branch} onto {onto_name} (at \"{}\")",
                c.summary().ok().flatten().unwrap_or_default()
            );
            return Err(conflict(&index, &what));
        }
        let tree = repo.find_tree(index.write_tree_to(&repo)?)?;
        let message = String::from_utf8_lossy(c.message_bytes()).into_owned();
        // Committed now: the copy is newer than what it replaces.
        let committer = crate::signature(&repo)?;
        let id = repo.commit(None, &c.author(), &committer, &message, &tree, &[&onto])?;
        onto = repo.find_commit(id)?;
    }
    crate::move_branch(worktree, branch, session, &onto.id().to_string())
}
