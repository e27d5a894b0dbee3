//! The guard, fed trees a hostile command could leave.

use std::path::{Path, PathBuf};

use super::{Guard, Spot};

fn put(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A repository's own files, as `git init` leaves them.
fn repo(dir: &Path, config: &str) {
    put(&dir.join("HEAD"), "ref: refs/heads/main\n");
    std::fs::create_dir_all(dir.join("objects")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(dir.join("refs/heads")).unwrap_or_else(|e| panic!("{e}"));
    put(&dir.join("config"), config);
}

fn root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    (dir, root)
}

/// The guard as a session keeps it: what was there before learned, then
/// the whole tree checked after the "command".
fn around(root: &Path, command: impl FnOnce()) -> Vec<String> {
    let mut guard = Guard::new(&[root.to_path_buf()]);
    let spots = guard.find();
    guard.learn(spots);
    command();
    let spots = guard.find();
    let undone = guard.check(spots);
    let again = guard.find();
    assert!(guard.check(again).is_empty(), "a second look finds nothing more");
    undone.iter().map(|u| u.to_string()).collect()
}

#[test]
fn a_new_nested_repository_loses_its_programs_and_hooks_and_keeps_the_rest() {
    let (_dir, root) = root();
    let undone = around(&root, || {
        let git = root.join("sub/.git");
        repo(&git, "[core]\n\tfsmonitor = \"touch pwned\"\n\tbare = false\n[user]\n\tname = Model\n");
        put(&git.join("hooks/post-checkout"), "#!/bin/sh\ntouch pwned\n");
        put(&git.join("hooks/pre-commit.sample"), "#!/bin/sh\n");
        repo(&git.join("modules/m"), "[filter \"x\"]\n\tsmudge = evil\n");
    });
    let config = read(&root.join("sub/.git/config"));
    assert!(!config.contains("fsmonitor"), "{config}");
    assert!(config.contains("name = Model") && config.contains("bare = false"), "{config}");
    assert!(!root.join("sub/.git/hooks/post-checkout").exists());
    assert!(root.join("sub/.git/hooks/pre-commit.sample").exists(), "samples never run");
    assert!(!read(&root.join("sub/.git/modules/m/config")).contains("smudge"));
    assert_eq!(undone.len(), 3, "{undone:?}");
    assert!(undone.iter().any(|u| u.contains("sub/.git/config: took out core.fsmonitor = touch pwned")), "{undone:?}");
}

#[test]
fn what_the_user_had_stays_and_what_a_command_changed_goes_back() {
    let (_dir, root) = root();
    let git = root.join("old/.git");
    repo(&git, "[core]\n\thooksPath = .husky\n");
    put(&git.join("hooks/pre-push"), "#!/bin/sh\necho mine\n");
    let undone = around(&root, || {
        put(&git.join("config"), "[core]\n\thooksPath = .husky\n\tpager = evil\n[user]\n\temail = m@x\n");
        put(&git.join("hooks/pre-push"), "#!/bin/sh\nevil\n");
    });
    assert_eq!(read(&git.join("config")), "[core]\n\thooksPath = .husky\n[user]\n\temail = m@x\n");
    assert_eq!(read(&git.join("hooks/pre-push")), "#!/bin/sh\necho mine\n");
    assert_eq!(undone.len(), 2, "{undone:?}");
}

#[test]
fn hooks_in_the_users_core_hooks_path_are_guarded_like_the_git_dirs() {
    let (_dir, root) = root();
    let git = root.join("mine/.git");
    repo(&git, "[core]\n\thooksPath = .husky\n");
    put(&root.join("mine/.husky/pre-push"), "#!/bin/sh\necho mine\n");
    let undone = around(&root, || {
        put(&root.join("mine/.husky/pre-commit"), "#!/bin/sh\nevil\n");
        put(&root.join("mine/.husky/pre-push"), "#!/bin/sh\nevil\n");
    });
    assert!(!root.join("mine/.husky/pre-commit").exists(), "a hook it planted goes");
    assert_eq!(read(&root.join("mine/.husky/pre-push")), "#!/bin/sh\necho mine\n", "the user's own is put back");
    assert_eq!(undone.len(), 2, "{undone:?}");
    assert!(undone.iter().any(|u| u.contains("core.hooksPath")), "{undone:?}");
}

#[test]
fn bare_layouts_and_spellings_only_git_reads_are_found() {
    let (_dir, root) = root();
    let undone = around(&root, || {
        repo(&root.join("vendor/bare"), "[diff \"x\"]\n\ttextconv = evil\n");
        put(&root.join("vendor/bare/hooks/pre-commit"), "evil");
        // A byte-order mark, a key on the header's line, odd case.
        repo(&root.join("odd/.git"), "\u{feff}[CORE] FSMonitor = evil\n");
    });
    assert!(!read(&root.join("vendor/bare/config")).contains("textconv"));
    assert!(!root.join("vendor/bare/hooks/pre-commit").exists());
    assert!(!read(&root.join("odd/.git/config")).to_lowercase().contains("fsmonitor"));
    assert_eq!(undone.len(), 3, "{undone:?}");
}

#[test]
fn pointers_out_of_the_roots_or_through_links_are_removed() {
    let (_dir, root) = root();
    let (_elsewhere, outside) = self::root();
    repo(&outside.join("g"), "[core]\n\tfsmonitor = evil\n");
    let undone = around(&root, || {
        put(&root.join("a/.git"), &format!("gitdir: {}\n", outside.join("g").display()));
        std::fs::create_dir_all(root.join("b")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.join("g"), root.join("b/.git")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap_or_else(|e| panic!("{e}"));
        put(&root.join("c/.git"), "gitdir: ../link/g\n");
        // Inside the roots: followed, and what it names checked.
        repo(&root.join("real"), "[alias]\n\tst = !evil\n");
        put(&root.join("d/.git"), "gitdir: ../real\n");
    });
    for p in ["a/.git", "b/.git", "c/.git"] {
        assert!(std::fs::symlink_metadata(root.join(p)).is_err(), "{p} removed: {undone:?}");
    }
    assert_eq!(read(&root.join("d/.git")), "gitdir: ../real\n");
    assert!(!read(&root.join("real/config")).contains("evil"));
    assert!(read(&outside.join("g/config")).contains("fsmonitor"), "nothing outside the roots is touched");
    assert_eq!(undone.len(), 4, "{undone:?}");
}

#[test]
fn a_linked_config_becomes_a_copy_and_the_roots_own_git_is_left_alone() {
    let (_dir, root) = root();
    repo(&root.join(".git"), "[core]\n\tfsmonitor = mine\n");
    let undone = around(&root, || {
        put(&root.join("settings.ini"), "[core]\n\tpager = evil\n\tabbrev = 8\n");
        repo(&root.join("s/.git"), "");
        std::fs::remove_file(root.join("s/.git/config")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("../../settings.ini", root.join("s/.git/config")).unwrap_or_else(|e| panic!("{e}"));
        put(&root.join(".git/config"), "[core]\n\tfsmonitor = still-mine\n");
    });
    let copy = root.join("s/.git/config");
    assert!(!std::fs::symlink_metadata(&copy).unwrap_or_else(|e| panic!("{e}")).file_type().is_symlink());
    assert_eq!(read(&copy), "[core]\n\tabbrev = 8\n");
    assert!(read(&root.join("settings.ini")).contains("pager"), "the project's own file is not the guard's");
    assert!(read(&root.join(".git/config")).contains("still-mine"), "a root's own .git is read-only to commands");
    assert_eq!(undone.len(), 2, "{undone:?}");
}

#[test]
fn spots_name_the_repository_a_changed_path_belongs_to() {
    let (_dir, root) = root();
    repo(&root.join("sub/.git"), "");
    repo(&root.join("bare"), "");
    let guard = Guard::new(std::slice::from_ref(&root));
    let dir = |p: &str| vec![Spot::Dir(root.join(p))];
    assert_eq!(guard.spots_of(&root.join("sub/.git/modules/x/config")), dir("sub/.git"));
    assert_eq!(guard.spots_of(&root.join("bare/hooks/pre-commit")), dir("bare"));
    assert_eq!(guard.spots_of(&root.join("bare/config")), dir("bare"));
    assert!(guard.spots_of(&root.join("src/config")).is_empty(), "a project file named config is not git's");
    assert!(guard.spots_of(&root.join(".git/config")).is_empty());
}

/// Two "commands" in a row, the guard between them as a session runs it.
fn twice(root: &Path, first: impl FnOnce(), second: impl FnOnce()) -> (Vec<String>, Vec<String>) {
    let mut guard = Guard::new(&[root.to_path_buf()]);
    let spots = guard.find();
    guard.learn(spots);
    first();
    let one = guard.check(guard.find());
    guard.learn(Vec::new());
    second();
    // The second time, nothing points at the change: no spot is named.
    let two = guard.check(Vec::new());
    let words = |u: Vec<super::Undone>| u.iter().map(|u| u.to_string()).collect();
    (words(one), words(two))
}

#[test]
fn a_config_changed_through_a_hard_link_or_a_pointers_target_is_still_found() {
    let (_dir, root) = root();
    let (one, two) = twice(
        &root,
        || {
            repo(&root.join("sub/.git"), "[user]\n\tname = A\n");
            std::fs::hard_link(root.join("sub/.git/config"), root.join("notes.txt")).unwrap_or_else(|e| panic!("{e}"));
            repo(&root.join("sub/.git/objects/evil"), "");
            put(&root.join("b/.git"), "gitdir: ../sub/.git/objects/evil\n");
        },
        || {
            put(&root.join("notes.txt"), "[core]\n\tfsmonitor = evil\n");
            put(&root.join("sub/.git/objects/evil/config"), "[core]\n\tfsmonitor = evil\n");
        },
    );
    assert!(one.is_empty(), "{one:?}");
    assert!(!read(&root.join("sub/.git/config")).contains("fsmonitor"));
    assert!(!read(&root.join("sub/.git/objects/evil/config")).contains("fsmonitor"));
    assert_eq!(two.len(), 2, "{two:?}");
}

#[test]
fn odd_shapes_git_still_takes_for_a_repository_are_guarded() {
    let (_dir, root) = root();
    let undone = around(&root, || {
        // `objects` an executable file: git's discovery takes it.
        let docs = root.join("docs");
        put(&docs.join("HEAD"), "ref: refs/heads/main\n");
        put(&docs.join("objects"), "");
        std::fs::create_dir_all(docs.join("refs")).unwrap_or_else(|e| panic!("{e}"));
        put(&docs.join("config"), "[core]\n\tworktree = .\n\tfsmonitor = evil\n");
        // An alias that sets a program for the command it runs.
        repo(&root.join("a/.git"), "[alias]\n\tst = -c core.fsmonitor=evil status\n\tco = checkout\n");
        // A pointer whose path goes on past a line end, as git reads it.
        std::fs::create_dir_all(root.join("ok\n")).unwrap_or_else(|e| panic!("{e}"));
        put(&root.join("c/.git"), "gitdir: ok\n/../../elsewhere\n");
    });
    assert!(!read(&root.join("docs/config")).contains("fsmonitor"), "{undone:?}");
    let alias = read(&root.join("a/.git/config"));
    assert!(!alias.contains("-c core") && alias.contains("co = checkout"), "{alias}");
    assert!(!root.join("c/.git").exists(), "{undone:?}");
}

#[test]
fn the_guard_is_not_led_through_a_link_into_the_roots_own_git_or_elsewhere() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, root) = root();
    repo(&root.join(".git"), "[credential]\n\thelper = store\n");
    put(&root.join(".git/hooks/pre-commit"), "mine");
    let (_other, outside) = self::root();
    repo(&outside.join(".git"), "[core]\n\tfsmonitor = theirs\n");
    let mut guard = Guard::new(std::slice::from_ref(&root));
    guard.learn(guard.find());
    std::os::unix::fs::symlink(&root, root.join("p")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&outside, root.join("o")).unwrap_or_else(|e| panic!("{e}"));
    // As stale notes would name them.
    let spots = [Spot::Dir(root.join("p/.git")), Spot::Dir(root.join("o/.git"))];
    assert!(guard.check(spots).is_empty());
    assert!(read(&root.join(".git/config")).contains("helper = store"));
    assert!(root.join(".git/hooks/pre-commit").exists());
    assert!(read(&outside.join(".git/config")).contains("theirs"));
    // A repository made read-only by the command is repaired all the same.
    repo(&root.join("ro/.git"), "[core]\n\tpager = evil\n");
    std::fs::set_permissions(root.join("ro/.git"), std::fs::Permissions::from_mode(0o555))
        .unwrap_or_else(|e| panic!("{e}"));
    let undone = guard.check(guard.find());
    assert!(!read(&root.join("ro/.git/config")).contains("pager"), "{undone:?}");
    let mode = std::fs::metadata(root.join("ro/.git")).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    assert_eq!(mode, 0o555, "its mode as the command left it");
}

#[test]
fn a_root_named_through_a_link_is_guarded_by_its_real_name() {
    let (_dir, root) = root();
    let (_links, links) = self::root();
    std::fs::create_dir(root.join("project")).unwrap_or_else(|e| panic!("{e}"));
    let named = links.join("p");
    std::os::unix::fs::symlink(root.join("project"), &named).unwrap_or_else(|e| panic!("{e}"));
    let mut guard = Guard::new(std::slice::from_ref(&named));
    guard.learn(Vec::new());
    repo(&named.join("sub/.git"), "[core]\n\tfsmonitor = evil\n");
    // As the tracker's notes name it: under the root as given.
    let undone = guard.check(guard.spots_of(&named.join("sub/.git/config")));
    assert_eq!(undone.len(), 1, "{undone:?}");
    assert!(!read(&root.join("project/sub/.git/config")).contains("fsmonitor"));
}

#[test]
fn a_guard_saved_before_a_command_undoes_its_plants_after_a_crash_and_keeps_the_users_own() {
    let (_dir, root) = root();
    // The user's own nested repository, with a filter of theirs.
    repo(&root.join("lib/.git"), "[filter \"lfs\"]\n\tsmudge = git-lfs smudge -- %f\n");
    let mut guard = Guard::new(std::slice::from_ref(&root));
    let spots = guard.find();
    guard.learn(spots);
    let saved = guard.saved().unwrap_or_else(|| panic!("saved"));
    drop(guard);
    // The command plants, then the daemon dies: a new one restores.
    let config = root.join("lib/.git/config");
    let planted = format!("{}[core]\n\tfsmonitor = \"touch pwned\"\n", read(&config));
    put(&config, &planted);
    repo(&root.join("new/.git"), "[core]\n\tpager = evil\n");
    let mut restored = Guard::restored(&saved).unwrap_or_else(|| panic!("restored"));
    let spots = restored.find();
    let undone: Vec<String> = restored.check(spots).iter().map(|u| u.to_string()).collect();
    assert_eq!(undone.len(), 2, "{undone:?}");
    let config = read(&config);
    assert!(!config.contains("fsmonitor") && config.contains("git-lfs smudge"), "{config}");
    assert!(!read(&root.join("new/.git/config")).contains("pager"));
}
