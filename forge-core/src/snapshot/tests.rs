use super::*;

fn write(root: &Path, name: &str, data: &str) {
    let path = root.join(name);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, data).unwrap_or_else(|e| panic!("{e}"));
}

fn names(paths: &[PathBuf], root: &Path) -> Vec<String> {
    paths.iter().filter_map(|p| p.strip_prefix(root).ok()).map(|p| p.display().to_string()).collect()
}

#[test]
fn only_changed_files_are_read_again_and_changes_are_found() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().to_path_buf();
    write(&root, "keep.txt", "same");
    write(&root, "edit.txt", "old");
    write(&root, "gone.txt", "bye");
    write(&root, ".gitignore", "target/\n");
    write(&root, "target/big.o", "ignored");
    write(&root, ".git/HEAD", "ref");
    write(&root, ".env", "SECRET=1");
    let skip = |p: &Path| p.file_name().is_some_and(|n| n == ".env");
    let mut read = Vec::new();
    let mut before = scan(std::slice::from_ref(&root), &Manifest::default(), &skip, &mut |h, _| read.push(h));
    assert_eq!(read.len(), 4, "the content of what git would see is kept, not the secret's nor the build's");
    let marks = |m: &Manifest, name: &str| m.get(&root.join(name)).map(|e| e.content.text());
    assert_eq!(marks(&before, "target/big.o").as_deref(), Some("!ignored"));
    assert_eq!(marks(&before, ".env").as_deref(), Some("!denied"));
    assert!(marks(&before, ".git/HEAD").is_none());

    // As if the last scan were long ago, so the stats are trusted.
    before.taken_ns += 10 * RACY_NS;
    write(&root, "edit.txt", "new!");
    std::fs::remove_file(root.join("gone.txt")).unwrap_or_else(|e| panic!("{e}"));
    write(&root, "made.txt", "hi");
    std::fs::remove_file(root.join("target/big.o")).unwrap_or_else(|e| panic!("{e}"));
    let mut read = Vec::new();
    let after = scan(std::slice::from_ref(&root), &before, &skip, &mut |_, d| read.push(d));
    assert_eq!(read.len(), 2, "only the edited and the new file are read");
    assert_eq!(names(&changed(&before, &after), &root), ["edit.txt", "gone.txt", "made.txt", "target/big.o"]);
    assert_eq!(before.state(&root.join("target/big.o")).map(|s| s.0).as_deref(), Some("!ignored"));
}

/// Two writes of the same size in one kernel timestamp tick leave the
/// stats equal: a scan right after the first must not vouch for the
/// second (git's racily clean entries).
#[test]
fn a_same_size_rewrite_right_after_a_scan_is_seen() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().to_path_buf();
    let none = |_: &Path| false;
    for round in 0..20 {
        write(&root, "a.txt", "v1");
        let first = scan(std::slice::from_ref(&root), &Manifest::default(), &none, &mut |_, _| {});
        // Same size, same inode, most likely the same mtime.
        std::fs::OpenOptions::new()
            .write(true)
            .open(root.join("a.txt"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"v2"))
            .unwrap_or_else(|e| panic!("{e}"));
        let second = scan(std::slice::from_ref(&root), &first, &none, &mut |_, _| {});
        assert_eq!(names(&changed(&first, &second), &root), ["a.txt"], "round {round}");
        assert_eq!(second.state(&root.join("a.txt")).map(|s| s.0), Some(crate::rewind::hash(b"v2")));
    }
}

#[test]
fn a_retargeted_symlink_is_recorded_with_its_target() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().to_path_buf();
    let none = |_: &Path| false;
    std::os::unix::fs::symlink("one", root.join("link")).unwrap_or_else(|e| panic!("{e}"));
    let mut kept = Vec::new();
    let before = scan(std::slice::from_ref(&root), &Manifest::default(), &none, &mut |_, d| kept.push(d));
    assert_eq!(kept, [b"one".to_vec()], "the link's target is its content");
    std::fs::remove_file(root.join("link")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("/elsewhere", root.join("link")).unwrap_or_else(|e| panic!("{e}"));
    let after = scan(std::slice::from_ref(&root), &before, &none, &mut |_, _| {});
    assert_eq!(names(&changed(&before, &after), &root), ["link"]);
    let (hash, mode) = before.state(&root.join("link")).unwrap_or_else(|| panic!("recorded"));
    assert_eq!((hash, mode), (crate::rewind::hash(b"one"), crate::rewind::SYMLINK_MODE));
}

/// Paths under the first root are kept short; others whole. A directory's
/// files are one range (`a/` and not `a.txt`), whichever root holds them.
#[test]
fn records_under_and_beside_the_first_root_are_found_by_path() {
    let stat = Stat { size: 1, mtime_ns: 0, ctime_ns: 0, ino: 1, mode: 0o644, uid: 0, gid: 0 };
    let e = Entry { stat, content: Content::sha(b"x") };
    let mut m = Manifest::under_base(Path::new("/r"));
    for p in ["/r/a/b", "/r/a.txt", "/r/a/c/d", "/other/a/x", "/other/a.txt"] {
        m.insert(Path::new(p), e);
    }
    let show = |v: Vec<PathBuf>| v.iter().map(|p| p.display().to_string()).collect::<Vec<_>>();
    assert_eq!(show(m.under(Path::new("/r/a"))), ["/r/a/b", "/r/a/c/d"]);
    assert_eq!(show(m.under(Path::new("/other/a"))), ["/other/a/x"]);
    assert!(m.get(Path::new("/other/a.txt")).is_some() && m.get(Path::new("/r/a.txt")).is_some());
    assert_eq!(m.paths().count(), 5);
    m.remove(Path::new("/r/a/b"));
    assert_eq!(show(m.under(Path::new("/r/a"))), ["/r/a/c/d"]);
}
