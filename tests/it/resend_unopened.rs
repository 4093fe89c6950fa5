//! Resending to those who did not open, through the real binary (docs/automations.md):
//! opens that are no person's (Apple Mail Privacy Protection's prefetch from Apple's
//! network, a scanner opening within seconds of delivery) are set aside and counted in the
//! report; the resend, once per issue with a new subject, is scheduled `after_hours` after
//! the send and reaches exactly the non-openers at the SMTP sink, by the test clock.

use std::time::Duration;

use crate::support::send::{approved_issue, wait_status};
use crate::support::*;

/// The `attr` values of `html` whose path contains `needle`, as site paths of `origin`.
fn paths(html: &str, attr: &str, needle: &str, origin: &str) -> Vec<String> {
    html.split(&format!("{attr}=\""))
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(crate::support::http::unescape)
        .filter(|u| u.contains(needle))
        .map(|u| u.strip_prefix(origin).unwrap_or(&u).to_string())
        .collect()
}

fn got(app: &App, email: &str, subject: &str) -> bool {
    app.smtp
        .messages_to(email)
        .iter()
        .any(|m| m.header("Subject").is_some_and(|s| s.contains(subject)))
}

#[test]
fn a_resend_goes_to_those_who_did_not_open_setting_automatic_opens_aside() {
    // Opens come through a proxy that names the reader's address, as a CDN would.
    let app = spawn_app_with(&["--trusted-proxy", "127.0.0.1"]);
    let owner = onboard_paid(&app, "Second Chances");
    set_sender(&owner);
    let names = ["person", "apple", "scanner", "clicker", "silent", "leaver"];
    let readers: Vec<String> = names.iter().map(|n| unique_email(n)).collect();
    for email in &readers {
        owner
            .post("/subscribers", &json!({"email": email}))
            .expect(201);
    }
    let id = owner
        .post(
            "/issues",
            &json!({"issue": {"subject": "Tide tables", "status": "approved",
                "content_markdown": "The [tables](https://example.com/tides) are out."}}),
        )
        .json()["id"]
        .as_i64()
        .unwrap();
    owner
        .post(&format!("/issues/{id}/send_now"), &json!({}))
        .expect(200);
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);
    let site = app.site_client(&owner.subdomain);
    let mail_of = |i: usize| app.smtp.wait_for_message_to(&readers[i], 1).html();
    // The scanner opens on arrival, within seconds of the relay taking the message.
    let pixel = |i: usize| paths(&mail_of(i), "src", "/o/", &origin).remove(0);
    site.get_with(&pixel(2), &[("X-Forwarded-For", "203.0.113.9")])
        .expect(200);
    wait_status(&owner, id, "sent", Duration::from_secs(30));
    // A minute later: a person opens, Apple's proxy fetches, a reader clicks.
    app.advance_clock(Duration::from_secs(60));
    site.get_with(&pixel(0), &[("X-Forwarded-For", "198.51.100.7")])
        .expect(200);
    site.get_with(&pixel(1), &[("X-Forwarded-For", "17.58.101.4")])
        .expect(200);
    let click = paths(&mail_of(3), "href", "/c/", &origin).remove(0);
    assert_eq!(
        site.get_with(&click, &[("X-Forwarded-For", "198.51.100.8")])
            .status,
        302
    );
    let stats = owner.get(&format!("/issues/{id}/stats")).json();
    assert_eq!(stats["data"]["opens"], 4, "{stats}");
    assert_eq!(stats["data"]["automatic_opens"], 2, "{stats}");
    let report_url = format!("/newsletters/{}/issues/{id}/report", owner.newsletter_id);
    let report = owner.client.get(&report_url);
    assert!(
        report
            .body
            .contains("data-stat=\"automatic_opens\" data-value=\"2\""),
        "{}",
        report.body
    );
    assert!(
        report.body.contains("Up to 4 readers have not opened it"),
        "{}",
        report.body
    );

    // Refusals change nothing.
    let resend = format!("/issues/{id}/resend_unopened");
    for (body, code, part) in [
        (
            json!({"subject": "Again", "after_hours": 0}),
            "validation_error",
            "after_hours",
        ),
        (
            json!({"subject": "  ", "after_hours": 48}),
            "validation_error",
            "subject",
        ),
        (
            json!({"subject": "Again", "after_hours": 721}),
            "validation_error",
            "after_hours",
        ),
    ] {
        let resp = owner.post(&resend, &body);
        assert_eq!(resp.error_code(422), code, "{body}");
        assert!(resp.body.contains(part), "{}", resp.body);
    }
    let draft = approved_issue(&owner, "Not yet sent");
    let resp = owner.post(
        &format!("/issues/{draft}/resend_unopened"),
        &json!({"subject": "Again", "after_hours": 48}),
    );
    assert_eq!(resp.error_code(422), "invalid_state");
    assert!(owner.get(&format!("/issues/{id}")).json()["resent_unopened_as"].is_null());

    // The resend: 48 hours after the send, once.
    let made = owner.post(
        &resend,
        &json!({"subject": "In case you missed it: tide tables", "after_hours": 48}),
    );
    made.expect(201);
    let made = made.json();
    let resend_id = made["id"].as_i64().unwrap();
    assert_eq!(made["status"], "scheduled", "{made}");
    assert_eq!(made["resend_of"], id);
    assert_eq!(made["published_at"], Value::Null);
    let original = owner.get(&format!("/issues/{id}")).json();
    assert_eq!(original["resent_unopened_as"], resend_id);
    let sent_at: jiff::Timestamp = original["sent_at"].as_str().unwrap().parse().unwrap();
    let at: jiff::Timestamp = made["scheduled_for"].as_str().unwrap().parse().unwrap();
    assert_eq!((at - sent_at).as_secs(), 48 * 3600, "{made}");
    let again = owner.post(&resend, &json!({"subject": "Once more", "after_hours": 1}));
    assert_eq!(again.error_code(422), "invalid_state");
    assert!(again.body.contains("resent once"), "{}", again.body);
    assert!(
        owner.client.get(&report_url).body.contains("Resent as"),
        "the report links the resend"
    );

    // Meanwhile one reader leaves; 48 hours on, the resend goes to the rest who did not open.
    let leaver = owner.get("/subscribers?per_page=100").json()["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["email"] == readers[5].as_str())
        .unwrap()["id"]
        .clone();
    owner
        .patch(
            &format!("/subscribers/{leaver}"),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    app.advance_clock(Duration::from_secs(48 * 3600));
    let done = wait_status(&owner, resend_id, "sent", Duration::from_secs(30));
    assert_eq!(done["recipients"], 3, "{done}");
    assert_eq!(
        done["published_at"],
        Value::Null,
        "a resend is never a second web copy"
    );
    let subject = "In case you missed it";
    let resent: Vec<&str> = names
        .iter()
        .zip(&readers)
        .filter(|(_, email)| got(&app, email, subject))
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(resent, ["apple", "scanner", "silent"]);
    // A resend is not resent again.
    let resp = owner.post(
        &format!("/issues/{resend_id}/resend_unopened"),
        &json!({"subject": "Third time", "after_hours": 1}),
    );
    assert_eq!(resp.error_code(422), "invalid_state");
}

#[test]
fn the_report_page_schedules_a_resend_and_shows_bad_input_again() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Report Resends");
    set_sender(&owner);
    owner
        .post(
            "/subscribers",
            &json!({"email": unique_email("quiet"), "tags": ["news"]}),
        )
        .expect(201);
    let id = approved_issue(&owner, "Quiet week");
    owner
        .post(&format!("/issues/{id}/send_now"), &json!({}))
        .expect(200);
    wait_status(&owner, id, "sent", Duration::from_secs(30));
    let report = format!("/newsletters/{}/issues/{id}/report", owner.newsletter_id);
    let action = format!(
        "/newsletters/{}/issues/{id}/resend_unopened",
        owner.newsletter_id
    );
    let page = owner.client.get(&report);
    assert!(page.body.contains("Schedule the resend"), "{}", page.body);
    let bad = owner.client.submit(
        &report,
        &action,
        &[("subject", "Did you see?"), ("after_hours", "soon")],
    );
    bad.expect(422);
    assert!(
        bad.body.contains("After hours must be a whole number"),
        "{}",
        bad.body
    );
    assert!(
        bad.body.contains("value=\"Did you see?\""),
        "the form keeps what was typed"
    );
    let made = owner.client.submit(
        &report,
        &action,
        &[("subject", "Did you see?"), ("after_hours", "1")],
    );
    let at = made.redirect();
    assert!(
        at.starts_with(&format!("/newsletters/{}/issues/", owner.newsletter_id)),
        "{at}"
    );
    let resend_id: i64 = at.rsplit('/').next().unwrap().parse().unwrap();
    assert_eq!(
        owner.get(&format!("/issues/{resend_id}")).json()["resend_of"],
        id
    );
    // Its audience is the original's non-openers: another is refused, by update and send.
    for (method, path, body) in [
        (
            "PATCH",
            format!("/issues/{resend_id}"),
            json!({"issue": {"audience": {"tags": ["news"]}}}),
        ),
        (
            "POST",
            format!("/issues/{resend_id}/send_now"),
            json!({"tags": ["news"]}),
        ),
    ] {
        let resp = owner.api(method, &path, Some(&body));
        assert_eq!(resp.error_code(422), "validation_error", "{path}");
        assert!(
            resp.body.contains("can't be chosen for a resend"),
            "{}",
            resp.body
        );
    }
    let kept = owner.get(&format!("/issues/{resend_id}")).json();
    assert_eq!(kept["status"], "scheduled");
    assert_eq!(kept["audience"]["tags"], json!([]));
    let shown = owner.client.get(&at);
    assert!(
        shown.body.contains("those who did not open"),
        "{}",
        shown.body
    );
    assert!(
        !shown.body.contains("name=\"tags\""),
        "a resend has no audience to choose"
    );
    let again = owner.client.submit(
        &report,
        &action,
        &[("subject", "Again?"), ("after_hours", "1")],
    );
    again.expect(422);
    assert!(again.body.contains("resent once"), "{}", again.body);
}
