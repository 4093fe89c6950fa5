//! Send benchmark (not a test): one issue to 100,000 subscribers through Postfix's `smtp-sink`,
//! with DKIM off and then on, next to the ceiling `scripts/smtp-ceiling.sh` measures (pre-made
//! messages sent to the same sink by `smtp-source`) and, for DKIM on, the signing rate, all in
//! the same run.
//!
//! ```text
//! cargo build --release --bin broadsheet --example send_bench
//! target/release/examples/send_bench [SUBSCRIBERS] [--no-tracking] [--concurrency N] [--dkim off|on|both] [--merge-tags]
//! ```
//!
//! It drives the release binary (`target/release/broadsheet`, or `$BROADSHEET_BIN`). For each
//! send (DKIM off, then DKIM on with `serve --dkim-domain bench.example`; `--dkim` picks one):
//! `migrate` on a fresh data directory, one owner, newsletter (paid) and API key written
//! straight into the database (the browser onboarding needs a mailbox), then `serve` with
//! `--smtp-url` at the sink, subscribers through `POST /subscribers/bulk_create` in chunks of
//! 1000, one issue with articles (about 23 KB per message), `send_now`, and waiting until the
//! issue is `sent` (read from the database every 10 ms, so the wait costs the server nothing).
//!
//! The ceiling is measured before the first send (the server idle) and after the last, twice
//! each: with the script's usual 20,000-byte messages and with messages of Broadsheet's own
//! size; the limit of a send is the latter (mean of before and after). With DKIM on, the limit
//! is the lower of that and the signing rate: the project's own signer signing the server's
//! rendered message with the server's key on as many threads as the sender signs with (one
//! per core, `mail::dkim::signing_threads`), right before that send and after it. Before the
//! DKIM-on send it also prints the `rsa` crate's raw RSA-2048 rate (the pure-Rust backend
//! mail-auth offers) and `openssl speed -seconds 3 rsa2048` on one core and on all (the
//! reference). For each send: messages per second, its limit and the ratio, the server's CPU
//! time per thread and per message, `smtp-sink`'s CPU per message, and the server's peak
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

use broadsheet::domain::content::merge_tags::Reader;
use broadsheet::domain::newsletters::dkim::OperatorKey;
use broadsheet::mail::dkim::signing_threads;

mod support;
use support::{Api, Guard, free_port, signing, wait_connectable};

/// What to measure: the list's size, tracking on or off, SMTP connections per send, and
/// which sends (DKIM off, on, or both, one after the other).
struct Args {
    subscribers: usize,
    tracking: bool,
    /// The issue's subject and content have merge tags (`{{ email }}`, `{{ name | default:
    /// "friend" }}`): each reader's values are read with their delivery, the subject is
    /// theirs and the HTML part quoted-printable.
    merge_tags: bool,
    concurrency: u32,
    dkim: Dkim,
}

/// `--dkim off|on|both` (both by default).
#[derive(Clone, Copy, PartialEq)]
enum Dkim {
    Off,
    On,
    Both,
}

impl Dkim {
    fn off(self) -> bool {
        self != Dkim::On
    }
    fn on(self) -> bool {
        self != Dkim::Off
    }
}

fn args() -> Args {
    let mut args = Args {
        subscribers: 100_000,
        tracking: true,
        merge_tags: false,
        concurrency: 8,
        dkim: Dkim::Both,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--no-tracking" => args.tracking = false,
            "--merge-tags" => args.merge_tags = true,
            "--concurrency" => {
                args.concurrency = it.next().and_then(|n| n.parse().ok()).expect("N")
            }
            "--dkim" => {
                args.dkim = match it.next().as_deref() {
                    Some("off") => Dkim::Off,
                    Some("on") => Dkim::On,
                    Some("both") => Dkim::Both,
                    _ => panic!("--dkim off|on|both"),
                }
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
fn issue_body(merge_tags: bool) -> Value {
    let mut markdown = String::from("# This week\n\n");
    if merge_tags {
        markdown.push_str("Hi {{ name | default: \"friend\" }}, this copy is for {{ email }}.\n\n");
    }
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
    let subject = match merge_tags {
        true => "Bench issue for {{ email }}",
        false => "Bench issue",
    };
    json!({"issue": {"subject": subject, "status": "approved", "content_markdown": markdown, "articles": articles}})
}

/// The message one recipient gets, rendered by the library as the sender does (unsigned).
fn sample_message(data_dir: &Path, issue_id: i64, tracking: bool, port: u16) -> Vec<u8> {
    use broadsheet::domain::{
        delivery::tracking::Links, issues, newsletters, values::secrets::ServerSecret,
    };
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
    let text =
        broadsheet::domain::content::markdown_text::markdown_to_text(&issue.content_markdown);
    let email =
        broadsheet::mail::render::IssueEmail::new(&issue, &newsletter, "localhost", links, &text);
    let prepared = started.elapsed();
    let message = email.message(123_456, "reader99999@example.net", &Reader::default());
    assert!(message.dot_free, "the message needs no dot-stuffing");
    let lines = message.bytes.split(|&b| b == b'\n').count();
    // The rendering part of the per-message cost, in this process.
    let rounds = 5000;
    let started = Instant::now();
    let bytes: usize = (0..rounds)
        .map(|n| {
            email
                .message(n, "reader99999@example.net", &Reader::default())
                .bytes
                .len()
        })
        .sum();
    eprintln!(
        "render: {:.1} ms once per send, then {:.1} us per message ({} bytes, {lines} lines)",
        prepared.as_secs_f64() * 1e3,
        started.elapsed().as_secs_f64() * 1e6 / rounds as f64,
        bytes / rounds as usize
    );
    message.bytes
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

/// One send of the benchmark: a fresh data directory and server, the list imported, one
/// issue; signed with DKIM when `dkim` is set.
struct Prepared {
    data: tempfile::TempDir,
    server: Guard,
    api: Api,
    issue_id: i64,
    message: Vec<u8>,
}

/// The domain the DKIM-on send signs as (`serve --dkim-domain`).
const DKIM_DOMAIN: &str = "bench.example";

fn prepare(binary: &Path, sink_port: u16, args: &Args, dkim: bool) -> Prepared {
    let data = tempfile::Builder::new()
        .prefix("send-bench-")
        .tempdir()
        .unwrap();
    support::migrate_and_seed_owner(binary, data.path());
    let (_, key) = support::seed_newsletter(data.path(), "bench", args.tracking);

    let port = free_port();
    let concurrency = args.concurrency.to_string();
    let mut flags = vec!["--send-concurrency", &concurrency];
    if dkim {
        flags.extend(["--dkim-domain", DKIM_DOMAIN]);
    }
    let server = Guard(support::serve(
        binary,
        data.path(),
        port,
        sink_port,
        &flags,
        &[],
    ));
    wait_connectable(port);
    let api = Api::new(port, &key);

    eprintln!(
        "DKIM {}: adding {} subscribers ...",
        if dkim { "on" } else { "off" },
        args.subscribers
    );
    let started = Instant::now();
    let emails: Vec<String> = (0..args.subscribers)
        .map(|n| format!("reader{n}@example.net"))
        .collect();
    api.subscribe_all(&emails);
    eprintln!(
        "subscribers added in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (status, issue) = api.call("POST", "/issues", Some(issue_body(args.merge_tags)));
    assert_eq!(status, 201, "create issue: {issue}");
    let issue_id = issue["id"].as_i64().unwrap();
    let message = sample_message(data.path(), issue_id, args.tracking, port);
    Prepared {
        data,
        server,
        api,
        issue_id,
        message,
    }
}

/// What one send measured.
struct Sent {
    rate: f64,
    elapsed: f64,
    server_line: String,
    peak_before: u64,
    peak_after: u64,
    /// CPU seconds of the server's threads during the send, by thread name.
    cpu_by_thread: std::collections::BTreeMap<String, f64>,
    sink_cpu: f64,
}

/// `send_now`, then waits until the issue is `sent`, sampling the server's threads' CPU.
fn send(prepared: &Prepared, sink_pid: u32, subscribers: usize) -> Sent {
    let Prepared {
        data,
        server,
        api,
        issue_id,
        ..
    } = prepared;
    let issue_id = *issue_id;
    let pid = server.0.id();
    let peak_before = peak_kib(pid);
    eprintln!("sending ...");
    let mut before = std::collections::HashMap::new();
    thread_cpu(pid, &mut before);
    let mut during = before.clone();
    let sink_cpu_before = process_cpu(sink_pid);
    let started = Instant::now();
    let (status, queued) = api.call("POST", &format!("/issues/{issue_id}/send_now"), None);
    assert_eq!(status, 200, "send_now: {queued}");
    assert_eq!(queued["subscribers"], subscribers as u64);
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
    let sink_cpu = process_cpu(sink_pid) - sink_cpu_before;
    let peak_after = peak_kib(pid);

    let log = std::fs::read_to_string(data.path().join("server.log")).unwrap_or_default();
    let server_line = BufReader::new(log.as_bytes())
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.starts_with("send: issue"))
        .last()
        .unwrap_or_default();
    let delivered: i64 = watch
        .query_row(
            "SELECT count(*) FROM deliveries WHERE status = 'sent'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(delivered, subscribers as i64, "every delivery sent");
    let mut cpu_by_thread: std::collections::BTreeMap<String, f64> = Default::default();
    for (tid, (name, cpu)) in &during {
        let earlier = before.get(tid).map(|(_, c)| *c).unwrap_or(0.0);
        *cpu_by_thread.entry(name.clone()).or_default() += cpu - earlier;
    }
    Sent {
        rate: subscribers as f64 / elapsed,
        elapsed,
        server_line,
        peak_before,
        peak_after,
        cpu_by_thread,
        sink_cpu,
    }
}

/// The key `serve --dkim-domain` generated and stored.
fn server_key(prepared: &Prepared) -> OperatorKey {
    OperatorKey::load(&support::open(prepared.data.path()))
        .unwrap()
        .expect("serve --dkim-domain stored a key")
}

/// Prints what one send measured against its limit.
fn report(what: &str, sent: &Sent, limit: f64, limit_is: &str, args: &Args, size: usize) {
    println!(
        "{what}: {} messages of ~{size} bytes (tracking {}, {} connections) in {:.2} s = {:.0} msg/s (send_now to status sent)",
        args.subscribers,
        if args.tracking { "on" } else { "off" },
        args.concurrency,
        sent.elapsed,
        sent.rate
    );
    println!(
        "{what}: limit {limit:.0} msg/s ({limit_is}), ratio {:.2}",
        sent.rate / limit
    );
    println!("{what}: server log: {}", sent.server_line);
    println!(
        "{what}: server peak memory (VmHWM): {:.1} MiB before the send (after the import), {:.1} MiB after it",
        sent.peak_before as f64 / 1024.0,
        sent.peak_after as f64 / 1024.0
    );
    let total: f64 = sent.cpu_by_thread.values().sum();
    println!(
        "{what}: server CPU during the send: {total:.2} s ({:.0} us per message): {}",
        total * 1e6 / args.subscribers as f64,
        sent.cpu_by_thread
            .iter()
            .filter(|(_, c)| **c >= 0.01)
            .map(|(n, c)| format!("{n} {c:.2} s"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "{what}: smtp-sink CPU during the send: {:.2} s ({:.0} us per message)",
        sent.sink_cpu,
        sent.sink_cpu * 1e6 / args.subscribers as f64
    );
}

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
    let sink_pid = sink.0.id();

    // The ceiling is measured before the first send (the server idle) and after the last.
    let mut ceilings_before = None;
    let mut ceilings = |size: usize| {
        ceilings_before
            .get_or_insert_with(|| measure_ceilings(&script, size))
            .clone()
    };
    let unsigned = args.dkim.off().then(|| {
        let prepared = prepare(&binary, sink_port, &args, false);
        ceilings(prepared.message.len());
        (
            prepared.message.len(),
            send(&prepared, sink_pid, args.subscribers),
        )
    });
    // With DKIM on, the signing rate of the server's key and message on the threads the
    // sender signs with, right before the send and after it; before it, the alternatives'
    // rates and openssl's too.
    let signed = args.dkim.on().then(|| {
        let prepared = prepare(&binary, sink_port, &args, true);
        ceilings(prepared.message.len());
        let key = server_key(&prepared);
        eprintln!("measuring the signing rates ...");
        let threads = signing_threads();
        let rates = signing::Rates::measure(&key, &prepared.message, threads, 3.0);
        let sent = send(&prepared, sink_pid, args.subscribers);
        let after = signing::signer_rate(&key, &prepared.message, threads, 3.0);
        (prepared.message.len(), rates, after, sent)
    });
    let size = unsigned
        .as_ref()
        .map(|(size, _)| *size)
        .or(signed.as_ref().map(|(size, ..)| *size))
        .expect("one send ran");
    let ceilings_before = ceilings(size);
    let ceilings_after = measure_ceilings(&script, size);
    drop(sink);

    for (before, after) in ceilings_before.iter().zip(&ceilings_after) {
        println!("before the sends: {}", before.1);
        println!("after the sends:  {}", after.1);
    }
    // The limit is the ceiling for messages of Broadsheet's size, mean of before and after.
    let ceiling = (ceilings_before[1].0 + ceilings_after[1].0) / 2.0;
    let usual = (ceilings_before[0].0 + ceilings_after[0].0) / 2.0;
    if let Some((size, sent)) = &unsigned {
        report(
            "DKIM off",
            sent,
            ceiling,
            "the ceiling for this size",
            &args,
            *size,
        );
        println!(
            "DKIM off: ratio to the ceiling for {USUAL_SIZE}-byte messages (the figure of the earlier tables): {:.2} (mean {usual:.0} msg/s; {:.2} to the one before, {:.2} to the one after)",
            sent.rate / usual,
            sent.rate / ceilings_before[0].0,
            sent.rate / ceilings_after[0].0
        );
    }
    if let Some((size, rates, after, sent)) = &signed {
        for line in rates.lines(*size) {
            println!("{line}");
        }
        let signing = (rates.signer_all + after) / 2.0;
        println!(
            "signing rate on {} thread(s), the DKIM-on limit: {:.0}/s before the send, {after:.0}/s after it, mean {signing:.0}/s",
            rates.threads, rates.signer_all
        );
        let (limit, limit_is) = if signing < ceiling {
            (signing, "the signing rate; the ceiling is higher")
        } else {
            (ceiling, "the ceiling; the signing rate is higher")
        };
        report("DKIM on", sent, limit, limit_is, &args, *size);
    }
}
