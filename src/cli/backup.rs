//! `broadsheet backup FILE`: a consistent copy of the database, even while serve runs.

use std::path::Path;

use super::{Failure, PageProgress, existing_database, usage};
use crate::store;

pub(super) fn run(data_dir: &Path, file: &Path) -> Result<(), Failure> {
    let db = existing_database(data_dir)?;
    if file.exists() {
        return Err(usage(format!(
            "{} already exists; choose a new file",
            file.display()
        )));
    }
    let progress = PageProgress::new("backing up");
    store::backup_to(&db, file, |p| progress.update(p))?;
    progress.finish();
    println!("backup written to {}", file.display());
    Ok(())
}
