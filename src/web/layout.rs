//! The page shell and the form pieces every page shares.

use maud::{DOCTYPE, Markup, html};

use super::Ctx;
use super::csrf;
use crate::domain::FieldErrors;

/// A full page with the top bar; `narrow` for the account forms.
pub fn page(ctx: &Ctx, title: &str, narrow: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Broadsheet" }
                link rel="stylesheet" href="/assets/app.css";
            }
            body {
                header.top {
                    nav aria-label="Main" {
                        a.brand href="/" { "Broadsheet" }
                        @if let Some(user) = &ctx.user {
                            a href="/newsletters" { "Newsletters" }
                            span.muted { (user.email) }
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
            }
        }
    }
}

/// A bare page for errors, usable without a request context.
pub fn error_page(title: &str, message: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Broadsheet" }
                link rel="stylesheet" href="/assets/app.css";
            }
            body {
                main.narrow {
                    h1 { (title) }
                    p { (message) }
                    p { a href="/" { "Back to Broadsheet" } }
                }
            }
        }
    }
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
