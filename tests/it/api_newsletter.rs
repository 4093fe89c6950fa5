//! REST API v1, the newsletter: GET, PATCH, stats, permissions by method and the
//! read-only cancelled newsletter.

use crate::api_issues::assert_timestamp;
use crate::support::*;

#[test]
fn api_newsletter_get_and_patch() {
    let app = spawn_app();
    let owner = onboard(&app, "Patchwork Post");
    let before = owner.get("/newsletter").json()["data"].clone();
    assert_timestamp(&before["created_at"]);

    let resp = owner.patch(
        "/newsletter",
        &json!({"name": "  Patchwork Weekly ", "tagline": "Stitched together", "sender_name": "The Editor", "sender_email": " Editor@Patch.Example "}),
    );
    resp.expect(200);
    let data = resp.json()["data"].clone();
    assert_eq!(data["name"], "Patchwork Weekly");
    assert_eq!(data["tagline"], "Stitched together");
    assert_eq!(data["sender_name"], "The Editor");
    assert_eq!(data["sender_email"], "editor@patch.example");
    assert_eq!(data["subdomain"], before["subdomain"], "subdomain fixed");
    assert_eq!(data["tier"], before["tier"]);
    assert_eq!(data["id"], before["id"]);
    assert_timestamp(&data["updated_at"]);
    assert_eq!(owner.get("/newsletter").json()["data"], data);

    // tier/subdomain/status are not fields of the PATCH (not changeable): each is named in a
    // 422 and nothing of the request is saved, its known field included.
    let resp = owner.patch(
        "/newsletter",
        &json!({"tagline": "", "tier": "paid", "subdomain": "hijack", "status": "cancelled"}),
    );
    assert_eq!(resp.error_code(422), "validation_error");
    let details = resp.json()["error"]["details"].clone();
    let named: Vec<&String> = details.as_object().unwrap().keys().collect();
    assert_eq!(named, ["status", "subdomain", "tier"], "{details}");
    assert_eq!(owner.get("/newsletter").json()["data"], data);
    // Partial: only the given field changes.
    let resp = owner.patch("/newsletter", &json!({"tagline": ""}));
    resp.expect(200);
    let data2 = resp.json()["data"].clone();
    assert_eq!(data2["tagline"], "");
    assert_eq!(data2["name"], "Patchwork Weekly");
    assert_eq!(data2["tier"], "free");
    assert_eq!(data2["status"], "active");
    assert_eq!(data2["subdomain"], before["subdomain"]);

    let snapshot = || {
        app.db()
            .query_row(
                "SELECT name || '|' || tagline || '|' || sender_name || '|' || sender_email FROM newsletters WHERE id = ?1",
                [owner.newsletter_id],
                |r| r.get::<_, String>(0),
            )
            .unwrap()
    };
    let saved = snapshot();
    for (body, field) in [
        (json!({"name": ""}), "name"),
        (json!({"name": "   "}), "name"),
        (json!({"name": "n".repeat(101)}), "name"),
        (json!({"tagline": "t".repeat(201)}), "tagline"),
        (json!({"sender_name": ""}), "sender_name"),
        (json!({"sender_name": "Evil <x@y.z>"}), "sender_name"),
        (json!({"sender_email": "nope"}), "sender_email"),
        (json!({"sender_email": ""}), "sender_email"),
        (
            json!({"name": "Fine", "sender_email": "bad"}),
            "sender_email",
        ),
    ] {
        let resp = owner.patch("/newsletter", &body);
        assert_eq!(resp.error_code(422), "validation_error", "{body}");
        let json = resp.json();
        assert!(json["error"]["details"][field].is_array(), "{body}: {json}");
        assert!(json["errors"].is_array(), "{json}");
        assert_eq!(snapshot(), saved, "{body} changed nothing");
    }
}

#[test]
fn api_newsletter_stats_fields_and_counts() {
    let app = spawn_app();
    let owner = onboard(&app, "Stats Sheet");
    for email in ["a@example.com", "b@example.com", "c@example.com"] {
        owner
            .post("/subscribers", &json!({"email": email}))
            .expect(201);
    }
    let c = owner
        .post("/subscribers", &json!({"email": "d@example.com"}))
        .json();
    owner
        .patch(
            &format!("/subscribers/{}", c["id"]),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    owner
        .post("/issues", &json!({"issue": {"subject": "One"}}))
        .expect(201);
    owner
        .post("/issues", &json!({"issue": {"subject": "Two"}}))
        .expect(201);

    let resp = owner.get("/newsletter/stats");
    resp.expect(200);
    let data = resp.json()["data"].clone();
    let int = |v: &Value| {
        v.as_i64()
            .unwrap_or_else(|| panic!("not an integer: {v} in {data}"))
    };
    let num = |v: &Value| {
        v.as_f64()
            .unwrap_or_else(|| panic!("not a number: {v} in {data}"))
    };
    assert_eq!(int(&data["subscribers"]["total"]), 4);
    assert_eq!(int(&data["subscribers"]["active"]), 3);
    assert_eq!(int(&data["subscribers"]["unsubscribed"]), 1);
    assert_eq!(int(&data["subscribers"]["bounced"]), 0);
    assert_eq!(
        int(&data["subscribers"]["growth_last_30_days"]),
        3,
        "4 new minus 1 unsubscribed"
    );
    assert_eq!(int(&data["issues"]["total"]), 2);
    assert_eq!(int(&data["issues"]["sent_last_30_days"]), 0);
    assert_eq!(num(&data["engagement"]["average_open_rate"]), 0.0);
    assert_eq!(num(&data["engagement"]["average_click_rate"]), 0.0);
    for field in ["emails_sent", "opens", "clicks"] {
        assert_eq!(
            int(&data["engagement"]["last_30_days"][field]),
            0,
            "{field}"
        );
    }
    assert_eq!(data["top_issues"], json!([]));

    let n = owner.get("/newsletter").json()["data"].clone();
    assert_eq!(n["subscriber_count"], 3, "active subscribers");
    assert_eq!(n["issue_count"], 2, "all issues");
}

#[test]
fn api_permissions_by_method() {
    let app = spawn_app();
    let owner = onboard(&app, "Scope Review");
    let s = owner
        .post("/subscribers", &json!({"email": "s@example.com"}))
        .json();
    let sid = s["id"].as_i64().unwrap();
    let issue = owner
        .post("/issues", &json!({"issue": {"subject": "Draft"}}))
        .json();
    let iid = issue["id"].as_i64().unwrap();

    let read = create_api_key(&owner.client, owner.newsletter_id, &["read"]);
    let write = create_api_key(&owner.client, owner.newsletter_id, &["write"]);
    let delete = create_api_key(&owner.client, owner.newsletter_id, &["delete"]);
    let c = &owner.client;
    let gets = [
        "/newsletter".to_string(),
        "/newsletter/stats".to_string(),
        "/issues".to_string(),
        format!("/issues/{iid}"),
        "/subscribers".to_string(),
        format!("/subscribers/{sid}"),
    ];
    let writes: Vec<(&str, String, Value)> = vec![
        ("PATCH", "/newsletter".into(), json!({"tagline": "x"})),
        ("POST", "/issues".into(), json!({"issue": {"subject": "W"}})),
        (
            "PATCH",
            format!("/issues/{iid}"),
            json!({"issue": {"subject": "W"}}),
        ),
        ("POST", format!("/issues/{iid}/send_now"), json!({})),
        ("POST", format!("/issues/{iid}/publish"), json!({})),
        (
            "POST",
            "/subscribers".into(),
            json!({"email": "w@example.com"}),
        ),
        (
            "PATCH",
            format!("/subscribers/{sid}"),
            json!({"subscriber": {"name": "W"}}),
        ),
        (
            "POST",
            format!("/subscribers/{sid}/add_tag"),
            json!({"tag": "w"}),
        ),
        (
            "POST",
            "/subscribers/bulk_create".into(),
            json!({"subscribers": [{"email": "b@example.com"}]}),
        ),
    ];
    let deletes = [
        format!("/issues/{iid}"),
        format!("/subscribers/{sid}/remove_tag?tag=w"),
        format!("/subscribers/{sid}"),
    ];
    let counts = || {
        (
            app.count("SELECT count(*) FROM subscribers"),
            app.count("SELECT count(*) FROM issues"),
            app.count("SELECT count(*) FROM subscriber_tags"),
            app.count("SELECT count(*) FROM events"),
        )
    };
    let before = counts();

    for path in &gets {
        c.api("GET", path, &read, None).expect(200);
        assert_eq!(
            c.api("GET", path, &write, None).error_code(403),
            "forbidden",
            "{path}"
        );
        assert_eq!(
            c.api("GET", path, &delete, None).error_code(403),
            "forbidden",
            "{path}"
        );
    }
    for (method, path, body) in &writes {
        for key in [&read, &delete] {
            assert_eq!(
                c.api(method, path, key, Some(body)).error_code(403),
                "forbidden",
                "{method} {path}"
            );
        }
    }
    for path in &deletes {
        for key in [&read, &write] {
            assert_eq!(
                c.api("DELETE", path, key, None).error_code(403),
                "forbidden",
                "DELETE {path}"
            );
        }
    }
    assert_eq!(counts(), before, "refused requests change nothing");

    // The right scope works.
    c.api(
        "POST",
        "/subscribers",
        &write,
        Some(&json!({"email": "ok@example.com"})),
    )
    .expect(201);
    c.api("DELETE", &format!("/issues/{iid}"), &delete, None)
        .expect(204);
}

#[test]
fn api_cancelled_newsletter_is_read_only() {
    let app = spawn_app();
    let owner = onboard(&app, "Closing Down");
    let s = owner
        .post("/subscribers", &json!({"email": "s@example.com"}))
        .json();
    let sid = s["id"].as_i64().unwrap();
    let issue = owner
        .post(
            "/issues",
            &json!({"issue": {"subject": "Draft", "status": "approved", "content_markdown": "x"}}),
        )
        .json();
    let iid = issue["id"].as_i64().unwrap();
    let (code, out, err) = app.cli(&["status", &owner.subdomain, "cancelled"]);
    assert_eq!(code, 0, "{out} {err}");

    let counts = || {
        (
            app.count("SELECT count(*) FROM subscribers"),
            app.count("SELECT count(*) FROM issues"),
            app.count("SELECT count(*) FROM subscriber_tags"),
            app.count("SELECT count(*) FROM events"),
            app.count("SELECT count(*) FROM jobs"),
        )
    };
    let before = counts();
    for path in [
        "/newsletter".to_string(),
        "/newsletter/stats".to_string(),
        "/issues".to_string(),
        format!("/issues/{iid}"),
        "/subscribers".to_string(),
        format!("/subscribers/{sid}"),
    ] {
        owner.get(&path).expect(200);
    }
    assert_eq!(
        owner.get("/newsletter").json()["data"]["status"],
        "cancelled"
    );
    let writes: Vec<(&str, String, Option<Value>)> = vec![
        ("PATCH", "/newsletter".into(), Some(json!({"tagline": "x"}))),
        (
            "POST",
            "/issues".into(),
            Some(json!({"issue": {"subject": "W"}})),
        ),
        (
            "PATCH",
            format!("/issues/{iid}"),
            Some(json!({"issue": {"subject": "W"}})),
        ),
        ("POST", format!("/issues/{iid}/send_now"), Some(json!({}))),
        ("POST", format!("/issues/{iid}/publish"), Some(json!({}))),
        ("DELETE", format!("/issues/{iid}"), None),
        (
            "POST",
            "/subscribers".into(),
            Some(json!({"email": "w@example.com"})),
        ),
        (
            "PATCH",
            format!("/subscribers/{sid}"),
            Some(json!({"subscriber": {"name": "W"}})),
        ),
        (
            "POST",
            format!("/subscribers/{sid}/add_tag"),
            Some(json!({"tag": "w"})),
        ),
        (
            "DELETE",
            format!("/subscribers/{sid}/remove_tag?tag=w"),
            None,
        ),
        (
            "POST",
            "/subscribers/bulk_create".into(),
            Some(json!({"subscribers": [{"email": "b@example.com"}]})),
        ),
        ("DELETE", format!("/subscribers/{sid}"), None),
    ];
    for (method, path, body) in &writes {
        let resp = owner.api(method, path, body.as_ref());
        assert_eq!(
            resp.error_code(403),
            "newsletter_cancelled",
            "{method} {path}"
        );
    }
    assert_eq!(counts(), before, "a cancelled newsletter changes nothing");
}

#[test]
fn api_newsletter_stats_count_real_sends() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Sent Stats");
    for email in ["one@example.com", "two@example.com"] {
        owner
            .post("/subscribers", &json!({"email": email}))
            .expect(201);
    }
    let issue = owner
        .post(
            "/issues",
            &json!({"issue": {"subject": "Counted", "status": "approved", "content_markdown": "Hello"}}),
        )
        .json();
    let id = issue["id"].as_i64().unwrap();
    owner
        .post(&format!("/issues/{id}/send_now"), &json!({}))
        .expect(200);
    wait_for(
        "the issue to be sent",
        std::time::Duration::from_secs(30),
        || (owner.get(&format!("/issues/{id}")).json()["status"] == "sent").then_some(()),
    );
    let data = owner.get("/newsletter/stats").json()["data"].clone();
    assert_eq!(data["issues"]["total"], 1);
    assert_eq!(data["issues"]["sent_last_30_days"], 1, "{data}");
    assert_eq!(
        data["engagement"]["last_30_days"]["emails_sent"], 2,
        "{data}"
    );
    assert_eq!(data["engagement"]["last_30_days"]["opens"], 0);
    assert_eq!(data["engagement"]["last_30_days"]["clicks"], 0);
    assert!(data["engagement"]["average_open_rate"].is_number());
    let top = data["top_issues"].as_array().unwrap();
    assert_eq!(top.len(), 1, "{data}");
    assert_eq!(top[0]["id"], id);
    assert_eq!(top[0]["subject"], "Counted");
    assert!(top[0]["open_rate"].is_number() && top[0]["click_rate"].is_number());
}
