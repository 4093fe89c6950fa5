//! Segments: who a send goes to. An audience is the active subscribers having ANY of its
//! `tags` (no tags: every active subscriber) and NONE of its `exclude_tags`, and, when it
//! has a `field` condition, whose custom field equals a value or is before or after it. It is
//! recorded on the issue (`issue_audience_tags`, `issue_audience_fields`), counted exactly for
//! the confirmation, and read once by the send when it records its deliveries
//! (`domain::delivery::sending::prepare`).
//!
//! An audience with a field condition is read along that field's matching values in their
//! index (`subscriber_field_values_by_value`) when they are few, else along the list with one
//! probe of each subscriber's value, as tags are; its count and the send's recipients are
//! the same SQL ([`field_segment`]).
//!
//! Counting stays bounded at a million subscribers: everyone is the stored counter
//! (`subscriber_totals`); a count with tags reads the rows of those tags in the tag index
//! (`subscriber_tags_tag`) when they are few, else one index entry and one tag probe per
//! active subscriber. Doors count on the blocking pool (`store::Db`), never on async threads.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use crate::clock::Timestamp;
use crate::domain::content::merge_tags::value_text;
use crate::domain::subscribers::custom_fields::{self, FieldType};
use crate::domain::subscribers::{self, clean_tag, preferences};
use crate::domain::{DomainError, DomainResult, ErrorCode, FieldErrors};

/// Tags in each list: more is a mistake, and keeps each count's lookups few.
pub const TAGS_MAX: usize = 20;

crate::string_enum!(
    /// How a segment compares a subscriber's field with its value.
    pub FieldOp {
        Equals => "equals",
        /// Less than: an earlier date, a smaller number.
        Before => "before",
        After => "after",
    }
);

impl FieldOp {
    /// The words between the field's name and the value.
    pub fn words(self) -> &'static str {
        match self {
            FieldOp::Equals => "is",
            FieldOp::Before => "is before",
            FieldOp::After => "is after",
        }
    }

    /// The comparison, for a form's choice.
    pub fn label(self) -> &'static str {
        match self {
            FieldOp::Equals => "is",
            FieldOp::Before => "is before (less than)",
            FieldOp::After => "is after (more than)",
        }
    }
}

/// A segment's condition on one custom field: subscribers without a value are not in it.
#[derive(Debug, Clone)]
pub struct FieldCondition {
    /// The field's id; 0 until [`check_known`] finds the field.
    pub field_id: i64,
    pub name: String,
    pub op: FieldOp,
    /// In the field's type once checked (a string, a number, `true`/`false`); as given before.
    pub value: Value,
}

impl FieldCondition {
    /// The value as a page shows it, quoted when it is text: `“weekly”`, `30`, `yes`.
    pub fn shown_value(&self) -> String {
        match &self.value {
            Value::String(text) => format!("“{}”", text.trim()),
            other => value_text(other),
        }
    }

    /// The value as a form's input holds it.
    pub fn input_value(&self) -> String {
        match &self.value {
            Value::String(text) => text.trim().to_string(),
            other => value_text(other),
        }
    }

    /// The value as SQL compares it with `subscriber_field_values.value`.
    fn sql_value(&self) -> SqlValue {
        custom_fields::sql_of(&self.value).unwrap_or(SqlValue::Null)
    }
}

/// Two conditions are the same choice when they name the same field, comparison and value
/// (`"30"` as given and `30` as checked are one value): a sent issue's audience re-posted
/// as it was is no change.
impl PartialEq for FieldCondition {
    fn eq(&self, other: &Self) -> bool {
        let canonical = |v: &Value| match v {
            Value::String(text) => text.trim().to_string(),
            Value::Bool(b) => b.to_string(),
            other => other.to_string(),
        };
        self.name == other.name
            && self.op == other.op
            && canonical(&self.value) == canonical(&other.value)
    }
}

impl Eq for FieldCondition {}

/// A checked audience: tags trimmed, without repeats, sorted. Empty lists: everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audience {
    pub tags: Vec<String>,
    pub exclude_tags: Vec<String>,
    /// Members with paid access only (a paid issue sent to paid members only; the issue's
    /// `paid_members_only`, not a tag).
    pub paid_only: bool,
    /// Only subscribers whose custom field meets this condition.
    pub field: Option<FieldCondition>,
    /// A resend to those who did not open (`issues::resend_unopened`): the recipients of this
    /// issue whose message no person opened, still active and not paused. It is the whole
    /// audience then; the lists and the condition are not read.
    pub resend_of: Option<i64>,
}

/// A field condition as a door received it, not yet checked.
#[derive(Debug, Clone, Default)]
pub struct FieldConditionInput {
    pub name: String,
    pub op: String,
    pub value: Value,
}

/// An audience as a door received it, not yet checked.
#[derive(Debug, Clone, Default)]
pub struct AudienceInput {
    pub tags: Vec<String>,
    pub exclude_tags: Vec<String>,
    /// `None` (or a condition naming no field): no condition.
    pub field: Option<FieldConditionInput>,
}

impl Audience {
    /// No tags either way and no condition: every active subscriber.
    pub fn is_everyone(&self) -> bool {
        self.tags.is_empty()
            && self.exclude_tags.is_empty()
            && !self.paid_only
            && self.field.is_none()
            && self.resend_of.is_none()
    }

    /// The audience in words, for pages: "subscribers tagged a or b, except those tagged c".
    pub fn describe(&self) -> String {
        if let Some(original) = self.resend_of {
            return format!(
                "the recipients of issue {original} who have not opened it (automatic opens set aside)"
            );
        }
        let quoted = |tags: &[String]| {
            tags.iter()
                .map(|t| format!("“{t}”"))
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let who = if self.paid_only {
            "paid member"
        } else {
            "active subscriber"
        };
        let mut text = if self.tags.is_empty() {
            format!("every {who}")
        } else {
            format!("{who}s tagged {}", quoted(&self.tags))
        };
        if let Some(field) = &self.field {
            text.push_str(&format!(
                " whose {} {} {}",
                field.name,
                field.op.words(),
                field.shown_value()
            ));
        }
        if !self.exclude_tags.is_empty() {
            text.push_str(&format!(
                ", except those tagged {}",
                quoted(&self.exclude_tags)
            ));
        }
        text
    }

    /// Reads the two lists stored as lines (the issue queries' `group_concat`) and the
    /// condition stored as JSON ([`stored_field_json`]).
    pub fn from_stored(
        tags: Option<String>,
        exclude_tags: Option<String>,
        field: Option<String>,
    ) -> Self {
        let lines = |text: Option<String>| {
            text.map(|t| t.split('\n').map(str::to_string).collect())
                .unwrap_or_default()
        };
        Audience {
            tags: lines(tags),
            exclude_tags: lines(exclude_tags),
            paid_only: false,
            field: field.and_then(|json| condition_from_json(&json)),
            resend_of: None,
        }
    }

    fn json(tags: &[String]) -> String {
        serde_json::to_string(tags).expect("strings serialise")
    }
}

/// Checks the shape of `input` (each tag as a subscriber's tag must be, at most [`TAGS_MAX`]
/// a list, no tag both wanted and excluded), adding problems to `errors` under `prefix`
/// (`""` or `"audience."`) and the list's name.
pub fn check_shape(input: &AudienceInput, prefix: &str, errors: &mut FieldErrors) -> Audience {
    let mut clean = |field: &str, raw: &[String]| {
        let field = format!("{prefix}{field}");
        let mut tags: Vec<String> = Vec::new();
        for tag in raw {
            match clean_tag(tag) {
                Ok(tag) if !tags.contains(&tag) => tags.push(tag),
                Ok(_) => {}
                Err(message) => errors.add(&field, message),
            }
        }
        if tags.len() > TAGS_MAX {
            errors.add(&field, format!("are too many (maximum is {TAGS_MAX})"));
        }
        tags.sort();
        tags
    };
    let tags = clean("tags", &input.tags);
    let exclude_tags = clean("exclude_tags", &input.exclude_tags);
    for tag in tags.iter().filter(|t| exclude_tags.contains(t)) {
        errors.add(
            &format!("{prefix}exclude_tags"),
            format!("cannot also name “{tag}”, a tag the audience includes"),
        );
    }
    Audience {
        tags,
        exclude_tags,
        paid_only: false,
        field: input
            .field
            .as_ref()
            .and_then(|given| condition_shape(given, prefix, errors)),
        resend_of: None,
    }
}

/// The shape of a field condition: a name (none: no condition), a known comparison and a
/// value; the field itself is looked up by [`check_known`].
fn condition_shape(
    given: &FieldConditionInput,
    prefix: &str,
    errors: &mut FieldErrors,
) -> Option<FieldCondition> {
    let name = given.name.trim();
    if name.is_empty() {
        return None;
    }
    let op = FieldOp::parse(given.op.trim());
    if op.is_none() {
        errors.add(
            &format!("{prefix}field.op"),
            "must be equals, before or after",
        );
    }
    let empty = match &given.value {
        Value::Null => true,
        Value::String(text) => text.trim().is_empty(),
        _ => false,
    };
    if empty {
        errors.add(&format!("{prefix}field.value"), "can't be blank");
    }
    Some(FieldCondition {
        field_id: 0,
        name: name.to_string(),
        op: op.unwrap_or(FieldOp::Equals),
        value: match &given.value {
            Value::String(text) => Value::String(text.trim().to_string()),
            other => other.clone(),
        },
    })
}

/// The field condition `condition` names, checked against the newsletter's fields: the
/// field found, a comparison its type allows (before and after for numbers and dates only)
/// and a value of its type; the condition with the field's id and the value in its type.
fn known_condition(
    conn: &Connection,
    newsletter_id: i64,
    condition: &FieldCondition,
    prefix: &str,
) -> DomainResult<FieldCondition> {
    let problem = |part: &str, message: String| {
        DomainError::Invalid(
            ErrorCode::ValidationError,
            FieldErrors::single(&format!("{prefix}field.{part}"), message),
        )
    };
    let fields = custom_fields::list(conn, newsletter_id)?;
    let Some(field) = fields.iter().find(|f| f.name == condition.name) else {
        return Err(problem(
            "name",
            format!("“{}” is not a field of this newsletter", condition.name),
        ));
    };
    let ordered = matches!(field.field_type, FieldType::Number | FieldType::Date);
    if condition.op != FieldOp::Equals && !ordered {
        return Err(problem(
            "op",
            format!(
                "{} compares numbers and dates only; {} is a {} field",
                condition.op.words(),
                field.name,
                field.field_type.as_str()
            ),
        ));
    }
    let value = match custom_fields::stored_value(field, &condition.value) {
        Ok(Some(value)) => value,
        Ok(None) => return Err(problem("value", "can't be blank".into())),
        Err(message) => return Err(problem("value", message)),
    };
    let value = custom_fields::json_of(Some(field.field_type), &value);
    Ok(FieldCondition {
        field_id: field.id,
        name: field.name.clone(),
        op: condition.op,
        value,
    })
}

/// Refuses a tag no subscriber of the newsletter carries (in any status): it is almost
/// always a typo, and would silently make the audience smaller or larger than meant; and a
/// field condition that names no field or a value the field cannot hold. The audience with
/// its condition's field found.
pub fn check_known(
    conn: &Connection,
    newsletter_id: i64,
    audience: &Audience,
    prefix: &str,
) -> DomainResult<Audience> {
    const KNOWN: &str = "SELECT 1 FROM tag_counts WHERE newsletter_id = ?1 AND tag = ?2";
    let mut stmt = conn.prepare_cached(KNOWN)?;
    let mut errors = FieldErrors::new();
    for (field, tags) in [
        ("tags", &audience.tags),
        ("exclude_tags", &audience.exclude_tags),
    ] {
        for tag in tags {
            if stmt
                .query_row((newsletter_id, tag), |_| Ok(()))
                .optional()?
                .is_none()
            {
                errors.add(
                    &format!("{prefix}{field}"),
                    format!("include “{tag}”, a tag no subscriber has"),
                );
            }
        }
    }
    errors.into_result()?;
    let field = match &audience.field {
        Some(condition) => Some(known_condition(conn, newsletter_id, condition, prefix)?),
        None => None,
    };
    Ok(Audience {
        field,
        ..audience.clone()
    })
}

/// [`check_shape`] and [`check_known`] together, as a door's input is checked.
pub fn check(
    conn: &Connection,
    newsletter_id: i64,
    input: &AudienceInput,
    prefix: &str,
) -> DomainResult<Audience> {
    let mut errors = FieldErrors::new();
    let audience = check_shape(input, prefix, &mut errors);
    errors.into_result()?;
    check_known(conn, newsletter_id, &audience, prefix)
}

/// The exact number of subscribers in the audience now. Everyone is the stored counter; with
/// tags, the tagged subscribers are found through the tag index (the tagged rows only).
pub fn count(conn: &Connection, newsletter_id: i64, audience: &Audience) -> DomainResult<i64> {
    if let Some(original) = audience.resend_of {
        return non_openers(conn, original);
    }
    if let Some(condition) = &audience.field {
        macro_rules! count {
            ($drive:ident, $op:literal) => {
                concat!("SELECT count(*) FROM", crate::field_segment!($drive, $op))
            };
        }
        const SQL: FieldSegmentSql = [
            [
                count!(by_values, "="),
                count!(by_values, "<"),
                count!(by_values, ">"),
            ],
            [
                count!(by_list, "="),
                count!(by_list, "<"),
                count!(by_list, ">"),
            ],
        ];
        let sql = field_segment_sql(conn, newsletter_id, condition, &SQL)?;
        return Ok(conn.prepare_cached(sql)?.query_row(
            field_segment_params(
                newsletter_id,
                audience,
                condition,
                &crate::clock::Timestamp::now(),
            ),
            |r| r.get(0),
        )?);
    }
    if audience.paid_only {
        return paid_members(conn, newsletter_id, audience);
    }
    if audience.is_everyone() {
        return mailable_count(conn, newsletter_id);
    }
    if audience.tags.is_empty() {
        let everyone = mailable_count(conn, newsletter_id)?;
        let excluded = tagged(conn, newsletter_id, &audience.exclude_tags, &[])?;
        return Ok(everyone - excluded);
    }
    tagged(conn, newsletter_id, &audience.tags, &audience.exclude_tags)
}

/// The subscribers of an audience with a field condition, after `SELECT ... FROM`, read one
/// of two ways (as tags are, [`tagged`]): `by_values` along the field's values that meet the
/// condition (`$op` is `=`, `<` or `>`) in their index, each then one subscriber row by key;
/// `by_list` along the newsletter's active subscribers in the list index, each one probe of
/// its value by key. Then each subscriber's few tag rows, and with paid members only, their
/// membership. Parameters: [`field_segment_params`]; the way: [`field_segment_sql`].
#[macro_export]
macro_rules! field_segment {
    (by_values, $op:literal) => {
        concat!(
            " subscriber_field_values v CROSS JOIN subscribers s ON s.id = v.subscriber_id
             WHERE v.field_id = ?4 AND v.value ", $op, " ?5
               AND s.newsletter_id = ?1 AND s.status = 'active'",
            $crate::field_segment!(rest)
        )
    };
    (by_list, $op:literal) => {
        concat!(
            " subscribers s INDEXED BY subscribers_list
             WHERE s.newsletter_id = ?1 AND s.status = 'active'
               AND EXISTS (SELECT 1 FROM subscriber_field_values v
                    WHERE v.subscriber_id = s.id AND v.field_id = ?4 AND v.value ", $op, " ?5)",
            $crate::field_segment!(rest)
        )
    };
    (rest) => {
        "
               AND (?2 = '[]' OR EXISTS (SELECT 1 FROM subscriber_tags t
                    WHERE t.subscriber_id = s.id AND +t.tag IN (SELECT value FROM json_each(?2))))
               AND NOT EXISTS (SELECT 1 FROM subscriber_tags x
                    WHERE x.subscriber_id = s.id AND +x.tag IN (SELECT value FROM json_each(?3)))
               AND (?6 = 0 OR EXISTS (SELECT 1 FROM memberships m
                    WHERE m.subscriber_id = s.id AND m.status != 'free'
                      AND (m.access_until IS NULL OR m.access_until > ?7)))
               AND NOT EXISTS (SELECT 1 FROM subscriber_pauses z WHERE z.subscriber_id = s.id AND z.until > ?7)"
    };
}

/// A [`field_segment`] query for each way (`by_values`, `by_list`) and comparison (`=`,
/// `<`, `>`).
pub type FieldSegmentSql = [[&'static str; 3]; 2];

/// The query of `sql` for `condition`: along the field's matching values when they are a
/// small part of the active list (a third, counted along the value index), else along the
/// list.
pub fn field_segment_sql(
    conn: &Connection,
    newsletter_id: i64,
    condition: &FieldCondition,
    sql: &FieldSegmentSql,
) -> DomainResult<&'static str> {
    const MATCHES: [&str; 3] = [
        "SELECT count(*) FROM subscriber_field_values WHERE field_id = ?1 AND value = ?2",
        "SELECT count(*) FROM subscriber_field_values WHERE field_id = ?1 AND value < ?2",
        "SELECT count(*) FROM subscriber_field_values WHERE field_id = ?1 AND value > ?2",
    ];
    let op = match condition.op {
        FieldOp::Equals => 0,
        FieldOp::Before => 1,
        FieldOp::After => 2,
    };
    let matches: i64 = conn
        .prepare_cached(MATCHES[op])?
        .query_row((condition.field_id, condition.sql_value()), |r| r.get(0))?;
    let everyone = subscribers::active_count(conn, newsletter_id)?;
    let drive = if matches * 3 < everyone { 0 } else { 1 };
    Ok(sql[drive][op])
}

/// The parameters ?1 to ?7 of a [`field_segment`] query: newsletter, tags, excluded tags,
/// field, value, paid members only, now.
pub fn field_segment_params(
    newsletter_id: i64,
    audience: &Audience,
    condition: &FieldCondition,
    now: &crate::clock::Timestamp,
) -> (i64, String, String, i64, SqlValue, bool, String) {
    (
        newsletter_id,
        Audience::json(&audience.tags),
        Audience::json(&audience.exclude_tags),
        condition.field_id,
        condition.sql_value(),
        audience.paid_only,
        now.to_string(),
    )
}

/// The subscribers a resend of `original` goes to now: its deliveries the relay took that
/// no person opened, of subscribers active and not paused. Read along the original's
/// deliveries (one subscriber row and one pause probe each), once per count.
fn non_openers(conn: &Connection, original: i64) -> DomainResult<i64> {
    const SQL: &str = concat!("SELECT count(*) FROM", crate::non_openers!());
    Ok(conn
        .prepare_cached(SQL)?
        .query_row((original, Timestamp::now()), |r| r.get(0))?)
}

/// The deliveries of issue `?1` a resend goes to at `?2`, after `SELECT ... FROM`: for the
/// count and the send's recording of its recipients, which must agree.
#[macro_export]
macro_rules! non_openers {
    () => {
        " deliveries o CROSS JOIN subscribers s ON s.id = o.subscriber_id
         WHERE o.issue_id = ?1 AND o.status = 'sent' AND (o.opened_at IS NULL OR o.opened_auto = 1)
           AND s.status = 'active'
           AND NOT EXISTS (SELECT 1 FROM subscriber_pauses z WHERE z.subscriber_id = s.id AND z.until > ?2)"
    };
}

/// Every active subscriber without a pause running: the stored counter less the pauses.
fn mailable_count(conn: &Connection, newsletter_id: i64) -> DomainResult<i64> {
    let paused = preferences::paused_count(conn, newsletter_id, &Timestamp::now())?;
    Ok(subscribers::active_count(conn, newsletter_id)? - paused)
}

/// Active subscribers of the newsletter with any of `tags` and none of `except`, read the
/// cheaper of two ways, chosen from the tag counters: when the tags' subscribers are a small
/// part of the list, through the tag index (those rows only, each one lookup of its
/// subscriber); otherwise along the newsletter's active subscribers in the list index, each
/// one probe of its own tags (`docs/performance.md`, "Counting a segment"). A probe reads
/// the subscriber's own few tag rows (`+tag` keeps SQLite from seeking once per listed tag).
fn tagged(
    conn: &Connection,
    newsletter_id: i64,
    tags: &[String],
    except: &[String],
) -> DomainResult<i64> {
    const CARRIERS: &str = "SELECT coalesce(sum(subscribers), 0) FROM tag_counts
         WHERE newsletter_id = ?1 AND tag IN (SELECT value FROM json_each(?2))";
    const BY_TAG: &str = "SELECT count(*) FROM subscribers s
         WHERE s.id IN (SELECT t.subscriber_id FROM subscriber_tags t
                        WHERE t.tag IN (SELECT value FROM json_each(?2)))
           AND s.newsletter_id = ?1 AND s.status = 'active'
           AND NOT EXISTS (SELECT 1 FROM subscriber_tags x
                           WHERE x.subscriber_id = s.id AND +x.tag IN (SELECT value FROM json_each(?3)))
           AND NOT EXISTS (SELECT 1 FROM subscriber_pauses z WHERE z.subscriber_id = s.id AND z.until > ?4)";
    const BY_LIST: &str = "SELECT count(*) FROM subscribers s INDEXED BY subscribers_list
         WHERE s.newsletter_id = ?1 AND s.status = 'active'
           AND EXISTS (SELECT 1 FROM subscriber_tags t
                       WHERE t.subscriber_id = s.id AND +t.tag IN (SELECT value FROM json_each(?2)))
           AND NOT EXISTS (SELECT 1 FROM subscriber_tags x
                           WHERE x.subscriber_id = s.id AND +x.tag IN (SELECT value FROM json_each(?3)))
           AND NOT EXISTS (SELECT 1 FROM subscriber_pauses z WHERE z.subscriber_id = s.id AND z.until > ?4)";
    let (tags, except) = (Audience::json(tags), Audience::json(except));
    let carriers: i64 = conn
        .prepare_cached(CARRIERS)?
        .query_row((newsletter_id, &tags), |r| r.get(0))?;
    let everyone = subscribers::active_count(conn, newsletter_id)?;
    let sql = if carriers * 3 < everyone {
        BY_TAG
    } else {
        BY_LIST
    };
    Ok(conn
        .prepare_cached(sql)?
        .query_row((newsletter_id, tags, except, Timestamp::now()), |r| {
            r.get(0)
        })?)
}

/// Active subscribers with paid access now, with any of the audience's tags (none: all of
/// them) and none of its excluded ones: along the members' rows (`memberships_newsletter`),
/// never the whole list.
fn paid_members(conn: &Connection, newsletter_id: i64, audience: &Audience) -> DomainResult<i64> {
    const SQL: &str =
        "SELECT count(*) FROM memberships m CROSS JOIN subscribers s ON s.id = m.subscriber_id
         WHERE m.newsletter_id = ?1 AND m.status != 'free'
           AND (m.access_until IS NULL OR m.access_until > ?4) AND s.status = 'active'
           AND (?2 = '[]' OR EXISTS (SELECT 1 FROM subscriber_tags t
                WHERE t.subscriber_id = s.id AND +t.tag IN (SELECT value FROM json_each(?2))))
           AND NOT EXISTS (SELECT 1 FROM subscriber_tags x
                WHERE x.subscriber_id = s.id AND +x.tag IN (SELECT value FROM json_each(?3)))
           AND NOT EXISTS (SELECT 1 FROM subscriber_pauses z WHERE z.subscriber_id = s.id AND z.until > ?4)";
    let (tags, except) = (
        Audience::json(&audience.tags),
        Audience::json(&audience.exclude_tags),
    );
    Ok(conn.prepare_cached(SQL)?.query_row(
        (newsletter_id, tags, except, crate::clock::Timestamp::now()),
        |r| r.get(0),
    )?)
}

/// Replaces the audience recorded on issue `issue_id` (its field condition checked by
/// [`check_known`]).
pub fn store(conn: &Connection, issue_id: i64, audience: &Audience) -> DomainResult<()> {
    const CLEAR: &str = "DELETE FROM issue_audience_tags WHERE issue_id = ?1";
    const ADD: &str =
        "INSERT INTO issue_audience_tags (issue_id, excluded, tag) VALUES (?1, ?2, ?3)";
    const CLEAR_FIELD: &str = "DELETE FROM issue_audience_fields WHERE issue_id = ?1";
    const ADD_FIELD: &str = "INSERT INTO issue_audience_fields (issue_id, field_id, name, op, value) VALUES (?1, ?2, ?3, ?4, ?5)";
    conn.execute(CLEAR, [issue_id])?;
    let mut stmt = conn.prepare_cached(ADD)?;
    for (excluded, tags) in [(false, &audience.tags), (true, &audience.exclude_tags)] {
        for tag in tags {
            stmt.execute((issue_id, excluded, tag))?;
        }
    }
    conn.execute(CLEAR_FIELD, [issue_id])?;
    if let Some(c) = &audience.field {
        conn.execute(
            ADD_FIELD,
            (issue_id, c.field_id, &c.name, c.op, c.sql_value()),
        )?;
    }
    Ok(())
}

/// The SQL expression giving issue `i`'s recorded field condition as JSON (NULL: none), with
/// the field's present name; read back by [`Audience::from_stored`]. A boolean value is
/// `true`/`false`.
#[macro_export]
macro_rules! stored_field_json {
    () => {
        "(SELECT json_object('field_id', coalesce(a.field_id, 0), 'name', CASE WHEN f.deleted_at IS NULL THEN coalesce(f.name, a.name) ELSE a.name END, 'op', a.op,
                 'value', CASE f.type WHEN 'boolean' THEN json(CASE a.value WHEN 1 THEN 'true' ELSE 'false' END) ELSE a.value END)
          FROM issue_audience_fields a LEFT JOIN custom_fields f ON f.id = a.field_id WHERE a.issue_id = i.id)"
    };
}

fn condition_from_json(json: &str) -> Option<FieldCondition> {
    let stored: Value = serde_json::from_str(json).ok()?;
    Some(FieldCondition {
        field_id: stored["field_id"].as_i64()?,
        name: stored["name"].as_str()?.to_string(),
        op: FieldOp::parse(stored["op"].as_str()?)?,
        value: stored["value"].clone(),
    })
}

/// The JSON lists (`tags`, `exclude_tags`) of issue `issue_id`'s recorded audience, for the
/// send's recipient query.
pub fn stored_json(conn: &Connection, issue_id: i64) -> DomainResult<(String, String)> {
    const SQL: &str = "SELECT
         (SELECT json_group_array(tag) FROM issue_audience_tags WHERE issue_id = ?1 AND excluded = 0),
         (SELECT json_group_array(tag) FROM issue_audience_tags WHERE issue_id = ?1 AND excluded = 1)";
    Ok(conn.query_row(SQL, [issue_id], |r| Ok((r.get(0)?, r.get(1)?)))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DomainError;

    fn input(tags: &[&str], exclude: &[&str]) -> AudienceInput {
        AudienceInput {
            tags: tags.iter().map(|t| t.to_string()).collect(),
            exclude_tags: exclude.iter().map(|t| t.to_string()).collect(),
            field: None,
        }
    }

    #[test]
    fn shapes_are_cleaned_and_contradictions_refused() {
        let mut errors = FieldErrors::new();
        let audience = check_shape(&input(&[" b ", "a", "b"], &["c"]), "", &mut errors);
        assert!(errors.is_empty());
        assert_eq!(audience.tags, ["a", "b"]);
        let mut errors = FieldErrors::new();
        check_shape(&input(&["a", ""], &["a"]), "audience.", &mut errors);
        let fields = errors.by_field();
        assert!(fields.contains_key("audience.tags"), "{fields:?}");
        assert!(fields.contains_key("audience.exclude_tags"), "{fields:?}");
        let many: Vec<String> = (0..=TAGS_MAX).map(|i| format!("t{i}")).collect();
        let mut errors = FieldErrors::new();
        check_shape(
            &AudienceInput {
                tags: many,
                exclude_tags: vec![],
                field: None,
            },
            "",
            &mut errors,
        );
        assert!(!errors.is_empty());
    }

    #[test]
    fn counts_any_of_the_tags_and_none_of_the_excluded() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute_batch(
            "INSERT INTO newsletters (id, owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
               VALUES (2, 1, 'Other', 'other', 'paid', 'bt2', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO subscribers (id, newsletter_id, email, status, created_at) VALUES
               (1, 1, 'a@x.co', 'active', '2026-01-01T00:00:00.000Z'),
               (2, 1, 'ab@x.co', 'active', '2026-01-01T00:00:00.000Z'),
               (3, 1, 'b@x.co', 'active', '2026-01-01T00:00:00.000Z'),
               (4, 1, 'none@x.co', 'active', '2026-01-01T00:00:00.000Z'),
               (5, 1, 'gone@x.co', 'unsubscribed', '2026-01-01T00:00:00.000Z'),
               (6, 2, 'other@x.co', 'active', '2026-01-01T00:00:00.000Z');
             INSERT INTO subscriber_tags (subscriber_id, tag) VALUES
               (1, 'a'), (2, 'a'), (2, 'b'), (3, 'b'), (5, 'a'), (5, 'old'), (6, 'a');",
        )
        .unwrap();
        let count = |tags: &[&str], exclude: &[&str]| {
            let audience = check(&conn, 1, &input(tags, exclude), "").unwrap();
            super::count(&conn, 1, &audience).unwrap()
        };
        assert_eq!(count(&[], &[]), 4);
        assert_eq!(count(&["a"], &[]), 2);
        assert_eq!(count(&["a", "b"], &[]), 3);
        assert_eq!(count(&["a"], &["b"]), 1);
        assert_eq!(count(&[], &["b"]), 2);
        assert_eq!(count(&["old"], &[]), 0, "only an unsubscribed one has it");
        // Among many untagged subscribers the tags' rows are few: read through the tag index.
        for n in 1..=20 {
            conn.execute(
                "INSERT INTO subscribers (newsletter_id, email, status, created_at)
                 VALUES (1, ?1, 'active', '2026-01-01T00:00:00.000Z')",
                [format!("u{n}@x.co")],
            )
            .unwrap();
        }
        assert_eq!(count(&[], &[]), 24);
        assert_eq!(count(&["a"], &["b"]), 1);
        assert_eq!(count(&["a", "b"], &[]), 3);
        assert_eq!(count(&[], &["b"]), 22);
        let unknown = check(&conn, 1, &input(&["a", "typo"], &[]), "");
        assert!(matches!(unknown, Err(DomainError::Invalid(..))));
    }

    #[test]
    fn stored_audiences_read_back() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute(
            "INSERT INTO issues (id, newsletter_id, subject, content_markdown, status, path, created_at, updated_at)
             VALUES (7, 1, 'S', 'x', 'approved', 's', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
        let audience = Audience {
            tags: vec!["a".into(), "b".into()],
            exclude_tags: vec!["c".into()],
            ..Default::default()
        };
        store(&conn, 7, &audience).unwrap();
        assert_eq!(
            stored_json(&conn, 7).unwrap(),
            (r#"["a","b"]"#.to_string(), r#"["c"]"#.to_string())
        );
        store(&conn, 7, &Audience::default()).unwrap();
        assert_eq!(
            stored_json(&conn, 7).unwrap(),
            ("[]".to_string(), "[]".to_string())
        );
        assert_eq!(
            audience.describe(),
            "active subscribers tagged “a” or “b”, except those tagged “c”"
        );
    }
}
