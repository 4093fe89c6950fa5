//! Data-request benchmark (not a test): what one subscriber's export
//! (`domain::subscribers::personal_data::export`, `GET /subscribers/{id}/export`) costs when the
//! installation keeps many webhook events, and what migration 0022, which gives each kept event
//! the subscriber it names, costs once at the upgrade.
//!
//! ```text
//! cargo build --release --example export_bench
//! target/release/examples/export_bench            # 100,000 subscribers, 1,200,000 events
//! target/release/examples/export_bench 10000
//! ```
//!
//! One newsletter on the migrated schema, in a temporary WAL database: the subscribers, ten
//! issues sent to each (one delivery per issue and subscriber), and per delivery an
//! `email.opened` event, per subscriber a `subscriber.updated` and an address-only
//! `email.unsubscribed`: twelve events each, all kept (the webhook log keeps 30 days). The
//! events are written without their subscriber, then migration 0022's own statements fill
//! and index it (timed). Then 500 subscribers spread over the list are exported 3 times each
//! (median, min, max in milliseconds), and each export's webhook events are checked to be all
//! twelve. The ceiling is the sqlite3 shell running the export's events query for the same
//! subscribers, on the same file, in the same run; beside it, the search an export made before
//! migration 0022 (for 10 of them: it reads 100,000 events each time).

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use broadsheet::domain::subscribers::personal_data;
use rusqlite::Connection;

/// Migration 0022, whose statements after its `ALTER TABLE` are the ones timed here.
const MIGRATION: &str = include_str!("../migrations/0022_events_by_subscriber.sql");

const AT: &str = "'2026-11-20T00:00:00.000Z'";

fn fill(conn: &Connection, subscribers: i64) {
    conn.execute_batch(&format!(
        "INSERT INTO users (email, password_hash, created_at, updated_at)
           VALUES ('owner@example.com', 'h', {AT}, {AT});
         INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
           VALUES (1, 'Bench', 'bench', 'paid', 'bt', {AT}, {AT});
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10)
         INSERT INTO issues (newsletter_id, subject, status, path, created_at, updated_at)
           SELECT 1, 'Issue ' || i, 'sent', 'issue-' || i, {AT}, {AT} FROM n;"
    ))
    .unwrap();
    conn.execute(
        &format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO subscribers (newsletter_id, email, created_at)
             SELECT 1, printf('r%07d@example.com', i), {AT} FROM n"
        ),
        [subscribers],
    )
    .unwrap();
    conn.execute_batch(&format!(
        "INSERT INTO deliveries (issue_id, subscriber_id, email, status, sent_at, created_at)
           SELECT i.id, s.id, s.email, 'sent', {AT}, {AT} FROM issues i, subscribers s;
         INSERT INTO events (newsletter_id, kind, payload, created_at)
           SELECT 1, 'email.opened', json_object('event', 'email.opened', 'data',
                  json_object('delivery_id', id, 'email', email)), {AT} FROM deliveries;
         INSERT INTO events (newsletter_id, kind, payload, created_at)
           SELECT 1, 'subscriber.updated', json_object('event', 'subscriber.updated', 'data',
                  json_object('subscription_id', id, 'email', email)), {AT} FROM subscribers;
         INSERT INTO events (newsletter_id, kind, payload, created_at)
           SELECT 1, 'email.unsubscribed', json_object('event', 'email.unsubscribed', 'data',
                  json_object('email', email)), {AT} FROM subscribers;"
    ))
    .unwrap();
}

/// Migration 0022 as it runs at an upgrade, on events that do not name their subscriber yet:
/// each of its statements after the `ALTER TABLE` (the column is already there, as migrated),
/// timed in milliseconds.
fn migrate_events(conn: &Connection) -> Vec<(String, f64)> {
    conn.execute_batch("DROP INDEX events_subscriber; UPDATE events SET subscriber_id = NULL;")
        .unwrap();
    let without_comments: String = MIGRATION
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    without_comments
        .split(';')
        .map(str::trim)
        .filter(|sql| !sql.is_empty() && !sql.starts_with("ALTER TABLE"))
        .map(|sql| {
            let started = Instant::now();
            conn.execute_batch(sql).unwrap();
            let name = sql.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
            (name, ms(started))
        })
        .collect()
}

fn ms(from: Instant) -> f64 {
    from.elapsed().as_secs_f64() * 1000.0
}

/// Median, min and max of `times`, in milliseconds.
fn spread(mut times: Vec<f64>) -> (f64, f64, f64) {
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[0], times[times.len() - 1])
}

/// The events of each of `ids` read by the sqlite3 shell in one statement (the export's
/// query, its JSON data extracted), 3 times: milliseconds per subscriber, median (min-max).
/// With `before_0022`, the search an export made before migration 0022: the newest 100,000
/// events of the installation, filtered by their JSON.
fn ceiling(db: &std::path::Path, ids: &[i64], before_0022: bool) -> (f64, f64, f64) {
    let values: Vec<String> = ids.iter().map(|id| format!("({id})")).collect();
    let per_subscriber = if before_0022 {
        "SELECT e.payload ->> '$.data' AS data FROM (
             SELECT id, newsletter_id, payload, created_at FROM events
             ORDER BY created_at DESC, id DESC LIMIT 100000) e
         WHERE e.newsletter_id = 1 AND (
             e.payload ->> '$.data.subscription_id' = ids.id
             OR e.payload ->> '$.data.delivery_id' IN
                 (SELECT id FROM deliveries WHERE subscriber_id = ids.id)
             OR (e.payload ->> '$.data.email' = printf('r%07d@example.com', ids.id)
                 AND e.payload ->> '$.data.subscription_id' IS NULL
                 AND e.payload ->> '$.data.delivery_id' IS NULL))
         LIMIT 10001"
    } else {
        "SELECT payload ->> '$.data' AS data FROM events
         WHERE subscriber_id = ids.id AND newsletter_id = 1
         ORDER BY created_at DESC, id DESC LIMIT 10001"
    };
    let statement = format!(
        "WITH ids(id) AS (VALUES {}) SELECT sum((SELECT count(data) FROM ({per_subscriber}))) FROM ids;\n",
        values.join(",")
    );
    let script = format!(".timer on\n{}", statement.repeat(3));
    let mut shell = Command::new(support::sqlite3())
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running sqlite3");
    shell
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = shell.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let times: Vec<f64> = text
        .lines()
        .filter_map(|line| line.strip_prefix("Run Time: real "))
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap()
                .parse::<f64>()
                .unwrap()
                * 1000.0
        })
        .map(|total| total / ids.len() as f64)
        .collect();
    assert_eq!(times.len(), 3, "{text}");
    spread(times)
}

fn main() {
    let subscribers: i64 = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("a number of subscribers"))
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    let mut conn = Connection::open(&path).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    broadsheet::store::migrate(&mut conn).unwrap();
    let started = Instant::now();
    fill(&conn, subscribers);
    let events: i64 = conn
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .unwrap();
    println!(
        "filled {subscribers} subscribers, {} deliveries, {events} events in {:.1} s",
        subscribers * 10,
        started.elapsed().as_secs_f64()
    );

    println!("\n| migration 0022, at the upgrade | ms |\n|---|---|");
    for (statement, took) in migrate_events(&conn) {
        println!("| `{statement} …` | {took:.0} |");
    }
    let unnamed: i64 = conn
        .query_row(
            "SELECT count(*) FROM events WHERE subscriber_id IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(unnamed, 0, "every event names its subscriber");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();

    let ids: Vec<i64> = (0..500).map(|k| 1 + k * (subscribers / 500)).collect();
    let mut times = Vec::new();
    for &id in &ids {
        for _ in 0..3 {
            let at = Instant::now();
            let export = personal_data::export(&conn, 1, id).unwrap();
            times.push(ms(at));
            assert_eq!(export.webhook_events.len(), 12, "subscriber {id}");
            assert_eq!(export.deliveries.len(), 10, "subscriber {id}");
        }
    }
    let (median, min, max) = spread(times);
    let ceiling_now = ceiling(&path, &ids, false);
    let before = ceiling(&path, &ids[..10], true);
    println!(
        "\n| one subscriber's data request ({} subscribers) | ms per subscriber, median (min-max) |\n|---|---|",
        ids.len()
    );
    let row = |name: &str, (median, min, max): (f64, f64, f64)| {
        println!("| {name} | {median:.3} ({min:.3}-{max:.3}) |")
    };
    row(
        "the whole export (record, deliveries, history, webhook events), 3 times each",
        (median, min, max),
    );
    row(
        "ceiling: the sqlite3 shell, the webhook-events query alone, 3 runs",
        ceiling_now,
    );
    row(
        "before 0022, the sqlite3 shell: the search of the newest 100,000 events (10 of them)",
        before,
    );
    println!(
        "\nthe export: {:.1} x the ceiling; the search before 0022: {:.0} x the ceiling",
        median / ceiling_now.0,
        before.0 / ceiling_now.0
    );
}
