//! The markup of a signup form (docs/growth.md): the snippet the dashboard gives to paste into
//! any page, which the dashboard also previews and the site's own page of the form shows.
//! It works without JavaScript (a plain POST to the newsletter's site); the optional script
//! (`assets/forms.js`) solves the proof-of-work and shows the answer in the page.

use maud::{Markup, html};

use crate::domain::subscribers::form_guard::{HONEYPOT_FIELD, STARTED_FIELD};
use crate::domain::subscribers::signup_forms::SignupForm;

/// The form posting to `action` (the form's address on its site). `started` is the signed
/// time the site shows it, on the site's own page only.
pub fn form_markup(form: &SignupForm, action: &str, started: Option<&str>) -> Markup {
    html! {
        form.broadsheet-form method="post" action=(action) data-broadsheet-form {
            label { "E-mail address " input type="email" name="email" required autocomplete="email" maxlength="254"; }
            @if form.ask_name {
                label { "Name (optional) " input type="text" name="name" autocomplete="name" maxlength="100"; }
            }
            // The honeypot: hidden from people (and from screen readers), filled by bots.
            div hidden {
                label { "Leave this empty " input type="text" name=(HONEYPOT_FIELD) tabindex="-1" autocomplete="off"; }
            }
            @if let Some(started) = started {
                input type="hidden" name=(STARTED_FIELD) value=(started);
            }
            button type="submit" { (form.button_text) }
        }
    }
}

/// The snippet to paste: the form, then the optional script from `site_origin`.
pub fn snippet(form: &SignupForm, site_origin: &str) -> String {
    let action = format!("{site_origin}/f/{}", form.public_id);
    let script = html! { script src={ (site_origin) "/forms.js" } defer {} };
    format!(
        "{}\n<!-- Optional: solves the anti-bot check in the background and shows the answer in the page. -->\n{}",
        form_markup(form, &action, None).into_string(),
        script.into_string()
    )
}
