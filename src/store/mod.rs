//! The SQLite store: connection pool, pragmas (and the [`Tuned`] guard that relaxes them for
//! a while), embedded migrations, the data-dir lock, online backup, and the job table's
//! writer side ([`jobs`]) through which the domain records work for the job runner. SQL that
//! belongs to one resource lives beside the domain function that runs it; this module owns
//! only what every caller shares.

mod backup;
pub mod jobs;
mod lock;
mod migrations;
pub mod sequence_entries;

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, Transaction, TransactionBehavior};

pub use backup::{CheckedBackup, backup_to, copy_media, media_copy_dir, media_dir};
pub use lock::DataDirLock;
pub use migrations::{MIGRATIONS, migrate};

pub type Pool = r2d2::Pool<SqliteConnectionManager>;
pub type PooledConnection = r2d2::PooledConnection<SqliteConnectionManager>;

/// Everything that can go wrong below the domain layer.
#[derive(Debug)]
pub enum StoreError {
    Sqlite(rusqlite::Error),
    Pool(r2d2::Error),
    Io(std::io::Error),
    /// Another process (a running `serve`) holds the data directory.
    Locked(PathBuf),
    /// The blocking task running the query was cancelled or panicked.
    Task(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Sqlite(e) => write!(f, "database error: {e}"),
            StoreError::Pool(e) => write!(f, "database pool error: {e}"),
            StoreError::Io(e) => write!(f, "i/o error: {e}"),
            StoreError::Locked(p) => write!(
                f,
                "the data directory is in use by a running server (lock {} is held); stop it first",
                p.display()
            ),
            StoreError::Task(e) => write!(f, "database task failed: {e}"),
        }
    }
}

impl std::error::Error for StoreError {}

impl StoreError {
    /// The write failed because the disk (or the filesystem of the data directory) is full:
    /// SQLite's SQLITE_FULL, or ENOSPC from a file the store writes. Nothing was saved, and
    /// the same write can succeed once space is freed, so every door answers it with its own
    /// clear message instead of a generic failure.
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                e.code == rusqlite::ErrorCode::DiskFull
            }
            StoreError::Io(e) => is_disk_full_io(e),
            _ => false,
        }
    }
}

/// ENOSPC (and EDQUOT, a full quota) from the operating system.
pub fn is_disk_full_io(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sqlite(e)
    }
}
impl From<r2d2::Error> for StoreError {
    fn from(e: r2d2::Error) -> Self {
        StoreError::Pool(e)
    }
}
impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::Io(e)
    }
}

/// The database file inside a data directory.
pub fn database_path(data_dir: &Path) -> PathBuf {
    data_dir.join("broadsheet.db")
}

/// Per-connection settings: WAL and `synchronous=FULL` so an acknowledged write survives a
/// crash or power loss, foreign keys enforced, and a busy timeout so writers queue.
fn configure(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(Duration::from_secs(10))?;
    Ok(())
}

/// Runs `work` with commits that do not wait for the disk (see [`Tuned`]), then restores FULL.
/// For bookkeeping whose loss in a power cut is harmless, such as rate-limit counts, so that a
/// read request does not pay an fsync; the next FULL commit of any connection makes it
/// durable. Only outside a transaction: the setting applies to the commit `work` makes itself.
pub fn without_fsync<T>(conn: &Connection, work: impl FnOnce(&Connection) -> T) -> T {
    debug_assert!(conn.is_autocommit(), "without_fsync inside a transaction");
    match Tuned::relaxed(conn) {
        Ok(relaxed) => work(&relaxed),
        // Setting a pragma cannot fail on an open connection; were it to, FULL stays in force.
        Err(_) => work(conn),
    }
}

/// A connection whose commits do not wait for the disk while the guard lives
/// (`synchronous=NORMAL`, which in WAL mode skips the fsync at commit but keeps the database
/// consistent), and, when asked, whose commits never run a WAL checkpoint. The guard is made
/// before the work and puts the service's settings back when dropped, a panic included, so a
/// relaxed connection never goes back to the pool.
pub struct Tuned<C: Deref<Target = Connection>> {
    conn: C,
    /// Commits do not wait for the disk (to be put back to FULL).
    relaxed: bool,
    /// Automatic checkpoints are off (to be turned back on).
    no_autocheckpoint: bool,
}

impl<C: Deref<Target = Connection>> Tuned<C> {
    /// The connection as the service configures it; the guard changes nothing yet.
    pub fn full(conn: C) -> Self {
        Tuned {
            conn,
            relaxed: false,
            no_autocheckpoint: false,
        }
    }

    /// Commits without fsync; on an error the connection keeps (and the guard restores) FULL.
    pub fn relaxed(conn: C) -> rusqlite::Result<Self> {
        let mut tuned = Self::full(conn);
        tuned.relaxed = true;
        tuned.conn.pragma_update(None, "synchronous", "NORMAL")?;
        Ok(tuned)
    }

    /// Also no automatic checkpoint inside a commit: the holder checkpoints when it suits it.
    pub fn without_autocheckpoint(mut self) -> rusqlite::Result<Self> {
        self.pause_autocheckpoint()?;
        Ok(self)
    }

    /// [`Tuned::without_autocheckpoint`] in place; on an error checkpoints stay on.
    pub fn pause_autocheckpoint(&mut self) -> rusqlite::Result<()> {
        self.no_autocheckpoint = true;
        self.conn.pragma_update(None, "wal_autocheckpoint", 0)
    }
}

impl<C: Deref<Target = Connection>> Drop for Tuned<C> {
    fn drop(&mut self) {
        if self.relaxed {
            let _ = self.conn.pragma_update(None, "synchronous", "FULL");
        }
        if self.no_autocheckpoint {
            // SQLite's default.
            let _ = self.conn.pragma_update(None, "wal_autocheckpoint", 1000);
        }
    }
}

impl<C: Deref<Target = Connection>> Deref for Tuned<C> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl<C: DerefMut<Target = Connection>> DerefMut for Tuned<C> {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }
}

/// Opens one configured connection (for the CLI and migrations).
pub fn open(path: &Path) -> Result<Connection, StoreError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut conn = Connection::open(path)?;
    configure(&mut conn)?;
    Ok(conn)
}

/// Runs `work`, a long run of commits on `conn` (an import), with the WAL checkpointed by a
/// thread of its own instead of inside those commits. `work` calls the function it is given
/// after each commit, and the checkpointer copies what is in the WAL into the database
/// (`wal_checkpoint(PASSIVE)`, which never blocks a writer) while `work` goes on with its next
/// batch: the database file's writes and fsync no longer sit between two batches. Commits
/// keep `synchronous=FULL` (their fsync of the WAL is what makes them durable); only when
/// the WAL is copied moves. A connection without a file (in memory) runs `work` as it is.
pub fn with_checkpointer<T>(
    conn: &mut Connection,
    work: impl FnOnce(&mut Connection, &dyn Fn()) -> T,
) -> T {
    let Some(path) = conn.path().filter(|p| !p.is_empty()).map(PathBuf::from) else {
        return work(conn, &|| {});
    };
    let Ok(checkpoints) = Connection::open(&path) else {
        return work(conn, &|| {});
    };
    // Checkpoints come back when the guard drops, a panic included. Were the pragma to fail,
    // commits would go on checkpointing themselves, as without this function.
    let mut tuned = Tuned::full(&mut *conn);
    let _ = tuned.pause_autocheckpoint();
    // One nudge waits at most: a checkpoint still running when several commits happened
    // copies them all in the next one.
    let (nudge, nudged) = std::sync::mpsc::sync_channel::<()>(1);
    let checkpointer = std::thread::spawn(move || {
        while nudged.recv().is_ok() {
            let _ = checkpoints.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        }
    });
    let value = work(&mut tuned, &|| {
        let _ = nudge.try_send(());
    });
    drop(tuned);
    drop(nudge);
    let _ = checkpointer.join();
    value
}

/// Opens the pool the server shares between requests and the job runner.
pub fn open_pool(path: &Path, size: u32) -> Result<Pool, StoreError> {
    // Creating the file (and switching it to WAL) once up front keeps pool start-up simple.
    drop(open(path)?);
    let manager = SqliteConnectionManager::file(path).with_init(configure);
    Ok(r2d2::Pool::builder().max_size(size).build(manager)?)
}

/// Runs `f` in a write transaction started with `BEGIN IMMEDIATE`, so a transaction that
/// reads and then writes never fails with SQLITE_BUSY half-way; commits when `f` succeeds.
#[track_caller]
pub fn write_tx<T, E>(
    conn: &mut Connection,
    f: impl FnOnce(&Transaction<'_>) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<StoreError>,
{
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| E::from(StoreError::from(e)))?;
    let began = std::time::Instant::now();
    let value = f(&tx)?;
    tx.commit().map_err(|e| E::from(StoreError::from(e)))?;
    let held = began.elapsed();
    if held >= LONG_HOLD {
        // Every other writer waited meanwhile (and gave up after the busy timeout): say
        // where, so a "database is locked" can be traced to its cause (a slow disk's fsync,
        // a transaction doing too much).
        eprintln!(
            "store: the write transaction of {} held the database for {:.1} s",
            std::panic::Location::caller(),
            held.as_secs_f64()
        );
    }
    Ok(value)
}

/// A write transaction held this long is logged.
const LONG_HOLD: Duration = Duration::from_secs(2);

/// The pool, usable from async handlers: runs blocking database work off the executor.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
}

impl Db {
    pub fn new(pool: Pool) -> Self {
        Db { pool }
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Checks out a connection and runs `f` on a blocking thread.
    pub async fn run<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&mut Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let pool = self.pool.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = pool.get().map_err(|e| E::from(StoreError::from(e)))?;
            f(&mut conn)
        })
        .await
        .map_err(|e| E::from(StoreError::Task(e.to_string())))?
    }

    /// Runs `prepare` on a blocking thread, then checks out a connection and runs `f` with
    /// what it made: slow work that needs no database (rendering an issue) holds no
    /// connection while it runs.
    pub async fn run_after<P, T, E, Prepare, F>(&self, prepare: Prepare, f: F) -> Result<T, E>
    where
        Prepare: FnOnce() -> Result<P, E> + Send + 'static,
        F: FnOnce(&mut Connection, P) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let pool = self.pool.clone();
        tokio::task::spawn_blocking(move || {
            let prepared = prepare()?;
            let mut conn = pool.get().map_err(|e| E::from(StoreError::from(e)))?;
            f(&mut conn, prepared)
        })
        .await
        .map_err(|e| E::from(StoreError::Task(e.to_string())))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relaxed setting lasts for `work` only: later commits on the connection wait for
    /// the disk again.
    #[test]
    fn without_fsync_restores_full_durability() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("t.db")).unwrap();
        let level = |conn: &Connection| -> i64 {
            conn.query_row("PRAGMA synchronous", [], |r| r.get(0))
                .unwrap()
        };
        let inside = without_fsync(&conn, level);
        assert_eq!((inside, level(&conn)), (1, 2), "NORMAL inside, FULL after");
    }

    fn pragma(conn: &Connection, name: &str) -> i64 {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .unwrap()
    }

    /// A panic in the middle of tuned work hands the connection back to the pool with the
    /// service's settings: the next checkout of the pool's only connection commits with FULL
    /// and checkpoints automatically.
    #[test]
    fn a_panic_inside_tuned_work_returns_the_connection_restored() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open_pool(&dir.path().join("t.db"), 1).unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let tuned = Tuned::relaxed(pool.get().unwrap())
                .and_then(Tuned::without_autocheckpoint)
                .unwrap();
            assert_eq!(pragma(&tuned, "synchronous"), 1, "NORMAL inside");
            assert_eq!(pragma(&tuned, "wal_autocheckpoint"), 0);
            panic!("the work fails half-way");
        }));
        assert!(panicked.is_err());
        let conn = pool.get().unwrap();
        assert_eq!(pragma(&conn, "synchronous"), 2, "FULL again");
        assert_eq!(pragma(&conn, "wal_autocheckpoint"), 1000);

        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            without_fsync(&conn, |_| panic!("the work fails half-way"))
        }));
        assert!(panicked.is_err());
        assert_eq!(
            pragma(&conn, "synchronous"),
            2,
            "FULL after without_fsync too"
        );
    }

    /// An import's commits run without checkpoints of their own while the checkpointer copies
    /// the WAL beside them; afterwards, a panic in the work included, the connection
    /// checkpoints itself again and stays FULL.
    #[test]
    fn with_checkpointer_copies_the_wal_and_gives_the_connection_back_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(&dir.path().join("t.db")).unwrap();
        conn.execute("CREATE TABLE t (x)", []).unwrap();
        let rows = with_checkpointer(&mut conn, |conn, committed| {
            assert_eq!(pragma(conn, "wal_autocheckpoint"), 0, "paused inside");
            assert_eq!(pragma(conn, "synchronous"), 2, "commits stay FULL");
            for x in 0..50 {
                conn.execute("INSERT INTO t VALUES (?1)", [x]).unwrap();
                committed();
            }
            conn.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
                .unwrap()
        });
        assert_eq!(rows, 50);
        assert_eq!(pragma(&conn, "wal_autocheckpoint"), 1000);
        // The checkpointer has finished (joined): a full checkpoint now finds nothing left
        // that another connection holds, and every committed row is there.
        let (busy, _, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!(busy, 0);

        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_checkpointer(&mut conn, |_, _| panic!("the import fails half-way"))
        }));
        assert!(panicked.is_err());
        assert_eq!(
            pragma(&conn, "wal_autocheckpoint"),
            1000,
            "after a panic too"
        );
    }

    #[test]
    fn disk_full_is_sqlite_full_or_enospc() {
        let sqlite = |code| {
            StoreError::from(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(code),
                None,
            ))
        };
        assert!(sqlite(rusqlite::ffi::SQLITE_FULL).is_disk_full());
        assert!(!sqlite(rusqlite::ffi::SQLITE_BUSY).is_disk_full());
        // ENOSPC, as Linux reports it.
        assert!(StoreError::from(std::io::Error::from_raw_os_error(28)).is_disk_full());
        assert!(
            !StoreError::from(std::io::Error::from(std::io::ErrorKind::NotFound)).is_disk_full()
        );
    }
}
