//! A full disk, for real: the server's data directory is on a small tmpfs that the
//! test fills. Writes through every door answer that the disk is full (the API 507
//! `disk_full`, the dashboard and the public site an error page saying so, the CLI a clear
//! message), nothing is stored, reads keep working, and once space is freed the same writes
//! succeed without restarting the server. A send caught by the full disk stops taking new
//! messages, keeps what it could not record, and finishes by itself once there is room.

use crate::support::*;

/// Every table's row count: on a full disk none of them may change.
fn rows(app: &App) -> Vec<(String, i64)> {
    let db = app.db();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables
        .into_iter()
        .map(|t| {
            let n = db
                .query_row(&format!("SELECT count(*) FROM \"{t}\""), [], |r| r.get(0))
                .unwrap();
            (t, n)
        })
        .collect()
}

fn site_subscribe(site: &Client, email: &str) -> Resp {
    site.submit(
        "/subscribe",
        "/subscribe",
        &[("email", email), ("name", "")],
    )
}

#[track_caller]
fn assert_disk_full_page(resp: &Resp) {
    resp.expect(507);
    assert!(resp.body.contains("disk is full"), "{}", resp.body);
    assert!(resp.body.contains("Nothing was saved"), "{}", resp.body);
    assert_eq!(resp.header("retry-after"), Some("60"));
}

#[test]
#[cfg_attr(
    not(has_mount),
    ignore = "needs root to mount a tmpfs (mount -t tmpfs)"
)]
fn a_full_disk_refuses_writes_clearly_and_recovers_without_a_restart() {
    let Some(app) = spawn_app_on_small_disk(SmtpSink::start(), &[], 16) else {
        return;
    };
    let owner = onboard_paid(&app, "Disk Notes");
    let url = format!("/newsletters/{}/subscribers", owner.newsletter_id);
    let site = app.site_client(&owner.subdomain);
    owner
        .post("/subscribers", &json!({"email": "before@example.com"}))
        .expect(201);
    let signed_out = app.client();
    // The key was last used over a minute ago, so authenticating notes its use: a write the
    // full disk cannot take, which must not refuse the request.
    rusqlite::Connection::open(app.data_dir().join("broadsheet.db"))
        .unwrap()
        .execute(
            "UPDATE api_keys SET last_used_at = '2020-01-01T00:00:00.000Z'",
            [],
        )
        .unwrap();

    app.fill_disk();
    let before = rows(&app);

    // The API: 507 with the contract's body, Retry-After and the bucket's headers.
    let created = owner.post("/subscribers", &json!({"email": "full@example.com"}));
    assert_eq!(created.error_code(507), "disk_full");
    let message = created.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("disk is full"), "{message}");
    assert_eq!(created.header("retry-after"), Some("60"));
    assert!(created.header("x-ratelimit-limit").is_some());
    let entries: Vec<Value> = (0..50)
        .map(|i| json!({"email": format!("bulk{i}@example.com")}))
        .collect();
    let bulk = owner.post("/subscribers/bulk_create", &json!({"subscribers": entries}));
    assert_eq!(bulk.error_code(507), "disk_full");
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Written on a full disk", "content_markdown": "Hello"}}),
    );
    assert_eq!(issue.error_code(507), "disk_full");

    // Reads still work: the API, /up, the dashboard and the public site.
    let list = owner.get("/subscribers");
    list.expect(200);
    assert_eq!(list.json()["subscribers"].as_array().unwrap().len(), 1);
    owner.get("/newsletter").expect(200);
    app.client().get("/up").expect(200);
    let dashboard = format!("/newsletters/{}", owner.newsletter_id);
    for page in [
        "",
        "/subscribers",
        "/subscribers/import",
        "/issues",
        "/stats",
        "/settings",
    ] {
        owner.client.get(&format!("{dashboard}{page}")).expect(200);
    }
    owner.client.get("/newsletters").expect(200);
    for page in ["/", "/subscribe", "/archive", "/feed.xml"] {
        site.get(page).expect(200);
    }

    // The dashboard: the error page says so.
    let added = owner
        .client
        .submit(&url, &url, &[("subscriber[email]", "form@example.com")]);
    assert_disk_full_page(&added);
    assert!(added.body.contains("The server"), "{}", added.body);
    let signed_in = signed_out.submit(
        "/session/new",
        "/session",
        &[("email_address", &owner.email), ("password", PASSWORD)],
    );
    assert_disk_full_page(&signed_in);

    // The public site's subscribe form.
    assert_disk_full_page(&site_subscribe(&site, "visitor@example.com"));

    // The CLI.
    let (code, out, err) = app.cli(&["tracking", &owner.subdomain, "off"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("disk is full"), "{err}");
    let copy = app.data_dir().join("copy.db");
    let (code, out, err) = app.cli(&["backup", copy.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("disk is full"), "{err}");
    assert!(!copy.exists() && !copy.with_extension("partial").exists());

    assert_eq!(rows(&app), before, "nothing changed on the full disk");
    let log = app.log();
    assert!(log.contains("the disk is full"), "{log}");
    assert!(!log.contains("panicked"), "{log}");

    // Space again: the same writes succeed, same server process.
    app.free_disk();
    owner
        .post("/subscribers", &json!({"email": "full@example.com"}))
        .expect(201);
    let entries: Vec<Value> = (0..50)
        .map(|i| json!({"email": format!("bulk{i}@example.com")}))
        .collect();
    let bulk = owner.post("/subscribers/bulk_create", &json!({"subscribers": entries}));
    bulk.expect(200);
    assert_eq!(bulk.json()["created"], 50);
    owner
        .post(
            "/issues",
            &json!({"issue": {"subject": "Written after the cleanup", "content_markdown": "Hello"}}),
        )
        .expect(201);
    let added = owner
        .client
        .submit(&url, &url, &[("subscriber[email]", "form@example.com")]);
    assert_eq!(added.redirect(), url);
    assert_eq!(
        signed_out
            .submit(
                "/session/new",
                "/session",
                &[("email_address", &owner.email), ("password", PASSWORD)],
            )
            .redirect(),
        "/newsletters"
    );
    site_subscribe(&site, "visitor@example.com").expect(200);
    app.smtp.wait_for_message_to("visitor@example.com", 1);
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers"),
        1 + 1 + 50 + 1
    );
    assert!(!app.log().contains("panicked"));
}

#[test]
#[cfg_attr(
    not(has_mount),
    ignore = "needs root to mount a tmpfs (mount -t tmpfs)"
)]
fn a_send_waits_out_a_full_disk_and_finishes_by_itself_once_there_is_room() {
    use crate::support::send::{
        addresses, approved_issue, send_now, subscribe_all, tally, wait_status,
    };
    use std::time::Duration;

    // Slow enough that the send is still going when the disk fills.
    let sink = SmtpSink::start_with(Rules {
        delay: Duration::from_millis(8),
        ..Rules::default()
    });
    let Some(app) = spawn_app_on_small_disk(sink, &["--rate-limit-bulk", "100"], 24) else {
        return;
    };
    let owner = onboard_paid(&app, "Full Disk Send");
    let emails = addresses("roomy", 3000);
    subscribe_all(&owner, &emails);
    let id = approved_issue(&owner, "Room to spare");
    send_now(&owner, id);
    app.smtp.wait_for_count(200, Duration::from_secs(60));

    let snapshot = app.fill_disk_under_writes();
    // The send notices it cannot record its progress and stops taking new messages.
    wait_for(
        "the send to hit the full disk",
        Duration::from_secs(60),
        || {
            app.log()
                .contains("cannot record the send's progress")
                .then_some(())
        },
    );
    let taken_while_full = app.smtp.messages().len();
    assert!(
        taken_while_full < 3000,
        "the send finished before the disk filled"
    );

    // Space again: it goes on by itself, nobody twice, nobody skipped.
    drop(snapshot);
    app.free_disk();
    wait_status(&owner, id, "sent", Duration::from_secs(120));
    assert!(app.log().contains("the database can be written again"));
    let result = tally(&app, id, &emails);
    result.assert_promise_kept();
    assert_eq!((result.sent, result.unconfirmed), (3000, 0), "{result:?}");
    assert!(!app.log().contains("panicked"));
}

#[test]
#[cfg_attr(
    not(has_mount),
    ignore = "needs root to mount a tmpfs (mount -t tmpfs)"
)]
fn an_import_and_a_webhook_delivery_wait_out_a_full_disk_and_finish_by_themselves() {
    use crate::support::receiver::Receiver;
    use std::time::Duration;

    // The held webhook attempt must outlast the upload below, however loaded the machine:
    // a timed-out attempt would be recorded before the disk fills, and wait for nothing.
    let Some(app) = spawn_app_on_small_disk(
        SmtpSink::start(),
        &["--allow-private-webhooks", "--webhook-timeout-ms", "600000"],
        160,
    ) else {
        return;
    };
    let owner = onboard(&app, "Full Disk Jobs");

    // A webhook delivery whose answer comes once the disk is full: it cannot be recorded.
    let receiver = Receiver::start();
    receiver.hold();
    let hooked = owner.post("/subscribers", &json!({"email": "hooked@example.com"}));
    hooked.expect(201);
    owner
        .post(
            "/webhook_subscriptions",
            &json!({"url": receiver.url, "events": ["subscriber.updated"]}),
        )
        .expect(201);
    owner
        .patch(
            &format!("/subscribers/{}", hooked.json()["id"]),
            &json!({"subscriber": {"name": "Hooked"}}),
        )
        .expect(200);
    receiver.wait_for("subscriber.updated", 1);

    // An import under way when the disk fills (too long to finish before it does).
    let mut csv = String::from("email\n");
    for i in 0..80_000 {
        csv.push_str(&format!("imported{i}@example.com\n"));
    }
    let import_page = upload(&owner, "big.csv", csv.as_bytes()).redirect();
    owner
        .client
        .submit(&import_page, &format!("{import_page}/start"), &[])
        .redirect();
    let snapshot = app.fill_disk_under_writes();
    receiver.release();
    wait_for(
        "both jobs to wait for the database",
        Duration::from_secs(60),
        || {
            let log = app.log();
            let waits = |kind: &str| {
                log.lines()
                    .any(|l| l.contains(kind) && l.contains("waits for the database"))
            };
            (waits("import_subscribers #") && waits("deliver_webhook #")).then_some(())
        },
    );
    assert!(
        !owner
            .client
            .get(&import_page)
            .body
            .contains("Import finished")
    );

    // Room again: both finish by themselves, the import without a row twice, the webhook
    // delivery with the same id as before.
    drop(snapshot);
    app.free_disk();
    let done = wait_for("the import to finish", Duration::from_secs(120), || {
        let page = owner.client.get(&import_page);
        page.body.contains("Import finished").then_some(page)
    });
    assert!(!done.body.contains("failed"), "{}", done.body);
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers WHERE email LIKE 'imported%'"),
        80_000
    );
    wait_for(
        "the webhook delivery to be recorded",
        Duration::from_secs(60),
        || {
            (app.count("SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'") == 1)
                .then_some(())
        },
    );
    let hooks = receiver.hooks();
    assert!(
        hooks.len() >= 2,
        "delivered again once it could be recorded"
    );
    assert!(
        hooks
            .iter()
            .all(|h| h.header("webhook-id") == hooks[0].header("webhook-id")),
        "one delivery id throughout"
    );
    assert!(!app.log().contains("panicked"));
}
