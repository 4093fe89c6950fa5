//! Online backup and restore with SQLite's backup API: a consistent copy even while the
//! server keeps writing.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use rusqlite::backup::{Backup, Progress};

use super::StoreError;

/// Pages copied per step: how often progress is reported.
const PAGES_PER_STEP: std::ffi::c_int = 256;

/// Copies `from` into `to` from one read snapshot of `from`, reporting progress per step.
///
/// Left to itself, each backup step opens and closes its own read transaction, and a write by
/// another connection between two steps (the running server's) restarts the copy from the
/// first page: under steady writes a backup never finished. Holding one read transaction
/// open for the whole copy makes every step read the same snapshot, so the server's writes
/// neither restart it nor appear in it half-way. Meanwhile the server keeps writing; only its
/// WAL cannot be reset, so it grows by what is written during the copy.
fn copy(
    from: &Connection,
    to: &mut Connection,
    progress: impl FnMut(Progress),
) -> Result<(), StoreError> {
    // BEGIN takes no snapshot by itself; the first read does.
    from.execute_batch("BEGIN")?;
    let copied = from
        .query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
        .map_err(StoreError::from)
        .and_then(|()| copy_steps(from, to, progress));
    // Ends the read transaction (nothing was written through `from`).
    let ended = from.execute_batch("COMMIT");
    copied?;
    ended.map_err(StoreError::from)
}

fn copy_steps(
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

/// A backup file opened for a restore, once SQLite has found it healthy.
pub struct CheckedBackup(Connection);

impl CheckedBackup {
    /// Opens `source` read-only and checks it (`PRAGMA quick_check`): a file that is not a
    /// healthy database is refused here, before anything is touched.
    pub fn open(source: &Path) -> Result<CheckedBackup, StoreError> {
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
        Ok(CheckedBackup(from))
    }

    /// Replaces the database at `db` with this backup. The caller holds the data-dir lock.
    /// SQLite's backup writes `db` in one transaction: a copy that fails leaves it as it was.
    pub fn restore_to(&self, db: &Path, progress: impl FnMut(Progress)) -> Result<(), StoreError> {
        let mut to = super::open(db)?;
        copy(&self.0, &mut to, progress)
    }
}

/// The images directory of a data directory (`<data-dir>/media`, docs/images.md).
pub fn media_dir(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("media")
}

/// Where `broadsheet backup FILE` puts the images beside the database copy: `FILE.media`.
pub fn media_copy_dir(backup_file: &Path) -> std::path::PathBuf {
    let mut name = backup_file.as_os_str().to_owned();
    name.push(".media");
    std::path::PathBuf::from(name)
}

/// Copies the image files of directory `from` into `to` (made when missing): a hard link
/// where the file system allows, else written under a temporary name and renamed, so a file
/// in `to` is always whole. Files already in
/// `to` are left alone: a name is its content's hash. Temporary files (a leading dot) and
/// anything that is not a plain file are skipped. Returns how many files were copied and
/// how many were there already. A missing `from` copies nothing.
pub fn copy_media(from: &Path, to: &Path) -> Result<(usize, usize), StoreError> {
    if !from.is_dir() {
        return Ok((0, 0));
    }
    std::fs::create_dir_all(to)?;
    let (mut copied, mut present) = (0, 0);
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let text = name.to_string_lossy();
        if text.starts_with('.') || !entry.file_type()?.is_file() {
            continue;
        }
        let target = to.join(&name);
        if target.is_file() {
            present += 1;
            continue;
        }
        // An image file never changes once written (its name is its content), so on the same
        // file system a hard link is a whole copy that costs no space: daily backups of a
        // large library stay cheap. Elsewhere it is copied.
        if std::fs::hard_link(entry.path(), &target).is_ok() {
            copied += 1;
            continue;
        }
        let partial = to.join(format!(".{text}.partial"));
        let written = std::fs::copy(entry.path(), &partial)
            .and_then(|_| std::fs::File::open(&partial)?.sync_all())
            .and_then(|()| std::fs::rename(&partial, &target));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&partial);
            return Err(e.into());
        }
        copied += 1;
    }
    Ok((copied, present))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a busy server does to a backup, made certain: a write by another connection
    /// between every two steps. It must neither restart the copy nor appear in it.
    #[test]
    fn media_copies_keep_what_is_there_and_skip_partial_files() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        assert_eq!(copy_media(&from, &to).unwrap(), (0, 0));
        std::fs::create_dir_all(&from).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        std::fs::write(from.join("a.png"), b"a").unwrap();
        std::fs::write(from.join("b.jpg"), b"b").unwrap();
        std::fs::write(from.join(".c.png.1.partial"), b"half").unwrap();
        std::fs::write(to.join("b.jpg"), b"b").unwrap();
        assert_eq!(copy_media(&from, &to).unwrap(), (1, 1));
        let mut names: Vec<String> = std::fs::read_dir(&to)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["a.png", "b.jpg"]);
        assert_eq!(
            media_copy_dir(Path::new("/x/copy.db")),
            Path::new("/x/copy.db.media")
        );
    }

    #[test]
    fn writes_between_steps_neither_restart_the_copy_nor_enter_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("broadsheet.db");
        let writer = super::super::open(&db).unwrap();
        writer
            .execute_batch(
                "CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 8000)
                 INSERT INTO t (body) SELECT hex(randomblob(500)) FROM n;",
            )
            .unwrap();
        let target = dir.path().join("copy.db");
        let mut remaining = Vec::new();
        backup_to(&db, &target, |p| {
            remaining.push(p.remaining);
            assert!(
                remaining.len() < 100,
                "the copy keeps restarting: {remaining:?}"
            );
            writer
                .execute(
                    "INSERT INTO t (body) VALUES ('written during the copy')",
                    [],
                )
                .unwrap();
        })
        .unwrap();
        assert!(remaining.len() > 4, "{remaining:?}");
        assert!(
            remaining.windows(2).all(|w| w[1] < w[0]),
            "progress went back: {remaining:?}"
        );
        let copy = Connection::open(&target).unwrap();
        let check: String = copy
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let rows: i64 = copy
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            rows, 8000,
            "the copy is the database as it was when it started"
        );
    }
}
