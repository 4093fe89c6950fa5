//! `broadsheet restore FILE`: replaces the database with a backup and copies back the images
//! kept beside it (`FILE.media`); refused while a server
//! holds the data directory. The database it replaces is copied beside it first
//! (`broadsheet.db.before-restore-<UTC time>`), so a restore of the wrong file loses nothing.
//! It then says whether the data directory's key file opens the relay passwords in the
//! backup.

use std::path::{Path, PathBuf};

use super::{EXIT_NOT_FOUND, Failure, PageProgress, open_migrated};
use crate::domain::delivery::relays;
use crate::domain::values::credentials::{self, CredentialKey};
use crate::store;

pub(super) fn run(data_dir: &Path, file: &Path) -> Result<(), Failure> {
    if !file.is_file() {
        return Err(Failure {
            code: EXIT_NOT_FOUND,
            message: format!("no backup file at {}", file.display()),
        });
    }
    let _lock = store::DataDirLock::acquire(data_dir)?;
    // Checked first: a file that is no healthy database is refused before any copy is made.
    let backup = store::CheckedBackup::open(file)?;
    let db = store::database_path(data_dir);
    let kept = keep(&db)?;
    let progress = PageProgress::new("restoring");
    if let Err(e) = backup.restore_to(&db, |p| progress.update(p)) {
        // The database is as it was (the copy is one transaction): the kept copy is not needed.
        if let Some(kept) = &kept {
            let _ = std::fs::remove_file(kept);
        }
        return Err(e.into());
    }
    progress.finish();
    println!("database restored from {}", file.display());
    match &kept {
        Some(kept) => println!("the database it replaced is kept at {}", kept.display()),
        None => println!("there was no database before, so none is kept"),
    }
    restore_media(data_dir, file)?;
    // A backup from an older version gets the newer migrations now.
    let conn = open_migrated(data_dir)?;
    println!("{}", key_note(data_dir, &conn)?);
    Ok(())
}

/// Copies the images kept beside the backup (`FILE.media`) into `<data-dir>/media`. Images
/// already there stay (a name is its content), so nothing the restored database names is lost.
fn restore_media(data_dir: &Path, file: &Path) -> Result<(), Failure> {
    let kept = store::media_copy_dir(file);
    if !kept.is_dir() {
        println!(
            "there is no image directory {} beside the backup; the images in {} are left as they are",
            kept.display(),
            store::media_dir(data_dir).display()
        );
        return Ok(());
    }
    let (copied, present) = store::copy_media(&kept, &store::media_dir(data_dir)).map_err(|e| {
        let failure = Failure::from(e);
        Failure {
            message: format!(
                "the database was restored, but the images could not be copied from {}: {}",
                kept.display(),
                failure.message
            ),
            ..failure
        }
    })?;
    println!(
        "{copied} image file(s) restored from {} ({present} were there already)",
        kept.display()
    );
    Ok(())
}

/// Copies the database at `db`, if there is one, to a new file beside it named for this
/// moment; returns where. A consistent copy (SQLite's backup, WAL included), like `backup`.
fn keep(db: &Path) -> Result<Option<PathBuf>, Failure> {
    if !db.is_file() {
        return Ok(None);
    }
    let stamp = crate::clock::now().strftime("%Y%m%dT%H%M%SZ").to_string();
    let name = db
        .file_name()
        .expect("the database has a file name")
        .to_string_lossy();
    // Two restores in one second: the second copy gets a number.
    let kept = (1..)
        .map(|n| {
            let suffix = if n == 1 {
                String::new()
            } else {
                format!("-{n}")
            };
            db.with_file_name(format!("{name}.before-restore-{stamp}{suffix}"))
        })
        .find(|path| !path.exists())
        .expect("a free name");
    let progress = PageProgress::new("keeping the current database");
    store::backup_to(db, &kept, |p| progress.update(p)).map_err(|e| {
        let failure = Failure::from(e);
        Failure {
            message: format!(
                "could not keep a copy of the current database at {} ({}); nothing was restored",
                kept.display(),
                failure.message
            ),
            ..failure
        }
    })?;
    progress.finish();
    Ok(Some(kept))
}

/// Whether the data directory's key file opens the relay passwords of the restored database:
/// they open only with the key the backup's server sealed them with, which is not in it.
fn key_note(data_dir: &Path, conn: &rusqlite::Connection) -> Result<String, Failure> {
    let path = credentials::key_file(data_dir);
    let sealed = relays::sealed_with_other_keys(conn, None)?;
    if sealed == 0 {
        return Ok(format!(
            "It holds no relay passwords; the key file {} (if any) is not needed for it.",
            path.display()
        ));
    }
    let key = match CredentialKey::load(&path) {
        Ok(key) => key,
        Err(problem) => {
            return Ok(format!(
                "{problem}; the {sealed} relay password(s) in it cannot be read until the right key file is there."
            ));
        }
    };
    let unreadable = relays::sealed_with_other_keys(conn, key.as_ref())?;
    Ok(if unreadable == 0 {
        format!(
            "The {sealed} relay password(s) in it open with the key file {}.",
            path.display()
        )
    } else {
        format!(
            "{unreadable} of the {sealed} relay password(s) in it do not open with {}{}: put the \
             key file the backup was made with there (mode 0600) before starting the server, or \
             the owners of those newsletters have to enter their relay passwords again.",
            path.display(),
            if key.is_none() {
                " (there is no key file)"
            } else {
                ""
            }
        )
    })
}
