//! Segment benchmark (not a test): what the exact audience count of the send confirmation
//! (`domain::subscribers::audience::count`) and the recording of a segment's recipients when a send starts
//! (`domain::delivery::sending::prepare`) cost at a million subscribers.
//!
//! ```text
//! cargo build --release --example audience_count
//! target/release/examples/audience_count            # 1,000,000 subscribers
//! target/release/examples/audience_count 100000
//! ```
//!
//! One newsletter on the migrated schema (its triggers and indexes apply to the fill), in a
//! temporary WAL database: subscribers with two tags each, `vip` on one in twenty (`reader`
//! on the others) and one of a hundred `group-N`; 3% are not active. Each count is made once
//! to warm the cache and then 5 times, printing min / median / max in milliseconds and the
//! count, checked against a plain recount. Every subscriber also has a custom field `age` (a
//! number, `id % 80`): segments by it are read along the field's value index. Then the
//! recipients of four sends are recorded (everyone, one tag, a tag less another, a field
//! segment) and timed once each.

use std::time::Instant;

use broadsheet::domain::delivery::sending;
use broadsheet::domain::subscribers::audience::{self, Audience, FieldCondition, FieldOp};
use rusqlite::Connection;

fn fill(conn: &Connection, subscribers: i64) {
    const OWNER: &str = "INSERT INTO users (email, password_hash, created_at, updated_at)
         VALUES ('owner@example.com', 'h', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
         INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
         VALUES (1, 'Bench', 'bench', 'paid', 'bt', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');";
    conn.execute_batch(OWNER).unwrap();
    const READERS: &str = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
         INSERT INTO subscribers (newsletter_id, email, status, created_at)
         SELECT 1, printf('r%07d@example.com', i),
                CASE WHEN i % 100 < 3 THEN 'unsubscribed' ELSE 'active' END, '2026-01-01T00:00:00.000Z'
         FROM n";
    conn.execute(READERS, [subscribers]).unwrap();
    const TAGS: &str = "INSERT INTO subscriber_tags (subscriber_id, tag)
         SELECT id, iif(id % 20 = 0, 'vip', 'reader') FROM subscribers
         UNION ALL SELECT id, 'group-' || (id % 100) FROM subscribers";
    conn.execute(TAGS, []).unwrap();
    const FIELD: &str =
        "INSERT INTO custom_fields (newsletter_id, name, type, created_at, updated_at)
         VALUES (1, 'age', 'number', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
         INSERT INTO subscriber_field_values (subscriber_id, field_id, value)
         SELECT id, 1, id % 80 FROM subscribers;";
    conn.execute_batch(FIELD).unwrap();
}

/// The same count the slow way: every active subscriber checked against both lists and
/// the `age` condition.
fn recount(conn: &Connection, a: &Audience) -> i64 {
    const SQL: &str =
        "SELECT count(*) FROM subscribers s WHERE s.newsletter_id = 1 AND s.status = 'active'
           AND (?1 = '[]' OR EXISTS (SELECT 1 FROM subscriber_tags t, json_each(?1) j
                WHERE t.subscriber_id = s.id AND t.tag = j.value))
           AND NOT EXISTS (SELECT 1 FROM subscriber_tags t, json_each(?2) j
                WHERE t.subscriber_id = s.id AND t.tag = j.value)
           AND (?3 = '' OR EXISTS (SELECT 1 FROM subscriber_field_values v
                WHERE v.subscriber_id = s.id AND v.field_id = 1
                  AND CASE ?3 WHEN 'equals' THEN v.value = ?4 WHEN 'before' THEN v.value < ?4
                      ELSE v.value > ?4 END))";
    let json = |tags: &[String]| serde_json::to_string(tags).unwrap();
    let (op, value) = a
        .field
        .as_ref()
        .map_or(("", 0), |c| (c.op.as_str(), c.value.as_i64().unwrap()));
    conn.query_row(
        SQL,
        (json(&a.tags), json(&a.exclude_tags), op, value),
        |r| r.get(0),
    )
    .unwrap()
}

fn audience(tags: &[&str], exclude_tags: &[&str]) -> Audience {
    let list = |t: &[&str]| t.iter().map(|s| s.to_string()).collect();
    Audience {
        tags: list(tags),
        exclude_tags: list(exclude_tags),
        ..Default::default()
    }
}

/// `audience` with the condition `age <op> value`.
fn by_age(tags: &[&str], op: FieldOp, value: i64) -> Audience {
    Audience {
        field: Some(FieldCondition {
            field_id: 1,
            name: "age".into(),
            op,
            value: value.into(),
        }),
        ..audience(tags, &[])
    }
}

fn ms(from: Instant) -> f64 {
    from.elapsed().as_secs_f64() * 1000.0
}

/// Milliseconds of this thread's CPU time: the work, without the waits for a CPU that a
/// shared machine adds to the wall time.
fn cpu_ms() -> f64 {
    let mut at = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut at) };
    at.tv_sec as f64 * 1000.0 + at.tv_nsec as f64 / 1e6
}

fn main() {
    let subscribers: i64 = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("a number of subscribers"))
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let mut conn = Connection::open(dir.path().join("bench.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    broadsheet::store::migrate(&mut conn).unwrap();
    let started = Instant::now();
    fill(&conn, subscribers);
    println!(
        "filled {subscribers} subscribers in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let groups: Vec<String> = (0..50).map(|g| format!("group-{g}")).collect();
    let half: Vec<&str> = groups.iter().map(String::as_str).collect();
    let cases = [
        ("everyone (the stored counter)", audience(&[], &[])),
        ("tags [vip] (1 in 20)", audience(&["vip"], &[])),
        ("tags [group-7] (1 in 100)", audience(&["group-7"], &[])),
        ("exclude_tags [vip]", audience(&[], &["vip"])),
        (
            "tags [reader] less [group-7]",
            audience(&["reader"], &["group-7"]),
        ),
        (
            "tags group-0..49 (half) less [vip]",
            audience(&half, &["vip"]),
        ),
        ("field age = 33 (1 in 80)", by_age(&[], FieldOp::Equals, 33)),
        ("field age > 69 (1 in 8)", by_age(&[], FieldOp::After, 69)),
        ("field age < 40 (half)", by_age(&[], FieldOp::Before, 40)),
        (
            "tags [vip] and field age > 69",
            by_age(&["vip"], FieldOp::After, 69),
        ),
    ];
    println!(
        "\n| audience | count | wall ms, median (min-max) of 5 | CPU ms, median |\n|---|---|---|---|"
    );
    for (name, a) in &cases {
        let count = audience::count(&conn, 1, a).unwrap();
        assert_eq!(count, recount(&conn, a), "{name}");
        let (mut times, mut cpu): (Vec<f64>, Vec<f64>) = (0..5)
            .map(|_| {
                let (at, cpu_at) = (Instant::now(), cpu_ms());
                audience::count(&conn, 1, a).unwrap();
                (ms(at), cpu_ms() - cpu_at)
            })
            .unzip();
        times.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        println!(
            "| {name} | {count} | {:.1} ({:.1}-{:.1}) | {:.1} |",
            times[2], times[0], times[4], cpu[2]
        );
    }

    println!("\n| send's recipients recorded | deliveries | wall ms | CPU ms |\n|---|---|---|---|");
    for (k, (name, a)) in [&cases[0], &cases[1], &cases[4], &cases[7]]
        .into_iter()
        .enumerate()
    {
        const ISSUE: &str = "INSERT INTO issues (newsletter_id, subject, content_markdown, content_html, status, path, created_at, updated_at)
             VALUES (1, 'Bench', 'x', '<p>x</p>', 'sending', ?1, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')";
        conn.execute(ISSUE, [format!("bench-{k}")]).unwrap();
        let issue_id = conn.last_insert_rowid();
        audience::store(&conn, issue_id, a).unwrap();
        let (at, cpu_at) = (Instant::now(), cpu_ms());
        sending::prepare(&mut conn, issue_id).unwrap().unwrap();
        let (took, cpu) = (ms(at), cpu_ms() - cpu_at);
        let rows: i64 = conn
            .query_row(
                "SELECT count(*) FROM deliveries WHERE issue_id = ?1",
                [issue_id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows, audience::count(&conn, 1, a).unwrap(), "{name}");
        println!("| {name} | {rows} | {took:.0} | {cpu:.0} |");
    }
}
