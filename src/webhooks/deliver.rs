//! One delivery attempt: POST the stored body with its signatures, redirects not followed,
//! bounded by a timeout, the SSRF guard checked first.

use std::io::Read;
use std::time::Duration;

use crate::domain::webhooks::{Attempt, PendingDelivery};

/// Delivery knobs from the command line.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Retry n (1..3) waits `retry_base * n^4`.
    pub retry_base: time::Duration,
    pub timeout: Duration,
    pub allow_private: bool,
}

/// Characters of the receiver's answer kept for the delivery log.
const EXCERPT_CHARS: usize = 300;

/// Sends one attempt of `delivery` and says how it went.
pub fn attempt(delivery: &PendingDelivery, settings: &Settings) -> Attempt {
    if let Err(reason) = super::check_url(&delivery.url, settings.allow_private) {
        return Attempt::Failed {
            status: None,
            excerpt: String::new(),
            error: format!("refused to deliver: the URL {reason}"),
        };
    }
    let timestamp = crate::clock::now().unix_timestamp();
    let body = delivery.body.as_bytes();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(settings.timeout))
        .user_agent("Broadsheet-Webhooks/1")
        .build()
        .into();
    let sent = agent
        .post(&delivery.url)
        .header("Content-Type", "application/json")
        .header(
            "X-Webhook-Signature",
            super::contract_signature(&delivery.secret, body),
        )
        .header("X-Webhook-Event", &delivery.event)
        .header("X-Webhook-Delivery-Id", &delivery.uid)
        .header("X-Webhook-Timestamp", timestamp.to_string())
        .header("webhook-id", &delivery.uid)
        .header("webhook-timestamp", timestamp.to_string())
        .header(
            "webhook-signature",
            super::standard_signature(&delivery.secret, &delivery.uid, timestamp, body),
        )
        .send(body);
    match sent {
        Ok(mut response) => {
            let status = response.status().as_u16();
            let mut raw = Vec::new();
            let _ = response
                .body_mut()
                .as_reader()
                .take(4 * EXCERPT_CHARS as u64)
                .read_to_end(&mut raw);
            let excerpt: String = String::from_utf8_lossy(&raw)
                .chars()
                .take(EXCERPT_CHARS)
                .collect();
            match status {
                200..=299 => Attempt::Acknowledged { status, excerpt },
                410 => Attempt::Gone { excerpt },
                _ => Attempt::Failed {
                    status: Some(status),
                    error: format!("the endpoint answered {status}"),
                    excerpt,
                },
            }
        }
        Err(e) => Attempt::Failed {
            status: None,
            excerpt: String::new(),
            error: match e {
                ureq::Error::Timeout(_) => {
                    format!("no answer within {} ms", settings.timeout.as_millis())
                }
                other => format!("could not reach the endpoint: {other}"),
            },
        },
    }
}
