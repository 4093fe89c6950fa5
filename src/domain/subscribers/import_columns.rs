//! The columns of an imported CSV file and how a row becomes a subscriber, for Broadsheet's
//! own format and for the exports creators bring along: Mailchimp's audience export (`Email
//! Address`, `First Name`, `Last Name`, `TAGS` as a quoted list, `OPTIN_TIME`) and Substack's
//! subscriber export (`email`, `created_at`, `email_disabled`, ...). Columns are found by
//! name; the file's source is told by the columns only that service writes, and decides how
//! the tags cell is read. `domain::subscribers::import` streams the file through [`Columns::read`];
//! docs/subscribers.md ("Import formats") lists every name and choice.
//!
//! The rest of the import: `domain::subscribers::import` (the streaming import and the
//! dashboard's uploads), `web::subscribers::import` (the dashboard's pages),
//! `jobs::import_subscribers` (the job) and `cli::import` (`broadsheet import`).

use csv::{ByteRecord, ReaderBuilder, StringRecord};

use rusqlite::types::Value as SqlValue;

use crate::clock::{self, Timestamp};
use crate::domain::subscribers::custom_fields::{self, CustomField};
use crate::domain::subscribers::memberships::Grant;
use crate::domain::subscribers::{NewSubscriber, Status};
use crate::domain::{DomainError, DomainResult, ErrorCode, FieldErrors};

/// Separates the tags inside a row's tags field (the comma already separates fields).
pub const TAG_SEPARATOR: char = ';';

/// Where a file comes from, told by its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Broadsheet's own format (and any spreadsheet): tags separated by `;`.
    Plain,
    /// A Mailchimp audience export: it alone has `MEMBER_RATING`, `OPTIN_TIME`, `LEID`...
    Mailchimp,
    /// A Substack subscriber export: it alone has `email_disabled` and `active_subscription`.
    Substack,
}

impl Source {
    fn of(keys: &[String]) -> Source {
        let has = |names: &[&str]| keys.iter().any(|k| names.contains(&k.as_str()));
        if has(&["memberrating", "optintime", "confirmtime", "leid", "euid"]) {
            Source::Mailchimp
        } else if has(&["emaildisabled", "activesubscription"]) {
            Source::Substack
        } else {
            Source::Plain
        }
    }

    /// For the preview and the CLI's summary.
    pub fn label(self) -> &'static str {
        match self {
            Source::Plain => "CSV",
            Source::Mailchimp => "Mailchimp audience export",
            Source::Substack => "Substack subscriber export",
        }
    }
}

/// What a header column is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnUse {
    Email,
    Name,
    FirstName,
    LastName,
    Tags,
    Status,
    /// When the reader subscribed; of several such columns the first filled one counts, in
    /// the order of [`date_rank`] (`OPTIN_TIME` before `CONFIRM_TIME`).
    SubscribedAt,
    /// When the reader left (Mailchimp's unsubscribed and cleaned exports): a filled cell
    /// skips the row.
    LeftAt,
    /// Substack's `email_disabled`: `true` (the reader turned e-mail off) skips the row.
    EmailDisabled,
    /// Paid access (Broadsheet's `membership`, Substack's `active_subscription`).
    Membership,
    /// Until when paid access lasts (Broadsheet's `membership_until`, Substack's `expiry`).
    MembershipUntil,
    /// A custom field of the newsletter, by the header naming it exactly (any case).
    Field,
    Ignored,
}

/// `Email Address`, `e-mail` and `EMAIL` all give `emailaddress` or `email`.
fn key(header: &str) -> String {
    header
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase()
}

/// Which date column wins when several are filled: the subscription itself before the
/// record's creation or the confirmation of the opt-in.
fn date_rank(key: &str) -> u8 {
    match key {
        "subscribedat" | "optintime" => 0,
        _ => 1,
    }
}

impl ColumnUse {
    fn of(key: &str) -> ColumnUse {
        match key {
            "email" | "emailaddress" => ColumnUse::Email,
            "name" | "fullname" => ColumnUse::Name,
            "firstname" | "fname" => ColumnUse::FirstName,
            "lastname" | "lname" => ColumnUse::LastName,
            "tags" => ColumnUse::Tags,
            "status" => ColumnUse::Status,
            "subscribedat" | "optintime" | "createdat" | "confirmtime" => ColumnUse::SubscribedAt,
            "unsubtime" | "cleantime" | "unsubscribedat" => ColumnUse::LeftAt,
            "emaildisabled" => ColumnUse::EmailDisabled,
            "membership" | "activesubscription" => ColumnUse::Membership,
            "membershipuntil" | "expiry" => ColumnUse::MembershipUntil,
            _ => ColumnUse::Ignored,
        }
    }

    /// A short name, for the header's error messages.
    pub fn describe(self) -> &'static str {
        match self {
            ColumnUse::Email => "e-mail address",
            ColumnUse::Name => "name",
            ColumnUse::FirstName => "first name",
            ColumnUse::LastName => "last name",
            ColumnUse::Tags => "tags",
            ColumnUse::Status => "status",
            ColumnUse::SubscribedAt => "subscribed at",
            ColumnUse::LeftAt => "left at",
            ColumnUse::EmailDisabled => "email disabled",
            ColumnUse::Membership => "membership",
            ColumnUse::MembershipUntil => "membership until",
            ColumnUse::Field => "custom field",
            ColumnUse::Ignored => "ignored",
        }
    }
}

pub(in crate::domain) fn header_error(message: impl Into<String>) -> DomainError {
    DomainError::Invalid(
        ErrorCode::ValidationError,
        FieldErrors::single("base", message),
    )
}

/// The header of a file and where the known columns are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    pub source: Source,
    /// Each header cell as written (trimmed) with what it is used for.
    pub header: Vec<(String, ColumnUse)>,
    email: usize,
    name: Option<usize>,
    first_name: Option<usize>,
    last_name: Option<usize>,
    tags: Option<usize>,
    status: Option<usize>,
    email_disabled: Option<usize>,
    membership: Option<usize>,
    membership_until: Option<usize>,
    /// The date columns, the one that wins first.
    dates: Vec<usize>,
    left: Vec<usize>,
    /// The custom field each [`ColumnUse::Field`] column fills.
    fields: Vec<(usize, CustomField)>,
}

impl Columns {
    /// Reads the header record; refuses a file whose first line does not name an email column.
    /// A column named as one of the newsletter's `fields` (exactly, in any case: `first_name`,
    /// as the export writes it) fills that field, before any meaning of its own.
    pub(in crate::domain) fn parse(
        record: &ByteRecord,
        fields: &[CustomField],
    ) -> DomainResult<Columns> {
        let mut header: Vec<(String, ColumnUse)> = Vec::new();
        let mut keys = Vec::new();
        let mut filled: Vec<(usize, CustomField)> = Vec::new();
        for (i, raw) in record.iter().enumerate() {
            let text = std::str::from_utf8(raw).map_err(|_| {
                header_error("The first line is not UTF-8 text: save the file as CSV (UTF-8).")
            })?;
            // Spreadsheets often start a UTF-8 file with a byte-order mark.
            let text = if i == 0 {
                text.trim_start_matches('\u{feff}')
            } else {
                text
            };
            let text = text.trim().to_string();
            keys.push(key(&text));
            let field = fields.iter().find(|f| f.name.eq_ignore_ascii_case(&text));
            let usage = match field {
                Some(field) => {
                    if let Some((first, _)) = filled.iter().find(|(_, f)| f.id == field.id) {
                        return Err(header_error(format!(
                            "The header has two columns for the field {} ({:?} and {text:?}); keep one.",
                            field.name, header[*first].0
                        )));
                    }
                    filled.push((i, field.clone()));
                    ColumnUse::Field
                }
                None => ColumnUse::of(keys.last().expect("just pushed")),
            };
            header.push((text, usage));
        }
        let find = |wanted: ColumnUse| -> DomainResult<Option<usize>> {
            let mut at = header.iter().enumerate().filter(|(_, (_, u))| *u == wanted);
            match (at.next(), at.next()) {
                (Some((i, _)), None) => Ok(Some(i)),
                (None, _) => Ok(None),
                (Some((_, (a, _))), Some((_, (b, _)))) => Err(header_error(format!(
                    "The header has two {} columns ({a:?} and {b:?}); keep one.",
                    wanted.describe()
                ))),
            }
        };
        let all = |wanted: ColumnUse| -> Vec<usize> {
            let mut at: Vec<usize> = (0..header.len())
                .filter(|&i| header[i].1 == wanted)
                .collect();
            at.sort_by_key(|&i| date_rank(&keys[i]));
            at
        };
        let Some(email) = find(ColumnUse::Email)? else {
            return Err(no_email_column(&header));
        };
        Ok(Columns {
            source: Source::of(&keys),
            email,
            name: find(ColumnUse::Name)?,
            first_name: find(ColumnUse::FirstName)?,
            last_name: find(ColumnUse::LastName)?,
            tags: find(ColumnUse::Tags)?,
            status: find(ColumnUse::Status)?,
            email_disabled: find(ColumnUse::EmailDisabled)?,
            membership: find(ColumnUse::Membership)?,
            membership_until: find(ColumnUse::MembershipUntil)?,
            dates: all(ColumnUse::SubscribedAt),
            left: all(ColumnUse::LeftAt),
            fields: filled,
            header,
        })
    }

    /// Where the e-mail address is.
    pub(in crate::domain) fn email_at(&self) -> usize {
        self.email
    }

    /// What column `at` is used for, in a sentence of the preview:
    /// `subscribed at, when OPTIN_TIME is empty`.
    pub fn meaning(&self, at: usize) -> String {
        let Some((_, used)) = self.header.get(at) else {
            return String::new();
        };
        let name_of = |i: usize| self.header[i].0.as_str();
        match used {
            ColumnUse::Email => "e-mail address".into(),
            ColumnUse::Name => "name".into(),
            ColumnUse::FirstName | ColumnUse::LastName => match self.name {
                Some(name) => format!("name, when {} is empty", name_of(name)),
                None => "name (first and last name joined)".into(),
            },
            ColumnUse::Tags => match self.source {
                Source::Mailchimp => "tags (Mailchimp: a quoted list separated by commas)".into(),
                _ => format!("tags, separated by {TAG_SEPARATOR}"),
            },
            ColumnUse::Status => "status: unsubscribed and bounced rows are skipped".into(),
            ColumnUse::SubscribedAt => match self.dates.iter().position(|&i| i == at) {
                Some(0) | None => "subscribed at".into(),
                Some(rank) => {
                    let before: Vec<&str> =
                        self.dates[..rank].iter().map(|&i| name_of(i)).collect();
                    format!("subscribed at, when {} is empty", before.join(" and "))
                }
            },
            ColumnUse::LeftAt => "left: rows with a date here are skipped".into(),
            ColumnUse::EmailDisabled => "e-mail turned off: rows with true are skipped".into(),
            ColumnUse::Membership => {
                "membership: paid (and comped) members keep paid access, until the paid period ends"
                    .into()
            }
            ColumnUse::MembershipUntil => "end of the paid period".into(),
            ColumnUse::Field => match self.fields.iter().find(|(i, _)| *i == at) {
                Some((_, field)) => format!(
                    "the custom field {} ({}), for new subscribers",
                    field.name,
                    field.field_type.as_str()
                ),
                None => "a custom field".into(),
            },
            ColumnUse::Ignored => "ignored".into(),
        }
    }

    /// `Email Address -> email, TAGS -> tags (...)`, then `ignored: MEMBER_RATING, ...`.
    pub fn summary(&self) -> String {
        let mut used = Vec::new();
        let mut ignored = Vec::new();
        for (i, (name, usage)) in self.header.iter().enumerate() {
            match usage {
                ColumnUse::Ignored => ignored.push(name.as_str()),
                _ => used.push(format!("{name} -> {}", self.meaning(i))),
            }
        }
        let mut text = used.join(", ");
        if !ignored.is_empty() {
            text.push_str(&format!("; ignored: {}", ignored.join(", ")));
        }
        text
    }

    /// What one data row asks for.
    pub(in crate::domain) fn read(&self, record: &ByteRecord) -> Parsed {
        match self.cells(record) {
            Ok(cells) => cells.parse(self),
            Err(NotText) => Parsed::Refused {
                email: record
                    .get(self.email)
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default(),
                reason: "The line is not UTF-8 text".to_string(),
            },
        }
    }

    fn cells<'r>(&self, record: &'r ByteRecord) -> Result<Cells<'r>, NotText> {
        let cell = |at: Option<usize>| -> Result<&'r str, NotText> {
            match at.and_then(|i| record.get(i)) {
                None => Ok(""),
                Some(bytes) => std::str::from_utf8(bytes)
                    .map(unescape_formula)
                    .map_err(|_| NotText),
            }
        };
        let mut date = None;
        for &at in &self.dates {
            let text = cell(Some(at))?.trim();
            if !text.is_empty() {
                date = Some((at, text));
                break;
            }
        }
        let mut left = false;
        for &at in &self.left {
            left |= !cell(Some(at))?.trim().is_empty();
        }
        let mut values = Vec::new();
        for (at, _) in &self.fields {
            values.push(cell(Some(*at))?);
        }
        Ok(Cells {
            email: cell(Some(self.email))?,
            name: cell(self.name)?,
            first_name: cell(self.first_name)?,
            last_name: cell(self.last_name)?,
            tags: cell(self.tags)?,
            status: cell(self.status)?,
            email_disabled: cell(self.email_disabled)?,
            membership: cell(self.membership)?,
            membership_until: cell(self.membership_until)?,
            date,
            left,
            values,
        })
    }
}

fn no_email_column(header: &[(String, ColumnUse)]) -> DomainError {
    let cells: Vec<&str> = header.iter().map(|(h, _)| h.as_str()).collect();
    let message = if cells.iter().all(|c| c.is_empty()) {
        "The file is empty: its first line must be a header such as email,name,tags.".to_string()
    } else if cells.len() == 1 && (cells[0].contains(';') || cells[0].contains('\t')) {
        format!(
            "The header {:?} is one column: the file must be separated by commas, not semicolons or tabs.",
            cells[0]
        )
    } else if cells.iter().any(|c| c.contains('@')) {
        format!(
            "The first line must be a header naming the columns (email,name,tags), but it holds an address: {}.",
            cells.join(",")
        )
    } else {
        format!(
            "The header has no email column (found: {}). Name the columns email,name,tags.",
            cells.join(", ")
        )
    };
    header_error(message)
}

/// A used cell that is not UTF-8.
struct NotText;

/// The used cells of one row.
struct Cells<'r> {
    email: &'r str,
    name: &'r str,
    first_name: &'r str,
    last_name: &'r str,
    tags: &'r str,
    status: &'r str,
    email_disabled: &'r str,
    membership: &'r str,
    membership_until: &'r str,
    /// The first filled date column and its text.
    date: Option<(usize, &'r str)>,
    left: bool,
    /// The cell of each custom field column, in the order of [`Columns::fields`].
    values: Vec<&'r str>,
}

/// What a file gives a subscriber it brings, beside the subscriber itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub(in crate::domain) struct Extras {
    /// Paid access.
    pub grant: Option<Grant>,
    /// Custom field values, checked by the field's type: the field's id and the value.
    pub values: Vec<(i64, SqlValue)>,
}

impl Extras {
    pub fn is_empty(&self) -> bool {
        self.grant.is_none() && self.values.is_empty()
    }
}

/// What one data row asks for.
pub(in crate::domain) enum Parsed {
    /// A subscriber, with what else the file gives them.
    Entry(NewSubscriber, Extras),
    /// Unsubscribed, bounced or turned off in the file.
    Skipped,
    Refused {
        email: String,
        reason: String,
    },
}

impl Cells<'_> {
    fn parse(self, columns: &Columns) -> Parsed {
        let refuse = |reason: String| Parsed::Refused {
            email: self.email.trim().to_string(),
            reason,
        };
        let status = self.status.trim().to_lowercase();
        match Status::parse(&status) {
            Some(Status::Active) => {}
            None if status.is_empty() => {}
            Some(Status::Unsubscribed | Status::Bounced) => return Parsed::Skipped,
            None => return refuse("Status must be active, unsubscribed or bounced".into()),
        }
        if self.left || self.email_disabled.trim().eq_ignore_ascii_case("true") {
            return Parsed::Skipped;
        }
        let subscribed_at = match self.date {
            None => None,
            Some((at, text)) => match parse_date(text) {
                Some(when) => Some(when),
                None => {
                    return refuse(format!(
                        "{} is not a date: {text:?} (expected e.g. 2024-01-05 10:11:12 or 2024-01-05T10:11:12Z)",
                        columns.header[at].0
                    ));
                }
            },
        };
        let name = match self.name.trim() {
            "" => [self.first_name.trim(), self.last_name.trim()]
                .into_iter()
                .filter(|part| !part.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
            name => name.to_string(),
        };
        let tags = match columns.source {
            Source::Mailchimp => quoted_list(self.tags),
            _ => self
                .tags
                .split(TAG_SEPARATOR)
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
        };
        let until = match self.membership_until.trim() {
            "" => None,
            text => match parse_date(text) {
                Some(when) => Some(when),
                None => {
                    let column = columns
                        .membership_until
                        .map_or("", |at| &columns.header[at].0);
                    return refuse(format!("{column} is not a date: {text:?}"));
                }
            },
        };
        let grant = match Grant::imported(self.membership, until) {
            Ok(grant) => grant,
            Err(reason) => return refuse(reason),
        };
        let mut values = Vec::new();
        for ((at, field), cell) in columns.fields.iter().zip(&self.values) {
            let text = serde_json::Value::String(cell.to_string());
            match custom_fields::stored_value(field, &text) {
                Ok(Some(value)) => values.push((field.id, value)),
                Ok(None) => {}
                Err(problem) => return refuse(format!("{} {problem}", columns.header[*at].0)),
            }
        }
        Parsed::Entry(
            NewSubscriber {
                email: self.email.to_string(),
                name: (!name.is_empty()).then_some(name),
                tags,
                subscribed_at,
            },
            Extras { grant, values },
        )
    }
}

/// `'=1+1` as exported (see `import::escape_formula`) is read back as `=1+1`.
fn unescape_formula(text: &str) -> &str {
    match text.strip_prefix('\'') {
        Some(rest) if rest.starts_with(['=', '+', '-', '@']) => rest,
        _ => text,
    }
}

/// Mailchimp's TAGS cell, `"tag one","tag, two"`: itself a line of CSV (a tag may hold a
/// comma). Unquoted tags separated by commas read the same way.
fn quoted_list(cell: &str) -> Vec<String> {
    let mut reader = ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(cell.as_bytes());
    let mut record = StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => record
            .iter()
            .map(|t| t.trim().trim_matches('"').trim())
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// A subscription date as the exports write it: RFC 3339 (Substack's `created_at`,
/// Broadsheet's own export), or a date and time without a zone (Mailchimp's `OPTIN_TIME`,
/// `2024-01-05 10:11:12`), or a date alone; a time without a zone is read as UTC.
pub fn parse_date(text: &str) -> Option<Timestamp> {
    let text = text.trim();
    if let Some(at) = Timestamp::parse(text) {
        return Some(at);
    }
    let joined = text.replacen(' ', "T", 1);
    clock::parse_civil(&joined)
        .or_else(|| clock::parse_day(text).map(|day| day.at(0, 0, 0, 0)))
        .map(|utc| Timestamp::from(clock::instant_of_utc(utc)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::subscribers::memberships::MemberStatus;

    fn columns(header: &str) -> Columns {
        let mut record = ByteRecord::new();
        for cell in header.split(',') {
            record.push_field(cell.as_bytes());
        }
        Columns::parse(&record, &[]).unwrap()
    }

    fn row(columns: &Columns, line: &str) -> Parsed {
        let mut reader = ReaderBuilder::new()
            .has_headers(false)
            .from_reader(line.as_bytes());
        let mut record = ByteRecord::new();
        reader.read_byte_record(&mut record).unwrap();
        columns.read(&record)
    }

    #[test]
    fn sources_are_told_by_their_own_columns() {
        assert_eq!(columns("email,name,tags").source, Source::Plain);
        assert_eq!(
            columns("Email Address,First Name,MEMBER_RATING,TAGS").source,
            Source::Mailchimp
        );
        assert_eq!(
            columns("email,active_subscription,expiry,email_disabled,created_at").source,
            Source::Substack
        );
    }

    #[test]
    fn dates_read_as_the_exports_write_them() {
        for (text, expect) in [
            ("2024-01-05 10:11:12", "2024-01-05T10:11:12.000Z"),
            ("2018-08-27T15:06:27.713Z", "2018-08-27T15:06:27.713Z"),
            ("2018-08-27T17:06:27+02:00", "2018-08-27T15:06:27.000Z"),
            ("2024-01-05T10:11:12", "2024-01-05T10:11:12.000Z"),
            ("2024-01-05T10:11:12.5", "2024-01-05T10:11:12.500Z"),
            ("2025-01-01", "2025-01-01T00:00:00.000Z"),
        ] {
            assert_eq!(
                parse_date(text).map(|t| t.to_string()).as_deref(),
                Some(expect),
                "{text}"
            );
        }
        for bad in [
            "yesterday",
            "2024-13-01",
            "05/01/2024",
            "2024-01-05 25:00:00",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn mailchimp_rows_keep_names_every_tag_and_the_opt_in_date() {
        let mc = columns(
            "Email Address,First Name,Last Name,MEMBER_RATING,OPTIN_TIME,CONFIRM_TIME,TAGS",
        );
        let Parsed::Entry(entry, _) = row(
            &mc,
            r#"ada@example.com,Ada,Lovelace,4,2024-01-05 10:11:12,2024-01-06 00:00:00,"""tag one"",""tag, two"",""vip""""#,
        ) else {
            panic!("imported")
        };
        assert_eq!(entry.name.as_deref(), Some("Ada Lovelace"));
        assert_eq!(entry.tags, vec!["tag one", "tag, two", "vip"]);
        assert_eq!(
            entry.subscribed_at.unwrap().to_string(),
            "2024-01-05T10:11:12.000Z"
        );
        // No OPTIN_TIME: the confirmation counts.
        let Parsed::Entry(entry, _) = row(&mc, "b@example.com,,Hopper,2,,2015-03-16 14:40:47,")
        else {
            panic!("imported")
        };
        assert_eq!(entry.name.as_deref(), Some("Hopper"));
        assert!(entry.tags.is_empty());
        assert_eq!(
            entry.subscribed_at.unwrap().to_string(),
            "2015-03-16T14:40:47.000Z"
        );
        assert_eq!(mc.meaning(5), "subscribed at, when OPTIN_TIME is empty");
        assert_eq!(
            mc.summary(),
            "Email Address -> e-mail address, First Name -> name (first and last name joined), \
             Last Name -> name (first and last name joined), OPTIN_TIME -> subscribed at, \
             CONFIRM_TIME -> subscribed at, when OPTIN_TIME is empty, \
             TAGS -> tags (Mailchimp: a quoted list separated by commas); ignored: MEMBER_RATING"
        );
        let Parsed::Refused { email, reason } = row(&mc, "c@example.com,,,,last week,,") else {
            panic!("refused")
        };
        assert_eq!(email, "c@example.com");
        assert!(
            reason.starts_with("OPTIN_TIME is not a date: \"last week\""),
            "{reason}"
        );
        // The unsubscribed export.
        let left = columns("Email Address,OPTIN_TIME,UNSUB_TIME");
        assert!(matches!(
            row(&left, "d@example.com,,2024-02-01 00:00:00"),
            Parsed::Skipped
        ));
    }

    #[test]
    fn broadsheets_own_export_brings_its_members_back() {
        let own = columns("email,name,tags,status,membership,membership_until");
        assert_eq!(
            own.meaning(4),
            "membership: paid (and comped) members keep paid access, until the paid period ends"
        );
        let grant = |line: &str| match row(&own, line) {
            Parsed::Entry(_, extras) => extras.grant,
            _ => panic!("{line}: imported"),
        };
        let comped = grant("c@example.com,,,active,comped,").unwrap();
        assert_eq!((comped.status, comped.until), (MemberStatus::Comped, None));
        // Stripe's statuses are paid access until the period's end.
        for status in ["paid", "trialing", "past_due", "canceled"] {
            let g = grant(&format!(
                "p@example.com,,,active,{status},2999-06-01T00:00:00Z"
            ));
            assert_eq!(g.unwrap().status, MemberStatus::Paid, "{status}");
        }
        assert_eq!(grant("f@example.com,,,active,free,"), None);
        assert_eq!(
            grant("o@example.com,,,active,paid,2001-01-01T00:00:00Z"),
            None
        );
        for (line, reason) in [
            (
                "x@example.com,,,active,gold,",
                "Membership must be free, paid",
            ),
            (
                "y@example.com,,,active,paid,soon",
                "membership_until is not a date: \"soon\"",
            ),
        ] {
            let Parsed::Refused { reason: got, .. } = row(&own, line) else {
                panic!("{line}: refused")
            };
            assert!(got.starts_with(reason), "{got}");
        }
    }

    #[test]
    fn substack_rows_with_email_turned_off_are_skipped() {
        let ss = columns("email,active_subscription,expiry,email_disabled,created_at");
        let Parsed::Entry(entry, _) = row(
            &ss,
            "a@example.com,true,2025-01-01,false,2018-08-27T15:06:27.713Z",
        ) else {
            panic!("imported")
        };
        assert_eq!(
            entry.subscribed_at.unwrap().to_string(),
            "2018-08-27T15:06:27.713Z"
        );
        assert!(matches!(
            row(&ss, "b@example.com,,,true,2018-08-27T15:06:27.713Z"),
            Parsed::Skipped
        ));
        // An active paid subscription comes as paid access until its expiry; one that
        // expired, or none, is free.
        let Parsed::Entry(
            _,
            Extras {
                grant: Some(grant), ..
            },
        ) = row(
            &ss,
            "p@example.com,true,2999-01-01,false,2018-08-27T15:06:27.713Z",
        )
        else {
            panic!("imported with paid access")
        };
        assert_eq!(grant.status, MemberStatus::Paid);
        assert_eq!(grant.until.unwrap().to_string(), "2999-01-01T00:00:00.000Z");
        for line in [
            "a@example.com,true,2025-01-01,false,",
            "f@example.com,false,,false,",
        ] {
            assert!(
                matches!(row(&ss, line), Parsed::Entry(_, e) if e.is_empty()),
                "{line}: free"
            );
        }
        // Plain files keep `;` between tags even when a tag holds a comma.
        let plain = columns("email,tags");
        let Parsed::Entry(entry, _) = row(&plain, "c@example.com,\"a, b;c\"") else {
            panic!("imported")
        };
        assert_eq!(entry.tags, vec!["a, b", "c"]);
    }
}
