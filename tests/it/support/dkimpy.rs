//! An independent DKIM verifier for the tests: Python's dkimpy in a virtualenv under
//! `target/py` (made here when absent; `.ci/run` makes it beforehand). The build script
//! (`build.rs`) marks the DKIM tests `#[ignore]` while `target/py` has no dkimpy
//! (`cfg(has_dkimpy)`). Run anyway (`--include-ignored`), they make the virtualenv here; without
//! python3, venv or pip they print a loud notice and pass, unless `BROADSHEET_REQUIRE_DKIMPY=1`
//! (CI, which also makes the build script run them), where they fail.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::run_tool;

/// Verifies with `dkim.verify`, answering the one TXT record given (a DNS name and its value).
const VERIFY: &str = r#"
import sys, dkim
message = sys.stdin.buffer.read()
name, value = sys.argv[1].encode(), sys.argv[2].encode()
def dnsfunc(queried, timeout=5):
    return value if queried.rstrip(b".") == name else None
sys.exit(0 if dkim.verify(message, dnsfunc=dnsfunc) else 1)
"#;

pub struct Dkimpy {
    python: PathBuf,
}

fn venv() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/py")
}

fn has_dkimpy(python: &PathBuf) -> bool {
    Command::new(python)
        .args(["-c", "import dkim"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes the virtualenv with dkimpy once per test process; the reason when it cannot.
fn install() -> Result<PathBuf, String> {
    let python = venv().join("bin/python");
    if has_dkimpy(&python) {
        return Ok(python);
    }
    let dir = venv();
    run_tool(
        "python3",
        &["-m", "venv", dir.to_str().expect("utf-8 path")],
    )?;
    let pip = dir.join("bin/pip");
    run_tool(
        pip.to_str().expect("utf-8 path"),
        &["install", "-q", "dkimpy"],
    )?;
    if has_dkimpy(&python) {
        Ok(python)
    } else {
        Err("dkimpy installed but `import dkim` fails".into())
    }
}

impl Dkimpy {
    /// dkimpy, or `None` after a loud notice (a panic under CI).
    pub fn find(test: &str) -> Option<Dkimpy> {
        static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        match INSTALLED.get_or_init(install) {
            Ok(python) => Some(Dkimpy {
                python: python.clone(),
            }),
            Err(why) => {
                let message = format!(
                    "\n\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                     !! DKIM TESTS SKIPPED ({test}): no dkimpy to verify with.\n\
                     !! {why}\n\
                     !! Needs python3 with venv and pip: python3 -m venv target/py && \
                     target/py/bin/pip install dkimpy\n\
                     !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
                );
                if std::env::var("BROADSHEET_REQUIRE_DKIMPY").is_ok_and(|v| v == "1") {
                    panic!("{message}");
                }
                eprintln!("{message}");
                None
            }
        }
    }

    /// Whether `message` carries a DKIM signature that verifies against `record`, a line
    /// `<name> TXT "<value>"` as `broadsheet dkim` prints it.
    pub fn verifies(&self, message: &[u8], record: &str) -> bool {
        let (name, rest) = record.split_once(" TXT ").expect("<name> TXT \"<value>\"");
        let value = rest.trim().trim_matches('"');
        let mut child = Command::new(&self.python)
            .args(["-c", VERIFY, name, value])
            .stdin(Stdio::piped())
            .spawn()
            .expect("running dkimpy");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(message)
            .expect("writing the message to dkimpy");
        child.wait().expect("dkimpy exits").success()
    }
}
