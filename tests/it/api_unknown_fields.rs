//! Unknown request fields and wrappers are refused: every object a request
//! body may hold states `additionalProperties: false`, and a field the document does not name
//! there answers 422 `validation_error` naming each one, with nothing saved. A client's typo
//! is never a silent success.

use crate::support::*;

/// An id nothing has: the body is refused before the operation looks for it.
const UNKNOWN_ID: &str = "987654321";

/// The field name tried at every closed place.
const STRANGER: &str = "zz_not_a_field";

/// `schema` with `$ref`s and a nullable reference's `allOf` followed, and the name of the
/// component it ends at.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> (&'a Value, Option<&'a str>) {
    let (mut schema, mut name) = (schema, None);
    loop {
        if let Some(r) = schema["$ref"].as_str() {
            let component = r.rsplit('/').next().unwrap();
            name = Some(component);
            schema = &doc["components"]["schemas"][component];
        } else if let Some(all) = schema["allOf"].as_array() {
            // A nullable reference: the reference, and a part with its description.
            schema = all
                .iter()
                .find(|p| p.get("$ref").is_some())
                .unwrap_or(&all[0]);
        } else {
            return (schema, name);
        }
    }
}

/// The objects of `value` (valid for `schema`) as (JSON path, component name, closed).
fn objects(
    doc: &Value,
    schema: &Value,
    value: &Value,
    at: &str,
    found: &mut Vec<(String, String, bool)>,
) {
    let (schema, name) = resolve(doc, schema);
    // A map (custom field values by name): its keys are the client's, checked by the server
    // against the newsletter's fields (422 for an unknown one, `custom_fields.rs`).
    if schema["additionalProperties"].is_object() {
        return;
    }
    match value {
        Value::Object(fields) => {
            found.push((
                at.to_string(),
                name.unwrap_or("(inline)").to_string(),
                schema["additionalProperties"] == json!(false),
            ));
            for (field, inner) in fields {
                let property = &schema["properties"][field];
                assert!(!property.is_null(), "{at}.{field}: not in the schema");
                let path = if at.is_empty() {
                    field.clone()
                } else {
                    format!("{at}.{field}")
                };
                objects(doc, property, inner, &path, found);
            }
        }
        Value::Array(entries) => {
            for (i, entry) in entries.iter().enumerate() {
                objects(doc, &schema["items"], entry, &format!("{at}[{i}]"), found);
            }
        }
        _ => {}
    }
}

/// Every component schema a request body can reach.
fn request_components(doc: &Value) -> std::collections::BTreeSet<String> {
    fn reach(doc: &Value, schema: &Value, seen: &mut std::collections::BTreeSet<String>) {
        if let Some(r) = schema["$ref"].as_str() {
            let name = r.rsplit('/').next().unwrap().to_string();
            if seen.insert(name.clone()) {
                reach(doc, &doc["components"]["schemas"][&name], seen);
            }
            return;
        }
        for property in schema["properties"].as_object().into_iter().flatten() {
            reach(doc, property.1, seen);
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            for part in schema[key].as_array().into_iter().flatten() {
                reach(doc, part, seen);
            }
        }
        if let Some(items) = schema.get("items") {
            reach(doc, items, seen);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            for media in op["requestBody"]["content"]
                .as_object()
                .into_iter()
                .flatten()
            {
                reach(doc, &media.1["schema"], &mut seen);
            }
        }
    }
    seen
}

/// Puts `STRANGER` into the object at `at` (`a.b[0].c`; empty: the body itself).
fn with_stranger(body: &Value, at: &str) -> Value {
    let mut body = body.clone();
    let mut here = &mut body;
    for step in at.split('.').filter(|s| !s.is_empty()) {
        let (name, index) = match step.split_once('[') {
            Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (step, None),
        };
        here = &mut here[name];
        if let Some(i) = index {
            here = &mut here[i];
        }
    }
    here[STRANGER] = json!(1);
    body
}

#[test]
fn api_unknown_fields_every_request_object_is_closed_and_refuses_a_field_it_does_not_name() {
    // Every body is refused before its operation runs, but each counts in its bucket.
    let app = spawn_app_with(&[
        "--rate-limit-write",
        "100000",
        "--rate-limit-bulk",
        "100000",
    ]);
    let owner = onboard_paid(&app, "Closed Circular");
    let doc: Value = app.client().get("/api/v1/openapi.json").expect(200).json();
    let subscribers_before = owner.get("/subscribers").json()["subscribers"].clone();
    // The newsletter's own relay and warm-up plan, which no example holds.
    let extra = json!({"relay": {"host": "smtp.closed.example", "port": 587,
        "tls_mode": "starttls", "limits": {"per_day": 5}}, "warmup": {"factor": 2}});
    let mut closed_seen = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let Some((_, media)) = op["requestBody"]["content"]
                .as_object()
                .and_then(|c| c.iter().next())
            else {
                continue;
            };
            let schema = &media["schema"];
            let example = resolve(&doc, schema).0["example"].clone();
            let example = if example.is_null() {
                schema["example"].clone()
            } else {
                example
            };
            assert!(example.is_object(), "{method} {path}: no example");
            let mut bodies = vec![example];
            if op["operationId"] == "updateNewsletter" {
                bodies.push(extra.clone());
            }
            let at = path.replace("{id}", UNKNOWN_ID);
            for body in bodies {
                let mut places = Vec::new();
                objects(&doc, schema, &body, "", &mut places);
                for (place, component, closed) in places {
                    if !closed {
                        problems.push(format!(
                            "{method} {path}: {component} at `{place}` does not state additionalProperties: false"
                        ));
                        continue;
                    }
                    closed_seen.insert(component);
                    let sent = with_stranger(&body, &place);
                    let resp = owner.api(&method.to_uppercase(), &at, Some(&sent));
                    let named = if place.is_empty() {
                        STRANGER.to_string()
                    } else {
                        format!("{place}.{STRANGER}")
                    };
                    let details = &resp.json()["error"]["details"];
                    let keys: Vec<&String> = details
                        .as_object()
                        .map(|d| d.keys().collect())
                        .unwrap_or_default();
                    if resp.status != 422
                        || resp.json()["error"]["code"] != "validation_error"
                        || keys != [&named]
                        || resp.header("X-RateLimit-Limit").is_none()
                    {
                        problems.push(format!(
                            "{method} {path} with `{named}`: {} {}",
                            resp.status, resp.body
                        ));
                    }
                }
            }
        }
    }
    // Every object a request body can hold was tried, and is closed.
    let components = request_components(&doc);
    let objects_reached: std::collections::BTreeSet<String> = components
        .iter()
        .filter(|name| doc["components"]["schemas"][name.as_str()]["type"] == "object")
        .cloned()
        .collect();
    assert_eq!(closed_seen, objects_reached, "request objects tried");
    assert!(objects_reached.len() >= 18, "{objects_reached:?}");
    assert!(problems.is_empty(), "{problems:#?}");
    // Nothing was created along the way.
    assert_eq!(
        owner.get("/subscribers").json()["subscribers"],
        subscribers_before
    );
    assert_eq!(owner.get("/issues").json()["issues"], json!([]));
}

/// The details of a 422 `validation_error`, checked to be one.
#[track_caller]
fn refused(resp: &Resp) -> serde_json::Map<String, Value> {
    assert_eq!(resp.error_code(422), "validation_error", "{}", resp.body);
    let json = resp.json();
    assert!(json["errors"].is_array(), "{json}");
    json["error"]["details"].as_object().unwrap().clone()
}

#[test]
fn api_unknown_fields_typos_and_wrappers_are_named_and_change_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Typo Times");
    let newsletter = owner.get("/newsletter").json()["data"].clone();

    // A wrapper PATCH /newsletter does not take: it once answered 200 and changed nothing.
    let details = refused(&owner.patch(
        "/newsletter",
        &json!({"newsletter": {"name": "Wrapped Weekly"}}),
    ));
    assert_eq!(
        details["newsletter"],
        json!([
            "is not a field of this request: send the fields inside `newsletter` without that wrapper"
        ])
    );
    assert_eq!(owner.get("/newsletter").json()["data"], newsletter);

    // A typo and an unknown field beside the wrapper of POST /issues: each named, nothing
    // created, the valid fields beside them included.
    let details = refused(&owner.post(
        "/issues",
        &json!({"issue": {"subject": "Typo", "subjet": "Typo", "content_markdown": "x"},
            "tags": ["weekly"]}),
    ));
    assert_eq!(details.keys().collect::<Vec<_>>(), ["issue.subjet", "tags"]);
    assert_eq!(
        details["issue.subjet"],
        json!(["is not a field of this request: did you mean `subject`?"])
    );
    // The issue's fields without their wrapper.
    let details = refused(&owner.post("/issues", &json!({"subject": "Bare"})));
    assert_eq!(
        details["subject"],
        json!(["is not a field of this request: it goes inside `issue`"])
    );
    // Deeper down: an article's and an audience's.
    let details = refused(&owner.post(
        "/issues",
        &json!({"issue": {"subject": "Deep", "articles": [
            {"title": "A", "url": "https://a.example/"},
            {"title": "B", "url": "https://b.example/", "link": "https://b.example/"}],
            "audience": {"tags": [], "exclude": ["vip"]}}}),
    ));
    assert_eq!(
        details.keys().collect::<Vec<_>>(),
        ["issue.articles[1].link", "issue.audience.exclude"]
    );
    assert_eq!(owner.get("/issues").json()["issues"], json!([]));

    // POST /subscribers takes `email` or the `subscriber` wrapper, `send_welcome` beside
    // either: both documented forms work, anything else is named.
    owner
        .post(
            "/subscribers",
            &json!({"email": "bare@example.com", "send_welcome": false}),
        )
        .expect(201);
    let wrapped = owner.post(
        "/subscribers",
        &json!({"subscriber": {"email": "wrapped@example.com", "tags": ["a"]}, "send_welcome": false}),
    );
    wrapped.expect(201);
    let details = refused(&owner.post(
        "/subscribers",
        &json!({"subscriber": {"email": "inside@example.com", "send_welcome": true}}),
    ));
    assert_eq!(
        details.keys().collect::<Vec<_>>(),
        ["subscriber.send_welcome"]
    );
    let details = refused(&owner.post("/subscribers", &json!({"emial": "typo@example.com"})));
    assert_eq!(
        details["emial"],
        json!(["is not a field of this request: did you mean `email`?"])
    );
    // A bulk entry with a field of its own refuses the whole request: no entry is created.
    let details = refused(&owner.post(
        "/subscribers/bulk_create",
        &json!({"subscribers": [{"email": "one@example.com"},
            {"email": "two@example.com", "source": "import"}]}),
    ));
    assert_eq!(
        details.keys().collect::<Vec<_>>(),
        ["subscribers[1].source"]
    );
    let emails: Vec<Value> = owner.get("/subscribers").json()["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["email"].clone())
        .collect();
    assert_eq!(
        emails,
        [json!("wrapped@example.com"), json!("bare@example.com")]
    );

    // PATCH /subscribers/{id} without its wrapper changes nothing.
    let id = wrapped.json()["id"].as_i64().unwrap();
    let shown = owner.get(&format!("/subscribers/{id}")).json();
    let details = refused(&owner.patch(&format!("/subscribers/{id}"), &json!({"name": "Renamed"})));
    assert_eq!(
        details["name"],
        json!(["is not a field of this request: it goes inside `subscriber`"])
    );
    assert_eq!(owner.get(&format!("/subscribers/{id}")).json(), shown);

    // The relay's fields, one level down, each named; nothing saved.
    let newsletter = owner.get("/newsletter").json()["data"].clone();
    let details = refused(&owner.patch(
        "/newsletter",
        &json!({"name": "Saved Nothing", "relay": {"host": "smtp.typo.example", "port": 587,
            "tls_mode": "starttls", "pasword": "secret", "limits": {"per_minute": 5}}}),
    ));
    assert_eq!(
        details.keys().collect::<Vec<_>>(),
        ["relay.limits.per_minute", "relay.pasword"]
    );
    assert_eq!(owner.get("/newsletter").json()["data"], newsletter);

    // The bounce URL takes the body of POST /bounces, with the same rule.
    let token = bounce_token(&app, &owner);
    let resp = app
        .client()
        .request(
            "POST",
            &format!("/bounces/{token}"),
            &[],
            Some((
                "application/json",
                br#"{"email": "bare@example.com", "reasn": "550 5.1.1"}"#.to_vec(),
            )),
        )
        .unwrap();
    assert_eq!(refused(&resp).keys().collect::<Vec<_>>(), ["reasn"]);
    let bare = owner.get("/subscribers?status=active").json()["subscribers"].clone();
    assert_eq!(bare.as_array().unwrap().len(), 2, "nobody bounced: {bare}");
}

#[test]
fn api_unknown_fields_a_body_full_of_them_is_answered_naming_twenty() {
    let app = spawn_app();
    let owner = onboard(&app, "Crowded Columns");
    // About 1.8 MiB: 50,000 bulk entries, each with a field of its own. The answer names the
    // first 20 and counts the rest, in one pass over the body; nothing is created.
    let entries: Vec<Value> = (0..50_000)
        .map(|i| json!({"email": format!("r{i}@example.com"), "x": 1}))
        .collect();
    let details = refused(&owner.post(
        "/subscribers/bulk_create",
        &json!({ "subscribers": entries }),
    ));
    assert_eq!(details.len(), 21, "{details:?}");
    assert!(details.contains_key("subscribers[0].x"), "{details:?}");
    assert!(details.contains_key("subscribers[19].x"), "{details:?}");
    assert_eq!(
        details["base"],
        json!(["49980 more fields are not fields of this request"])
    );
    assert_eq!(owner.get("/subscribers").json()["subscribers"], json!([]));
}
