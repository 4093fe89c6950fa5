//! Scale benchmark (not a test): the reads a creator makes every day, timed against one
//! newsletter of 1,000,000 subscribers and 10 sent issues (10,000,000 deliveries).
//!
//! ```text
//! cargo build --release --bin broadsheet --example scale_bench
//! target/release/examples/scale_bench                      # 1,000,000 subscribers, 10 issues
//! target/release/examples/scale_bench --subscribers 1000   # the same reads on a small list
//! target/release/examples/scale_bench --keep target/scale  # build once, reuse on later runs
//! ```
//!
//! The database is built directly with plain SQL on the schema `broadsheet migrate` creates
//! (every trigger and index of the real schema applies to the fill): subscribers with two tags
//! each (`vip` on one in twenty, and one of a hundred `group-N` tags), 2% unsubscribed and 1%
//! bounced, joined over the last 400 days; 10 sent issues, one every 6 days, each delivered to
//! every subscriber, a third of the deliveries opened and a tenth clicked. Then the release
//! binary (`target/release/broadsheet` or `$BROADSHEET_BIN`) serves it, and each read is made
//! once to warm the caches and then 5 times, printing min / median / max in milliseconds next to
//! the bound docs/performance.md sets, and the database size. With `--keep DIR` the filled data directory
//! is kept and reused when it already holds a database of the same size (newer migrations are
//! applied by `serve` as usual). Every answer is checked for its status and a figure it must
//! carry, so a fast wrong answer does not pass for a fast read.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use support::{Api, Guard};

struct Args {
    subscribers: i64,
    issues: i64,
    keep: Option<PathBuf>,
}

fn args() -> Args {
    let mut args = Args {
        subscribers: 1_000_000,
        issues: 10,
        keep: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--subscribers" => args.subscribers = value().parse().expect("--subscribers N"),
            "--issues" => args.issues = value().parse().expect("--issues N"),
            "--keep" => args.keep = Some(PathBuf::from(value())),
            other => panic!("unknown argument {other}: --subscribers N, --issues N, --keep DIR"),
        }
    }
    args
}

/// Subscribers joined over this many days before now.
const JOIN_SPAN_DAYS: i64 = 400;
/// Days between two issues; the newest went out a day ago.
const ISSUE_EVERY_DAYS: i64 = 6;

/// Fills the newsletter: `subscribers` rows with two tags each, `issues` sent issues each
/// delivered to every subscriber.
fn fill(conn: &rusqlite::Connection, newsletter_id: i64, subscribers: i64, issues: i64) {
    conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA cache_size = -262144;")
        .unwrap();
    let started = Instant::now();
    // Subscriber n joined n * SPAN / N days ago (the newest last); n % 100 picks its status.
    const SUBSCRIBERS: &str = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2),
         s(i, at, status) AS (
             SELECT i, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d seconds', (?2 - i) * ?3 * 86400 / ?2)),
                    CASE WHEN i % 100 < 2 THEN 'unsubscribed' WHEN i % 100 = 2 THEN 'bounced' ELSE 'active' END
             FROM n)
         INSERT INTO subscribers (newsletter_id, email, name, status, unsubscribed_at, created_at, changed_at)
         SELECT ?1, printf('reader%07d@example.com', i), printf('Reader %d', i), status,
                CASE WHEN status = 'unsubscribed' THEN strftime('%Y-%m-%dT%H:%M:%fZ', at, '+1 day') END,
                at, CASE WHEN status != 'active' THEN strftime('%Y-%m-%dT%H:%M:%fZ', at, '+1 day') END
         FROM s";
    conn.execute(SUBSCRIBERS, (newsletter_id, subscribers, JOIN_SPAN_DAYS))
        .unwrap();
    const TAGS: &str = "INSERT INTO subscriber_tags (subscriber_id, tag)
         SELECT id, CASE WHEN id % 20 = 0 THEN 'vip' ELSE 'reader' END FROM subscribers WHERE newsletter_id = ?1
         UNION ALL
         SELECT id, printf('group-%d', id % 100) FROM subscribers WHERE newsletter_id = ?1";
    conn.execute(TAGS, [newsletter_id]).unwrap();
    println!(
        "filled {subscribers} subscribers with two tags each in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for k in 0..issues {
        let started = Instant::now();
        let days_ago = 1 + (issues - 1 - k) * ISSUE_EVERY_DAYS;
        const ISSUE: &str = "INSERT INTO issues (newsletter_id, subject, content_markdown, content_html, status, sent_at, path,
                 recipients_at, created_at, updated_at)
             SELECT ?1, printf('Issue %d', ?2), 'Hello **readers**.', '<p>Hello <strong>readers</strong>.</p>', 'sent', at,
                 printf('issue-%d', ?2), at, at, at
             FROM (SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d days', ?3)) AS at)";
        conn.execute(ISSUE, (newsletter_id, k + 1, days_ago))
            .unwrap();
        let issue_id = conn.last_insert_rowid();
        // Deliveries in subscriber order; a third opened (an hour after), a tenth clicked.
        const DELIVERIES: &str = "INSERT INTO deliveries (issue_id, subscriber_id, email, status, attempts, sent_at,
                 opened_at, clicked_at, bounced_at, created_at)
             SELECT i.id, s.id, s.email, CASE WHEN s.status = 'bounced' AND s.id % 10 = 0 THEN 'bounced' ELSE 'sent' END, 1,
                 i.sent_at,
                 CASE WHEN s.id % 3 = 0 THEN strftime('%Y-%m-%dT%H:%M:%fZ', i.sent_at, '+1 hour') END,
                 CASE WHEN s.id % 10 = 0 THEN strftime('%Y-%m-%dT%H:%M:%fZ', i.sent_at, '+2 hours') END,
                 CASE WHEN s.status = 'bounced' AND s.id % 10 = 0 THEN i.sent_at END,
                 i.sent_at
             FROM issues i JOIN subscribers s ON s.newsletter_id = i.newsletter_id
             WHERE i.id = ?1 ORDER BY s.id";
        let rows = conn.execute(DELIVERIES, [issue_id]).unwrap();
        println!(
            "issue {} of {issues}: {rows} deliveries in {:.1} s",
            k + 1,
            started.elapsed().as_secs_f64()
        );
    }
    let started = Instant::now();
    // No ANALYZE: a database the service filled itself has no planner statistics either.
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    println!("checkpoint in {:.1} s", started.elapsed().as_secs_f64());
}

/// Bytes of the database and its WAL.
fn database_bytes(data_dir: &Path) -> u64 {
    ["broadsheet.db", "broadsheet.db-wal"]
        .iter()
        .filter_map(|name| std::fs::metadata(data_dir.join(name)).ok())
        .map(|m| m.len())
        .sum()
}

/// A data directory holding the filled database: `--keep DIR` when it already has one of the
/// same size, else a fresh fill. Returns the directory and the API key.
fn prepare(args: &Args, binary: &Path) -> (PathBuf, Option<tempfile::TempDir>, String) {
    let (dir, temp) = match &args.keep {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = tempfile::tempdir().unwrap();
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let marker = dir.join("scale_bench.key");
    let shape = format!("{} {}", args.subscribers, args.issues);
    if let Ok(saved) = std::fs::read_to_string(&marker)
        && let Some((saved_shape, key)) = saved.split_once('\n')
        && saved_shape == shape
    {
        println!("reusing the database in {}", dir.display());
        return (dir, temp, key.trim().to_string());
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    support::migrate_and_seed_owner(binary, &dir);
    let (newsletter_id, key) = support::seed_newsletter(&dir, "scale", true);
    fill(
        &support::open(&dir),
        newsletter_id,
        args.subscribers,
        args.issues,
    );
    std::fs::write(&marker, format!("{shape}\n{key}\n")).unwrap();
    (dir, temp, key)
}

/// A dashboard session for the seeded owner, stored as the server stores sessions (the hash
/// of the cookie's token); returns the token.
fn dashboard_session(data_dir: &Path) -> String {
    let token = broadsheet::domain::values::secrets::random_hex(32);
    let now = broadsheet::clock::now_string();
    support::open(data_dir)
        .execute(
            "INSERT INTO sessions (token_hash, user_id, created_at, last_seen_at) VALUES (?1, 1, ?2, ?2)",
            (broadsheet::domain::values::secrets::sha256_hex(&token), &now),
        )
        .unwrap();
    token
}

/// One read of the benchmark: what it is, its bound in milliseconds, and how to make it.
struct Read {
    name: &'static str,
    bound_ms: f64,
    run: Box<dyn Fn() -> String>,
}

/// GET `path` of the dashboard with the session cookie; the status must be 200 and the page
/// must contain `expect`.
fn page(port: u16, token: &str, path: String, expect: String) -> Box<dyn Fn() -> String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(600)))
        .build()
        .into();
    let cookie = format!("broadsheet_session={token}");
    Box::new(move || {
        let mut response = agent
            .get(format!("http://127.0.0.1:{port}{path}"))
            .header("Cookie", &cookie)
            .call()
            .unwrap();
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.contains(&expect), "{path} lacks {expect:?}");
        format!("{} bytes", body.len())
    })
}

/// GET `path` of the API; the status must be 200 and `check` must accept the body.
fn api(
    api: &std::rc::Rc<Api>,
    path: &'static str,
    check: impl Fn(&Value) -> String + 'static,
) -> Box<dyn Fn() -> String> {
    let api = api.clone();
    Box::new(move || {
        let (status, body) = api.call("GET", path, None);
        assert_eq!(status, 200, "{path}: {body}");
        check(&body)
    })
}

fn listed(body: &Value, want: usize) -> String {
    let rows = body["subscribers"].as_array().expect("subscribers array");
    assert_eq!(rows.len(), want, "rows listed: {body}");
    format!("{} rows, has_more {}", rows.len(), body["meta"]["has_more"])
}

fn main() {
    let args = args();
    let binary = support::binary();
    let total_started = Instant::now();
    let (data_dir, _temp, key) = prepare(&args, &binary);
    let n = args.subscribers;
    let token = dashboard_session(&data_dir);
    let port = support::free_port();
    let smtp_port = support::free_port(); // nothing is sent: no one listens there
    let _server = Guard(support::serve(
        &binary,
        &data_dir,
        port,
        smtp_port,
        &[],
        &[],
    ));
    support::wait_connectable(port);
    let client = std::rc::Rc::new(Api::new(port, &key));
    let deep_page = (n / 100 - 1).max(1);
    let deep_path: &'static str =
        Box::leak(format!("/subscribers?page={deep_page}&per_page=100").into_boxed_str());
    let bounced = n / 100;
    let reads = vec![
        Read {
            name: "GET /api/v1/newsletter/stats",
            bound_ms: 50.0,
            run: api(&client, "/newsletter/stats", move |b| {
                let stats = &b["data"];
                assert_eq!(stats["subscribers"]["total"], n, "stats: {b}");
                format!(
                    "total {}, open rate {}",
                    stats["subscribers"]["total"], stats["engagement"]["average_open_rate"]
                )
            }),
        },
        Read {
            name: "dashboard stats page",
            bound_ms: 100.0,
            run: page(
                port,
                &token,
                "/newsletters/1/stats".into(),
                "Issue 1".into(),
            ),
        },
        Read {
            name: "GET /api/v1/subscribers (page 1, per_page 100)",
            bound_ms: 20.0,
            run: api(&client, "/subscribers?per_page=100", |b| listed(b, 100)),
        },
        Read {
            name: "GET /api/v1/subscribers (page n/100 - 1)",
            bound_ms: 50.0,
            run: api(&client, deep_path, move |b| {
                listed(b, (n - (deep_page - 1) * 100).clamp(0, 100) as usize)
            }),
        },
        Read {
            name: "GET /api/v1/subscribers?tag=vip",
            bound_ms: 50.0,
            run: api(&client, "/subscribers?tag=vip", move |b| {
                listed(b, (n / 20).min(25) as usize)
            }),
        },
        Read {
            name: "GET /api/v1/subscribers?status=bounced",
            bound_ms: 20.0,
            run: api(&client, "/subscribers?status=bounced", move |b| {
                listed(b, bounced.min(25) as usize)
            }),
        },
        Read {
            name: "dashboard subscribers page",
            bound_ms: 50.0,
            run: page(
                port,
                &token,
                "/newsletters/1/subscribers".into(),
                format!("reader{n:07}@example.com"),
            ),
        },
        Read {
            name: "GET /api/v1/newsletter",
            bound_ms: 5.0,
            run: api(&client, "/newsletter", |b| {
                assert_eq!(b["data"]["subdomain"], "scale", "newsletter: {b}");
                "ok".into()
            }),
        },
    ];
    println!(
        "\n{n} subscribers, {} issues, database {:.1} MiB ({:.0} bytes per subscriber with its deliveries)\n",
        args.issues,
        database_bytes(&data_dir) as f64 / 1048576.0,
        database_bytes(&data_dir) as f64 / n as f64
    );
    println!(
        "{:<48} {:>9} {:>9} {:>9} {:>8}  answer",
        "read (ms, 5 after one warm-up)", "min", "median", "max", "bound"
    );
    let mut over = 0;
    for read in &reads {
        let answer = (read.run)();
        let mut times: Vec<f64> = (0..5)
            .map(|_| {
                let started = Instant::now();
                (read.run)();
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let verdict = if times[2] < read.bound_ms {
            ""
        } else {
            over += 1;
            "  OVER"
        };
        println!(
            "{:<48} {:>9.2} {:>9.2} {:>9.2} {:>8}  {answer}{verdict}",
            read.name, times[0], times[2], times[4], read.bound_ms
        );
    }
    println!(
        "\n{over} of {} reads over their bound; whole run {:.0} s",
        reads.len(),
        total_started.elapsed().as_secs_f64()
    );
}
