//! The frame of a newsletter's public pages: the page itself (head, meta tags, the one inline
//! stylesheet) and an issue's page, which the public site serves and the dashboard previews
//! with the very same markup.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use poem::http::StatusCode;
use poem::{IntoResponse, Response};

use crate::clock::Timestamp;
use crate::domain::issues::Issue;
use crate::domain::newsletters::Newsletter;
use crate::domain::urls::SiteUrls;

/// What search engines and link previews read from a page's head.
pub struct Meta<'a> {
    pub description: &'a str,
    pub canonical: String,
    /// Open Graph type: `website` or `article`.
    pub og_type: &'a str,
    pub site_name: &'a str,
    pub feed: String,
}

impl<'a> Meta<'a> {
    /// The head of the page at `path` of newsletter `n`'s site.
    pub fn of(urls: &SiteUrls, n: &'a Newsletter, path: &str, og_type: &'a str) -> Meta<'a> {
        let origin = n.site_origin(urls);
        Meta {
            description: &n.tagline,
            canonical: format!("{origin}{path}"),
            og_type,
            site_name: &n.name,
            feed: format!("{origin}/feed.xml"),
        }
    }
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
                (head_start(title))
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

/// What the head of every page (public site and dashboard) starts with: the character set,
/// the mobile viewport, the title, and an empty icon (no favicon file to fetch, and no 404 for
/// it in every visitor's console).
pub fn head_start(title: &str) -> Markup {
    html! {
        meta charset="utf-8";
        meta name="viewport" content="width=device-width, initial-scale=1";
        title { (title) }
        link rel="icon" href="data:,";
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

/// The day (UTC) of an instant, for people: `2026-11-22`.
pub fn day(at: Option<Timestamp>) -> String {
    at.map(|at| at.date().to_string()).unwrap_or_default()
}

/// An instant as the `datetime` of a `<time>` element and in the feed; empty when absent.
pub fn machine_time(at: Option<Timestamp>) -> String {
    at.map(|at| at.to_string()).unwrap_or_default()
}

/// The public page of one issue, around its stored HTML; the dashboard previews an issue
/// with this same page.
pub fn issue_document(urls: &SiteUrls, n: &Newsletter, issue: &Issue) -> Markup {
    let content = issue.body_html();
    let mut page_meta = Meta::of(urls, n, &format!("/p/{}", issue.path), "article");
    let summary: String = issue.content_markdown.chars().take(160).collect();
    if !summary.trim().is_empty() {
        page_meta.description = summary.as_str();
    }
    page_with(
        &format!("{} · {}", issue.subject, n.name),
        Some(&page_meta),
        html! {
            p { a href="/" { "← " (n.name) } }
            article {
                h1 { (issue.subject) }
                p.muted { time datetime=(machine_time(issue.published_at)) { (day(issue.published_at)) } }
                (PreEscaped(&*content))
                @if !issue.articles.is_empty() {
                    section.articles aria-label="Articles" {
                        @for article in &issue.articles {
                            div.article {
                                h2 { a href=(article.url) rel="noopener" { (article.title) } }
                                @if !article.summarized_article.is_empty() { p { (article.summarized_article) } }
                            }
                        }
                    }
                }
            }
            section aria-labelledby="subscribe" {
                h2 id="subscribe" { "Get the next issue by e-mail" }
                a.button href="/subscribe" { "Subscribe to " (n.name) }
            }
        },
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
