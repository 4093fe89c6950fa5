//! Test sends: one issue to one to five addresses before the real send, so the owner sees it
//! in a real inbox. The message is the real send's (same renderer, signing and headers) with
//! "[Test] " before the subject, and it leaves no trace in the newsletter's numbers: no
//! delivery row, no stats, no event, no webhook. Its personal links name the test delivery
//! ([`TEST_DELIVERY`], an id no delivery row has), so they work (a click still redirects,
//! the unsubscribe link says it was a test) and count nothing.
//!
//! Who may receive one (docs/sending.md, "Test sends"): a newsletter that may mail its
//! subscribers (paid tier, active) may test to any address; otherwise only to the owner's
//! own address, so a free newsletter can still see its issue in an inbox but cannot mail
//! strangers.

use rusqlite::{Connection, OptionalExtension};

use crate::domain::issues::{self, Issue};
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::values::email::EmailAddress;
use crate::domain::{DomainError, DomainResult, ErrorCode, FieldErrors};
use crate::store::write_tx;

/// The most addresses one test send goes to.
pub const MAX_RECIPIENTS: usize = 5;

/// What marks a test in the subject line.
pub const SUBJECT_PREFIX: &str = "[Test] ";

/// The delivery id a test message's links and return path name: delivery rows start at 1,
/// so no real delivery has it, and the tracking routes count nothing for it.
pub const TEST_DELIVERY: i64 = 0;

/// The subject of a test message of an issue with `subject`.
pub fn test_subject(subject: &str) -> String {
    format!("{SUBJECT_PREFIX}{subject}")
}

/// Splits what the dashboard's field holds (addresses separated by commas, semicolons or
/// line breaks) into the addresses as typed; empty pieces are dropped.
pub fn split_addresses(text: &str) -> Vec<String> {
    text.split([',', ';', '\n', '\r'])
        .map(str::trim)
        .filter(|piece| !piece.is_empty())
        .map(str::to_string)
        .collect()
}

/// Checks the addresses of a test send (field `emails`): 1 to [`MAX_RECIPIENTS`], each a
/// valid address; the same address twice (in any case) counts once. Every bad address is
/// named.
pub fn check_recipients(raw: &[String]) -> DomainResult<Vec<EmailAddress>> {
    let mut errors = FieldErrors::new();
    let mut recipients: Vec<EmailAddress> = Vec::new();
    for typed in raw {
        match EmailAddress::parse(typed) {
            Ok(email) if recipients.contains(&email) => {}
            Ok(email) => recipients.push(email),
            Err(message) => errors.add("emails", format!("{:?} {message}", typed.trim())),
        }
    }
    if raw.iter().all(|typed| typed.trim().is_empty()) {
        errors.add("emails", "needs at least one address");
    } else if recipients.len() > MAX_RECIPIENTS {
        errors.add(
            "emails",
            format!(
                "has {} addresses; a test goes to at most {MAX_RECIPIENTS}",
                recipients.len()
            ),
        );
    }
    errors.into_result()?;
    Ok(recipients)
}

/// A test send as queued.
#[derive(Debug, Clone)]
pub struct Queued {
    pub issue: Issue,
    /// The addresses, checked, each once.
    pub recipients: Vec<EmailAddress>,
}

/// The address the owner of `newsletter` signs in with.
pub fn owner_email(conn: &Connection, newsletter: &Newsletter) -> DomainResult<String> {
    const SQL: &str = "SELECT email FROM users WHERE id = ?1";
    conn.query_row(SQL, [newsletter.owner_id], |r| r.get(0))
        .optional()?
        .ok_or(DomainError::NotFound("owner"))
}

/// Whether a test of `newsletter` may go to `recipients`: anyone when the newsletter may mail
/// its subscribers, else only its owner (`owner`).
fn check_allowed(
    newsletter: &Newsletter,
    owner: &str,
    recipients: &[EmailAddress],
) -> DomainResult<()> {
    let others: Vec<&str> = recipients
        .iter()
        .map(EmailAddress::as_str)
        .filter(|email| !email.eq_ignore_ascii_case(owner))
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    let only_owner = |why: &str| {
        format!(
            "{why}, a test can only go to your own address ({owner}), not to {}",
            others.join(", ")
        )
    };
    if newsletter.status == newsletters::Status::Paused {
        return Err(DomainError::rejected(
            ErrorCode::NewsletterPaused,
            only_owner("While the newsletter is paused"),
        ));
    }
    if newsletter.tier != newsletters::Tier::Paid {
        return Err(DomainError::rejected(
            ErrorCode::PaymentRequired,
            only_owner("Until the newsletter is on the paid tier"),
        ));
    }
    Ok(())
}

/// Queues a test of issue `id` of newsletter `newsletter_id` to `recipients` (checked by
/// [`check_recipients`]): one `send_test` job per address, in one transaction, so the answer
/// comes at once and the mail survives a restart. Any issue with content may be tested,
/// whatever its status; a cancelled newsletter may not.
pub fn queue(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    recipients: Vec<EmailAddress>,
) -> DomainResult<Queued> {
    write_tx(conn, |tx| {
        let newsletter = newsletters::get(tx, newsletter_id)?;
        newsletter.ensure_writable()?;
        let issue = issues::get(tx, newsletter_id, id)?;
        if !issue.has_content() {
            return Err(DomainError::rejected(
                ErrorCode::NoContent,
                "The issue has no content and no articles",
            ));
        }
        check_allowed(&newsletter, &owner_email(tx, &newsletter)?, &recipients)?;
        for to in &recipients {
            crate::store::jobs::queue_test_send(tx, newsletter_id, id, to.as_str())?;
        }
        Ok(Queued { issue, recipients })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testing::db_with_newsletter;

    fn typed(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn addresses_are_split_checked_and_folded() {
        assert_eq!(
            split_addresses(" a@x.co, b@x.co\r\n\nc@x.co;"),
            typed(&["a@x.co", "b@x.co", "c@x.co"])
        );
        let checked = check_recipients(&typed(&["A@x.co", "a@x.co ", "b@x.co"])).unwrap();
        let emails: Vec<&str> = checked.iter().map(EmailAddress::as_str).collect();
        assert_eq!(emails, ["a@x.co", "b@x.co"]);
        let six = typed(&["1@x.co", "2@x.co", "3@x.co", "4@x.co", "5@x.co", "6@x.co"]);
        let Err(DomainError::Invalid(_, errors)) = check_recipients(&six) else {
            panic!("six addresses pass")
        };
        assert_eq!(
            errors.sentences(),
            ["Emails has 6 addresses; a test goes to at most 5"]
        );
        let Err(DomainError::Invalid(_, errors)) =
            check_recipients(&typed(&["ok@x.co", "nope", "b@"]))
        else {
            panic!("bad addresses pass")
        };
        assert_eq!(errors.by_field()["emails"].len(), 2);
        assert!(check_recipients(&typed(&[" "])).is_err());
        assert!(check_recipients(&[]).is_err());
    }

    #[test]
    fn a_free_newsletter_tests_to_its_owner_only() {
        let mut conn = db_with_newsletter("free");
        conn.execute_batch(
            "INSERT INTO issues (newsletter_id, subject, content_markdown, path, created_at, updated_at)
               VALUES (1, 'S', 'x', 's', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO issues (newsletter_id, subject, content_markdown, path, created_at, updated_at)
               VALUES (1, 'Empty', '', 'e', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        let jobs = |conn: &Connection| -> i64 {
            conn.query_row(
                "SELECT count(*) FROM jobs WHERE kind = 'send_test'",
                [],
                |r| r.get(0),
            )
            .unwrap()
        };
        let to = |list: &[&str]| check_recipients(&typed(list)).unwrap();
        let refused = queue(&mut conn, 1, 1, to(&["o@x.co", "friend@x.co"]));
        assert!(
            matches!(refused, Err(DomainError::Rejected(ErrorCode::PaymentRequired, ref m)) if m.contains("friend@x.co"))
        );
        assert_eq!(jobs(&conn), 0, "nothing is queued when refused");
        queue(&mut conn, 1, 1, to(&["O@x.co"])).unwrap();
        assert_eq!(jobs(&conn), 1);
        assert!(matches!(
            queue(&mut conn, 1, 2, to(&["o@x.co"])),
            Err(DomainError::Rejected(ErrorCode::NoContent, _))
        ));
        assert!(matches!(
            queue(&mut conn, 1, 99, to(&["o@x.co"])),
            Err(DomainError::NotFound("issue"))
        ));
        conn.execute("UPDATE newsletters SET tier = 'paid'", [])
            .unwrap();
        queue(&mut conn, 1, 1, to(&["a@x.co", "b@x.co"])).unwrap();
        assert_eq!(jobs(&conn), 3);
    }
}
