//! Custom fields (docs/growth.md, "Custom fields"): each newsletter defines fields of its
//! own (text, number, date, yes/no, one of a list), and each subscriber holds at most one
//! value per field, checked by the field's type. Values are kept in their own type (migration
//! 0037), so segments compare numbers as numbers and dates as dates, and they are given out
//! as JSON of that type (`{"first_name": "Ann", "age": 41, "vip": true}`).

use std::collections::BTreeMap;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Row};
use serde_json::Value;

use crate::clock::Timestamp;
use crate::domain::values::text_pattern::Refused;
use crate::domain::{DomainError, DomainResult, ErrorCode, FieldErrors, clean_line};
use crate::store::{jobs, write_tx};

crate::string_enum!(
    /// What a field holds.
    pub FieldType {
        Text => "text",
        Number => "number",
        /// A calendar day, `YYYY-MM-DD`.
        Date => "date",
        Boolean => "boolean",
        /// One of the field's `options`.
        Choice => "choice",
    }
);

/// The longest field name, in characters.
pub const NAME_MAX: usize = 40;
/// How many fields a newsletter may define.
pub const FIELDS_MAX: i64 = 30;
/// How many options a `choice` may have, and the longest option.
pub const OPTIONS_MAX: usize = 50;
pub const OPTION_MAX: usize = 100;
/// The longest `text` value, in characters.
pub const TEXT_MAX: usize = 500;

/// A field as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomField {
    pub id: i64,
    pub newsletter_id: i64,
    pub name: String,
    pub field_type: FieldType,
    pub options: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl CustomField {
    /// The field's name as a form's label and a message say it: `first_name` is "First name".
    pub fn label(&self) -> String {
        crate::domain::humanize(&self.name)
    }
}

/// A field as a door gives it, not yet checked. On an update, `None` keeps what is stored.
#[derive(Debug, Clone, Default)]
pub struct FieldInput {
    pub name: Option<String>,
    pub field_type: Option<String>,
    pub options: Option<Vec<String>>,
}

/// A subscriber's values by field name, as JSON of each field's type.
pub type Values = BTreeMap<String, Value>;

macro_rules! select_field {
    ($($tail:literal)+) => {
        concat!(
            "SELECT id, newsletter_id, name, type, options, created_at, updated_at FROM custom_fields ",
            $($tail),+
        )
    };
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<CustomField> {
    let options: String = row.get(4)?;
    Ok(CustomField {
        id: row.get(0)?,
        newsletter_id: row.get(1)?,
        name: row.get(2)?,
        field_type: row.get(3)?,
        options: serde_json::from_str(&options).unwrap_or_default(),
        created_at: row.get(5)?,
        updated_at: row.get(6)?,
    })
}

/// The newsletter's fields, oldest first (at most [`FIELDS_MAX`]).
pub fn list(conn: &Connection, newsletter_id: i64) -> DomainResult<Vec<CustomField>> {
    const SQL: &str = select_field!("WHERE newsletter_id = ?1 AND deleted_at IS NULL ORDER BY id");
    let fields = conn
        .prepare_cached(SQL)?
        .query_map([newsletter_id], from_row)?
        .collect::<Result<_, _>>()?;
    Ok(fields)
}

pub fn get(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<CustomField> {
    const SQL: &str = select_field!("WHERE newsletter_id = ?1 AND id = ?2 AND deleted_at IS NULL");
    conn.query_row(SQL, (newsletter_id, id), from_row)
        .optional()?
        .ok_or(DomainError::NotFound("field"))
}

/// Whether `name` is a field name: a lowercase letter, then lowercase letters, digits and
/// underscores (so it reads the same in a merge tag, a CSV header and JSON).
fn is_field_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Names a field may not take: the subscriber's own columns, which CSV files and merge tags
/// already use.
const RESERVED: [&str; 9] = [
    "email",
    "name",
    "tags",
    "status",
    "subscribed_at",
    "created_at",
    "membership",
    "membership_until",
    "unsubscribe",
];

/// The checked name, type and options of `input` over `stored` (an update's field).
fn check(
    input: &FieldInput,
    stored: Option<&CustomField>,
) -> DomainResult<(String, FieldType, Vec<String>)> {
    let mut errors = FieldErrors::new();
    let name = match (&input.name, stored) {
        (Some(raw), _) => {
            // Not trimmed: a name is exactly as merge tags and CSV headers will write it.
            let name = clean_line(&mut errors, "field.name", raw, true, NAME_MAX);
            if !name.is_empty() && (!is_field_name(&name) || name != *raw) {
                errors.add(
                    "field.name",
                    "must start with a lowercase letter and hold only lowercase letters, digits and underscores (e.g. first_name)",
                );
            } else if RESERVED.contains(&name.as_str()) {
                errors.add("field.name", "is the name of a subscriber's own detail");
            }
            name
        }
        (None, Some(field)) => field.name.clone(),
        (None, None) => {
            errors.add("field.name", "can't be blank");
            String::new()
        }
    };
    let field_type = match (&input.field_type, stored) {
        (Some(raw), Some(field)) if raw != field.field_type.as_str() => {
            errors.add(
                "field.type",
                "cannot change: delete the field and make a new one",
            );
            field.field_type
        }
        (Some(raw), _) => FieldType::parse(raw).unwrap_or_else(|| {
            errors.add(
                "field.type",
                "must be one of text, number, date, boolean or choice",
            );
            FieldType::Text
        }),
        (None, Some(field)) => field.field_type,
        (None, None) => {
            errors.add("field.type", "can't be blank");
            FieldType::Text
        }
    };
    let raw_options = input
        .options
        .clone()
        .or_else(|| stored.map(|f| f.options.clone()))
        .unwrap_or_default();
    let mut options: Vec<String> = Vec::new();
    for raw in &raw_options {
        let option = raw.trim();
        if option.is_empty()
            || raw.chars().count() > OPTION_MAX
            || option.chars().any(|c| Refused::Controls.refuses(c))
        {
            errors.add(
                "field.options",
                format!("must each be one line of 1-{OPTION_MAX} characters"),
            );
            break;
        }
        if !options.iter().any(|o| o == option) {
            options.push(option.to_string());
        }
    }
    match field_type {
        FieldType::Choice if options.is_empty() => errors.add(
            "field.options",
            "must list at least one option for a choice",
        ),
        FieldType::Choice if options.len() > OPTIONS_MAX => errors.add(
            "field.options",
            format!("has {} options; at most {OPTIONS_MAX}", options.len()),
        ),
        FieldType::Choice => {}
        // Options are a choice's alone: another type keeps none.
        _ => options.clear(),
    }
    errors.into_result()?;
    Ok((name, field_type, options))
}

/// A new field of the newsletter.
pub fn create(
    conn: &Connection,
    newsletter_id: i64,
    input: &FieldInput,
) -> DomainResult<CustomField> {
    let (name, field_type, options) = check(input, None)?;
    const COUNT: &str =
        "SELECT count(*) FROM custom_fields WHERE newsletter_id = ?1 AND deleted_at IS NULL";
    let fields: i64 = conn.query_row(COUNT, [newsletter_id], |r| r.get(0))?;
    if fields >= FIELDS_MAX {
        return Err(DomainError::invalid(
            "field",
            format!("cannot be added: at most {FIELDS_MAX} fields"),
        ));
    }
    const INSERT: &str =
        "INSERT INTO custom_fields (newsletter_id, name, type, options, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)
         ON CONFLICT (newsletter_id, name) DO NOTHING RETURNING id";
    let id: Option<i64> = conn
        .query_row(
            INSERT,
            (
                newsletter_id,
                &name,
                field_type,
                json(&options),
                Timestamp::now(),
            ),
            |r| r.get(0),
        )
        .optional()?;
    let id = id.ok_or_else(taken)?;
    get(conn, newsletter_id, id)
}

fn taken() -> DomainError {
    DomainError::invalid("field.name", "is already the name of another field")
}

fn json(options: &[String]) -> String {
    serde_json::to_string(options).expect("strings serialise")
}

/// Renames a field or changes a choice's options. Its type stays (a new type would leave
/// values it cannot hold); values no longer among a choice's options stay until changed.
pub fn update(
    conn: &Connection,
    newsletter_id: i64,
    id: i64,
    input: &FieldInput,
) -> DomainResult<CustomField> {
    let stored = get(conn, newsletter_id, id)?;
    let (name, _, options) = check(input, Some(&stored))?;
    const UPDATE: &str =
        "UPDATE OR IGNORE custom_fields SET name = ?3, options = ?4, updated_at = ?5
         WHERE newsletter_id = ?1 AND id = ?2";
    let changed = conn.execute(
        UPDATE,
        (newsletter_id, id, &name, json(&options), Timestamp::now()),
    )?;
    if changed == 0 {
        return Err(taken());
    }
    get(conn, newsletter_id, id)
}

/// Deletes a field: it is gone at once for every reader (its name free again), and its
/// values are deleted in short batches by the `delete_field_values` job. A field that the
/// audience of an issue not yet sent names is refused: the audience would change under it.
pub fn delete(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<CustomField> {
    const USED: &str =
        "SELECT i.subject FROM issue_audience_fields a JOIN issues i ON i.id = a.issue_id
         WHERE a.field_id = ?1 AND i.recipients_at IS NULL LIMIT 1";
    const HIDE: &str = "UPDATE custom_fields SET deleted_at = ?2, name = '#' || id WHERE id = ?1";
    write_tx(conn, |tx| {
        let field = get(tx, newsletter_id, id)?;
        if let Some(subject) = tx
            .query_row(USED, [id], |r| r.get::<_, String>(0))
            .optional()?
        {
            return Err(DomainError::rejected(
                ErrorCode::InvalidState,
                format!(
                    "The field {} chooses the audience of “{subject}”, not yet sent: change that audience first.",
                    field.name
                ),
            ));
        }
        tx.execute(HIDE, (id, Timestamp::now()))?;
        jobs::queue_field_deletion(tx, id)?;
        Ok(field)
    })
}

/// Deletes up to `batch` values of deleted field `field_id`, then, when none are left, the
/// field's row; true while more may be left. Each call is one short transaction.
pub fn delete_values_batch(conn: &mut Connection, field_id: i64, batch: i64) -> DomainResult<bool> {
    const VALUES: &str =
        "DELETE FROM subscriber_field_values WHERE field_id = ?1 AND subscriber_id IN (
         SELECT subscriber_id FROM subscriber_field_values WHERE field_id = ?1 LIMIT ?2)";
    const FIELD: &str = "DELETE FROM custom_fields WHERE id = ?1 AND deleted_at IS NOT NULL";
    write_tx(conn, |tx| {
        let deleted = tx.execute(VALUES, (field_id, batch))?;
        if (deleted as i64) < batch {
            tx.execute(FIELD, [field_id])?;
            return Ok(false);
        }
        Ok(true)
    })
}

/// `value` checked as a value of `field`: what is stored, or why not. `null` is no value.
pub(super) fn stored_value(field: &CustomField, value: &Value) -> Result<Option<SqlValue>, String> {
    let kind = field.field_type;
    let text = value.as_str().map(str::trim);
    Ok(Some(match (kind, value) {
        (_, Value::Null) => return Ok(None),
        (_, Value::String(s)) if s.trim().is_empty() => return Ok(None),
        (FieldType::Text, Value::String(_)) => {
            let text = text.unwrap_or_default();
            if text.chars().count() > TEXT_MAX {
                return Err(format!("is too long (maximum is {TEXT_MAX} characters)"));
            }
            if text.chars().any(|c| Refused::ControlsButBreaks.refuses(c)) {
                return Err("must not contain control characters".into());
            }
            SqlValue::Text(text.to_string())
        }
        (FieldType::Number, Value::Number(n)) => number(n.as_f64())?,
        (FieldType::Number, Value::String(_)) => {
            number(text.unwrap_or_default().parse::<f64>().ok())?
        }
        (FieldType::Date, Value::String(_)) => {
            let day = text.unwrap_or_default();
            match day.parse::<jiff::civil::Date>() {
                Ok(date) if day.len() == 10 => SqlValue::Text(date.to_string()),
                _ => return Err("must be a date, YYYY-MM-DD".into()),
            }
        }
        (FieldType::Boolean, Value::Bool(b)) => SqlValue::Integer(i64::from(*b)),
        (FieldType::Boolean, Value::String(_)) => {
            match text.unwrap_or_default().to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" => SqlValue::Integer(1),
                "false" | "no" | "0" => SqlValue::Integer(0),
                _ => return Err("must be true or false".into()),
            }
        }
        (FieldType::Choice, Value::String(_)) => {
            let choice = text.unwrap_or_default();
            match field.options.iter().find(|o| *o == choice) {
                Some(option) => SqlValue::Text(option.clone()),
                None => {
                    return Err(format!("must be one of {}", field.options.join(", ")));
                }
            }
        }
        _ => return Err(format!("must be a {} value", kind.as_str())),
    }))
}

/// A value as stored, as JSON of its type: numbers as numbers, text as strings, and 0/1 as
/// `false`/`true` when the field (`kind`) is a yes/no one.
pub fn json_of(kind: Option<FieldType>, value: &SqlValue) -> Value {
    match (kind, value) {
        (Some(FieldType::Boolean), SqlValue::Integer(i)) => Value::Bool(*i != 0),
        (_, SqlValue::Integer(i)) => Value::from(*i),
        (_, SqlValue::Real(r)) => Value::from(*r),
        (_, SqlValue::Text(text)) => Value::String(text.clone()),
        _ => Value::Null,
    }
}

/// JSON as a field's value is stored (`true`/`false` as 1/0); `None` for what no field holds.
pub fn sql_of(value: &Value) -> Option<SqlValue> {
    Some(match value {
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64()?),
        },
        Value::String(text) => SqlValue::Text(text.clone()),
        _ => return None,
    })
}

/// A finite number, kept as an integer when it is one.
fn number(n: Option<f64>) -> Result<SqlValue, String> {
    match n {
        Some(n) if n.is_finite() && n.fract() == 0.0 && n.abs() < 9.0e15 => {
            Ok(SqlValue::Integer(n as i64))
        }
        Some(n) if n.is_finite() => Ok(SqlValue::Real(n)),
        _ => Err("must be a number".into()),
    }
}

/// `given` checked against the newsletter's fields: each field's id and what to store
/// (`None`: remove the value), or every problem under `fields.<key>` (an unknown field, a
/// value its type cannot hold).
fn checked(
    conn: &Connection,
    newsletter_id: i64,
    given: &Values,
) -> DomainResult<Vec<(i64, Option<SqlValue>)>> {
    if given.is_empty() {
        return Ok(Vec::new());
    }
    checked_against(&list(conn, newsletter_id)?, given)
        .map_err(|errors| DomainError::Invalid(ErrorCode::ValidationError, errors))
}

/// [`checked`] against `fields` already read (a bulk create checks many entries with one list).
pub(super) fn checked_against(
    fields: &[CustomField],
    given: &Values,
) -> Result<Vec<(i64, Option<SqlValue>)>, FieldErrors> {
    let mut errors = FieldErrors::new();
    let mut writes = Vec::with_capacity(given.len());
    for (key, value) in given {
        let checked = fields
            .iter()
            .find(|f| f.name == *key)
            .ok_or_else(|| "is not a field of this newsletter".to_string())
            .and_then(|field| Ok((field.id, stored_value(field, value)?)));
        match checked {
            Ok(write) => writes.push(write),
            Err(message) => errors.add(&format!("fields.{key}"), message),
        }
    }
    match errors.is_empty() {
        true => Ok(writes),
        false => Err(errors),
    }
}

/// Sets the given values of one subscriber inside the caller's transaction: each key must
/// name a field of the newsletter (else 422 under `fields.<key>`), each value fit its type;
/// `null` or an empty string removes the value. Nothing is written unless all fit.
pub fn set_values(
    tx: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    given: &Values,
) -> DomainResult<()> {
    const SET: &str = "INSERT INTO subscriber_field_values (subscriber_id, field_id, value)
         VALUES (?1, ?2, ?3)
         ON CONFLICT (subscriber_id, field_id) DO UPDATE SET value = excluded.value";
    const CLEAR: &str =
        "DELETE FROM subscriber_field_values WHERE subscriber_id = ?1 AND field_id = ?2";
    for (field_id, value) in checked(tx, newsletter_id, given)? {
        match value {
            Some(value) => tx
                .prepare_cached(SET)?
                .execute((subscriber_id, field_id, value))?,
            None => tx
                .prepare_cached(CLEAR)?
                .execute((subscriber_id, field_id))?,
        };
    }
    Ok(())
}

/// Sets values already checked by [`stored_value`] (an import's, a form's) on a subscriber,
/// inside the caller's transaction; a field deleted since it was read is passed over.
pub(super) fn put_values(
    tx: &Connection,
    subscriber_id: i64,
    values: &[(i64, SqlValue)],
) -> DomainResult<()> {
    const ADD: &str = "INSERT INTO subscriber_field_values (subscriber_id, field_id, value)
         SELECT ?1, id, ?3 FROM custom_fields WHERE id = ?2 AND deleted_at IS NULL
         ON CONFLICT (subscriber_id, field_id) DO UPDATE SET value = excluded.value";
    for (field_id, value) in values {
        tx.prepare_cached(ADD)?
            .execute((subscriber_id, field_id, value))?;
    }
    Ok(())
}

/// Checks `given` against the newsletter's fields without writing: the problems a
/// [`set_values`] would report, for a create that has no subscriber yet.
pub fn check_values(conn: &Connection, newsletter_id: i64, given: &Values) -> DomainResult<()> {
    checked(conn, newsletter_id, given).map(|_| ())
}

/// The SQL expression giving a subscriber's values as a JSON object, for `s.id`: booleans
/// as `true`/`false`, numbers as numbers, the rest as strings.
#[macro_export]
macro_rules! subscriber_field_values_json {
    () => {
        "(SELECT json_group_object(f.name, CASE f.type WHEN 'boolean' THEN json(CASE v.value WHEN 1 THEN 'true' ELSE 'false' END) ELSE v.value END)
          FROM subscriber_field_values v JOIN custom_fields f ON f.id = v.field_id
          WHERE v.subscriber_id = s.id AND f.deleted_at IS NULL)"
    };
}

/// The values of a [`subscriber_field_values_json`] column.
pub fn values_from_json(text: Option<String>) -> Values {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deleted field is gone for every reader at once; its values go batch by batch, then
    /// its row; a value set for it meanwhile (an import's, a form's) is passed over.
    #[test]
    fn a_deleted_fields_values_go_in_batches_and_late_writes_pass_it_over() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let input = |name: &str| FieldInput {
            name: Some(name.into()),
            field_type: Some("number".into()),
            options: None,
        };
        let age = create(&conn, 1, &input("age")).unwrap();
        for id in 1..=5 {
            conn.execute(
                "INSERT INTO subscribers (id, newsletter_id, email, status, created_at)
                 VALUES (?1, 1, ?2, 'active', '2026-01-01T00:00:00.000Z')",
                (id, format!("s{id}@x.co")),
            )
            .unwrap();
            put_values(&conn, id, &[(age.id, SqlValue::Integer(id))]).unwrap();
        }
        let values = |conn: &Connection| -> i64 {
            conn.query_row("SELECT count(*) FROM subscriber_field_values", [], |r| {
                r.get(0)
            })
            .unwrap()
        };
        assert_eq!(values(&conn), 5);
        delete(&mut conn, 1, age.id).unwrap();
        assert!(list(&conn, 1).unwrap().is_empty(), "gone at once");
        assert!(matches!(
            get(&conn, 1, age.id),
            Err(DomainError::NotFound(_))
        ));
        // Its name is free again, and a late write for the old field stores nothing.
        create(&conn, 1, &input("age")).unwrap();
        put_values(&conn, 1, &[(age.id, SqlValue::Integer(99))]).unwrap();
        assert_eq!(values(&conn), 5);
        // Batches of two: more, more, then done (the field's row goes with the last).
        assert!(delete_values_batch(&mut conn, age.id, 2).unwrap());
        assert!(delete_values_batch(&mut conn, age.id, 2).unwrap());
        assert!(!delete_values_batch(&mut conn, age.id, 2).unwrap());
        assert_eq!(values(&conn), 0);
        let rows: i64 = conn
            .query_row(
                "SELECT count(*) FROM custom_fields WHERE id = ?1",
                [age.id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows, 0);
    }

    fn field(kind: FieldType, options: &[&str]) -> CustomField {
        CustomField {
            id: 1,
            newsletter_id: 1,
            name: "f".into(),
            field_type: kind,
            options: options.iter().map(|o| o.to_string()).collect(),
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
        }
    }

    #[test]
    fn values_are_checked_by_type_and_kept_in_it() {
        use serde_json::json;
        let number = field(FieldType::Number, &[]);
        assert_eq!(
            stored_value(&number, &json!(41)),
            Ok(Some(SqlValue::Integer(41)))
        );
        assert_eq!(
            stored_value(&number, &json!("2.5")),
            Ok(Some(SqlValue::Real(2.5)))
        );
        assert!(stored_value(&number, &json!("many")).is_err());
        let date = field(FieldType::Date, &[]);
        assert_eq!(
            stored_value(&date, &json!("2026-02-28")),
            Ok(Some(SqlValue::Text("2026-02-28".into())))
        );
        for bad in ["2026-02-30", "28/02/2026", "2026-2-8"] {
            assert!(stored_value(&date, &json!(bad)).is_err(), "{bad}");
        }
        let yes = field(FieldType::Boolean, &[]);
        assert_eq!(
            stored_value(&yes, &json!(true)),
            Ok(Some(SqlValue::Integer(1)))
        );
        assert_eq!(
            stored_value(&yes, &json!("no")),
            Ok(Some(SqlValue::Integer(0)))
        );
        let choice = field(FieldType::Choice, &["weekly", "monthly"]);
        assert!(stored_value(&choice, &json!("daily")).is_err());
        assert_eq!(stored_value(&choice, &json!(null)), Ok(None));
        let text = field(FieldType::Text, &[]);
        assert!(stored_value(&text, &json!("a\u{0}b")).is_err());
        assert!(stored_value(&text, &json!(5)).is_err());
    }

    #[test]
    fn names_read_the_same_in_merge_tags_csv_and_json() {
        assert!(is_field_name("first_name"));
        for bad in ["First", "1st", "first-name", "first name", "_x", ""] {
            assert!(!is_field_name(bad), "{bad}");
        }
    }
}
