//! "Send again to the N unconfirmed" in the dashboard: the offer under a sent issue's
//! report, its confirmation page (what it risks, in a sentence), and the POST that asks the
//! domain for it (`sending::resend_unconfirmed`, the rule the API's `resend_unconfirmed` calls
//! too). A refusal shows the confirmation again with the domain's message (422).

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::{Posted, issue_url, posted, problems, render, viewed};
use crate::domain::issues::{Issue, Status};
use crate::domain::newsletters::Newsletter;
use crate::domain::{FieldErrors, delivery::sending};
use crate::http::plural::{count, noun};
use crate::web::layout::{Section, csrf_field, errors, newsletter_page};
use crate::web::{Ctx, FormData, State, WebResult, see_other};

/// What sending again risks, on the confirmation.
const RISK: &str = "An unconfirmed message went out whole but the mail relay never confirmed \
     it took it, so it may have arrived: whoever got the first copy gets a second one.";

fn resend_url(newsletter_id: i64, issue_id: i64) -> String {
    format!("{}/resend_unconfirmed", issue_url(newsletter_id, issue_id))
}

/// The offer under the report of a sent issue with `resendable` unconfirmed messages that
/// may go out again (none: nothing).
pub(super) fn offer(newsletter_id: i64, issue_id: i64, resendable: i64) -> Markup {
    html! {
        @if resendable > 0 {
            div #resend-offer {
                p { "You may send them again, knowing that whoever got the first copy then gets a second one." }
                a.button.secondary href=(resend_url(newsletter_id, issue_id)) {
                    "Send again to the " (resendable) " unconfirmed"
                }
            }
        }
    }
}

/// The confirmation: how many go out again and what it risks, or why nothing can.
fn confirm_page(
    ctx: &Ctx,
    n: &Newsletter,
    issue: &Issue,
    resendable: i64,
    found: &FieldErrors,
) -> Markup {
    let base = issue_url(n.id, issue.id);
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        "Send again to the unconfirmed",
        html! {
            p { a href=(base) { "← " (issue.subject) } }
            h1 { "Send “" (issue.subject) "” again to the unconfirmed?" }
            (errors(found))
            @if resendable > 0 && found.is_empty() {
                p #resend-count {
                    strong data-resendable=(resendable) { (resendable) }
                    " " (noun(resendable, "message", "messages")) " will go out once more. " (RISK)
                }
                p {
                    "Each unconfirmed message is sent again once at most. Those opened or clicked "
                    "(so they arrived), and subscribers who left since, are left out. The issue stays sent."
                }
                form.inline method="post" action=(resend_url(n.id, issue.id)) {
                    (csrf_field(ctx))
                    button type="submit" { "Send again to " (count(resendable, "recipient", "recipients")) }
                }
                " "
                a.button.secondary href=(base) { "Cancel" }
            } @else {
                @if found.is_empty() {
                    p #resend-none {
                        @if issue.status == Status::Sent {
                            "No unconfirmed message is left to send again."
                        } @else {
                            "Only a sent issue's unconfirmed messages can be sent again; this issue is " (issue.status.as_str()) "."
                        }
                    }
                }
                p { "Nothing was sent. " a href=(base) { "Back to the issue" } }
            }
        },
    )
}

/// How many of the issue's unconfirmed messages may go out again (0 unless it is sent).
async fn resendable(state: &State, issue: &Issue) -> Result<i64, crate::web::WebError> {
    if issue.status != Status::Sent {
        return Ok(0);
    }
    let iid = issue.id;
    Ok(state
        .db
        .run(move |conn| sending::resendable(conn, iid))
        .await?)
}

/// `GET .../resend_unconfirmed`: asks before sending the unconfirmed messages again.
#[handler]
pub async fn resend_confirm(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (ctx, n, issue) = viewed(req, state, &id, &issue_id).await?;
    let resendable = resendable(state, &issue).await?;
    render(
        StatusCode::OK,
        confirm_page(&ctx, &n, &issue, resendable, &FieldErrors::new()),
    )
}

/// `POST .../resend_unconfirmed`: sends them again and goes back to the issue with a
/// notice; a refusal shows the confirmation again with the domain's message.
#[handler]
pub async fn resend_unconfirmed(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let Posted { ctx, n, issue, .. } =
        posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let (nid, iid) = (n.id, issue.id);
    match state
        .db
        .run(move |conn| sending::resend_unconfirmed(conn, nid, iid))
        .await
    {
        Ok(done) => {
            let notice = if done.resent > 0 {
                format!(
                    "Sending again to {} unconfirmed {}.",
                    done.resent,
                    noun(done.resent, "recipient", "recipients")
                )
            } else {
                "Nothing was sent again: no unconfirmed message is left to send again.".into()
            };
            ctx.notice_next(req, &notice);
            see_other(&issue_url(nid, iid))
        }
        Err(e) => {
            let found = problems(e)?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                confirm_page(&ctx, &n, &issue, 0, &found),
            )
        }
    }
}
