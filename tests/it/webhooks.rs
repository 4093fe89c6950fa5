//! Webhooks end to end: subscriptions over the API, signed deliveries to a real
//! receiver, retries with the same delivery id, auto-disable, rotation, limits, the SSRF guard,
//! and deliveries surviving a crash.

use std::time::Duration;

use crate::support::receiver::{Hook, Receiver};
use crate::support::*;

const ALL_EVENTS: [&str; 9] = [
    "subscriber.created",
    "subscriber.updated",
    "subscriber.deleted",
    "issue.sent",
    "issue.published",
    "email.opened",
    "email.clicked",
    "email.bounced",
    "email.unsubscribed",
];

fn subscribe(owner: &Owner, url: &str, events: &[&str]) -> (i64, String) {
    let resp = owner.post(
        "/webhook_subscriptions",
        &json!({"url": url, "events": events}),
    );
    resp.expect(201);
    let body = resp.json();
    for field in ["id", "url", "events", "enabled", "secret", "created_at"] {
        assert!(!body[field].is_null(), "{field} missing in {body}");
    }
    assert_eq!(body["enabled"], true);
    (
        body["id"].as_i64().unwrap(),
        body["secret"].as_str().unwrap().to_string(),
    )
}

fn assert_envelope(hook: &Hook, owner: &Owner, secret: &str) -> Value {
    assert!(
        hook.verify(secret),
        "signatures verify for {}",
        hook.event()
    );
    assert_eq!(
        hook.header("X-Webhook-Delivery-Id"),
        hook.header("webhook-id")
    );
    let ts: i64 = hook.header("X-Webhook-Timestamp").parse().unwrap();
    assert!((ts - jiff::Timestamp::now().as_second()).abs() < 120);
    assert_eq!(hook.header("content-type"), "application/json");
    let body = hook.json();
    assert_eq!(body["event"], hook.event());
    assert!(body["timestamp"].as_str().unwrap().ends_with('Z'));
    assert_eq!(body["newsletter"]["id"], owner.newsletter_id);
    assert_eq!(body["newsletter"]["subdomain"], owner.subdomain.as_str());
    assert!(body["newsletter"]["name"].is_string());
    body["data"].clone()
}

fn has_fields(data: &Value, fields: &[&str]) {
    for f in fields {
        assert!(data.get(*f).is_some(), "{f} missing in {data}");
    }
}

#[test]
fn every_event_arrives_signed_with_its_documented_fields() {
    let app = spawn_app_with(&["--allow-private-webhooks", "--send-retry-base-ms", "100"]);
    let owner = onboard_paid(&app, "Hooked Weekly");
    let receiver = Receiver::start();
    let (_, secret) = subscribe(&owner, &receiver.url, &ALL_EVENTS);
    let subscriber_fields = [
        "subscription_id",
        "email",
        "name",
        "status",
        "subscribed_at",
        "tags",
    ];

    // subscriber.created / updated / deleted
    let created = owner.post(
        "/subscribers",
        &json!({"email": "ada@example.com", "name": "Ada", "tags": ["vip"]}),
    );
    created.expect(201);
    let sid = created.json()["id"].as_i64().unwrap();
    owner
        .patch(
            &format!("/subscribers/{sid}"),
            &json!({"subscriber": {"name": "Ada L."}}),
        )
        .expect(200);
    let data = assert_envelope(
        &receiver.wait_for("subscriber.created", 1)[0],
        &owner,
        &secret,
    );
    has_fields(&data, &subscriber_fields);
    assert_eq!(
        (data["subscription_id"].as_i64(), data["email"].as_str()),
        (Some(sid), Some("ada@example.com"))
    );
    assert_eq!(data["tags"], json!(["vip"]));
    let data = assert_envelope(
        &receiver.wait_for("subscriber.updated", 1)[0],
        &owner,
        &secret,
    );
    has_fields(&data, &subscriber_fields);
    assert_eq!(data["name"], "Ada L.");
    let doomed = owner
        .post("/subscribers", &json!({"email": "gone@example.com"}))
        .json()["id"]
        .as_i64()
        .unwrap();
    owner.delete(&format!("/subscribers/{doomed}")).expect(204);
    let data = assert_envelope(
        &receiver.wait_for("subscriber.deleted", 1)[0],
        &owner,
        &secret,
    );
    has_fields(&data, &subscriber_fields);
    assert_eq!(
        (data["email"].as_str(), data["status"].as_str()),
        (Some("gone@example.com"), Some("unsubscribed"))
    );

    // issue.sent, email.bounced (a 550 at send time), then issue.published.
    app.smtp.set_rules(Rules {
        permanent: vec!["bounce@example.com".into()],
        ..Rules::default()
    });
    owner
        .post("/subscribers", &json!({"email": "bounce@example.com"}))
        .expect(201);
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Hooks and lines", "content_markdown": "Read [this](https://example.com/read).", "status": "approved"}}),
    );
    issue.expect(201);
    let iid = issue.json()["id"].as_i64().unwrap();
    owner
        .post(&format!("/issues/{iid}/send_now"), &json!({}))
        .expect(200);
    let data = assert_envelope(&receiver.wait_for("issue.sent", 1)[0], &owner, &secret);
    has_fields(
        &data,
        &[
            "issue_id",
            "subject",
            "path",
            "status",
            "sent_at",
            "published_at",
            "article_count",
        ],
    );
    assert_eq!(
        (data["issue_id"].as_i64(), data["status"].as_str()),
        (Some(iid), Some("sent"))
    );
    assert!(data["published_at"].is_null());
    let email_fields = [
        "delivery_id",
        "issue_id",
        "email",
        "opened_at",
        "clicked_at",
    ];
    let data = assert_envelope(&receiver.wait_for("email.bounced", 1)[0], &owner, &secret);
    has_fields(&data, &email_fields);
    assert_eq!(data["email"], "bounce@example.com");
    owner
        .post(&format!("/issues/{iid}/publish"), &json!({}))
        .expect(200);
    owner
        .post(&format!("/issues/{iid}/publish"), &json!({}))
        .expect(200);
    let data = assert_envelope(&receiver.wait_for("issue.published", 1)[0], &owner, &secret);
    assert_eq!(data["status"], "published");
    assert!(data["published_at"].is_string());

    // email.opened, email.clicked, email.unsubscribed from Ada's copy.
    let mail = app.smtp.wait_for_message_to("ada@example.com", 1);
    let html = mail.html();
    let site = app.site_client(&owner.subdomain);
    let path_of = |url: String| format!("/{}", url.splitn(4, '/').nth(3).unwrap());
    let pixel = link_containing(&html, "/o/").expect("an open pixel");
    site.get(&path_of(pixel)).expect(200);
    let click = link_containing(&html, "/c/").expect("a tracked link");
    let resp = site.get(&path_of(click));
    assert!(resp.status == 302 || resp.status == 303, "{}", resp.status);
    let unsubscribe = link_containing(&mail.text(), "/u/").expect("an unsubscribe link");
    site.post_form(&path_of(unsubscribe), &[("List-Unsubscribe", "One-Click")]);
    let data = assert_envelope(&receiver.wait_for("email.opened", 1)[0], &owner, &secret);
    has_fields(&data, &email_fields);
    assert!(data["opened_at"].is_string());
    let data = assert_envelope(&receiver.wait_for("email.clicked", 1)[0], &owner, &secret);
    has_fields(
        &data,
        &[
            "delivery_id",
            "issue_id",
            "email",
            "opened_at",
            "clicked_at",
            "clicked_url",
        ],
    );
    assert_eq!(data["clicked_url"], "https://example.com/read");
    let data = assert_envelope(
        &receiver.wait_for("email.unsubscribed", 1)[0],
        &owner,
        &secret,
    );
    assert_eq!(data["email"], "ada@example.com");

    // Every event once, each delivery with its own id.
    let hooks = receiver.hooks();
    let mut ids: Vec<&str> = hooks
        .iter()
        .map(|h| h.header("X-Webhook-Delivery-Id"))
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), hooks.len());
    assert_eq!(
        hooks
            .iter()
            .filter(|h| h.event() == "issue.published")
            .count(),
        1
    );
}

#[test]
fn failed_attempts_are_retried_with_the_same_id_then_fail_and_disable() {
    let app = spawn_app_with(&["--allow-private-webhooks", "--webhook-retry-base-ms", "5"]);
    let owner = onboard(&app, "Retry Review");
    let receiver = Receiver::start();
    let (id, secret) = subscribe(&owner, &receiver.url, &["subscriber.created"]);

    // 500, then 200: one retry with the same delivery id, a new timestamp allowed.
    receiver.script(&[500]);
    owner
        .post("/subscribers", &json!({"email": "one@example.com"}))
        .expect(201);
    let hooks = receiver.wait_for("subscriber.created", 2);
    assert_eq!(
        hooks[0].header("X-Webhook-Delivery-Id"),
        hooks[1].header("X-Webhook-Delivery-Id")
    );
    assert!(hooks.iter().all(|h| h.verify(&secret)));
    assert_eq!(hooks[0].body, hooks[1].body, "the same bytes every attempt");

    // Always failing: 1 + 3 attempts per delivery, then failed; 10 failed deliveries disable.
    receiver.always(503);
    for n in 0..10 {
        owner
            .post(
                "/subscribers",
                &json!({"email": format!("fail{n}@example.com")}),
            )
            .expect(201);
    }
    wait_for(
        "the subscription to be disabled",
        Duration::from_secs(30),
        || {
            let list = owner.get("/webhook_subscriptions").json();
            (list["webhook_subscriptions"][0]["enabled"] == false).then_some(())
        },
    );
    let failed = app
        .count("SELECT count(*) FROM webhook_deliveries WHERE state = 'failed' AND attempts = 4");
    assert_eq!(failed, 10);
    assert_eq!(receiver.hooks().len(), 2 + 40);
    // Disabled: nothing more is sent. Deliveries are queued in the transaction of the change,
    // so none queued now means none will ever go; and none is left to try.
    let queued = app.count("SELECT count(*) FROM webhook_deliveries");
    owner
        .post("/subscribers", &json!({"email": "quiet@example.com"}))
        .expect(201);
    assert_eq!(app.count("SELECT count(*) FROM webhook_deliveries"), queued);
    assert_eq!(
        app.count(
            "SELECT count(*) FROM webhook_deliveries WHERE state NOT IN ('delivered', 'failed')"
        ),
        0
    );
    assert_eq!(receiver.hooks().len(), 42);

    // PATCH re-enables; deliveries flow again.
    receiver.always(200);
    let resp = owner.patch(
        &format!("/webhook_subscriptions/{id}"),
        &json!({"enabled": true}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["enabled"], true);
    assert!(
        resp.json().get("secret").is_none(),
        "PATCH never shows the secret"
    );
    owner
        .post("/subscribers", &json!({"email": "back@example.com"}))
        .expect(201);
    let last = receiver.wait_for("subscriber.created", 43).pop().unwrap();
    assert_eq!(last.json()["data"]["email"], "back@example.com");

    // A 410 disables at once.
    receiver.always(410);
    owner
        .post("/subscribers", &json!({"email": "gone410@example.com"}))
        .expect(201);
    wait_for("410 to disable", Duration::from_secs(10), || {
        (owner.get("/webhook_subscriptions").json()["webhook_subscriptions"][0]["enabled"] == false)
            .then_some(())
    });
    assert_eq!(receiver.hooks().len(), 44, "no retry after 410");
}

#[test]
fn rotation_limits_validation_and_the_ssrf_guard() {
    let app = spawn_app_with(&["--allow-private-webhooks"]);
    let owner = onboard(&app, "Rotor");
    let receiver = Receiver::start();
    let (id, old) = subscribe(&owner, &receiver.url, &["subscriber.created"]);

    let list = owner.get("/webhook_subscriptions");
    list.expect(200);
    let item = &list.json()["webhook_subscriptions"][0];
    assert_eq!(item["id"], id);
    assert!(item.get("secret").is_none(), "secrets are never listed");

    let rotated = owner.post(
        &format!("/webhook_subscriptions/{id}/rotate_secret"),
        &json!({}),
    );
    rotated.expect(200);
    let new = rotated.json()["secret"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    owner
        .post("/subscribers", &json!({"email": "rot@example.com"}))
        .expect(201);
    let hook = receiver.wait_for("subscriber.created", 1).pop().unwrap();
    assert!(hook.verify(&new));
    assert!(!hook.verify(&old), "the old secret no longer verifies");

    // Validation: 422 with details, nothing stored.
    for body in [
        json!({"url": "ftp://example.com/x", "events": ["issue.sent"]}),
        json!({"url": "not a url", "events": ["issue.sent"]}),
        json!({"url": receiver.url, "events": []}),
        json!({"url": receiver.url, "events": ["issue.exploded"]}),
        json!({"url": receiver.url}),
        json!({"events": ["issue.sent"]}),
    ] {
        let resp = owner.post("/webhook_subscriptions", &body);
        assert_eq!(resp.status, 422, "{body}: {}", resp.body);
    }
    assert_eq!(app.count("SELECT count(*) FROM webhook_subscriptions"), 1);

    // At most 16: the 17th is refused.
    for _ in 1..16 {
        subscribe(&owner, &receiver.url, &["issue.sent"]);
    }
    let resp = owner.post(
        "/webhook_subscriptions",
        &json!({"url": receiver.url, "events": ["issue.sent"]}),
    );
    assert_eq!(resp.error_code(422), "limit_reached");

    // PATCH and DELETE; unknown ids are 404.
    let resp = owner.patch(
        &format!("/webhook_subscriptions/{id}"),
        &json!({"events": ["issue.sent", "issue.published"]}),
    );
    resp.expect(200);
    assert_eq!(
        resp.json()["events"],
        json!(["issue.sent", "issue.published"])
    );
    owner
        .delete(&format!("/webhook_subscriptions/{id}"))
        .expect(204);
    assert_eq!(
        owner
            .delete(&format!("/webhook_subscriptions/{id}"))
            .error_code(404),
        "not_found"
    );
    assert_eq!(
        owner
            .patch("/webhook_subscriptions/999999", &json!({"enabled": true}))
            .error_code(404),
        "not_found"
    );

    // Without --allow-private-webhooks, loopback and private URLs are refused.
    let strict = spawn_app();
    let other = onboard(&strict, "Strict");
    for url in [
        receiver.url.as_str(),
        "http://localhost/x",
        "http://10.0.0.8/x",
        "http://[::1]/x",
        "http://169.254.169.254/latest",
    ] {
        let resp = other.post(
            "/webhook_subscriptions",
            &json!({"url": url, "events": ["issue.sent"]}),
        );
        assert_eq!(resp.error_code(422), "validation_error", "{url}");
        assert!(resp.json()["error"]["details"]["url"].is_array());
    }
    assert_eq!(
        strict.count("SELECT count(*) FROM webhook_subscriptions"),
        0
    );
}

#[test]
fn events_recorded_before_a_crash_are_delivered_after_restart() {
    let mut app = spawn_app_with(&["--allow-private-webhooks"]);
    let owner = onboard(&app, "Crash Courier");
    let receiver = Receiver::start();
    let (_, secret) = subscribe(&owner, &receiver.url, &["subscriber.created"]);
    // Now the job runner polls rarely, so deliveries are recorded but not attempted.
    app.set_args(&["--allow-private-webhooks", "--job-poll-ms", "600000"]);
    app.restart();
    for n in 0..5 {
        owner
            .post(
                "/subscribers",
                &json!({"email": format!("crash{n}@example.com")}),
            )
            .expect(201);
    }
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'"),
        5
    );
    app.kill();
    assert!(receiver.hooks().is_empty());

    app.set_args(&["--allow-private-webhooks"]);
    app.restart();
    let hooks = receiver.wait_for("subscriber.created", 5);
    assert!(hooks.iter().all(|h| h.verify(&secret)));
    let mut emails: Vec<String> = hooks
        .iter()
        .map(|h| h.json()["data"]["email"].as_str().unwrap().to_string())
        .collect();
    emails.sort();
    assert_eq!(
        emails,
        (0..5)
            .map(|n| format!("crash{n}@example.com"))
            .collect::<Vec<_>>()
    );
    // Once every delivery job is finished, nothing more can arrive.
    wait_for_delivery_jobs_done(&app);
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'"),
        5
    );
    assert_eq!(receiver.hooks().len(), 5, "each exactly once");
}

#[test]
fn dashboard_shows_the_log_sends_test_events_and_redelivers() {
    let app = spawn_app_with(&["--allow-private-webhooks", "--webhook-retry-base-ms", "5"]);
    let owner = onboard(&app, "Dashboard Hooks");
    let receiver = Receiver::start();
    let (sid, secret) = subscribe(&owner, &receiver.url, &["subscriber.created"]);
    receiver.always(500);
    owner
        .post("/subscribers", &json!({"email": "logged@example.com"}))
        .expect(201);
    wait_for("the delivery to fail", Duration::from_secs(10), || {
        (app.count("SELECT count(*) FROM webhook_deliveries WHERE state = 'failed'") == 1)
            .then_some(())
    });
    let page_path = format!("/newsletters/{}/webhooks", owner.newsletter_id);
    let page = owner.client.get(&page_path);
    page.expect(200);
    for text in [
        receiver.url.as_str(),
        "subscriber.created",
        "failed",
        "500",
        "receiver answered 500",
        "Failed deliveries in a row: 1",
    ] {
        assert!(page.body.contains(text), "{text:?} on the webhooks page");
    }
    assert!(
        owner
            .client
            .get(&format!("/newsletters/{}", owner.newsletter_id))
            .body
            .contains(&page_path)
    );

    // A test event of the chosen type to the chosen subscription.
    receiver.always(200);
    let resp = owner.client.submit(
        &page_path,
        &format!("{page_path}/test"),
        &[
            ("subscription_id", &sid.to_string()),
            ("event", "email.clicked"),
        ],
    );
    assert_eq!(resp.redirect(), page_path);
    let hook = receiver.wait_for("email.clicked", 1).pop().unwrap();
    assert!(hook.verify(&secret));
    let data = hook.json()["data"].clone();
    assert_eq!(data["test"], true);
    has_fields(
        &data,
        &[
            "delivery_id",
            "issue_id",
            "email",
            "opened_at",
            "clicked_at",
            "clicked_url",
        ],
    );

    // Redeliver the failed one: the same delivery id, acknowledged this time.
    let failed_id: i64 = app
        .db()
        .query_row(
            "SELECT id FROM webhook_deliveries WHERE state = 'failed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let first = receiver.hooks()[0]
        .header("X-Webhook-Delivery-Id")
        .to_string();
    let resp = owner.client.submit(
        &page_path,
        &format!("{page_path}/deliveries/{failed_id}/redeliver"),
        &[],
    );
    assert_eq!(resp.redirect(), page_path);
    wait_for("the redelivery", Duration::from_secs(10), || {
        let hooks = receiver.hooks();
        let last = hooks.last()?;
        (last.event() == "subscriber.created" && last.header("X-Webhook-Delivery-Id") == first)
            .then_some(())
    });
    // The receiver has its answer before the worker records it: wait for the record.
    wait_for("the redelivery recorded", Duration::from_secs(10), || {
        let delivered = format!(
            "SELECT count(*) FROM webhook_deliveries WHERE id = {failed_id} AND state = 'delivered'"
        );
        (app.count(&delivered) == 1).then_some(())
    });

    // Another user sees none of it.
    let stranger = app.client();
    sign_up_confirmed(&app, &stranger, &unique_email("stranger"));
    stranger.get(&page_path).expect(404);
    let token = stranger.get("/newsletters/new").csrf_token();
    let resp = stranger.post_form(
        &format!("{page_path}/test"),
        &[
            ("authenticity_token", &token),
            ("subscription_id", &sid.to_string()),
            ("event", "issue.sent"),
        ],
    );
    resp.expect(404);
}

#[test]
fn redirects_are_not_followed_and_timeouts_are_retried() {
    let app = spawn_app_with(&[
        "--allow-private-webhooks",
        "--webhook-retry-base-ms",
        "200",
        "--webhook-timeout-ms",
        "300",
    ]);
    let owner = onboard(&app, "Strict Courier");
    let receiver = Receiver::start();
    let (_, secret) = subscribe(&owner, &receiver.url, &["subscriber.created"]);

    // A 302 is a failed attempt: the Location is never visited, the retry goes to the URL.
    receiver.script(&[302]);
    owner
        .post("/subscribers", &json!({"email": "moved@example.com"}))
        .expect(201);
    let hooks = receiver.wait_for("subscriber.created", 2);
    assert!(hooks.iter().all(|h| h.path == "/hook" && h.verify(&secret)));
    assert_eq!(hooks[0].header("webhook-id"), hooks[1].header("webhook-id"));
    wait_for(
        "the retry to be acknowledged",
        Duration::from_secs(10),
        || {
            (app.count("SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered' AND attempts = 2") == 1)
            .then_some(())
        },
    );

    // An answer slower than --webhook-timeout-ms fails the attempt; the retry gets through.
    receiver.delay(Duration::from_millis(1500));
    owner
        .post("/subscribers", &json!({"email": "slow@example.com"}))
        .expect(201);
    wait_for("a timed-out attempt", Duration::from_secs(10), || {
        (app.count("SELECT count(*) FROM webhook_deliveries WHERE last_error LIKE 'no answer within 300 ms%'") == 1)
            .then_some(())
    });
    receiver.delay(Duration::ZERO);
    wait_for(
        "the slow delivery to be acknowledged",
        Duration::from_secs(20),
        || {
            (app.count("SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'") == 2)
                .then_some(())
        },
    );
    assert!(
        receiver.hooks().iter().all(|h| h.path == "/hook"),
        "no redirect was followed"
    );
}

/// The port of a receiver's `http://127.0.0.1:<port>/hook`.
fn port_of(receiver: &Receiver) -> u16 {
    receiver
        .url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/hook")
        .parse()
        .unwrap()
}

/// A public address that the guard lets through but that these tests never reach: every
/// answer that carries it also carries a refused one, so no connection is made at all.
const PUBLIC: &str = "93.184.216.34";

#[test]
fn the_ssrf_guard_checks_every_address_and_connects_to_what_it_checked() {
    use crate::support::dns::{DnsServer, Rec};
    let dns = DnsServer::start();
    let app = spawn_app_with(&[
        "--dns-server",
        &dns.address(),
        "--webhook-retry-base-ms",
        "5",
    ]);
    let owner = onboard(&app, "Rebinding");
    let receiver = Receiver::start();
    let name = "hooks.rebind.test";
    let url = format!("http://{name}:{}/hook", port_of(&receiver));
    let public: std::net::IpAddr = PUBLIC.parse().unwrap();
    let loopback: std::net::IpAddr = "127.0.0.1".parse().unwrap();

    // Saved while the name answers loopback next to a public address, or an IPv6 address
    // that is loopback in NAT64 clothing: refused, naming the address.
    for records in [
        vec![Rec::Addr(public), Rec::Addr(loopback)],
        vec![Rec::Addr("64:ff9b::7f00:1".parse().unwrap())],
    ] {
        dns.set(name, &records);
        let resp = owner.post(
            "/webhook_subscriptions",
            &json!({"url": url, "events": ["subscriber.created"]}),
        );
        assert_eq!(resp.error_code(422), "validation_error");
        let reason = resp.json()["error"]["details"]["url"][0].to_string();
        assert!(reason.contains("special-purpose"), "{reason}");
    }

    // Saved while it answers only the public address; then it is rebound to answer
    // loopback as well, first and second. Each delivery resolves once, sees loopback and
    // refuses without connecting anywhere.
    dns.set(name, &[Rec::Addr(public)]);
    subscribe(&owner, &url, &["subscriber.created"]);
    for (n, records) in [[public, loopback], [loopback, public]].iter().enumerate() {
        dns.set(name, &records.map(Rec::Addr));
        owner
            .post(
                "/subscribers",
                &json!({"email": format!("rebound{n}@example.com")}),
            )
            .expect(201);
        wait_for(
            "the delivery to be refused",
            Duration::from_secs(20),
            || {
                (app.count(
                    "SELECT count(*) FROM webhook_deliveries WHERE last_error = \
                 'refused to deliver: the URL resolves to 127.0.0.1, a private or \
                 special-purpose address; webhooks may only go to public addresses'",
                ) > n as i64)
                    .then_some(())
            },
        );
    }
    assert!(receiver.hooks().is_empty(), "nothing reached the receiver");
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'"),
        0
    );
}

#[test]
fn with_allow_private_webhooks_a_name_is_resolved_through_dns_server_and_keeps_its_host() {
    use crate::support::dns::{DnsServer, Rec};
    let dns = DnsServer::start();
    let app = spawn_app_with(&["--dns-server", &dns.address(), "--allow-private-webhooks"]);
    let owner = onboard(&app, "Home Network");
    let receiver = Receiver::start();
    let name = "hooks.home.test";
    dns.set(name, &[Rec::Addr("127.0.0.1".parse().unwrap())]);
    let host = format!("{name}:{}", port_of(&receiver));
    let (_, secret) = subscribe(
        &owner,
        &format!("http://{host}/hook"),
        &["subscriber.created"],
    );
    let queries = dns.queries();
    owner
        .post("/subscribers", &json!({"email": "home@example.com"}))
        .expect(201);
    let hook = receiver.wait_for("subscriber.created", 1).pop().unwrap();
    assert!(hook.verify(&secret));
    assert_eq!(
        hook.header("host"),
        host,
        "the Host header names the URL's host"
    );
    assert!(
        dns.queries() > queries,
        "the name went through --dns-server"
    );
}

#[test]
fn events_are_kept_only_where_a_subscription_listens() {
    let app = spawn_app_with(&["--allow-private-webhooks"]);
    let quiet = onboard(&app, "Quiet Quarterly");
    let heard = onboard(&app, "Heard Herald");
    let receiver = Receiver::start();
    let (_, secret) = subscribe(&heard, &receiver.url, &["subscriber.created"]);
    for owner in [&quiet, &heard] {
        let created = owner
            .post("/subscribers", &json!({"email": "both@example.com"}))
            .json();
        // subscriber.updated: nobody listens to it.
        owner
            .post(
                &format!("/subscribers/{}/add_tag", created["id"]),
                &json!({"tag": "vip"}),
            )
            .expect(200);
        owner
            .post(
                "/subscribers/bulk_create",
                &json!({"subscribers": [{"email": "bulk@example.com", "tags": ["b", "a"]}]}),
            )
            .expect(200);
    }
    let hooks = receiver.wait_for("subscriber.created", 2);
    let mut data: Vec<Value> = hooks
        .iter()
        .map(|h| assert_envelope(h, &heard, &secret))
        .collect();
    // Two events go out on their own deliveries, which may arrive in either order.
    data.sort_by_key(|d| d["email"].as_str().unwrap_or_default().to_string());
    assert_eq!(data[0]["email"], "both@example.com");
    assert_eq!(
        (&data[1]["email"], &data[1]["tags"], &data[1]["status"]),
        (
            &json!("bulk@example.com"),
            &json!(["a", "b"]),
            &json!("active")
        )
    );
    let count = |newsletter: i64| {
        app.count(&format!(
            "SELECT count(*) FROM events WHERE newsletter_id = {newsletter}"
        ))
    };
    assert_eq!(
        count(quiet.newsletter_id),
        0,
        "nobody listens: nothing kept"
    );
    assert_eq!(count(heard.newsletter_id), 2, "only the kind listened to");
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'subscriber.updated'"),
        0
    );
}

#[test]
fn the_prune_job_deletes_finished_deliveries_older_than_30_days_and_keeps_the_rest() {
    let mut app = spawn_app_with(&["--allow-private-webhooks"]);
    let owner = onboard(&app, "Pruned Post");
    let receiver = Receiver::start();
    subscribe(&owner, &receiver.url, &["subscriber.created"]);
    let create = |email: &str| {
        owner
            .post("/subscribers", &json!({ "email": email }))
            .expect(201);
    };
    create("old0@example.com");
    create("old1@example.com");
    receiver.wait_for("subscriber.created", 2);
    // Recorded as finished before the clock moves, so they are finished 31 days ago below.
    wait_for_delivery_jobs_done(&app);
    const DAY: Duration = Duration::from_secs(24 * 3600);
    app.advance_clock(DAY * 29);
    // 29 days on: the third is delivered, the fourth fails and waits for its retry: pending.
    create("young@example.com");
    receiver.wait_for("subscriber.created", 3);
    receiver.always(500);
    create("pending@example.com");
    wait_for("the failed attempt", Duration::from_secs(10), || {
        (app.count(
            "SELECT count(*) FROM webhook_deliveries WHERE attempts = 1 AND state = 'pending'",
        ) == 1)
            .then_some(())
    });
    let delivery_jobs = app.count("SELECT count(*) FROM jobs WHERE kind = 'deliver_webhook'");

    // Two days later the first two are 31 days old. The job runs hourly (and at each start),
    // and reschedules itself an hour on: once it is queued for later than half an hour from
    // now, it has run since the clock moved.
    app.advance_clock(DAY * 2);
    let prune_ran = |app: &App| {
        let soonest = stored(app.clock_now() + jiff::SignedDuration::from_mins(30));
        wait_for("the prune job to run", Duration::from_secs(10), || {
            let queued: i64 = app
                .db()
                .query_row(
                    "SELECT count(*) FROM jobs WHERE kind = 'prune_webhook_log' AND state = 'queued'
                     AND attempts > 0 AND run_at > ?1",
                    [&soonest],
                    |r| r.get(0),
                )
                .unwrap();
            (queued == 1).then_some(())
        });
    };
    prune_ran(&app);
    let ids = |sql: &str| -> Vec<i64> {
        app.db()
            .prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(
        ids("SELECT id FROM webhook_deliveries ORDER BY id"),
        vec![3, 4],
        "the young one and the pending one stay"
    );
    assert_eq!(ids("SELECT id FROM events ORDER BY id"), vec![3, 4]);
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE kind = 'deliver_webhook'"),
        delivery_jobs - 2,
        "the finished delivery jobs of the pruned deliveries go too"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE kind = 'prune_webhook_log'"),
        1
    );

    // A start makes it due at once, whatever its schedule.
    let runs = |app: &App| app.count("SELECT attempts FROM jobs WHERE kind = 'prune_webhook_log'");
    let before = runs(&app);
    app.restart();
    wait_for(
        "the prune job to run at start",
        Duration::from_secs(10),
        || (runs(&app) > before).then_some(()),
    );
}

/// Waits until every webhook delivery job is done: after that, nothing more can arrive.
fn wait_for_delivery_jobs_done(app: &App) {
    wait_for(
        "the delivery jobs to finish",
        Duration::from_secs(20),
        || {
            (app.count(
                "SELECT count(*) FROM jobs WHERE kind = 'deliver_webhook' AND state != 'done'",
            ) == 0)
                .then_some(())
        },
    );
}
