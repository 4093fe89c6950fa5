//! Resending an issue to its recipients who did not open it (docs/automations.md, "Resend
//! to those who did not open"): once per issue, with a new subject, `after_hours` after it
//! was sent. The resend is an issue of its own (a copy of the content, not on the site),
//! scheduled for then, its audience the original's non-openers (`Audience::resend_of`);
//! when its send starts it records as recipients the original's
//! deliveries that were taken and not opened by a person (`deliveries.opened_auto`: Apple
//! Mail Privacy Protection's prefetch and scanners opening within seconds are set aside),
//! of subscribers still active and not paused, and from there it is a send like any other.

use rusqlite::Connection;

use super::{Issue, Status, copy_of, get, merge_tag_problem};
use crate::clock::{self, Timestamp};
use crate::domain::{DomainError, DomainResult, ErrorCode, FieldErrors, clean_text, newsletters};
use crate::store::write_tx;

/// The longest wait before a resend: 30 days.
pub const AFTER_HOURS_MAX: i64 = 720;

/// Resends sent issue `id` to those who did not open it: a new issue with `subject`,
/// scheduled `after_hours` (a whole number from 1 to [`AFTER_HOURS_MAX`], as typed) after the original was sent (at once
/// when that time has passed). Refused when the issue is not sent, is itself a resend, or
/// was resent so already; nothing changes then.
pub fn resend_unopened(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    subject: &str,
    after_hours: &str,
) -> DomainResult<Issue> {
    let mut errors = FieldErrors::new();
    let subject = clean_text(&mut errors, "subject", subject, true, super::SUBJECT_MAX);
    if subject.contains(['\r', '\n']) {
        errors.add("subject", "must be one line");
    }
    let after_hours = after_hours.trim().parse::<i64>().unwrap_or(0);
    if !(1..=AFTER_HOURS_MAX).contains(&after_hours) {
        errors.add(
            "after_hours",
            format!("must be a whole number of hours from 1 to {AFTER_HOURS_MAX}"),
        );
    }
    errors.into_result()?;
    write_tx(conn, |tx| {
        newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        let original = get(tx, newsletter_id, id)?;
        let refusal = |message: String| DomainError::rejected(ErrorCode::InvalidState, message);
        if original.status != Status::Sent {
            return Err(refusal(format!(
                "Only a sent issue can be resent to those who did not open it; this one is {}",
                original.status.as_str()
            )));
        }
        if original.audience.resend_of.is_some() {
            return Err(refusal(
                "This issue is itself a resend to those who did not open; it is not resent again"
                    .into(),
            ));
        }
        if let Some(resend) = original.resent_unopened_as {
            return Err(refusal(format!(
                "This issue was resent to those who did not open it already (issue {resend}); an issue is resent once"
            )));
        }
        let sent_at = original.sent_at.unwrap_or_else(Timestamp::now);
        let at = std::cmp::max(
            Timestamp::from(clock::now()),
            sent_at + jiff::SignedDuration::from_hours(after_hours),
        );
        let resend = copy_of(tx, original, &subject)?;
        const SCHEDULE: &str =
            "UPDATE issues SET status = 'scheduled', scheduled_for = ?2, resend_of = ?3
             WHERE id = ?1";
        tx.execute(SCHEDULE, (resend, at, id))?;
        const MARK: &str = "UPDATE issues SET resent_unopened_as = ?2 WHERE id = ?1";
        tx.execute(MARK, (id, resend))?;
        let issue = get(tx, newsletter_id, resend)?;
        if let Some(problem) = merge_tag_problem(tx, newsletter_id, &issue)? {
            return Err(DomainError::invalid("subject", problem));
        }
        Ok(issue)
    })
}
