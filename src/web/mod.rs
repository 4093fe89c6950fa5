//! The browser side of the service on the base host: account flows, onboarding and the
//! dashboard. Handlers parse the form, call the domain layer, and render maud pages.

mod account;
mod accounts;
mod api_keys;
mod charts;
mod custom_domains;
mod feed;
mod fields;
mod forms;
mod issues;
mod layout;
mod memberships;
mod newsletters;
mod operator;
mod relay_settings;
mod reports;
mod sender_domain;
mod sequences;
mod session;
mod settings;
mod stats;
mod subscribers;
mod time_zones;
mod topics;
mod webhooks;

use std::sync::Arc;

use poem::error::ResponseError;
use poem::http::StatusCode;
use poem::middleware::CookieJarManager;
use poem::web::Redirect;
use poem::{EndpointExt, IntoResponse, Response, Route};

use crate::domain::DomainError;
use crate::http::client::client_address;
use crate::http::csrf;
use crate::http::form::{FormData, UnreadableForm};
use crate::http::public_page::{CSS, FOR_AN_HOUR, IMMUTABLE, JAVASCRIPT, asset, no_favicon};
use crate::http::routing::{get, post};
use crate::state::AppState;

pub use session::Ctx;

/// The base host's browser routes.
pub fn routes() -> impl poem::Endpoint {
    let route = Route::new();
    let route = account_routes(route);
    let route = newsletter_routes(route);
    let route = api_key_routes(route);
    let route = subscriber_routes(route);
    let route = webhook_routes(route);
    let route = issue_routes(route);
    let route = asset_routes(route);
    let route = custom_domain_routes(route);
    let route = settings_routes(route);
    let route = operator_routes(route);
    route
        .with(CookieJarManager::new())
        .catch_all_error(|err: poem::Error| async move { error_response(err) })
}

/// Every answer the dashboard's routes give without a page of their own, as the dashboard's
/// error page: an unknown address (`/nope`, `/newsletters/1/nope`) is the styled 404, a
/// failure the styled 500, and any other refusal of poem's (a path that does not parse) a
/// page with its status. Errors made from a response (a 405 with its `Allow`) and the
/// dashboard's own ([`WebError`], already a page or a redirect) pass as they are. The API
/// under `/api/` has its own, JSON, errors.
fn error_response(err: poem::Error) -> Response {
    if err.is_from_response() || err.is::<WebError>() {
        return err.into_response();
    }
    if err.is::<poem::error::NotFoundError>() {
        return WebError::NotFound.as_response();
    }
    let status = err.status();
    if status.is_server_error() {
        return WebError::Internal(err.to_string()).as_response();
    }
    let title = status.canonical_reason().unwrap_or("Refused");
    let mut response = layout::error_page(title, &err.to_string()).into_response();
    response.set_status(status);
    response
}

/// Signing up, confirming the address, signing in and out, the account page, password resets.
fn account_routes(route: Route) -> Route {
    route
        .at("/", get(accounts::home))
        .at("/signup", get(accounts::signup_form).post(accounts::signup))
        .at(
            "/email_confirmation_pending",
            get(accounts::confirmation_pending),
        )
        .at("/email_confirmations/:token", get(accounts::confirm))
        .at(
            "/email_confirmation_required",
            get(accounts::confirmation_required),
        )
        .at("/email_confirmation", post(accounts::resend_confirmation))
        .at("/session/new", get(accounts::sign_in_form))
        .at(
            "/session",
            post(accounts::session_post).delete(accounts::sign_out),
        )
        .at("/account", get(account::account))
        .at(
            "/account/sessions",
            post(account::sign_out_others).delete(account::sign_out_others),
        )
        .at("/account/password", post(account::change_password))
        .at("/account/email", post(account::request_email_change))
        .at(
            "/account/email/:token",
            get(account::email_change_form).post(account::confirm_email_change),
        )
        .at(
            "/account/delete",
            get(account::delete_form).post(account::delete),
        )
        .at("/passwords/new", get(accounts::password_reset_form))
        .at("/passwords", post(accounts::request_password_reset))
        .at("/passwords/:token/edit", get(accounts::new_password_form))
        .at(
            "/passwords/:token",
            post(accounts::set_password).patch(accounts::set_password),
        )
        .at("/account/time_zone", post(time_zones::update_account_zone))
}

/// The newsletter list, creating one, and its onboarding (frequency, preferences).
fn newsletter_routes(route: Route) -> Route {
    route
        .at(
            "/newsletters",
            get(newsletters::index).post(newsletters::create),
        )
        .at("/newsletters/new", get(newsletters::new_form))
        .at(
            "/newsletters/subdomain",
            get(newsletters::subdomain_preview),
        )
        .at("/newsletters/:id", get(newsletters::show))
        .at(
            "/newsletters/:id/setup_frequency",
            get(newsletters::frequency_form),
        )
        .at(
            "/newsletters/:id/apply_frequency",
            post(newsletters::apply_frequency),
        )
        .at(
            "/newsletters/:id/preference/edit",
            get(newsletters::preference_form),
        )
        .at(
            "/newsletters/:id/preference",
            post(newsletters::update_preference).patch(newsletters::update_preference),
        )
}

/// A newsletter's API keys.
fn api_key_routes(route: Route) -> Route {
    route
        .at(
            "/newsletters/:id/api_keys",
            get(api_keys::index).post(api_keys::create),
        )
        .at("/newsletters/:id/api_keys/new", get(api_keys::new_form))
        .at(
            "/newsletters/:id/api_keys/:key_id",
            post(api_keys::revoke).delete(api_keys::revoke),
        )
        .at(
            "/newsletters/:id/api_keys/:key_id/revoke",
            get(api_keys::confirm_revoke),
        )
}

/// A newsletter's subscribers: the list, one subscriber, tags, CSV import and export.
fn subscriber_routes(route: Route) -> Route {
    route
        .at(
            "/newsletters/:id/subscribers",
            get(subscribers::index).post(subscribers::create),
        )
        .at(
            "/newsletters/:id/subscribers/export.csv",
            get(subscribers::export),
        )
        .at(
            "/newsletters/:id/subscribers/:subscriber_id/export.json",
            get(subscribers::export_one),
        )
        .at(
            "/newsletters/:id/subscribers/import",
            get(subscribers::import_form).post(subscribers::upload_csv),
        )
        .at(
            "/newsletters/:id/subscribers/imports/:import_id",
            get(subscribers::show_import).post(subscribers::discard_import),
        )
        .at(
            "/newsletters/:id/subscribers/imports/:import_id/start",
            post(subscribers::start_import),
        )
        .at(
            "/newsletters/:id/subscribers/imports/:import_id/refused.csv",
            get(subscribers::refused_csv),
        )
        .at(
            "/newsletters/:id/subscribers/:subscriber_id",
            get(subscribers::show).post(subscribers::change),
        )
        .at(
            "/newsletters/:id/subscribers/:subscriber_id/delete",
            get(subscribers::confirm_delete),
        )
        .at(
            "/newsletters/:id/subscribers/:subscriber_id/tags",
            post(subscribers::change_tags),
        )
        .at(
            "/newsletters/:id/subscribers/:subscriber_id/membership",
            post(subscribers::change_membership),
        )
}

/// A newsletter's webhook subscriptions and their deliveries.
fn webhook_routes(route: Route) -> Route {
    route
        .at(
            "/newsletters/:id/webhooks",
            get(webhooks::index).post(webhooks::create),
        )
        .at("/newsletters/:id/webhooks/new", get(webhooks::new_form))
        .at("/newsletters/:id/webhooks/test", post(webhooks::send_test))
        .at(
            "/newsletters/:id/webhooks/:subscription_id",
            post(webhooks::update).patch(webhooks::update),
        )
        .at(
            "/newsletters/:id/webhooks/:subscription_id/edit",
            get(webhooks::edit_form),
        )
        .at(
            "/newsletters/:id/webhooks/deliveries/:delivery_id",
            get(webhooks::show_delivery),
        )
        .at(
            "/newsletters/:id/webhooks/deliveries/:delivery_id/redeliver",
            post(webhooks::redeliver),
        )
}

/// A newsletter's issues: writing, previewing, approving, scheduling, sending, and the
/// scripts of their pages.
fn issue_routes(route: Route) -> Route {
    route
        .at(
            "/newsletters/:id/issues",
            get(issues::index).post(issues::create),
        )
        .at("/newsletters/:id/issues/new", get(issues::new_form))
        .at(
            "/newsletters/:id/issues/live_preview",
            post(issues::preview_live),
        )
        .at(
            "/newsletters/:id/issues/:issue_id",
            get(issues::show)
                .post(issues::change)
                .patch(issues::change)
                .delete(issues::change),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/edit",
            get(issues::edit_form),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/preview",
            get(issues::preview),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/approve",
            post(issues::approve),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/schedule",
            post(issues::schedule),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/send",
            get(issues::send_confirm).post(issues::send_now),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/send_test",
            get(issues::test_form).post(issues::send_test),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/publish",
            post(issues::publish),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/unpublish",
            post(issues::unpublish),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/duplicate",
            post(issues::duplicate),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/resume",
            post(issues::resume),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/resend_unconfirmed",
            get(issues::resend_confirm).post(issues::resend_unconfirmed),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/delete",
            get(issues::delete_confirm),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/progress",
            get(issues::progress),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/audience_count",
            get(issues::audience_count),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/report",
            get(reports::show_issue),
        )
        .at(
            "/newsletters/:id/issues/:issue_id/resend_unopened",
            post(reports::schedule_resend),
        )
        .at(
            "/newsletters/:id/media",
            get(issues::media_index).post(issues::upload_media),
        )
        .at(
            "/newsletters/:id/media/:file",
            get(issues::media_file)
                .post(issues::delete_media)
                .delete(issues::delete_media),
        )
        .at("/assets/media.js", get(issues::media_script))
        .at("/assets/dashboard.js", get(issues::script))
        .at("/assets/audience.js", get(issues::audience_script))
        .at("/assets/live-preview.js", get(issues::live_preview_script))
}

/// The dashboard's stylesheet and scripts.
fn asset_routes(route: Route) -> Route {
    route
        .at("/favicon.ico", get(no_favicon))
        .at("/assets/app.css", get(stylesheet))
        .at("/assets/time-zone.js", get(time_zones::script))
        .at("/assets/widgets.js", get(widgets))
        .at(layout::app_css_path(), get(versioned_stylesheet))
}

/// A newsletter's custom domains, and the check a TLS terminator asks before issuing a
/// certificate.
fn custom_domain_routes(route: Route) -> Route {
    route
        .at(
            "/newsletters/:id/custom_domains",
            get(custom_domains::index).post(custom_domains::create),
        )
        .at(
            "/newsletters/:id/custom_domains/choose_method",
            get(custom_domains::choose_method),
        )
        .at(
            "/newsletters/:id/custom_domains/:domain_id",
            get(custom_domains::show)
                .post(custom_domains::remove)
                .delete(custom_domains::remove),
        )
        .at(
            "/newsletters/:id/custom_domains/:domain_id/remove",
            get(custom_domains::confirm_remove),
        )
        .at(
            "/newsletters/:id/custom_domains/:domain_id/verify",
            post(custom_domains::verify),
        )
        .at("/tls/allowed", get(custom_domains::tls_allowed))
}

/// A newsletter's settings and stats.
fn settings_routes(route: Route) -> Route {
    route
        .at("/newsletters/:id/stats", get(stats::show))
        .at("/newsletters/:id/settings", get(settings::show))
        .at(
            "/newsletters/:id/forms",
            get(forms::list).post(forms::create),
        )
        .at(
            "/newsletters/:id/forms/:fid",
            get(forms::show).post(forms::update),
        )
        .at("/newsletters/:id/forms/:fid/delete", post(forms::delete))
        .at(
            "/newsletters/:id/fields",
            get(fields::list).post(fields::create),
        )
        .at("/newsletters/:id/fields/:fid/delete", post(fields::delete))
        .at("/newsletters/:id/feed", get(feed::show).post(feed::save))
        .at("/newsletters/:id/feed/delete", post(feed::stop))
        .at(
            "/newsletters/:id/sequences",
            get(sequences::list).post(sequences::create),
        )
        .at("/newsletters/:id/sequences/new", get(sequences::new))
        .at(
            "/newsletters/:id/sequences/:sid",
            get(sequences::show).post(sequences::update),
        )
        .at(
            "/newsletters/:id/sequences/:sid/readers",
            post(sequences::add_reader),
        )
        .at(
            "/newsletters/:id/sequences/:sid/readers/stop",
            post(sequences::stop_reader),
        )
        .at(
            "/newsletters/:id/sequences/:sid/delete",
            post(sequences::delete),
        )
        .at(
            "/newsletters/:id/topics",
            get(topics::show).post(topics::save),
        )
        .at("/newsletters/:id/memberships", get(memberships::show))
        .at(
            "/newsletters/:id/memberships/plan",
            post(memberships::save_plan),
        )
        .at(
            "/newsletters/:id/memberships/stripe",
            post(memberships::connect_stripe),
        )
        .at(
            "/newsletters/:id/memberships/stripe/disconnect",
            post(memberships::disconnect_stripe),
        )
        .at(
            "/newsletters/:id/settings/details",
            post(settings::update_details).patch(settings::update_details),
        )
        .at(
            "/newsletters/:id/settings/relay",
            post(settings::update_relay),
        )
        .at(
            "/newsletters/:id/settings/relay/test",
            post(settings::test_relay),
        )
        .at(
            "/newsletters/:id/settings/warmup",
            post(settings::update_warm_up),
        )
        .at(
            "/newsletters/:id/settings/frequency",
            post(settings::update_frequency),
        )
        .at(
            "/newsletters/:id/settings/time_zone",
            post(settings::update_time_zone),
        )
        .at(
            "/newsletters/:id/settings/preference",
            post(settings::update_preferences).patch(settings::update_preferences),
        )
        .at(
            "/newsletters/:id/settings/tracking",
            post(settings::update_tracking),
        )
        .at(
            "/newsletters/:id/settings/welcome",
            post(settings::update_welcome),
        )
        .at(
            "/newsletters/:id/settings/publishing",
            post(settings::update_publishing),
        )
        .at(
            "/newsletters/:id/settings/theme",
            post(settings::update_theme),
        )
        .at(
            "/newsletters/:id/settings/about",
            post(settings::update_pages),
        )
        .at(
            "/newsletters/:id/settings/upgrade",
            post(settings::request_upgrade),
        )
        .at(
            "/newsletters/:id/settings/sending_domain/verify",
            post(sender_domain::verify),
        )
        .at(
            "/newsletters/:id/settings/status",
            get(settings::confirm_status).post(settings::change_status),
        )
}

/// The operator's page.
fn operator_routes(route: Route) -> Route {
    route
        .at("/operator", get(operator::show))
        .at("/operator/tier", post(operator::set_tier))
        .at("/operator/status", post(operator::set_status))
}

/// The dashboard's stylesheet under its old, unversioned address (pages saved before).
#[poem::handler]
fn stylesheet() -> Response {
    asset(CSS, FOR_AN_HOUR, layout::APP_CSS)
}

/// The dashboard's stylesheet at the address the pages link, which changes with its content.
#[poem::handler]
fn versioned_stylesheet() -> Response {
    asset(CSS, IMMUTABLE, layout::APP_CSS)
}

/// `GET /assets/widgets.js`: copy buttons and the create form's live subdomain preview; the
/// pages work without it.
#[poem::handler]
fn widgets() -> Response {
    asset(
        JAVASCRIPT,
        FOR_AN_HOUR,
        include_str!("../../assets/widgets.js"),
    )
}

/// Why a browser request did not get its page; mapped to a response once, here.
#[derive(Debug)]
pub enum WebError {
    /// The page needs a signed-in user: back to the sign-in form.
    SignInRequired,
    /// The CSRF token is missing or wrong.
    BadCsrfToken,
    NotFound,
    /// The request body is not a readable form (too large, not UTF-8).
    BadForm(String),
    TooManyRequests(i64),
    Forbidden(String),
    /// A write failed because the server's disk is full; nothing was saved.
    DiskFull(String),
    Internal(String),
}

/// Seconds a browser is asked to wait after a full disk refused a write.
const DISK_FULL_RETRY_AFTER: i64 = 60;

impl std::fmt::Display for WebError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for WebError {}

impl From<DomainError> for WebError {
    /// Errors a handler did not turn into a form with messages. Validation errors are
    /// rendered by the handler itself, so reaching here with one is a bad request.
    fn from(e: DomainError) -> Self {
        match e {
            DomainError::NotFound(_) => WebError::NotFound,
            DomainError::RateLimited(window) => WebError::TooManyRequests(window.retry_after),
            DomainError::Forbidden(message) | DomainError::Unauthorized(message) => {
                WebError::Forbidden(message)
            }
            DomainError::Rejected(crate::domain::ErrorCode::NewsletterCancelled, message) => {
                WebError::Forbidden(message)
            }
            DomainError::Invalid(..) | DomainError::Rejected(..) => {
                WebError::BadForm(e.to_string())
            }
            DomainError::Store(e) => e.into(),
        }
    }
}

impl From<UnreadableForm> for WebError {
    fn from(e: UnreadableForm) -> Self {
        WebError::BadForm(e.to_string())
    }
}

impl From<crate::store::StoreError> for WebError {
    fn from(e: crate::store::StoreError) -> Self {
        if e.is_disk_full() {
            WebError::DiskFull(e.to_string())
        } else {
            WebError::Internal(e.to_string())
        }
    }
}

impl poem::error::ResponseError for WebError {
    fn status(&self) -> StatusCode {
        match self {
            WebError::SignInRequired => StatusCode::SEE_OTHER,
            WebError::BadCsrfToken | WebError::Forbidden(_) => StatusCode::FORBIDDEN,
            WebError::NotFound => StatusCode::NOT_FOUND,
            WebError::BadForm(_) => StatusCode::BAD_REQUEST,
            WebError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            WebError::DiskFull(_) => StatusCode::INSUFFICIENT_STORAGE,
            WebError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn as_response(&self) -> Response {
        let (title, message) = match self {
            WebError::SignInRequired => return Redirect::see_other("/session/new").into_response(),
            WebError::BadCsrfToken => (
                "Form expired",
                "This form's security token is missing or out of date. Go back, reload the page and try again.".to_string(),
            ),
            WebError::NotFound => ("Not found", "There is nothing here, or it is not yours to see.".to_string()),
            WebError::BadForm(m) => ("Bad request", m.clone()),
            WebError::TooManyRequests(secs) => (
                "Too many attempts",
                format!(
                    "Too many attempts. Please wait {} and try again.",
                    crate::http::plural::count(*secs, "second", "seconds")
                ),
            ),
            WebError::Forbidden(m) => ("Not allowed", m.clone()),
            WebError::DiskFull(detail) => {
                eprintln!("web: the disk is full, a write was refused: {detail}");
                (
                    "The server's disk is full",
                    "Nothing was saved. Please try again in a few minutes, once the server's operator has freed some space.".to_string(),
                )
            }
            WebError::Internal(detail) => {
                eprintln!("web: internal error: {detail}");
                ("Something went wrong", "The server could not finish this request. Please try again.".to_string())
            }
        };
        let mut response = layout::error_page(title, &message).into_response();
        response.set_status(self.status());
        let retry_after = match self {
            WebError::TooManyRequests(secs) => Some(*secs),
            WebError::DiskFull(_) => Some(DISK_FULL_RETRY_AFTER),
            _ => None,
        };
        if let Some(secs) = retry_after {
            response.headers_mut().insert("Retry-After", secs.into());
        }
        response
    }
}

/// Shorthand for handler results.
pub type WebResult = Result<Response, WebError>;

/// A 303 to `path`, the answer to a successful form post.
pub fn see_other(path: &str) -> WebResult {
    Ok(Redirect::see_other(path).into_response())
}

/// Renders `markup` with `status` (422 for a form shown again with messages).
pub fn render(status: StatusCode, markup: maud::Markup) -> WebResult {
    let mut response = markup.into_response();
    response.set_status(status);
    Ok(response)
}

/// A validation failure or a refusal by a rule of state becomes the messages to show on the
/// form (the rule's sentence under `base`); anything else stays an error.
pub fn problems(e: DomainError) -> Result<crate::domain::FieldErrors, WebError> {
    match e {
        DomainError::Invalid(_, fields) => Ok(fields),
        DomainError::Rejected(_, message) => {
            Ok(crate::domain::FieldErrors::single("base", message))
        }
        other => Err(other.into()),
    }
}

/// A validation failure becomes the messages to show on the form; anything else stays an error.
pub fn invalid_fields(e: DomainError) -> Result<crate::domain::FieldErrors, WebError> {
    match e {
        DomainError::Invalid(_, fields) => Ok(fields),
        other => Err(other.into()),
    }
}

/// State handed to every handler.
pub type State = Arc<AppState>;
