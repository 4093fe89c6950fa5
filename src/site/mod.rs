//! Each newsletter's public site, on `<subdomain>.<public-host>` or its active custom
//! domain: its pages and the routes the links in sent mail lead to (unsubscribe, open pixel,
//! click redirect).

mod pages;
mod tracking;

use std::sync::Arc;

use maud::{DOCTYPE, Markup, html};
use poem::http::StatusCode;
use poem::{Endpoint, EndpointExt, IntoResponse, Request, Response, Route};

use crate::app::AppState;
use crate::domain::DomainError;
use crate::domain::custom_domains;
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::urls::{split_port, subdomain_of};
use crate::http::routing::get;

pub use pages::issue_document;

/// The newsletter whose site a request is for, found from its Host.
#[derive(Clone)]
pub struct Site(pub Arc<Newsletter>);

/// The routes of one newsletter's site.
pub fn routes() -> impl Endpoint<Output = Response> {
    Route::new()
        .at("/", get(pages::home))
        .at(
            "/subscribe",
            get(pages::subscribe_page).post(pages::subscribe),
        )
        .at(
            "/subscribe/confirm/:token",
            get(pages::confirm_page).post(pages::confirm),
        )
        .at("/archive", get(pages::archive))
        .at("/p/:path", get(pages::issue_page))
        .at("/feed.xml", get(pages::feed))
        .at("/favicon.ico", get(no_favicon))
        .at(
            "/u/:delivery/:sig",
            get(tracking::unsubscribe_page).post(tracking::unsubscribe),
        )
        .at("/o/:delivery/:file", get(tracking::open_pixel))
        .at("/c/:delivery/:sig", get(tracking::click))
        .with(poem::middleware::CookieJarManager::new())
        .catch_all_error(|err: poem::Error| async move {
            if err.is_from_response() {
                err.into_response()
            } else {
                not_found()
            }
        })
        .map_to_response()
}

/// Finds the site a request is for, by Host: `<subdomain>.<public-host>` or an active
/// custom domain. `Ok(None)` means the request is for the service itself (the base host, the
/// public host, or an IP address or single-label name such as `localhost`); any other
/// domain that is not an active custom domain, an unknown subdomain and a site not yet live
/// get the 404 page.
pub async fn resolve(req: &Request, state: &AppState) -> Result<Option<Site>, Response> {
    let host = req
        .header("Host")
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default()
        .to_lowercase();
    // Ports are ignored: behind a proxy on a non-standard port the Host carries one.
    let name = split_port(&host).0.trim_end_matches('.').to_string();
    let subdomain = subdomain_of(&name, state.urls.public_host_name()).map(str::to_string);
    let service_host = !name.contains('.')
        || name.parse::<std::net::IpAddr>().is_ok()
        || name.starts_with('[')
        || name == state.urls.base_host_name()
        || name == state.urls.public_host_name();
    if subdomain.is_none() && service_host {
        return Ok(None);
    }
    let found = state
        .db
        .run(move |conn| match subdomain {
            Some(subdomain) => newsletters::get_by_subdomain(conn, &subdomain),
            None => custom_domains::newsletter_on_domain(conn, &name)?
                .ok_or(DomainError::NotFound("custom domain")),
        })
        .await;
    match found {
        // The site answers once onboarding is done (the preferences step sets live_at).
        Ok(newsletter) if newsletter.live_at.is_some() => Ok(Some(Site(Arc::new(newsletter)))),
        Ok(_) | Err(DomainError::NotFound(_)) => Err(not_found()),
        Err(e) => Err(failure(
            &format!("cannot resolve {host}"),
            &e,
            "Please try again.",
        )),
    }
}

/// What search engines and link previews read from a page's head.
pub struct Meta<'a> {
    pub description: &'a str,
    pub canonical: String,
    /// Open Graph type: `website` or `article`.
    pub og_type: &'a str,
    pub site_name: &'a str,
    pub feed: String,
}

/// A small, self-contained page (no third-party assets).
pub fn page(title: &str, body: Markup) -> Markup {
    page_with(title, None, body)
}

/// [`page`] with a description, canonical URL, Open Graph tags and the feed link.
pub fn page_with(title: &str, meta: Option<&Meta<'_>>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                // No favicon file to fetch (and no 404 for it in every visitor's console).
                link rel="icon" href="data:,";
                @if let Some(m) = meta {
                    @if !m.description.is_empty() { meta name="description" content=(m.description); }
                    link rel="canonical" href=(m.canonical);
                    link rel="alternate" type="application/atom+xml" title=(m.site_name) href=(m.feed);
                    meta property="og:title" content=(title);
                    meta property="og:type" content=(m.og_type);
                    meta property="og:url" content=(m.canonical);
                    meta property="og:site_name" content=(m.site_name);
                    @if !m.description.is_empty() { meta property="og:description" content=(m.description); }
                }
                style { (maud::PreEscaped(STYLESHEET)) }
            }
            body { main { (body) } }
        }
    }
}

pub fn page_response(status: StatusCode, title: &str, body: Markup) -> Response {
    let mut response = page(title, html! { h1 { (title) } (body) }).into_response();
    response.set_status(status);
    response
}

/// Browsers ask for `/favicon.ico` on pages without an icon link (the feed, the dashboard):
/// an empty answer, cached, instead of a 404 in the visitor's console.
#[poem::handler]
pub fn no_favicon() -> Response {
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .header("Cache-Control", "public, max-age=86400")
        .finish()
}

/// Seconds a visitor is asked to wait after a full disk refused a write.
const DISK_FULL_RETRY_AFTER: u32 = 60;

/// The page for a failure the visitor cannot fix, logged in one line for the operator: a
/// full disk says so (507, nothing was saved), anything else is a 500 with `hint`.
pub fn failure(context: &str, e: &DomainError, hint: &str) -> Response {
    if let DomainError::Store(store) = e
        && store.is_disk_full()
    {
        eprintln!("site: the disk is full, a write was refused ({context}): {e}");
        let mut response = page_response(
            StatusCode::INSUFFICIENT_STORAGE,
            "The server's disk is full",
            html! { p { "Nothing was saved. Please try again in a few minutes." } },
        );
        response
            .headers_mut()
            .insert("Retry-After", DISK_FULL_RETRY_AFTER.into());
        return response;
    }
    eprintln!("site: {context}: {e}");
    page_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Something went wrong",
        html! { p { (hint) } },
    )
}

pub fn not_found() -> Response {
    page_response(
        StatusCode::NOT_FOUND,
        "Not found",
        html! { p { "There is nothing at this address." } },
    )
}

/// Inline in every page, so a saved page or a preview looks the same; the sites'
/// Content-Security-Policy allows exactly this text by its hash (`http::headers`).
pub const STYLESHEET: &str = "body{margin:0;font:17px/1.6 -apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;color:#1d2330;background:#fff}\
main{max-width:40rem;margin:0 auto;padding:2rem 1rem}a{color:#1d4ed8}h1{line-height:1.2}\
button{background:#1d4ed8;color:#fff;border:0;border-radius:6px;padding:.6rem 1.1rem;font:inherit;cursor:pointer}\
input{font:inherit;padding:.5rem .6rem;border:1px solid #c5cad3;border-radius:6px;max-width:100%}\
.muted{color:#5b6474;font-size:.92rem}.tagline{font-size:1.15rem;color:#3b4252}\
label{display:block;margin:.6rem 0}label input{display:block;width:100%;box-sizing:border-box}\
.errors{color:#b91c1c}.issues{padding-left:1.1rem}.issues li{margin:.35rem 0}\
a.button{display:inline-block;background:#1d4ed8;color:#fff;border-radius:6px;padding:.6rem 1.1rem;text-decoration:none}\
footer{margin-top:2.5rem}img{max-width:100%}";
