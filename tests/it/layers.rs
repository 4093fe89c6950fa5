//! The structure of the source: which top-level modules (a folder under `src/`, or a file
//! there) may name which, read from the `crate::…` paths in `src/**.rs`. Layers only point
//! down: the doors (`api`, `web`, `site`) are named only by the wiring above them (`app`,
//! `cli`); the domain keeps to the store and the clock; the store to the clock; `http` serves
//! every door and names none; and no two modules name each other, however indirectly.
//! Unit tests (`#[cfg(test)] mod tests` at the end of a file) are left out: they may set up
//! what they need from anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::rust_files;

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
            "mail", "webhooks", "payments",
        ],
    ),
    // The doors: parse, call the domain, render. The dashboard previews an issue's e-mail
    // with the mail renderer; the API and the dashboard check webhook addresses with the
    // SSRF guard.
    (
        "api",
        &["http", "state", "domain", "store", "clock", "webhooks"],
    ),
    // The dashboard and the sites call Stripe for an owner (plans, Checkout, the billing
    // portal).
    (
        "web",
        &[
            "http", "state", "domain", "store", "clock", "mail", "webhooks", "payments",
        ],
    ),
    (
        "site",
        &["http", "state", "domain", "store", "clock", "payments"],
    ),
    // What the doors share: HTTP pieces, and the state every handler takes.
    ("http", &["state", "domain", "store", "clock", "net"]),
    ("state", &["domain", "store", "config", "clock"]),
    // The machines: do the work the domain recorded.
    (
        "jobs",
        &["domain", "store", "clock", "mail", "webhooks", "feeds"],
    ),
    // Fetching a newsletter's feed, through the webhooks' SSRF guard.
    ("feeds", &["domain", "clock", "webhooks"]),
    ("mail", &["domain", "store", "clock", "net"]),
    ("webhooks", &["domain", "store", "clock"]),
    // Stripe's API: a few form-encoded calls, knowing nothing of the rest.
    ("payments", &[]),
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
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges().into_keys() {
        if !known(&from, &to) {
            graph.entry(from).or_default().insert(to);
        }
    }
    if let Some(cycle) = first_cycle(&graph) {
        panic!("an import cycle: {}", cycle.join(" -> "));
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

/// The parts of the domain (a folder under `src/domain/`) and which others each may name,
/// besides itself and the domain's root (`domain/mod.rs`: the error types every part
/// returns). The order is the reading order of docs/architecture.md: each part names only
/// parts above it in this list. A part missing here fails the test.
const DOMAIN_PARTS: &[(&str, &[&str])] = &[
    ("values", &[]),
    ("root", &["values"]),
    ("content", &[]),
    ("accounts", &["values"]),
    ("events", &["values"]),
    ("newsletters", &["values", "content"]),
    (
        "subscribers",
        &["values", "content", "accounts", "events", "newsletters"],
    ),
    (
        "sequences",
        &["values", "content", "events", "newsletters", "subscribers"],
    ),
    (
        "issues",
        &["values", "content", "events", "newsletters", "subscribers"],
    ),
    (
        "reports",
        &["values", "newsletters", "subscribers", "issues"],
    ),
    (
        "delivery",
        &[
            "values",
            "content",
            "accounts",
            "events",
            "newsletters",
            "subscribers",
            "sequences",
            "issues",
            "reports",
        ],
    ),
];

/// A domain module's path from a file under `src/domain/`: `issues/mod.rs` is `issues`,
/// `issues/test_send.rs` is `issues::test_send`, `mod.rs` is the root (empty).
fn domain_module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The part a domain module belongs to: its first segment, or `root`.
fn part_of(module: &str) -> &str {
    match module.split("::").next() {
        Some("") | None => "root",
        Some(first) => first,
    }
}

/// Every path a use tree names, e.g. `a::{self, b::c, d::{e, f}}` gives `a`, `a::b::c`,
/// `a::d::e`, `a::d::f`. `tree` is the text right after `crate::domain::`; it is read up to
/// the end of the tree.
fn paths_of_use_tree(tree: &str) -> Vec<String> {
    fn read(text: &str, prefix: &str, out: &mut Vec<String>) -> usize {
        let mut at = 0;
        let mut path = prefix.to_string();
        loop {
            let ident = leading_ident(&text[at..]);
            let skipped = text[at..].len() - text[at..].trim_start().len();
            at += skipped + ident.len();
            if ident != "self" && !ident.is_empty() {
                if !path.is_empty() {
                    path.push_str("::");
                }
                path.push_str(ident);
            }
            if text[at..].starts_with("::{") {
                at += 3;
                loop {
                    at += read(&text[at..], &path, out);
                    let rest = text[at..].trim_start();
                    at = text.len() - rest.len();
                    match rest.chars().next() {
                        Some(',') => at += 1,
                        Some('}') => return at + 1,
                        _ => return at,
                    }
                    if text[at..].trim_start().starts_with('}') {
                        let rest = text[at..].trim_start();
                        return text.len() - rest.len() + 1;
                    }
                }
            } else if text[at..].starts_with("::") {
                at += 2;
            } else {
                out.push(path);
                return at;
            }
        }
    }
    let mut out = Vec::new();
    match tree.strip_prefix('{') {
        Some(group) => {
            let text = format!("x::{{{group}");
            read(&text, "", &mut out);
            out.iter_mut()
                .for_each(|p| *p = p.trim_start_matches('x').trim_start_matches("::").into());
        }
        None => {
            read(tree, "", &mut out);
        }
    }
    out
}

/// Every edge between two modules of the domain, with the file that makes it, read from
/// `crate::domain::…` paths (the domain's code names its own modules only that way; `super::`
/// appears only in unit tests, which are left out).
fn domain_edges() -> BTreeSet<(String, String)> {
    let root = source_root().join("domain");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| domain_module_of(f.strip_prefix(&root).unwrap()))
        .collect();
    let mut edges = BTreeSet::new();
    for file in &files {
        let from = domain_module_of(file.strip_prefix(&root).unwrap());
        if from == "testing" {
            continue; // test fixtures, compiled only for unit tests
        }
        let code = code_of(&std::fs::read_to_string(file).expect("a source file is UTF-8"));
        for (at, _) in code.match_indices("crate::domain::") {
            for path in paths_of_use_tree(&code[at + "crate::domain::".len()..]) {
                // The longest module the path starts with; an item of the root (`DomainError`)
                // names the root.
                let segments: Vec<&str> = path.split("::").collect();
                let to = (0..=segments.len())
                    .rev()
                    .map(|n| segments[..n].join("::"))
                    .find(|m| modules.contains(m))
                    .unwrap_or_default();
                if to != from {
                    edges.insert((from.clone(), to));
                }
            }
        }
    }
    edges
}

/// The first cycle of `graph`, as the path that closes it.
fn first_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if !done.insert(node.to_string()) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn domain_parts_only_point_up_the_reading_order() {
    let root = source_root().join("domain");
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(&root).expect("src/domain/ is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() && !DOMAIN_PARTS.iter().any(|(part, _)| *part == name) {
            wrong.push(format!("domain/{name}/ is not in DOMAIN_PARTS"));
        }
    }
    for (from, to) in domain_edges() {
        let (from_part, to_part) = (part_of(&from), part_of(&to));
        if from_part == to_part || to_part == "root" && from_part != "root" {
            continue;
        }
        let allowed = DOMAIN_PARTS
            .iter()
            .find(|(part, _)| *part == from_part)
            .is_some_and(|(_, targets)| targets.contains(&to_part));
        if !allowed {
            wrong.push(format!("domain::{from} names domain::{to}"));
        }
    }
    // Each part names only parts listed before it, so the table itself has no circle.
    for (index, (part, targets)) in DOMAIN_PARTS.iter().enumerate() {
        for target in *targets {
            let position = DOMAIN_PARTS.iter().position(|(p, _)| p == target);
            if position.is_none_or(|p| p >= index) {
                wrong.push(format!(
                    "DOMAIN_PARTS: {part} may name {target}, listed after it"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_domain_module_names_another_that_names_it_back() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in domain_edges() {
        graph.entry(from).or_default().insert(to);
    }
    assert!(
        graph
            .get("delivery::sending")
            .is_some_and(|names| names.contains("issues")),
        "the domain's imports were read: {graph:?}"
    );
    if let Some(cycle) = first_cycle(&graph) {
        panic!("an import cycle in the domain: {}", cycle.join(" -> "));
    }
}

#[test]
fn use_trees_are_read_as_the_compiler_reads_them() {
    assert_eq!(paths_of_use_tree("issues::get(conn)"), ["issues::get"]);
    assert_eq!(
        paths_of_use_tree(
            "{DomainError, values::{email::EmailAddress, urls}, issues::{self, Issue}};"
        ),
        [
            "DomainError",
            "values::email::EmailAddress",
            "values::urls",
            "issues",
            "issues::Issue"
        ]
    );
    assert_eq!(
        paths_of_use_tree("subscribers::{self, NewSubscriber};"),
        ["subscribers", "subscribers::NewSubscriber"]
    );
}
