//! A newsletter's public pages: home, subscribe (double opt-in), archive, issue pages and the
//! Atom feed. Small, server-rendered, no third-party assets.

use maud::{Markup, PreEscaped, html};
use poem::http::StatusCode;
use poem::web::{Data, Path, Query};
use poem::{Body, IntoResponse, Request, Response, handler};
use serde::Deserialize;

use super::{Site, SiteError, SiteResult, readers};
use crate::domain::content::excerpt;
use crate::domain::issues::{self, Issue, Visibility};
use crate::domain::newsletters::site_pages;
use crate::domain::subscribers::opt_in;
use crate::domain::subscribers::origin::Came;
use crate::domain::values::pagination::Page;
use crate::domain::{DomainError, FieldErrors};
use crate::http::client::client_address;
use crate::http::cookies::{csrf_cookie_value, read_cookie};
use crate::http::csrf;
use crate::http::form::FormData;
use crate::http::public_page::{
    Meta, Place, Styles, articles, day, issue_document, locked_issue_document, machine_time,
    site_answer, site_page,
};
use crate::http::signup_form::{came_fields, came_from, came_to_page};
use crate::state::AppState;
use crate::store::StoreError;

type State = std::sync::Arc<AppState>;

/// Issues on the home page.
const LATEST: u32 = 5;
/// Issues per archive page.
const ARCHIVE_PAGE: u32 = 20;
/// Entries in the feed.
const FEED_ENTRIES: u32 = 20;

fn origin(state: &State, site: &Site) -> String {
    site.0.site_origin(&state.urls)
}

fn issue_url(state: &State, site: &Site, issue: &Issue) -> String {
    format!("{}/p/{}", origin(state, site), issue.path)
}

async fn published(
    state: &State,
    site: &Site,
    page: Page,
) -> Result<(Vec<Issue>, bool), SiteError> {
    let nid = site.0.id;
    state
        .db
        .run(move |conn| issues::list_published(conn, nid, page))
        .await
        .map_err(|e| SiteError::domain(e, site, "listing issues"))
}

/// Runs `build` on a blocking thread: an issue's page wraps up to a megabyte of stored HTML,
/// and the feed escapes that of 20 issues, too much work for the async threads that answer
/// every other request.
async fn built_off_the_async_threads<T: Send + 'static>(
    what: &str,
    build: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SiteError> {
    tokio::task::spawn_blocking(build)
        .await
        .map_err(|e| SiteError::failed(what, &DomainError::Store(StoreError::Task(e.to_string()))))
}

/// Issues as the home page and the archive list them: the subject, the day it was published
/// (in the newsletter's time zone) and its excerpt, stored when it was saved.
fn issue_list(state: &State, site: &Site, issues: &[Issue]) -> Markup {
    html! {
        @if issues.is_empty() {
            p.muted { "No issues published yet." }
        } @else {
            ul.issues {
                @for issue in issues {
                    li {
                        a href=(issue_url(state, site, issue)) { (issue.shown_subject()) }
                        @match issue.visibility {
                            Visibility::Paid => { " " span.badge { "Paid" } }
                            Visibility::Members => { " " span.badge { "Members" } }
                            Visibility::Public => {}
                        }
                        time.muted datetime=(machine_time(issue.published_at)) { (day(issue.published_at, &site.0.time_zone)) }
                        @if let Some(text) = issue.excerpt.as_deref().filter(|t| !t.is_empty()) {
                            p.excerpt { (text) }
                        }
                    }
                }
            }
        }
    }
}

/// An answer page of `site` (see [`site_answer`]).
pub(super) fn answer(state: &State, site: &Site, title: &str, body: Markup) -> Response {
    site_answer(&state.urls, &site.0, StatusCode::OK, title, body)
}

// The CSRF token of the site's forms: the same scheme and cookie as the dashboard's (a random
// cookie, `__Host-` on https, and an HMAC of it), on the newsletter's own host. Sites have no
// sessions, so the token binds the cookie alone.
pub(super) fn csrf_token(req: &Request, state: &State) -> String {
    csrf::token_for(&state.secret, &csrf_cookie_value(req, state), None)
}

/// The posted form, once its token fits the browser's CSRF cookie; `expired_hint` tells the
/// visitor what to do when it does not. Without the cookie no token can fit: that is
/// answered before the body is read (the server then closes the connection unread).
pub(super) async fn verified_form(
    req: &Request,
    state: &State,
    body: Body,
    expired_hint: &'static str,
) -> Result<FormData, SiteError> {
    let cookie = read_cookie(req, state, csrf::COOKIE);
    if cookie.as_deref().is_none_or(str::is_empty) {
        return Err(SiteError::FormExpired(expired_hint));
    }
    let form = FormData::read(body).await?;
    match csrf::verify(
        &state.secret,
        cookie.as_deref(),
        None,
        form.get(csrf::FIELD),
    ) {
        true => Ok(form),
        false => Err(SiteError::FormExpired(expired_hint)),
    }
}

fn subscribe_form(
    req: &Request,
    state: &State,
    came: &Came,
    email: &str,
    name: &str,
    problems: &FieldErrors,
) -> Markup {
    let token = csrf_token(req, state);
    html! {
        @if !problems.is_empty() {
            ul.errors role="alert" { @for sentence in problems.sentences() { li { (sentence) } } }
        }
        form.subscribe method="post" action="/subscribe" {
            input type="hidden" name=(csrf::FIELD) value=(token);
            (came_fields(came))
            label { "E-mail address" input type="email" name="email" value=(email) required autocomplete="email" maxlength="254"; }
            label { "Name (optional)" input type="text" name="name" value=(name) autocomplete="name" maxlength="100"; }
            button type="submit" { "Subscribe" }
        }
    }
}

fn meta<'a>(state: &State, site: &'a Site, path: &str, og_type: &'a str) -> Meta<'a> {
    Meta::of(&state.urls, &site.0, path, og_type)
}

#[handler]
pub async fn home(req: &Request, Data(state): Data<&State>, Data(site): Data<&Site>) -> SiteResult {
    let latest = Page {
        page: 1,
        per_page: LATEST,
    };
    let (issues, more) = published(state, site, latest).await?;
    let n = &site.0;
    Ok(site_page(
        n,
        &n.name,
        &meta(state, site, "/", "website"),
        Place::Home,
        Styles::Linked,
        html! {
            section.card.subscribe-box aria-labelledby="subscribe" {
                h2 id="subscribe" { "Subscribe" }
                p.muted { "New issues by e-mail. Confirm with one click; leave with one click." }
                (subscribe_form(req, state, &came_to_page(req), "", "", &FieldErrors::new()))
            }
            section aria-labelledby="latest" {
                h2 id="latest" { "Latest issues" }
                (issue_list(state, site, &issues))
                @if more { p { a href="/archive" { "All issues →" } } }
            }
        },
    )
    .into_response())
}

#[handler]
pub async fn subscribe_page(
    req: &Request,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let plan = readers::offer(state, site).await?;
    let n = &site.0;
    Ok(site_page(
        n,
        &format!("Subscribe to {}", n.name),
        &meta(state, site, "/subscribe", "website"),
        Place::Inner,
        Styles::Linked,
        html! {
            section.card.subscribe-box {
                h1 { "Subscribe to " (n.name) }
                (subscribe_form(req, state, &came_to_page(req), "", "", &FieldErrors::new()))
                p.muted { "We will e-mail you a link to confirm. Nothing is sent until you follow it." }
            }
            @if let Some(plan) = &plan {
                section.card aria-labelledby="plans" {
                    h2 id="plans" { "Membership" }
                    p { strong { "Free: " } "every public issue by e-mail and on the site." }
                    (readers::plan_card(plan))
                    p.muted { "Subscribe first, then " a href="/signin" { "sign in" } " and upgrade from your account. Already a subscriber? " a href="/signin" { "Sign in" } "." }
                }
            }
        },
    )
    .into_response())
}

#[handler]
pub async fn subscribe(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let form = verified_form(
        req,
        state,
        body,
        "Please go back, reload the page and try again.",
    )
    .await?;
    let (email, name) = (form.get("email").to_string(), form.get("name").to_string());
    let (urls, newsletter) = (state.urls.clone(), site.0.clone());
    let client = client_address(req, state);
    let came = came_from(req, &form);
    let (e, n) = (email.clone(), name.clone());
    let requested = state
        .db
        .run({
            let came = came.clone();
            move |conn| opt_in::request(conn, &urls, &newsletter, &e, &n, &client, &came)
        })
        .await;
    let title = format!("Subscribe to {}", site.0.name);
    match requested {
        // Mailed, already subscribed or capped: the same page, so it tells nothing.
        Ok(_) => Ok(answer(
            state,
            site,
            "Check your inbox",
            html! {
                p { "If " strong { (email.trim()) } " is not subscribed yet, a confirmation link is on its way. Follow it to start receiving " (site.0.name) "." }
                p.muted { "Nothing there after a few minutes? Look in your spam folder, or " a href="/subscribe" { "try again" } "." }
            },
        )),
        Err(DomainError::Invalid(_, problems)) => {
            let mut response = site_page(
                &site.0,
                &title,
                &meta(state, site, "/subscribe", "website"),
                Place::Inner,
                Styles::Linked,
                html! {
                    section.card.subscribe-box {
                        h1 { (title) }
                        (subscribe_form(req, state, &came, &email, &name, &problems))
                    }
                },
            )
            .into_response();
            response.set_status(StatusCode::UNPROCESSABLE_ENTITY);
            Ok(response)
        }
        Err(e) => Err(SiteError::domain(e, site, "subscribing")),
    }
}

#[handler]
pub async fn confirm_page(
    req: &Request,
    Path(token): Path<String>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    Ok(link_button(
        req,
        state,
        site,
        &format!("Confirm your subscription to {}", site.0.name),
        html! { p { "One click and the next issue of " (site.0.name) " comes to your inbox." } },
        &format!("/subscribe/confirm/{token}"),
        "Yes, subscribe me",
    ))
}

/// The page a mailed link opens: `intro`, then one button that posts back to `action`. A
/// mail scanner that fetches the link does not use it up; only the press does.
pub(super) fn link_button(
    req: &Request,
    state: &State,
    site: &Site,
    title: &str,
    intro: Markup,
    action: &str,
    label: &str,
) -> Response {
    answer(
        state,
        site,
        title,
        html! {
            (intro)
            form method="post" action=(action) {
                input type="hidden" name=(csrf::FIELD) value=(csrf_token(req, state));
                button type="submit" { (label) }
            }
        },
    )
}

#[handler]
pub async fn confirm(
    req: &Request,
    Path(token): Path<String>,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    verified_form(
        req,
        state,
        body,
        "Please follow the link in the e-mail again.",
    )
    .await?;
    let nid = site.0.id;
    match state
        .db
        .run(move |conn| opt_in::confirm(conn, nid, &token))
        .await
    {
        Ok(subscriber) => Ok(answer(
            state,
            site,
            "You are subscribed",
            html! {
                p { strong { (subscriber.email) } " will receive " (site.0.name) ". Welcome!" }
                p { "While you wait for the next issue, " a href="/archive" { "read the past ones" } "." }
            },
        )),
        Err(DomainError::NotFound(_)) => Err(SiteError::LinkExpired),
        Err(e) => Err(SiteError::domain(e, site, "confirming a subscription")),
    }
}

#[derive(Deserialize)]
pub struct ArchiveQuery {
    page: Option<String>,
}

#[handler]
pub async fn archive(
    Query(query): Query<ArchiveQuery>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let Ok(page) = Page::parse(query.page.as_deref(), Some(&ARCHIVE_PAGE.to_string())) else {
        return Err(SiteError::NotFound);
    };
    let (issues, more) = published(state, site, page).await?;
    if issues.is_empty() && page.page > 1 {
        return Err(SiteError::NotFound);
    }
    let n = &site.0;
    Ok(site_page(
        n,
        &format!("Archive · {}", n.name),
        &meta(state, site, "/archive", "website"),
        Place::Inner,
        Styles::Linked,
        html! {
            h1 { "Archive" }
            (issue_list(state, site, &issues))
            nav.pager aria-label="Pages" {
                @if page.page > 1 { a rel="prev" href={ "/archive?page=" (page.page - 1) } { "← Newer" } " " }
                @if more { a rel="next" href={ "/archive?page=" (page.page + 1) } { "Older →" } }
            }
        },
    )
    .into_response())
}

/// `/about`: the owner's about text and the author, when the site has either.
#[handler]
pub async fn about(Data(state): Data<&State>, Data(site): Data<&Site>) -> SiteResult {
    if !site.0.pages.has_about_page() {
        return Err(SiteError::NotFound);
    }
    let nid = site.0.id;
    let about = state
        .db
        .run(move |conn| site_pages::about(conn, nid))
        .await
        .map_err(|e| SiteError::domain(e, site, "showing the about page"))?;
    let (state, site) = (state.clone(), site.clone());
    built_off_the_async_threads("showing the about page", move || {
        about_document(&state, &site, about.map(|a| a.html)).into_response()
    })
    .await
}

/// The about page: the author (picture and name), then the owner's text as stored.
fn about_document(state: &State, site: &Site, html: Option<String>) -> Markup {
    let n = &site.0;
    let mut page_meta = meta(state, site, "/about", "profile");
    if let Some(html) = &html {
        let summary = excerpt::text_of_html(html, excerpt::DESCRIPTION_MAX);
        if !summary.is_empty() {
            page_meta.description = summary;
        }
    }
    let picture = n.pages.author_image_url(&origin(state, site));
    if let Some(picture) = &picture {
        page_meta.image = Some(picture.clone());
    }
    site_page(
        n,
        &format!("About · {}", n.name),
        &page_meta,
        Place::Inner,
        Styles::Linked,
        html! {
            article.about {
                h1 { "About " (n.name) }
                @if let Some(author) = &n.pages.author_name {
                    div.author-card {
                        @if let Some(picture) = &picture { img.author src=(picture) alt="" width="72" height="72"; }
                        p { span.muted { "Written by" } br; strong { (author) } }
                    }
                }
                @if let Some(html) = &html { div.content { (PreEscaped(html)) } }
            }
            section.card.subscribe-box aria-labelledby="subscribe" {
                h2 id="subscribe" { "Get the next issue by e-mail" }
                a.button href="/subscribe" { "Subscribe to " (n.name) }
            }
        },
    )
}

#[handler]
pub async fn issue_page(
    req: &Request,
    Path(path): Path<String>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let nid = site.0.id;
    let issue = state
        .db
        .run(move |conn| issues::get_published_by_path(conn, nid, &path))
        .await
        .map_err(|e| SiteError::domain(e, site, "showing an issue"))?;
    shown(req, state, site, issue, false).await
}

/// An issue's page as this reader may see it: the whole issue, or for a members or paid
/// issue they may not read its excerpt and a paywall. Pages that depend on the reader are
/// never cached; `unlisted` keeps the page out of search engines.
async fn shown(
    req: &Request,
    state: &State,
    site: &Site,
    issue: Issue,
    unlisted: bool,
) -> SiteResult {
    let restricted = issue.visibility != Visibility::Public;
    let reader = match restricted {
        true => readers::current_reader(req, state, site).await?,
        false => None,
    };
    let wall = match readers::may_read(&issue, reader.as_ref()) {
        true => None,
        false => {
            let plan = readers::offer(state, site).await?;
            Some(readers::paywall(&issue, reader.as_ref(), plan.as_ref()))
        }
    };
    let (state, site) = (state.clone(), site.clone());
    built_off_the_async_threads("showing an issue", move || {
        let mut page = match wall {
            None => issue_document(&state.urls, &site.0, &issue, Styles::Linked).into_response(),
            Some(wall) => locked_issue_document(&state.urls, &site.0, &issue, wall).into_response(),
        };
        if unlisted {
            page.headers_mut().insert(
                "X-Robots-Tag",
                poem::http::HeaderValue::from_static("noindex"),
            );
        }
        if restricted {
            page = readers::personal(page);
        }
        page
    })
    .await
}

/// "View in your browser", linked from the top of every issue's mail
/// (`/view/<issue>/<signature>`): the issue's page when the site shows it, else the same page
/// for those who hold the mail's signed link, kept out of search engines (an issue sent to a
/// segment only, or a draft's test send).
#[handler]
pub async fn view_in_browser(
    req: &Request,
    Path((id, sig)): Path<(String, String)>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let not_found = || SiteError::domain(DomainError::NotFound("issue"), site, "showing an issue");
    let id: i64 = id.parse().map_err(|_| not_found())?;
    if !crate::domain::delivery::tracking::verify_view(&state.secret, id, &sig) {
        return Err(not_found());
    }
    let nid = site.0.id;
    let issue = state
        .db
        .run(move |conn| issues::get(conn, nid, id))
        .await
        .map_err(|e| SiteError::domain(e, site, "showing an issue"))?;
    if issue.published_at.is_some() {
        return Ok(Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header("Location", issue_url(state, site, &issue))
            .finish());
    }
    shown(req, state, site, issue, true).await
}

#[handler]
pub async fn feed(Data(state): Data<&State>, Data(site): Data<&Site>) -> SiteResult {
    let first = Page {
        page: 1,
        per_page: FEED_ENTRIES,
    };
    let nid = site.0.id;
    let (issues, _) = state
        .db
        .run(move |conn| issues::list_published_with_content(conn, nid, first))
        .await
        .map_err(|e| SiteError::domain(e, site, "listing issues"))?;
    let (state, site) = (state.clone(), site.clone());
    let xml = built_off_the_async_threads("building the feed", move || {
        feed_document(&state, &site, &issues)
    })
    .await?;
    Ok(Response::builder()
        .content_type("application/atom+xml; charset=utf-8")
        .body(xml))
}

/// Who the feed names as its author: the site's author, else the sender name, else the
/// newsletter.
fn feed_author(n: &crate::domain::newsletters::Newsletter) -> &str {
    match &n.pages.author_name {
        Some(author) => author,
        None if !n.sender_name.is_empty() => &n.sender_name,
        None => &n.name,
    }
}

/// The Atom feed of `issues`, with their stored HTML as content.
fn feed_document(state: &State, site: &Site, issues: &[Issue]) -> String {
    let n = &site.0;
    let home_url = format!("{}/", origin(state, site));
    // The latest of the issues' publications and edits shown.
    let updated = issues
        .iter()
        .filter_map(|i| i.edited_at.max(i.published_at))
        .max()
        .unwrap_or(n.updated_at);
    let xml = html! {
        (PreEscaped("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"))
        feed xmlns="http://www.w3.org/2005/Atom" {
            title { (n.name) }
            @if !n.tagline.is_empty() { subtitle { (n.tagline) } }
            id { (home_url) }
            link rel="alternate" type="text/html" href=(home_url) {}
            link rel="self" type="application/atom+xml" href={ (origin(state, site)) "/feed.xml" } {}
            updated { (updated) }
            author { name { (feed_author(n)) } }
            @for issue in issues {
                @let url = issue_url(state, site, issue);
                entry {
                    title { (issue.shown_subject()) }
                    link rel="alternate" type="text/html" href=(url) {}
                    id { (url) }
                    published { (machine_time(issue.published_at)) }
                    updated { (issue.edited_at.or(issue.published_at).unwrap_or(issue.updated_at)) }
                    @if issue.visibility == Visibility::Public {
                        // The page's articles too, as escaped HTML like the body.
                        content type="html" { (issue.page_html()) (articles(issue).into_string()) }
                    } @else {
                        // A members or paid issue: its excerpt only, never its text.
                        summary { (issue.excerpt.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    };
    xml.into_string()
}
