//! Paid memberships against a stateful fake Stripe (localstripe, with the Checkout and Billing
//! Portal pages played by `support::stripe`), through the real binary: the owner connects
//! Stripe in the dashboard (keys sealed at rest), a reader upgrades (monthly, and yearly with
//! a trial), reads the paid issue on the site and gets it by mail; a failed invoice makes them
//! `past_due` and then free at the period's end; canceling in the portal keeps access until
//! the period ends; replayed, reordered, forged and stale events change nothing wrong; the
//! figures count them.
//!
//! Stripe posts its webhooks to the newsletter's site (`http://<sub>.localhost:<port>`),
//! which this machine cannot resolve: a small forwarder on loopback takes them and passes
//! each on with the site's Host, headers and body untouched.

use std::sync::Arc;
use std::time::Duration;

use poem::listener::TcpAcceptor;
use poem::{EndpointExt, Route, Server, handler, web::Data};

use crate::support::send::{send_now, wait_status};
use crate::support::stripe::{SECRET_KEY, StripeFake};
use crate::support::*;

const SIGNING_SECRET: &str = "whsec_broadsheet_test_secret";
const SECRET: &str = "SECRET-PAID-SENTENCE";

/// Passes Stripe's webhook requests on to one site.
struct Forward {
    site: Client,
}

#[handler]
async fn forward(
    req: &poem::Request,
    body: poem::Body,
    Data(to): Data<&Arc<Forward>>,
) -> poem::Response {
    let body = body.into_vec().await.unwrap_or_default();
    let signature = req.header("Stripe-Signature").unwrap_or("").to_string();
    let to = to.clone();
    let answer = tokio::task::spawn_blocking(move || {
        to.site
            .request(
                "POST",
                "/stripe/webhook",
                &[("Stripe-Signature", &signature)],
                Some(("application/json", body)),
            )
            .map(|r| (r.status, r.body))
            .unwrap_or((599, "unreachable".into()))
    })
    .await
    .unwrap_or((599, "failed".into()));
    poem::Response::builder()
        .status(poem::http::StatusCode::from_u16(answer.0).unwrap_or_default())
        .body(answer.1)
}

/// A forwarder to `site`; its URL.
fn forwarder(site: Client) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let to = Arc::new(Forward { site });
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            listener.set_nonblocking(true).unwrap();
            let acceptor = TcpAcceptor::from_std(listener).unwrap();
            let app = Route::new()
                .at("/stripe/webhook", poem::post(forward))
                .data(to);
            let _ = Server::new_with_acceptor(acceptor).run(app).await;
        });
    });
    format!("http://127.0.0.1:{port}/stripe/webhook")
}

/// The owner saves a plan and connects Stripe in the dashboard.
fn connect(owner: &Owner, monthly: &str, yearly: &str, trial: &str) {
    let base = format!("/newsletters/{}/memberships", owner.newsletter_id);
    let page = owner.client.get(&base);
    page.expect(200);
    assert!(page.body.contains("Not connected"), "{}", page.body);
    let token = page.csrf_token();
    owner
        .client
        .post_form(
            &format!("{base}/plan"),
            &[
                ("authenticity_token", &token),
                ("plan[currency]", "eur"),
                ("plan[monthly]", monthly),
                ("plan[yearly]", yearly),
                ("plan[trial_days]", trial),
                (
                    "plan[description]",
                    "Every paid issue and the whole archive.",
                ),
            ],
        )
        .redirect();
    // A key of the wrong kind is refused and nothing is stored.
    let refused = owner.client.post_form(
        &format!("{base}/stripe"),
        &[
            ("authenticity_token", &token),
            ("stripe[secret_key]", "pk_test_publishable"),
            ("stripe[webhook_secret]", SIGNING_SECRET),
        ],
    );
    assert_eq!(refused.status, 422, "{}", refused.body);
    owner
        .client
        .post_form(
            &format!("{base}/stripe"),
            &[
                ("authenticity_token", &token),
                ("stripe[secret_key]", SECRET_KEY),
                ("stripe[webhook_secret]", SIGNING_SECRET),
            ],
        )
        .redirect();
    let page = owner.client.get(&base);
    assert!(
        page.body.contains("Connected with the key ending in"),
        "{}",
        page.body
    );
    assert!(page.body.contains("/stripe/webhook"));
    assert!(!page.body.contains(SECRET_KEY) && !page.body.contains(SIGNING_SECRET));
}

/// Signs `email` in on `site` by the mailed link.
fn sign_in(app: &App, site: &Client, email: &str) {
    let page = site.get("/signin");
    let before = app.smtp.messages_to(email).len();
    site.post_form(
        "/signin",
        &[("authenticity_token", &page.csrf_token()), ("email", email)],
    )
    .expect(200);
    let mail = app.smtp.wait_for_message_to(email, before + 1);
    let link = path_of(&link_containing(&mail.text(), "/signin/").unwrap());
    let confirm = site.get(&link);
    assert_eq!(
        site.post_form(&link, &[("authenticity_token", &confirm.csrf_token())])
            .redirect(),
        "/account"
    );
}

/// Presses a button of the reader's account page; where it sends them.
fn press(site: &Client, action: &str, fields: &[(&str, &str)]) -> String {
    let account = site.get("/account");
    let token = account.csrf_token();
    let mut all = vec![("authenticity_token", token.as_str())];
    all.extend_from_slice(fields);
    let resp = site.post_form(action, &all);
    assert_eq!(resp.status, 303, "{action}: {}", resp.body);
    resp.header("location").unwrap().to_string()
}

fn membership(owner: &Owner, id: i64) -> Value {
    owner.get(&format!("/subscribers/{id}")).json()["membership"].clone()
}

fn wait_membership(owner: &Owner, id: i64, status: &str) -> Value {
    wait_for(
        &format!("membership {status}"),
        Duration::from_secs(20),
        || {
            let m = membership(owner, id);
            (m["status"] == status).then_some(m)
        },
    )
}

#[test]
#[cfg_attr(
    not(has_localstripe),
    ignore = "needs localstripe in target/py (pip install localstripe)"
)]
fn a_reader_upgrades_pays_fails_and_cancels_through_stripe() {
    let fake = StripeFake::start();
    let app = spawn_app_with(&["--stripe-api-url", &fake.api_base()]);
    let owner = onboard_paid(&app, "Harbour Paid");
    set_sender(&owner);
    listen(
        &app,
        &owner,
        &[
            "member.upgraded",
            "member.downgraded",
            "member.payment_failed",
        ],
    );
    connect(&owner, "5", "50", "0");
    let sealed: Vec<u8> = app
        .db()
        .query_row(
            "SELECT secret_key_sealed FROM stripe_connections",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&sealed).contains("sk_test"),
        "the key is sealed"
    );
    let site = app.site_client(&owner.subdomain);
    fake.register_webhook(
        &forwarder(app.site_client(&owner.subdomain)),
        SIGNING_SECRET,
    );

    // The plan is on the subscribe page.
    let subscribe = site.get("/subscribe");
    assert!(
        subscribe
            .body
            .contains("5.00 EUR a month or 50.00 EUR a year"),
        "{}",
        subscribe.body
    );

    let email = unique_email("payer");
    let created = owner.post("/subscribers", &json!({"email": email}));
    let id = created.json()["id"].as_i64().unwrap();
    sign_in(&app, &site, &email);

    // Upgrade monthly: a Checkout Session for the plan made now, then the hosted page.
    let checkout = press(&site, "/account/upgrade", &[("interval", "month")]);
    let asked = fake.requests_to("POST", "/v1/checkout/sessions");
    let session = asked.last().expect("a checkout session");
    assert_eq!(session.stripe_version.as_deref(), Some("2024-06-20"));
    assert_eq!(
        session.field("client_reference_id"),
        Some(id.to_string().as_str())
    );
    assert_eq!(session.field("customer_email"), Some(email.as_str()));
    let plans = fake.requests_to("POST", "/v1/plans");
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].field("amount"), Some("500"));
    assert_eq!(plans[0].field("interval"), Some("month"));
    let success = fake.pay(&checkout);
    assert!(success.ends_with("/account?upgraded=1"), "{success}");
    let m = wait_membership(&owner, id, "paid");
    assert_eq!(m["interval"], "month");
    assert!(m["until"].is_string(), "{m}");
    assert_eq!(last_event(&app, "member.upgraded")["email"], email);
    fake.wait_for_event("checkout.session.completed");

    // The paid issue: on the site and by mail.
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "For members", "status": "approved", "visibility": "paid",
            "content_markdown": format!("Opening words.\n\n{}\n\n{SECRET}", "More. ".repeat(60))}}),
    );
    issue.expect(201);
    let issue_id = issue.json()["id"].as_i64().unwrap();
    assert_eq!(send_now(&owner, issue_id), 1);
    wait_status(&owner, issue_id, "sent", Duration::from_secs(30));
    assert!(
        app.smtp
            .wait_for_message_to(&email, 2)
            .text()
            .contains(SECRET)
    );
    let published = owner.post(&format!("/issues/{issue_id}/publish"), &json!({}));
    let path = path_of(published.json()["web_url"].as_str().unwrap());
    assert!(site.get(&path).body.contains(SECRET));
    assert!(
        !app.site_client(&owner.subdomain)
            .get(&path)
            .body
            .contains(SECRET)
    );
    let stats = owner.get("/newsletter/stats").json();
    let figures = &stats["data"]["memberships"];
    assert_eq!(figures["paid_members"], 1, "{figures}");
    assert_eq!(figures["monthly_recurring_revenue"], 500);
    assert_eq!(figures["currency"], "eur");

    // Every event again: each is answered as applied before, and nothing changes.
    let before = membership(&owner, id);
    let deliveries = fake.deliveries().len();
    for event in fake.events() {
        let status = fake.send_event(
            &forwarder(app.site_client(&owner.subdomain)),
            SIGNING_SECRET,
            &event,
        );
        assert_eq!(status, 200, "{event}");
    }
    assert!(fake.deliveries().len() >= deliveries);
    assert_eq!(membership(&owner, id), before);

    // Forged, stale and unsigned events are refused and change nothing.
    let hook = forwarder(app.site_client(&owner.subdomain));
    let subscription_id = fake.checkout_session(session_id(&checkout))["subscription"]
        .as_str()
        .unwrap()
        .to_string();
    let mut forged = fake.subscription(&subscription_id);
    forged["status"] = json!("canceled");
    let forged_event = fake.event("customer.subscription.deleted", forged);
    assert_eq!(
        fake.send_event(&hook, "whsec_someone_else", &forged_event),
        400
    );
    let body = forged_event.to_string();
    let stale = fake.sign(
        SIGNING_SECRET,
        jiff::Timestamp::now().as_second() - 600,
        body.as_bytes(),
    );
    assert_eq!(fake.send_payload(&hook, &stale, body.as_bytes()), 400);
    assert_eq!(fake.send_payload(&hook, "", body.as_bytes()), 400);
    assert_eq!(membership(&owner, id)["status"], "paid");

    // A payment fails: past_due, told to the owner's webhooks, access until the period ends.
    fake.fail_payments(&membership_customer(&app, id));
    fake.bill(&subscription_id);
    wait_membership(&owner, id, "past_due");
    assert!(
        site.get(&path).body.contains(SECRET),
        "past_due keeps access"
    );
    assert_eq!(last_event(&app, "member.payment_failed")["email"], email);
    let account = site.get("/account");
    assert!(
        account.body.contains("the last payment failed"),
        "{}",
        account.body
    );

    // Manage billing opens the portal; cancel there: canceled, paid access until the period
    // ends.
    fake.use_card(&membership_customer(&app, id), crate::support::stripe::CARD);
    fake.bill(&subscription_id);
    wait_membership(&owner, id, "paid");
    let portal = press(&site, "/account/billing", &[]);
    let back = fake.cancel_in_portal(&portal);
    assert!(back.ends_with("/account"), "{back}");
    let m = wait_membership(&owner, id, "canceled");
    assert!(
        site.get(&path).body.contains(SECRET),
        "canceled keeps access until the period ends"
    );
    let stats = owner.get("/newsletter/stats").json();
    assert_eq!(stats["data"]["memberships"]["canceled_last_30_days"], 1);

    // The period ends: Stripe deletes the subscription; free, and the paywall.
    fake.end_subscription(&subscription_id);
    fake.wait_for_event("customer.subscription.deleted");
    let until: jiff::Timestamp = m["until"].as_str().unwrap().parse().unwrap();
    app.set_clock(until + jiff::SignedDuration::from_hours(1));
    wait_membership(&owner, id, "free");
    assert!(!site.get(&path).body.contains(SECRET));
}

/// The Checkout Session id in a hosted page's address.
fn session_id(checkout_url: &str) -> &str {
    checkout_url.rsplit('/').next().unwrap()
}

fn membership_customer(app: &App, id: i64) -> String {
    app.db()
        .query_row(
            "SELECT stripe_customer FROM memberships WHERE subscriber_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
#[cfg_attr(
    not(has_localstripe),
    ignore = "needs localstripe in target/py (pip install localstripe)"
)]
fn a_yearly_trial_and_events_out_of_order() {
    let fake = StripeFake::start();
    let app = spawn_app_with(&["--stripe-api-url", &fake.api_base()]);
    let owner = onboard_paid(&app, "Tide Trial");
    connect(&owner, "", "50", "14");
    let hook = forwarder(app.site_client(&owner.subdomain));
    fake.register_webhook(&hook, SIGNING_SECRET);
    let site = app.site_client(&owner.subdomain);
    let email = unique_email("trial");
    let id = owner.post("/subscribers", &json!({"email": email})).json()["id"]
        .as_i64()
        .unwrap();
    sign_in(&app, &site, &email);
    // Only the yearly price is offered.
    let account = site.get("/account");
    assert!(!account.body.contains("Upgrade monthly") && account.body.contains("Upgrade yearly"));
    fake.hold_webhooks();
    let checkout = press(&site, "/account/upgrade", &[("interval", "year")]);
    let asked = fake.requests_to("POST", "/v1/checkout/sessions");
    assert_eq!(
        asked
            .last()
            .unwrap()
            .field("subscription_data[trial_period_days]"),
        Some("14")
    );
    fake.pay(&checkout);
    // Back from Checkout before any event: the page says it is being confirmed.
    let waiting = site.get("/account?upgraded=1");
    assert!(
        waiting.body.contains("Stripe is confirming"),
        "{}",
        waiting.body
    );
    fake.release_webhooks();
    let m = wait_membership(&owner, id, "trialing");
    assert_eq!(m["interval"], "year");

    // An older state delivered late changes nothing.
    let subscription_id = fake.checkout_session(session_id(&checkout))["subscription"]
        .as_str()
        .unwrap()
        .to_string();
    let mut old = fake.subscription(&subscription_id);
    old["status"] = json!("past_due");
    let mut late = fake.event("customer.subscription.updated", old);
    late["created"] = json!(jiff::Timestamp::now().as_second() - 3600);
    assert_eq!(fake.send_event(&hook, SIGNING_SECRET, &late), 200);
    assert_eq!(membership(&owner, id)["status"], "trialing");
    // An unknown kind is answered and ignored.
    let unknown = fake.event(
        "customer.created",
        json!({"id": "cus_x", "object": "customer"}),
    );
    assert_eq!(fake.send_event(&hook, SIGNING_SECRET, &unknown), 200);

    // The trial ends and the first invoice is paid: paid.
    fake.end_trial(&subscription_id);
    wait_membership(&owner, id, "paid");
    let stats = owner.get("/newsletter/stats").json();
    assert_eq!(
        stats["data"]["memberships"]["monthly_recurring_revenue"], 417,
        "{stats}"
    );
}
