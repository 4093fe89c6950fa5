//! The frame of a newsletter's public pages: the page itself (head, meta tags, its header
//! and footer, the stylesheets in `assets/site.css` and the newsletter's accent) and an
//! issue's page, which the public site serves and the dashboard previews with the very same
//! markup.

use std::sync::LazyLock;

use maud::{DOCTYPE, Markup, PreEscaped, html};
use poem::http::StatusCode;
use poem::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::clock::Timestamp;
use crate::domain::content::excerpt;
use crate::domain::issues::Issue;
use crate::domain::newsletters::Newsletter;
use crate::domain::newsletters::site_theme::{AccentColor, SiteTheme};
use crate::domain::values::time_zones::TimeZoneName;
use crate::domain::values::urls::SiteUrls;

/// What search engines and link previews read from a page's head.
pub struct Meta<'a> {
    /// The page's own text (an issue's opening words) or the newsletter's tagline.
    pub description: String,
    /// The page's own address; `None` on answer pages, which have none worth indexing.
    pub canonical: Option<String>,
    /// Open Graph type: `website` or `article`.
    pub og_type: &'a str,
    pub site_name: &'a str,
    pub feed: String,
    /// The link preview's picture: an issue's (chosen, or its first image), else the
    /// newsletter's logo.
    pub image: Option<String>,
    /// Whether the picture is the page's own (an issue's), shown large in link previews.
    pub large_image: bool,
}

impl<'a> Meta<'a> {
    /// The head of the page at `path` of newsletter `n`'s site.
    pub fn of(urls: &SiteUrls, n: &'a Newsletter, path: &str, og_type: &'a str) -> Meta<'a> {
        let origin = n.site_origin(urls);
        Meta {
            description: n.tagline.clone(),
            canonical: Some(format!("{origin}{path}")),
            og_type,
            site_name: &n.name,
            feed: format!("{origin}/feed.xml"),
            image: n.theme.logo_url.clone(),
            large_image: false,
        }
    }
}

/// How a page carries its stylesheets: linked on the site, where every page shares the
/// cached files, or inline in the dashboard's preview, a `srcdoc` frame whose policy allows
/// inline styles but not the site's files (they are on the site's host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Styles {
    Linked,
    Inline,
}

/// The site's stylesheet, embedded in the binary.
pub const SITE_CSS: &str = include_str!("../../assets/site.css");

/// Where the site's stylesheet is served: its name carries a hash of its content, so it is
/// cached for a year and a new binary's sheet has a new address.
pub fn site_css_path() -> &'static str {
    static PATH: LazyLock<String> = LazyLock::new(|| versioned_path("site", "css", SITE_CSS));
    &PATH
}

/// `/assets/<stem>-<hash of content>.<extension>`: the address of a file served with
/// [`IMMUTABLE`] (the site's stylesheet, the dashboard's).
pub fn versioned_path(stem: &str, extension: &str, content: &str) -> String {
    let digest = Sha256::digest(content.as_bytes());
    format!("/assets/{stem}-{}.{extension}", &hex::encode(digest)[..12])
}

/// Where newsletter accent `accent`'s sheet is served: its name is its content, so it is
/// cached for a year like the site's.
pub fn theme_css_path(accent: AccentColor) -> String {
    format!("/assets/theme-{}.css", &accent.hex()[1..])
}

/// The custom properties of accent `accent`: the buttons' fill and a text colour that stays
/// readable on it, and the links' colour where the accent itself is readable on the page
/// (light and dark backgrounds apart; otherwise the default link colour stays).
pub fn theme_css(accent: AccentColor) -> String {
    let light = AccentColor::parse(LIGHT_BACKGROUND).expect("a colour");
    let dark = AccentColor::parse(DARK_BACKGROUND).expect("a colour");
    let mut css = format!(
        ":root{{--accent:{};--on-accent:{}}}",
        accent.hex(),
        accent.text_on().hex()
    );
    if accent.readable_on(light) {
        css.push_str(&format!(
            "@media (prefers-color-scheme:light){{:root{{--link:{}}}}}",
            accent.hex()
        ));
    }
    if accent.readable_on(dark) {
        css.push_str(&format!(
            "@media (prefers-color-scheme:dark){{:root{{--link:{}}}}}",
            accent.hex()
        ));
    }
    css
}

/// The page backgrounds of `assets/site.css` (`--bg`, light and dark), for the links' contrast.
const LIGHT_BACKGROUND: &str = "#fbfaf7";
const DARK_BACKGROUND: &str = "#121419";

/// The `/assets/…` files of the public site: the stylesheet and the theme sheets, with
/// `Cache-Control: immutable` since each address names one content. Any other name is 404.
#[poem::handler]
pub fn site_asset(poem::web::Path(file): poem::web::Path<String>) -> Response {
    let css = if format!("/assets/{file}") == site_css_path() {
        Some(SITE_CSS.to_string())
    } else {
        file.strip_prefix("theme-")
            .and_then(|rest| rest.strip_suffix(".css"))
            .and_then(|hex| AccentColor::parse(&format!("#{hex}")))
            .filter(|accent| theme_css_path(*accent) == format!("/assets/{file}"))
            .map(theme_css)
    };
    match css {
        Some(css) => asset(CSS, IMMUTABLE, css),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `Cache-Control` of a file whose address changes with its content.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// `Cache-Control` of a file at a fixed address: a change reaches browsers within the hour.
pub const FOR_AN_HOUR: &str = "public, max-age=3600";
/// Content types of the embedded assets.
pub const CSS: &str = "text/css; charset=utf-8";
pub const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// The answer for an embedded asset (a stylesheet, a script): every `/assets/…` handler of
/// the site and the dashboard answers through it.
pub fn asset(content_type: &str, cache_control: &str, body: impl Into<poem::Body>) -> Response {
    Response::builder()
        .content_type(content_type)
        .header("Cache-Control", cache_control)
        .body(body)
}

/// The stylesheets of a site page, with the newsletter's accent when it has one.
fn stylesheets(styles: Styles, theme: &SiteTheme) -> Markup {
    html! {
        @match styles {
            Styles::Linked => {
                link rel="stylesheet" href=(site_css_path());
                @if let Some(accent) = theme.accent_color { link rel="stylesheet" href=(theme_css_path(accent)); }
            }
            Styles::Inline => {
                style { (PreEscaped(SITE_CSS)) @if let Some(accent) = theme.accent_color { (PreEscaped(theme_css(accent))) } }
            }
        }
    }
}

/// A small, self-contained page with the site's look but no newsletter's frame: the
/// answers for a host that is no newsletter's site (an unknown subdomain or domain).
pub fn page(title: &str, body: Markup) -> Markup {
    document(
        title,
        title,
        stylesheets(Styles::Linked, &SiteTheme::default()),
        html! { main.wrap { (body) } },
    )
}

/// An English HTML document: the common start of the head with `description`, the rest of
/// the head, and the body.
fn document(title: &str, description: &str, head: Markup, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                (head_start(title))
                meta name="description" content=(description);
                (head)
            }
            body { (body) }
        }
    }
}

/// Where a page of the site is: its home shows the newsletter's name as the page's heading,
/// the other pages as a link home above their own heading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Home,
    Inner,
}

/// A page of newsletter `n`'s site: the head (description, canonical URL, Open Graph tags,
/// the feed link), the header with its logo, name and tagline, `body`, and the footer with
/// subscribe, archive and feed.
pub fn site_page(
    n: &Newsletter,
    title: &str,
    meta: &Meta<'_>,
    place: Place,
    styles: Styles,
    body: Markup,
) -> Markup {
    let description = if meta.description.is_empty() {
        format!(
            "{} on the web: every published issue, and how to subscribe.",
            n.name
        )
    } else {
        meta.description.clone()
    };
    let head = html! {
        @if let Some(canonical) = &meta.canonical { link rel="canonical" href=(canonical); }
        link rel="alternate" type="application/atom+xml" title=(meta.site_name) href=(meta.feed);
        meta property="og:title" content=(title);
        meta property="og:type" content=(meta.og_type);
        @if let Some(canonical) = &meta.canonical { meta property="og:url" content=(canonical); }
        meta property="og:site_name" content=(meta.site_name);
        meta property="og:description" content=(description);
        @if let Some(image) = &meta.image { meta property="og:image" content=(image); }
        meta name="twitter:card" content=(if meta.large_image { "summary_large_image" } else { "summary" });
        (stylesheets(styles, &n.theme))
    };
    let body = html! {
        header.site {
            div.wrap {
                @if let Some(logo) = &n.theme.logo_url { img.logo src=(logo) alt="" height="48"; }
                div {
                    @match place {
                        Place::Home => h1 { (n.name) },
                        Place::Inner => p.name { a href="/" { (n.name) } },
                    }
                    @if !n.tagline.is_empty() { p.tagline { (n.tagline) } }
                }
            }
            nav.wrap.site-nav aria-label=(n.name) {
                a href="/archive" { "Archive" }
                @if n.pages.has_about_page() { a href="/about" { "About" } }
                a.subscribe-link href="/subscribe" { "Subscribe" }
            }
        }
        main.wrap { (body) }
        footer.site {
            div.wrap {
                a href="/subscribe" { "Subscribe" }
                a href="/archive" { "Archive" }
                @if n.pages.has_about_page() { a href="/about" { "About" } }
                a href="/feed.xml" { "Feed" }
                a href="/account" { "Your account" }
                span { "© " (n.name) }
            }
        }
    };
    document(title, &description, head, body)
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

/// A page of newsletter `n`'s site that is an answer rather than content (subscribing,
/// confirming, unsubscribing, an error): inside the site's frame, headed `title`, with
/// `body` and a way back to the site's home.
pub fn site_answer(
    urls: &SiteUrls,
    n: &Newsletter,
    status: StatusCode,
    title: &str,
    body: Markup,
) -> Response {
    let meta = Meta {
        canonical: None,
        ..Meta::of(urls, n, "/", "website")
    };
    let mut response = site_page(
        n,
        &format!("{title} · {}", n.name),
        &meta,
        Place::Inner,
        Styles::Linked,
        html! {
            section.answer {
                h1 { (title) }
                (body)
                p.back-home { a href="/" { "← Back to " (n.name) } }
            }
        },
    )
    .into_response();
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

/// Crawlers may read every page of a site (`/robots.txt`; without it they would read the
/// 404 page as one).
#[poem::handler]
pub fn robots() -> Response {
    Response::builder()
        .content_type("text/plain; charset=utf-8")
        .header("Cache-Control", "public, max-age=86400")
        .body("User-agent: *\nAllow: /\n")
}

/// The day of an instant in the newsletter's time zone, for people: `22 November 2026`.
pub fn day(at: Option<Timestamp>, zone: &TimeZoneName) -> String {
    at.map(|at| zone.local(at).strftime("%-d %B %Y").to_string())
        .unwrap_or_default()
}

/// An instant as the `datetime` of a `<time>` element and in the feed; empty when absent.
pub fn machine_time(at: Option<Timestamp>) -> String {
    at.map(|at| at.to_string()).unwrap_or_default()
}

/// The public page of one issue, around its stored HTML; the dashboard previews an issue
/// with this same page (`Styles::Inline`).
pub fn issue_document(urls: &SiteUrls, n: &Newsletter, issue: &Issue, styles: Styles) -> Markup {
    issue_page(urls, n, issue, styles, None)
}

/// An issue's page for a reader who may not read it (a members or paid issue): its excerpt,
/// then `paywall` instead of its text. Nothing of the text beyond the stored excerpt is in
/// the page, its description or its picture (only one the owner chose).
pub fn locked_issue_document(
    urls: &SiteUrls,
    n: &Newsletter,
    issue: &Issue,
    paywall: Markup,
) -> Markup {
    issue_page(urls, n, issue, Styles::Linked, Some(paywall))
}

fn issue_page(
    urls: &SiteUrls,
    n: &Newsletter,
    issue: &Issue,
    styles: Styles,
    paywall: Option<Markup>,
) -> Markup {
    let stored = issue.page_html();
    let subject = issue.shown_subject();
    let content = without_doubled_title(&stored, &subject);
    let mut page_meta = Meta::of(urls, n, &format!("/p/{}", issue.path), "article");
    let summary = match &paywall {
        None => excerpt::text_of_html(content, excerpt::DESCRIPTION_MAX),
        Some(_) => issue.excerpt.clone().unwrap_or_default(),
    };
    if !summary.is_empty() {
        page_meta.description = summary;
    }
    let image = match &paywall {
        None => issue.social_image(),
        Some(_) => issue.social_image_url.clone(),
    };
    if let Some(image) = image {
        page_meta.image = Some(image);
        page_meta.large_image = true;
    }
    let zone = &n.time_zone;
    let origin = n.site_origin(urls);
    site_page(
        n,
        &format!("{subject} · {}", n.name),
        &page_meta,
        Place::Inner,
        styles,
        html! {
            article {
                h1 { (subject) }
                p.byline {
                    @if let Some(author) = &n.pages.author_name {
                        @if let Some(picture) = n.pages.author_image_url(&origin) {
                            img.author src=(picture) alt="" width="36" height="36";
                        }
                        span.author { "By " (author) }
                    }
                    span { time datetime=(machine_time(issue.published_at)) { (day(issue.published_at, zone)) } }
                    @if issue.edited_at.is_some() {
                        span.updated { "Updated " time datetime=(machine_time(issue.edited_at)) { (day(issue.edited_at, zone)) } }
                    }
                }
                @match &paywall {
                    None => {
                        div.content { (PreEscaped(content)) }
                        (articles(issue))
                    }
                    Some(paywall) => {
                        @if let Some(text) = issue.excerpt.as_deref().filter(|t| !t.is_empty()) {
                            div.content { p { (text) } }
                        }
                        (paywall)
                    }
                }
            }
            @if paywall.is_none() {
                section.card.subscribe-box aria-labelledby="subscribe" {
                    h2 id="subscribe" { "Get the next issue by e-mail" }
                    a.button href="/subscribe" { "Subscribe to " (n.name) }
                }
            }
        },
    )
}

/// `content` without the heading it opens with when that heading is the subject again (the
/// page prints the subject above it), so the title never shows twice.
fn without_doubled_title<'a>(content: &'a str, subject: &str) -> &'a str {
    let same = |a: &str, b: &str| {
        let words = |t: &str| {
            t.split_whitespace()
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
        };
        words(a) == words(b)
    };
    match excerpt::split_leading_heading(content) {
        (Some(heading), rest) if same(&heading, subject) => rest,
        _ => content,
    }
}

/// An issue's articles as cards, on its page and in the feed (so a feed reader shows what
/// the page shows).
pub fn articles(issue: &Issue) -> Markup {
    html! {
        @if !issue.articles.is_empty() {
            section.articles aria-label="Articles" {
                @for article in &issue.articles {
                    div.card {
                        h3 { a href=(article.url) rel="noopener" { (article.title) } }
                        @if !article.summarized_article.is_empty() { p { (article.summarized_article) } }
                    }
                }
            }
        }
    }
}
