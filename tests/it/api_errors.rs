//! REST API v1 errors: malformed and hostile bodies at every write endpoint, unknown
//! paths, wrong methods, oversized bodies. Every failure is a JSON error, never a 500, and
//! a refused request changes nothing.

use crate::support::*;

/// Every row of the tables a write could touch, as text (API keys and rate counters are left
/// out: each request updates them by design).
fn snapshot(app: &App) -> String {
    let conn = app.db();
    let mut out = String::new();
    for table in [
        "newsletters",
        "issues",
        "articles",
        "subscribers",
        "subscriber_tags",
        "events",
        "jobs",
        "deliveries",
        "webhook_subscriptions",
        "webhook_deliveries",
    ] {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2"))
            .unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            out.push_str(table);
            for i in 0..n {
                let v: rusqlite::types::Value = row.get(i).unwrap();
                out.push_str(&format!("|{v:?}"));
            }
            out.push('\n');
        }
    }
    out
}

/// A 4xx with the contract's JSON error body; returns the code.
#[track_caller]
fn assert_json_4xx(resp: &Resp, what: &str) -> String {
    assert!(
        (400..500).contains(&resp.status),
        "{what}: expected a 4xx, got {}: {}",
        resp.status,
        resp.body.chars().take(300).collect::<String>()
    );
    assert!(
        resp.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{what}: content type {:?}",
        resp.header("content-type")
    );
    resp.error_code(resp.status)
}

#[test]
fn api_errors_hostile_bodies_change_nothing() {
    // Hundreds of writes: lift the hourly limits.
    let app = spawn_app_with(&[
        "--rate-limit-write",
        "100000",
        "--rate-limit-bulk",
        "100000",
        "--allow-private-webhooks",
    ]);
    let owner = onboard(&app, "Hostile Herald");
    let wid = owner
        .post(
            "/webhook_subscriptions",
            &json!({"url": "http://127.0.0.1:9/hook", "events": ["issue.sent"]}),
        )
        .json()["id"]
        .as_i64()
        .unwrap();
    let s = owner
        .post(
            "/subscribers",
            &json!({"email": "keep@example.com", "tags": ["t"]}),
        )
        .json();
    let sid = s["id"].as_i64().unwrap();
    let issue = owner
        .post(
            "/issues",
            &json!({"issue": {"subject": "Keep", "content_markdown": "x",
                "articles": [{"title": "A", "url": "https://a.example"}]}}),
        )
        .json();
    let iid = issue["id"].as_i64().unwrap();

    let mut deep = json!("x");
    for _ in 0..60 {
        deep = json!({"a": deep});
    }
    let huge = "x".repeat(1_900_000);
    let control = "\u{0}\u{7}\u{1b}[31m\u{202e}💥";
    // Values no field accepts: wrong types, nested junk, a huge string, control characters.
    let bad_values: Vec<(&str, Value)> = vec![
        ("number", json!(5)),
        ("float", json!(1.5e300)),
        ("bool", json!(true)),
        ("array", json!(["a", "b"])),
        ("object", json!({"$gt": ""})),
        ("nested junk", json!([[[{"a": [{"b": [null, {}]}]}]]])),
        ("huge string", json!(huge)),
        ("control characters", json!(control)),
        ("deep object", deep),
    ];
    // Each write endpoint, with a way to put a hostile value in its main field.
    type Wrap = fn(Value) -> Value;
    let endpoints: Vec<(&str, String, Wrap)> = vec![
        ("PATCH", "/newsletter".into(), |v| json!({"name": v})),
        (
            "PATCH",
            "/newsletter".into(),
            |v| json!({"sender_email": v}),
        ),
        (
            "POST",
            "/issues".into(),
            |v| json!({"issue": {"subject": v}}),
        ),
        ("POST", "/issues".into(), |v| json!({"issue": v})),
        (
            "POST",
            "/issues".into(),
            |v| json!({"issue": {"subject": "ok", "articles": [{"title": "t", "url": v}]}}),
        ),
        (
            "POST",
            "/issues".into(),
            |v| json!({"issue": {"subject": "ok", "status": v}}),
        ),
        (
            "PATCH",
            format!("/issues/{iid}"),
            |v| json!({"issue": {"subject": v}}),
        ),
        (
            "PATCH",
            format!("/issues/{iid}"),
            |v| json!({"issue": {"scheduled_for": v}}),
        ),
        (
            "PATCH",
            format!("/issues/{iid}"),
            |v| json!({"issue": {"articles": v}}),
        ),
        (
            "POST",
            format!("/issues/{iid}/send_now"),
            |v| json!({"junk": v}),
        ),
        (
            "POST",
            format!("/issues/{iid}/publish"),
            |v| json!({"junk": v}),
        ),
        ("POST", "/subscribers".into(), |v| json!({"email": v})),
        (
            "POST",
            "/subscribers".into(),
            |v| json!({"subscriber": {"email": v}}),
        ),
        (
            "POST",
            "/subscribers".into(),
            |v| json!({"email": "new@example.com", "tags": [v]}),
        ),
        (
            "PATCH",
            format!("/subscribers/{sid}"),
            |v| json!({"subscriber": {"status": v}}),
        ),
        (
            "PATCH",
            format!("/subscribers/{sid}"),
            |v| json!({"subscriber": {"name": v}}),
        ),
        (
            "POST",
            format!("/subscribers/{sid}/add_tag"),
            |v| json!({"tag": v}),
        ),
        (
            "POST",
            "/subscribers/bulk_create".into(),
            |v| json!({"subscribers": v}),
        ),
        (
            "POST",
            "/webhook_subscriptions".into(),
            |v| json!({"url": v, "events": ["issue.sent"]}),
        ),
        (
            "POST",
            "/webhook_subscriptions".into(),
            |v| json!({"url": "http://127.0.0.1:9/x", "events": v}),
        ),
        (
            "POST",
            "/webhook_subscriptions".into(),
            |v| json!({"url": "http://127.0.0.1:9/x", "events": [v]}),
        ),
        (
            "PATCH",
            format!("/webhook_subscriptions/{wid}"),
            |v| json!({"url": v}),
        ),
        (
            "PATCH",
            format!("/webhook_subscriptions/{wid}"),
            |v| json!({"events": v}),
        ),
        (
            "PATCH",
            format!("/webhook_subscriptions/{wid}"),
            // Wrapped: `true` itself is a valid value.
            |v| json!({"enabled": [v]}),
        ),
    ];
    // Whole bodies that are not JSON, or not the right JSON, anywhere.
    let raw_bodies: Vec<(&str, Vec<u8>)> = vec![
        ("unclosed object", b"{".to_vec()),
        ("half a pair", br#"{"email": "#.to_vec()),
        ("bare word", b"nul".to_vec()),
        (
            "trailing garbage",
            br#"{"email": "a@example.com"} x"#.to_vec(),
        ),
        ("invalid utf-8", b"{\"email\": \"\xff\xfe\"}".to_vec()),
        ("byte order mark", b"\xef\xbb\xbf{}".to_vec()),
        ("form encoding", b"email=a%40example.com".to_vec()),
        ("deep nesting", "[".repeat(100_000).into_bytes()),
        ("single quotes", b"{'email': 'a@example.com'}".to_vec()),
    ];
    let shape_bodies: Vec<(&str, Value)> = vec![
        ("null", Value::Null),
        ("array", json!([{"email": "a@example.com"}])),
        ("string", json!("hello")),
        ("number", json!(42)),
    ];

    let before = snapshot(&app);
    let mut checked = 0;
    for (method, path, wrap) in &endpoints {
        for (what, value) in &bad_values {
            let body = wrap(value.clone());
            let resp = owner.api(method, path, Some(&body));
            assert_json_4xx(&resp, &format!("{method} {path} with {what}"));
            checked += 1;
        }
    }
    let mut distinct: Vec<(&str, &String)> = endpoints.iter().map(|(m, p, _)| (*m, p)).collect();
    distinct.dedup();
    for (method, path) in &distinct {
        for (what, bytes) in &raw_bodies {
            let resp =
                owner
                    .client
                    .api_raw(method, path, &owner.key, "application/json", bytes.clone());
            let code = assert_json_4xx(&resp, &format!("{method} {path} with {what}"));
            if path.ends_with("/publish") {
                // Publishing takes no body: what is sent is dropped unread (the draft is
                // refused as without it).
                assert_eq!(code, "invalid_state", "{method} {path} with {what}");
                continue;
            }
            assert_eq!(resp.status, 400, "{method} {path} with {what}");
            assert_eq!(code, "invalid_json", "{method} {path} with {what}");
            checked += 1;
        }
        for (what, body) in &shape_bodies {
            let resp = owner.api(method, path, Some(body));
            assert_json_4xx(&resp, &format!("{method} {path} with {what}"));
            checked += 1;
        }
        // Null where an object is expected.
        for body in [
            json!({"issue": null}),
            json!({"subscriber": null}),
            json!({"subscribers": null}),
            json!({"subscribers": [null]}),
            json!({"tag": null}),
            json!({"email": null}),
        ] {
            let resp = owner.api(method, path, Some(&body));
            if resp.status == 200
                && *method == "PATCH"
                && (*path == "/newsletter" || path.starts_with("/webhook_subscriptions/"))
            {
                // None of these name a field of theirs: these PATCHes ignore them (and the
                // snapshot below shows they changed nothing).
                continue;
            }
            assert_json_4xx(&resp, &format!("{method} {path} with {body}"));
            checked += 1;
        }
    }
    // Bodyless operations never read a body: malformed JSON sent to them is dropped unread,
    // and they answer as without it (here: the ids are unknown).
    for path in [
        "/issues/987654321".to_string(),
        "/subscribers/987654321".to_string(),
        "/subscribers/987654321/remove_tag?tag=t".to_string(),
    ] {
        let resp = owner.client.api_raw(
            "DELETE",
            &path,
            &owner.key,
            "application/json",
            b"{".to_vec(),
        );
        assert_eq!(assert_json_4xx(&resp, &path), "not_found");
    }
    assert!(checked > 250, "{checked} cases");
    assert_eq!(
        snapshot(&app),
        before,
        "no hostile request changed anything"
    );
    assert!(
        !app.log().contains("internal error") && !app.log().contains("unhandled error"),
        "no 500 in the log:\n{}",
        app.log()
    );
}

#[test]
fn api_errors_wrong_types_and_missing_fields_are_422() {
    let app = spawn_app();
    let owner = onboard(&app, "Typed Times");
    for (method, path, body) in [
        ("POST", "/issues", json!({})),
        ("POST", "/issues", json!({"subject": "not wrapped"})),
        ("POST", "/issues", json!({"issue": {"subject": 12}})),
        (
            "POST",
            "/issues",
            json!({"issue": {"subject": "s", "articles": [{"title": "no url"}]}}),
        ),
        ("POST", "/subscribers/bulk_create", json!({})),
        (
            "POST",
            "/subscribers/bulk_create",
            json!({"subscribers": [{"email": 5}]}),
        ),
        ("POST", "/subscribers/1/add_tag", json!({})),
        ("PATCH", "/subscribers/1", json!({})),
        ("PATCH", "/newsletter", json!({"name": 5})),
    ] {
        let resp = owner.api(method, path, Some(&body));
        let code = resp.error_code(422);
        assert_eq!(code, "validation_error", "{method} {path} {body}");
        assert!(resp.json()["errors"].is_array(), "{}", resp.body);
    }
    // Malformed JSON is a 400.
    let resp = owner.client.api_raw(
        "POST",
        "/issues",
        &owner.key,
        "application/json",
        b"{\"issue\":".to_vec(),
    );
    assert_eq!(resp.error_code(400), "invalid_json");
    // A body without Content-Type is still read as JSON.
    let resp = owner.client.api_raw(
        "POST",
        "/subscribers",
        &owner.key,
        "text/plain",
        br#"{"email": "plain@example.com"}"#.to_vec(),
    );
    resp.expect(201);
    // A write without a body, with or without a Content-Type: 422, the body is required.
    for content_type in ["application/json", "text/plain"] {
        let resp = owner
            .client
            .api_raw("POST", "/issues", &owner.key, content_type, vec![]);
        assert_eq!(resp.error_code(422), "validation_error", "{content_type}");
    }
    let auth = format!("Bearer {}", owner.key);
    let resp = owner
        .client
        .request(
            "POST",
            "/api/v1/subscribers",
            &[("Authorization", &auth)],
            None,
        )
        .unwrap();
    assert_eq!(resp.error_code(422), "validation_error");
}

#[test]
fn api_errors_unknown_paths_methods_and_big_bodies() {
    let app = spawn_app();
    let owner = onboard(&app, "Edge Cases");
    for path in [
        "/nope",
        "/issues/1/nope",
        "/subscribers/1/tags",
        "/newsletter/stats/x",
        "/",
    ] {
        let resp = owner.get(path);
        assert_eq!(resp.error_code(404), "not_found", "{path}");
        assert_eq!(
            resp.header("content-type")
                .map(|c| c.starts_with("application/json")),
            Some(true)
        );
    }
    // Only version 1 exists; other versions are unknown API paths too.
    for path in ["/api/v2/newsletter", "/api", "/api/v0/issues"] {
        let resp = owner.client.get(path);
        assert_eq!(resp.error_code(404), "not_found", "{path}");
    }
    for (method, path) in [
        ("DELETE", "/newsletter"),
        ("POST", "/newsletter"),
        ("PUT", "/issues"),
        ("DELETE", "/issues"),
        ("GET", "/issues/1/send_now"),
        ("PUT", "/subscribers/1"),
        ("GET", "/subscribers/bulk_create"),
        ("POST", "/newsletter/stats"),
    ] {
        let resp = owner.api(method, path, None);
        let code = resp.error_code(405);
        assert!(!code.is_empty(), "{method} {path}");
    }

    // Over 2 MiB: 413, nothing created. Exactly 2 MiB is read (and refused for its content).
    let limit = 2 * 1024 * 1024;
    let body_of = |len: usize| {
        let frame = br#"{"issue":{"subject":""}}"#.len();
        format!(r#"{{"issue":{{"subject":"{}"}}}}"#, "x".repeat(len - frame)).into_bytes()
    };
    let before = app.count("SELECT count(*) FROM issues");
    let over = body_of(limit + 1);
    assert_eq!(over.len(), limit + 1);
    let resp = owner
        .client
        .api_raw("POST", "/issues", &owner.key, "application/json", over);
    assert_eq!(resp.error_code(413), "payload_too_large");
    let resp = owner.client.api_raw(
        "POST",
        "/subscribers/bulk_create",
        &owner.key,
        "application/json",
        vec![b' '; 3 * limit],
    );
    assert_eq!(resp.error_code(413), "payload_too_large");
    let at = body_of(limit);
    let resp = owner
        .client
        .api_raw("POST", "/issues", &owner.key, "application/json", at);
    assert_eq!(resp.error_code(422), "validation_error");
    assert_eq!(app.count("SELECT count(*) FROM issues"), before);
    // The server is still fine.
    owner.get("/newsletter").expect(200);
}

#[test]
fn api_errors_every_endpoint_needs_a_key() {
    let app = spawn_app();
    let owner = onboard(&app, "Locked Door");
    let s = owner
        .post("/subscribers", &json!({"email": "k@example.com"}))
        .json();
    let i = owner
        .post("/issues", &json!({"issue": {"subject": "K"}}))
        .json();
    let (sid, iid) = (s["id"].as_i64().unwrap(), i["id"].as_i64().unwrap());
    let before = snapshot(&app);
    let anonymous = app.client();
    let calls: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", "/newsletter".into(), None),
        ("PATCH", "/newsletter".into(), Some(json!({"name": "X"}))),
        ("GET", "/newsletter/stats".into(), None),
        ("GET", "/issues".into(), None),
        (
            "POST",
            "/issues".into(),
            Some(json!({"issue": {"subject": "X"}})),
        ),
        ("GET", format!("/issues/{iid}"), None),
        (
            "PATCH",
            format!("/issues/{iid}"),
            Some(json!({"issue": {"subject": "X"}})),
        ),
        ("DELETE", format!("/issues/{iid}"), None),
        ("POST", format!("/issues/{iid}/send_now"), Some(json!({}))),
        ("POST", format!("/issues/{iid}/publish"), Some(json!({}))),
        ("GET", "/subscribers".into(), None),
        (
            "POST",
            "/subscribers".into(),
            Some(json!({"email": "x@example.com"})),
        ),
        ("GET", format!("/subscribers/{sid}"), None),
        (
            "PATCH",
            format!("/subscribers/{sid}"),
            Some(json!({"subscriber": {"name": "X"}})),
        ),
        ("DELETE", format!("/subscribers/{sid}"), None),
        (
            "POST",
            format!("/subscribers/{sid}/add_tag"),
            Some(json!({"tag": "x"})),
        ),
        (
            "DELETE",
            format!("/subscribers/{sid}/remove_tag?tag=x"),
            None,
        ),
        (
            "POST",
            "/subscribers/bulk_create".into(),
            Some(json!({"subscribers": [{"email": "y@example.com"}]})),
        ),
    ];
    for (method, path, body) in &calls {
        let body = body
            .as_ref()
            .map(|b| ("application/json", serde_json::to_vec(b).unwrap()));
        let none = anonymous
            .request(method, &format!("/api/v1{path}"), &[], body.clone())
            .unwrap();
        assert_eq!(none.error_code(401), "unauthorized", "{method} {path}");
        for auth in [
            "Bearer",
            "Bearer ",
            "Basic dXNlcjpwYXNz",
            &format!("Token {}", owner.key),
        ] {
            let resp = anonymous
                .request(
                    method,
                    &format!("/api/v1{path}"),
                    &[("Authorization", auth)],
                    body.clone(),
                )
                .unwrap();
            assert_eq!(
                resp.error_code(401),
                "unauthorized",
                "{method} {path} {auth}"
            );
        }
    }
    assert_eq!(snapshot(&app), before);
}

/// Every operation of the OpenAPI document that takes a JSON body, given bodies of the wrong
/// shape (none, `null`, a list, a string, a number, `{}`, and its object with `null` fields),
/// answers a 4xx whose messages are written for the API's users: they name the field and what
/// it needs, never a library's internal type name ("IssueBody") or phrase ("Expected input
/// type"). Operations added later are covered by reading the document.
#[test]
fn api_errors_wrong_shapes_are_explained_in_the_apis_words() {
    let app = spawn_app_with(&["--rate-limit-write", "100000", "--allow-private-webhooks"]);
    let owner = onboard(&app, "Plain Words");
    let sid = owner
        .post("/subscribers", &json!({"email": "words@example.com"}))
        .json()["id"]
        .as_i64()
        .unwrap();
    let iid = owner
        .post("/issues", &json!({"issue": {"subject": "Words"}}))
        .json()["id"]
        .as_i64()
        .unwrap();
    let wid = owner
        .post(
            "/webhook_subscriptions",
            &json!({"url": "http://127.0.0.1:9/hook", "events": ["issue.sent"]}),
        )
        .json()["id"]
        .as_i64()
        .unwrap();
    let document = owner.get("/openapi.json").json();
    let schemas = document["components"]["schemas"].as_object().unwrap();
    let internal_names: Vec<&String> = schemas.keys().collect();
    let before = snapshot(&app);
    let mut operations = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if operation.get("requestBody").is_none() || path == "/bounces" {
                continue;
            }
            operations += 1;
            let id = if path.starts_with("/issues") {
                iid
            } else if path.starts_with("/subscribers") {
                sid
            } else {
                wid
            };
            let url = path.replace("{id}", &id.to_string());
            let method = method.to_uppercase();
            // The operation's own top-level fields, each set to null.
            let schema_ref = operation["requestBody"]["content"]
                .as_object()
                .unwrap()
                .values()
                .next()
                .unwrap()["schema"]["$ref"]
                .as_str()
                .unwrap_or_default()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string();
            let every_field = |value: Value| -> Vec<u8> {
                let fields: serde_json::Map<String, Value> = schemas
                    .get(&schema_ref)
                    .and_then(|s| s["properties"].as_object())
                    .map(|p| p.keys().map(|k| (k.clone(), value.clone())).collect())
                    .unwrap_or_default();
                serde_json::to_vec(&Value::Object(fields)).unwrap()
            };
            // (body, whether a success is a right answer: an empty PATCH changes nothing).
            let bodies: Vec<(Vec<u8>, bool)> = vec![
                (vec![], false),
                (b"null".to_vec(), false),
                (b"[]".to_vec(), false),
                (b"\"text\"".to_vec(), false),
                (b"5".to_vec(), false),
                (b"{}".to_vec(), method == "PATCH"),
                (every_field(Value::Null), method == "PATCH"),
                (every_field(json!([1])), false),
            ];
            for (body, may_succeed) in bodies {
                let what = format!("{method} {url} {}", String::from_utf8_lossy(&body));
                let resp =
                    owner
                        .client
                        .api_raw(&method, &url, &owner.key, "application/json", body);
                if may_succeed && resp.status < 300 {
                    continue;
                }
                let code = assert_json_4xx(&resp, &what);
                assert!(
                    [400, 422].contains(&resp.status),
                    "{what}: {} {}",
                    resp.status,
                    resp.body
                );
                let error = resp.json()["error"].clone();
                let mut messages = vec![error["message"].as_str().unwrap_or_default().to_string()];
                for details in error["details"]
                    .as_object()
                    .into_iter()
                    .flat_map(|d| d.values())
                {
                    for message in details.as_array().into_iter().flatten() {
                        messages.push(message.as_str().unwrap_or_default().to_string());
                    }
                }
                for message in resp.json()["errors"].as_array().into_iter().flatten() {
                    messages.push(message.as_str().unwrap_or_default().to_string());
                }
                for message in &messages {
                    assert!(!message.is_empty(), "{what}: {}", resp.body);
                    assert!(
                        !message.contains("Expected input type")
                            && !message.contains("failed to parse")
                            && !internal_names
                                .iter()
                                .any(|name| message.contains(&format!("\"{name}\""))),
                        "{what} ({code}): {message}"
                    );
                }
            }
        }
    }
    assert!(operations >= 9, "{operations} operations with a body");
    assert_eq!(snapshot(&app), before, "a refused request changes nothing");
}
