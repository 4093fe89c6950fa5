//! The markup of a signup form (docs/growth.md): the snippet the dashboard gives to paste into
//! any page, which the dashboard also previews and the site's own page of the form shows.
//! It works without JavaScript (a plain POST to the newsletter's site); the optional script
//! (`assets/forms.js`) solves the proof-of-work and shows the answer in the page.

use maud::{Markup, html};

use poem::Request;

use crate::domain::subscribers::custom_fields::FieldType;
use crate::domain::subscribers::form_guard::{HONEYPOT_FIELD, STARTED_FIELD};
use crate::domain::subscribers::origin::Came;
use crate::domain::subscribers::signup_forms::{FormField, SignupForm};
use crate::http::form::FormData;

/// The hidden fields that carry where a signup came from: the referring page, then the
/// campaign tags of the page's address (docs/growth.md, "Where readers came from").
const CAME_FIELDS: [&str; 4] = ["referrer", "utm_source", "utm_medium", "utm_campaign"];

/// Where the reader of a page the site shows in answer to `req` came from: the page that
/// sent them (its `Referer`) and the campaign tags of the address they came by.
pub fn came_to_page(req: &Request) -> Came {
    let query = req.uri().query().unwrap_or_default();
    let tag = |key: &str| -> String {
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    Came {
        referrer: req.header("Referer").unwrap_or_default().to_string(),
        utm_source: tag("utm_source"),
        utm_medium: tag("utm_medium"),
        utm_campaign: tag("utm_campaign"),
    }
}

/// `came` as the hidden fields of a form, so its post carries them to the subscriber.
pub fn came_fields(came: &Came) -> Markup {
    let values = [
        &came.referrer,
        &came.utm_source,
        &came.utm_medium,
        &came.utm_campaign,
    ];
    html! {
        @for (name, value) in CAME_FIELDS.iter().zip(values) {
            @if !value.is_empty() { input type="hidden" name=(name) value=(value); }
        }
    }
}

/// Where a posted signup came from: the fields of [`came_fields`] (or the script's), else
/// the post's own `Referer`, the page holding the form.
pub fn came_from(req: &Request, fields: &FormData) -> Came {
    let posted = fields.get(CAME_FIELDS[0]);
    Came {
        referrer: match posted.is_empty() {
            true => req.header("Referer").unwrap_or_default().to_string(),
            false => posted.to_string(),
        },
        utm_source: fields.get(CAME_FIELDS[1]).to_string(),
        utm_medium: fields.get(CAME_FIELDS[2]).to_string(),
        utm_campaign: fields.get(CAME_FIELDS[3]).to_string(),
    }
}

/// The form posting to `action` (the form's address on its site). `started` is the signed
/// time the site shows it and `came` its [`came_fields`], on the site's own page only.
pub fn form_markup(
    form: &SignupForm,
    action: &str,
    started: Option<&str>,
    came: Option<Markup>,
) -> Markup {
    html! {
        form.broadsheet-form method="post" action=(action) data-broadsheet-form {
            label { "E-mail address " input type="email" name="email" required autocomplete="email" maxlength="254"; }
            @if form.ask_name {
                label { "Name (optional) " input type="text" name="name" autocomplete="name" maxlength="100"; }
            }
            @for asked in &form.fields { (field_input(asked)) }
            // The honeypot: hidden from people (and from screen readers), filled by bots.
            div hidden {
                label { "Leave this empty " input type="text" name=(HONEYPOT_FIELD) tabindex="-1" autocomplete="off"; }
            }
            @if let Some(started) = started {
                input type="hidden" name=(STARTED_FIELD) value=(started);
            }
            @if let Some(came) = came { (came) }
            button type="submit" { (form.button_text) }
        }
    }
}

/// The name of the input of a custom field: `fields[first_name]`.
pub const FIELD_PREFIX: &str = "fields[";

/// The input of one custom field the form asks for, by its type.
fn field_input(asked: &FormField) -> Markup {
    let field = &asked.field;
    let name = format!("{FIELD_PREFIX}{}]", field.name);
    let label = match asked.required {
        true => field.label(),
        false => format!("{} (optional)", field.label()),
    };
    let required = asked.required;
    html! {
        @match field.field_type {
            FieldType::Boolean => label.check {
                input type="checkbox" name=(name) value="yes" required[required];
                " " (field.label())
            },
            FieldType::Choice => label {
                (label) " "
                select name=(name) required[required] {
                    option value="" { "Choose…" }
                    @for option in &field.options { option value=(option) { (option) } }
                }
            },
            FieldType::Number => label { (label) " " input type="number" step="any" name=(name) required[required]; },
            FieldType::Date => label { (label) " " input type="date" name=(name) required[required]; },
            FieldType::Text => label { (label) " " input type="text" name=(name) maxlength="500" required[required]; },
        }
    }
}

/// The custom field values of a form's post: each `fields[<name>]` as the name and its text.
pub fn posted_fields(fields: &FormData) -> Vec<(String, String)> {
    fields
        .pairs()
        .filter_map(|(key, value)| {
            let name = key.strip_prefix(FIELD_PREFIX)?.strip_suffix(']')?;
            Some((name.to_string(), value.to_string()))
        })
        .collect()
}

/// The snippet to paste: the form, then the optional script from `site_origin`.
pub fn snippet(form: &SignupForm, site_origin: &str) -> String {
    let action = format!("{site_origin}/f/{}", form.public_id);
    let script = html! { script src={ (site_origin) "/forms.js" } defer {} };
    format!(
        "{}\n<!-- Optional: solves the anti-bot check in the background and shows the answer in the page. -->\n{}",
        form_markup(form, &action, None, None).into_string(),
        script.into_string()
    )
}
