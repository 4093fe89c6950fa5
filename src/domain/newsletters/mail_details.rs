//! What a newsletter's mail carries besides the issue: the address replies go to (a
//! `Reply-To` header, when it is not the sender's), and a postal address for the footer of
//! every issue and welcome mail, which anti-spam laws such as CAN-SPAM ask of commercial mail.
//! Both optional, set by the owner (dashboard settings, API `PATCH /newsletter`), checked here
//! once for every door.

use rusqlite::Connection;

use crate::domain::values::email::EmailAddress;
use crate::domain::{DomainResult, FieldErrors};

/// The longest postal address, in characters (a few lines).
pub const POSTAL_ADDRESS_MAX: usize = 300;

/// A newsletter's mail details as stored; `None` is none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailDetails {
    /// Where replies go; `None`: to the sender address.
    pub reply_to: Option<String>,
    /// Printed in the footer, its line breaks kept.
    pub postal_address: Option<String>,
}

impl MailDetails {
    /// The postal address's lines, blank ones dropped.
    pub fn postal_lines(&self) -> Vec<&str> {
        self.postal_address
            .as_deref()
            .map(|a| a.lines().map(str::trim).filter(|l| !l.is_empty()).collect())
            .unwrap_or_default()
    }
}

/// The fields a change may carry; `None` leaves a field as it is, a blank value removes it.
#[derive(Debug, Clone, Default)]
pub struct MailDetailsChanges {
    pub reply_to: Option<String>,
    pub postal_address: Option<String>,
}

/// [`MailDetailsChanges`] checked; `Some(None)` removes the value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckedMailDetails {
    reply_to: Option<Option<String>>,
    postal_address: Option<Option<String>>,
}

/// Checks `changes`, adding what is wrong to `errors` (fields `reply_to`, `postal_address`).
pub fn check(changes: &MailDetailsChanges, errors: &mut FieldErrors) -> CheckedMailDetails {
    let reply_to = changes.reply_to.as_deref().map(|raw| {
        if raw.trim().is_empty() {
            return None;
        }
        match EmailAddress::parse(raw) {
            Ok(email) => Some(email.into_string()),
            Err(message) => {
                errors.add("reply_to", message);
                None
            }
        }
    });
    let postal_address = changes.postal_address.as_deref().map(|raw| {
        // Line breaks are kept (an address has lines); "\r\n" from a form is one break.
        let text = raw.replace("\r\n", "\n");
        let text =
            crate::domain::clean_text(errors, "postal_address", &text, false, POSTAL_ADDRESS_MAX);
        (!text.is_empty()).then_some(text)
    });
    CheckedMailDetails {
        reply_to,
        postal_address,
    }
}

/// Writes checked changes to newsletter `id` inside the caller's transaction; true when
/// anything changed.
pub(in crate::domain) fn apply(
    conn: &Connection,
    id: i64,
    current: &MailDetails,
    checked: &CheckedMailDetails,
) -> DomainResult<bool> {
    let next = MailDetails {
        reply_to: checked
            .reply_to
            .clone()
            .unwrap_or_else(|| current.reply_to.clone()),
        postal_address: checked
            .postal_address
            .clone()
            .unwrap_or_else(|| current.postal_address.clone()),
    };
    if &next == current {
        return Ok(false);
    }
    const UPDATE: &str = "UPDATE newsletters SET reply_to = ?2, postal_address = ?3 WHERE id = ?1";
    conn.execute(UPDATE, (id, next.reply_to, next.postal_address))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(reply_to: &str, postal: &str) -> (CheckedMailDetails, FieldErrors) {
        let mut errors = FieldErrors::new();
        let checked = check(
            &MailDetailsChanges {
                reply_to: Some(reply_to.into()),
                postal_address: Some(postal.into()),
            },
            &mut errors,
        );
        (checked, errors)
    }

    #[test]
    fn blank_values_remove_and_addresses_keep_their_lines() {
        let (c, errors) = checked("  ", "  Main Street 1\r\n\r\n10115 Berlin  ");
        assert!(errors.into_result().is_ok());
        assert_eq!(c.reply_to, Some(None));
        assert_eq!(
            c.postal_address,
            Some(Some("Main Street 1\n\n10115 Berlin".into()))
        );
        let details = MailDetails {
            reply_to: None,
            postal_address: Some("Main Street 1\n\n10115 Berlin".into()),
        };
        assert_eq!(details.postal_lines(), ["Main Street 1", "10115 Berlin"]);
    }

    #[test]
    fn bad_values_name_their_fields() {
        let (_, errors) = checked("not an address", "a\u{7}b");
        let fields: Vec<String> = errors.by_field().into_keys().collect();
        assert_eq!(fields, ["postal_address", "reply_to"]);
        let (_, errors) = checked("", &"x".repeat(POSTAL_ADDRESS_MAX + 1));
        assert!(errors.into_result().is_err());
    }
}
