//! `spawn_app()`: the real `broadsheet` binary on a random port with a temporary data
//! directory, mail going to an SMTP listener the test owns, and a clock the test moves
//! (`serve --test-clock`, see `docs/testing.md`). The server takes any free port itself
//! (`--listen 127.0.0.1:0`) and says which in `<data-dir>/listening`: a port picked here and
//! released before the server bound it could be taken by another test in between.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::disk::SmallDisk;
use super::http::Client;
use super::smtp::SmtpSink;
pub use super::smtp::wait_for;

/// A running server. Killed when dropped; its log is printed if the test failed.
pub struct App {
    /// The port the server took at its first start; restarts ask for it again, so URLs the
    /// test holds stay good.
    pub port: u16,
    /// `http://127.0.0.1:<port>`: where the client connects, and the `--base-url` unless the
    /// test passes its own.
    pub base_url: String,
    /// `localhost:<port>`, the `--public-host`.
    pub public_host: String,
    pub smtp: SmtpSink,
    /// The small filesystem the data directory is on ([`spawn_app_on_small_disk`]); declared
    /// before `root` so it is unmounted (after the server is killed) before `root` is removed.
    disk: Option<SmallDisk>,
    /// The temporary directory: the data directory itself, or its parent on a small disk.
    root: tempfile::TempDir,
    data_dir: PathBuf,
    extra_args: Vec<String>,
    /// False: no `--smtp-url`, mail goes to the `.eml` outbox.
    use_smtp: bool,
    child: Option<Child>,
    log_path: PathBuf,
}

/// The built binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_broadsheet")
}

/// Starts a server with the test defaults: fast job polling, paid tier, mail to a fresh sink.
pub fn spawn_app() -> App {
    spawn_app_with(&[])
}

/// Like [`spawn_app`] with extra `serve` flags (e.g. `["--rate-limit-get", "3"]`).
pub fn spawn_app_with(extra: &[&str]) -> App {
    spawn_app_on(SmtpSink::start(), extra)
}

/// Like [`spawn_app_with`], mail going to `smtp`.
pub fn spawn_app_on(smtp: SmtpSink, extra: &[&str]) -> App {
    let root = temporary_dir();
    let data_dir = root.path().to_path_buf();
    launch(smtp, extra, root, data_dir, None)
}

/// Like [`spawn_app_with`] with the data directory in memory (`/dev/shm` where there is
/// one): fsync costs nothing there, so the server writes as steadily as on a fast disk,
/// without the stalls of this machine's shared one.
pub fn spawn_app_in_memory(extra: &[&str]) -> App {
    let shm = Path::new("/dev/shm");
    let root = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("broadsheet-test-")
            .tempdir_in(shm)
            .expect("temporary data dir in /dev/shm")
    } else {
        temporary_dir()
    };
    let data_dir = root.path().to_path_buf();
    launch(SmtpSink::start(), extra, root, data_dir, None)
}

/// Like [`spawn_app_on`] with the data directory on a tmpfs of `size_mb` MiB, so that
/// [`App::fill_disk`] fills it for real. The server's log stays outside it (the server
/// must be able to write its log on a full disk). `None` when the tmpfs cannot be mounted
/// (not root): the test is skipped after a loud notice, or fails under
/// `BROADSHEET_REQUIRE_MOUNT=1`.
pub fn spawn_app_on_small_disk(smtp: SmtpSink, extra: &[&str], size_mb: u32) -> Option<App> {
    let root = temporary_dir();
    let data_dir = root.path().join("data");
    std::fs::create_dir(&data_dir).expect("data dir mount point");
    let disk = SmallDisk::mount(&data_dir, size_mb)?;
    Some(launch(smtp, extra, root, data_dir, Some(disk)))
}

fn temporary_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("broadsheet-test-")
        .tempdir()
        .expect("temporary data dir")
}

fn launch(
    smtp: SmtpSink,
    extra: &[&str],
    root: tempfile::TempDir,
    data_dir: PathBuf,
    disk: Option<SmallDisk>,
) -> App {
    let log_path = root.path().join("server.log");
    // Port 0 until the server has taken one (see `App::start`).
    let port = 0;
    let mut app = App {
        port,
        base_url: format!("http://127.0.0.1:{port}"),
        public_host: format!("localhost:{port}"),
        smtp,
        disk,
        root,
        data_dir,
        extra_args: extra.iter().map(|s| s.to_string()).collect(),
        use_smtp: true,
        child: None,
        log_path,
    };
    app.start();
    app
}

/// A server on its embedded defaults for mail: no `--smtp-url`, so `.eml` files in the outbox.
pub fn spawn_app_outbox() -> App {
    let mut app = spawn_app_on(SmtpSink::start(), &[]);
    app.kill();
    app.use_smtp = false;
    app.start();
    app
}

/// A loopback port nothing listens on now. Another process may take it before it is used: only
/// for a port another program must be told before it starts (Postfix's, and the bounce
/// listener it forwards to), or one nothing should listen on; the server under test takes
/// its own ([`App::start`]).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl App {
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    /// Runs a CLI subcommand against this app's data dir; returns (exit code, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        run_cli(self.data_dir(), args)
    }

    /// [`App::cli`] with `input` on the command's standard input.
    pub fn cli_with_input(&self, args: &[&str], input: &[u8]) -> (i32, String, String) {
        run_cli_with_input(self.data_dir(), args, Some(input))
    }

    /// Starts the server: on port 0 the first time, where `--base-url` and `--public-host`
    /// name port 0 too and the server puts in the one it took; then on that port again.
    fn start(&mut self) {
        // The last run's file must not be read as this one's.
        match std::fs::remove_file(self.listening_path()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                panic!("removing {}: {e}", self.listening_path().display())
            }
            _ => {}
        }
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("server log file");
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--test-clock".into(),
            "--listen".into(),
            format!("127.0.0.1:{}", self.port),
            "--public-host".into(),
            self.public_host.clone(),
        ];
        // A test may name another base URL (https, for the cookies it gets); the client
        // still talks plain HTTP to `self.base_url`.
        if !self.extra_args.iter().any(|a| a == "--base-url") {
            args.extend(["--base-url".to_string(), self.base_url.clone()]);
        }
        if !self.extra_args.iter().any(|a| a == "--job-poll-ms") {
            args.extend(["--job-poll-ms".to_string(), "25".to_string()]);
        }
        // A test that needs another URL (smtps://, credentials) passes its own --smtp-url.
        if self.use_smtp && !self.extra_args.iter().any(|a| a == "--smtp-url") {
            args.push("--smtp-url".into());
            args.push(format!("smtp://127.0.0.1:{}", self.smtp.port));
        }
        args.extend(self.extra_args.iter().cloned());
        let child = Command::new(binary())
            .args(&args)
            .env("BROADSHEET_DATA_DIR", &self.data_dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("starting the broadsheet binary");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let address = self.wait_for_address(deadline);
        if self.port == 0 {
            self.port = address.port();
            self.base_url = format!("http://127.0.0.1:{}", self.port);
            self.public_host = format!("localhost:{}", self.port);
        }
        assert_eq!(address.port(), self.port, "the server took another port");
        self.wait_until_up(deadline);
    }

    fn listening_path(&self) -> PathBuf {
        self.data_dir.join("listening")
    }

    /// The `name` line of `<data-dir>/listening`, once the server has written it.
    fn listening(&self, name: &str) -> Option<SocketAddr> {
        let text = std::fs::read_to_string(self.listening_path()).ok()?;
        let value = text
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))?;
        Some(
            value
                .parse()
                .unwrap_or_else(|e| panic!("{name} {value:?} in the listening file: {e}")),
        )
    }

    /// The port of the bounce listener (`--bounce-listen`, e.g. `127.0.0.1:0`).
    pub fn bounce_port(&self) -> u16 {
        self.listening("bounces")
            .expect("a bounce listener (serve --bounce-listen)")
            .port()
    }

    /// Waits until the server says where it listens (or exits).
    fn wait_for_address(&mut self, deadline: Instant) -> SocketAddr {
        loop {
            self.panic_if_exited();
            if let Some(address) = self.listening("http") {
                return address;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not write {} within 30 s:\n{}",
                self.listening_path().display(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn panic_if_exited(&mut self) {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            panic!("the server exited with {status} at start:\n{}", self.log());
        }
    }

    fn wait_until_up(&mut self, deadline: Instant) {
        let client = Client::new(&self.base_url);
        loop {
            self.panic_if_exited();
            if let Ok(resp) = client.try_get("/up")
                && resp.status == 200
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not answer /up within 30 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Replaces the extra `serve` flags used from the next (re)start on.
    pub fn set_args(&mut self, extra: &[&str]) {
        self.extra_args = extra.iter().map(|s| s.to_string()).collect();
    }

    /// `kill -9`: no shutdown code runs.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same data dir and port (after [`App::kill`] or
    /// [`App::stop`]).
    pub fn restart(&mut self) {
        self.kill();
        self.start();
    }

    /// SIGTERM and wait: a graceful stop.
    pub fn stop(&mut self) {
        self.stop_within(Duration::from_secs(20));
    }

    /// SIGTERM, then waits up to `limit` for the process to exit by itself (it is killed
    /// after that). Returns how long it took, or `None` when it had to be killed.
    pub fn stop_within(&mut self, limit: Duration) -> Option<Duration> {
        let mut child = self.child.take()?;
        let asked = Instant::now();
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        while asked.elapsed() < limit {
            if let Ok(Some(_)) = child.try_wait() {
                return Some(asked.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// The server's "now": the system's time plus the offset the test has set.
    pub fn clock_now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now() + jiff::SignedDuration::from_millis(self.clock_offset_ms())
    }

    /// Sets the server's clock to `at` (from where it runs on), once the server says so.
    pub fn set_clock(&self, at: jiff::Timestamp) {
        let offset = at - jiff::Timestamp::now();
        self.set_clock_offset(offset.as_millis() as i64);
    }

    /// Moves the server's clock on by `by`, once the server says so. Work that became due
    /// (a scheduled issue, a retry) starts at once.
    pub fn advance_clock(&self, by: Duration) {
        self.set_clock_offset(self.clock_offset_ms() + by.as_millis() as i64);
    }

    /// Moves the server's clock on to the start of the next hour, where every rate-limit
    /// window of an hour or less begins: a test's counts then stay in one window.
    pub fn advance_clock_to_the_hour(&self) {
        let hour = self.clock_now().as_second().div_euclid(3600) * 3600;
        let next = jiff::Timestamp::from_second(hour + 3600).expect("an hour of this era");
        self.set_clock(next);
    }

    /// The offset in the `test-clock` file, 0 without one.
    fn clock_offset_ms(&self) -> i64 {
        match std::fs::read_to_string(self.data_dir.join("test-clock")) {
            Ok(text) => text.trim().parse().expect("test-clock holds milliseconds"),
            Err(_) => 0,
        }
    }

    /// Writes the offset to `test-clock` and waits for `test-clock.applied` to repeat it.
    fn set_clock_offset(&self, offset_ms: i64) {
        let text = format!("{offset_ms}\n");
        let partial = self.data_dir.join("test-clock.partial");
        std::fs::write(&partial, &text).expect("writing the test clock");
        std::fs::rename(&partial, self.data_dir.join("test-clock")).expect("setting the clock");
        let applied = self.data_dir.join("test-clock.applied");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(&applied).ok().as_deref() != Some(text.as_str()) {
            assert!(
                Instant::now() < deadline,
                "the server did not apply the clock offset {offset_ms} ms within 10 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Everything the server printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// A fresh HTTP client (its own cookie jar) for the base host.
    pub fn client(&self) -> Client {
        Client::new(&self.base_url)
    }

    /// A client for `<subdomain>.<public-host>`: connects to this server, sends that Host.
    pub fn site_client(&self, subdomain: &str) -> Client {
        Client::with_host(&self.base_url, &format!("{subdomain}.{}", self.public_host))
    }

    /// Opens the database read-only, for assertions the HTTP surface cannot make.
    pub fn db(&self) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_with_flags(
            self.data_dir().join("broadsheet.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .expect("opening the test database");
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn
    }

    /// Fills the small disk ([`spawn_app_on_small_disk`]) until the filesystem refuses.
    /// First the WAL is checkpointed and truncated to nothing: SQLite reuses the space of its
    /// WAL file, so only with an empty one does the next write need new space and fail.
    pub fn fill_disk(&self) {
        let disk = self
            .disk
            .as_ref()
            .expect("fill_disk needs spawn_app_on_small_disk");
        let conn = rusqlite::Connection::open(self.data_dir().join("broadsheet.db"))
            .expect("opening the test database");
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        let (busy, _, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .expect("checkpointing the WAL");
        assert_eq!(busy, 0, "the checkpoint could not finish");
        drop(conn);
        let wal = std::fs::metadata(self.data_dir().join("broadsheet.db-wal")).map(|m| m.len());
        assert!(matches!(wal, Ok(0)), "the WAL is not empty: {wal:?}");
        disk.fill();
        assert_eq!(disk.available(), 0, "the disk is not full");
    }

    /// Fills the small disk while the server keeps writing (a send, an import), when the
    /// WAL cannot be emptied first: instead a read transaction is held open, so SQLite cannot
    /// start its WAL over, every commit needs new space, and the first one past the WAL
    /// file's end fails. Drop the returned connection to let go of the snapshot.
    pub fn fill_disk_under_writes(&self) -> rusqlite::Connection {
        let disk = self
            .disk
            .as_ref()
            .expect("fill_disk_under_writes needs spawn_app_on_small_disk");
        let reader = rusqlite::Connection::open(self.data_dir().join("broadsheet.db"))
            .expect("opening the test database");
        reader.busy_timeout(Duration::from_secs(10)).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        reader
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                r.get::<_, i64>(0)
            })
            .expect("a snapshot");
        disk.fill();
        assert_eq!(disk.available(), 0, "the disk is not full");
        reader
    }

    /// Removes what [`App::fill_disk`] wrote: the disk has room again.
    pub fn free_disk(&self) {
        self.disk
            .as_ref()
            .expect("free_disk needs spawn_app_on_small_disk")
            .free();
    }

    /// One integer from the database.
    pub fn count(&self, sql: &str) -> i64 {
        self.db()
            .query_row(sql, [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "----- server log ({}) -----\n{}\n----- end of server log -----",
                self.log_path.display(),
                self.log()
            );
        }
    }
}

/// Runs `broadsheet <args>` with `--data-dir data_dir`.
pub fn run_cli(data_dir: &Path, args: &[&str]) -> (i32, String, String) {
    run_cli_with_input(data_dir, args, None)
}

/// [`run_cli`], writing `input` (when given) to the command's standard input.
pub fn run_cli_with_input(
    data_dir: &Path,
    args: &[&str],
    input: Option<&[u8]>,
) -> (i32, String, String) {
    let mut child = Command::new(binary())
        .args(args)
        .env("BROADSHEET_DATA_DIR", data_dir)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running the broadsheet binary");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().expect("piped stdin");
        // A command may stop reading early (a message past its cap): a broken pipe is fine.
        let _ = std::io::Write::write_all(&mut stdin, input);
    }
    let out = child
        .wait_with_output()
        .expect("waiting for the broadsheet binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
