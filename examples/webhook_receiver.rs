//! A webhook receiver that verifies Broadsheet's signatures: the snippet to copy.
//!
//! ```sh
//! WEBHOOK_SECRET=whsec_... cargo run --example webhook_receiver -- 127.0.0.1:9000
//! ```
//!
//! Subscribe `http://<this host>:9000/hook` (on a local network, start the server with
//! `--allow-private-webhooks`). Each request is checked three ways: the `X-Webhook-Signature`
//! HMAC of the raw body, the Standard Webhooks `webhook-signature` over id, timestamp and body,
//! and the timestamp's age (a captured request cannot be replayed later). Duplicate delivery
//! ids (retries of something already handled) are acknowledged and skipped.

use std::collections::HashSet;
use std::sync::Mutex;

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use poem::http::StatusCode;
use poem::listener::TcpListener;
use poem::{EndpointExt, Request, Response, Route, Server, handler, post, web::Data};
use sha2::Sha256;

/// Requests older (or newer) than this are refused as replays.
const TOLERANCE_SECONDS: i64 = 300;

fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// Constant-time comparison, so the check leaks nothing about the expected value.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks both signatures and the timestamp; `Err` says what is wrong.
fn verify(secret: &str, req: &Request, body: &[u8]) -> Result<(), &'static str> {
    let header = |name| req.header(name).ok_or("a signature header is missing");
    // 1. X-Webhook-Signature: sha256=<hex HMAC-SHA256 of the body, keyed with the secret>.
    let expected = format!("sha256={}", hex::encode(hmac(secret.as_bytes(), &[body])));
    if !same(
        header("X-Webhook-Signature")?.as_bytes(),
        expected.as_bytes(),
    ) {
        return Err("X-Webhook-Signature does not match");
    }
    // 2. Standard Webhooks: v1,<base64 HMAC of "id.timestamp.body", keyed with the whsec_ bytes>.
    let (id, timestamp) = (header("webhook-id")?, header("webhook-timestamp")?);
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64
        .decode(secret.trim_start_matches("whsec_"))
        .map_err(|_| "the secret is not a whsec_ secret")?;
    let signed = hmac(
        &key,
        &[id.as_bytes(), b".", timestamp.as_bytes(), b".", body],
    );
    let expected = format!("v1,{}", b64.encode(signed));
    if !header("webhook-signature")?
        .split(' ')
        .any(|s| same(s.as_bytes(), expected.as_bytes()))
    {
        return Err("webhook-signature does not match");
    }
    // 3. Freshness.
    let sent: i64 = timestamp.parse().map_err(|_| "bad timestamp")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    if (now - sent).abs() > TOLERANCE_SECONDS {
        return Err("the timestamp is too old or in the future");
    }
    Ok(())
}

struct State {
    secret: String,
    seen: Mutex<HashSet<String>>,
}

#[handler]
async fn hook(
    req: &Request,
    body: poem::Body,
    Data(state): Data<&std::sync::Arc<State>>,
) -> Response {
    let body = body.into_vec().await.unwrap_or_default();
    if let Err(reason) = verify(&state.secret, req, &body) {
        eprintln!("refused: {reason}");
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .body(reason);
    }
    let id = req
        .header("X-Webhook-Delivery-Id")
        .unwrap_or_default()
        .to_string();
    if !state.seen.lock().unwrap().insert(id.clone()) {
        println!("{id}: already handled");
        return Response::builder().status(StatusCode::OK).body("duplicate");
    }
    let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    println!("{id}: {} {}", event["event"], event["data"]);
    Response::builder().status(StatusCode::OK).body("ok")
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let secret =
        std::env::var("WEBHOOK_SECRET").expect("set WEBHOOK_SECRET to the subscription's secret");
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".into());
    let state = std::sync::Arc::new(State {
        secret,
        seen: Mutex::default(),
    });
    println!("listening on http://{listen}/hook");
    Server::new(TcpListener::bind(listen))
        .run(Route::new().at("/hook", post(hook)).data(state))
        .await
}
