//! Subscribers: create (idempotent by e-mail), list with filters, update, tag, delete for
//! good, bulk create. Every change records its `subscriber.*` event in the same transaction.

pub mod audience;
pub mod custom_fields;
pub mod form_guard;
pub mod import;
pub mod import_columns;
pub mod import_lines;
pub mod memberships;
pub mod opt_in;
pub mod origin;
pub mod personal_data;
pub mod preferences;
pub mod readers;
pub mod signup_forms;
pub mod stripe_events;
pub mod welcome_mail;

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Value, json};

use crate::clock::Timestamp;
use crate::domain::content::merge_tags::Reader;
use crate::domain::subscribers::memberships::Membership;
use crate::domain::subscribers::origin::{Origin, Source, Utm};
use crate::domain::values::email::EmailAddress;
use crate::domain::values::pagination::{Cursor, Page, invalid_filter};
use crate::domain::{DomainError, DomainResult, ErrorCode, FieldErrors, events};
use crate::store::{StoreError, write_tx};

/// Most entries one bulk request may carry.
pub const BULK_LIMIT: usize = 1000;
/// A subscriber's name, in characters once trimmed.
pub const NAME_MAX: usize = 100;
/// A tag, in characters once trimmed.
pub const TAG_MAX: usize = 50;
/// Different tags of one subscriber.
pub const TAGS_PER_SUBSCRIBER: usize = 100;

crate::string_enum!(
    /// Only `active` subscribers get issues; `bounced` is set by bounce reports.
    pub Status { Active => "active", Unsubscribed => "unsubscribed", Bounced => "bounced" }
);

impl Status {
    /// Whether an owner may set it (`active`, `unsubscribed`); `bounced` comes from bounces.
    pub fn can_be_set(self) -> bool {
        matches!(self, Status::Active | Status::Unsubscribed)
    }
}

/// Serialised as the API's subscriber object (a data request's export writes it so).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Subscriber {
    pub id: i64,
    #[serde(skip)]
    pub newsletter_id: i64,
    pub email: String,
    pub name: Option<String>,
    pub status: Status,
    pub tags: Vec<String>,
    pub subscribed_at: Timestamp,
    pub unsubscribed_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Free, or paid access and how (`domain/subscribers/memberships.rs`).
    pub membership: Membership,
    /// How they were added and where from (`origin.rs`).
    pub origin: Origin,
    /// Their values of the newsletter's custom fields, by name (`custom_fields.rs`).
    pub fields: custom_fields::Values,
    /// Until when they paused their mail, while a pause runs (`preferences.rs`).
    pub paused_until: Option<Timestamp>,
}

impl Subscriber {
    /// The `data` of `subscriber.*` events.
    pub fn event_data(&self) -> Value {
        json!({
            "subscription_id": self.id,
            "email": self.email,
            "name": self.name,
            "status": self.status,
            "subscribed_at": self.subscribed_at,
            "tags": self.tags,
            "paused_until": self.paused_until,
        })
    }
}

macro_rules! select_subscriber {
    ($($tail:literal)+) => {
        concat!(
            "SELECT s.id, s.newsletter_id, s.email, s.name, s.status, s.subscribed_at, s.unsubscribed_at, s.created_at, s.updated_at, ",
            "(SELECT group_concat(tag, char(10)) FROM (SELECT tag FROM subscriber_tags t WHERE t.subscriber_id = s.id ORDER BY tag)), ",
            "ms.status, ms.interval, ms.until, ms.access_until, ms.since, ",
            "s.source, s.referrer, s.utm_source, s.utm_medium, s.utm_campaign, ",
            $crate::subscriber_field_values_json!(), ", ",
            "(SELECT z.until FROM subscriber_pauses z WHERE z.subscriber_id = s.id) ",
            "FROM subscribers s LEFT JOIN memberships ms ON ms.subscriber_id = s.id ", $($tail),+
        )
    };
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<Subscriber> {
    let tags: Option<String> = row.get(9)?;
    Ok(Subscriber {
        id: row.get(0)?,
        newsletter_id: row.get(1)?,
        email: row.get(2)?,
        name: row.get(3)?,
        status: row.get(4)?,
        subscribed_at: row.get(5)?,
        unsubscribed_at: row.get(6)?,
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
        tags: tags
            .map(|t| t.split('\n').map(str::to_string).collect())
            .unwrap_or_default(),
        membership: crate::domain::subscribers::memberships::from_joined(row, 10)?,
        origin: Origin {
            source: row.get(15)?,
            referrer: row.get(16)?,
            utm: Utm {
                source: row.get(17)?,
                medium: row.get(18)?,
                campaign: row.get(19)?,
            },
        },
        fields: custom_fields::values_from_json(row.get(20)?),
        // A pause past its end means nothing (preferences.rs).
        paused_until: row
            .get::<_, Option<Timestamp>>(21)?
            .filter(|until| *until > Timestamp::now()),
    })
}

pub fn get(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<Subscriber> {
    const SQL: &str = select_subscriber!("WHERE s.newsletter_id = ?1 AND s.id = ?2");
    // Cached: an import runs this once per created row.
    conn.prepare_cached(SQL)?
        .query_row((newsletter_id, id), from_row)
        .optional()?
        .ok_or(DomainError::NotFound("subscriber"))
}

/// The newsletter's subscriber with address `email` as stored (lowercase), if any.
pub fn find_by_email(
    conn: &Connection,
    newsletter_id: i64,
    email: &str,
) -> DomainResult<Option<Subscriber>> {
    const SQL: &str = select_subscriber!("WHERE s.newsletter_id = ?1 AND s.email = ?2");
    Ok(conn
        .prepare_cached(SQL)?
        .query_row((newsletter_id, email), from_row)
        .optional()?)
}

/// What an issue's merge tags show a message to `email`: the values of the newsletter's
/// subscriber with that address, or only the address (every other tag its fallback) when
/// none has it, as for a test send to an editor.
pub fn merge_reader(conn: &Connection, newsletter_id: i64, email: &str) -> DomainResult<Reader> {
    let found = find_by_email(conn, newsletter_id, &email.trim().to_lowercase())?;
    Ok(match found {
        Some(s) => Reader {
            name: s.name,
            email: s.email,
            fields: s.fields,
        },
        None => Reader {
            email: email.to_string(),
            ..Reader::default()
        },
    })
}

/// List filters as the API receives them.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub status: Option<String>,
    pub tag: Option<String>,
    /// Substring of the e-mail address (dashboard search).
    pub search: Option<String>,
}

/// One page of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub rows: Vec<Subscriber>,
    /// The page's number: the one asked for, or the cursor's.
    pub page: u32,
    pub has_more: bool,
    /// Where the next page starts, when there is one.
    pub next_cursor: Option<Cursor>,
}

/// The list's filters, each shape with its own statement so that each gets its index.
enum Shape<'a> {
    All,
    Status(Status),
    Tag(&'a str),
    TagStatus(&'a str, Status),
    /// A substring of the address: no index helps, so the rows are read newest first until
    /// the page is full.
    Search(String, Option<Status>, Option<&'a str>),
}

/// `subscriber_blocks` counts the rows of each block of `1 << BLOCK_BITS` ids (the `id >> 10`
/// of migration 0011).
const BLOCK_BITS: u32 = 10;

/// A page of the newsletter's subscribers, newest first: page `page`, or the page `cursor`
/// (a previous answer's `next_cursor`) starts. Every read is bounded: a deep page without a
/// filter or with a status finds its block by summing per-block counts (a thousand rows for
/// a million subscribers) and skips at most a block's rows; a tag filter walks from the
/// nearer end of the tag's rows; a cursor starts at its row. Counts and rows come from one
/// snapshot, so a page is exactly the rows at its offset at that moment.
pub fn list(
    conn: &Connection,
    newsletter_id: i64,
    page: Page,
    cursor: Option<Cursor>,
    filter: &Filter,
) -> DomainResult<Listed> {
    let status = match filter.status.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) => Some(
            Status::parse(text)
                .ok_or_else(|| invalid_filter("status", "active, unsubscribed or bounced"))?,
        ),
    };
    let tag = filter
        .tag
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let search = filter
        .search
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.to_lowercase());
    let shape = match (search, tag, status) {
        (Some(text), tag, status) => Shape::Search(text, status, tag),
        (None, Some(tag), Some(status)) => Shape::TagStatus(tag, status),
        (None, Some(tag), None) => Shape::Tag(tag),
        (None, None, Some(status)) => Shape::Status(status),
        (None, None, None) => Shape::All,
    };
    let number = cursor.map_or(page.page, |c| c.page);
    // One read transaction for the counts and the rows (a caller's own transaction already is).
    let snapshot = conn
        .is_autocommit()
        .then(|| conn.unchecked_transaction())
        .transpose()?;
    let window = match cursor {
        Some(c) => Some(Window::below(c.before_id, page.fetch(), 0)),
        None => window(conn, newsletter_id, &shape, page)?,
    };
    let rows = match window {
        Some(window) => rows(conn, newsletter_id, &shape, window)?,
        None => Vec::new(),
    };
    if let Some(snapshot) = snapshot {
        snapshot.commit()?;
    }
    let (rows, has_more) = page.finish(rows);
    let next_cursor = match rows.last() {
        Some(last) if has_more => Some(Cursor::after(number, last.id)),
        _ => None,
    };
    Ok(Listed {
        rows,
        page: number,
        has_more,
        next_cursor,
    })
}

/// Which rows of a shape to read: `limit` rows after skipping `skip`, among ids below
/// `before`, newest first (or, `oldest_first`, from the oldest end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    before: i64,
    limit: i64,
    skip: i64,
    oldest_first: bool,
}

impl Window {
    fn below(before: i64, limit: i64, skip: i64) -> Window {
        Window {
            before,
            limit,
            skip,
            oldest_first: false,
        }
    }
}

/// Where page `page` of `shape` starts; `None` past the last row.
fn window(
    conn: &Connection,
    newsletter_id: i64,
    shape: &Shape<'_>,
    page: Page,
) -> DomainResult<Option<Window>> {
    let offset = page.offset();
    if offset == 0 {
        return Ok(Some(Window::below(i64::MAX, page.fetch(), 0)));
    }
    const ALL_BLOCKS: &str = "SELECT block, active + unsubscribed + bounced FROM subscriber_blocks
         WHERE newsletter_id = ?1 ORDER BY block DESC";
    const STATUS_BLOCKS: &str = "SELECT block,
             CASE ?2 WHEN 'active' THEN active WHEN 'unsubscribed' THEN unsubscribed ELSE bounced END
         FROM subscriber_blocks WHERE newsletter_id = ?1 ORDER BY block DESC";
    const TAG_COUNT: &str =
        "SELECT subscribers FROM tag_counts WHERE newsletter_id = ?1 AND tag = ?2";
    let blocks = match shape {
        Shape::All => Some(conn.prepare_cached(ALL_BLOCKS)?),
        Shape::Status(_) => Some(conn.prepare_cached(STATUS_BLOCKS)?),
        _ => None,
    };
    if let Some(mut blocks) = blocks {
        let mut rows = match shape {
            Shape::Status(status) => blocks.query((newsletter_id, status))?,
            _ => blocks.query([newsletter_id])?,
        };
        let mut passed = 0;
        while let Some(row) = rows.next()? {
            let (block, count): (i64, i64) = (row.get(0)?, row.get(1)?);
            if passed + count > offset {
                let before = (block + 1) << BLOCK_BITS;
                return Ok(Some(Window::below(before, page.fetch(), offset - passed)));
            }
            passed += count;
        }
        return Ok(None);
    }
    if let Shape::Tag(tag) = shape {
        let count: i64 = conn
            .prepare_cached(TAG_COUNT)?
            .query_row((newsletter_id, tag), |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        if offset >= count {
            return Ok(None);
        }
        if offset > count / 2 {
            // Nearer the oldest end: the same rows, counted from there.
            let end = count - offset;
            let start = (end - page.fetch()).max(0);
            return Ok(Some(Window {
                before: i64::MAX,
                limit: end - start,
                skip: start,
                oldest_first: true,
            }));
        }
    }
    Ok(Some(Window::below(i64::MAX, page.fetch(), offset)))
}

/// The rows of `window` for `shape`, newest first.
fn rows(
    conn: &Connection,
    newsletter_id: i64,
    shape: &Shape<'_>,
    window: Window,
) -> DomainResult<Vec<Subscriber>> {
    // Per status, through subscribers_list (newsletter_id, status, id); the three merged.
    const ALL: &str = select_subscriber!(
        "WHERE s.id IN (SELECT id FROM ("
        "SELECT id FROM (SELECT id FROM subscribers WHERE newsletter_id = ?1 AND status = 'active' AND id < ?2 ORDER BY id DESC LIMIT ?3 + ?4) "
        "UNION ALL SELECT id FROM (SELECT id FROM subscribers WHERE newsletter_id = ?1 AND status = 'unsubscribed' AND id < ?2 ORDER BY id DESC LIMIT ?3 + ?4) "
        "UNION ALL SELECT id FROM (SELECT id FROM subscribers WHERE newsletter_id = ?1 AND status = 'bounced' AND id < ?2 ORDER BY id DESC LIMIT ?3 + ?4)"
        ") ORDER BY id DESC LIMIT ?3 OFFSET ?4) "
        "ORDER BY s.id DESC"
    );
    const STATUS: &str = select_subscriber!(
        "WHERE s.id IN (SELECT id FROM subscribers WHERE newsletter_id = ?1 AND status = ?5 AND id < ?2 "
        "ORDER BY id DESC LIMIT ?3 OFFSET ?4) "
        "ORDER BY s.id DESC"
    );
    // Through subscriber_tags_tag (tag, subscriber_id), keeping the newsletter's rows.
    const TAG: &str = select_subscriber!(
        "WHERE s.id IN (SELECT t.subscriber_id FROM subscriber_tags t CROSS JOIN subscribers m ON m.id = t.subscriber_id "
        "WHERE t.tag = ?5 AND t.subscriber_id < ?2 AND m.newsletter_id = ?1 "
        "ORDER BY t.subscriber_id DESC LIMIT ?3 OFFSET ?4) "
        "ORDER BY s.id DESC"
    );
    const TAG_OLDEST_FIRST: &str = select_subscriber!(
        "WHERE s.id IN (SELECT t.subscriber_id FROM subscriber_tags t CROSS JOIN subscribers m ON m.id = t.subscriber_id "
        "WHERE t.tag = ?5 AND t.subscriber_id < ?2 AND m.newsletter_id = ?1 "
        "ORDER BY t.subscriber_id LIMIT ?3 OFFSET ?4) "
        "ORDER BY s.id DESC"
    );
    const TAG_STATUS: &str = select_subscriber!(
        "WHERE s.id IN (SELECT t.subscriber_id FROM subscriber_tags t CROSS JOIN subscribers m ON m.id = t.subscriber_id "
        "WHERE t.tag = ?5 AND t.subscriber_id < ?2 AND m.newsletter_id = ?1 AND m.status = ?6 "
        "ORDER BY t.subscriber_id DESC LIMIT ?3 OFFSET ?4) "
        "ORDER BY s.id DESC"
    );
    // Newest first by id (the unary + keeps the planner on that order), stopping once the
    // page is full.
    const SEARCH: &str = select_subscriber!(
        "WHERE s.id IN (SELECT m.id FROM subscribers m WHERE +m.newsletter_id = ?1 AND m.id < ?2 "
        "AND (?5 IS NULL OR m.status = ?5) "
        "AND (?6 IS NULL OR EXISTS (SELECT 1 FROM subscriber_tags t WHERE t.subscriber_id = m.id AND t.tag = ?6)) "
        "AND instr(m.email, ?7) > 0 "
        "ORDER BY m.id DESC LIMIT ?3 OFFSET ?4) "
        "ORDER BY s.id DESC"
    );
    let Window {
        before,
        limit,
        skip,
        oldest_first,
    } = window;
    let read = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> DomainResult<Vec<Subscriber>> {
        let mut stmt = conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params, from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    };
    let nid = newsletter_id;
    match shape {
        Shape::All => read(ALL, params![nid, before, limit, skip]),
        Shape::Status(status) => read(STATUS, params![nid, before, limit, skip, status]),
        Shape::Tag(tag) if oldest_first => {
            read(TAG_OLDEST_FIRST, params![nid, before, limit, skip, tag])
        }
        Shape::Tag(tag) => read(TAG, params![nid, before, limit, skip, tag]),
        Shape::TagStatus(tag, status) => {
            read(TAG_STATUS, params![nid, before, limit, skip, tag, status])
        }
        Shape::Search(text, status, tag) => read(
            SEARCH,
            params![
                nid,
                before,
                limit,
                skip,
                status.map(Status::as_str),
                tag,
                text
            ],
        ),
    }
}

/// What a create carries.
#[derive(Debug, Clone, Default)]
pub struct NewSubscriber {
    pub email: String,
    pub name: Option<String>,
    pub tags: Vec<String>,
    /// When the reader subscribed, if before now: an import keeps the date of the service it
    /// came from (stored as `created_at`, so the counters put it on that day).
    pub subscribed_at: Option<Timestamp>,
}

/// The fields of a create as one form of the request gives them, each possibly left out.
#[derive(Debug, Clone, Default)]
pub struct GivenFields {
    pub email: Option<String>,
    pub name: Option<String>,
    pub tags: Option<Vec<String>>,
}

impl NewSubscriber {
    /// A create that gives the subscriber inside a wrapper and has top-level fields beside it
    /// (the API takes either form, and a request may carry both): the wrapper is the
    /// subscriber, and the top-level values are checked all the same, so a bad value is never
    /// passed over unseen.
    pub fn from_both_forms(top: GivenFields, wrapped: GivenFields) -> DomainResult<NewSubscriber> {
        let subscriber = NewSubscriber {
            email: wrapped.email.unwrap_or_default(),
            name: wrapped.name,
            tags: wrapped.tags.unwrap_or_default(),
            subscribed_at: None,
        };
        validate(&NewSubscriber {
            email: top.email.unwrap_or_else(|| subscriber.email.clone()),
            name: top.name,
            tags: top.tags.unwrap_or_default(),
            subscribed_at: None,
        })?;
        Ok(subscriber)
    }
}

fn clean_name(errors: &mut FieldErrors, name: Option<&str>) -> Option<String> {
    // Lengths count what was sent, spaces included (the document's `maxLength`).
    let too_long = name.is_some_and(|n| n.chars().count() > NAME_MAX);
    let name = name.map(str::trim).filter(|n| !n.is_empty() || too_long)?;
    if too_long {
        errors.add(
            "name",
            format!("is too long (maximum is {NAME_MAX} characters)"),
        );
    } else if name.chars().any(char::is_control) {
        errors.add("name", "must not contain control characters");
    }
    Some(name.to_string())
}

/// Trims a tag and checks it is 1-50 characters without control characters (counted as
/// sent, spaces included, like the document's `maxLength`).
pub fn clean_tag(raw: &str) -> Result<String, &'static str> {
    let tag = raw.trim();
    if tag.is_empty() {
        Err("can't be blank")
    } else if raw.chars().count() > TAG_MAX {
        Err("is too long (maximum is 50 characters)")
    } else if tag.chars().any(char::is_control) {
        Err("must not contain control characters")
    } else {
        Ok(tag.to_string())
    }
}

/// The tags a form lists (a form's, a newsletter's topics), each checked by [`clean_tag`]
/// (blank ones left out), without repeats, at most `max`; each problem under `field`, naming
/// the tag as typed.
pub(crate) fn clean_tags<S: AsRef<str>>(
    raw: impl IntoIterator<Item = S>,
    (field, max): (&str, usize),
    errors: &mut FieldErrors,
) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    for raw in raw {
        let raw = raw.as_ref();
        if raw.trim().is_empty() {
            continue;
        }
        match clean_tag(raw) {
            Ok(tag) if !tags.contains(&tag) => tags.push(tag),
            Ok(_) => {}
            Err(message) => errors.add(field, format!("{:?} {message}", raw.trim())),
        }
    }
    if tags.len() > max {
        errors.add(field, format!("are too many (at most {max})"));
    }
    tags
}

/// A validated create: the parsed address, name and unique tags.
/// Input that passed [`validate`], ready to [`insert`].
pub(super) struct Valid {
    pub(super) email: EmailAddress,
    pub(super) name: Option<String>,
    tags: Vec<String>,
    subscribed_at: Option<Timestamp>,
}

impl Valid {
    pub(super) fn tags(&self) -> &[String] {
        &self.tags
    }
}

/// `raw` as an e-mail address, or the `invalid_email` refusal of field `email`.
pub fn checked_email(raw: &str) -> DomainResult<EmailAddress> {
    EmailAddress::parse(raw).map_err(|message| {
        DomainError::Invalid(
            ErrorCode::InvalidEmail,
            FieldErrors::single("email", message),
        )
    })
}

pub(super) fn validate(input: &NewSubscriber) -> DomainResult<Valid> {
    let email = checked_email(&input.email)?;
    let mut errors = FieldErrors::new();
    let name = clean_name(&mut errors, input.name.as_deref());
    let mut tags: Vec<String> = Vec::new();
    for raw in &input.tags {
        match clean_tag(raw) {
            Ok(tag) if !tags.contains(&tag) => tags.push(tag),
            Ok(_) => {}
            Err(message) => errors.add("tags", message),
        }
    }
    if tags.len() > TAGS_PER_SUBSCRIBER {
        errors.add(
            "tags",
            format!("are too many (maximum is {TAGS_PER_SUBSCRIBER})"),
        );
    }
    let subscribed_at = input.subscribed_at;
    if subscribed_at.is_some_and(|at| at > Timestamp::now()) {
        errors.add("subscribed_at", "is in the future");
    }
    errors.into_result()?;
    Ok(Valid {
        email,
        name,
        tags,
        subscribed_at,
    })
}

/// Adds validated subscribers to one newsletter inside the caller's transaction: the one way
/// subscribers are created (create, bulk create, CSV imports, confirmed opt-ins). Rows go in
/// a chunk per statement (`INSERT ... SELECT` over a JSON array), because each statement that
/// writes a row also runs the counter triggers of migration 0011 and opens a statement
/// journal: one statement per row cost twice the work per subscriber. Everything added
/// through one `Inserter` shares its creation time, and `subscriber.created` is built only
/// when a webhook subscription listens.
pub(super) struct Inserter<'c> {
    conn: &'c Connection,
    newsletter_id: i64,
    /// Where everything this inserter adds came from.
    origin: &'c Origin,
    now: Timestamp,
    announce: bool,
}

/// Rows one statement adds at most: bounds the JSON text built for it.
const INSERT_CHUNK: usize = 1_000;

impl<'c> Inserter<'c> {
    pub(super) fn new(
        conn: &'c Connection,
        newsletter_id: i64,
        origin: &'c Origin,
    ) -> DomainResult<Self> {
        Ok(Inserter {
            conn,
            newsletter_id,
            origin,
            now: Timestamp::now(),
            announce: events::wanted(conn, newsletter_id, CREATED)?,
        })
    }

    /// Inserts each subscriber whose address is not there yet (neither in the newsletter nor
    /// earlier in `valids`); returns, in the order of `valids`, the new id or `None`.
    pub(super) fn insert_all(&mut self, valids: &[Valid]) -> DomainResult<Vec<Option<i64>>> {
        let mut ids = Vec::with_capacity(valids.len());
        for chunk in valids.chunks(INSERT_CHUNK) {
            ids.extend(self.insert_chunk(chunk)?);
        }
        Ok(ids)
    }

    fn insert_chunk(&mut self, valids: &[Valid]) -> DomainResult<Vec<Option<i64>>> {
        // Rows are read in array order, so of two equal addresses the first is inserted.
        const INSERT: &str = "INSERT INTO subscribers (newsletter_id, email, name, created_at,
                 source, referrer, utm_source, utm_medium, utm_campaign)
             SELECT ?1, value ->> 0, value ->> 1, coalesce(value ->> 2, ?2), ?4, ?5, ?6, ?7, ?8
             FROM json_each(?3) WHERE true
             ON CONFLICT (newsletter_id, email) DO NOTHING
             RETURNING id, email";
        const TAGS: &str = "INSERT OR IGNORE INTO subscriber_tags (subscriber_id, tag)
             SELECT value ->> 0, value ->> 1 FROM json_each(?1)";
        let rows: Vec<(&str, Option<&str>, Option<String>)> = valids
            .iter()
            .map(|v| {
                let since = v.subscribed_at.map(|at| at.to_string());
                (v.email.as_str(), v.name.as_deref(), since)
            })
            .collect();
        let rows = serde_json::to_string(&rows).expect("strings serialise");
        let mut added: HashMap<String, i64> = HashMap::with_capacity(valids.len());
        {
            let mut insert = self.conn.prepare_cached(INSERT)?;
            let origin = self.origin;
            let mut returned = insert.query((
                self.newsletter_id,
                &self.now,
                &rows,
                origin.source,
                origin.referrer.as_deref(),
                origin.utm.source.as_deref(),
                origin.utm.medium.as_deref(),
                origin.utm.campaign.as_deref(),
            ))?;
            while let Some(row) = returned.next()? {
                added.insert(row.get(1)?, row.get(0)?);
            }
        }
        let mut ids = Vec::with_capacity(valids.len());
        let mut tags: Vec<(i64, &str)> = Vec::new();
        for valid in valids {
            // `remove`: a repeated address is the first one's, not new again.
            let id = added.remove(valid.email.as_str());
            if let Some(id) = id {
                tags.extend(valid.tags.iter().map(|tag| (id, tag.as_str())));
                if self.announce {
                    let data = self.created(id, valid).event_data();
                    events::record(self.conn, self.newsletter_id, CREATED, data)?;
                }
            }
            ids.push(id);
        }
        if !tags.is_empty() {
            let tags = serde_json::to_string(&tags).expect("strings serialise");
            self.conn.prepare_cached(TAGS)?.execute([tags])?;
        }
        Ok(ids)
    }

    /// The subscriber the inserter just added as `id`, as [`get`] would read it.
    fn created(&self, id: i64, valid: &Valid) -> Subscriber {
        let mut tags = valid.tags.clone();
        tags.sort();
        let since = valid.subscribed_at.unwrap_or(self.now);
        Subscriber {
            id,
            newsletter_id: self.newsletter_id,
            email: valid.email.as_str().to_string(),
            name: valid.name.clone(),
            status: Status::Active,
            tags,
            subscribed_at: since,
            unsubscribed_at: None,
            created_at: since,
            updated_at: since,
            membership: Membership::free(),
            origin: self.origin.clone(),
            fields: custom_fields::Values::new(),
            paused_until: None,
        }
    }
}

const CREATED: &str = "subscriber.created";

/// Inserts a validated subscriber unless the address exists; returns it and whether it is new.
pub(super) fn insert(
    conn: &Connection,
    newsletter_id: i64,
    valid: &Valid,
    origin: &Origin,
) -> DomainResult<(Subscriber, bool)> {
    let mut inserter = Inserter::new(conn, newsletter_id, origin)?;
    match inserter.insert_all(std::slice::from_ref(valid))?[0] {
        Some(id) => Ok((inserter.created(id, valid), true)),
        None => {
            let existing = find_by_email(conn, newsletter_id, valid.email.as_str())?
                .ok_or(DomainError::NotFound("subscriber"))?;
            Ok((existing, false))
        }
    }
}

/// Refuses the owner's changes to the subscribers of a cancelled (read-only) newsletter. Not
/// for unsubscribes and bounces: a reader can always leave.
fn ensure_open(tx: &Connection, newsletter_id: i64) -> DomainResult<()> {
    crate::domain::newsletters::get(tx, newsletter_id)?.ensure_writable()
}

/// Adds a subscriber by `source`, or returns the existing one with the same address
/// (`false`). No mail is sent.
pub fn create(
    conn: &mut Connection,
    newsletter_id: i64,
    input: &NewSubscriber,
    source: Source,
) -> DomainResult<(Subscriber, bool)> {
    create_and_welcome(
        conn,
        newsletter_id,
        input,
        source,
        &Default::default(),
        false,
    )
}

/// [`create`]; with `send_welcome`, a subscriber added now gets the welcome e-mail
/// (`welcome`), queued in the same transaction.
pub fn create_and_welcome(
    conn: &mut Connection,
    newsletter_id: i64,
    input: &NewSubscriber,
    source: Source,
    fields: &custom_fields::Values,
    send_welcome: bool,
) -> DomainResult<(Subscriber, bool)> {
    let valid = validate(input)?;
    write_tx(conn, |tx| {
        ensure_open(tx, newsletter_id)?;
        custom_fields::check_values(tx, newsletter_id, fields)?;
        let (mut subscriber, created) = insert(tx, newsletter_id, &valid, &Origin::of(source))?;
        if created && !fields.is_empty() {
            custom_fields::set_values(tx, newsletter_id, subscriber.id, fields)?;
            subscriber.fields = get(tx, newsletter_id, subscriber.id)?.fields;
        }
        if created && send_welcome {
            queue_welcome(tx, subscriber.id)?;
        }
        Ok((subscriber, created))
    })
}

/// One refused entry of a bulk create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkError {
    pub index: usize,
    pub email: String,
    pub code: &'static str,
    pub message: String,
}

/// The outcome of a bulk create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkOutcome {
    pub created: usize,
    pub existing: usize,
    pub errors: Vec<BulkError>,
}

/// Creates up to [`BULK_LIMIT`] subscribers, each with its custom field values, in one
/// transaction; more is refused whole. Duplicates (also within the request) count as
/// existing and keep their values; invalid entries (an unfit field value too) are reported.
pub fn bulk_create(
    conn: &mut Connection,
    newsletter_id: i64,
    entries: &[(NewSubscriber, custom_fields::Values)],
) -> DomainResult<BulkOutcome> {
    if entries.len() > BULK_LIMIT {
        return Err(DomainError::invalid(
            "subscribers",
            format!(
                "has {} entries; at most {BULK_LIMIT} are accepted per request",
                entries.len()
            ),
        ));
    }
    write_tx(conn, |tx| {
        ensure_open(tx, newsletter_id)?;
        let fields = custom_fields::list(tx, newsletter_id)?;
        let mut outcome = BulkOutcome::default();
        let (mut valids, mut values) = (Vec::new(), Vec::new());
        for (index, (entry, given)) in entries.iter().enumerate() {
            let valid = match check(index, entry.clone())? {
                Ok(valid) => valid,
                Err(refused) => {
                    outcome.errors.push(refused);
                    continue;
                }
            };
            match custom_fields::checked_against(&fields, given) {
                Ok(writes) => {
                    valids.push(valid);
                    values.push(
                        writes
                            .into_iter()
                            .filter_map(|(field, value)| Some((field, value?)))
                            .collect::<Vec<_>>(),
                    );
                }
                Err(problems) => outcome.errors.push(BulkError {
                    index,
                    email: entry.email.clone(),
                    code: ErrorCode::ValidationError.as_str(),
                    message: problems.sentences().join("; "),
                }),
            }
        }
        let ids = insert_checked_ids(tx, newsletter_id, &valids, &Origin::of(Source::Api))?;
        for (id, values) in ids.iter().zip(&values) {
            if let Some(id) = id {
                custom_fields::put_values(tx, *id, values)?;
            }
        }
        outcome.created = ids.iter().flatten().count();
        outcome.existing = ids.len() - outcome.created;
        Ok(outcome)
    })
}

/// [`validate`]s the entry at `index` of an import: the entry ready to insert, or why it is
/// refused. Needs no database, so the CSV import checks its next batch on another thread
/// while the previous one commits.
pub(super) fn check(index: usize, entry: NewSubscriber) -> DomainResult<Result<Valid, BulkError>> {
    match validate(&entry) {
        Ok(valid) => Ok(Ok(valid)),
        Err(DomainError::Invalid(code, fields)) => Ok(Err(BulkError {
            index,
            email: entry.email,
            code: code.as_str(),
            message: fields.sentences().join("; "),
        })),
        Err(other) => Err(other),
    }
}

/// Inserts entries that passed [`check`] inside the caller's transaction, telling for each of
/// `valids` the id it was created with (`None`: it was there already, or repeated).
pub(super) fn insert_checked_ids(
    conn: &Connection,
    newsletter_id: i64,
    valids: &[Valid],
    origin: &Origin,
) -> DomainResult<Vec<Option<i64>>> {
    Inserter::new(conn, newsletter_id, origin)?.insert_all(valids)
}

/// What a PATCH may change.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub status: Option<String>,
    /// `Some(None)` clears the name.
    pub name: Option<Option<String>>,
    /// Custom field values to set (`null` removes one); fields not named stay.
    pub fields: custom_fields::Values,
}

pub fn update(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    changes: &Changes,
) -> DomainResult<Subscriber> {
    let mut errors = FieldErrors::new();
    let status = match changes.status.as_deref().map(str::trim) {
        None => None,
        Some(text) => match Status::parse(text) {
            Some(status) if status.can_be_set() => Some(status),
            _ => {
                errors.add("status", "must be active or unsubscribed");
                None
            }
        },
    };
    let name = changes
        .name
        .as_ref()
        .map(|n| clean_name(&mut errors, n.as_deref()));
    errors.into_result()?;
    write_tx(conn, |tx| {
        ensure_open(tx, newsletter_id)?;
        let before = get(tx, newsletter_id, id)?;
        let now = Timestamp::now();
        if let Some(status) = status.filter(|s| *s != before.status) {
            set_status(tx, &before, status, now)?;
        }
        if let Some(name) = &name {
            const NAME: &str = "UPDATE subscribers SET name = ?2, changed_at = ?3 WHERE id = ?1";
            tx.execute(NAME, (id, name, &now))?;
        }
        custom_fields::set_values(tx, newsletter_id, id, &changes.fields)?;
        changed(tx, before)
    })
}

/// Moves subscriber `id` to the address `email` (checked by the caller), inside the
/// caller's transaction; another subscriber of the newsletter with that address refuses it.
/// Fires `subscriber.updated`.
pub fn change_email(
    tx: &Connection,
    newsletter_id: i64,
    id: i64,
    email: &EmailAddress,
) -> DomainResult<Subscriber> {
    let before = get(tx, newsletter_id, id)?;
    if find_by_email(tx, newsletter_id, email.as_str())?.is_some_and(|other| other.id != id) {
        return Err(DomainError::invalid(
            "email",
            "is already subscribed to this newsletter",
        ));
    }
    const SET: &str = "UPDATE subscribers SET email = ?2, changed_at = ?3 WHERE id = ?1";
    tx.execute(SET, (id, email.as_str(), Timestamp::now()))?;
    changed(tx, before)
}

/// Moves a subscriber to `status`, keeping `unsubscribed_at` in step; used by PATCH,
/// unsubscribe links and bounces.
pub fn set_status(
    conn: &Connection,
    subscriber: &Subscriber,
    status: Status,
    now: Timestamp,
) -> Result<(), StoreError> {
    const SET: &str = "UPDATE subscribers SET status = ?2, changed_at = ?3,
         unsubscribed_at = CASE WHEN ?2 = 'unsubscribed' THEN coalesce(unsubscribed_at, ?3)
                                WHEN ?2 = 'active' THEN NULL ELSE unsubscribed_at END,
         resubscribed_at = CASE WHEN ?2 = 'active' AND status != 'active' THEN ?3 ELSE resubscribed_at END
         WHERE id = ?1";
    conn.execute(SET, (subscriber.id, status, now))?;
    Ok(())
}

/// Re-reads the subscriber and fires `subscriber.updated` when anything changed.
fn changed(conn: &Connection, before: Subscriber) -> DomainResult<Subscriber> {
    let after = get(conn, before.newsletter_id, before.id)?;
    let same = (
        &after.email,
        &after.name,
        after.status,
        &after.tags,
        &after.fields,
        after.paused_until,
    ) == (
        &before.email,
        &before.name,
        before.status,
        &before.tags,
        &before.fields,
        before.paused_until,
    );
    if !same {
        events::record(
            conn,
            after.newsletter_id,
            "subscriber.updated",
            after.event_data(),
        )?;
    }
    Ok(after)
}

pub fn add_tag(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    tag: &str,
) -> DomainResult<Subscriber> {
    let tag = clean_tag(tag).map_err(|message| DomainError::invalid("tag", message))?;
    write_tx(conn, |tx| {
        ensure_open(tx, newsletter_id)?;
        let before = get(tx, newsletter_id, id)?;
        if !before.tags.contains(&tag) && before.tags.len() >= TAGS_PER_SUBSCRIBER {
            return Err(DomainError::invalid(
                "tag",
                format!("cannot be added: at most {TAGS_PER_SUBSCRIBER} tags"),
            ));
        }
        tx.execute(
            "INSERT OR IGNORE INTO subscriber_tags (subscriber_id, tag) VALUES (?1, ?2)",
            (id, &tag),
        )?;
        tx.execute(
            "UPDATE subscribers SET changed_at = ?2 WHERE id = ?1",
            (id, Timestamp::now()),
        )?;
        changed(tx, before)
    })
}

pub fn remove_tag(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    tag: &str,
) -> DomainResult<Subscriber> {
    let tag = clean_tag(tag).map_err(|message| DomainError::invalid("tag", message))?;
    write_tx(conn, |tx| {
        ensure_open(tx, newsletter_id)?;
        let before = get(tx, newsletter_id, id)?;
        if tx.execute(
            "DELETE FROM subscriber_tags WHERE subscriber_id = ?1 AND tag = ?2",
            (id, &tag),
        )? > 0
        {
            tx.execute(
                "UPDATE subscribers SET changed_at = ?2 WHERE id = ?1",
                (id, Timestamp::now()),
            )?;
        }
        changed(tx, before)
    })
}

/// Removes the subscriber and its tags for good (GDPR), after recording `subscriber.deleted`;
/// past deliveries keep their counts but lose the address.
pub fn delete(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<()> {
    write_tx(conn, |tx| {
        ensure_open(tx, newsletter_id)?;
        let subscriber = get(tx, newsletter_id, id)?;
        let mut data = subscriber.event_data();
        data["status"] = json!("unsubscribed");
        events::record(tx, newsletter_id, "subscriber.deleted", data)?;
        tx.execute(
            "UPDATE deliveries SET email = '' WHERE subscriber_id = ?1",
            [id],
        )?;
        tx.execute("DELETE FROM subscribers WHERE id = ?1", [id])?;
        Ok(())
    })
}

/// Calls `f` with each of the newsletter's subscribers, oldest first, one row at a time (the
/// CSV export streams a newsletter of any size through this without collecting it).
pub fn for_each(
    conn: &Connection,
    newsletter_id: i64,
    mut f: impl FnMut(&Subscriber) -> DomainResult<()>,
) -> DomainResult<()> {
    const SQL: &str = select_subscriber!("WHERE s.newsletter_id = ?1 ORDER BY s.id");
    let mut stmt = conn.prepare(SQL)?;
    let mut rows = stmt.query([newsletter_id])?;
    while let Some(row) = rows.next()? {
        f(&from_row(row)?)?;
    }
    Ok(())
}

/// The newsletter's tags, by name, each with how many **active** subscribers carry it: the
/// one figure every page shows beside a tag (the subscriber list's filter, the send and
/// schedule forms), since only active subscribers are sent to. A tag only unsubscribed or
/// bounced subscribers carry is listed with 0. From the counters migrations 0011 and 0029's
/// triggers keep.
pub fn tag_counts(conn: &Connection, newsletter_id: i64) -> DomainResult<Vec<(String, i64)>> {
    const SQL: &str = "SELECT tag, active FROM tag_counts
         WHERE newsletter_id = ?1 AND subscribers > 0 ORDER BY tag";
    let mut stmt = conn.prepare_cached(SQL)?;
    let tags = stmt
        .query_map([newsletter_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(tags)
}

/// Active subscribers of the newsletter, from its counters.
pub fn active_count(conn: &Connection, newsletter_id: i64) -> DomainResult<i64> {
    const SQL: &str = "SELECT active FROM subscriber_totals WHERE newsletter_id = ?1";
    Ok(conn
        .prepare_cached(SQL)?
        .query_row([newsletter_id], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Queues the welcome e-mail of `subscriber_id` inside the caller's transaction, unless the
/// subscriber has had one (`welcome_mail` sends it, once). True when it was queued.
pub fn queue_welcome(conn: &Connection, subscriber_id: i64) -> DomainResult<bool> {
    const WELCOMED: &str = "SELECT welcomed_at FROM subscribers WHERE id = ?1";
    let welcomed: Option<Timestamp> = conn.query_row(WELCOMED, [subscriber_id], |r| r.get(0))?;
    if welcomed.is_some() {
        return Ok(false);
    }
    crate::store::jobs::queue_welcome(conn, subscriber_id)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn db_with_newsletter() -> Connection {
        crate::domain::testing::db_with_newsletter("free")
    }

    #[test]
    fn lengths_count_the_text_as_sent_spaces_included() {
        let at_most = "t".repeat(TAG_MAX);
        assert_eq!(clean_tag(&at_most), Ok(at_most.clone()));
        assert!(clean_tag(&format!(" {at_most}")).is_err());
        // Padding that trimming would remove still counts (the document's maxLength).
        let padded = format!("\u{85}a{}", "\u{85}".repeat(TAG_MAX));
        assert!(clean_tag(&padded).is_err());
        assert_eq!(clean_tag("  news  "), Ok("news".to_string()));

        let mut errors = FieldErrors::new();
        let blank_but_long = "\u{85}".repeat(NAME_MAX + 1);
        assert!(clean_name(&mut errors, Some(&blank_but_long)).is_some());
        assert!(
            !errors.is_empty(),
            "a name over the limit is refused even when blank"
        );
        let mut errors = FieldErrors::new();
        assert_eq!(clean_name(&mut errors, Some("   ")), None);
        assert!(errors.is_empty());
    }

    fn new(email: &str) -> NewSubscriber {
        NewSubscriber {
            email: email.into(),
            ..Default::default()
        }
    }

    /// Rows go in chunks of `INSERT_CHUNK`: an address repeated inside one chunk, across a
    /// chunk boundary, or already stored counts as existing, and each new one keeps its tags.
    #[test]
    fn import_counts_repeats_within_and_across_chunks_as_existing() {
        let mut conn = db_with_newsletter();
        create(&mut conn, 1, &new("stored@x.co"), Source::Api).unwrap();
        let mut entries: Vec<NewSubscriber> = (0..INSERT_CHUNK + 2)
            .map(|i| NewSubscriber {
                email: format!("r{i}@x.co"),
                tags: vec!["t".into()],
                ..Default::default()
            })
            .collect();
        entries[1] = new("r0@x.co"); // inside the first chunk
        entries[INSERT_CHUNK] = new("r2@x.co"); // across the boundary
        entries[INSERT_CHUNK + 1] = new("Stored@x.co"); // already there
        let valids: Vec<Valid> = entries.into_iter().map(|e| validate(&e).unwrap()).collect();
        let tx = conn.transaction().unwrap();
        let ids = insert_checked_ids(&tx, 1, &valids, &Origin::of(Source::Api)).unwrap();
        tx.commit().unwrap();
        let created = ids.iter().flatten().count();
        assert_eq!((created, ids.len() - created), (INSERT_CHUNK - 1, 3));
        let (total, tagged): (i64, i64) = conn
            .query_row(
                "SELECT (SELECT count(*) FROM subscribers),
                        (SELECT count(*) FROM subscriber_tags WHERE tag = 't')",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            (total as usize, tagged as usize),
            (INSERT_CHUNK, INSERT_CHUNK - 1)
        );
    }

    #[test]
    fn a_cancelled_newsletter_refuses_owner_changes_but_lets_readers_leave() {
        let mut conn = db_with_newsletter();
        let (kept, _) = create(&mut conn, 1, &new("kept@example.com"), Source::Api).unwrap();
        conn.execute(
            "UPDATE newsletters SET status = 'cancelled' WHERE id = 1",
            [],
        )
        .unwrap();
        let refused = |r: DomainResult<()>| matches!(r, Err(DomainError::Rejected(..)));
        assert!(refused(
            create(&mut conn, 1, &new("new@example.com"), Source::Api).map(|_| ())
        ));
        assert!(refused(
            bulk_create(&mut conn, 1, &[(new("b@example.com"), Default::default())]).map(|_| ())
        ));
        assert!(refused(add_tag(&mut conn, 1, kept.id, "vip").map(|_| ())));
        assert!(refused(
            remove_tag(&mut conn, 1, kept.id, "vip").map(|_| ())
        ));
        let rename = Changes {
            name: Some(Some("K".into())),
            ..Default::default()
        };
        assert!(refused(update(&mut conn, 1, kept.id, &rename).map(|_| ())));
        assert!(refused(delete(&mut conn, 1, kept.id)));
        assert_eq!(active_count(&conn, 1).unwrap(), 1, "nothing changed");
        // The reader's own way out (unsubscribe links, bounces) is not the owner's change.
        set_status(&conn, &kept, Status::Unsubscribed, Timestamp::now()).unwrap();
        assert_eq!(active_count(&conn, 1).unwrap(), 0);
    }

    #[test]
    fn create_is_idempotent_and_records_events() {
        let mut conn = db_with_newsletter();
        crate::domain::testing::listen(&mut conn, 1, &["subscriber.created"]);
        let input = NewSubscriber {
            email: " Ann@Example.com".into(),
            name: Some("Ann".into()),
            tags: vec![" vip ".into(), "vip".into()],
            subscribed_at: None,
        };
        let (a, created) = create(&mut conn, 1, &input, Source::Api).unwrap();
        assert!(created);
        assert_eq!(
            (a.email.as_str(), a.tags.clone()),
            ("ann@example.com", vec!["vip".to_string()])
        );
        let (b, created) = create(&mut conn, 1, &new("ann@example.com"), Source::Api).unwrap();
        assert!(!created);
        assert_eq!(a.id, b.id);
        assert!(matches!(
            create(&mut conn, 1, &new("nope"), Source::Api),
            Err(DomainError::Invalid(ErrorCode::InvalidEmail, _))
        ));
        let kinds: Vec<String> = conn
            .prepare("SELECT kind FROM events ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(kinds, vec!["subscriber.created"]);
    }

    #[test]
    fn bulk_counts_created_existing_and_errors() {
        let mut conn = db_with_newsletter();
        create(&mut conn, 1, &new("old@example.com"), Source::Api).unwrap();
        let entries: Vec<_> = ["a@example.com", "old@example.com", "bad", "A@example.com"]
            .into_iter()
            .map(|email| (new(email), Default::default()))
            .collect();
        let outcome = bulk_create(&mut conn, 1, &entries).unwrap();
        assert_eq!((outcome.created, outcome.existing), (1, 2));
        assert_eq!(outcome.errors.len(), 1);
        assert_eq!(
            (outcome.errors[0].index, outcome.errors[0].code),
            (2, "invalid_email")
        );
        let too_many: Vec<_> = (0..=BULK_LIMIT)
            .map(|i| (new(&format!("u{i}@example.com")), Default::default()))
            .collect();
        assert!(bulk_create(&mut conn, 1, &too_many).is_err());
        assert_eq!(
            active_count(&conn, 1).unwrap(),
            2,
            "a refused bulk creates nothing"
        );
        let events: i64 = conn
            .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .unwrap();
        assert_eq!(events, 0, "no webhook listens, so no event is kept");
    }

    #[test]
    fn status_tags_filters_and_delete() {
        let mut conn = db_with_newsletter();
        let (s, _) = create(&mut conn, 1, &new("s@example.com"), Source::Api).unwrap();
        create(&mut conn, 1, &new("t@example.com"), Source::Api).unwrap();
        let changes = Changes {
            status: Some("unsubscribed".into()),
            name: Some(Some("Sam".into())),
            ..Default::default()
        };
        let s = update(&mut conn, 1, s.id, &changes).unwrap();
        assert_eq!(s.status, Status::Unsubscribed);
        assert!(s.unsubscribed_at.is_some());
        assert!(
            update(
                &mut conn,
                1,
                s.id,
                &Changes {
                    status: Some("bounced".into()),
                    ..Default::default()
                }
            )
            .is_err()
        );
        let s = add_tag(&mut conn, 1, s.id, "paid").unwrap();
        assert_eq!(s.tags, vec!["paid"]);
        let page = Page::parse(None, None).unwrap();
        let filter = Filter {
            tag: Some("paid".into()),
            ..Default::default()
        };
        assert_eq!(list(&conn, 1, page, None, &filter).unwrap().rows.len(), 1);
        let filter = Filter {
            status: Some("active".into()),
            ..Default::default()
        };
        assert_eq!(list(&conn, 1, page, None, &filter).unwrap().rows.len(), 1);
        assert!(
            list(
                &conn,
                1,
                page,
                None,
                &Filter {
                    status: Some("gone".into()),
                    ..Default::default()
                }
            )
            .is_err()
        );
        let s = remove_tag(&mut conn, 1, s.id, "paid").unwrap();
        assert!(s.tags.is_empty());
        delete(&mut conn, 1, s.id).unwrap();
        assert!(matches!(get(&conn, 1, s.id), Err(DomainError::NotFound(_))));
        assert!(
            matches!(get(&conn, 2, 1), Err(DomainError::NotFound(_))),
            "other newsletters see nothing"
        );
    }

    /// Newsletter 1's subscribers interleaved with newsletter 2's over several id blocks,
    /// with every status and a few tags.
    fn crowded() -> Connection {
        let conn = db_with_newsletter();
        conn.execute_batch(
            "INSERT INTO newsletters (owner_id, name, subdomain, bounce_token, created_at, updated_at)
               VALUES (1, 'M', 'm', 'bt2', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 3500)
             INSERT INTO subscribers (newsletter_id, email, status, created_at)
             SELECT CASE WHEN i % 4 = 0 THEN 2 ELSE 1 END, 'r' || i || '@x.co',
                    CASE WHEN i % 7 = 0 THEN 'unsubscribed' WHEN i % 11 = 0 THEN 'bounced' ELSE 'active' END,
                    '2026-01-01T00:00:00.000Z'
             FROM k;
             INSERT INTO subscriber_tags (subscriber_id, tag) SELECT id, 'vip' FROM subscribers WHERE id % 5 = 0;
             INSERT INTO subscriber_tags (subscriber_id, tag) SELECT id, 'rare' FROM subscribers WHERE id % 301 = 0;",
        )
        .unwrap();
        conn
    }

    /// Every id matching `filter`, newest first, the plain way.
    fn all_ids(conn: &Connection, filter: &Filter) -> Vec<i64> {
        const ALL: &str = "SELECT s.id FROM subscribers s WHERE s.newsletter_id = 1
             AND (?1 IS NULL OR s.status = ?1)
             AND (?2 IS NULL OR EXISTS (SELECT 1 FROM subscriber_tags t WHERE t.subscriber_id = s.id AND t.tag = ?2))
             AND (?3 IS NULL OR instr(s.email, ?3) > 0)
             ORDER BY s.id DESC";
        conn.prepare(ALL)
            .unwrap()
            .query_map((&filter.status, &filter.tag, &filter.search), |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The ids of page `page` the plain way (every row matching, then the offset).
    fn reference(conn: &Connection, filter: &Filter, page: Page) -> (Vec<i64>, bool) {
        let ids = all_ids(conn, filter);
        let start = (page.offset() as usize).min(ids.len());
        let end = (start + page.per_page as usize).min(ids.len());
        (ids[start..end].to_vec(), ids.len() > end)
    }

    fn filters() -> Vec<Filter> {
        let f = |status: Option<&str>, tag: Option<&str>, search: Option<&str>| Filter {
            status: status.map(str::to_string),
            tag: tag.map(str::to_string),
            search: search.map(str::to_string),
        };
        vec![
            f(None, None, None),
            f(Some("active"), None, None),
            f(Some("unsubscribed"), None, None),
            f(Some("bounced"), None, None),
            f(None, Some("vip"), None),
            f(None, Some("rare"), None),
            f(None, Some("nobody"), None),
            f(Some("active"), Some("vip"), None),
            f(None, None, Some("1")),
            f(Some("bounced"), Some("vip"), Some("2")),
        ]
    }

    #[test]
    fn every_page_of_every_filter_is_the_rows_at_its_offset() {
        let conn = crowded();
        for filter in filters() {
            for per_page in ["7", "100"] {
                let mut page_no = 1;
                loop {
                    let page = Page::parse(Some(&page_no.to_string()), Some(per_page)).unwrap();
                    let listed = list(&conn, 1, page, None, &filter).unwrap();
                    let ids: Vec<i64> = listed.rows.iter().map(|s| s.id).collect();
                    assert_eq!(
                        (ids, listed.has_more),
                        reference(&conn, &filter, page),
                        "{filter:?} page {page_no} per_page {per_page}"
                    );
                    assert_eq!(listed.page, page_no);
                    assert_eq!(listed.next_cursor.is_some(), listed.has_more);
                    if !listed.has_more {
                        break;
                    }
                    page_no += 1;
                }
                // Past the end: empty, no more.
                let page = Page::parse(Some(&(page_no + 3).to_string()), Some(per_page)).unwrap();
                let past = list(&conn, 1, page, None, &filter).unwrap();
                assert!(past.rows.is_empty() && !past.has_more, "{filter:?}");
            }
        }
    }

    /// Following cursors while rows are added and deleted between pages: every row there
    /// from start to end is listed exactly once, nothing newer than the first page shows up,
    /// and each page's number counts on; a page asked by number is always the rows at its
    /// offset at that moment.
    #[test]
    fn cursors_neither_lose_nor_repeat_rows_while_the_list_changes() {
        let mut conn = crowded();
        for filter in filters() {
            let page = Page::parse(None, Some("50")).unwrap();
            let before = all_ids(&conn, &filter);
            let mut seen = Vec::new();
            let mut deleted = Vec::new();
            let mut cursor = None;
            let mut number = 1;
            loop {
                let listed = list(&conn, 1, page, cursor, &filter).unwrap();
                assert_eq!(listed.page, number);
                seen.extend(listed.rows.iter().map(|s| s.id));
                // Between pages: a new subscriber, and the deletion of one not yet listed
                // (and of one already listed).
                create(
                    &mut conn,
                    1,
                    &new(&format!("n{number}-{}@x.co", seen.len())),
                    Source::Api,
                )
                .unwrap();
                let unseen = before
                    .iter()
                    .rev()
                    .find(|id| !seen.contains(id) && !deleted.contains(*id));
                if let Some(&id) = unseen.filter(|_| number % 3 == 0) {
                    delete(&mut conn, 1, id).unwrap();
                    deleted.push(id);
                }
                if let Some(&id) = seen.first().filter(|_| number % 4 == 0)
                    && !deleted.contains(&id)
                {
                    delete(&mut conn, 1, id).unwrap();
                    deleted.push(id);
                }
                // Page numbers meanwhile: the rows at that page's offset as the list is now.
                let numbered = Page::parse(Some(&number.to_string()), Some("50")).unwrap();
                let now = list(&conn, 1, numbered, None, &filter).unwrap();
                assert_eq!(
                    (
                        now.rows.iter().map(|s| s.id).collect::<Vec<_>>(),
                        now.has_more
                    ),
                    reference(&conn, &filter, numbered),
                    "{filter:?} page {number} after changes"
                );
                match listed.next_cursor {
                    Some(next) => {
                        cursor = Some(next);
                        number += 1;
                    }
                    None => break,
                }
            }
            let kept: Vec<i64> = before
                .iter()
                .copied()
                .filter(|id| !deleted.contains(id))
                .collect();
            let mut listed_kept: Vec<i64> = seen
                .iter()
                .copied()
                .filter(|id| !deleted.contains(id))
                .collect();
            listed_kept.dedup();
            assert_eq!(
                listed_kept, kept,
                "{filter:?}: every remaining row once, newest first"
            );
            assert_eq!(
                seen.len(),
                seen.iter().collect::<HashSet<_>>().len(),
                "{filter:?}: no repeats"
            );
            assert!(
                seen.iter().all(|id| before.contains(id)),
                "{filter:?}: nothing newer"
            );
        }
        assert!(matches!(
            list(&conn, 1, Page::parse(None, None).unwrap(), Some(Cursor::after(1, 5)), &Filter::default()),
            Ok(Listed { ref rows, .. }) if rows.iter().all(|s| s.id < 5)
        ));
    }
}
