//! A newsletter's welcome e-mail settings: its switch, subject and Markdown body (stored
//! `NULL` means the default text defined here), checked and written with the newsletter's
//! other details. Sending it to a reader is `subscribers::welcome_mail`.

use rusqlite::Connection;

use crate::domain::content;
use crate::domain::{DomainError, DomainResult, FieldErrors, clean_line, clean_text};

/// The longest subject, in characters (it goes into the Subject header).
pub const SUBJECT_MAX: usize = 200;
/// The longest body, in characters: a welcome is a few paragraphs.
pub const BODY_MAX: usize = 10_000;

/// A newsletter's welcome e-mail as stored; `None` is the default text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    pub enabled: bool,
    pub subject: Option<String>,
    pub body: Option<String>,
}

impl Welcome {
    /// The subject sent for newsletter `name`: the owner's, else the default.
    pub fn subject_or_default(&self, name: &str) -> String {
        self.subject
            .clone()
            .unwrap_or_else(|| default_subject(name))
    }

    /// The Markdown body sent for newsletter `name`: the owner's, else the default.
    pub fn body_or_default(&self, name: &str) -> String {
        self.body.clone().unwrap_or_else(|| default_body(name))
    }
}

/// The subject of a newsletter that kept the default.
pub fn default_subject(name: &str) -> String {
    format!("Welcome to {name}")
}

/// The Markdown body of a newsletter that kept the default: what to expect, how to leave.
pub fn default_body(name: &str) -> String {
    let name = crate::domain::content::escape_markdown(name);
    format!(
        "Thank you for confirming your subscription to {name}.\n\n\
         Each new issue comes to this address when it is published, and past issues stay on \
         the newsletter's website.\n\n\
         If you ever want to stop, the unsubscribe link at the end of every e-mail, this one \
         included, ends your subscription at once."
    )
}

/// The welcome fields a change may carry (API `PATCH /newsletter`, the dashboard's form);
/// `None` leaves a field as it is, and an empty subject or body goes back to the default.
#[derive(Debug, Clone, Default)]
pub struct WelcomeChanges {
    pub enabled: Option<bool>,
    pub subject: Option<String>,
    pub body: Option<String>,
}

/// A body the owner wrote, with its HTML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedBody {
    pub markdown: String,
    pub html: String,
}

/// [`WelcomeChanges`] checked and rendered; `Some(None)` is back to the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckedWelcome {
    pub enabled: Option<bool>,
    pub subject: Option<Option<String>>,
    pub body: Option<Option<RenderedBody>>,
}

/// Checks the changes like the other newsletter fields (the subject one line, lengths) and
/// renders the body within the render budget, adding what is wrong to `errors`. Blocks for up
/// to the budget: call it before taking a database connection. Errors other than the
/// content's (the renderer could not start) are returned.
pub fn check(changes: &WelcomeChanges, errors: &mut FieldErrors) -> DomainResult<CheckedWelcome> {
    let subject = changes.subject.as_deref().map(|raw| {
        let line = clean_line(errors, "welcome_subject", raw, false, SUBJECT_MAX);
        (!line.is_empty()).then_some(line)
    });
    let body = match changes.body.as_deref() {
        None => None,
        Some(raw) => Some(rendered_markdown(errors, "welcome_body", raw, BODY_MAX)?),
    };
    Ok(CheckedWelcome {
        enabled: changes.enabled,
        subject,
        body,
    })
}

/// Markdown an owner wrote in `field` (a welcome body, an about page), checked like text (at
/// most `max` characters, no control characters but line breaks) and rendered within the
/// render budget; `None` when it is blank or refused (what is wrong is added to `errors`).
/// Errors other than the content's (the renderer could not start) are returned.
pub(super) fn rendered_markdown(
    errors: &mut FieldErrors,
    field: &str,
    raw: &str,
    max: usize,
) -> DomainResult<Option<RenderedBody>> {
    let mut problems = FieldErrors::new();
    let markdown = clean_text(&mut problems, field, raw, false, max);
    let rendered = if !problems.is_empty() || markdown.is_empty() {
        None
    } else {
        match content::render_as(&markdown, field) {
            Ok(html) => Some(RenderedBody { markdown, html }),
            Err(DomainError::Invalid(_, fields)) => {
                problems.append(fields);
                None
            }
            Err(other) => return Err(other),
        }
    };
    errors.append(problems);
    Ok(rendered)
}

/// Writes checked changes to newsletter `id` inside the caller's transaction; true when
/// anything changed.
pub(in crate::domain) fn apply(
    conn: &Connection,
    id: i64,
    checked: &CheckedWelcome,
) -> DomainResult<bool> {
    let mut changed = false;
    if let Some(enabled) = checked.enabled {
        const SQL: &str = "UPDATE newsletters SET welcome_enabled = ?2
             WHERE id = ?1 AND welcome_enabled IS NOT ?2";
        changed |= conn.execute(SQL, (id, enabled))? > 0;
    }
    if let Some(subject) = &checked.subject {
        const SQL: &str = "UPDATE newsletters SET welcome_subject = ?2
             WHERE id = ?1 AND welcome_subject IS NOT ?2";
        changed |= conn.execute(SQL, (id, subject))? > 0;
    }
    if let Some(body) = &checked.body {
        const SQL: &str = "UPDATE newsletters SET welcome_body = ?2, welcome_body_html = ?3
             WHERE id = ?1 AND welcome_body IS NOT ?2";
        let (markdown, html) = match body {
            Some(RenderedBody { markdown, html }) => (Some(markdown), Some(html)),
            None => (None, None),
        };
        changed |= conn.execute(SQL, (id, markdown, html))? > 0;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_names_the_newsletter_as_typed() {
        let html = content::markdown_html::markdown_to_html(&default_body("*Weekly* <Notes>"));
        assert!(html.contains("*Weekly* &lt;Notes&gt;"), "{html}");
        assert_eq!(default_subject("Weekly"), "Welcome to Weekly");
    }

    #[test]
    fn checks_like_the_other_fields_and_empty_means_the_default() {
        let mut errors = FieldErrors::new();
        let checked = check(
            &WelcomeChanges {
                enabled: Some(false),
                subject: Some("  ".into()),
                body: Some("Hello **there**".into()),
            },
            &mut errors,
        )
        .unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(checked.subject, Some(None));
        let body = checked.body.unwrap().unwrap();
        assert!(body.html.contains("<strong>there</strong>"));

        let mut errors = FieldErrors::new();
        check(
            &WelcomeChanges {
                enabled: None,
                subject: Some("Two\nlines".into()),
                body: Some("x".repeat(BODY_MAX + 1)),
            },
            &mut errors,
        )
        .unwrap();
        let fields = errors.by_field();
        assert!(fields.contains_key("welcome_subject"), "{fields:?}");
        assert!(fields.contains_key("welcome_body"), "{fields:?}");
    }
}
