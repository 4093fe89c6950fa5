//! The HTTP side of webhooks: signatures (the contract's `X-Webhook-Signature` and the
//! Standard Webhooks headers), the SSRF guard on receiver URLs, and the POST of one attempt.
//! Which deliveries exist and what an attempt's outcome means is `domain::events::webhooks`.

mod deliver;
mod sign;
pub mod ssrf;

pub use deliver::{Settings, attempt, guarded_agent};
pub use sign::{contract_signature, standard_signature};
pub use ssrf::{check_url, resolve_host};

use crate::domain::newsletters::custom_domains::Dns;

/// The SSRF guard as the domain's URL policy (`domain::events::webhooks::UrlPolicy`), honouring
/// `--allow-private-webhooks` and resolving through `--dns-server`. The API and the dashboard
/// both save subscriptions through it; it blocks on the lookup, so it runs inside a database
/// task, off the async threads.
pub fn url_policy(allow_private: bool, dns: Dns) -> impl Fn(&str) -> Result<(), String> + Send {
    move |url: &str| check_url(url, allow_private, &dns)
}
