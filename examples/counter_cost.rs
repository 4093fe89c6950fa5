//! Counter benchmark (not a test): what the triggers of migration 0011 (`docs/statistics.md`)
//! add to the writes they follow, measured against the same writes on the schema without them
//! (every migration before 0011) in the same run.
//!
//! ```text
//! cargo build --release --example counter_cost
//! target/release/examples/counter_cost            # 1,000,000 rows
//! target/release/examples/counter_cost 200000
//! ```
//!
//! Each schema gets a fresh database file in WAL mode with `synchronous=FULL`, as the service
//! runs, and the writes the service makes, one prepared statement per row, 1,000 rows to a
//! transaction (as an import commits its batches): subscribers with two tags each; then one
//! issue's recipients recorded in one statement (as a send starts); each delivery claimed
//! (`pending` to `sending`) and then sent (`sent`, with `sent_at`); a third of them opened.
//! It prints, for each, rows per second with and without the triggers and their ratio, and
//! the CPU time per row (the thread's own, so without the waits for fsync, which both
//! schemas pay alike and which swing most on a shared disk) and what the triggers add to it.

use std::time::{Duration, Instant};

use rusqlite::Connection;

const BATCH: usize = 1000;

fn open(path: &std::path::Path, with_counters: bool) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn.pragma_update(None, "foreign_keys", "ON").unwrap();
    let migrations = broadsheet::store::MIGRATIONS;
    let last = if with_counters {
        migrations.len()
    } else {
        migrations
            .iter()
            .position(|(name, _)| *name == "0011_counters")
            .expect("migration 0011")
    };
    for (_, sql) in &migrations[..last] {
        conn.execute_batch(sql).unwrap();
    }
    conn.execute_batch(
        "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', 'n', 'n');
         INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
           VALUES (1, 'N', 'n', 'paid', 'bt', 'n', 'n');",
    )
    .unwrap();
    conn
}

/// This thread's CPU time so far: the work SQLite does, without the waits for the disk
/// (each commit's fsync), which are the same with or without the triggers and make wall
/// time swing on a shared machine.
fn cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Wall time and CPU time of one step.
#[derive(Clone, Copy)]
struct Cost {
    rows: usize,
    wall: Duration,
    cpu: Duration,
}

impl Cost {
    fn measure(rows: usize, work: impl FnOnce()) -> Cost {
        let (wall, cpu) = (Instant::now(), cpu_time());
        work();
        Cost {
            rows,
            wall: wall.elapsed(),
            cpu: cpu_time() - cpu,
        }
    }

    fn rows_per_second(&self) -> f64 {
        self.rows as f64 / self.wall.as_secs_f64()
    }

    fn cpu_per_row_us(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.rows as f64
    }
}

/// Runs `row(n)` for `0..rows`, `BATCH` to a transaction.
fn timed(conn: &Connection, rows: usize, mut row: impl FnMut(usize)) -> Cost {
    Cost::measure(rows, || {
        for start in (0..rows).step_by(BATCH) {
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            for n in start..(start + BATCH).min(rows) {
                row(n);
            }
            conn.execute_batch("COMMIT").unwrap();
        }
    })
}

/// The cost of each step on one schema.
fn run(with_counters: bool, rows: usize) -> Vec<(&'static str, Cost)> {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(&dir.path().join("bench.db"), with_counters);
    let now = broadsheet::clock::now_string();
    let mut figures = Vec::new();

    let mut subscriber = conn
        .prepare(
            "INSERT INTO subscribers (newsletter_id, email, name, subscribed_at, created_at, updated_at)
             VALUES (1, ?1, ?2, ?3, ?3, ?3)",
        )
        .unwrap();
    let mut tag = conn
        .prepare("INSERT OR IGNORE INTO subscriber_tags (subscriber_id, tag) VALUES (?1, ?2)")
        .unwrap();
    let per_second = timed(&conn, rows, |n| {
        subscriber
            .execute((
                format!("reader{n:07}@example.com"),
                format!("Reader {n}"),
                &now,
            ))
            .unwrap();
        let id = conn.last_insert_rowid();
        tag.execute((id, if n % 20 == 0 { "vip" } else { "reader" }))
            .unwrap();
        tag.execute((id, format!("group-{}", n % 100))).unwrap();
    });
    figures.push(("subscriber with two tags inserted", per_second));

    conn.execute(
        "INSERT INTO issues (newsletter_id, subject, status, path, created_at, updated_at)
         VALUES (1, 'S', 'sending', 's', ?1, ?1)",
        [&now],
    )
    .unwrap();
    figures.push((
        "recipient recorded (one INSERT ... SELECT)",
        Cost::measure(rows, || {
            conn.execute(
                "INSERT INTO deliveries (issue_id, subscriber_id, email, created_at)
                 SELECT 1, id, email, ?1 FROM subscribers WHERE newsletter_id = 1 AND status = 'active' ORDER BY id",
                [&now],
            )
            .unwrap();
        }),
    ));

    let mut claim = conn
        .prepare("UPDATE deliveries SET status = 'sending' WHERE id = ?1 AND status = 'pending'")
        .unwrap();
    figures.push((
        "message claimed (pending -> sending)",
        timed(&conn, rows, |n| {
            claim.execute([n as i64 + 1]).unwrap();
        }),
    ));
    let mut sent = conn
        .prepare(
            "UPDATE deliveries SET status = 'sent', sent_at = ?2, last_error = NULL, attempts = attempts + 1
             WHERE id = ?1 AND status = 'sending'",
        )
        .unwrap();
    figures.push((
        "message sent (sending -> sent)",
        timed(&conn, rows, |n| {
            sent.execute((n as i64 + 1, &now)).unwrap();
        }),
    ));
    let mut opened = conn
        .prepare("UPDATE deliveries SET opened_at = ?2 WHERE id = ?1 AND opened_at IS NULL")
        .unwrap();
    figures.push((
        "first open (a third of the messages)",
        timed(&conn, rows / 3, |n| {
            opened.execute((3 * n as i64 + 1, &now)).unwrap();
        }),
    ));
    figures
}

fn main() {
    let rows: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("ROWS"))
        .unwrap_or(1_000_000);
    let without = run(false, rows);
    let with = run(true, rows);
    println!("{rows} rows, without and with the counters' triggers (same run)\n");
    println!(
        "{:<44} {:>10} {:>10} {:>6}   {:>8} {:>8} {:>8}",
        "write", "rows/s", "rows/s", "ratio", "CPU µs", "CPU µs", "added"
    );
    println!(
        "{:<44} {:>10} {:>10} {:>6}   {:>8} {:>8} {:>8}",
        "", "without", "with", "", "without", "with", ""
    );
    for ((name, before), (_, after)) in without.iter().zip(&with) {
        println!(
            "{name:<44} {:>10.0} {:>10.0} {:>6.2}   {:>8.2} {:>8.2} {:>8.2}",
            before.rows_per_second(),
            after.rows_per_second(),
            after.rows_per_second() / before.rows_per_second(),
            before.cpu_per_row_us(),
            after.cpu_per_row_us(),
            after.cpu_per_row_us() - before.cpu_per_row_us()
        );
    }
}
