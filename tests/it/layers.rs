//! The structure of the source: which top-level modules (a folder under `src/`, or a file
//! there) may name which, read from the `crate::…` paths in `src/**.rs`. Layers only point
//! down: the doors (`api`, `web`, `site`) are named only by the wiring above them (`app`,
//! `cli`); the domain keeps to the store and the clock; the store to the clock; `http` serves
//! every door and names none; and no two modules name each other, however indirectly.
//! Unit tests (`#[cfg(test)] mod tests` at the end of a file) are left out: they may set up
//! what they need from anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What each top-level module may name, besides itself. A module missing from this table
/// fails the test, so a new one has to be placed in the layers.
const ALLOWED: &[(&str, &[&str])] = &[
    // The wiring: commands and the server that mounts every door and starts the machines.
    (
        "cli",
        &[
            "app", "api", "config", "domain", "store", "clock", "jobs", "mail",
        ],
    ),
    (
        "app",
        &[
            "api", "web", "site", "http", "state", "config", "domain", "store", "clock", "jobs",
            "mail", "webhooks",
        ],
    ),
    // The doors: parse, call the domain, render. The dashboard previews an issue's e-mail
    // with the mail renderer; the API and the dashboard check webhook addresses with the
    // SSRF guard.
    (
        "api",
        &["http", "state", "domain", "store", "clock", "webhooks"],
    ),
    (
        "web",
        &[
            "http", "state", "domain", "store", "clock", "mail", "webhooks",
        ],
    ),
    ("site", &["http", "state", "domain", "store", "clock"]),
    // What the doors share: HTTP pieces, and the state every handler takes.
    ("http", &["state", "domain", "store", "clock", "net"]),
    ("state", &["domain", "store", "config", "clock"]),
    // The machines: do the work the domain recorded.
    ("jobs", &["domain", "store", "clock", "mail", "webhooks"]),
    ("mail", &["domain", "store", "clock", "net"]),
    ("webhooks", &["domain", "store", "clock"]),
    // The rules, and below them the database and the clock.
    ("domain", &["store", "clock"]),
    ("store", &["clock"]),
    ("config", &["domain", "clock"]),
    ("clock", &[]),
    // What the two listeners (HTTP and the bounce listener) share: caps on connections.
    ("net", &[]),
];

/// Edges still in the code because another part of a change has not landed yet. Each must
/// still exist (the test fails once one is gone, so whoever removes it empties this list),
/// and the cycle check leaves them out. Empty since the domain records work through
/// `store::jobs` instead of importing `jobs/` and `mail/`.
const KNOWN_UNTIL_MERGE: &[(&str, &str)] = &[];

fn source_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: its folder under `src/`, or its own name there.
/// `None` for the crate root (`lib.rs`, `main.rs`), which declares the modules.
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The code of a file without comments and without its unit tests.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(start) => &text[..start],
        None => text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(|line| match line.find(" // ") {
            Some(comment) => &line[..comment],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn leading_ident(text: &str) -> &str {
    let text = text.trim_start();
    let end = text.find(|c| !is_ident_char(c)).unwrap_or(text.len());
    &text[..end]
}

/// The top-level modules `code` names by `crate::name` or `use crate::{a, b::c}`.
fn names_in(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident_char(c) || c == ':') {
            continue; // `other_crate::` or `$crate::`-like paths
        }
        let rest = &code[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let (mut depth, mut item_start) = (0usize, 0usize);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            names.insert(leading_ident(&group[item_start..i]).to_string());
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            names.insert(leading_ident(&group[item_start..i]).to_string());
                            item_start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            None => {
                names.insert(leading_ident(rest).to_string());
            }
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// Every edge between different top-level modules, with the files that make it.
fn edges() -> BTreeMap<(String, String), BTreeSet<String>> {
    let root = source_root();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_of(f.strip_prefix(&root).unwrap()))
        .collect();
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap();
        let Some(from) = module_of(relative) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a source file is UTF-8");
        for to in names_in(&code_of(&text)) {
            if to != from && modules.contains(&to) {
                edges
                    .entry((from.clone(), to))
                    .or_default()
                    .insert(format!("src/{}", relative.display()));
            }
        }
    }
    edges
}

fn allowed(from: &str) -> Option<&'static [&'static str]> {
    ALLOWED
        .iter()
        .find(|(module, _)| *module == from)
        .map(|(_, to)| *to)
}

fn known(from: &str, to: &str) -> bool {
    KNOWN_UNTIL_MERGE.contains(&(from, to))
}

#[test]
fn layers_only_point_down() {
    let mut wrong = Vec::new();
    for ((from, to), files) in edges() {
        let fits = match allowed(&from) {
            Some(targets) => targets.contains(&to.as_str()),
            None => {
                wrong.push(format!("{from} is not in the layer table (ALLOWED)"));
                continue;
            }
        };
        if !fits && !known(&from, &to) {
            wrong.push(format!("{from} names {to} (in {files:?})"));
        }
    }
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_doors_are_named_only_by_the_wiring() {
    let doors = ["api", "web", "site"];
    let wrong: Vec<String> = edges()
        .into_iter()
        .filter(|((from, to), _)| {
            doors.contains(&to.as_str()) && !matches!(from.as_str(), "app" | "cli")
        })
        .map(|((from, to), files)| format!("{from} names the door {to} (in {files:?})"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn known_edges_until_the_merge_still_exist() {
    let edges = edges();
    let gone: Vec<String> = KNOWN_UNTIL_MERGE
        .iter()
        .filter(|(from, to)| !edges.contains_key(&(from.to_string(), to.to_string())))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(
        gone.is_empty(),
        "these edges are gone: take them out of KNOWN_UNTIL_MERGE in tests/it/layers.rs: {}",
        gone.join(", ")
    );
}

#[test]
fn no_module_names_another_that_names_it_back() {
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (from, to) in edges().into_keys() {
        if !known(&from, &to) {
            graph.entry(from).or_default().push(to);
        }
    }
    // Depth-first search; a module met again while still on the path closes a cycle.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, &graph, &mut Vec::new(), &mut done) {
            panic!("an import cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn paths_are_read_as_the_compiler_reads_them() {
    let code = code_of(
        "use crate::{domain::issues, store::{self, Db}};\n\
         // crate::mail in a comment\n\
         let x = crate::clock::now(); // crate::jobs too\n\
         use other_crate::web;\n\
         #[cfg(test)]\nmod tests { use crate::site; }",
    );
    let names: Vec<String> = names_in(&code).into_iter().collect();
    assert_eq!(names, ["clock", "domain", "store"]);
}
