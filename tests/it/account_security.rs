//! Account security over HTTP: sign-in throttles per account and
//! per client, client addresses behind a trusted proxy, mail caps per address, sign-in time
//! for unknown addresses, spent links, session lifetimes, signing out other sessions, CSRF
//! tokens bound to the session, and `__Host-` cookies on https.

use std::time::{Duration, Instant};

use crate::support::*;

/// Per-account and per-client sign-in limits (src/domain/accounts/mod.rs).
const ACCOUNT_LIMIT: usize = 5;
const CLIENT_LIMIT: usize = 30;

/// Every `Set-Cookie` header of a response.
fn set_cookies(resp: &Resp) -> Vec<String> {
    resp.headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.clone())
        .collect()
}

/// The whole `Set-Cookie` header that sets `name` (not a removal).
fn set_cookie(resp: &Resp, name: &str) -> Option<String> {
    set_cookies(resp)
        .into_iter()
        .find(|c| c.starts_with(&format!("{name}=")) && !c.starts_with(&format!("{name}=;")))
}

/// The value `resp` gives the cookie `name`.
fn cookie_value(resp: &Resp, name: &str) -> String {
    let header = set_cookie(resp, name)
        .unwrap_or_else(|| panic!("no {name} cookie in {:?}", set_cookies(resp)));
    header[name.len() + 1..]
        .split(';')
        .next()
        .unwrap()
        .to_string()
}

/// A request with exactly the cookies given (a fresh client, so no jar adds any).
fn with_cookies(
    app: &App,
    method: &str,
    path: &str,
    cookies: &str,
    form: Option<&[(&str, &str)]>,
) -> Resp {
    let body = form.map(|fields| {
        let encoded = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        ("application/x-www-form-urlencoded", encoded.into_bytes())
    });
    app.client()
        .request(method, path, &[("Cookie", cookies)], body)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// Posts a form with the given token and extra headers (e.g. `X-Forwarded-For`).
fn post_with(
    client: &Client,
    path: &str,
    token: &str,
    fields: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Resp {
    let mut all = vec![("authenticity_token", token)];
    all.extend_from_slice(fields);
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&all)
        .finish();
    client
        .request(
            "POST",
            path,
            headers,
            Some(("application/x-www-form-urlencoded", body.into_bytes())),
        )
        .unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// One sign-in attempt from a client that already holds the sign-in form's token.
fn attempt(client: &Client, token: &str, email: &str, password: &str, forwarded: &str) -> Resp {
    let headers: &[(&str, &str)] = if forwarded.is_empty() {
        &[]
    } else {
        &[("X-Forwarded-For", forwarded)]
    };
    post_with(
        client,
        "/session",
        token,
        &[("email_address", email), ("password", password)],
        headers,
    )
}

const DAY: Duration = Duration::from_secs(24 * 3600);

/// The server's clock `d` ago, as timestamps are stored.
fn ago(app: &App, d: jiff::SignedDuration) -> String {
    stored(app.clock_now() - d)
}

/// The notice shown on `path` after a redirect.
fn notice(client: &Client, path: &str) -> String {
    let page = client.get(path);
    let start = page
        .body
        .find("class=\"notice\"")
        .unwrap_or_else(|| panic!("no notice on {path}:\n{}", page.body));
    let text = &page.body[start..];
    let open = text.find('>').unwrap() + 1;
    let close = text.find("</p>").unwrap();
    text[open..close].to_string()
}

#[test]
fn wrong_passwords_lock_one_account_not_the_next_user_on_the_same_address() {
    let app = spawn_app();
    // Counts from the start of a window, so they all fall in it.
    app.advance_clock_to_the_hour();
    let (alice, bob) = (unique_email("alice"), unique_email("bob"));
    sign_up_confirmed(&app, &app.client(), &alice);
    sign_up_confirmed(&app, &app.client(), &bob);
    let client = app.client();
    let token = client.get("/session/new").csrf_token();
    for _ in 0..ACCOUNT_LIMIT {
        attempt(&client, &token, &alice, "not her password", "").expect(422);
    }
    // Alice's address is locked, even for the right password...
    let locked = attempt(&client, &token, &alice, PASSWORD, "");
    locked.expect(429);
    let wait: u64 = locked.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=15 * 60).contains(&wait), "Retry-After {wait}");
    // ...from another browser too, but Bob, at the same address, signs in.
    let other = app.client();
    let token2 = other.get("/session/new").csrf_token();
    attempt(&other, &token2, &alice, PASSWORD, "").expect(429);
    let resp = attempt(&other, &token2, &bob, PASSWORD, "");
    assert_eq!(resp.redirect(), "/newsletters");
    other.get("/newsletters").expect(200);

    // Once the window is over Alice signs in again.
    app.advance_clock(Duration::from_secs(3600));
    let client3 = app.client();
    let token3 = client3.get("/session/new").csrf_token();
    assert_eq!(
        attempt(&client3, &token3, &alice, PASSWORD, "").redirect(),
        "/newsletters"
    );
}

#[test]
fn the_looser_per_client_limit_holds_across_accounts() {
    let app = spawn_app();
    // Counts from the start of a window, so they all fall in it.
    app.advance_clock_to_the_hour();
    let owner = unique_email("owner");
    sign_up_confirmed(&app, &app.client(), &owner);
    let client = app.client();
    let token = client.get("/session/new").csrf_token();
    for _ in 0..CLIENT_LIMIT {
        // A different address each time: no account gets locked.
        attempt(&client, &token, &unique_email("guess"), "123456", "").expect(422);
    }
    let refused = attempt(&client, &token, &owner, PASSWORD, "");
    refused.expect(429);
    assert!(refused.header("retry-after").is_some());
    assert!(refused.body.contains("Too many attempts"));
}

#[test]
fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_bucket() {
    let app = spawn_app_with(&["--trusted-proxy", "127.0.0.1"]);
    // Counts from the start of a window, so they all fall in it.
    app.advance_clock_to_the_hour();
    let owner = unique_email("owner");
    sign_up_confirmed(&app, &app.client(), &owner);
    let client = app.client();
    let token = client.get("/session/new").csrf_token();
    for _ in 0..CLIENT_LIMIT {
        attempt(
            &client,
            &token,
            &unique_email("guess"),
            "123456",
            "198.51.100.1",
        )
        .expect(422);
    }
    attempt(&client, &token, &owner, PASSWORD, "198.51.100.1").expect(429);
    // What the client writes left of the proxy's entry proves nothing.
    attempt(
        &client,
        &token,
        &owner,
        PASSWORD,
        "203.0.113.7, 198.51.100.1",
    )
    .expect(429);
    // Another client behind the same proxy is not held up.
    let resp = attempt(&client, &token, &owner, PASSWORD, "198.51.100.2");
    assert_eq!(resp.redirect(), "/newsletters");
}

#[test]
fn without_a_trusted_proxy_a_forged_forwarded_for_does_not_help() {
    let app = spawn_app();
    // Counts from the start of a window, so they all fall in it.
    app.advance_clock_to_the_hour();
    let owner = unique_email("owner");
    sign_up_confirmed(&app, &app.client(), &owner);
    let client = app.client();
    let token = client.get("/session/new").csrf_token();
    for n in 0..CLIENT_LIMIT {
        let forged = format!("198.51.100.{n}");
        attempt(&client, &token, &unique_email("guess"), "123456", &forged).expect(422);
    }
    attempt(&client, &token, &owner, PASSWORD, "203.0.113.200").expect(429);
}

#[test]
fn sign_ups_and_subscribes_per_client_are_capped_by_the_forwarded_address() {
    let app = spawn_app_with(&["--trusted-proxy", "127.0.0.1"]);
    // Counts from the start of a window, so they all fall in it.
    app.advance_clock_to_the_hour();
    let client = app.client();
    let token = client.get("/signup").csrf_token();
    let sign_up_from = |email: &str, from: &str| {
        post_with(
            &client,
            "/signup",
            &token,
            &[
                ("user[email_address]", email),
                ("user[password]", PASSWORD),
                ("user[password_confirmation]", PASSWORD),
            ],
            &[("X-Forwarded-For", from)],
        )
    };
    for _ in 0..10 {
        let resp = sign_up_from(&unique_email("many"), "198.51.100.1");
        assert_eq!(resp.redirect(), "/email_confirmation_pending");
    }
    let refused_email = unique_email("eleventh");
    let refused = sign_up_from(&refused_email, "198.51.100.1");
    refused.expect(429);
    assert!(refused.header("retry-after").is_some());
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM users WHERE email = '{refused_email}'"
        )),
        0
    );
    assert_eq!(
        sign_up_from(&unique_email("other"), "198.51.100.2").redirect(),
        "/email_confirmation_pending"
    );
    assert_eq!(app.count("SELECT count(*) FROM users"), 11);

    // The subscribe form counts the same forwarded address.
    let owner = onboard(&app, "Forwarded Gazette");
    let site = app.site_client(&owner.subdomain);
    let site_token = site.get("/subscribe").csrf_token();
    let subscribe_from = |email: &str, from: &str| {
        post_with(
            &site,
            "/subscribe",
            &site_token,
            &[("email", email)],
            &[("X-Forwarded-For", from)],
        )
        .status
    };
    for _ in 0..20 {
        assert_eq!(subscribe_from(&unique_email("reader"), "198.51.100.1"), 200);
    }
    assert_eq!(subscribe_from(&unique_email("reader"), "198.51.100.1"), 429);
    assert_eq!(subscribe_from(&unique_email("reader"), "198.51.100.2"), 200);
}

#[test]
fn reset_and_confirmation_mails_per_address_are_capped_with_the_same_answer() {
    let app = spawn_app();
    // Counts from the start of a window, so they all fall in it.
    app.advance_clock_to_the_hour();
    let client = app.client();

    // Password reset: five asks, three mails; every ask gets the same answer.
    let known = unique_email("reset");
    sign_up_confirmed(&app, &app.client(), &known);
    let expected = "If that address has an account, a reset link is on its way.";
    for email in std::iter::repeat_n(known.as_str(), 5).chain(["nobody@example.com"]) {
        let resp = client.submit("/passwords/new", "/passwords", &[("email_address", email)]);
        assert_eq!(resp.redirect(), "/session/new");
        assert!(notice(&client, "/session/new").starts_with(expected));
    }
    assert_eq!(queued_mails(&app, &known, "/passwords/"), 3);
    let mails = settled_mail(&app, &known);
    let resets = mails
        .iter()
        .filter(|m| link_containing(&m.text(), "/passwords/").is_some())
        .count();
    assert_eq!(resets, 3, "three reset mails reach the inbox");
    assert!(app.smtp.messages_to("nobody@example.com").is_empty());

    // Confirmation: the sign-up's mail counts, so two more resends are mailed of five.
    let waiting = unique_email("unconfirmed");
    sign_up(&app, &app.client(), &waiting);
    for email in std::iter::repeat_n(waiting.as_str(), 5).chain(["nobody@example.com"]) {
        let resp = client.submit(
            "/email_confirmation_required",
            "/email_confirmation",
            &[("email_address", email)],
        );
        assert_eq!(resp.redirect(), "/email_confirmation_pending");
    }
    assert_eq!(queued_mails(&app, &waiting, "/email_confirmations/"), 3);
    assert_eq!(settled_mail(&app, &waiting).len(), 3);
}

#[test]
fn subscribe_mails_per_address_are_capped_and_the_first_link_still_works() {
    let app = spawn_app();
    // Counts from the start of a window, so they all fall in it.
    app.advance_clock_to_the_hour();
    let owners: Vec<Owner> = (0..6)
        .map(|i| onboard(&app, &format!("Capped Courier {i}")))
        .collect();
    let reader = unique_email("reader");
    let ask = |owner: &Owner| {
        let site = app.site_client(&owner.subdomain);
        let resp = site.submit("/subscribe", "/subscribe", &[("email", &reader)]);
        resp.expect(200);
        resp.body
    };

    // One newsletter: seven asks, one mail (one pending confirmation per address a day).
    let answers: Vec<String> = (0..7).map(|_| ask(&owners[0])).collect();
    assert!(
        answers.iter().all(|a| *a == answers[0]),
        "the same page whether or not a mail went out"
    );
    assert_eq!(queued_mails(&app, &reader, "/subscribe/confirm/"), 1);

    // Across newsletters, five mails an hour to one address: the sixth newsletter mails none.
    for owner in &owners[1..5] {
        ask(owner);
    }
    assert_eq!(queued_mails(&app, &reader, "/subscribe/confirm/"), 5);
    let capped = ask(&owners[5]);
    assert_eq!(queued_mails(&app, &reader, "/subscribe/confirm/"), 5);
    assert!(
        capped.contains("a confirmation link is on its way"),
        "the usual answer: {capped}"
    );
    assert_eq!(settled_mail(&app, &reader).len(), 5);

    // The capped asks did not replace the link mailed first.
    let first: String = app
        .db()
        .query_row(
            "SELECT json_extract(payload, '$.link') FROM jobs WHERE json_extract(payload, '$.to') = ?1
             ORDER BY id LIMIT 1",
            [&reader],
            |r| r.get(0),
        )
        .unwrap();
    let path = format!("/{}", first.splitn(4, '/').nth(3).unwrap());
    let site = app.site_client(&owners[0].subdomain);
    let done = site.submit(&path, &path, &[]);
    done.expect(200);
    assert!(done.body.contains("You are subscribed"));
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[test]
fn signing_in_with_an_unknown_address_takes_as_long_as_with_a_known_one() {
    let app = spawn_app();
    let known = [unique_email("timed"), unique_email("timed")];
    for email in &known {
        sign_up_confirmed(&app, &app.client(), email);
    }
    let client = app.client();
    let token = client.get("/session/new").csrf_token();
    let timed = |email: &str| {
        let started = Instant::now();
        attempt(&client, &token, email, "not the password", "").expect(422);
        started.elapsed()
    };
    // Warm both paths up (the first unknown address also prepares the dummy hash).
    timed(&unique_email("nobody"));
    let (mut known_times, mut unknown_times) = (Vec::new(), Vec::new());
    for round in 0..6 {
        known_times.push(timed(&known[round % 2]));
        unknown_times.push(timed(&unique_email("nobody")));
    }
    let (k, u) = (median(known_times), median(unknown_times));
    let difference = k.abs_diff(u);
    assert!(
        difference <= k / 2,
        "unknown addresses take {u:?}, known ones {k:?}: timing tells them apart"
    );
}

#[test]
fn a_used_reset_link_spends_the_other_reset_links() {
    let app = spawn_app();
    let email = unique_email("spend");
    sign_up_confirmed(&app, &app.client(), &email);
    let client = app.client();
    for _ in 0..2 {
        client.submit("/passwords/new", "/passwords", &[("email_address", &email)]);
    }
    app.smtp.wait_for_message_to(&email, 3);
    let links: Vec<String> = app
        .smtp
        .messages_to(&email)
        .iter()
        .filter_map(|m| link_containing(&m.text(), "/passwords/"))
        .collect();
    assert_eq!(links.len(), 2);
    for link in &links {
        client.get(link).expect(200);
    }
    let action = |link: &str| {
        let path = format!("/{}", link.splitn(4, '/').nth(3).unwrap());
        path.trim_end_matches("/edit").to_string()
    };
    let new_password = "a brand new password";
    let resp = client.submit(
        &links[1],
        &action(&links[1]),
        &[
            ("password", new_password),
            ("password_confirmation", new_password),
        ],
    );
    assert_eq!(resp.redirect(), "/session/new");
    // The other mailed link no longer works, neither to show its form nor to post it.
    assert_eq!(client.get(&links[0]).redirect(), "/passwords/new");
    let token = client.get("/passwords/new").csrf_token();
    let resp = client.post_form(
        &action(&links[0]),
        &[
            ("authenticity_token", &token),
            ("_method", "patch"),
            ("password", "someone else's choice"),
            ("password_confirmation", "someone else's choice"),
        ],
    );
    assert_eq!(resp.redirect(), "/passwords/new");
    let signed_in = app.client().submit(
        "/session/new",
        "/session",
        &[("email_address", &email), ("password", new_password)],
    );
    assert_eq!(signed_in.redirect(), "/newsletters");
}

#[test]
fn confirming_an_address_spends_its_other_confirmation_links() {
    let app = spawn_app();
    let email = unique_email("twice");
    let client = app.client();
    sign_up(&app, &client, &email);
    client.submit(
        "/email_confirmation_required",
        "/email_confirmation",
        &[("email_address", &email)],
    );
    app.smtp.wait_for_message_to(&email, 2);
    let links: Vec<String> = app
        .smtp
        .messages_to(&email)
        .iter()
        .filter_map(|m| link_containing(&m.text(), "/email_confirmations/"))
        .collect();
    assert_eq!(links.len(), 2);
    assert_eq!(client.get(&links[0]).redirect(), "/newsletters");
    assert_eq!(
        app.client().get(&links[1]).redirect(),
        "/email_confirmation_required",
        "the other link is spent"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM user_tokens WHERE used_at IS NULL"),
        0
    );
}

/// Signs `email` in from a fresh browser and returns it with its session's id.
fn signed_in(app: &App, email: &str) -> (Client, i64) {
    let client = app.client();
    let resp = client.submit(
        "/session/new",
        "/session",
        &[("email_address", email), ("password", PASSWORD)],
    );
    assert_eq!(resp.redirect(), "/newsletters");
    let session = set_cookie(&resp, "broadsheet_session").unwrap();
    assert!(
        session.contains("Max-Age=7776000"),
        "the cookie lasts as long as the session may: {session}"
    );
    let id = app.count("SELECT max(id) FROM sessions");
    (client, id)
}

#[test]
fn sessions_end_after_their_idle_and_absolute_lifetimes() {
    let app = spawn_app();
    let email = unique_email("lifetime");
    sign_up_confirmed(&app, &app.client(), &email);
    let last_seen = |id: i64| -> String {
        app.db()
            .query_row(
                "SELECT last_seen_at FROM sessions WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
    };

    // Used ten minutes ago: still live, and marked used now; a second visit within the
    // minute writes nothing.
    let (busy, id) = signed_in(&app, &email);
    app.advance_clock(Duration::from_secs(10 * 60));
    busy.get("/newsletters").expect(200);
    let touched = last_seen(id);
    assert!(
        touched > ago(&app, jiff::SignedDuration::from_mins(1)),
        "{touched}"
    );
    busy.get("/newsletters").expect(200);
    assert_eq!(last_seen(id), touched);

    // Not used for 30 days and a minute: over; used meanwhile: live.
    let (idle, _) = signed_in(&app, &email);
    app.advance_clock(DAY * 15);
    busy.get("/newsletters").expect(200);
    app.advance_clock(DAY * 15 + Duration::from_secs(60));
    assert_eq!(idle.get("/newsletters").redirect(), "/session/new");
    busy.get("/newsletters").expect(200);

    // Used all along, but signed in 90 days and more ago: over. (`busy` began about 30
    // days ago, `recent` now.)
    let (recent, _) = signed_in(&app, &email);
    for _ in 0..2 {
        app.advance_clock(DAY * 20);
        busy.get("/newsletters").expect(200);
        recent.get("/newsletters").expect(200);
    }
    app.advance_clock(DAY * 20);
    assert_eq!(busy.get("/newsletters").redirect(), "/session/new");
    recent.get("/newsletters").expect(200);
}

#[test]
fn session_lifetimes_follow_the_flags() {
    let app = spawn_app_with(&[
        "--session-idle-minutes",
        "5",
        "--session-absolute-minutes",
        "60",
    ]);
    let email = unique_email("short");
    sign_up_confirmed(&app, &app.client(), &email);
    let client = app.client();
    let resp = client.submit(
        "/session/new",
        "/session",
        &[("email_address", &email), ("password", PASSWORD)],
    );
    assert!(
        set_cookie(&resp, "broadsheet_session")
            .unwrap()
            .contains("Max-Age=3600")
    );
    app.advance_clock(Duration::from_secs(4 * 60));
    client.get("/newsletters").expect(200);
    app.advance_clock(Duration::from_secs(6 * 60));
    assert_eq!(client.get("/newsletters").redirect(), "/session/new");
    let account = app.client();
    account.submit(
        "/session/new",
        "/session",
        &[("email_address", &email), ("password", PASSWORD)],
    );
    let page = account.get("/account");
    page.expect(200);
    assert!(page.body.contains("after 5 minutes without a visit"));
    assert!(page.body.contains("1 hour after signing in"));
}

#[test]
fn the_account_page_signs_out_every_other_session() {
    let app = spawn_app();
    let email = unique_email("many-browsers");
    let first = app.client();
    sign_up_confirmed(&app, &first, &email);
    let (second, _) = signed_in(&app, &email);
    let (third, _) = signed_in(&app, &email);
    let someone = unique_email("someone");
    let (other_user, _) = {
        sign_up_confirmed(&app, &app.client(), &someone);
        signed_in(&app, &someone)
    };

    let page = first.get("/account");
    page.expect(200);
    assert!(page.body.contains(&email));
    assert!(page.body.contains("id=\"sessions\""));
    assert_eq!(page.body.matches("<tr>").count(), 1 + 3, "{}", page.body);
    assert!(page.body.contains("Sign out all other sessions (2)"));
    assert!(first.get("/newsletters").body.contains("href=\"/account\""));

    // Without the form's token nothing happens.
    first
        .post_form("/account/sessions", &[("_method", "delete")])
        .expect(403);
    second.get("/newsletters").expect(200);

    let resp = first.submit("/account", "/account/sessions", &[("_method", "delete")]);
    assert_eq!(resp.redirect(), "/account");
    assert_eq!(
        notice(&first, "/account"),
        "2 other sessions are signed out."
    );
    first.get("/newsletters").expect(200);
    for gone in [&second, &third] {
        assert_eq!(gone.get("/newsletters").redirect(), "/session/new");
    }
    other_user.get("/newsletters").expect(200);
    assert!(first.get("/account").body.contains("No other sessions."));
    assert_eq!(app.client().get("/account").redirect(), "/session/new");
}

#[test]
fn csrf_tokens_are_bound_to_the_session_and_rotated_at_sign_in() {
    let app = spawn_app();
    let (ann, ben) = (unique_email("ann"), unique_email("ben"));
    sign_up_confirmed(&app, &app.client(), &ann);
    sign_up_confirmed(&app, &app.client(), &ben);
    let newsletter = [
        ("newsletter[name]", "Token Times"),
        ("newsletter[from_email]", "t@example.com"),
    ];

    // A token from before sign-in no longer works after it.
    let browser = app.client();
    let before = browser.get("/session/new").csrf_token();
    let resp = browser.post_form(
        "/session",
        &[
            ("authenticity_token", &before),
            ("email_address", &ann),
            ("password", PASSWORD),
        ],
    );
    assert_eq!(resp.redirect(), "/newsletters");
    let (ann_session, ann_csrf) = (
        cookie_value(&resp, "broadsheet_session"),
        cookie_value(&resp, "broadsheet_csrf"),
    );
    let mut stale = vec![("authenticity_token", before.as_str())];
    stale.extend_from_slice(&newsletter);
    browser.post_form("/newsletters", &stale).expect(403);
    assert_eq!(app.count("SELECT count(*) FROM newsletters"), 0);

    // A token of Ann's session does not work in Ben's, even beside the same CSRF cookie.
    let ben_session = {
        let resp = app.client().submit(
            "/session/new",
            "/session",
            &[("email_address", &ben), ("password", PASSWORD)],
        );
        cookie_value(&resp, "broadsheet_session")
    };
    let ann_cookies = format!("broadsheet_csrf={ann_csrf}; broadsheet_session={ann_session}");
    let ann_token = with_cookies(&app, "GET", "/newsletters/new", &ann_cookies, None).csrf_token();
    let mut fields = vec![("authenticity_token", ann_token.as_str())];
    fields.extend_from_slice(&newsletter);
    let ben_cookies = format!("broadsheet_csrf={ann_csrf}; broadsheet_session={ben_session}");
    with_cookies(&app, "POST", "/newsletters", &ben_cookies, Some(&fields)).expect(403);
    assert_eq!(app.count("SELECT count(*) FROM newsletters"), 0);
    // In Ann's own session it does.
    with_cookies(&app, "POST", "/newsletters", &ann_cookies, Some(&fields)).redirect();
    assert_eq!(app.count("SELECT count(*) FROM newsletters"), 1);

    // Signing out draws a new CSRF cookie too: the signed-in token is spent.
    let signed_in_token = browser.get("/newsletters").csrf_token();
    let out = browser.post_form(
        "/session",
        &[
            ("authenticity_token", &signed_in_token),
            ("_method", "delete"),
        ],
    );
    assert_eq!(out.redirect(), "/session/new");
    assert_ne!(cookie_value(&out, "broadsheet_csrf"), ann_csrf);
    browser
        .post_form(
            "/session",
            &[
                ("authenticity_token", &signed_in_token),
                ("email_address", &ann),
                ("password", PASSWORD),
            ],
        )
        .expect(403);
}

#[test]
fn cookies_are_host_only_and_secure_on_https() {
    let app = spawn_app_with(&["--base-url", "https://news.example.com"]);
    // The test client talks plain HTTP, over which a browser would not send Secure cookies
    // back, so each request below names its cookies itself.
    let owner = unique_email("https");
    let signup = app.client().get("/signup");
    let signup_csrf = cookie_value(&signup, "__Host-broadsheet_csrf");
    let resp = with_cookies(
        &app,
        "POST",
        "/signup",
        &format!("__Host-broadsheet_csrf={signup_csrf}"),
        Some(&[
            ("authenticity_token", &signup.csrf_token()),
            ("user[email_address]", &owner),
            ("user[password]", PASSWORD),
            ("user[password_confirmation]", PASSWORD),
        ]),
    );
    assert_eq!(resp.redirect(), "/email_confirmation_pending");
    let mail = app.smtp.wait_for_message_to(&owner, 1);
    let link = link_containing(&mail.text(), "/email_confirmations/").unwrap();
    assert!(link.starts_with("https://news.example.com/"), "{link}");
    let confirm = app.client().get(&link["https://news.example.com".len()..]);
    assert_eq!(confirm.redirect(), "/newsletters");
    assert!(set_cookie(&confirm, "__Host-broadsheet_session").is_some());

    let form = app.client().get("/session/new");
    form.expect(200);
    let csrf_header = set_cookie(&form, "__Host-broadsheet_csrf").expect("a __Host- CSRF cookie");
    for part in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(csrf_header.contains(part), "{part} in {csrf_header}");
    }
    assert!(
        !csrf_header.to_lowercase().contains("domain="),
        "{csrf_header}"
    );
    assert!(set_cookie(&form, "broadsheet_csrf").is_none());

    // Signing in with the prefixed cookie gives a prefixed session cookie, which is read back.
    let csrf = cookie_value(&form, "__Host-broadsheet_csrf");
    let resp = with_cookies(
        &app,
        "POST",
        "/session",
        &format!("__Host-broadsheet_csrf={csrf}"),
        Some(&[
            ("authenticity_token", &form.csrf_token()),
            ("email_address", &owner),
            ("password", PASSWORD),
        ]),
    );
    assert_eq!(resp.redirect(), "/newsletters");
    let session_header = set_cookie(&resp, "__Host-broadsheet_session").unwrap();
    for part in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(session_header.contains(part), "{part} in {session_header}");
    }
    assert!(!session_header.to_lowercase().contains("domain="));
    let session = cookie_value(&resp, "__Host-broadsheet_session");
    let page = with_cookies(
        &app,
        "GET",
        "/newsletters",
        &format!("__Host-broadsheet_session={session}"),
        None,
    );
    page.expect(200);
    assert!(page.body.contains(&owner));
    // The same value without the prefix (as a sibling host or plain http could set) is ignored.
    let unprefixed = with_cookies(
        &app,
        "GET",
        "/newsletters",
        &format!("broadsheet_session={session}"),
        None,
    );
    assert_eq!(unprefixed.redirect(), "/session/new");
}

#[test]
fn the_public_sites_cookie_is_host_only_and_secure_on_https() {
    let mut app = spawn_app();
    let owner = onboard(&app, "Secure Signal");
    app.set_args(&["--base-url", "https://news.example.com"]);
    app.restart();
    let site = app.site_client(&owner.subdomain);
    let home = site.get("/");
    home.expect(200);
    let header = set_cookie(&home, "__Host-broadsheet_csrf").expect("a __Host- cookie on the site");
    for part in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(header.contains(part), "{part} in {header}");
    }
    assert!(!header.to_lowercase().contains("domain="));

    // The subscribe form works with it, and not with the unprefixed name.
    let csrf = cookie_value(&home, "__Host-broadsheet_csrf");
    let token = home.csrf_token();
    let reader = unique_email("reader");
    let post = |cookie: &str| {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs([("authenticity_token", token.as_str()), ("email", &reader)])
            .finish();
        app.site_client(&owner.subdomain)
            .request(
                "POST",
                "/subscribe",
                &[("Cookie", cookie)],
                Some(("application/x-www-form-urlencoded", body.into_bytes())),
            )
            .unwrap()
    };
    post(&format!("broadsheet_csrf={csrf}")).expect(403);
    post(&format!("__Host-broadsheet_csrf={csrf}")).expect(200);
}
