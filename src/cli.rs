//! The operator's commands. Each parses its arguments, calls the store or the domain layer,
//! prints a clear result and exits with a code scripts can use.

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use crate::config::{Cli, Command};
use crate::domain::DomainError;
use crate::domain::newsletters::{self, Status, Tier};
use crate::store::{self, StoreError};

/// Exit codes: 0 ok, 1 failure, 2 usage (clap), 3 not found, 4 data directory busy.
const EXIT_FAILURE: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_NOT_FOUND: u8 = 3;
const EXIT_LOCKED: u8 = 4;

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
            message: e.to_string(),
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
        Failure {
            code,
            message: e.to_string(),
        }
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
        Command::Openapi => {
            println!("{}", crate::api::openapi_document());
            Ok(())
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
