//! Sign-up, e-mail confirmation, sign-in and out, password reset, and the account page with
//! its sessions.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::layout::{csrf_field, errors, field, page};
use super::time_zones;
use super::{Ctx, FormData, State, WebResult, client_address, invalid_fields, render, see_other};
use crate::domain::accounts::{self, SignIn, SignUp};
use crate::domain::{DomainError, FieldErrors};

#[handler]
pub async fn home(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    if ctx.user.is_some() {
        return see_other("/newsletters");
    }
    render(
        StatusCode::OK,
        page(
            &ctx,
            "Newsletters, self-hosted",
            false,
            html! {
                h1 { "Write it, send it, publish it." }
                p { "Broadsheet runs your newsletter from one small server: a dashboard to write and send issues, a public site with an archive and a feed, a REST API and signed webhooks." }
                p { a.button href="/signup" { "Create an account" } " " a href="/session/new" { "Sign in" } }
            },
        ),
    )
}

fn signup_page(ctx: &Ctx, form: &SignUp, problems: &FieldErrors) -> Markup {
    page(
        ctx,
        "Sign up",
        true,
        html! {
            h1 { "Create your account" }
            (errors(problems))
            form.stack method="post" action="/signup" {
                (csrf_field(ctx))
                (field("E-mail address", "email", "user[email_address]", &form.email, "email", true))
                (field("Password (at least 8 characters)", "password", "user[password]", "", "new-password", true))
                (field("Confirm password", "password", "user[password_confirmation]", "", "new-password", true))
                (time_zones::browser_zone_field())
                button type="submit" { "Sign up" }
            }
            p.muted { "Already have an account? " a href="/session/new" { "Sign in" } }
        },
    )
}

#[handler]
pub async fn signup_form(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    render(
        StatusCode::OK,
        signup_page(&ctx, &SignUp::default(), &FieldErrors::new()),
    )
}

#[handler]
pub async fn signup(req: &Request, body: Body, Data(state): Data<&State>) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let input = SignUp {
        email: form.get("user[email_address]").to_string(),
        password: form.get("user[password]").to_string(),
        password_confirmation: form.get("user[password_confirmation]").to_string(),
        time_zone: form.get("user[time_zone]").to_string(),
    };
    let (urls, client) = (state.urls.clone(), client_address(req, state));
    let attempt = input.clone();
    match state
        .db
        .run(move |conn| accounts::sign_up(conn, &urls, &client, &attempt))
        .await
    {
        Ok(_) => see_other("/email_confirmation_pending"),
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            signup_page(&ctx, &input, &invalid_fields(e)?),
        ),
    }
}

#[handler]
pub async fn confirmation_pending(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    render(
        StatusCode::OK,
        page(
            &ctx,
            "Check your inbox",
            true,
            html! {
                h1 { "Check your inbox" }
                p { "We sent you a link to confirm your e-mail address. Follow it to finish creating your account; it works for 24 hours." }
                p.muted { "No message? " a href="/email_confirmation_required" { "Send the link again" } }
            },
        ),
    )
}

#[handler]
pub async fn confirm(
    req: &Request,
    Path(token): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let lifetimes = state.sessions;
    match state
        .db
        .run(move |conn| accounts::confirm_email(conn, &token, &lifetimes))
        .await
    {
        Ok(session) => {
            ctx.sign_in(req, &session);
            ctx.notice_next(
                req,
                "Your e-mail address is confirmed. Welcome to Broadsheet!",
            );
            see_other("/newsletters")
        }
        Err(DomainError::NotFound(_)) => {
            ctx.notice_next(
                req,
                "That confirmation link has expired or was already used. Ask for a new one below.",
            );
            see_other("/email_confirmation_required")
        }
        Err(e) => Err(e.into()),
    }
}

#[handler]
pub async fn confirmation_required(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    render(
        StatusCode::OK,
        page(
            &ctx,
            "Confirm your e-mail address",
            true,
            html! {
                h1 { "Confirm your e-mail address" }
                p { "Your account needs a confirmed e-mail address. Enter it and we will send a new confirmation link." }
                form.stack method="post" action="/email_confirmation" {
                    (csrf_field(&ctx))
                    (field("E-mail address", "email", "email_address", "", "email", true))
                    button type="submit" { "Send a new link" }
                }
            },
        ),
    )
}

#[handler]
pub async fn resend_confirmation(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    Ctx::load_verified(req, state, &form).await?;
    let (urls, email) = (state.urls.clone(), form.get("email_address").to_string());
    state
        .db
        .run(move |conn| accounts::resend_confirmation(conn, &urls, &email))
        .await?;
    see_other("/email_confirmation_pending")
}

fn sign_in_page(ctx: &Ctx, email: &str, problems: &FieldErrors) -> Markup {
    page(
        ctx,
        "Sign in",
        true,
        html! {
            h1 { "Sign in" }
            (errors(problems))
            form.stack method="post" action="/session" {
                (csrf_field(ctx))
                (field("E-mail address", "email", "email_address", email, "email", true))
                (field("Password", "password", "password", "", "current-password", true))
                button type="submit" { "Sign in" }
            }
            p.muted { a href="/passwords/new" { "Forgot your password?" } " · " a href="/signup" { "Create an account" } }
        },
    )
}

#[handler]
pub async fn sign_in_form(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    render(StatusCode::OK, sign_in_page(&ctx, "", &FieldErrors::new()))
}

/// `POST /session`: signs in, or signs out when the form says `_method=delete`.
#[handler]
pub async fn session_post(req: &Request, body: Body, Data(state): Data<&State>) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    if form.get("_method").eq_ignore_ascii_case("delete") {
        return end_session(req, state, &ctx).await;
    }
    let (client, email, password) = (
        client_address(req, state),
        form.get("email_address").to_string(),
        form.get("password").to_string(),
    );
    let (typed, lifetimes) = (email.clone(), state.sessions);
    match state
        .db
        .run(move |conn| accounts::sign_in(conn, &client, &email, &password, &lifetimes))
        .await
    {
        Ok(SignIn::SignedIn(session)) => {
            ctx.sign_in(req, &session);
            see_other("/newsletters")
        }
        Ok(SignIn::Unconfirmed) => {
            ctx.notice_next(
                req,
                "Please confirm your e-mail address first: we can send the link again.",
            );
            see_other("/email_confirmation_required")
        }
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            sign_in_page(&ctx, &typed, &invalid_fields(e)?),
        ),
    }
}

/// `DELETE /session` (a real DELETE carries no form, so it is checked by SameSite alone).
#[handler]
pub async fn sign_out(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    end_session(req, state, &ctx).await
}

async fn end_session(req: &Request, state: &State, ctx: &Ctx) -> WebResult {
    if let Some(token) = ctx.session_token().map(str::to_string) {
        state
            .db
            .run(move |conn| accounts::sign_out(conn, &token))
            .await?;
    }
    ctx.sign_out(req);
    ctx.notice_next(req, "You are signed out.");
    see_other("/session/new")
}

#[handler]
pub async fn password_reset_form(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    render(
        StatusCode::OK,
        page(
            &ctx,
            "Reset your password",
            true,
            html! {
                h1 { "Reset your password" }
                p { "Enter your account's e-mail address and we will send you a link to choose a new password." }
                form.stack method="post" action="/passwords" {
                    (csrf_field(&ctx))
                    (field("E-mail address", "email", "email_address", "", "email", true))
                    button type="submit" { "Send the reset link" }
                }
            },
        ),
    )
}

#[handler]
pub async fn request_password_reset(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let (urls, email) = (state.urls.clone(), form.get("email_address").to_string());
    state
        .db
        .run(move |conn| accounts::request_password_reset(conn, &urls, &email))
        .await?;
    ctx.notice_next(
        req,
        "If that address has an account, a reset link is on its way. It works for one hour.",
    );
    see_other("/session/new")
}

fn new_password_page(ctx: &Ctx, token: &str, problems: &FieldErrors) -> Markup {
    page(
        ctx,
        "Choose a new password",
        true,
        html! {
            h1 { "Choose a new password" }
            (errors(problems))
            form.stack method="post" action={ "/passwords/" (token) } {
                (csrf_field(ctx))
                input type="hidden" name="_method" value="patch";
                (field("New password (at least 8 characters)", "password", "password", "", "new-password", true))
                (field("Confirm new password", "password", "password_confirmation", "", "new-password", true))
                button type="submit" { "Save the new password" }
            }
        },
    )
}

#[handler]
pub async fn new_password_form(
    req: &Request,
    Path(token): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let check = token.clone();
    if !state
        .db
        .run(move |conn| accounts::reset_link_is_live(conn, &check))
        .await?
    {
        ctx.notice_next(
            req,
            "That reset link has expired or was already used. Ask for a new one.",
        );
        return see_other("/passwords/new");
    }
    render(
        StatusCode::OK,
        new_password_page(&ctx, &token, &FieldErrors::new()),
    )
}

#[handler]
pub async fn set_password(
    req: &Request,
    Path(token): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let (password, confirmation) = (
        form.get("password").to_string(),
        form.get("password_confirmation").to_string(),
    );
    let used = token.clone();
    match state
        .db
        .run(move |conn| accounts::reset_password(conn, &used, &password, &confirmation))
        .await
    {
        Ok(()) => {
            ctx.sign_out(req);
            ctx.notice_next(req, "Your password is changed. Sign in with the new one.");
            see_other("/session/new")
        }
        Err(DomainError::NotFound(_)) => {
            ctx.notice_next(
                req,
                "That reset link has expired or was already used. Ask for a new one.",
            );
            see_other("/passwords/new")
        }
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            new_password_page(&ctx, &token, &invalid_fields(e)?),
        ),
    }
}
