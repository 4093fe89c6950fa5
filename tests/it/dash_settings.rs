//! The dashboard's settings page: every form with good and bad input, tracking seen in the
//! next sent issue, pause / resume / cancel behind their confirmation, the upgrade request,
//! other users' 404 and posts without a CSRF token.

use crate::dash_stats::{add_subscriber, send_issue};
use crate::support::*;

fn settings_url(owner: &Owner) -> String {
    format!("/newsletters/{}/settings", owner.newsletter_id)
}

/// Posts `fields` to the settings form at `action` (relative to the settings page) with the
/// page's CSRF token.
fn submit(owner: &Owner, action: &str, fields: &[(&str, &str)]) -> Resp {
    let page = settings_url(owner);
    owner
        .client
        .submit(&page, &format!("{page}/{action}"), fields)
}

/// The newsletter as the API shows it.
fn api_newsletter(owner: &Owner) -> Value {
    let resp = owner.get("/newsletter");
    resp.expect(200);
    resp.json()["data"].clone()
}

/// The settings columns the API does not show, and `updated_at`.
fn stored(
    app: &App,
    owner: &Owner,
) -> (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    bool,
    String,
) {
    app.db()
        .query_row(
            "SELECT frequency, target_audience, content_tone, newsletter_length, tracking_enabled, updated_at
             FROM newsletters WHERE id = ?1",
            [owner.newsletter_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
        )
        .unwrap()
}

/// Every settings form's action and a valid set of fields for it.
fn every_form(owner: &Owner) -> Vec<(&'static str, Vec<(&'static str, String)>)> {
    vec![
        (
            "details",
            vec![
                ("_method", "patch".into()),
                ("newsletter[name]", "Taken Over".into()),
                ("newsletter[tagline]", "x".into()),
                ("newsletter[sender_name]", "Intruder".into()),
                ("newsletter[sender_email]", "intruder@example.com".into()),
            ],
        ),
        ("frequency", vec![("frequency", "daily".into())]),
        ("time_zone", vec![("time_zone", "Asia/Tokyo".into())]),
        (
            "preference",
            vec![
                ("_method", "patch".into()),
                ("newsletter_preference[target_audience]", "Intruders".into()),
                ("newsletter_preference[content_tone]", "formal".into()),
                ("newsletter_preference[newsletter_length]", "long".into()),
            ],
        ),
        ("tracking", vec![("tracking", "off".into())]),
        (
            "welcome",
            vec![
                ("welcome[subject]", "Taken over".into()),
                ("welcome[body]", "Hello".into()),
            ],
        ),
        (
            "theme",
            vec![
                ("theme[accent_color]", "#000000".into()),
                (
                    "theme[logo_url]",
                    "https://intruder.example/logo.png".into(),
                ),
            ],
        ),
        (
            "relay",
            vec![
                ("relay[use]", "own".into()),
                ("relay[host]", "smtp.intruder.example".into()),
                ("relay[port]", "587".into()),
                ("relay[tls_mode]", "starttls".into()),
            ],
        ),
        (
            "relay/test",
            vec![
                ("relay[use]", "own".into()),
                ("relay[host]", "smtp.intruder.example".into()),
                ("relay[port]", "587".into()),
                ("relay[tls_mode]", "starttls".into()),
            ],
        ),
        ("warmup", vec![("warmup[enabled]", "on".into())]),
        ("upgrade", vec![]),
        ("status", vec![("status", "paused".into())]),
        (
            "status",
            vec![
                ("status", "cancelled".into()),
                ("confirmation", owner.subdomain.clone()),
            ],
        ),
    ]
}

fn borrowed<'a>(fields: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    fields.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[test]
fn dash_settings_details_save_like_the_api_and_bad_input_changes_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Field Notes");
    let page = owner.client.get(&settings_url(&owner));
    page.expect(200);
    assert!(page.body.contains("aria-current=\"page\">Settings<"));
    assert!(page.body.contains("value=\"Field Notes\""));

    let resp = submit(
        &owner,
        "details",
        &[
            ("_method", "patch"),
            ("newsletter[name]", "  Renamed Notes "),
            ("newsletter[tagline]", "A new line"),
            ("newsletter[sender_name]", "The Desk"),
            ("newsletter[sender_email]", "Desk@Example.com"),
        ],
    );
    assert_eq!(resp.redirect(), format!("{}#details", settings_url(&owner)));
    let n = api_newsletter(&owner);
    assert_eq!(
        (
            &n["name"],
            &n["tagline"],
            &n["sender_name"],
            &n["sender_email"]
        ),
        (
            &json!("Renamed Notes"),
            &json!("A new line"),
            &json!("The Desk"),
            &json!("desk@example.com")
        )
    );
    let page = owner.client.get(&settings_url(&owner));
    assert!(page.body.contains("The details are saved."));

    // Bad input: the page again with the messages and what was typed; nothing changes.
    let before = stored(&app, &owner);
    for (field, value, message) in [
        ("newsletter[name]", "", "Name can't be blank"),
        ("newsletter[sender_email]", "not-an-email", "Sender email"),
        (
            "newsletter[sender_name]",
            "Bad <Name>",
            "Sender name must not contain",
        ),
        (
            "newsletter[tagline]",
            &"t".repeat(201),
            "Tagline is too long",
        ),
    ] {
        let mut fields = vec![
            ("_method", "patch"),
            ("newsletter[name]", "Renamed Again"),
            ("newsletter[tagline]", "Typed tagline"),
            ("newsletter[sender_name]", "The Desk"),
            ("newsletter[sender_email]", "desk@example.com"),
        ];
        fields.retain(|(k, _)| *k != field);
        fields.push((field, value));
        let resp = submit(&owner, "details", &fields);
        resp.expect(422);
        assert!(resp.body.contains("class=\"errors\""), "{}", resp.body);
        assert!(resp.body.contains(message), "{message}: {}", resp.body);
        let kept = if field == "newsletter[tagline]" {
            "value=\"Renamed Again\""
        } else {
            "value=\"Typed tagline\""
        };
        assert!(resp.body.contains(kept), "typed values are kept");
        // The API refuses the same input the same way.
        let api_field = field
            .trim_start_matches("newsletter[")
            .trim_end_matches(']');
        let mut body = serde_json::Map::new();
        body.insert(api_field.to_string(), json!(value));
        assert_eq!(
            owner.patch("/newsletter", &Value::Object(body)).status,
            422,
            "{field}"
        );
    }
    assert_eq!(api_newsletter(&owner)["name"], "Renamed Notes");
    assert_eq!(stored(&app, &owner), before, "nothing changed");
}

#[test]
fn dash_settings_frequency_preferences_and_tracking_forms() {
    let app = spawn_app();
    let owner = onboard(&app, "Rhythm");
    let url = settings_url(&owner);

    assert_eq!(
        submit(&owner, "frequency", &[("frequency", "daily")]).redirect(),
        format!("{url}#frequency")
    );
    let resp = submit(
        &owner,
        "preference",
        &[
            ("_method", "patch"),
            ("newsletter_preference[target_audience]", "Night owls"),
            ("newsletter_preference[content_tone]", "humorous"),
            ("newsletter_preference[newsletter_length]", "long"),
        ],
    );
    assert_eq!(resp.redirect(), format!("{url}#preferences"));
    assert_eq!(
        submit(&owner, "tracking", &[("tracking", "off")]).redirect(),
        format!("{url}#tracking")
    );
    let saved = stored(&app, &owner);
    assert_eq!(
        (
            saved.0.as_deref(),
            saved.1.as_deref(),
            saved.2.as_deref(),
            saved.3.as_deref(),
            saved.4
        ),
        (
            Some("daily"),
            Some("Night owls"),
            Some("humorous"),
            Some("long"),
            false
        )
    );
    let page = owner.client.get(&url);
    assert!(page.body.contains("Tracking is off"), "the notice says so");
    assert!(page.body.contains("value=\"off\" checked"));
    assert!(page.body.contains("value=\"daily\" checked"));
    assert!(page.body.contains("<option value=\"humorous\" selected>"));

    // Bad input in each form: 422, the message, nothing changed.
    let long_audience = "a".repeat(501);
    // (form action, fields posted, the message expected back)
    type BadForm<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);
    let bad: Vec<BadForm> = vec![
        (
            "frequency",
            vec![("frequency", "hourly")],
            "Frequency must be one of",
        ),
        ("frequency", vec![], "Frequency must be one of"),
        (
            "preference",
            vec![
                ("newsletter_preference[target_audience]", "Owls"),
                ("newsletter_preference[content_tone]", "angry"),
                ("newsletter_preference[newsletter_length]", "long"),
            ],
            "Content tone must be one of",
        ),
        (
            "preference",
            vec![
                (
                    "newsletter_preference[target_audience]",
                    long_audience.as_str(),
                ),
                ("newsletter_preference[content_tone]", "casual"),
                ("newsletter_preference[newsletter_length]", "epic"),
            ],
            "Target audience is too long",
        ),
        (
            "tracking",
            vec![("tracking", "maybe")],
            "Tracking must be on or off",
        ),
    ];
    for (action, fields, message) in bad {
        let resp = submit(&owner, action, &fields);
        resp.expect(422);
        assert!(resp.body.contains(message), "{action}: {}", resp.body);
        assert_eq!(stored(&app, &owner), saved, "{action} changed something");
    }
}

#[test]
fn dash_settings_time_zone_saves_like_the_api_and_a_bad_zone_changes_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Zoned");
    let url = settings_url(&owner);
    let page = owner.client.get(&url);
    assert!(
        page.body
            .contains("at 09:00 on the clocks of the newsletter's time zone (UTC, below)"),
        "{}",
        page.body
    );
    assert!(page.body.contains("<option value=\"UTC\" selected>"));

    let resp = submit(&owner, "time_zone", &[("time_zone", "america/new_york")]);
    assert_eq!(resp.redirect(), format!("{url}#time-zone"));
    assert_eq!(api_newsletter(&owner)["time_zone"], "America/New_York");
    let page = owner.client.get(&url);
    assert!(
        page.body
            .contains("the 09:00 slots are now on America/New_York's clocks")
    );
    assert!(page.body.contains("time zone (America/New_York, below)"));
    assert!(
        page.body
            .contains("<option value=\"America/New_York\" selected>")
    );

    // What the API refuses the form refuses: the page again with the message, nothing changed.
    let before = (stored(&app, &owner), api_newsletter(&owner));
    for bad in ["Mars/Olympus", "+01:00", "CEST", ""] {
        let resp = submit(&owner, "time_zone", &[("time_zone", bad)]);
        resp.expect(422);
        assert!(
            resp.body
                .contains("Time zone must be an IANA time zone name"),
            "{bad:?}: {}",
            resp.body
        );
        assert!(
            resp.body
                .contains("<option value=\"America/New_York\" selected>")
        );
        let api = owner.patch("/newsletter", &json!({ "time_zone": bad }));
        assert_eq!(api.status, 422, "{bad:?}");
    }
    let resp = submit(&owner, "time_zone", &[]);
    resp.expect(422);
    assert_eq!((stored(&app, &owner), api_newsletter(&owner)), before);
}

#[test]
fn dash_settings_tracking_off_sends_plain_links_and_on_tracks_again() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Private Post");
    let reader = unique_email("private-reader");
    add_subscriber(&owner, &reader);
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);

    submit(&owner, "tracking", &[("tracking", "off")]).redirect();
    send_issue(&owner, "Untracked");
    let html = app.smtp.messages_to(&reader)[0].html();
    assert!(!html.contains(&format!("{origin}/o/")), "a pixel: {html}");
    assert!(
        !html.contains(&format!("{origin}/c/")),
        "a tracked link: {html}"
    );
    assert!(
        html.contains("href=\"https://example.org/guide\""),
        "{html}"
    );

    submit(&owner, "tracking", &[("tracking", "on")]).redirect();
    send_issue(&owner, "Tracked again");
    let mails = app.smtp.messages_to(&reader);
    let tracked = mails
        .iter()
        .find(|m| m.parsed().subject() == Some("Tracked again"))
        .expect("the second issue")
        .html();
    assert!(
        tracked.contains(&format!("{origin}/o/")),
        "no pixel: {tracked}"
    );
    assert!(tracked.contains(&format!("{origin}/c/")), "no tracked link");
}

#[test]
fn dash_settings_pause_holds_sending_and_resume_allows_it() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Held Over");
    let reader = unique_email("held-reader");
    add_subscriber(&owner, &reader);
    let url = settings_url(&owner);
    let page = owner.client.get(&url);
    assert!(
        page.body
            .contains(&format!("href=\"{url}/status?to=paused\""))
    );

    // The confirmation step says what pausing does; the post comes from its form.
    let confirm = owner.client.get(&format!("{url}/status?to=paused"));
    confirm.expect(200);
    assert!(confirm.body.contains("Pause sending?"));
    assert!(confirm.body.contains("name=\"status\" value=\"paused\""));
    assert_eq!(
        api_newsletter(&owner)["status"],
        "active",
        "a GET changes nothing"
    );
    let resp = owner.client.submit(
        &format!("{url}/status?to=paused"),
        &format!("{url}/status"),
        &[("status", "paused")],
    );
    assert_eq!(resp.redirect(), format!("{url}#status"));
    assert_eq!(api_newsletter(&owner)["status"], "paused");

    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Waiting", "status": "approved", "content_markdown": "Soon."}}),
    );
    let id = issue.json()["id"].as_i64().unwrap();
    assert_eq!(
        owner
            .post(&format!("/issues/{id}/send_now"), &json!({}))
            .error_code(422),
        "newsletter_paused"
    );
    let page = owner.client.get(&url);
    assert!(page.body.contains("data-status=\"paused\""));
    assert!(
        page.body
            .contains(&format!("href=\"{url}/status?to=active\""))
    );

    let resp = owner.client.submit(
        &format!("{url}/status?to=active"),
        &format!("{url}/status"),
        &[("status", "active")],
    );
    assert_eq!(resp.redirect(), format!("{url}#status"));
    assert_eq!(api_newsletter(&owner)["status"], "active");
    owner
        .post(&format!("/issues/{id}/send_now"), &json!({}))
        .expect(200);
    app.smtp.wait_for_message_to(&reader, 1);

    // An unknown status or target: 422 on the settings page, 404 for the confirmation page.
    let resp = submit(&owner, "status", &[("status", "deleted")]);
    resp.expect(422);
    assert!(
        resp.body
            .contains("Status must be active, paused or cancelled")
    );
    owner
        .client
        .get(&format!("{url}/status?to=deleted"))
        .expect(404);
    assert_eq!(api_newsletter(&owner)["status"], "active");
}

#[test]
fn dash_settings_cancel_needs_the_subdomain_and_makes_everything_read_only() {
    let app = spawn_app();
    let owner = onboard(&app, "Last Call");
    let url = settings_url(&owner);
    let confirm = owner.client.get(&format!("{url}/status?to=cancelled"));
    confirm.expect(200);
    assert!(confirm.body.contains("You cannot undo this yourself"));
    assert!(
        confirm
            .body
            .contains(&format!("broadsheet status {} active", owner.subdomain))
    );

    for typed in ["", "last-cal", "someone-else"] {
        let resp = owner.client.submit(
            &format!("{url}/status?to=cancelled"),
            &format!("{url}/status"),
            &[("status", "cancelled"), ("confirmation", typed)],
        );
        resp.expect(422);
        assert!(
            resp.body.contains("Confirmation must be the subdomain"),
            "{}",
            resp.body
        );
        assert!(
            resp.body.contains("Cancel the newsletter?"),
            "the confirmation again"
        );
        assert_eq!(api_newsletter(&owner)["status"], "active");
    }
    let resp = owner.client.submit(
        &format!("{url}/status?to=cancelled"),
        &format!("{url}/status"),
        &[("status", "cancelled"), ("confirmation", &owner.subdomain)],
    );
    assert_eq!(resp.redirect(), format!("{url}#status"));
    assert_eq!(api_newsletter(&owner)["status"], "cancelled");

    // The API is read-only: reads work, every change is 403 newsletter_cancelled.
    assert_eq!(
        owner
            .patch("/newsletter", &json!({"name": "Back"}))
            .error_code(403),
        "newsletter_cancelled"
    );
    assert_eq!(
        owner
            .post("/subscribers", &json!({"email": unique_email("late")}))
            .error_code(403),
        "newsletter_cancelled"
    );

    // The settings page shows everything without a single form, and says who can undo it.
    let page = owner.client.get(&url);
    page.expect(200);
    assert!(page.body.contains("id=\"read-only\""));
    assert!(
        page.body
            .contains(&format!("broadsheet status {} active", owner.subdomain))
    );
    assert!(
        page.body.contains("value=\"Last Call\""),
        "the values are shown"
    );
    assert!(page.body.contains("disabled"));
    assert!(
        !page.body.contains(&format!("action=\"{url}")),
        "a settings form: {}",
        page.body
    );
    assert!(!page.body.contains("status?to="), "a status link");

    // Every settings post is refused and changes nothing, a reactivation included.
    let before = stored(&app, &owner);
    let mut forms = every_form(&owner);
    forms.push(("status", vec![("status", "active".into())]));
    for (action, fields) in &forms {
        let token_page = owner.client.get("/newsletters");
        let token = token_page.csrf_token();
        let mut all = vec![("authenticity_token", token.as_str())];
        all.extend(borrowed(fields));
        let resp = owner.client.post_form(&format!("{url}/{action}"), &all);
        assert_eq!(resp.status, 403, "{action}: {}", resp.body);
    }
    owner
        .client
        .get(&format!("{url}/status?to=active"))
        .expect(403);
    assert_eq!(stored(&app, &owner), before);
    let n = api_newsletter(&owner);
    assert_eq!(
        (&n["status"], &n["name"], &n["tier"]),
        (&json!("cancelled"), &json!("Last Call"), &json!("free"))
    );

    // The operator can bring it back; then the forms return.
    let (code, out, err) = app.cli(&["status", &owner.subdomain, "active"]);
    assert_eq!(code, 0, "{out} {err}");
    let page = owner.client.get(&url);
    assert!(page.body.contains(&format!("action=\"{url}/details\"")));
}

#[test]
fn dash_settings_upgrade_request_moves_free_to_pending() {
    let app = spawn_app();
    let owner = onboard(&app, "Small Start");
    let url = settings_url(&owner);
    assert_eq!(api_newsletter(&owner)["tier"], "free");
    let page = owner.client.get(&url);
    assert!(page.body.contains("data-tier=\"free\""));
    assert!(page.body.contains(&format!("action=\"{url}/upgrade\"")));
    assert!(
        page.body
            .contains(&format!("broadsheet tier {} paid", owner.subdomain))
    );

    assert_eq!(
        submit(&owner, "upgrade", &[]).redirect(),
        format!("{url}#plan")
    );
    assert_eq!(api_newsletter(&owner)["tier"], "pending");
    assert!(
        app.log()
            .contains(&format!("{} asks for the paid tier", owner.subdomain))
    );
    let page = owner.client.get(&url);
    assert!(page.body.contains("data-tier=\"pending\""));
    assert!(page.body.contains("waiting for the operator"));
    assert!(!page.body.contains(&format!("action=\"{url}/upgrade\"")));

    // Asking again is refused with a message; the operator sets paid.
    let resp = submit(&owner, "upgrade", &[]);
    resp.expect(422);
    assert!(resp.body.contains("Tier is already pending"));
    let (code, out, err) = app.cli(&["tier", &owner.subdomain, "paid"]);
    assert_eq!(code, 0, "{out} {err}");
    let page = owner.client.get(&url);
    assert!(page.body.contains("data-tier=\"paid\""));
    let resp = submit(&owner, "upgrade", &[]);
    resp.expect(422);
    assert!(resp.body.contains("Tier is already paid"));
    assert_eq!(api_newsletter(&owner)["tier"], "paid");
}

#[test]
fn dash_settings_other_users_get_404_for_every_url_and_change_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Mine Alone");
    let other = onboard(&app, "Somebody Else");
    let url = settings_url(&owner);
    let before = (stored(&app, &owner), api_newsletter(&owner));

    for path in [
        url.clone(),
        format!("{url}/status?to=paused"),
        format!("{url}/status?to=cancelled"),
        "/newsletters/999999/settings".to_string(),
        "/newsletters/abc/settings".to_string(),
    ] {
        other.client.get(&path).expect(404);
    }
    // Posts carry the other user's own valid token: only the ownership check stops them.
    let own_page = settings_url(&other);
    for (action, fields) in every_form(&owner) {
        let resp = other
            .client
            .submit(&own_page, &format!("{url}/{action}"), &borrowed(&fields));
        assert_eq!(resp.status, 404, "{action}: {}", resp.body);
    }
    assert_eq!((stored(&app, &owner), api_newsletter(&owner)), before);
    // Signed out: to the sign-in form.
    assert_eq!(app.client().get(&url).redirect(), "/session/new");
}

#[test]
fn dash_settings_posts_without_a_valid_csrf_token_are_refused() {
    let app = spawn_app();
    let owner = onboard(&app, "Guarded");
    let url = settings_url(&owner);
    let before = (stored(&app, &owner), api_newsletter(&owner));
    for (action, fields) in every_form(&owner) {
        let fields = borrowed(&fields);
        let resp = owner.client.post_form(&format!("{url}/{action}"), &fields);
        assert_eq!(resp.status, 403, "{action} without a token: {}", resp.body);
        let mut forged = vec![("authenticity_token", "0123456789abcdef")];
        forged.extend(fields.iter().copied());
        let resp = owner.client.post_form(&format!("{url}/{action}"), &forged);
        assert_eq!(resp.status, 403, "{action} with a forged token");
    }
    assert_eq!((stored(&app, &owner), api_newsletter(&owner)), before);
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn dash_settings_in_chromium_pause_by_clicking_then_cancel_read_only() {
    use crate::support::browser::{
        Driver, click, fill, runtime, screenshot, sign_in, wait_for_element, wait_for_path,
        wait_for_text,
    };
    let Some(driver) = Driver::start("dashboard settings") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard(&app, "Clicked Settings");
    let (base, url) = (app.base_url.clone(), settings_url(&owner));
    runtime().block_on(async {
        let c = driver.session().await;
        c.set_window_size(1280, 2400).await.unwrap();
        sign_in(&c, &base, &owner.email).await;

        c.goto(&format!("{base}{url}")).await.unwrap();
        screenshot(&c, "dashboard-settings").await;
        fill(&c, "newsletter[tagline]", "Typed in Chromium").await;
        click(&c, "#details button[type=submit]").await;
        wait_for_element(&c, "p.notice").await;
        click(&c, &format!("a[href=\"{url}/status?to=paused\"]")).await;
        wait_for_path(&c, &format!("{url}/status")).await;
        click(&c, "main form button[type=submit]").await;
        // The status page may still be there for a moment: wait for the new page's word.
        assert_eq!(
            wait_for_text(&c, "#newsletter-status", "paused").await,
            "paused"
        );

        click(&c, &format!("a[href=\"{url}/status?to=cancelled\"]")).await;
        fill(&c, "confirmation", &owner.subdomain).await;
        click(&c, "main form button[type=submit]").await;
        wait_for_element(&c, "#read-only").await;
        screenshot(&c, "dashboard-settings-cancelled").await;
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console errors: {errors:?}");
        c.close().await.unwrap();
    });
    let n = api_newsletter(&owner);
    assert_eq!(
        (&n["status"], &n["tagline"]),
        (&json!("cancelled"), &json!("Typed in Chromium"))
    );
}
