//! An exclusive lock on the data directory, held by `serve` for its whole life, so that
//! `restore` cannot swap the database from under a running server.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use super::StoreError;

/// Held while alive; the OS releases it when the process exits, even on `kill -9`.
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    pub fn acquire(data_dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir)?;
        let path = data_dir.join("broadsheet.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(DataDirLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(StoreError::Locked(path)),
            Err(TryLockError::Error(e)) => Err(StoreError::Io(e)),
        }
    }
}
