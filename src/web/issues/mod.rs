//! Issues in the dashboard: the list by status, the Markdown editor with articles and a
//! server-rendered preview (and a live one beside the text), and the actions of the issue page
//! (approve, schedule, send in one step with live progress, publish and unpublish, edit a sent
//! issue's web copy, duplicate, delete, send a test, send again to the unconfirmed). Every rule is
//! the domain's (`domain::issues`, `domain::delivery::sending`); these handlers parse, call and render.

mod actions;
mod audience;
mod form;
mod live_preview;
mod media;
mod pages;
mod resend;
mod test_send;

use poem::web::{Data, Path};
use poem::{Body, Request, Response, handler, http::StatusCode};

use super::newsletters::{owned, parse_id};
use super::{Ctx, FormData, State, WebError, WebResult};
use crate::domain::DomainResult;
use crate::domain::issues::{self, Issue};
use crate::domain::newsletters::Newsletter;
use crate::domain::values::time_zones::{self, TimeZoneName};
use crate::http::headers::Policy;

pub use actions::{
    approve, delete_confirm, duplicate, progress, publish, resume, schedule, script, send_confirm,
    send_now, unpublish,
};
pub use audience::{audience_count, audience_script};
pub use form::{create, edit_form, new_form};
pub use live_preview::{live_preview_script, preview_live};
pub use media::{
    delete as delete_media, file as media_file, index as media_index, script as media_script,
    upload as upload_media,
};
pub use pages::{index, preview, show};
pub use resend::{resend_confirm, resend_unconfirmed};
pub use test_send::{send_test, test_form};

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
pub(super) use crate::web::problems;

/// [`super::render`] under the previews' Content-Security-Policy: the issue pages show
/// owner-written content in sandboxed frames, where nothing may run a script while the
/// content's styles and images still show.
fn render(status: StatusCode, markup: maud::Markup) -> WebResult {
    let mut response: Response = super::render(status, markup)?;
    response.set_data(Policy::Preview);
    Ok(response)
}

/// A JSON answer for the issue pages' scripts; never cached, as it changes with the list.
fn json_answer(status: StatusCode, body: serde_json::Value) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json")
        .header("Cache-Control", "no-store")
        .body(body.to_string())
}

/// A send time typed into a `datetime-local` input, read on the account's clocks (`zone`),
/// as the RFC 3339 text the issue rules take; a time those clocks skip is refused.
fn typed_time(text: &str, zone: &TimeZoneName) -> DomainResult<String> {
    time_zones::local_to_rfc3339(text, zone, "scheduled_for")
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
