//! The browser onboarding over HTTP, as a browser without JavaScript walks it, and every way
//! it can go wrong.

use crate::support::*;

#[test]
fn health_check_answers_ok() {
    let app = spawn_app();
    let resp = app.client().get("/up");
    resp.expect(200);
    assert_eq!(resp.json(), json!({"status": "ok"}));
}

#[test]
fn onboarding_ends_with_a_key_that_works_on_the_api() {
    let app = spawn_app();
    let client = app.client();
    let email = unique_email("walk");

    // Register: the form, its CSRF token, the post, the confirmation mail over SMTP.
    let link = sign_up(&app, &client, &email);
    let pending = client.get("/email_confirmation_pending");
    pending.expect(200);
    assert!(pending.body.contains("Check your inbox"));
    let mail = app.smtp.messages_to(&email).pop().unwrap();
    assert!(
        mail.header("Subject")
            .unwrap()
            .to_lowercase()
            .contains("confirm")
    );

    // Confirm: a session starts and the user lands on their (empty) newsletters.
    assert_eq!(client.get(&link).redirect(), "/newsletters");
    let list = client.get("/newsletters");
    list.expect(200);
    assert!(list.body.contains(&email), "signed in as the new user");

    // Newsletter, frequency, preferences, then its home in the dashboard.
    let id = create_newsletter(&client, "Field Notes Weekly");
    let home = client.get(&format!("/newsletters/{id}"));
    home.expect(200);
    assert!(home.body.contains("Field Notes Weekly"));
    assert!(
        client
            .get("/newsletters")
            .body
            .contains("Field Notes Weekly")
    );

    // API key: shown once, listed by prefix afterwards.
    let key = create_api_key(&client, id, &["read", "write"]);
    assert!(
        key[..8]
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    );
    assert!(
        key[8..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    let keys = client.get(&format!("/newsletters/{id}/api_keys"));
    keys.expect(200);
    assert!(keys.body.contains(&key[..8]), "the list shows the prefix");
    assert!(
        !keys.body.contains(&key),
        "the list never shows the whole key"
    );
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM api_keys WHERE key_hash LIKE '%{}%'",
            &key[8..]
        )),
        0,
        "the key is stored hashed"
    );

    // The key works.
    let resp = client.api("GET", "/newsletter", &key, None);
    resp.expect(200);
    let data = &resp.json()["data"];
    assert_eq!(data["id"], id);
    assert_eq!(data["name"], "Field Notes Weekly");
    assert_eq!(data["tagline"], "Notes from the field");
    assert_eq!(data["sender_name"], "Field Notes");
    assert_eq!(data["sender_email"], "editor@example.com");
    assert_eq!(data["subdomain"], "field-notes-weekly");
    assert_eq!(data["status"], "active");
    assert_eq!(data["tier"], "free");
    assert_eq!(data["subscriber_count"], 0);
    assert_eq!(data["issue_count"], 0);
    for field in ["created_at", "updated_at"] {
        let value = data[field].as_str().unwrap();
        assert!(
            value.ends_with('Z') && value.len() == 24,
            "{field} = {value}"
        );
    }
    let site = format!("http://field-notes-weekly.{}", app.public_host);
    for (name, path) in [
        ("home", "/"),
        ("subscribe", "/subscribe"),
        ("archive", "/archive"),
    ] {
        let url = data["urls"][name].as_str().unwrap();
        assert!(url.starts_with(&site), "{name} = {url}");
        assert!(url.ends_with(path) || url == site, "{name} = {url}");
    }
    // last used is recorded and shown.
    let keys = client.get(&format!("/newsletters/{id}/api_keys"));
    assert!(
        !keys.body.contains(">never<"),
        "last used is shown after use"
    );

    // The generated OpenAPI document is served.
    let doc = client.get("/api/v1/openapi.json");
    doc.expect(200);
    assert!(doc.json()["paths"]["/newsletter"]["get"].is_object());
}

#[test]
fn api_refuses_missing_unknown_revoked_and_underprivileged_keys() {
    let app = spawn_app();
    let owner = onboard(&app, "Keys Gazette");
    let client = app.client();

    let none = client.get("/api/v1/newsletter");
    assert_eq!(none.error_code(401), "unauthorized");
    let wrong = client.api(
        "GET",
        "/newsletter",
        // The right prefix, a wrong last hex digit (never the real one).
        &format!(
            "{}{}",
            &owner.key[..71],
            if owner.key.ends_with('0') { '1' } else { '0' }
        ),
        None,
    );
    assert_eq!(wrong.error_code(401), "unauthorized");
    let junk = client.api("GET", "/newsletter", "not-a-key", None);
    assert_eq!(junk.error_code(401), "unauthorized");

    // A write-only key cannot read; a read-only key cannot write or delete.
    let write_only = create_api_key(&owner.client, owner.newsletter_id, &["write"]);
    let resp = client.api("GET", "/newsletter", &write_only, None);
    assert_eq!(resp.error_code(403), "forbidden");
    let read_only = create_api_key(&owner.client, owner.newsletter_id, &["read"]);
    client
        .api("GET", "/newsletter", &read_only, None)
        .expect(200);
    let resp = client.api(
        "PATCH",
        "/newsletter",
        &read_only,
        Some(&json!({"name": "X"})),
    );
    assert_eq!(resp.error_code(403), "forbidden");
    assert_eq!(
        owner.get("/newsletter").json()["data"]["name"],
        "Keys Gazette"
    );

    // A key needs at least one permission.
    let resp = owner.client.submit(
        &format!("/newsletters/{}/api_keys/new", owner.newsletter_id),
        &format!("/newsletters/{}/api_keys", owner.newsletter_id),
        &[("api_key[name]", "nothing")],
    );
    resp.expect(422);

    // Revoking: the key stops working at once.
    let id: i64 = app
        .db()
        .query_row(
            "SELECT id FROM api_keys WHERE prefix = ?1",
            [&read_only[..8]],
            |r| r.get(0),
        )
        .unwrap();
    // Revoking asks first: the list links to a confirmation page, whose form revokes.
    let list_page = format!("/newsletters/{}/api_keys", owner.newsletter_id);
    let confirm_page = format!("{list_page}/{id}/revoke");
    assert!(
        owner
            .client
            .get(&list_page)
            .expect(200)
            .body
            .contains(&confirm_page)
    );
    let asked = owner.client.get(&confirm_page);
    asked.expect(200);
    assert!(asked.body.contains("stops working at once") && asked.body.contains(&read_only[..8]));
    client
        .api("GET", "/newsletter", &read_only, None)
        .expect(200);
    let resp = owner.client.submit(
        &confirm_page,
        &format!("{list_page}/{id}"),
        &[("_method", "delete")],
    );
    assert_eq!(resp.redirect(), list_page);
    owner.client.get(&confirm_page).expect(404);
    let resp = client.api("GET", "/newsletter", &read_only, None);
    assert_eq!(resp.error_code(401), "unauthorized");
    owner.get("/newsletter").expect(200);
}

#[test]
fn signup_form_shows_messages_and_creates_nothing_on_bad_input() {
    let app = spawn_app();
    let client = app.client();
    let taken = unique_email("taken");
    sign_up(&app, &client, &taken);

    let cases: &[(&str, &str, &str, &str)] = &[
        ("not-an-email", PASSWORD, PASSWORD, "Email"),
        (&taken, PASSWORD, PASSWORD, "taken"),
        ("short@example.com", "short", "short", "8 characters"),
        (
            "mismatch@example.com",
            PASSWORD,
            "another password",
            "match",
        ),
        ("", "", "", "blank"),
    ];
    let other = app.client();
    for (email, password, confirmation, message) in cases {
        let resp = other.submit(
            "/signup",
            "/signup",
            &[
                ("user[email_address]", email),
                ("user[password]", password),
                ("user[password_confirmation]", confirmation),
            ],
        );
        resp.expect(422);
        assert!(
            resp.body.contains(message),
            "{email}: expected {message:?} in\n{}",
            resp.body
        );
        assert!(
            resp.body.contains("name=\"authenticity_token\""),
            "the form again"
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM users"), 1);
}

#[test]
fn forms_without_a_valid_csrf_token_are_refused() {
    let app = spawn_app();
    let client = app.client();
    client.get("/signup").expect(200);
    let fields = [
        ("user[email_address]", "csrf@example.com"),
        ("user[password]", PASSWORD),
        ("user[password_confirmation]", PASSWORD),
    ];
    client.post_form("/signup", &fields).expect(403);
    let mut forged = vec![("authenticity_token", "0123456789abcdef")];
    forged.extend_from_slice(&fields);
    client.post_form("/signup", &forged).expect(403);
    // A token from another browser does not fit this browser's cookie.
    let token = app.client().get("/signup").csrf_token();
    let mut stolen = vec![("authenticity_token", token.as_str())];
    stolen.extend_from_slice(&fields);
    client.post_form("/signup", &stolen).expect(403);
    assert_eq!(app.count("SELECT count(*) FROM users"), 0);
}

#[test]
fn confirmation_links_work_once_and_expire_and_can_be_resent() {
    let app = spawn_app();
    let client = app.client();
    let email = unique_email("confirm");
    let link = sign_up(&app, &client, &email);

    // Signing in before confirming leads to the resend page.
    let resp = app.client().submit(
        "/session/new",
        "/session",
        &[("email_address", &email), ("password", PASSWORD)],
    );
    assert_eq!(resp.redirect(), "/email_confirmation_required");

    assert_eq!(client.get(&link).redirect(), "/newsletters");
    // Used once: the second visit goes to the resend form.
    let again = app.client();
    assert_eq!(again.get(&link).redirect(), "/email_confirmation_required");
    let page = again.get("/email_confirmation_required");
    page.expect(200);
    assert!(page.body.contains("name=\"email_address\""));
    assert!(page.body.contains("expired or was already used"));

    // An expired link (its 24 hours are over) goes there too.
    let late = unique_email("late");
    let late_client = app.client();
    let late_link = sign_up(&app, &late_client, &late);
    app.advance_clock(std::time::Duration::from_secs(24 * 3600 + 60));
    assert_eq!(
        late_client.get(&late_link).redirect(),
        "/email_confirmation_required"
    );

    // Resend: same answer for known and unknown addresses; a new working link arrives.
    let resp = late_client.submit(
        "/email_confirmation_required",
        "/email_confirmation",
        &[("email_address", &late)],
    );
    assert_eq!(resp.redirect(), "/email_confirmation_pending");
    let resp = late_client.submit(
        "/email_confirmation_required",
        "/email_confirmation",
        &[("email_address", "nobody@example.com")],
    );
    assert_eq!(resp.redirect(), "/email_confirmation_pending");
    let mail = app.smtp.wait_for_message_to(&late, 2);
    let new_link = link_containing(&mail.text(), "/email_confirmations/").unwrap();
    assert_ne!(new_link, late_link);
    assert_eq!(late_client.get(&new_link).redirect(), "/newsletters");
    assert!(app.smtp.messages_to("nobody@example.com").is_empty());
}

#[test]
fn sign_in_sign_out_and_wrong_passwords() {
    let app = spawn_app();
    let email = unique_email("signin");
    sign_up_confirmed(&app, &app.client(), &email);

    let client = app.client();
    assert_eq!(client.get("/newsletters").redirect(), "/session/new");
    let resp = client.submit(
        "/session/new",
        "/session",
        &[("email_address", &email), ("password", "wrong password")],
    );
    resp.expect(422);
    assert!(
        resp.body.contains("Invalid e-mail address or password")
            || resp.body.to_lowercase().contains("invalid")
    );
    let resp = client.submit(
        "/session/new",
        "/session",
        &[
            ("email_address", &email.to_uppercase()),
            ("password", PASSWORD),
        ],
    );
    assert_eq!(resp.redirect(), "/newsletters");
    client.get("/newsletters").expect(200);

    // Sign out with the form's _method=delete; the old session no longer works.
    let resp = client.submit("/newsletters", "/session", &[("_method", "delete")]);
    resp.redirect();
    assert_eq!(client.get("/newsletters").redirect(), "/session/new");
    assert_eq!(
        app.count("SELECT count(*) FROM sessions"),
        1,
        "only the first browser's session is left"
    );
}

#[test]
fn password_reset_by_mailed_link() {
    let app = spawn_app();
    let email = unique_email("reset");
    sign_up_confirmed(&app, &app.client(), &email);
    let client = app.client();
    let resp = client.submit("/passwords/new", "/passwords", &[("email_address", &email)]);
    assert_eq!(resp.redirect(), "/session/new");
    let mail = app.smtp.wait_for_message_to(&email, 2);
    let link = link_containing(&mail.text(), "/passwords/").expect("a reset link");
    let path = client.get(&link);
    path.expect(200);
    let action = link
        .split("127.0.0.1")
        .nth(1)
        .unwrap()
        .split_once('/')
        .map(|(_, p)| format!("/{p}"))
        .unwrap();
    let action = action.trim_end_matches("/edit").to_string();
    let new_password = "a brand new password";
    let resp = client.submit(
        &link,
        &action,
        &[("password", "short"), ("password_confirmation", "short")],
    );
    resp.expect(422);
    let resp = client.submit(
        &link,
        &action,
        &[
            ("password", new_password),
            ("password_confirmation", new_password),
        ],
    );
    assert_eq!(resp.redirect(), "/session/new");
    // The link is spent; the old password fails, the new one works.
    let reuse = client.get(&link);
    assert!(
        reuse.status == 303 || reuse.status == 404,
        "spent link: {}",
        reuse.status
    );
    let resp = client.submit(
        "/session/new",
        "/session",
        &[("email_address", &email), ("password", PASSWORD)],
    );
    resp.expect(422);
    let resp = client.submit(
        "/session/new",
        "/session",
        &[("email_address", &email), ("password", new_password)],
    );
    assert_eq!(resp.redirect(), "/newsletters");
}

#[test]
fn newsletter_forms_validate_and_owners_see_only_their_own() {
    let app = spawn_app();
    let alice = onboard(&app, "Alice Writes");
    let bob = app.client();
    sign_up_confirmed(&app, &bob, &unique_email("bob"));

    // Bad newsletter input: the form again with messages, nothing created.
    let resp = bob.submit(
        "/newsletters/new",
        "/newsletters",
        &[
            ("newsletter[name]", ""),
            ("newsletter[from_email]", "not an address"),
        ],
    );
    resp.expect(422);
    assert!(resp.body.contains("blank"));
    assert_eq!(app.count("SELECT count(*) FROM newsletters"), 1);

    // Same name: a unique subdomain; reserved names are never used.
    let second = create_newsletter(&bob, "Alice Writes");
    let www = create_newsletter(&bob, "www");
    let subdomains: Vec<String> = {
        let db = app.db();
        let mut stmt = db
            .prepare("SELECT subdomain FROM newsletters ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(subdomains[0], "alice-writes");
    assert_ne!(subdomains[1], "alice-writes");
    assert!(subdomains[1].starts_with("alice-writes"));
    assert_ne!(subdomains[2], "www");

    // Bad preference values: 422, stored values unchanged.
    let resp = bob.submit(
        &format!("/newsletters/{second}/preference/edit"),
        &format!("/newsletters/{second}/preference"),
        &[
            ("_method", "patch"),
            ("newsletter_preference[target_audience]", &"x".repeat(501)),
            ("newsletter_preference[content_tone]", "sarcastic"),
            ("newsletter_preference[newsletter_length]", "epic"),
        ],
    );
    resp.expect(422);
    let tone: String = app
        .db()
        .query_row(
            "SELECT content_tone FROM newsletters WHERE id = ?1",
            [second],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tone, "friendly");
    let resp = bob.submit(
        &format!("/newsletters/{second}/setup_frequency"),
        &format!("/newsletters/{second}/apply_frequency"),
        &[("frequency", "hourly")],
    );
    resp.expect(422);

    // Bob cannot see or touch Alice's newsletter; only his own are listed.
    let a = alice.newsletter_id;
    for path in [
        format!("/newsletters/{a}"),
        format!("/newsletters/{a}/setup_frequency"),
        format!("/newsletters/{a}/preference/edit"),
        format!("/newsletters/{a}/api_keys"),
        format!("/newsletters/{a}/api_keys/new"),
        "/newsletters/999999".to_string(),
    ] {
        bob.get(&path).expect(404);
    }
    let token = bob.get("/newsletters/new").csrf_token();
    let resp = bob.post_form(
        &format!("/newsletters/{a}/api_keys"),
        &[
            ("authenticity_token", &token),
            ("api_key[name]", "steal"),
            ("api_key[permissions][]", "read"),
        ],
    );
    resp.expect(404);
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM api_keys WHERE newsletter_id = {a}"
        )),
        1
    );
    let list = bob.get("/newsletters");
    assert!(!list.body.contains(&format!("/newsletters/{a}\"")));
    let _ = www;
}

/// A `send_mail` job queued by an earlier version recorded the whole message (subject, text,
/// HTML); this version records which message and its link. After an upgrade such a job still
/// runs and sends what it recorded.
#[test]
fn account_mail_queued_by_an_earlier_version_still_goes_out() {
    let mut app = spawn_app();
    let email = unique_email("upgrade");
    app.kill();
    let payload = json!({
        "to": email,
        "subject": "Reset your Broadsheet password",
        "text": "Choose a new password:\nhttp://localhost/passwords/t0ken/edit\n",
        "html": "<p><a href=\"http://localhost/passwords/t0ken/edit\">Choose a new password</a></p>",
        "link": "http://localhost/passwords/t0ken/edit",
    });
    let conn = rusqlite::Connection::open(app.data_dir().join("broadsheet.db")).unwrap();
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, max_attempts, created_at, updated_at)
         VALUES ('send_mail', ?1, '2000-01-01T00:00:00.000Z', 5, '2000-01-01T00:00:00.000Z',
                 '2000-01-01T00:00:00.000Z')",
        [payload.to_string()],
    )
    .unwrap();
    drop(conn);
    app.restart();

    let mail = app.smtp.wait_for_message_to(&email, 1);
    assert_eq!(
        mail.header("Subject").as_deref(),
        Some("Reset your Broadsheet password")
    );
    assert!(
        mail.text().contains("/passwords/t0ken/edit"),
        "{}",
        mail.text()
    );
    assert!(mail.html().contains("Choose a new password"));
    wait_for(
        "the job to be done",
        std::time::Duration::from_secs(10),
        || {
            (app.count("SELECT count(*) FROM jobs WHERE kind = 'send_mail' AND state = 'done'")
                == 1)
                .then_some(())
        },
    );
}
