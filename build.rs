//! Looks for the tools some integration tests need and tells the compiler which are here
//! (`cfg(has_chromium)`, `has_axe`, `has_dkimpy`, `has_localstripe`, `has_postfix`, `has_mount`). A test whose
//! tool is missing carries `#[cfg_attr(not(has_…), ignore = "needs …")]`, so `cargo test`
//! counts it as ignored in its summary line instead of passing it unseen. Under a
//! `BROADSHEET_REQUIRE_*` variable (CI sets them all) the cfg is set whatever is found: the test
//! runs, and its own check fails it loudly when the tool is missing (docs/testing.md).
//!
//! Cargo runs this again when a watched path changes. Only paths that exist are watched: a
//! missing one makes cargo run the script, and so rebuild the crate, on every build. A tool
//! that is missing is therefore noticed through the directory it would be installed into
//! (`/usr/bin`, `/usr/sbin`, `target/py/bin`, `target/npm/package.json`) when that exists.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What one group of tests needs, and whether this machine has it.
struct Need {
    /// The cfg set when it is here.
    cfg: &'static str,
    /// The variable under which CI requires it (`=1`).
    required_by: &'static str,
    here: bool,
    /// Existing paths whose change may mean the tool came or went.
    watch: Vec<PathBuf>,
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    // Root or not (Postfix, mount) goes with the user: `sudo cargo test` is looked at again.
    println!("cargo::rerun-if-env-changed=USER");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    for need in [
        chromium(),
        axe_core(&manifest),
        dkimpy(&manifest),
        localstripe(&manifest),
        postfix(),
        mount(),
    ] {
        println!("cargo::rustc-check-cfg=cfg({})", need.cfg);
        println!("cargo::rerun-if-env-changed={}", need.required_by);
        for path in &need.watch {
            println!("cargo::rerun-if-changed={}", path.display());
        }
        if need.here || std::env::var(need.required_by).is_ok_and(|v| v == "1") {
            println!("cargo::rustc-cfg={}", need.cfg);
        }
    }
}

/// `file` when it exists, else `dir` when that does: what to watch for a tool at `file`.
fn watched(file: &Path, dir: &Path) -> Vec<PathBuf> {
    [file, dir]
        .into_iter()
        .find(|p| p.exists())
        .map(Path::to_path_buf)
        .into_iter()
        .collect()
}

/// The first of `names` in `/usr/bin` (where Debian installs them) or on the `PATH`, as the
/// tests' own `support/browser.rs` looks.
fn program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::iter::once(PathBuf::from("/usr/bin"))
        .chain(std::env::split_paths(&path))
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|p| p.is_file())
}

/// Debian's `chromium` and `chromium-driver`.
fn chromium() -> Need {
    let found = [
        program(&["chromium", "chromium-browser"]),
        program(&["chromedriver"]),
    ];
    let mut watch: Vec<PathBuf> = found.iter().flatten().cloned().collect();
    if found.iter().any(Option::is_none) {
        watch.push(PathBuf::from("/usr/bin"));
    }
    Need {
        cfg: "has_chromium",
        required_by: "BROADSHEET_REQUIRE_BROWSER",
        here: found.iter().all(Option::is_some),
        watch,
    }
}

/// npm's `axe-core` in `target/npm` (or the file `BROADSHEET_AXE_JS` names), as
/// `support/axe.rs` reads it. CI requires it with the browser.
fn axe_core(manifest: &Path) -> Need {
    println!("cargo::rerun-if-env-changed=BROADSHEET_AXE_JS");
    let npm = manifest.join("target/npm");
    let script = std::env::var_os("BROADSHEET_AXE_JS")
        .map(PathBuf::from)
        .unwrap_or_else(|| npm.join("node_modules/axe-core/axe.min.js"));
    Need {
        cfg: "has_axe",
        required_by: "BROADSHEET_REQUIRE_BROWSER",
        here: script.is_file(),
        // `npm install --prefix target/npm axe-core@4` rewrites its package.json.
        watch: watched(&script, &npm.join("package.json")),
    }
}

/// Python's dkimpy in the virtualenv `target/py`, as `support/dkimpy.rs` runs it.
fn dkimpy(manifest: &Path) -> Need {
    let venv = manifest.join("target/py");
    let here = Command::new(venv.join("bin/python"))
        .args(["-c", "import dkim"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    Need {
        cfg: "has_dkimpy",
        required_by: "BROADSHEET_REQUIRE_DKIMPY",
        here,
        // `pip install` adds dkimpy's commands to bin/; the packages' own directories are not
        // watched, since running Python writes its byte-code caches there.
        watch: watched(&venv.join("bin"), &venv),
    }
}

/// localstripe (PyPI) in the same virtualenv, the fake Stripe of `support/stripe.rs`.
fn localstripe(manifest: &Path) -> Need {
    let venv = manifest.join("target/py");
    let bin = venv.join("bin");
    Need {
        cfg: "has_localstripe",
        required_by: "BROADSHEET_REQUIRE_STRIPE",
        here: bin.join("localstripe").is_file(),
        // `pip install localstripe` adds the command to bin/.
        watch: watched(&bin, &venv),
    }
}

/// Debian's `postfix`, and root to run its master.
fn postfix() -> Need {
    let postfix = Path::new("/usr/sbin/postfix");
    Need {
        cfg: "has_postfix",
        required_by: "BROADSHEET_REQUIRE_POSTFIX",
        here: postfix.is_file() && effective_uid() == Some(0),
        watch: watched(postfix, Path::new("/usr/sbin")),
    }
}

/// `mount` and the right to use it (CAP_SYS_ADMIN, which root has outside a locked-down
/// container), for the small tmpfs of the disk-full tests.
fn mount() -> Need {
    const CAP_SYS_ADMIN: u32 = 21;
    let mount = ["/usr/bin/mount", "/bin/mount"]
        .iter()
        .any(|p| Path::new(p).is_file());
    let allowed = status_field("CapEff")
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0);
    Need {
        cfg: "has_mount",
        required_by: "BROADSHEET_REQUIRE_MOUNT",
        here: mount && allowed,
        watch: Vec::new(),
    }
}

/// The effective user id, from `/proc/self/status` (`Uid: real effective saved fs`).
fn effective_uid() -> Option<u32> {
    status_field("Uid")?.split_whitespace().nth(1)?.parse().ok()
}

/// The value of `field` in `/proc/self/status`.
fn status_field(field: &str) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name == field).then(|| value.trim().to_string())
    })
}
