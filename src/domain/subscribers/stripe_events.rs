//! Stripe's webhooks (docs/memberships.md, "What each event does"): the `Stripe-Signature`
//! check, then each event applied once by its id, in any order, to the member it names.
//!
//! - **Verified:** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the
//!   endpoint's signing secret, compared in constant time, `t` within [`TOLERANCE_SECS`] of
//!   now (a captured request cannot be replayed later).
//! - **Once:** `stripe_events` keeps every event id applied; a repeat is answered and changes
//!   nothing.
//! - **Any order:** a membership remembers the creation time of the newest event applied to
//!   it; an older one is recorded and changes nothing, and a deleted subscription (final in
//!   Stripe) is never brought back by a late update of it.

use hmac::{Hmac, KeyInit, Mac};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;
use sha2::Sha256;

use crate::clock::Timestamp;
use crate::domain::subscribers::memberships::{self, Change, Interval, MemberStatus, Stored};
use crate::domain::{DomainResult, events};
use crate::store::write_tx;

/// How far a signature's time may be from now, as Stripe's own libraries allow.
pub const TOLERANCE_SECS: i64 = 300;

/// Why a webhook request is refused before anything is read from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No `Stripe-Signature`, or not of the `t=…,v1=…` form.
    Unsigned,
    /// No `v1` signature fits the body and the secret.
    WrongSignature,
    /// Signed too long ago (or in the future).
    Stale,
    /// Signed, but not a Stripe event.
    NotAnEvent,
}

impl Refused {
    pub fn message(self) -> &'static str {
        match self {
            Refused::Unsigned => "the Stripe-Signature header is missing or malformed",
            Refused::WrongSignature => "no signature matches the webhook signing secret",
            Refused::Stale => "the signature's timestamp is outside the 5-minute tolerance",
            Refused::NotAnEvent => "the body is not a Stripe event",
        }
    }
}

/// Checks `header` (the `Stripe-Signature` value) against `body` and `secret` at `now`
/// (Unix seconds).
pub fn verify(secret: &str, header: &str, body: &[u8], now: i64) -> Result<(), Refused> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", v)) => signatures.push(v),
            _ => {}
        }
    }
    let (Some(t), false) = (timestamp, signatures.is_empty()) else {
        return Err(Refused::Unsigned);
    };
    let fits = signatures.iter().any(|given| {
        let Ok(given) = hex::decode(given) else {
            return false;
        };
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length fits");
        mac.update(t.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        // `verify_slice` compares in constant time.
        mac.verify_slice(&given).is_ok()
    });
    if !fits {
        return Err(Refused::WrongSignature);
    }
    if (now - t).abs() > TOLERANCE_SECS {
        return Err(Refused::Stale);
    }
    Ok(())
}

/// An event as Stripe sends it.
#[derive(Debug, Clone)]
pub struct Event {
    pub id: String,
    pub kind: String,
    /// Unix seconds.
    pub created: i64,
    pub object: Value,
}

impl Event {
    pub fn parse(body: &[u8]) -> Result<Self, Refused> {
        let value: Value = serde_json::from_slice(body).map_err(|_| Refused::NotAnEvent)?;
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        match (
            text("id"),
            text("type"),
            value.get("created").and_then(Value::as_i64),
            value.pointer("/data/object"),
        ) {
            (Some(id), Some(kind), Some(created), Some(object)) if id.starts_with("evt") => {
                Ok(Event {
                    id,
                    kind,
                    created,
                    object: object.clone(),
                })
            }
            _ => Err(Refused::NotAnEvent),
        }
    }

    fn text(&self, pointer: &str) -> Option<&str> {
        self.object.pointer(pointer).and_then(Value::as_str)
    }
}

/// What applying an event did, for the log and the tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The member's membership changed (or was linked to Stripe).
    Changed { subscriber_id: i64 },
    /// Seen before: nothing done again.
    Repeated,
    /// Recorded, changes nothing: why.
    Ignored(&'static str),
}

/// The events a connection asks Stripe for (the dashboard lists them).
pub const EVENTS: &[&str] = &[
    "checkout.session.completed",
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "invoice.paid",
    "invoice.payment_failed",
];

/// Applies a verified event to `newsletter_id`'s members, once.
pub fn apply(conn: &mut Connection, newsletter_id: i64, event: &Event) -> DomainResult<Applied> {
    write_tx(conn, |tx| {
        const SEEN: &str = "INSERT INTO stripe_events (newsletter_id, event_id, kind, received_at)
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING";
        let first = tx.execute(
            SEEN,
            (newsletter_id, &event.id, &event.kind, Timestamp::now()),
        )?;
        if first == 0 {
            return Ok(Applied::Repeated);
        }
        match event.kind.as_str() {
            "checkout.session.completed" => checkout_completed(tx, newsletter_id, event),
            "customer.subscription.created"
            | "customer.subscription.updated"
            | "customer.subscription.deleted" => subscription_changed(tx, newsletter_id, event),
            "invoice.paid" | "invoice.payment_failed" => invoice(tx, newsletter_id, event),
            _ => Ok(Applied::Ignored("not an event Broadsheet uses")),
        }
    })
}

/// The member an event names: by our id in its metadata (set on the Checkout Session and
/// its subscription), else by its Stripe customer. Only members of this newsletter.
fn member_of(tx: &Connection, newsletter_id: i64, event: &Event) -> DomainResult<Option<i64>> {
    let by_metadata = event
        .text("/metadata/broadsheet_subscriber")
        .or_else(|| event.text("/client_reference_id"))
        .or_else(|| event.text("/subscription_details/metadata/broadsheet_subscriber"))
        .and_then(|id| id.parse::<i64>().ok());
    if let Some(id) = by_metadata {
        const OURS: &str = "SELECT id FROM subscribers WHERE id = ?1 AND newsletter_id = ?2";
        if let Some(id) = tx
            .query_row(OURS, (id, newsletter_id), |r| r.get(0))
            .optional()?
        {
            return Ok(Some(id));
        }
    }
    let customer = event.text("/customer");
    match customer {
        Some(customer) => Ok(
            memberships::stored_by_customer(tx, newsletter_id, customer)?.map(|s| s.subscriber_id),
        ),
        None => Ok(None),
    }
}

/// Whether `event` is older than what the membership already reflects.
fn is_stale(stored: Option<&Stored>, event: &Event) -> bool {
    stored
        .and_then(|s| s.stripe_event_at)
        .is_some_and(|at| event.created < at)
}

/// The Checkout Session paid: links the member to the Stripe customer and subscription. When
/// no subscription event came before it, access starts now (`trialing` when nothing was
/// charged, as a trial's checkout); the subscription's own events then say the rest.
fn checkout_completed(tx: &Connection, newsletter_id: i64, event: &Event) -> DomainResult<Applied> {
    let Some(subscriber_id) = member_of(tx, newsletter_id, event)? else {
        return Ok(Applied::Ignored("names no subscriber of this newsletter"));
    };
    if event.text("/status") != Some("complete") {
        return Ok(Applied::Ignored("the checkout is not complete"));
    }
    let customer = event.text("/customer").map(str::to_string);
    let subscription = event.text("/subscription").map(str::to_string);
    let stored = memberships::stored(tx, subscriber_id)?;
    let linked_already = stored
        .as_ref()
        .is_some_and(|s| s.stripe_subscription.is_some() && s.stripe_subscription == subscription);
    if linked_already {
        const LINK: &str = "UPDATE memberships SET stripe_customer = coalesce(stripe_customer, ?2)
             WHERE subscriber_id = ?1";
        tx.execute(LINK, (subscriber_id, &customer))?;
        return Ok(Applied::Changed { subscriber_id });
    }
    let status = match event.text("/payment_status") {
        Some("no_payment_required") => MemberStatus::Trialing,
        _ => MemberStatus::Paid,
    };
    let interval = event
        .text("/metadata/broadsheet_interval")
        .and_then(Interval::parse);
    let amount = event.object.get("amount_total").and_then(Value::as_i64);
    let change = Change {
        status,
        interval,
        amount: amount.filter(|a| *a > 0),
        until: None,
        stripe_customer: customer,
        stripe_subscription: subscription,
        // Older than any event of the subscription itself, which then always applies.
        stripe_event_at: Some(event.created - 1),
    };
    memberships::write(tx, newsletter_id, subscriber_id, &change)?;
    Ok(Applied::Changed { subscriber_id })
}

/// Stripe's status of a subscription as a member's status; `None` for one that gives no
/// access yet (`incomplete`: the first payment is still being made).
fn status_of(subscription: &Value) -> Option<MemberStatus> {
    let canceling = subscription
        .get("cancel_at_period_end")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match subscription.get("status").and_then(Value::as_str)? {
        "active" | "trialing" if canceling => Some(MemberStatus::Canceled),
        "active" => Some(MemberStatus::Paid),
        "trialing" => Some(MemberStatus::Trialing),
        "past_due" | "unpaid" => Some(MemberStatus::PastDue),
        "canceled" | "incomplete_expired" => Some(MemberStatus::Canceled),
        _ => None,
    }
}

/// A subscription's period end, price and interval, where the pinned API version and later
/// ones put them.
fn period_of(subscription: &Value) -> (Option<Timestamp>, Option<Interval>, Option<i64>) {
    let item = subscription.pointer("/items/data/0");
    let end = subscription
        .get("current_period_end")
        .or_else(|| item.and_then(|i| i.get("current_period_end")))
        .and_then(Value::as_i64)
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map(Timestamp::from);
    let plan = item.and_then(|i| i.get("plan").or_else(|| i.get("price")));
    let interval = plan
        .and_then(|p| {
            p.get("interval")
                .or_else(|| p.pointer("/recurring/interval"))
        })
        .and_then(Value::as_str)
        .and_then(Interval::parse);
    let amount = plan
        .and_then(|p| p.get("amount").or_else(|| p.get("unit_amount")))
        .and_then(Value::as_i64);
    (end, interval, amount)
}

fn subscription_changed(
    tx: &Connection,
    newsletter_id: i64,
    event: &Event,
) -> DomainResult<Applied> {
    let Some(subscriber_id) = member_of(tx, newsletter_id, event)? else {
        return Ok(Applied::Ignored("names no subscriber of this newsletter"));
    };
    let stored = memberships::stored(tx, subscriber_id)?;
    if is_stale(stored.as_ref(), event) {
        return Ok(Applied::Ignored("older than the membership's last change"));
    }
    let id = event.text("/id").map(str::to_string);
    let deleted = event.kind == "customer.subscription.deleted";
    if let Some(s) = &stored {
        let same = s.stripe_subscription.is_some() && s.stripe_subscription == id;
        // A deleted subscription is final: a late update of it brings nothing back.
        if same && !deleted && ended_subscription(tx, subscriber_id)? {
            return Ok(Applied::Ignored("the subscription was deleted"));
        }
        // Another subscription than the member's current one changes nothing while that
        // one gives access.
        let current = memberships::of(tx, subscriber_id)?;
        if !same && s.stripe_subscription.is_some() && current.has_paid_access() {
            return Ok(Applied::Ignored("not the member's current subscription"));
        }
    }
    let status = if deleted {
        Some(MemberStatus::Canceled)
    } else {
        status_of(&event.object)
    };
    let Some(status) = status else {
        return Ok(Applied::Ignored("the subscription gives no access yet"));
    };
    let (until, interval, amount) = period_of(&event.object);
    let change = Change {
        status,
        interval,
        amount,
        until,
        stripe_customer: event.text("/customer").map(str::to_string),
        stripe_subscription: id,
        stripe_event_at: Some(event.created),
    };
    memberships::write(tx, newsletter_id, subscriber_id, &change)?;
    if deleted {
        const ENDED: &str = "UPDATE memberships SET stripe_ended = 1 WHERE subscriber_id = ?1";
        tx.execute(ENDED, [subscriber_id])?;
    }
    Ok(Applied::Changed { subscriber_id })
}

/// Whether the member's current Stripe subscription was deleted.
fn ended_subscription(tx: &Connection, subscriber_id: i64) -> DomainResult<bool> {
    const SQL: &str = "SELECT stripe_ended FROM memberships WHERE subscriber_id = ?1";
    Ok(tx
        .query_row(SQL, [subscriber_id], |r| r.get::<_, bool>(0))
        .optional()?
        .unwrap_or(false))
}

/// `invoice.paid` ends a `past_due` spell; `invoice.payment_failed` starts one (paid access
/// lasts until the period ends) and tells the owner's webhooks `member.payment_failed`.
fn invoice(tx: &Connection, newsletter_id: i64, event: &Event) -> DomainResult<Applied> {
    let Some(subscriber_id) = member_of(tx, newsletter_id, event)? else {
        return Ok(Applied::Ignored("names no subscriber of this newsletter"));
    };
    let Some(stored) = memberships::stored(tx, subscriber_id)? else {
        return Ok(Applied::Ignored("the member has no membership to bill"));
    };
    if is_stale(Some(&stored), event) {
        return Ok(Applied::Ignored("older than the membership's last change"));
    }
    let invoice_subscription = event.text("/subscription");
    if invoice_subscription.is_some()
        && invoice_subscription != stored.stripe_subscription.as_deref()
    {
        return Ok(Applied::Ignored("not the member's current subscription"));
    }
    if ended_subscription(tx, subscriber_id)? {
        return Ok(Applied::Ignored("the subscription was deleted"));
    }
    let failed = event.kind == "invoice.payment_failed";
    let status = match (failed, stored.status) {
        (true, MemberStatus::Paid | MemberStatus::Trialing | MemberStatus::PastDue) => {
            MemberStatus::PastDue
        }
        (false, MemberStatus::PastDue) => MemberStatus::Paid,
        (false, status) => status,
        (true, _) => return Ok(Applied::Ignored("the membership is not renewing")),
    };
    // A paid invoice's period end, when later than what is known.
    let paid_to = event
        .object
        .pointer("/lines/data/0/period/end")
        .and_then(Value::as_i64)
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map(Timestamp::from);
    let until = match (failed, paid_to) {
        (false, Some(end)) => Some(stored.until.map_or(end, |u| u.max(end))),
        _ => stored.until,
    };
    let change = Change {
        status,
        interval: stored.interval,
        amount: stored.amount,
        until,
        stripe_customer: None,
        stripe_subscription: None,
        stripe_event_at: Some(event.created),
    };
    let membership = memberships::write(tx, newsletter_id, subscriber_id, &change)?;
    if failed {
        let data = memberships::event_data(tx, subscriber_id, &membership)?;
        events::record(tx, newsletter_id, "member.payment_failed", data)?;
    }
    Ok(Applied::Changed { subscriber_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &str, t: i64, body: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.{body}").as_bytes());
        format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
    }

    #[test]
    fn signatures_are_checked_with_their_time() {
        let body = r#"{"id":"evt_1"}"#;
        let now = 1_800_000_000;
        assert_eq!(
            verify("whsec_a", &sign("whsec_a", now, body), body.as_bytes(), now),
            Ok(())
        );
        assert_eq!(
            verify("whsec_a", &sign("whsec_b", now, body), body.as_bytes(), now),
            Err(Refused::WrongSignature)
        );
        assert_eq!(
            verify(
                "whsec_a",
                &sign("whsec_a", now - 301, body),
                body.as_bytes(),
                now
            ),
            Err(Refused::Stale)
        );
        assert_eq!(
            verify("whsec_a", "v1=00", body.as_bytes(), now),
            Err(Refused::Unsigned)
        );
        let two = format!("{},v1=abcd", sign("whsec_a", now, body));
        assert_eq!(verify("whsec_a", &two, body.as_bytes(), now), Ok(()));
    }

    fn event(id: &str, kind: &str, created: i64, object: Value) -> Event {
        Event {
            id: id.into(),
            kind: kind.into(),
            created,
            object,
        }
    }

    fn subscription(status: &str, cancel: bool, end: i64) -> Value {
        serde_json::json!({
            "id": "sub_1", "object": "subscription", "customer": "cus_1", "status": status,
            "cancel_at_period_end": cancel, "current_period_end": end,
            "metadata": {"broadsheet_subscriber": "1"},
            "items": {"data": [{"plan": {"id": "plan_m", "interval": "month", "amount": 500}}]}
        })
    }

    #[test]
    fn events_apply_once_and_never_backwards() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute(
            "INSERT INTO subscribers (newsletter_id, email, created_at) VALUES (1, 'a@x.co', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
        let end = Timestamp::now().instant().as_second() + 86_400 * 30;
        let active = event(
            "evt_1",
            "customer.subscription.created",
            100,
            subscription("active", false, end),
        );
        assert_eq!(
            apply(&mut conn, 1, &active).unwrap(),
            Applied::Changed { subscriber_id: 1 }
        );
        assert_eq!(apply(&mut conn, 1, &active).unwrap(), Applied::Repeated);
        assert_eq!(
            memberships::of(&conn, 1).unwrap().status,
            MemberStatus::Paid
        );
        let deleted = event(
            "evt_3",
            "customer.subscription.deleted",
            300,
            subscription("canceled", false, end),
        );
        apply(&mut conn, 1, &deleted).unwrap();
        // A late update, older than the deletion: changes nothing.
        let late = event(
            "evt_2",
            "customer.subscription.updated",
            200,
            subscription("past_due", false, end),
        );
        assert!(matches!(
            apply(&mut conn, 1, &late).unwrap(),
            Applied::Ignored(_)
        ));
        let m = memberships::of(&conn, 1).unwrap();
        assert_eq!(
            (m.status, m.interval),
            (MemberStatus::Canceled, Some(Interval::Month))
        );
        // Even one claiming to be newer does not revive a deleted subscription.
        let revived = event(
            "evt_4",
            "customer.subscription.updated",
            400,
            subscription("active", false, end),
        );
        assert!(matches!(
            apply(&mut conn, 1, &revived).unwrap(),
            Applied::Ignored(_)
        ));
        let other = event(
            "evt_5",
            "customer.subscription.created",
            500,
            serde_json::json!({"id": "sub_x", "customer": "cus_unknown", "status": "active"}),
        );
        assert!(matches!(
            apply(&mut conn, 1, &other).unwrap(),
            Applied::Ignored(_)
        ));
    }
}
