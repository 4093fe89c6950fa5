//! The stats page of the dashboard: every figure of `GET /api/v1/newsletter/stats` (from the
//! same domain function), a chart of active subscribers per day and a chart of opens and
//! clicks of the recent sent issues, each with its figures in a table.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Request, handler, http::StatusCode};

use super::charts::{self, ChartText, Group, figure};
use super::layout::{Section, newsletter_page, table_wrap};
use super::newsletters::owned;
use super::time_zones::shown;
use super::{Ctx, State, WebResult, render};
use crate::domain::DomainError;
use crate::domain::reports::stats::{self, DayCount, IssueEngagement, Stats};
use crate::domain::subscribers::origin::Source;
use crate::domain::values::time_zones::TimeZoneName;

#[handler]
pub async fn show(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let nid = n.id;
    let (figures, growth, recent) = state
        .db
        .run(move |conn| {
            Ok::<_, DomainError>((
                stats::for_newsletter(conn, nid)?,
                stats::active_by_day(conn, nid, stats::GROWTH_DAYS)?,
                stats::recent_issues(conn, nid, stats::RECENT_ISSUES)?,
            ))
        })
        .await?;
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
            Section::Stats,
            "Stats",
            html! {
                h1 { "Stats" }
                @if !n.tracking_enabled {
                    p.muted { "Open and click tracking is off, so issues sent meanwhile count no opens or clicks. "
                        a href={ "/newsletters/" (nid) "/settings#tracking" } { "Change it in the settings." } }
                }
                (numbers(&figures))
                section.panel aria-labelledby="growth-heading" {
                    h2 #growth-heading { "Subscriber growth" }
                    (growth_chart(&figures, &growth))
                }
                section.panel aria-labelledby="engagement-heading" {
                    h2 #engagement-heading { "Opens and clicks per issue" }
                    (engagement_chart(&recent, &ctx.zone()))
                }
                (top_issues(&figures))
            },
        ),
    )
}

/// One figure: `data-stat` names its path in the API's stats object and `data-value` holds
/// it as the API writes it, so scripts and tests can compare the two.
fn stat(label: &str, path: &str, value: impl std::fmt::Display, shown: String) -> Markup {
    html! {
        div.stat {
            span.label { (label) }
            strong data-stat=(path) data-value=(value.to_string()) { (shown) }
        }
    }
}

fn rate(value: f64) -> String {
    figure(value, "%")
}

/// The sources of new subscribers as the stats page names them.
const SOURCES: [(Source, &str); 4] = [
    (Source::Form, "Signup forms"),
    (Source::Import, "Imports"),
    (Source::Api, "API"),
    (Source::Dashboard, "Added by hand"),
];

fn numbers(s: &Stats) -> Markup {
    let subscribers = &s.subscribers;
    let growth = subscribers.growth_last_30_days;
    let engagement = &s.engagement;
    let last = &engagement.last_30_days;
    html! {
        h2 { "Subscribers" }
        div.stats {
            (stat("Active", "subscribers.active", subscribers.active, subscribers.active.to_string()))
            (stat("Total", "subscribers.total", subscribers.total, subscribers.total.to_string()))
            (stat("Unsubscribed", "subscribers.unsubscribed", subscribers.unsubscribed, subscribers.unsubscribed.to_string()))
            (stat("Bounced", "subscribers.bounced", subscribers.bounced, subscribers.bounced.to_string()))
            (stat("Growth, last 30 days", "subscribers.growth_last_30_days", growth,
                if growth > 0 { format!("+{growth}") } else { growth.to_string() }))
        }
        h3 { "New subscribers by source, last 30 days" }
        div.stats {
            @for (source, label) in SOURCES {
                @let count = subscribers.new_by_source.of(source);
                (stat(label, &format!("subscribers.new_by_source_last_30_days.{source}"), count, count.to_string()))
            }
        }
        h2 { "Issues and engagement" }
        div.stats {
            (stat("Issues", "issues.total", s.issues.total, s.issues.total.to_string()))
            (stat("Sent, last 30 days", "issues.sent_last_30_days", s.issues.sent_last_30_days, s.issues.sent_last_30_days.to_string()))
            (stat("Average open rate", "engagement.average_open_rate", engagement.average_open_rate, rate(engagement.average_open_rate)))
            (stat("Average click rate", "engagement.average_click_rate", engagement.average_click_rate, rate(engagement.average_click_rate)))
            (stat("E-mails sent, last 30 days", "engagement.last_30_days.emails_sent", last.emails_sent, last.emails_sent.to_string()))
            @if last.emails_unconfirmed > 0 {
                (stat("Unconfirmed, last 30 days", "engagement.last_30_days.emails_unconfirmed", last.emails_unconfirmed, last.emails_unconfirmed.to_string()))
            }
            (stat("Opens, last 30 days", "engagement.last_30_days.opens", last.opens, last.opens.to_string()))
            (stat("Clicks, last 30 days", "engagement.last_30_days.clicks", last.clicks, last.clicks.to_string()))
        }
        p.muted {
            "Rates are percentages of delivered e-mails (bounces excluded); a click counts as an open. "
            @if last.emails_unconfirmed > 0 {
                "Unconfirmed e-mails went out whole but the mail relay's answer never came (a crash or a timeout): they may have arrived, and are never sent twice."
            }
        }
    }
}

fn growth_chart(s: &Stats, series: &[DayCount]) -> Markup {
    let (Some(first), Some(last)) = (series.first(), series.last()) else {
        return html! {};
    };
    if s.subscribers.total == 0 {
        return html! { p.empty { "No subscribers yet. Growth shows here once people subscribe." } };
    }
    let highest = series.iter().map(|d| d.active).max().unwrap_or(0);
    let text = ChartText {
        id: "growth-chart",
        title: "Active subscribers per day",
        description: format!(
            "Active subscribers at the end of each day from {} to {}: {} at the start, {} now, highest {}.",
            first.day, last.day, first.active, last.active, highest
        ),
        x_label: "Day (UTC)",
        y_label: "Active subscribers",
        unit: "",
    };
    let points: Vec<(String, f64)> = series
        .iter()
        .map(|d| (d.day.clone(), d.active as f64))
        .collect();
    html! {
        (charts::line_chart(&text, &points))
        details {
            summary { "Figures for the last " (crate::http::plural::count(series.len() as i64, "day", "days")) }
            (table_wrap("Active subscribers per day", html! { table #growth-figures {
                thead { tr { th { "Day" } th { "Active subscribers" } } }
                tbody {
                    @for d in series.iter().rev() {
                        tr data-day=(d.day) { td { (d.day) } td { (d.active) } }
                    }
                }
            } }))
        }
    }
}

const SERIES: [&str; 2] = ["Opens", "Clicks"];

fn engagement_chart(recent: &[IssueEngagement], zone: &TimeZoneName) -> Markup {
    if recent.is_empty() {
        return html! { p.empty { "No sent issues yet. Opens and clicks show here once an issue is sent." } };
    }
    // Newest on top, as the table and the issues list read.
    let groups: Vec<Group> = recent
        .iter()
        .map(|i| Group {
            label: i.subject.clone(),
            key: i.id.to_string(),
            values: vec![i.open_rate, i.click_rate],
        })
        .collect();
    let text = ChartText {
        id: "engagement-chart",
        title: "Open and click rates of the recent sent issues",
        description: format!(
            "Percentages of delivered e-mails opened and clicked for the last {} sent issues, newest first.",
            recent.len()
        ),
        x_label: "Issue",
        y_label: "% of delivered e-mails",
        unit: "%",
    };
    html! {
        p.legend aria-hidden="true" {
            @for (j, name) in SERIES.iter().enumerate() {
                span.key { svg viewBox="0 0 10 10" { rect class={ "series-" (j) } width="10" height="10" {} } (name) }
            }
        }
        (charts::grouped_bars(&text, &SERIES, &groups))
        details {
            summary { "Figures per issue" }
            (table_wrap("Figures per issue", html! { table #engagement-figures {
                thead { tr { th { "Issue" } th { "Sent" } th { "Delivered" } th { "Opens" } th { "Open rate" } th { "Clicks" } th { "Click rate" } } }
                tbody {
                    @for i in recent {
                        tr data-issue=(i.id) {
                            td { (i.subject) }
                            td { @if let Some(at) = i.sent_at { (shown(at, zone)) } }
                            td { (i.delivered) }
                            td { (i.opens) }
                            td data-rate="open" { (rate(i.open_rate)) }
                            td { (i.clicks) }
                            td data-rate="click" { (rate(i.click_rate)) }
                        }
                    }
                }
            } }))
        }
    }
}

fn top_issues(s: &Stats) -> Markup {
    html! {
        @if !s.top_issues.is_empty() {
            h2 { "Top issues by open rate" }
            (table_wrap("Top issues by open rate", html! { table #top-issues {
                thead { tr { th { "Issue" } th { "Open rate" } th { "Click rate" } } }
                tbody {
                    @for t in &s.top_issues {
                        tr data-issue=(t.id) data-open-rate=(t.open_rate) data-click-rate=(t.click_rate) {
                            td { (t.subject) } td { (rate(t.open_rate)) } td { (rate(t.click_rate)) }
                        }
                    }
                }
            } }))
        }
    }
}
