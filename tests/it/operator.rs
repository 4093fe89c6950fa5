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
            }
            created
        })
    };
    std::thread::sleep(Duration::from_millis(50));
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
    let env = std::fs::read_to_string(stage.path().join("etc/broadsheet/broadsheet.env")).unwrap();
    assert!(env.contains("BROADSHEET_BASE_URL=https://news.example.com"));
    assert!(stage.path().join("var/lib/broadsheet").is_dir());

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
