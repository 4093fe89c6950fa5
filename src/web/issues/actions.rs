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
use super::test_send::{self, AskedFrom};
use super::{Posted, issue_url, list_url, posted, problems, render, typed_time, viewed};
use crate::domain::audience::{self, Audience, AudienceInput};
use crate::domain::issues::{self, Issue, IssueInput, Status};
use crate::domain::newsletters::Newsletter;
use crate::domain::sender_domains::SenderDomain;
use crate::domain::urls::SiteUrls;
use crate::domain::{DomainResult, FieldErrors, sending, subscribers};
use crate::http::plural::{count, noun};
use crate::web::layout::{Section, csrf_field, errors, newsletter_page};
use crate::web::time_zones::friendly;
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

/// `POST .../schedule` with `scheduled_for` (datetime-local, on the account's clocks; empty
/// takes the next slot) and, when the newsletter has tags, the audience the scheduled send
/// goes to.
#[handler]
pub async fn schedule(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let (at, then, zone, audience) = (
        p.form.get("scheduled_for").trim().to_string(),
        issue_url(p.n.id, p.issue.id),
        p.ctx.zone(),
        chosen_audience(&p.form),
    );
    act(req, state, p, then, move |conn, nid, iid| {
        let input = IssueInput {
            status: Some(Status::Scheduled.as_str().into()),
            scheduled_for: Some(match at.as_str() {
                "" => None,
                typed => Some(typed_time(typed, &zone)?),
            }),
            audience,
            ..Default::default()
        };
        let issue = issues::update(conn, nid, iid, &issues::check_changes(&input)?)?;
        Ok(format!(
            "Scheduled for {}.",
            issue
                .scheduled_for
                .map(|at| friendly(at, &zone))
                .unwrap_or_default()
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
            "Sending resumed: {} to go.",
            count(queued.recipients, "message", "messages")
        ))
    })
    .await
}

/// What the send confirmation says about the web: whether the issue will appear on the site
/// (the newsletter's "publish on send" setting) and where.
fn publishing_note(n: &Newsletter, issue: &Issue, urls: &SiteUrls) -> Markup {
    let page = issue.page_url(n, urls);
    html! {
        p #publishing-note {
            @if issue.published_at.is_some() {
                "It is already on your site at " a href=(page) { (page) } "."
            } @else if n.publish_on_send {
                "It will also appear on your site at " a href=(page) { (page) } " when the send completes."
            } @else {
                "It will not be published on the web; you can publish it afterwards, or have sent issues published in "
                a href={ "/newsletters/" (n.id) "/settings#publishing" } { "Settings" } "."
            }
        }
    }
}

/// The audience the send page works with: the tags to choose from (with how many
/// subscribers carry each) and the chosen lists.
struct AudienceChoice {
    tags: Vec<(String, i64)>,
    chosen: Audience,
}

/// The audience a send-page form names: `audience=chosen` marks a form that chose one
/// (`tags`, `exclude_tags`, none checked: everyone); without it, the issue's recorded one.
pub(super) fn chosen_audience(form: &FormData) -> Option<AudienceInput> {
    (form.get("audience") == "chosen").then(|| AudienceInput {
        tags: form.all("tags"),
        exclude_tags: form.all("exclude_tags"),
    })
}

/// The tag checkboxes of both lists (`tags`, `exclude_tags`), `chosen` checked, after the
/// marker that the form chooses an audience.
pub(super) fn audience_boxes(tags: &[(String, i64)], chosen: &Audience) -> Markup {
    html! {
        input type="hidden" name="audience" value="chosen";
        (tag_boxes("tags", "Send to", tags, &chosen.tags))
        (tag_boxes("exclude_tags", "Leave out", tags, &chosen.exclude_tags))
    }
}

/// The tag checkboxes of one list (`tags` or `exclude_tags`).
fn tag_boxes(name: &str, legend: &str, tags: &[(String, i64)], chosen: &[String]) -> Markup {
    html! {
        fieldset.tags {
            legend { (legend) }
            @for (tag, count) in tags {
                label.check {
                    input type="checkbox" name=(name) value=(tag) checked[chosen.contains(tag)];
                    (tag) " " span.muted { "(" (count) ")" }
                }
            }
        }
    }
}

fn send_page(
    ctx: &Ctx,
    n: &Newsletter,
    issue: &Issue,
    sender: Option<&SenderDomain>,
    (choice, verdict): (&AudienceChoice, &Result<i64, FieldErrors>),
    tier_next_steps: Markup,
    urls: &SiteUrls,
) -> Markup {
    let base = issue_url(n.id, issue.id);
    let chosen = &choice.chosen;
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        "Send now",
        html! {
            p { a href=(base) { "← " (issue.subject) } }
            h1 { "Send “" (issue.subject) "” now?" }
            (sender_domain::warning(n, sender))
            @if !choice.tags.is_empty() {
                section.panel #audience {
                    h2 { "Audience" }
                    p.muted { "Send to subscribers having any of the checked tags (none checked: every active subscriber), leaving out those having any tag checked under “Leave out”. The number of subscribers having each tag is in brackets." }
                    form.stack method="get" action={ (base) "/send" } {
                        (audience_boxes(&choice.tags, chosen))
                        button.secondary type="submit" { "Review" }
                    }
                }
            }
            @match verdict {
                Ok(recipients) => {
                    p #recipient-count {
                        "It goes out at once to " strong data-recipients=(recipients) { (recipients) }
                        " " (noun(*recipients, "active subscriber", "active subscribers"))
                        @if !chosen.is_everyone() { " (" span #audience-description { (chosen.describe()) } ")" }
                        ". This cannot be undone."
                    }
                    (publishing_note(n, issue, urls))
                    form.inline method="post" action={ (base) "/send" } {
                        (csrf_field(ctx))
                        input type="hidden" name="audience" value="chosen";
                        @for tag in &chosen.tags { input type="hidden" name="tags" value=(tag); }
                        @for tag in &chosen.exclude_tags { input type="hidden" name="exclude_tags" value=(tag); }
                        button type="submit" { "Send to " (count(*recipients, "subscriber", "subscribers")) }
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
            (test_send::form(ctx, n, issue, "", AskedFrom::SendPage))
        },
    )
}

/// What send_now would answer for the audience `given` (the issue's recorded one when
/// `None`), as the confirmation page shows it, with the tags to choose from.
async fn verdict(
    state: &State,
    n: &Newsletter,
    issue: &Issue,
    given: Option<AudienceInput>,
) -> Result<(AudienceChoice, Result<i64, FieldErrors>), crate::web::WebError> {
    let (n2, mut issue2) = (n.clone(), issue.clone());
    let (tags, chosen, verdict) = state
        .db
        .run(move |conn| {
            let tags = subscribers::tag_counts(conn, n2.id)?;
            let checked = match &given {
                Some(input) => audience::check(conn, n2.id, input, ""),
                None => Ok(issue2.audience.clone()),
            };
            let (chosen, verdict) = match checked {
                Ok(chosen) => {
                    issue2.audience = chosen.clone();
                    (chosen, issues::sendable(conn, &n2, &issue2))
                }
                Err(e) => (issue2.audience.clone(), Err(e)),
            };
            Ok::<_, crate::domain::DomainError>((tags, chosen, verdict))
        })
        .await?;
    let verdict = match verdict {
        Ok(recipients) => Ok(recipients),
        Err(e) => Err(problems(e)?),
    };
    Ok((AudienceChoice { tags, chosen }, verdict))
}

/// `GET .../send`: the confirmation, with the audience's tag choices and the exact recipient
/// count for the chosen audience (the query of the "Review" button), or why the issue cannot
/// be sent now.
#[handler]
pub async fn send_confirm(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (ctx, n, issue) = viewed(req, state, &id, &issue_id).await?;
    let query = FormData::parse(req.uri().query().unwrap_or_default().as_bytes());
    let (choice, verdict) = verdict(state, &n, &issue, chosen_audience(&query)).await?;
    let sender = sender_domain::load(state, &n).await?;
    let next = operator::tier_next_steps(state, &ctx, &n, req.uri().path()).await?;
    render(
        StatusCode::OK,
        send_page(
            &ctx,
            &n,
            &issue,
            sender.as_ref(),
            (&choice, &verdict),
            next,
            &state.urls,
        ),
    )
}

/// `POST .../send`: queues the send to the audience the page chose; the issue page then
/// follows its progress.
#[handler]
pub async fn send_now(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let (nid, iid) = (p.n.id, p.issue.id);
    let given = chosen_audience(&p.form);
    let sent_to = given.clone();
    match state
        .db
        .run(move |conn| issues::send_now(conn, nid, iid, sent_to.as_ref()))
        .await
    {
        Ok(queued) => {
            p.ctx.notice_next(
                req,
                &format!(
                    "Sending to {}.",
                    count(queued.recipients, "subscriber", "subscribers")
                ),
            );
            see_other(&issue_url(nid, iid))
        }
        Err(e) => {
            let found = problems(e)?;
            let (choice, _) = verdict(state, &p.n, &p.issue, given).await?;
            let sender = sender_domain::load(state, &p.n).await?;
            let next = operator::tier_next_steps(state, &p.ctx, &p.n, req.uri().path()).await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                send_page(
                    &p.ctx,
                    &p.n,
                    &p.issue,
                    sender.as_ref(),
                    (&choice, &Err(found)),
                    next,
                    &state.urls,
                ),
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
