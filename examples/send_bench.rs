//! Send benchmark (not a test): one issue to 100,000 subscribers through Postfix's `smtp-sink`,
//! next to the ceiling `smtp-ceiling.sh` measures (pre-made messages blasted at the same
//! sink) in the same run.
//!
//! ```text
//! cargo build --release --bin broadsheet
//! cargo run --release --example send_bench -- [SUBSCRIBERS] [--no-tracking] [--concurrency N]
//! ```
//!
//! It drives the release binary (`target/release/broadsheet`, or `$BROADSHEET_BIN`): `migrate`
//! on a fresh data directory, one owner, newsletter (paid) and API key written straight into the
//! database (the browser onboarding needs a mailbox), then `serve` with `--smtp-url` at the
//! sink, subscribers through `POST /subscribers/bulk_create` in chunks of 1000, one issue with
//! articles (about 20 KB per message, like the ceiling's), `send_now`, and polling until the
//! issue is `sent`. Prints messages per second, the ratio to the ceiling, and the server's peak
//! memory (VmHWM) before and after the send.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CEILING_SCRIPT: &str = "/work/shared/bench/smtp-ceiling.sh";

struct Args {
    subscribers: usize,
    tracking: bool,
    concurrency: u32,
}

fn args() -> Args {
    let mut args = Args {
        subscribers: 100_000,
        tracking: true,
        concurrency: 8,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--no-tracking" => args.tracking = false,
            "--concurrency" => {
                args.concurrency = it.next().and_then(|n| n.parse().ok()).expect("N")
            }
            n => args.subscribers = n.parse().expect("SUBSCRIBERS is a number"),
        }
    }
    args
}

/// Kills the child when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_connectable(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `smtp-ceiling.sh` (50,000 messages of 20,000 bytes over 4 connections) and returns
/// its messages per second.
fn ceiling(script: &str) -> (f64, String) {
    let out = Command::new(script)
        .output()
        .expect("running smtp-ceiling.sh");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("smtp ceiling:"))
        .unwrap_or_else(|| {
            panic!(
                "no ceiling line in:\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_string();
    let rate: f64 = line
        .rsplit("= ")
        .next()
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("msg/s in the ceiling line");
    (rate, line)
}

/// VmHWM (peak resident memory) of a process, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) of each thread of `pid` so far, by thread id: (name, seconds).
fn thread_cpu(pid: u32, seen: &mut std::collections::HashMap<u64, (String, f64)>) {
    let ticks = 100.0; // USER_HZ on Linux
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let cpu = fields
            .get(11)
            .zip(fields.get(12))
            .and_then(|(u, s)| Some(u.parse::<f64>().ok()? + s.parse::<f64>().ok()?))
            .unwrap_or(0.0)
            / ticks;
        let tid: u64 = task.file_name().to_string_lossy().parse().unwrap_or(0);
        seen.insert(tid, (name, cpu));
    }
}

/// Owner, paid newsletter and an API key, written into a migrated database; returns the key.
fn seed(data_dir: &Path, tracking: bool) -> String {
    let conn = rusqlite::Connection::open(data_dir.join("broadsheet.db")).unwrap();
    let now = broadsheet::clock::now_string();
    conn.execute(
        "INSERT INTO users (email, password_hash, confirmed_at, created_at, updated_at) VALUES ('bench@example.com', 'x', ?1, ?1, ?1)",
        [&now],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO newsletters (owner_id, name, tagline, sender_name, sender_email, subdomain, status, tier, frequency,
             target_audience, content_tone, newsletter_length, live_at, tracking_enabled, bounce_token, created_at, updated_at)
         VALUES (1, 'Bench Weekly', 'Fast mail', 'Bench Weekly', 'editor@bench.example', 'bench', 'active', 'paid', 'weekly',
             'Engineers', 'friendly', 'medium', ?1, ?2, ?3, ?1, ?1)",
        rusqlite::params![now, tracking, broadsheet::domain::secrets::random_hex(16)],
    )
    .unwrap();
    let prefix = "benchkey";
    let key = format!("{prefix}{}", broadsheet::domain::secrets::random_hex(32));
    conn.execute(
        "INSERT INTO api_keys (newsletter_id, name, prefix, key_hash, can_read, can_write, can_delete, created_at)
         VALUES (1, 'bench', ?1, ?2, 1, 1, 1, ?3)",
        rusqlite::params![
            prefix,
            broadsheet::domain::secrets::sha256_hex(&key),
            now
        ],
    )
    .unwrap();
    key
}

struct Api {
    agent: ureq::Agent,
    base: String,
    key: String,
}

impl Api {
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}/api/v1{path}", self.base))
            .header("Authorization", format!("Bearer {}", self.key))
            .header("Content-Type", "application/json");
        let body = body
            .map(|b| serde_json::to_vec(&b).unwrap())
            .unwrap_or_default();
        let mut response = self
            .agent
            .run(request.body(body).unwrap())
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// Markdown of about 9 KB and five articles: with the template, quoted-printable and the
/// personal links, a message of about 20 KB, like the ceiling's.
fn issue_body() -> Value {
    let mut markdown = String::from("# This week\n\n");
    for n in 0..24 {
        markdown.push_str(&format!(
            "## Part {n}\n\nSending mail fast means doing little per message: render once, personalise a few \
             links, write one row. Read the [notes {n}](https://example.org/notes/{n}) and the \
             [changelog](https://example.org/changelog#{n}) for **details**.\n\n"
        ));
    }
    let articles: Vec<Value> = (0..5)
        .map(|n| {
            json!({"title": format!("Article {n}: on throughput"), "url": format!("https://news.example.com/a/{n}"),
                   "summarized_article": "A summary of a few sentences about the article, so the reader knows whether to follow it."})
        })
        .collect();
    json!({"issue": {"subject": "Bench issue", "status": "approved", "content_markdown": markdown, "articles": articles}})
}

/// Size of the message one recipient gets, rendered by the library as the sender does.
fn message_size(data_dir: &Path, issue_id: i64, tracking: bool, port: u16) -> usize {
    use broadsheet::domain::{issues, newsletters, secrets::ServerSecret, tracking::Links};
    let conn = rusqlite::Connection::open(data_dir.join("broadsheet.db")).unwrap();
    let issue = issues::get(&conn, 1, issue_id).unwrap();
    let newsletter = newsletters::get(&conn, 1).unwrap();
    let secret = ServerSecret::load_or_create(&conn).unwrap();
    let links = Links::new(
        &format!("http://bench.localhost:{port}"),
        newsletter.id,
        secret,
        tracking,
    );
    let email = broadsheet::mail::render::IssueEmail::new(&issue, &newsletter, links);
    let size = email
        .personalise(123_456, "reader99999@example.net")
        .to_mime()
        .len();
    // The rendering part of the per-message cost, in this process.
    let rounds = 2000;
    let started = Instant::now();
    let mails: Vec<_> = (0..rounds)
        .map(|n| email.personalise(n, "reader99999@example.net"))
        .collect();
    let personalise = started.elapsed();
    let started = Instant::now();
    let bytes: usize = mails.iter().map(|m| m.to_mime().len()).sum();
    let mime = started.elapsed();
    eprintln!(
        "render per message: personalise {:.0} us, MIME {:.0} us ({bytes} bytes)",
        personalise.as_secs_f64() * 1e6 / rounds as f64,
        mime.as_secs_f64() * 1e6 / rounds as f64
    );
    size
}

fn main() {
    let args = args();
    let script = std::env::var("SMTP_CEILING_SCRIPT").unwrap_or_else(|_| CEILING_SCRIPT.into());
    let binary = PathBuf::from(
        std::env::var("BROADSHEET_BIN").unwrap_or_else(|_| "target/release/broadsheet".into()),
    );
    assert!(
        binary.exists(),
        "{} missing: cargo build --release --bin broadsheet",
        binary.display()
    );

    eprintln!("measuring the ceiling ...");
    // `SEND_BENCH_CEILING=N` skips the measurement (for quick runs while profiling).
    let (ceiling_rate, ceiling_line) = match std::env::var("SEND_BENCH_CEILING") {
        Ok(rate) => (
            rate.parse().expect("SEND_BENCH_CEILING is msg/s"),
            format!("smtp ceiling: {rate} msg/s (given, not measured)"),
        ),
        Err(_) => ceiling(&script),
    };
    eprintln!("{ceiling_line}");

    let sink_port = free_port();
    let _sink = Guard(
        Command::new(&script)
            .args(["--sink", &sink_port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting smtp-sink"),
    );
    wait_connectable(sink_port);

    let data = tempfile::Builder::new()
        .prefix("send-bench-")
        .tempdir()
        .unwrap();
    let status = Command::new(&binary)
        .arg("migrate")
        .env("BROADSHEET_DATA_DIR", data.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "migrate failed");
    let key = seed(data.path(), args.tracking);

    let port = free_port();
    let log_path = data.path().join("server.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let server = Guard(
        Command::new(&binary)
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--base-url",
                &format!("http://127.0.0.1:{port}"),
                "--public-host",
                &format!("localhost:{port}"),
                "--smtp-url",
                &format!("smtp://127.0.0.1:{sink_port}"),
                "--job-poll-ms",
                "50",
                "--rate-limit-bulk",
                "100000",
                "--rate-limit-write",
                "100000",
                "--rate-limit-get",
                "1000000",
                "--send-concurrency",
                &args.concurrency.to_string(),
            ])
            .env("BROADSHEET_DATA_DIR", data.path())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting broadsheet serve"),
    );
    let pid = server.0.id();
    wait_connectable(port);
    let api = Api {
        agent: ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(300)))
            .build()
            .into(),
        base: format!("http://127.0.0.1:{port}"),
        key,
    };

    eprintln!("adding {} subscribers ...", args.subscribers);
    let started = Instant::now();
    let emails: Vec<String> = (0..args.subscribers)
        .map(|n| format!("reader{n}@example.net"))
        .collect();
    for chunk in emails.chunks(1000) {
        let body =
            json!({"subscribers": chunk.iter().map(|e| json!({"email": e})).collect::<Vec<_>>()});
        let (status, result) = api.call("POST", "/subscribers/bulk_create", Some(body));
        assert_eq!(status, 200, "bulk_create: {result}");
    }
    eprintln!(
        "subscribers added in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (status, issue) = api.call("POST", "/issues", Some(issue_body()));
    assert_eq!(status, 201, "create issue: {issue}");
    let issue_id = issue["id"].as_i64().unwrap();
    let size = message_size(data.path(), issue_id, args.tracking, port);
    let peak_before = peak_kib(pid);

    eprintln!("sending ...");
    let mut before = std::collections::HashMap::new();
    thread_cpu(pid, &mut before);
    let mut during = before.clone();
    let started = Instant::now();
    let (status, queued) = api.call("POST", &format!("/issues/{issue_id}/send_now"), None);
    assert_eq!(status, 200, "send_now: {queued}");
    assert_eq!(queued["subscribers"], args.subscribers as u64);
    loop {
        std::thread::sleep(Duration::from_millis(50));
        thread_cpu(pid, &mut during);
        let (_, issue) = api.call("GET", &format!("/issues/{issue_id}"), None);
        if issue["status"] == "sent" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "not sent after 30 minutes"
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    let peak_after = peak_kib(pid);
    let rate = args.subscribers as f64 / elapsed;

    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let server_line = BufReader::new(log.as_bytes())
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.starts_with("send: issue"))
        .last()
        .unwrap_or_default();
    let delivered: i64 = rusqlite::Connection::open(data.path().join("broadsheet.db"))
        .unwrap()
        .query_row(
            "SELECT count(*) FROM deliveries WHERE status = 'sent'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(delivered, args.subscribers as i64, "every delivery sent");

    println!("{ceiling_line}");
    println!(
        "broadsheet: {} messages of ~{size} bytes (tracking {}, {} connections) in {elapsed:.2} s = {rate:.0} msg/s (send_now to status sent)",
        args.subscribers,
        if args.tracking { "on" } else { "off" },
        args.concurrency
    );
    println!("server log: {server_line}");
    println!("ratio to the ceiling: {:.2}", rate / ceiling_rate);
    println!(
        "server peak memory (VmHWM): {:.1} MiB before the send (after the import), {:.1} MiB after it",
        peak_before as f64 / 1024.0,
        peak_after as f64 / 1024.0
    );
    let mut by_name: std::collections::BTreeMap<String, f64> = Default::default();
    for (tid, (name, cpu)) in &during {
        let earlier = before.get(tid).map(|(_, c)| *c).unwrap_or(0.0);
        *by_name.entry(name.clone()).or_default() += cpu - earlier;
    }
    let total: f64 = by_name.values().sum();
    println!(
        "server CPU during the send: {total:.2} s ({:.0} us per message): {}",
        total * 1e6 / args.subscribers as f64,
        by_name
            .iter()
            .filter(|(_, c)| **c >= 0.01)
            .map(|(n, c)| format!("{n} {c:.2} s"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    drop(server);
}
