//! The tracker as a command's recorder: the files a command touched and
//! nothing else, with or without the kernel's notes, and git's blobs for
//! the files a repository has unchanged.

use std::path::{Path, PathBuf};

use super::{REF_PREFIX, Tracker};

fn write(path: &Path, data: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, data).unwrap_or_else(|e| panic!("{e}"));
}

fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    for i in 0..50 {
        write(&root.join(format!("src/m{}/f{i}.rs", i % 5)), &format!("fn f{i}() {{}}\n"));
    }
    write(&root.join("moved/a.txt"), "a");
    write(&root.join("moved/deep/b.txt"), "b");
    write(&root.join("gone/c.txt"), "c");
    write(&root.join(".gitignore"), "build/\n");
    write(&root.join("build/out.o"), "obj");
    (dir, root)
}

/// What a command does to the tree, and what it changed as found: each
/// path (relative) with whether it existed before and after.
fn command(root: &Path, tracker: &mut Tracker) -> (Vec<(String, bool, bool)>, usize) {
    use std::os::unix::fs::PermissionsExt;
    write(&root.join("src/m1/f1.rs"), "fn f1() { changed }\n");
    write(&root.join("new/dir/n.txt"), "new");
    std::fs::remove_file(root.join("src/m2/f2.rs")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::rename(root.join("moved"), root.join("renamed")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_dir_all(root.join("gone")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(root.join("src/m3/f3.rs"), std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    write(&root.join("build/out.o"), "obj2");
    let skip = |_: &Path| false;
    let mut read = 0;
    let mut found: Vec<(String, bool, bool)> = tracker
        .after(&skip, &mut |_, _| read += 1)
        .into_iter()
        .map(|f| {
            let rel = f.path.strip_prefix(root).map(|p| p.display().to_string()).unwrap_or_default();
            (rel, f.before.is_some(), f.after.is_some())
        })
        .collect();
    found.sort();
    (found, read)
}

fn expected() -> Vec<(String, bool, bool)> {
    let mut v: Vec<(String, bool, bool)> = [
        ("build/out.o", true, true),
        ("gone/c.txt", true, false),
        ("moved/a.txt", true, false),
        ("moved/deep/b.txt", true, false),
        ("new/dir/n.txt", false, true),
        ("renamed/a.txt", false, true),
        ("renamed/deep/b.txt", false, true),
        ("src/m1/f1.rs", true, true),
        ("src/m2/f2.rs", true, false),
        ("src/m3/f3.rs", true, true),
    ]
    .into_iter()
    .map(|(p, b, a)| (p.to_string(), b, a))
    .collect();
    v.sort();
    v
}

#[test]
fn the_kernels_notes_name_what_a_command_changed_and_nothing_else_is_read() {
    let (_dir, root) = tree();
    let mut tracker = Tracker::new("s1", &root);
    let skip = |_: &Path| false;
    let mut first = 0;
    tracker.before(std::slice::from_ref(&root), &skip, &mut |_, _| first += 1);
    assert!(tracker.watching(), "inotify is available here");
    assert_eq!(first, 54, "the first record keeps every file's content but the build output's");
    let (found, read) = command(&root, &mut tracker);
    assert_eq!(found, expected());
    assert_eq!(read, 5, "only the files the command wrote are read (f1, f3's mode, n, and the two moved)");
    // The next command starts from there: nothing new.
    let mut again = 0;
    tracker.before(std::slice::from_ref(&root), &skip, &mut |_, _| again += 1);
    assert_eq!((again, tracker.after(&skip, &mut |_, _| {}).len()), (0, 0));
}

#[test]
fn without_the_kernels_notes_a_scan_finds_the_same_changes() {
    let (_dir, root) = tree();
    let mut tracker = Tracker::scanning_only("s2", &root);
    let skip = |_: &Path| false;
    tracker.before(std::slice::from_ref(&root), &skip, &mut |_, _| {});
    assert!(!tracker.watching());
    let (found, _) = command(&root, &mut tracker);
    assert_eq!(found, expected());
}

/// Ages a file's times so that git's index, written after, does not
/// find it racily clean.
fn age(path: &Path) {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let f = std::fs::File::options().write(true).open(path).unwrap_or_else(|e| panic!("{e}"));
    f.set_modified(past).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn files_git_has_unchanged_are_not_copied_and_their_content_comes_from_git() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    let repo = git2::Repository::init(&root).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..20 {
        write(&root.join(format!("f{i}.txt")), &format!("tracked {i}\n"));
        age(&root.join(format!("f{i}.txt")));
    }
    let mut index = repo.index().unwrap_or_else(|e| panic!("{e}"));
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap_or_else(|e| panic!("{e}"));
    index.write().unwrap_or_else(|e| panic!("{e}"));
    write(&root.join("untracked.txt"), "new\n");
    write(&root.join("f0.txt"), "dirty\n");

    let mut tracker = Tracker::new("s3", &root);
    let skip = |_: &Path| false;
    let mut kept = Vec::new();
    tracker.before(std::slice::from_ref(&root), &skip, &mut |_, d| kept.push(d));
    kept.sort();
    assert_eq!(kept, [b"dirty\n".to_vec(), b"new\n".to_vec()], "only what git does not have is copied");
    let name = format!("{REF_PREFIX}s3");
    assert!(repo.find_reference(&name).is_ok(), "a ref keeps git's blobs reachable");

    write(&root.join("f5.txt"), "changed by a command\n");
    let mut kept = Vec::new();
    let found = tracker.after(&skip, &mut |_, d| kept.push(d));
    assert_eq!(found.len(), 1);
    let before = found[0].before.clone().unwrap_or_else(|| panic!("f5 existed"));
    assert_eq!(before.0, crate::rewind::hash(b"tracked 5\n"), "the content before, as stored");
    assert!(kept.contains(&b"tracked 5\n".to_vec()), "git's blob is stored with the change");
    tracker.drop_refs();
    assert!(repo.find_reference(&name).is_err(), "the ref goes with the session");
}

/// A tree holding more than the store may keep (a home directory, say)
/// is recorded up to the bound; the files past it are marked, so that a
/// rewind names them, and a change to one is still found.
#[test]
fn a_scan_keeps_no_more_than_the_store_may_hold() {
    let (_dir, root) = tree();
    let mut tracker = Tracker::new("s4", &root).with_budget(100);
    let skip = |_: &Path| false;
    let mut kept = 0;
    tracker.before(std::slice::from_ref(&root), &skip, &mut |_, d| kept += d.len());
    assert!(kept <= 100 && kept > 0, "{kept}");
    let over = super::Content::Mark(crate::rewind::Unrecorded::OverBound);
    let marks = tracker.manifest.as_ref().map(|m| m.entries().filter(|e| e.content == over).count());
    assert!(marks > Some(40), "{marks:?}");
    let (found, _) = command(&root, &mut tracker);
    assert_eq!(found, expected(), "changes are found all the same");
}

/// Three commands, each leaving in a nested repository something git
/// would run: a new repository, a change to one the tracker already
/// watches, and a bare layout in an ignored directory. The user's own
/// setting, there before, stays.
fn nested_repositories_lose_what_git_would_run(mut tracker: Tracker, root: &Path) {
    write(&root.join("mine/.git/HEAD"), "ref: refs/heads/main\n");
    write(&root.join("mine/.git/config"), "[core]\n\thooksPath = .husky\n");
    std::fs::create_dir_all(root.join("mine/.git/objects")).unwrap_or_else(|e| panic!("{e}"));
    let skip = |_: &Path| false;
    let run = |tracker: &mut Tracker, command: &dyn Fn()| {
        tracker.before(&[root.to_path_buf()], &skip, &mut |_, _| {});
        command();
        tracker.after(&skip, &mut |_, _| {});
        let undone: Vec<String> = tracker.take_undone().iter().map(|u| u.to_string()).collect();
        undone
    };
    let undone = run(&mut tracker, &|| {
        write(&root.join("sub/.git/HEAD"), "ref: refs/heads/main\n");
        write(&root.join("sub/.git/config"), "[core]\n\tfsmonitor = ./evil\n");
        write(&root.join("sub/.git/hooks/pre-commit"), "evil");
    });
    assert_eq!(undone.len(), 2, "{undone:?}");
    let config = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
    assert!(!config("sub/.git/config").contains("fsmonitor"));
    assert!(!root.join("sub/.git/hooks/pre-commit").exists());

    let undone = run(&mut tracker, &|| {
        write(&root.join("mine/.git/config"), "[core]\n\thooksPath = .husky\n[alias]\n\tx = !evil\n");
    });
    assert_eq!(undone.len(), 1, "{undone:?}");
    assert_eq!(config("mine/.git/config"), "[core]\n\thooksPath = .husky\n[alias]\n", "the user's own setting stays");

    let undone = run(&mut tracker, &|| {
        write(&root.join("build/bare/HEAD"), "ref: refs/heads/main\n");
        std::fs::create_dir_all(root.join("build/bare/objects")).unwrap_or_else(|e| panic!("{e}"));
        write(&root.join("build/bare/config"), "[diff \"x\"]\n\ttextconv = evil\n");
    });
    assert_eq!(undone.len(), 1, "{undone:?}");
    assert!(!config("build/bare/config").contains("textconv"));
    // Nothing more the next time round.
    assert!(run(&mut tracker, &|| {}).is_empty());
}

#[test]
fn nested_repositories_lose_what_git_would_run_with_the_kernels_notes() {
    let (_dir, root) = tree();
    let tracker = Tracker::new("g1", &root);
    nested_repositories_lose_what_git_would_run(tracker, &root);
}

#[test]
fn nested_repositories_lose_what_git_would_run_with_scans() {
    let (_dir, root) = tree();
    let tracker = Tracker::scanning_only("g2", &root);
    nested_repositories_lose_what_git_would_run(tracker, &root);
}
