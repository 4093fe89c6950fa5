//! REST API v1 rate limits: three hourly buckets per key, headers on every answer,
//! 429 with Retry-After, counters that survive a restart.

use std::time::Duration;

use crate::support::*;

/// The server's clock in Unix seconds.
fn now(app: &App) -> i64 {
    app.clock_now().as_second()
}

/// (limit, remaining, reset) from the headers, checking reset is the end of this hour.
#[track_caller]
fn limits(app: &App, resp: &Resp) -> (i64, i64, i64) {
    let get = |name: &str| -> i64 {
        resp.header(name)
            .unwrap_or_else(|| panic!("no {name} on {} {}", resp.status, resp.body))
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let reset = get("X-RateLimit-Reset");
    let t = now(app);
    assert_eq!(reset % 3600, 0, "fixed hourly windows");
    assert!(
        reset > t - 5 && reset <= t + 3600 + 5,
        "reset {reset} now {t}"
    );
    (
        get("X-RateLimit-Limit"),
        get("X-RateLimit-Remaining"),
        reset,
    )
}

#[track_caller]
fn assert_limited(app: &App, resp: &Resp, limit: i64) {
    assert_eq!(resp.error_code(429), "rate_limited");
    let (l, remaining, reset) = limits(app, resp);
    assert_eq!((l, remaining), (limit, 0));
    let retry: i64 = resp
        .header("Retry-After")
        .expect("Retry-After on a 429")
        .parse()
        .unwrap();
    assert!((1..=3600).contains(&retry), "Retry-After {retry}");
    assert!(
        (reset - now(app) - retry).abs() <= 5,
        "Retry-After {retry} matches reset {reset}"
    );
}

#[test]
fn api_limits_buckets_headers_and_restart() {
    let mut app = spawn_app_with(&[
        "--rate-limit-get",
        "3",
        "--rate-limit-write",
        "2",
        "--rate-limit-bulk",
        "1",
    ]);
    app.advance_clock_to_the_hour();
    let owner = onboard(&app, "Throttle Times");
    // A fresh key: buckets are per key.
    let key = create_api_key(
        &owner.client,
        owner.newsletter_id,
        &["read", "write", "delete"],
    );
    let c = &owner.client;

    // Bulk counts in its own bucket only.
    let resp = c.api(
        "POST",
        "/subscribers/bulk_create",
        &key,
        Some(&json!({"subscribers": [{"email": "b1@example.com"}]})),
    );
    resp.expect(200);
    assert_eq!((limits(&app, &resp).0, limits(&app, &resp).1), (1, 0));
    let resp = c.api(
        "POST",
        "/subscribers/bulk_create",
        &key,
        Some(&json!({"subscribers": [{"email": "b2@example.com"}]})),
    );
    assert_limited(&app, &resp, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers"),
        1,
        "refused bulk did nothing"
    );

    // Writes: POST, PATCH and DELETE share a bucket; an error answer counts and has headers.
    let resp = c.api(
        "POST",
        "/subscribers",
        &key,
        Some(&json!({"email": "w@example.com"})),
    );
    resp.expect(201);
    assert_eq!(
        (limits(&app, &resp).0, limits(&app, &resp).1),
        (2, 1),
        "bulk did not use the write bucket"
    );
    let resp = c.api("DELETE", "/subscribers/999999", &key, None);
    assert_eq!(resp.error_code(404), "not_found");
    assert_eq!((limits(&app, &resp).0, limits(&app, &resp).1), (2, 0));
    let resp = c.api("PATCH", "/newsletter", &key, Some(&json!({"tagline": "x"})));
    assert_limited(&app, &resp, 2);
    let resp = c.api(
        "POST",
        "/subscribers",
        &key,
        Some(&json!({"email": "late@example.com"})),
    );
    assert_limited(&app, &resp, 2);
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers WHERE email = 'late@example.com'"),
        0
    );

    // Reads.
    for remaining in [2, 1, 0] {
        let resp = c.api("GET", "/subscribers", &key, None);
        resp.expect(200);
        assert_eq!(
            (limits(&app, &resp).0, limits(&app, &resp).1),
            (3, remaining)
        );
    }
    let resp = c.api("GET", "/newsletter", &key, None);
    assert_limited(&app, &resp, 3);
    // Refused requests do not count further, and the limit holds on validation errors too.
    assert_limited(&app, &c.api("GET", "/issues?page=0", &key, None), 3);

    // The owner's other key has its own buckets.
    let resp = owner.get("/newsletter");
    resp.expect(200);
    assert_eq!(
        (limits(&app, &resp).0, limits(&app, &resp).1),
        (3, 1),
        "onboarding used one"
    );

    // Counters survive a restart.
    app.restart();
    assert_limited(&app, &c.api("GET", "/newsletter", &key, None), 3);
    assert_limited(
        &app,
        &c.api(
            "POST",
            "/subscribers",
            &key,
            Some(&json!({"email": "r@example.com"})),
        ),
        2,
    );
    assert_limited(
        &app,
        &c.api(
            "POST",
            "/subscribers/bulk_create",
            &key,
            Some(&json!({"subscribers": []})),
        ),
        1,
    );
    let resp = owner.get("/newsletter");
    assert_eq!((limits(&app, &resp).0, limits(&app, &resp).1), (3, 0));
    assert_limited(&app, &owner.get("/newsletter"), 3);

    // The next hour is a new window: every bucket starts again.
    app.advance_clock(Duration::from_secs(3600));
    let resp = owner.get("/newsletter");
    resp.expect(200);
    assert_eq!((limits(&app, &resp).0, limits(&app, &resp).1), (3, 2));
    let resp = c.api(
        "POST",
        "/subscribers",
        &key,
        Some(&json!({"email": "next-hour@example.com"})),
    );
    resp.expect(201);
    assert_eq!((limits(&app, &resp).0, limits(&app, &resp).1), (2, 1));
}

#[test]
fn api_limits_headers_on_every_answer() {
    let app = spawn_app();
    app.advance_clock_to_the_hour();
    let owner = onboard(&app, "Header Hub");
    let s = owner.post("/subscribers", &json!({"email": "h@example.com"}));
    assert_eq!(limits(&app, &s).0, 100, "write default");
    let cases = [
        owner.get("/newsletter"),
        owner.get("/issues?per_page=0"),
        owner.get("/issues/424242"),
        owner.get("/no/such/path"),
        owner.api("PUT", "/issues", None),
        owner.client.api_raw(
            "POST",
            "/issues",
            &owner.key,
            "application/json",
            b"{".to_vec(),
        ),
        owner.post("/issues", &json!({"issue": {}})),
        owner.delete("/subscribers/424242"),
    ];
    for resp in &cases {
        let (limit, remaining, _) = limits(&app, resp);
        assert!(limit == 1000 || limit == 100, "{limit}");
        assert!(remaining < limit);
    }
    assert_eq!(limits(&app, &cases[0]).0, 1000, "GET default");
    let bulk = owner.post("/subscribers/bulk_create", &json!({"subscribers": []}));
    assert_eq!(
        limits(&app, &bulk),
        (10, 9, limits(&app, &bulk).2),
        "bulk default"
    );
}

#[test]
fn api_limits_hold_under_concurrent_requests() {
    let app = spawn_app_with(&["--rate-limit-get", "5"]);
    app.advance_clock_to_the_hour();
    let owner = onboard(&app, "Rush Hour");
    let key = create_api_key(&owner.client, owner.newsletter_id, &["read"]);
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..12)
            .map(|_| s.spawn(|| owner.client.api("GET", "/subscribers", &key, None).status))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        7,
        "{statuses:?}"
    );
}

#[test]
fn api_limits_refusals_reach_clients_still_uploading() {
    let app = spawn_app_with(&["--rate-limit-bulk", "1"]);
    app.advance_clock_to_the_hour();
    let owner = onboard(&app, "Big Uploads");
    // Just under the 2 MiB limit (padded with the whitespace JSON allows between tokens): the
    // server answers before it needs the body, and must still let the client finish sending
    // so the client reads the answer.
    let big = format!(r#"{{"subscribers": []{}}}"#, " ".repeat(2_000_000)).into_bytes();
    let c = &owner.client;
    let bulk = |key: &str| {
        c.request(
            "POST",
            "/api/v1/subscribers/bulk_create",
            &[("Authorization", &format!("Bearer {key}"))],
            Some(("application/json", big.clone())),
        )
        .expect("an HTTP answer, not a broken connection")
    };
    bulk(&owner.key).expect(200);
    assert_limited(&app, &bulk(&owner.key), 1);
    assert_eq!(bulk("wrong-key").error_code(401), "unauthorized");
    let read_only = create_api_key(&owner.client, owner.newsletter_id, &["read"]);
    assert_eq!(bulk(&read_only).error_code(403), "forbidden");
}
