//! The welcome e-mail: after a reader confirms on the public site, once,
//! from the newsletter's sender, with working unsubscribe headers; edited and switched off in
//! the dashboard and the API; sent to API-created subscribers only when asked, and never to
//! imported ones.

use crate::support::*;

/// Subscribes `email` on the site and follows the link of confirmation mail number `n`.
fn subscribe_and_confirm(app: &App, site: &Client, email: &str, n: usize) -> Resp {
    site.submit("/subscribe", "/subscribe", &[("email", email)])
        .expect(200);
    let mail = app.smtp.wait_for_message_to(email, n);
    let link = link_containing(&mail.text(), "/subscribe/confirm/").expect("a confirmation link");
    let path = path_of(&link);
    let done = site.submit(&path, &path, &[]);
    done.expect(200);
    done
}

/// Welcome jobs recorded for `email`'s subscriber of `owner`'s newsletter. They are queued in
/// the transaction that confirms or creates the subscriber, so after the answer this is final.
fn welcome_jobs(app: &App, owner: &Owner, email: &str) -> i64 {
    app.db()
        .query_row(
            "SELECT count(*) FROM jobs j JOIN subscribers s ON s.id = json_extract(j.payload, '$.subscriber_id')
             WHERE j.kind = 'send_welcome' AND s.newsletter_id = ?1 AND s.email = ?2",
            (owner.newsletter_id, email),
            |r| r.get(0),
        )
        .unwrap()
}

/// Waits until no welcome job is left to run, then returns the messages `email` got: from
/// then on no welcome can arrive.
fn settled(app: &App, email: &str) -> Vec<Received> {
    wait_for(
        "the welcome jobs",
        std::time::Duration::from_secs(20),
        || {
            let pending = app.count(
            "SELECT count(*) FROM jobs WHERE kind IN ('send_welcome', 'send_mail') AND state <> 'done'",
        );
            (pending == 0).then_some(())
        },
    );
    app.smtp.messages_to(email)
}

fn welcomes(messages: &[Received]) -> Vec<&Received> {
    messages
        .iter()
        .filter(|m| !m.text().contains("/subscribe/confirm/"))
        .collect()
}

#[test]
fn welcome_mail_goes_once_after_confirming_from_the_sender_and_unsubscribes_in_one_click() {
    let app = spawn_app();
    let owner = onboard(&app, "Morning Post");
    set_sender(&owner);
    let site = app.site_client(&owner.subdomain);
    let reader = unique_email("welcomed");
    subscribe_and_confirm(&app, &site, &reader, 1);
    let welcome = app.smtp.wait_for_message_to(&reader, 2);

    // From the newsletter's sender, with the default subject and text.
    assert_from_sender(&welcome);
    let parsed = welcome.parsed();
    assert_eq!(parsed.subject(), Some("Welcome to Morning Post"));
    let text = welcome.text();
    assert!(text.contains("Thank you for confirming your subscription to Morning Post"));
    assert!(welcome.html().contains("Thank you for confirming"));
    assert_eq!(
        welcome.header("List-Id").as_deref(),
        Some(
            format!(
                "\"Morning Post\" <{}.{}>",
                owner.subdomain,
                app.public_host.split(':').next().unwrap()
            )
            .as_str()
        )
    );
    assert_eq!(
        welcome.header("List-Unsubscribe-Post").as_deref(),
        Some("List-Unsubscribe=One-Click")
    );
    let unsubscribe = welcome
        .header("List-Unsubscribe")
        .expect("List-Unsubscribe");
    let url = unsubscribe.trim_start_matches('<').trim_end_matches('>');
    assert!(text.contains(url), "the text part has the link too: {text}");

    // Confirming twice: the link is used up, and no second welcome is queued.
    let confirmation = app.smtp.wait_for_message_to(&reader, 1);
    let link = link_containing(&confirmation.text(), "/subscribe/confirm/").unwrap();
    let path = path_of(&link);
    site.submit(&path, &path, &[]).expect(404);
    assert_eq!(welcome_jobs(&app, &owner, &reader), 1);

    // The job run again, as after a kill -9 between handing the message over and recording
    // the job done: the subscriber's mark stops it from sending a second copy.
    let writer = rusqlite::Connection::open(app.data_dir().join("broadsheet.db")).unwrap();
    writer
        .busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let requeued = writer
        .execute(
            "UPDATE jobs SET state = 'queued', run_at = '2000-01-01T00:00:00.000Z' WHERE kind = 'send_welcome'",
            [],
        )
        .unwrap();
    assert_eq!(requeued, 1);
    assert_eq!(welcomes(&settled(&app, &reader)).len(), 1);

    // One-click unsubscribe (RFC 8058) with the welcome's own link.
    let one_click = site.post_form(&path_of(url), &[("List-Unsubscribe", "One-Click")]);
    one_click.expect(200);
    let list = owner.get("/subscribers?status=unsubscribed").json();
    assert_eq!(list["subscribers"][0]["email"], reader.as_str());
    // A forged signature is refused.
    let good = path_of(url);
    let other = if good.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{other}", &good[..good.len() - 1]);
    site.post_form(&forged, &[("List-Unsubscribe", "One-Click")])
        .expect(404);

    // Coming back through the form: subscribed again, and no second welcome.
    subscribe_and_confirm(&app, &site, &reader, 3);
    assert_eq!(
        owner.get("/subscribers?status=active").json()["subscribers"][0]["email"],
        reader.as_str()
    );
    assert_eq!(welcome_jobs(&app, &owner, &reader), 1);
    let messages = settled(&app, &reader);
    assert_eq!(messages.len(), 3, "two confirmations and one welcome");
    assert_eq!(welcomes(&messages).len(), 1);
}

#[test]
fn welcome_mail_is_edited_and_switched_off_in_the_dashboard_and_the_api() {
    let app = spawn_app();
    let owner = onboard(&app, "Field Guide");
    let n = owner.get("/newsletter").json()["data"].clone();
    assert_eq!(n["welcome_enabled"], true, "on by default");
    assert_eq!(n["welcome_subject"], "Welcome to Field Guide");
    assert!(n["welcome_body"].as_str().unwrap().contains("Thank you"));

    // The API: bad input is refused field by field and changes nothing.
    let bad = owner.patch(
        "/newsletter",
        &json!({"welcome_subject": "Two\nlines", "welcome_body": "x".repeat(10_001)}),
    );
    bad.expect(422);
    let body = bad.json();
    let text = body.to_string();
    assert!(
        text.contains("welcome_subject") && text.contains("welcome_body"),
        "{text}"
    );
    assert_eq!(
        owner.get("/newsletter").json()["data"]["welcome_subject"],
        "Welcome to Field Guide"
    );

    let markdown = "Glad you are here.\n\n**Start** with [the archive](https://example.org/archive) and *enjoy*.\n\n- one\n- two";
    let saved = owner.patch(
        "/newsletter",
        &json!({"welcome_subject": "You're in: Field Guide", "welcome_body": markdown}),
    );
    saved.expect(200);
    assert_eq!(
        saved.json()["data"]["welcome_subject"],
        "You're in: Field Guide"
    );
    assert_eq!(saved.json()["data"]["welcome_body"], markdown);

    // The edited welcome is what a reader gets, its text part free of Markdown syntax.
    let site = app.site_client(&owner.subdomain);
    let reader = unique_email("edited");
    subscribe_and_confirm(&app, &site, &reader, 1);
    let welcome = app.smtp.wait_for_message_to(&reader, 2);
    assert_eq!(welcome.parsed().subject(), Some("You're in: Field Guide"));
    let text = welcome.text();
    assert!(text.contains("Start"), "{text}");
    assert!(
        text.contains("https://example.org/archive"),
        "links written out: {text}"
    );
    for syntax in ["**", "](", "*enjoy*"] {
        assert!(
            !text.contains(syntax),
            "{syntax:?} in the text part: {text}"
        );
    }
    assert!(welcome.html().contains("<strong>Start</strong>"));

    // The dashboard shows the form with what is stored; bad input shows the form again.
    let url = format!("/newsletters/{}/settings", owner.newsletter_id);
    let page = owner.client.get(&url);
    page.expect(200);
    assert!(page.body.contains("id=\"welcome\""));
    assert!(
        page.body.contains("value=\"You&#39;re in: Field Guide\"")
            || page.body.contains("value=\"You're in: Field Guide\"")
    );
    let too_long = "y".repeat(201);
    let refused = owner.client.submit(
        &url,
        &format!("{url}/welcome"),
        &[
            ("welcome[enabled]", "on"),
            ("welcome[subject]", &too_long),
            ("welcome[body]", "Short"),
        ],
    );
    refused.expect(422);
    assert!(
        refused.body.contains("Welcome subject is too long"),
        "{}",
        refused.body
    );
    assert!(refused.body.contains(&too_long), "what was typed stays");

    // Empty fields go back to the default; unticked, the welcome is off.
    let off = owner.client.submit(
        &url,
        &format!("{url}/welcome"),
        &[("welcome[subject]", ""), ("welcome[body]", "")],
    );
    assert_eq!(off.redirect(), format!("{url}#welcome"));
    let n = owner.get("/newsletter").json()["data"].clone();
    assert_eq!(n["welcome_enabled"], false);
    assert_eq!(n["welcome_subject"], "Welcome to Field Guide");
    let page = owner.client.get(&url);
    assert!(page.body.contains("placeholder=\"Welcome to Field Guide\""));

    // Switched off: a reader who confirms gets no welcome.
    let quiet = unique_email("quiet");
    subscribe_and_confirm(&app, &site, &quiet, 1);
    assert_eq!(welcome_jobs(&app, &owner, &quiet), 0);
    assert_eq!(settled(&app, &quiet).len(), 1, "only the confirmation");
}

#[test]
fn welcome_mail_goes_to_api_created_subscribers_only_when_asked_and_never_to_imports() {
    let app = spawn_app();
    let owner = onboard(&app, "Api Weekly");
    let (plain, asked, bulk) = (
        unique_email("plain"),
        unique_email("asked"),
        unique_email("bulk"),
    );
    owner
        .post("/subscribers", &json!({"email": plain}))
        .expect(201);
    owner
        .post(
            "/subscribers",
            &json!({"subscriber": {"email": asked}, "send_welcome": true}),
        )
        .expect(201);
    // Asking for an address already there adds nobody and sends nothing.
    owner
        .post(
            "/subscribers",
            &json!({"email": plain, "send_welcome": true}),
        )
        .expect(200);
    owner
        .post(
            "/subscribers/bulk_create",
            &json!({"subscribers": [{"email": bulk}]}),
        )
        .expect(200);
    owner
        .post(
            "/subscribers",
            &json!({"email": "x@example.com", "send_welcome": "yes"}),
        )
        .expect(422);

    assert_eq!(welcome_jobs(&app, &owner, &asked), 1);
    for email in [&plain, &bulk] {
        assert_eq!(welcome_jobs(&app, &owner, email), 0, "{email}");
    }
    let welcome = app.smtp.wait_for_message_to(&asked, 1);
    assert_eq!(welcome.parsed().subject(), Some("Welcome to Api Weekly"));
    assert!(welcome.header("List-Unsubscribe").unwrap().contains("/u/s"));
    settled(&app, &asked);
    for email in [&plain, &bulk] {
        assert!(app.smtp.messages_to(email).is_empty(), "{email}");
    }
}

/// A relay that refuses the welcome for now (451 after the message): the subscriber's mark is
/// taken back, and the retry sends it, once.
#[test]
fn welcome_mail_refused_for_now_is_sent_by_the_retry() {
    let app = spawn_app();
    let owner = onboard(&app, "Retry Review");
    let reader = unique_email("retried");
    app.smtp.add_faults(&reader, &[Fault::AfterData(451)]);
    owner
        .post(
            "/subscribers",
            &json!({"email": reader, "send_welcome": true}),
        )
        .expect(201);
    let waiting = || {
        app.db()
            .query_row(
                "SELECT j.state = 'queued' AND j.last_error IS NOT NULL AND s.welcomed_at IS NULL
                 FROM jobs j JOIN subscribers s ON s.id = json_extract(j.payload, '$.subscriber_id')
                 WHERE j.kind = 'send_welcome' AND s.email = ?1",
                [&reader],
                |r| r.get::<_, bool>(0),
            )
            .unwrap()
    };
    wait_for(
        "the refused welcome to wait for its retry",
        std::time::Duration::from_secs(20),
        || waiting().then_some(()),
    );
    assert_eq!(app.smtp.refusals(), vec![(reader.clone(), 451)]);
    assert!(app.smtp.messages_to(&reader).is_empty());

    app.advance_clock(std::time::Duration::from_secs(11));
    let welcome = app.smtp.wait_for_message_to(&reader, 1);
    assert_eq!(welcome.parsed().subject(), Some("Welcome to Retry Review"));
    assert_eq!(settled(&app, &reader).len(), 1);
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers WHERE welcomed_at IS NOT NULL"),
        1
    );
}
