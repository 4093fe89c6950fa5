//! RSS-to-email (docs/automations.md, "Following a feed"): a newsletter follows one feed
//! (RSS or Atom), polled every `every_minutes` (at least 15) by the `poll_feeds` job, which
//! fetches it (`feeds::fetch`, through the webhook SSRF guard) and hands what it found here.
//! Each item is recorded by its id (else its link) once per newsletter, so a restart, an
//! edited item or a feed that reorders never makes an item twice. What a new item becomes is
//! the feed's [`Mode`]: a draft issue (its title as subject, its summary and a link to it as
//! content), that issue sent at once, or a section of a digest issue scheduled at the
//! newsletter's next slot. The first poll only records the items already there. A failed
//! poll is kept on the feed for the settings page and changes nothing else.

use rusqlite::{Connection, OptionalExtension};

use super::{self as issues, IssueInput, SendChoice, Status};
use crate::clock::{self, Timestamp};
use crate::domain::content::excerpt;
use crate::domain::values::web_url::{self, Schemes};
use crate::domain::{DomainError, DomainResult, FieldErrors};
use crate::store::write_tx;

/// The fewest and most minutes between two polls.
pub const EVERY_MIN: i64 = 15;
pub const EVERY_MAX: i64 = 7 * 24 * 60;
/// The longest feed address.
pub const URL_MAX: usize = 2_000;
/// The longest summary a draft takes from an item, in characters.
const SUMMARY_MAX: usize = 2_000;

crate::string_enum!(
    /// What a feed's new item becomes.
    pub Mode {
        /// A draft issue, for the owner to edit and send.
        Draft => "draft",
        /// An issue sent at once to the newsletter's subscribers.
        Send => "send",
        /// A section of the digest issue scheduled at the newsletter's next slot.
        Digest => "digest"
    }
);

impl Mode {
    /// The dashboard's words for it.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Draft => "Make a draft of each new post",
            Mode::Send => "Send each new post at once",
            Mode::Digest => "Gather new posts into one issue at the newsletter's next slot",
        }
    }
}

/// The subject of a digest issue until the owner changes it.
fn digest_subject(newsletter_name: &str) -> String {
    let subject = format!("New posts on {newsletter_name}");
    subject.chars().take(issues::SUBJECT_MAX).collect()
}

/// A newsletter's feed as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feed {
    pub newsletter_id: i64,
    pub url: String,
    pub every_minutes: i64,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub next_poll_at: Timestamp,
    pub last_polled_at: Option<Timestamp>,
    pub last_error: Option<String>,
    /// The first poll has worked: from now on new items become issues.
    pub primed: bool,
    pub mode: Mode,
    /// The digest gathering new items (digest mode), while it is scheduled.
    pub digest_issue_id: Option<i64>,
    /// How many issues the feed's items have become.
    pub issues_made: i64,
}

macro_rules! select_feed {
    ($tail:literal) => {
        concat!(
            "SELECT f.newsletter_id, f.url, f.every_minutes, f.etag, f.last_modified, f.next_poll_at,
                    f.last_polled_at, f.last_error, f.primed, f.mode, f.digest_issue_id,
                    (SELECT count(DISTINCT i.issue_id) FROM feed_items i WHERE i.newsletter_id = f.newsletter_id)
             FROM newsletter_feeds f ",
            $tail
        )
    };
}

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Feed> {
    Ok(Feed {
        newsletter_id: r.get(0)?,
        url: r.get(1)?,
        every_minutes: r.get(2)?,
        etag: r.get(3)?,
        last_modified: r.get(4)?,
        next_poll_at: r.get(5)?,
        last_polled_at: r.get(6)?,
        last_error: r.get(7)?,
        primed: r.get(8)?,
        mode: r.get(9)?,
        digest_issue_id: r.get(10)?,
        issues_made: r.get(11)?,
    })
}

/// The newsletter's feed, if it follows one.
pub fn get(conn: &Connection, newsletter_id: i64) -> DomainResult<Option<Feed>> {
    const SQL: &str = select_feed!("WHERE f.newsletter_id = ?1");
    Ok(conn.query_row(SQL, [newsletter_id], from_row).optional()?)
}

/// What the owner asks a feed to be: its address, minutes between polls, and mode, as typed.
#[derive(Debug, Clone, Default)]
pub struct FeedInput {
    pub url: String,
    pub every_minutes: String,
    pub mode: String,
}

/// Follows the feed at `url`, polled every `every_minutes`, in `mode`; a new address starts
/// afresh (its first poll records the items already there). Refused, naming each problem,
/// when the address is not an http(s) address, the interval is outside [`EVERY_MIN`] to
/// [`EVERY_MAX`], or the mode is unknown, or a digest for a newsletter without a publishing
/// frequency (it has no slot).
pub fn follow(conn: &mut Connection, newsletter_id: i64, input: &FeedInput) -> DomainResult<Feed> {
    let url = input.url.as_str();
    let every_minutes = input.every_minutes.as_str();
    let mut errors = FieldErrors::new();
    let url = match web_url::check(url.trim(), Schemes::HttpOrHttps, URL_MAX) {
        Ok(url) => url,
        Err(problem) => {
            errors.add(
                "feed.url",
                problem.message(URL_MAX, "must be an http:// or https:// address"),
            );
            String::new()
        }
    };
    let every = match every_minutes.trim().parse::<i64>() {
        Ok(n) if (EVERY_MIN..=EVERY_MAX).contains(&n) => n,
        _ => {
            errors.add(
                "feed.every_minutes",
                format!("must be a whole number of minutes from {EVERY_MIN} to {EVERY_MAX}"),
            );
            EVERY_MIN
        }
    };
    let mode = Mode::parse(input.mode.trim());
    if mode.is_none() {
        errors.add("feed.mode", "must be draft, send or digest");
    }
    errors.into_result()?;
    let mode = mode.unwrap_or(Mode::Draft);
    const FOLLOW: &str = "INSERT INTO newsletter_feeds (newsletter_id, url, every_minutes, mode, next_poll_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?5, ?4, ?4, ?4)
         ON CONFLICT (newsletter_id) DO UPDATE SET every_minutes = excluded.every_minutes,
             mode = excluded.mode, updated_at = excluded.updated_at,
             next_poll_at = CASE WHEN url = excluded.url THEN next_poll_at ELSE excluded.next_poll_at END,
             etag = CASE WHEN url = excluded.url THEN etag END,
             last_modified = CASE WHEN url = excluded.url THEN last_modified END,
             primed = CASE WHEN url = excluded.url THEN primed ELSE 0 END,
             last_error = CASE WHEN url = excluded.url THEN last_error END,
             url = excluded.url";
    write_tx(conn, |tx| {
        let newsletter = crate::domain::newsletters::get(tx, newsletter_id)?;
        newsletter.ensure_writable()?;
        if mode == Mode::Digest && !has_slots(&newsletter) {
            return Err(DomainError::invalid(
                "feed.mode",
                "can't be a digest: the newsletter has no publishing frequency to pick its next slot from (Settings, Frequency)",
            ));
        }
        tx.execute(FOLLOW, (newsletter_id, &url, every, Timestamp::now(), mode))?;
        get(tx, newsletter_id)?.ok_or(DomainError::NotFound("feed"))
    })
}

/// Whether the newsletter's frequency gives it slots to schedule a digest at.
fn has_slots(newsletter: &crate::domain::newsletters::Newsletter) -> bool {
    newsletter
        .frequency
        .and_then(|f| issues::next_slot(f, clock::now(), &newsletter.time_zone))
        .is_some()
}

/// Stops following the feed (the issues it made stay).
pub fn unfollow(conn: &Connection, newsletter_id: i64) -> DomainResult<()> {
    const SQL: &str = "DELETE FROM newsletter_feeds WHERE newsletter_id = ?1";
    conn.execute(SQL, [newsletter_id])?;
    Ok(())
}

/// Up to `limit` feeds due at `now`, soonest first.
pub fn due(conn: &Connection, now: &Timestamp, limit: i64) -> DomainResult<Vec<Feed>> {
    const SQL: &str = select_feed!("WHERE f.next_poll_at <= ?1 ORDER BY f.next_poll_at LIMIT ?2");
    let feeds = conn
        .prepare_cached(SQL)?
        .query_map((now, limit), from_row)?
        .collect::<Result<_, _>>()?;
    Ok(feeds)
}

/// One item of a feed, as the fetcher read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's id, else its link: what makes it the same item across polls.
    pub key: String,
    pub title: String,
    pub link: Option<String>,
    /// Its summary or content, as HTML.
    pub summary_html: String,
}

/// What a poll found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Polled {
    /// 304: nothing new since the validators.
    NotModified,
    Items {
        etag: Option<String>,
        last_modified: Option<String>,
        items: Vec<Item>,
    },
    /// Why the feed could not be read; nothing else changes.
    Failed(String),
}

/// Records the poll of `feed` at `now`: the next poll, and the outcome. Each item not seen
/// before is recorded; once the feed is primed, each becomes what the feed's mode makes of
/// it ([`made_of`]). Returns how many items became (or joined) issues.
pub fn record(conn: &mut Connection, feed: &Feed, polled: &Polled) -> DomainResult<usize> {
    const NEXT: &str =
        "UPDATE newsletter_feeds SET next_poll_at = ?2, last_polled_at = ?3, last_error = ?4
         WHERE newsletter_id = ?1 AND url = ?5";
    const VALIDATORS: &str = "UPDATE newsletter_feeds SET etag = ?2, last_modified = ?3, primed = 1
         WHERE newsletter_id = ?1";
    const SEEN: &str =
        "INSERT OR IGNORE INTO feed_items (newsletter_id, item_key, seen_at) VALUES (?1, ?2, ?3)";
    const MADE: &str =
        "UPDATE feed_items SET issue_id = ?3 WHERE newsletter_id = ?1 AND item_key = ?2";
    let now = Timestamp::from(clock::now());
    let next = Timestamp::from(clock::now() + jiff::SignedDuration::from_mins(feed.every_minutes));
    write_tx(conn, |tx| {
        let error = match polled {
            Polled::Failed(why) => Some(why.as_str()),
            _ => None,
        };
        // A feed whose address changed meanwhile is the new address's: this poll is dropped.
        if tx.execute(NEXT, (feed.newsletter_id, next, now, error, &feed.url))? == 0 {
            return Ok(0);
        }
        let Polled::Items {
            etag,
            last_modified,
            items,
        } = polled
        else {
            return Ok(0);
        };
        tx.execute(VALIDATORS, (feed.newsletter_id, etag, last_modified))?;
        let mut made = 0;
        for item in items {
            if tx.execute(SEEN, (feed.newsletter_id, &item.key, now))? == 0 || !feed.primed {
                continue;
            }
            let id = made_of(tx, feed, item)?;
            tx.execute(MADE, (feed.newsletter_id, &item.key, id))?;
            made += 1;
        }
        Ok(made)
    })
}

/// What `item` becomes in the feed's mode, inside the poll's transaction; returns the issue.
/// A send or a digest that the newsletter refuses now (paused, no subscribers, the free
/// tier, no frequency) leaves a draft saying why, so no post is lost.
fn made_of(tx: &Connection, feed: &Feed, item: &Item) -> DomainResult<i64> {
    let newsletter_id = feed.newsletter_id;
    match feed.mode {
        Mode::Draft => draft_of(tx, newsletter_id, item),
        Mode::Send => {
            let id = draft_of(tx, newsletter_id, item)?;
            let choice = SendChoice {
                approve_draft: true,
                ..SendChoice::default()
            };
            match issues::send_in(tx, newsletter_id, id, &choice) {
                Ok(_) => Ok(id),
                Err(refused) => kept_as_draft(tx, id, "could not be sent at once", refused),
            }
        }
        Mode::Digest => {
            // Read here, not from `feed`: an earlier item of this poll may have opened it.
            const OPEN: &str =
                "SELECT digest_issue_id FROM newsletter_feeds WHERE newsletter_id = ?1";
            let open: Option<i64> = tx.query_row(OPEN, [newsletter_id], |r| r.get(0))?;
            if let Some(id) = open
                && let Some(id) = appended(tx, newsletter_id, id, item)?
            {
                return Ok(id);
            }
            let newsletter = crate::domain::newsletters::get(tx, newsletter_id)?;
            let input = IssueInput {
                subject: Some(digest_subject(&newsletter.name)),
                content_markdown: Some(section_of(item)),
                status: Some(Status::Scheduled.as_str().to_string()),
                ..IssueInput::default()
            };
            let checked = issues::check_new(&input)?;
            let id = match issues::create_in(tx, newsletter_id, &checked) {
                Ok(digest) => digest.id,
                Err(refused @ (DomainError::Invalid(..) | DomainError::Rejected(..))) => {
                    let id = draft_of(tx, newsletter_id, item)?;
                    return kept_as_draft(tx, id, "could not join a digest", refused);
                }
                Err(other) => return Err(other),
            };
            const DIGEST: &str =
                "UPDATE newsletter_feeds SET digest_issue_id = ?2 WHERE newsletter_id = ?1";
            tx.execute(DIGEST, (newsletter_id, id))?;
            Ok(id)
        }
    }
}

/// Records on the draft `id` why its post was not sent as the feed asked; a failure of the
/// store is no refusal and is passed on.
fn kept_as_draft(tx: &Connection, id: i64, what: &str, refused: DomainError) -> DomainResult<i64> {
    if !matches!(
        refused,
        DomainError::Invalid(..) | DomainError::Rejected(..)
    ) {
        return Err(refused);
    }
    const WHY: &str = "UPDATE issues SET last_error = ?2 WHERE id = ?1";
    tx.execute(WHY, (id, format!("This post {what}: {refused}")))?;
    Ok(id)
}

/// Appends `item` to the digest `id` while it is still scheduled for later; `None` when it
/// is not (sent, sending, unscheduled, deleted, due) or the section does not fit: a new
/// digest is opened then.
fn appended(
    tx: &Connection,
    newsletter_id: i64,
    id: i64,
    item: &Item,
) -> DomainResult<Option<i64>> {
    let digest = match issues::get(tx, newsletter_id, id) {
        Ok(digest) => digest,
        Err(DomainError::NotFound(_)) => return Ok(None),
        Err(other) => return Err(other),
    };
    let later = digest
        .scheduled_for
        .is_some_and(|at| at.instant() > clock::now());
    if digest.status != Status::Scheduled || !later {
        return Ok(None);
    }
    let input = IssueInput {
        content_markdown: Some(format!(
            "{}\n\n{}",
            digest.content_markdown.trim_end(),
            section_of(item)
        )),
        ..IssueInput::default()
    };
    let Ok(checked) = issues::check_changes(&input) else {
        return Ok(None);
    };
    match issues::update_in(tx, newsletter_id, id, &checked) {
        Ok(_) => Ok(Some(id)),
        Err(DomainError::Invalid(..) | DomainError::Rejected(..)) => Ok(None),
        Err(other) => Err(other),
    }
}

/// The item's section of a digest: its title as a heading linking it, and its summary.
fn section_of(item: &Item) -> String {
    let title = crate::domain::content::escape_markdown(&subject_of(item));
    let heading = match &item.link {
        Some(link) => format!("## [{title}]({link})"),
        None => format!("## {title}"),
    };
    format!("{heading}\n\n{}", summary_of(item))
}

/// The item's title as a subject: one line, cut to the subject's length.
fn subject_of(item: &Item) -> String {
    let title: String = item
        .title
        .trim()
        .chars()
        .take(issues::SUBJECT_MAX)
        .collect();
    let title = title.replace(['\r', '\n'], " ");
    if title.trim().is_empty() {
        "A new post".to_string()
    } else {
        title.trim().to_string()
    }
}

/// The item's summary as Markdown that reads as written.
fn summary_of(item: &Item) -> String {
    let summary = excerpt::text_of_html(&item.summary_html, SUMMARY_MAX);
    crate::domain::content::escape_markdown(&summary)
}

/// A draft issue of `item`, inside the caller's transaction: its title as subject, its
/// summary as text and a link to it.
fn draft_of(tx: &Connection, newsletter_id: i64, item: &Item) -> DomainResult<i64> {
    let subject = subject_of(item);
    let mut markdown = summary_of(item);
    if let Some(link) = &item.link {
        markdown.push_str(&format!("\n\n[Read it on the site]({link})"));
    }
    let input = IssueInput {
        subject: Some(subject),
        content_markdown: Some(markdown),
        ..IssueInput::default()
    };
    let checked = issues::check_new(&input)?;
    Ok(issues::create_in(tx, newsletter_id, &checked)?.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str, title: &str) -> Item {
        Item {
            key: key.into(),
            title: title.into(),
            link: Some(format!("https://blog.example/{key}")),
            summary_html: "<p>Words</p>".into(),
        }
    }

    fn input(url: &str, every: &str, mode: &str) -> FeedInput {
        FeedInput {
            url: url.into(),
            every_minutes: every.into(),
            mode: mode.into(),
        }
    }

    fn polled(items: &[Item]) -> Polled {
        Polled::Items {
            etag: Some("\"e\"".into()),
            last_modified: None,
            items: items.to_vec(),
        }
    }

    fn drafts(conn: &Connection) -> Vec<String> {
        conn.prepare("SELECT subject FROM issues ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn each_item_becomes_one_draft_after_the_first_read_and_a_stale_poll_is_dropped() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let url = "https://blog.example/feed.xml";
        let feed_now = |conn: &Connection| get(conn, 1).unwrap().unwrap();
        follow(&mut conn, 1, &input(url, "15", "draft")).unwrap();
        // The first read only records.
        let first = feed_now(&conn);
        assert_eq!(
            record(&mut conn, &first, &polled(&[item("a", "A")])).unwrap(),
            0
        );
        assert!(drafts(&conn).is_empty());
        // New items (oldest first) become drafts once; seen and edited ones make none.
        let primed = feed_now(&conn);
        assert!(primed.primed);
        assert_eq!(primed.etag.as_deref(), Some("\"e\""));
        let items = [item("a", "A edited"), item("b", "B"), item("c", "C")];
        assert_eq!(record(&mut conn, &primed, &polled(&items)).unwrap(), 2);
        assert_eq!(record(&mut conn, &primed, &polled(&items)).unwrap(), 0);
        assert_eq!(drafts(&conn), ["B", "C"]);
        assert_eq!(feed_now(&conn).issues_made, 2);
        // A failure is kept and changes nothing else; the next good read clears it.
        record(&mut conn, &primed, &Polled::Failed("too large".into())).unwrap();
        assert_eq!(feed_now(&conn).last_error.as_deref(), Some("too large"));
        record(&mut conn, &primed, &Polled::NotModified).unwrap();
        assert_eq!(feed_now(&conn).last_error, None);
        // A poll of an address changed meanwhile is the old address's: dropped whole.
        follow(
            &mut conn,
            1,
            &input("https://other.example/feed.xml", "15", "draft"),
        )
        .unwrap();
        assert!(!feed_now(&conn).primed, "a new address starts afresh");
        let stale = polled(&[item("d", "D")]);
        assert_eq!(record(&mut conn, &primed, &stale).unwrap(), 0);
        assert!(!feed_now(&conn).primed);
        assert_eq!(drafts(&conn), ["B", "C"]);
        // Bad settings change nothing.
        assert!(follow(&mut conn, 1, &input("ftp://x.example/", "15", "draft")).is_err());
        assert!(follow(&mut conn, 1, &input(url, "14", "draft")).is_err());
        assert_eq!(feed_now(&conn).url, "https://other.example/feed.xml");
    }

    #[test]
    fn a_post_the_newsletter_cannot_send_as_asked_is_kept_as_a_draft_saying_why() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let url = "https://blog.example/feed.xml";
        // No frequency, so no slot: a digest is refused, by its field.
        let refused = follow(&mut conn, 1, &input(url, "15", "digest")).unwrap_err();
        assert!(
            refused.to_string().contains("no publishing frequency"),
            "{refused}"
        );
        assert!(get(&conn, 1).unwrap().is_none());
        // Sent at once, but the newsletter has no subscriber yet: a draft saying why.
        follow(&mut conn, 1, &input(url, "15", "send")).unwrap();
        let first = get(&conn, 1).unwrap().unwrap();
        record(&mut conn, &first, &polled(&[item("a", "A")])).unwrap();
        let primed = get(&conn, 1).unwrap().unwrap();
        assert_eq!(primed.mode, Mode::Send);
        record(&mut conn, &primed, &polled(&[item("b", "B")])).unwrap();
        let (status, why): (String, String) = conn
            .query_row("SELECT status, last_error FROM issues", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(status, "draft");
        assert!(
            why.starts_with(
                "This post could not be sent at once: The newsletter has no active subscribers"
            ),
            "{why}"
        );
    }

    #[test]
    fn a_digest_gathers_posts_until_its_slot_and_a_post_without_a_slot_is_kept_as_a_draft() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute("UPDATE newsletters SET frequency = 'weekly'", [])
            .unwrap();
        let url = "https://blog.example/feed.xml";
        follow(&mut conn, 1, &input(url, "15", "digest")).unwrap();
        let first = get(&conn, 1).unwrap().unwrap();
        record(&mut conn, &first, &polled(&[item("a", "A")])).unwrap();
        let primed = get(&conn, 1).unwrap().unwrap();
        record(
            &mut conn,
            &primed,
            &polled(&[item("b", "B"), item("c", "C")]),
        )
        .unwrap();
        let primed = get(&conn, 1).unwrap().unwrap();
        let digest = primed.digest_issue_id.expect("a digest is open");
        let (status, content): (String, String) = conn
            .query_row(
                "SELECT status, content_markdown FROM issues WHERE id = ?1",
                [digest],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(status, "scheduled");
        assert!(
            content.contains("## [B](https://blog.example/b)"),
            "{content}"
        );
        assert!(
            content.contains("## [C](https://blog.example/c)"),
            "{content}"
        );
        assert_eq!(primed.issues_made, 1);
        // The digest is sent or moved by the owner; the frequency is then turned off: the next
        // post has no slot to go at, and is kept as a draft saying why.
        conn.execute(
            "UPDATE issues SET status = 'draft', scheduled_for = NULL",
            [],
        )
        .unwrap();
        conn.execute("UPDATE newsletters SET frequency = 'skip'", [])
            .unwrap();
        record(&mut conn, &primed, &polled(&[item("d", "D")])).unwrap();
        let (subject, why): (String, String) = conn
            .query_row(
                "SELECT subject, last_error FROM issues ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(subject, "D");
        assert!(
            why.starts_with("This post could not join a digest"),
            "{why}"
        );
    }
}
