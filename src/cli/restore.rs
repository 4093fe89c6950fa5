//! `broadsheet restore FILE`: replaces the database with a backup; refused while a server
//! holds the data directory. It then says whether the data directory's key file opens the
//! relay passwords in the backup.

use std::path::Path;

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
    let progress = PageProgress::new("restoring");
    store::restore_from(file, &store::database_path(data_dir), |p| {
        progress.update(p)
    })?;
    progress.finish();
    // A backup from an older version gets the newer migrations now.
    let conn = open_migrated(data_dir)?;
    println!("database restored from {}", file.display());
    println!("{}", key_note(data_dir, &conn)?);
    Ok(())
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
