//! Every SQL statement in the source prepares against a freshly migrated database, so a
//! renamed column or a typo fails here rather than in front of a user; and no SQL is built
//! with `format!`.

use std::path::Path;

use crate::support::{run_cli, rust_files};

/// The string literals of a Rust file (plain `"..."`, with escapes undone), with line numbers.
fn string_literals(source: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let bytes: Vec<char> = source.chars().collect();
    let (mut i, mut line) = (0, 1);
    while i < bytes.len() {
        match bytes[i] {
            '\n' => line += 1,
            '/' if bytes.get(i + 1) == Some(&'/') => {
                while i < bytes.len() && bytes[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '\'' if bytes.get(i + 2) == Some(&'\'')
                || (bytes.get(i + 1) == Some(&'\\') && bytes.get(i + 3) == Some(&'\'')) =>
            {
                // A char literal such as '"' or '\"'.
                i += if bytes[i + 1] == '\\' { 4 } else { 3 };
                continue;
            }
            '"' => {
                let start_line = line;
                let mut text = String::new();
                i += 1;
                while i < bytes.len() && bytes[i] != '"' {
                    if bytes[i] == '\\' {
                        i += 1;
                        match bytes.get(i) {
                            Some('n') => text.push('\n'),
                            Some('\n') => {
                                // A line continuation: skip the newline and leading spaces.
                                line += 1;
                                while bytes.get(i + 1).is_some_and(|c| c.is_whitespace()) {
                                    i += 1;
                                    if bytes[i] == '\n' {
                                        line += 1;
                                    }
                                }
                            }
                            Some(c) => text.push(*c),
                            None => {}
                        }
                    } else {
                        if bytes[i] == '\n' {
                            line += 1;
                        }
                        text.push(bytes[i]);
                    }
                    i += 1;
                }
                found.push((start_line, text));
            }
            _ => {}
        }
        i += 1;
    }
    found
}

fn looks_like_sql(text: &str) -> bool {
    let upper = text.trim_start().to_ascii_uppercase();
    [
        "SELECT ",
        "INSERT ",
        "UPDATE ",
        "DELETE FROM",
        "WITH ",
        "REPLACE INTO",
    ]
    .iter()
    .any(|k| upper.starts_with(k))
        && (upper.contains(" FROM ")
            || upper.contains(" INTO ")
            || upper.contains(" SET ")
            || upper.starts_with("SELECT "))
}

#[test]
fn every_sql_statement_prepares_against_the_migrated_schema() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli(dir.path(), &["migrate"]);
    assert_eq!(code, 0, "{out}{err}");
    let conn = rusqlite::Connection::open(dir.path().join("broadsheet.db")).unwrap();

    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let (mut checked, mut failures) = (0, Vec::new());
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        // Unit-test fixtures (the `#[cfg(test)]` module closing each file) are not shipped SQL.
        let shipped = source.split("#[cfg(test)]\nmod tests").next().unwrap();
        for (line, text) in string_literals(shipped) {
            if !looks_like_sql(&text) {
                continue;
            }
            let place = format!(
                "{}:{line}",
                file.strip_prefix(env!("CARGO_MANIFEST_DIR"))
                    .unwrap()
                    .display()
            );
            if text.contains("{}") || text.contains("{0}") {
                failures.push(format!("{place}: SQL built with format!: {text}"));
                continue;
            }
            // Fragments completed by a macro (`select_x!("WHERE ...")`) end without a table.
            if let Err(e) = conn.prepare(&text) {
                let message = e.to_string();
                if message.contains("incomplete input") {
                    continue;
                }
                failures.push(format!("{place}: {message}\n    {text}"));
            } else {
                checked += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "SQL that does not prepare:\n{}",
        failures.join("\n")
    );
    assert!(
        checked >= 50,
        "only {checked} statements found: is the scan broken?"
    );
}
