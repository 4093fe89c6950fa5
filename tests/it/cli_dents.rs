//! The operator's commands where they fell short: `newsletters` lists the
//! installation, `restore` keeps the database it replaces, `backup` names the directory it
//! lacks, `bounce-token` prints what the server uses, a newsletter not found is worded alike
//! everywhere, and a mistyped flag gets a usage line that works. Also `serve --listen ...:0`
//! and `<data-dir>/listening`, which the test support starts every server with.

use std::path::Path;

use crate::support::send::{addresses, subscribe_all, unsubscribe_all};
use crate::support::*;

const HEADER: &str = "subdomain\towner\ttier\tstatus\tsubscribers";

/// The lines of `newsletters` after its header.
fn listed(app: &App) -> Vec<String> {
    let (code, out, err) = app.cli(&["newsletters"]);
    assert_eq!(code, 0, "{out}{err}");
    let mut lines = out.lines().map(str::to_string);
    assert_eq!(lines.next().as_deref(), Some(HEADER), "{out}");
    let rows: Vec<String> = lines.collect();
    let count = rows.len();
    let noun = if count == 1 {
        "newsletter"
    } else {
        "newsletters"
    };
    assert_eq!(err.trim(), format!("{count} {noun}"));
    rows
}

#[test]
fn newsletters_lists_every_newsletter_with_owner_tier_status_and_subscribers() {
    let app = spawn_app();
    assert_eq!(listed(&app), Vec::<String>::new());

    let paid = onboard_paid(&app, "Listed Weekly");
    let readers = addresses("listed", 3);
    subscribe_all(&paid, &readers);
    unsubscribe_all(&app, &paid, &readers[2..]);
    let other = onboard(&app, "Second Listing");
    let (code, _, err) = app.cli(&["status", &other.subdomain, "paused"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        listed(&app),
        [
            format!("{}\t{}\tfree\tpaused\t0", other.subdomain, other.email),
            format!("{}\t{}\tpaid\tactive\t2", paid.subdomain, paid.email),
        ]
    );

    // More than the 50 of one page: every one is listed once, newest first.
    let extra: Vec<i64> = (0..50)
        .map(|n| create_newsletter(&other.client, &format!("Extra Edition {n}")))
        .collect();
    let rows = listed(&app);
    assert_eq!(rows.len(), 52);
    let subdomains: Vec<String> = rows
        .iter()
        .map(|row| row.split('\t').next().unwrap().to_string())
        .collect();
    let mut expected: Vec<String> = extra
        .iter()
        .rev()
        .map(|id| {
            app.db()
                .query_row(
                    "SELECT subdomain FROM newsletters WHERE id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .unwrap()
        })
        .collect();
    expected.extend([other.subdomain.clone(), paid.subdomain.clone()]);
    assert_eq!(subdomains, expected);
    assert!(
        rows[0].ends_with(&format!("\t{}\tfree\tactive\t0", other.email)),
        "{}",
        rows[0]
    );
}

#[test]
fn restore_keeps_the_database_it_replaces_beside_it_and_says_where() {
    let mut app = spawn_app();
    let owner = onboard(&app, "Kept Notes");
    let backup = app.data_dir().join("before.db");
    let (code, out, err) = app.cli(&["backup", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    owner
        .post("/subscribers", &json!({"email": "later@example.net"}))
        .expect(201);
    app.stop();

    let (code, out, err) = app.cli(&["restore", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let kept = kept_copies(app.data_dir());
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        out.contains(&format!(
            "the database it replaced is kept at {}",
            kept[0].display()
        )),
        "{out}"
    );
    // The restored database is the backup's; the kept one is the database as it was.
    assert_eq!(app.count("SELECT count(*) FROM subscribers"), 0);
    let copy = rusqlite::Connection::open(&kept[0]).unwrap();
    let subscribers: i64 = copy
        .query_row("SELECT count(*) FROM subscribers", [], |r| r.get(0))
        .unwrap();
    assert_eq!(subscribers, 1);
    let check: String = copy
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    drop(copy);

    // A second restore keeps another copy; a refused one keeps none and changes nothing.
    let (code, out, err) = app.cli(&["restore", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(kept_copies(app.data_dir()).len(), 2);
    let junk = app.data_dir().join("junk.db");
    std::fs::write(&junk, b"this is not sqlite").unwrap();
    let (code, out, err) = app.cli(&["restore", junk.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}{err}");
    assert_eq!(kept_copies(app.data_dir()).len(), 2);
    assert_eq!(app.count("SELECT count(*) FROM users"), 1);
    app.restart();
    owner.get("/newsletter").expect(200);
}

/// The `broadsheet.db.before-restore-*` files in `data_dir`.
fn kept_copies(data_dir: &Path) -> Vec<std::path::PathBuf> {
    let mut kept: Vec<_> = std::fs::read_dir(data_dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("broadsheet.db.before-restore-"))
        })
        .collect();
    kept.sort();
    kept
}

#[test]
fn backup_into_a_missing_directory_names_that_directory() {
    let app = spawn_app();
    let parent = tempfile::tempdir().unwrap();
    let target = parent.path().join("nodir").join("x.db");
    let (code, out, err) = app.cli(&["backup", target.to_str().unwrap()]);
    assert_eq!(code, 3, "{out}{err}");
    assert_eq!(
        err.trim(),
        format!(
            "broadsheet: cannot write {}: there is no directory {}",
            target.display(),
            parent.path().join("nodir").display()
        )
    );
    assert!(!parent.path().join("nodir").exists());
}

#[test]
fn bounce_token_prints_the_base_url_and_bounce_domain_the_server_uses() {
    let mut app = spawn_app_with(&["--bounce-domain", "bounces.example.org"]);
    let owner = onboard(&app, "Returned Mail");
    let page = owner
        .client
        .get(&format!("/newsletters/{}/settings", owner.newsletter_id));
    page.expect(200);

    let (code, out, err) = app.cli(&["bounce-token", &owner.subdomain]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, "");
    let token = out
        .lines()
        .find_map(|l| l.strip_prefix("token: "))
        .expect("a token line");
    let url = format!("{}/bounces/{token}", app.base_url);
    assert_eq!(
        out,
        format!(
            "token: {token}\nurl: {url}\n\
             return path: bounce+<delivery>-<signature>@bounces.example.org\n\
             pipe: broadsheet bounce {}\n",
            owner.subdomain
        )
    );
    // What the settings page shows.
    assert!(
        page.body.contains(&format!("id=\"bounce-url\">{url}<")),
        "{url} not on the settings page"
    );
    // `bounce --return-path` checks the address against the same bounce domain.
    let (code, _, err) = app.cli_with_input(
        &["bounce", "--return-path", "bounce+1-00@elsewhere.example"],
        b"",
    );
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("is not a return path of bounces.example.org"),
        "{err}"
    );

    // Flags name other values.
    let (code, out, err) = app.cli(&[
        "bounce-token",
        &owner.subdomain,
        "--base-url",
        "https://news.example.com",
        "--public-host",
        "news.example.com",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("url: https://news.example.com/bounces/{token}\n")),
        "{out}"
    );
    assert!(out.contains("@news.example.com\n"), "{out}");

    // Before any server has started: serve's defaults, and stderr says which.
    app.stop();
    std::fs::remove_file(app.data_dir().join("listening")).unwrap();
    let (code, out, err) = app.cli(&["bounce-token", &owner.subdomain]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("url: http://localhost:8080/bounces/{token}\n")),
        "{out}"
    );
    assert!(err.contains("--base-url is not given"), "{err}");
}

#[test]
fn a_newsletter_not_found_is_worded_alike_by_every_command() {
    let app = spawn_app();
    onboard(&app, "Only One");
    let commands: [&[&str]; 7] = [
        &["tier", "nope", "paid"],
        &["status", "nope", "paused"],
        &["tracking", "nope", "off"],
        &["export", "nope"],
        &["import", "nope", "-"],
        &["bounce-token", "nope"],
        &["bounce", "nope"],
    ];
    for args in commands {
        let (code, out, err) = app.cli_with_input(args, b"email\n");
        assert_eq!(code, 3, "{args:?}: {out}{err}");
        assert_eq!(
            err.trim(),
            "broadsheet: no newsletter has the subdomain \"nope\"",
            "{args:?}"
        );
    }
    let missing = tempfile::tempdir().unwrap().path().join("mistyped");
    let (code, _, err) = run_cli(&missing, &["newsletters"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no database in"), "{err}");
    assert!(!missing.exists());
}

#[test]
fn an_unknown_flag_gets_a_usage_line_that_works() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--verbose"][..],
        &["--verbose", "newsletters"],
        &["--vers"],
    ] {
        let (code, out, err) = run_cli(dir.path(), args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains("Usage: broadsheet [OPTIONS] <COMMAND>\n"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("--version <COMMAND>"), "{args:?}: {err}");
    }
    // A command's own usage is its own.
    let (code, _, err) = run_cli(dir.path(), &["tier", "--verbose"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("Usage: broadsheet tier [OPTIONS] <SUBDOMAIN> <TIER>"),
        "{err}"
    );
}

#[test]
fn serve_on_port_0_says_in_the_data_dir_where_it_listens() {
    let mut app = spawn_app_with(&["--bounce-listen", "127.0.0.1:0"]);
    let file = app.data_dir().join("listening");
    let written = std::fs::read_to_string(&file).unwrap();
    let bounces = app.bounce_port();
    assert_eq!(
        written,
        format!(
            "http 127.0.0.1:{port}\nbounces 127.0.0.1:{bounces}\n\
             base-url http://127.0.0.1:{port}\nbounce-domain localhost\n",
            port = app.port
        )
    );
    assert_ne!(app.port, 0);
    // The base URL and public host given as port 0 name the port taken: in mailed links too.
    let owner = onboard(&app, "Port Zero");
    let page = app.site_client(&owner.subdomain).get("/");
    page.expect(200);
    assert!(
        page.body
            .contains(&format!("{}.localhost:{}", owner.subdomain, app.port)),
        "the site names its own origin"
    );
    // The bounce listener answers there.
    let mut banner = String::new();
    let stream = std::net::TcpStream::connect(("127.0.0.1", bounces)).unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stream), &mut banner).unwrap();
    assert!(banner.starts_with("220 "), "{banner}");

    // A restart asks for the same HTTP port again, so the test's URLs stay good.
    let port = app.port;
    app.restart();
    assert_eq!(app.port, port);
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .starts_with(&format!("http 127.0.0.1:{port}\n"))
    );
    owner.get("/newsletter").expect(200);
}
