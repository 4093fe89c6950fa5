//! The operator's commands. Each parses its arguments, calls the store or the domain layer,
//! prints a clear result and exits with a code scripts can use.

use std::fs::File;
use std::io::{IsTerminal, Read};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use indicatif::{HumanBytes, ProgressBar, ProgressStyle};

use crate::config::{Cli, Command};
use crate::domain::DomainError;
use crate::domain::import::{self, Observer, Totals};
use crate::domain::newsletters::{self, Status, Tier};
use crate::store::{self, StoreError};

/// Exit codes: 0 ok, 1 failure, 2 usage (clap), 3 not found, 4 data directory busy, 5 an
/// import finished but refused some rows.
const EXIT_FAILURE: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_NOT_FOUND: u8 = 3;
const EXIT_LOCKED: u8 = 4;
const EXIT_ROWS_REFUSED: u8 = 5;

/// A command's failure with the exit code it maps to.
struct Failure {
    code: u8,
    message: String,
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        let code = if matches!(e, StoreError::Locked(_)) {
            EXIT_LOCKED
        } else {
            EXIT_FAILURE
        };
        Failure {
            code,
            message: explained(&e),
        }
    }
}

impl From<DomainError> for Failure {
    fn from(e: DomainError) -> Self {
        let code = match &e {
            DomainError::NotFound(_) => EXIT_NOT_FOUND,
            DomainError::Invalid(..) => EXIT_USAGE,
            _ => EXIT_FAILURE,
        };
        let message = match &e {
            DomainError::Store(store) => explained(store),
            _ => e.to_string(),
        };
        Failure { code, message }
    }
}

/// A store failure in words, with what to do when the disk is full.
fn explained(e: &StoreError) -> String {
    if e.is_disk_full() {
        format!("{e}\nthe disk is full: free some space and run the command again")
    } else {
        e.to_string()
    }
}

fn usage(message: String) -> Failure {
    Failure {
        code: EXIT_USAGE,
        message,
    }
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    // mail-send and ureq must agree on one rustls crypto provider (stack notes, gotcha 1).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => crate::app::serve(&cli.data_dir, args).map_err(Failure::from),
        Command::Migrate => migrate(&cli.data_dir),
        Command::Backup { file } => backup(&cli.data_dir, &file),
        Command::Restore { file } => restore(&cli.data_dir, &file),
        Command::Tier { subdomain, tier } => set_tier(&cli.data_dir, &subdomain, &tier),
        Command::Status { subdomain, status } => set_status(&cli.data_dir, &subdomain, &status),
        Command::Tracking { subdomain, setting } => {
            set_tracking(&cli.data_dir, &subdomain, &setting)
        }
        Command::Import { subdomain, csv } => import(&cli.data_dir, &subdomain, &csv),
        Command::Export { subdomain } => export(&cli.data_dir, &subdomain),
        Command::Openapi => {
            println!("{}", crate::api::openapi_document());
            Ok(())
        }
        Command::RenderMarkdown => {
            crate::domain::render_budget::child_main().map_err(|e| Failure {
                code: EXIT_FAILURE,
                message: format!("render-markdown: {e}"),
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("broadsheet: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Opens the database of `data_dir`, applying pending migrations.
fn open_migrated(data_dir: &Path) -> Result<rusqlite::Connection, StoreError> {
    let mut conn = store::open(&store::database_path(data_dir))?;
    store::migrate(&mut conn)?;
    Ok(conn)
}

fn migrate(data_dir: &Path) -> Result<(), Failure> {
    let mut conn = store::open(&store::database_path(data_dir))?;
    let applied = store::migrate(&mut conn)?;
    if applied.is_empty() {
        println!(
            "database is up to date ({} migrations)",
            store::MIGRATIONS.len()
        );
    } else {
        for name in applied {
            println!("applied {name}");
        }
    }
    Ok(())
}

fn progress_bar(what: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} pages ({percent}%)")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

fn backup(data_dir: &Path, file: &Path) -> Result<(), Failure> {
    let db = store::database_path(data_dir);
    if file.exists() {
        return Err(usage(format!(
            "{} already exists; choose a new file",
            file.display()
        )));
    }
    let bar = progress_bar("backing up");
    store::backup_to(&db, file, |p| {
        bar.set_length(p.pagecount.max(0) as u64);
        bar.set_position((p.pagecount - p.remaining).max(0) as u64);
    })?;
    bar.finish();
    println!("backup written to {}", file.display());
    Ok(())
}

fn restore(data_dir: &Path, file: &Path) -> Result<(), Failure> {
    if !file.is_file() {
        return Err(Failure {
            code: EXIT_NOT_FOUND,
            message: format!("no backup file at {}", file.display()),
        });
    }
    let _lock = store::DataDirLock::acquire(data_dir)?;
    let bar = progress_bar("restoring");
    store::restore_from(file, &store::database_path(data_dir), |p| {
        bar.set_length(p.pagecount.max(0) as u64);
        bar.set_position((p.pagecount - p.remaining).max(0) as u64);
    })?;
    bar.finish();
    // A backup from an older version gets the newer migrations now.
    open_migrated(data_dir)?;
    println!("database restored from {}", file.display());
    Ok(())
}

fn set_tier(data_dir: &Path, subdomain: &str, tier: &str) -> Result<(), Failure> {
    let tier = Tier::parse(tier)
        .ok_or_else(|| usage(format!("tier must be free, pending or paid, not {tier:?}")))?;
    let newsletter = newsletters::set_tier(&mut open_migrated(data_dir)?, subdomain, tier)?;
    println!("{}: tier {}", newsletter.subdomain, newsletter.tier);
    Ok(())
}

fn set_status(data_dir: &Path, subdomain: &str, status: &str) -> Result<(), Failure> {
    let status = Status::parse(status).ok_or_else(|| {
        usage(format!(
            "status must be active, paused or cancelled, not {status:?}"
        ))
    })?;
    let newsletter = newsletters::set_status(&mut open_migrated(data_dir)?, subdomain, status)?;
    println!("{}: status {}", newsletter.subdomain, newsletter.status);
    Ok(())
}

fn set_tracking(data_dir: &Path, subdomain: &str, setting: &str) -> Result<(), Failure> {
    let enabled = match setting {
        "on" => true,
        "off" => false,
        other => return Err(usage(format!("tracking must be on or off, not {other:?}"))),
    };
    let newsletter = newsletters::set_tracking(&mut open_migrated(data_dir)?, subdomain, enabled)?;
    println!(
        "{}: tracking {}",
        newsletter.subdomain,
        if newsletter.tracking_enabled {
            "on"
        } else {
            "off"
        }
    );
    Ok(())
}

/// Where `import` reads from: a file (its size known, for the progress) or standard input.
fn open_input(csv: &Path) -> Result<(Box<dyn Read>, Option<u64>), Failure> {
    if csv == Path::new("-") {
        return Ok((Box::new(std::io::stdin().lock()), None));
    }
    let cannot = |e: std::io::Error| Failure {
        code: if e.kind() == std::io::ErrorKind::NotFound {
            EXIT_NOT_FOUND
        } else {
            EXIT_FAILURE
        },
        message: format!("cannot read {}: {e}", csv.display()),
    };
    let file = File::open(csv).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if meta.is_dir() {
        return Err(usage(format!(
            "{} is a directory, not a CSV file",
            csv.display()
        )));
    }
    Ok((Box::new(file), Some(meta.len())))
}

/// The progress of `import` on stderr: a bar on a terminal, else a line per tenth of the file
/// (per 100,000 rows from standard input) so logs stay short.
struct ImportProgress {
    bar: Option<ProgressBar>,
    total: Option<u64>,
    last_step: u64,
}

impl ImportProgress {
    fn new(total: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(len) => ProgressBar::new(len).with_style(
                    ProgressStyle::with_template(
                        "importing [{bar:40}] {bytes}/{total_bytes} ({percent}%) {msg} {elapsed}",
                    )
                    .expect("static template")
                    .progress_chars("=> "),
                ),
                None => ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("importing {spinner} {bytes} {msg} {elapsed}")
                        .expect("static template"),
                ),
            };
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        });
        ImportProgress {
            bar,
            total,
            last_step: 0,
        }
    }
}

impl Observer for ImportProgress {
    fn committed(&mut self, totals: &Totals, bytes_read: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(bytes_read);
            bar.set_message(format!("{} rows", totals.rows));
            return;
        }
        let (step, of) = match self.total {
            Some(total) if total > 0 => (
                bytes_read.saturating_mul(10) / total,
                format!(" of {} ({}%)", HumanBytes(total), bytes_read * 100 / total),
            ),
            _ => (totals.rows / 100_000, String::new()),
        };
        if step > self.last_step {
            self.last_step = step;
            eprintln!(
                "import: {} rows, {}{of}",
                totals.rows,
                HumanBytes(bytes_read)
            );
        }
    }
}

/// The newsletter with `subdomain`, or a not-found failure that names it.
fn by_subdomain(
    conn: &rusqlite::Connection,
    subdomain: &str,
) -> Result<newsletters::Newsletter, Failure> {
    newsletters::get_by_subdomain(conn, subdomain).map_err(|e| match e {
        DomainError::NotFound(_) => Failure {
            code: EXIT_NOT_FOUND,
            message: format!("no newsletter has the subdomain {subdomain:?}"),
        },
        other => other.into(),
    })
}

fn import(data_dir: &Path, subdomain: &str, csv: &Path) -> Result<(), Failure> {
    let mut conn = open_migrated(data_dir)?;
    let newsletter = by_subdomain(&conn, subdomain)?;
    let (input, total) = open_input(csv)?;
    let started = Instant::now();
    let mut progress = ImportProgress::new(total);
    let result = import::import_csv(
        &mut conn,
        newsletter.id,
        input,
        Totals::default(),
        &mut progress,
    );
    if let Some(bar) = &progress.bar {
        bar.finish_and_clear();
    }
    let totals = result.map_err(|e| {
        let mut failure = Failure::from(e);
        let source = if csv == Path::new("-") {
            "standard input".to_string()
        } else {
            csv.display().to_string()
        };
        failure.message = format!("{source}: {}", failure.message);
        failure
    })?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "imported {} into {}: {} rows in {seconds:.1} s",
        csv.display(),
        newsletter.subdomain,
        totals.rows
    );
    println!("  created   {}", totals.created);
    println!(
        "  existing  {} (already subscribed, left unchanged)",
        totals.existing
    );
    println!(
        "  skipped   {} (unsubscribed or bounced in the file)",
        totals.skipped
    );
    println!("  refused   {}", totals.error_count);
    if totals.error_count == 0 {
        return Ok(());
    }
    println!("refused rows:");
    for e in &totals.errors {
        println!("  line {}: {:?}: {}", e.line, e.email, e.reason);
    }
    let unlisted = totals.error_count - totals.errors.len() as u64;
    if unlisted > 0 {
        println!("  and {unlisted} more, not listed");
    }
    Err(Failure {
        code: EXIT_ROWS_REFUSED,
        message: format!(
            "{} of {} rows were refused (listed above); fix them and import the file again",
            totals.error_count, totals.rows
        ),
    })
}

fn export(data_dir: &Path, subdomain: &str) -> Result<(), Failure> {
    let conn = open_migrated(data_dir)?;
    let newsletter = by_subdomain(&conn, subdomain)?;
    match import::export_csv(&conn, newsletter.id, std::io::stdout().lock()) {
        Ok(count) => {
            eprintln!("exported {count} subscribers of {}", newsletter.subdomain);
            Ok(())
        }
        // `broadsheet export x | head` closes the pipe early: not a failure.
        Err(DomainError::Store(StoreError::Io(e)))
            if e.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
