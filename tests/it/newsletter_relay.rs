//! A newsletter's own relay and its warm-up plan, on the settings
//! side: set in the dashboard and through the API, the password sealed at rest with the key in
//! the data directory (never in the database, never shown again), "Test connection" against
//! a real TLS listener saying what happened in plain words, the SSRF guard, a database moved
//! without its key file, and the warm-up's daily cap. Sending through the relay is tested with
//! the send path (tests/it/sending.rs and friends).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;

use crate::support::app::free_port;
use crate::support::http::{attribute_after, unescape};
use crate::support::tls::TestCa;
use crate::support::*;

/// A password no page, answer or file may show.
const SECRET: &str = "Relay-pw-9f2c71d4-kept-sealed";
const UNREADABLE: &str =
    "the stored password cannot be read with this server's key file; enter it again";

fn settings_url(owner: &Owner) -> String {
    format!("/newsletters/{}/settings", owner.newsletter_id)
}

/// The relay form's fields: "Use my own relay" with these values.
fn own_relay<'a>(
    host: &'a str,
    port: &'a str,
    mode: &'a str,
    user: &'a str,
    password: &'a str,
) -> Vec<(&'static str, &'a str)> {
    vec![
        ("relay[use]", "own"),
        ("relay[host]", host),
        ("relay[port]", port),
        ("relay[tls_mode]", mode),
        ("relay[username]", user),
        ("relay[password]", password),
    ]
}

/// Posts the relay form to `action` (`relay`, or `relay/test` for "Test connection").
fn post_relay(owner: &Owner, action: &str, fields: &[(&str, &str)]) -> Resp {
    let page = settings_url(owner);
    owner
        .client
        .submit(&page, &format!("{page}/{action}"), fields)
}

/// What "Test connection" showed: `ok` or `failed`, and the sentence.
fn outcome(resp: &Resp) -> (String, String) {
    assert_eq!(resp.status, 200, "{}", resp.body);
    let marker = "id=\"relay-test\"";
    let kind = attribute_after(&resp.body, marker, "data-outcome").expect("a test outcome");
    let at = resp.body.find(marker).unwrap();
    let text = &resp.body[at..];
    let text = &text[text.find('>').unwrap() + 1..text.find("</p>").unwrap()];
    (kind, unescape(text))
}

fn newsletter(owner: &Owner) -> Value {
    let resp = owner.get("/newsletter");
    resp.expect(200);
    assert!(!resp.body.contains(SECRET), "the API shows the password");
    resp.json()["data"].clone()
}

/// The database's files as they are on disk: the database, its WAL and shared memory.
fn database_bytes(app: &App) -> Vec<u8> {
    let mut bytes = Vec::new();
    for name in ["broadsheet.db", "broadsheet.db-wal", "broadsheet.db-shm"] {
        if let Ok(content) = std::fs::read(app.data_dir().join(name)) {
            bytes.extend(content);
        }
    }
    assert!(bytes.len() > 4096, "the database files were read");
    bytes
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

fn key_file(app: &App) -> std::path::PathBuf {
    app.data_dir().join("credentials.key")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn newsletter_relay_is_set_in_the_dashboard_and_the_api_and_its_password_never_shows() {
    let app = spawn_app();
    let owner = onboard(&app, "Own Relay Weekly");
    let url = settings_url(&owner);
    let page = owner.client.get(&url);
    page.expect(200);
    assert!(
        page.body.contains("data-relay=\"server\""),
        "the server's relay by default"
    );
    assert_eq!(newsletter(&owner)["relay"], Value::Null);
    assert!(app.log().contains("credentials: made the key file"));

    // The dashboard: saved, and shown without the password.
    let mut fields = own_relay(
        " SMTP.Mailservice.example ",
        "587",
        "starttls",
        "robin@tides.example",
        SECRET,
    );
    fields.extend([("relay[per_second]", "10"), ("relay[per_day]", "50000")]);
    let saved = post_relay(&owner, "relay", &fields);
    assert_eq!(saved.redirect(), format!("{url}#relay"));
    let page = owner.client.get(&url);
    assert!(page.body.contains("data-relay=\"own\""));
    assert!(page.body.contains("smtp.mailservice.example:587"));
    assert!(page.body.contains("A password is stored"));
    assert!(page.body.contains("name=\"relay[password]\" value=\"\""));
    assert!(!page.body.contains(SECRET), "the page shows the password");
    let relay = json!({"host": "smtp.mailservice.example", "port": 587, "tls_mode": "starttls",
        "username": "robin@tides.example", "password_set": true, "password_problem": null,
        "limits": {"per_second": 10, "per_hour": null, "per_day": 50000}});
    assert_eq!(newsletter(&owner)["relay"], relay);

    // At rest: sealed in the database, the key in its own file, neither holding the password.
    let sealed =
        app.count("SELECT count(*) FROM newsletter_relays WHERE password_sealed IS NOT NULL");
    assert_eq!(sealed, 1);
    assert!(
        !contains(&database_bytes(&app), SECRET),
        "the database holds the password"
    );
    let key = std::fs::read(key_file(&app)).expect("the key file");
    assert_eq!(key.len(), 32);
    assert_eq!(mode(&key_file(&app)), 0o600);
    assert!(!contains(&key, SECRET));

    // The API: a relay without `password` keeps the stored one; answers never show it.
    let patched = owner.patch(
        "/newsletter",
        &json!({"relay": {"host": "smtp.mailservice.example", "port": 465, "tls_mode": "tls",
            "username": "robin@tides.example"}}),
    );
    patched.expect(200);
    assert!(!patched.body.contains(SECRET));
    let relay = &patched.json()["data"]["relay"];
    assert_eq!(
        (&relay["port"], &relay["tls_mode"]),
        (&json!(465), &json!("tls"))
    );
    assert_eq!(relay["password_set"], true);
    assert_eq!(
        relay["limits"]["per_day"],
        Value::Null,
        "the relay is replaced as a whole"
    );
    let second = "Second-relay-pw-4b1e";
    owner
        .patch(
            "/newsletter",
            &json!({"relay": {"host": "smtp.other.example", "port": 587, "tls_mode": "starttls",
                "username": "robin", "password": second, "limits": {"per_hour": 1000}}}),
        )
        .expect(200);
    let shown = newsletter(&owner);
    assert_eq!(shown["relay"]["host"], "smtp.other.example");
    assert_eq!(shown["relay"]["limits"]["per_hour"], 1000);
    let on_disk = database_bytes(&app);
    assert!(!contains(&on_disk, SECRET) && !contains(&on_disk, second));

    // Bad values: 422 with each field, and nothing changes (the valid name neither).
    let before = newsletter(&owner);
    let resp = owner.patch(
        "/newsletter",
        &json!({"name": "Renamed", "relay": {"host": "bad host!", "port": 70000,
            "tls_mode": "plain", "username": "robin", "limits": {"per_day": 0}}}),
    );
    assert_eq!(resp.error_code(422), "validation_error");
    let details = resp.json()["error"]["details"].clone();
    for field in [
        "relay.host",
        "relay.port",
        "relay.tls_mode",
        "relay.limits.per_day",
    ] {
        assert!(details[field].is_array(), "{field}: {details}");
    }
    assert_eq!(newsletter(&owner), before);
    for (body, field) in [
        (
            json!({"relay": {"host": "a.example", "port": "587", "tls_mode": "tls"}}),
            "relay.port",
        ),
        (
            json!({"relay": {"host": "a.example", "port": 587, "tls_mode": "tls",
                "username": "x", "password": ""}}),
            "relay.password",
        ),
    ] {
        let resp = owner.patch("/newsletter", &body);
        assert_eq!(resp.error_code(422), "validation_error", "{body}");
        assert!(
            resp.json()["error"]["details"][field].is_array(),
            "{body}: {}",
            resp.body
        );
    }
    assert_eq!(newsletter(&owner), before);

    // The dashboard: the messages beside the form, what was typed kept, nothing changed.
    let resp = post_relay(
        &owner,
        "relay",
        &own_relay("", "x", "starttls", "robin", "typed-not-echoed"),
    );
    resp.expect(422);
    let text = unescape(&resp.body);
    assert!(text.contains("Relay host can't be blank"), "{text}");
    assert!(text.contains("Relay port must be a whole number from 1 to 65535"));
    assert!(resp.body.contains("name=\"relay[port]\" value=\"x\""));
    assert!(
        !resp.body.contains("typed-not-echoed"),
        "a typed password is never echoed"
    );
    assert_eq!(newsletter(&owner), before);

    // `broadsheet backup` says where the key is and how to carry it.
    let copy = app.data_dir().join("copy.db");
    let (code, out, err) = app.cli(&["backup", copy.to_str().unwrap()]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains(key_file(&app).to_str().unwrap()), "{out}");
    assert!(out.contains("apart from"), "{out}");
    assert!(!contains(&std::fs::read(&copy).unwrap(), second));

    // A user name without a password is saved, and said: the relay cannot sign in so.
    let half = owner.patch(
        "/newsletter",
        &json!({"relay": {"host": "smtp.other.example", "port": 587, "tls_mode": "starttls",
            "username": "robin", "password": null}}),
    );
    half.expect(200);
    let relay = half.json()["data"]["relay"].clone();
    assert_eq!(relay["password_set"], false);
    let problem = relay["password_problem"].as_str().unwrap().to_string();
    assert!(
        problem.starts_with("a user name is set but no password"),
        "{problem}"
    );
    assert!(unescape(&owner.client.get(&url).body).contains(&problem));

    // Back to the server's relay: the stored relay and its password are gone.
    let back = post_relay(&owner, "relay", &[("relay[use]", "server")]);
    assert_eq!(back.redirect(), format!("{url}#relay"));
    assert_eq!(newsletter(&owner)["relay"], Value::Null);
    assert_eq!(app.count("SELECT count(*) FROM newsletter_relays"), 0);
    owner
        .patch(
            "/newsletter",
            &json!({"relay": {"host": "a.example", "port": 25,
            "tls_mode": "starttls"}}),
        )
        .expect(200);
    let removed = owner.patch("/newsletter", &json!({"relay": null}));
    removed.expect(200);
    assert_eq!(removed.json()["data"]["relay"], Value::Null);
}

#[test]
fn newsletter_relay_test_connection_says_what_happened() {
    let ca = TestCa::new();
    let relay = SmtpSink::start_with(Rules {
        tls: Some(ca.sink_tls(false)),
        auth: true,
        ..Rules::default()
    });
    let implicit = SmtpSink::start_with(Rules {
        tls: Some(ca.sink_tls(true)),
        auth: true,
        ..Rules::default()
    });
    let mut app = spawn_app_with(&["--smtp-ca", ca.ca_path(), "--allow-private-relays"]);
    let owner = onboard(&app, "Tested Relay");
    let port = relay.port.to_string();
    let auths = || -> Vec<crate::support::smtp::Command> {
        relay
            .commands()
            .into_iter()
            .filter(|c| c.line.starts_with("AUTH"))
            .collect()
    };
    let plain =
        base64::engine::general_purpose::STANDARD.encode(format!("\0me@example.com\0{SECRET}"));

    // What is typed is tried, not saved: over STARTTLS, the certificate checked, signed in.
    let fields = own_relay("127.0.0.1", &port, "starttls", "me@example.com", SECRET);
    let resp = post_relay(&owner, "relay/test", &fields);
    assert_eq!(
        outcome(&resp),
        (
            "ok".to_string(),
            format!(
                "Connected to 127.0.0.1:{port} over TLS (STARTTLS), its certificate verified, \
                 and signed in as me@example.com."
            )
        )
    );
    assert!(!resp.body.contains(SECRET));
    let sent = auths();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].line, format!("AUTH PLAIN {plain}"));
    assert!(sent[0].tls, "the credentials went over TLS only");
    assert_eq!(
        newsletter(&owner)["relay"],
        Value::Null,
        "a test saves nothing"
    );

    // Saved, then tested with the password field empty: the stored password signs in.
    post_relay(&owner, "relay", &fields).redirect();
    let empty = own_relay("127.0.0.1", &port, "starttls", "me@example.com", "");
    assert_eq!(outcome(&post_relay(&owner, "relay/test", &empty)).0, "ok");
    let sent = auths();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].line, format!("AUTH PLAIN {plain}"));

    // TLS from the first byte.
    let tls_port = implicit.port.to_string();
    let tls = own_relay("127.0.0.1", &tls_port, "tls", "me@example.com", "other");
    let (kind, said) = outcome(&post_relay(&owner, "relay/test", &tls));
    assert_eq!(kind, "ok", "{said}");
    assert!(said.contains("over TLS from the start"), "{said}");

    // Nothing listening: the refusal, in words.
    let closed = free_port().to_string();
    let refused = own_relay("127.0.0.1", &closed, "starttls", "me@example.com", "x");
    assert_eq!(
        outcome(&post_relay(&owner, "relay/test", &refused)),
        (
            "failed".to_string(),
            format!("Could not connect to 127.0.0.1:{closed}: connection refused.")
        )
    );

    // A relay without STARTTLS (the server's own test relay, plain SMTP): refused before AUTH.
    let plain_port = app.smtp.port.to_string();
    let no_tls = own_relay("127.0.0.1", &plain_port, "starttls", "me@example.com", "x");
    let (kind, said) = outcome(&post_relay(&owner, "relay/test", &no_tls));
    assert_eq!(kind, "failed");
    assert!(
        said.starts_with(&format!(
            "The relay at 127.0.0.1:{plain_port} does not offer STARTTLS"
        )),
        "{said}"
    );
    assert!(
        !app.smtp
            .commands()
            .iter()
            .any(|c| c.line.starts_with("AUTH")),
        "no credentials in the clear"
    );

    // Bad values: the form's messages, no test.
    let resp = post_relay(
        &owner,
        "relay/test",
        &own_relay("", "0", "starttls", "", ""),
    );
    resp.expect(422);
    assert!(unescape(&resp.body).contains("Relay host can't be blank"));
    assert!(!resp.body.contains("id=\"relay-test\""));

    // Without the CA of the relay's certificate: refused during the handshake.
    app.set_args(&["--allow-private-relays"]);
    app.restart();
    let (kind, said) = outcome(&post_relay(&owner, "relay/test", &fields));
    assert_eq!(kind, "failed");
    assert!(
        said.starts_with("The relay's certificate was refused"),
        "{said}"
    );
    assert!(said.contains("UnknownIssuer"), "{said}");
    assert_eq!(auths().len(), 2, "no credentials to an unverified relay");

    // Without --allow-private-relays: a relay on 127.0.0.1 is not even connected to.
    app.set_args(&["--smtp-ca", ca.ca_path()]);
    app.restart();
    let connections = relay.commands().len();
    assert_eq!(
        outcome(&post_relay(&owner, "relay/test", &fields)),
        (
            "failed".to_string(),
            format!(
                "Could not connect to 127.0.0.1:{port}: 127.0.0.1 is a private or \
                 special-purpose address; a newsletter's relay must be on the public Internet \
                 (the server's operator can allow private ones with --allow-private-relays)."
            )
        )
    );
    assert_eq!(relay.commands().len(), connections);
}

#[test]
fn newsletter_relay_warm_up_round_trips_and_shows_todays_cap() {
    let app = spawn_app();
    let owner = onboard(&app, "Warming Up");
    let url = settings_url(&owner);
    let today = || utc_day(app.clock_now()).to_string();
    assert!(owner.client.get(&url).body.contains("data-state=\"off\""));
    assert_eq!(newsletter(&owner)["warmup"], Value::Null, "off by default");

    let saved = owner.client.submit(
        &url,
        &format!("{url}/warmup"),
        &[
            ("warmup[enabled]", "on"),
            ("warmup[first_day_cap]", "50"),
            ("warmup[factor]", "2"),
        ],
    );
    assert_eq!(saved.redirect(), format!("{url}#warm-up"));
    let page = owner.client.get(&url);
    assert!(page.body.contains("data-state=\"on\""));
    assert!(page.body.contains("data-cap=\"50\""));
    assert!(
        page.body
            .contains("Today 50, tomorrow 100, then 200, 400, 800 …")
    );
    let started = today();
    assert_eq!(
        newsletter(&owner)["warmup"],
        json!({"first_day_cap": 50, "factor": 2.0, "started_on": started, "today_cap": 50})
    );

    // Two days on, the cap has doubled twice.
    app.advance_clock(Duration::from_secs(2 * 86_400));
    assert_eq!(newsletter(&owner)["warmup"]["today_cap"], 200);
    let page = owner.client.get(&url);
    assert!(
        page.body
            .contains("Today 200, tomorrow 400, then 800, 1600, 3200 …")
    );

    // Changing the factor keeps the first day.
    let changed = owner.client.submit(
        &url,
        &format!("{url}/warmup"),
        &[
            ("warmup[enabled]", "on"),
            ("warmup[first_day_cap]", "50"),
            ("warmup[factor]", "1.5"),
        ],
    );
    changed.redirect();
    let plan = newsletter(&owner)["warmup"].clone();
    assert_eq!(
        (&plan["started_on"], &plan["today_cap"]),
        (&json!(started), &json!(112))
    );

    // Bad values change nothing, here and in the API.
    let resp = owner.client.submit(
        &url,
        &format!("{url}/warmup"),
        &[("warmup[enabled]", "on"), ("warmup[factor]", "0.5")],
    );
    resp.expect(422);
    assert!(
        resp.body
            .contains("Warmup factor must be a number from 1.1 to 10"),
        "{}",
        resp.body
    );
    assert!(resp.body.contains("name=\"warmup[factor]\" value=\"0.5\""));
    for (body, field) in [
        (
            json!({"warmup": {"first_day_cap": 0}}),
            "warmup.first_day_cap",
        ),
        (json!({"warmup": {"factor": 11}}), "warmup.factor"),
        (
            json!({"warmup": {"first_day_cap": 2.5}}),
            "warmup.first_day_cap",
        ),
    ] {
        let resp = owner.patch("/newsletter", &body);
        assert_eq!(resp.error_code(422), "validation_error");
        assert!(
            resp.json()["error"]["details"][field].is_array(),
            "{}",
            resp.body
        );
    }
    assert_eq!(newsletter(&owner)["warmup"], plan);

    // Off, then on again through the API with the defaults: it starts over today.
    let off = owner.patch("/newsletter", &json!({"warmup": null}));
    off.expect(200);
    assert_eq!(off.json()["data"]["warmup"], Value::Null);
    assert!(owner.client.get(&url).body.contains("data-state=\"off\""));
    let on = owner.patch("/newsletter", &json!({"warmup": {}}));
    on.expect(200);
    assert_eq!(
        on.json()["data"]["warmup"],
        json!({"first_day_cap": 50, "factor": 2.0, "started_on": today(), "today_cap": 50})
    );
}

#[test]
fn newsletter_relay_database_without_its_key_file_starts_and_asks_for_the_password_again() {
    let mut app = spawn_app_with(&["--allow-private-relays"]);
    let owner = onboard(&app, "Moved House");
    let url = settings_url(&owner);
    let port = app.smtp.port.to_string();
    let fields = own_relay("127.0.0.1", &port, "starttls", "me", SECRET);
    post_relay(&owner, "relay", &fields).redirect();
    let backup = app.data_dir().join("moved.db");
    let (code, out, err) = app.cli(&["backup", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out} {err}");

    // The database without its key file: the server starts, says so once, makes a new key.
    let old_key = std::fs::read(key_file(&app)).unwrap();
    app.stop();
    std::fs::remove_file(key_file(&app)).unwrap();
    app.restart();
    let log = app.log();
    let line = log
        .lines()
        .find(|l| l.starts_with("credentials: 1 relay password(s)"))
        .unwrap_or_else(|| panic!("no line about the key:\n{log}"));
    assert!(
        line.contains("there was no key file, so a new one was made"),
        "{line}"
    );
    assert!(line.contains("enter the passwords again"), "{line}");
    let new_key = std::fs::read(key_file(&app)).unwrap();
    assert_ne!(new_key, old_key);
    assert_eq!(mode(&key_file(&app)), 0o600);

    // The relay says why its password cannot be used, in the settings and the API.
    let relay = newsletter(&owner)["relay"].clone();
    assert_eq!(
        (&relay["password_set"], &relay["password_problem"]),
        (&json!(true), &json!(UNREADABLE))
    );
    let page = unescape(&owner.client.get(&url).body);
    assert!(page.contains(UNREADABLE), "the page says why");
    let keep = own_relay("127.0.0.1", &port, "starttls", "me", "");
    assert_eq!(
        outcome(&post_relay(&owner, "relay/test", &keep)),
        (
            "failed".to_string(),
            format!("Could not sign in to 127.0.0.1:{port}: {UNREADABLE}.")
        )
    );

    // Entered again, it is sealed with the new key.
    post_relay(&owner, "relay", &fields).redirect();
    assert_eq!(newsletter(&owner)["relay"]["password_problem"], Value::Null);

    // `broadsheet restore` of the old backup says the key file does not open its password.
    let elsewhere = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli(elsewhere.path(), &["restore", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(
        out.contains("1 of the 1 relay password(s) in it do not open"),
        "{out}"
    );
    assert!(out.contains("(there is no key file)"), "{out}");
    // With the key file the backup was made with beside it, they open.
    std::fs::write(elsewhere.path().join("credentials.key"), &old_key).unwrap();
    let (code, out, err) = run_cli(elsewhere.path(), &["restore", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(
        out.contains("The 1 relay password(s) in it open with the key file"),
        "{out}"
    );
}

/// The horizontal scroll the page needs beyond the window, in CSS pixels.
async fn overflow(c: &fantoccini::Client) -> f64 {
    let width =
        |js: &'static str| async move { c.execute(js, vec![]).await.unwrap().as_f64().unwrap() };
    width("return document.documentElement.scrollWidth").await
        - width("return document.documentElement.clientWidth").await
}

#[test]
#[cfg_attr(
    not(all(has_chromium, has_axe)),
    ignore = "needs chromium, chromedriver and axe-core (apt-get install chromium chromium-driver; npm install --prefix target/npm axe-core@4)"
)]
fn newsletter_relay_settings_in_chromium_pass_axe_on_a_phone() {
    use crate::support::axe::Axe;
    use crate::support::browser::{
        Driver, click, fill, runtime, screenshot, sign_in, wait_for_element, wait_for_text,
    };
    let Some(driver) = Driver::start("relay settings in Chromium") else {
        return;
    };
    let Some(axe) = Axe::load("relay settings in Chromium") else {
        return;
    };
    let ca = TestCa::new();
    let relay = SmtpSink::start_with(Rules {
        tls: Some(ca.sink_tls(false)),
        auth: true,
        ..Rules::default()
    });
    let app = spawn_app_with(&["--smtp-ca", ca.ca_path(), "--allow-private-relays"]);
    let owner = onboard(&app, "Phone Relay");
    let base = app.base_url.clone();
    let url = format!("{base}{}", settings_url(&owner));
    let port = relay.port.to_string();
    let found = runtime().block_on(async {
        let c = driver.session().await;
        let mut found = Vec::new();
        sign_in(&c, &base, &owner.email).await;
        c.goto(&url).await.unwrap();
        wait_for_element(&c, "#relay form").await;
        let fill_relay = |password: &'static str| {
            let (c, port) = (&c, &port);
            async move {
                click(c, "input[name=\"relay[use]\"][value=own]").await;
                fill(c, "relay[host]", "127.0.0.1").await;
                fill(c, "relay[port]", port).await;
                click(c, "input[name=\"relay[tls_mode]\"][value=starttls]").await;
                fill(c, "relay[username]", "me@example.com").await;
                fill(c, "relay[password]", password).await;
            }
        };

        // "Test connection" with what is typed: the outcome on the page, in words.
        fill_relay(SECRET).await;
        click(&c, "button[formaction$=\"/relay/test\"]").await;
        let said = wait_for_text(&c, "#relay-test", "Connected to").await;
        assert!(said.contains("signed in as me@example.com"), "{said}");
        for width in [1280, 390] {
            c.set_window_size(width, 900).await.unwrap();
            let page = format!("settings after a relay test at {width} px");
            found.extend(axe.violations(&c, &page).await);
            assert!(overflow(&c).await <= 1.0, "{page} scrolls sideways");
        }
        c.execute("document.getElementById('relay').scrollIntoView()", vec![])
            .await
            .unwrap();
        screenshot(&c, "settings-relay-test-phone").await;

        // Saved; then the warm-up turned on, with its caps shown.
        c.set_window_size(1280, 900).await.unwrap();
        fill_relay(SECRET).await;
        click(&c, "#relay button[type=submit]:not([formaction])").await;
        wait_for_text(&c, "#relay-summary", "signed in as").await;
        click(&c, "input[name=\"warmup[enabled]\"]").await;
        click(&c, "#warm-up button[type=submit]").await;
        wait_for_text(&c, "#warm-up-state", "Today 50, tomorrow 100").await;
        c.set_window_size(390, 900).await.unwrap();
        found.extend(
            axe.violations(&c, "settings with a relay and a warm-up at 390 px")
                .await,
        );
        assert!(
            overflow(&c).await <= 1.0,
            "the settings scroll sideways on a phone"
        );
        c.execute(
            "document.getElementById('warm-up').scrollIntoView()",
            vec![],
        )
        .await
        .unwrap();
        screenshot(&c, "settings-warm-up-phone").await;
        c.close().await.unwrap();
        found
    });
    assert!(found.is_empty(), "axe found:\n{}", found.join("\n"));
    let relay_now = newsletter(&owner)["relay"].clone();
    assert_eq!(relay_now["password_set"], true);
    assert_eq!(newsletter(&owner)["warmup"]["today_cap"], 50);
}
