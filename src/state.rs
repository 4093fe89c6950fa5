//! What every request handler shares, built once by `app::serve` from the flags. It sits
//! below the doors (`api`, `web`, `site`, which all take it) and holds only domain, store and
//! configuration values, so no door has to import the wiring that mounts it.

use crate::domain::accounts::SessionLifetimes;
use crate::domain::newsletters::Tier;
use crate::domain::newsletters::custom_domains::Dns;
use crate::domain::values::credentials::CredentialKey;
use crate::domain::values::secrets::ServerSecret;
use crate::domain::values::urls::SiteUrls;
use crate::store::Db;

/// Hourly request limits of the API's three buckets.
#[derive(Debug, Clone, Copy)]
pub struct RateLimits {
    pub get: u32,
    pub write: u32,
    pub bulk: u32,
}

/// What every request handler shares.
pub struct AppState {
    pub db: Db,
    pub urls: SiteUrls,
    pub secret: ServerSecret,
    pub default_tier: Tier,
    pub rate_limits: RateLimits,
    /// Permit webhook URLs on private networks (`--allow-private-webhooks`).
    pub allow_private_webhooks: bool,
    /// The resolver that verifies custom domains (`--dns-server`).
    pub dns: Dns,
    /// Peers whose `X-Forwarded-For` names the client (`--trusted-proxy`).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// How long browser sessions last (`--session-idle-minutes`, `--session-absolute-minutes`).
    pub sessions: SessionLifetimes,
    /// The domain of the return paths of sent issues (`--bounce-domain`), shown to configure.
    pub bounce_domain: String,
    /// Seals and opens the passwords of newsletters' own relays (`<data-dir>/credentials.key`).
    pub credentials: CredentialKey,
    /// Permit newsletters' relays on private networks (`--allow-private-relays`).
    pub allow_private_relays: bool,
    /// Stripe's API (`https://api.stripe.com`; a fake in the tests).
    pub stripe_api: String,
    /// The Content-Security-Policy of the sites' account pages, whose forms lead on to
    /// Stripe's hosted pages (`payments::hosted_page_origins`).
    pub account_policy: &'static poem::http::HeaderValue,
}
