//! The installation's operators: who they are (the first account of a fresh install, and
//! those granted with `broadsheet operator grant`), what the dashboard's operator page lists
//! (every newsletter, pending upgrade requests first), and the mail that tells them of an
//! upgrade request. Their tier and status changes are `newsletters::set_tier` and
//! `newsletters::set_status`, the very functions of the CLI. docs/operator.md.

use rusqlite::{Connection, OptionalExtension, Row};

use crate::clock::Timestamp;
use crate::domain::FieldErrors;
use crate::domain::newsletters::{self, Newsletter, Status, Tier};
use crate::domain::values::pagination::{Cursor, Page};
use crate::domain::values::urls::SiteUrls;
use crate::domain::{DomainError, DomainResult};
use crate::store::jobs::{AccountMail, AccountMailKind, queue_account_mail};
use crate::store::write_tx;

/// The dashboard path of the operator page (also the link of the upgrade-request mail).
pub const PAGE_PATH: &str = "/operator";
/// Newsletters per page of the operator's list.
pub const PER_PAGE: u32 = 50;
/// Pending upgrade requests shown above the list (the oldest first); the page says how many
/// more there are.
pub const PENDING_SHOWN: i64 = 50;

/// Whether `user_id` is an operator.
pub fn is_operator(conn: &Connection, user_id: i64) -> DomainResult<bool> {
    const SQL: &str = "SELECT operator FROM users WHERE id = ?1";
    Ok(conn
        .query_row(SQL, [user_id], |r| r.get(0))
        .optional()?
        .unwrap_or(false))
}

/// `Ok` for an operator; for anyone else the operator pages do not exist (`NotFound`).
pub fn require(conn: &Connection, user_id: i64) -> DomainResult<()> {
    if is_operator(conn, user_id)? {
        Ok(())
    } else {
        Err(DomainError::NotFound("page"))
    }
}

/// Makes the account of `email` an operator (`true`) or not (`false`); answers whether
/// anything changed. An unknown address is `NotFound`.
pub fn set_operator(conn: &mut Connection, email: &str, operator: bool) -> DomainResult<bool> {
    const FIND: &str = "SELECT id, operator FROM users WHERE email = ?1";
    const UPDATE: &str = "UPDATE users SET operator = ?2, updated_at = ?3 WHERE id = ?1";
    let email = email.trim().to_lowercase();
    write_tx(conn, |tx| {
        let (id, was): (i64, bool) = tx
            .query_row(FIND, [&email], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
            .ok_or(DomainError::NotFound("account"))?;
        if was == operator {
            return Ok(false);
        }
        tx.execute(UPDATE, (id, operator, Timestamp::now()))?;
        Ok(true)
    })
}

/// The addresses of the confirmed operators: the ones told of upgrade requests (an
/// unconfirmed address may not be its owner's).
pub fn confirmed_emails(conn: &Connection) -> DomainResult<Vec<String>> {
    const SQL: &str =
        "SELECT email FROM users WHERE operator = 1 AND confirmed_at IS NOT NULL ORDER BY id";
    let mut stmt = conn.prepare(SQL)?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Queues, in the caller's transaction, a mail to every confirmed operator saying that
/// `newsletter`'s owner asks for the paid tier, with a link to the operator page.
pub fn tell_of_upgrade_request(
    conn: &Connection,
    urls: &SiteUrls,
    newsletter: &Newsletter,
) -> DomainResult<usize> {
    const OWNER: &str = "SELECT email FROM users WHERE id = ?1";
    let owner_email: String = conn.query_row(OWNER, [newsletter.owner_id], |r| r.get(0))?;
    let operators = confirmed_emails(conn)?;
    for to in &operators {
        queue_account_mail(
            conn,
            &AccountMail {
                to: to.clone(),
                link: urls.service(PAGE_PATH),
                kind: AccountMailKind::UpgradeRequest {
                    newsletter_name: newsletter.name.clone(),
                    subdomain: newsletter.subdomain.clone(),
                    owner_email: owner_email.clone(),
                },
            },
        )?;
    }
    Ok(operators.len())
}

/// When the owner of newsletter `id` asked for the paid tier, while the request waits.
pub fn upgrade_requested_at(conn: &Connection, id: i64) -> DomainResult<Option<Timestamp>> {
    const SQL: &str =
        "SELECT upgrade_requested_at FROM newsletters WHERE id = ?1 AND tier = 'pending'";
    Ok(conn
        .query_row(SQL, [id], |r| r.get(0))
        .optional()?
        .flatten())
}

/// One newsletter as the operator page lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub id: i64,
    pub name: String,
    pub subdomain: String,
    pub owner_email: String,
    pub tier: Tier,
    pub status: Status,
    /// Active subscribers, from the stored counters (never a count of rows).
    pub subscribers: i64,
    /// When the owner asked for the paid tier; `None` unless the tier is `pending` by request.
    pub upgrade_requested_at: Option<Timestamp>,
}

impl Listed {
    pub fn upgrade_pending(&self) -> bool {
        self.tier == Tier::Pending
    }
}

/// What the operator page shows: the pending requests, and one page of every newsletter.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// The oldest pending requests first, at most [`PENDING_SHOWN`].
    pub pending: Vec<Listed>,
    /// All newsletters whose tier is `pending`.
    pub pending_total: i64,
    /// Newest first, [`PER_PAGE`] a page.
    pub rows: Vec<Listed>,
    /// The page's number (1, or the cursor's).
    pub page: u32,
    pub next_cursor: Option<Cursor>,
}

/// The columns `listed` reads.
macro_rules! select_listed {
    ($($tail:literal)+) => {
        concat!(
            "SELECT n.id, n.name, n.subdomain, u.email, n.tier, n.status, coalesce(t.active, 0), ",
            "CASE WHEN n.tier = 'pending' THEN n.upgrade_requested_at END ",
            "FROM newsletters n JOIN users u ON u.id = n.owner_id ",
            "LEFT JOIN subscriber_totals t ON t.newsletter_id = n.id ",
            $($tail),+
        )
    };
}

fn listed(row: &Row<'_>) -> rusqlite::Result<Listed> {
    Ok(Listed {
        id: row.get(0)?,
        name: row.get(1)?,
        subdomain: row.get(2)?,
        owner_email: row.get(3)?,
        tier: row.get(4)?,
        status: row.get(5)?,
        subscribers: row.get(6)?,
        upgrade_requested_at: row.get(7)?,
    })
}

/// The operator page's content: the pending requests, and the page of newsletters `cursor`
/// starts (the first without one). Every read is bounded: a keyset page by id, the
/// subscriber counts from their counters, the pending ones by the tier's index.
pub fn overview(conn: &Connection, cursor: Option<Cursor>) -> DomainResult<Overview> {
    const PENDING: &str = select_listed!(
        "WHERE n.tier = 'pending' ORDER BY coalesce(n.upgrade_requested_at, n.updated_at), n.id LIMIT ?1"
    );
    const PENDING_TOTAL: &str = "SELECT count(*) FROM newsletters WHERE tier = 'pending'";
    const PAGE: &str = select_listed!("WHERE n.id < ?1 ORDER BY n.id DESC LIMIT ?2");
    let page = Page {
        page: cursor.map_or(1, |c| c.page),
        per_page: PER_PAGE,
    };
    let before = cursor.map_or(i64::MAX, |c| c.before_id);
    // One snapshot for the three reads.
    let snapshot = conn
        .is_autocommit()
        .then(|| conn.unchecked_transaction())
        .transpose()?;
    let pending = conn
        .prepare(PENDING)?
        .query_map([PENDING_SHOWN], listed)?
        .collect::<Result<Vec<_>, _>>()?;
    let pending_total: i64 = conn.query_row(PENDING_TOTAL, [], |r| r.get(0))?;
    let rows = conn
        .prepare(PAGE)?
        .query_map((before, page.fetch()), listed)?
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(snapshot) = snapshot {
        snapshot.commit()?;
    }
    let (rows, has_more) = page.finish(rows);
    let next_cursor = match rows.last() {
        Some(last) if has_more => Some(Cursor::after(page.page, last.id)),
        _ => None,
    };
    Ok(Overview {
        pending,
        pending_total,
        rows,
        page: page.page,
        next_cursor,
    })
}

/// The owner's upgrade request from the dashboard: `free` becomes `pending`, the request's
/// time is kept, and every operator is mailed in the same transaction; the operator confirms
/// on the operator page or with `broadsheet tier <SUBDOMAIN> paid` (there is no payment
/// integration).
pub fn request_upgrade(
    conn: &mut Connection,
    urls: &SiteUrls,
    owner_id: i64,
    id: i64,
) -> DomainResult<Newsletter> {
    write_tx(conn, |tx| {
        let newsletter = newsletters::get_owned(tx, owner_id, id)?;
        newsletter.ensure_writable()?;
        let refuse = |message: &str| {
            Err(DomainError::Invalid(
                crate::domain::ErrorCode::InvalidState,
                FieldErrors::single("tier", message),
            ))
        };
        match newsletter.tier {
            newsletters::Tier::Free => {
                const REQUESTED: &str =
                    "UPDATE newsletters SET upgrade_requested_at = ?2 WHERE id = ?1";
                let pending = newsletters::write_tier(tx, id, newsletters::Tier::Pending)?;
                tx.execute(REQUESTED, (id, Timestamp::now()))?;
                tell_of_upgrade_request(tx, urls, &pending)?;
                Ok(pending)
            }
            newsletters::Tier::Pending => refuse("is already pending: the upgrade is requested"),
            newsletters::Tier::Paid => refuse("is already paid"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::newsletters;

    fn urls() -> SiteUrls {
        SiteUrls::new("http://localhost:8080", "localhost:8080")
    }

    fn add_user(conn: &Connection, email: &str, confirmed: bool) -> i64 {
        conn.execute(
            "INSERT INTO users (email, password_hash, confirmed_at, created_at, updated_at)
             VALUES (?1, 'h', CASE WHEN ?2 THEN 'c' END, 'n', 'n')",
            (email, confirmed),
        )
        .unwrap();
        conn.last_insert_rowid()
    }

    #[test]
    fn granting_and_revoking_change_only_the_account_named() {
        let mut conn = crate::domain::testing::db_with_newsletter("free");
        let other = add_user(&conn, "b@x.co", true);
        assert!(!is_operator(&conn, 1).unwrap());
        assert!(set_operator(&mut conn, " B@x.co ", true).unwrap());
        assert!(
            !set_operator(&mut conn, "b@x.co", true).unwrap(),
            "no change"
        );
        assert!(is_operator(&conn, other).unwrap());
        assert!(!is_operator(&conn, 1).unwrap());
        assert!(require(&conn, other).is_ok());
        assert!(matches!(require(&conn, 1), Err(DomainError::NotFound(_))));
        assert!(matches!(
            set_operator(&mut conn, "nobody@x.co", true),
            Err(DomainError::NotFound("account"))
        ));
        assert!(set_operator(&mut conn, "b@x.co", false).unwrap());
        assert!(!is_operator(&conn, other).unwrap());
    }

    #[test]
    fn an_upgrade_request_is_recorded_and_mailed_to_the_confirmed_operators() {
        let mut conn = crate::domain::testing::db_with_newsletter("free");
        add_user(&conn, "op@x.co", true);
        add_user(&conn, "unconfirmed-op@x.co", false);
        add_user(&conn, "reader@x.co", true);
        set_operator(&mut conn, "op@x.co", true).unwrap();
        set_operator(&mut conn, "unconfirmed-op@x.co", true).unwrap();
        request_upgrade(&mut conn, &urls(), 1, 1).unwrap();
        assert!(upgrade_requested_at(&conn, 1).unwrap().is_some());
        let mailed: Vec<String> = conn
            .prepare("SELECT json_extract(payload, '$.to') FROM jobs WHERE kind = 'send_mail'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(mailed, ["op@x.co"]);
        let overview = overview(&conn, None).unwrap();
        assert_eq!(overview.pending_total, 1);
        assert_eq!(overview.pending[0].owner_email, "o@x.co");
        // The operator answers: the request is no longer pending.
        newsletters::set_tier(&mut conn, "n", Tier::Paid).unwrap();
        assert_eq!(upgrade_requested_at(&conn, 1).unwrap(), None);
        assert_eq!(overview_of(&conn).pending_total, 0);
    }

    fn overview_of(conn: &Connection) -> Overview {
        overview(conn, None).unwrap()
    }

    /// An installation with accounts before migration 0016 gets no operator by it.
    #[test]
    fn the_migration_promotes_nobody() {
        use crate::store::{MIGRATIONS, migrate};
        let mut conn = Connection::open_in_memory().unwrap();
        let at = MIGRATIONS
            .iter()
            .position(|(name, _)| *name == "0016_operators")
            .unwrap();
        conn.execute_batch(
            "CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)",
        )
        .unwrap();
        for (name, sql) in &MIGRATIONS[..at] {
            conn.execute_batch(sql).unwrap();
            conn.execute("INSERT INTO schema_migrations VALUES (?1, 'n')", [name])
                .unwrap();
        }
        conn.execute(
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('old@x.co', 'h', 'n', 'n')",
            [],
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        assert!(!is_operator(&conn, 1).unwrap());
    }

    #[test]
    fn the_list_pages_by_id_and_counts_from_the_counters() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute_batch(
            "WITH RECURSIVE k(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM k WHERE i < 120)
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
             SELECT 1, 'N' || i, 'n' || i, 'free', 'bt' || i, 'n', 'n' FROM k;
             INSERT INTO subscribers (newsletter_id, email, status, created_at)
             VALUES (1, 'a@x.co', 'active', 'n'), (1, 'b@x.co', 'active', 'n'), (1, 'c@x.co', 'unsubscribed', 'n');",
        )
        .unwrap();
        let first = overview_of(&conn);
        assert_eq!(first.rows.len(), PER_PAGE as usize);
        assert_eq!(first.rows[0].id, 120);
        let cursor = first.next_cursor.expect("a second page");
        let second = overview(&conn, Some(cursor)).unwrap();
        assert_eq!((second.page, second.rows[0].id), (2, 70));
        let last = overview(&conn, second.next_cursor).unwrap();
        assert_eq!(last.rows.last().unwrap().id, 1);
        assert_eq!(last.next_cursor, None);
        assert_eq!(last.rows.last().unwrap().subscribers, 2);
    }
}
