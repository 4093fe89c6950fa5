//! Headless Chromium through chromedriver (Debian's `chromium` and `chromium-driver`), driven
//! with fantoccini. The build script (`build.rs`) marks the tests `#[ignore]` where they are
//! missing (`cfg(has_chromium)`), so `cargo test` counts them as ignored. Missing here too
//! (`--include-ignored`, or gone since the build), they are reported loudly and the test
//! passes; with `BROADSHEET_REQUIRE_BROWSER=1` (CI) it fails.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};

/// A running chromedriver; killed on drop.
pub struct Driver {
    child: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .flat_map(|dir| candidates.iter().map(move |c| dir.join(c)))
                .find(|p| p.is_file())
        })
}

impl Driver {
    /// Starts chromedriver, or returns `None` after a loud notice (a panic under CI).
    pub fn start(test: &str) -> Option<Driver> {
        let chromium = find(&["/usr/bin/chromium", "chromium", "chromium-browser"]);
        let driver = find(&["/usr/bin/chromedriver", "chromedriver"]);
        let (Some(_), Some(driver)) = (chromium, driver) else {
            let message = format!(
                "\n\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                 !! BROWSER TESTS SKIPPED ({test}): chromium or chromedriver not found.\n\
                 !! Install them: apt-get install chromium chromium-driver\n\
                 !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            );
            if std::env::var("BROADSHEET_REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
                panic!("{message}");
            }
            eprintln!("{message}");
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let d = Driver {
            child,
            port,
            _profile: tempfile::tempdir().unwrap(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(d)
    }

    /// A new headless Chromium session.
    pub async fn session(&self) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": find(&["/usr/bin/chromium", "chromium", "chromium-browser"]).unwrap(),
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--disable-quic", "--no-first-run", "--window-size=1280,900",
                    format!("--user-data-dir={}", self._profile.path().display()),
                ],
            }),
        );
        caps.insert(
            "goog:loggingPrefs".into(),
            serde_json::json!({"browser": "ALL"}),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a chromedriver session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Types `text` into the field named `name`.
pub async fn fill(c: &Client, name: &str, text: &str) {
    // After a click that navigates, the new page may not be there yet: wait for the field.
    let css = format!("[name=\"{name}\"]");
    on_the_page_now(c, &css, async |field| {
        field.clear().await.ok();
        field.send_keys(text).await
    })
    .await;
}

/// Clicks the first element matching `css`.
pub async fn click(c: &Client, css: &str) {
    on_the_page_now(c, css, async |element| element.click().await).await;
}

/// Runs `act` on the first element matching `css`. An element found while the page was
/// still being replaced (the old page of a click that navigates) goes stale under `act`:
/// then it is looked up again on the page there is now, until the deadline.
async fn on_the_page_now(
    c: &Client,
    css: &str,
    act: impl AsyncFn(fantoccini::elements::Element) -> Result<(), fantoccini::error::CmdError>,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let element = wait_for_element(c, css).await;
        match act(element).await {
            Ok(()) => return,
            // `wait_for_element` polls for the page there is now.
            Err(e) if e.to_string().contains("stale element") && Instant::now() < deadline => {}
            Err(e) => panic!("{css}: {e}"),
        }
    }
}

/// Waits until the page's path is `path`.
pub async fn wait_for_path(c: &Client, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let url = c.current_url().await.unwrap();
        if url.path() == path {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "expected {path}, still at {url}: {}",
            c.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the page's path ends with `suffix` (a path holding an id the test does not
/// know yet), and returns the page's URL.
pub async fn wait_for_path_ending(c: &Client, suffix: &str) -> url::Url {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let url = c.current_url().await.unwrap();
        if url.path().ends_with(suffix) {
            return url;
        }
        assert!(
            Instant::now() < deadline,
            "expected a path ending {suffix}, still at {url}: {}",
            c.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Saves a screenshot as a test artifact (`BROADSHEET_TEST_ARTIFACTS`, default
/// `target/test-artifacts`).
pub async fn screenshot(c: &Client, name: &str) -> PathBuf {
    let dir = std::env::var_os("BROADSHEET_TEST_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/target/test-artifacts"
            ))
        });
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, c.screenshot().await.unwrap()).unwrap();
    path
}

/// A runtime for one browser test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Signs the browser in at `base` as `email` (with the tests' [`super::PASSWORD`]) and waits
/// for the dashboard.
pub async fn sign_in(c: &Client, base: &str, email: &str) {
    c.goto(&format!("{base}/session/new")).await.unwrap();
    fill(c, "email_address", email).await;
    fill(c, "password", super::PASSWORD).await;
    click(c, "main form button[type=submit]").await;
    wait_for_element(c, "a[href=\"/newsletters/new\"]").await;
}

/// Asserts the page `c` shows does not scroll sideways at `width` (the width the test set):
/// `document.documentElement.scrollWidth` at most the window's and at most `width`, since a
/// phone's emulated viewport (`Emulation.setDeviceMetricsOverride` with `mobile: true`)
/// widens to fit what overflows and `innerWidth` then grows with the page.
pub async fn assert_fits(c: &Client, width: i64, label: &str) {
    if let Some(problem) = sideways(c, width, label).await {
        panic!("{problem}");
    }
}

/// What [`assert_fits`] checks, as the problem found (`None`: the page fits).
pub async fn sideways(c: &Client, width: i64, label: &str) -> Option<String> {
    let sizes = c
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth]",
            vec![],
        )
        .await
        .unwrap();
    let (page, window) = (sizes[0].as_i64().unwrap(), sizes[1].as_i64().unwrap());
    (page > window || page > width).then(|| {
        format!(
            "{label} scrolls sideways: {page} px wide in a {window} px window, {width} px asked"
        )
    })
}

/// Waits until an element matches `css` (the page after a click may still be loading).
pub async fn wait_for_element(c: &Client, css: &str) -> fantoccini::elements::Element {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(element) = c.find(Locator::Css(css)).await {
            return element;
        }
        assert!(
            Instant::now() < deadline,
            "nothing matches {css} on {}: {}",
            c.current_url()
                .await
                .map(|u| u.to_string())
                .unwrap_or_default(),
            c.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the element matching `css` shows `needle`, and returns its text. After a
/// click that submits a form, the old page may still be there for a moment (and an element
/// found on it goes stale), so this looks again until the new page says what it should.
pub async fn wait_for_text(c: &Client, css: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = match c.find(Locator::Css(css)).await {
            Ok(element) => element.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{css} never showed {needle:?}; last seen: {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Driver {
    /// The browser console's warnings and errors since the last call (chromedriver's log
    /// endpoint; fantoccini has no call for it).
    pub async fn console_errors(&self, c: &Client) -> Vec<String> {
        let session = c.session_id().await.unwrap().expect("a session id");
        let url = format!("http://127.0.0.1:{}/session/{session}/se/log", self.port);
        let body = serde_json::json!({"type": "browser"});
        let answer: serde_json::Value = tokio::task::spawn_blocking(move || {
            ureq::post(&url)
                .send_json(body)
                .unwrap()
                .body_mut()
                .read_json()
                .unwrap()
        })
        .await
        .unwrap();
        answer["value"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| matches!(entry["level"].as_str(), Some("SEVERE" | "WARNING")))
            .map(|entry| entry["message"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

impl Driver {
    /// Runs a Chrome DevTools Protocol command in the session (chromedriver's
    /// `goog/cdp/execute`; fantoccini has no call for it): emulated media, device metrics.
    pub async fn cdp(&self, c: &Client, cmd: &str, params: serde_json::Value) {
        let session = c.session_id().await.unwrap().expect("a session id");
        let url = format!(
            "http://127.0.0.1:{}/session/{session}/goog/cdp/execute",
            self.port
        );
        let body = serde_json::json!({"cmd": cmd, "params": params});
        let cmd = cmd.to_string();
        tokio::task::spawn_blocking(move || {
            ureq::post(&url)
                .send_json(body)
                .unwrap_or_else(|e| panic!("CDP {cmd}: {e}"));
        })
        .await
        .unwrap();
    }
}
