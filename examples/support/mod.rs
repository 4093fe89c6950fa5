//! What the examples that drive the release binary share: finding it, a fresh data
//! directory seeded straight into the database (the browser onboarding needs a mailbox),
//! starting `serve` against an SMTP server, and a small API client.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod signing;

/// The repository the running example was built in: the nearest folder holding `Cargo.toml`
/// above the example's own executable (`target/release/examples/...`), found at run time so
/// nothing of the building machine is baked in; the current directory when there is none.
pub fn repository() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|dir| dir.join("Cargo.toml").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The sqlite3 shell (the ceiling of the database benchmarks), found or installed by
/// `scripts/install-sqlite3.sh`.
pub fn sqlite3() -> PathBuf {
    let script = repository().join("scripts/install-sqlite3.sh");
    let out = Command::new("sh")
        .arg(script)
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/install-sqlite3.sh");
    assert!(out.status.success(), "scripts/install-sqlite3.sh failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The release binary (`target/release/broadsheet` of the repository, or `$BROADSHEET_BIN`).
pub fn binary() -> PathBuf {
    let binary = std::env::var_os("BROADSHEET_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target/release/broadsheet"));
    assert!(
        binary.exists(),
        "{} missing: cargo build --release --bin broadsheet",
        binary.display()
    );
    binary
}

/// Kills the child when dropped.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn wait_connectable(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `broadsheet migrate` on `data_dir`, then the owner every seeded newsletter belongs to.
pub fn migrate_and_seed_owner(binary: &Path, data_dir: &Path) {
    let status = Command::new(binary)
        .arg("migrate")
        .env("BROADSHEET_DATA_DIR", data_dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "migrate failed");
    let now = broadsheet::clock::now_string();
    open(data_dir)
        .execute(
            "INSERT INTO users (email, password_hash, confirmed_at, created_at, updated_at) VALUES ('bench@example.com', 'x', ?1, ?1, ?1)",
            [&now],
        )
        .unwrap();
}

/// A read-write connection to the data directory's database.
pub fn open(data_dir: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(data_dir.join("broadsheet.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn
}

/// A live, paid newsletter of the seeded owner at `subdomain`, with an API key that may do
/// everything; returns (newsletter id, key).
pub fn seed_newsletter(data_dir: &Path, subdomain: &str, tracking: bool) -> (i64, String) {
    let conn = open(data_dir);
    let now = broadsheet::clock::now_string();
    conn.execute(
        "INSERT INTO newsletters (owner_id, name, tagline, sender_name, sender_email, subdomain, status, tier, frequency,
             target_audience, content_tone, newsletter_length, live_at, tracking_enabled, bounce_token, created_at, updated_at)
         VALUES (1, ?4, 'Fast mail', ?4, 'editor@bench.example', ?4, 'active', 'paid', 'weekly',
             'Engineers', 'friendly', 'medium', ?1, ?2, ?3, ?1, ?1)",
        rusqlite::params![now, tracking, broadsheet::domain::values::secrets::random_hex(16), subdomain],
    )
    .unwrap();
    let newsletter_id = conn.last_insert_rowid();
    let prefix: String = format!("k{:07}", newsletter_id);
    let key = format!(
        "{prefix}{}",
        broadsheet::domain::values::secrets::random_hex(32)
    );
    conn.execute(
        "INSERT INTO api_keys (newsletter_id, name, prefix, key_hash, can_read, can_write, can_delete, created_at)
         VALUES (?1, 'bench', ?2, ?3, 1, 1, 1, ?4)",
        rusqlite::params![
            newsletter_id,
            prefix,
            broadsheet::domain::values::secrets::sha256_hex(&key),
            now
        ],
    )
    .unwrap();
    (newsletter_id, key)
}

/// `broadsheet serve` on `port`, mail to the SMTP server on `smtp_port`, API limits out of
/// the way, output appended to `<data_dir>/server.log`; `extra` flags and `env` added.
pub fn serve(
    binary: &Path,
    data_dir: &Path,
    port: u16,
    smtp_port: u16,
    extra: &[&str],
    env: &[(&str, String)],
) -> Child {
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(data_dir.join("server.log"))
        .unwrap();
    Command::new(binary)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--base-url",
            &format!("http://127.0.0.1:{port}"),
            "--public-host",
            &format!("localhost:{port}"),
            "--smtp-url",
            &format!("smtp://127.0.0.1:{smtp_port}"),
            "--job-poll-ms",
            "50",
            "--rate-limit-bulk",
            "100000",
            "--rate-limit-write",
            "100000",
            "--rate-limit-get",
            "1000000",
        ])
        .args(extra)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("BROADSHEET_DATA_DIR", data_dir)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("starting broadsheet serve")
}

/// The REST API with one key.
pub struct Api {
    agent: ureq::Agent,
    base: String,
    key: String,
}

impl Api {
    pub fn new(port: u16, key: &str) -> Self {
        Api {
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(300)))
                .build()
                .into(),
            base: format!("http://127.0.0.1:{port}"),
            key: key.to_string(),
        }
    }

    /// One call; the status and the JSON body (null when there is none).
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.try_call(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// Like [`Api::call`], but a failed connection is an error instead of a panic.
    pub fn try_call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), ureq::Error> {
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}/api/v1{path}", self.base))
            .header("Authorization", format!("Bearer {}", self.key))
            .header("Content-Type", "application/json");
        let body = body
            .map(|b| serde_json::to_vec(&b).unwrap())
            .unwrap_or_default();
        let mut response = self.agent.run(request.body(body).unwrap())?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// Adds `emails` as subscribers, 1,000 a request.
    pub fn subscribe_all(&self, emails: &[String]) {
        for chunk in emails.chunks(1000) {
            let body = serde_json::json!({"subscribers": chunk.iter().map(|e| serde_json::json!({"email": e})).collect::<Vec<_>>()});
            let (status, result) = self.call("POST", "/subscribers/bulk_create", Some(body));
            assert_eq!(status, 200, "bulk_create: {result}");
        }
    }
}
