//! Readers on a newsletter's site (docs/memberships.md): sign-in by a mailed one-time link,
//! the account page (membership, upgrade, billing, a new address, leaving), the paywall of
//! members and paid issues, and the endpoint Stripe's webhooks are sent to.
//!
//! The session cookie is the site host's own (no `Domain`, `__Host-` on https), so a
//! session of one newsletter's site means nothing on another's or on the dashboard.

use maud::{Markup, html};
use poem::http::StatusCode;
use poem::web::{Data, Path, Query};
use poem::{Body, Request, Response, handler};
use serde::Deserialize;

use super::pages::{answer, csrf_token, link_button, verified_form};
use super::{Site, SiteError, SiteResult};
use crate::domain::DomainError;
use crate::domain::delivery::tracking::unsubscribe_subscriber;
use crate::domain::issues::{Issue, Visibility};
use crate::domain::newsletters::paid_plans::{self, Plan};
use crate::domain::subscribers::memberships::{MemberStatus, Membership};
use crate::domain::subscribers::preferences;
use crate::domain::subscribers::readers::{self, Reader};
use crate::domain::subscribers::stripe_events::{self, Applied, Event};
use crate::http::client::client_address;
use crate::http::cookies::{cookie, read_cookie, removal};
use crate::http::csrf;
use crate::http::form::FormData;
use crate::http::headers::Policy;
use crate::payments::{Checkout, Stripe};
use crate::state::AppState;

type State = std::sync::Arc<AppState>;

/// The reader session's cookie.
const SESSION_COOKIE: &str = "reader";
/// The largest Stripe event read; Stripe's are a few kilobytes.
const EVENT_MAX_BYTES: usize = 512 * 1024;

/// The signed-in reader of this request, if any.
pub(super) async fn current_reader(
    req: &Request,
    state: &State,
    site: &Site,
) -> Result<Option<Reader>, SiteError> {
    let Some(session) = read_cookie(req, state, SESSION_COOKIE) else {
        return Ok(None);
    };
    let nid = site.0.id;
    state
        .db
        .run(move |conn| readers::reader(conn, nid, &session))
        .await
        .map_err(|e| SiteError::domain(e, site, "reading a reader's session"))
}

/// Pages that differ by reader are never kept by a cache.
pub(super) fn personal(mut response: Response) -> Response {
    response.headers_mut().insert(
        "Cache-Control",
        poem::http::HeaderValue::from_static("private, no-store"),
    );
    response
}

/// Whether `reader` may read `issue`'s text.
pub(super) fn may_read(issue: &Issue, reader: Option<&Reader>) -> bool {
    issue.visibility.lets_read(
        reader.is_some(),
        reader.is_some_and(|r| r.membership().has_paid_access()),
    )
}

/// The plan readers are offered (`paid_plans::offered`: once Stripe is connected).
pub(super) async fn offer(state: &State, site: &Site) -> Result<Option<Plan>, SiteError> {
    let nid = site.0.id;
    state
        .db
        .run(move |conn| paid_plans::offered(conn, nid))
        .await
        .map_err(|e| SiteError::domain(e, site, "reading the paid plan"))
}

/// The plan's prices in words: `5.00 USD a month or 50.00 USD a year`.
pub(super) fn prices(plan: &Plan) -> String {
    let mut parts = Vec::new();
    if let Some(m) = plan.monthly_amount {
        parts.push(format!("{} a month", paid_plans::money(m, &plan.currency)));
    }
    if let Some(y) = plan.yearly_amount {
        parts.push(format!("{} a year", paid_plans::money(y, &plan.currency)));
    }
    parts.join(" or ")
}

/// What a paid plan offers, on the subscribe page and the paywall.
pub(super) fn plan_card(plan: &Plan) -> Markup {
    html! {
        div.plan {
            p { strong { "Paid membership: " (prices(plan)) } }
            @if plan.trial_days > 0 { p.muted { "The first " (plan.trial_days) " days are free." } }
            @if !plan.description.is_empty() { p { (plan.description) } }
        }
    }
}

/// What a reader who may not read `issue` sees instead of its text.
pub(super) fn paywall(issue: &Issue, reader: Option<&Reader>, plan: Option<&Plan>) -> Markup {
    html! {
        section.card.paywall aria-labelledby="paywall" {
            @match issue.visibility {
                Visibility::Members => {
                    h2 id="paywall" { "This issue is for subscribers" }
                    p { "Sign in with the address you subscribed with to read the rest." }
                    a.button href="/signin" { "Sign in" }
                    p.muted { "Not subscribed yet? " a href="/subscribe" { "Subscribe" } ", then sign in." }
                }
                _ => {
                    h2 id="paywall" { "This issue is for paid members" }
                    @if let Some(plan) = plan { (plan_card(plan)) }
                    @if reader.is_some() {
                        a.button href="/account" { "Upgrade to read it" }
                    } @else {
                        p { "Paid members sign in with the address they subscribed with." }
                        a.button href="/signin" { "Sign in" }
                        p.muted { "Not subscribed yet? " a href="/subscribe" { "Subscribe" } ", sign in, then upgrade." }
                    }
                }
            }
        }
    }
}

fn sign_in_form(req: &Request, state: &State, email: &str) -> Markup {
    html! {
        form.subscribe method="post" action="/signin" {
            input type="hidden" name=(csrf::FIELD) value=(csrf_token(req, state));
            label { "E-mail address" input type="email" name="email" value=(email) required autocomplete="email" maxlength="254"; }
            button type="submit" { "E-mail me a sign-in link" }
        }
    }
}

#[handler]
pub async fn sign_in_page(
    req: &Request,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    Ok(personal(answer(
        state,
        site,
        &format!("Sign in to {}", site.0.name),
        html! {
            p { "Subscribers sign in without a password: we e-mail you a link." }
            (sign_in_form(req, state, ""))
        },
    )))
}

#[handler]
pub async fn sign_in(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let form = verified_form(
        req,
        state,
        body,
        "Please go back, reload the page and try again.",
    )
    .await?;
    let email = form.get("email").to_string();
    let (urls, newsletter, client) = (
        state.urls.clone(),
        site.0.clone(),
        client_address(req, state),
    );
    let typed = email.clone();
    let asked = state
        .db
        .run(move |conn| readers::request_link(conn, &urls, &newsletter, &typed, &client))
        .await;
    match asked {
        Ok(()) => Ok(personal(answer(
            state,
            site,
            "Check your inbox",
            html! {
                p { "If " strong { (email.trim()) } " is subscribed to " (site.0.name) ", a sign-in link is on its way. It works once, for 15 minutes." }
                p.muted { "Nothing there after a few minutes? Look in your spam folder, or " a href="/signin" { "try again" } "." }
            },
        ))),
        Err(DomainError::Invalid(_, problems)) => {
            let mut page = answer(
                state,
                site,
                &format!("Sign in to {}", site.0.name),
                html! {
                    ul.errors role="alert" { @for sentence in problems.sentences() { li { (sentence) } } }
                    (sign_in_form(req, state, &email))
                },
            );
            page.set_status(StatusCode::UNPROCESSABLE_ENTITY);
            Ok(personal(page))
        }
        Err(e) => Err(SiteError::domain(e, site, "mailing a sign-in link")),
    }
}

#[handler]
pub async fn link_page(
    req: &Request,
    Path(token): Path<String>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    Ok(personal(link_button(
        req,
        state,
        site,
        &format!("Sign in to {}", site.0.name),
        html! {},
        &format!("/signin/{token}"),
        "Sign in",
    )))
}

/// Uses a reader's mailed link by its button: `apply` runs once the form's token fits; a
/// used or expired link is the expired page.
async fn used_link<T: Send + 'static>(
    req: &Request,
    state: &State,
    site: &Site,
    body: Body,
    context: &str,
    apply: impl FnOnce(&mut rusqlite::Connection) -> Result<T, DomainError> + Send + 'static,
) -> Result<T, SiteError> {
    verified_form(
        req,
        state,
        body,
        "Please follow the link in the e-mail again.",
    )
    .await?;
    match state.db.run(apply).await {
        Ok(done) => Ok(done),
        Err(DomainError::NotFound(_)) => Err(SiteError::SignInExpired),
        Err(e) => Err(SiteError::domain(e, site, context)),
    }
}

#[handler]
pub async fn follow_link(
    req: &Request,
    Path(token): Path<String>,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let nid = site.0.id;
    let session = used_link(req, state, site, body, "signing a reader in", move |conn| {
        readers::sign_in(conn, nid, &token)
    })
    .await?;
    start_session(req, state, &session);
    Ok(see_other("/account"))
}

/// Sets the cookie of the reader session `session` on the answer to `req`.
pub(super) fn start_session(req: &Request, state: &State, session: &str) {
    req.cookie().add(cookie(state, SESSION_COOKIE, session));
}

pub(super) fn see_other(to: &str) -> Response {
    Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header("Location", to)
        .header("Cache-Control", "no-store")
        .finish()
}

/// The signed-in reader, or the answer that sends them to sign in.
async fn signed_in(req: &Request, state: &State, site: &Site) -> Result<Reader, Response> {
    match current_reader(req, state, site).await {
        Ok(Some(reader)) => Ok(reader),
        Ok(None) => Err(see_other("/signin")),
        Err(e) => Err(e.on_site(&state.urls, &site.0)),
    }
}

/// A form of the account page, posted: the signed-in reader and the form once its token
/// fits; else the answer (sign in first, or the form's refusal).
pub(super) async fn reader_post(
    req: &Request,
    state: &State,
    site: &Site,
    body: Body,
) -> Result<(Reader, FormData), Response> {
    let reader = signed_in(req, state, site).await?;
    match verified_form(
        req,
        state,
        body,
        "Please reload your account page and try again.",
    )
    .await
    {
        Ok(form) => Ok((reader, form)),
        Err(e) => Err(e.on_site(&state.urls, &site.0)),
    }
}

/// A membership in a sentence, dates in the newsletter's time zone.
fn membership_words(m: &Membership, site: &Site) -> String {
    let day =
        |at: Option<crate::clock::Timestamp>| crate::http::public_page::day(at, &site.0.time_zone);
    let every = match m.interval {
        Some(crate::domain::subscribers::memberships::Interval::Year) => " (yearly)",
        Some(crate::domain::subscribers::memberships::Interval::Month) => " (monthly)",
        None => "",
    };
    match m.status {
        MemberStatus::Free => "Free membership.".to_string(),
        MemberStatus::Paid => match m.until {
            Some(_) => format!("Paid member{every}. Renews on {}.", day(m.until)),
            None => format!("Paid member{every}."),
        },
        MemberStatus::Trialing => format!("Free trial until {}.", day(m.until)),
        MemberStatus::PastDue => format!(
            "Paid member{every}, but the last payment failed: update your card under Billing. Access lasts until {}.",
            day(m.until)
        ),
        MemberStatus::Canceled => format!("Canceled: paid access lasts until {}.", day(m.until)),
        MemberStatus::Comped => match m.until {
            Some(_) => format!(
                "Paid access, a gift of {}, until {}.",
                site.0.name,
                day(m.until)
            ),
            None => format!("Paid access, a gift of {}.", site.0.name),
        },
    }
}

#[derive(Deserialize)]
pub struct AccountQuery {
    upgraded: Option<String>,
    /// Back from a saved preference.
    saved: Option<String>,
}

#[handler]
pub async fn account(
    req: &Request,
    Query(query): Query<AccountQuery>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let reader = match signed_in(req, state, site).await {
        Ok(reader) => reader,
        Err(response) => return Ok(response),
    };
    let plan = offer(state, site).await?;
    let (has_customer, topics) = {
        let (r, nid) = (reader.clone(), site.0.id);
        state
            .db
            .run(move |conn| {
                let customer = readers::stripe_customer(conn, &r)?;
                Ok::<_, DomainError>((customer.is_some(), preferences::topics(conn, nid)?))
            })
            .await
            .map_err(|e| SiteError::domain(e, site, "reading a reader's account"))?
    };
    let m = reader.membership();
    let token = csrf_token(req, state);
    let s = &reader.subscriber;
    let mut page = personal(answer(
        state,
        site,
        "Your account",
        html! {
            @if query.saved.is_some() {
                p role="status" { "Saved." }
            }
            @if query.upgraded.is_some() && !m.has_paid_access() {
                p role="status" { "Thank you! Stripe is confirming your payment; this page shows it in a moment. " a href="/account" { "Reload" } }
            }
            p { "Signed in as " strong { (s.email) } "." }
            @if s.status != crate::domain::subscribers::Status::Active {
                p.muted { "You do not receive " (site.0.name) " by e-mail at the moment." }
            }
            h2 { "Membership" }
            p { (membership_words(m, site)) }
            @if let Some(plan) = plan.as_ref().filter(|_| !m.has_paid_access()) {
                (plan_card(plan))
                @for (interval, amount, label) in [
                    ("month", plan.monthly_amount, "Upgrade monthly"),
                    ("year", plan.yearly_amount, "Upgrade yearly"),
                ] {
                    @if let Some(amount) = amount {
                        // The price shown goes with the press: a price changed since is refused.
                        form.stack method="post" action="/account/upgrade" {
                            input type="hidden" name=(csrf::FIELD) value=(token);
                            input type="hidden" name="interval" value=(interval);
                            input type="hidden" name="amount" value=(amount);
                            button type="submit" { (label) " (" (paid_plans::money(amount, &plan.currency)) ")" }
                        }
                    }
                }
            }
            @if has_customer && plan.is_some() {
                form method="post" action="/account/billing" {
                    input type="hidden" name=(csrf::FIELD) value=(token);
                    button.secondary type="submit" { "Manage billing" }
                }
            }
            (super::preferences::sections(req, state, site, &reader, &topics))
            h2 { "Your address" }
            form.stack method="post" action="/account/email" {
                input type="hidden" name=(csrf::FIELD) value=(token);
                label { "New e-mail address" input type="email" name="email" required autocomplete="email" maxlength="254"; }
                button.secondary type="submit" { "Change my address" }
            }
            @if s.status == crate::domain::subscribers::Status::Active {
                h2 { "Leave" }
                form method="post" action="/account/unsubscribe" {
                    input type="hidden" name=(csrf::FIELD) value=(token);
                    button.secondary type="submit" { "Unsubscribe from " (site.0.name) }
                }
                @if m.has_paid_access() && has_customer {
                    p.muted { "Unsubscribing stops the e-mail; cancel a paid membership under Manage billing." }
                }
            }
            form method="post" action="/signout" {
                input type="hidden" name=(csrf::FIELD) value=(token);
                button.secondary type="submit" { "Sign out" }
            }
        },
    ));
    // Upgrade and Manage billing lead on to Stripe's pages.
    page.set_data(Policy::SiteAccount(state.account_policy));
    Ok(page)
}

/// What a Stripe call needs: the keys, and for Checkout the plan id made when needed.
async fn stripe_of(state: &State, site: &Site) -> Result<Stripe, SiteError> {
    let (nid, key) = (site.0.id, state.credentials.clone());
    let keys = state
        .db
        .run(move |conn| paid_plans::keys(conn, &key, nid))
        .await
        .map_err(|e| SiteError::domain(e, site, "opening the Stripe keys"))?
        .ok_or_else(|| SiteError::Rejected("This newsletter does not take payments yet.".into()))?;
    Ok(Stripe::new(&state.stripe_api, &keys.secret_key))
}

/// Runs a blocking Stripe call off the async threads; its refusal in words.
async fn stripe_call<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, crate::payments::StripeError> + Send + 'static,
) -> Result<T, SiteError> {
    match tokio::task::spawn_blocking(call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => {
            eprintln!("site: a Stripe call failed: {e}");
            Err(SiteError::Rejected(
                "The payment page could not be opened. Please try again in a moment.".into(),
            ))
        }
        Err(e) => Err(SiteError::Rejected(format!(
            "The payment page could not be opened ({e})."
        ))),
    }
}

#[handler]
pub async fn upgrade(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let (reader, form) = match reader_post(req, state, site, body).await {
        Ok(posted) => posted,
        Err(response) => return Ok(response),
    };
    if reader.membership().has_paid_access() {
        return Ok(see_other("/account"));
    }
    let yearly = form.get("interval") == "year";
    let plan = offer(state, site)
        .await?
        .ok_or_else(|| SiteError::Rejected("This newsletter does not take payments yet.".into()))?;
    let amount = plan
        .amount(yearly)
        .ok_or_else(|| SiteError::Rejected("That billing period is not offered.".into()))?;
    if form.get("amount").parse::<i64>().ok() != Some(amount) {
        return Err(SiteError::Rejected(format!(
            "The price changed since your account page was opened: it is now {}. Please look at your account page again.",
            prices(&plan)
        )));
    }
    let stripe = std::sync::Arc::new(stripe_of(state, site).await?);
    let plan_id = match plan.stripe_plan(yearly).map(str::to_string) {
        Some(id) => id,
        None => {
            let (s, name, currency) = (stripe.clone(), site.0.name.clone(), plan.currency.clone());
            let interval = if yearly { "year" } else { "month" };
            let id = stripe_call(move || {
                s.create_plan(&format!("{name} membership"), amount, &currency, interval)
            })
            .await?;
            let (nid, made) = (site.0.id, id.clone());
            state
                .db
                .run(move |conn| paid_plans::set_stripe_plan(conn, nid, yearly, amount, &made))
                .await
                .map_err(|e| SiteError::domain(e, site, "keeping the Stripe plan"))?;
            id
        }
    };
    let customer = {
        let r = reader.clone();
        state
            .db
            .run(move |conn| readers::stripe_customer(conn, &r))
            .await
            .map_err(|e| SiteError::domain(e, site, "reading a membership"))?
    };
    let origin = site.0.site_origin(&state.urls);
    let (email, id, trial) = (
        reader.subscriber.email.clone(),
        reader.subscriber.id,
        plan.trial_days,
    );
    let url = stripe_call(move || {
        stripe.checkout(&Checkout {
            plan: &plan_id,
            subscriber_id: id,
            customer: customer.as_deref(),
            email: &email,
            interval: if yearly { "year" } else { "month" },
            trial_days: trial,
            success_url: &format!("{origin}/account?upgraded=1"),
            cancel_url: &format!("{origin}/account"),
        })
    })
    .await?;
    Ok(see_other(&url))
}

#[handler]
pub async fn billing(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let (reader, _) = match reader_post(req, state, site, body).await {
        Ok(posted) => posted,
        Err(response) => return Ok(response),
    };
    let r = reader.clone();
    let customer = state
        .db
        .run(move |conn| readers::stripe_customer(conn, &r))
        .await
        .map_err(|e| SiteError::domain(e, site, "reading a membership"))?
        .ok_or_else(|| SiteError::Rejected("You have no billing with Stripe yet.".into()))?;
    let stripe = stripe_of(state, site).await?;
    let back = format!("{}/account", site.0.site_origin(&state.urls));
    let url = stripe_call(move || stripe.billing_portal(&customer, &back)).await?;
    Ok(see_other(&url))
}

#[handler]
pub async fn change_email(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let (reader, form) = match reader_post(req, state, site, body).await {
        Ok(posted) => posted,
        Err(response) => return Ok(response),
    };
    let email = form.get("email").to_string();
    let (urls, newsletter, client) = (
        state.urls.clone(),
        site.0.clone(),
        client_address(req, state),
    );
    let typed = email.clone();
    state
        .db
        .run(move |conn| {
            readers::request_email_change(conn, &urls, &newsletter, &reader, &typed, &client)
        })
        .await
        .map_err(|e| SiteError::domain(e, site, "changing a reader's address"))?;
    Ok(personal(answer(
        state,
        site,
        "Confirm your new address",
        html! {
            p { "A link is on its way to " strong { (email.trim()) } ". Until you follow it, " (site.0.name) " keeps coming to your old address." }
            p { a href="/account" { "Back to your account" } }
        },
    )))
}

#[handler]
pub async fn email_link_page(
    req: &Request,
    Path(token): Path<String>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    Ok(personal(link_button(
        req,
        state,
        site,
        "Use this address",
        html! {},
        &format!("/account/email/{token}"),
        &format!("Use this address for {}", site.0.name),
    )))
}

#[handler]
pub async fn follow_email_link(
    req: &Request,
    Path(token): Path<String>,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let nid = site.0.id;
    let subscriber = used_link(
        req,
        state,
        site,
        body,
        "changing a reader's address",
        move |conn| readers::confirm_email_change(conn, nid, &token),
    )
    .await?;
    Ok(personal(answer(
        state,
        site,
        "Your address is changed",
        html! {
            p { (site.0.name) " now comes to " strong { (subscriber.email) } "." }
            p { a href="/account" { "Your account" } }
        },
    )))
}

#[handler]
pub async fn unsubscribe(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let (reader, _) = match reader_post(req, state, site, body).await {
        Ok(posted) => posted,
        Err(response) => return Ok(response),
    };
    let nid = site.0.id;
    state
        .db
        .run(move |conn| unsubscribe_subscriber(conn, nid, reader.subscriber.id))
        .await
        .map_err(|e| SiteError::domain(e, site, "unsubscribing a reader"))?;
    Ok(personal(answer(
        state,
        site,
        "You are unsubscribed",
        html! {
            p { "You will not receive " (site.0.name) " any more." }
            p { a href="/account" { "Your account" } }
        },
    )))
}

#[handler]
pub async fn sign_out(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    verified_form(req, state, body, "Please reload the page and try again.").await?;
    if let Some(session) = read_cookie(req, state, SESSION_COOKIE) {
        state
            .db
            .run(move |conn| readers::sign_out(conn, &session))
            .await
            .map_err(|e| SiteError::domain(e, site, "signing a reader out"))?;
    }
    req.cookie().add(removal(state, SESSION_COOKIE));
    Ok(see_other("/"))
}

/// `POST /stripe/webhook`: an event of the owner's Stripe account, verified with its signing
/// secret and applied once. Answers 200 to what it applied or knowingly ignored (so Stripe
/// stops sending it), 400 to what it refused, 503 when it could not store it (Stripe tries
/// again).
#[handler]
pub async fn stripe_webhook(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> Response {
    let json = |status: StatusCode, body: serde_json::Value| {
        Response::builder()
            .status(status)
            .content_type("application/json")
            .body(body.to_string())
    };
    let refused = |message: &str| {
        json(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {"code": "invalid_signature", "message": message}}),
        )
    };
    let signature = req.header("Stripe-Signature").unwrap_or("").to_string();
    let Ok(bytes) = body.into_bytes_limit(EVENT_MAX_BYTES).await else {
        return refused("the body could not be read, or is larger than 512 KiB");
    };
    let (nid, key) = (site.0.id, state.credentials.clone());
    let keys = match state
        .db
        .run(move |conn| paid_plans::keys(conn, &key, nid))
        .await
    {
        Ok(Some(keys)) => keys,
        Ok(None) => return refused("Stripe is not connected to this newsletter"),
        Err(e) => {
            eprintln!("site: stripe webhook: {e}");
            return refused("the stored signing secret cannot be read");
        }
    };
    let now = crate::clock::now().as_second();
    if let Err(why) = stripe_events::verify(&keys.webhook_secret, &signature, &bytes, now) {
        return refused(why.message());
    }
    let event = match Event::parse(&bytes) {
        Ok(event) => event,
        Err(why) => return refused(why.message()),
    };
    let id = event.id.clone();
    match state
        .db
        .run(move |conn| stripe_events::apply(conn, nid, &event))
        .await
    {
        Ok(applied) => {
            let outcome = match applied {
                Applied::Changed { .. } => "applied".to_string(),
                Applied::Repeated => "already applied".to_string(),
                Applied::Ignored(why) => format!("ignored: {why}"),
            };
            json(
                StatusCode::OK,
                serde_json::json!({"received": id, "outcome": outcome}),
            )
        }
        Err(e) => {
            eprintln!("site: stripe webhook {id}: {e}");
            json(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"error": {"code": "unavailable", "message": "not stored; send it again"}}),
            )
        }
    }
}
