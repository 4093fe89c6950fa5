//! One issue's report page: its opens and clicks, the clicks of each link (recipients who
//! clicked it and all its clicks) and a chart of its first seven days, each figure the same
//! as `GET /api/v1/issues/{id}/stats` shows (the same domain function).

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::charts::{self, ChartText, Group, figure};
use super::layout::{Section, csrf_field, errors, newsletter_page, table_wrap};
use super::newsletters::{owned, owned_post, parse_id};
use super::time_zones::shown;
use super::{Ctx, State, WebError, WebResult, problems, render, see_other};
use crate::domain::issues::resend_unopened::{self, AFTER_HOURS_MAX};
use crate::domain::issues::{self, Issue, Status};
use crate::domain::newsletters::Newsletter;
use crate::domain::reports::issue_report::{self, IssueReport, LINKS_SHOWN};
use crate::domain::{DomainError, FieldErrors};

#[handler]
pub async fn show_issue(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let page = report_page(
        &ctx,
        state,
        &n,
        parse_id(&issue_id)?,
        (&Typed::default(), &FieldErrors::new()),
    )
    .await?;
    render(StatusCode::OK, page)
}

/// The resend form as typed.
#[derive(Debug, Clone)]
struct Typed {
    subject: String,
    after_hours: String,
}

impl Default for Typed {
    fn default() -> Self {
        Typed {
            subject: String::new(),
            after_hours: "48".into(),
        }
    }
}

/// The report of issue `issue_id`, with the resend form filled with `typed` and `problems`.
async fn report_page(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    issue_id: i64,
    (typed, problems): (&Typed, &FieldErrors),
) -> Result<Markup, WebError> {
    let nid = n.id;
    let (report, issue, resend) = state
        .db
        .run(move |conn| {
            let report = issue_report::for_issue(conn, nid, issue_id)?;
            let issue = issues::get(conn, nid, issue_id)?;
            let resend = match issue.resent_unopened_as {
                Some(id) => Some(issues::get(conn, nid, id)?),
                None => None,
            };
            Ok::<_, DomainError>((report, issue, resend))
        })
        .await?;
    let issue_url = format!("/newsletters/{nid}/issues/{issue_id}");
    let title = format!("Report: {}", report.subject);
    Ok(newsletter_page(
        ctx,
        n,
        Section::Issues,
        &title,
        html! {
            p { a href=(issue_url) { "← " (report.subject) } }
            h1 { "Report: " (report.subject) }
            p.muted {
                @match report.sent_at {
                    Some(at) => { "Sent " (shown(at, &ctx.zone())) "." }
                    None => { "Not sent yet: the figures count from the send." }
                }
                @if !n.tracking_enabled {
                    " Open and click tracking is off, so mail sent meanwhile counts no opens or clicks."
                }
            }
            (totals(&report))
            section.panel aria-labelledby="week-heading" {
                h2 #week-heading { "The first week" }
                (week(&report))
            }
            section.panel aria-labelledby="links-heading" {
                h2 #links-heading { "Clicks per link" }
                (links(&report))
            }
            @if issue.status == Status::Sent && issue.audience.resend_of.is_none() {
                (resend_panel(ctx, &issue_url, &report, resend.as_ref(), (typed, problems)))
            }
        },
    ))
}

/// "Resend to those who did not open": the form, or the resend made already.
fn resend_panel(
    ctx: &Ctx,
    issue_url: &str,
    report: &IssueReport,
    resend: Option<&Issue>,
    (typed, problems): (&Typed, &FieldErrors),
) -> Markup {
    html! {
        section.panel #resend aria-labelledby="resend-heading" {
            h2 #resend-heading { "Resend to those who did not open" }
            @match resend {
                Some(resend) => p {
                    "Resent as " a href={ "/newsletters/" (resend.newsletter_id) "/issues/" (resend.id) } { "“" (resend.subject) "”" }
                    " (" (resend.status.as_str()) "). An issue is resent once."
                },
                None => {
                    p.muted { "Up to " (report.not_opened()) " readers have not opened it. The resend goes, with a new subject, to those who still have not when it starts; automatic opens do not count as opens." }
                    (errors(problems))
                    form.stack method="post" action={ (issue_url) "/resend_unopened" } {
                        (csrf_field(ctx))
                        label { "New subject" input type="text" name="subject" value=(typed.subject) required maxlength="200" placeholder={ "In case you missed it: " (report.subject) }; }
                        label { "Hours after the send (1 to " (AFTER_HOURS_MAX) ")" input type="number" name="after_hours" value=(typed.after_hours) min="1" max=(AFTER_HOURS_MAX) required; }
                        button type="submit" { "Schedule the resend" }
                    }
                }
            }
        }
    }
}

/// `POST .../issues/:issue_id/resend_unopened`: the resend, scheduled; its page opens.
#[handler]
pub async fn schedule_resend(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let (nid, issue_id) = (n.id, parse_id(&issue_id)?);
    let typed = Typed {
        subject: form.get("subject").to_string(),
        after_hours: form.get("after_hours").trim().to_string(),
    };
    let given = (typed.subject.clone(), typed.after_hours.clone());
    match state
        .db
        .run(move |conn| resend_unopened::resend_unopened(conn, nid, issue_id, &given.0, &given.1))
        .await
    {
        Ok(resend) => {
            ctx.notice_next(req, "The resend to those who did not open is scheduled.");
            see_other(&format!("/newsletters/{nid}/issues/{}", resend.id))
        }
        Err(e) => {
            let problems = problems(e)?;
            let page = report_page(&ctx, state, &n, issue_id, (&typed, &problems)).await?;
            render(StatusCode::UNPROCESSABLE_ENTITY, page)
        }
    }
}

/// One figure, its API name in `data-stat` and its value as the API writes it.
fn stat(label: &str, path: &str, value: impl std::fmt::Display, shown: String) -> Markup {
    html! {
        div.stat {
            span.label { (label) }
            strong data-stat=(path) data-value=(value.to_string()) { (shown) }
        }
    }
}

fn totals(r: &IssueReport) -> Markup {
    html! {
        div.stats {
            (stat("Delivered", "delivered", r.delivered, r.delivered.to_string()))
            (stat("Opened", "opens", r.opened, r.opened.to_string()))
            (stat("Open rate", "open_rate", r.open_rate, figure(r.open_rate, "%")))
            (stat("Clicked", "clicks", r.clicked, r.clicked.to_string()))
            (stat("Click rate", "click_rate", r.click_rate, figure(r.click_rate, "%")))
        }
        p.muted {
            "Rates are percentages of delivered e-mails; a click counts as an open."
            @if r.automatic_opens > 0 {
                " " strong data-stat="automatic_opens" data-value=(r.automatic_opens) { (r.automatic_opens) }
                " of the opens were automatic (Apple Mail Privacy Protection, or a mail scanner within seconds of delivery): a resend to those who did not open goes to them too."
            }
        }
    }
}

const SERIES: [&str; 2] = ["First opens", "First clicks"];

fn week(r: &IssueReport) -> Markup {
    let groups: Vec<Group> = r
        .days
        .iter()
        .map(|d| Group {
            label: day_label(d.day),
            key: d.day.to_string(),
            values: vec![d.opened as f64, d.clicked as f64],
        })
        .collect();
    let text = ChartText {
        id: "week-chart",
        title: "Opens and clicks in the first seven days",
        description: format!(
            "Recipients who first opened and first clicked in each of the seven days after their e-mail went out: {} opened and {} clicked on day 1.",
            r.days.first().map_or(0, |d| d.opened),
            r.days.first().map_or(0, |d| d.clicked)
        ),
        x_label: "Day after the send",
        y_label: "Recipients",
        unit: "",
    };
    html! {
        p.legend aria-hidden="true" {
            @for (j, name) in SERIES.iter().enumerate() {
                span.key { svg viewBox="0 0 10 10" { rect class={ "series-" (j) } width="10" height="10" {} } (name) }
            }
        }
        (charts::grouped_bars(&text, &SERIES, &groups))
        (table_wrap("Opens and clicks per day", html! { table #week-figures {
            thead { tr { th { "Day" } th { "First opens" } th { "First clicks" } th { "All clicks" } } }
            tbody {
                @for d in &r.days {
                    tr data-day=(d.day) data-opens=(d.opened) data-unique-clicks=(d.clicked) data-total-clicks=(d.clicks) {
                        td { (day_label(d.day)) }
                        td { (d.opened) }
                        td { (d.clicked) }
                        td { (d.clicks) }
                    }
                }
            }
        } }))
        p.muted { "Day 1 is the first 24 hours after each recipient's e-mail went out. Opens and clicks after day 7 count in the totals and the links only." }
    }
}

fn day_label(day: i64) -> String {
    format!("Day {day}")
}

fn links(r: &IssueReport) -> Markup {
    html! {
        @if r.links.is_empty() {
            p.empty { "No link clicked yet." }
        } @else {
            (table_wrap("Figures per link", html! { table #link-figures {
                thead { tr { th { "Link" } th { "People" } th { "Clicks" } } }
                tbody {
                    @for l in &r.links {
                        tr data-url=(l.url) data-unique-clicks=(l.clickers) data-total-clicks=(l.clicks) {
                            td.url { (l.url) }
                            td { (l.clickers) }
                            td { (l.clicks) }
                        }
                    }
                }
            } }))
            p.muted {
                "People: recipients who clicked the link at least once. Clicks: every click, repeats included."
                @if r.links_clicked > LINKS_SHOWN {
                    " The " (LINKS_SHOWN) " most clicked of " (r.links_clicked) " links are shown."
                }
            }
        }
    }
}
