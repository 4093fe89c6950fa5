//! The account page and what it changes: the time zone, the sessions, the password, the
//! e-mail address (confirmed at the new address) and deleting the account (after its data
//! export is offered and its address is typed). The rules are in
//! `domain::accounts::changes`; this parses the forms and shows the answers.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::layout::{csrf_field, errors, page};
use super::{Ctx, FormData, State, WebError, WebResult, invalid_fields, render, see_other};
use crate::domain::accounts::{self, SessionInfo, changes};
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::{DomainError, FieldErrors};

/// The account page's forms that can come back with messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Password,
    Email,
}

/// "30 days", "2 hours", "1 minute": a lifetime for people.
fn span(lifetime: jiff::SignedDuration) -> String {
    let minutes = lifetime.as_mins();
    let (n, unit) = if minutes % 1440 == 0 {
        (minutes / 1440, "day")
    } else if minutes % 60 == 0 {
        (minutes / 60, "hour")
    } else {
        (minutes, "minute")
    };
    crate::http::plural::count(n, unit, &format!("{unit}s"))
}

/// The account page, with `problems` shown in the form they belong to.
async fn account_page(
    ctx: &Ctx,
    state: &State,
    problems: Option<(Part, &FieldErrors, &str)>,
) -> WebResult {
    let user = ctx.user()?.clone();
    let current = ctx.session_token().unwrap_or_default().to_string();
    let lifetimes = state.sessions;
    let sessions = state
        .db
        .run(move |conn| accounts::sessions_of(conn, user.id, &current, &lifetimes))
        .await?;
    let status = if problems.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    let shown = |part: Part| match problems {
        Some((p, found, _)) if p == part => errors(found),
        _ => html! {},
    };
    let typed_email = match problems {
        Some((Part::Email, _, typed)) => typed.to_string(),
        _ => String::new(),
    };
    render(
        status,
        page(
            ctx,
            "Your account",
            true,
            html! {
                h1 { "Your account" }
                p { "Signed in as " strong #account-email { (ctx.user()?.email) } "." }
                (super::time_zones::account_section(ctx))
                (sessions_section(ctx, &sessions, lifetimes))
                h2 #password { "Password" }
                p.muted { "Changing it signs out every other session of the account." }
                (shown(Part::Password))
                form.stack method="post" action="/account/password" {
                    (csrf_field(ctx))
                    label { "Current password" input type="password" name="current_password" autocomplete="current-password" required; }
                    label { "New password (at least 8 characters)" input type="password" name="password" autocomplete="new-password" minlength="8" required; }
                    label { "New password again" input type="password" name="password_confirmation" autocomplete="new-password" minlength="8" required; }
                    button type="submit" { "Change password" }
                }
                h2 #email { "E-mail address" }
                p.muted { "A link goes to the new address; the account moves to it when the link is followed, and the old address is told." }
                (shown(Part::Email))
                form.stack method="post" action="/account/email" {
                    (csrf_field(ctx))
                    label { "New e-mail address" input type="email" name="email" value=(typed_email) autocomplete="email" required; }
                    label { "Current password" input type="password" name="current_password" autocomplete="current-password" required; }
                    button type="submit" { "Send the confirmation link" }
                }
                h2 #delete { "Delete the account" }
                p { "Deletes the account and its newsletters, their subscribers, issues and reports, for good. "
                    a href="/account/delete" { "Delete the account…" } }
            },
        ),
    )
}

/// The live sessions, and a form that ends all the others.
fn sessions_section(
    ctx: &Ctx,
    sessions: &[SessionInfo],
    lifetimes: accounts::SessionLifetimes,
) -> Markup {
    let zone = ctx.zone();
    let others = sessions.iter().filter(|s| !s.current).count();
    html! {
        h2 { "Sessions" }
        p.muted { "A session ends after " (span(lifetimes.idle)) " without a visit, and " (span(lifetimes.absolute)) " after signing in at the latest." }
        table #sessions {
            thead { tr { th { "Signed in" } th { "Last seen" } th { span.visually-hidden { "Actions" } } } }
            tbody {
                @for s in sessions {
                    tr {
                        td { (super::time_zones::shown(s.created_at, &zone)) }
                        td { (super::time_zones::shown(s.last_seen_at, &zone)) }
                        td { @if s.current { "this browser" } }
                    }
                }
            }
        }
        @if others > 0 {
            form.stack method="post" action="/account/sessions" {
                (csrf_field(ctx))
                input type="hidden" name="_method" value="delete";
                button type="submit" { "Sign out all other sessions (" (others) ")" }
            }
        } @else {
            p.muted { "No other sessions." }
        }
    }
}

/// `GET /account`: who is signed in, the time zone, the sessions, and the forms that change
/// the account.
#[handler]
pub async fn account(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    account_page(&ctx, state, None).await
}

/// `DELETE /account/sessions` (or POST with `_method=delete`): ends every session of the
/// account but this one.
#[handler]
pub async fn sign_out_others(req: &Request, body: Body, Data(state): Data<&State>) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let user_id = ctx.user()?.id;
    let current = current_session(&ctx)?;
    let ended = state
        .db
        .run(move |conn| accounts::sign_out_others(conn, user_id, &current))
        .await?;
    ctx.notice_next(req, &others_ended(ended));
    see_other("/account")
}

/// The token of the session this request came with (kept when others are ended).
fn current_session(ctx: &Ctx) -> Result<String, WebError> {
    Ok(ctx
        .session_token()
        .ok_or(WebError::SignInRequired)?
        .to_string())
}

fn others_ended(ended: usize) -> String {
    match ended {
        1 => "1 other session is signed out.".to_string(),
        n => format!("{n} other sessions are signed out."),
    }
}

/// `POST /account/password`: a new password, after the current one; other sessions end.
#[handler]
pub async fn change_password(req: &Request, body: Body, Data(state): Data<&State>) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let user_id = ctx.user()?.id;
    let current = current_session(&ctx)?;
    let (old, new, again) = (
        form.get("current_password").to_string(),
        form.get("password").to_string(),
        form.get("password_confirmation").to_string(),
    );
    match state
        .db
        .run(move |conn| changes::change_password(conn, user_id, &current, &old, &new, &again))
        .await
    {
        Ok(ended) => {
            ctx.notice_next(
                req,
                &format!("Your password is changed. {}", others_ended(ended)),
            );
            see_other("/account")
        }
        Err(e) => {
            let found = invalid_fields(e)?;
            account_page(&ctx, state, Some((Part::Password, &found, ""))).await
        }
    }
}

/// `POST /account/email`: mails a link to the new address, after the current password.
#[handler]
pub async fn request_email_change(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let user_id = ctx.user()?.id;
    let (password, typed) = (
        form.get("current_password").to_string(),
        form.get("email").to_string(),
    );
    let (urls, asked) = (state.urls.clone(), typed.clone());
    match state
        .db
        .run(move |conn| changes::request_email_change(conn, &urls, user_id, &password, &asked))
        .await
    {
        Ok(new_email) => {
            ctx.notice_next(
                req,
                &format!(
                    "A link is on its way to {new_email}. Your account moves to that address when the link is followed."
                ),
            );
            see_other("/account")
        }
        Err(e) => {
            let found = invalid_fields(e)?;
            account_page(&ctx, state, Some((Part::Email, &found, &typed))).await
        }
    }
}

/// `GET /account/email/<token>`: asks before moving the account (a mail scanner that
/// follows links must not change anything).
#[handler]
pub async fn email_change_form(
    req: &Request,
    Path(token): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let lookup = token.clone();
    let target = state
        .db
        .run(move |conn| changes::email_change_target(conn, &lookup))
        .await;
    let new_email = match target {
        Ok(email) => email,
        Err(DomainError::NotFound(_)) => return expired_link(req, &ctx),
        Err(e) => return Err(e.into()),
    };
    render(
        StatusCode::OK,
        page(
            &ctx,
            "Confirm your new address",
            true,
            html! {
                h1 { "Use " (new_email) "?" }
                p { "Your Broadsheet account will use this address to sign in and for its mail." }
                form.stack method="post" action={ "/account/email/" (token) } {
                    (csrf_field(&ctx))
                    button type="submit" { "Use this address" }
                }
            },
        ),
    )
}

/// `POST /account/email/<token>`: the account takes the new address.
#[handler]
pub async fn confirm_email_change(
    req: &Request,
    Path(token): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let urls = state.urls.clone();
    match state
        .db
        .run(move |conn| changes::confirm_email_change(conn, &urls, &token))
        .await
    {
        Ok(new_email) => {
            ctx.notice_next(
                req,
                &format!("Your account now uses {new_email}. Sign in with it from now on."),
            );
            see_other(if ctx.user.is_some() {
                "/account"
            } else {
                "/session/new"
            })
        }
        Err(DomainError::NotFound(_)) => expired_link(req, &ctx),
        Err(e) => {
            let found = invalid_fields(e)?;
            ctx.notice_next(
                req,
                &format!(
                    "The address could not be used: {}",
                    found.sentences().join(" ")
                ),
            );
            see_other("/account")
        }
    }
}

fn expired_link(req: &Request, ctx: &Ctx) -> WebResult {
    ctx.notice_next(
        req,
        "That link has expired or was already used. Ask for a new one on your account page.",
    );
    see_other("/account")
}

/// `GET /account/delete`: what deleting takes away, each newsletter's export first, and the
/// form.
#[handler]
pub async fn delete_form(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    delete_page(&ctx, state, None).await
}

async fn delete_page(ctx: &Ctx, state: &State, found: Option<&FieldErrors>) -> WebResult {
    let owner = ctx.user()?.id;
    let owned: Vec<Newsletter> = state
        .db
        .run(move |conn| newsletters::list_owned(conn, owner))
        .await?;
    let email = ctx.user()?.email.clone();
    render(
        if found.is_some() {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::OK
        },
        page(
            ctx,
            "Delete the account",
            true,
            html! {
                p { a href="/account" { "← Your account" } }
                h1 { "Delete the account?" }
                p { "This deletes the account " strong { (email) } " and, for good, every newsletter it owns: their subscribers, issues, sites, reports and webhooks. Nothing more is sent. It cannot be undone." }
                @if !owned.is_empty() {
                    h2 { "First, take your data" }
                    p.muted { "Download each newsletter's subscribers; its issues are on its site and in the API until you delete." }
                    ul {
                        @for n in &owned {
                            li { (n.name) ": " a href={ "/newsletters/" (n.id) "/subscribers/export.csv" } download { "subscribers (CSV)" } }
                        }
                    }
                }
                @if let Some(found) = found { (errors(found)) }
                form.stack method="post" action="/account/delete" {
                    (csrf_field(ctx))
                    label { "Type your e-mail address, " (email) ", to confirm" input type="text" name="confirmation" autocomplete="off" required; }
                    label { "Current password" input type="password" name="current_password" autocomplete="current-password" required; }
                    button.danger type="submit" { "Delete the account and its newsletters" }
                    " "
                    a.button.secondary href="/account" { "Cancel" }
                }
            },
        ),
    )
}

/// `POST /account/delete`: deletes the account (its newsletters are purged by a job), ends
/// the session and leaves.
#[handler]
pub async fn delete(req: &Request, body: Body, Data(state): Data<&State>) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let user_id = ctx.user()?.id;
    let (typed, password) = (
        form.get("confirmation").to_string(),
        form.get("current_password").to_string(),
    );
    match state
        .db
        .run(move |conn| changes::delete_account(conn, user_id, &typed, &password))
        .await
    {
        Ok(()) => {
            ctx.sign_out(req);
            ctx.notice_next(
                req,
                "Your account is deleted. Its newsletters are being removed.",
            );
            see_other("/")
        }
        Err(e) => {
            let found = invalid_fields(e)?;
            delete_page(&ctx, state, Some(&found)).await
        }
    }
}
