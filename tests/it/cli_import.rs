//! `broadsheet import` and `export` run as the built binary against a running server's data
//! directory: summaries, exit codes, what the API then shows, the export round trip; and the
//! operator's tier and status changes the API sees (beyond those `operator.rs` covers).

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::*;

/// All subscriber objects through the API, page by page, by address.
fn subscriber_objects(owner: &Owner) -> Vec<Value> {
    let mut all = Vec::new();
    for page in 1.. {
        let list = owner
            .get(&format!("/subscribers?per_page=100&page={page}"))
            .json();
        all.extend(list["subscribers"].as_array().unwrap().iter().cloned());
        if list["meta"]["has_more"] != true {
            break;
        }
    }
    all.sort_by_key(|s| s["email"].as_str().unwrap().to_string());
    all
}

/// All subscribers through the API, as (email, name, tags, status).
fn api_subscribers(owner: &Owner) -> Vec<(String, Value, Value, String)> {
    subscriber_objects(owner)
        .into_iter()
        .map(|s| {
            (
                s["email"].as_str().unwrap().to_string(),
                s["name"].clone(),
                s["tags"].clone(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `broadsheet <args>` with `input` on standard input.
fn cli_with_stdin(app: &App, args: &[&str], input: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(crate::support::app::binary())
        .args(args)
        .env("BROADSHEET_DATA_DIR", app.data_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn import_reports_created_existing_and_refused_rows_while_serving() {
    let app = spawn_app();
    let owner = onboard(&app, "Imported Issues");
    listen(&app, &owner, &["subscriber.created"]);
    owner.post(
        "/subscribers",
        &json!({"email": "already@example.com", "name": "Kept"}),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("readers.csv");
    let mut csv = String::from("tags,email,name,source\n");
    let mut bad_lines = Vec::new();
    for i in 0..2500 {
        let line = i + 2;
        match i {
            7 => {
                csv.push_str("vip,not-an-address,Nobody,web\n");
                bad_lines.push(line);
            }
            1500 => {
                csv.push_str(&format!("{},x{i}@example.com,,web\n", "t".repeat(51)));
                bad_lines.push(line);
            }
            2000 => csv.push_str(",ALREADY@example.com,Other,web\n"),
            _ => csv.push_str(&format!("vip;cli,reader{i}@example.com,Reader {i},web\n")),
        }
    }
    std::fs::write(&path, &csv).unwrap();

    let (code, out, err) = app.cli(&["import", &owner.subdomain, path.to_str().unwrap()]);
    assert_eq!(code, 5, "some rows refused: {out}{err}");
    assert!(
        out.contains(&format!("into {}: 2500 rows", owner.subdomain)),
        "{out}"
    );
    assert!(out.contains("  created   2497\n"), "{out}");
    assert!(out.contains("  existing  1 "), "{out}");
    assert!(out.contains("  refused   2\n"), "{out}");
    assert!(
        out.contains(&format!(
            "  line {}: \"not-an-address\": Email is invalid",
            bad_lines[0]
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "  line {}: \"x1500@example.com\": Tags is too long",
            bad_lines[1]
        )),
        "{out}"
    );
    assert!(err.contains("2 of 2500 rows were refused"), "{err}");
    // Not a terminal: plain progress lines, the last at 100%.
    assert!(
        err.contains("import: 2500 rows,") && err.contains("(100%)"),
        "{err}"
    );

    let all = api_subscribers(&owner);
    assert_eq!(all.len(), 2498);
    let reader = all.iter().find(|s| s.0 == "reader42@example.com").unwrap();
    assert_eq!(
        (&reader.1, &reader.2, reader.3.as_str()),
        (&json!("Reader 42"), &json!(["cli", "vip"]), "active")
    );
    let kept = all.iter().find(|s| s.0 == "already@example.com").unwrap();
    assert_eq!(
        kept.1,
        json!("Kept"),
        "an existing subscriber is left as it is"
    );
    assert_eq!(
        owner.get("/newsletter").json()["data"]["subscriber_count"],
        2498
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'subscriber.created'"),
        2498
    );

    // Running it again creates nobody twice.
    let (code, out, _) = app.cli(&["import", &owner.subdomain, path.to_str().unwrap()]);
    assert_eq!(code, 5);
    assert!(
        out.contains("  created   0\n") && out.contains("  existing  2498 "),
        "{out}"
    );
    assert_eq!(api_subscribers(&owner).len(), 2498);

    // A clean file from standard input: exit 0.
    let (code, out, err) = cli_with_stdin(
        &app,
        &["import", &owner.subdomain, "-"],
        b"email\nstdin@example.com\n",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("imported - into") && out.contains("  created   1\n"),
        "{out}"
    );
    assert!(
        api_subscribers(&owner)
            .iter()
            .any(|s| s.0 == "stdin@example.com")
    );
}

#[test]
fn import_and_export_fail_clearly_with_exit_codes() {
    let app = spawn_app();
    let owner = onboard(&app, "Careful Codes");
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.csv");
    std::fs::write(&good, "email\nfine@example.com\n").unwrap();
    let bad_header = dir.path().join("bad.csv");
    std::fs::write(&bad_header, "mail,name\nx@example.com,X\n").unwrap();

    let (code, _, err) = app.cli(&["import", "no-such-newsletter", good.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("no newsletter has the subdomain \"no-such-newsletter\""),
        "{err}"
    );
    let (code, _, err) = app.cli(&["import", &owner.subdomain, "/no/such/file.csv"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("cannot read /no/such/file.csv"), "{err}");
    let (code, _, err) = app.cli(&["import", &owner.subdomain, dir.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is a directory"), "{err}");
    let (code, _, err) = app.cli(&["import", &owner.subdomain, bad_header.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("The header has no email column (found: mail, name)"),
        "{err}"
    );
    let (code, _, err) = app.cli(&["import", &owner.subdomain]);
    assert_eq!(code, 2, "a missing argument is bad usage: {err}");
    let (code, _, err) = app.cli(&["export", "no-such-newsletter"]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(api_subscribers(&owner).len(), 0, "nothing was imported");

    // --help explains the format and the exit codes.
    let (code, help, _) = app.cli(&["import", "--help"]);
    assert_eq!(code, 0);
    for expected in [
        "separated by ;",
        "creates no duplicates",
        "Exit codes",
        "5 done but some rows were refused",
    ] {
        assert!(
            help.contains(expected),
            "import --help lacks {expected:?}:\n{help}"
        );
    }
    let (_, help, _) = app.cli(&["export", "--help"]);
    assert!(
        help.contains("email,name,tags,status,subscribed_at"),
        "{help}"
    );
    let (_, help, _) = app.cli(&["--help"]);
    assert!(
        help.contains("5 an import finished but refused some rows"),
        "{help}"
    );

    let (code, out, err) = app.cli(&["import", &owner.subdomain, good.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn export_round_trip_into_another_newsletter() {
    let app = spawn_app();
    let first = onboard(&app, "Round Trip One");
    let second = onboard(&app, "Round Trip Two");
    let entries: Vec<Value> = (0..300)
        .map(|i| {
            json!({"email": format!("p{i}@example.com"), "name": format!("Person \"{i}\", Esq."),
                   "tags": if i % 2 == 0 { json!(["even", "x;y"]) } else { json!([]) }})
        })
        .collect();
    first
        .post("/subscribers/bulk_create", &json!({"subscribers": entries}))
        .expect(200);
    first.post(
        "/subscribers",
        &json!({"email": "minus@example.com", "name": "-1 point"}),
    );
    let left = first
        .post("/subscribers", &json!({"email": "left@example.com"}))
        .json();
    first
        .patch(
            &format!("/subscribers/{}", left["id"]),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);

    // Two members with paid access: comped for good, paid elsewhere until a date.
    let objects = subscriber_objects(&first);
    let id_of = |email: &str| objects.iter().find(|s| s["email"] == email).unwrap()["id"].clone();
    let until = "2999-03-01T00:00:00.000Z";
    for (email, membership) in [
        ("p0@example.com", json!({"status": "comped", "until": null})),
        ("p1@example.com", json!({"status": "paid", "until": until})),
    ] {
        first
            .api(
                "PUT",
                &format!("/subscribers/{}/membership", id_of(email)),
                Some(&json!({ "membership": membership })),
            )
            .expect(200);
    }

    let (code, exported, err) = app.cli(&["export", &first.subdomain]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("exported 302 subscribers"), "{err}");
    assert!(
        exported.starts_with("email,name,tags,status,subscribed_at,unsubscribed_at,created_at,membership,membership_until\n")
    );
    assert_eq!(exported.lines().count(), 303);
    let file = app.data_dir().join("export.csv");
    std::fs::write(&file, &exported).unwrap();

    let (code, out, err) = app.cli(&["import", &second.subdomain, file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("  created   301\n") && out.contains("  skipped   1 "),
        "{out}"
    );

    // The same people with the same names and tags; the one who left is not resubscribed.
    // (A tag holding the separator ";" comes back as two tags: see docs/subscribers.md.)
    let split = |tags: &Value| -> Value {
        let mut all: Vec<String> = tags
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| {
                t.as_str()
                    .unwrap()
                    .split(';')
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
        all.sort();
        json!(all)
    };
    let active: Vec<_> = api_subscribers(&first)
        .into_iter()
        .filter(|s| s.3 == "active")
        .map(|s| (s.0, s.1, split(&s.2)))
        .collect();
    let copied: Vec<_> = api_subscribers(&second)
        .into_iter()
        .map(|s| (s.0, s.1, s.2))
        .collect();
    assert_eq!(active.len(), 301);
    assert_eq!(active, copied);
    assert!(
        copied.iter().any(|s| s.1 == json!("-1 point")),
        "a defused cell reads back as written"
    );

    // The members keep their paid access; everyone else is free.
    let memberships: Vec<(Value, Value)> = subscriber_objects(&second)
        .iter()
        .filter(|s| s["membership"]["status"] != "free")
        .map(|s| (s["email"].clone(), s["membership"].clone()))
        .collect();
    assert_eq!(memberships.len(), 2, "{memberships:?}");
    for (email, m) in &memberships {
        match email.as_str().unwrap() {
            "p0@example.com" => assert_eq!(
                (&m["status"], &m["until"]),
                (&json!("comped"), &Value::Null)
            ),
            "p1@example.com" => {
                assert_eq!((&m["status"], &m["until"]), (&json!("paid"), &json!(until)))
            }
            other => panic!("{other} got paid access"),
        }
    }

    // `export | head` stops early without an error.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' export {} | head -n 2",
            crate::support::app::binary(),
            first.subdomain
        ))
        .env("BROADSHEET_DATA_DIR", app.data_dir())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
}

#[test]
fn tier_and_status_changes_show_in_the_api_and_guard_imports() {
    let app = spawn_app();
    let owner = onboard(&app, "Operator Odds");
    let newsletter = |owner: &Owner| owner.get("/newsletter").json()["data"].clone();
    for tier in ["pending", "free", "paid"] {
        let (code, out, err) = app.cli(&["tier", &owner.subdomain, tier]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&format!("tier {tier}")), "{out}");
        assert_eq!(newsletter(&owner)["tier"], tier);
    }
    let (code, _, _) = app.cli(&["status", &owner.subdomain, "dormant"]);
    assert_eq!(code, 2);
    let (code, _, err) = app.cli(&["status", "no-such-newsletter", "paused"]);
    assert_eq!(code, 3, "{err}");

    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("list.csv");
    std::fs::write(&csv, "email\nlate@example.com\n").unwrap();
    let (code, out, _) = app.cli(&["status", &owner.subdomain, "cancelled"]);
    assert_eq!(code, 0);
    assert!(out.contains("status cancelled"));
    assert_eq!(newsletter(&owner)["status"], "cancelled");
    let (code, _, err) = app.cli(&["import", &owner.subdomain, csv.to_str().unwrap()]);
    assert_eq!(code, 1, "a cancelled newsletter takes no import: {err}");
    assert!(err.contains("cancelled and read-only"), "{err}");
    let (code, _, _) = app.cli(&["status", &owner.subdomain, "active"]);
    assert_eq!(code, 0);
    assert_eq!(newsletter(&owner)["status"], "active");
    let (code, _, err) = app.cli(&["import", &owner.subdomain, csv.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(newsletter(&owner)["subscriber_count"], 1);
}
