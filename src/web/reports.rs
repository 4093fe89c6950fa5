//! One issue's report page: its opens and clicks, the clicks of each link (recipients who
//! clicked it and all its clicks) and a chart of its first seven days, each figure the same
//! as `GET /api/v1/issues/{id}/stats` shows (the same domain function).

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Request, handler, http::StatusCode};

use super::charts::{self, ChartText, Group, figure};
use super::layout::{Section, newsletter_page, table_wrap};
use super::newsletters::{owned, parse_id};
use super::time_zones::shown;
use super::{Ctx, State, WebResult, render};
use crate::domain::reports::issue_report::{self, IssueReport, LINKS_SHOWN};

#[handler]
pub async fn show_issue(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let (nid, issue_id) = (n.id, parse_id(&issue_id)?);
    let report = state
        .db
        .run(move |conn| issue_report::for_issue(conn, nid, issue_id))
        .await?;
    let issue_url = format!("/newsletters/{nid}/issues/{issue_id}");
    let title = format!("Report: {}", report.subject);
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
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
            },
        ),
    )
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
        p.muted { "Rates are percentages of delivered e-mails; a click counts as an open." }
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
