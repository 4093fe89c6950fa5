//! What the issue page's buttons do: approve, schedule, send now (after a confirmation that
//! states the recipient count), publish and delete, plus the JSON the live progress polls.
//! A refusal shows the domain's message on the page (422); nothing changes.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, Response, handler, http::StatusCode};
use rusqlite::Connection;
use serde_json::json;

use super::form::for_people;
use super::pages::show_response;
use super::{Posted, issue_url, list_url, posted, problems, render, utc_from_local, viewed, when};
use crate::domain::issues::{self, Issue, IssueInput, Status};
use crate::domain::newsletters::Newsletter;
use crate::domain::sender_domains::SenderDomain;
use crate::domain::{DomainResult, FieldErrors, sending};
use crate::web::layout::{Section, csrf_field, errors, newsletter_page};
use crate::web::{Ctx, FormData, State, WebResult, see_other};
use crate::web::{operator, sender_domain};

/// Runs `op` (which returns the notice to show) and goes on to `then`; a refusal shows the
/// issue page again with the domain's message.
async fn act<F>(req: &Request, state: &State, p: Posted, then: String, op: F) -> WebResult
where
    F: FnOnce(&mut Connection, i64, i64) -> DomainResult<String> + Send + 'static,
{
    let (nid, iid) = (p.n.id, p.issue.id);
    match state.db.run(move |conn| op(conn, nid, iid)).await {
        Ok(notice) => {
            p.ctx.notice_next(req, &notice);
            see_other(&then)
        }
        Err(e) => {
            let found = for_people(problems(e)?);
            show_response(
                &p.ctx,
                state,
                &p.n,
                p.issue,
                &found,
                StatusCode::UNPROCESSABLE_ENTITY,
            )
            .await
        }
    }
}

/// `POST .../approve`: a draft (or a scheduled issue, keeping its time) becomes approved.
#[handler]
pub async fn approve(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let then = issue_url(p.n.id, p.issue.id);
    act(req, state, p, then, |conn, nid, iid| {
        let input = IssueInput {
            status: Some(Status::Approved.as_str().into()),
            ..Default::default()
        };
        issues::update(conn, nid, iid, &issues::check_changes(&input)?)?;
        Ok("Approved: it can be sent, scheduled or published now.".into())
    })
    .await
}

/// `POST .../schedule` with `scheduled_for` (datetime-local, UTC; empty takes the next slot).
#[handler]
pub async fn schedule(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let (at, then) = (
        p.form.get("scheduled_for").trim().to_string(),
        issue_url(p.n.id, p.issue.id),
    );
    act(req, state, p, then, move |conn, nid, iid| {
        let input = IssueInput {
            status: Some(Status::Scheduled.as_str().into()),
            scheduled_for: Some((!at.is_empty()).then(|| utc_from_local(&at))),
            ..Default::default()
        };
        let issue = issues::update(conn, nid, iid, &issues::check_changes(&input)?)?;
        Ok(format!(
            "Scheduled for {}.",
            issue.scheduled_for.map(when).unwrap_or_default()
        ))
    })
    .await
}

/// `POST .../publish`: the issue's web page goes live on the newsletter's site.
#[handler]
pub async fn publish(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let (urls, then) = (state.urls.clone(), issue_url(p.n.id, p.issue.id));
    act(req, state, p, then, move |conn, nid, iid| {
        let published = issues::publish(conn, &urls, nid, iid)?;
        Ok(format!("Published at {}", published.web_url))
    })
    .await
}

/// `POST .../resume`: goes on with a send that stopped because the relay stayed unreachable.
#[handler]
pub async fn resume(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let then = issue_url(p.n.id, p.issue.id);
    act(req, state, p, then, move |conn, nid, iid| {
        let queued = issues::resume(conn, nid, iid)?;
        Ok(format!(
            "Sending resumed: {} message(s) to go.",
            queued.recipients
        ))
    })
    .await
}

fn send_page(
    ctx: &Ctx,
    n: &Newsletter,
    issue: &Issue,
    sender: Option<&SenderDomain>,
    verdict: &Result<i64, FieldErrors>,
    tier_next_steps: Markup,
) -> Markup {
    let base = issue_url(n.id, issue.id);
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        "Send now",
        html! {
            p { a href=(base) { "← " (issue.subject) } }
            h1 { "Send “" (issue.subject) "” now?" }
            (sender_domain::warning(n, sender))
            @match verdict {
                Ok(recipients) => {
                    p #recipient-count {
                        "It goes out at once to " strong data-recipients=(recipients) { (recipients) }
                        @if *recipients == 1 { " active subscriber" } @else { " active subscribers" }
                        ". This cannot be undone."
                    }
                    form.inline method="post" action={ (base) "/send" } {
                        (csrf_field(ctx))
                        button type="submit" { "Send to " (recipients) @if *recipients == 1 { " subscriber" } @else { " subscribers" } }
                    }
                    " "
                    a.button.secondary href=(base) { "Cancel" }
                }
                Err(found) => {
                    (errors(found))
                    (tier_next_steps)
                    p { "Nothing was sent. " a href=(base) { "Back to the issue" } }
                }
            }
        },
    )
}

/// What send_now would answer, as the confirmation page shows it.
async fn verdict(
    state: &State,
    n: &Newsletter,
    issue: &Issue,
) -> Result<Result<i64, FieldErrors>, crate::web::WebError> {
    let (n2, issue2) = (n.clone(), issue.clone());
    match state
        .db
        .run(move |conn| issues::sendable(conn, &n2, &issue2))
        .await
    {
        Ok(recipients) => Ok(Ok(recipients)),
        Err(e) => Ok(Err(problems(e)?)),
    }
}

/// `GET .../send`: the confirmation, with the recipient count (the active subscribers), or
/// why the issue cannot be sent now.
#[handler]
pub async fn send_confirm(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (ctx, n, issue) = viewed(req, state, &id, &issue_id).await?;
    let verdict = verdict(state, &n, &issue).await?;
    let sender = sender_domain::load(state, &n).await?;
    let next = operator::tier_next_steps(state, &ctx, &n, req.uri().path()).await?;
    render(
        StatusCode::OK,
        send_page(&ctx, &n, &issue, sender.as_ref(), &verdict, next),
    )
}

/// `POST .../send`: queues the send; the issue page then follows its progress.
#[handler]
pub async fn send_now(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let (nid, iid) = (p.n.id, p.issue.id);
    match state
        .db
        .run(move |conn| issues::send_now(conn, nid, iid))
        .await
    {
        Ok(queued) => {
            p.ctx.notice_next(
                req,
                &format!("Sending to {} subscriber(s).", queued.recipients),
            );
            see_other(&issue_url(nid, iid))
        }
        Err(e) => {
            let verdict = Err(problems(e)?);
            let sender = sender_domain::load(state, &p.n).await?;
            let next = operator::tier_next_steps(state, &p.ctx, &p.n, req.uri().path()).await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                send_page(&p.ctx, &p.n, &p.issue, sender.as_ref(), &verdict, next),
            )
        }
    }
}

/// `GET .../delete`: asks before deleting a draft.
#[handler]
pub async fn delete_confirm(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (ctx, n, issue) = viewed(req, state, &id, &issue_id).await?;
    let base = issue_url(n.id, issue.id);
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
            Section::Issues,
            "Delete issue",
            html! {
                p { a href=(base) { "← " (issue.subject) } }
                h1 { "Delete “" (issue.subject) "”?" }
                p { "The draft and its articles are removed for good. Only drafts can be deleted." }
                form.inline method="post" action=(base) {
                    (csrf_field(&ctx))
                    input type="hidden" name="_method" value="delete";
                    button.danger type="submit" { "Delete draft" }
                }
                " "
                a.button.secondary href=(base) { "Cancel" }
            },
        ),
    )
}

/// `DELETE /newsletters/:id/issues/:issue_id` (through [`super::change`]): drafts only.
pub(super) async fn delete(req: &Request, state: &State, p: Posted) -> WebResult {
    let (then, subject) = (list_url(p.n.id), p.issue.subject.clone());
    act(req, state, p, then, move |conn, nid, iid| {
        issues::delete(conn, nid, iid)?;
        Ok(format!("Deleted “{subject}”."))
    })
    .await
}

/// `GET .../progress`: the send's counts as JSON, for the issue page's live progress.
#[handler]
pub async fn progress(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, _, issue) = viewed(req, state, &id, &issue_id).await?;
    let iid = issue.id;
    let p = state
        .db
        .run(move |conn| sending::progress(conn, iid))
        .await?;
    let body = json!({
        "status": issue.status.as_str(),
        "total": p.total,
        "sent": p.sent,
        "unconfirmed": p.unconfirmed,
        "bounced": p.bounced,
        "failed": p.failed,
        // Why the send waits (the mail relay unreachable since when, the next try), if it does.
        "waiting": issue.last_error.as_deref().filter(|_| issue.status == issues::Status::Sending),
        "remaining": p.remaining,
        "done": p.done(),
        "percent": p.percent(),
    });
    Ok(Response::builder()
        .content_type("application/json")
        .header("Cache-Control", "no-store")
        .body(body.to_string()))
}

/// `GET /assets/dashboard.js`: the few lines that make the dashboard livelier.
#[handler]
pub fn script() -> Response {
    Response::builder()
        .content_type("text/javascript; charset=utf-8")
        .header("Cache-Control", "public, max-age=3600")
        .body(include_str!("../../../assets/dashboard.js"))
}
