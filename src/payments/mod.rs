//! The few calls Broadsheet makes to Stripe's API on an owner's behalf (docs/memberships.md):
//! making a plan, opening a Checkout Session, opening a Billing Portal session. Form-encoded
//! requests through `ureq` (certificates verified), the API version pinned, the key never
//! logged. They block: callers run them off the async threads.
//!
//! Plans rather than prices: `POST /v1/plans` makes a product and its recurring price in one
//! call, and Stripe takes a plan id wherever a price id goes.

use std::time::Duration;

use serde_json::Value;

/// The Stripe API version every call asks for, so the shape of answers and events cannot
/// change under us; the webhook endpoint is to be set to the same version.
pub const API_VERSION: &str = "2024-06-20";

/// Where Stripe's hosted pages are, on Stripe itself.
const HOSTED_PAGES: [&str; 2] = ["https://checkout.stripe.com", "https://billing.stripe.com"];

/// The origins of the pages a reader is sent to (Checkout, the Billing Portal) when the API
/// is at `api_base`: Stripe's own, and the API's origin when it is not Stripe's (a fake
/// Stripe serves its pages itself).
pub fn hosted_page_origins(api_base: &str) -> Vec<String> {
    let mut origins: Vec<String> = HOSTED_PAGES.iter().map(|o| o.to_string()).collect();
    if let Ok(url) = url::Url::parse(api_base) {
        let origin = url.origin().ascii_serialization();
        if origin != "https://api.stripe.com" && url.origin().is_tuple() {
            origins.push(origin);
        }
    }
    origins
}

/// How long one call may take.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Why a call did not work, in words for the owner or the reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StripeError {
    /// Stripe could not be reached.
    Unreachable(String),
    /// Stripe refused the call: its message.
    Refused { status: u16, message: String },
}

impl std::fmt::Display for StripeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StripeError::Unreachable(e) => write!(f, "Stripe could not be reached ({e})"),
            StripeError::Refused { status, message } => {
                write!(f, "Stripe refused the request ({status}): {message}")
            }
        }
    }
}

/// A Stripe account, by its secret key.
pub struct Stripe {
    base: String,
    secret_key: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Stripe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stripe")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// What a Checkout Session is for.
#[derive(Debug, Clone)]
pub struct Checkout<'a> {
    pub plan: &'a str,
    pub subscriber_id: i64,
    /// The member's Stripe customer when they paid before, else their address.
    pub customer: Option<&'a str>,
    pub email: &'a str,
    /// `month` or `year`, kept in the session's metadata.
    pub interval: &'a str,
    pub trial_days: i64,
    pub success_url: &'a str,
    pub cancel_url: &'a str,
}

impl Stripe {
    /// `base` is `https://api.stripe.com` (or a fake's address in the tests).
    pub fn new(base: &str, secret_key: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .new_agent();
        Stripe {
            base: base.trim_end_matches('/').to_string(),
            secret_key: secret_key.to_string(),
            agent,
        }
    }

    fn post(&self, path: &str, form: &[(&str, String)]) -> Result<Value, StripeError> {
        let url = format!("{}{path}", self.base);
        let response = self
            .agent
            .post(&url)
            .header("Authorization", &format!("Bearer {}", self.secret_key))
            .header("Stripe-Version", API_VERSION)
            .send_form(form.iter().map(|(k, v)| (*k, v.as_str())))
            .map_err(|e| StripeError::Unreachable(e.to_string()))?;
        let status = response.status().as_u16();
        let body: Value = response
            .into_body()
            .with_config()
            .limit(1 << 20)
            .read_json()
            .map_err(|e| StripeError::Unreachable(format!("unreadable answer: {e}")))?;
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            let message = body
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no message")
                .to_string();
            Err(StripeError::Refused { status, message })
        }
    }

    fn text(value: &Value, key: &str) -> Result<String, StripeError> {
        value
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| StripeError::Unreachable(format!("the answer has no {key}")))
    }

    /// Makes a recurring plan (and its product): its id.
    pub fn create_plan(
        &self,
        product_name: &str,
        amount: i64,
        currency: &str,
        interval: &str,
    ) -> Result<String, StripeError> {
        let plan = self.post(
            "/v1/plans",
            &[
                ("amount", amount.to_string()),
                ("currency", currency.to_string()),
                ("interval", interval.to_string()),
                ("product[name]", product_name.to_string()),
            ],
        )?;
        Self::text(&plan, "id")
    }

    /// Opens a Checkout Session for a subscription to `plan`: the address to send the
    /// reader to.
    pub fn checkout(&self, c: &Checkout<'_>) -> Result<String, StripeError> {
        let subscriber = c.subscriber_id.to_string();
        let mut form = vec![
            ("mode", "subscription".to_string()),
            ("line_items[0][price]", c.plan.to_string()),
            ("line_items[0][quantity]", "1".to_string()),
            ("client_reference_id", subscriber.clone()),
            ("success_url", c.success_url.to_string()),
            ("cancel_url", c.cancel_url.to_string()),
            ("metadata[broadsheet_subscriber]", subscriber.clone()),
            ("metadata[broadsheet_interval]", c.interval.to_string()),
            (
                "subscription_data[metadata][broadsheet_subscriber]",
                subscriber,
            ),
        ];
        match c.customer {
            Some(customer) => form.push(("customer", customer.to_string())),
            None => form.push(("customer_email", c.email.to_string())),
        }
        if c.trial_days > 0 {
            form.push((
                "subscription_data[trial_period_days]",
                c.trial_days.to_string(),
            ));
        }
        let session = self.post("/v1/checkout/sessions", &form)?;
        Self::text(&session, "url")
    }

    /// Opens the Billing Portal for `customer`: the address to send the reader to.
    pub fn billing_portal(&self, customer: &str, return_url: &str) -> Result<String, StripeError> {
        let session = self.post(
            "/v1/billing_portal/sessions",
            &[
                ("customer", customer.to_string()),
                ("return_url", return_url.to_string()),
            ],
        )?;
        Self::text(&session, "url")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosted_pages_are_stripes_and_a_fake_apis_own() {
        let stripe = hosted_page_origins("https://api.stripe.com");
        assert_eq!(
            stripe,
            ["https://checkout.stripe.com", "https://billing.stripe.com"]
        );
        let fake = hosted_page_origins("http://127.0.0.1:4242/");
        assert_eq!(
            fake.last().map(String::as_str),
            Some("http://127.0.0.1:4242")
        );
        assert_eq!(fake.len(), 3);
    }
}
