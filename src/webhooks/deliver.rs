//! One delivery attempt: POST the stored body with its signatures, redirects not followed,
//! bounded by a timeout, to the addresses the SSRF guard resolved and checked.

use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use crate::domain::events::webhooks::{Attempt, PendingDelivery};
use crate::domain::newsletters::custom_domains::Dns;

/// Delivery knobs from the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Retry n (1..3) waits `retry_base * n^4`.
    pub retry_base: jiff::SignedDuration,
    pub timeout: Duration,
    pub allow_private: bool,
    /// Finds the receivers (`--dns-server` or the system's resolver).
    pub dns: Dns,
}

/// Characters of the receiver's answer kept for the delivery log.
const EXCERPT_CHARS: usize = 300;

/// Addresses ureq keeps from a resolver.
const MAX_ADDRESSES: usize = 16;

/// The HTTP client's resolver for one attempt: it answers the addresses the SSRF guard
/// checked, whatever it is asked, so the connection goes to one of them and nowhere else,
/// while the Host header and the TLS server name still come from the URL.
#[derive(Debug)]
struct Checked(Vec<SocketAddr>);

impl Resolver for Checked {
    fn resolve(
        &self,
        _uri: &Uri,
        _config: &Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let mut addresses = self.empty();
        for address in self.0.iter().take(MAX_ADDRESSES) {
            addresses.push(*address);
        }
        if self.0.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        Ok(addresses)
    }
}

/// An HTTP client that connects to `addresses` only (the ones the SSRF guard checked),
/// follows no redirect, reads no proxy settings, and gives up after `timeout`.
pub fn guarded_agent(
    addresses: Vec<SocketAddr>,
    timeout: Duration,
    user_agent: &str,
) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .user_agent(user_agent)
        // Straight to the checked addresses: a proxy (HTTP_PROXY and the like) would look
        // the name up again, and reach whatever it found.
        .proxy(None)
        .build();
    ureq::Agent::with_parts(config, DefaultConnector::default(), Checked(addresses))
}

/// Sends one attempt of `delivery` and says how it went; `rt` runs the DNS lookup.
pub fn attempt(
    delivery: &PendingDelivery,
    settings: &Settings,
    rt: &tokio::runtime::Runtime,
) -> Attempt {
    let lookup = super::ssrf::resolve(&delivery.url, settings.allow_private, &settings.dns);
    let addresses = match rt.block_on(lookup) {
        Ok(addresses) => addresses,
        Err(reason) => {
            return Attempt::Failed {
                status: None,
                excerpt: String::new(),
                error: format!("refused to deliver: the URL {reason}"),
            };
        }
    };
    let timestamp = crate::clock::now().as_second();
    let body = delivery.body.as_bytes();
    let agent = guarded_agent(addresses, settings.timeout, "Broadsheet-Webhooks/1");
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
