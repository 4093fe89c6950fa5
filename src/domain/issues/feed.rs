//! RSS-to-email (docs/automations.md, "Following a feed"): a newsletter follows one feed
//! (RSS or Atom), polled every `every_minutes` (at least 15) by the `poll_feeds` job, which
//! fetches it (`feeds::fetch`, through the webhook SSRF guard) and hands what it found here.
//! Each item is recorded by its id (else its link) once per newsletter, so a restart, an
//! edited item or a feed that reorders never makes an item twice; every new item becomes a
//! draft issue (its title as subject, its summary and a link to it as content). The first
//! poll only records the items already there. A failed poll is kept on the feed for the
//! settings page and changes nothing else.

use rusqlite::{Connection, OptionalExtension};

use super::{self as issues, IssueInput};
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
    /// The first poll has worked: from now on new items become drafts.
    pub primed: bool,
    /// How many items have become drafts.
    pub drafts: i64,
}

macro_rules! select_feed {
    ($tail:literal) => {
        concat!(
            "SELECT f.newsletter_id, f.url, f.every_minutes, f.etag, f.last_modified, f.next_poll_at,
                    f.last_polled_at, f.last_error, f.primed,
                    (SELECT count(*) FROM feed_items i WHERE i.newsletter_id = f.newsletter_id AND i.issue_id IS NOT NULL)
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
        drafts: r.get(9)?,
    })
}

/// The newsletter's feed, if it follows one.
pub fn get(conn: &Connection, newsletter_id: i64) -> DomainResult<Option<Feed>> {
    const SQL: &str = select_feed!("WHERE f.newsletter_id = ?1");
    Ok(conn.query_row(SQL, [newsletter_id], from_row).optional()?)
}

/// Follows the feed at `url`, polled every `every_minutes`; a new address starts afresh (its
/// first poll records the items already there). Refused, naming each problem, when the
/// address is not an http(s) address or the interval is outside [`EVERY_MIN`] to [`EVERY_MAX`].
pub fn follow(
    conn: &mut Connection,
    newsletter_id: i64,
    url: &str,
    every_minutes: &str,
) -> DomainResult<Feed> {
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
    errors.into_result()?;
    const FOLLOW: &str = "INSERT INTO newsletter_feeds (newsletter_id, url, every_minutes, next_poll_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?4, ?4)
         ON CONFLICT (newsletter_id) DO UPDATE SET every_minutes = excluded.every_minutes,
             updated_at = excluded.updated_at,
             next_poll_at = CASE WHEN url = excluded.url THEN next_poll_at ELSE excluded.next_poll_at END,
             etag = CASE WHEN url = excluded.url THEN etag END,
             last_modified = CASE WHEN url = excluded.url THEN last_modified END,
             primed = CASE WHEN url = excluded.url THEN primed ELSE 0 END,
             last_error = CASE WHEN url = excluded.url THEN last_error END,
             url = excluded.url";
    write_tx(conn, |tx| {
        crate::domain::newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        tx.execute(FOLLOW, (newsletter_id, &url, every, Timestamp::now()))?;
        get(tx, newsletter_id)?.ok_or(DomainError::NotFound("feed"))
    })
}

/// Stops following the feed (the drafts it made stay).
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
/// before is recorded; once the feed is primed, each becomes a draft issue. Returns how many
/// drafts were made.
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
            let id = draft_of(tx, feed.newsletter_id, item)?;
            tx.execute(MADE, (feed.newsletter_id, &item.key, id))?;
            made += 1;
        }
        Ok(made)
    })
}

/// A draft issue of `item`, inside the caller's transaction: its title as subject (cut to
/// the subject's length), its summary as text and a link to it.
fn draft_of(tx: &Connection, newsletter_id: i64, item: &Item) -> DomainResult<i64> {
    let title: String = item
        .title
        .trim()
        .chars()
        .take(issues::SUBJECT_MAX)
        .collect();
    let title = title.replace(['\r', '\n'], " ");
    let subject = if title.trim().is_empty() {
        "A new post".to_string()
    } else {
        title.trim().to_string()
    };
    let summary = excerpt::text_of_html(&item.summary_html, SUMMARY_MAX);
    let mut markdown = crate::domain::content::escape_markdown(&summary);
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
        follow(&mut conn, 1, url, "15").unwrap();
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
        assert_eq!(feed_now(&conn).drafts, 2);
        // A failure is kept and changes nothing else; the next good read clears it.
        record(&mut conn, &primed, &Polled::Failed("too large".into())).unwrap();
        assert_eq!(feed_now(&conn).last_error.as_deref(), Some("too large"));
        record(&mut conn, &primed, &Polled::NotModified).unwrap();
        assert_eq!(feed_now(&conn).last_error, None);
        // A poll of an address changed meanwhile is the old address's: dropped whole.
        follow(&mut conn, 1, "https://other.example/feed.xml", "15").unwrap();
        assert!(!feed_now(&conn).primed, "a new address starts afresh");
        let stale = polled(&[item("d", "D")]);
        assert_eq!(record(&mut conn, &primed, &stale).unwrap(), 0);
        assert!(!feed_now(&conn).primed);
        assert_eq!(drafts(&conn), ["B", "C"]);
        // Bad settings change nothing.
        assert!(follow(&mut conn, 1, "ftp://x.example/", "15").is_err());
        assert!(follow(&mut conn, 1, url, "14").is_err());
        assert_eq!(feed_now(&conn).url, "https://other.example/feed.xml");
    }
}
