//! A reader's membership of a newsletter (docs/memberships.md): free, or paid access kept by
//! Stripe (`paid`, `trialing`, `past_due`, `canceled` until the period ends), granted by the
//! owner (`comped` until a date or for good) or by a script for another payment platform
//! (`paid` with or without an end). One row per member in `memberships`; no row is free.
//!
//! Whether a member has paid access is one rule, written once: the status is not `free` and
//! `access_until` is unset or later than now. `access_until` is worked out when the row is
//! written ([`access_until`]), so every query (the site's paywall, a send's recipients, the
//! figures) asks the same indexed question and nothing needs to run when a period ends.

use jiff::SignedDuration;
use rusqlite::{Connection, OptionalExtension, Row};
use serde_json::{Value, json};

use crate::clock::{self, Timestamp};
use crate::domain::{DomainError, DomainResult, events};
use crate::store::write_tx;

/// After the end of a paid period Stripe renews, its events come within the hour; access
/// lasts this much longer, so a renewal's short delay never locks a member out.
pub const RENEWAL_GRACE: SignedDuration = clock::days(3);

crate::string_enum!(
    /// A member's status as the API, the dashboard and the site show it.
    pub MemberStatus {
        Free => "free",
        Paid => "paid",
        Trialing => "trialing",
        PastDue => "past_due",
        /// Stopped renewing: paid access lasts until the paid period ends.
        Canceled => "canceled",
        /// Paid access given by the owner, free of charge.
        Comped => "comped",
    }
);

crate::string_enum!(
    /// How often a paid member pays.
    pub Interval { Month => "month", Year => "year" }
);

/// A member's membership as it stands now (see [`Membership::at`]). Serialised as the
/// subscriber object's `membership`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Membership {
    /// `free` once paid access ended, whatever the stored status was.
    pub status: MemberStatus,
    /// `paid` while the member has paid access, else `free`.
    pub plan: &'static str,
    pub interval: Option<Interval>,
    /// When paid access ends (or ended) by date; `None`: not by a date.
    pub until: Option<Timestamp>,
    /// Since when the member has (or last had) paid access.
    pub since: Option<Timestamp>,
}

impl Membership {
    pub fn free() -> Self {
        Membership {
            status: MemberStatus::Free,
            plan: "free",
            interval: None,
            until: None,
            since: None,
        }
    }

    pub fn has_paid_access(&self) -> bool {
        self.status != MemberStatus::Free
    }

    /// The membership of a stored row at `now`.
    fn at(stored: &Stored, now: Timestamp) -> Self {
        let access =
            stored.status != MemberStatus::Free && stored.access_until.is_none_or(|end| end > now);
        Membership {
            status: if access {
                stored.status
            } else {
                MemberStatus::Free
            },
            plan: if access { "paid" } else { "free" },
            interval: stored.interval,
            until: stored.until,
            since: Some(stored.since),
        }
    }
}

/// A `memberships` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub subscriber_id: i64,
    pub newsletter_id: i64,
    pub status: MemberStatus,
    pub interval: Option<Interval>,
    pub amount: Option<i64>,
    pub until: Option<Timestamp>,
    pub access_until: Option<Timestamp>,
    pub since: Timestamp,
    pub stripe_customer: Option<String>,
    pub stripe_subscription: Option<String>,
    pub stripe_event_at: Option<i64>,
}

fn stored_from_row(row: &Row<'_>) -> rusqlite::Result<Stored> {
    Ok(Stored {
        subscriber_id: row.get(0)?,
        newsletter_id: row.get(1)?,
        status: row.get(2)?,
        interval: row.get(3)?,
        amount: row.get(4)?,
        until: row.get(5)?,
        access_until: row.get(6)?,
        since: row.get(7)?,
        stripe_customer: row.get(8)?,
        stripe_subscription: row.get(9)?,
        stripe_event_at: row.get(10)?,
    })
}

/// The stored row of `subscriber_id`, if any.
pub fn stored(conn: &Connection, subscriber_id: i64) -> DomainResult<Option<Stored>> {
    const SQL: &str = "SELECT subscriber_id, newsletter_id, status, interval, amount, until,
         access_until, since, stripe_customer, stripe_subscription, stripe_event_at
         FROM memberships WHERE subscriber_id = ?1";
    Ok(conn
        .prepare_cached(SQL)?
        .query_row([subscriber_id], stored_from_row)
        .optional()?)
}

/// The row of the Stripe customer `customer` in `newsletter_id`, if any.
pub fn stored_by_customer(
    conn: &Connection,
    newsletter_id: i64,
    customer: &str,
) -> DomainResult<Option<Stored>> {
    const SQL: &str = "SELECT subscriber_id, newsletter_id, status, interval, amount, until,
         access_until, since, stripe_customer, stripe_subscription, stripe_event_at
         FROM memberships WHERE stripe_customer = ?1 AND newsletter_id = ?2";
    Ok(conn
        .query_row(SQL, (customer, newsletter_id), stored_from_row)
        .optional()?)
}

/// The membership of `subscriber_id` now: free without a row.
pub fn of(conn: &Connection, subscriber_id: i64) -> DomainResult<Membership> {
    Ok(stored(conn, subscriber_id)?
        .map(|s| Membership::at(&s, Timestamp::now()))
        .unwrap_or_else(Membership::free))
}

/// The membership a subscriber query read beside it (`status, interval, until,
/// access_until, since` of a LEFT JOIN, from column `first`).
pub fn from_joined(row: &Row<'_>, first: usize) -> rusqlite::Result<Membership> {
    let status: Option<MemberStatus> = row.get(first)?;
    let Some(status) = status else {
        return Ok(Membership::free());
    };
    let stored = Stored {
        subscriber_id: 0,
        newsletter_id: 0,
        status,
        interval: row.get(first + 1)?,
        amount: None,
        until: row.get(first + 2)?,
        access_until: row.get(first + 3)?,
        since: row.get(first + 4)?,
        stripe_customer: None,
        stripe_subscription: None,
        stripe_event_at: None,
    };
    Ok(Membership::at(&stored, Timestamp::now()))
}

/// When paid access of a membership in `status` ends, given the end of its paid period
/// `until`: the one place the rule is written. Stripe-kept `paid` and `trialing` last a
/// grace past the period (its renewal comes a little after); a script's `paid`, `comped`,
/// `past_due` and `canceled` end at `until` exactly; `free` has none.
pub fn access_until(
    status: MemberStatus,
    until: Option<Timestamp>,
    kept_by_stripe: bool,
) -> Option<Timestamp> {
    match status {
        MemberStatus::Free => None,
        MemberStatus::Paid | MemberStatus::Trialing if kept_by_stripe => {
            until.map(|end| end + RENEWAL_GRACE)
        }
        _ => until,
    }
}

/// What a change of membership writes (`None` leaves the Stripe links as they are).
#[derive(Debug, Clone)]
pub struct Change {
    pub status: MemberStatus,
    pub interval: Option<Interval>,
    pub amount: Option<i64>,
    pub until: Option<Timestamp>,
    pub stripe_customer: Option<String>,
    pub stripe_subscription: Option<String>,
    /// The creation time of the Stripe event this comes from.
    pub stripe_event_at: Option<i64>,
}

/// Writes `change` for `subscriber_id` of `newsletter_id` inside the caller's transaction and
/// records `member.upgraded` or `member.downgraded` when paid access came or went. Returns
/// the membership now.
pub fn write(
    tx: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    change: &Change,
) -> DomainResult<Membership> {
    let now = Timestamp::now();
    let before = stored(tx, subscriber_id)?;
    let had_access = before
        .as_ref()
        .is_some_and(|s| Membership::at(s, now).has_paid_access());
    let customer = change
        .stripe_customer
        .clone()
        .or_else(|| before.as_ref().and_then(|s| s.stripe_customer.clone()));
    let subscription = change
        .stripe_subscription
        .clone()
        .or_else(|| before.as_ref().and_then(|s| s.stripe_subscription.clone()));
    let kept_by_stripe = change.stripe_event_at.is_some();
    let access_end = access_until(change.status, change.until, kept_by_stripe);
    // `since` is when this run of paid access began: kept while access goes on.
    let since = match &before {
        Some(s) if had_access => s.since,
        _ => now,
    };
    let canceled_at = (change.status == MemberStatus::Canceled).then_some(now);
    const UPSERT: &str = "INSERT INTO memberships (subscriber_id, newsletter_id, status, interval,
             amount, until, access_until, since, canceled_at, stripe_customer, stripe_subscription,
             stripe_event_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         ON CONFLICT (subscriber_id) DO UPDATE SET status = excluded.status,
             interval = excluded.interval, amount = excluded.amount, until = excluded.until,
             access_until = excluded.access_until, since = excluded.since,
             canceled_at = CASE WHEN excluded.status = 'canceled'
                 THEN coalesce(memberships.canceled_at, excluded.canceled_at) ELSE NULL END,
             stripe_customer = excluded.stripe_customer,
             stripe_ended = CASE WHEN excluded.stripe_subscription IS memberships.stripe_subscription
                 THEN memberships.stripe_ended ELSE 0 END,
             stripe_subscription = excluded.stripe_subscription,
             stripe_event_at = max(coalesce(memberships.stripe_event_at, 0),
                                   coalesce(excluded.stripe_event_at, 0)),
             updated_at = excluded.updated_at";
    tx.execute(
        UPSERT,
        rusqlite::params![
            subscriber_id,
            newsletter_id,
            change.status,
            change.interval,
            change.amount,
            change.until,
            access_end,
            since,
            canceled_at,
            customer,
            subscription,
            change.stripe_event_at,
            now,
        ],
    )?;
    let after = of(tx, subscriber_id)?;
    // Without paid access now, there is no end left for `tell_lapsed` to tell: it is told
    // here (below) or there was none.
    const LAPSE: &str = "UPDATE memberships SET lapse_told = ?2 WHERE subscriber_id = ?1";
    tx.execute(LAPSE, (subscriber_id, !after.has_paid_access()))?;
    if !had_access && after.has_paid_access() {
        crate::store::sequence_entries::enter_on_paid_access(
            tx,
            newsletter_id,
            subscriber_id,
            &now,
        )?;
    }
    let kind = match (had_access, after.has_paid_access()) {
        (false, true) => Some("member.upgraded"),
        (true, false) => Some("member.downgraded"),
        _ => None,
    };
    if let Some(kind) = kind {
        events::record(
            tx,
            newsletter_id,
            kind,
            event_data(tx, subscriber_id, &after)?,
        )?;
    }
    Ok(after)
}

/// The `data` of `member.*` events: who, and the membership now.
pub fn event_data(
    conn: &Connection,
    subscriber_id: i64,
    membership: &Membership,
) -> DomainResult<Value> {
    const EMAIL: &str = "SELECT email FROM subscribers WHERE id = ?1";
    let email: String = conn.query_row(EMAIL, [subscriber_id], |r| r.get(0))?;
    Ok(json!({
        "subscription_id": subscriber_id,
        "email": email,
        "membership": membership,
    }))
}

/// Records `member.downgraded` for up to `batch` members whose paid access ended by its date
/// by `now` (a comp or a paid period that ran out, a canceled membership at its period's
/// end) and was not told yet, oldest end first, in one short transaction; how many. Reads
/// the lapsing rows only (`memberships_lapsing`).
pub fn tell_lapsed(conn: &mut Connection, now: Timestamp, batch: i64) -> DomainResult<usize> {
    const DUE: &str = "SELECT subscriber_id, newsletter_id FROM memberships
         WHERE lapse_told = 0 AND access_until <= ?1 ORDER BY access_until LIMIT ?2";
    const TOLD: &str = "UPDATE memberships SET lapse_told = 1 WHERE subscriber_id = ?1";
    write_tx(conn, |tx| {
        let due: Vec<(i64, i64)> = tx
            .prepare_cached(DUE)?
            .query_map((now, batch), |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for &(subscriber_id, newsletter_id) in &due {
            tx.execute(TOLD, [subscriber_id])?;
            let membership = of(tx, subscriber_id)?;
            let data = event_data(tx, subscriber_id, &membership)?;
            events::record(tx, newsletter_id, "member.downgraded", data)?;
        }
        Ok(due.len())
    })
}

/// Paid access an import brings along (docs/subscribers.md, "Import formats"): `paid` or
/// `comped`, until a date or for good. The other platform's billing does not come with it:
/// when the date passes, the member is free until they upgrade on the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub status: MemberStatus,
    pub until: Option<Timestamp>,
}

impl Grant {
    /// A file's membership cell (Broadsheet's export: `free`, `paid`, `trialing`,
    /// `past_due`, `canceled`, `comped`; Substack's `active_subscription`: `true`, `false`)
    /// with the end of the paid period, `until`: the grant, or none when the member is free
    /// or their paid access has already ended. Stripe's statuses become `paid` until the
    /// date: the Stripe subscription is not carried over.
    pub fn imported(cell: &str, until: Option<Timestamp>) -> Result<Option<Grant>, String> {
        let status = match cell.trim().to_lowercase().as_str() {
            "" | "free" | "false" => return Ok(None),
            "paid" | "trialing" | "past_due" | "canceled" | "true" => MemberStatus::Paid,
            "comped" => MemberStatus::Comped,
            other => {
                return Err(format!(
                    "Membership must be free, paid, trialing, past_due, canceled, comped, true or false, not {other:?}"
                ));
            }
        };
        if until.is_some_and(|end| end <= Timestamp::now()) {
            return Ok(None);
        }
        Ok(Some(Grant { status, until }))
    }
}

/// Gives a subscriber an import just created the paid access `grant` holds, inside the
/// import's transaction (`member.upgraded` is recorded, as for a comp).
pub fn grant(
    tx: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    grant: &Grant,
) -> DomainResult<Membership> {
    let change = Change {
        status: grant.status,
        interval: None,
        amount: None,
        until: grant.until,
        stripe_customer: None,
        stripe_subscription: None,
        stripe_event_at: None,
    };
    write(tx, newsletter_id, subscriber_id, &change)
}

/// What the owner (the dashboard, the API) may set: `paid` or `comped` until a date or for
/// good, or `free`. Stripe's own statuses come only from Stripe.
pub fn set_by_owner(
    conn: &mut Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    status: &str,
    until: Option<&str>,
) -> DomainResult<Membership> {
    let mut errors = crate::domain::FieldErrors::new();
    let status = match MemberStatus::parse(status.trim()) {
        Some(s @ (MemberStatus::Paid | MemberStatus::Comped | MemberStatus::Free)) => Some(s),
        _ => {
            errors.add("membership.status", "must be one of paid, comped or free");
            None
        }
    };
    let until = match until.map(str::trim).filter(|t| !t.is_empty()) {
        None => None,
        Some(text) => match Timestamp::parse(text) {
            Some(_) if status == Some(MemberStatus::Free) => {
                errors.add("membership.until", "must be null for a free membership");
                None
            }
            Some(at) if at <= Timestamp::now() => {
                errors.add("membership.until", "must be in the future");
                None
            }
            Some(at) => Some(at),
            None => {
                errors.add(
                    "membership.until",
                    "must be an ISO 8601 date-time with a time zone, e.g. 2027-01-01T00:00:00Z",
                );
                None
            }
        },
    };
    errors.into_result()?;
    let status = status.expect("checked above");
    write_tx(conn, |tx| {
        const EXISTS: &str = "SELECT 1 FROM subscribers WHERE id = ?1 AND newsletter_id = ?2";
        tx.query_row(EXISTS, (subscriber_id, newsletter_id), |_| Ok(()))
            .optional()?
            .ok_or(DomainError::NotFound("subscriber"))?;
        let kept = stored(tx, subscriber_id)?;
        let change = Change {
            status,
            interval: kept.as_ref().and_then(|k| k.interval),
            amount: None,
            until,
            stripe_customer: None,
            stripe_subscription: None,
            stripe_event_at: None,
        };
        write(tx, newsletter_id, subscriber_id, &change)
    })
}

/// The membership figures of the stats: members with paid access now, the monthly
/// recurring revenue of those who pay (yearly prices counted a twelfth a month), and the
/// members who became paid or canceled in the last 30 days. Reads the members' rows only
/// (`memberships_newsletter`), never the list.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Figures {
    pub paid_members: i64,
    pub comped_members: i64,
    pub trialing_members: i64,
    /// In the plan's minor unit (cents).
    pub monthly_recurring_revenue: i64,
    pub currency: Option<String>,
    pub new_paid_last_30_days: i64,
    pub canceled_last_30_days: i64,
}

pub fn figures(conn: &Connection, newsletter_id: i64) -> DomainResult<Figures> {
    const SQL: &str = "SELECT
         count(*) FILTER (WHERE status IN ('paid', 'past_due', 'canceled')),
         count(*) FILTER (WHERE status = 'comped'),
         count(*) FILTER (WHERE status = 'trialing'),
         coalesce(sum(CASE WHEN status IN ('paid', 'past_due') AND interval = 'month' THEN amount
                           WHEN status IN ('paid', 'past_due') AND interval = 'year' THEN amount / 12.0
                           ELSE 0 END), 0),
         count(*) FILTER (WHERE status IN ('paid', 'trialing') AND since > ?3)
         FROM memberships WHERE newsletter_id = ?1 AND status != 'free'
             AND (access_until IS NULL OR access_until > ?2)";
    const CANCELED: &str = "SELECT count(*) FROM memberships
         WHERE newsletter_id = ?1 AND canceled_at > ?2";
    const CURRENCY: &str = "SELECT currency FROM membership_plans WHERE newsletter_id = ?1";
    let now = Timestamp::now();
    let month_ago = now - clock::days(30);
    let (paid, comped, trialing, mrr, new_paid): (i64, i64, i64, f64, i64) =
        conn.query_row(SQL, (newsletter_id, now, month_ago), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
    let canceled: i64 = conn.query_row(CANCELED, (newsletter_id, month_ago), |r| r.get(0))?;
    let currency: Option<String> = conn
        .query_row(CURRENCY, [newsletter_id], |r| r.get(0))
        .optional()?;
    Ok(Figures {
        paid_members: paid,
        comped_members: comped,
        trialing_members: trialing,
        monthly_recurring_revenue: mrr.round() as i64,
        currency,
        new_paid_last_30_days: new_paid,
        canceled_last_30_days: canceled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscriber(conn: &Connection, email: &str) -> i64 {
        conn.execute(
            "INSERT INTO subscribers (newsletter_id, email, created_at) VALUES (1, ?1, '2026-01-01T00:00:00.000Z')",
            [email],
        )
        .unwrap();
        conn.last_insert_rowid()
    }

    #[test]
    fn access_ends_with_its_date_and_free_has_none() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let id = subscriber(&conn, "a@x.co");
        assert_eq!(of(&conn, id).unwrap(), Membership::free());
        let soon = (Timestamp::now() + clock::days(2)).to_string();
        let m = set_by_owner(&mut conn, 1, id, "comped", Some(&soon)).unwrap();
        assert_eq!((m.status, m.plan), (MemberStatus::Comped, "paid"));
        // The same row read at a time past its end is free.
        let row = stored(&conn, id).unwrap().unwrap();
        let later = Timestamp::now() + clock::days(3);
        assert_eq!(Membership::at(&row, later).status, MemberStatus::Free);
        let m = set_by_owner(&mut conn, 1, id, "free", None).unwrap();
        assert_eq!(m.status, MemberStatus::Free);
        assert!(set_by_owner(&mut conn, 1, id, "trialing", None).is_err());
        assert!(set_by_owner(&mut conn, 1, id, "paid", Some("2001-01-01T00:00:00Z")).is_err());
        assert!(matches!(
            set_by_owner(&mut conn, 1, 999, "paid", None),
            Err(DomainError::NotFound(_))
        ));
    }

    #[test]
    fn stripe_paid_access_lasts_a_grace_past_the_period() {
        let end = Timestamp::now();
        assert_eq!(
            access_until(MemberStatus::Paid, Some(end), true),
            Some(end + RENEWAL_GRACE)
        );
        assert_eq!(
            access_until(MemberStatus::Paid, Some(end), false),
            Some(end)
        );
        assert_eq!(
            access_until(MemberStatus::PastDue, Some(end), true),
            Some(end)
        );
        assert_eq!(access_until(MemberStatus::Comped, None, false), None);
    }

    #[test]
    fn figures_count_members_and_monthly_revenue() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let a = subscriber(&conn, "a@x.co");
        let b = subscriber(&conn, "b@x.co");
        let c = subscriber(&conn, "c@x.co");
        let soon = Some(Timestamp::now() + clock::days(20));
        let tx = conn.transaction().unwrap();
        for (id, interval, amount) in [(a, Interval::Month, 500), (b, Interval::Year, 6000)] {
            let change = Change {
                status: MemberStatus::Paid,
                interval: Some(interval),
                amount: Some(amount),
                until: soon,
                stripe_customer: Some(format!("cus_{id}")),
                stripe_subscription: Some(format!("sub_{id}")),
                stripe_event_at: Some(1),
            };
            write(&tx, 1, id, &change).unwrap();
        }
        tx.commit().unwrap();
        set_by_owner(&mut conn, 1, c, "comped", None).unwrap();
        let f = figures(&conn, 1).unwrap();
        assert_eq!((f.paid_members, f.comped_members), (2, 1));
        assert_eq!(f.monthly_recurring_revenue, 1000);
        assert_eq!(f.new_paid_last_30_days, 2);
    }
}
