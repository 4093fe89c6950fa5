//! The preference centre's rules (docs/growth.md, "The preference centre"): a reader pauses
//! their mail for [`PAUSE`] (or ends a pause), and adds or removes the tags their newsletter
//! offers as public topics; the owner chooses those topics. Each change a reader makes fires
//! `subscriber.updated`, as any change of a subscriber does.
//!
//! A pause keeps the subscriber `active` (the counters stay what they count): sends and their
//! counts leave out the subscribers with a pause running when they read the list
//! (`subscriber_pauses`, one probe by key per subscriber, and [`paused_count`] for everyone).

use jiff::SignedDuration;
use rusqlite::Connection;

use super::{Subscriber, changed, clean_tags, ensure_open, get};
use crate::clock::{self, Timestamp};
use crate::domain::{DomainError, DomainResult};
use crate::store::write_tx;

/// How long a pause lasts.
pub const PAUSE: SignedDuration = clock::days(30);
/// How many topics a newsletter may offer.
pub const TOPICS_MAX: usize = 20;

/// Pauses `subscriber_id`'s mail for [`PAUSE`] from now (a running pause starts again).
pub fn pause(
    conn: &mut Connection,
    newsletter_id: i64,
    subscriber_id: i64,
) -> DomainResult<Subscriber> {
    const PAUSE_SQL: &str = "INSERT INTO subscriber_pauses (subscriber_id, newsletter_id, until)
         VALUES (?1, ?2, ?3)
         ON CONFLICT (subscriber_id) DO UPDATE SET until = excluded.until";
    write_tx(conn, |tx| {
        ensure_open(tx, newsletter_id)?;
        let before = get(tx, newsletter_id, subscriber_id)?;
        let until = Timestamp::from(clock::now() + PAUSE);
        tx.execute(PAUSE_SQL, (subscriber_id, newsletter_id, until))?;
        changed(tx, before)
    })
}

/// Ends `subscriber_id`'s pause now: the next send reaches them again.
pub fn resume(
    conn: &mut Connection,
    newsletter_id: i64,
    subscriber_id: i64,
) -> DomainResult<Subscriber> {
    const RESUME: &str = "DELETE FROM subscriber_pauses WHERE subscriber_id = ?1";
    write_tx(conn, |tx| {
        let before = get(tx, newsletter_id, subscriber_id)?;
        tx.execute(RESUME, [subscriber_id])?;
        changed(tx, before)
    })
}

/// The active subscribers of the newsletter with a pause running at `now`: read along the
/// pauses, never the list.
pub fn paused_count(conn: &Connection, newsletter_id: i64, now: &Timestamp) -> DomainResult<i64> {
    const SQL: &str = "SELECT count(*) FROM subscriber_pauses z CROSS JOIN subscribers s ON s.id = z.subscriber_id
         WHERE z.newsletter_id = ?1 AND z.until > ?2 AND s.status = 'active'";
    Ok(conn
        .prepare_cached(SQL)?
        .query_row((newsletter_id, now), |r| r.get(0))?)
}

/// The tags the newsletter's readers may choose as topics, sorted.
pub fn topics(conn: &Connection, newsletter_id: i64) -> DomainResult<Vec<String>> {
    const SQL: &str = "SELECT tag FROM newsletter_topics WHERE newsletter_id = ?1 ORDER BY tag";
    let tags = conn
        .prepare_cached(SQL)?
        .query_map([newsletter_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(tags)
}

/// The owner's choice of topics among the tags their page `shown`: those in `chosen` (each a
/// tag as subscribers' are; new ones too) are topics, the other shown ones not; a topic
/// the page did not show stays. At most [`TOPICS_MAX`]; refused whole, naming each
/// problem, when one is wrong.
pub fn set_topics(
    conn: &mut Connection,
    newsletter_id: i64,
    shown: &[String],
    chosen: &[String],
) -> DomainResult<Vec<String>> {
    const CLEAR: &str = "DELETE FROM newsletter_topics WHERE newsletter_id = ?1";
    const ADD: &str = "INSERT INTO newsletter_topics (newsletter_id, tag) VALUES (?1, ?2)";
    write_tx(conn, |tx| {
        ensure_open(tx, newsletter_id)?;
        let kept = topics(tx, newsletter_id)?
            .into_iter()
            .filter(|t| !shown.contains(t));
        let mut errors = crate::domain::FieldErrors::new();
        let all: Vec<String> = kept.chain(chosen.iter().cloned()).collect();
        let clean = clean_tags(&all, ("topics", TOPICS_MAX), &mut errors);
        errors.into_result()?;
        tx.execute(CLEAR, [newsletter_id])?;
        for tag in &clean {
            tx.prepare_cached(ADD)?.execute((newsletter_id, tag))?;
        }
        topics(tx, newsletter_id)
    })
}

/// A reader's choice of topics among those their page `shown`: each in `chosen` is added
/// to `subscriber_id`'s tags, each other one removed; their other tags stay (a topic added
/// after the page was shown too). A shown topic the owner no longer offers is refused (the
/// page was older than the change), and nothing changes.
pub fn choose_topics(
    conn: &mut Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    shown: &[String],
    chosen: &[String],
) -> DomainResult<Subscriber> {
    const ADD: &str = "INSERT OR IGNORE INTO subscriber_tags (subscriber_id, tag) VALUES (?1, ?2)";
    const REMOVE: &str = "DELETE FROM subscriber_tags WHERE subscriber_id = ?1 AND tag = ?2";
    const TOUCH: &str = "UPDATE subscribers SET changed_at = ?2 WHERE id = ?1";
    write_tx(conn, |tx| {
        ensure_open(tx, newsletter_id)?;
        let before = get(tx, newsletter_id, subscriber_id)?;
        let offered = topics(tx, newsletter_id)?;
        if let Some(stale) = shown.iter().chain(chosen).find(|t| !offered.contains(t)) {
            return Err(DomainError::invalid(
                "topics",
                format!("“{stale}” is no longer a topic: reload the page"),
            ));
        }
        for topic in offered.iter().filter(|t| shown.contains(t)) {
            let sql = if chosen.contains(topic) { ADD } else { REMOVE };
            tx.prepare_cached(sql)?.execute((subscriber_id, topic))?;
        }
        tx.execute(TOUCH, (subscriber_id, Timestamp::now()))?;
        changed(tx, before)
    })
}
