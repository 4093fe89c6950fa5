//! The editor's live preview: beside the Markdown, the web page and the e-mail as they would
//! be, kept up to date by `assets/live-preview.js`, which posts the typed subject and
//! Markdown here (debounced, with the form's CSRF token) and shows the answer in sandboxed
//! frames. Rendering is the saved issue's (the render budget, on a blocking thread); input
//! beyond the content limits is refused with the limits' message. Without the script the
//! panel stays hidden and the editor's Preview button shows the same previews.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, Response, handler, http::StatusCode};
use serde_json::json;

use super::pages::preview_documents;
use super::{json_answer, problems};
use crate::domain::issues::{self, IssueInput};
use crate::domain::{DomainError, content};
use crate::http::public_page::{FOR_AN_HOUR, JAVASCRIPT, asset};
use crate::web::newsletters::{owned, parse_id};
use crate::web::{Ctx, FormData, State, WebError, WebResult};

/// The panel beside the editor's text: hidden until the script shows it. `url` is where the
/// script posts; `issue_id` the edited issue (its articles show in the preview), none for a
/// new one.
pub(super) fn panel(newsletter_id: i64, issue_id: Option<i64>) -> Markup {
    html! {
        section.live-preview #live-preview hidden
            data-url={ "/newsletters/" (newsletter_id) "/issues/live_preview" }
            data-issue-id=[issue_id]
            data-limit=(content::MAX_BYTES)
            aria-labelledby="live-preview-title" {
            h2 #live-preview-title { "Live preview" }
            div.live-preview-tabs role="group" aria-label="Show" {
                label.check { input type="radio" name="live_preview_view" value="web" checked; "Web page" }
                label.check { input type="radio" name="live_preview_view" value="email"; "E-mail" }
            }
            p.muted #live-preview-status role="status" { "Type to see the preview." }
            iframe #live-web.preview title="Live preview of the web page" sandbox="allow-popups allow-popups-to-escape-sandbox" {}
            iframe #live-email.preview title="Live preview of the e-mail" sandbox="allow-popups allow-popups-to-escape-sandbox" hidden {}
        }
        script src="/assets/live-preview.js" defer {}
    }
}

/// `POST /newsletters/:id/issues/live_preview` with the CSRF token, `subject`,
/// `content_markdown` and optionally `issue_id` (whose articles are shown): 200 `{web,
/// email}`, the two documents; 422 `{problem}` for input beyond the content limits. A
/// missing or wrong token is refused as every form post is; nothing is saved.
#[handler]
pub async fn preview_live(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let n = owned(&ctx, state, &id).await?;
    let current = match form.get("issue_id") {
        "" => None,
        raw => {
            let (nid, iid) = (n.id, parse_id(raw)?);
            Some(
                state
                    .db
                    .run(move |conn| issues::get(conn, nid, iid))
                    .await?,
            )
        }
    };
    // The subject may be blank while typing: the preview shows what there is.
    let subject = form.get("subject");
    let input = IssueInput {
        subject: (!subject.trim().is_empty()).then(|| subject.to_string()),
        content_markdown: Some(form.get("content_markdown").to_string()),
        ..IssueInput::default()
    };
    let state2 = state.clone();
    let shown = tokio::task::spawn_blocking(move || {
        let checked = issues::check_changes(&input)?;
        let issue = issues::preview(n.id, current.as_ref(), checked);
        preview_documents(&state2, &n, &issue)
    })
    .await
    .map_err(|e| WebError::Internal(e.to_string()))?;
    Ok(match shown {
        Ok((mail, web)) => json_answer(
            StatusCode::OK,
            json!({"web": web, "email": mail.html, "subject": mail.subject}),
        ),
        Err(e @ (DomainError::Invalid(..) | DomainError::Rejected(..))) => {
            let found = problems(e)?;
            json_answer(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"problem": found.sentences().join(" ")}),
            )
        }
        Err(other) => return Err(other.into()),
    })
}

/// `GET /assets/live-preview.js`.
#[handler]
pub fn live_preview_script() -> Response {
    asset(
        JAVASCRIPT,
        FOR_AN_HOUR,
        include_str!("../../../assets/live-preview.js"),
    )
}
