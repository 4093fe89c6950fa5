//! Send benchmark (not a test): one issue to 100,000 subscribers through Postfix's `smtp-sink`,
//! next to the ceiling `scripts/smtp-ceiling.sh` measures (pre-made messages sent to the same
//! sink by `smtp-source`) in the same run, once before the send and once after it.
//!
//! ```text
//! cargo build --release --bin broadsheet --example send_bench
//! target/release/examples/send_bench [SUBSCRIBERS] [--no-tracking] [--concurrency N]
//! ```
//!
//! It drives the release binary (`target/release/broadsheet`, or `$BROADSHEET_BIN`): `migrate`
//! on a fresh data directory, one owner, newsletter (paid) and API key written straight into the
//! database (the browser onboarding needs a mailbox), then `serve` with `--smtp-url` at the
//! sink, subscribers through `POST /subscribers/bulk_create` in chunks of 1000, one issue with
//! articles (about 23 KB per message), `send_now`, and waiting until the issue is `sent`
//! (read from the database every 10 ms, so the wait costs the server nothing). The ceiling
//! is measured right before the send (the server idle) and right after it, twice each: with
//! the script's usual 20,000-byte messages and with messages of Broadsheet's own size. Prints
//! messages per second, the ratios to the ceilings (to the mean of before and after), the
//! CPU time per message of the server (per thread) and of the sink, and the server's peak
//! memory (VmHWM) before and after the send.
//!
//! The ceiling script fetches `smtp-sink` and `smtp-source` from Debian's postfix package
//! into `target/smtp-bench/` when they are not installed (it says so);
//! `SMTP_CEILING_SCRIPT` names another script, `SEND_BENCH_CEILING=N` skips the measurement.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod support;
use support::{Api, Guard, free_port, wait_connectable};

/// What to measure: the list's size, tracking on or off, SMTP connections per send.
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

/// Runs `smtp-ceiling.sh` (50,000 messages of `size` bytes over 4 connections) and returns
/// its messages per second and its line.
fn ceiling(script: &str, size: usize) -> (f64, String) {
    let out = Command::new(script)
        .args(["50000", &size.to_string(), "4"])
        .stderr(Stdio::inherit())
        .output()
        .expect("running smtp-ceiling.sh");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("smtp ceiling:"))
        .unwrap_or_else(|| panic!("no ceiling line from {script} (its errors are above):\n{text}"))
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

/// CPU seconds (user + system) a process has used so far.
fn process_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |n: usize| {
        fields
            .get(n)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0 // USER_HZ on Linux
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
    let started = Instant::now();
    let text = broadsheet::domain::markdown_text::markdown_to_text(&issue.content_markdown);
    let email =
        broadsheet::mail::render::IssueEmail::new(&issue, &newsletter, "localhost", links, &text);
    let prepared = started.elapsed();
    let message = email.message(123_456, "reader99999@example.net");
    assert!(message.dot_free, "the message needs no dot-stuffing");
    let (size, lines) = (
        message.bytes.len(),
        message.bytes.split(|&b| b == b'\n').count(),
    );
    // The rendering part of the per-message cost, in this process.
    let rounds = 5000;
    let started = Instant::now();
    let bytes: usize = (0..rounds)
        .map(|n| email.message(n, "reader99999@example.net").bytes.len())
        .sum();
    eprintln!(
        "render: {:.1} ms once per send, then {:.1} us per message ({} bytes, {lines} lines)",
        prepared.as_secs_f64() * 1e3,
        started.elapsed().as_secs_f64() * 1e6 / rounds as f64,
        bytes / rounds as usize
    );
    size
}

/// The ceiling for messages of the ceiling script's usual size and for messages of
/// Broadsheet's own size: measured, or given with `SEND_BENCH_CEILING` (for both).
fn measure_ceilings(script: &str, own_size: usize) -> [(f64, String); 2] {
    [USUAL_SIZE, own_size].map(|size| {
        eprintln!("measuring the ceiling for {size}-byte messages ...");
        let measured = match std::env::var("SEND_BENCH_CEILING") {
            Ok(rate) => (
                rate.parse().expect("SEND_BENCH_CEILING is msg/s"),
                format!("smtp ceiling: {rate} msg/s (given, not measured)"),
            ),
            Err(_) => ceiling(script, size),
        };
        eprintln!("{}", measured.1);
        measured
    })
}

/// The ceiling script's message size, the one the figures in docs/performance.md have
/// always been compared with.
const USUAL_SIZE: usize = 20_000;

fn main() {
    let args = args();
    let script = std::env::var("SMTP_CEILING_SCRIPT").unwrap_or_else(|_| {
        support::repository()
            .join("scripts/smtp-ceiling.sh")
            .to_string_lossy()
            .into_owned()
    });
    let binary = support::binary();

    let sink_port = free_port();
    let sink = Guard(
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
    support::migrate_and_seed_owner(&binary, data.path());
    let (_, key) = support::seed_newsletter(data.path(), "bench", args.tracking);

    let port = free_port();
    let log_path = data.path().join("server.log");
    let server = Guard(support::serve(
        &binary,
        data.path(),
        port,
        sink_port,
        &["--send-concurrency", &args.concurrency.to_string()],
        &[],
    ));
    let pid = server.0.id();
    wait_connectable(port);
    let api = Api::new(port, &key);

    eprintln!("adding {} subscribers ...", args.subscribers);
    let started = Instant::now();
    let emails: Vec<String> = (0..args.subscribers)
        .map(|n| format!("reader{n}@example.net"))
        .collect();
    api.subscribe_all(&emails);
    eprintln!(
        "subscribers added in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (status, issue) = api.call("POST", "/issues", Some(issue_body()));
    assert_eq!(status, 201, "create issue: {issue}");
    let issue_id = issue["id"].as_i64().unwrap();
    let size = message_size(data.path(), issue_id, args.tracking, port);
    // Measured with the server idle beside it, and again after the send.
    let ceilings_before = measure_ceilings(&script, size);
    let peak_before = peak_kib(pid);

    eprintln!("sending ...");
    let mut before = std::collections::HashMap::new();
    thread_cpu(pid, &mut before);
    let mut during = before.clone();
    let sink_cpu_before = process_cpu(sink.0.id());
    let started = Instant::now();
    let (status, queued) = api.call("POST", &format!("/issues/{issue_id}/send_now"), None);
    assert_eq!(status, 200, "send_now: {queued}");
    assert_eq!(queued["subscribers"], args.subscribers as u64);
    // The issue's status straight from the database: polling the API would make the server
    // count the deliveries over and over while it sends.
    let watch = support::open(data.path());
    let mut sampled = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(10));
        if sampled.elapsed() >= Duration::from_millis(50) {
            thread_cpu(pid, &mut during);
            sampled = Instant::now();
        }
        let status: String = watch
            .query_row("SELECT status FROM issues WHERE id = ?1", [issue_id], |r| {
                r.get(0)
            })
            .unwrap();
        if status == "sent" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "not sent after 30 minutes"
        );
    }
    thread_cpu(pid, &mut during);
    let elapsed = started.elapsed().as_secs_f64();
    let sink_cpu = process_cpu(sink.0.id()) - sink_cpu_before;
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
    drop(server);
    let ceilings_after = measure_ceilings(&script, size);

    for (before, after) in ceilings_before.iter().zip(&ceilings_after) {
        println!("before the send: {}", before.1);
        println!("after the send:  {}", after.1);
    }
    println!(
        "broadsheet: {} messages of ~{size} bytes (tracking {}, {} connections) in {elapsed:.2} s = {rate:.0} msg/s (send_now to status sent)",
        args.subscribers,
        if args.tracking { "on" } else { "off" },
        args.concurrency
    );
    println!("server log: {server_line}");
    for (n, what) in [
        format!("{USUAL_SIZE}-byte messages (the usual ceiling)"),
        format!("{size}-byte messages (Broadsheet's size)"),
    ]
    .iter()
    .enumerate()
    {
        let (before, after) = (ceilings_before[n].0, ceilings_after[n].0);
        let mean = (before + after) / 2.0;
        println!(
            "ratio to the ceiling for {what}: {:.2} (to the mean of before and after, {mean:.0} msg/s; {:.2} to the one before, {:.2} to the one after)",
            rate / mean,
            rate / before,
            rate / after
        );
    }
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
    println!(
        "smtp-sink CPU during the send: {sink_cpu:.2} s ({:.0} us per message)",
        sink_cpu * 1e6 / args.subscribers as f64
    );
}
