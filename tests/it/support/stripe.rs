//! A stateful fake Stripe: localstripe (PyPI, in the virtualenv `target/py`) behind a small
//! proxy that plays what localstripe lacks, Checkout and the Billing Portal.
//!
//! [`StripeFake::start`] starts, for one test, localstripe as a child process (through
//! `run_localstripe.py` beside this file, which listens on a loopback port of its own choosing
//! and mends what the tests need: see the top of that file), then the proxy on another
//! loopback port. The Broadsheet server is given [`StripeFake::api_base`] as its Stripe API
//! base. The proxy forwards every request it does not answer itself to localstripe, records
//! every request ([`StripeFake::requests`]), and answers:
//!
//! - `POST /v1/checkout/sessions` (subscription mode), `GET /v1/checkout/sessions/ID`,
//!   `POST /v1/checkout/sessions/ID/expire`, `POST /v1/billing_portal/sessions`, as Stripe does;
//! - the hosted pages those sessions' `url`s lead to, plain HTML forms that headless Chromium
//!   can use too: `GET /checkout/ID` (the price and a Pay button) and `GET /portal/ID` (Cancel
//!   or Renew each subscription, and Back).
//!
//! Paying makes in localstripe what Checkout makes in Stripe (the customer, a card payment
//! method set as the customer's `invoice_settings[default_payment_method]`, the subscription),
//! then has localstripe send `checkout.session.completed` after its own events, and sends the
//! buyer to the `success_url`. [`StripeFake::pay`] and [`StripeFake::cancel_in_portal`] do what
//! the buttons do, for tests without a browser. Everything stops when the fake is dropped.
//!
//! Without localstripe, [`StripeFake::start`] panics. The build script sets `cfg(has_localstripe)`
//! when `target/py/bin/localstripe` exists (or under `BROADSHEET_REQUIRE_STRIPE=1`); tests that
//! use the fake carry `#[cfg_attr(not(has_localstripe), ignore = "needs localstripe in target/py
//! (pip install localstripe)")]`. docs/testing.md ("The Stripe fake") has the whole story.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use poem::http::StatusCode;
use poem::listener::TcpAcceptor;
use poem::{Request, Response, Server};
use rand::Rng;
use serde_json::{Value, json};
use sha2::Sha256;

/// The `Stripe-Version` the server is expected to send, and the `api_version` of every event.
pub const API_VERSION: &str = "2024-06-20";
/// A secret key for the server: localstripe takes any `sk_test_...`.
pub const SECRET_KEY: &str = "sk_test_broadsheet_fake";
/// The events [`StripeFake::register_webhook`] subscribes to.
pub const EVENTS: &[&str] = &[
    "checkout.session.completed",
    "checkout.session.expired",
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "invoice.paid",
    "invoice.payment_failed",
];
/// The card Checkout pays with.
pub const CARD: &str = "4242424242424242";
/// A card that attaches but whose every charge is declined (Stripe's test card for that).
pub const DECLINING_CARD: &str = "4000000000000341";

/// One request the proxy received (from the server, or from a browser on a hosted page).
#[derive(Debug, Clone)]
pub struct StripeRequest {
    pub method: String,
    /// Without the query.
    pub path: String,
    /// The raw query string, `""` when there is none.
    pub query: String,
    /// The pairs of a form-encoded body, in order (`line_items[0][price]`, ...).
    pub form: Vec<(String, String)>,
    pub stripe_version: Option<String>,
    pub authorization: Option<String>,
    pub idempotency_key: Option<String>,
}

impl StripeRequest {
    /// The first value of `name` in the form, else in the query.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.form
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .or_else(|| {
                self.query
                    .split('&')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v)
            })
    }
}

/// A Checkout Session: the object Stripe shows, and what paying needs.
#[derive(Clone)]
struct Checkout {
    object: Value,
    plan: String,
    quantity: String,
    trial_period_days: Option<String>,
    subscription_metadata: Vec<(String, String)>,
    paying: bool,
}

/// An answer kept for an `Idempotency-Key`.
#[derive(Clone)]
struct Replay {
    request: (String, String, Vec<u8>),
    reply: Reply,
}

#[derive(Default)]
struct State {
    checkouts: HashMap<String, Checkout>,
    portals: HashMap<String, Value>,
    requests: Vec<StripeRequest>,
    /// Registered webhook URLs; a URL's index is its id in localstripe.
    webhooks: Vec<String>,
    replays: HashMap<String, Replay>,
}

struct Shared {
    /// `http://127.0.0.1:PORT` of localstripe.
    localstripe: String,
    /// `http://127.0.0.1:PORT` of the proxy.
    base: String,
    agent: ureq::Agent,
    state: Mutex<State>,
}

/// A request as the proxy's routes see it.
struct Incoming {
    method: String,
    path: String,
    query: String,
    authorization: Option<String>,
    content_type: Option<String>,
    idempotency_key: Option<String>,
    body: Vec<u8>,
    form: Vec<(String, String)>,
}

impl Incoming {
    fn field(&self, name: &str) -> Option<&str> {
        self.form
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer of the proxy.
#[derive(Clone)]
struct Reply {
    status: u16,
    content_type: String,
    body: Vec<u8>,
    location: Option<String>,
    replayed: bool,
}

impl Reply {
    fn json(status: u16, value: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json".into(),
            body: serde_json::to_vec_pretty(value).expect("JSON"),
            location: None,
            replayed: false,
        }
    }

    /// Stripe's error shape.
    fn error(
        status: u16,
        kind: &str,
        code: Option<&str>,
        param: Option<&str>,
        message: &str,
    ) -> Reply {
        let mut error = json!({"type": kind, "message": message});
        if let Some(code) = code {
            error["code"] = json!(code);
        }
        if let Some(param) = param {
            error["param"] = json!(param);
        }
        Reply::json(status, &json!({ "error": error }))
    }

    fn invalid(param: &str, message: &str) -> Reply {
        Reply::error(
            400,
            "invalid_request_error",
            Some("parameter_invalid"),
            Some(param),
            message,
        )
    }

    fn missing(param: &str, message: &str) -> Reply {
        Reply::error(
            400,
            "invalid_request_error",
            Some("resource_missing"),
            Some(param),
            message,
        )
    }

    fn page(status: u16, markup: maud::Markup) -> Reply {
        Reply {
            status,
            content_type: "text/html; charset=utf-8".into(),
            body: markup.into_string().into_bytes(),
            location: None,
            replayed: false,
        }
    }

    fn see_other(location: &str) -> Reply {
        Reply {
            status: 303,
            content_type: "text/plain; charset=utf-8".into(),
            body: format!("See {location}").into_bytes(),
            location: Some(location.to_string()),
            replayed: false,
        }
    }
}

/// localstripe and the proxy, for one test.
pub struct StripeFake {
    shared: Arc<Shared>,
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    _dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    proxy: Option<std::thread::JoinHandle<()>>,
}

fn venv() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/py")
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

fn random_id(prefix: &str, n: usize) -> String {
    let tail: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(n)
        .map(char::from)
        .collect();
    format!("{prefix}{tail}")
}

fn form_body(pairs: &[(&str, &str)]) -> Vec<u8> {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
        .into_bytes()
}

fn parse_form(body: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// `t=<timestamp>,v1=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed with secret>`: Stripe's
/// `Stripe-Signature` header.
pub fn stripe_signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(body);
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// Whether `header` (a `Stripe-Signature`) signs `body` with `secret`: one of its `v1` values
/// is the HMAC of its `t`. The timestamp's age is not looked at.
pub fn verify_signature(header: &str, secret: &str, body: &[u8]) -> bool {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", v)) => signatures.push(v.to_string()),
            _ => {}
        }
    }
    let Some(timestamp) = timestamp else {
        return false;
    };
    let expected = stripe_signature(secret, timestamp, body);
    let expected = expected.split_once(",v1=").expect("our own shape").1;
    signatures.iter().any(|s| s == expected)
}

fn missing_localstripe(why: &str) -> ! {
    panic!(
        "\n\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
         !! STRIPE TESTS CANNOT RUN: no localstripe to stand in for Stripe.\n\
         !! {why}\n\
         !! Install it: python3 -m venv target/py && \
         target/py/bin/pip install localstripe==1.15.10 && touch build.rs\n\
         !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
    )
}

impl StripeFake {
    /// Starts localstripe and the proxy; panics loudly when localstripe is not installed.
    pub fn start() -> StripeFake {
        let venv = venv();
        if !venv.join("bin/localstripe").is_file() {
            missing_localstripe(&format!(
                "{} is missing",
                venv.join("bin/localstripe").display()
            ));
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("localstripe.log");
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/run_localstripe.py");
        let mut child = Command::new(venv.join("bin/python"))
            .arg(&script)
            .args(["--api-version", API_VERSION])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("the log file"))
            .spawn()
            .unwrap_or_else(|e| missing_localstripe(&format!("running {}: {e}", script.display())));
        let stdin = child.stdin.take();
        // Its first line says where it listens; the rest of stdout is not read.
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let show_log = |log: &PathBuf| std::fs::read_to_string(log).unwrap_or_default();
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        let Some(port) = line
            .strip_prefix("listening ")
            .and_then(|p| p.trim().parse::<u16>().ok())
        else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "localstripe did not start (it said {line:?}); its log:\n{}",
                show_log(&log)
            );
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let localstripe = format!("http://127.0.0.1:{port}");

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let shared = Arc::new(Shared {
            localstripe,
            base,
            agent,
            state: Mutex::new(State::default()),
        });
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let for_proxy = shared.clone();
        let endpoint = poem::endpoint::make(move |req: Request| {
            let shared = for_proxy.clone();
            async move { handle(shared, req).await }
        });
        let proxy = super::net::serve_until(listener, endpoint, async move {
            let _ = stop.await;
        });
        let fake = StripeFake {
            shared,
            child,
            stdin,
            log,
            _dir: dir,
            shutdown: Some(shutdown),
            proxy: Some(proxy),
        };
        // Bound is not yet listening: wait until it answers.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if fake.shared.get("/_config/deliveries").is_ok() {
                break;
            }
            if std::time::Instant::now() > deadline {
                panic!("localstripe does not answer; its log:\n{}", fake.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        fake
    }

    /// The base URL to give the server as its Stripe API base: `http://127.0.0.1:PORT`, no
    /// slash at the end.
    pub fn api_base(&self) -> String {
        self.shared.base.clone()
    }

    /// localstripe's own base URL (the proxy's requests go there).
    pub fn localstripe_base(&self) -> String {
        self.shared.localstripe.clone()
    }

    /// localstripe's log (its access log and any Python error).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Every request the proxy received, oldest first (hosted pages included).
    pub fn requests(&self) -> Vec<StripeRequest> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// The API requests (`/v1/...`) to `path`, oldest first.
    pub fn requests_to(&self, method: &str, path: &str) -> Vec<StripeRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .collect()
    }

    /// Has localstripe send [`EVENTS`] to `url`, signed with `secret`; the events the fake
    /// makes itself (`checkout.session.*`) go the same way. Registering a URL again replaces
    /// its secret.
    pub fn register_webhook(&self, url: &str, secret: &str) {
        self.register_webhook_for(url, secret, EVENTS);
    }

    /// [`StripeFake::register_webhook`] for other events (any type localstripe makes:
    /// `invoice.created`, `invoice.payment_succeeded`, `customer.created`, ...).
    pub fn register_webhook_for(&self, url: &str, secret: &str, events: &[&str]) {
        let id = {
            let mut state = self.shared.state.lock().unwrap();
            match state.webhooks.iter().position(|u| u == url) {
                Some(i) => i,
                None => {
                    state.webhooks.push(url.to_string());
                    state.webhooks.len() - 1
                }
            }
        };
        self.shared
            .post_json(
                &format!("/_config/webhooks/hook{id}"),
                &json!({"url": url, "secret": secret, "events": events}),
            )
            .unwrap_or_else(|e| panic!("registering the webhook {url}: {e}"));
    }

    /// Does what the Pay button of the checkout page at `checkout_url` does; returns the URL the
    /// buyer is sent to (the `success_url`, `{CHECKOUT_SESSION_ID}` replaced).
    pub fn pay(&self, checkout_url: &str) -> String {
        let id = session_id_in(checkout_url, "/checkout/");
        pay(&self.shared, &id).unwrap_or_else(|e| panic!("paying {checkout_url}: {e}"))
    }

    /// Does what the Cancel button of the portal page at `portal_url` does, for the customer's
    /// one live subscription (it ends at the period's end: `cancel_at_period_end`); returns the
    /// `return_url`.
    pub fn cancel_in_portal(&self, portal_url: &str) -> String {
        self.portal_action(portal_url, true)
    }

    /// The portal's Renew button: the customer's one subscription set to end at the period's end
    /// goes on after all.
    pub fn renew_in_portal(&self, portal_url: &str) -> String {
        self.portal_action(portal_url, false)
    }

    fn portal_action(&self, portal_url: &str, cancel: bool) -> String {
        let id = session_id_in(portal_url, "/portal/");
        let portal = self
            .shared
            .state
            .lock()
            .unwrap()
            .portals
            .get(&id)
            .cloned()
            .unwrap_or_else(|| panic!("no portal session {id}"));
        let customer = portal["customer"].as_str().expect("customer");
        let subscriptions = self
            .shared
            .live_subscriptions(customer)
            .expect("the subscriptions");
        let candidates: Vec<&Value> = subscriptions
            .iter()
            .filter(|s| s["cancel_at_period_end"].as_bool() != Some(cancel))
            .collect();
        assert_eq!(
            candidates.len(),
            1,
            "the portal needs exactly one subscription to {} for {customer}: {subscriptions:?}",
            if cancel { "cancel" } else { "renew" }
        );
        let sub = candidates[0]["id"].as_str().expect("id");
        set_cancel(&self.shared, sub, cancel).unwrap_or_else(|e| panic!("{e}"));
        portal["return_url"]
            .as_str()
            .expect("return_url")
            .to_string()
    }

    /// The Checkout Session `id` (`cs_test_...`) as Stripe would show it.
    pub fn checkout_session(&self, id: &str) -> Value {
        self.shared
            .state
            .lock()
            .unwrap()
            .checkouts
            .get(id)
            .unwrap_or_else(|| panic!("no checkout session {id}"))
            .object
            .clone()
    }

    /// Calls localstripe directly (not recorded) with the secret key; panics on an error.
    pub fn api(&self, method: &str, path: &str, form: &[(&str, &str)]) -> Value {
        self.shared
            .call(method, path, form)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// The subscription as localstripe has it now.
    pub fn subscription(&self, id: &str) -> Value {
        self.api("GET", &format!("/v1/subscriptions/{id}"), &[])
    }

    pub fn customer(&self, id: &str) -> Value {
        self.api("GET", &format!("/v1/customers/{id}"), &[])
    }

    /// The subscription's invoices, newest first.
    pub fn invoices(&self, subscription: &str) -> Vec<Value> {
        let list = self.api(
            "GET",
            &format!("/v1/invoices?subscription={subscription}&limit=100"),
            &[],
        );
        list["data"].as_array().cloned().unwrap_or_default()
    }

    /// A new card `number` for the customer, attached and made the one its invoices charge;
    /// returns the payment method's id.
    pub fn use_card(&self, customer: &str, number: &str) -> String {
        use_card(&self.shared, customer, number).unwrap_or_else(|e| panic!("{e}"))
    }

    /// From now on every charge of the customer is declined ([`DECLINING_CARD`]): the next
    /// invoice ([`StripeFake::bill`], the end of a trial) fails with `invoice.payment_failed`
    /// and the subscription becomes `past_due` (`customer.subscription.updated`).
    pub fn fail_payments(&self, customer: &str) {
        self.use_card(customer, DECLINING_CARD);
    }

    /// Bills the subscription's next period now, as Stripe does when a period ends (localstripe
    /// has no clock): an invoice is made and paid with the customer's card. Returns the invoice:
    /// `paid` (`invoice.paid`), or `open` after a declined charge (`invoice.payment_failed`, and
    /// the subscription `past_due`). localstripe's periods do not move on.
    pub fn bill(&self, subscription: &str) -> Value {
        let sub = self.subscription(subscription);
        let customer = sub["customer"].as_str().expect("customer");
        let invoice = self.api(
            "POST",
            "/v1/invoices",
            &[("customer", customer), ("subscription", subscription)],
        );
        let id = invoice["id"].as_str().expect("id");
        self.api("POST", &format!("/v1/invoices/{id}/pay"), &[])
    }

    /// Ends the subscription's trial now, as Stripe does when the trial is over: the first
    /// period starts and its invoice is paid (`invoice.paid`, `customer.subscription.updated`
    /// to `active`), or fails (`invoice.payment_failed`, `past_due`).
    pub fn end_trial(&self, subscription: &str) -> Value {
        self.api(
            "POST",
            &format!("/v1/subscriptions/{subscription}"),
            &[("trial_end", "now")],
        )
    }

    /// Ends the subscription now (`customer.subscription.deleted`, status `canceled`), as
    /// Stripe does at the end of the period of a subscription set to cancel then.
    pub fn end_subscription(&self, subscription: &str) -> Value {
        self.api("DELETE", &format!("/v1/subscriptions/{subscription}"), &[])
    }

    /// Webhooks wait in localstripe's queue until [`StripeFake::release_webhooks`].
    pub fn hold_webhooks(&self) {
        self.shared
            .post_json("/_config/hold", &json!({"hold": true}))
            .expect("holding the webhooks");
    }

    pub fn release_webhooks(&self) {
        self.shared
            .post_json("/_config/hold", &json!({"hold": false}))
            .expect("releasing the webhooks");
    }

    /// Every event localstripe made (its own and the fake's), oldest first, whether or not a
    /// webhook wanted it.
    pub fn events(&self) -> Vec<Value> {
        self.api("GET", "/v1/events?limit=100", &[])["data"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// What localstripe sent: `[{"id", "type", "attempts": [{"url", "status"|"error"}]}]`, in
    /// order.
    pub fn deliveries(&self) -> Vec<Value> {
        self.shared
            .get("/_config/deliveries")
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    }

    /// Waits (20 s at most) until localstripe has sent (to every webhook that wants it) an event
    /// of `kind`, and returns the first such event.
    pub fn wait_for_event(&self, kind: &str) -> Value {
        let id = super::wait_for(
            &format!("localstripe to send {kind}"),
            Duration::from_secs(20),
            || {
                self.deliveries()
                    .into_iter()
                    .find(|d| d["type"] == kind)
                    .and_then(|d| d["id"].as_str().map(str::to_string))
            },
        );
        self.api("GET", &format!("/v1/events/{id}"), &[])
    }

    /// An event as Stripe would send it: `{"id": "evt_...", "object": "event", "type": kind,
    /// "data": {"object": object}, ...}`, for [`StripeFake::send_event`].
    pub fn event(&self, kind: &str, object: Value) -> Value {
        json!({
            "id": random_id("evt_", 24),
            "object": "event",
            "api_version": API_VERSION,
            "created": now(),
            "livemode": false,
            "pending_webhooks": 1,
            "request": {"id": null, "idempotency_key": null},
            "type": kind,
            "data": {"object": object},
        })
    }

    /// POSTs `event` to `url` signed now with `secret`, as Stripe sends a webhook; returns the
    /// answer's status. For tests that replay, reorder or make up events.
    pub fn send_event(&self, url: &str, secret: &str, event: &Value) -> u16 {
        let body = serde_json::to_vec_pretty(event).expect("JSON");
        let signature = stripe_signature(secret, now(), &body);
        self.send_payload(url, &signature, &body)
    }

    /// POSTs `body` to `url` with `stripe_signature` as its `Stripe-Signature` (a forged or
    /// stale one, say); returns the answer's status.
    pub fn send_payload(&self, url: &str, stripe_signature: &str, body: &[u8]) -> u16 {
        let request = ureq::http::Request::builder()
            .method("POST")
            .uri(url)
            .header("Content-Type", "application/json; charset=utf-8")
            .header("Stripe-Signature", stripe_signature)
            .body(body.to_vec())
            .expect("a request");
        self.shared
            .agent
            .run(request)
            .unwrap_or_else(|e| panic!("POST {url}: {e}"))
            .status()
            .as_u16()
    }

    /// The `Stripe-Signature` value for `body` sent at `timestamp` (Unix seconds).
    pub fn sign(&self, secret: &str, timestamp: i64, body: &[u8]) -> String {
        stripe_signature(secret, timestamp, body)
    }
}

impl Drop for StripeFake {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(proxy) = self.proxy.take() {
            let _ = proxy.join();
        }
        // localstripe leaves when its stdin closes; killed as well, to be sure.
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The id after `marker` in a hosted page's URL.
fn session_id_in(url: &str, marker: &str) -> String {
    let start = url
        .find(marker)
        .unwrap_or_else(|| panic!("{url} is not a {marker} URL of the fake"))
        + marker.len();
    url[start..]
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("")
        .to_string()
}

impl Shared {
    /// A request to localstripe: (status, content type, body).
    fn send(
        &self,
        method: &str,
        path_and_query: &str,
        authorization: Option<&str>,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(u16, String, Vec<u8>), String> {
        let mut builder = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path_and_query}", self.localstripe));
        if let Some(a) = authorization {
            builder = builder.header("Authorization", a);
        }
        if let Some(c) = content_type {
            builder = builder.header("Content-Type", c);
        }
        let response = if method == "POST" {
            self.agent
                .run(builder.body(body).map_err(|e| e.to_string())?)
        } else {
            self.agent.run(builder.body(()).map_err(|e| e.to_string())?)
        };
        let mut response = response.map_err(|e| format!("{method} {path_and_query}: {e}"))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_string();
        let body = response
            .body_mut()
            .read_to_vec()
            .map_err(|e| format!("{method} {path_and_query}: {e}"))?;
        Ok((status, content_type, body))
    }

    /// An API call with the secret key; the JSON answer, or why not.
    fn call(&self, method: &str, path: &str, form: &[(&str, &str)]) -> Result<Value, String> {
        let (status, _, body) = self.send(
            method,
            path,
            Some(&format!("Bearer {SECRET_KEY}")),
            Some("application/x-www-form-urlencoded"),
            form_body(form),
        )?;
        let text = String::from_utf8_lossy(&body);
        if !(200..300).contains(&status) {
            return Err(format!(
                "localstripe answered {method} {path} with {status}: {text}"
            ));
        }
        serde_json::from_slice(&body)
            .map_err(|e| format!("{method} {path}: not JSON ({e}): {text}"))
    }

    fn post_json(&self, path: &str, value: &Value) -> Result<Value, String> {
        let (status, _, body) = self.send(
            "POST",
            path,
            None,
            Some("application/json"),
            serde_json::to_vec(value).expect("JSON"),
        )?;
        let text = String::from_utf8_lossy(&body).into_owned();
        if status != 200 {
            return Err(format!("POST {path}: {status} {text}"));
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn get(&self, path: &str) -> Result<Value, String> {
        let (status, _, body) = self.send("GET", path, None, None, Vec::new())?;
        if status != 200 {
            return Err(format!("GET {path}: {status}"));
        }
        serde_json::from_slice(&body).map_err(|e| e.to_string())
    }

    /// The customer's subscriptions that have not ended.
    fn live_subscriptions(&self, customer: &str) -> Result<Vec<Value>, String> {
        let list = self.call(
            "GET",
            &format!("/v1/subscriptions?customer={customer}&limit=100"),
            &[],
        )?;
        Ok(list["data"].as_array().cloned().unwrap_or_default())
    }
}

async fn handle(shared: Arc<Shared>, req: Request) -> Response {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let mut incoming = Incoming {
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        query: req.uri().query().unwrap_or("").to_string(),
        authorization: header("authorization"),
        content_type: header("content-type"),
        idempotency_key: header("idempotency-key"),
        body: Vec::new(),
        form: Vec::new(),
    };
    let stripe_version = header("stripe-version");
    incoming.body = req.into_body().into_vec().await.unwrap_or_default();
    if incoming
        .content_type
        .as_deref()
        .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"))
    {
        incoming.form = parse_form(&incoming.body);
    }
    shared.state.lock().unwrap().requests.push(StripeRequest {
        method: incoming.method.clone(),
        path: incoming.path.clone(),
        query: incoming.query.clone(),
        form: incoming.form.clone(),
        stripe_version,
        authorization: incoming.authorization.clone(),
        idempotency_key: incoming.idempotency_key.clone(),
    });
    // Everything below blocks (requests to localstripe): off the runtime's thread.
    let reply = tokio::task::spawn_blocking(move || idempotent(&shared, &incoming))
        .await
        .unwrap_or_else(|e| {
            Reply::error(
                500,
                "api_error",
                None,
                None,
                &format!("the fake failed: {e}"),
            )
        });
    let mut response = Response::builder()
        .status(StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .content_type(reply.content_type);
    if let Some(location) = reply.location {
        response = response.header("Location", location);
    }
    if reply.replayed {
        response = response.header("Idempotent-Replayed", "true");
    }
    response.body(reply.body)
}

/// Stripe's idempotency: a POST with an `Idempotency-Key` seen before gets the first answer
/// again (the same parameters), or an `idempotency_error` (other parameters).
fn idempotent(shared: &Shared, req: &Incoming) -> Reply {
    let key = match &req.idempotency_key {
        Some(key) if req.method == "POST" && req.path.starts_with("/v1/") => key.clone(),
        _ => return route(shared, req),
    };
    let request = (req.method.clone(), req.path.clone(), req.body.clone());
    if let Some(replay) = shared.state.lock().unwrap().replays.get(&key).cloned() {
        if replay.request != request {
            return Reply::error(
                400,
                "idempotency_error",
                None,
                None,
                &format!(
                    "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '{key}' if you meant to execute a different request."
                ),
            );
        }
        return Reply {
            replayed: true,
            ..replay.reply
        };
    }
    let reply = route(shared, req);
    shared.state.lock().unwrap().replays.insert(
        key,
        Replay {
            request,
            reply: reply.clone(),
        },
    );
    reply
}

fn route(shared: &Shared, req: &Incoming) -> Reply {
    let segments: Vec<&str> = req.path.trim_matches('/').split('/').collect();
    match (req.method.as_str(), segments.as_slice()) {
        ("POST", ["v1", "checkout", "sessions"]) => {
            authorized(req, || create_checkout(shared, req))
        }
        ("GET", ["v1", "checkout", "sessions", id]) => authorized(req, || {
            match shared.state.lock().unwrap().checkouts.get(*id) {
                Some(checkout) => Reply::json(200, &checkout.object),
                None => Reply::missing("id", &format!("No such checkout.session: '{id}'")),
            }
        }),
        ("POST", ["v1", "checkout", "sessions", id, "expire"]) => {
            authorized(req, || expire_checkout(shared, id))
        }
        ("POST", ["v1", "billing_portal", "sessions"]) => {
            authorized(req, || create_portal(shared, req))
        }
        ("GET", ["checkout", id]) => checkout_page(shared, id),
        ("POST", ["checkout", id, "pay"]) => match pay(shared, id) {
            Ok(success) => Reply::see_other(&success),
            Err(why) => Reply::page(409, page("Payment not made", maud::html! { p { (why) } })),
        },
        ("GET", ["portal", id]) => portal_page(shared, id),
        ("POST", ["portal", id, action @ ("cancel" | "renew" | "back")]) => {
            portal_post(shared, id, action, req)
        }
        _ => match shared.send(
            &req.method,
            &if req.query.is_empty() {
                req.path.clone()
            } else {
                format!("{}?{}", req.path, req.query)
            },
            req.authorization.as_deref(),
            req.content_type.as_deref(),
            req.body.clone(),
        ) {
            Ok((status, content_type, body)) => Reply {
                status,
                content_type,
                body,
                location: None,
                replayed: false,
            },
            Err(why) => Reply::error(502, "api_error", None, None, &format!("localstripe: {why}")),
        },
    }
}

/// Stripe's 401 without a secret key.
fn authorized(req: &Incoming, then: impl FnOnce() -> Reply) -> Reply {
    let key = match req.authorization.as_deref().and_then(|a| a.split_once(' ')) {
        Some(("Bearer", key)) => key.to_string(),
        Some(("Basic", b64)) => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .ok()
                .and_then(|raw| String::from_utf8(raw).ok())
                .and_then(|s| s.split(':').next().map(str::to_string))
                .unwrap_or_default()
        }
        _ => String::new(),
    };
    if key.starts_with("sk_test_") || key.starts_with("rk_test_") {
        then()
    } else {
        Reply::error(
            401,
            "invalid_request_error",
            None,
            None,
            "You did not provide an API key (or not a test one). You need to provide your API key in the Authorization header, using Bearer auth.",
        )
    }
}

/// Parameters of `POST /v1/checkout/sessions` that the fake takes without playing them.
const IGNORED_CHECKOUT_PARAMS: &[&str] = &[
    "allow_promotion_codes",
    "automatic_tax",
    "billing_address_collection",
    "consent_collection",
    "custom_text",
    "customer_update",
    "expand",
    "locale",
    "payment_method_collection",
    "payment_method_types",
    "phone_number_collection",
    "submit_type",
    "tax_id_collection",
    "ui_mode",
];

fn create_checkout(shared: &Shared, req: &Incoming) -> Reply {
    let mut metadata = serde_json::Map::new();
    let mut subscription_metadata = Vec::new();
    for (name, value) in &req.form {
        let base = name.split('[').next().unwrap_or("");
        if let Some(key) = name
            .strip_prefix("metadata[")
            .and_then(|k| k.strip_suffix(']'))
        {
            metadata.insert(key.to_string(), json!(value));
        } else if let Some(key) = name
            .strip_prefix("subscription_data[metadata][")
            .and_then(|k| k.strip_suffix(']'))
        {
            subscription_metadata.push((key.to_string(), value.clone()));
        } else if !matches!(
            name.as_str(),
            "mode"
                | "line_items[0][price]"
                | "line_items[0][quantity]"
                | "client_reference_id"
                | "customer"
                | "customer_email"
                | "success_url"
                | "cancel_url"
                | "subscription_data[trial_period_days]"
                | "subscription_data[description]"
        ) && !IGNORED_CHECKOUT_PARAMS.contains(&base)
        {
            return Reply::error(
                400,
                "invalid_request_error",
                Some("parameter_unknown"),
                Some(name),
                &format!(
                    "Received unknown parameter: {name} (the Stripe fake, tests/it/support/stripe.rs, does not play it)"
                ),
            );
        }
    }
    if req.field("mode") != Some("subscription") {
        return Reply::invalid(
            "mode",
            "The Stripe fake plays Checkout in `mode=subscription` only.",
        );
    }
    let Some(plan_id) = req.field("line_items[0][price]") else {
        return Reply::invalid(
            "line_items[0][price]",
            "Missing required param: line_items[0][price].",
        );
    };
    let plan = match shared.call("GET", &format!("/v1/plans/{plan_id}"), &[]) {
        Ok(plan) => plan,
        Err(_) => {
            return Reply::missing(
                "line_items[0][price]",
                &format!("No such price: '{plan_id}'"),
            );
        }
    };
    let quantity = req.field("line_items[0][quantity]").unwrap_or("1");
    let Ok(count) = quantity.parse::<i64>() else {
        return Reply::invalid("line_items[0][quantity]", "Invalid integer: quantity");
    };
    let Some(success_url) = req.field("success_url") else {
        return Reply::invalid("success_url", "Missing required param: success_url.");
    };
    let customer = req.field("customer");
    let customer_email = req.field("customer_email");
    if customer.is_some() && customer_email.is_some() {
        return Reply::invalid(
            "customer_email",
            "You may only specify one of these parameters: customer, customer_email.",
        );
    }
    if let Some(customer) = customer
        && shared
            .call("GET", &format!("/v1/customers/{customer}"), &[])
            .is_err()
    {
        return Reply::missing("customer", &format!("No such customer: '{customer}'"));
    }
    let trial = req.field("subscription_data[trial_period_days]");
    if let Some(days) = trial
        && !days.parse::<i64>().is_ok_and(|d| d >= 1)
    {
        return Reply::invalid(
            "subscription_data[trial_period_days]",
            "trial_period_days must be a whole number of days, at least 1.",
        );
    }
    let id = random_id("cs_test_", 58);
    let created = now();
    let amount = plan["amount"].as_i64().unwrap_or(0) * count;
    let object = json!({
        "id": id,
        "object": "checkout.session",
        "url": format!("{}/checkout/{id}", shared.base),
        "mode": "subscription",
        "status": "open",
        "payment_status": "unpaid",
        "client_reference_id": req.field("client_reference_id"),
        "customer": customer,
        "customer_email": customer_email,
        "customer_details": null,
        "success_url": success_url,
        "cancel_url": req.field("cancel_url"),
        "metadata": metadata,
        "subscription": null,
        "currency": plan["currency"],
        "amount_subtotal": amount,
        "amount_total": if trial.is_some() { 0 } else { amount },
        "created": created,
        "expires_at": created + 24 * 3600,
        "livemode": false,
    });
    shared.state.lock().unwrap().checkouts.insert(
        id,
        Checkout {
            object: object.clone(),
            plan: plan_id.to_string(),
            quantity: quantity.to_string(),
            trial_period_days: trial.map(str::to_string),
            subscription_metadata,
            paying: false,
        },
    );
    Reply::json(200, &object)
}

fn expire_checkout(shared: &Shared, id: &str) -> Reply {
    let object = {
        let mut state = shared.state.lock().unwrap();
        let Some(checkout) = state.checkouts.get_mut(id) else {
            return Reply::missing("id", &format!("No such checkout.session: '{id}'"));
        };
        if checkout.object["status"] != "open" || checkout.paying {
            return Reply::invalid(
                "id",
                "Only Checkout Sessions with a status of `open` can be expired.",
            );
        }
        checkout.object["status"] = json!("expired");
        checkout.object.clone()
    };
    if let Err(why) = shared.post_json(
        "/_config/events",
        &json!({"type": "checkout.session.expired", "object": object}),
    ) {
        return Reply::error(502, "api_error", None, None, &why);
    }
    Reply::json(200, &object)
}

/// What the Pay button does; the URL the buyer goes to next.
fn pay(shared: &Shared, id: &str) -> Result<String, String> {
    let checkout = {
        let mut state = shared.state.lock().unwrap();
        let checkout = state
            .checkouts
            .get_mut(id)
            .ok_or_else(|| format!("no checkout session {id}"))?;
        if checkout.object["status"] != "open" || checkout.paying {
            return Err(format!(
                "this checkout session is {}, not open",
                if checkout.paying {
                    "being paid"
                } else {
                    checkout.object["status"].as_str().unwrap_or("?")
                }
            ));
        }
        checkout.paying = true;
        checkout.clone()
    };
    let paid = complete(shared, &checkout);
    let mut state = shared.state.lock().unwrap();
    let stored = state.checkouts.get_mut(id).expect("kept");
    stored.paying = false;
    let object = paid?;
    stored.object = object.clone();
    drop(state);
    shared.post_json(
        "/_config/events",
        &json!({"type": "checkout.session.completed", "object": object}),
    )?;
    Ok(object["success_url"]
        .as_str()
        .unwrap_or("")
        .replace("{CHECKOUT_SESSION_ID}", id))
}

/// Makes in localstripe what Checkout makes; the completed session.
fn complete(shared: &Shared, checkout: &Checkout) -> Result<Value, String> {
    let session = &checkout.object;
    let (customer, email) = match session["customer"].as_str() {
        Some(customer) => {
            let found = shared.call("GET", &format!("/v1/customers/{customer}"), &[])?;
            (customer.to_string(), found["email"].clone())
        }
        None => {
            let email = session["customer_email"].as_str();
            let mut form = Vec::new();
            if let Some(email) = email {
                form.push(("email", email));
            }
            let made = shared.call("POST", "/v1/customers", &form)?;
            (made["id"].as_str().unwrap_or("").to_string(), json!(email))
        }
    };
    use_card(shared, &customer, CARD)?;
    let mut form: Vec<(String, String)> = vec![
        ("customer".into(), customer.clone()),
        ("items[0][plan]".into(), checkout.plan.clone()),
        ("items[0][quantity]".into(), checkout.quantity.clone()),
    ];
    if let Some(days) = &checkout.trial_period_days {
        form.push(("trial_period_days".into(), days.clone()));
    }
    for (key, value) in &checkout.subscription_metadata {
        form.push((format!("metadata[{key}]"), value.clone()));
    }
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let subscription = shared.call("POST", "/v1/subscriptions", &pairs)?;
    let mut object = session.clone();
    object["status"] = json!("complete");
    object["customer"] = json!(customer);
    object["subscription"] = subscription["id"].clone();
    object["payment_status"] = json!(match subscription["status"].as_str() {
        Some("trialing") => "no_payment_required",
        Some("active") => "paid",
        _ => "unpaid",
    });
    object["customer_details"] = json!({
        "email": email,
        "name": null,
        "phone": null,
        "address": null,
        "tax_exempt": "none",
        "tax_ids": [],
    });
    Ok(object)
}

/// A card payment method `number`, attached to the customer and set as its invoices' default.
fn use_card(shared: &Shared, customer: &str, number: &str) -> Result<String, String> {
    let method = shared.call(
        "POST",
        "/v1/payment_methods",
        &[
            ("type", "card"),
            ("card[number]", number),
            ("card[exp_month]", "12"),
            ("card[exp_year]", "2034"),
            ("card[cvc]", "123"),
        ],
    )?;
    let pm = method["id"].as_str().unwrap_or("").to_string();
    shared.call(
        "POST",
        &format!("/v1/payment_methods/{pm}/attach"),
        &[("customer", customer)],
    )?;
    shared.call(
        "POST",
        &format!("/v1/customers/{customer}"),
        &[("invoice_settings[default_payment_method]", &pm)],
    )?;
    Ok(pm)
}

fn set_cancel(shared: &Shared, subscription: &str, cancel: bool) -> Result<Value, String> {
    shared.call(
        "POST",
        &format!("/v1/subscriptions/{subscription}"),
        &[(
            "cancel_at_period_end",
            if cancel { "true" } else { "false" },
        )],
    )
}

fn create_portal(shared: &Shared, req: &Incoming) -> Reply {
    let Some(customer) = req.field("customer") else {
        return Reply::invalid("customer", "Missing required param: customer.");
    };
    if shared
        .call("GET", &format!("/v1/customers/{customer}"), &[])
        .is_err()
    {
        return Reply::missing("customer", &format!("No such customer: '{customer}'"));
    }
    let Some(return_url) = req.field("return_url") else {
        return Reply::invalid(
            "return_url",
            "The Stripe fake has no default portal configuration: give return_url.",
        );
    };
    let id = random_id("bps_", 24);
    let object = json!({
        "id": id,
        "object": "billing_portal.session",
        "url": format!("{}/portal/{id}", shared.base),
        "customer": customer,
        "return_url": return_url,
        "configuration": "bpc_fake",
        "flow": null,
        "locale": null,
        "on_behalf_of": null,
        "created": now(),
        "livemode": false,
    });
    shared
        .state
        .lock()
        .unwrap()
        .portals
        .insert(id, object.clone());
    Reply::json(200, &object)
}

fn page(title: &str, content: maud::Markup) -> maud::Markup {
    maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Stripe fake" }
            }
            body {
                main {
                    h1 { (title) }
                    (content)
                }
            }
        }
    }
}

/// `5.00 USD per month`.
fn price(plan: &Value) -> String {
    let amount = plan["amount"].as_i64().unwrap_or(0);
    let count = plan["interval_count"].as_i64().unwrap_or(1);
    let interval = plan["interval"].as_str().unwrap_or("?");
    format!(
        "{}.{:02} {} per {}",
        amount / 100,
        amount % 100,
        plan["currency"].as_str().unwrap_or("").to_uppercase(),
        if count == 1 {
            interval.to_string()
        } else {
            format!("{count} {interval}s")
        }
    )
}

fn checkout_page(shared: &Shared, id: &str) -> Reply {
    let Some(checkout) = shared.state.lock().unwrap().checkouts.get(id).cloned() else {
        return Reply::page(
            404,
            page("No such checkout", maud::html! { p { "Unknown session." } }),
        );
    };
    let plan = shared
        .call("GET", &format!("/v1/plans/{}", checkout.plan), &[])
        .unwrap_or(Value::Null);
    let session = &checkout.object;
    let open = session["status"] == "open";
    let name = plan["name"].as_str().unwrap_or("Subscription");
    Reply::page(
        200,
        page(
            "Checkout",
            maud::html! {
                p { "Subscribe to " strong { (name) } ": " span id="price" { (price(&plan)) } }
                @if checkout.quantity != "1" { p { "Quantity: " (checkout.quantity) } }
                @if let Some(days) = &checkout.trial_period_days {
                    p id="trial" { (days) " days free, then " (price(&plan)) }
                }
                @if let Some(email) = session["customer_email"].as_str() { p { "Email: " (email) } }
                @if open {
                    p { "Card: 4242 4242 4242 4242 (the fake's test card)" }
                    form method="post" action={ "/checkout/" (id) "/pay" } {
                        button type="submit" { "Pay" }
                    }
                    @if let Some(cancel) = session["cancel_url"].as_str() {
                        p { a href=(cancel) { "Back" } }
                    }
                } @else {
                    p id="status" { "This checkout session is " (session["status"].as_str().unwrap_or("?")) "." }
                }
            },
        ),
    )
}

fn portal_page(shared: &Shared, id: &str) -> Reply {
    let Some(portal) = shared.state.lock().unwrap().portals.get(id).cloned() else {
        return Reply::page(
            404,
            page(
                "No such portal session",
                maud::html! { p { "Unknown session." } },
            ),
        );
    };
    let customer = portal["customer"].as_str().unwrap_or("");
    let subscriptions = match shared.live_subscriptions(customer) {
        Ok(s) => s,
        Err(why) => return Reply::page(502, page("Billing", maud::html! { p { (why) } })),
    };
    Reply::page(
        200,
        page(
            "Billing",
            maud::html! {
                @if subscriptions.is_empty() { p { "No current subscription." } }
                @for sub in &subscriptions {
                    section {
                        h2 { (sub["plan"]["name"].as_str().unwrap_or("Subscription")) }
                        p { (price(&sub["plan"])) ", " span class="status" { (sub["status"].as_str().unwrap_or("?")) } }
                        @if sub["cancel_at_period_end"] == true {
                            p { "Ends at the end of the period." }
                            form method="post" action={ "/portal/" (id) "/renew" } {
                                input type="hidden" name="subscription" value=(sub["id"].as_str().unwrap_or(""));
                                button type="submit" { "Renew subscription" }
                            }
                        } @else {
                            form method="post" action={ "/portal/" (id) "/cancel" } {
                                input type="hidden" name="subscription" value=(sub["id"].as_str().unwrap_or(""));
                                button type="submit" { "Cancel subscription" }
                            }
                        }
                    }
                }
                form method="post" action={ "/portal/" (id) "/back" } {
                    button type="submit" { "Back" }
                }
            },
        ),
    )
}

fn portal_post(shared: &Shared, id: &str, action: &str, req: &Incoming) -> Reply {
    let Some(portal) = shared.state.lock().unwrap().portals.get(id).cloned() else {
        return Reply::page(
            404,
            page(
                "No such portal session",
                maud::html! { p { "Unknown session." } },
            ),
        );
    };
    let return_url = portal["return_url"].as_str().unwrap_or("/").to_string();
    if action != "back" {
        let customer = portal["customer"].as_str().unwrap_or("");
        let Some(sub) = req.field("subscription") else {
            return Reply::page(
                400,
                page("Billing", maud::html! { p { "Which subscription?" } }),
            );
        };
        let theirs = shared
            .live_subscriptions(customer)
            .unwrap_or_default()
            .iter()
            .any(|s| s["id"] == sub);
        if !theirs {
            return Reply::page(
                404,
                page(
                    "Billing",
                    maud::html! { p { "Not this customer's subscription." } },
                ),
            );
        }
        if let Err(why) = set_cancel(shared, sub, action == "cancel") {
            return Reply::page(502, page("Billing", maud::html! { p { (why) } }));
        }
    }
    Reply::see_other(&return_url)
}
