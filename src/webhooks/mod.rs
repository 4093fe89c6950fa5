//! The HTTP side of webhooks: signatures (the contract's `X-Webhook-Signature` and the
//! Standard Webhooks headers), the SSRF guard on receiver URLs, and the POST of one attempt.
//! Which deliveries exist and what an attempt's outcome means is `domain::webhooks`.

mod deliver;
mod sign;
mod ssrf;

pub use deliver::{Settings, attempt};
pub use sign::{contract_signature, standard_signature};
pub use ssrf::check_url;
