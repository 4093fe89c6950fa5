//! Publishing on send: a per-newsletter setting, on for new newsletters,
//! on the settings page and the API object; the send confirmation says what will happen, and
//! a completed send publishes the issue as the `publish` endpoint does.

use std::time::Duration;

use crate::support::send::{approved_issue, send_now, wait_status};
use crate::support::*;

fn confirmation(owner: &Owner, id: i64) -> String {
    let page = owner.client.get(&format!(
        "/newsletters/{}/issues/{id}/send",
        owner.newsletter_id
    ));
    page.expect(200);
    page.body
}

#[test]
fn a_new_newsletter_publishes_its_issues_when_the_send_completes() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Published Daily");
    listen(&app, &owner, &["issue.sent", "issue.published"]);
    assert_eq!(
        owner.get("/newsletter").json()["data"]["publish_on_send"],
        true
    );
    owner
        .post("/subscribers", &json!({"email": "reader@example.net"}))
        .expect(201);
    let id = approved_issue(&owner, "Out today");
    let path = owner.get(&format!("/issues/{id}")).json()["path"]
        .as_str()
        .unwrap()
        .to_string();
    let page = confirmation(&owner, id);
    assert!(
        page.contains("It will also appear on your site at")
            && page.contains(&format!("/p/{path}</a> when the send completes")),
        "{page}"
    );
    let site = app.site_client(&owner.subdomain);
    assert_eq!(site.get(&format!("/p/{path}")).status, 404, "not yet");

    send_now(&owner, id);
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert!(sent["published_at"].is_string(), "{sent}");
    assert!(
        sent["web_url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/p/{path}"))
    );
    site.get(&format!("/p/{path}")).expect(200);
    assert_eq!(last_event(&app, "issue.published")["issue_id"], id);
    let order: Vec<String> = app
        .db()
        .prepare("SELECT kind FROM events ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(order, ["issue.sent", "issue.published"]);
    // The publish endpoint still answers, without a second event.
    let again = owner.post(&format!("/issues/{id}/publish"), &json!({}));
    again.expect(200);
    assert_eq!(again.json()["message"], "Issue was already published");
}

#[test]
fn with_the_setting_off_a_sent_issue_stays_off_the_site() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Private Weekly");
    owner
        .post("/subscribers", &json!({"email": "reader@example.net"}))
        .expect(201);

    // The API turns it off; bad values are refused.
    let off = owner.patch("/newsletter", &json!({"publish_on_send": false}));
    off.expect(200);
    assert_eq!(off.json()["data"]["publish_on_send"], false);
    assert_eq!(
        owner
            .patch("/newsletter", &json!({"publish_on_send": "yes"}))
            .error_code(422),
        "validation_error"
    );
    assert_eq!(
        owner.get("/newsletter").json()["data"]["publish_on_send"],
        false
    );

    let id = approved_issue(&owner, "Members only");
    let page = confirmation(&owner, id);
    assert!(
        page.contains("It will not be published on the web"),
        "{page}"
    );
    send_now(&owner, id);
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert!(sent["published_at"].is_null(), "{sent}");
    assert!(sent["web_url"].is_null());

    // The settings page turns it on again; a bad value shows the form with its message.
    let settings = format!("/newsletters/{}/settings", owner.newsletter_id);
    let form = owner.client.get(&settings);
    assert!(
        form.body
            .contains("Publish issues on the web when they are sent")
    );
    let bad = owner.client.submit(
        &settings,
        &format!("{settings}/publishing"),
        &[("publish_on_send", "maybe")],
    );
    bad.expect(422);
    assert!(
        bad.body.contains("Publish on send must be on or off"),
        "{}",
        bad.body
    );
    let saved = owner.client.submit(
        &settings,
        &format!("{settings}/publishing"),
        &[("publish_on_send", "on")],
    );
    assert_eq!(saved.redirect(), format!("{settings}#publishing"));
    assert_eq!(
        owner.get("/newsletter").json()["data"]["publish_on_send"],
        true
    );
    let next = approved_issue(&owner, "Now public");
    assert!(confirmation(&owner, next).contains("It will also appear on your site at"));
}
