//! REST API v1, issues: list, show, create, update, delete, send_now, publish,
//! over HTTP against the real binary.

use crate::support::*;
use jiff::SignedDuration;
use jiff::civil::Weekday;

/// `2026-11-22T05:42:04.123Z`: UTC, RFC 3339, milliseconds.
#[track_caller]
pub fn assert_timestamp(value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"));
    let b = text.as_bytes();
    assert_eq!(text.len(), 24, "timestamp {text}");
    assert!(
        b[4] == b'-' && b[10] == b'T' && b[19] == b'.' && b[23] == b'Z',
        "timestamp {text}"
    );
    assert!(text.parse::<jiff::Timestamp>().is_ok(), "timestamp {text}");
}

fn create_issue(owner: &Owner, issue: Value) -> Value {
    let resp = owner.post("/issues", &json!({ "issue": issue }));
    resp.expect(201);
    resp.json()
}

#[test]
fn api_issues_create_show_and_defaults() {
    let app = spawn_app();
    let owner = onboard(&app, "Issue Desk");

    let created = create_issue(
        &owner,
        json!({
            "subject": "  First steps  ",
            "content_markdown": "# Hello\n\nBody text.",
            "articles": [
                {"title": "One", "url": "https://one.example/a", "summarized_article": "Sum one"},
                {"title": "Two", "url": "https://two.example/b"}
            ]
        }),
    );
    assert_eq!(created["subject"], "First steps");
    assert_eq!(created["status"], "draft", "draft by default");
    assert_eq!(created["newsletter_id"], owner.newsletter_id);
    assert_eq!(created["articles_count"], 2);
    assert_eq!(created["scheduled_for"], Value::Null);
    assert_eq!(created["sent_at"], Value::Null);
    assert_eq!(created["published_at"], Value::Null);
    assert_eq!(created["web_url"], Value::Null);
    assert_eq!(created["last_error"], Value::Null);
    assert_eq!(created["path"], "first-steps");
    assert_timestamp(&created["created_at"]);
    assert_timestamp(&created["updated_at"]);
    let id = created["id"].as_i64().unwrap();

    let shown = owner.get(&format!("/issues/{id}"));
    shown.expect(200);
    let shown = shown.json();
    assert_eq!(shown["content_markdown"], "# Hello\n\nBody text.");
    let articles = shown["articles"].as_array().unwrap();
    assert_eq!(articles.len(), 2);
    assert_eq!(articles[0]["title"], "One");
    assert_eq!(articles[0]["url"], "https://one.example/a");
    assert_eq!(articles[0]["summarized_article"], "Sum one");
    assert_eq!(articles[0]["position"], 1);
    assert!(articles[0]["id"].is_i64());
    assert_eq!(articles[1]["title"], "Two");
    assert_eq!(articles[1]["position"], 2);
    assert_eq!(articles[1]["summarized_article"], "");

    // Explicit statuses on create.
    let approved = create_issue(&owner, json!({"subject": "Ready", "status": "approved"}));
    assert_eq!(approved["status"], "approved");
    let draft = create_issue(&owner, json!({"subject": "Ready", "status": "draft"}));
    assert_eq!(draft["path"], "ready-2", "paths are unique per newsletter");

    // Validation on create.
    for (body, field) in [
        (json!({"issue": {}}), "subject"),
        (json!({"issue": {"subject": "   "}}), "subject"),
        (json!({"issue": {"subject": "x".repeat(201)}}), "subject"),
        (json!({"issue": {"subject": "a\nb"}}), "subject"),
        (
            json!({"issue": {"subject": "S", "status": "sent"}}),
            "status",
        ),
        (
            json!({"issue": {"subject": "S", "status": "sending"}}),
            "status",
        ),
        (
            json!({"issue": {"subject": "S", "status": "published"}}),
            "status",
        ),
        (
            json!({"issue": {"subject": "S", "scheduled_for": "tomorrow"}}),
            "scheduled_for",
        ),
        (
            json!({"issue": {"subject": "S", "articles": [{"title": "t", "url": "javascript:alert(1)"}]}}),
            "articles[0].url",
        ),
        (
            json!({"issue": {"subject": "S", "articles": [{"title": " ", "url": "https://a.example"}]}}),
            "articles[0].title",
        ),
    ] {
        let before = app.count("SELECT count(*) FROM issues");
        let resp = owner.post("/issues", &body);
        assert_eq!(resp.error_code(422), "validation_error", "{body}");
        let json = resp.json();
        assert!(
            json["error"]["details"][field].is_array(),
            "{body}: details name {field}: {json}"
        );
        assert!(json["errors"].is_array(), "{body}: errors array: {json}");
        assert_eq!(app.count("SELECT count(*) FROM issues"), before);
    }

    // Not found: unknown ids, junk ids.
    for path in ["/issues/999999", "/issues/abc", "/issues/-1"] {
        assert_eq!(owner.get(path).error_code(404), "not_found", "{path}");
    }
    assert_eq!(
        owner
            .patch("/issues/999999", &json!({"issue": {"subject": "x"}}))
            .error_code(404),
        "not_found"
    );
    assert_eq!(owner.delete("/issues/999999").error_code(404), "not_found");
    assert_eq!(
        owner
            .post("/issues/999999/send_now", &json!({}))
            .error_code(404),
        "not_found"
    );
    assert_eq!(
        owner
            .post("/issues/999999/publish", &json!({}))
            .error_code(404),
        "not_found"
    );
}

#[test]
fn api_issues_list_pagination_filters_and_order() {
    let app = spawn_app();
    let owner = onboard(&app, "Paging Post");
    let mut ids = Vec::new();
    for i in 0..27 {
        let status = if i % 3 == 0 { "approved" } else { "draft" };
        let issue = create_issue(
            &owner,
            json!({"subject": format!("Issue {i}"), "status": status, "content_markdown": "body"}),
        );
        ids.push(issue["id"].as_i64().unwrap());
    }
    let newest_first: Vec<i64> = ids.iter().rev().copied().collect();

    let first = owner.get("/issues");
    first.expect(200);
    let first = first.json();
    let listed: Vec<i64> = first["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_i64().unwrap())
        .collect();
    assert_eq!(listed, newest_first[..25], "newest first, 25 by default");
    assert_eq!(
        first["meta"],
        json!({"page": 1, "per_page": 25, "has_more": true})
    );
    for issue in first["issues"].as_array().unwrap() {
        assert!(
            issue.get("content_markdown").is_none(),
            "no content in lists"
        );
        assert!(issue.get("articles").is_none(), "no articles in lists");
        assert!(issue["articles_count"].is_i64());
    }

    let second = owner.get("/issues?page=2").json();
    assert_eq!(second["issues"].as_array().unwrap().len(), 2);
    assert_eq!(second["meta"]["has_more"], false);
    assert_eq!(second["meta"]["page"], 2);
    let beyond = owner.get("/issues?page=9").json();
    assert_eq!(beyond["issues"], json!([]));
    assert_eq!(beyond["meta"]["has_more"], false);

    let small = owner.get("/issues?per_page=10&page=3").json();
    let listed: Vec<i64> = small["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_i64().unwrap())
        .collect();
    assert_eq!(listed, newest_first[20..27]);
    assert_eq!(
        small["meta"],
        json!({"page": 3, "per_page": 10, "has_more": false})
    );
    let exact = owner.get("/issues?per_page=27").json();
    assert_eq!(exact["meta"]["has_more"], false, "exactly one full page");
    let far = owner.get("/issues?page=99999999999999999999999").json();
    assert_eq!(
        far["issues"],
        json!([]),
        "a huge page is past the end, not an error"
    );
    assert_eq!(far["meta"]["has_more"], false);
    let huge = owner.get("/issues?per_page=99999999999999999999").json();
    assert_eq!(huge["meta"]["per_page"], 100);
    let capped = owner.get("/issues?per_page=1000").json();
    assert_eq!(capped["meta"]["per_page"], 100, "per_page is capped at 100");
    assert_eq!(capped["issues"].as_array().unwrap().len(), 27);

    let approved = owner.get("/issues?status=approved").json();
    let statuses: Vec<&str> = approved["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, vec!["approved"; 9]);
    assert_eq!(owner.get("/issues?status=sent").json()["issues"], json!([]));

    for query in [
        "per_page=0",
        "per_page=-5",
        "per_page=abc",
        "page=abc",
        "page=0",
        "page=1.5",
        "page=",
        "status=published",
        "status=DRAFT",
    ] {
        let resp = owner.get(&format!("/issues?{query}"));
        assert_eq!(resp.error_code(422), "validation_error", "{query}");
        // Said in the API's words: the parameter and what it takes, no library type names.
        let said = resp.json()["errors"].to_string();
        assert!(
            !said.contains("Expected input type") && !said.contains("uint32"),
            "{query}: {said}"
        );
    }
    let resp = owner.get("/issues?per_page=abc");
    assert_eq!(
        resp.json()["error"]["details"]["per_page"][0],
        "must be a positive integer",
        "{}",
        resp.body
    );

    // Another newsletter sees none of them and cannot reach them by id.
    let other = onboard(&app, "Other Paper");
    assert_eq!(other.get("/issues").json()["issues"], json!([]));
    let id = ids[0];
    assert_eq!(
        other.get(&format!("/issues/{id}")).error_code(404),
        "not_found"
    );
    assert_eq!(
        other
            .patch(
                &format!("/issues/{id}"),
                &json!({"issue": {"subject": "mine"}})
            )
            .error_code(404),
        "not_found"
    );
    assert_eq!(
        other.delete(&format!("/issues/{}", ids[1])).error_code(404),
        "not_found"
    );
    assert_eq!(
        other
            .post(&format!("/issues/{id}/publish"), &json!({}))
            .error_code(404),
        "not_found"
    );
    assert_eq!(
        other
            .post(&format!("/issues/{id}/send_now"), &json!({}))
            .error_code(404),
        "not_found"
    );
    assert_eq!(app.count("SELECT count(*) FROM issues"), 27);
}

#[test]
fn api_issues_scheduling_rules() {
    let app = spawn_app();
    let owner = onboard(&app, "Schedule Sheet");

    // A future time is kept.
    let future = app.clock_now() + SignedDuration::from_hours(3 * 24);
    let future_text = future.to_string();
    let at = create_issue(
        &owner,
        json!({"subject": "At a time", "status": "scheduled", "scheduled_for": future_text}),
    );
    assert_eq!(at["status"], "scheduled");
    assert_timestamp(&at["scheduled_for"]);
    let kept = instant(at["scheduled_for"].as_str().unwrap());
    assert!((kept - future).abs() < SignedDuration::from_secs(1));

    // Other offsets are converted to UTC.
    let offset = create_issue(
        &owner,
        json!({"subject": "Offset", "status": "scheduled", "scheduled_for": "2099-01-01T10:00:00+02:00"}),
    );
    assert_eq!(offset["scheduled_for"], "2099-01-01T08:00:00.000Z");

    // No time: the next weekly slot (Tuesday 09:00 UTC) by the server's clock. A minute
    // before nine on a Tuesday takes that day's slot, a minute after it next week's.
    let tuesday = next_tuesday_nine(app.clock_now());
    assert_eq!(utc_day(tuesday).weekday(), Weekday::Tuesday);
    app.set_clock(tuesday - SignedDuration::from_mins(1));
    let slot = create_issue(&owner, json!({"subject": "Slot", "status": "scheduled"}));
    assert_eq!(slot["status"], "scheduled");
    assert_eq!(instant(slot["scheduled_for"].as_str().unwrap()), tuesday);
    app.set_clock(tuesday + SignedDuration::from_mins(1));
    let slot = create_issue(
        &owner,
        json!({"subject": "Next slot", "status": "scheduled"}),
    );
    assert_eq!(
        instant(slot["scheduled_for"].as_str().unwrap()),
        tuesday + SignedDuration::from_hours(7 * 24)
    );

    // A past time is refused.
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Past", "status": "scheduled", "scheduled_for": "2001-01-01T00:00:00Z"}}),
    );
    assert_eq!(resp.error_code(422), "validation_error");
    assert!(resp.json()["error"]["details"]["scheduled_for"].is_array());

    // A draft moved to scheduled via PATCH takes a slot too.
    let draft = create_issue(&owner, json!({"subject": "Later"}));
    let id = draft["id"].as_i64().unwrap();
    let resp = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"status": "scheduled"}}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["status"], "scheduled");
    assert!(resp.json()["scheduled_for"].is_string());
    let resp = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"scheduled_for": "2001-01-01T00:00:00Z"}}),
    );
    assert_eq!(resp.error_code(422), "validation_error");

    // Without a frequency there is no slot to take: 422.
    let conn = rusqlite::Connection::open(app.data_dir().join("broadsheet.db")).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    conn.execute(
        "UPDATE newsletters SET frequency = NULL WHERE id = ?1",
        [owner.newsletter_id],
    )
    .unwrap();
    drop(conn);
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": "No slot", "status": "scheduled"}}),
    );
    assert_eq!(resp.error_code(422), "validation_error");
}

#[test]
fn api_issues_update_and_delete_follow_the_state_rules() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "State Rules");
    listen(&app, &owner, &["issue.published"]);
    owner
        .post("/subscribers", &json!({"email": "reader@example.com"}))
        .expect(201);

    let issue = create_issue(
        &owner,
        json!({"subject": "Draft one", "content_markdown": "x"}),
    );
    let id = issue["id"].as_i64().unwrap();
    let path = format!("/issues/{id}");

    let resp = owner.patch(
        &path,
        &json!({"issue": {
            "subject": "Renamed",
            "content_markdown": "New body",
            "articles": [{"title": "A", "url": "https://a.example/1", "summarized_article": "s"}]
        }}),
    );
    resp.expect(200);
    let updated = resp.json();
    assert_eq!(updated["subject"], "Renamed");
    assert_eq!(updated["content_markdown"], "New body");
    assert_eq!(updated["status"], "draft");
    assert_eq!(updated["path"], "renamed");
    assert_eq!(updated["articles"][0]["position"], 1);
    assert_eq!(updated["articles_count"], 1);

    // null status leaves the status; a new articles array replaces the old.
    owner
        .patch(&path, &json!({"issue": {"status": "approved"}}))
        .expect(200);
    let resp = owner.patch(
        &path,
        &json!({"issue": {"status": null, "articles": [
            {"title": "B", "url": "https://b.example/1"},
            {"title": "C", "url": "https://c.example/1"}
        ]}}),
    );
    resp.expect(200);
    let json = resp.json();
    assert_eq!(json["status"], "approved", "null leaves the status");
    let titles: Vec<(&str, i64)> = json["articles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["title"].as_str().unwrap(),
                a["position"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(titles, vec![("B", 1), ("C", 2)]);
    let resp = owner.patch(&path, &json!({"issue": {}}));
    resp.expect(200);
    assert_eq!(resp.json()["status"], "approved");

    // Unknown or unreachable statuses.
    for status in ["sent", "sending", "nope"] {
        let resp = owner.patch(&path, &json!({"issue": {"status": status}}));
        assert_eq!(resp.error_code(422), "validation_error", "{status}");
    }

    // Approved back to draft is allowed; approved cannot be deleted.
    owner
        .patch(&path, &json!({"issue": {"status": "draft"}}))
        .expect(200);
    owner
        .patch(&path, &json!({"issue": {"status": "approved"}}))
        .expect(200);
    assert_eq!(owner.delete(&path).error_code(422), "invalid_state");
    let scheduled = create_issue(&owner, json!({"subject": "Sched", "status": "scheduled"}));
    assert_eq!(
        owner
            .delete(&format!("/issues/{}", scheduled["id"]))
            .error_code(422),
        "invalid_state"
    );

    // Once sending (then sent), no more updates or deletes.
    owner
        .post(&format!("{path}/send_now"), &json!({}))
        .expect(200);
    let status = app.count(&format!(
        "SELECT status IN ('sending', 'sent') FROM issues WHERE id = {id}"
    ));
    assert_eq!(status, 1);
    let resp = owner.patch(&path, &json!({"issue": {"subject": "Too late"}}));
    assert_eq!(resp.error_code(422), "invalid_state");
    assert_eq!(owner.delete(&path).error_code(422), "invalid_state");
    wait_for(
        "the issue to be sent",
        std::time::Duration::from_secs(30),
        || (owner.get(&path).json()["status"] == "sent").then_some(()),
    );
    // Sent: its web copy may change (tests/it/after_send.rs), its status may not.
    let resp = owner.patch(&path, &json!({"issue": {"status": "draft"}}));
    assert_eq!(resp.error_code(422), "validation_error");
    assert!(resp.body.contains("status"), "{}", resp.body);
    assert_eq!(owner.delete(&path).error_code(422), "invalid_state");
    let sent = owner.get(&path).json();
    assert_eq!(sent["subject"], "Renamed");
    assert_timestamp(&sent["sent_at"]);

    // A sent issue can be published; the answer shows it still sent.
    let resp = owner.post(&format!("{path}/publish"), &json!({}));
    resp.expect(200);
    let published = resp.json();
    assert_eq!(published["issue"]["status"], "sent");
    assert_eq!(
        published["web_url"],
        format!("http://{}.{}/p/renamed", owner.subdomain, app.public_host)
    );
    let payload: String = app
        .db()
        .query_row(
            "SELECT payload FROM events WHERE kind = 'issue.published'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let payload: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(payload["data"]["status"], "published", "{payload}");
    assert_eq!(payload["data"]["issue_id"], id);

    // Drafts delete with 204 and are gone.
    let gone = create_issue(
        &owner,
        json!({"subject": "Bin me", "articles": [{"title": "t", "url": "https://x.example"}]}),
    );
    let gone_path = format!("/issues/{}", gone["id"]);
    let resp = owner.delete(&gone_path);
    resp.expect(204);
    assert!(resp.body.is_empty());
    assert_eq!(owner.get(&gone_path).error_code(404), "not_found");
    assert_eq!(owner.delete(&gone_path).error_code(404), "not_found");
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM articles WHERE issue_id = {}",
            gone["id"]
        )),
        0
    );
}

#[test]
fn api_issues_send_now_checks_in_the_decided_order() {
    let app = spawn_app();
    // Free tier, no subscribers, a draft with no content: every check fails.
    let owner = onboard(&app, "Send Order");
    let issue = create_issue(&owner, json!({"subject": "Empty"}));
    let id = issue["id"].as_i64().unwrap();
    let send = || owner.post(&format!("/issues/{id}/send_now"), &json!({}));
    let jobs = || app.count("SELECT count(*) FROM jobs");
    let jobs_before = jobs();

    // 1. status
    assert_eq!(send().error_code(422), "invalid_state");
    owner
        .patch(
            &format!("/issues/{id}"),
            &json!({"issue": {"status": "approved"}}),
        )
        .expect(200);
    // 2. paused
    let (code, out, err) = app.cli(&["status", &owner.subdomain, "paused"]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(send().error_code(422), "newsletter_paused");
    let (code, out, err) = app.cli(&["status", &owner.subdomain, "active"]);
    assert_eq!(code, 0, "{out} {err}");
    // 3. subscribers (an unsubscribed one does not count)
    let s = owner
        .post("/subscribers", &json!({"email": "gone@example.com"}))
        .json();
    owner
        .patch(
            &format!("/subscribers/{}", s["id"]),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    assert_eq!(send().error_code(422), "no_active_subscribers");
    for email in ["a@example.com", "b@example.com"] {
        owner
            .post("/subscribers", &json!({"email": email}))
            .expect(201);
    }
    // 4. tier
    assert_eq!(send().error_code(402), "payment_required");
    let (code, out, err) = app.cli(&["tier", &owner.subdomain, "paid"]);
    assert_eq!(code, 0, "{out} {err}");
    // 5. content
    assert_eq!(send().error_code(422), "no_content");
    assert_eq!(jobs(), jobs_before, "nothing queued by a refused send");
    assert_eq!(
        owner.get(&format!("/issues/{id}")).json()["status"],
        "approved"
    );

    // Articles alone are content.
    owner
        .patch(
            &format!("/issues/{id}"),
            &json!({"issue": {"articles": [{"title": "Read this", "url": "https://r.example/"}]}}),
        )
        .expect(200);
    let resp = send();
    resp.expect(200);
    let body = resp.json();
    assert!(body["message"].is_string());
    assert_eq!(body["subscribers"], 2);
    assert_eq!(body["issue"]["id"], id);
    assert_eq!(
        body["issue"]["status"], "approved",
        "status as of queue time"
    );
    assert!(jobs() > jobs_before, "a job was queued");
    let now = owner.get(&format!("/issues/{id}")).json()["status"].clone();
    assert!(now == "sending" || now == "sent", "{now}");
    // A second send_now: no longer approved.
    assert_eq!(send().error_code(422), "invalid_state");

    // A scheduled issue can be sent now too.
    let scheduled = create_issue(
        &owner,
        json!({"subject": "Sched", "status": "scheduled", "content_markdown": "hi"}),
    );
    let resp = owner.post(&format!("/issues/{}/send_now", scheduled["id"]), &json!({}));
    resp.expect(200);
    assert_eq!(resp.json()["issue"]["status"], "scheduled");

    // send_now takes no body: an empty one is fine too.
    let third = create_issue(
        &owner,
        json!({"subject": "Third", "status": "approved", "content_markdown": "hi"}),
    );
    let resp = owner.client.api_raw(
        "POST",
        &format!("/issues/{}/send_now", third["id"]),
        &owner.key,
        "application/json",
        Vec::new(),
    );
    resp.expect(200);
    // ...and so is `null`, which the document states (a nullable body).
    let fourth = create_issue(
        &owner,
        json!({"subject": "Fourth", "status": "approved", "content_markdown": "hi"}),
    );
    let resp = owner.client.api_raw(
        "POST",
        &format!("/issues/{}/send_now", fourth["id"]),
        &owner.key,
        "application/json",
        b"null".to_vec(),
    );
    resp.expect(200);
    // A `null` subject is a blank one, on update as on create: refused, nothing changed.
    let draft = create_issue(&owner, json!({"subject": "Fifth"}));
    let resp = owner.patch(
        &format!("/issues/{}", draft["id"]),
        &json!({"issue": {"subject": null}}),
    );
    assert_eq!(resp.error_code(422), "validation_error");
    assert_eq!(
        owner.get(&format!("/issues/{}", draft["id"])).json()["subject"],
        "Fifth"
    );
}

#[test]
fn api_issues_publish() {
    let app = spawn_app();
    let owner = onboard(&app, "Web Archive");
    listen(&app, &owner, &["issue.published"]);
    let draft = create_issue(
        &owner,
        json!({"subject": "Hello web", "content_markdown": "Hi"}),
    );
    let id = draft["id"].as_i64().unwrap();
    let publish = || owner.post(&format!("/issues/{id}/publish"), &json!({}));
    let events = || {
        app.count(&format!(
            "SELECT count(*) FROM events WHERE kind = 'issue.published' AND newsletter_id = {}",
            owner.newsletter_id
        ))
    };

    assert_eq!(publish().error_code(422), "invalid_state");
    assert_eq!(events(), 0);
    owner
        .patch(
            &format!("/issues/{id}"),
            &json!({"issue": {"status": "approved"}}),
        )
        .expect(200);
    let first = publish();
    first.expect(200);
    let first = first.json();
    let web_url = first["web_url"].as_str().unwrap().to_string();
    assert_eq!(
        web_url,
        format!("http://{}.{}/p/hello-web", owner.subdomain, app.public_host)
    );
    assert!(first["message"].is_string());
    assert_eq!(first["issue"]["status"], "approved", "status unchanged");
    assert_eq!(first["issue"]["web_url"], web_url.as_str());
    assert_timestamp(&first["issue"]["published_at"]);
    assert_eq!(events(), 1);

    let second = publish();
    second.expect(200);
    let second = second.json();
    assert_eq!(second["web_url"], web_url.as_str(), "same web_url");
    assert_eq!(
        second["issue"]["published_at"],
        first["issue"]["published_at"]
    );
    assert_eq!(events(), 1, "issue.published fires once");

    let shown = owner.get(&format!("/issues/{id}")).json();
    assert_eq!(shown["web_url"], web_url.as_str());

    // The path is fixed once published.
    let resp = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"subject": "A new subject"}}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["path"], "hello-web");

    // Approved without content: no_content.
    let empty = create_issue(&owner, json!({"subject": "Empty", "status": "approved"}));
    assert_eq!(
        owner
            .post(&format!("/issues/{}/publish", empty["id"]), &json!({}))
            .error_code(422),
        "no_content"
    );
}

#[test]
fn api_issues_concurrent_send_now_queues_once() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Race Report");
    owner
        .post("/subscribers", &json!({"email": "r@example.com"}))
        .expect(201);
    let issue = create_issue(
        &owner,
        json!({"subject": "Once", "status": "approved", "content_markdown": "x"}),
    );
    let path = format!("/issues/{}/send_now", issue["id"]);
    let jobs_before = app.count("SELECT count(*) FROM jobs WHERE kind != 'send_mail'");
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|_| s.spawn(|| owner.post(&path, &json!({})).status))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 422).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE kind != 'send_mail'"),
        jobs_before + 1,
        "one send job"
    );
}

#[test]
fn api_issues_scheduled_send_starts_or_falls_back_to_approved() {
    let app = spawn_app();
    // Free tier: the scheduled send cannot start, the issue turns approved with the reason.
    let owner = onboard(&app, "Clockwork");
    owner
        .post("/subscribers", &json!({"email": "c@example.com"}))
        .expect(201);
    // An hour ahead on the server's clock, which the test then moves on by that hour.
    let in_an_hour = || (app.clock_now() + SignedDuration::from_hours(1)).to_string();
    let held = create_issue(
        &owner,
        json!({"subject": "Held", "status": "scheduled", "scheduled_for": in_an_hour(), "content_markdown": "x"}),
    );
    let path = format!("/issues/{}", held["id"]);
    app.advance_clock(std::time::Duration::from_secs(3600));
    let issue = wait_for(
        "the scheduled time",
        std::time::Duration::from_secs(30),
        || {
            let issue = owner.get(&path).json();
            (issue["status"] != "scheduled").then_some(issue)
        },
    );
    assert_eq!(issue["status"], "approved", "{issue}");
    let reason = issue["last_error"].as_str().unwrap_or_default();
    assert!(reason.contains("paid"), "last_error says why: {issue}");

    // Paid: it starts and ends sent; last_error is cleared by a later update.
    let (code, out, err) = app.cli(&["tier", &owner.subdomain, "paid"]);
    assert_eq!(code, 0, "{out} {err}");
    let resp = owner.patch(
        &path,
        &json!({"issue": {"status": "scheduled", "scheduled_for": in_an_hour()}}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["last_error"], Value::Null);
    app.advance_clock(std::time::Duration::from_secs(3600));
    wait_for(
        "the scheduled send",
        std::time::Duration::from_secs(30),
        || (owner.get(&path).json()["status"] == "sent").then_some(()),
    );
    let mail = app.smtp.wait_for_message_to("c@example.com", 1);
    assert!(
        mail.header("Subject").unwrap_or_default().contains("Held"),
        "the scheduled issue was mailed"
    );
}

#[test]
fn api_issues_unicode_round_trips_and_counts_characters() {
    let app = spawn_app();
    let owner = onboard(&app, "Unicode Union");
    let subject = "Ünïcödé 🎉 日本語 e\u{301} \u{202e}rtl";
    let created = create_issue(
        &owner,
        json!({"subject": subject, "content_markdown": "Ĉu vi parolas 🦀?\n\n— «quotes» ‘single’",
            "articles": [{"title": "Ŧítłé", "url": "https://例え.jp/パス", "summarized_article": "多行\n摘要"}]}),
    );
    assert_eq!(created["subject"], subject);
    let path = created["path"].as_str().unwrap();
    assert!(
        path.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "{path}"
    );
    let shown = owner.get(&format!("/issues/{}", created["id"])).json();
    assert_eq!(
        shown["content_markdown"],
        "Ĉu vi parolas 🦀?\n\n— «quotes» ‘single’"
    );
    assert_eq!(shown["articles"][0]["title"], "Ŧítłé");
    assert_eq!(shown["articles"][0]["summarized_article"], "多行\n摘要");

    // Limits count characters, not bytes.
    create_issue(&owner, json!({"subject": "🦀".repeat(200)}));
    let resp = owner.post("/issues", &json!({"issue": {"subject": "🦀".repeat(201)}}));
    assert_eq!(resp.error_code(422), "validation_error");

    let s = owner.post(
        "/subscribers",
        &json!({"email": "zoë@example.com", "name": "Zoë 🌸", "tags": ["日本"]}),
    );
    // Internationalised local parts are the address parser's call; either way a JSON answer.
    assert!(
        s.status == 201 || s.status == 422,
        "{} {}",
        s.status,
        s.body
    );
    let first = usize::from(s.status == 201);
    let s = owner.post(
        "/subscribers",
        &json!({"email": "zoe@example.com", "name": "Zoë 🌸", "tags": ["日本"]}),
    );
    s.expect(201);
    assert_eq!(s.json()["name"], "Zoë 🌸");
    assert_eq!(s.json()["tags"], json!(["日本"]));
    let resp = owner.get("/subscribers?tag=%E6%97%A5%E6%9C%AC");
    assert_eq!(
        resp.json()["subscribers"].as_array().unwrap().len(),
        1 + first
    );
}
