//! The Stripe fake itself (tests/it/support/stripe.rs), without the Broadsheet server: the
//! requests the server will make go through the proxy, and what comes back, the hosted pages
//! and the webhooks localstripe and the fake send are what the server's tests will rely on.

use std::time::Duration;

use crate::support::receiver::{Hook, Receiver};
use crate::support::stripe::{self, StripeFake};
use crate::support::*;

const SECRET: &str = "whsec_stripe_fake_self_test";

/// A form POST to the proxy as the server makes it: a bearer secret key and a pinned version.
fn post(client: &Client, path: &str, pairs: &[(&str, &str)]) -> Resp {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    client
        .request(
            "POST",
            path,
            &[
                ("Authorization", "Bearer sk_test_x"),
                ("Stripe-Version", stripe::API_VERSION),
            ],
            Some(("application/x-www-form-urlencoded", body.into_bytes())),
        )
        .unwrap()
}

/// A monthly plan of 5.00 USD, made as the server makes it; its id.
fn make_plan(client: &Client, id: &str) -> String {
    let resp = post(
        client,
        "/v1/plans",
        &[
            ("id", id),
            ("product[name]", "Field Notes (paid)"),
            ("amount", "500"),
            ("currency", "usd"),
            ("interval", "month"),
        ],
    );
    resp.expect(200);
    let plan = resp.json();
    assert_eq!(plan["id"], id);
    assert_eq!(plan["amount"], 500);
    id.to_string()
}

fn event_type(hook: &Hook) -> String {
    hook.json()["type"].as_str().unwrap_or("").to_string()
}

/// Waits for the first hook of each of `kinds`; checks each one's `Stripe-Signature`.
fn wait_for_hooks(receiver: &Receiver, kinds: &[&str]) -> Vec<Value> {
    kinds
        .iter()
        .map(|kind| {
            let hook = wait_for(
                &format!("a {kind} webhook"),
                Duration::from_secs(20),
                || {
                    receiver
                        .hooks()
                        .into_iter()
                        .find(|h| event_type(h) == *kind)
                },
            );
            let signature = hook.header("Stripe-Signature").to_string();
            assert!(
                stripe::verify_signature(&signature, SECRET, &hook.body),
                "{kind}: {signature} does not sign the body with the secret"
            );
            assert!(
                !stripe::verify_signature(&signature, "whsec_other", &hook.body),
                "{kind}: another secret verifies too"
            );
            hook.json()
        })
        .collect()
}

/// The types of the hooks received so far, in order.
fn kinds(receiver: &Receiver) -> Vec<String> {
    receiver.hooks().iter().map(event_type).collect()
}

fn checkout(client: &Client, plan: &str, email: &str, extra: &[(&str, &str)]) -> Value {
    let mut pairs = vec![
        ("mode", "subscription"),
        ("line_items[0][price]", plan),
        ("line_items[0][quantity]", "1"),
        ("client_reference_id", "42"),
        ("customer_email", email),
        (
            "success_url",
            "http://127.0.0.1:9/subscribed?session={CHECKOUT_SESSION_ID}",
        ),
        ("cancel_url", "http://127.0.0.1:9/cancelled"),
        ("subscription_data[metadata][broadsheet_subscriber]", "42"),
        ("metadata[broadsheet_subscriber]", "42"),
    ];
    // `extra` adds parameters, or replaces the ones of the same name.
    pairs.retain(|(name, _)| !extra.iter().any(|(e, _)| e == name));
    pairs.extend_from_slice(extra);
    let resp = post(client, "/v1/checkout/sessions", &pairs);
    resp.expect(200);
    resp.json()
}

#[test]
#[cfg_attr(
    not(has_localstripe),
    ignore = "needs localstripe in target/py (pip install localstripe)"
)]
fn stripe_fake_checkout_pays_sends_signed_events_and_the_portal_cancels() {
    let fake = StripeFake::start();
    let client = Client::new(&fake.api_base());
    let receiver = Receiver::start();
    fake.register_webhook(&receiver.url, SECRET);

    let plan = make_plan(&client, "broadsheet-monthly");
    let recorded = fake.requests_to("POST", "/v1/plans");
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        recorded[0].stripe_version.as_deref(),
        Some(stripe::API_VERSION)
    );
    assert_eq!(
        recorded[0].authorization.as_deref(),
        Some("Bearer sk_test_x")
    );
    assert_eq!(
        recorded[0].field("product[name]"),
        Some("Field Notes (paid)")
    );

    let email = unique_email("reader");
    let session = checkout(&client, &plan, &email, &[]);
    let id = session["id"].as_str().unwrap();
    assert!(id.starts_with("cs_test_"), "{session}");
    assert_eq!(session["object"], "checkout.session");
    assert_eq!(session["mode"], "subscription");
    assert_eq!(session["status"], "open");
    assert_eq!(session["amount_total"], 500);
    let url = session["url"].as_str().unwrap();
    assert_eq!(url, format!("{}/checkout/{id}", fake.api_base()));
    let recorded = fake.requests_to("POST", "/v1/checkout/sessions");
    assert_eq!(
        recorded[0].field("line_items[0][price]"),
        Some(plan.as_str())
    );
    assert_eq!(recorded[0].field("client_reference_id"), Some("42"));

    // The hosted page a browser sees.
    let page = client.get(url);
    page.expect(200);
    assert!(page.body.contains("5.00 USD per month"), "{}", page.body);
    assert!(
        page.body
            .contains(&format!("action=\"/checkout/{id}/pay\"")),
        "{}",
        page.body
    );
    assert!(page.body.contains(">Pay</button>"), "{}", page.body);

    let success = fake.pay(url);
    assert_eq!(
        success,
        format!("http://127.0.0.1:9/subscribed?session={id}")
    );
    // Paid once only.
    let again = client
        .request("POST", &format!("/checkout/{id}/pay"), &[], None)
        .unwrap();
    again.expect(409);

    let [completed, created, paid] = wait_for_hooks(
        &receiver,
        &[
            "checkout.session.completed",
            "customer.subscription.created",
            "invoice.paid",
        ],
    )
    .try_into()
    .unwrap();
    assert_eq!(completed["api_version"], stripe::API_VERSION);
    let done = &completed["data"]["object"];
    assert_eq!(done["id"], id);
    assert_eq!(done["object"], "checkout.session");
    assert_eq!(done["mode"], "subscription");
    assert_eq!(done["status"], "complete");
    assert_eq!(done["payment_status"], "paid");
    assert_eq!(done["client_reference_id"], "42");
    assert_eq!(done["metadata"]["broadsheet_subscriber"], "42");
    assert_eq!(done["customer_details"]["email"], email.as_str());
    let customer = done["customer"].as_str().unwrap();
    let sub_id = done["subscription"].as_str().unwrap();
    assert!(
        customer.starts_with("cus_") && sub_id.starts_with("sub_"),
        "{done}"
    );
    assert_eq!(fake.checkout_session(id)["status"], "complete");

    let sub = &created["data"]["object"];
    assert_eq!(sub["id"], sub_id);
    assert_eq!(sub["customer"], customer);
    assert_eq!(sub["status"], "active");
    assert_eq!(sub["cancel_at_period_end"], false);
    assert_eq!(sub["metadata"]["broadsheet_subscriber"], "42");
    let item_plan = &sub["items"]["data"][0]["plan"];
    assert_eq!(item_plan["id"], plan.as_str());
    assert_eq!(item_plan["interval"], "month");
    assert_eq!(item_plan["amount"], 500);
    let (start, end) = (
        sub["current_period_start"].as_i64().unwrap(),
        sub["current_period_end"].as_i64().unwrap(),
    );
    assert!((28 * 86400..=31 * 86400).contains(&(end - start)), "{sub}");

    let invoice = &paid["data"]["object"];
    assert_eq!(invoice["object"], "invoice");
    assert_eq!(invoice["subscription"], sub_id);
    assert_eq!(invoice["customer"], customer);
    assert_eq!(invoice["status"], "paid");
    assert_eq!(invoice["amount_paid"], 500);
    assert_eq!(invoice["lines"]["data"][0]["plan"]["id"], plan.as_str());
    assert_eq!(invoice["lines"]["data"][0]["period"]["end"], end);

    // localstripe's own events go first (in the order it made them), the session's last.
    fake.wait_for_event("checkout.session.completed");
    assert_eq!(
        kinds(&receiver),
        [
            "customer.subscription.created",
            "invoice.paid",
            "checkout.session.completed"
        ]
    );
    let customer_now = fake.customer(customer);
    assert_eq!(customer_now["email"], email.as_str());
    assert!(
        customer_now["invoice_settings"]["default_payment_method"]
            .as_str()
            .is_some_and(|pm| pm.starts_with("pm_")),
        "{customer_now}"
    );

    // The billing portal.
    let resp = post(
        &client,
        "/v1/billing_portal/sessions",
        &[
            ("customer", customer),
            ("return_url", "http://127.0.0.1:9/account"),
        ],
    );
    resp.expect(200);
    let portal = resp.json();
    assert_eq!(portal["object"], "billing_portal.session");
    assert_eq!(portal["customer"], customer);
    let portal_url = portal["url"].as_str().unwrap();
    assert!(portal_url.starts_with(&format!("{}/portal/bps_", fake.api_base())));
    let page = client.get(portal_url);
    page.expect(200);
    assert!(
        page.body.contains(">Cancel subscription</button>"),
        "{}",
        page.body
    );
    assert!(page.body.contains(">Back</button>"), "{}", page.body);

    assert_eq!(
        fake.cancel_in_portal(portal_url),
        "http://127.0.0.1:9/account"
    );
    let cancelled = fake.subscription(sub_id);
    assert_eq!(cancelled["status"], "active");
    assert_eq!(cancelled["cancel_at_period_end"], true);
    assert_eq!(cancelled["cancel_at"], end);
    assert!(cancelled["canceled_at"].is_i64(), "{cancelled}");
    let [updated] = wait_for_hooks(&receiver, &["customer.subscription.updated"])
        .try_into()
        .unwrap();
    assert_eq!(updated["data"]["object"]["cancel_at_period_end"], true);
    assert_eq!(
        updated["data"]["previous_attributes"]["cancel_at_period_end"],
        false
    );
    let page = client.get(portal_url);
    assert!(
        page.body.contains(">Renew subscription</button>"),
        "{}",
        page.body
    );

    // The period ends.
    fake.end_subscription(sub_id);
    let [deleted] = wait_for_hooks(&receiver, &["customer.subscription.deleted"])
        .try_into()
        .unwrap();
    assert_eq!(deleted["data"]["object"]["id"], sub_id);
    assert_eq!(deleted["data"]["object"]["status"], "canceled");
    assert_eq!(fake.subscription(sub_id)["status"], "canceled");
}

#[test]
#[cfg_attr(
    not(has_localstripe),
    ignore = "needs localstripe in target/py (pip install localstripe)"
)]
fn stripe_fake_trial_through_the_pay_form_then_billing_until_a_card_is_declined() {
    let fake = StripeFake::start();
    let client = Client::new(&fake.api_base());
    let receiver = Receiver::start();
    fake.register_webhook(&receiver.url, SECRET);
    let plan = make_plan(&client, "broadsheet-monthly-trial");
    let session = checkout(
        &client,
        &plan,
        &unique_email("trial"),
        &[("subscription_data[trial_period_days]", "14")],
    );
    let id = session["id"].as_str().unwrap();
    assert_eq!(session["amount_total"], 0);
    let page = client.get(session["url"].as_str().unwrap());
    assert!(page.body.contains("14 days free"), "{}", page.body);

    // The Pay button as a browser posts it (a plain form, no script).
    fake.hold_webhooks();
    let paid = client
        .request("POST", &format!("/checkout/{id}/pay"), &[], None)
        .unwrap();
    assert_eq!(
        paid.header("location"),
        Some(format!("http://127.0.0.1:9/subscribed?session={id}").as_str())
    );
    assert_eq!(paid.status, 303);
    // Held: made, not sent.
    let sub_id = fake.checkout_session(id)["subscription"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        fake.deliveries()
            .iter()
            .all(|d| d["type"] != "customer.subscription.created")
    );
    fake.release_webhooks();

    let [completed, created] = wait_for_hooks(
        &receiver,
        &[
            "checkout.session.completed",
            "customer.subscription.created",
        ],
    )
    .try_into()
    .unwrap();
    assert_eq!(
        completed["data"]["object"]["payment_status"],
        "no_payment_required"
    );
    let sub = &created["data"]["object"];
    assert_eq!(sub["id"], sub_id.as_str());
    assert_eq!(sub["status"], "trialing");
    let trial_end = sub["trial_end"].as_i64().unwrap();
    assert_eq!(trial_end - sub["trial_start"].as_i64().unwrap(), 14 * 86400);
    assert_eq!(sub["current_period_end"], trial_end);
    assert!(
        fake.invoices(&sub_id).is_empty(),
        "no invoice during the trial"
    );

    // The trial ends: the first period is billed.
    fake.end_trial(&sub_id);
    let [paid] = wait_for_hooks(&receiver, &["invoice.paid"])
        .try_into()
        .unwrap();
    assert_eq!(paid["data"]["object"]["subscription"], sub_id.as_str());
    assert_eq!(paid["data"]["object"]["amount_paid"], 500);
    let active = fake.subscription(&sub_id);
    assert_eq!(active["status"], "active");
    let updated = wait_for("the update to active", Duration::from_secs(20), || {
        receiver.hooks().into_iter().map(|h| h.json()).find(|e| {
            e["type"] == "customer.subscription.updated"
                && e["data"]["previous_attributes"]["status"] == "trialing"
        })
    });
    assert_eq!(updated["data"]["object"]["status"], "active");

    // A renewal with a declined card.
    let customer = active["customer"].as_str().unwrap();
    fake.fail_payments(customer);
    let invoice = fake.bill(&sub_id);
    assert_eq!(invoice["status"], "open", "{invoice}");
    let [failed] = wait_for_hooks(&receiver, &["invoice.payment_failed"])
        .try_into()
        .unwrap();
    let failed = &failed["data"]["object"];
    assert_eq!(failed["id"], invoice["id"]);
    assert_eq!(failed["subscription"], sub_id.as_str());
    assert_eq!(failed["customer"], customer);
    assert_eq!(failed["status"], "open");
    assert_eq!(failed["amount_paid"], 0);
    assert_eq!(fake.subscription(&sub_id)["status"], "past_due");
    let past_due = wait_for("the update to past_due", Duration::from_secs(20), || {
        receiver.hooks().into_iter().map(|h| h.json()).find(|e| {
            e["type"] == "customer.subscription.updated"
                && e["data"]["object"]["status"] == "past_due"
        })
    });
    assert_eq!(past_due["data"]["previous_attributes"]["status"], "active");

    // A good card again: the next bill is paid, and the subscription is active again.
    fake.use_card(customer, stripe::CARD);
    assert_eq!(fake.bill(&sub_id)["status"], "paid");
    wait_for("active again", Duration::from_secs(20), || {
        (fake.subscription(&sub_id)["status"] == "active").then_some(())
    });
}

#[test]
#[cfg_attr(
    not(has_localstripe),
    ignore = "needs localstripe in target/py (pip install localstripe)"
)]
fn stripe_fake_answers_errors_and_replays_like_stripe() {
    let fake = StripeFake::start();
    let client = Client::new(&fake.api_base());
    let plan = make_plan(&client, "broadsheet-yearly");

    // No key.
    let resp = client
        .request(
            "POST",
            "/v1/checkout/sessions",
            &[],
            Some((
                "application/x-www-form-urlencoded",
                b"mode=subscription".to_vec(),
            )),
        )
        .unwrap();
    assert_eq!(resp.status, 401, "{}", resp.body);
    // An unknown price, an unknown parameter, a customer that does not exist.
    let resp = checkout_resp(&client, &[("line_items[0][price]", "plan_nope")]);
    assert_eq!(resp.status, 400, "{}", resp.body);
    assert_eq!(resp.json()["error"]["code"], "resource_missing");
    assert_eq!(resp.json()["error"]["param"], "line_items[0][price]");
    let resp = checkout_resp(
        &client,
        &[
            ("line_items[0][price]", &plan),
            ("discounts[0][coupon]", "X"),
        ],
    );
    assert_eq!(resp.status, 400, "{}", resp.body);
    assert_eq!(resp.json()["error"]["code"], "parameter_unknown");
    let resp = post(
        &client,
        "/v1/billing_portal/sessions",
        &[
            ("customer", "cus_nope"),
            ("return_url", "http://127.0.0.1:9/"),
        ],
    );
    assert_eq!(resp.status, 400, "{}", resp.body);
    assert_eq!(resp.json()["error"]["code"], "resource_missing");
    // Forwarded to localstripe, its answer back: a subscription that does not exist.
    let resp = client
        .request(
            "GET",
            "/v1/subscriptions/sub_nope",
            &[("Authorization", "Bearer sk_test_x")],
            None,
        )
        .unwrap();
    assert_eq!(resp.status, 404, "{}", resp.body);

    // The same Idempotency-Key: the first answer again; with other parameters, an error.
    let pairs = [
        ("mode", "subscription"),
        ("line_items[0][price]", plan.as_str()),
        ("success_url", "http://127.0.0.1:9/ok"),
    ];
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let keyed = |body: &str| {
        client
            .request(
                "POST",
                "/v1/checkout/sessions",
                &[
                    ("Authorization", "Bearer sk_test_x"),
                    ("Idempotency-Key", "key-1"),
                ],
                Some((
                    "application/x-www-form-urlencoded",
                    body.as_bytes().to_vec(),
                )),
            )
            .unwrap()
    };
    let first = keyed(&body);
    first.expect(200);
    let second = keyed(&body);
    second.expect(200);
    assert_eq!(first.json()["id"], second.json()["id"]);
    assert_eq!(second.header("idempotent-replayed"), Some("true"));
    let other = keyed(&format!("{body}&client_reference_id=7"));
    assert_eq!(other.status, 400, "{}", other.body);
    assert_eq!(other.json()["error"]["type"], "idempotency_error");
    assert_eq!(
        fake.requests_to("POST", "/v1/checkout/sessions")
            .iter()
            .filter(|r| r.idempotency_key.as_deref() == Some("key-1"))
            .count(),
        3
    );

    // Signatures: a known vector, and an event the test makes up, sent and verified.
    assert_eq!(
        fake.sign("whsec_vector", 1_700_000_000, br#"{"id":"evt_1"}"#),
        "t=1700000000,v1=c6014fd4b390b4bc9c887a309c78277b7c4c562fbe61a9e713bfc5da054789da"
    );
    let receiver = Receiver::start();
    let event = fake.event(
        "invoice.payment_failed",
        json!({"id": "in_made_up", "object": "invoice", "subscription": "sub_x"}),
    );
    assert_eq!(fake.send_event(&receiver.url, SECRET, &event), 200);
    let [sent] = wait_for_hooks(&receiver, &["invoice.payment_failed"])
        .try_into()
        .unwrap();
    assert_eq!(sent, event);
    assert_eq!(
        fake.send_payload(&receiver.url, "t=1,v1=00", b"{}"),
        200,
        "the receiver takes anything; a server would refuse it"
    );
    assert!(!stripe::verify_signature("t=1,v1=00", SECRET, b"{}"));
}

fn checkout_resp(client: &Client, extra: &[(&str, &str)]) -> Resp {
    let mut pairs = vec![
        ("mode", "subscription"),
        ("success_url", "http://127.0.0.1:9/ok"),
    ];
    pairs.extend_from_slice(extra);
    post(client, "/v1/checkout/sessions", &pairs)
}

#[test]
#[cfg_attr(
    not(all(has_localstripe, has_chromium)),
    ignore = "needs localstripe in target/py (pip install localstripe) and chromium with chromedriver"
)]
fn stripe_fake_hosted_pages_work_in_chromium() {
    use crate::support::browser::{Driver, click, runtime, wait_for_path, wait_for_text};
    let Some(driver) = Driver::start("stripe fake pages") else {
        return;
    };
    let fake = StripeFake::start();
    let client = Client::new(&fake.api_base());
    // Where the buyer lands: any page that loads (the receiver answers GET /elsewhere).
    let landing = Receiver::start().url.replace("/hook", "/elsewhere");
    let plan = make_plan(&client, "broadsheet-monthly-chromium");
    let session = checkout(
        &client,
        &plan,
        &unique_email("chromium"),
        &[(
            "success_url",
            &format!("{landing}?session={{CHECKOUT_SESSION_ID}}"),
        )],
    );
    let id = session["id"].as_str().unwrap().to_string();
    let checkout_url = session["url"].as_str().unwrap().to_string();
    runtime().block_on(async {
        let c = driver.session().await;
        c.goto(&checkout_url).await.unwrap();
        wait_for_text(&c, "#price", "5.00 USD per month").await;
        click(&c, "button[type=submit]").await;
        wait_for_path(&c, "/elsewhere").await;
        let url = c.current_url().await.unwrap();
        assert_eq!(url.query(), Some(format!("session={id}").as_str()));

        let sub = fake.checkout_session(&id)["subscription"]
            .as_str()
            .unwrap()
            .to_string();
        let customer = fake.subscription(&sub)["customer"]
            .as_str()
            .unwrap()
            .to_string();
        let portal = post(
            &client,
            "/v1/billing_portal/sessions",
            &[("customer", &customer), ("return_url", &landing)],
        )
        .json();
        c.goto(portal["url"].as_str().unwrap()).await.unwrap();
        wait_for_text(&c, "main", "Cancel subscription").await;
        click(&c, "form[action$=\"/cancel\"] button").await;
        wait_for_path(&c, "/elsewhere").await;
        assert_eq!(fake.subscription(&sub)["cancel_at_period_end"], true);
        c.close().await.unwrap();
    });
}
