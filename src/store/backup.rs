//! Online backup and restore with SQLite's backup API: a consistent copy even while the
//! server keeps writing.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use rusqlite::backup::{Backup, Progress};

use super::StoreError;

/// Pages copied per step; between steps the server's writers get their turn.
const PAGES_PER_STEP: std::ffi::c_int = 256;

fn copy(
    from: &Connection,
    to: &mut Connection,
    mut progress: impl FnMut(Progress),
) -> Result<(), StoreError> {
    let backup = Backup::new(from, to)?;
    loop {
        use rusqlite::backup::StepResult;
        let step = backup.step(PAGES_PER_STEP)?;
        progress(backup.progress());
        match step {
            StepResult::Done => return Ok(()),
            StepResult::More => {}
            StepResult::Busy | StepResult::Locked => std::thread::sleep(Duration::from_millis(5)),
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Copies the live database at `db` into a new file `target`, reporting progress.
pub fn backup_to(
    db: &Path,
    target: &Path,
    progress: impl FnMut(Progress),
) -> Result<(), StoreError> {
    if !db.exists() {
        return Err(StoreError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no database at {}", db.display()),
        )));
    }
    let source = super::open(db)?;
    let partial = target.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    let written = Connection::open(&partial)
        .map_err(StoreError::from)
        .and_then(|mut dest| {
            copy(&source, &mut dest, progress)?;
            // A backup is one self-contained file: no WAL beside it.
            dest.pragma_update(None, "journal_mode", "DELETE")?;
            Ok(())
        });
    if let Err(e) = written {
        // A failed copy (a full disk, say) leaves nothing half-written behind.
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, target)?;
    Ok(())
}

/// Replaces the database at `db` with the backup `source`. The caller holds the data-dir lock.
pub fn restore_from(
    source: &Path,
    db: &Path,
    progress: impl FnMut(Progress),
) -> Result<(), StoreError> {
    let from = Connection::open_with_flags(source, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let check: String = from.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(StoreError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} is not a healthy Broadsheet backup: {check}",
                source.display()
            ),
        )));
    }
    let mut to = super::open(db)?;
    copy(&from, &mut to, progress)?;
    Ok(())
}
