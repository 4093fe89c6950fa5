//! Fault soak (not a test): sends of a few thousand recipients each, hit by `kill -9` at
//! random moments, by a crash right after a claim's commit (the worst instant, reached on
//! purpose through the crash point `BROADSHEET_CRASH_AFTER_CLAIMS`), by SIGTERM and by relay
//! outages, against an SMTP sink running as a process of its own (the test suite's sink,
//! `tests/it/support/smtp.rs`) that, during some sends, also resets connections mid-message
//! or after the end of a message, closes some cleanly after the end without answering, or
//! throttles (451 4.7.0 past a number of messages a second). After each send it compares,
//! recipient by recipient, what the sink took with what the database reports, and at the
//! end prints sends, kills, duplicates, skips and unconfirmed messages.
//!
//! ```text
//! cargo build --release --bin broadsheet
//! cargo run --release --example fault_soak -- [--kills 100] [--min 5000] [--max 20000] [--seed N]
//! ```
//!
//! A duplicate is a recipient the sink took twice. A skip is a recipient whose status
//! contradicts the sink: counted `sent` but never taken, or taken but counted `pending`,
//! `bounced` or `failed`. An unconfirmed message went out whole but its answer never came;
//! the promise is at most one per open connection per kill (or outage), plus the messages
//! the relay closed cleanly after taking them; an unconfirmed message whose last ending at
//! the sink was a reset (the relay did not take it) is counted apart and must be none. The
//! exit code is 1 when any of that fails.

#[path = "../tests/it/support/smtp.rs"]
#[allow(dead_code)]
mod smtp;
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use support::{Api, Guard, free_port};

/// SMTP connections of each send (`--send-concurrency`).
const CONNECTIONS: usize = 8;

struct Options {
    kills: usize,
    min: usize,
    max: usize,
    seed: u64,
}

fn options() -> Options {
    let mut options = Options {
        kills: 100,
        min: 5000,
        max: 20000,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || -> u64 { it.next().and_then(|v| v.parse().ok()).expect("a number") };
        match arg.as_str() {
            "--kills" => options.kills = value() as usize,
            "--min" => options.min = value() as usize,
            "--max" => options.max = value() as usize,
            "--seed" => options.seed = value(),
            other => panic!("unknown argument {other}"),
        }
    }
    options
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("sink") {
        run_sink(args[2].parse().expect("a port"));
        return ExitCode::SUCCESS;
    }
    soak(options())
}

/// The sink process: the test suite's SMTP sink, driven by lines on stdin (`down`, `up`,
/// `counts PREFIX`), answering one line each.
fn run_sink(port: u16) {
    let sink = smtp::SmtpSink::start_on(
        port,
        smtp::Rules {
            discard_bodies: true,
            ..smtp::Rules::default()
        },
    );
    let mut out = std::io::stdout();
    writeln!(out, "ready").unwrap();
    for line in std::io::stdin().lines().map_while(Result::ok) {
        let answer = match line.split_once(' ').unwrap_or((line.as_str(), "")) {
            ("down", _) => {
                sink.go_down();
                "ok".to_string()
            }
            ("up", _) => {
                sink.go_up();
                "ok".to_string()
            }
            ("counts", prefix) => {
                let counts: HashMap<String, usize> = sink
                    .counts()
                    .into_iter()
                    .filter(|(to, _)| to.starts_with(prefix))
                    .collect();
                serde_json::to_string(&counts).unwrap()
            }
            ("endings", prefix) => {
                let endings: HashMap<String, smtp::Ending> = sink
                    .endings()
                    .into_iter()
                    .filter(|(to, _)| to.starts_with(prefix))
                    .collect();
                serde_json::to_string(&endings).unwrap()
            }
            ("mood", mood) => {
                // resets mid-message, resets after the end, clean closes, messages a second
                let numbers: Vec<u64> = mood
                    .split(' ')
                    .map(|n| n.parse().expect("a number"))
                    .collect();
                sink.change_rules(|r| {
                    r.reset_every = numbers[0];
                    r.reset_after_every = numbers[1];
                    r.close_after_every = numbers[2];
                    r.per_second = (numbers[3] > 0).then_some(numbers[3] as u32);
                });
                "ok".to_string()
            }
            ("throttled", _) => sink.throttled().to_string(),
            _ => "?".to_string(),
        };
        writeln!(out, "{answer}").unwrap();
        out.flush().unwrap();
    }
}

/// The sink, seen from the soak.
struct Sink {
    _child: Guard,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    port: u16,
}

impl Sink {
    fn start() -> Sink {
        let port = free_port();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["sink", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the sink process");
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        Sink {
            _child: Guard(child),
            input,
            output,
            port,
        }
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.input, "{command}").unwrap();
        self.input.flush().unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        line.trim().to_string()
    }

    fn counts(&mut self, prefix: &str) -> HashMap<String, usize> {
        serde_json::from_str(&self.ask(&format!("counts {prefix}"))).unwrap()
    }

    fn endings(&mut self, prefix: &str) -> HashMap<String, smtp::Ending> {
        serde_json::from_str(&self.ask(&format!("endings {prefix}"))).unwrap()
    }
}

/// How the relay misbehaves during one send, besides the outages: every n-th message reset
/// mid-message, reset after its end, closed cleanly after its end (0: never), and the
/// messages a second past which it throttles (0: none).
#[derive(Debug, Clone, Copy, Default)]
struct Mood {
    reset_every: u64,
    reset_after_every: u64,
    close_after_every: u64,
    per_second: u64,
}

impl Mood {
    fn random(rng: &mut StdRng) -> Mood {
        Mood {
            reset_every: if rng.random_bool(0.5) { 20 } else { 0 },
            reset_after_every: if rng.random_bool(0.3) { 97 } else { 0 },
            close_after_every: if rng.random_bool(0.3) { 499 } else { 0 },
            per_second: if rng.random_bool(0.3) {
                rng.random_range(1500..4000)
            } else {
                0
            },
        }
    }

    fn command(&self) -> String {
        format!(
            "mood {} {} {} {}",
            self.reset_every, self.reset_after_every, self.close_after_every, self.per_second
        )
    }
}

/// The server under trial: restarted after every kill, sometimes armed with the crash point.
struct Server {
    child: Option<Child>,
    binary: std::path::PathBuf,
    data_dir: std::path::PathBuf,
    port: u16,
    smtp_port: u16,
}

impl Server {
    /// Starts it; `crash_after` arms the crash point.
    fn start(&mut self, crash_after: Option<u64>) {
        let env: Vec<(&str, String)> = crash_after
            .map(|n| ("BROADSHEET_CRASH_AFTER_CLAIMS", n.to_string()))
            .into_iter()
            .collect();
        self.child = Some(support::serve(
            &self.binary,
            &self.data_dir,
            self.port,
            self.smtp_port,
            &[
                "--send-concurrency",
                &CONNECTIONS.to_string(),
                "--send-retry-base-ms",
                "200",
                "--send-outage-retry-ms",
                "200",
                "--smtp-timeout-ms",
                "5000",
            ],
            &env,
        ));
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            // The armed crash point may fire before the server listens (a resumed send claims
            // at once): the loop's next look at the process counts it as a claim crash.
            if crash_after.is_some()
                && exited.is_some_and(|status| {
                    use std::os::unix::process::ExitStatusExt;
                    status.signal() == Some(libc::SIGABRT)
                })
            {
                return;
            }
            if exited.is_some() || Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(self.data_dir.join("server.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                panic!(
                    "the server did not start ({exited:?}); the end of its log:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM; returns how long it took to exit (killed after 60 s), or `None` when the
    /// armed crash point aborted it first.
    fn terminate(&mut self) -> Option<Duration> {
        use std::os::unix::process::ExitStatusExt;
        let mut child = self.child.take()?;
        let asked = Instant::now();
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        while asked.elapsed() < Duration::from_secs(60) {
            if let Ok(Some(status)) = child.try_wait() {
                return (status.signal() != Some(libc::SIGABRT)).then(|| asked.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        Some(asked.elapsed())
    }

    /// True when the process ended by itself (the crash point fired).
    fn crashed(&mut self) -> bool {
        let ended = self
            .child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
        if ended {
            self.child = None;
        }
        ended
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn status(data_dir: &Path, issue_id: i64) -> String {
    support::open(data_dir)
        .query_row("SELECT status FROM issues WHERE id = ?1", [issue_id], |r| {
            r.get(0)
        })
        .unwrap()
}

#[derive(Default)]
struct Totals {
    sends: usize,
    recipients: usize,
    /// kill -9 while the issue was sending.
    kills: usize,
    /// Crash point fired: aborted right after a claim's commit.
    claim_crashes: usize,
    sigterms: usize,
    slowest_sigterm: Duration,
    outages: usize,
    duplicates: usize,
    skips: usize,
    unconfirmed: usize,
    unconfirmed_arrived: usize,
    /// Sends with more unconfirmed messages than connections times kills and outages.
    over_bound: usize,
    /// The most messages in flight (claimed, no answer recorded) at one kill.
    worst_kill: usize,
    /// Kills that left more messages in flight than there are connections.
    kills_over_bound: usize,
    /// Messages a SIGTERM left in flight (it should let them all finish).
    left_in_flight_by_sigterm: usize,
    /// Sends during which the relay reset connections, closed some cleanly, throttled.
    resetting: usize,
    closing: usize,
    throttling: usize,
    /// Messages the relay closed cleanly after taking them (legitimately unconfirmed).
    closed: usize,
    /// Unconfirmed messages whose last ending at the relay was a reset (not taken), not left
    /// by a kill: must be none.
    unconfirmed_from_resets: usize,
    /// Throttling answers the relay gave.
    throttled: u64,
}

impl Totals {
    /// A kill left `in_flight` messages claimed without a recorded answer: the ones that
    /// turn `unconfirmed` at the restart.
    fn record_kill(&mut self, in_flight: usize) {
        self.worst_kill = self.worst_kill.max(in_flight);
        self.kills_over_bound += usize::from(in_flight > CONNECTIONS);
    }
}

/// Deliveries claimed whose answer is not recorded (read while the server is down).
fn in_flight(data_dir: &Path) -> usize {
    support::open(data_dir)
        .query_row(
            "SELECT count(*) FROM deliveries WHERE status = 'sending'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap() as usize
}

/// One fault, chosen at random.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill,
    Sigterm,
    Outage,
}

fn soak(options: Options) -> ExitCode {
    eprintln!("fault soak: seed {}", options.seed);
    let mut rng = StdRng::seed_from_u64(options.seed);
    let binary = support::binary();
    let mut sink = Sink::start();
    let data = tempfile::Builder::new()
        .prefix("fault-soak-")
        .tempdir()
        .unwrap();
    support::migrate_and_seed_owner(&binary, data.path());
    let mut server = Server {
        child: None,
        binary,
        data_dir: data.path().to_path_buf(),
        port: free_port(),
        smtp_port: sink.port,
    };
    server.start(None);
    let mut totals = Totals::default();
    let started = Instant::now();
    while totals.kills + totals.claim_crashes < options.kills {
        totals.sends += 1;
        let send = totals.sends;
        let (_, key) = support::seed_newsletter(data.path(), &format!("soak{send}"), true);
        let api = Api::new(server.port, &key);
        let count = rng.random_range(options.min..=options.max);
        let prefix = format!("s{send}r");
        let emails: Vec<String> = (0..count)
            .map(|n| format!("{prefix}{n}@soak.example"))
            .collect();
        api.subscribe_all(&emails);
        let (code, issue) = api.call(
            "POST",
            "/issues",
            Some(json!({"issue": {"subject": format!("Soak {send}"), "status": "approved",
                "content_markdown": "Every reader **once**, [whatever fails](https://example.org/once)."}})),
        );
        assert_eq!(code, 201, "{issue}");
        let issue_id = issue["id"].as_i64().unwrap();
        let mood = Mood::random(&mut rng);
        assert_eq!(sink.ask(&mood.command()), "ok");
        totals.resetting += usize::from(mood.reset_every + mood.reset_after_every > 0);
        totals.closing += usize::from(mood.close_after_every > 0);
        totals.throttling += usize::from(mood.per_second > 0);
        let (code, queued) = api.call("POST", &format!("/issues/{issue_id}/send_now"), None);
        assert_eq!(code, 200, "{queued}");

        let (mut kills, mut outages) = (0, 0);
        let mut faults = rng.random_range(2..=5);
        // The crash point fired: the process ended by itself right after a claim's commit.
        let recover = |server: &mut Server, totals: &mut Totals| {
            let crashed = server.crashed();
            if crashed {
                totals.claim_crashes += 1;
                totals.record_kill(in_flight(data.path()));
                server.start(None);
            }
            usize::from(crashed)
        };
        loop {
            kills += recover(&mut server, &mut totals);
            let state = status(data.path(), issue_id);
            if state == "sent" {
                break;
            }
            assert_eq!(state, "sending", "send {send}: issue {state}");
            if faults == 0 {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            faults -= 1;
            std::thread::sleep(Duration::from_millis(rng.random_range(10..700)));
            if recover(&mut server, &mut totals) > 0 {
                kills += 1;
                continue;
            }
            let fault = match rng.random_range(0..100) {
                0..60 => Fault::Kill,
                60..80 => Fault::Sigterm,
                _ => Fault::Outage,
            };
            match fault {
                Fault::Kill => {
                    server.kill();
                    if status(data.path(), issue_id) == "sending" {
                        totals.kills += 1;
                        totals.record_kill(in_flight(data.path()));
                        kills += 1;
                    }
                    // One restart in four is armed to crash right after a claim's commit.
                    let armed = rng
                        .random_bool(0.25)
                        .then(|| rng.random_range(1..=count as u64 / 2));
                    server.start(armed);
                }
                Fault::Sigterm => {
                    match server.terminate() {
                        Some(took) => {
                            totals.sigterms += 1;
                            totals.left_in_flight_by_sigterm += in_flight(data.path());
                            totals.slowest_sigterm = totals.slowest_sigterm.max(took);
                        }
                        None => {
                            // The crash point fired while it was stopping.
                            totals.claim_crashes += 1;
                            totals.record_kill(in_flight(data.path()));
                            kills += 1;
                        }
                    }
                    server.start(None);
                }
                Fault::Outage => {
                    assert_eq!(sink.ask("down"), "ok");
                    std::thread::sleep(Duration::from_millis(rng.random_range(200..2500)));
                    assert_eq!(sink.ask("up"), "ok");
                    totals.outages += 1;
                    outages += 1;
                }
            }
        }
        // Disarm for the next send.
        server.kill();
        server.start(None);

        let received = sink.counts(&prefix);
        let endings = sink.endings(&prefix);
        let throttled: u64 = sink.ask("throttled").parse().unwrap_or(0);
        assert_eq!(sink.ask(&Mood::default().command()), "ok");
        let statuses: Vec<(String, String, String)> = {
            let conn = support::open(data.path());
            let mut stmt = conn
                .prepare(
                    "SELECT email, status, coalesce(last_error, '') FROM deliveries
                     WHERE issue_id = ?1",
                )
                .unwrap();
            stmt.query_map([issue_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(statuses.len(), count, "send {send}: one delivery each");
        let (mut duplicates, mut skips, mut unconfirmed, mut arrived) = (0, 0, 0, 0);
        let (mut closed, mut from_resets) = (0, 0);
        for (email, status, error) in &statuses {
            let got = received.get(email).copied().unwrap_or(0);
            duplicates += usize::from(got > 1);
            let ending = endings.get(email).copied();
            closed += usize::from(ending == Some(smtp::Ending::Closed));
            match status.as_str() {
                "sent" => skips += usize::from(got != 1),
                "unconfirmed" => {
                    unconfirmed += 1;
                    arrived += usize::from(got == 1);
                    // Left by a kill (or a stop) between the claim and the answer is the
                    // kill's; any other unconfirmed message the relay had reset was
                    // misjudged.
                    from_resets += usize::from(
                        ending == Some(smtp::Ending::Reset) && !error.contains("server stopped"),
                    );
                }
                _ => skips += usize::from(got != 0),
            }
        }
        totals.closed += closed;
        totals.unconfirmed_from_resets += from_resets;
        totals.throttled = throttled;
        let bound = CONNECTIONS * (kills + outages) + closed;
        let over = unconfirmed > bound;
        totals.recipients += count;
        totals.duplicates += duplicates;
        totals.skips += skips;
        totals.unconfirmed += unconfirmed;
        totals.unconfirmed_arrived += arrived;
        totals.over_bound += usize::from(over);
        println!(
            "send {send}: {count} recipients, {kills} kill(s), {outages} outage(s), relay {mood:?}: \
             {duplicates} duplicate(s), {skips} skip(s), {unconfirmed} unconfirmed ({arrived} arrived, \
             {closed} closed cleanly by the relay, {from_resets} after a reset){}",
            if over { " OVER THE BOUND" } else { "" }
        );
    }
    println!(
        "\nfault soak (seed {}): {} sends, {} recipients in {:.0} s",
        options.seed,
        totals.sends,
        totals.recipients,
        started.elapsed().as_secs_f64()
    );
    println!(
        "kills: {} (kill -9 at random moments {}, crash right after a claim's commit {}); \
         SIGTERMs: {} (slowest exit {:.2} s); relay outages: {}",
        totals.kills + totals.claim_crashes,
        totals.kills,
        totals.claim_crashes,
        totals.sigterms,
        totals.slowest_sigterm.as_secs_f64(),
        totals.outages
    );
    println!(
        "duplicates: {}, skips: {}, unconfirmed: {} ({} of them arrived), sends over the bound of {CONNECTIONS} per kill or outage: {}",
        totals.duplicates,
        totals.skips,
        totals.unconfirmed,
        totals.unconfirmed_arrived,
        totals.over_bound
    );
    println!(
        "in flight at a kill: at most {} (bound {CONNECTIONS}, one per connection; kills over it: {}); left in flight by a SIGTERM: {}",
        totals.worst_kill, totals.kills_over_bound, totals.left_in_flight_by_sigterm
    );
    println!(
        "relay faults: sends with resets {}, with clean closes {} ({} messages closed), throttling {} ({} throttling answers); unconfirmed after a reset: {}",
        totals.resetting,
        totals.closing,
        totals.closed,
        totals.throttling,
        totals.throttled,
        totals.unconfirmed_from_resets
    );
    if totals.duplicates == 0
        && totals.skips == 0
        && totals.unconfirmed_from_resets == 0
        && totals.over_bound == 0
        && totals.kills_over_bound == 0
        && totals.left_in_flight_by_sigterm == 0
    {
        println!("PASS");
        ExitCode::SUCCESS
    } else {
        println!("FAIL");
        ExitCode::FAILURE
    }
}
