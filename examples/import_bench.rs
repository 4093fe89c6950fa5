//! Import benchmark (not a test): `broadsheet import` of a generated CSV file next to its
//! ceiling, the sqlite3 shell loading the same file into the same schema, measured in the same
//! run; then the bytes each imported subscriber takes in the database.
//!
//! ```text
//! cargo build --release --bin broadsheet --example import_bench
//! target/release/examples/import_bench [ROWS ...] [--rounds N]   # default: 1000000, 3 rounds
//! ```
//!
//! For each size: `broadsheet migrate` on a fresh data directory, one owner and newsletter
//! created through the domain layer (the CLI has no command for them), a CSV file written to
//! the same temporary directory (`email,name,tags`, about 55 bytes a row, two tags each,
//! every 1,000th row an invalid address). Then `--rounds` rounds (3 by default), each on fresh
//! copies of that data directory: the ceiling, then the import. The machine is shared and
//! noisy, so the ratio reported is the median of the rounds' own ratios.
//!
//! - Ceiling: the sqlite3 shell (`scripts/install-sqlite3.sh` finds it, or installs Debian's
//!   package) with WAL, `synchronous=FULL` and foreign keys on, `.import`s the file into a
//!   temporary staging table, then `INSERT ... SELECT`s the rows with an `@` into
//!   `subscribers` (its unique index, and whatever indexes and triggers the migrated schema
//!   has) and their tags into `subscriber_tags`, in one transaction.
//! - Broadsheet: the release binary (`target/release/broadsheet` or `$BROADSHEET_BIN`) runs
//!   `import` on the file: every row validated with the API's rules, per-row errors reported,
//!   progress committed in batches.
//!
//! Both are timed from spawn to exit; peak memory is each child's own maximum resident set
//! size, from `wait4`'s rusage. The size is the database file after a full checkpoint
//! (`wal_checkpoint(TRUNCATE)`), divided by the subscribers created; `dbstat` (through the
//! shell) shows what each table and index takes.

use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use broadsheet::domain::accounts::{self, SignUp};
use broadsheet::domain::newsletters::{self, NewNewsletter, Tier};
use broadsheet::domain::values::urls::SiteUrls;

mod support;

/// A migrated data directory with one newsletter; returns its subdomain.
fn prepare(data_dir: &Path) -> String {
    let status = Command::new(support::binary())
        .args(["migrate"])
        .env("BROADSHEET_DATA_DIR", data_dir)
        .stdout(Stdio::null())
        .status()
        .expect("running broadsheet migrate");
    assert!(status.success(), "migrate failed");
    let mut conn = broadsheet::store::open(&data_dir.join("broadsheet.db")).unwrap();
    let urls = SiteUrls::new("http://localhost:8080", "localhost:8080");
    let owner = accounts::sign_up(
        &mut conn,
        &urls,
        "127.0.0.1",
        &SignUp {
            email: "bench@example.com".into(),
            password: "benchmark password".into(),
            password_confirmation: "benchmark password".into(),
            time_zone: "UTC".into(),
        },
    )
    .unwrap();
    let newsletter = newsletters::create(
        &mut conn,
        owner.id,
        &NewNewsletter {
            name: "Import Bench".into(),
            tagline: "Many readers".into(),
            keywords: String::new(),
            from_name: "Bench".into(),
            from_email: "bench@example.com".into(),
        },
        Tier::Free,
    )
    .unwrap();
    newsletter.subdomain
}

/// Writes `rows` subscribers as CSV; every 1,000th address is invalid. Returns the size.
fn write_csv(path: &Path, rows: usize) -> u64 {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(out, "email,name,tags").unwrap();
    for i in 0..rows {
        if i % 1000 == 999 {
            writeln!(out, "not-an-address-{i},Broken {i},").unwrap();
        } else {
            writeln!(
                out,
                "reader{i}@example{}.com,Reader {i},cohort-{};bench",
                i % 97,
                i % 12
            )
            .unwrap();
        }
    }
    out.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// One child process's wall time and peak resident memory.
struct Measured {
    seconds: f64,
    /// CPU time, user and system.
    cpu_seconds: f64,
    peak_kib: i64,
    stdout: String,
    code: i32,
}

/// Waits for `child`, sampling its peak resident set size (`VmHWM` in `/proc/<pid>/status`)
/// meanwhile. (`wait4`'s `ru_maxrss` would not do: a child started with vfork counts this
/// process's memory as its own until it execs.)
fn measure(mut child: std::process::Child, started: Instant) -> Measured {
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let status =
                    std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                let hwm = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok());
                peak = peak.max(hwm.unwrap_or(0));
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            peak
        })
    };
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).unwrap();
    }
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own unwaited child; both pointers are to live locals.
    let waited = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid as libc::pid_t, "wait4 failed");
    let seconds = started.elapsed().as_secs_f64();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak_kib = sampler.join().unwrap();
    let cpu = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Measured {
        seconds,
        cpu_seconds: cpu(usage.ru_utime) + cpu(usage.ru_stime),
        peak_kib,
        stdout,
        code,
    }
}

/// Runs `broadsheet import`.
fn import(data_dir: &Path, subdomain: &str, csv: &Path) -> Measured {
    let started = Instant::now();
    let child = Command::new(support::binary())
        .args(["import", subdomain, csv.to_str().unwrap()])
        .env("BROADSHEET_DATA_DIR", data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running broadsheet import");
    measure(child, started)
}

/// The ceiling's script: the same rows into the same schema, as plain SQL in one transaction.
/// `{csv}` and `{subdomain}` are filled in.
const CEILING_SCRIPT: &str = r#"PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;
PRAGMA foreign_keys = ON;
CREATE TEMP TABLE staging (email TEXT, name TEXT, tags TEXT);
.import --csv --skip 1 '{csv}' staging
BEGIN IMMEDIATE;
INSERT INTO subscribers (newsletter_id, email, name, created_at)
    SELECT n.id, lower(trim(s.email)), nullif(trim(s.name), ''), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
    FROM staging s, newsletters n
    WHERE n.subdomain = '{subdomain}' AND instr(s.email, '@') > 0
    ON CONFLICT DO NOTHING;
INSERT INTO subscriber_tags (subscriber_id, tag)
    SELECT sub.id, trim(t.value)
    FROM staging s
    JOIN newsletters n ON n.subdomain = '{subdomain}'
    JOIN subscribers sub ON sub.newsletter_id = n.id AND sub.email = lower(trim(s.email))
    JOIN json_each('["' || replace(s.tags, ';', '","') || '"]') t
    WHERE s.tags != ''
    ON CONFLICT DO NOTHING;
COMMIT;
"#;

/// Runs the ceiling's script with the sqlite3 shell on a copy of the prepared data directory.
fn ceiling(shell: &Path, data_dir: &Path, subdomain: &str, csv: &Path) -> Measured {
    let script = CEILING_SCRIPT
        .replace("{csv}", csv.to_str().unwrap())
        .replace("{subdomain}", subdomain);
    let started = Instant::now();
    let mut child = Command::new(shell)
        .args(["-bail", data_dir.join("broadsheet.db").to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("running sqlite3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    measure(child, started)
}

/// Checkpoints the whole WAL into the database file and returns the file's size.
fn checkpointed_size(data_dir: &Path) -> u64 {
    let db = data_dir.join("broadsheet.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    std::fs::metadata(&db).unwrap().len()
}

/// Bytes per table and index (`dbstat`), largest first, through the shell.
fn breakdown(shell: &Path, data_dir: &Path) -> String {
    let out = Command::new(shell)
        .args([
            "-readonly",
            data_dir.join("broadsheet.db").to_str().unwrap(),
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name HAVING sum(pgsize) > 65536 ORDER BY 2 DESC",
        ])
        .output()
        .expect("running sqlite3");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// One round: the ceiling, then the import, each on its own copy of the prepared directory.
struct Round {
    ceiling: Measured,
    import: Measured,
}

struct Run {
    rows: usize,
    csv_bytes: u64,
    rounds: Vec<Round>,
    created: usize,
    ceiling_db: u64,
    import_db: u64,
    layout: String,
    summary: String,
}

fn bench(shell: &Path, rows: usize, rounds: usize) -> Run {
    let dir = tempfile::Builder::new()
        .prefix("import-bench-")
        .tempdir()
        .unwrap();
    let prepared = dir.path().join("prepared");
    let subdomain = prepare(&prepared);
    let csv = dir.path().join("subscribers.csv");
    let csv_bytes = write_csv(&csv, rows);
    let created = rows - rows / 1000;
    let (ceiling_dir, data_dir) = (dir.path().join("ceiling"), dir.path().join("data"));
    let mut results = Vec::new();
    for round in 1..=rounds {
        for copy in [&ceiling_dir, &data_dir] {
            let _ = std::fs::remove_dir_all(copy);
            copy_dir(&prepared, copy);
        }
        eprintln!("round {round}: ceiling (sqlite3 shell), {rows} rows...");
        let ceiling = ceiling(shell, &ceiling_dir, &subdomain, &csv);
        assert_eq!(ceiling.code, 0, "the ceiling's script failed");
        eprintln!("round {round}: broadsheet import, {rows} rows...");
        let import = import(&data_dir, &subdomain, &csv);
        // Exit 5: done, with the planted invalid rows refused.
        assert_eq!(
            import.code, 5,
            "unexpected exit code {}:\n{}",
            import.code, import.stdout
        );
        assert!(
            import.stdout.contains(&format!("  created   {created}\n")),
            "{}",
            import.stdout
        );
        eprintln!(
            "round {round}: ceiling {:.1} s, import {:.1} s: ratio {:.2}",
            ceiling.seconds,
            import.seconds,
            ceiling.seconds / import.seconds
        );
        results.push(Round { ceiling, import });
    }
    Run {
        rows,
        csv_bytes,
        created,
        ceiling_db: checkpointed_size(&ceiling_dir),
        import_db: checkpointed_size(&data_dir),
        layout: breakdown(shell, &data_dir),
        summary: results.last().unwrap().import.stdout.clone(),
        rounds: results,
    }
}

/// The middle value (the upper one of an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1024.0 / 1024.0)
}

fn main() {
    let mut sizes = Vec::new();
    let mut rounds = 3;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--rounds" {
            rounds = args
                .next()
                .and_then(|n| n.parse().ok())
                .filter(|n| *n > 0)
                .expect("--rounds N, N at least 1");
        } else {
            sizes.push(
                arg.replace([',', '_'], "")
                    .parse::<usize>()
                    .expect("ROWS is a number"),
            );
        }
    }
    if sizes.is_empty() {
        sizes.push(1_000_000);
    }
    support::binary(); // stops here, saying how to build it, when it is missing
    let shell = support::sqlite3();
    let mut runs = Vec::new();
    for rows in sizes {
        let run = bench(&shell, rows, rounds);
        eprint!("{}", run.summary);
        eprintln!("database after the import (dbstat, bytes):\n{}", run.layout);
        runs.push(run);
    }
    println!();
    println!(
        "Medians of {rounds} rounds (ceiling, then import, each round); ratio = median of the rounds' ratios."
    );
    println!();
    println!(
        "| rows | CSV file | ceiling (sqlite3 shell) | broadsheet import | ratio (rounds) | CPU time (shell / import) | peak memory (shell / import) | bytes per subscriber (shell / import) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in &runs {
        let of = |f: &dyn Fn(&Round) -> f64| median(r.rounds.iter().map(f).collect());
        let ratios: Vec<String> = r
            .rounds
            .iter()
            .map(|x| format!("{:.2}", x.ceiling.seconds / x.import.seconds))
            .collect();
        let peak = |f: &dyn Fn(&Round) -> i64| r.rounds.iter().map(f).max().unwrap_or(0);
        println!(
            "| {} | {} | {:.0} rows/s ({:.1} s) | {:.0} rows/s ({:.1} s) | **{:.2}** ({}) | {:.1} s / {:.1} s | {} / {} | {:.0} / {:.0} |",
            r.rows,
            mib(r.csv_bytes as f64),
            r.rows as f64 / of(&|x| x.ceiling.seconds),
            of(&|x| x.ceiling.seconds),
            r.rows as f64 / of(&|x| x.import.seconds),
            of(&|x| x.import.seconds),
            of(&|x| x.ceiling.seconds / x.import.seconds),
            ratios.join(", "),
            of(&|x| x.ceiling.cpu_seconds),
            of(&|x| x.import.cpu_seconds),
            mib(peak(&|x| x.ceiling.peak_kib) as f64 * 1024.0),
            mib(peak(&|x| x.import.peak_kib) as f64 * 1024.0),
            r.ceiling_db as f64 / r.created as f64,
            r.import_db as f64 / r.created as f64,
        );
    }
}
