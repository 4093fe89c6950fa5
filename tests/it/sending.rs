//! Sending an issue: the messages a real SMTP listener receives, permanent and
//! temporary refusals, tracking, unsubscribes, scheduling, pausing and bounce reports.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::support::send::{issue, send_now, send_now_answer, wait_status};
use crate::support::*;
use mail_parser::MimeHeaders;

/// Adds a subscriber through the API; returns its id.
fn add_subscriber(owner: &Owner, email: &str) -> i64 {
    let resp = owner.post("/subscribers", &json!({ "email": email }));
    resp.expect(201);
    resp.json()["id"].as_i64().expect("subscriber id")
}

fn subscriber(owner: &Owner, id: i64) -> Value {
    let resp = owner.get(&format!("/subscribers/{id}"));
    resp.expect(200);
    resp.json()
}

/// Creates an issue from the fields of `issue`; returns its id.
fn create_issue(owner: &Owner, issue: Value) -> i64 {
    let resp = owner.post("/issues", &json!({ "issue": issue }));
    resp.expect(201);
    resp.json()["id"].as_i64().expect("issue id")
}

fn stats(owner: &Owner) -> Value {
    let resp = owner.get("/newsletter/stats");
    resp.expect(200);
    resp.json()["data"].clone()
}

/// Every `href`/`src` value in `html`, unescaped.
fn attribute_values(html: &str, attr: &str) -> Vec<String> {
    let mark = format!("{attr}=\"");
    html.match_indices(&mark)
        .filter_map(|(at, _)| {
            let rest = &html[at + mark.len()..];
            rest.find('"').map(|end| http::unescape(&rest[..end]))
        })
        .collect()
}

/// The path and query of an absolute URL on the newsletter's site.
fn site_path(app: &App, subdomain: &str, url: &str) -> String {
    let origin = format!("http://{subdomain}.{}", app.public_host);
    url.strip_prefix(&origin)
        .unwrap_or_else(|| panic!("{url} is not on {origin}"))
        .to_string()
}

/// RFC 3339 UTC, `ahead` of the server's clock.
fn on_the_clock(app: &App, ahead: jiff::SignedDuration) -> String {
    (app.clock_now() + ahead).to_string()
}

const MARKDOWN: &str = "# Field notes\n\nThis week {{unsubscribe}} **bold** news and a [guide](https://example.org/guide?a=1&b=2).\n\n\
<script>alert('x')</script>\n\n<b>raw tag</b>\n\n- one\n- two\n";

fn full_issue(subject: &str) -> Value {
    json!({
        "subject": subject,
        "status": "approved",
        "content_markdown": MARKDOWN,
        "articles": [
            {"title": "Rust 2024 ships", "url": "https://blog.rust-lang.org/2024", "summarized_article": "Edition notes."},
            {"title": "SQLite in production", "url": "https://sqlite.org/whentouse.html", "summarized_article": "When it fits."}
        ]
    })
}

#[test]
fn sending_delivers_one_correct_message_to_each_active_subscriber() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Field Notes");
    listen(&app, &owner, &["issue.sent"]);
    let emails: Vec<String> = (0..7).map(|_| unique_email("reader")).collect();
    let ids: Vec<i64> = emails.iter().map(|e| add_subscriber(&owner, e)).collect();
    // Two unsubscribe, one bounces (reported through the API-key bounce endpoint).
    for &id in &ids[..2] {
        owner
            .patch(
                &format!("/subscribers/{id}"),
                &json!({"subscriber": {"status": "unsubscribed"}}),
            )
            .expect(200);
    }
    owner
        .post(
            "/bounces",
            &json!({"email": emails[2], "reason": "550 mailbox gone"}),
        )
        .expect(200);
    assert_eq!(subscriber(&owner, ids[2])["status"], "bounced");
    let active: Vec<&String> = emails[3..].iter().collect();

    let id = create_issue(&owner, full_issue("Issue one: field notes"));
    let queued = send_now_answer(&owner, id);
    assert_eq!(queued["subscribers"], 4);
    assert_eq!(queued["issue"]["status"], "approved");

    let sent = wait_status(&owner, id, "sent", Duration::from_secs(30));
    assert!(sent["sent_at"].as_str().is_some_and(|s| s.ends_with('Z')));
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id}"
        )),
        4
    );

    // Exactly one message per active subscriber, none to the others.
    for email in &emails[..3] {
        assert!(app.smtp.messages_to(email).is_empty(), "{email} got mail");
    }
    let site = format!("http://{}.{}", owner.subdomain, app.public_host);
    let mut unsubscribe_links = HashSet::new();
    for email in &active {
        let got = app.smtp.messages_to(email);
        assert_eq!(got.len(), 1, "{email} got {} messages", got.len());
        let mail = &got[0];
        assert_eq!(mail.to, vec![email.to_string()]);
        // The envelope sender is the delivery's return path (VERP, tests/it/bounce_listener.rs);
        // the From header stays the newsletter's sender.
        assert!(
            mail.from.starts_with("bounce+") && mail.from.ends_with("@localhost"),
            "{}",
            mail.from
        );
        assert!(
            mail.header("From")
                .is_some_and(|from| from.contains("editor@example.com")),
            "{:?}",
            mail.header("From")
        );
        let parsed = mail.parsed();
        let content_type = parsed.content_type().expect("Content-Type");
        assert_eq!(
            (
                content_type.ctype(),
                content_type.subtype().unwrap_or_default()
            ),
            ("multipart", "alternative")
        );
        let from = parsed.from().and_then(|f| f.first()).expect("From");
        assert_eq!(from.name(), Some("Field Notes"));
        assert_eq!(from.address(), Some("editor@example.com"));
        let to = parsed.to().and_then(|t| t.first()).expect("To");
        assert_eq!(to.address(), Some(email.as_str()));
        assert_eq!(parsed.subject(), Some("Issue one: field notes"));
        assert!(parsed.date().is_some(), "Date");
        assert!(parsed.message_id().is_some_and(|m| m.contains('@')));
        // The newsletter once, under the public host; the issue and newsletter for Gmail's
        // feedback loop.
        assert_eq!(
            mail.header("List-Id").as_deref(),
            Some(format!("\"Field Notes\" <{}.localhost>", owner.subdomain).as_str())
        );
        assert_eq!(
            mail.header("Feedback-ID").as_deref(),
            Some(format!("{id}:{}:broadsheet:localhost", owner.newsletter_id).as_str())
        );
        let unsubscribe = mail.header("List-Unsubscribe").expect("List-Unsubscribe");
        let unsubscribe = unsubscribe
            .strip_prefix('<')
            .and_then(|u| u.strip_suffix('>'))
            .unwrap_or_else(|| panic!("List-Unsubscribe {unsubscribe}"));
        assert!(
            unsubscribe.starts_with(&format!("{site}/u/")),
            "{unsubscribe}"
        );
        assert_eq!(
            mail.header("List-Unsubscribe-Post").as_deref(),
            Some("List-Unsubscribe=One-Click")
        );
        assert!(unsubscribe_links.insert(unsubscribe.to_string()));

        // HTML: the Markdown rendered, raw HTML escaped, articles, personal links.
        let html = mail.html();
        assert!(html.contains("<h1>Field notes</h1>"), "{html}");
        assert!(html.contains("<strong>bold</strong>"));
        assert!(html.contains("<li>one</li>"));
        assert!(!html.contains("<script>"), "raw HTML passed through");
        assert!(!html.contains("<b>raw tag</b>"), "raw HTML passed through");
        assert!(html.contains("&lt;script&gt;"));
        assert!(
            html.contains("{{unsubscribe}}"),
            "text that looks like a placeholder stays text"
        );
        assert!(html.contains("Rust 2024 ships") && html.contains("Edition notes."));
        assert!(html.contains("SQLite in production") && html.contains("When it fits."));
        let hrefs = attribute_values(&html, "href");
        assert!(hrefs.contains(&unsubscribe.to_string()), "{hrefs:?}");
        let clicks: Vec<&String> = hrefs
            .iter()
            .filter(|h| h.starts_with(&format!("{site}/c/")))
            .collect();
        assert_eq!(clicks.len(), 3, "guide + two articles: {hrefs:?}");
        assert!(
            hrefs.iter().all(|h| h.starts_with(&format!("{site}/"))),
            "every link goes through the site: {hrefs:?}"
        );
        let pixels: Vec<String> = attribute_values(&html, "src")
            .into_iter()
            .filter(|s| s.starts_with(&format!("{site}/o/")))
            .collect();
        assert_eq!(pixels.len(), 1, "one open pixel");

        // Text: rendered from the issue, not its Markdown: no syntax left, links written
        // out, raw HTML as the reader sees it on the web; and the unsubscribe link.
        let text = mail.text().replace("\r\n", "\n");
        assert!(text.contains("Field notes\n==========="), "{text}");
        assert!(
            !text.contains("**bold**")
                && text.contains("bold news and a guide (https://example.org/guide?a=1&b=2)."),
            "{text}"
        );
        assert!(text.contains("- one\n- two"), "{text}");
        assert!(
            text.contains("<b>raw tag</b>"),
            "escaped HTML stays text: {text}"
        );
        assert!(!text.contains("# Field") && !text.contains("]("), "{text}");
        assert!(
            text.contains("Rust 2024 ships") && text.contains("https://blog.rust-lang.org/2024")
        );
        assert!(text.contains(unsubscribe), "{text}");
    }
    assert_eq!(unsubscribe_links.len(), 4, "per-recipient links");

    // The issue.sent event and the stats.
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'issue.sent'"),
        1
    );
    let stats = stats(&owner);
    assert_eq!(stats["subscribers"]["bounced"], 1);
    assert_eq!(stats["subscribers"]["unsubscribed"], 2);
    assert_eq!(stats["issues"]["sent_last_30_days"], 1);
    assert_eq!(stats["engagement"]["last_30_days"]["emails_sent"], 4);
}

#[test]
fn sending_bounces_permanent_refusals_and_retries_temporary_ones() {
    refusals_bounce_or_retry(false);
}

#[test]
fn sending_bounces_and_retries_without_pipelining_too() {
    refusals_bounce_or_retry(true);
}

/// 550 at RCPT bounces, 451 twice then delivers; with the envelope pipelined (the sink offers
/// PIPELINING) or sent command by command.
fn refusals_bounce_or_retry(no_pipelining: bool) {
    let (ok, gone, busy) = (
        unique_email("ok"),
        unique_email("gone"),
        unique_email("busy"),
    );
    let sink = SmtpSink::start_with(Rules {
        permanent: vec![gone.clone()],
        temporary: HashMap::from([(busy.clone(), 2)]),
        delay: Duration::ZERO,
        no_pipelining,
        ..Rules::default()
    });
    let app = spawn_app_on(sink, &["--send-retry-base-ms", "200"]);
    let owner = onboard_paid(&app, "Refusals");
    listen(&app, &owner, &["email.bounced"]);
    let ids: Vec<i64> = [&ok, &gone, &busy]
        .iter()
        .map(|e| add_subscriber(&owner, e))
        .collect();
    let id = create_issue(&owner, full_issue("Refusals"));
    send_now(&owner, id);
    wait_status(&owner, id, "sent", Duration::from_secs(30));

    assert_eq!(app.smtp.messages_to(&ok).len(), 1);
    assert_eq!(app.smtp.messages_to(&gone).len(), 0);
    assert_eq!(
        app.smtp.messages_to(&busy).len(),
        1,
        "delivered after retries"
    );
    let refusals = app.smtp.refusals();
    assert_eq!(
        refusals
            .iter()
            .filter(|(a, c)| *a == busy && *c == 451)
            .count(),
        2
    );
    assert!(refusals.iter().any(|(a, c)| *a == gone && *c == 550));

    assert_eq!(subscriber(&owner, ids[0])["status"], "active");
    assert_eq!(subscriber(&owner, ids[1])["status"], "bounced");
    assert_eq!(subscriber(&owner, ids[2])["status"], "active");
    let statuses: HashMap<String, (String, i64)> = app
        .db()
        .prepare(&format!(
            "SELECT email, status, attempts FROM deliveries WHERE issue_id = {id}"
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(statuses[&ok].0, "sent");
    assert_eq!(statuses[&gone].0, "bounced");
    assert_eq!(statuses[&busy], ("sent".to_string(), 3));
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'email.bounced'"),
        1
    );
    let stats = stats(&owner);
    assert_eq!(stats["subscribers"]["bounced"], 1);
    assert_eq!(stats["engagement"]["last_30_days"]["emails_sent"], 2);
}

#[test]
fn sending_opens_and_clicks_change_the_stats_and_signatures_are_checked() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Tracked");
    listen(&app, &owner, &["email.opened", "email.clicked"]);
    let (a, b) = (unique_email("open"), unique_email("idle"));
    add_subscriber(&owner, &a);
    add_subscriber(&owner, &b);
    let id = create_issue(&owner, full_issue("Tracked issue"));
    send_now(&owner, id);
    wait_status(&owner, id, "sent", Duration::from_secs(30));
    let before = stats(&owner);
    assert_eq!(before["engagement"]["average_open_rate"], 0.0);
    assert_eq!(before["engagement"]["average_click_rate"], 0.0);

    let site = app.site_client(&owner.subdomain);
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);
    let html = app.smtp.messages_to(&a)[0].html();
    let pixel = attribute_values(&html, "src")
        .into_iter()
        .find(|s| s.starts_with(&format!("{origin}/o/")))
        .expect("open pixel");
    let resp = site.get(&site_path(&app, &owner.subdomain, &pixel));
    resp.expect(200);
    assert_eq!(resp.header("content-type"), Some("image/gif"));
    // A second open changes nothing.
    site.get(&site_path(&app, &owner.subdomain, &pixel))
        .expect(200);
    let opened = stats(&owner);
    assert_eq!(opened["engagement"]["average_open_rate"], 50.0);
    assert_eq!(opened["engagement"]["average_click_rate"], 0.0);
    assert_eq!(opened["engagement"]["last_30_days"]["opens"], 1);

    let click = attribute_values(&html, "href")
        .into_iter()
        .find(|h| h.starts_with(&format!("{origin}/c/")) && h.contains("guide"))
        .expect("tracked guide link");
    let path = site_path(&app, &owner.subdomain, &click);
    let resp = site.get(&path);
    assert_eq!(resp.status, 302, "{}", resp.body);
    assert_eq!(
        resp.header("location"),
        Some("https://example.org/guide?a=1&b=2")
    );
    let clicked = stats(&owner);
    assert_eq!(clicked["engagement"]["average_open_rate"], 50.0);
    assert_eq!(clicked["engagement"]["average_click_rate"], 50.0);
    assert_eq!(clicked["engagement"]["last_30_days"]["clicks"], 1);
    let top = &clicked["top_issues"][0];
    assert_eq!(top["id"], id);
    assert_eq!(top["subject"], "Tracked issue");
    assert_eq!(
        (top["open_rate"].clone(), top["click_rate"].clone()),
        (json!(50.0), json!(50.0))
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'email.opened'"),
        1
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'email.clicked'"),
        1
    );

    // Tampering: another target with the same signature, a changed signature, another
    // delivery's id: refused, no redirect anywhere.
    let (before_query, _) = path.split_once('?').unwrap();
    let evil = format!("{before_query}?u=https%3A%2F%2Fevil.example%2F");
    let mut forged_sig = path.clone();
    let sig_start = forged_sig.find("/c/").unwrap() + 3;
    let sig_start = sig_start + forged_sig[sig_start..].find('/').unwrap() + 1;
    let first = forged_sig.as_bytes()[sig_start];
    forged_sig.replace_range(
        sig_start..sig_start + 1,
        if first == b'0' { "1" } else { "0" },
    );
    for bad in [evil, forged_sig] {
        let resp = site.get(&bad);
        assert_eq!(resp.status, 404, "{bad}");
        assert!(resp.header("location").is_none(), "{bad} redirected");
    }
    // A forged pixel records nothing.
    let forged_pixel = pixel.replace("/o/", "/o/9").to_string();
    assert_eq!(
        site.get(&site_path(&app, &owner.subdomain, &forged_pixel))
            .status,
        404
    );
    assert_eq!(stats(&owner)["engagement"]["average_open_rate"], 50.0);
}

#[test]
fn sending_unsubscribe_link_confirms_on_get_and_unsubscribes_on_one_click_post() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Leaving");
    listen(&app, &owner, &["email.unsubscribed"]);
    let (stay, leave) = (unique_email("stay"), unique_email("leave"));
    add_subscriber(&owner, &stay);
    let leave_id = add_subscriber(&owner, &leave);
    let id = create_issue(&owner, full_issue("Leaving soon"));
    send_now(&owner, id);
    wait_status(&owner, id, "sent", Duration::from_secs(30));

    let mail = &app.smtp.messages_to(&leave)[0];
    let header = mail.header("List-Unsubscribe").unwrap();
    let url = header.trim_start_matches('<').trim_end_matches('>');
    let path = site_path(&app, &owner.subdomain, url);
    let site = app.site_client(&owner.subdomain);

    // GET only shows the confirm page (mail scanners follow links).
    let page = site.get(&path);
    page.expect(200);
    assert!(page.body.contains("<form") && page.body.contains("method=\"post\""));
    assert_eq!(subscriber(&owner, leave_id)["status"], "active");

    // A wrong signature is refused.
    let bad = format!("{}0", &path[..path.len() - 1]);
    let bad = if bad == path {
        format!("{}1", &path[..path.len() - 1])
    } else {
        bad
    };
    assert_eq!(
        site.post_form(&bad, &[("List-Unsubscribe", "One-Click")])
            .status,
        404
    );
    assert_eq!(subscriber(&owner, leave_id)["status"], "active");

    // RFC 8058 one-click POST.
    let resp = site.post_form(&path, &[("List-Unsubscribe", "One-Click")]);
    resp.expect(200);
    let gone = subscriber(&owner, leave_id);
    assert_eq!(gone["status"], "unsubscribed");
    assert!(
        gone["unsubscribed_at"]
            .as_str()
            .is_some_and(|s| s.ends_with('Z'))
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'email.unsubscribed'"),
        1
    );
    // Again: still fine, no second event.
    site.post_form(&path, &[("List-Unsubscribe", "One-Click")])
        .expect(200);
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'email.unsubscribed'"),
        1
    );

    // The next issue skips them.
    let next = create_issue(&owner, full_issue("After leaving"));
    assert_eq!(send_now(&owner, next), 1);
    wait_status(&owner, next, "sent", Duration::from_secs(30));
    assert_eq!(app.smtp.messages_to(&leave).len(), 1);
    assert_eq!(app.smtp.messages_to(&stay).len(), 2);
}

#[test]
fn sending_without_tracking_has_no_pixel_and_plain_links() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Private");
    let (code, out, err) = app.cli(&["tracking", &owner.subdomain, "off"]);
    assert_eq!(code, 0, "{out} {err}");
    let reader = unique_email("private");
    add_subscriber(&owner, &reader);
    let id = create_issue(&owner, full_issue("Untracked"));
    send_now(&owner, id);
    wait_status(&owner, id, "sent", Duration::from_secs(30));

    let mail = &app.smtp.messages_to(&reader)[0];
    let html = mail.html();
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);
    assert!(!html.contains(&format!("{origin}/o/")), "a pixel: {html}");
    assert!(!html.contains(&format!("{origin}/c/")), "a tracked link");
    let hrefs = attribute_values(&html, "href");
    assert!(
        hrefs.contains(&"https://example.org/guide?a=1&b=2".to_string()),
        "{hrefs:?}"
    );
    assert!(hrefs.contains(&"https://blog.rust-lang.org/2024".to_string()));
    // Unsubscribing still works.
    assert!(hrefs.iter().any(|h| h.starts_with(&format!("{origin}/u/"))));
    assert!(mail.header("List-Unsubscribe").is_some());
}

#[test]
fn sending_scheduled_issue_goes_out_at_its_time() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "On Time");
    let reader = unique_email("scheduled");
    add_subscriber(&owner, &reader);
    let at = on_the_clock(&app, jiff::SignedDuration::from_hours(1));
    let id = create_issue(
        &owner,
        json!({"subject": "Timed", "content_markdown": "On the dot.", "status": "scheduled", "scheduled_for": at}),
    );
    // An issue due a minute earlier: once it has gone, the scheduler has looked at the
    // clock a minute before `at`, and passed the timed issue by.
    let early = create_issue(
        &owner,
        json!({"subject": "Early bird", "content_markdown": "First.", "status": "scheduled",
            "scheduled_for": on_the_clock(&app, jiff::SignedDuration::from_mins(58))}),
    );
    assert_eq!(issue(&owner, id)["status"], "scheduled");
    app.set_clock(instant(&at) - jiff::SignedDuration::from_mins(1));
    wait_status(&owner, early, "sent", Duration::from_secs(20));
    assert_eq!(issue(&owner, id)["status"], "scheduled", "sent early");
    assert_eq!(app.smtp.messages_to(&reader).len(), 1);

    app.advance_clock(Duration::from_secs(60));
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert_eq!(app.smtp.messages_to(&reader).len(), 2);
    let sent_at = instant(sent["sent_at"].as_str().unwrap());
    assert!(
        sent_at >= instant(&at),
        "sent at {sent_at}, scheduled for {at}"
    );
    assert!(sent_at < instant(&at) + jiff::SignedDuration::from_secs(10));
}

#[test]
fn sending_scheduled_issue_failing_its_checks_turns_approved_with_last_error() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Nobody Here");
    let id = create_issue(
        &owner,
        json!({"subject": "To nobody", "content_markdown": "Hello?", "status": "scheduled",
            "scheduled_for": on_the_clock(&app, jiff::SignedDuration::from_hours(1))}),
    );
    app.advance_clock(Duration::from_secs(3600));
    let held = wait_for("the scheduled check", Duration::from_secs(15), || {
        let issue = issue(&owner, id);
        (issue["status"] != "scheduled").then_some(issue)
    });
    assert_eq!(held["status"], "approved", "{held}");
    let error = held["last_error"].as_str().expect("last_error");
    assert!(error.contains("subscriber"), "{error}");
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id}"
        )),
        0
    );
}

#[test]
fn sending_paused_newsletter_holds_its_scheduled_send() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Held");
    let reader = unique_email("held");
    add_subscriber(&owner, &reader);
    let (code, out, err) = app.cli(&["status", &owner.subdomain, "paused"]);
    assert_eq!(code, 0, "{out} {err}");
    let id = create_issue(
        &owner,
        json!({"subject": "Held", "content_markdown": "Later.", "status": "scheduled",
            "scheduled_for": on_the_clock(&app, jiff::SignedDuration::from_hours(1))}),
    );
    // Another newsletter's issue, due later (its free tier turns it back to approved): once
    // it has moved, the scheduler has run past the held issue's time.
    let other = onboard(&app, "Still Running");
    let later = create_issue(
        &other,
        json!({"subject": "Later", "content_markdown": "Hi.", "status": "scheduled",
            "scheduled_for": on_the_clock(&app, jiff::SignedDuration::from_hours(2))}),
    );
    app.advance_clock(Duration::from_secs(3 * 3600));
    wait_for("the later issue's turn", Duration::from_secs(15), || {
        (issue(&other, later)["status"] != "scheduled").then_some(())
    });
    let held = issue(&owner, id);
    assert_eq!(held["status"], "scheduled", "{held}");
    assert!(held["last_error"].is_null());
    assert!(app.smtp.messages_to(&reader).is_empty());
    // send_now is refused while paused.
    assert_eq!(
        owner
            .post(&format!("/issues/{id}/send_now"), &json!({}))
            .error_code(422),
        "newsletter_paused"
    );

    // Resumed: the held issue goes out.
    let (code, out, err) = app.cli(&["status", &owner.subdomain, "active"]);
    assert_eq!(code, 0, "{out} {err}");
    wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert_eq!(app.smtp.messages_to(&reader).len(), 1);
}

#[test]
fn sending_bounce_endpoint_marks_subscribers_bounced() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Bounces");
    listen(&app, &owner, &["email.bounced"]);
    let (a, b) = (unique_email("hard"), unique_email("soft"));
    let a_id = add_subscriber(&owner, &a);
    let b_id = add_subscriber(&owner, &b);
    let id = create_issue(&owner, full_issue("Bouncy"));
    send_now(&owner, id);
    wait_status(&owner, id, "sent", Duration::from_secs(30));

    let token: String = app
        .db()
        .query_row(
            "SELECT bounce_token FROM newsletters WHERE subdomain = ?1",
            [&owner.subdomain],
            |r| r.get(0),
        )
        .unwrap();
    let client = app.client();
    let post = |path: &str, body: Value| {
        client
            .request(
                "POST",
                path,
                &[],
                Some(("application/json", serde_json::to_vec(&body).unwrap())),
            )
            .unwrap()
    };
    // A wrong token is refused and changes nothing.
    let resp = post(
        &format!("/bounces/{}x", &token[..token.len() - 1]),
        json!({"email": a}),
    );
    assert_eq!(resp.error_code(401), "unauthorized");
    assert_eq!(subscriber(&owner, a_id)["status"], "active");
    // A field the report does not have: 422 naming it, as `POST /api/v1/bounces` answers.
    let resp = post(&format!("/bounces/{token}"), json!({"nope": 1}));
    assert_eq!(resp.error_code(422), "validation_error");
    assert!(resp.body.contains("nope"), "{}", resp.body);
    // Its own fields, malformed (no address, or not text): 400.
    for malformed in [json!({"reason": "hard"}), json!({"email": 5})] {
        assert_eq!(
            post(&format!("/bounces/{token}"), malformed).error_code(400),
            "invalid_json"
        );
    }

    let resp = post(
        &format!("/bounces/{token}"),
        json!({"email": a.to_uppercase(), "reason": "550 5.1.1 user unknown"}),
    );
    resp.expect(200);
    assert_eq!(subscriber(&owner, a_id)["status"], "bounced");
    assert_eq!(subscriber(&owner, b_id)["status"], "active");
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id} AND status = 'bounced' AND bounced_at IS NOT NULL"
        )),
        1
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'email.bounced'"),
        1
    );
    // Reported twice: no second event.
    post(&format!("/bounces/{token}"), json!({"email": a})).expect(200);
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'email.bounced'"),
        1
    );
    // An unknown address: 404.
    assert_eq!(
        post(
            &format!("/bounces/{token}"),
            json!({"email": unique_email("stranger")})
        )
        .status,
        404
    );
    // The API-key variant, and a bad key.
    owner.post("/bounces", &json!({"email": b})).expect(200);
    assert_eq!(subscriber(&owner, b_id)["status"], "bounced");
    assert_eq!(
        app.client()
            .api("POST", "/bounces", "nokey", Some(&json!({"email": b})))
            .status,
        401
    );
    assert_eq!(stats(&owner)["subscribers"]["bounced"], 2);
}

/// A bounce or complaint message as an MTA writes it (tests/fixtures/bounces).
fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/bounces/{name}.eml",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).expect("bounce fixture")
}

/// A paid newsletter with a subscriber for each address, one issue sent to them all, and
/// webhooks listening to bounces and unsubscribes; returns the owner, the ids and the token.
fn sent_to(app: &App, addresses: &[&str]) -> (Owner, Vec<i64>, String) {
    let owner = onboard_paid(app, "Reports");
    listen(app, &owner, &["email.bounced", "email.unsubscribed"]);
    let ids = addresses
        .iter()
        .map(|a| add_subscriber(&owner, a))
        .collect();
    send_and_wait(&owner, "Issue 12");
    let (code, out, err) = app.cli(&["bounce-token", &owner.subdomain]);
    assert_eq!(code, 0, "{err}");
    let token = out
        .lines()
        .find_map(|l| l.strip_prefix("token: "))
        .expect("token line")
        .to_string();
    assert!(
        out.contains(&format!("url: {}/bounces/{token}", app.base_url)),
        "{out}"
    );
    (owner, ids, token)
}

fn send_and_wait(owner: &Owner, subject: &str) {
    let id = create_issue(owner, full_issue(subject));
    send_now(owner, id);
    wait_status(owner, id, "sent", Duration::from_secs(30));
}

#[test]
fn sending_raw_dsn_and_arf_messages_posted_to_the_bounce_url_are_applied() {
    let app = spawn_app();
    let addresses = [
        "gone@example.net",
        "nobody@gmail.example",
        "slow@example.org",
        "reader@yahoo.example",
    ];
    let (owner, ids, token) = sent_to(&app, &addresses);
    let client = app.client();
    let post = |content_type: &str, body: Vec<u8>| {
        client
            .request(
                "POST",
                &format!("/bounces/{token}"),
                &[],
                Some((content_type, body)),
            )
            .unwrap()
    };

    // Postfix's DSN, as message/rfc822: a permanent failure with its status and diagnostic.
    let resp = post("message/rfc822", fixture("postfix-dsn"));
    resp.expect(200);
    assert_eq!(resp.json()["bounced"], json!(["gone@example.net"]));
    assert_eq!(subscriber(&owner, ids[0])["status"], "bounced");
    let event = last_event(&app, "email.bounced");
    assert_eq!(event["email"], "gone@example.net");
    assert_eq!(event["status"], "5.1.1");
    assert!(
        event["diagnostic"]
            .as_str()
            .unwrap()
            .contains("User unknown in virtual mailbox table"),
        "{event}"
    );

    // Exim's, as text/plain with CRLF line ends.
    let exim = String::from_utf8(fixture("exim-dsn")).unwrap();
    post(
        "text/plain; charset=us-ascii",
        exim.replace('\n', "\r\n").into_bytes(),
    )
    .expect(200);
    assert_eq!(subscriber(&owner, ids[1])["status"], "bounced");

    // A delay: noted on the delivery, the subscriber stays active.
    let resp = post("message/rfc822", fixture("delayed-dsn"));
    resp.expect(200);
    assert_eq!(resp.json()["soft_bounced"], json!(["slow@example.org"]));
    assert_eq!(subscriber(&owner, ids[2])["status"], "active");
    assert_eq!(
        app.count("SELECT count(*) FROM deliveries WHERE email = 'slow@example.org' AND soft_bounced_at IS NOT NULL AND status = 'sent'"),
        1
    );

    // A complaint unsubscribes, with the reason.
    post("message/rfc822", fixture("arf-complaint")).expect(200);
    assert_eq!(subscriber(&owner, ids[3])["status"], "unsubscribed");
    let event = last_event(&app, "email.unsubscribed");
    assert_eq!(event["email"], "reader@yahoo.example");
    assert_eq!(event["reason"], "complaint");
    assert_eq!(event["feedback_type"], "abuse");

    // Anything else is refused and changes nothing; so is a message past 1 MiB.
    let events = app.count("SELECT count(*) FROM events");
    assert_eq!(
        post("message/rfc822", fixture("not-a-report")).error_code(422),
        "not_a_report"
    );
    let mut big = fixture("postfix-dsn");
    big.extend(std::iter::repeat_n(b'x', 1024 * 1024));
    assert_eq!(
        post("message/rfc822", big).error_code(413),
        "payload_too_large"
    );
    assert_eq!(app.count("SELECT count(*) FROM events"), events);
    // A wrong token: 401, as for JSON.
    let resp = client
        .request(
            "POST",
            "/bounces/nottoken",
            &[],
            Some(("message/rfc822", fixture("postfix-dsn"))),
        )
        .unwrap();
    assert_eq!(resp.error_code(401), "unauthorized");
}

#[test]
fn sending_broadsheet_bounce_reads_a_report_on_stdin_and_counts_soft_bounces() {
    let app = spawn_app();
    let (owner, ids, _) = sent_to(&app, &["gone@example.net", "slow@example.org"]);
    let bounce = |name: &str| app.cli_with_input(&["bounce", &owner.subdomain], &fixture(name));

    let (code, out, err) = bounce("postfix-dsn");
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("gone@example.net: bounced"), "{out}");
    assert_eq!(subscriber(&owner, ids[0])["status"], "bounced");
    assert_eq!(last_event(&app, "email.bounced")["status"], "5.1.1");

    // Not a report: exit 6, nothing changed.
    let (code, _, err) = bounce("not-a-report");
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("not a bounce or complaint report"), "{err}");
    // Unknown newsletter: 3.
    let (code, _, _) = app.cli_with_input(&["bounce", "nosuchletter"], &fixture("postfix-dsn"));
    assert_eq!(code, 3);

    // Soft bounces: issue 12 delayed, issue 13 delivered, then 14 and 15 delayed: the run is
    // two, the subscriber stays active; a delay of issue 16 makes three in a row.
    assert_eq!(bounce("delayed-dsn").0, 0);
    send_and_wait(&owner, "Issue 13");
    for subject in ["Issue 14", "Issue 15"] {
        send_and_wait(&owner, subject);
        assert_eq!(bounce("delayed-dsn").0, 0);
    }
    assert_eq!(subscriber(&owner, ids[1])["status"], "active");
    send_and_wait(&owner, "Issue 16");
    let (code, out, _) = bounce("delayed-dsn");
    assert_eq!(code, 0);
    assert!(out.contains("slow@example.org: soft bounce noted"), "{out}");
    assert_eq!(subscriber(&owner, ids[1])["status"], "bounced");
    let event = last_event(&app, "email.bounced");
    assert_eq!(event["email"], "slow@example.org");
    assert_eq!(event["status"], "4.4.1");
}
