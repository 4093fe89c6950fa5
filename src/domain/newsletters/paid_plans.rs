//! A newsletter's paid plan and its Stripe connection (docs/memberships.md): the prices the
//! site's subscribe page shows and Checkout charges, and the owner's own Stripe keys, sealed
//! at rest with the key file like relay passwords (`domain/values/credentials.rs`).

use rusqlite::{Connection, OptionalExtension};

use crate::clock::Timestamp;
use crate::domain::values::credentials::{CredentialKey, Unreadable};
use crate::domain::{DomainError, DomainResult, FieldErrors, clean_text};

/// What paid members get, in characters.
pub const DESCRIPTION_MAX: usize = 500;
/// The longest free trial, in days.
pub const TRIAL_MAX_DAYS: i64 = 730;
/// The dearest price, in minor units: Stripe's own limit is 99,999,999.
pub const AMOUNT_MAX: i64 = 99_999_999;

/// The currencies offered (Stripe's, with two decimals, plus the yen with none): the plan's
/// prices are typed and shown in their major unit.
pub const CURRENCIES: &[(&str, u32)] = &[
    ("usd", 2),
    ("eur", 2),
    ("gbp", 2),
    ("cad", 2),
    ("aud", 2),
    ("nzd", 2),
    ("chf", 2),
    ("sek", 2),
    ("nok", 2),
    ("dkk", 2),
    ("pln", 2),
    ("czk", 2),
    ("inr", 2),
    ("brl", 2),
    ("mxn", 2),
    ("sgd", 2),
    ("jpy", 0),
];

/// The decimals of `currency`'s minor unit.
pub fn decimals(currency: &str) -> u32 {
    CURRENCIES
        .iter()
        .find(|(c, _)| *c == currency)
        .map_or(2, |(_, d)| *d)
}

/// `amount` minor units of `currency` in its major unit, as the settings form takes it:
/// `5.00`, or `500` for a currency without decimals.
pub fn major_units(amount: i64, currency: &str) -> String {
    match decimals(currency) {
        0 => amount.to_string(),
        d => {
            let unit = 10_i64.pow(d);
            format!(
                "{}.{:0width$}",
                amount / unit,
                amount % unit,
                width = d as usize
            )
        }
    }
}

/// `amount` minor units of `currency` as people read it: `5.00 USD`.
pub fn money(amount: i64, currency: &str) -> String {
    format!(
        "{} {}",
        major_units(amount, currency),
        currency.to_uppercase()
    )
}

/// A plan as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub currency: String,
    pub monthly_amount: Option<i64>,
    pub yearly_amount: Option<i64>,
    pub trial_days: i64,
    pub description: String,
    /// The Stripe plans made for these prices, once made.
    pub stripe_monthly_plan: Option<String>,
    pub stripe_yearly_plan: Option<String>,
}

impl Plan {
    /// The price of `yearly` or monthly, if the plan has one.
    pub fn amount(&self, yearly: bool) -> Option<i64> {
        if yearly {
            self.yearly_amount
        } else {
            self.monthly_amount
        }
    }

    /// The Stripe plan made for that price, once made.
    pub fn stripe_plan(&self, yearly: bool) -> Option<&str> {
        if yearly {
            self.stripe_yearly_plan.as_deref()
        } else {
            self.stripe_monthly_plan.as_deref()
        }
    }
}

pub fn plan(conn: &Connection, newsletter_id: i64) -> DomainResult<Option<Plan>> {
    const SQL: &str = "SELECT currency, monthly_amount, yearly_amount, trial_days, description,
         stripe_monthly_plan, stripe_yearly_plan FROM membership_plans WHERE newsletter_id = ?1";
    Ok(conn
        .query_row(SQL, [newsletter_id], |r| {
            Ok(Plan {
                currency: r.get(0)?,
                monthly_amount: r.get(1)?,
                yearly_amount: r.get(2)?,
                trial_days: r.get(3)?,
                description: r.get(4)?,
                stripe_monthly_plan: r.get(5)?,
                stripe_yearly_plan: r.get(6)?,
            })
        })
        .optional()?)
}

/// The plan readers are offered: the newsletter's plan once Stripe is connected, else none
/// (nobody could pay it).
pub fn offered(conn: &Connection, newsletter_id: i64) -> DomainResult<Option<Plan>> {
    let connected = connection(conn, newsletter_id)?.is_some();
    Ok(plan(conn, newsletter_id)?.filter(|_| connected))
}

/// A plan as the settings form gives it: prices in the currency's major unit (`5`, `5.00`);
/// a blank price is no such price.
#[derive(Debug, Clone, Default)]
pub struct PlanInput {
    pub currency: String,
    pub monthly: String,
    pub yearly: String,
    pub trial_days: String,
    pub description: String,
}

/// `text` in major units as minor units of a currency with `decimals`.
fn minor_units(text: &str, decimals: u32) -> Option<i64> {
    let text = text.trim().replace(',', ".");
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    if whole.is_empty()
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !fraction.chars().all(|c| c.is_ascii_digit())
        || fraction.len() > decimals as usize
        || whole.len() > 9
    {
        return None;
    }
    let fraction = format!("{fraction:0<width$}", width = decimals as usize);
    let whole: i64 = whole.parse().ok()?;
    let fraction: i64 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    Some(whole * 10_i64.pow(decimals) + fraction)
}

/// Checks a plan; every problem named by its field.
pub fn check_plan(input: &PlanInput) -> DomainResult<Plan> {
    let mut errors = FieldErrors::new();
    let currency = input.currency.trim().to_lowercase();
    if !CURRENCIES.iter().any(|(c, _)| *c == currency) {
        errors.add("currency", "must be one of the currencies offered");
    }
    let d = decimals(&currency);
    let mut price = |field: &str, text: &str| -> Option<i64> {
        if text.trim().is_empty() {
            return None;
        }
        match minor_units(text, d) {
            Some(0) => {
                errors.add(field, "must be more than zero, or left blank");
                None
            }
            Some(amount) if amount <= AMOUNT_MAX => Some(amount),
            _ => {
                errors.add(
                    field,
                    if d == 0 {
                        "must be a whole amount, e.g. 500".to_string()
                    } else {
                        format!("must be an amount with at most {d} decimals, e.g. 5.00")
                    },
                );
                None
            }
        }
    };
    let monthly_amount = price("monthly", &input.monthly);
    let yearly_amount = price("yearly", &input.yearly);
    if input.monthly.trim().is_empty() && input.yearly.trim().is_empty() {
        errors.add("monthly", "or a yearly price is needed for a paid plan");
    }
    let trial_days = match input.trial_days.trim() {
        "" => 0,
        text => match text.parse::<i64>() {
            Ok(days) if (0..=TRIAL_MAX_DAYS).contains(&days) => days,
            _ => {
                errors.add(
                    "trial_days",
                    format!("must be a whole number of days from 0 to {TRIAL_MAX_DAYS}"),
                );
                0
            }
        },
    };
    let description = clean_text(
        &mut errors,
        "description",
        &input.description,
        false,
        DESCRIPTION_MAX,
    );
    errors.into_result()?;
    Ok(Plan {
        currency,
        monthly_amount,
        yearly_amount,
        trial_days,
        description,
        stripe_monthly_plan: None,
        stripe_yearly_plan: None,
    })
}

/// Stores `plan`; a price or currency that changed forgets the Stripe plan made for the old
/// one (made again at the next checkout), so nobody is charged a price not shown.
pub fn save_plan(conn: &Connection, newsletter_id: i64, plan: &Plan) -> DomainResult<()> {
    const SAVE: &str = "INSERT INTO membership_plans (newsletter_id, currency, monthly_amount,
             yearly_amount, trial_days, description, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (newsletter_id) DO UPDATE SET
             stripe_monthly_plan = CASE WHEN currency = excluded.currency
                 AND monthly_amount IS excluded.monthly_amount THEN stripe_monthly_plan END,
             stripe_yearly_plan = CASE WHEN currency = excluded.currency
                 AND yearly_amount IS excluded.yearly_amount THEN stripe_yearly_plan END,
             currency = excluded.currency, monthly_amount = excluded.monthly_amount,
             yearly_amount = excluded.yearly_amount, trial_days = excluded.trial_days,
             description = excluded.description, updated_at = excluded.updated_at";
    conn.execute(
        SAVE,
        rusqlite::params![
            newsletter_id,
            plan.currency,
            plan.monthly_amount,
            plan.yearly_amount,
            plan.trial_days,
            plan.description,
            Timestamp::now()
        ],
    )?;
    Ok(())
}

/// Records the Stripe plan made for the plan's monthly or yearly price, if that price is
/// still `amount` (the owner may have changed it meanwhile).
pub fn set_stripe_plan(
    conn: &Connection,
    newsletter_id: i64,
    yearly: bool,
    amount: i64,
    stripe_plan: &str,
) -> DomainResult<()> {
    const MONTHLY: &str = "UPDATE membership_plans SET stripe_monthly_plan = ?3
         WHERE newsletter_id = ?1 AND monthly_amount = ?2";
    const YEARLY: &str = "UPDATE membership_plans SET stripe_yearly_plan = ?3
         WHERE newsletter_id = ?1 AND yearly_amount = ?2";
    let sql = if yearly { YEARLY } else { MONTHLY };
    conn.execute(sql, (newsletter_id, amount, stripe_plan))?;
    Ok(())
}

/// The owner's Stripe account as the dashboard shows it: never the keys themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    pub key_hint: String,
    pub connected_at: Timestamp,
}

/// The keys, opened, for a call to Stripe or a webhook's check.
#[derive(Clone)]
pub struct StripeKeys {
    pub secret_key: String,
    pub webhook_secret: String,
}

impl std::fmt::Debug for StripeKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StripeKeys(…)")
    }
}

pub fn connection(conn: &Connection, newsletter_id: i64) -> DomainResult<Option<Connected>> {
    const SQL: &str =
        "SELECT key_hint, connected_at FROM stripe_connections WHERE newsletter_id = ?1";
    Ok(conn
        .query_row(SQL, [newsletter_id], |r| {
            Ok(Connected {
                key_hint: r.get(0)?,
                connected_at: r.get(1)?,
            })
        })
        .optional()?)
}

/// The opened keys of `newsletter_id`; `None` when Stripe is not connected. Keys sealed with
/// another key file are refused as not connected, with the reason.
pub fn keys(
    conn: &Connection,
    key: &CredentialKey,
    newsletter_id: i64,
) -> DomainResult<Option<StripeKeys>> {
    const SQL: &str = "SELECT secret_key_sealed, webhook_secret_sealed FROM stripe_connections
         WHERE newsletter_id = ?1";
    let sealed: Option<(Vec<u8>, Vec<u8>)> = conn
        .query_row(SQL, [newsletter_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((secret, webhook)) = sealed else {
        return Ok(None);
    };
    let unreadable = |e: Unreadable| {
        DomainError::rejected(
            crate::domain::ErrorCode::InvalidState,
            format!("the stored Stripe keys cannot be opened ({e}): connect Stripe again"),
        )
    };
    Ok(Some(StripeKeys {
        secret_key: key.open(&secret).map_err(unreadable)?,
        webhook_secret: key.open(&webhook).map_err(unreadable)?,
    }))
}

/// Checks the two keys' shapes: a secret or restricted key (`sk_…`, `rk_…`) and a webhook
/// signing secret (`whsec_…`).
pub fn check_keys(secret_key: &str, webhook_secret: &str) -> DomainResult<StripeKeys> {
    let mut errors = FieldErrors::new();
    let (secret_key, webhook_secret) = (secret_key.trim(), webhook_secret.trim());
    let plain =
        |s: &str| s.len() <= 300 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !(secret_key.starts_with("rk_") || secret_key.starts_with("sk_")) || !plain(secret_key) {
        errors.add(
            "secret_key",
            "must be a Stripe restricted key (rk_…) or secret key (sk_…)",
        );
    }
    if !webhook_secret.starts_with("whsec_") || !plain(webhook_secret) {
        errors.add(
            "webhook_secret",
            "must be the endpoint's signing secret (whsec_…)",
        );
    }
    errors.into_result()?;
    Ok(StripeKeys {
        secret_key: secret_key.to_string(),
        webhook_secret: webhook_secret.to_string(),
    })
}

/// Stores the keys sealed; the Stripe plans made with an earlier account are forgotten.
pub fn connect(
    conn: &Connection,
    key: &CredentialKey,
    newsletter_id: i64,
    keys: &StripeKeys,
) -> DomainResult<()> {
    const SAVE: &str = "INSERT INTO stripe_connections (newsletter_id, secret_key_sealed,
             webhook_secret_sealed, key_hint, connected_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (newsletter_id) DO UPDATE SET secret_key_sealed = excluded.secret_key_sealed,
             webhook_secret_sealed = excluded.webhook_secret_sealed, key_hint = excluded.key_hint,
             connected_at = excluded.connected_at";
    const FORGET: &str = "UPDATE membership_plans SET stripe_monthly_plan = NULL,
         stripe_yearly_plan = NULL WHERE newsletter_id = ?1";
    let hint: String = keys
        .secret_key
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    conn.execute(
        SAVE,
        (
            newsletter_id,
            key.seal(&keys.secret_key),
            key.seal(&keys.webhook_secret),
            hint,
            Timestamp::now(),
        ),
    )?;
    conn.execute(FORGET, [newsletter_id])?;
    Ok(())
}

pub fn disconnect(conn: &Connection, newsletter_id: i64) -> DomainResult<()> {
    conn.execute(
        "DELETE FROM stripe_connections WHERE newsletter_id = ?1",
        [newsletter_id],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(currency: &str, monthly: &str, yearly: &str) -> PlanInput {
        PlanInput {
            currency: currency.into(),
            monthly: monthly.into(),
            yearly: yearly.into(),
            trial_days: "14".into(),
            description: "Every issue, and the archive".into(),
        }
    }

    #[test]
    fn prices_are_read_in_major_units() {
        let plan = check_plan(&input("USD", "5", "50.5")).unwrap();
        assert_eq!(
            (plan.monthly_amount, plan.yearly_amount),
            (Some(500), Some(5050))
        );
        assert_eq!(plan.currency, "usd");
        assert_eq!(
            check_plan(&input("jpy", "500", "")).unwrap().monthly_amount,
            Some(500)
        );
        for (monthly, yearly) in [("5.001", ""), ("0", ""), ("", ""), ("-5", ""), ("abc", "")] {
            assert!(
                check_plan(&input("usd", monthly, yearly)).is_err(),
                "{monthly}"
            );
        }
        assert!(check_plan(&input("xyz", "5", "")).is_err());
        assert_eq!(money(500, "usd"), "5.00 USD");
        assert_eq!(money(500, "jpy"), "500 JPY");
        assert_eq!(major_units(5050, "eur"), "50.50");
        // What the form shows is read back as the same amount.
        assert_eq!(
            check_plan(&input("eur", &major_units(5050, "eur"), ""))
                .unwrap()
                .monthly_amount,
            Some(5050)
        );
    }

    #[test]
    fn a_changed_price_forgets_its_stripe_plan() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        save_plan(&conn, 1, &check_plan(&input("usd", "5", "50")).unwrap()).unwrap();
        set_stripe_plan(&conn, 1, false, 500, "plan_m").unwrap();
        set_stripe_plan(&conn, 1, true, 5000, "plan_y").unwrap();
        save_plan(&conn, 1, &check_plan(&input("usd", "5", "60")).unwrap()).unwrap();
        let stored = plan(&conn, 1).unwrap().unwrap();
        assert_eq!(stored.stripe_monthly_plan.as_deref(), Some("plan_m"));
        assert_eq!(stored.stripe_yearly_plan, None);
    }

    #[test]
    fn keys_are_sealed_and_their_shapes_checked() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let key = CredentialKey::generate().unwrap();
        assert!(check_keys("pk_live_x", "whsec_x").is_err());
        let keys = check_keys(" rk_test_abcd1234 ", "whsec_secret").unwrap();
        connect(&conn, &key, 1, &keys).unwrap();
        let sealed: Vec<u8> = conn
            .query_row(
                "SELECT secret_key_sealed FROM stripe_connections",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(!String::from_utf8_lossy(&sealed).contains("rk_test"));
        assert_eq!(connection(&conn, 1).unwrap().unwrap().key_hint, "1234");
        let opened = super::keys(&conn, &key, 1).unwrap().unwrap();
        assert_eq!(opened.secret_key, "rk_test_abcd1234");
        let other = CredentialKey::generate().unwrap();
        assert!(super::keys(&conn, &other, 1).is_err());
    }
}
