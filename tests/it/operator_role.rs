//! The operator role: the first account of a fresh install is the operator,
//! `broadsheet operator grant|revoke`, the `/operator` page (404 for everyone else, its forms
//! too), upgrade requests recorded and mailed to the operators, and the send page's way on
//! when the tier refuses sending.

use crate::support::*;

const OPERATOR_LINK: &str = "href=\"/operator\"";

fn operators_in(app: &App) -> Vec<String> {
    app.db()
        .prepare("SELECT email FROM users WHERE operator = 1 ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn tier_of(owner: &Owner) -> String {
    owner.get("/newsletter").json()["data"]["tier"]
        .as_str()
        .unwrap()
        .to_string()
}

fn status_of(owner: &Owner) -> String {
    owner.get("/newsletter").json()["data"]["status"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Posts an operator form with `client`'s own CSRF token (from its newsletter list).
fn post_operator(client: &Client, action: &str, fields: &[(&str, &str)]) -> Resp {
    client.submit("/newsletters", action, fields)
}

#[test]
fn the_first_account_is_the_operator_and_grant_makes_others() {
    let app = spawn_app();
    let first = onboard(&app, "First Light");
    let second = onboard(&app, "Second Wind");
    assert_eq!(operators_in(&app), std::slice::from_ref(&first.email));

    let page = first.client.get("/newsletters");
    assert!(page.body.contains(OPERATOR_LINK), "{}", page.body);
    let listed = first.client.get("/operator");
    listed.expect(200);
    for owner in [&first, &second] {
        assert!(
            listed
                .body
                .contains(&format!("data-subdomain=\"{}\"", owner.subdomain))
        );
        assert!(listed.body.contains(&owner.email));
    }

    // Everyone else: no link, and the page does not exist; signed out, the sign-in form.
    assert!(
        !second
            .client
            .get("/newsletters")
            .body
            .contains(OPERATOR_LINK)
    );
    second.client.get("/operator").expect(404);
    assert_eq!(app.client().get("/operator").redirect(), "/session/new");

    let (code, out, err) = app.cli(&["operator", "grant", &second.email]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("now an operator"), "{out}");
    second.client.get("/operator").expect(200);
    assert!(
        second
            .client
            .get("/newsletters")
            .body
            .contains(OPERATOR_LINK)
    );
    let (code, out, _) = app.cli(&["operator", "grant", &second.email]);
    assert_eq!((code, out.contains("already an operator")), (0, true));

    let (code, out, err) = app.cli(&["operator", "grant", "nobody@example.com"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        err.contains("no account has the e-mail address \"nobody@example.com\""),
        "{err}"
    );

    let (code, out, err) = app.cli(&["operator", "revoke", &second.email]);
    assert_eq!(code, 0, "{out}{err}");
    second.client.get("/operator").expect(404);
    assert_eq!(operators_in(&app), std::slice::from_ref(&first.email));
}

/// Sign-ups arriving together on a fresh install: exactly one of them is first.
#[test]
fn simultaneous_first_sign_ups_make_one_operator() {
    let app = spawn_app();
    let signing_up: Vec<_> = (0..4)
        .map(|_| {
            let (base, email) = (app.base_url.clone(), unique_email("racer"));
            std::thread::spawn(move || submit_sign_up(&Client::new(&base), &email))
        })
        .collect();
    for thread in signing_up {
        thread.join().unwrap();
    }
    assert_eq!(app.count("SELECT count(*) FROM users"), 4);
    assert_eq!(operators_in(&app).len(), 1);
}

#[test]
fn the_operator_sets_tier_and_status_with_the_clis_rules() {
    let app = spawn_app();
    let operator = onboard(&app, "Desk Of The Operator");
    let owner = onboard(&app, "Someone Elses");

    // Bad values: the page again with a message, nothing changed.
    let resp = post_operator(
        &operator.client,
        "/operator/tier",
        &[("subdomain", &owner.subdomain), ("tier", "gold")],
    );
    resp.expect(422);
    assert!(
        resp.body.contains("Tier must be free, pending or paid"),
        "{}",
        resp.body
    );
    let resp = post_operator(
        &operator.client,
        "/operator/status",
        &[("subdomain", "no-such-newsletter"), ("status", "paused")],
    );
    resp.expect(422);
    assert!(
        resp.body.contains("Subdomain is no newsletter"),
        "{}",
        resp.body
    );
    let resp = post_operator(
        &operator.client,
        "/operator/status",
        &[("subdomain", &owner.subdomain), ("status", "sleeping")],
    );
    resp.expect(422);
    assert_eq!(
        (tier_of(&owner), status_of(&owner)),
        ("free".into(), "active".into())
    );
    // Without the form's token: refused.
    operator
        .client
        .post_form(
            "/operator/tier",
            &[("subdomain", &owner.subdomain), ("tier", "paid")],
        )
        .expect(403);

    let resp = post_operator(
        &operator.client,
        "/operator/tier",
        &[("subdomain", &owner.subdomain), ("tier", "paid")],
    );
    assert_eq!(resp.redirect(), "/operator");
    assert_eq!(tier_of(&owner), "paid");
    let page = operator.client.get("/operator");
    assert!(
        page.body
            .contains(&format!("{}: tier paid", owner.subdomain)),
        "the notice"
    );
    let resp = post_operator(
        &operator.client,
        "/operator/status",
        &[("subdomain", &owner.subdomain), ("status", "paused")],
    );
    assert_eq!(resp.redirect(), "/operator");
    assert_eq!(status_of(&owner), "paused");
    // A return address off the dashboard is not followed.
    let resp = post_operator(
        &operator.client,
        "/operator/status",
        &[
            ("subdomain", &owner.subdomain),
            ("status", "active"),
            ("return_to", "//evil.example/newsletters/"),
        ],
    );
    assert_eq!(resp.redirect(), "/operator");
    assert_eq!(status_of(&owner), "active");
}

#[test]
fn operator_forms_answer_404_to_everyone_else_and_change_nothing() {
    let app = spawn_app();
    let operator = onboard(&app, "The Real Operator");
    let owner = onboard(&app, "Plain Owner");
    for (action, field, value) in [
        ("/operator/tier", "tier", "paid"),
        ("/operator/status", "status", "cancelled"),
    ] {
        for target in [&operator.subdomain, &owner.subdomain] {
            let resp = post_operator(
                &owner.client,
                action,
                &[("subdomain", target), (field, value)],
            );
            resp.expect(404);
        }
        // A bad value is not even looked at.
        post_operator(
            &owner.client,
            action,
            &[("subdomain", "x"), (field, "junk")],
        )
        .expect(404);
    }
    owner.client.get("/operator?cursor=2.5").expect(404);
    for n in [&operator, &owner] {
        assert_eq!((tier_of(n), status_of(n)), ("free".into(), "active".into()));
    }
}

#[test]
fn an_upgrade_request_reaches_the_operator_page_and_their_inbox() {
    let app = spawn_app();
    let operator = onboard(&app, "Operations Weekly");
    let owner = onboard(&app, "Asking Politely");
    let settings = format!("/newsletters/{}/settings", owner.newsletter_id);
    let resp = owner
        .client
        .submit(&settings, &format!("{settings}/upgrade"), &[]);
    assert_eq!(resp.redirect(), format!("{settings}#plan"));
    assert_eq!(tier_of(&owner), "pending");

    let mail = app.smtp.wait_for_message_to(&operator.email, 2);
    assert_eq!(
        mail.header("Subject").as_deref(),
        Some("Asking Politely asks for the paid tier")
    );
    assert!(mail.text().contains(&owner.email), "{}", mail.text());
    assert!(
        mail.text().contains(&format!("{}/operator", app.base_url)),
        "{}",
        mail.text()
    );
    assert!(
        app.smtp.messages_to(&owner.email).len() == 1,
        "only the owner's confirmation"
    );

    let page = operator.client.get("/operator");
    let pending = &page.body
        [page.body.find("id=\"pending\"").unwrap()..page.body.find("id=\"newsletters\"").unwrap()];
    assert!(
        pending.contains(&format!("data-subdomain=\"{}\"", owner.subdomain)),
        "{pending}"
    );
    assert!(!pending.contains(&format!("data-subdomain=\"{}\"", operator.subdomain)));
    assert!(pending.contains("Upgrade requests (1)"));

    // Answered with one click: paid, and no longer pending.
    let resp = post_operator(
        &operator.client,
        "/operator/tier",
        &[
            ("subdomain", &owner.subdomain),
            ("tier", "paid"),
            ("return_to", "/operator"),
        ],
    );
    assert_eq!(resp.redirect(), "/operator");
    assert_eq!(tier_of(&owner), "paid");
    assert!(
        operator
            .client
            .get("/operator")
            .body
            .contains("Upgrade requests (0)")
    );
}

#[test]
fn the_send_refusal_leads_owners_and_operators_onwards() {
    let app = spawn_app();
    let operator = onboard(&app, "Operator Writes Too");
    let owner = onboard(&app, "Owner Only");
    let send_page = |o: &Owner| {
        o.post("/subscribers", &json!({"email": unique_email("reader")}))
            .expect(201);
        let issue = o
            .post(
                "/issues",
                &json!({"issue": {"subject": "First", "content_markdown": "Hello", "status": "approved"}}),
            )
            .json();
        let id = issue["id"].as_i64().unwrap();
        (
            format!("/newsletters/{}/issues/{id}/send", o.newsletter_id),
            id,
        )
    };

    // A plain owner: the request button, then when it was asked.
    let (url, issue_id) = send_page(&owner);
    let page = owner.client.get(&url);
    assert!(
        page.body
            .contains("Sending e-mail needs the paid tier: ask the operator")
    );
    assert!(page.body.contains(&format!(
        "action=\"/newsletters/{}/settings/upgrade\"",
        owner.newsletter_id
    )));
    assert!(!page.body.contains("Make this newsletter paid"));
    owner
        .client
        .submit(
            &url,
            &format!("/newsletters/{}/settings/upgrade", owner.newsletter_id),
            &[],
        )
        .redirect();
    let page = owner.client.get(&url);
    assert!(
        page.body.contains("id=\"upgrade-requested\""),
        "{}",
        page.body
    );
    assert!(page.body.contains("the operator has been told"));
    // The API says whom to ask.
    let refused = owner.post(&format!("/issues/{issue_id}/send_now"), &json!({}));
    assert_eq!(refused.error_code(402), "payment_required");
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ask the operator of this Broadsheet installation")
    );

    // An operator who owns the newsletter: one click, back on the send page, ready to send.
    let (url, _) = send_page(&operator);
    let page = operator.client.get(&url);
    assert!(page.body.contains("Make this newsletter paid"));
    assert!(page.body.contains(OPERATOR_LINK));
    let resp = operator.client.submit(
        &url,
        "/operator/tier",
        &[
            ("subdomain", &operator.subdomain),
            ("tier", "paid"),
            ("return_to", &url),
        ],
    );
    assert_eq!(resp.redirect(), url);
    let page = operator.client.get(&url);
    assert!(
        page.body.contains("id=\"recipient-count\""),
        "{}",
        page.body
    );
}
