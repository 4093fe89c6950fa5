//! Why a request to a public site got no page of its own, and the one place that answers it
//! (`as_response`): every site handler returns `Result<Response, SiteError>`, so the same
//! refusal gets the same page whichever handler met it.

use maud::{Markup, html};
use poem::Response;
use poem::http::StatusCode;

use super::Site;
use crate::domain::newsletters::Newsletter;
use crate::domain::values::urls::SiteUrls;
use crate::domain::{DomainError, ErrorCode};
use crate::http::form::UnreadableForm;
use crate::http::public_page::{page_response, site_answer};

/// Seconds a visitor is asked to wait after a full disk refused a write.
const DISK_FULL_RETRY_AFTER: u32 = 60;

/// What a visitor is told when nothing better fits.
const TRY_AGAIN: &str = "Please try again in a moment.";

#[derive(Debug)]
pub enum SiteError {
    /// No such page, or a link whose signature does not fit.
    NotFound,
    /// A mailed link that was used already or is too old (the subscription confirmation).
    LinkExpired,
    /// A reader's sign-in or address link that was used already or is more than 15 minutes
    /// old.
    SignInExpired,
    /// The form body could not be read.
    BadForm,
    /// The form's CSRF token does not fit the browser's cookie; the hint says what to do.
    FormExpired(&'static str),
    /// Too many requests from this client; seconds until it may try again.
    TooManyRequests(i64),
    /// The newsletter (named) is cancelled: it takes no one new, its archive stays.
    NotTakingSubscribers(String),
    /// Any other business rule that refuses the request now, with its message.
    Rejected(String),
    /// Input that a handler did not show again on its form.
    Invalid(Vec<String>),
    Forbidden(String),
    /// Something the visitor cannot fix, logged in one line for the operator: a full disk
    /// says so (507, nothing was saved), anything else is a 500 with `hint`.
    Failed {
        context: String,
        detail: String,
        disk_full: bool,
        hint: &'static str,
    },
}

impl SiteError {
    /// What a domain error means on `site`'s pages; `context` names what failed in the log.
    pub fn domain(e: DomainError, site: &Site, context: &str) -> Self {
        match e {
            DomainError::NotFound(_) => SiteError::NotFound,
            DomainError::RateLimited(window) => SiteError::TooManyRequests(window.retry_after),
            DomainError::Rejected(ErrorCode::NewsletterCancelled, _) => {
                SiteError::NotTakingSubscribers(site.0.name.clone())
            }
            DomainError::Rejected(_, message) => SiteError::Rejected(message),
            DomainError::Invalid(_, fields) => SiteError::Invalid(fields.sentences()),
            DomainError::Forbidden(message) | DomainError::Unauthorized(message) => {
                SiteError::Forbidden(message)
            }
            DomainError::Store(_) => Self::failed(context, &e),
        }
    }

    /// A failure the visitor cannot fix (see [`SiteError::Failed`]).
    pub fn failed(context: &str, e: &DomainError) -> Self {
        SiteError::Failed {
            context: context.to_string(),
            detail: e.to_string(),
            disk_full: matches!(e, DomainError::Store(store) if store.is_disk_full()),
            hint: TRY_AGAIN,
        }
    }

    /// The same error, with `hint` as the advice of a failure page.
    pub fn with_hint(self, hint: &'static str) -> Self {
        match self {
            SiteError::Failed {
                context,
                detail,
                disk_full,
                ..
            } => SiteError::Failed {
                context,
                detail,
                disk_full,
                hint,
            },
            other => other,
        }
    }
}

impl From<UnreadableForm> for SiteError {
    fn from(_: UnreadableForm) -> Self {
        SiteError::BadForm
    }
}

impl std::fmt::Display for SiteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for SiteError {}

impl poem::error::ResponseError for SiteError {
    fn status(&self) -> StatusCode {
        match self {
            SiteError::NotFound | SiteError::LinkExpired | SiteError::SignInExpired => {
                StatusCode::NOT_FOUND
            }
            SiteError::BadForm => StatusCode::BAD_REQUEST,
            SiteError::FormExpired(_)
            | SiteError::NotTakingSubscribers(_)
            | SiteError::Forbidden(_) => StatusCode::FORBIDDEN,
            SiteError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            SiteError::Rejected(_) | SiteError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            SiteError::Failed { disk_full, .. } => match disk_full {
                true => StatusCode::INSUFFICIENT_STORAGE,
                false => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    fn as_response(&self) -> Response {
        self.answer(page_response)
    }
}

impl SiteError {
    /// The answer inside `site`'s frame (its header, footer and a way back home): what every
    /// refusal on a newsletter's site gets (`site::routes`).
    pub fn on_site(&self, urls: &SiteUrls, site: &Newsletter) -> Response {
        self.answer(|status, title, body| site_answer(urls, site, status, title, body))
    }

    /// The page `frame` makes of this error's status, title and text, with `Retry-After`
    /// where the visitor should wait. A failure is logged here, once.
    fn answer(&self, frame: impl FnOnce(StatusCode, &str, Markup) -> Response) -> Response {
        let status = poem::error::ResponseError::status(self);
        let (title, body) = match self {
            SiteError::NotFound => (
                "Not found",
                html! { p { "There is nothing at this address." } },
            ),
            SiteError::LinkExpired => (
                "This link has expired",
                html! { p { "The link was already used or is more than 7 days old. " a href="/subscribe" { "Subscribe again" } "." } },
            ),
            SiteError::SignInExpired => (
                "This link has expired",
                html! { p { "The link was already used or is more than 15 minutes old. " a href="/signin" { "Ask for a new one" } "." } },
            ),
            SiteError::BadForm => (
                "Bad request",
                html! { p { "That form could not be read." } },
            ),
            SiteError::FormExpired(hint) => ("Form expired", html! { p { (hint) } }),
            SiteError::TooManyRequests(_) => (
                "Too many requests",
                html! { p { "Please wait a little and try again." } },
            ),
            SiteError::NotTakingSubscribers(name) => (
                "Not taking subscribers",
                html! { p { (name) " no longer takes new subscribers. " a href="/archive" { "Its past issues" } " are still here." } },
            ),
            SiteError::Rejected(message) | SiteError::Forbidden(message) => {
                ("Not possible", html! { p { (message) } })
            }
            SiteError::Invalid(sentences) => (
                "Please check the form",
                html! { ul.errors role="alert" { @for sentence in sentences { li { (sentence) } } } },
            ),
            SiteError::Failed {
                context,
                detail,
                disk_full: true,
                ..
            } => {
                eprintln!("site: the disk is full, a write was refused ({context}): {detail}");
                (
                    "The server's disk is full",
                    html! { p { "Nothing was saved. Please try again in a few minutes." } },
                )
            }
            SiteError::Failed {
                context,
                detail,
                hint,
                ..
            } => {
                eprintln!("site: {context}: {detail}");
                ("Something went wrong", html! { p { (hint) } })
            }
        };
        let mut response = frame(status, title, body);
        let retry_after = match self {
            SiteError::TooManyRequests(secs) => Some(*secs),
            SiteError::Failed {
                disk_full: true, ..
            } => Some(DISK_FULL_RETRY_AFTER.into()),
            _ => None,
        };
        if let Some(secs) = retry_after {
            response.headers_mut().insert("Retry-After", secs.into());
        }
        response
    }
}

/// Shorthand for site handler results.
pub type SiteResult = Result<Response, SiteError>;
