//! The OpenAPI document states the rules the server enforces: read from the served
//! document, every constrained field and parameter of every operation is tried at its bounds
//! and with awkward values, and the server must agree with the document: a value the schema
//! allows is taken, one it forbids is refused (422, or 404 for a path id). New fields are
//! covered by being in the document; a new request schema fails here until it says which
//! operation exercises it.

use regex::Regex;

use crate::support::openapi;
use crate::support::*;

/// Where a constrained value goes.
#[derive(Debug, Clone, PartialEq)]
enum Place {
    /// A JSON path in the body: `issue.articles[].title` (`[]`: the list's first entry).
    Body(String),
    Query(String),
    Path(String),
}

/// A constrained field or parameter of one operation.
#[derive(Debug, Clone)]
struct Site {
    operation: String,
    method: String,
    path: String,
    place: Place,
    /// The component schema the body field belongs to (`""` for parameters).
    component: String,
    schema: Value,
}

/// The schema a `$ref` names, or the first of an `allOf` (how a nullable reference is
/// written) resolved, or the schema itself.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["allOf"].as_array() {
        Some(all) if schema.get("$ref").is_none() => resolve(doc, &all[0]),
        _ => openapi::resolve(doc, schema),
    }
}

fn component_of(schema: &Value) -> Option<String> {
    let reference = schema["$ref"]
        .as_str()
        .or_else(|| schema["allOf"][0]["$ref"].as_str())?;
    Some(reference.rsplit('/').next().unwrap().to_string())
}

fn constrained(schema: &Value) -> bool {
    [
        "maxLength",
        "minLength",
        "pattern",
        "enum",
        "minimum",
        "maximum",
        "maxItems",
        "minItems",
    ]
    .iter()
    .any(|k| !schema[k].is_null())
}

/// Collects the constrained places below `schema` (found at JSON path `at`).
fn walk(
    doc: &Value,
    schema: &Value,
    at: &str,
    component: &str,
    found: &mut Vec<(String, String, Value)>,
) {
    let component = component_of(schema).unwrap_or(component.to_string());
    let schema = resolve(doc, schema);
    if constrained(schema) {
        found.push((at.to_string(), component.clone(), schema.clone()));
    }
    if let Some(items) = schema.get("items") {
        walk(doc, items, &format!("{at}[]"), &component, found);
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        let path = if at.is_empty() {
            name.clone()
        } else {
            format!("{at}.{name}")
        };
        walk(doc, property, &path, &component, found);
    }
}

fn sites(doc: &Value) -> Vec<Site> {
    let mut sites = Vec::new();
    for (path, operations) in doc["paths"].as_object().unwrap() {
        for (method, op) in operations.as_object().unwrap() {
            let site = |place: Place, component: &str, schema: Value| Site {
                operation: op["operationId"].as_str().unwrap().to_string(),
                method: method.to_uppercase(),
                path: path.clone(),
                place,
                component: component.to_string(),
                schema,
            };
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap().to_string();
                let place = match p["in"].as_str().unwrap() {
                    "path" => Place::Path(name),
                    _ => Place::Query(name),
                };
                if constrained(&p["schema"]) {
                    sites.push(site(place, "", p["schema"].clone()));
                }
            }
            let content = op["requestBody"]["content"].as_object();
            let json_body = content
                .into_iter()
                .flatten()
                .find(|(media, _)| media.starts_with("application/json"));
            if let Some((_, media)) = json_body {
                let body = &media["schema"];
                let mut found = Vec::new();
                walk(doc, body, "", "", &mut found);
                for (at, component, schema) in found {
                    sites.push(site(Place::Body(at), &component, schema));
                }
            }
        }
    }
    sites
}

/// The ids the operations act on.
struct Ids {
    issue: i64,
    subscriber: i64,
    webhook: i64,
    sequence: i64,
}

/// A valid body for each request schema, and the operation that exercises its fields: the
/// same schema in other operations (an issue's fields in `updateIssue`, the audience in
/// `sendIssueNow`) is the same rule, checked once.
fn exercised_by(component: &str, owner: &Owner) -> Option<(&'static str, Value)> {
    let article = json!({"title": "A", "url": "https://a.example/", "summarized_article": "s"});
    let issue = json!({"issue": {"subject": "Rules", "content_markdown": "x",
        "scheduled_for": "2099-01-05T09:00:00Z", "articles": [article],
        "audience": {"tags": ["known"], "exclude_tags": ["other"]}}});
    Some(match component {
        // A send's tags are the audience's `Tag` fields: the same rule, checked on create.
        "IssueBody" | "IssueFields" | "ArticleBody" | "AudienceBody" | "SendNowBody" => {
            ("createIssue", issue)
        }
        "CreateBody" => (
            "createSubscriber",
            json!({"email": unique_email("rule"), "name": "N", "tags": ["t"]}),
        ),
        "SubscriberFields" => (
            "createSubscriber",
            json!({"subscriber": {"email": unique_email("rule"), "name": "N", "tags": ["t"]}}),
        ),
        "UpdateBody" | "UpdateFields" => (
            "updateSubscriber",
            json!({"subscriber": {"name": "N", "status": "active"}}),
        ),
        "TagBody" => ("addSubscriberTag", json!({"tag": "t"})),
        // Each created field is deleted again (`call`), so the same name serves every value.
        // A change's name and options are the same rules, checked on create.
        "NewFieldBody" | "NewFieldFields" | "FieldChangesBody" | "FieldChanges" => (
            "createField",
            json!({"field": {"name": "rule_field", "type": "choice", "options": ["a"]}}),
        ),
        "MembershipBody" | "MembershipFields" => (
            "setSubscriberMembership",
            json!({"membership": {"status": "comped", "until": null}}),
        ),
        "BulkBody" => (
            "bulkCreateSubscribers",
            json!({"subscribers": [{"email": "bulk@example.com"}]}),
        ),
        "SendTestBody" => ("sendIssueTest", json!({"emails": [owner.email]})),
        // A resend's subject is an issue's, its hours the same bound whatever the issue:
        // checked on an issue that is not sent (the rules come before the state).
        "ResendUnopenedBody" => (
            "resendIssueUnopened",
            json!({"subject": "Again", "after_hours": 48}),
        ),
        "WebhookCreateBody" => (
            "createWebhookSubscription",
            json!({"url": "https://127.0.0.1/hook", "events": ["issue.sent"]}),
        ),
        "WebhookUpdateBody" => (
            "updateWebhookSubscription",
            json!({"url": "https://127.0.0.1/hook", "events": ["issue.sent"]}),
        ),
        "NewsletterPatch" => ("updateNewsletter", json!({"name": "Rules Rag"})),
        "RelayPatch" | "RelayLimitsPatch" => (
            "updateNewsletter",
            json!({"relay": {"host": "smtp.rules.example", "port": 587, "tls_mode": "starttls",
                "username": "rules", "password": "p",
                "limits": {"per_second": 1, "per_hour": 1, "per_day": 1}}}),
        ),
        "WarmUpPatch" => (
            "updateNewsletter",
            json!({"warmup": {"first_day_cap": 50, "factor": 2}}),
        ),
        // Each created sequence is deleted again (`call`); a change's fields are the same
        // rules, checked on create. The tag is there for a `tag_added` trigger and the hour
        // for a weekday (rules between fields, which the descriptions state).
        "NewSequenceBody" | "SequenceChangesBody" | "SequenceFields" | "StepFields" => (
            "createSequence",
            json!({"sequence": {"name": "Rules", "trigger": "confirmed", "trigger_tag": "t",
                "exit_tag_added": "u", "exit_tag_removed": "v", "status": "live",
                "steps": [{"subject": "S", "body_markdown": "B", "delay_amount": 1,
                    "delay_unit": "days", "at_hour": 9}]}}),
        ),
        "BounceReport" => (
            "reportBounce",
            json!({"email": "kept@example.com", "reason": "550 5.1.1 user unknown"}),
        ),
        _ => return None,
    })
}

/// Sets the value at `at` (`a.b[].c`) in `body`.
fn set(body: &mut Value, at: &str, value: Value) {
    let mut here = body;
    let steps: Vec<&str> = at.split('.').collect();
    for (i, step) in steps.iter().enumerate() {
        let (name, element) = match step.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (*step, false),
        };
        let last = i + 1 == steps.len();
        if last && !element {
            here[name] = value;
            return;
        }
        here = &mut here[name];
        if element {
            if last {
                here[0] = value;
                return;
            }
            here = &mut here[0];
        }
    }
}

/// `text` for a query string.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A value of `n` characters the schema's format and pattern allow (lengths are what is tried).
fn of_length(schema: &Value, n: usize) -> String {
    match schema["format"].as_str() {
        Some("email") if n > 70 => {
            // 64 local characters, then labels of 62 joined by dots, ending ".com".
            let labels = "b".repeat(62) + ".";
            let mut domain: String = labels.repeat(5).chars().take(n - 65 - 4).collect();
            if domain.ends_with('.') {
                domain.pop();
                domain.push('b');
            }
            format!("{}@{domain}.com", "a".repeat(64))
        }
        Some("email") => format!("{}@example.com", "a".repeat(n - 12)),
        Some("uri") => format!("https://127.0.0.1/{}", "x".repeat(n - 18)),
        _ if schema["pattern"]
            .as_str()
            .is_some_and(|p| p.contains("[hH][tT]")) =>
        {
            format!("https://127.0.0.1/{}", "x".repeat(n - 18))
        }
        // A host name (a relay's): labels of at most 63 characters joined by dots.
        _ if schema["pattern"]
            .as_str()
            .is_some_and(|p| p.contains("{0,61}")) =>
        {
            let mut name: String = format!("{}.", "x".repeat(62)).repeat(n / 63 + 1);
            name.truncate(n);
            if name.ends_with('.') {
                name.pop();
                name.insert(0, 'x');
            }
            name
        }
        _ => "x".repeat(n),
    }
}

/// Values that try the edges of the text rules.
const PROBES: &[&str] = &[
    "x",
    " x ",
    "",
    " ",
    "\t",
    "x y",
    "x\ty",
    "x\ny",
    "x\r\ny",
    "\ny\n",
    "x\u{1}y",
    "\u{1b}[31m",
    "\u{85}x",
    "x\u{a0}",
    "x\u{7f}",
    "\u{202e}💥",
    "Zoë «x»",
    "\"x\"",
    "<x>",
    "#a0B1c2",
    " #a0b1c2\n",
    "#abc",
    "red",
    "https://127.0.0.1/logo.png",
    " https://127.0.0.1/logo.png ",
    "http://127.0.0.1/logo.png",
    "ftp://127.0.0.1/x",
    "1.5",
    "4.99",
    "0.5",
    "1.5.6",
];

struct Run<'a> {
    owner: &'a Owner,
    ids: Ids,
    problems: Vec<String>,
}

impl Run<'_> {
    /// Calls the site's operation with `value` in its place (`None`: left out).
    fn call(&mut self, site: &Site, value: Option<Value>) -> Resp {
        let mut path = site.path.clone();
        let id = match &site.path {
            p if p.starts_with("/issues") => self.ids.issue,
            p if p.starts_with("/subscribers") => self.ids.subscriber,
            p if p.starts_with("/sequences") => self.ids.sequence,
            _ => self.ids.webhook,
        };
        // The value in its own place, the kept ids in the others (a reader of a sequence is
        // the kept subscriber).
        let mut fill = vec![("id", id.to_string())];
        fill.push(("subscriber_id", self.ids.subscriber.to_string()));
        for (name, default) in fill {
            let text = match (&site.place, &value) {
                (Place::Path(at), Some(v)) if at == name => {
                    v.as_str().map_or(v.to_string(), str::to_string)
                }
                _ => default,
            };
            path = path.replace(&format!("{{{name}}}"), &encoded(&text));
        }
        if let (Place::Query(name), Some(v)) = (&site.place, &value) {
            let text = v.as_str().map_or(v.to_string(), str::to_string);
            path = format!("{path}?{name}={}", encoded(&text));
        } else if site.operation == "removeSubscriberTag" {
            path = format!("{path}?tag=t");
        }
        let body = match (&site.place, exercised_by(&site.component, self.owner)) {
            (Place::Body(at), Some((_, mut body))) => {
                if let Some(v) = value {
                    set(&mut body, at, v);
                }
                Some(body)
            }
            _ => match site.operation.as_str() {
                "updateIssue" => Some(json!({"issue": {"subject": "Still"}})),
                "updateSubscriber" => Some(json!({"subscriber": {"name": "N"}})),
                "updateField" => Some(json!({"field": {"name": "renamed"}})),
                "updateSequence" => Some(json!({"sequence": {"name": "Still"}})),
                "addSequenceSubscriber" => Some(json!({"subscriber_id": self.ids.subscriber})),
                "setSubscriberMembership" => Some(json!({"membership": {"status": "free"}})),
                "addSubscriberTag" => Some(json!({"tag": "t"})),
                "sendIssueTest" => Some(json!({"emails": [self.owner.email]})),
                "resendIssueUnopened" => Some(json!({"subject": "Again", "after_hours": 48})),
                "updateWebhookSubscription" => Some(json!({"enabled": true})),
                _ => None,
            },
        };
        if let Some(tags) = audience_tags(site, body.as_ref()) {
            // An audience names only tags some subscriber carries.
            let email = unique_email("carrier");
            self.owner
                .post("/subscribers", &json!({"email": email, "tags": tags}));
        }
        let resp = self.owner.api(&site.method, &path, body.as_ref());
        if site.operation == "createField" && resp.status == 201 {
            let id = resp.json()["id"].as_i64().unwrap();
            self.owner.delete(&format!("/fields/{id}")).expect(204);
        }
        if site.operation == "createSequence" && resp.status == 201 {
            let id = resp.json()["id"].as_i64().unwrap();
            self.owner.delete(&format!("/sequences/{id}")).expect(204);
        }
        if site.operation == "createWebhookSubscription" && resp.status == 201 {
            let id = resp.json()["id"].as_i64().unwrap();
            self.owner
                .delete(&format!("/webhook_subscriptions/{id}"))
                .expect(204);
        }
        resp
    }

    /// The server takes `value` at the site, as the document says it must.
    fn taken(&mut self, site: &Site, value: Value, why: &str) {
        let resp = self.call(site, Some(value.clone()));
        // A well-formed address that no subscriber has is a bounce of nobody: 404, the value
        // itself taken.
        let nobody = site.operation == "reportBounce" && resp.status == 404;
        // A resend checks its body before the issue's state (the issue here is not sent, and
        // an issue is resent once): `invalid_state` is the value itself taken.
        let unsent = site.operation == "resendIssueUnopened"
            && resp.status == 422
            && resp.error_code(422) == "invalid_state";
        let ok = (200..300).contains(&resp.status) || nobody || unsent;
        self.agree(ok, site, &value, &format!("allows it ({why})"), &resp);
    }

    /// The server refuses `value` at the site in the project's words, as the document says.
    fn refused(&mut self, site: &Site, value: Value, why: &str) {
        let resp = self.call(site, Some(value.clone()));
        let expected = if matches!(site.place, Place::Path(_)) {
            404
        } else {
            422
        };
        let ok = resp.status == expected
            && ["validation_error", "invalid_email", "not_found"]
                .contains(&resp.error_code(expected).as_str());
        self.agree(ok, site, &value, &format!("forbids it ({why})"), &resp);
    }

    fn agree(&mut self, ok: bool, site: &Site, value: &Value, document: &str, resp: &Resp) {
        if !ok {
            self.problems.push(format!(
                "{} {:?} = {value}: the document {document} but the server answered {} {}",
                site.operation,
                site.place,
                resp.status,
                resp.body.chars().take(200).collect::<String>()
            ));
        }
    }
}

/// The tags of an audience the request would name, when it names one.
fn audience_tags(site: &Site, body: Option<&Value>) -> Option<Vec<Value>> {
    let Place::Body(at) = &site.place else {
        return None;
    };
    if !at.contains("tags") || !site.component.contains("Audience") {
        return None;
    }
    let audience = &body?["issue"]["audience"];
    let mut tags: Vec<Value> = Vec::new();
    for list in ["tags", "exclude_tags"] {
        tags.extend(audience[list].as_array().cloned().unwrap_or_default());
    }
    Some(tags)
}

fn text_length(value: &str) -> usize {
    value.chars().count()
}

#[test]
fn api_schema_rules_are_the_rules_the_server_enforces() {
    let app = spawn_app_with(&[
        "--rate-limit-get",
        "100000",
        "--rate-limit-write",
        "100000",
        "--rate-limit-bulk",
        "100000",
        "--allow-private-webhooks",
    ]);
    let owner = onboard_paid(&app, "Rules Rag");
    let doc: Value = app.client().get("/api/v1/openapi.json").expect(200).json();
    owner
        .post(
            "/subscribers",
            &json!({"email": "carrier@example.com", "tags": ["known", "other", "t"]}),
        )
        .expect(201);
    let issue = owner
        .post(
            "/issues",
            &json!({"issue": {"subject": "Kept", "content_markdown": "x"}}),
        )
        .json();
    let subscriber = owner
        .post("/subscribers", &json!({"email": "kept@example.com"}))
        .json();
    let webhook = owner
        .post(
            "/webhook_subscriptions",
            &json!({"url": "https://127.0.0.1/kept", "events": ["issue.sent"]}),
        )
        .json();
    let sequence = owner
        .post(
            "/sequences",
            &json!({"sequence": {"name": "Kept", "trigger": "manual",
                "steps": [{"subject": "S", "body_markdown": "B", "delay_amount": 0, "delay_unit": "days"}]}}),
        )
        .json();
    let mut run = Run {
        owner: &owner,
        ids: Ids {
            issue: issue["id"].as_i64().unwrap(),
            subscriber: subscriber["id"].as_i64().unwrap(),
            webhook: webhook["id"].as_i64().unwrap(),
            sequence: sequence["id"].as_i64().unwrap(),
        },
        problems: Vec::new(),
    };

    let all = sites(&doc);
    let mut tried = 0;
    for site in &all {
        if let Place::Body(_) = &site.place {
            match exercised_by(&site.component, &owner) {
                None => {
                    run.problems.push(format!(
                        "{}: request schema {} has constrained fields and no operation here exercises them (add it to exercised_by)",
                        site.operation, site.component
                    ));
                    continue;
                }
                Some((via, _)) if via != site.operation => continue,
                Some(_) => {}
            }
        }
        tried += 1;
        try_site(&mut run, site);
    }
    assert!(tried >= 50, "only {tried} constrained places were tried");
    // Those the issue names, among them.
    for (operation, place) in [
        ("listIssues", Place::Query("page".into())),
        ("listSubscribers", Place::Query("per_page".into())),
        ("getIssue", Place::Path("id".into())),
        ("addSubscriberTag", Place::Body("tag".into())),
        ("createSubscriber", Place::Body("subscriber.email".into())),
        ("updateSubscriber", Place::Body("subscriber.status".into())),
        ("createWebhookSubscription", Place::Body("events[]".into())),
    ] {
        assert!(
            all.iter()
                .any(|s| s.operation == operation && s.place == place),
            "{operation} {place:?} states no rule"
        );
    }
    assert!(
        run.problems.is_empty(),
        "the document and the server disagree:\n{}",
        run.problems.join("\n")
    );
}

/// Tries one site: its bounds, its enum, its pattern, its integer range, its list sizes.
fn try_site(run: &mut Run, site: &Site) {
    let s = &site.schema;
    let max = s["maxLength"].as_u64().map(|n| n as usize);
    let min = s["minLength"].as_u64().unwrap_or(0) as usize;
    if let Some(max) = max {
        run.taken(site, json!(of_length(s, max)), "maxLength");
        run.refused(site, json!(of_length(s, max + 1)), "maxLength + 1");
    }
    if min > 0 {
        run.refused(site, json!(""), "minLength");
    }
    if let Some(values) = s["enum"].as_array() {
        for value in values {
            run.taken(site, value.clone(), "enum");
        }
        run.refused(site, json!("nonsense"), "not in enum");
    }
    if s["nullable"] == json!(true) {
        run.taken(site, Value::Null, "nullable");
    }
    if let Some(pattern) = s["pattern"].as_str() {
        let regex = Regex::new(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
        // With a format (e-mail, URI) the pattern is not the whole rule: a value it refuses
        // is refused, one it allows may still be refused for its format.
        let whole = s["format"].is_null();
        for probe in PROBES {
            let length = text_length(probe);
            if length < min || max.is_some_and(|m| length > m) {
                continue;
            }
            if regex.is_match(probe) {
                if whole {
                    run.taken(site, json!(probe), "pattern");
                }
            } else {
                run.refused(site, json!(probe), "pattern");
            }
        }
    }
    if s["type"] == "integer" {
        let minimum = s["minimum"].as_f64().expect("integers state a minimum") as i64;
        match site.place {
            Place::Path(_) => {
                if site.method == "GET" {
                    run.taken(site, json!(site_id(run, site)), "an existing id");
                }
            }
            // A body states JSON numbers; a parameter is text.
            Place::Body(_) => run.taken(site, json!(minimum), "minimum"),
            _ => run.taken(site, json!(minimum.to_string()), "minimum"),
        }
        match site.place {
            Place::Body(_) => run.refused(site, json!(minimum - 1), "below minimum"),
            _ => run.refused(site, json!((minimum - 1).to_string()), "below minimum"),
        }
        run.refused(site, json!("abc"), "not an integer");
        run.refused(site, json!("1.5"), "not an integer");
    }
    let min_items = s["minItems"].as_u64().map(|n| n as usize);
    let max_items = s["maxItems"].as_u64().map(|n| n as usize);
    if min_items.is_some() || max_items.is_some() {
        let Place::Body(at) = &site.place else {
            panic!("a list outside a body: {site:?}")
        };
        let (_, base) = exercised_by(&site.component, run.owner).unwrap();
        let element = at
            .split('.')
            .fold(&base, |v, step| &v[step.trim_end_matches("[]")])[0]
            .clone();
        let list = |n: usize| Value::Array(vec![element.clone(); n]);
        if let Some(n) = min_items {
            run.taken(site, list(n), "minItems");
            run.refused(site, list(n - 1), "minItems - 1");
        }
        if let Some(n) = max_items {
            run.taken(site, list(n), "maxItems");
            run.refused(site, list(n + 1), "maxItems + 1");
        }
    }
}

fn site_id(run: &Run, site: &Site) -> i64 {
    match &site.path {
        p if p.starts_with("/issues") => run.ids.issue,
        p if p.starts_with("/subscribers") => run.ids.subscriber,
        p if p.starts_with("/sequences") => run.ids.sequence,
        _ => run.ids.webhook,
    }
}
