//! The OpenAPI snapshot: `docs/openapi.json` is the document as
//! `broadsheet openapi` prints it, so every change of the API's contract shows as a diff of
//! that file in review. This fails, with the lines that differ and the command that
//! regenerates the file, when the generated document and the snapshot part.

use crate::support::app::binary;

/// The one command that regenerates the snapshot.
const REGENERATE: &str = "cargo run -- openapi > docs/openapi.json";
/// Lines of the changed region shown, per side.
const SHOWN: usize = 30;

/// The region where `old` and `new` differ, as `-`/`+` lines with a line number.
fn short_diff(old: &str, new: &str) -> String {
    let (old, new): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = format!("first difference at line {}:\n", head + 1);
    for (sign, lines) in [("-", &old), ("+", &new)] {
        let changed = &lines[head..lines.len() - tail];
        for line in changed.iter().take(SHOWN) {
            out.push_str(&format!("{sign} {line}\n"));
        }
        if changed.len() > SHOWN {
            out.push_str(&format!(
                "{sign} ... {} more lines\n",
                changed.len() - SHOWN
            ));
        }
    }
    out
}

#[test]
fn api_snapshot_docs_openapi_json_is_the_generated_document() {
    let output = std::process::Command::new(binary())
        .arg("openapi")
        .output()
        .expect("broadsheet openapi runs");
    assert!(output.status.success(), "{output:?}");
    let generated = String::from_utf8(output.stdout).expect("UTF-8");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/openapi.json is not the document the code generates (- committed, + generated).\n{}\
         If the change is intended, regenerate the snapshot and commit it:\n    {REGENERATE}\n",
        short_diff(&committed, &generated)
    );
}
