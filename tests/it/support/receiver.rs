//! A real HTTP webhook receiver (poem on a random loopback port) that records every request
//! and answers with scripted statuses; `Hook::verify` recomputes both signatures
//! independently of the server's code.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use poem::http::StatusCode;
use poem::{EndpointExt, Request, Response, Route, handler, web::Data};
use sha2::Sha256;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Hook {
    /// The path requested: `/hook`, or `/elsewhere` if a redirect was followed.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Hook {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub fn event(&self) -> String {
        self.header("X-Webhook-Event").to_string()
    }

    /// Whether both signatures are right for `secret`.
    pub fn verify(&self, secret: &str) -> bool {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(&self.body);
        let contract = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        let b64 = base64::engine::general_purpose::STANDARD;
        let key = b64.decode(secret.trim_start_matches("whsec_")).unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(
            format!(
                "{}.{}.",
                self.header("webhook-id"),
                self.header("webhook-timestamp")
            )
            .as_bytes(),
        );
        mac.update(&self.body);
        let standard = format!("v1,{}", b64.encode(mac.finalize().into_bytes()));
        self.header("X-Webhook-Signature") == contract
            && self
                .header("webhook-signature")
                .split(' ')
                .any(|s| s == standard)
    }
}

#[derive(Default)]
struct Shared {
    hooks: Vec<Hook>,
    /// Statuses for the next requests, in order; then `otherwise`.
    script: VecDeque<u16>,
    otherwise: u16,
    /// Pause before answering.
    delay: Duration,
    /// Answers wait while this is set ([`Receiver::hold`]).
    held: bool,
}

/// The receiver; runs until the test process ends.
#[derive(Clone)]
pub struct Receiver {
    /// `http://127.0.0.1:<port>/hook`
    pub url: String,
    shared: Arc<Mutex<Shared>>,
}

#[handler]
async fn hook(
    req: &Request,
    body: poem::Body,
    Data(shared): Data<&Arc<Mutex<Shared>>>,
) -> Response {
    let body = body.into_vec().await.unwrap_or_default();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let (status, delay) = {
        let mut s = shared.lock().unwrap();
        s.hooks.push(Hook {
            path: req.uri().path().to_string(),
            headers,
            body,
        });
        let otherwise = s.otherwise;
        (s.script.pop_front().unwrap_or(otherwise), s.delay)
    };
    tokio::time::sleep(delay).await;
    while shared.lock().unwrap().held {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut response = Response::builder().status(StatusCode::from_u16(status).unwrap());
    if (300..400).contains(&status) {
        response = response.header("Location", "/elsewhere");
    }
    response.body(format!("receiver answered {status}"))
}

impl Receiver {
    pub fn start() -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            otherwise: 200,
            ..Shared::default()
        }));
        let port = super::net::serve(
            Route::new()
                .at("/hook", poem::post(hook))
                .at("/elsewhere", poem::post(hook).get(hook))
                .data(shared.clone()),
        );
        Receiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            shared,
        }
    }

    /// The next answers, in order (then 200, or what [`Receiver::always`] set).
    pub fn script(&self, statuses: &[u16]) {
        self.shared.lock().unwrap().script = statuses.iter().copied().collect();
    }

    /// Answers every request with `status` from now on.
    pub fn always(&self, status: u16) {
        let mut s = self.shared.lock().unwrap();
        s.script.clear();
        s.otherwise = status;
    }

    /// Requests are recorded at once but answered only after [`Receiver::release`].
    pub fn hold(&self) {
        self.shared.lock().unwrap().held = true;
    }

    pub fn release(&self) {
        self.shared.lock().unwrap().held = false;
    }

    /// Answers every request only after `delay`.
    pub fn delay(&self, delay: Duration) {
        self.shared.lock().unwrap().delay = delay;
    }

    pub fn hooks(&self) -> Vec<Hook> {
        self.shared.lock().unwrap().hooks.clone()
    }

    /// Waits until `n` requests of `event` arrived; returns them.
    pub fn wait_for(&self, event: &str, n: usize) -> Vec<Hook> {
        super::wait_for(&format!("{n} × {event}"), Duration::from_secs(20), || {
            let found: Vec<Hook> = self
                .hooks()
                .into_iter()
                .filter(|h| h.event() == event)
                .collect();
            (found.len() >= n).then_some(found)
        })
    }
}
