//! The OpenAPI document as a contract: every operation lists only the error
//! statuses it can return and never answers one it does not list. The test walks the served
//! document and, per operation, provokes each class of refusal it can (no key, a key without
//! the permission, an unknown id, malformed, oversized and wrongly shaped bodies, a bad query,
//! a state rule, a newsletter without the paid tier, the rate limit), checking each answer's
//! status is listed.

use crate::support::openapi::resolve;
use crate::support::*;

/// An id no resource has.
const UNKNOWN_ID: &str = "987654321";
/// Each key's hourly limit in every bucket: high enough for one pass of the walk, low enough
/// for the 429 pass to use it up.
const LIMIT: usize = 150;

/// One operation of the document.
struct Operation {
    method: String,
    path: String,
    id: String,
    takes_body: bool,
    body_required: bool,
    /// The request body's example, if it has one.
    request_example: Option<Value>,
    statuses: Vec<u16>,
}

impl Operation {
    /// The path with `{id}` replaced, and the query parameter an operation needs.
    fn at(&self, id: &str) -> String {
        let path = self.path.replace("{id}", id);
        if self.id == "removeSubscriberTag" {
            format!("{path}?tag=news")
        } else {
            path
        }
    }

    fn by_id(&self) -> bool {
        self.path.contains("{id}")
    }
}

fn operations(doc: &Value) -> Vec<Operation> {
    let mut all = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            all.push(Operation {
                method: method.to_uppercase(),
                path: path.clone(),
                id: op["operationId"].as_str().expect("operationId").to_string(),
                takes_body: op.get("requestBody").is_some(),
                body_required: op["requestBody"]["required"] == json!(true),
                request_example: media_schema(&op["requestBody"])
                    .and_then(|schema| resolve(doc, schema)["example"].as_object().cloned())
                    .map(Value::Object),
                statuses: op["responses"]
                    .as_object()
                    .expect("responses")
                    .keys()
                    .map(|s| s.parse().expect("a numeric status"))
                    .collect(),
            });
        }
    }
    assert!(all.len() >= 27, "{} operations", all.len());
    all
}

/// The schema of a request body's or a response's JSON content.
fn media_schema(holder: &Value) -> Option<&Value> {
    holder["content"]
        .as_object()?
        .values()
        .next()
        .map(|m| &m["schema"])
}

/// The body an operation with one is sent: its request example.
fn valid_body(op: &Operation) -> Value {
    op.request_example
        .clone()
        .unwrap_or_else(|| panic!("{} {} has no request example", op.method, op.path))
}

/// Sends `method path` with `key` (or none) and a raw JSON body.
fn send(app: &App, op: &Operation, path: &str, key: Option<&str>, body: Option<Vec<u8>>) -> Resp {
    let auth = key.map(|k| format!("Bearer {k}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    app.client()
        .request(
            &op.method,
            &format!("/api/v1{path}"),
            &headers,
            body.map(|b| ("application/json", b)),
        )
        .unwrap_or_else(|e| panic!("{} {path}: {e}", op.method))
}

fn body_of(op: &Operation) -> Option<Vec<u8>> {
    op.takes_body
        .then(|| serde_json::to_vec(&valid_body(op)).unwrap())
}

/// Records that `resp` answered `op`, provoked by `what`; an unlisted status is a failure.
fn note(problems: &mut Vec<String>, op: &Operation, what: &str, resp: &Resp) {
    if !op.statuses.contains(&resp.status) {
        problems.push(format!(
            "{} {} ({what}) answered {}, not in {:?}: {}",
            op.method,
            op.path,
            resp.status,
            op.statuses,
            resp.body.chars().take(200).collect::<String>()
        ));
    }
}

/// Like [`note`], and the status must be `expected`.
fn expect(problems: &mut Vec<String>, op: &Operation, what: &str, resp: &Resp, expected: u16) {
    note(problems, op, what, resp);
    if resp.status != expected {
        problems.push(format!(
            "{} {} ({what}) answered {}, expected {expected}: {}",
            op.method,
            op.path,
            resp.status,
            resp.body.chars().take(200).collect::<String>()
        ));
    }
}

#[test]
fn api_contract_every_operation_answers_only_statuses_it_lists() {
    let limit = LIMIT.to_string();
    let app = spawn_app_with(&[
        "--rate-limit-get",
        &limit,
        "--rate-limit-write",
        &limit,
        "--rate-limit-bulk",
        &limit,
        "--allow-private-webhooks",
    ]);
    let doc = app.client().get("/api/v1/openapi.json").json();
    let ops = operations(&doc);
    let owner = onboard(&app, "Contract Courier");
    let key =
        |permissions: &[&str]| create_api_key(&owner.client, owner.newsletter_id, permissions);
    let every = ["read", "write", "delete"];
    let mut problems = Vec::new();

    // The guard, in front of every operation: no key, then a key without the permission.
    let (read_only, no_read) = (key(&["read"]), key(&["write", "delete"]));
    for op in &ops {
        let path = op.at(UNKNOWN_ID);
        let resp = send(&app, op, &path, None, body_of(op));
        expect(&mut problems, op, "no key", &resp, 401);
        let refused = if op.method == "GET" {
            &no_read
        } else {
            &read_only
        };
        let resp = send(&app, op, &path, Some(refused), body_of(op));
        expect(&mut problems, op, "key without the permission", &resp, 403);
    }

    // Unknown ids, and bodies that are malformed, too large or of the wrong shape. An
    // operation without a body ignores whatever is sent.
    let full = key(&every);
    let huge = vec![b' '; 3 * 1024 * 1024];
    for op in ops.iter().filter(|op| op.by_id()) {
        let resp = send(&app, op, &op.at(UNKNOWN_ID), Some(&full), body_of(op));
        expect(&mut problems, op, "unknown id", &resp, 404);
        let resp = send(&app, op, &op.at("not-a-number"), Some(&full), body_of(op));
        expect(&mut problems, op, "id not a number", &resp, 404);
    }
    let full = key(&every);
    for op in ops.iter().filter(|op| op.method != "GET") {
        let path = op.at(UNKNOWN_ID);
        for (what, raw, status) in [
            ("malformed JSON", b"{".to_vec(), 400),
            ("a body over 2 MiB", huge.clone(), 413),
            ("null", b"null".to_vec(), 422),
            ("an array", b"[]".to_vec(), 422),
        ] {
            let resp = send(&app, op, &path, Some(&full), Some(raw));
            if op.takes_body && (status != 422 || op.body_required) {
                expect(&mut problems, op, what, &resp, status);
            } else if op.takes_body {
                note(&mut problems, op, what, &resp);
            } else {
                note(&mut problems, op, what, &resp);
                if resp.status == status {
                    problems.push(format!(
                        "{} {}: {what} answered {status} though it takes no body",
                        op.method, op.path
                    ));
                }
            }
        }
    }
    for op in ops.iter().filter(|op| op.method == "GET") {
        let path = format!("{}?page=x&per_page=-1", op.at(UNKNOWN_ID));
        let resp = send(&app, op, &path, Some(&full), None);
        note(&mut problems, op, "a bad page", &resp);
    }

    // State rules on a draft (sending it, resuming it, publishing it without content), and
    // a free-tier newsletter sending: whatever the answer, it is listed.
    let full = key(&every);
    let draft = owner.post("/issues", &json!({"issue": {"subject": "Draft"}}));
    draft.expect(201);
    let draft = draft.json()["id"].to_string();
    owner
        .post("/subscribers", &json!({"email": "reader@example.com"}))
        .expect(201);
    let approved = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Ready", "content_markdown": "Hi", "status": "approved"}}),
    );
    approved.expect(201);
    let approved = approved.json()["id"].to_string();
    for op in ops.iter().filter(|op| op.path.starts_with("/issues/{id}/")) {
        for id in [&draft, &approved] {
            let resp = send(&app, op, &op.at(id), Some(&full), body_of(op));
            note(
                &mut problems,
                op,
                &format!("issue {id} on the free tier"),
                &resp,
            );
        }
    }
    let issue_ops: Vec<&Operation> = ops.iter().filter(|op| op.id == "sendIssueNow").collect();
    let resp = send(
        &app,
        issue_ops[0],
        &issue_ops[0].at(&approved),
        Some(&full),
        Some(b"{}".to_vec()),
    );
    expect(&mut problems, issue_ops[0], "free tier", &resp, 402);
    let delete = ops.iter().find(|op| op.id == "deleteIssue").unwrap();
    let resp = send(&app, delete, &delete.at(&approved), Some(&full), None);
    expect(
        &mut problems,
        delete,
        "deleting an approved issue",
        &resp,
        422,
    );

    // The rate limit: a key whose buckets are used up is refused everywhere.
    let spent = key(&every);
    for (method, path, body) in [
        ("GET", "/newsletter/stats", None),
        ("PATCH", "/newsletter", Some(json!({}))),
        (
            "POST",
            "/subscribers/bulk_create",
            Some(json!({"subscribers": []})),
        ),
    ] {
        for _ in 0..LIMIT {
            owner.client.api(method, path, &spent, body.as_ref());
        }
    }
    for op in &ops {
        let resp = send(&app, op, &op.at(UNKNOWN_ID), Some(&spent), body_of(op));
        expect(&mut problems, op, "past the rate limit", &resp, 429);
    }

    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        !app.log().contains("undocumented status"),
        "an operation answered a status it does not list:\n{}",
        app.log()
    );
}

/// The operations with a request body, in an order where each example finds what it needs
/// (the subscribers an audience names, the issue a test send goes out of), each with the
/// operation whose answer gives the `{id}` it acts on.
const EXAMPLE_FLOW: [(&str, Option<&str>); 19] = [
    ("createField", None),
    ("updateField", Some("createField")),
    ("createSubscriber", None),
    ("bulkCreateSubscribers", None),
    ("updateSubscriber", Some("createSubscriber")),
    ("setSubscriberMembership", Some("createSubscriber")),
    ("addSubscriberTag", Some("createSubscriber")),
    ("createSequence", None),
    ("updateSequence", Some("createSequence")),
    // With the id of the subscriber created above in place of the example's.
    ("addSequenceSubscriber", Some("createSequence")),
    ("createIssue", None),
    ("updateIssue", Some("createIssue")),
    ("sendIssueTest", Some("createIssue")),
    ("sendIssueNow", Some("createIssue")),
    // Once that send is done (the flow waits for it): a sent issue is what a resend resends.
    ("resendIssueUnopened", Some("createIssue")),
    ("updateNewsletter", None),
    ("createWebhookSubscription", None),
    (
        "updateWebhookSubscription",
        Some("createWebhookSubscription"),
    ),
    ("reportBounce", None),
];

#[test]
fn api_contract_every_operation_is_described_and_its_examples_are_accepted() {
    let app = spawn_app_with(&["--allow-private-webhooks"]);
    let doc = app.client().get("/api/v1/openapi.json").json();
    let ops = operations(&doc);
    let mut problems = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let what = format!("{} {path}", method.to_uppercase());
            for field in ["summary", "description"] {
                if op[field].as_str().is_none_or(|text| text.trim().is_empty()) {
                    problems.push(format!("{what}: no {field}"));
                }
            }
            if op.get("requestBody").is_some()
                && media_schema(&op["requestBody"])
                    .is_none_or(|schema| resolve(&doc, schema)["example"].is_null())
            {
                problems.push(format!("{what}: the request body has no example"));
            }
            for (status, response) in op["responses"].as_object().unwrap() {
                if status.starts_with('2')
                    && let Some(schema) = media_schema(response)
                    && resolve(&doc, schema)["example"].is_null()
                {
                    problems.push(format!("{what}: the {status} answer has no example"));
                }
            }
        }
    }
    let mut with_body: Vec<&str> = ops
        .iter()
        .filter(|op| op.takes_body)
        .map(|op| op.id.as_str())
        .collect();
    let mut in_flow: Vec<&str> = EXAMPLE_FLOW.iter().map(|(id, _)| *id).collect();
    with_body.sort();
    in_flow.sort();
    assert_eq!(
        with_body, in_flow,
        "EXAMPLE_FLOW names every operation with a body"
    );

    // Each request example, sent as it is, is accepted.
    let owner = onboard_paid(&app, "Example Express");
    let mut ids: std::collections::HashMap<&str, String> = Default::default();
    for (id, acts_on) in EXAMPLE_FLOW {
        let op = ops.iter().find(|op| op.id == id).unwrap();
        let target = acts_on.map(|by| ids[by].clone()).unwrap_or_default();
        if id == "resendIssueUnopened" {
            crate::support::send::wait_status(
                &owner,
                target.parse().unwrap(),
                "sent",
                std::time::Duration::from_secs(30),
            );
        }
        let body = if id == "addSequenceSubscriber" {
            let mut example = valid_body(op);
            example["subscriber_id"] = json!(ids["createSubscriber"].parse::<i64>().unwrap());
            Some(serde_json::to_vec(&example).unwrap())
        } else {
            body_of(op)
        };
        let resp = send(&app, op, &op.at(&target), Some(&owner.key), body);
        if !(200..300).contains(&resp.status) {
            problems.push(format!(
                "{} {}: its example {} was refused with {}: {}",
                op.method,
                op.path,
                valid_body(op),
                resp.status,
                resp.body
            ));
        } else if let Some(created) = resp.json()["id"].as_i64() {
            ids.insert(id, created.to_string());
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
