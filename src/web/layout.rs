//! The page shell and the form pieces every page shares.

use maud::{DOCTYPE, Markup, html};

use super::Ctx;
use super::csrf;
use crate::domain::FieldErrors;
use crate::domain::newsletters::Newsletter;
use crate::domain::newsletters::operators;
use crate::http::public_page::{head_start, versioned_path};

/// The parts of one newsletter's dashboard, in the order its section bar shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Overview,
    Issues,
    Media,
    Subscribers,
    Stats,
    Webhooks,
    ApiKeys,
    Domains,
    Memberships,
    Forms,
    Settings,
}

impl Section {
    const ALL: [Section; 11] = [
        Section::Overview,
        Section::Issues,
        Section::Media,
        Section::Subscribers,
        Section::Stats,
        Section::Webhooks,
        Section::ApiKeys,
        Section::Domains,
        Section::Memberships,
        Section::Forms,
        Section::Settings,
    ];

    fn label(self) -> &'static str {
        match self {
            Section::Overview => "Overview",
            Section::Issues => "Issues",
            Section::Media => "Images",
            Section::Subscribers => "Subscribers",
            Section::Stats => "Stats",
            Section::Webhooks => "Webhooks",
            Section::ApiKeys => "API keys",
            Section::Domains => "Custom domains",
            Section::Memberships => "Memberships",
            Section::Forms => "Forms",
            Section::Settings => "Settings",
        }
    }

    /// The section's page, relative to `/newsletters/:id`.
    fn suffix(self) -> &'static str {
        match self {
            Section::Overview => "",
            Section::Issues => "/issues",
            Section::Media => "/media",
            Section::Subscribers => "/subscribers",
            Section::Stats => "/stats",
            Section::Webhooks => "/webhooks",
            Section::ApiKeys => "/api_keys",
            Section::Domains => "/custom_domains",
            Section::Memberships => "/memberships",
            Section::Forms => "/forms",
            Section::Settings => "/settings",
        }
    }
}

/// A page inside one newsletter's dashboard: the newsletter's name and its section bar above
/// `body`, so every section is one click from every other.
pub fn newsletter_page(
    ctx: &Ctx,
    newsletter: &Newsletter,
    section: Section,
    title: &str,
    body: Markup,
) -> Markup {
    let base = format!("/newsletters/{}", newsletter.id);
    page(
        ctx,
        &format!("{title} · {}", newsletter.name),
        false,
        html! {
            nav.sections aria-label="Newsletter" {
                a.name href=(base) { (newsletter.name) }
                @for s in Section::ALL {
                    @let current = s == section;
                    a href={ (base) (s.suffix()) } aria-current=[current.then_some("page")] { (s.label()) }
                }
            }
            (body)
        },
    )
}

/// What search engines show for the service's own pages (sign-up, sign-in, the dashboard).
const DESCRIPTION: &str =
    "Broadsheet: write your newsletter, send it by e-mail and publish it on its own site.";

/// The dashboard's stylesheet, embedded in the binary.
pub const APP_CSS: &str = include_str!("../../assets/app.css");

/// Where the pages link the stylesheet: the address changes with its content, so it is
/// cached for a year.
pub fn app_css_path() -> &'static str {
    static PATH: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| versioned_path("app", "css", APP_CSS));
    &PATH
}

/// Where the API's reference (Swagger UI, `api::routes`) is served; the footer of every
/// page and the API keys page link it.
pub const API_REFERENCE: &str = "/api/v1/docs";

/// The `<head>` every page of the dashboard shares.
fn head(title: &str) -> Markup {
    html! {
        head {
            (head_start(&format!("{title} · Broadsheet")))
            meta name="description" content=(DESCRIPTION);
            link rel="stylesheet" href=(app_css_path());
        }
    }
}

/// The line under every page: the API reference, and the way home.
fn footer() -> Markup {
    html! {
        footer.bottom {
            nav aria-label="Footer" {
                a href="/newsletters" { "Your newsletters" }
                a href=(API_REFERENCE) { "API reference" }
            }
        }
    }
}

/// A full page with the top bar; `narrow` for the account forms.
pub fn page(ctx: &Ctx, title: &str, narrow: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header.top {
                    nav aria-label="Main" {
                        a.brand href="/" { "Broadsheet" }
                        @if let Some(user) = &ctx.user {
                            a href="/newsletters" { "Newsletters" }
                            @if ctx.operator { a href=(operators::PAGE_PATH) { "Operator" } }
                            a href="/account" { (user.email) }
                            form.inline method="post" action="/session" {
                                (csrf_field(ctx))
                                input type="hidden" name="_method" value="delete";
                                button.link type="submit" { "Sign out" }
                            }
                        } @else {
                            a href="/session/new" { "Sign in" }
                            a href="/signup" { "Sign up" }
                        }
                    }
                }
                main.narrow[narrow] {
                    @if let Some(notice) = &ctx.notice {
                        p.notice role="status" { (notice) }
                    }
                    (body)
                }
                (footer())
            }
        }
    }
}

/// The page of an error (404, 403, 500, ...), in the dashboard's frame but without a request
/// context: the top bar names no account (the error may be that there is none), and its
/// links lead to the newsletter list, which asks to sign in when no one is.
pub fn error_page(title: &str, message: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body.error {
                header.top {
                    nav aria-label="Main" {
                        a.brand href="/" { "Broadsheet" }
                        a href="/newsletters" { "Newsletters" }
                        a href="/account" { "Account" }
                    }
                }
                main.narrow #error {
                    h1 { (title) }
                    p { (message) }
                    p { a href="/newsletters" { "Back to your newsletters" } }
                }
                (footer())
            }
        }
    }
}

/// A table in a box that scrolls sideways on a narrow screen: the box is a labelled region
/// that takes keyboard focus, so the part off screen can be scrolled to without a mouse (axe's
/// `scrollable-region-focusable`).
pub fn table_wrap(label: &str, table: Markup) -> Markup {
    html! { div.table-wrap tabindex="0" role="region" aria-label=(label) { (table) } }
}

/// A value to paste elsewhere (a DNS record, its name, an SPF line) in a box of its own that
/// wraps anywhere, so the longest DKIM key never widens the page, with a button that copies
/// it. The button is hidden until `/assets/widgets.js` runs ([`copy_script`], once per page):
/// without JavaScript the value is plain text to select. The button says "Copy", and to a
/// screen reader what it copies (`what`: "Copy the value"); `id` is the element's, which the
/// tests and the button find.
pub fn copyable(id: &str, what: &str, value: &str) -> Markup {
    html! {
        div.record {
            code.value id=(id) { (value) }
            button.secondary type="button" data-copy={ "#" (id) } hidden {
                "Copy" span.visually-hidden { " " (what) }
            }
        }
    }
}

/// The script of [`copyable`]'s buttons; a page that shows any includes it once.
pub fn copy_script() -> Markup {
    html! { script src="/assets/widgets.js" defer {} }
}

/// The hidden CSRF field every form carries.
pub fn csrf_field(ctx: &Ctx) -> Markup {
    html! { input type="hidden" name=(csrf::FIELD) value=(ctx.csrf_token); }
}

/// The error list above a form; nothing when there are no errors.
pub fn errors(errors: &FieldErrors) -> Markup {
    html! {
        @if !errors.is_empty() {
            ul.errors role="alert" {
                @for sentence in errors.sentences() { li { (sentence) } }
            }
        }
    }
}

/// A labelled input; `autocomplete` also names the browser's autofill hint.
pub fn field(
    label: &str,
    kind: &str,
    name: &str,
    value: &str,
    autocomplete: &str,
    required: bool,
) -> Markup {
    html! {
        label {
            (label)
            input type=(kind) name=(name) value=(value) autocomplete=(autocomplete) required[required];
        }
    }
}

/// A page that asks before a destructive action: what will happen, one button that sends
/// `DELETE` to `action` (through the form's `_method`, with the CSRF token), and a way back.
pub struct Confirmation<'a> {
    pub section: Section,
    /// The page's title ("Delete subscriber").
    pub title: &'a str,
    /// The question, as the heading ("Delete ann@example.com?").
    pub question: String,
    /// What the action does, in a sentence or two.
    pub consequences: Markup,
    /// Where the form goes (the thing's own URL, which takes `DELETE`).
    pub action: &'a str,
    /// The button's words ("Delete for good").
    pub button: &'a str,
    /// Where "Cancel" leads.
    pub back: &'a str,
}

/// The confirmation page of `confirm` in `newsletter`'s dashboard.
pub fn confirmation_page(ctx: &Ctx, newsletter: &Newsletter, confirm: Confirmation<'_>) -> Markup {
    newsletter_page(
        ctx,
        newsletter,
        confirm.section,
        confirm.title,
        html! {
            h1 { (confirm.question) }
            p { (confirm.consequences) }
            form.inline method="post" action=(confirm.action) {
                (csrf_field(ctx))
                input type="hidden" name="_method" value="delete";
                button.danger type="submit" { (confirm.button) }
            }
            " "
            a.button.secondary href=(confirm.back) { "Cancel" }
        },
    )
}
