//! A real Postfix relay for one test: a private instance with its own configuration
//! directory, queue and data directory in a temporary directory, listening on a free loopback
//! port, and stopped when dropped. It relays everything it takes to one next hop (the test's
//! SMTP sink), except mail for the bounce domain, which its transport map sends to another
//! port (a second sink, or the server's bounce listener). No DNS, no local delivery, no chroot,
//! short queue timers: a recipient the next hop refuses with a 5xx is bounced at once, and the
//! DSN Postfix writes goes out to the envelope sender straight away.
//!
//! Postfix's master runs as root (it drops privileges for its daemons), so the tests need root
//! and Debian's `postfix` package (`/usr/sbin/postfix`; installed with "No configuration", the
//! system's own instance never runs). Without them the build script (`build.rs`) marks the
//! tests `#[ignore]` (`cfg(has_postfix)`); run anyway, they print a loud notice and pass, unless
//! `BROADSHEET_REQUIRE_POSTFIX=1` (CI, which also makes the build script run them), where they
//! fail. Instances run side by side: each has its own ports, its own `queue_directory`
//! (sockets, `pid/master.pid`) and `data_directory` (`master.lock`), so nothing is shared
//! between them or with a system instance.

use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::app::free_port;
use super::run_tool;

const POSTFIX: &str = "/usr/sbin/postfix";

/// The name this relay gives itself (in its `Received:` headers and in its DSNs).
pub const HOSTNAME: &str = "relay.test";

/// Where a private instance sends what it takes.
#[derive(Debug, Clone)]
pub struct Routes {
    /// Every message goes to `127.0.0.1:<next_hop>`...
    pub next_hop: u16,
    /// ...except mail for this domain (the return paths' domain, so Postfix's own DSNs)...
    pub bounce_domain: String,
    /// ...which goes to `127.0.0.1:<bounce_port>`.
    pub bounce_port: u16,
}

/// A running private Postfix; stopped on drop.
pub struct Postfix {
    /// The loopback port its smtpd listens on.
    pub port: u16,
    root: tempfile::TempDir,
}

/// Why this machine cannot run a private Postfix, if it cannot.
fn missing() -> Option<String> {
    if !Path::new(POSTFIX).is_file() {
        return Some(format!("{POSTFIX} not found"));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("Postfix's master must run as root".into());
    }
    None
}

fn main_cf(root: &Path, routes: &Routes) -> String {
    let dir = root.display();
    let Routes {
        next_hop,
        bounce_domain,
        bounce_port,
    } = routes;
    format!(
        "# A private instance for one test (tests/it/support/postfix.rs).
compatibility_level = 3.6
queue_directory = {dir}/queue
data_directory = {dir}/data
mail_owner = postfix
setgid_group = postdrop
maillog_file = {dir}/maillog
maillog_file_prefixes = {dir}
myhostname = {HOSTNAME}
mydomain = {HOSTNAME}
myorigin = $myhostname
# Loopback only; no local delivery; every address is relayed.
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
mydestination =
local_recipient_maps =
alias_maps =
alias_database =
relayhost = [127.0.0.1]:{next_hop}
transport_maps = inline:{{ {bounce_domain}=smtp:[127.0.0.1]:{bounce_port} }}
smtp_dns_support_level = disabled
disable_dns_lookups = yes
# Report and retry at once: a refused recipient is bounced as soon as it is refused.
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
delay_warning_time = 0h
in_flow_delay = 0
"
    )
}

fn master_cf(port: u16) -> String {
    format!(
        "# service type private unpriv chroot wakeup maxproc command
127.0.0.1:{port} inet n - n - - smtpd
pickup    unix  n - n 60   1 pickup
cleanup   unix  n - n -    0 cleanup
qmgr      unix  n - n 300  1 qmgr
rewrite   unix  - - n -    - trivial-rewrite
bounce    unix  - - n -    0 bounce
defer     unix  - - n -    0 bounce
trace     unix  - - n -    0 bounce
verify    unix  - - n -    1 verify
flush     unix  n - n 1000 0 flush
proxymap  unix  - - n -    - proxymap
smtp      unix  - - n -    - smtp
relay     unix  - - n -    - smtp
showq     unix  n - n -    - showq
error     unix  - - n -    - error
retry     unix  - - n -    - error
discard   unix  - - n -    - discard
anvil     unix  - - n -    1 anvil
scache    unix  - - n -    1 scache
postlog   unix-dgram n - n - 1 postlogd
"
    )
}

impl Postfix {
    /// Starts a private instance routing as `routes` says, or returns `None` after a loud
    /// notice (a panic under CI) where this machine cannot run one.
    pub fn start(test: &str, routes: &Routes) -> Option<Postfix> {
        if let Some(why) = missing() {
            let message = format!(
                "\n\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                 !! POSTFIX TESTS SKIPPED ({test}): {why}.\n\
                 !! Needs root and Postfix: echo \"postfix postfix/main_mailer_type select \
                 No configuration\" | debconf-set-selections; apt-get install postfix\n\
                 !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            );
            if std::env::var("BROADSHEET_REQUIRE_POSTFIX").is_ok_and(|v| v == "1") {
                panic!("{message}");
            }
            eprintln!("{message}");
            return None;
        }
        let root = tempfile::tempdir().expect("a temporary directory for Postfix");
        // Postfix's daemons run as the `postfix` user: they must reach the directories.
        std::fs::set_permissions(
            root.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let config = root.path().join("config");
        for dir in [
            &config,
            &root.path().join("queue"),
            &root.path().join("data"),
        ] {
            std::fs::create_dir(dir).unwrap();
        }
        std::fs::write(config.join("main.cf"), main_cf(root.path(), routes)).unwrap();
        // The queue's subdirectories are made, with their owners, by `postfix start`; the
        // data directory (master.lock, caches) must belong to the mail owner beforehand.
        let data = root.path().join("data");
        run_tool("chown", &["postfix:postfix", data.to_str().unwrap()]).expect("chown");
        let mut postfix = Postfix { port: 0, root };
        // The free port found may be taken by another test before Postfix binds it: then
        // another one.
        for attempt in 1.. {
            postfix.port = free_port();
            std::fs::write(config.join("master.cf"), master_cf(postfix.port)).unwrap();
            match run_tool(POSTFIX, &["-c", config.to_str().unwrap(), "start"]) {
                Ok(()) => break,
                Err(_) if attempt < 3 && postfix.log().contains("Address already in use") => {}
                Err(why) => panic!("Postfix did not start: {why}\n{}", postfix.log()),
            }
        }
        let port = postfix.port;
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "Postfix does not listen on {port}:\n{}",
                postfix.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(postfix)
    }

    /// `--smtp-url` for a server that relays through this instance.
    pub fn smtp_url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// The instance's log so far (its `maillog_file`).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.path().join("maillog")).unwrap_or_default()
    }

    fn master_pid(&self) -> Option<libc::pid_t> {
        std::fs::read_to_string(self.root.path().join("queue/pid/master.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for Postfix {
    /// Shows the log when the test failed; stops the master (it stops its daemons) and waits
    /// until it is gone, so the temporary directory is removed under no running process.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "----- Postfix log -----\n{}\n----- end of Postfix log -----",
                self.log()
            );
        }
        let Some(pid) = self.master_pid() else { return };
        // SAFETY: kill has no memory preconditions; `pid` is this instance's master, read from
        // its own pid file.
        let alive = || unsafe { libc::kill(pid, 0) } == 0;
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if alive() {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}
