//! The preference centre through the real binary (docs/growth.md, "The preference
//! centre"): the footer link of every mail leads to a page that unsubscribes or opens the
//! reader's account page, where they change their name, choose among the owner's topics,
//! and pause their mail for 30 days (the sends and their counts leave them out, by the test
//! clock, never slept); each change fires `subscriber.updated`; stale forms change nothing.
//! Then the whole path in Chromium with axe.

use std::time::Duration;

use crate::support::send::{approved_issue, wait_status};
use crate::support::*;

/// Adds `email` with `tags` through the API; its id.
fn add(owner: &Owner, email: &str, tags: &[&str]) -> i64 {
    let resp = owner.post("/subscribers", &json!({"email": email, "tags": tags}));
    resp.expect(201);
    resp.json()["id"].as_i64().unwrap()
}

/// Sends a new issue `subject` to everyone; the count its answer states.
fn send_to_everyone(owner: &Owner, subject: &str) -> i64 {
    let id = approved_issue(owner, subject);
    let resp = owner.post(&format!("/issues/{id}/send_now"), &json!({}));
    resp.expect(200);
    let counted = resp.json()["subscribers"].as_i64().unwrap();
    let sent = wait_status(owner, id, "sent", Duration::from_secs(30));
    assert_eq!(
        sent["recipients"], counted,
        "{subject}: the count is who it went to"
    );
    counted
}

/// The footer link of the newest mail `subject` to `email`.
fn footer_link(app: &App, email: &str, subject: &str) -> String {
    let mail = app
        .smtp
        .messages_to(email)
        .into_iter()
        .rev()
        .find(|m| m.header("Subject").is_some_and(|s| s.contains(subject)))
        .unwrap_or_else(|| panic!("{email} got {subject}"));
    let text = mail.text();
    let at = text
        .find("Unsubscribe or change your preferences: ")
        .unwrap_or_else(|| panic!("the footer link in:\n{text}"));
    let rest = &text[at + "Unsubscribe or change your preferences: ".len()..];
    rest.split_whitespace().next().unwrap().to_string()
}

fn got(app: &App, email: &str, subject: &str) -> bool {
    app.smtp
        .messages_to(email)
        .iter()
        .any(|m| m.header("Subject").is_some_and(|s| s.contains(subject)))
}

fn updates(app: &App) -> i64 {
    app.count("SELECT count(*) FROM events WHERE kind = 'subscriber.updated'")
}

#[test]
fn a_reader_changes_their_name_topics_and_pauses_from_the_link_in_their_mail() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Preferred Post");
    set_sender(&owner);
    listen(&app, &owner, &["subscriber.updated"]);
    let reader = unique_email("chooser");
    let other = unique_email("bystander");
    let reader_id = add(&owner, &reader, &["news", "vip"]);
    add(&owner, &other, &["events"]);

    // The owner offers topics: two tags in use and a new one.
    let topics_url = format!("/newsletters/{}/topics", owner.newsletter_id);
    let page = owner.client.get(&topics_url);
    page.expect(200);
    for tag in ["events", "news", "vip"] {
        assert!(
            page.body
                .contains(&format!("name=\"topic\" value=\"{tag}\"")),
            "{}",
            page.body
        );
    }
    let offer = |new_topics: &str| {
        owner.client.submit(
            &topics_url,
            &topics_url,
            &[
                ("shown", "events"),
                ("shown", "news"),
                ("shown", "vip"),
                ("topic", "news"),
                ("topic", "events"),
                ("new_topics", new_topics),
            ],
        )
    };
    let saved = offer("deals, Bad Tag With A Very Long Name That Goes On And On And On");
    saved.expect(422);
    assert!(saved.body.contains("is too long"), "{}", saved.body);
    let saved = offer("deals");
    assert_eq!(saved.redirect(), topics_url);
    let page = owner.client.get(&topics_url);
    for (tag, ticked) in [
        ("deals", true),
        ("events", true),
        ("news", true),
        ("vip", false),
    ] {
        assert_eq!(
            page.body
                .contains(&format!("name=\"topic\" value=\"{tag}\" checked")),
            ticked,
            "{tag}: {}",
            page.body
        );
    }

    // Every mail's footer link leads to the unsubscribe page, which also opens the
    // preferences for the reader it names.
    assert_eq!(send_to_everyone(&owner, "First light"), 2);
    let link = footer_link(&app, &reader, "First light");
    let site = app.site_client(&owner.subdomain);
    let leave = site.get(&path_of(&link));
    leave.expect(200);
    assert!(leave.body.contains("Open my preferences"), "{}", leave.body);
    let opened = site.submit(
        &path_of(&link),
        &format!("{}/preferences", path_of(&link)),
        &[],
    );
    assert_eq!(opened.redirect(), "/account");
    let account = site.get("/account");
    account.expect(200);
    assert!(
        account
            .body
            .contains(&format!("Signed in as <strong>{reader}</strong>")),
        "{}",
        account.body
    );
    for (topic, ticked) in [("deals", false), ("events", false), ("news", true)] {
        assert_eq!(
            account
                .body
                .contains(&format!("name=\"topic\" value=\"{topic}\" checked")),
            ticked,
            "{topic}: {}",
            account.body
        );
    }
    assert!(
        !account.body.contains("value=\"vip\""),
        "only topics are offered"
    );
    // A forged press without the page's token changes nothing.
    let forged = site.post_form("/account/pause", &[]);
    assert_eq!(forged.status, 403);
    assert!(owner.get(&format!("/subscribers/{reader_id}")).json()["paused_until"].is_null());

    // The name.
    let before = updates(&app);
    let renamed = site.submit("/account", "/account/name", &[("name", "  Ada <Reader> ")]);
    assert_eq!(renamed.redirect(), "/account?saved=1");
    assert!(site.get("/account?saved=1").body.contains("Saved."));
    let s = owner.get(&format!("/subscribers/{reader_id}")).json();
    assert_eq!(s["name"], "Ada <Reader>");
    assert_eq!(updates(&app), before + 1, "subscriber.updated fires");
    let long = site.submit("/account", "/account/name", &[("name", &"x".repeat(300))]);
    assert_eq!(long.status, 422, "{}", long.body);
    assert_eq!(
        owner.get(&format!("/subscribers/{reader_id}")).json()["name"],
        "Ada <Reader>"
    );

    // Topics: deals in, news out; vip (no topic) stays.
    let chosen = site.submit(
        "/account",
        "/account/topics",
        &[
            ("shown", "deals"),
            ("shown", "events"),
            ("shown", "news"),
            ("topic", "deals"),
        ],
    );
    assert_eq!(chosen.redirect(), "/account?saved=1");
    assert_eq!(
        owner.get(&format!("/subscribers/{reader_id}")).json()["tags"],
        json!(["deals", "vip"])
    );
    assert_eq!(updates(&app), before + 2);
    // A page older than the owner's change: refused whole.
    owner
        .client
        .submit(
            &topics_url,
            &topics_url,
            &[
                ("shown", "deals"),
                ("shown", "events"),
                ("shown", "news"),
                ("shown", "vip"),
                ("topic", "news"),
            ],
        )
        .expect(303);
    let stale = site.submit(
        "/account",
        "/account/topics",
        &[("shown", "deals"), ("shown", "news"), ("topic", "news")],
    );
    assert_eq!(stale.status, 422, "{}", stale.body);
    assert!(stale.body.contains("no longer a topic"), "{}", stale.body);
    assert_eq!(
        owner.get(&format!("/subscribers/{reader_id}")).json()["tags"],
        json!(["deals", "vip"])
    );

    // Pause: 30 days without mail, counted out of every send; then mail again by itself.
    let paused = site.submit("/account", "/account/pause", &[]);
    assert_eq!(paused.redirect(), "/account?saved=1");
    let s = owner.get(&format!("/subscribers/{reader_id}")).json();
    let until = s["paused_until"].as_str().unwrap().to_string();
    let started = app.clock_now();
    let ends: jiff::Timestamp = until.parse().unwrap();
    // Thirty days from the (test) clock, give or take the second the request took.
    let days = (ends.as_second() - started.as_second()) as f64 / 86_400.0;
    assert!((days - 30.0).abs() < 0.01, "{until}: {days} days");
    assert_eq!(updates(&app), before + 3);
    assert!(
        site.get("/account")
            .body
            .contains("Your mail is paused until")
    );
    assert_eq!(send_to_everyone(&owner, "While away"), 1);
    assert!(!got(&app, &reader, "While away"));
    assert!(got(&app, &other, "While away"));
    // A segment leaves them out too, by tag and by the paid-members count alike.
    let tagged = approved_issue(&owner, "Deals only");
    let resp = owner.post(
        &format!("/issues/{tagged}/send_now"),
        &json!({"tags": ["deals"]}),
    );
    assert_eq!(resp.error_code(422), "no_active_subscribers");
    app.advance_clock(Duration::from_secs(30 * 24 * 3600 + 60));
    assert!(owner.get(&format!("/subscribers/{reader_id}")).json()["paused_until"].is_null());
    assert_eq!(send_to_everyone(&owner, "Back again"), 2);
    assert!(got(&app, &reader, "Back again"));

    // Pause and resume at once, from the newest mail's link (the session of a month ago
    // has ended).
    let link = footer_link(&app, &reader, "Back again");
    let opened = site.submit(
        &path_of(&link),
        &format!("{}/preferences", path_of(&link)),
        &[],
    );
    assert_eq!(opened.redirect(), "/account");
    site.submit("/account", "/account/pause", &[]);
    let resumed = site.submit("/account", "/account/resume", &[]);
    assert_eq!(resumed.redirect(), "/account?saved=1");
    assert!(owner.get(&format!("/subscribers/{reader_id}")).json()["paused_until"].is_null());
    assert_eq!(send_to_everyone(&owner, "Straight back"), 2);

    // One-click unsubscribe stays as it is: a POST to the footer link.
    let gone = site.post_form(&path_of(&link), &[]);
    gone.expect(200);
    assert_eq!(
        owner.get(&format!("/subscribers/{reader_id}")).json()["status"],
        "unsubscribed"
    );
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn the_preference_centre_in_chromium_from_the_mail_to_a_pause_with_axe() {
    use crate::support::browser::{
        Driver, assert_fits, click, runtime, screenshot, wait_for_path, wait_for_text,
    };
    let Some(driver) = Driver::start("preference centre") else {
        return;
    };
    let Some(axe) = crate::support::axe::Axe::load("preference centre") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard_paid(&app, "Browser Preferences");
    set_sender(&owner);
    let reader = unique_email("chromium-reader");
    let reader_id = add(&owner, &reader, &["news"]);
    let topics_url = format!("/newsletters/{}/topics", owner.newsletter_id);
    owner
        .client
        .submit(
            &topics_url,
            &topics_url,
            &[
                ("shown", "news"),
                ("topic", "news"),
                ("new_topics", "deals"),
            ],
        )
        .expect(303);
    send_to_everyone(&owner, "Browser morning");
    let link = footer_link(&app, &reader, "Browser morning");
    let mut violations = Vec::new();
    runtime().block_on(async {
        let c = driver.session().await;
        c.goto(&link).await.unwrap();
        wait_for_text(&c, "main", "Rather not leave?").await;
        violations.extend(crate::accessibility::check(&driver, &axe, &c, "unsubscribe page").await);
        click(&c, "form[action$=\"/preferences\"] button").await;
        wait_for_path(&c, "/account").await;
        wait_for_text(&c, "main", "Topics").await;
        violations.extend(crate::accessibility::check(&driver, &axe, &c, "preferences").await);
        c.set_window_size(390, 844).await.unwrap();
        assert_fits(&c, 390, "the preference centre").await;
        screenshot(&c, "preference-centre-phone").await;
        c.set_window_size(1280, 900).await.unwrap();
        // Tick "deals", untick "news", save; then pause.
        click(&c, "input[name=topic][value=deals]").await;
        click(&c, "input[name=topic][value=news]").await;
        click(&c, "form[action=\"/account/topics\"] button").await;
        wait_for_text(&c, "main", "Saved.").await;
        click(&c, "form[action=\"/account/pause\"] button").await;
        wait_for_text(&c, "main", "Your mail is paused until").await;
        violations
            .extend(crate::accessibility::check(&driver, &axe, &c, "paused preferences").await);
        c.close().await.unwrap();
    });
    assert!(violations.is_empty(), "axe:\n{}", violations.join("\n"));
    let s = owner.get(&format!("/subscribers/{reader_id}")).json();
    assert_eq!(s["tags"], json!(["deals"]));
    assert!(s["paused_until"].is_string(), "{s}");
}
