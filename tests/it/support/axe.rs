//! axe-core inside the Chromium tests: npm's `axe-core` (its `axe.min.js`, installed into
//! `target/npm` by `.ci/run`, where `scripts/lighthouse.sh` keeps its npm tools) is injected
//! into the page the session shows and `axe.run()` checks it with every default rule. Without
//! `axe.min.js` the build script (`build.rs`) marks the tests `#[ignore]` (`cfg(has_axe)`); run
//! anyway, it is reported loudly, and with `BROADSHEET_REQUIRE_BROWSER=1` (CI) it fails the
//! test, as a missing Chromium does.

use std::path::PathBuf;

use fantoccini::Client;

/// Where `npm install --prefix target/npm axe-core@4` puts the script; `BROADSHEET_AXE_JS`
/// names another file.
fn script_path() -> PathBuf {
    std::env::var_os("BROADSHEET_AXE_JS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/target/npm/node_modules/axe-core/axe.min.js"
            ))
        })
}

/// Runs axe over the page and answers with its violations, each as plain data (a failed
/// run answers `{error}`). `iframes: false`: the dashboard's only frames are the sandboxed
/// previews of an issue's e-mail and web page (no script runs in them, so axe could not
/// either); their own markup is the public site's and the mail's, checked elsewhere.
const RUN: &str = "const done = arguments[arguments.length - 1];
axe.run(document, {iframes: false, resultTypes: ['violations']}).then(
  r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
    targets: v.nodes.map(n => n.target.map(t => [].concat(t).join(' ')).join(' >> '))}))),
  e => done({error: String(e)}));";

/// axe-core's script, read once for the test.
pub struct Axe {
    source: String,
}

impl Axe {
    /// Reads `axe.min.js`, or returns `None` after a loud notice (a panic under CI).
    pub fn load(test: &str) -> Option<Axe> {
        let path = script_path();
        match std::fs::read_to_string(&path) {
            Ok(source) => Some(Axe { source }),
            Err(e) => {
                let message = format!(
                    "\n\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                     !! AXE-CORE TESTS SKIPPED ({test}): {} ({e}).\n\
                     !! Install it: npm install --prefix target/npm axe-core@4 (as .ci/run does)\n\
                     !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n",
                    path.display()
                );
                if std::env::var("BROADSHEET_REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
                    panic!("{message}");
                }
                eprintln!("{message}");
                None
            }
        }
    }

    /// The violations axe finds on the page `c` shows, one line each: `page: rule (impact)
    /// help URL` and the selectors of the elements at fault. Empty when there is none.
    pub async fn violations(&self, c: &Client, page: &str) -> Vec<String> {
        c.execute(&self.source, vec![])
            .await
            .unwrap_or_else(|e| panic!("injecting axe-core into {page}: {e}"));
        let found = c
            .execute_async(RUN, vec![])
            .await
            .unwrap_or_else(|e| panic!("axe.run on {page}: {e}"));
        if let Some(error) = found.get("error") {
            panic!("axe.run on {page} failed: {error}");
        }
        found
            .as_array()
            .unwrap_or_else(|| panic!("axe.run on {page} answered {found}"))
            .iter()
            .map(|v| {
                let targets: Vec<&str> = v["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t.as_str())
                    .collect();
                format!(
                    "{page}: {} ({}) {}: {}\n    at {}",
                    v["id"].as_str().unwrap_or("?"),
                    v["impact"].as_str().unwrap_or("?"),
                    v["help"].as_str().unwrap_or(""),
                    v["helpUrl"].as_str().unwrap_or(""),
                    targets.join("\n    at ")
                )
            })
            .collect()
    }
}
