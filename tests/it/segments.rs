//! Segments (issue 16, item 3): a send goes to the active subscribers having any of some
//! tags and none of others, through `send_now`'s body, a scheduled issue's recorded
//! audience, and the dashboard's review step; the messages the SMTP sink receives are
//! exactly the audience, and the issue's recipients and stats count only them.

use std::time::Duration;

use crate::support::send::{issue, wait_status};
use crate::support::*;

/// Adds a subscriber with `tags` through the API; returns its id.
fn add(owner: &Owner, email: &str, tags: &[&str]) -> i64 {
    let resp = owner.post("/subscribers", &json!({ "email": email, "tags": tags }));
    resp.expect(201);
    resp.json()["id"].as_i64().expect("subscriber id")
}

/// An approved issue with content; returns its id.
fn approved(owner: &Owner, subject: &str) -> i64 {
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "status": "approved", "content_markdown": "Hello."}}),
    );
    resp.expect(201);
    resp.json()["id"].as_i64().expect("issue id")
}

/// A newsletter with five subscribers: news, news+vip, events, untagged, and an
/// unsubscribed one tagged news.
struct Readers {
    news: String,
    news_vip: String,
    events: String,
    untagged: String,
    gone: String,
}

fn readers(owner: &Owner) -> Readers {
    let r = Readers {
        news: unique_email("news"),
        news_vip: unique_email("vip"),
        events: unique_email("events"),
        untagged: unique_email("untagged"),
        gone: unique_email("gone"),
    };
    add(owner, &r.news, &["news"]);
    add(owner, &r.news_vip, &["news", "vip"]);
    add(owner, &r.events, &["events"]);
    add(owner, &r.untagged, &[]);
    let gone = add(owner, &r.gone, &["news", "old"]);
    owner
        .patch(
            &format!("/subscribers/{gone}"),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    r
}

/// Who the sink received issue `subject` for, among `emails`.
fn received(app: &App, emails: &[&String], subject: &str) -> Vec<String> {
    emails
        .iter()
        .filter(|e| {
            app.smtp
                .messages_to(e)
                .iter()
                .any(|m| m.header("Subject").is_some_and(|s| s.contains(subject)))
        })
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn segments_send_now_reaches_any_of_the_tags_and_none_of_the_excluded() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Segmented");
    let r = readers(&owner);
    let all = [&r.news, &r.news_vip, &r.events, &r.untagged, &r.gone];

    let id = approved(&owner, "Tagged only");
    let resp = owner.post(
        &format!("/issues/{id}/send_now"),
        &json!({"tags": ["news", "events"], "exclude_tags": ["vip"]}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], 2, "{}", resp.body);
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert_eq!(
        sent["audience"],
        json!({"tags": ["events", "news"], "exclude_tags": ["vip"]})
    );
    assert_eq!(sent["recipients"], 2);
    assert_eq!(sent["delivery"]["recipients"], 2);
    assert_eq!(sent["delivery"]["sent"], 2);
    let mut got = received(&app, &all, "Tagged only");
    got.sort();
    let mut want = vec![r.news.clone(), r.events.clone()];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id}"
        )),
        2,
        "one delivery per subscriber of the audience"
    );

    // Only exclusions: everyone active but them.
    let id = approved(&owner, "Not the VIPs");
    let resp = owner.post(
        &format!("/issues/{id}/send_now"),
        &json!({"exclude_tags": ["vip"]}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], 3);
    wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert_eq!(received(&app, &all, "Not the VIPs").len(), 3);
    assert!(received(&app, &[&r.news_vip], "Not the VIPs").is_empty());

    // No body keeps today's behaviour: every active subscriber.
    let id = approved(&owner, "Everyone");
    let resp = owner.client.api_raw(
        "POST",
        &format!("/issues/{id}/send_now"),
        &owner.key,
        "application/json",
        Vec::new(),
    );
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], 4);
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert_eq!(sent["audience"], json!({"tags": [], "exclude_tags": []}));
    assert_eq!(sent["recipients"], 4);
    assert_eq!(received(&app, &all, "Everyone").len(), 4);

    // A tag only an unsubscribed subscriber has: known, but nobody to send to.
    let id = approved(&owner, "Old friends");
    let resp = owner.post(&format!("/issues/{id}/send_now"), &json!({"tags": ["old"]}));
    assert_eq!(resp.error_code(422), "no_active_subscribers");
    assert_eq!(issue(&owner, id)["status"], "approved");
}

#[test]
fn segments_bad_audiences_are_refused_and_change_nothing() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Careful Sender");
    readers(&owner);
    let id = approved(&owner, "Careful");
    let path = format!("/issues/{id}/send_now");
    let jobs = || app.count("SELECT count(*) FROM jobs WHERE kind = 'send_issue'");
    let jobs_before = jobs();

    let resp = owner.post(&path, &json!({"tags": ["news", "nwes"]}));
    assert_eq!(resp.error_code(422), "validation_error");
    let body = resp.json();
    let message = body["error"]["details"]["tags"][0].as_str().unwrap();
    assert!(
        message.contains("nwes") && message.contains("no subscriber"),
        "{body}"
    );

    let resp = owner.post(&path, &json!({"exclude_tags": ["typo"]}));
    assert_eq!(resp.error_code(422), "validation_error");
    assert!(resp.json()["error"]["details"]["exclude_tags"].is_array());

    let resp = owner.post(&path, &json!({"tags": ["news"], "exclude_tags": ["news"]}));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.post(&path, &json!({"tags": [""]}));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.post(&path, &json!({"tags": "news"}));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.post(&path, &json!({"tags": [7]}));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.post(&path, &json!(["news"]));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.client.api_raw(
        "POST",
        &path,
        &owner.key,
        "application/json",
        b"{\"tags\": [".to_vec(),
    );
    assert_eq!(resp.error_code(400), "invalid_json");

    // Another owner's issue is not found, with or without an audience.
    let other = onboard_paid(&app, "Someone Else");
    add(&other, &unique_email("theirs"), &["news"]);
    let resp = other.post(&path, &json!({"tags": ["news"]}));
    assert_eq!(resp.error_code(404), "not_found");

    let shown = issue(&owner, id);
    assert_eq!(shown["status"], "approved");
    assert_eq!(shown["audience"], json!({"tags": [], "exclude_tags": []}));
    assert_eq!(shown["recipients"], Value::Null);
    assert_eq!(jobs(), jobs_before, "no send was queued");
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id}"
        )),
        0,
        "nothing was sent"
    );

    // The issue's own fields refuse the same way, naming the audience's lists.
    let resp = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"audience": {"tags": ["nwes"]}}}),
    );
    assert_eq!(resp.error_code(422), "validation_error");
    assert!(resp.json()["error"]["details"]["audience.tags"].is_array());
    assert_eq!(
        issue(&owner, id)["audience"],
        json!({"tags": [], "exclude_tags": []})
    );
}

#[test]
fn segments_scheduled_issue_sends_to_its_recorded_audience() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Timed Segments");
    let r = readers(&owner);
    let all = [&r.news, &r.news_vip, &r.events, &r.untagged, &r.gone];
    let at = (app.clock_now() + time::Duration::hours(1))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": "VIP preview", "content_markdown": "Soon.",
            "status": "scheduled", "scheduled_for": at,
            "audience": {"tags": ["vip", "events"]}}}),
    );
    resp.expect(201);
    let created = resp.json();
    let id = created["id"].as_i64().unwrap();
    assert_eq!(
        created["audience"],
        json!({"tags": ["events", "vip"], "exclude_tags": []})
    );
    assert_eq!(created["recipients"], Value::Null);
    // Narrowed while it waits: recorded for the scheduled send.
    owner
        .patch(
            &format!("/issues/{id}"),
            &json!({"issue": {"audience": {"tags": ["vip"]}}}),
        )
        .expect(200);

    app.advance_clock(Duration::from_secs(3600));
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(30));
    assert_eq!(sent["recipients"], 1);
    assert_eq!(
        received(&app, &all, "VIP preview"),
        vec![r.news_vip.clone()]
    );

    // null clears the audience: every active subscriber again.
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": "All again", "status": "approved", "content_markdown": "x",
            "audience": {"tags": ["vip"]}}}),
    );
    resp.expect(201);
    let id = resp.json()["id"].as_i64().unwrap();
    let cleared = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"audience": null}}),
    );
    cleared.expect(200);
    assert_eq!(
        cleared.json()["audience"],
        json!({"tags": [], "exclude_tags": []})
    );
    // An empty body sends to the recorded audience (everyone now).
    let resp = owner.post(&format!("/issues/{id}/send_now"), &json!({}));
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], 4);
}

#[test]
fn segments_dashboard_reviews_the_exact_count_then_sends_to_the_chosen_tags() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Dashboard Segments");
    let r = readers(&owner);
    let all = [&r.news, &r.news_vip, &r.events, &r.untagged, &r.gone];
    let id = approved(&owner, "Chosen in the dashboard");
    let url = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);

    // First visit: every tag to choose from, and everyone counted.
    let page = owner.client.get(&format!("{url}/send"));
    page.expect(200);
    for tag in ["news", "vip", "events", "old"] {
        assert!(
            page.body
                .contains(&format!("name=\"tags\" value=\"{tag}\"")),
            "{tag}: {}",
            page.body
        );
    }
    assert!(page.body.contains("data-recipients=\"4\""), "{}", page.body);

    // Review: the exact count of the checked audience, before anything is sent.
    let review = format!("{url}/send?audience=chosen&tags=news&tags=events&exclude_tags=vip");
    let page = owner.client.get(&review);
    page.expect(200);
    assert!(page.body.contains("data-recipients=\"2\""), "{}", page.body);
    assert!(
        page.body.contains("except those tagged “vip”"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("name=\"exclude_tags\" value=\"vip\" checked"),
        "{}",
        page.body
    );
    assert_eq!(
        issue(&owner, id)["status"],
        "approved",
        "a review sends nothing"
    );

    // A tag nobody has (typed into the address): said on the page, no send button.
    let page = owner
        .client
        .get(&format!("{url}/send?audience=chosen&tags=nwes"));
    page.expect(200);
    assert!(
        page.body
            .contains("Tags include “nwes”, a tag no subscriber has"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("data-recipients"), "{}", page.body);

    let resp = owner.client.submit(
        &review,
        &format!("{url}/send"),
        &[
            ("audience", "chosen"),
            ("tags", "news"),
            ("tags", "events"),
            ("exclude_tags", "vip"),
        ],
    );
    assert_eq!(resp.redirect(), url);
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert_eq!(sent["recipients"], 2);
    let mut got = received(&app, &all, "Chosen in the dashboard");
    got.sort();
    let mut want = vec![r.news.clone(), r.events.clone()];
    want.sort();
    assert_eq!(got, want);

    // The issue page states the audience and the recipients.
    let page = owner.client.get(&url);
    assert!(
        page.body.contains(
            "active subscribers tagged “events” or “news”, except those tagged “vip” · 2 recipients"
        ),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("id=\"report-recipients\">2<"),
        "{}",
        page.body
    );
}

#[test]
fn segments_dashboard_schedules_with_an_audience() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Scheduled Segments");
    readers(&owner);
    let id = approved(&owner, "Later, for some");
    let url = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);
    let page = owner.client.get(&url);
    assert!(
        page.body.contains("name=\"exclude_tags\" value=\"vip\""),
        "the schedule form offers the tags: {}",
        page.body
    );
    let at = (app.clock_now() + time::Duration::hours(2))
        .format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]"
        ))
        .unwrap();
    let resp = owner.client.submit(
        &url,
        &format!("{url}/schedule"),
        &[
            ("scheduled_for", &at),
            ("audience", "chosen"),
            ("tags", "news"),
            ("exclude_tags", "vip"),
        ],
    );
    assert_eq!(resp.redirect(), url);
    let shown = issue(&owner, id);
    assert_eq!(shown["status"], "scheduled");
    assert_eq!(
        shown["audience"],
        json!({"tags": ["news"], "exclude_tags": ["vip"]})
    );
    let page = owner.client.get(&url);
    assert!(
        page.body
            .contains("active subscribers tagged “news”, except those tagged “vip”"),
        "{}",
        page.body
    );
}
