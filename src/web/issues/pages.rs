//! The issue list, the issue page (facts, actions, live progress, final report) and the
//! previews: the e-mail from the real renderer, the web page from the public site's own view.

use maud::{Markup, html};
use poem::web::{Data, Path, Query};
use poem::{Request, handler, http::StatusCode};
use serde::Deserialize;

use super::audience::{
    COUNTING, Choosable, Purpose, SCHEDULE_COUNT_FAILED, audience_boxes, count_line,
};
use super::test_send::{self, AskedFrom};
use super::{issue_url, list_url, problems, render, viewed};
use crate::clock::{self, Timestamp};
use crate::domain::content;
use crate::domain::content::merge_tags::Reader;
use crate::domain::delivery::sending::{self, Report};
use crate::domain::delivery::tracking::Links;
use crate::domain::issues::{self, Issue, Status};
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::audience;
use crate::domain::values::pagination::Page;
use crate::domain::values::time_zones::{TimeZoneName, local_input};
use crate::domain::{DomainError, FieldErrors};
use crate::http::public_page::{Styles, issue_document};
use crate::mail::render::IssueEmail;
use crate::web::layout::{Section, csrf_field, errors, newsletter_page, table_wrap};
use crate::web::newsletters::owned;
use crate::web::time_zones::shown;
use crate::web::{Ctx, State, WebError, WebResult, invalid_fields};

/// The list's tabs: `None` is all.
const TABS: [Option<Status>; 7] = [
    None,
    Some(Status::Draft),
    Some(Status::Approved),
    Some(Status::Scheduled),
    Some(Status::Sending),
    Some(Status::Sent),
    Some(Status::Failed),
];

#[derive(Deserialize)]
pub struct ListQuery {
    status: Option<String>,
    page: Option<String>,
}

fn status_badge(status: Status) -> Markup {
    html! { span class={ "status status-" (status.as_str()) } { (status.as_str()) } }
}

fn list_link(newsletter_id: i64, status: Option<&str>, page: u32) -> String {
    let mut url = list_url(newsletter_id);
    let mut sep = '?';
    if let Some(s) = status {
        url.push_str(&format!("{sep}status={s}"));
        sep = '&';
    }
    if page > 1 {
        url.push_str(&format!("{sep}page={page}"));
    }
    url
}

/// `GET /newsletters/:id/issues?status=&page=`: newest first, by status tab.
#[handler]
pub async fn index(
    req: &Request,
    Path(id): Path<String>,
    Query(query): Query<ListQuery>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let zone = ctx.zone();
    let status = query.status.filter(|s| !s.is_empty() && s != "all");
    let nid = n.id;
    let (chosen, raw_page) = (status.clone(), query.page.clone());
    let found = state
        .db
        .run(move |conn| {
            let page = Page::parse(raw_page.as_deref(), None)?;
            let (rows, more) = issues::list(conn, nid, page, chosen.as_deref())?;
            Ok::<_, DomainError>((page, rows, more))
        })
        .await;
    let (page, rows, more, found, code) = match found {
        Ok((page, rows, more)) => (page.page, rows, more, FieldErrors::new(), StatusCode::OK),
        Err(e) => (
            1,
            Vec::new(),
            false,
            invalid_fields(e)?,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    };
    render(
        code,
        newsletter_page(
            &ctx,
            &n,
            Section::Issues,
            "Issues",
            html! {
                div.heading {
                    h1 { "Issues" }
                    a.button href={ (list_url(nid)) "/new" } { "New issue" }
                    a.button.secondary href={ "/newsletters/" (nid) "/feed" } { "Follow a feed" }
                    a.button.secondary href={ "/newsletters/" (nid) "/sequences" } { "Sequences" }
                }
                nav.tabs aria-label="Status" {
                    @for tab in TABS {
                        @let name = tab.map(Status::as_str);
                        a href=(list_link(nid, name, 1)) aria-current=[(name == status.as_deref()).then_some("page")] { (name.unwrap_or("all")) }
                    }
                }
                (errors(&found))
                @if rows.is_empty() && found.is_empty() {
                    p.muted { "No issues here yet." }
                } @else if !rows.is_empty() {
                    (table_wrap("Issues", html! { table #issues {
                        thead { tr { th { "Subject" } th { "Status" } th { "Created" } th { "Scheduled / sent" } th { "Web" } } }
                        tbody {
                            @for issue in &rows {
                                tr data-issue-id=(issue.id) {
                                    td { a href=(issue_url(nid, issue.id)) { (issue.subject) } }
                                    td { (status_badge(issue.status)) }
                                    td { (shown(issue.created_at, &zone)) }
                                    td {
                                        @if let Some(sent) = &issue.sent_at { "sent " (shown(*sent, &zone)) }
                                        @else if let Some(at) = &issue.scheduled_for { (shown(*at, &zone)) }
                                    }
                                    td {
                                        @if let Some(url) = issue.web_url(&n, &state.urls) { a href=(url) { "published" } }
                                    }
                                }
                            }
                        }
                    } }))
                }
                nav.pager aria-label="Pages" {
                    @if page > 1 { a rel="prev" href=(list_link(nid, status.as_deref(), page - 1)) { "← Newer" } " " }
                    @if more { a rel="next" href=(list_link(nid, status.as_deref(), page + 1)) { "Older →" } }
                }
            },
        ),
    )
}

/// An issue with what its page shows besides it.
struct IssueView {
    issue: Issue,
    /// While sending and once sent.
    report: Option<Report>,
    /// The schedule form's default: the issue's own time when scheduled, else the next slot.
    schedule_default: String,
    /// The newsletter's tags and their subscribers, for the schedule form's audience (editable
    /// issues only).
    /// The tags and fields the schedule form's audience is chosen from.
    tags: Choosable,
    /// How many the recorded audience has now (or why it cannot be counted), for the schedule
    /// form's count line: only when it offers tags.
    audience_count: Option<Result<i64, FieldErrors>>,
}

async fn load_view(
    state: &State,
    n: &Newsletter,
    issue: Issue,
    zone: &TimeZoneName,
) -> Result<IssueView, WebError> {
    let report = match issue.status {
        Status::Sending | Status::Sent | Status::Failed => {
            let shown = issue.clone();
            Some(
                state
                    .db
                    .run(move |conn| sending::report(conn, &shown))
                    .await?,
            )
        }
        _ => None,
    };
    let schedule_default = match (&issue.scheduled_for, issue.status) {
        (Some(at), Status::Scheduled) => local_input(*at, zone),
        _ => n
            .frequency
            .and_then(|f| issues::next_slot(f, clock::now(), &n.time_zone))
            .map(|slot| local_input(Timestamp::from(slot), zone))
            .unwrap_or_default(),
    };
    let (tags, audience_count) = if issue.status.is_editable() {
        let (nid, recorded, resend) = (n.id, issue.audience.clone(), issue.audience.resend_of);
        let (tags, counted) = state
            .db
            .run(move |conn| {
                // A resend's audience is the original's non-openers: nothing to choose.
                let tags = match resend {
                    Some(_) => Choosable::default(),
                    None => Choosable::read(conn, nid)?,
                };
                let counted = (!tags.is_empty()).then(|| audience::count(conn, nid, &recorded));
                Ok::<_, DomainError>((tags, counted))
            })
            .await?;
        let audience_count = match counted {
            Some(Err(e)) => Some(Err(problems(e)?)),
            Some(Ok(recipients)) => Some(Ok(recipients)),
            None => None,
        };
        (tags, audience_count)
    } else {
        (Choosable::default(), None)
    };
    Ok(IssueView {
        issue,
        report,
        schedule_default,
        tags,
        audience_count,
    })
}

fn post_button(ctx: &Ctx, action: &str, label: &str, class: &str) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            (csrf_field(ctx))
            button class=(class) type="submit" { (label) }
        }
    }
}

/// `waiting`: why the send waits (the relay unreachable), kept up to date by the page's script.
fn progress_panel(base: &str, report: &Report, waiting: Option<&str>) -> Markup {
    let p = &report.progress;
    html! {
        section.panel #send-progress-panel data-progress-url={ (base) "/progress" } {
            h2 { "Sending" }
            @if p.total > 0 {
                progress #send-progress max=(p.total) value=(p.done()) { (p.percent()) "%" }
            } @else {
                progress #send-progress { "starting" }
            }
            p {
                "Sent " strong data-progress="sent" { (p.sent) } " of " strong data-progress="total" { (p.total) }
                " · bounced " strong data-progress="bounced" { (p.bounced) }
                " · failed " strong data-progress="failed" { (p.failed) }
                " · unconfirmed " strong data-progress="unconfirmed" { (p.unconfirmed) }
                " · " span data-progress="percent" { (p.percent()) } "%"
            }
            p.warning role="status" data-progress="waiting" hidden[waiting.is_none()] { (waiting.unwrap_or_default()) }
            p.muted.progress-note { "This updates by itself while the issue is sending." }
            p.progress-done hidden { "Finished. " a href=(base) { "Show the report" } }
        }
    }
}

fn report_panel(issue: &Issue, report: &Report) -> Markup {
    let p = &report.progress;
    html! {
        section.panel {
            h2 { "Report" }
            (table_wrap("Report", html! { table #report {
                thead { tr { th { span.visually-hidden { "Measure" } } th { "Messages" } th { "Of delivered" } } }
                tbody {
                    tr { th { "Recipients" } td #report-recipients { (p.total) } td {} }
                    tr { th { "Delivered" } td #report-delivered { (p.sent) } td {} }
                    tr { th { "Opens" } td #report-opens { (report.opened) } td { (report.open_rate) "%" } }
                    tr { th { "Clicks" } td #report-clicks { (report.clicked) } td { (report.click_rate) "%" } }
                    tr { th { "Bounces" } td #report-bounces { (p.bounced) } td {} }
                    tr { th { "Failed" } td #report-failed { (p.failed) } td {} }
                    tr { th { "Unconfirmed" } td #report-unconfirmed { (p.unconfirmed) } td {} }
                    @if p.remaining > 0 { tr { th { "Not sent yet" } td #report-pending { (p.remaining) } td {} } }
                    tr { th { "Unsubscribes" } td #report-unsubscribes { (report.unsubscribed) } td {} }
                }
            } }))
            p.muted { "Opens and clicks count delivered messages opened or clicked at least once (opens only while tracking is on)." }
            p { a #report-link href={ "/newsletters/" (issue.newsletter_id) "/issues/" (issue.id) "/report" } { "Clicks per link and the first week" } }
            p.muted {
                "Bounces were refused for good by the receiving server; failed messages were refused for now five times. "
                "Unconfirmed messages went out whole but the mail relay's answer never came (the server stopped, or the answer timed out): they may have arrived, so nobody is sent a second copy unless you choose to."
            }
            (super::resend::offer(issue.newsletter_id, issue.id, report.resendable))
        }
    }
}

/// The issue page.
fn show_page(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    view: &IssueView,
    found: &FieldErrors,
) -> Markup {
    let issue = &view.issue;
    let base = issue_url(n.id, issue.id);
    let web_url = issue.web_url(n, &state.urls);
    let editable = issue.status.is_editable();
    let zone = ctx.zone();
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        &issue.subject,
        html! {
            p { a href=(list_url(n.id)) { "← Issues" } }
            h1 { (issue.subject) }
            (errors(found))
            p #issue-status { (status_badge(issue.status)) " · created " (shown(issue.created_at, &zone)) " · updated " (shown(issue.updated_at, &zone)) }
            dl.facts {
                @if let Some(at) = &issue.scheduled_for { dt { "Send time" } dd { (shown(*at, &zone)) } }
                @if let Some(at) = &issue.sent_at { dt { "Sent" } dd { (shown(*at, &zone)) } }
                dt { "Articles" } dd { (issue.articles_count) }
                dt { "Audience" }
                dd #issue-audience {
                    @match issue.audience.resend_of {
                        Some(original) => {
                            "those who did not open "
                            a href=(issue_url(n.id, original)) { "the issue it resends" }
                            " (automatic opens set aside), still active and not paused"
                        }
                        None => (issue.audience.describe()),
                    }
                    @if let Some(resend) = issue.resent_unopened_as {
                        " · " a href=(issue_url(n.id, resend)) { "resent to those who did not open" }
                    }
                    @if let Some(recipients) = issue.recipients {
                        " · " (recipients) @if recipients == 1 { " recipient" } @else { " recipients" }
                    }
                }
                dt { "Web page" }
                dd {
                    @if let Some(url) = &web_url { a #web-url href=(url) { (url) } " (published " @if let Some(at) = issue.published_at { (shown(at, &zone)) } ")" }
                    @else { "not published; it will be at " code { "/p/" (issue.path) } }
                }
            }
            @if let Some(reason) = issue.last_error.as_ref().filter(|_| issue.status != Status::Sending) {
                p.warning role="status" #issue-last-error { (reason) }
            }
            @if let Some(at) = issue.edited_at {
                p.muted #issue-edited { "The web copy was edited " (shown(at, &zone)) "; the e-mail that went out is unchanged." }
            }
            div.actions {
                @if editable { a.button href={ (base) "/edit" } { "Edit" } }
                @if issue.status == Status::Sent { a.button href={ (base) "/edit" } { "Edit the web copy" } }
                a.button.secondary href={ (base) "/preview" } { "Preview" }
                @if issue.status == Status::Draft {
                    (post_button(ctx, &format!("{base}/approve"), "Approve", ""))
                }
                @if issue.status == Status::Scheduled {
                    (post_button(ctx, &format!("{base}/approve"), "Unschedule (keep approved)", "secondary"))
                }
                @if matches!(issue.status, Status::Draft | Status::Approved | Status::Scheduled) {
                    a.button href={ (base) "/send" } { "Send now…" }
                }
                @if issue.status == Status::Failed {
                    (post_button(ctx, &format!("{base}/resume"), "Resume sending", ""))
                }
                @if issue.status != Status::Draft && web_url.is_none() {
                    (post_button(ctx, &format!("{base}/publish"), "Publish to the web", ""))
                }
                @if web_url.is_some() {
                    (post_button(ctx, &format!("{base}/unpublish"), "Unpublish", "secondary"))
                }
                (post_button(ctx, &format!("{base}/duplicate"), "Duplicate", "secondary"))
                @if issue.status == Status::Draft {
                    a.button.danger href={ (base) "/delete" } { "Delete…" }
                }
            }
            @if editable {
                section.panel {
                    h2 { "Schedule" }
                    @let counted = view.audience_count.is_some();
                    form.schedule method="post" action={ (base) "/schedule" }
                        data-count-url=[counted.then(|| format!("{base}/audience_count"))]
                        data-count-for=[counted.then_some("schedule")]
                        data-count-line=[counted.then_some("schedule-count")]
                        data-counting=[counted.then_some(COUNTING)]
                        data-count-failed=[counted.then_some(SCHEDULE_COUNT_FAILED)] {
                        (csrf_field(ctx))
                        label { "Send at (" (zone) ")" input type="datetime-local" name="scheduled_for" value=(view.schedule_default); }
                        @if !view.tags.is_empty() { (audience_boxes(&view.tags, &issue.audience)) }
                        button type="submit" aria-describedby=[counted.then_some("schedule-count")] { "Schedule" }
                    }
                    @if let Some(recipients) = &view.audience_count {
                        (count_line("schedule-count", Purpose::Schedule, &issue.audience, recipients))
                    }
                    p.muted {
                        "Times are in " (zone) " (now " (shown(Timestamp::now(), &zone)) "; " a href="/account" { "change your time zone" } "). "
                        @match n.frequency.filter(|f| *f != crate::domain::newsletters::Frequency::Skip) {
                            Some(f) => { "The default is the next slot of your frequency (" (f.describe()) "), at 09:00 " (n.time_zone) " time." }
                            None => { "Set a frequency to get a default slot." }
                        }
                    }
                }
            }
            @if let Some(report) = &view.report {
                @if issue.status == Status::Sending { (progress_panel(&base, report, issue.last_error.as_deref())) }
                @else { (report_panel(issue, report)) }
            }
            @if issue.has_content() { (test_send::form(ctx, n, issue, "", AskedFrom::IssuePage)) }
            @if issue.status == Status::Sending {
                script src="/assets/dashboard.js" defer {}
            }
            @if view.audience_count.is_some() {
                script src="/assets/audience.js" defer {}
            }
        },
    )
}

/// Renders the issue page for `issue` with `status` (422 after a refused action).
pub(super) async fn show_response(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    issue: Issue,
    found: &FieldErrors,
    status: StatusCode,
) -> WebResult {
    let view = load_view(state, n, issue, &ctx.zone()).await?;
    render(status, show_page(ctx, state, n, &view, found))
}

#[handler]
pub async fn show(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (ctx, n, issue) = viewed(req, state, &id, &issue_id).await?;
    show_response(&ctx, state, &n, issue, &FieldErrors::new(), StatusCode::OK).await
}

/// Puts `<base target=_blank>` in a previewed document, so its links open in a new tab
/// (the frame is sandboxed) and relative ones resolve on the newsletter's site.
fn with_base(document: &str, origin: &str) -> String {
    let base = format!(
        "<head><base href=\"{}/\" target=\"_blank\">",
        maud::html! { (origin) }.into_string()
    );
    document.replacen("<head>", &base, 1)
}

/// The address the e-mail preview is made out to; merge tags show their fallbacks.
const PREVIEW_READER: &str = "subscriber@example.com";

/// The two documents of an issue's previews: the e-mail a subscriber receives (its HTML
/// with the newsletter's site as base) and the public web page, ready for a sandboxed
/// frame's `srcdoc`. It renders the text part within the budget: call it on a blocking
/// thread.
pub(super) fn preview_documents(
    state: &State,
    n: &Newsletter,
    issue: &Issue,
) -> Result<(crate::mail::OutgoingMail, String), DomainError> {
    let origin = n.site_origin(&state.urls);
    let links = Links::new(&origin, n.id, state.secret.clone(), false);
    // Busy renderers: the preview shows the source rather than nothing.
    let text = content::plain_text(&issue.content_markdown)?
        .unwrap_or_else(|| issue.content_markdown.clone());
    let mut mail = IssueEmail::new(issue, n, state.urls.public_host_name(), links, &text)
        .personalise(
            0,
            PREVIEW_READER,
            &Reader {
                email: PREVIEW_READER.to_string(),
                ..Reader::default()
            },
        );
    mail.html = with_base(&mail.html, &origin);
    let mut on_web = issue.clone();
    on_web.published_at = on_web.published_at.or_else(|| Some(Timestamp::now()));
    let page = issue_document(&state.urls, n, &on_web, Styles::Inline);
    Ok((mail, with_base(&page.into_string(), &origin)))
}

/// Both previews of `issue`: the e-mail a subscriber receives, rendered by the sender's own
/// renderer (without tracking, so its links are the real ones), and the public web page. It
/// renders the text part within the budget: call it on a blocking thread.
pub(super) fn preview_block(
    state: &State,
    n: &Newsletter,
    issue: &Issue,
) -> Result<Markup, DomainError> {
    let origin = n.site_origin(&state.urls);
    let (mail, page) = preview_documents(state, n, issue)?;
    Ok(html! {
        div.previews {
            section {
                h3 { "E-mail" }
                p.muted { "From " (mail.from_name) " <" (mail.from_email) "> · Subject: " strong { (mail.subject) } }
                iframe #email-preview.preview title="E-mail preview" sandbox="allow-popups allow-popups-to-escape-sandbox" srcdoc=(mail.html) {}
                details { summary { "Plain-text part" } pre.plain { (mail.text) } }
            }
            section {
                h3 { "Web page" }
                p.muted {
                    @if issue.path.is_empty() { "Its address is made from the subject when the issue is saved." }
                    @else { (origin) "/p/" (issue.path) }
                }
                iframe #web-preview.preview title="Web page preview" sandbox="allow-popups allow-popups-to-escape-sandbox" srcdoc=(page) {}
            }
        }
    })
}

/// `GET /newsletters/:id/issues/:issue_id/preview`: the saved issue's previews.
#[handler]
pub async fn preview(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (ctx, n, issue) = viewed(req, state, &id, &issue_id).await?;
    // Linear in the stored HTML, but up to a megabyte of it: off the async threads.
    let block = {
        let (state, n, issue) = (state.clone(), n.clone(), issue.clone());
        tokio::task::spawn_blocking(move || preview_block(&state, &n, &issue))
            .await
            .map_err(|e| WebError::Internal(e.to_string()))??
    };
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
            Section::Issues,
            &format!("Preview of {}", issue.subject),
            html! {
                p { a href=(issue_url(n.id, issue.id)) { "← " (issue.subject) } }
                h1 { "Preview of “" (issue.subject) "”" }
                // The previews' own headings are h3 (under the editor's h2): no level skipped.
                h2.visually-hidden { "E-mail and web page" }
                (block)
                (test_send::form(&ctx, &n, &issue, "", AskedFrom::PreviewPage))
            },
        ),
    )
}
