//! `broadsheet restore FILE`: replaces the database with a backup; refused while a server
//! holds the data directory.

use std::path::Path;

use super::{EXIT_NOT_FOUND, Failure, PageProgress, open_migrated};
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
    open_migrated(data_dir)?;
    println!("database restored from {}", file.display());
    Ok(())
}
