//! REST API v1, subscribers: list, show, create, update, delete, tags, bulk create.

use crate::api_issues::assert_timestamp;
use crate::support::*;

fn ids(list: &Value) -> Vec<i64> {
    list["subscribers"]
        .as_array()
        .unwrap_or_else(|| panic!("no subscribers array: {list}"))
        .iter()
        .map(|s| s["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn api_subscribers_create_show_update_delete() {
    let app = spawn_app();
    let owner = onboard(&app, "Reader Base");
    listen(&app, &owner, &["subscriber.deleted"]);

    let resp = owner.post(
        "/subscribers",
        &json!({"email": "  Ann.Reader@Example.COM ", "name": "Ann", "tags": ["vip", " vip ", "early"]}),
    );
    resp.expect(201);
    let ann = resp.json();
    assert_eq!(
        ann["email"], "ann.reader@example.com",
        "trimmed, lowercased"
    );
    assert_eq!(ann["name"], "Ann");
    assert_eq!(ann["status"], "active");
    assert_eq!(ann["tags"], json!(["early", "vip"]));
    assert_eq!(ann["unsubscribed_at"], Value::Null);
    for field in ["subscribed_at", "created_at", "updated_at"] {
        assert_timestamp(&ann[field]);
    }
    let id = ann["id"].as_i64().unwrap();

    // Existing address: 200 with the existing record, unchanged.
    let resp = owner.post(
        "/subscribers",
        &json!({"email": "ann.reader@example.com", "name": "Someone else"}),
    );
    resp.expect(200);
    assert_eq!(resp.json(), ann);

    // The wrapper form; no name is null.
    let resp = owner.post(
        "/subscribers",
        &json!({"subscriber": {"email": "bob@example.com", "tags": ["x"]}}),
    );
    resp.expect(201);
    let bob = resp.json();
    assert_eq!(bob["name"], Value::Null);
    assert_eq!(bob["tags"], json!(["x"]));

    // Both forms at once: the wrapper is the subscriber, the top-level fields beside it are
    // checked but not used, and a bad value at either level is refused, creating nothing.
    let resp = owner.post(
        "/subscribers",
        &json!({"email": "top@example.com", "name": "Top Name", "tags": ["top"],
                "subscriber": {"email": "cat@example.com", "tags": ["inner"]}}),
    );
    resp.expect(201);
    let cat = resp.json();
    assert_eq!(
        (&cat["email"], &cat["name"], &cat["tags"]),
        (&json!("cat@example.com"), &Value::Null, &json!(["inner"]))
    );
    for body in [
        json!({"email": "dan@example.com", "tags": ["bad\u{9b}"], "subscriber": {"tags": ["ok"]}}),
        json!({"email": "nope", "subscriber": {"email": "dan@example.com"}}),
        json!({"email": "dan@example.com", "subscriber": null}),
        json!({"email": "dan@example.com", "subscriber": {"name": "Dan"}}),
        json!({"email": "dan@example.com", "subscriber": {"email": null}}),
    ] {
        let resp = owner.post("/subscribers", &body);
        assert!(resp.status == 422, "{body}: {}", resp.status);
        assert!(resp.json()["errors"].is_array(), "{body}");
    }
    let listed = owner.get("/subscribers?per_page=100").json();
    assert!(!listed.to_string().contains("dan@example.com"), "{listed}");

    // Invalid addresses.
    for email in [
        "",
        "   ",
        "nope",
        "a@",
        "@b.example",
        "a b@example.com",
        "a@b@c.example",
    ] {
        let resp = owner.post("/subscribers", &json!({"email": email}));
        assert_eq!(resp.error_code(422), "invalid_email", "{email:?}");
        assert!(resp.json()["errors"].is_array());
    }
    let resp = owner.post("/subscribers", &json!({"name": "No address"}));
    assert_eq!(resp.error_code(422), "invalid_email");
    let resp = owner.post(
        "/subscribers",
        &json!({"email": "tags@example.com", "tags": ["x".repeat(51)]}),
    );
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.post(
        "/subscribers",
        &json!({"email": "tags@example.com", "name": "n".repeat(101)}),
    );
    assert_eq!(resp.error_code(422), "validation_error");
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers"),
        3,
        "refused creates change nothing (ann, bob and cat only)"
    );

    // Show: a top-level object.
    let resp = owner.get(&format!("/subscribers/{id}"));
    resp.expect(200);
    assert_eq!(resp.json(), ann);

    // Update status and name.
    let resp = owner.patch(
        &format!("/subscribers/{id}"),
        &json!({"subscriber": {"status": "unsubscribed", "name": "Ann R."}}),
    );
    resp.expect(200);
    let changed = resp.json();
    assert_eq!(changed["status"], "unsubscribed");
    assert_eq!(changed["name"], "Ann R.");
    assert_timestamp(&changed["unsubscribed_at"]);
    let resp = owner.patch(
        &format!("/subscribers/{id}"),
        &json!({"subscriber": {"status": "active"}}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["status"], "active");
    assert_eq!(resp.json()["unsubscribed_at"], Value::Null);
    assert_eq!(resp.json()["name"], "Ann R.", "absent name is left alone");
    let resp = owner.patch(
        &format!("/subscribers/{id}"),
        &json!({"subscriber": {"name": null}}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["name"], Value::Null);
    for status in ["bounced", "deleted", ""] {
        let resp = owner.patch(
            &format!("/subscribers/{id}"),
            &json!({"subscriber": {"status": status}}),
        );
        assert_eq!(resp.error_code(422), "validation_error", "{status:?}");
    }

    // Not found and other newsletters.
    assert_eq!(
        owner.get("/subscribers/999999").error_code(404),
        "not_found"
    );
    assert_eq!(owner.get("/subscribers/xyz").error_code(404), "not_found");
    assert_eq!(
        owner
            .patch("/subscribers/999999", &json!({"subscriber": {"name": "x"}}))
            .error_code(404),
        "not_found"
    );
    assert_eq!(
        owner.delete("/subscribers/999999").error_code(404),
        "not_found"
    );
    let other = onboard(&app, "Rival Reader");
    assert_eq!(
        other.get(&format!("/subscribers/{id}")).error_code(404),
        "not_found"
    );
    assert_eq!(
        other
            .patch(
                &format!("/subscribers/{id}"),
                &json!({"subscriber": {"status": "unsubscribed"}})
            )
            .error_code(404),
        "not_found"
    );
    assert_eq!(
        other
            .post(&format!("/subscribers/{id}/add_tag"), &json!({"tag": "x"}))
            .error_code(404),
        "not_found"
    );
    assert_eq!(
        other
            .delete(&format!("/subscribers/{id}/remove_tag?tag=vip"))
            .error_code(404),
        "not_found"
    );
    assert_eq!(
        other.delete(&format!("/subscribers/{id}")).error_code(404),
        "not_found"
    );
    assert_eq!(other.get("/subscribers").json()["subscribers"], json!([]));
    // The same address may subscribe to another newsletter.
    other
        .post("/subscribers", &json!({"email": "ann.reader@example.com"}))
        .expect(201);

    // Delete: 204, gone for good with its tags.
    let resp = owner.delete(&format!("/subscribers/{id}"));
    resp.expect(204);
    assert!(resp.body.is_empty());
    assert_eq!(
        owner.get(&format!("/subscribers/{id}")).error_code(404),
        "not_found"
    );
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM subscriber_tags WHERE subscriber_id = {id}"
        )),
        0
    );
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM events WHERE kind = 'subscriber.deleted' AND newsletter_id = {}",
            owner.newsletter_id
        )),
        1
    );
    // Re-adding is a new subscriber.
    owner
        .post("/subscribers", &json!({"email": "ann.reader@example.com"}))
        .expect(201);
}

#[test]
fn api_subscribers_tags() {
    let app = spawn_app();
    let owner = onboard(&app, "Tag Times");
    let s = owner
        .post("/subscribers", &json!({"email": "t@example.com"}))
        .json();
    let id = s["id"].as_i64().unwrap();
    let add = |tag: &Value| owner.post(&format!("/subscribers/{id}/add_tag"), &json!({"tag": tag}));

    let resp = add(&json!("  news  "));
    resp.expect(200);
    assert_eq!(resp.json()["tags"], json!(["news"]));
    assert_eq!(resp.json()["id"], id);
    let resp = add(&json!("news"));
    resp.expect(200);
    assert_eq!(resp.json()["tags"], json!(["news"]), "tags are unique");
    let fifty = "é".repeat(50);
    let resp = add(&json!(fifty));
    resp.expect(200);
    assert_eq!(resp.json()["tags"].as_array().unwrap().len(), 2);
    for bad in [
        json!(""),
        json!("   "),
        json!("x".repeat(51)),
        json!("a\u{0007}b"),
    ] {
        let resp = add(&bad);
        assert_eq!(resp.error_code(422), "validation_error", "{bad}");
    }
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM subscriber_tags WHERE subscriber_id = {id}"
        )),
        2
    );

    let resp = owner.delete(&format!("/subscribers/{id}/remove_tag?tag=news"));
    resp.expect(200);
    assert_eq!(resp.json()["tags"], json!([fifty]));
    let resp = owner.delete(&format!("/subscribers/{id}/remove_tag?tag=absent"));
    resp.expect(200);
    assert_eq!(resp.json()["tags"], json!([fifty]));
    let resp = owner.delete(&format!("/subscribers/{id}/remove_tag"));
    assert_eq!(resp.error_code(422), "validation_error", "tag is required");
    let resp = owner.delete(&format!("/subscribers/{id}/remove_tag?tag=%20%20"));
    assert_eq!(resp.error_code(422), "validation_error");
    // A tag with spaces and unicode, URL-encoded.
    add(&json!("café crème")).expect(200);
    let resp = owner.delete(&format!(
        "/subscribers/{id}/remove_tag?tag=caf%C3%A9%20cr%C3%A8me"
    ));
    resp.expect(200);
    assert_eq!(resp.json()["tags"], json!([fifty]));
}

#[test]
fn api_subscribers_list_filters_and_pagination() {
    let app = spawn_app();
    let owner = onboard(&app, "List Ledger");
    let mut created = Vec::new();
    for i in 0..30 {
        let tags = if i % 5 == 0 {
            json!(["five"])
        } else {
            json!([])
        };
        let s = owner
            .post(
                "/subscribers",
                &json!({"email": format!("r{i}@example.com"), "tags": tags}),
            )
            .json();
        created.push(s["id"].as_i64().unwrap());
    }
    for id in &created[..3] {
        owner
            .patch(
                &format!("/subscribers/{id}"),
                &json!({"subscriber": {"status": "unsubscribed"}}),
            )
            .expect(200);
    }
    let newest_first: Vec<i64> = created.iter().rev().copied().collect();

    let page1 = owner.get("/subscribers");
    page1.expect(200);
    let page1 = page1.json();
    assert_eq!(ids(&page1), newest_first[..25]);
    let cursor = page1["meta"]["next_cursor"]
        .as_str()
        .expect("a next_cursor while more follow")
        .to_string();
    assert_eq!(
        page1["meta"],
        json!({"page": 1, "per_page": 25, "has_more": true, "next_cursor": cursor})
    );
    let page2 = owner.get("/subscribers?page=2").json();
    assert_eq!(ids(&page2), newest_first[25..]);
    assert_eq!(page2["meta"]["has_more"], false);
    assert_eq!(page2["meta"]["next_cursor"], Value::Null);
    // The cursor leads to the same page, numbered 2.
    let by_cursor = owner.get(&format!("/subscribers?cursor={cursor}")).json();
    assert_eq!(ids(&by_cursor), newest_first[25..]);
    assert_eq!(
        by_cursor["meta"],
        json!({"page": 2, "per_page": 25, "has_more": false, "next_cursor": null})
    );
    // A client that repeats `page` beside the cursor still walks on: the cursor says where.
    assert_eq!(
        owner
            .get(&format!("/subscribers?page=1&cursor={cursor}"))
            .json(),
        by_cursor
    );
    let small = owner.get("/subscribers?per_page=7&page=2").json();
    assert_eq!(ids(&small), newest_first[7..14]);
    assert_eq!(small["meta"]["page"], 2);
    assert_eq!(small["meta"]["has_more"], true);
    let after_small = owner
        .get(&format!(
            "/subscribers?per_page=7&cursor={}",
            small["meta"]["next_cursor"].as_str().unwrap()
        ))
        .json();
    assert_eq!(ids(&after_small), newest_first[14..21]);
    assert_eq!(after_small["meta"]["page"], 3);
    assert_eq!(
        owner.get("/subscribers?per_page=101").json()["meta"]["per_page"],
        100
    );

    let unsub = owner.get("/subscribers?status=unsubscribed").json();
    assert_eq!(ids(&unsub), vec![created[2], created[1], created[0]]);
    let active = owner.get("/subscribers?status=active&per_page=100").json();
    assert_eq!(ids(&active).len(), 27);
    assert_eq!(
        owner.get("/subscribers?status=bounced").json()["subscribers"],
        json!([])
    );
    let five = owner.get("/subscribers?tag=five").json();
    let expected: Vec<i64> = newest_first
        .iter()
        .copied()
        .filter(|id| created.iter().position(|c| c == id).unwrap() % 5 == 0)
        .collect();
    assert_eq!(ids(&five), expected);
    let both = owner
        .get("/subscribers?tag=five&status=unsubscribed")
        .json();
    assert_eq!(ids(&both), vec![created[0]]);
    assert_eq!(
        owner.get("/subscribers?tag=none").json()["subscribers"],
        json!([])
    );

    for query in [
        "status=gone",
        "page=0",
        "per_page=0",
        "per_page=x",
        "page=-2",
        "cursor=x",
        "cursor=2.0",
        "page=0&cursor=2.5",
    ] {
        assert_eq!(
            owner.get(&format!("/subscribers?{query}")).error_code(422),
            "validation_error",
            "{query}"
        );
    }
}

#[test]
fn api_subscribers_bulk_create() {
    let app = spawn_app();
    let owner = onboard(&app, "Bulk Bulletin");
    owner
        .post("/subscribers", &json!({"email": "old@example.com"}))
        .expect(201);

    let resp = owner.post(
        "/subscribers/bulk_create",
        &json!({"subscribers": [
            {"email": "New@Example.com", "name": "New", "tags": ["imported"]},
            {"email": "old@example.com"},
            {"email": "not-an-address"},
            {"email": " new@example.com "},
            {"email": "second@example.com"},
            {"email": "tagged@example.com", "tags": ["x".repeat(51)]},
            {}
        ]}),
    );
    resp.expect(200);
    let body = resp.json();
    assert_eq!(body["created"], 2);
    assert_eq!(
        body["existing"], 2,
        "old one and the repeat within the request"
    );
    let errors = body["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 3, "{body}");
    assert_eq!(errors[0]["index"], 2);
    assert_eq!(errors[0]["email"], "not-an-address");
    assert_eq!(errors[0]["code"], "invalid_email");
    assert!(errors[0]["message"].as_str().unwrap().len() > 3);
    assert_eq!(errors[1]["index"], 5);
    assert_eq!(errors[1]["code"], "validation_error");
    assert_eq!(errors[2]["index"], 6);
    assert_eq!(errors[2]["code"], "invalid_email");
    let new = owner.get("/subscribers?tag=imported").json();
    assert_eq!(new["subscribers"][0]["email"], "new@example.com");
    assert_eq!(new["subscribers"][0]["name"], "New");

    // 1001 entries: 422, nothing created.
    let before = app.count("SELECT count(*) FROM subscribers");
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"email": format!("bulk{i}@example.com")}))
        .collect();
    let resp = owner.post("/subscribers/bulk_create", &json!({"subscribers": many}));
    assert_eq!(resp.error_code(422), "validation_error");
    assert_eq!(app.count("SELECT count(*) FROM subscribers"), before);

    // 1000 entries: all accepted.
    let resp = owner.post(
        "/subscribers/bulk_create",
        &json!({"subscribers": many[..1000]}),
    );
    resp.expect(200);
    assert_eq!(
        resp.json(),
        json!({"created": 1000, "existing": 0, "errors": []})
    );
    assert_eq!(app.count("SELECT count(*) FROM subscribers"), before + 1000);
    let again = owner.post(
        "/subscribers/bulk_create",
        &json!({"subscribers": many[..10]}),
    );
    assert_eq!(
        again.json(),
        json!({"created": 0, "existing": 10, "errors": []})
    );
    let empty = owner.post("/subscribers/bulk_create", &json!({"subscribers": []}));
    empty.expect(200);
    assert_eq!(
        empty.json(),
        json!({"created": 0, "existing": 0, "errors": []})
    );
}
