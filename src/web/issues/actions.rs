//! What the issue page's buttons do: approve, schedule, send now (after a confirmation that
//! states the recipient count), publish and delete, plus the JSON the live progress polls.
//! A refusal shows the domain's message on the page (422); nothing changes.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, Response, handler, http::StatusCode};
use rusqlite::Connection;
use serde_json::json;

use super::audience::{
    COUNTING, Choosable, Purpose, REVIEW_LABEL, SEND_COUNT_FAILED, audience_boxes, chosen_audience,
    chosen_mailing, count_line, counted, hidden_audience, mailing_choice, named_fields,
    names_another_audience, send_label,
};
use super::form::for_people;
use super::pages::show_response;
use super::test_send::{self, AskedFrom};
use super::{
    Posted, issue_url, json_answer, list_url, posted, problems, render, typed_time, viewed,
};
use crate::domain::issues::{self, Issue, IssueInput, Status};
use crate::domain::newsletters::Newsletter;
use crate::domain::newsletters::sender_domains::SenderDomain;
use crate::domain::subscribers::audience::{Audience, AudienceInput};
use crate::domain::values::urls::SiteUrls;
use crate::domain::{DomainResult, FieldErrors, delivery::sending};
use crate::http::plural::count;
use crate::web::layout::{
    Confirmation, Section, confirmation_page, csrf_field, errors, newsletter_page,
};
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
/// goes to: the boxes ticked in this form, recorded on the issue (the notice names it).
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
        let chose = input.audience.is_some();
        let issue = issues::update(conn, nid, iid, &issues::check_changes(&input)?)?;
        let at = issue
            .scheduled_for
            .map(|at| friendly(at, &zone))
            .unwrap_or_default();
        Ok(match chose {
            true => format!("Scheduled for {at}, to {}.", issue.audience.describe()),
            false => format!("Scheduled for {at}."),
        })
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

/// `POST .../unpublish`: the issue's page, and its place in the archive and the feed, go
/// off the site; Publish puts them back.
#[handler]
pub async fn unpublish(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let then = issue_url(p.n.id, p.issue.id);
    act(req, state, p, then, move |conn, nid, iid| {
        issues::unpublish(conn, nid, iid)?;
        Ok("Unpublished: the issue is no longer on the site.".into())
    })
    .await
}

/// `POST .../duplicate`: a new draft with the issue's subject ("Copy of …"), content and
/// articles; its editor opens.
#[handler]
pub async fn duplicate(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let (nid, iid) = (p.n.id, p.issue.id);
    match state
        .db
        .run(move |conn| issues::duplicate(conn, nid, iid))
        .await
    {
        Ok(copy) => {
            p.ctx.notice_next(
                req,
                &format!("Duplicated as a new draft, “{}”.", copy.subject),
            );
            see_other(&format!("{}/edit", issue_url(nid, copy.id)))
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
        let queued = sending::resume(conn, nid, iid)?;
        Ok(format!(
            "Sending resumed: {} to go.",
            count(queued.recipients, "message", "messages")
        ))
    })
    .await
}

/// Marks a send form that offers the "Publish on the site" box, so an unticked box (which
/// posts nothing) is told from a post without it (a script's), which follows the rule.
const PUBLISH_OFFERED: &str = "publish_offered";

/// The owner's publish choice in a posted send form: `None` when the form did not offer it.
fn publish_choice(form: &FormData) -> Option<bool> {
    (form.get(PUBLISH_OFFERED) == "yes").then(|| form.get("publish") == "on")
}

/// What the send confirmation says about the web: the "Publish on the site" box (ticked as
/// the owner left it, else by the rule of `issues::publishes_by_default`), what it does and
/// where; for an issue already on the site, that it is.
fn publishing_note(n: &Newsletter, issue: &Issue, urls: &SiteUrls, on_site: bool) -> Markup {
    let page = issue.page_url(n, urls);
    html! {
        @if issue.published_at.is_some() {
            p #publishing-note { "It is already on your site at " a href=(page) { (page) } "." }
        } @else {
            input type="hidden" name=(PUBLISH_OFFERED) value="yes";
            label.check {
                input #publish-box type="checkbox" name="publish" value="on" checked[on_site] aria-describedby="publishing-note";
                "Publish on the site"
            }
            p.muted #publishing-note {
                @if on_site {
                    "It will also appear on your site at " a href=(page) { (page) } " when the send completes. Untick the box to keep it off the site."
                } @else if issue.audience.is_everyone() {
                    "It will not be published on the web unless you tick the box; you can publish it afterwards, or have sent issues published in "
                    a href={ "/newsletters/" (n.id) "/settings#publishing" } { "Settings" } "."
                } @else {
                    "A send to some of your subscribers is not published on the web unless you tick the box; then it will be at "
                    a href=(page) { (page) } "."
                }
            }
        }
    }
}

/// What a send form asks (each `None` when the form does not say: the issue's own choice,
/// or the rule): its audience, for a paid issue whether only paid members get it, and
/// whether it goes on the site.
#[derive(Debug, Clone, Default)]
struct Asked {
    audience: Option<AudienceInput>,
    paid_only: Option<bool>,
    publish: Option<bool>,
}

impl Asked {
    fn of(form: &FormData) -> Self {
        Asked {
            audience: chosen_audience(form),
            paid_only: chosen_mailing(form),
            publish: publish_choice(form),
        }
    }
}

/// The audience the send page works with: the tags and fields to choose from and the
/// chosen audience.
struct AudienceChoice {
    choosable: Choosable,
    chosen: Audience,
    /// Whether the "Publish on the site" box is ticked.
    publish: bool,
}

/// Why the send page is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// Opened from the issue page (or the review link's query, or a refused send).
    Asked,
    /// The Review button.
    Reviewed,
    /// A Send whose ticks were not the audience its button was labelled for: nothing sent.
    Changed,
}

impl Shown {
    fn status(self) -> StatusCode {
        match self {
            Shown::Asked | Shown::Reviewed => StatusCode::OK,
            Shown::Changed => StatusCode::CONFLICT,
        }
    }
}

/// Why a Send came back as a review: the ticks changed after the count on its button.
fn changed_notice(verdict: &Result<i64, FieldErrors>) -> Markup {
    html! {
        p.notice.warning #audience-changed role="status" {
            @match verdict {
                Ok(recipients) => {
                    "You changed the audience: it now goes to " (count(*recipients, "subscriber", "subscribers"))
                    ". Nothing was sent yet. Press “" (send_label(*recipients)) "” to confirm."
                }
                Err(_) => { "You changed the audience, and nothing was sent: the ticked audience cannot be sent now (why is said below the tags)." }
            }
        }
    }
}

/// While the newsletter has no postal address for its footer, a hint on the send page: the
/// mail goes out without one, which anti-spam laws such as CAN-SPAM ask of commercial mail.
fn postal_address_hint(n: &Newsletter) -> Markup {
    html! {
        @if n.mail.postal_lines().is_empty() {
            p.notice #postal-address-hint {
                "This issue goes out without a postal address in its footer; laws such as CAN-SPAM ask commercial mail for one. "
                a href={ "/newsletters/" (n.id) "/settings#details" } { "Add it under Settings, Details" }
                "."
            }
        }
    }
}

/// The send page: one form with the audience's checkboxes, the count of the checked audience
/// and two buttons, Review (counts again) and Send (names the audience its count is for, so
/// the server can tell when the ticks changed after it; `assets/audience.js` keeps both up to
/// date as boxes are ticked).
fn send_page(
    ctx: &Ctx,
    (n, issue): (&Newsletter, &Issue),
    sender: Option<&SenderDomain>,
    (choice, verdict, shown): (&AudienceChoice, &Result<i64, FieldErrors>, Shown),
    tier_next_steps: Markup,
    urls: &SiteUrls,
) -> Markup {
    let base = issue_url(n.id, issue.id);
    let chosen = &choice.chosen;
    let has_boxes = !choice.choosable.is_empty();
    // A choice to make on the page: the tags, or who gets a paid issue by mail.
    let chooses = has_boxes || issue.visibility == issues::Visibility::Paid;
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        "Send now",
        html! {
            p { a href=(base) { "← " (issue.subject) } }
            h1 { "Send “" (issue.subject) "” now?" }
            (sender_domain::warning(n, sender))
            (postal_address_hint(n))
            @if shown == Shown::Changed { (changed_notice(verdict)) }
            @if chooses || verdict.is_ok() {
                form #send-form method="post" action={ (base) "/send" }
                    data-count-url={ (base) "/audience_count" } data-count-line="recipient-count"
                    data-counting=(COUNTING) data-count-failed=(SEND_COUNT_FAILED) {
                    (csrf_field(ctx))
                    @if chooses {
                        section.panel #audience {
                            h2 { "Audience" }
                            @if has_boxes {
                                @if !choice.choosable.tags.is_empty() {
                                    p.muted { "Send to subscribers having any of the checked tags (none checked: every active subscriber), leaving out those having any tag checked under “Leave out”. The number of active subscribers having each tag is in brackets (only active subscribers are sent to)." }
                                }
                                div.audience-lists { (audience_boxes(&choice.choosable, chosen)) }
                            } @else {
                                input type="hidden" name="audience" value="chosen";
                            }
                            (mailing_choice(issue, chosen))
                            button.secondary type="submit" name="intent" value="review" { "Review" }
                        }
                    } @else {
                        (hidden_audience(chosen))
                    }
                    @if let Ok(recipients) = verdict {
                        (named_fields(issue, chosen))
                        (count_line("recipient-count", Purpose::SendNow, chosen, verdict))
                        (publishing_note(n, &Issue { audience: chosen.clone(), ..issue.clone() }, urls, choice.publish))
                        button #send-button type="submit" name="intent" value="send" data-review-label=(REVIEW_LABEL) { (send_label(*recipients)) }
                        " "
                        a.button.secondary href=(base) { "Cancel" }
                    }
                }
            }
            @if let Err(found) = verdict {
                (errors(found))
                (tier_next_steps)
                p { "Nothing was sent. " a href=(base) { "Back to the issue" } }
            }
            (test_send::form(ctx, n, issue, "", AskedFrom::SendPage))
            @if chooses && verdict.is_ok() {
                script src="/assets/audience.js" defer {}
            }
        },
    )
}

/// What send_now would answer for what the form `asked` (the issue's recorded audience
/// when it names none), as the confirmation page shows it, with the tags to choose from.
async fn verdict(
    state: &State,
    n: &Newsletter,
    issue: &Issue,
    asked: &Asked,
) -> Result<(AudienceChoice, Result<i64, FieldErrors>), crate::web::WebError> {
    let (n2, issue2, given, paid_only) = (
        n.clone(),
        issue.clone(),
        asked.audience.clone(),
        asked.paid_only,
    );
    let (choosable, (chosen, verdict)) = state
        .db
        .run(move |conn| {
            // A resend's audience is the original's non-openers: nothing to choose.
            let choosable = match issue2.audience.resend_of {
                Some(_) => Choosable::default(),
                None => Choosable::read(conn, n2.id)?,
            };
            let counted = counted(
                conn,
                &n2,
                issue2,
                (given.as_ref(), paid_only),
                Purpose::SendNow,
            );
            Ok::<_, crate::domain::DomainError>((choosable, counted))
        })
        .await?;
    let verdict = match verdict {
        Ok(recipients) => Ok(recipients),
        Err(e) => Err(problems(e)?),
    };
    let on_site = asked
        .publish
        .unwrap_or_else(|| issues::publishes_by_default(n, &chosen));
    Ok((
        AudienceChoice {
            choosable,
            chosen,
            publish: on_site,
        },
        verdict,
    ))
}

/// The send page for what the form `asked`, with the exact recipient count or why it cannot
/// be sent now.
async fn review(
    req: &Request,
    state: &State,
    (ctx, n, issue): (&Ctx, &Newsletter, &Issue),
    asked: &Asked,
    shown: Shown,
) -> WebResult {
    let (choice, verdict) = verdict(state, n, issue, asked).await?;
    let sender = sender_domain::load(state, n).await?;
    let next = operator::tier_next_steps(state, ctx, n, req.uri().path()).await?;
    render(
        shown.status(),
        send_page(
            ctx,
            (n, issue),
            sender.as_ref(),
            (&choice, &verdict, shown),
            next,
            &state.urls,
        ),
    )
}

/// `GET .../send`: the confirmation, with the audience's tag choices and the exact recipient
/// count for the chosen audience (the issue's recorded one, or the one the query names:
/// `audience=chosen&tags=…&exclude_tags=…`), or why the issue cannot be sent now.
#[handler]
pub async fn send_confirm(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (ctx, n, issue) = viewed(req, state, &id, &issue_id).await?;
    let query = FormData::parse(req.uri().query().unwrap_or_default().as_bytes());
    let asked = Asked {
        publish: None,
        ..Asked::of(&query)
    };
    review(req, state, (&ctx, &n, &issue), &asked, Shown::Asked).await
}

/// `POST .../send`: the send page's form. Review (`intent=review`) shows the page again for
/// the ticked audience. Send goes to the ticked audience, taken from this form, but only if
/// it is the audience the button's count was made for (`named_tags`, `named_exclude_tags`);
/// otherwise the page comes back with the new count (409) and nothing is queued. A post
/// without the `audience=chosen` marker (a script) sends to the issue's recorded audience.
#[handler]
pub async fn send_now(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let p = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let (nid, iid) = (p.n.id, p.issue.id);
    let asked = Asked::of(&p.form);
    let shown = match &asked.audience {
        _ if p.form.get("intent") == "review" => Some(Shown::Reviewed),
        Some(ticked) if names_another_audience(&p.form, ticked) => Some(Shown::Changed),
        _ => None,
    };
    if let Some(shown) = shown {
        return review(req, state, (&p.ctx, &p.n, &p.issue), &asked, shown).await;
    }
    // The dashboard's one confirmation: a draft is approved and sent in the same step.
    let choice = issues::SendChoice {
        audience: asked.audience.clone(),
        publish: asked.publish,
        approve_draft: true,
        paid_members_only: asked.paid_only,
    };
    match state
        .db
        .run(move |conn| issues::send_with(conn, nid, iid, &choice))
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
            let (choice, _) = verdict(state, &p.n, &p.issue, &asked).await?;
            let sender = sender_domain::load(state, &p.n).await?;
            let next = operator::tier_next_steps(state, &p.ctx, &p.n, req.uri().path()).await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                send_page(
                    &p.ctx,
                    (&p.n, &p.issue),
                    sender.as_ref(),
                    (&choice, &Err(found), Shown::Asked),
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
        confirmation_page(
            &ctx,
            &n,
            Confirmation {
                section: Section::Issues,
                title: "Delete issue",
                question: format!("Delete “{}”?", issue.subject),
                consequences: html! {
                    "The draft and its articles are removed for good. Only drafts can be deleted."
                },
                action: &base,
                button: "Delete draft",
                back: &base,
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
    Ok(json_answer(StatusCode::OK, body))
}

/// `GET /assets/dashboard.js`: the few lines that make the dashboard livelier.
#[handler]
pub fn script() -> Response {
    Response::builder()
        .content_type("text/javascript; charset=utf-8")
        .header("Cache-Control", "public, max-age=3600")
        .body(include_str!("../../../assets/dashboard.js"))
}
