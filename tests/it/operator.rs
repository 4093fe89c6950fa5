//! The operator's commands run as the built binary: migrate, backup and restore (online, while
//! the server takes writes), openapi, and the embedded `.eml` outbox.

use std::time::Duration;

use crate::support::*;

#[test]
fn migrate_applies_once() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli(dir.path(), &["migrate"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("applied 0001_foundation"), "{out}");
    let (code, out, _) = run_cli(dir.path(), &["migrate"]);
    assert_eq!(code, 0);
    assert!(out.contains("up to date"), "{out}");
    assert!(dir.path().join("broadsheet.db").is_file());
}

#[test]
fn openapi_command_prints_the_served_document() {
    let (code, out, err) = run_cli(tempfile::tempdir().unwrap().path(), &["openapi"]);
    assert_eq!(code, 0, "{err}");
    let printed: Value = serde_json::from_str(&out).expect("JSON");
    let app = spawn_app();
    let served = app.client().get("/api/v1/openapi.json").json();
    assert_eq!(printed, served);
    assert!(printed["openapi"].as_str().unwrap().starts_with("3."));
}

#[test]
fn backup_while_serving_and_restore_when_stopped() {
    let mut app = spawn_app();
    let owner = onboard(&app, "Backup Times");

    // Writes keep coming while the backup runs.
    let (first_written, writing) = std::sync::mpsc::channel();
    let writer = {
        let (base, key) = (app.base_url.clone(), owner.key.clone());
        std::thread::spawn(move || {
            let client = Client::new(&base);
            let mut created = 0;
            for i in 0..60 {
                let resp = client.api(
                    "POST",
                    "/subscribers",
                    &key,
                    Some(&json!({"email": format!("reader{i}@example.com")})),
                );
                assert_eq!(resp.status, 201, "{}", resp.body);
                created += 1;
                let _ = first_written.send(());
            }
            created
        })
    };
    writing.recv().expect("the writer started");
    let backup = app.data_dir().join("copy.db");
    let (code, out, err) = app.cli(&["backup", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("backup written"), "{out}");
    let created = writer.join().unwrap();
    assert_eq!(created, 60);

    // The copy is a consistent, complete database of its moment.
    let copy = rusqlite::Connection::open(&backup).unwrap();
    let check: String = copy
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let copied: i64 = copy
        .query_row("SELECT count(*) FROM subscribers", [], |r| r.get(0))
        .unwrap();
    assert!((0..=60).contains(&copied));
    let users: i64 = copy
        .query_row("SELECT count(*) FROM users", [], |r| r.get(0))
        .unwrap();
    assert_eq!(users, 1);
    drop(copy);

    // Backing up over an existing file is refused.
    let (code, _, err) = app.cli(&["backup", backup.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");

    // Restore refuses while the server holds the data directory.
    let (code, _, err) = app.cli(&["restore", backup.to_str().unwrap()]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("running server"), "{err}");
    assert_eq!(app.count("SELECT count(*) FROM subscribers"), 60);

    // Stopped: restore brings the database back to the backup's moment.
    app.stop();
    let (code, out, err) = app.cli(&["restore", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(app.count("SELECT count(*) FROM subscribers"), copied);
    app.restart();
    let me = app.client().api("GET", "/newsletter", &owner.key, None);
    me.expect(200);
    assert_eq!(me.json()["data"]["subscriber_count"], copied);

    // A file that is not a database is refused and changes nothing.
    let junk = app.data_dir().join("junk.db");
    std::fs::write(&junk, b"this is not sqlite").unwrap();
    app.stop();
    let (code, _, err) = app.cli(&["restore", junk.to_str().unwrap()]);
    assert_ne!(code, 0, "{err}");
    assert_eq!(app.count("SELECT count(*) FROM subscribers"), copied);
    let (code, _, _) = app.cli(&["restore", "/no/such/file.db"]);
    assert_eq!(code, 3);
}

#[test]
fn without_smtp_mail_goes_to_the_outbox_and_the_log() {
    let app = spawn_app_outbox();
    let client = app.client();
    let email = unique_email("outbox");
    let resp = client.submit(
        "/signup",
        "/signup",
        &[
            ("user[email_address]", &email),
            ("user[password]", PASSWORD),
            ("user[password_confirmation]", PASSWORD),
        ],
    );
    assert_eq!(resp.redirect(), "/email_confirmation_pending");
    let outbox = app.data_dir().join("outbox");
    let file = wait_for("an .eml in the outbox", Duration::from_secs(20), || {
        std::fs::read_dir(&outbox)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "eml"))
    });
    let eml = Received {
        from: String::new(),
        to: vec![],
        data: std::fs::read(&file).unwrap(),
        tls: false,
    };
    assert_eq!(eml.header("To").unwrap().trim_matches(['<', '>']), email);
    let link = link_containing(&eml.text(), "/email_confirmations/").expect("link in the .eml");
    let log = wait_for("the outbox log line", Duration::from_secs(5), || {
        let log = app.log();
        log.contains(file.file_name().unwrap().to_str().unwrap())
            .then_some(log)
    });
    assert!(log.contains(&link), "the log names the link:\n{log}");
    assert_eq!(client.get(&link).redirect(), "/newsletters");
    assert!(app.smtp.messages().is_empty());
}

#[test]
fn cli_reports_bad_usage_and_unknown_newsletters() {
    let app = spawn_app();
    let owner = onboard(&app, "Cli Chronicle");
    let (code, _, err) = app.cli(&["tier", "no-such-newsletter", "paid"]);
    assert_eq!(code, 3, "{err}");
    let (code, _, err) = app.cli(&["tier", &owner.subdomain, "platinum"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = app.cli(&["tier", &owner.subdomain, "paid"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("paid"));
    let (code, _, _) = app.cli(&["status", &owner.subdomain, "paused"]);
    assert_eq!(code, 0);
    let data = owner.get("/newsletter").json()["data"].clone();
    assert_eq!(
        (data["tier"].as_str(), data["status"].as_str()),
        (Some("paid"), Some("paused"))
    );
    let (code, _, _) = app.cli(&["no-such-command"]);
    assert_eq!(code, 2);
}

#[test]
fn install_script_stages_binary_unit_and_data_dir() {
    let stage = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/install.sh");
    let out = std::process::Command::new("bash")
        .args([
            script,
            "--binary",
            crate::support::app::binary(),
            "--destdir",
            stage.path().to_str().unwrap(),
            "--prefix",
            "/opt/broadsheet",
            "--user",
            "newsletters",
            "--base-url",
            "https://news.example.com",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("[1] install -D -m 0755"),
        "each step is printed:\n{stdout}"
    );
    let bin = stage.path().join("opt/broadsheet/bin/broadsheet");
    let version = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("broadsheet "));
    let unit = std::fs::read_to_string(stage.path().join("etc/systemd/system/broadsheet.service"))
        .unwrap();
    assert!(unit.contains("ExecStart=/opt/broadsheet/bin/broadsheet serve"));
    assert!(unit.contains("User=newsletters"));
    // A stop waits for the messages in flight (bounded by the 30 s SMTP timeout) and 10 s
    // of web requests; systemd must not kill -9 it before that.
    assert!(unit.contains("TimeoutStopSec=60"), "{unit}");
    // Room for --max-connections (4,096 by default) and the rest (docs/operations.md).
    assert!(unit.contains("\nLimitNOFILE=65536\n"), "{unit}");
    let env = std::fs::read_to_string(stage.path().join("etc/broadsheet/broadsheet.env")).unwrap();
    assert!(env.contains("BROADSHEET_BASE_URL=https://news.example.com"));
    assert!(stage.path().join("var/lib/broadsheet").is_dir());

    // The daily backup: a timer, a oneshot unit as the service's user, and the script it runs.
    let timer = std::fs::read_to_string(
        stage
            .path()
            .join("etc/systemd/system/broadsheet-backup.timer"),
    )
    .unwrap();
    assert!(timer.contains("OnCalendar=daily") && timer.contains("Persistent=true"));
    let backup_unit = std::fs::read_to_string(
        stage
            .path()
            .join("etc/systemd/system/broadsheet-backup.service"),
    )
    .unwrap();
    assert!(
        backup_unit.contains(
            "ExecStart=/opt/broadsheet/lib/broadsheet/daily-backup /var/lib/broadsheet/backups 14"
        ),
        "{backup_unit}"
    );
    assert!(backup_unit.contains("User=newsletters"));
    daily_backup_keeps_the_newest(
        &stage
            .path()
            .join("opt/broadsheet/lib/broadsheet/daily-backup"),
    );

    // A dry run changes nothing; unknown flags are refused.
    let dry = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("bash")
        .args([
            script,
            "--dry-run",
            "--no-build",
            "--destdir",
            dry.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(std::fs::read_dir(dry.path()).unwrap().count(), 0);
    let out = std::process::Command::new("bash")
        .args([script, "--bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Runs the installed daily-backup script on a real database with three older backups beside
/// it and KEEP 2: a new whole backup is written, the newest older one stays, the rest go (with
/// their images), and files that are not backups are left alone.
fn daily_backup_keeps_the_newest(script: &std::path::Path) {
    let data = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli(data.path(), &["migrate"]);
    assert_eq!(code, 0, "{out}{err}");
    let backups = data.path().join("backups");
    std::fs::create_dir_all(&backups).unwrap();
    let older = [
        "broadsheet-20240101T000000Z.db",
        "broadsheet-20240102T000000Z.db",
        "broadsheet-20240103T000000Z.db",
    ];
    for name in older.iter().chain(&["notes.txt"]) {
        std::fs::write(backups.join(name), "old").unwrap();
    }
    // Each older backup has its images beside it; they go with it.
    for name in older {
        let images = backups.join(format!("{name}.media"));
        std::fs::create_dir_all(&images).unwrap();
        std::fs::write(images.join(format!("{}.png", "a".repeat(64))), "png").unwrap();
    }
    let out = std::process::Command::new("sh")
        .arg(script)
        .arg(&backups)
        .arg("2")
        .env("BROADSHEET_DATA_DIR", data.path())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    let mut left: Vec<String> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left.len(), 4, "{left:?}\n{said}");
    assert_eq!(left[0], older[2], "{left:?}");
    assert_eq!(left[1], format!("{}.media", older[2]), "{left:?}");
    assert_eq!(left[3], "notes.txt");
    let fresh = backups.join(&left[2]);
    assert!(left[2].starts_with("broadsheet-2") && left[2].ends_with("Z.db"));
    let head = std::fs::read(&fresh).unwrap();
    assert!(
        head.starts_with(b"SQLite format 3\0"),
        "a whole SQLite file"
    );
    assert!(
        said.contains("removed old backup broadsheet-20240101T000000Z.db"),
        "{said}"
    );
}

/// Runs `broadsheet <args>` on `data_dir` and waits at most `bound` for it; `None` if it did
/// not finish in time (it is killed then). Its exit code and its stdout and stderr together.
fn cli_within(data_dir: &std::path::Path, args: &[&str], bound: Duration) -> Option<(i32, String)> {
    let mut child = std::process::Command::new(crate::support::app::binary())
        .args(args)
        .env("BROADSHEET_DATA_DIR", data_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running the broadsheet binary");
    let deadline = std::time::Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return Some((status.code().unwrap_or(-1), text));
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A backup used to restart from its first page whenever the server wrote between
/// two of its steps, and under steady writes it never finished.
#[test]
fn backup_finishes_while_the_api_writes_without_pause() {
    // In memory, so that the server writes steadily: on this machine's disk an fsync now
    // and then stalls every writer for long enough to let even the old backup through.
    let app = spawn_app_in_memory(&["--rate-limit-write", "1000000", "--rate-limit-bulk", "1000"]);
    let owner = onboard(&app, "Busy Bulletin");
    // About 60 MB (80,000 subscribers), so the copy takes over 200 steps. The old backup
    // finished whenever the writers paused for as long as a whole copy takes: at 15-30 MB it
    // usually did within 60 s on this 2-core machine, at 60 MB it did not in 3 runs of 5 (the
    // unit test in `store::backup` shows the restarts for certain).
    for chunk in 0..80 {
        let entries: Vec<Value> = (0..1000)
            .map(|i| {
                json!({
                    "email": format!("seed{chunk}-{i}@example.com"),
                    "name": format!("Seeded Reader {chunk}-{i}"),
                    "tags": ["seeded", format!("chunk-{chunk}")],
                })
            })
            .collect();
        let resp = owner.post("/subscribers/bulk_create", &json!({"subscribers": entries}));
        resp.expect(200);
        assert_eq!(resp.json()["created"], 1000);
    }

    // Two writers create subscribers as fast as the server takes them until told to stop
    // (more writers on 2 cores leave the server more pauses, not fewer).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (base, key, stop) = (app.base_url.clone(), owner.key.clone(), stop.clone());
            std::thread::spawn(move || {
                let client = Client::new(&base);
                let mut created = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let resp = client.api(
                        "POST",
                        "/subscribers",
                        &key,
                        Some(&json!({"email": format!("writer{w}-{created}@example.com")})),
                    );
                    assert_eq!(resp.status, 201, "{}", resp.body);
                    created += 1;
                }
                created
            })
        })
        .collect();
    let count = || app.count("SELECT count(*) FROM subscribers");
    let start = count();
    wait_for("the writers to get going", Duration::from_secs(20), || {
        (count() >= start + 30).then_some(())
    });

    let before = count();
    let backup = app.data_dir().join("busy.db");
    let started = std::time::Instant::now();
    let finished = cli_within(
        app.data_dir(),
        &["backup", backup.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let took = started.elapsed();
    let during = count() - before;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let (code, output) = finished.unwrap_or_else(|| {
        panic!("the backup did not finish within 60 s while the API wrote ({during} rows)")
    });
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("backup written"), "{output}");
    eprintln!(
        "backup of {} bytes took {took:?} while the API wrote {during} rows ({:.0}/s); {written} in all",
        std::fs::metadata(&backup).unwrap().len(),
        during as f64 / took.as_secs_f64()
    );
    assert!(during > 0, "the API kept writing during the backup");

    let copy = rusqlite::Connection::open(&backup).unwrap();
    let check: String = copy
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let copied: i64 = copy
        .query_row("SELECT count(*) FROM subscribers", [], |r| r.get(0))
        .unwrap();
    assert!(
        copied >= before && copied <= before + during,
        "{copied} rows in the backup, {before} before it started, {during} written during it"
    );
    let journal: String = copy
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal, "delete", "one self-contained file");
}

/// Runs `broadsheet <args>` with a data directory that does not exist yet and expects a usage
/// error (exit 2) whose message contains each of `expected`, with nothing created. A command
/// that wrongly accepted its arguments (a server that started) is killed after 20 s.
fn refused_as_usage(args: &[&str], expected: &[&str]) {
    let root = tempfile::tempdir().unwrap();
    let data_dir = root.path().join("data");
    let (code, output) = cli_within(&data_dir, args, Duration::from_secs(20))
        .unwrap_or_else(|| panic!("{args:?} was accepted and kept running"));
    assert_eq!(code, 2, "{args:?}: {output}");
    for text in expected {
        assert!(
            output.contains(text),
            "{args:?} should say {text:?}:\n{output}"
        );
    }
    assert!(!data_dir.exists(), "{args:?} created the data directory");
}

#[test]
fn enum_valued_arguments_refuse_unknown_values_and_list_the_possible_ones() {
    refused_as_usage(
        &["serve", "--default-tier", "gold"],
        &["gold", "possible values: free, pending, paid"],
    );
    refused_as_usage(
        &["tier", "some-newsletter", "gold"],
        &["gold", "possible values: free, pending, paid"],
    );
    refused_as_usage(
        &["status", "some-newsletter", "nope"],
        &["nope", "possible values: active, paused, cancelled"],
    );
    refused_as_usage(
        &["tracking", "some-newsletter", "maybe"],
        &["maybe", "possible values: on, off"],
    );
}

#[test]
fn serve_refuses_malformed_addresses_before_touching_the_data_dir() {
    for (flag, value) in [
        ("--listen", "8080"),
        ("--listen", "localhost"),
        ("--listen", "127.0.0.1:99999"),
        ("--base-url", "news.example.com"),
        ("--base-url", "ftp://news.example.com"),
        ("--base-url", "https://news.example.com/?x=1"),
        ("--public-host", "https://news.example.com"),
        ("--public-host", "news.example.com/"),
        ("--public-host", "news.example.com:port"),
    ] {
        refused_as_usage(&["serve", flag, value], &[flag, value]);
    }
}

#[test]
fn serve_reads_its_mail_and_dns_flags_before_touching_the_data_dir() {
    for args in [
        &["serve", "--smtp-url", "ftp://mail.example.com"][..],
        &["serve", "--dns-server", "not-an-address"][..],
    ] {
        let root = tempfile::tempdir().unwrap();
        let data_dir = root.path().join("data");
        let (code, output) = cli_within(&data_dir, args, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{args:?} was accepted and kept running"));
        assert_eq!(code, 1, "{args:?}: {output}");
        assert!(!data_dir.exists(), "{args:?} created the data directory");
    }
}

/// Every command that reads an existing database says "no database in DIR" (exit 3) for a data
/// directory without one, and creates nothing there; only serve, migrate and restore create it.
#[test]
fn commands_on_a_data_dir_without_a_database_say_so_and_create_nothing() {
    let parent = tempfile::tempdir().unwrap();
    let missing = parent.path().join("mistyped");
    let backup_to = parent.path().join("copy.db");
    let backup_to = backup_to.to_str().unwrap();
    let commands: [&[&str]; 10] = [
        &["tier", "news", "paid"],
        &["operator", "grant", "someone@example.com"],
        &["status", "news", "paused"],
        &["tracking", "news", "off"],
        &["export", "news"],
        &["import", "news", "-"],
        &["dkim", "--dkim-domain", "example.com"],
        &["bounce-token", "news"],
        &["bounce", "news"],
        &["backup", backup_to],
    ];
    for args in commands {
        let (code, out, err) = crate::support::app::run_cli_with_input(&missing, args, Some(b""));
        assert_eq!(code, 3, "{args:?}: {out}{err}");
        assert!(
            err.contains(&format!("no database in {}", missing.display())),
            "{args:?}: {err}"
        );
        assert!(!missing.exists(), "{args:?} created the data directory");
    }
    assert!(!std::path::Path::new(backup_to).exists());
}

/// A command whose reader goes away (`broadsheet openapi | head`) ends by SIGPIPE like any Unix
/// tool: no panic, nothing on stderr.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(crate::support::app::binary())
        .arg("openapi")
        .env("BROADSHEET_DATA_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The document is far larger than a pipe's buffer: closing the read end before reading
    // anything makes the write fail.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}
