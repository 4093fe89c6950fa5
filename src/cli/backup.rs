//! `broadsheet backup FILE`: a consistent copy of the database, even while serve runs, and
//! the uploaded images (`<data-dir>/media`) copied to the directory `FILE.media`. The
//! copy does not hold the key that opens the relay passwords in it (`credentials.key`), so
//! the command says where that file is and how to carry it.

use std::path::Path;

use super::{EXIT_NOT_FOUND, Failure, PageProgress, existing_database, usage};
use crate::domain::values::credentials;
use crate::store;

pub(super) fn run(data_dir: &Path, file: &Path) -> Result<(), Failure> {
    let db = existing_database(data_dir)?;
    if file.exists() {
        return Err(usage(format!(
            "{} already exists; choose a new file",
            file.display()
        )));
    }
    let media_copy = store::media_copy_dir(file);
    if media_copy.exists() {
        return Err(usage(format!(
            "{} already exists; choose a new file",
            media_copy.display()
        )));
    }
    // Checked here: the copy is first written beside the file under another name, which an
    // error from the store would name instead.
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Failure {
            code: EXIT_NOT_FOUND,
            message: format!(
                "cannot write {}: there is no directory {}",
                file.display(),
                dir.display()
            ),
        });
    }
    let progress = PageProgress::new("backing up");
    store::backup_to(&db, file, |p| progress.update(p)).map_err(|e| {
        let failure = Failure::from(e);
        Failure {
            message: format!(
                "could not write the backup to {}: {}",
                file.display(),
                failure.message
            ),
            ..failure
        }
    })?;
    progress.finish();
    println!("backup written to {}", file.display());
    // After the database: an image uploaded meanwhile is copied without its record (and
    // ignored), rather than a record copied without its image.
    let (copied, _) = store::copy_media(&store::media_dir(data_dir), &media_copy).map_err(|e| {
        let failure = Failure::from(e);
        Failure {
            message: format!(
                "the database was backed up, but the images could not be copied to {}: {}",
                media_copy.display(),
                failure.message
            ),
            ..failure
        }
    })?;
    if copied > 0 {
        println!(
            "{copied} image file(s) copied to {} (keep that directory with the backup file)",
            media_copy.display()
        );
    } else {
        println!("there are no images to copy");
    }
    println!("{}", key_note(data_dir));
    Ok(())
}

/// What to do with the key file: the passwords of newsletters' own relays in the copy open
/// only with it, and together they reveal them.
fn key_note(data_dir: &Path) -> String {
    let key = credentials::key_file(data_dir);
    if key.is_file() {
        format!(
            "The relay passwords in this backup are encrypted with the key file {} (it is not in \
             the backup): carry a copy of that file with your backups, but keep it apart from \
             them (another place or medium), since the two together reveal the passwords. \
             Without it, a restored server cannot read them and newsletters with their own relay \
             need their passwords entered again.",
            key.display()
        )
    } else {
        format!(
            "There is no key file at {} yet (the server makes it when it first starts); once \
             there is, carry a copy of it with your backups, kept apart from them.",
            key.display()
        )
    }
}
