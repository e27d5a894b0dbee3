//! The code base's own rules, checked on every run: no production source
//! file grows past 700 lines (split it by area instead), so each stays
//! readable in one sitting; and no two modules of the daemon import each
//! other, directly or around a loop (a module and its parent aside).

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 700;

/// Production Rust sources of the workspace: test code (`tests/`
/// directories, `tests.rs` modules, the test crate) and build output left
/// out.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["target", "tests", ".git", "fuzz"].contains(&name.as_str()) && !name.starts_with('.') {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

#[test]
fn no_production_file_is_over_700_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default();
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 50, "the workspace's sources were not found under {}", root.display());
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.strip_prefix(&root).unwrap_or(f).display()))
        })
        .collect();
    long.sort();
    assert!(long.is_empty(), "split these by area (at most {MAX_LINES} lines each): {}", long.join(", "));
}

/// A `use` tree (`a::{b, c::{D, E as F}}`) as its full paths, each with
/// the name it binds (an alias's, or its last segment).
fn use_paths(tree: &str) -> Vec<(Vec<String>, String)> {
    fn walk(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, String)>) {
        let tree = tree.trim();
        if let Some(open) = tree.find('{') {
            let mut path = prefix.to_vec();
            path.extend(tree[..open].split("::").map(str::trim).filter(|p| !p.is_empty()).map(String::from));
            let inner = tree[open + 1..].trim_end().trim_end_matches('}');
            // Split on the commas of this level only.
            let (mut depth, mut start) = (0, 0);
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        walk(&path, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            walk(&path, &inner[start..], out);
            return;
        }
        let (path, alias) = match tree.split_once(" as ") {
            Some((p, a)) => (p, Some(a.trim())),
            None => (tree, None),
        };
        let mut full = prefix.to_vec();
        full.extend(path.split("::").map(str::trim).filter(|p| !p.is_empty()).map(String::from));
        let Some(last) = full.last().cloned() else { return };
        // `a::{self}` names `a` itself.
        if last == "self" {
            full.pop();
        }
        let name = alias.map(str::to_string).unwrap_or_else(|| full.last().cloned().unwrap_or_default());
        out.push((full, name));
    }
    let mut out = Vec::new();
    walk(&[], tree, &mut out);
    out
}

/// A crate's modules (one per file) and the modules each one names, test
/// code left out: through `crate::` and `super::` paths anywhere, and
/// through `use` trees (a child module's name too), each name followed
/// through the re-exports (`pub use`) of the module it is taken from to
/// the module that defines it.
fn module_graph(src: &Path) -> std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let module_of = |f: &Path| -> Vec<String> {
        let rel = f.strip_prefix(src).unwrap_or(f).with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            parts.pop();
        }
        parts
    };
    let modules: std::collections::BTreeSet<Vec<String>> = files.iter().map(|f| module_of(f)).collect();
    // A path as written in module `me`, made absolute (`None`: another
    // crate's).
    let absolute = |me: &[String], path: &[String]| -> Option<Vec<String>> {
        let mut target: Vec<String> = match path.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("super") | Some("self") => me.to_vec(),
            Some(first) if modules.contains(&[me, &[first.to_string()]].concat()) => me.to_vec(),
            _ => return None,
        };
        let mut rest = match path.first().map(String::as_str) {
            Some("crate") | Some("self") => &path[1..],
            _ => path,
        };
        while rest.first().map(String::as_str) == Some("super") {
            target.pop();
            rest = &rest[1..];
        }
        target.extend(rest.iter().cloned());
        Some(target)
    };
    // Each file's text (tests left out) and `use` trees (with whether they
    // are re-exports).
    let mut parsed = Vec::new();
    let mut reexports: std::collections::BTreeMap<(Vec<String>, String), Vec<String>> = Default::default();
    for f in &files {
        let me = module_of(f);
        let text = std::fs::read_to_string(f).unwrap_or_default();
        // Unit tests sit at the end of a file, after `#[cfg(test)]`.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default().to_string();
        let code: String =
            text.lines().filter(|l| !l.trim_start().starts_with("//")).map(|l| format!("{l}\n")).collect();
        let mut uses = Vec::new();
        for stmt in code.split(';') {
            let stmt = stmt.trim();
            let Some(at) = stmt.find("use ").filter(|&at| {
                let before = stmt[..at].trim();
                before.is_empty() || before.ends_with(')') || before == "pub" || before.ends_with('}')
            }) else {
                continue;
            };
            let public = stmt[..at].trim().starts_with("pub");
            for (path, name) in use_paths(&stmt[at + 4..]) {
                let Some(abs) = absolute(&me, &path) else { continue };
                if public {
                    reexports.insert((me.clone(), name), abs.clone());
                }
                uses.push(abs);
            }
        }
        parsed.push((me, code, uses));
    }
    // The module that holds what `path` names, following re-exports.
    let resolve = |mut path: Vec<String>| -> Vec<String> {
        for _ in 0..8 {
            let mut module = path.clone();
            while !module.is_empty() && !modules.contains(&module) {
                module.pop();
            }
            match path.get(module.len()).and_then(|name| reexports.get(&(module.clone(), name.clone()))) {
                Some(to) if *to != path => {
                    let mut next = to.clone();
                    next.extend(path[module.len() + 1..].iter().cloned());
                    path = next;
                }
                _ => return module,
            }
        }
        path
    };
    let mut graph = std::collections::BTreeMap::new();
    for (me, code, uses) in parsed {
        let mut paths = uses;
        for line in code.lines().map(str::trim).filter(|l| !l.trim_start().starts_with("use ")) {
            for (at, _) in line.match_indices("crate::").chain(line.match_indices("super::")) {
                // Inside a longer path (`foo::super::`) it was counted there.
                if at > 0 && line[..at].ends_with("::") {
                    continue;
                }
                let path: Vec<String> = line[at..]
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .next()
                    .unwrap_or_default()
                    .split("::")
                    .filter(|p| !p.is_empty())
                    .map(String::from)
                    .collect();
                paths.extend(absolute(&me, &path));
            }
        }
        let mut targets = std::collections::BTreeSet::new();
        for path in paths {
            let target = resolve(path);
            // A module and its ancestors: the child uses what its parent
            // holds; the parent declares and re-exports it.
            if !me.starts_with(&target) && !target.starts_with(&me) {
                targets.insert(target);
            }
        }
        graph.insert(me, targets);
    }
    graph
}

/// The modules that reach each other around a loop, each loop once.
fn loops(graph: &std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    let reach = |from: &Vec<String>| {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo: Vec<&Vec<String>> = graph.get(from).into_iter().flatten().collect();
        while let Some(m) = todo.pop() {
            if seen.insert(m.clone()) {
                todo.extend(graph.get(m).into_iter().flatten());
            }
        }
        seen
    };
    let reached: std::collections::BTreeMap<&Vec<String>, _> = graph.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (m, r) in &reached {
        if !r.contains(*m) {
            continue;
        }
        let mut knot: Vec<String> = reached
            .iter()
            .filter(|(o, or)| r.contains(**o) && or.contains(*m))
            .map(|(o, _)| if o.is_empty() { "crate".into() } else { o.join("::") })
            .collect();
        knot.sort();
        if !out.contains(&knot) {
            out.push(knot);
        }
    }
    out
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default();
    for krate in
        ["forge-core", "forged", "forge-proto", "forge-client", "forge-tools", "forge-mcp", "forge-tui", "forge-cli"]
    {
        let graph = module_graph(&root.join(krate).join("src"));
        assert!(graph.len() > 5, "{krate}'s modules were not found");
        let knots = loops(&graph);
        assert!(
            knots.is_empty(),
            "{krate}: these modules import each other (directly or around a loop); move what they share into one of them or a module below both: {knots:?}"
        );
    }
}

#[test]
fn a_loop_of_imports_is_found() {
    let m = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
    let graph =
        [(m("a"), [m("b")].into()), (m("b"), [m("c")].into()), (m("c"), [m("a")].into()), (m("d"), [m("a")].into())]
            .into_iter()
            .collect();
    assert_eq!(loops(&graph), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
}

/// Which modules each module uses.
type Graph = std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<Vec<String>>>;

/// Under each module, its children taken each with everything below it:
/// which child uses which sibling.
fn sibling_graphs(graph: &Graph) -> std::collections::BTreeMap<Vec<String>, Graph> {
    let mut out: std::collections::BTreeMap<Vec<String>, Graph> = Default::default();
    for (me, uses) in graph {
        for target in uses {
            // The deepest common parent: the two children of it they lie in.
            let common = me.iter().zip(target).take_while(|(a, b)| a == b).count();
            if common >= me.len() || common >= target.len() {
                continue;
            }
            let parent = me[..common].to_vec();
            let from = me[..=common].to_vec();
            let to = target[..=common].to_vec();
            out.entry(parent).or_default().entry(from).or_default().insert(to);
        }
    }
    out
}

#[test]
fn no_two_sibling_modules_import_each_other_with_what_lies_below_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default();
    let mut all = Vec::new();
    for krate in
        ["forge-core", "forged", "forge-proto", "forge-client", "forge-tools", "forge-mcp", "forge-tui", "forge-cli"]
    {
        let graph = module_graph(&root.join(krate).join("src"));
        for (parent, siblings) in sibling_graphs(&graph) {
            for knot in loops(&siblings) {
                all.push(format!("{krate} {}: {knot:?}", parent.join("::")));
            }
        }
    }
    assert!(all.is_empty(), "these sibling modules import each other: {all:#?}");
}

#[test]
fn use_trees_are_read_as_their_full_paths() {
    let paths: Vec<String> = use_paths("super::{a::B, c::{self, D as E}, F}")
        .into_iter()
        .map(|(p, name)| format!("{}={name}", p.join("::")))
        .collect();
    assert_eq!(paths, ["super::a::B=B", "super::c=c", "super::c::D=E", "super::F=F"]);
}

#[test]
fn siblings_that_import_each_other_through_their_children_are_found() {
    let m = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
    // a::x uses b; b::y uses a (its parent, which declares a::x): no loop
    // between files, but a and b, each with what is below it, need each other.
    let graph: Graph = [(m("a::x"), [m("b")].into()), (m("b::y"), [m("a")].into()), (m("a"), Default::default())]
        .into_iter()
        .collect();
    assert!(loops(&graph).is_empty());
    let siblings = sibling_graphs(&graph);
    assert_eq!(loops(&siblings[&Vec::new()]), vec![vec!["a".to_string(), "b".into()]]);
}
