//! Import benchmark (not a test): `broadsheet import` of generated CSV files of 100,000 and
//! 1,000,000 subscribers, each into a fresh data directory, printing rows per second and the
//! importing process's peak memory, so the two sizes show whether memory stays flat.
//!
//! ```text
//! cargo build --release --bin broadsheet --example import_bench
//! target/release/examples/import_bench [ROWS ...]      # default: 100000 1000000
//! ```
//!
//! For each size: `broadsheet migrate` on a fresh data directory, one owner and newsletter
//! created through the domain layer (the CLI has no command for them), a CSV file written to
//! the same temporary directory (`email,name,tags`, about 60 bytes a row, two tags each,
//! every 1,000th row an invalid address), then the release binary (`target/release/broadsheet`
//! or `$BROADSHEET_BIN`) runs `import` on it. Peak memory is the child's own maximum
//! resident set size, from `wait4`'s rusage.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use broadsheet::domain::accounts::{self, SignUp};
use broadsheet::domain::newsletters::{self, NewNewsletter, Tier};
use broadsheet::domain::urls::SiteUrls;

fn binary() -> PathBuf {
    std::env::var_os("BROADSHEET_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/target/release/broadsheet"
            ))
        })
}

/// A migrated data directory with one newsletter; returns its subdomain.
fn prepare(data_dir: &Path) -> String {
    let status = Command::new(binary())
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

struct Run {
    rows: usize,
    bytes: u64,
    seconds: f64,
    peak_kib: i64,
    summary: String,
    db_bytes: u64,
}

/// Runs `broadsheet import` and waits for it with `wait4`, which reports that child's own
/// peak resident set size (`ru_maxrss`, KiB on Linux).
fn import(data_dir: &Path, subdomain: &str, csv: &Path) -> (f64, i64, String, i32) {
    let started = Instant::now();
    let mut child = Command::new(binary())
        .args(["import", subdomain, csv.to_str().unwrap()])
        .env("BROADSHEET_DATA_DIR", data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running broadsheet import");
    let mut summary = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut summary)
        .unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own unwaited child; both pointers are to live locals.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4 failed");
    let seconds = started.elapsed().as_secs_f64();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (seconds, usage.ru_maxrss, summary, code)
}

fn bench(rows: usize) -> Run {
    let dir = tempfile::Builder::new()
        .prefix("import-bench-")
        .tempdir()
        .unwrap();
    let data_dir = dir.path().join("data");
    let subdomain = prepare(&data_dir);
    let csv = dir.path().join("subscribers.csv");
    let bytes = write_csv(&csv, rows);
    let (seconds, peak_kib, summary, code) = import(&data_dir, &subdomain, &csv);
    // Exit 5: done, with the planted invalid rows refused.
    assert_eq!(code, 5, "unexpected exit code {code}:\n{summary}");
    let invalid = rows / 1000;
    assert!(
        summary.contains(&format!("  created   {}\n", rows - invalid)),
        "{summary}"
    );
    let db_bytes = ["broadsheet.db", "broadsheet.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(data_dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    Run {
        rows,
        bytes,
        seconds,
        peak_kib,
        summary,
        db_bytes,
    }
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1024.0 / 1024.0)
}

fn main() {
    let sizes: Vec<usize> = {
        let given: Vec<usize> = std::env::args()
            .skip(1)
            .map(|a| a.replace([',', '_'], "").parse().expect("ROWS is a number"))
            .collect();
        if given.is_empty() {
            vec![100_000, 1_000_000]
        } else {
            given
        }
    };
    assert!(
        binary().is_file(),
        "{} not found: cargo build --release --bin broadsheet",
        binary().display()
    );
    let mut runs = Vec::new();
    for rows in sizes {
        eprintln!("importing {rows} rows...");
        let run = bench(rows);
        eprint!("{}", run.summary);
        runs.push(run);
    }
    println!();
    println!(
        "| rows | CSV file | time | rows per second | peak memory (max RSS) | database after |"
    );
    println!("|---|---|---|---|---|---|");
    for r in &runs {
        println!(
            "| {} | {} | {:.1} s | {:.0} | {} | {} |",
            r.rows,
            mib(r.bytes as f64),
            r.seconds,
            r.rows as f64 / r.seconds,
            mib(r.peak_kib as f64 * 1024.0),
            mib(r.db_bytes as f64),
        );
    }
}
