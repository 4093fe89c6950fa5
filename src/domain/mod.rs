//! Business rules, in nine parts that only point down (docs/architecture.md gives the
//! reading order; `tests/it/layers.rs` keeps the order): `values` (shared by all), `content`
//! (Markdown), `accounts`, `events` (and webhooks), `newsletters` (the root record and its
//! settings), `subscribers` (with import, export and opt-in), `issues`, `reports` and
//! `delivery`. Every door (REST API, dashboard, public site, CLI, jobs) calls these
//! functions; they take a database connection and plain values and know nothing of HTTP.
//! This file holds what every part returns: field errors and the domain's error type.

pub mod accounts;
pub mod content;
pub mod delivery;
pub mod events;
pub mod issues;
pub mod newsletters;
pub mod reports;
pub mod sequences;
pub mod subscribers;
pub mod values;

#[cfg(test)]
pub mod testing;

use std::collections::BTreeMap;

use crate::store::StoreError;

/// Field-level validation messages, e.g. `("email", "is invalid")`; shown on forms and in
/// the API's `details`/`errors`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldErrors(Vec<(String, String)>);

impl FieldErrors {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, field: &str, message: impl Into<String>) {
        self.0.push((field.to_string(), message.into()));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds every message of `other`, after these.
    pub fn append(&mut self, other: FieldErrors) {
        self.0.extend(other.0);
    }

    /// `Ok(())` when nothing was added, else a `validation_error`.
    pub fn into_result(self) -> Result<(), DomainError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DomainError::Invalid(ErrorCode::ValidationError, self))
        }
    }

    /// `{"field": ["message", ...]}`, for the API's `details`.
    pub fn by_field(&self) -> BTreeMap<String, Vec<String>> {
        let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (field, message) in &self.0 {
            map.entry(field.clone()).or_default().push(message.clone());
        }
        map
    }

    /// Whole sentences ("Email is invalid"), for forms and the API's `errors`.
    pub fn sentences(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(field, message)| match field.as_str() {
                "base" => message.clone(),
                _ => format!("{} {}", humanize(field), message),
            })
            .collect()
    }

    pub fn single(field: &str, message: impl Into<String>) -> Self {
        let mut errors = Self::new();
        errors.add(field, message);
        errors
    }
}

/// "password_confirmation" -> "Password confirmation"; "relay.limits.per_day" -> "Relay limits
/// per day".
pub fn humanize(field: &str) -> String {
    let text = field.replace(['_', '.'], " ");
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => text,
    }
}

/// The stable machine-readable codes of the contract (docs/decisions.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    ValidationError,
    InvalidEmail,
    InvalidState,
    NoContent,
    NoActiveSubscribers,
    LimitReached,
    NewsletterPaused,
    NewsletterCancelled,
    PaymentRequired,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ValidationError => "validation_error",
            ErrorCode::InvalidEmail => "invalid_email",
            ErrorCode::InvalidState => "invalid_state",
            ErrorCode::NoContent => "no_content",
            ErrorCode::NoActiveSubscribers => "no_active_subscribers",
            ErrorCode::LimitReached => "limit_reached",
            ErrorCode::NewsletterPaused => "newsletter_paused",
            ErrorCode::NewsletterCancelled => "newsletter_cancelled",
            ErrorCode::PaymentRequired => "payment_required",
        }
    }
}

/// The state of one throttle bucket after counting a request: what a refusal for too many
/// attempts tells the client (limit, what is left, when it starts again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub limit: u32,
    pub remaining: u32,
    /// Unix seconds at which the window ends and the count starts again.
    pub reset_at: i64,
    /// Seconds until `reset_at`, at least 1.
    pub retry_after: i64,
}

/// Why a domain operation did not happen. Each door maps it to its own answer once
/// (`api::error`, `web::error`, the CLI's exit codes).
#[derive(Debug)]
pub enum DomainError {
    /// Input failed validation; nothing changed.
    Invalid(ErrorCode, FieldErrors),
    /// The request is well-formed but a business rule refuses it now.
    Rejected(ErrorCode, String),
    /// No such record, or it belongs to someone else.
    NotFound(&'static str),
    /// Missing, unknown or revoked credentials.
    Unauthorized(String),
    /// Authenticated, but not allowed to do this.
    Forbidden(String),
    /// Too many attempts in the current window.
    RateLimited(Window),
    Store(StoreError),
}

impl DomainError {
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        DomainError::Invalid(
            ErrorCode::ValidationError,
            FieldErrors::single(field, message),
        )
    }

    pub fn rejected(code: ErrorCode, message: impl Into<String>) -> Self {
        DomainError::Rejected(code, message.into())
    }
}

impl std::fmt::Display for DomainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DomainError::Invalid(_, fields) => write!(f, "{}", fields.sentences().join("; ")),
            DomainError::Rejected(_, message) => write!(f, "{message}"),
            DomainError::NotFound(what) => write!(f, "{what} not found"),
            DomainError::Unauthorized(message) | DomainError::Forbidden(message) => {
                write!(f, "{message}")
            }
            DomainError::RateLimited(_) => write!(f, "too many requests"),
            DomainError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DomainError {}

impl From<StoreError> for DomainError {
    fn from(e: StoreError) -> Self {
        DomainError::Store(e)
    }
}

impl From<rusqlite::Error> for DomainError {
    fn from(e: rusqlite::Error) -> Self {
        DomainError::Store(StoreError::Sqlite(e))
    }
}

/// Shorthand for the result of a domain operation.
pub type DomainResult<T> = Result<T, DomainError>;

/// Trims a text field and checks its length in characters; `required` refuses empty.
/// Control characters other than line breaks and tabs are refused (they have no place in
/// names, subjects or summaries and break the e-mail headers some of them end up in).
pub fn clean_text(
    errors: &mut FieldErrors,
    field: &str,
    value: &str,
    required: bool,
    max_chars: usize,
) -> String {
    let refused = |c: char| values::text_pattern::Refused::ControlsButBreaks.refuses(c);
    let message = "must not contain control characters";
    clean(errors, field, value, required, max_chars, refused, message)
}

/// Like [`clean_text`], for a value that goes into a mail header (a newsletter's name, tagline
/// and sender name): one line, so every control character is refused, line breaks and tabs
/// included, and no value can start a header line of its own.
pub fn clean_line(
    errors: &mut FieldErrors,
    field: &str,
    value: &str,
    required: bool,
    max_chars: usize,
) -> String {
    let message = "must be one line, without line breaks, tabs or other control characters";
    clean(
        errors,
        field,
        value,
        required,
        max_chars,
        |c| values::text_pattern::Refused::Controls.refuses(c),
        message,
    )
}

/// Trims, then checks blank, length, and the characters `refused` picks out (with `message`).
fn clean(
    errors: &mut FieldErrors,
    field: &str,
    value: &str,
    required: bool,
    max_chars: usize,
    refused: fn(char) -> bool,
    message: &str,
) -> String {
    // The length counts what was sent, spaces around it included: the limit the OpenAPI
    // document states (`maxLength`) is on the string as sent.
    let sent_chars = value.chars().count();
    let value = value.trim().to_string();
    if required && value.is_empty() {
        errors.add(field, "can't be blank");
    } else if sent_chars > max_chars {
        errors.add(
            field,
            format!("is too long (maximum is {max_chars} characters)"),
        );
    } else if value.chars().any(refused) {
        errors.add(field, message);
    }
    value
}
