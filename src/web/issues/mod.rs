//! Issues in the dashboard: the list by status, the Markdown editor with articles and a
//! server-rendered preview, and the actions of the issue page (approve, schedule, send with
//! live progress, publish, delete). Every rule is the domain's (`domain::issues`,
//! `domain::sending`); these handlers parse, call and render.

mod actions;
mod form;
mod pages;

use poem::web::{Data, Path};
use poem::{Body, Request, Response, handler};

use super::newsletters::{owned, parse_id};
use super::{Ctx, FormData, State, WebError, WebResult};
use crate::clock::Timestamp;
use crate::domain::issues::{self, Issue};
use crate::domain::newsletters::Newsletter;
use crate::domain::{DomainError, FieldErrors};
use crate::http::headers::Policy;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

pub use actions::{
    approve, delete_confirm, progress, publish, resume, schedule, script, send_confirm, send_now,
};
pub use form::{create, edit_form, new_form};
pub use pages::{index, preview, show};

/// The issue `raw_id` of newsletter `n`; looked up within that newsletter, so someone else's
/// issue id is a 404 like an unknown one.
async fn issue_of(state: &State, n: &Newsletter, raw_id: &str) -> Result<Issue, WebError> {
    let (nid, id) = (n.id, parse_id(raw_id)?);
    Ok(state.db.run(move |conn| issues::get(conn, nid, id)).await?)
}

/// For a page about one issue: the request's context, the signed-in user's newsletter `id`
/// and its issue `issue_id` (404 for anyone else's).
async fn viewed(
    req: &Request,
    state: &State,
    id: &str,
    issue_id: &str,
) -> Result<(Ctx, Newsletter, Issue), WebError> {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, id).await?;
    let issue = issue_of(state, &n, issue_id).await?;
    Ok((ctx, n, issue))
}

/// A form post about one issue whose CSRF token checked out, with what it is about.
struct Posted {
    ctx: Ctx,
    n: Newsletter,
    issue: Issue,
    form: FormData,
}

/// Checks the CSRF token of `form` before anything else, then finds the issue like [`viewed`].
async fn posted(
    req: &Request,
    state: &State,
    id: &str,
    issue_id: &str,
    form: FormData,
) -> Result<Posted, WebError> {
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let n = owned(&ctx, state, id).await?;
    let issue = issue_of(state, &n, issue_id).await?;
    Ok(Posted {
        ctx,
        n,
        issue,
        form,
    })
}

fn list_url(newsletter_id: i64) -> String {
    format!("/newsletters/{newsletter_id}/issues")
}

fn issue_url(newsletter_id: i64, issue_id: i64) -> String {
    format!("/newsletters/{newsletter_id}/issues/{issue_id}")
}

/// A refused action or invalid input, as messages to show on the page (the domain's own
/// words); anything else stays an error page. The webhooks forms show theirs the same way.
pub(super) fn problems(e: DomainError) -> Result<FieldErrors, WebError> {
    match e {
        DomainError::Invalid(_, fields) => Ok(fields),
        DomainError::Rejected(_, message) => Ok(FieldErrors::single("base", message)),
        other => Err(other.into()),
    }
}

/// [`super::render`] under the previews' Content-Security-Policy: the issue pages show
/// owner-written content in sandboxed frames, where nothing may run a script while the
/// content's styles and images still show.
fn render(status: poem::http::StatusCode, markup: maud::Markup) -> WebResult {
    let mut response: Response = super::render(status, markup)?;
    response.set_data(Policy::Preview);
    Ok(response)
}

/// The value of an `<input type=datetime-local>` (minutes, no zone) for an instant; the
/// dashboard shows and takes times in UTC.
fn local_input(at: Timestamp) -> String {
    const INPUT: &[BorrowedFormatItem<'static>] =
        format_description!("[year]-[month]-[day]T[hour]:[minute]");
    at.datetime()
        .format(INPUT)
        .expect("a UTC instant always formats")
}

/// A datetime-local value read as UTC, in the form the domain parses (RFC 3339); anything
/// else is passed on for the domain to refuse.
fn utc_from_local(text: &str) -> String {
    let text = text.trim();
    match text.len() {
        16 => format!("{text}:00Z"),
        19 => format!("{text}Z"),
        _ => text.to_string(),
    }
}

/// An instant for people: `2026-11-24 09:00 UTC`.
fn when(at: Timestamp) -> String {
    format!("{} UTC", local_input(at).replace('T', " "))
}

/// `POST /newsletters/:id/issues/:issue_id`: an update (`_method=patch`) or a delete
/// (`_method=delete`); real PATCH and DELETE requests arrive here too.
#[handler]
pub async fn change(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let method = match form.get("_method") {
        "" => req.method().as_str().to_ascii_lowercase(),
        given => given.to_ascii_lowercase(),
    };
    let p = posted(req, state, &id, &issue_id, form).await?;
    if method == "delete" {
        actions::delete(req, state, p).await
    } else {
        form::update(req, state, p).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetime_local_values_are_utc() {
        assert_eq!(utc_from_local("2026-12-01T09:00"), "2026-12-01T09:00:00Z");
        assert_eq!(
            utc_from_local("2026-12-01T09:00:30"),
            "2026-12-01T09:00:30Z"
        );
        assert_eq!(utc_from_local(" soon "), "soon");
        let at = Timestamp::parse("2026-12-01T09:00:00.000Z").unwrap();
        assert_eq!(local_input(at), "2026-12-01T09:00");
        assert_eq!(when(at), "2026-12-01 09:00 UTC");
    }
}
