//! Signup forms that live anywhere (docs/growth.md): each belongs to a newsletter, has a
//! random public id (its address on the site, `/f/<public_id>`), asks for an address and
//! optionally a name, gives confirmed subscribers its tags, and ends on its success message
//! or a page of the owner's. It may also ask for custom fields, each optional or required,
//! whose values a confirmed subscriber gets. The origins the owner lists may post to it for
//! JSON (CORS);
//! every post passes the bot checks of `domain::subscribers::form_guard`, whose
//! proof-of-work costs `pow_cost`. Double opt-in always stays on.

use rusqlite::{Connection, OptionalExtension, Row};

use serde::{Deserialize, Serialize};

use super::clean_tags;
use rusqlite::types::Value as SqlValue;
use serde_json::Value;

use super::custom_fields::{self, CustomField, FieldType};
use crate::clock::Timestamp;
use crate::domain::values::secrets::random_hex;
use crate::domain::values::web_url::{self, Schemes};
use crate::domain::{DomainError, DomainResult, FieldErrors, clean_line};

/// The longest form name, button text and success message, in characters.
pub const NAME_MAX: usize = 100;
pub const BUTTON_MAX: usize = 40;
pub const MESSAGE_MAX: usize = 500;
/// The longest redirect address, in characters.
pub const REDIRECT_MAX: usize = 2_000;
/// How many origins may post for JSON.
pub const ORIGINS_MAX: usize = 20;
/// The cheapest and dearest proof-of-work (the largest number of the challenge): a browser
/// solves 50,000 in well under a second; a script pays for each of its posts.
pub const POW_COST_MIN: i64 = 1_000;
pub const POW_COST_MAX: i64 = 5_000_000;
pub const POW_COST_DEFAULT: i64 = 50_000;
/// How many tags a form may give.
pub const TAGS_MAX: usize = 20;
/// How many forms a newsletter may have.
pub const FORMS_MAX: i64 = 50;

crate::string_enum!(
    /// Whether a form asks for a custom field, as its settings choose.
    pub FieldUse {
        Off => "off",
        Optional => "optional",
        Required => "required",
    }
);

/// A custom field a form asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormField {
    pub field: CustomField,
    pub required: bool,
}

/// A form's field as `signup_forms.fields` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredField {
    id: i64,
    required: bool,
}

/// A form as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignupForm {
    pub id: i64,
    pub newsletter_id: i64,
    pub public_id: String,
    pub name: String,
    pub ask_name: bool,
    pub tags: Vec<String>,
    pub button_text: String,
    pub success_message: String,
    pub redirect_url: Option<String>,
    pub allowed_origins: Vec<String>,
    pub pow_cost: i64,
    pub created_at: Timestamp,
    /// The custom fields it asks for, in the newsletter's order (a field deleted since is
    /// no longer asked).
    pub fields: Vec<FormField>,
}

impl SignupForm {
    /// The values a post gives the fields this form asks for (`given`: each field's name and
    /// text as posted; others are not read), checked by type: each field's id and value, or
    /// every problem by the field's label. A yes/no field left unticked is no; ticking a
    /// required one is a must (a consent).
    pub fn values(&self, given: &[(String, String)]) -> DomainResult<Vec<(i64, SqlValue)>> {
        let mut errors = FieldErrors::new();
        let mut values = Vec::new();
        for asked in &self.fields {
            let field = &asked.field;
            let text = given
                .iter()
                .find(|(name, _)| *name == field.name)
                .map_or("", |(_, text)| text.trim());
            let yes_no = field.field_type == FieldType::Boolean;
            let text = if yes_no && text.is_empty() {
                "no"
            } else {
                text
            };
            match custom_fields::stored_value(field, &Value::String(text.to_string())) {
                Ok(Some(SqlValue::Integer(0))) if yes_no && asked.required => {
                    errors.add(&field.name, "must be ticked");
                }
                Ok(Some(value)) => values.push((field.id, value)),
                Ok(None) if asked.required => errors.add(&field.name, "can't be blank"),
                Ok(None) => {}
                Err(problem) => errors.add(&field.name, problem),
            }
        }
        errors.into_result()?;
        Ok(values)
    }

    /// Whether a page of `origin` (the `Origin` header, `scheme://host[:port]`) may read the
    /// form's JSON answers.
    pub fn allows_origin(&self, origin: &str) -> bool {
        self.allowed_origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(origin))
    }
}

/// A form as the dashboard's fields give it, not yet checked.
#[derive(Debug, Clone, Default)]
pub struct FormInput {
    pub name: String,
    pub ask_name: bool,
    /// Separated by commas.
    pub tags: String,
    pub button_text: String,
    pub success_message: String,
    pub redirect_url: String,
    /// One origin a line.
    pub allowed_origins: String,
    pub pow_cost: String,
    /// Each custom field the settings offered, by id, and how the form uses it (`off`,
    /// `optional`, `required`); a field not named is off.
    pub fields: Vec<(i64, String)>,
}

impl FormInput {
    /// The fields of a new form.
    pub fn new_form() -> Self {
        FormInput {
            name: "Signup form".into(),
            ask_name: true,
            button_text: "Subscribe".into(),
            success_message: "Thanks! Check your inbox for a link to confirm.".into(),
            pow_cost: POW_COST_DEFAULT.to_string(),
            ..FormInput::default()
        }
    }

    /// The fields of a stored form.
    pub fn of(form: &SignupForm) -> Self {
        FormInput {
            name: form.name.clone(),
            ask_name: form.ask_name,
            tags: form.tags.join(", "),
            button_text: form.button_text.clone(),
            success_message: form.success_message.clone(),
            redirect_url: form.redirect_url.clone().unwrap_or_default(),
            allowed_origins: form.allowed_origins.join("\n"),
            pow_cost: form.pow_cost.to_string(),
            fields: form
                .fields
                .iter()
                .map(|f| {
                    let usage = match f.required {
                        true => FieldUse::Required,
                        false => FieldUse::Optional,
                    };
                    (f.field.id, usage.as_str().to_string())
                })
                .collect(),
        }
    }

    /// How this input uses field `id`.
    pub fn use_of(&self, id: i64) -> &str {
        self.fields
            .iter()
            .find(|(at, _)| *at == id)
            .map_or(FieldUse::Off.as_str(), |(_, usage)| usage.as_str())
    }
}

/// A checked form.
#[derive(Debug, Clone)]
struct Checked {
    name: String,
    ask_name: bool,
    tags: Vec<String>,
    button_text: String,
    success_message: String,
    redirect_url: Option<String>,
    allowed_origins: Vec<String>,
    pow_cost: i64,
    fields: Vec<StoredField>,
}

/// `raw` as an origin (`https://example.com`, `http://localhost:8000`): a web address with
/// nothing after the host and port, lowercased.
fn origin(raw: &str) -> Option<String> {
    let url = url::Url::parse(raw.trim()).ok()?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some()
        && url.username().is_empty()
        && url.password().is_none()
        && matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.fragment().is_none();
    plain.then(|| url.origin().ascii_serialization())
}

/// `input` checked, its fields against the newsletter's `available` ones: a field that is no
/// longer there (deleted after the settings page was shown) is refused by name.
fn check(input: &FormInput, available: &[CustomField]) -> DomainResult<Checked> {
    let mut errors = FieldErrors::new();
    let mut fields = Vec::new();
    for (id, usage) in &input.fields {
        let required = match FieldUse::parse(usage) {
            Some(FieldUse::Off) => continue,
            Some(usage) => usage == FieldUse::Required,
            None => {
                errors.add("form.fields", "must each be off, optional or required");
                continue;
            }
        };
        match available.iter().find(|f| f.id == *id) {
            Some(_) if fields.iter().any(|f: &StoredField| f.id == *id) => {}
            Some(_) => fields.push(StoredField { id: *id, required }),
            None => errors.add(
                "form.fields",
                "name a field that is no longer there: reload the page",
            ),
        }
    }
    let name = clean_line(&mut errors, "form.name", &input.name, true, NAME_MAX);
    let button_text = clean_line(
        &mut errors,
        "form.button_text",
        &input.button_text,
        true,
        BUTTON_MAX,
    );
    let success_message = input.success_message.trim().to_string();
    if success_message.is_empty() {
        errors.add("form.success_message", "can't be blank");
    } else if success_message.chars().count() > MESSAGE_MAX {
        errors.add(
            "form.success_message",
            format!("is too long (maximum is {MESSAGE_MAX} characters)"),
        );
    }
    let tags = clean_tags(input.tags.split(','), ("form.tags", TAGS_MAX), &mut errors);
    let redirect_url = match input.redirect_url.trim() {
        "" => None,
        raw => match web_url::check(raw, Schemes::HttpOrHttps, REDIRECT_MAX) {
            Ok(url) => Some(url),
            Err(problem) => {
                errors.add(
                    "form.redirect_url",
                    problem.message(REDIRECT_MAX, "must be an http:// or https:// address"),
                );
                None
            }
        },
    };
    let mut allowed_origins: Vec<String> = Vec::new();
    for raw in input
        .allowed_origins
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        match origin(raw) {
            Some(o) if !allowed_origins.contains(&o) => allowed_origins.push(o),
            Some(_) => {}
            None => errors.add(
                "form.allowed_origins",
                format!(
                    "{:?} is not an origin such as https://example.com (no path)",
                    raw.trim()
                ),
            ),
        }
    }
    if allowed_origins.len() > ORIGINS_MAX {
        errors.add(
            "form.allowed_origins",
            format!("are too many (at most {ORIGINS_MAX})"),
        );
    }
    let pow_cost = match input.pow_cost.trim().parse::<i64>() {
        Ok(cost) if (POW_COST_MIN..=POW_COST_MAX).contains(&cost) => cost,
        _ => {
            errors.add(
                "form.pow_cost",
                format!("must be a whole number from {POW_COST_MIN} to {POW_COST_MAX}"),
            );
            POW_COST_DEFAULT
        }
    };
    errors.into_result()?;
    Ok(Checked {
        name,
        ask_name: input.ask_name,
        tags,
        button_text,
        success_message,
        redirect_url,
        allowed_origins,
        pow_cost,
        fields,
    })
}

fn json(list: &[String]) -> String {
    serde_json::to_string(list).expect("strings serialise")
}

fn fields_json(fields: &[StoredField]) -> String {
    serde_json::to_string(fields).expect("fields serialise")
}

fn list_of(text: String) -> Vec<String> {
    serde_json::from_str(&text).unwrap_or_default()
}

/// A query of forms: their columns as [`from_row`] reads them, then `$tail`.
macro_rules! select_form {
    ($tail:literal) => {
        concat!(
            "SELECT id, newsletter_id, public_id, name, ask_name, tags, button_text,
                 success_message, redirect_url, allowed_origins, pow_cost, created_at, fields
             FROM signup_forms ",
            $tail
        )
    };
}

/// A form's row and the fields it stores, to be resolved by [`resolved`].
fn from_row(r: &Row<'_>) -> rusqlite::Result<(SignupForm, Vec<StoredField>)> {
    let stored: String = r.get(12)?;
    let form = SignupForm {
        id: r.get(0)?,
        newsletter_id: r.get(1)?,
        public_id: r.get(2)?,
        name: r.get(3)?,
        ask_name: r.get(4)?,
        tags: list_of(r.get(5)?),
        button_text: r.get(6)?,
        success_message: r.get(7)?,
        redirect_url: r.get(8)?,
        allowed_origins: list_of(r.get(9)?),
        pow_cost: r.get(10)?,
        created_at: r.get(11)?,
        fields: Vec::new(),
    };
    Ok((form, serde_json::from_str(&stored).unwrap_or_default()))
}

/// The forms of `rows` with the fields they ask for, as the newsletter's `available` fields
/// are now.
fn resolved(
    rows: Vec<(SignupForm, Vec<StoredField>)>,
    available: &[CustomField],
) -> Vec<SignupForm> {
    rows.into_iter()
        .map(|(mut form, stored)| {
            form.fields = available
                .iter()
                .filter_map(|field| {
                    let asked = stored.iter().find(|s| s.id == field.id)?;
                    Some(FormField {
                        field: field.clone(),
                        required: asked.required,
                    })
                })
                .collect();
            form
        })
        .collect()
}

/// The one form of `row`, resolved.
fn one(
    conn: &Connection,
    newsletter_id: i64,
    row: Option<(SignupForm, Vec<StoredField>)>,
) -> DomainResult<SignupForm> {
    let row = row.ok_or(DomainError::NotFound("form"))?;
    let available = custom_fields::list(conn, newsletter_id)?;
    Ok(resolved(vec![row], &available).remove(0))
}

/// The newsletter's forms, oldest first (at most [`FORMS_MAX`]).
pub fn list(conn: &Connection, newsletter_id: i64) -> DomainResult<Vec<SignupForm>> {
    const SQL: &str = select_form!("WHERE newsletter_id = ?1 ORDER BY id");
    let rows = conn
        .prepare_cached(SQL)?
        .query_map([newsletter_id], from_row)?
        .collect::<Result<_, _>>()?;
    Ok(resolved(rows, &custom_fields::list(conn, newsletter_id)?))
}

/// One form of the newsletter, by id.
pub fn get(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<SignupForm> {
    const SQL: &str = select_form!("WHERE newsletter_id = ?1 AND id = ?2");
    let row = conn
        .query_row(SQL, (newsletter_id, id), from_row)
        .optional()?;
    one(conn, newsletter_id, row)
}

/// The newsletter's form at `/f/<public_id>`.
pub fn by_public_id(
    conn: &Connection,
    newsletter_id: i64,
    public_id: &str,
) -> DomainResult<SignupForm> {
    const SQL: &str = select_form!("WHERE newsletter_id = ?1 AND public_id = ?2");
    let row = conn
        .query_row(SQL, (newsletter_id, public_id), from_row)
        .optional()?;
    one(conn, newsletter_id, row)
}

/// Creates a form from `input`; refused, with every problem, when a field is wrong.
pub fn create(
    conn: &Connection,
    newsletter_id: i64,
    input: &FormInput,
) -> DomainResult<SignupForm> {
    let c = check(input, &custom_fields::list(conn, newsletter_id)?)?;
    const COUNT: &str = "SELECT count(*) FROM signup_forms WHERE newsletter_id = ?1";
    let forms: i64 = conn.query_row(COUNT, [newsletter_id], |r| r.get(0))?;
    if forms >= FORMS_MAX {
        return Err(DomainError::invalid(
            "form",
            format!("cannot be added: at most {FORMS_MAX} forms"),
        ));
    }
    const INSERT: &str = "INSERT INTO signup_forms (newsletter_id, public_id, name, ask_name, tags,
             button_text, success_message, redirect_url, allowed_origins, pow_cost, created_at, updated_at, fields)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12) RETURNING id";
    let id: i64 = conn.query_row(
        INSERT,
        rusqlite::params![
            newsletter_id,
            random_hex(8),
            c.name,
            c.ask_name,
            json(&c.tags),
            c.button_text,
            c.success_message,
            c.redirect_url,
            json(&c.allowed_origins),
            c.pow_cost,
            Timestamp::now(),
            fields_json(&c.fields),
        ],
        |r| r.get(0),
    )?;
    get(conn, newsletter_id, id)
}

/// Saves `input` over the form `id`; its public id (and so its snippet) stays.
pub fn update(
    conn: &Connection,
    newsletter_id: i64,
    id: i64,
    input: &FormInput,
) -> DomainResult<SignupForm> {
    let c = check(input, &custom_fields::list(conn, newsletter_id)?)?;
    const UPDATE: &str = "UPDATE signup_forms SET name = ?3, ask_name = ?4, tags = ?5,
             button_text = ?6, success_message = ?7, redirect_url = ?8, allowed_origins = ?9,
             pow_cost = ?10, updated_at = ?11, fields = ?12
         WHERE newsletter_id = ?1 AND id = ?2";
    let changed = conn.execute(
        UPDATE,
        rusqlite::params![
            newsletter_id,
            id,
            c.name,
            c.ask_name,
            json(&c.tags),
            c.button_text,
            c.success_message,
            c.redirect_url,
            json(&c.allowed_origins),
            c.pow_cost,
            Timestamp::now(),
            fields_json(&c.fields),
        ],
    )?;
    if changed == 0 {
        return Err(DomainError::NotFound("form"));
    }
    get(conn, newsletter_id, id)
}

/// Deletes the form: its snippet stops working (its posts get a not-found page).
pub fn delete(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<()> {
    const DELETE: &str = "DELETE FROM signup_forms WHERE newsletter_id = ?1 AND id = ?2";
    match conn.execute(DELETE, (newsletter_id, id))? {
        0 => Err(DomainError::NotFound("form")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        assert_eq!(
            origin("https://Example.com/").as_deref(),
            Some("https://example.com")
        );
        assert_eq!(
            origin("http://localhost:8000").as_deref(),
            Some("http://localhost:8000")
        );
        for bad in [
            "example.com",
            "https://example.com/page",
            "ftp://example.com",
            "https://a@b.c",
        ] {
            assert_eq!(origin(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_form_is_checked_field_by_field() {
        let mut input = FormInput::new_form();
        assert!(check(&input, &[]).is_ok());
        input.tags = "news, , news, vip".into();
        assert_eq!(check(&input, &[]).unwrap().tags, ["news", "vip"]);
        input.pow_cost = "10".into();
        input.redirect_url = "javascript:alert(1)".into();
        input.allowed_origins = "https://ok.example\nnot an origin".into();
        input.button_text = "".into();
        let Err(DomainError::Invalid(_, errors)) = check(&input, &[]) else {
            panic!("refused")
        };
        let text = errors.sentences().join(" | ");
        for field in ["Pow cost", "Redirect url", "Allowed origins", "Button text"] {
            assert!(
                text.to_lowercase().contains(&field.to_lowercase()),
                "{field}: {text}"
            );
        }
    }
}
