//! Paid memberships against a stateful fake Stripe (localstripe, with the Checkout and Billing
//! Portal pages played by `support::stripe`), through the real binary: the owner connects
//! Stripe in the dashboard (keys sealed at rest), a reader upgrades (monthly, and yearly with
//! a trial), reads the paid issue on the site and gets it by mail; a failed invoice makes them
//! `past_due` and then free at the period's end; canceling in the portal keeps access until
//! the period ends; replayed, reordered, forged and stale events change nothing wrong; the
//! figures count them; and the reader's whole path in Chromium.
//!
//! Stripe posts its webhooks to the newsletter's site (`http://<sub>.localhost:<port>`),
//! which this machine cannot resolve: a small forwarder on loopback takes them and passes
//! each on with the site's Host, headers and body untouched.

use std::sync::Arc;
use std::time::Duration;

use poem::{EndpointExt, Route, handler, web::Data};

use crate::memberships::sign_in;
use crate::support::net::serve;
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
    let port = serve(
        Route::new()
            .at("/stripe/webhook", poem::post(forward))
            .data(Arc::new(Forward { site })),
    );
    format!("http://127.0.0.1:{port}/stripe/webhook")
}

/// The owner saves a plan (prices in euros) in the dashboard.
pub(crate) fn save_plan(owner: &Owner, monthly: &str, yearly: &str, trial: &str) {
    let base = format!("/newsletters/{}/memberships", owner.newsletter_id);
    let token = owner.client.get(&base).csrf_token();
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
}

/// The owner saves a plan and connects Stripe in the dashboard.
pub(crate) fn connect(owner: &Owner, monthly: &str, yearly: &str, trial: &str) {
    let base = format!("/newsletters/{}/memberships", owner.newsletter_id);
    let page = owner.client.get(&base);
    page.expect(200);
    assert!(page.body.contains("Not connected"), "{}", page.body);
    save_plan(owner, monthly, yearly, trial);
    let token = owner.client.get(&base).csrf_token();
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

/// Presses an Upgrade button of the account page as though it showed `amount` (in cents)
/// for `interval` (`month`, `year`); the answer.
pub(crate) fn press_upgrade(site: &Client, interval: &str, amount: &str) -> Resp {
    let token = site.get("/account").csrf_token();
    site.post_form(
        "/account/upgrade",
        &[
            ("authenticity_token", &token),
            ("interval", interval),
            ("amount", amount),
        ],
    )
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
    let hook = forwarder(app.site_client(&owner.subdomain));
    fake.register_webhook(&hook, SIGNING_SECRET);

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
    let checkout = press(
        &site,
        "/account/upgrade",
        &[("interval", "month"), ("amount", "500")],
    );
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
    for event in fake.events() {
        let status = fake.send_event(&hook, SIGNING_SECRET, &event);
        assert_eq!(status, 200, "{event}");
    }
    assert_eq!(membership(&owner, id), before);

    // Forged, stale and unsigned events are refused and change nothing.
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
    assert!(
        account.body.contains("Upgrade yearly (50.00 EUR)"),
        "{}",
        account.body
    );
    // The owner raises the price while the reader looks at 50 EUR: their press is refused
    // with the price of now, and nothing reaches Stripe.
    save_plan(&owner, "", "60", "14");
    let stale = press_upgrade(&site, "year", "5000");
    assert_eq!(stale.status, 422, "{}", stale.body);
    assert!(
        stale.body.contains("it is now 60.00 EUR a year"),
        "{}",
        stale.body
    );
    assert!(fake.requests_to("POST", "/v1/checkout/sessions").is_empty());
    assert!(
        site.get("/account")
            .body
            .contains("Upgrade yearly (60.00 EUR)")
    );
    fake.hold_webhooks();
    let checkout = press(
        &site,
        "/account/upgrade",
        &[("interval", "year"), ("amount", "6000")],
    );
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
        stats["data"]["memberships"]["monthly_recurring_revenue"], 500,
        "{stats}"
    );
}

#[test]
#[cfg_attr(
    not(all(has_localstripe, has_chromium)),
    ignore = "needs localstripe in target/py (pip install localstripe) and chromium with chromedriver"
)]
fn a_reader_subscribes_signs_in_upgrades_reads_and_cancels_in_chromium() {
    use crate::support::browser::sign_in as sign_in_owner;
    use crate::support::browser::{
        Driver, assert_fits, click, fill, runtime, screenshot, wait_for_path, wait_for_text,
    };
    let Some(driver) = Driver::start("reader path") else {
        return;
    };
    let Some(axe) = crate::support::axe::Axe::load("reader path") else {
        return;
    };
    let mut violations = Vec::new();
    let fake = StripeFake::start();
    let app = spawn_app_with(&["--stripe-api-url", &fake.api_base()]);
    let owner = onboard_paid(&app, "Lantern Paid");
    set_sender(&owner);
    connect(&owner, "5", "50", "0");
    fake.register_webhook(
        &forwarder(app.site_client(&owner.subdomain)),
        SIGNING_SECRET,
    );
    let created = owner.post(
        "/issues",
        &json!({"issue": {"subject": "The lantern ledger", "status": "approved", "visibility": "paid",
            "content_markdown": format!("The ledger opens for members.\n\n{}\n\n{SECRET}.", "Lamp oil and wicks. ".repeat(30))}}),
    );
    created.expect(201);
    let issue_id = created.json()["id"].as_i64().unwrap();
    let web_url = owner
        .post(&format!("/issues/{issue_id}/publish"), &json!({}))
        .json()["web_url"]
        .as_str()
        .unwrap()
        .to_string();
    // Chromium resolves *.localhost to this machine: the site by its own name.
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);
    let email = unique_email("lantern-reader");

    runtime().block_on(async {
        let c = driver.session().await;
        // Subscribe, seeing the plan, and confirm from the mail.
        c.goto(&format!("{origin}/subscribe")).await.unwrap();
        wait_for_text(&c, "main", "5.00 EUR a month or 50.00 EUR a year").await;
        fill(&c, "email", &email).await;
        click(&c, "form.subscribe button[type=submit]").await;
        wait_for_text(&c, "main", "Check your inbox").await;
        let mail = app.smtp.wait_for_message_to(&email, 1);
        let confirm = link_containing(&mail.text(), "/subscribe/confirm/").unwrap();
        c.goto(&confirm).await.unwrap();
        click(&c, "main form button[type=submit]").await;
        wait_for_text(&c, "main", "subscribed").await;

        // The paid issue: its excerpt and the paywall, not its text.
        c.goto(&web_url).await.unwrap();
        let paywall = wait_for_text(&c, "main", "This issue is for paid members").await;
        assert!(!paywall.contains(SECRET), "{paywall}");
        violations.extend(crate::accessibility::check(&driver, &axe, &c, "paywall").await);
        c.set_window_size(390, 844).await.unwrap();
        assert_fits(&c, 390, "the paywall").await;
        screenshot(&c, "reader-paywall-phone").await;
        c.set_window_size(1280, 900).await.unwrap();

        // Sign in by the mailed link.
        click(&c, ".paywall a[href=\"/signin\"]").await;
        wait_for_path(&c, "/signin").await;
        violations.extend(crate::accessibility::check(&driver, &axe, &c, "sign in").await);
        let before = app.smtp.messages_to(&email).len();
        fill(&c, "email", &email).await;
        click(&c, "form.subscribe button[type=submit]").await;
        wait_for_text(&c, "main", "a sign-in link is on its way").await;
        let mail = app.smtp.wait_for_message_to(&email, before + 1);
        let link = link_containing(&mail.text(), "/signin/").unwrap();
        c.goto(&link).await.unwrap();
        click(&c, "main form button[type=submit]").await;
        wait_for_path(&c, "/account").await;
        wait_for_text(&c, "main", "Free membership").await;
        violations.extend(crate::accessibility::check(&driver, &axe, &c, "account").await);
        c.set_window_size(390, 844).await.unwrap();
        assert_fits(&c, 390, "the account page").await;
        screenshot(&c, "reader-account-phone").await;
        c.set_window_size(1280, 900).await.unwrap();

        // Upgrade monthly: Stripe's Checkout (the fake's page), paid, back to the account.
        click(&c, "form[action=\"/account/upgrade\"] button").await;
        wait_for_text(&c, "#price", "5.00 EUR per month").await;
        click(&c, "button[type=submit]").await;
        wait_for_path(&c, "/account").await;
        let listed = owner.get("/subscribers").json();
        let id = listed["subscribers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["email"] == email.as_str())
            .expect("the reader is a subscriber")["id"]
            .as_i64()
            .unwrap();
        wait_membership(&owner, id, "paid");
        c.goto(&format!("{origin}/account")).await.unwrap();
        wait_for_text(&c, "main", "Paid member (monthly)").await;
        violations.extend(crate::accessibility::check(&driver, &axe, &c, "paid account").await);

        // Read the issue now.
        c.goto(&web_url).await.unwrap();
        wait_for_text(&c, "main", SECRET).await;

        // Manage billing: the Billing Portal cancels; access lasts until the period ends.
        c.goto(&format!("{origin}/account")).await.unwrap();
        click(&c, "form[action=\"/account/billing\"] button").await;
        wait_for_text(&c, "main", "Cancel subscription").await;
        click(&c, "form[action$=\"/cancel\"] button").await;
        wait_for_path(&c, "/account").await;
        wait_membership(&owner, id, "canceled");
        c.goto(&format!("{origin}/account")).await.unwrap();
        wait_for_text(&c, "main", "Canceled: paid access lasts until").await;
        c.goto(&web_url).await.unwrap();
        wait_for_text(&c, "main", SECRET).await;
        // The owner sends the issue to paid members only: the send page's count follows the
        // choice, and the send goes to the one it counted.
        let bystander = unique_email("lantern-free");
        owner
            .post("/subscribers", &json!({"email": bystander}))
            .expect(201);
        sign_in_owner(&c, &app.base_url, &owner.email).await;
        let send = format!(
            "/newsletters/{}/issues/{issue_id}/send",
            owner.newsletter_id
        );
        c.goto(&format!("{}{send}", app.base_url)).await.unwrap();
        wait_for_text(&c, "#send-button", "Send to 2 subscribers").await;
        click(&c, "input[name=mailed_to][value=paid]").await;
        wait_for_text(&c, "#send-button", "Send to 1 subscriber").await;
        click(&c, "#send-button").await;
        wait_for_path(
            &c,
            &format!("/newsletters/{}/issues/{issue_id}", owner.newsletter_id),
        )
        .await;
        wait_status(&owner, issue_id, "sent", Duration::from_secs(30));
        // Sent means delivered: the paid issue is in the reader's mail, whole.
        assert!(
            app.smtp
                .messages_to(&email)
                .iter()
                .any(|m| m.text().contains(SECRET))
        );
        assert!(app.smtp.messages_to(&bystander).is_empty());

        // The site logs nothing (the fake's hosted pages have no favicon: not ours).
        let errors: Vec<String> = driver
            .console_errors(&c)
            .await
            .into_iter()
            .filter(|e| !e.starts_with(&fake.api_base()))
            .collect();
        assert!(errors.is_empty(), "browser console: {errors:?}");
        c.close().await.unwrap();
    });
    assert!(
        violations.is_empty(),
        "axe-core:\n{}",
        violations.join("\n")
    );
}
