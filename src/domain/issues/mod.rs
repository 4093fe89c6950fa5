//! Issues: drafting with articles, the status rules, scheduling on frequency slots, the
//! send_now checks and publishing to the web archive.

pub mod feed;
pub mod media;
pub mod resend_unopened;
pub mod test_send;

use std::borrow::Cow;

use jiff::civil::Weekday;
use rusqlite::{Connection, OptionalExtension, Row};
use serde_json::json;

use crate::clock::{self, Timestamp};
use crate::domain::content::merge_tags;
use crate::domain::content::{excerpt, plain_paragraphs};
use crate::domain::newsletters::{self, Frequency, Newsletter};
use crate::domain::subscribers::audience::{self, Audience, AudienceInput};
use crate::domain::values::pagination::{Page, invalid_filter};
use crate::domain::values::time_zones::TimeZoneName;
use crate::domain::values::urls::SiteUrls;
use crate::domain::values::web_url::{self, Schemes};
use crate::domain::{
    DomainError, DomainResult, ErrorCode, FieldErrors, clean_text, content, events,
};
use crate::store::write_tx;

pub const SUBJECT_MAX: usize = 200;
pub const ARTICLES_MAX: usize = 100;
/// An article's title, in characters once trimmed.
pub const TITLE_MAX: usize = 300;
/// An article's URL, in bytes once trimmed.
pub const URL_MAX: usize = 2000;
/// Characters of an article's summary: a paragraph or two. With at most 100 articles, an
/// issue's page stays bounded.
pub const SUMMARY_MAX: usize = 2_000;
const PATH_MAX: usize = 80;

crate::string_enum!(
    /// Where an issue is on its way from draft to sent.
    pub Status {
        Draft => "draft",
        Scheduled => "scheduled",
        Approved => "approved",
        Sending => "sending",
        Sent => "sent",
        /// The send stopped because the mail relay stayed unreachable past the outage limit;
        /// the messages not yet sent wait for the owner to resume it.
        Failed => "failed",
    }
);

crate::string_enum!(
    /// Who may read an issue on the site (docs/memberships.md, "Paid-only content").
    pub Visibility {
        Public => "public",
        /// Any signed-in reader of the site.
        Members => "members",
        /// Members with paid access.
        Paid => "paid",
    }
);

impl Visibility {
    /// Whether a reader may read the issue's text on the site: anyone a public one, a
    /// signed-in reader a members one, a member with paid access a paid one.
    pub fn lets_read(self, signed_in: bool, paid_access: bool) -> bool {
        match self {
            Visibility::Public => true,
            Visibility::Members => signed_in,
            Visibility::Paid => paid_access,
        }
    }
}

impl Status {
    /// Draft, scheduled and approved issues can still be edited.
    pub fn is_editable(self) -> bool {
        matches!(self, Status::Draft | Status::Scheduled | Status::Approved)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Article {
    pub id: i64,
    pub title: String,
    pub url: String,
    pub position: i64,
    pub summarized_article: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    pub id: i64,
    pub newsletter_id: i64,
    pub subject: String,
    pub content_markdown: String,
    /// `content_markdown` as HTML, rendered when it was saved. Loaded by [`get`] and
    /// [`list_published_with_content`]; `None` in other lists, and for an issue saved before
    /// HTML was stored until the `render_content` job reaches it. Read it through
    /// [`Issue::body_html`].
    pub content_html: Option<String>,
    pub status: Status,
    pub scheduled_for: Option<Timestamp>,
    pub sent_at: Option<Timestamp>,
    pub path: String,
    pub published_at: Option<Timestamp>,
    pub last_error: Option<String>,
    pub articles_count: i64,
    /// Loaded by [`get`]; empty in lists.
    pub articles: Vec<Article>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// While a send waits for an unreachable mail relay: since when it has been unreachable.
    pub relay_down_since: Option<Timestamp>,
    /// While a send waits (for the relay, or for deferred messages): when it tries again.
    pub send_resumes_at: Option<Timestamp>,
    /// Who the send goes to (everyone unless tags were chosen).
    pub audience: Audience,
    /// Messages the send created, one per subscriber of the audience; `None` until the send
    /// records its recipients.
    pub recipients: Option<i64>,
    /// When the web copy of the sent issue was last edited; `None` if never since it was sent.
    pub edited_at: Option<Timestamp>,
    /// The opening words of its content as the archive shows them, stored with its HTML
    /// ([`content_saved`]); `None` for an issue saved before excerpts were stored until the
    /// `render_content` job reaches it.
    pub excerpt: Option<String>,
    /// The picture link previews show (og:image) when the owner chose one; else the first
    /// image of the content is used ([`Issue::social_image`]).
    pub social_image_url: Option<String>,
    /// Who may read it on the site; the rest see its excerpt and a paywall.
    pub visibility: Visibility,
    /// For a paid issue: its send goes to paid members only (else to everyone, free members
    /// getting the excerpt and an upgrade link).
    pub paid_members_only: bool,
    /// On an issue resent to those who did not open it (`resend_unopened.rs`): its resend
    /// (the resend's own audience names the original, `Audience::resend_of`).
    pub resent_unopened_as: Option<i64>,
}

impl Issue {
    /// The picture of the issue's link previews (og:image): the one the owner chose, else
    /// the first image of its content, else none.
    pub fn social_image(&self) -> Option<String> {
        self.social_image_url
            .clone()
            .or_else(|| first_image(&self.body_html()))
    }

    pub fn has_content(&self) -> bool {
        !self.content_markdown.trim().is_empty() || self.articles_count > 0
    }

    /// The content as HTML for pages, the feed and mail: as stored, or while none is stored
    /// its text as plain paragraphs. Never renders Markdown, so it is cheap anywhere.
    pub fn body_html(&self) -> Cow<'_, str> {
        match &self.content_html {
            Some(html) => Cow::Borrowed(html),
            None => Cow::Owned(plain_paragraphs(&self.content_markdown)),
        }
    }

    /// [`Issue::body_html`] for the web copy and the feed: merge tags show their fallbacks.
    pub fn page_html(&self) -> String {
        crate::domain::content::merge_tags::with_fallbacks(&self.body_html()).into_owned()
    }

    /// The subject as the site and the feed show it: merge tags show their fallbacks.
    pub fn shown_subject(&self) -> std::borrow::Cow<'_, str> {
        crate::domain::content::merge_tags::text_with_fallbacks(&self.subject)
    }

    /// The public address once published.
    pub fn web_url(&self, newsletter: &Newsletter, urls: &SiteUrls) -> Option<String> {
        self.published_at
            .as_ref()
            .map(|_| self.page_url(newsletter, urls))
    }

    /// Where the issue's page is once published (the send confirmation names it before).
    pub fn page_url(&self, newsletter: &Newsletter, urls: &SiteUrls) -> String {
        format!("{}/p/{}", newsletter.site_origin(urls), self.path)
    }

    /// The `data` of `issue.sent` and `issue.published`.
    pub fn event_data(&self, status: &str) -> serde_json::Value {
        json!({
            "issue_id": self.id,
            "subject": self.subject,
            "path": self.path,
            "status": status,
            "sent_at": self.sent_at,
            "published_at": self.published_at,
            "article_count": self.articles_count,
        })
    }
}

impl Issue {
    /// Sends to `chosen` (its tags) from now on, keeping whether the send goes to paid
    /// members only (the issue's own choice, `paid_members_only`) and whom a resend goes to
    /// (fixed when it was made): neither is the tags'.
    pub fn choose_audience(&mut self, chosen: Audience) {
        self.audience = Audience {
            paid_only: self.audience.paid_only,
            resend_of: self.audience.resend_of,
            ..chosen
        };
    }

    /// Whether a paid issue is mailed to paid members only (`true`) or to everyone, free
    /// members getting the teaser; nothing for an issue that is not paid.
    pub fn mail_paid_members_only(&mut self, only: bool) {
        self.paid_members_only = only;
        self.audience.paid_only = self.visibility == Visibility::Paid && only;
    }

    /// The issue as a free member of a paid issue gets it by mail: its excerpt and an
    /// upgrade link (`account_url`, their account page on the site), never its text or its
    /// articles.
    pub fn teaser(&self, account_url: &str) -> Issue {
        let excerpt = self.excerpt.clone().unwrap_or_default();
        let html = maud::html! {
            @if !excerpt.is_empty() { p { (excerpt) } }
            p { strong { "This issue is for paid members." } " " a href=(account_url) { "Upgrade to read it" } "." }
        };
        let mut teaser = self.clone();
        teaser.content_markdown = format!(
            "{excerpt}\n\n**This issue is for paid members.** Upgrade to read it: {account_url}\n"
        );
        teaser.content_html = Some(html.into_string());
        teaser.articles = Vec::new();
        teaser.articles_count = 0;
        teaser
    }
}

/// The address of the first `<img>` of `html` (as the Markdown renderer writes it:
/// `<img src="…" alt="…" />`), entities decoded; only web addresses count.
fn first_image(html: &str) -> Option<String> {
    let at = html.find("<img ")?;
    let tag = &html[at..at + html[at..].find('>')?];
    let start = tag.find(" src=\"")? + " src=\"".len();
    let end = start + tag[start..].find('"')?;
    let src = tag[start..end].replace("&amp;", "&");
    (src.starts_with("https://") || src.starts_with("http://")).then_some(src)
}

/// `$html` is `i.content_html` where the HTML is wanted, `NULL` in lists that show none.
macro_rules! select_issue {
    ($html:literal, $($tail:literal)+) => {
        concat!(
            "SELECT i.id, i.newsletter_id, i.subject, i.content_markdown, i.status, i.scheduled_for, i.sent_at, i.path, ",
            "i.published_at, i.last_error, i.created_at, i.updated_at, ",
            "(SELECT count(*) FROM articles a WHERE a.issue_id = i.id), i.relay_down_since, i.send_resumes_at, ",
            $html, ", ",
            "(SELECT group_concat(tag, char(10)) FROM (SELECT tag FROM issue_audience_tags WHERE issue_id = i.id AND excluded = 0 ORDER BY tag)), ",
            "(SELECT group_concat(tag, char(10)) FROM (SELECT tag FROM issue_audience_tags WHERE issue_id = i.id AND excluded = 1 ORDER BY tag)), ",
            "CASE WHEN i.recipients_at IS NULL THEN NULL ELSE coalesce((SELECT c.total FROM issue_counts c WHERE c.issue_id = i.id), 0) END, ",
            "i.edited_at, i.excerpt, i.social_image_url, i.visibility, i.paid_members_only, ",
            crate::stored_field_json!(), ", i.resend_of, i.resent_unopened_as",
            " FROM issues i ", $($tail),+
        )
    };
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<Issue> {
    Ok(Issue {
        id: row.get(0)?,
        newsletter_id: row.get(1)?,
        subject: row.get(2)?,
        content_markdown: row.get(3)?,
        content_html: row.get(15)?,
        status: row.get(4)?,
        scheduled_for: row.get(5)?,
        sent_at: row.get(6)?,
        path: row.get(7)?,
        published_at: row.get(8)?,
        last_error: row.get(9)?,
        created_at: row.get(10)?,
        updated_at: row.get(11)?,
        articles_count: row.get(12)?,
        articles: Vec::new(),
        relay_down_since: row.get(13)?,
        send_resumes_at: row.get(14)?,
        audience: Audience::from_stored(row.get(16)?, row.get(17)?, row.get(24)?),
        recipients: row.get(18)?,
        edited_at: row.get(19)?,
        excerpt: row.get(20)?,
        social_image_url: row.get(21)?,
        visibility: row.get(22)?,
        paid_members_only: row.get(23)?,
        resent_unopened_as: row.get(26)?,
    })
    .and_then(|mut issue: Issue| {
        issue.audience.resend_of = row.get(25)?;
        Ok(issue)
    })
    .map(|mut issue: Issue| {
        issue.mail_paid_members_only(issue.paid_members_only);
        issue
    })
}

/// One issue of the newsletter with its articles.
pub fn get(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<Issue> {
    const SQL: &str = select_issue!("i.content_html", "WHERE i.newsletter_id = ?1 AND i.id = ?2");
    let mut issue = conn
        .query_row(SQL, (newsletter_id, id), from_row)
        .optional()?
        .ok_or(DomainError::NotFound("issue"))?;
    issue.articles = articles_of(conn, id)?;
    Ok(issue)
}

/// The articles of issue `id`, in their order.
fn articles_of(conn: &Connection, id: i64) -> DomainResult<Vec<Article>> {
    const ARTICLES: &str = "SELECT id, title, url, position, summarized_article FROM articles WHERE issue_id = ?1 ORDER BY position, id";
    let mut stmt = conn.prepare_cached(ARTICLES)?;
    let articles = stmt
        .query_map([id], |r| {
            Ok(Article {
                id: r.get(0)?,
                title: r.get(1)?,
                url: r.get(2)?,
                position: r.get(3)?,
                summarized_article: r.get(4)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(articles)
}

/// A published issue of the newsletter by its path (the public site's `/p/<path>`).
pub fn get_published_by_path(
    conn: &Connection,
    newsletter_id: i64,
    path: &str,
) -> DomainResult<Issue> {
    const SQL: &str =
        "SELECT id FROM issues WHERE newsletter_id = ?1 AND path = ?2 AND published_at IS NOT NULL";
    let id: i64 = conn
        .query_row(SQL, (newsletter_id, path), |r| r.get(0))
        .optional()?
        .ok_or(DomainError::NotFound("issue"))?;
    get(conn, newsletter_id, id)
}

/// A page of issues, newest first, optionally of one status.
pub fn list(
    conn: &Connection,
    newsletter_id: i64,
    page: Page,
    status: Option<&str>,
) -> DomainResult<(Vec<Issue>, bool)> {
    let status = match status.map(str::trim) {
        None | Some("") => None,
        Some(text) => Some(Status::parse(text).ok_or_else(|| {
            invalid_filter("status", "draft, approved, scheduled, sending or sent")
        })?),
    };
    const SQL: &str = select_issue!(
        "NULL",
        "WHERE i.newsletter_id = ?1 AND (?2 IS NULL OR i.status = ?2) ORDER BY i.id DESC LIMIT ?3 OFFSET ?4"
    );
    let mut stmt = conn.prepare_cached(SQL)?;
    let rows = stmt
        .query_map(
            (
                newsletter_id,
                status.map(Status::as_str),
                page.fetch(),
                page.offset(),
            ),
            from_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(page.finish(rows))
}

/// Published issues, newest first (the public home page and archive), without their HTML.
pub fn list_published(
    conn: &Connection,
    newsletter_id: i64,
    page: Page,
) -> DomainResult<(Vec<Issue>, bool)> {
    const SQL: &str = select_issue!(
        "NULL",
        "WHERE i.newsletter_id = ?1 AND i.published_at IS NOT NULL ORDER BY i.published_at DESC, i.id DESC LIMIT ?2 OFFSET ?3"
    );
    let mut stmt = conn.prepare_cached(SQL)?;
    let rows = stmt
        .query_map((newsletter_id, page.fetch(), page.offset()), from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(page.finish(rows))
}

/// Like [`list_published`], with each issue's HTML and articles (the feed).
pub fn list_published_with_content(
    conn: &Connection,
    newsletter_id: i64,
    page: Page,
) -> DomainResult<(Vec<Issue>, bool)> {
    const SQL: &str = select_issue!(
        "i.content_html",
        "WHERE i.newsletter_id = ?1 AND i.published_at IS NOT NULL ORDER BY i.published_at DESC, i.id DESC LIMIT ?2 OFFSET ?3"
    );
    let mut stmt = conn.prepare_cached(SQL)?;
    let mut rows = stmt
        .query_map((newsletter_id, page.fetch(), page.offset()), from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    // The feed shows each issue's articles, as its page does.
    for issue in &mut rows {
        issue.articles = articles_of(conn, issue.id)?;
    }
    Ok(page.finish(rows))
}

pub fn count(conn: &Connection, newsletter_id: i64) -> DomainResult<i64> {
    Ok(conn.query_row(
        "SELECT count(*) FROM issues WHERE newsletter_id = ?1",
        [newsletter_id],
        |r| r.get(0),
    )?)
}

/// The first issue after `after_id` without stored HTML (saved before HTML was stored): its
/// id and Markdown.
pub fn next_unrendered(conn: &Connection, after_id: i64) -> DomainResult<Option<(i64, String)>> {
    const SQL: &str =
        "SELECT id, content_markdown FROM issues WHERE content_html IS NULL AND id > ?1
         ORDER BY id LIMIT 1";
    Ok(conn
        .query_row(SQL, [after_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Stores `html` as the rendering of issue `id`'s `markdown`, unless the issue got HTML
/// meanwhile or its content changed (a save stores its own rendering). Not a change of the
/// issue: `updated_at` stays.
pub fn store_rendered(
    conn: &Connection,
    id: i64,
    markdown: &str,
    html: &str,
) -> DomainResult<bool> {
    const SQL: &str = "UPDATE issues SET content_html = ?2, excerpt = ?4
         WHERE id = ?1 AND content_html IS NULL AND content_markdown = ?3";
    let excerpt = excerpt::opening_words(html);
    Ok(conn.execute(SQL, (id, html, markdown, excerpt))? > 0)
}

/// The first issue after `after_id` with stored HTML but no excerpt (saved before excerpts
/// were stored): its id.
pub fn next_without_excerpt(conn: &Connection, after_id: i64) -> DomainResult<Option<i64>> {
    const SQL: &str = "SELECT id FROM issues
         WHERE excerpt IS NULL AND content_html IS NOT NULL AND id > ?1 ORDER BY id LIMIT 1";
    Ok(conn.query_row(SQL, [after_id], |r| r.get(0)).optional()?)
}

/// Stores the excerpt of issue `id` from its stored HTML, unless it has one meanwhile.
pub fn fill_excerpt(conn: &Connection, id: i64) -> DomainResult<()> {
    const HTML: &str = "SELECT content_html FROM issues WHERE id = ?1 AND excerpt IS NULL";
    let html: Option<Option<String>> = conn.query_row(HTML, [id], |r| r.get(0)).optional()?;
    if let Some(Some(html)) = html {
        store_excerpt(conn, id, Some(&html))?;
    }
    Ok(())
}

/// An article as given on create/update.
#[derive(Debug, Clone, Default)]
pub struct ArticleInput {
    pub title: String,
    pub url: String,
    pub summarized_article: String,
}

/// Fields of a create or update; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct IssueInput {
    pub subject: Option<String>,
    pub content_markdown: Option<String>,
    pub status: Option<String>,
    /// `Some(None)` clears the schedule.
    pub scheduled_for: Option<Option<String>>,
    /// Replaces all articles when given.
    pub articles: Option<Vec<ArticleInput>>,
    /// Replaces the audience when given; empty lists: every active subscriber.
    pub audience: Option<AudienceInput>,
    /// Puts the issue on the site (`true`, as [`publish`]) or takes it off (`false`, as
    /// [`unpublish`]) with the other changes.
    pub published: Option<bool>,
    /// The picture of its link previews; blank goes back to the content's first image.
    pub social_image_url: Option<String>,
    /// `public`, `members` or `paid`.
    pub visibility: Option<String>,
    /// For a paid issue: mail paid members only.
    pub paid_members_only: Option<bool>,
}

struct Valid {
    subject: Option<String>,
    content: Option<String>,
    /// `content` rendered: set by [`check`] whenever `content` is.
    content_html: Option<String>,
    status: Option<Status>,
    scheduled_for: Option<Option<jiff::Timestamp>>,
    articles: Option<Vec<ArticleInput>>,
    audience: Option<Audience>,
    published: Option<bool>,
    /// `Some(None)` goes back to the content's first image.
    social_image_url: Option<Option<String>>,
    visibility: Option<Visibility>,
    paid_members_only: Option<bool>,
}

fn validate(input: &IssueInput, creating: bool) -> DomainResult<Valid> {
    let mut errors = FieldErrors::new();
    let subject = match (&input.subject, creating) {
        (Some(s), _) => Some(clean_text(&mut errors, "subject", s, true, SUBJECT_MAX)),
        (None, true) => {
            errors.add("subject", "can't be blank");
            None
        }
        (None, false) => None,
    };
    if subject
        .as_deref()
        .is_some_and(|s| s.chars().any(|c| c == '\r' || c == '\n'))
    {
        errors.add("subject", "must be one line");
    }
    let content = input.content_markdown.clone();
    if let Some(problem) = content.as_deref().and_then(content::shape_problem) {
        errors.add("content_markdown", problem);
    }
    let status = match input.status.as_deref().map(str::trim) {
        None => None,
        Some(text) => match Status::parse(text).filter(|s| s.is_editable()) {
            Some(status) => Some(status),
            None => {
                errors.add("status", "must be one of draft, scheduled or approved");
                None
            }
        },
    };
    let scheduled_for = match &input.scheduled_for {
        None => None,
        Some(None) => Some(None),
        Some(Some(text)) if text.trim().is_empty() => Some(None),
        Some(Some(text)) => match clock::parse(text.trim()) {
            Some(at) => Some(Some(at)),
            None => {
                errors.add(
                    "scheduled_for",
                    "must be an ISO 8601 date-time with a time zone, e.g. 2026-12-01T09:00:00Z",
                );
                None
            }
        },
    };
    let articles = match &input.articles {
        None => None,
        Some(list) if list.len() > ARTICLES_MAX => {
            errors.add(
                "articles",
                format!("are too many (maximum is {ARTICLES_MAX})"),
            );
            None
        }
        Some(list) => {
            let mut cleaned = Vec::new();
            for (i, a) in list.iter().enumerate() {
                let title = clean_text(
                    &mut errors,
                    &format!("articles[{i}].title"),
                    &a.title,
                    true,
                    TITLE_MAX,
                );
                let url = match web_url::check(&a.url, Schemes::HttpOrHttps, URL_MAX) {
                    Ok(url) => url,
                    Err(problem) => {
                        errors.add(
                            &format!("articles[{i}].url"),
                            problem.message(URL_MAX, "must be an absolute http(s) URL"),
                        );
                        a.url.trim().to_string()
                    }
                };
                let summary = clean_text(
                    &mut errors,
                    &format!("articles[{i}].summarized_article"),
                    &a.summarized_article,
                    false,
                    SUMMARY_MAX,
                );
                cleaned.push(ArticleInput {
                    title,
                    url,
                    summarized_article: summary,
                });
            }
            Some(cleaned)
        }
    };
    let audience = input
        .audience
        .as_ref()
        .map(|given| audience::check_shape(given, "audience.", &mut errors));
    let social_image_url = input.social_image_url.as_deref().map(|raw| {
        if raw.trim().is_empty() {
            return None;
        }
        web_url::check(raw, Schemes::HttpOrHttps, URL_MAX)
            .map_err(|problem| {
                errors.add(
                    "social_image_url",
                    problem.message(URL_MAX, "must be an absolute http(s) URL of an image"),
                )
            })
            .ok()
    });
    let visibility = match input.visibility.as_deref().map(str::trim) {
        None => None,
        Some(text) => match Visibility::parse(text) {
            Some(v) => Some(v),
            None => {
                errors.add("visibility", "must be one of public, members or paid");
                None
            }
        },
    };
    errors.into_result()?;
    Ok(Valid {
        subject,
        content,
        content_html: None,
        status,
        scheduled_for,
        articles,
        audience,
        published: input.published,
        social_image_url,
        visibility,
        paid_members_only: input.paid_members_only,
    })
}

/// What is kept beside an issue's content whenever the content is written: the images it
/// names (so one in use cannot be deleted) and its excerpt. Every write of `content_html`
/// calls it, in the same transaction.
fn content_saved(
    conn: &Connection,
    newsletter_id: i64,
    id: i64,
    markdown: &str,
    html: Option<&str>,
) -> DomainResult<()> {
    media::record_uses(conn, newsletter_id, id, markdown)?;
    store_excerpt(conn, id, html)
}

/// Stores the excerpt of issue `id`'s HTML (`None` while it has none).
fn store_excerpt(conn: &Connection, id: i64, html: Option<&str>) -> DomainResult<()> {
    const EXCERPT: &str = "UPDATE issues SET excerpt = ?2 WHERE id = ?1";
    conn.execute(EXCERPT, (id, html.map(excerpt::opening_words)))?;
    Ok(())
}

/// Applies the `social_image_url`, `visibility` and `paid_members_only` changes of a create
/// or update, in its transaction. Who a send mails is fixed once its recipients are
/// recorded, so `paid_members_only` changes nothing after that.
fn set_reading_settings(conn: &Connection, id: i64, valid: &Valid) -> DomainResult<()> {
    let now = Timestamp::now();
    if let Some(image) = &valid.social_image_url {
        const SET: &str = "UPDATE issues SET social_image_url = ?2, updated_at = ?3
             WHERE id = ?1 AND social_image_url IS NOT ?2";
        conn.execute(SET, (id, image, now))?;
    }
    if let Some(visibility) = valid.visibility {
        const SET: &str = "UPDATE issues SET visibility = ?2, updated_at = ?3
             WHERE id = ?1 AND visibility != ?2";
        conn.execute(SET, (id, visibility, now))?;
    }
    if let Some(only) = valid.paid_members_only {
        store_paid_members_only(conn, id, only)?;
    }
    Ok(())
}

/// Records whether the issue is mailed to paid members only, until its recipients are
/// recorded (then who it mails is fixed).
fn store_paid_members_only(conn: &Connection, id: i64, only: bool) -> DomainResult<()> {
    const SET: &str = "UPDATE issues SET paid_members_only = ?2, updated_at = ?3
         WHERE id = ?1 AND paid_members_only != ?2 AND recipients_at IS NULL";
    conn.execute(SET, (id, only, Timestamp::now()))?;
    Ok(())
}

/// The next slot of `frequency` strictly after `after`: 09:00 on the clocks of `zone` (the
/// newsletter's), so the slot stays at 09:00 there across daylight saving time; `None` for
/// skip.
pub fn next_slot(
    frequency: Frequency,
    after: jiff::Timestamp,
    zone: &TimeZoneName,
) -> Option<jiff::Timestamp> {
    let days: &[Weekday] = match frequency {
        Frequency::Daily => &[
            Weekday::Monday,
            Weekday::Tuesday,
            Weekday::Wednesday,
            Weekday::Thursday,
            Weekday::Friday,
        ],
        Frequency::ThreeTimes => &[Weekday::Monday, Weekday::Wednesday, Weekday::Friday],
        Frequency::Weekly => &[Weekday::Tuesday],
        Frequency::Skip => return None,
    };
    let after = Timestamp::from(after);
    let today = zone.local(after).date();
    (0..=7).find_map(|offset| {
        let day = today.checked_add(jiff::Span::new().days(offset)).ok()?;
        let slot = zone.instant_of(day.at(9, 0, 0, 0)).ok()?;
        (days.contains(&day.weekday()) && slot > after).then(|| slot.instant())
    })
}

/// Resolves the schedule an issue ends up with and checks the scheduled rule.
fn settle_schedule(
    status: Status,
    requested: Option<Option<jiff::Timestamp>>,
    current: Option<Timestamp>,
    newsletter: &Newsletter,
) -> DomainResult<Option<Timestamp>> {
    let now = clock::now();
    let chosen = match requested {
        Some(value) => value,
        None => current.map(Timestamp::instant),
    };
    if status != Status::Scheduled {
        return Ok(chosen.map(Timestamp::from));
    }
    match chosen {
        Some(at) if at > now => Ok(Some(Timestamp::from(at))),
        Some(_) if requested.is_some() => Err(DomainError::invalid(
            "scheduled_for",
            "must be in the future",
        )),
        _ => match newsletter
            .frequency
            .and_then(|f| next_slot(f, now, &newsletter.time_zone))
        {
            Some(slot) => Ok(Some(Timestamp::from(slot))),
            None => Err(DomainError::invalid(
                "scheduled_for",
                "is required for a scheduled issue (the newsletter has no publishing frequency to pick a slot from)",
            )),
        },
    }
}

/// A URL slug of the subject, unique among the newsletter's issues.
fn free_path(
    conn: &Connection,
    newsletter_id: i64,
    subject: &str,
    own_id: Option<i64>,
) -> DomainResult<String> {
    const TAKEN: &str = "SELECT EXISTS(SELECT 1 FROM issues WHERE newsletter_id = ?1 AND path = ?2 AND id IS NOT ?3)";
    let base: String = newsletters::subdomain_base(subject)
        .chars()
        .take(PATH_MAX)
        .collect();
    let base = if base == "newsletter" && !subject.to_lowercase().contains("newsletter") {
        "issue".to_string()
    } else {
        base
    };
    for n in 1.. {
        let candidate = if n == 1 {
            base.clone()
        } else {
            format!("{}-{n}", base.trim_end_matches('-'))
        };
        let taken: bool =
            conn.query_row(TAKEN, (newsletter_id, &candidate, own_id), |r| r.get(0))?;
        if !taken {
            return Ok(candidate);
        }
    }
    unreachable!("the loop returns")
}

fn replace_articles(
    conn: &Connection,
    issue_id: i64,
    articles: &[ArticleInput],
) -> DomainResult<()> {
    const INSERT: &str = "INSERT INTO articles (issue_id, position, title, url, summarized_article) VALUES (?1, ?2, ?3, ?4, ?5)";
    conn.execute("DELETE FROM articles WHERE issue_id = ?1", [issue_id])?;
    let mut stmt = conn.prepare_cached(INSERT)?;
    for (i, a) in articles.iter().enumerate() {
        stmt.execute((
            issue_id,
            i as i64 + 1,
            &a.title,
            &a.url,
            &a.summarized_article,
        ))?;
    }
    Ok(())
}

/// An issue's fields checked and its content rendered: what [`create`] and [`update`] save
/// and [`preview`] shows. Checking renders the content, which takes up to
/// [`content::RENDER_BUDGET`], so doors check on a blocking thread before they take a
/// database connection ([`crate::store::Db::run_after`]).
pub struct Checked(Valid);

/// Checks the fields of a new issue (a subject is required) and renders its content.
pub fn check_new(input: &IssueInput) -> DomainResult<Checked> {
    check(input, true)
}

/// Checks the fields an update changes, and renders the content when it is one of them.
pub fn check_changes(input: &IssueInput) -> DomainResult<Checked> {
    check(input, false)
}

fn check(input: &IssueInput, creating: bool) -> DomainResult<Checked> {
    let mut valid = validate(input, creating)?;
    valid.content_html = valid.content.as_deref().map(content::render).transpose()?;
    Ok(Checked(valid))
}

/// The issue as `changes` would leave it, not saved: what the dashboard previews before the
/// owner saves. `current` is the stored issue, `None` for a new one (checked with
/// [`check_new`]).
pub fn preview(newsletter_id: i64, current: Option<&Issue>, changes: Checked) -> Issue {
    let Checked(valid) = changes;
    let now = Timestamp::now();
    let mut issue = current.cloned().unwrap_or_else(|| Issue {
        id: 0,
        newsletter_id,
        subject: String::new(),
        content_markdown: String::new(),
        content_html: Some(String::new()),
        status: Status::Draft,
        scheduled_for: None,
        sent_at: None,
        path: String::new(),
        published_at: None,
        last_error: None,
        articles_count: 0,
        articles: Vec::new(),
        created_at: now,
        updated_at: now,
        relay_down_since: None,
        send_resumes_at: None,
        audience: Audience::default(),
        recipients: None,
        edited_at: None,
        excerpt: None,
        social_image_url: None,
        visibility: Visibility::Public,
        paid_members_only: false,
        resent_unopened_as: None,
    });
    if let Some(subject) = valid.subject {
        issue.subject = subject;
    }
    if let Some(content) = valid.content {
        issue.content_markdown = content;
        issue.content_html = valid.content_html;
    }
    if let Some(image) = valid.social_image_url {
        issue.social_image_url = image;
    }
    if let Some(visibility) = valid.visibility {
        issue.visibility = visibility;
    }
    if let Some(only) = valid.paid_members_only {
        issue.paid_members_only = only;
    }
    if let Some(articles) = valid.articles {
        issue.articles = articles
            .into_iter()
            .zip(1..)
            .map(|(a, position)| Article {
                id: 0,
                title: a.title,
                url: a.url,
                position,
                summarized_article: a.summarized_article,
            })
            .collect();
        issue.articles_count = issue.articles.len() as i64;
    }
    issue
}

/// Creates an issue (draft unless told otherwise) from fields checked by [`check_new`].
pub fn create(conn: &mut Connection, newsletter_id: i64, issue: &Checked) -> DomainResult<Issue> {
    write_tx(conn, |tx| create_in(tx, newsletter_id, issue))
}

/// [`create`] inside the caller's transaction.
pub fn create_in(tx: &Connection, newsletter_id: i64, issue: &Checked) -> DomainResult<Issue> {
    let Checked(valid) = issue;
    let newsletter = newsletters::get(tx, newsletter_id)?;
    newsletter.ensure_writable()?;
    let status = valid.status.unwrap_or(Status::Draft);
    let scheduled_for = settle_schedule(status, valid.scheduled_for, None, &newsletter)?;
    let subject = valid.subject.clone().unwrap_or_default();
    let path = free_path(tx, newsletter_id, &subject, None)?;
    const INSERT: &str = "INSERT INTO issues (newsletter_id, subject, content_markdown, content_html, status, scheduled_for, path, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)";
    tx.execute(
        INSERT,
        (
            newsletter_id,
            &subject,
            valid.content.as_deref().unwrap_or(""),
            valid.content_html.as_deref().unwrap_or(""),
            status,
            &scheduled_for,
            &path,
            Timestamp::now(),
        ),
    )?;
    let id = tx.last_insert_rowid();
    content_saved(
        tx,
        newsletter_id,
        id,
        valid.content.as_deref().unwrap_or(""),
        Some(valid.content_html.as_deref().unwrap_or("")),
    )?;
    set_reading_settings(tx, id, valid)?;
    if let Some(articles) = &valid.articles {
        replace_articles(tx, id, articles)?;
    }
    set_audience(tx, newsletter_id, id, valid.audience.as_ref())?;
    set_published(tx, newsletter_id, id, valid.published)
}

/// Updates an issue with fields checked by [`check_changes`]. An unsent issue takes every
/// field; a sent one only its content, as the web copy ([`edit_sent`]); sending and failed
/// issues are `invalid_state`.
pub fn update(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    changes: &Checked,
) -> DomainResult<Issue> {
    write_tx(conn, |tx| update_in(tx, newsletter_id, id, changes))
}

/// [`update`] inside the caller's transaction.
pub fn update_in(
    tx: &Connection,
    newsletter_id: i64,
    id: i64,
    changes: &Checked,
) -> DomainResult<Issue> {
    let Checked(valid) = changes;
    let newsletter = newsletters::get(tx, newsletter_id)?;
    newsletter.ensure_writable()?;
    let issue = get(tx, newsletter_id, id)?;
    if issue.status == Status::Sent {
        return edit_sent(tx, issue, valid);
    }
    if !issue.status.is_editable() {
        return Err(DomainError::rejected(
            ErrorCode::InvalidState,
            format!("A {} issue cannot be changed", issue.status),
        ));
    }
    let status = valid.status.unwrap_or(issue.status);
    let scheduled_for = settle_schedule(
        status,
        valid.scheduled_for,
        issue.scheduled_for,
        &newsletter,
    )?;
    let subject = valid
        .subject
        .clone()
        .unwrap_or_else(|| issue.subject.clone());
    let path = if !ever_published(tx, &issue)? && subject != issue.subject {
        free_path(tx, newsletter_id, &subject, Some(id))?
    } else {
        issue.path.clone()
    };
    const UPDATE: &str =
        "UPDATE issues SET subject = ?2, content_markdown = ?3, content_html = ?4, status = ?5,
         scheduled_for = ?6, path = ?7, last_error = NULL, updated_at = ?8 WHERE id = ?1";
    let (content, html) = match &valid.content {
        Some(content) => (content, valid.content_html.as_ref()),
        None => (&issue.content_markdown, issue.content_html.as_ref()),
    };
    tx.execute(
        UPDATE,
        (
            id,
            &subject,
            content,
            html,
            status,
            &scheduled_for,
            &path,
            Timestamp::now(),
        ),
    )?;
    if valid.content.is_some() {
        content_saved(tx, newsletter_id, id, content, html.map(String::as_str))?;
    }
    set_reading_settings(tx, id, valid)?;
    if let Some(articles) = &valid.articles {
        replace_articles(tx, id, articles)?;
    }
    set_audience(tx, newsletter_id, id, valid.audience.as_ref())?;
    set_published(tx, newsletter_id, id, valid.published)
}

/// Applies a `published` change of a create or update, in its transaction: the issue as it
/// ends.
fn set_published(
    conn: &Connection,
    newsletter_id: i64,
    id: i64,
    published: Option<bool>,
) -> DomainResult<Issue> {
    let issue = get(conn, newsletter_id, id)?;
    match published {
        None => Ok(issue),
        Some(true) => Ok(make_public(conn, newsletter_id, issue)?.0),
        Some(false) => hide(conn, issue),
    }
}

/// Whether the issue is published, or was and has been unpublished: its path is fixed then.
fn ever_published(conn: &Connection, issue: &Issue) -> DomainResult<bool> {
    if issue.published_at.is_some() {
        return Ok(true);
    }
    const SQL: &str = "SELECT withdrawn_published_at IS NOT NULL FROM issues WHERE id = ?1";
    Ok(conn.query_row(SQL, [issue.id], |r| r.get(0))?)
}

/// What a sent issue's changes may hold: its content (the web copy), and the other fields
/// only as they are (an editor posts them all). Anything else is refused by name.
fn check_sent_changes(issue: &Issue, valid: &Valid) -> DomainResult<()> {
    let mut errors = FieldErrors::new();
    if valid.subject.as_ref().is_some_and(|s| *s != issue.subject) {
        errors.add(
            "subject",
            "can't be changed once the issue is sent: the mail went out with it",
        );
    }
    let same_articles = |given: &Vec<ArticleInput>| {
        given.len() == issue.articles.len()
            && given.iter().zip(&issue.articles).all(|(g, a)| {
                g.title == a.title && g.url == a.url && g.summarized_article == a.summarized_article
            })
    };
    if valid.articles.as_ref().is_some_and(|a| !same_articles(a)) {
        errors.add(
            "articles",
            "can't be changed once the issue is sent; edit the content instead",
        );
    }
    if valid.status.is_some() {
        errors.add("status", "can't be set on a sent issue");
    }
    if valid.scheduled_for.is_some() {
        errors.add("scheduled_for", "can't be set on a sent issue");
    }
    if valid
        .audience
        .as_ref()
        .is_some_and(|a| *a != issue.audience)
    {
        errors.add("audience", "can't be changed once the issue is sent");
    }
    errors.into_result()
}

/// Edits the web copy of a sent issue: its content changes for the site, the feed and the
/// API, and `edited_at` records when. The first edit keeps the content the mail went out with
/// (`mailed_markdown`, `mailed_html`), which [`get_as_mailed`] reads, so a resumed send, a
/// send again to the unconfirmed and a test send still send the original mail.
fn edit_sent(conn: &Connection, issue: Issue, valid: &Valid) -> DomainResult<Issue> {
    check_sent_changes(&issue, valid)?;
    let (nid, id) = (issue.newsletter_id, issue.id);
    set_reading_settings(conn, id, valid)?;
    let (Some(content), Some(html)) = (&valid.content, &valid.content_html) else {
        return set_published(conn, nid, id, valid.published);
    };
    if *content == issue.content_markdown {
        return set_published(conn, nid, id, valid.published);
    }
    const KEEP_MAILED: &str = "UPDATE issues SET mailed_markdown = content_markdown,
         mailed_html = content_html WHERE id = ?1 AND mailed_markdown IS NULL";
    conn.execute(KEEP_MAILED, [issue.id])?;
    const EDIT: &str = "UPDATE issues SET content_markdown = ?2, content_html = ?3,
         edited_at = ?4, updated_at = ?4 WHERE id = ?1";
    conn.execute(EDIT, (issue.id, content, html, Timestamp::now()))?;
    content_saved(conn, nid, id, content, Some(html))?;
    set_published(conn, nid, id, valid.published)
}

/// The issue as its mail goes out: [`get`], with the content the mail was sent with when
/// the web copy was edited after sending. What sends it (the send, a resend, a test) reads
/// this; pages and the API read [`get`].
pub fn get_as_mailed(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<Issue> {
    let mut issue = get(conn, newsletter_id, id)?;
    const MAILED: &str = "SELECT mailed_markdown, mailed_html FROM issues WHERE id = ?1 AND mailed_markdown IS NOT NULL";
    let mailed: Option<(String, Option<String>)> = conn
        .query_row(MAILED, [id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    if let Some((markdown, html)) = mailed {
        issue.content_markdown = markdown;
        issue.content_html = html;
    }
    Ok(issue)
}

/// Makes a new draft from issue `id`: "Copy of" its subject, its content and articles; the
/// audience, schedule and web page are the new draft's own.
pub fn duplicate(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<Issue> {
    write_tx(conn, |tx| {
        newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        let original = get(tx, newsletter_id, id)?;
        let subject: String = format!("Copy of {}", original.subject)
            .chars()
            .take(SUBJECT_MAX)
            .collect();
        let copy = copy_of(tx, original, subject.trim_end())?;
        get(tx, newsletter_id, copy)
    })
}

/// A new draft of `original`'s content, articles, picture and visibility under `subject`,
/// inside the caller's transaction; its id.
fn copy_of(tx: &Connection, original: Issue, subject: &str) -> DomainResult<i64> {
    let newsletter_id = original.newsletter_id;
    let path = free_path(tx, newsletter_id, subject, None)?;
    const INSERT: &str = "INSERT INTO issues (newsletter_id, subject, content_markdown, content_html, status, path, created_at, updated_at, social_image_url, visibility, paid_members_only)
             VALUES (?1, ?2, ?3, ?4, 'draft', ?5, ?6, ?6, ?7, ?8, ?9)";
    tx.execute(
        INSERT,
        (
            newsletter_id,
            &subject,
            &original.content_markdown,
            &original.content_html,
            &path,
            Timestamp::now(),
            &original.social_image_url,
            original.visibility,
            original.paid_members_only,
        ),
    )?;
    let copy = tx.last_insert_rowid();
    content_saved(
        tx,
        newsletter_id,
        copy,
        &original.content_markdown,
        original.content_html.as_deref(),
    )?;
    let articles: Vec<ArticleInput> = original
        .articles
        .into_iter()
        .map(|a| ArticleInput {
            title: a.title,
            url: a.url,
            summarized_article: a.summarized_article,
        })
        .collect();
    replace_articles(tx, copy, &articles)?;
    Ok(copy)
}

/// Records `chosen` (shape-checked) as the issue's audience once its tags are known to the
/// newsletter; `None` keeps the recorded one.
fn set_audience(
    conn: &Connection,
    newsletter_id: i64,
    id: i64,
    chosen: Option<&Audience>,
) -> DomainResult<()> {
    if let Some(chosen) = chosen {
        let known = audience::check_known(conn, newsletter_id, chosen, "audience.")?;
        record_audience(conn, id, &known, "audience")?;
    }
    Ok(())
}

/// Stores `chosen` as issue `id`'s audience; a resend's audience is its original's
/// non-openers, so any other choice for it is refused (under `field`), and none changes.
fn record_audience(conn: &Connection, id: i64, chosen: &Audience, field: &str) -> DomainResult<()> {
    const RESEND: &str = "SELECT resend_of IS NOT NULL FROM issues WHERE id = ?1";
    let resend: bool = conn.query_row(RESEND, [id], |r| r.get(0))?;
    let chooses = !Audience {
        paid_only: false,
        ..chosen.clone()
    }
    .is_everyone();
    if resend && chooses {
        return Err(DomainError::invalid(
            field,
            "can't be chosen for a resend: it goes to those who did not open the issue it resends",
        ));
    }
    audience::store(conn, id, chosen)
}

/// Deletes a draft; any other status is `invalid_state`.
pub fn delete(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<()> {
    write_tx(conn, |tx| {
        newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        let issue = get(tx, newsletter_id, id)?;
        if issue.status != Status::Draft {
            return Err(DomainError::rejected(
                ErrorCode::InvalidState,
                "Only draft issues can be deleted",
            ));
        }
        tx.execute("DELETE FROM issues WHERE id = ?1", [id])?;
        Ok(())
    })
}

/// What is wrong with the merge tags of `markdown`, if anything: the tags that name no
/// custom field of the newsletter (nor `name` or `email`). The editor shows it and a send
/// refuses it (docs/growth.md, "Merge tags").
pub fn merge_tag_problem(
    conn: &Connection,
    newsletter_id: i64,
    issue: &Issue,
) -> DomainResult<Option<String>> {
    let markdown = format!("{}\n{}", issue.subject, issue.content_markdown);
    if !markdown.contains("{{") {
        return Ok(None);
    }
    let fields = crate::domain::subscribers::custom_fields::list(conn, newsletter_id)?;
    let unknown = merge_tags::unknown(&markdown, |name| fields.iter().any(|f| f.name == name));
    if unknown.is_empty() {
        return Ok(None);
    }
    let named: Vec<String> = unknown.iter().map(|n| format!("{{{{ {n} }}}}")).collect();
    let known: Vec<&str> = merge_tags::OWN
        .into_iter()
        .chain(fields.iter().map(|f| f.name.as_str()))
        .collect();
    Ok(Some(format!(
        "has merge tags that name no field: {} (the tags this newsletter has: {})",
        named.join(", "),
        known.join(", ")
    )))
}

/// The send_now checks, in the decided order: status, paused, subscribers, tier, content.
/// Returns the number of subscribers in the issue's audience.
pub fn check_sendable(
    conn: &Connection,
    newsletter: &Newsletter,
    issue: &Issue,
) -> DomainResult<i64> {
    if !matches!(issue.status, Status::Approved | Status::Scheduled) {
        return Err(DomainError::rejected(
            ErrorCode::InvalidState,
            format!(
                "Only approved or scheduled issues can be sent; this one is {}",
                issue.status.as_str()
            ),
        ));
    }
    if newsletter.status == newsletters::Status::Paused {
        return Err(DomainError::rejected(
            ErrorCode::NewsletterPaused,
            "The newsletter is paused; resume it to send",
        ));
    }
    if let Some(problem) = merge_tag_problem(conn, newsletter.id, issue)? {
        return Err(DomainError::invalid("content_markdown", problem));
    }
    let recipients = audience::count(conn, newsletter.id, &issue.audience)?;
    if recipients == 0 {
        let message = if issue.audience.is_everyone() {
            "The newsletter has no active subscribers".to_string()
        } else {
            format!(
                "No active subscriber is in this audience ({})",
                issue.audience.describe()
            )
        };
        return Err(DomainError::rejected(
            ErrorCode::NoActiveSubscribers,
            message,
        ));
    }
    if newsletter.tier != newsletters::Tier::Paid {
        return Err(DomainError::rejected(
            ErrorCode::PaymentRequired,
            PAID_TIER_NEEDED,
        ));
    }
    if !issue.has_content() {
        return Err(DomainError::rejected(
            ErrorCode::NoContent,
            "The issue has no content and no articles",
        ));
    }
    Ok(recipients)
}

/// The refusal of a send for the tier; it says who can lift it (docs/operator.md).
const PAID_TIER_NEEDED: &str = "Sending e-mail needs the paid tier: ask the operator of this Broadsheet installation (Settings, Plan: Request an upgrade)";

/// What send_now would answer now, without sending: the recipient count, or why not (a
/// cancelled newsletter first, then the checks of [`check_sendable`]).
pub fn sendable(conn: &Connection, newsletter: &Newsletter, issue: &Issue) -> DomainResult<i64> {
    newsletter.ensure_writable()?;
    check_sendable(conn, newsletter, issue)
}

/// The outcome of send_now: the issue as it was when queued and the recipient count.
#[derive(Debug, Clone)]
pub struct Queued {
    pub issue: Issue,
    pub recipients: i64,
}

/// What a send is asked with besides the issue.
#[derive(Debug, Clone, Default)]
pub struct SendChoice {
    /// Replaces the issue's recorded audience; `None` sends to the recorded one.
    pub audience: Option<AudienceInput>,
    /// Whether the issue goes on the site when the send completes; `None` follows the rule
    /// of [`publishes_by_default`].
    pub publish: Option<bool>,
    /// A draft is approved and sent in one step (the dashboard's one confirmation); without
    /// it only approved and scheduled issues are sent (the API's states).
    pub approve_draft: bool,
    /// For a paid issue: mailed to paid members only (`true`) or to everyone, free members
    /// getting the excerpt and an upgrade link (`false`); `None` keeps the issue's choice.
    pub paid_members_only: Option<bool>,
}

/// Whether a send to `audience` publishes the issue when the owner did not say: a send to
/// everyone follows the newsletter's publish-on-send setting; a send to a segment is not
/// published (its readers are a few, the site is everyone's).
pub fn publishes_by_default(newsletter: &Newsletter, audience: &Audience) -> bool {
    newsletter.publish_on_send && audience.is_everyone()
}

/// Whether the completed send of `issue` publishes it: the owner's choice recorded with the
/// send, else [`publishes_by_default`].
pub(in crate::domain) fn publishes_when_sent(
    conn: &Connection,
    newsletter: &Newsletter,
    issue: &Issue,
) -> DomainResult<bool> {
    const SQL: &str = "SELECT publish_when_sent FROM issues WHERE id = ?1";
    let chosen: Option<bool> = conn.query_row(SQL, [issue.id], |r| r.get(0))?;
    Ok(chosen.unwrap_or_else(|| publishes_by_default(newsletter, &issue.audience)))
}

/// `issue` as a one-step send sees it: a draft counts as approved (approving changes nothing
/// else), so the send checks are [`check_sendable`]'s either way.
fn approved_in_one_step(mut issue: Issue) -> Issue {
    if issue.status == Status::Draft {
        issue.status = Status::Approved;
    }
    issue
}

/// What a one-step send (a draft approved and sent at once) would answer now: [`sendable`]
/// with a draft counted as approved.
pub fn sendable_in_one_step(
    conn: &Connection,
    newsletter: &Newsletter,
    issue: &Issue,
) -> DomainResult<i64> {
    sendable(conn, newsletter, &approved_in_one_step(issue.clone()))
}

/// Checks the issue and queues its send; the issue turns `sending` at once, so a second
/// send_now cannot queue it twice. `chosen` replaces the issue's recorded audience (checked
/// first: a refusal changes nothing); `None` sends to the recorded one.
pub fn send_now(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    chosen: Option<&AudienceInput>,
) -> DomainResult<Queued> {
    let choice = SendChoice {
        audience: chosen.cloned(),
        ..SendChoice::default()
    };
    send_with(conn, newsletter_id, id, &choice)
}

/// [`send_now`] with the owner's choices: the audience, whether the issue is published when
/// the send completes, and whether a draft is approved in the same step.
pub fn send_with(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    choice: &SendChoice,
) -> DomainResult<Queued> {
    write_tx(conn, |tx| send_in(tx, newsletter_id, id, choice))
}

/// [`send_with`] inside the caller's transaction; a refusal has changed nothing.
pub fn send_in(
    tx: &Connection,
    newsletter_id: i64,
    id: i64,
    choice: &SendChoice,
) -> DomainResult<Queued> {
    let newsletter = newsletters::get(tx, newsletter_id)?;
    newsletter.ensure_writable()?;
    let mut issue = get(tx, newsletter_id, id)?;
    if let Some(chosen) = &choice.audience {
        let chosen = audience::check(tx, newsletter_id, chosen, "")?;
        record_audience(tx, id, &chosen, "tags")?;
        issue.choose_audience(chosen);
    }
    if let Some(only) = choice.paid_members_only {
        store_paid_members_only(tx, id, only)?;
        issue.mail_paid_members_only(only);
    }
    let checked = match choice.approve_draft {
        true => approved_in_one_step(issue.clone()),
        false => issue.clone(),
    };
    let recipients = sendable(tx, &newsletter, &checked)?;
    const CHOICE: &str = "UPDATE issues SET publish_when_sent = ?2 WHERE id = ?1";
    tx.execute(CHOICE, (id, choice.publish))?;
    start_sending(tx, &issue)?;
    Ok(Queued { issue, recipients })
}

/// The newsletter may mail its subscribers now: not paused, on the paid tier.
pub(in crate::domain) fn ensure_may_mail(newsletter: &Newsletter) -> DomainResult<()> {
    if newsletter.status == newsletters::Status::Paused {
        return Err(DomainError::rejected(
            ErrorCode::NewsletterPaused,
            "The newsletter is paused; resume it to send",
        ));
    }
    if newsletter.tier != newsletters::Tier::Paid {
        return Err(DomainError::rejected(
            ErrorCode::PaymentRequired,
            PAID_TIER_NEEDED,
        ));
    }
    Ok(())
}

/// Moves the issue to `sending` and queues the job that sends it.
pub(in crate::domain) fn start_sending(conn: &Connection, issue: &Issue) -> DomainResult<()> {
    const SENDING: &str =
        "UPDATE issues SET status = 'sending', last_error = NULL, relay_down_since = NULL,
         send_resumes_at = NULL, updated_at = ?2 WHERE id = ?1";
    conn.execute(SENDING, (issue.id, Timestamp::now()))?;
    crate::store::jobs::queue_issue_send(conn, issue.id)?;
    Ok(())
}

/// Starts every scheduled issue whose time has come; an issue failing the send checks turns
/// `approved` with `last_error`. Paused newsletters hold their scheduled issues. Returns how
/// many started.
pub fn start_due_scheduled(conn: &mut Connection) -> DomainResult<usize> {
    const DUE: &str = "SELECT i.id, i.newsletter_id FROM issues i JOIN newsletters n ON n.id = i.newsletter_id
         WHERE i.status = 'scheduled' AND i.scheduled_for <= ?1 AND n.status != 'paused' ORDER BY i.scheduled_for LIMIT 100";
    let due: Vec<(i64, i64)> = {
        let mut stmt = conn.prepare_cached(DUE)?;
        stmt.query_map([Timestamp::now()], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?
    };
    let mut started = 0;
    for (id, newsletter_id) in due {
        started += write_tx(conn, |tx| {
            let newsletter = newsletters::get(tx, newsletter_id)?;
            let issue = get(tx, newsletter_id, id)?;
            if issue.status != Status::Scheduled {
                return Ok(0);
            }
            let checked = newsletter
                .ensure_writable()
                .and_then(|()| check_sendable(tx, &newsletter, &issue));
            match checked {
                Ok(_) => {
                    start_sending(tx, &issue)?;
                    Ok(1)
                }
                Err(DomainError::Rejected(_, reason)) => {
                    const HOLD: &str = "UPDATE issues SET status = 'approved', last_error = ?2, updated_at = ?3 WHERE id = ?1";
                    tx.execute(
                        HOLD,
                        (
                            id,
                            format!("The scheduled send could not start: {reason}"),
                            Timestamp::now(),
                        ),
                    )?;
                    Ok(0)
                }
                Err(other) => Err(other),
            }
        })?;
    }
    Ok(started)
}

/// The outcome of publish.
#[derive(Debug, Clone)]
pub struct Published {
    pub issue: Issue,
    pub web_url: String,
    /// False when it was already published. `issue.published` fires the first time it is
    /// published ever, not when it is published again after being unpublished.
    pub first_time: bool,
}

/// Takes the issue off the site: its page, the archive and the feed lose it. It keeps the
/// time it was first published, so publishing it again puts it back in its place. Any
/// published issue may be unpublished; an unpublished one answers as it is.
pub fn unpublish(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<Issue> {
    write_tx(conn, |tx| {
        newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        hide(tx, get(tx, newsletter_id, id)?)
    })
}

/// The write of [`unpublish`].
fn hide(conn: &Connection, issue: Issue) -> DomainResult<Issue> {
    if issue.published_at.is_none() {
        return Ok(issue);
    }
    const HIDE: &str = "UPDATE issues SET withdrawn_published_at = published_at,
         published_at = NULL, updated_at = ?2 WHERE id = ?1";
    conn.execute(HIDE, (issue.id, Timestamp::now()))?;
    get(conn, issue.newsletter_id, issue.id)
}

/// Makes the issue's web page live. Approved, scheduled, sending and sent issues with
/// content may be published; `issue.published` fires the first time only.
pub fn publish(
    conn: &mut Connection,
    urls: &SiteUrls,
    newsletter_id: i64,
    id: i64,
) -> DomainResult<Published> {
    write_tx(conn, |tx| {
        let newsletter = newsletters::get(tx, newsletter_id)?;
        newsletter.ensure_writable()?;
        let issue = get(tx, newsletter_id, id)?;
        let (issue, first_time) = make_public(tx, newsletter_id, issue)?;
        let web_url = issue.web_url(&newsletter, urls).expect("published above");
        Ok(Published {
            issue,
            web_url,
            first_time,
        })
    })
}

/// The rules and the write of publishing, for [`publish`] and a send that publishes
/// ([`mark_sent`]): the issue as it is now, and whether this was the first time.
pub(in crate::domain) fn make_public(
    conn: &Connection,
    newsletter_id: i64,
    issue: Issue,
) -> DomainResult<(Issue, bool)> {
    if issue.status == Status::Draft {
        return Err(DomainError::rejected(
            ErrorCode::InvalidState,
            "Approve the issue before publishing it",
        ));
    }
    if !issue.has_content() {
        return Err(DomainError::rejected(
            ErrorCode::NoContent,
            "The issue has no content and no articles",
        ));
    }
    let first_time = issue.published_at.is_none();
    if !first_time {
        return Ok((issue, false));
    }
    // Published before and unpublished since: back in its place, without a second event.
    const AGAIN: &str = "UPDATE issues SET published_at = withdrawn_published_at,
         withdrawn_published_at = NULL, updated_at = ?2
         WHERE id = ?1 AND withdrawn_published_at IS NOT NULL";
    if conn.execute(AGAIN, (issue.id, Timestamp::now()))? > 0 {
        return Ok((get(conn, newsletter_id, issue.id)?, true));
    }
    const PUBLISH: &str = "UPDATE issues SET published_at = ?2, updated_at = ?2 WHERE id = ?1";
    conn.execute(PUBLISH, (issue.id, Timestamp::now()))?;
    let issue = get(conn, newsletter_id, issue.id)?;
    events::record(
        conn,
        newsletter_id,
        "issue.published",
        issue.event_data("published"),
    )?;
    Ok((issue, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::testing::at;

    #[test]
    fn slots_follow_the_frequency_at_nine_utc() {
        let utc = TimeZoneName::utc();
        let slot = |f, after| next_slot(f, after, &utc);
        // 2026-11-22 is a Sunday.
        let sunday_noon = at("2026-11-22T12:00:00Z");
        assert_eq!(
            slot(Frequency::Daily, sunday_noon),
            Some(at("2026-11-23T09:00:00Z"))
        );
        assert_eq!(
            slot(Frequency::Weekly, sunday_noon),
            Some(at("2026-11-24T09:00:00Z"))
        );
        assert_eq!(
            slot(Frequency::ThreeTimes, at("2026-11-23T09:00:00Z")),
            Some(at("2026-11-25T09:00:00Z"))
        );
        assert_eq!(
            slot(Frequency::Weekly, at("2026-11-24T08:59:00Z")),
            Some(at("2026-11-24T09:00:00Z"))
        );
        assert_eq!(
            slot(Frequency::Weekly, at("2026-11-24T09:00:00Z")),
            Some(at("2026-12-01T09:00:00Z"))
        );
        assert_eq!(slot(Frequency::Skip, sunday_noon), None);
    }

    #[test]
    fn slots_are_at_nine_on_the_newsletters_clocks_across_daylight_saving_time() {
        let new_york = TimeZoneName::parse("America/New_York").unwrap();
        // Sunday 1 November 2026, 02:00 EDT: the clocks go back to 01:00 EST.
        assert_eq!(
            next_slot(Frequency::Weekly, at("2026-10-27T14:00:00Z"), &new_york),
            Some(at("2026-11-03T14:00:00Z")),
            "09:00 EST after the change"
        );
        assert_eq!(
            next_slot(Frequency::Weekly, at("2026-10-20T12:00:00Z"), &new_york),
            Some(at("2026-10-20T13:00:00Z")),
            "09:00 EDT before it"
        );
        // Monday 09:00 in Tokyo is still Sunday in UTC: the day is the zone's.
        let tokyo = TimeZoneName::parse("Asia/Tokyo").unwrap();
        assert_eq!(
            next_slot(Frequency::Daily, at("2026-11-22T12:00:00Z"), &tokyo),
            Some(at("2026-11-23T00:00:00Z"))
        );
    }

    fn db() -> Connection {
        crate::domain::testing::db_with_newsletter("paid")
    }

    fn input(subject: &str) -> IssueInput {
        IssueInput {
            subject: Some(subject.into()),
            ..Default::default()
        }
    }

    /// Checks and creates, as the doors do.
    fn new(conn: &mut Connection, input: &IssueInput) -> DomainResult<Issue> {
        create(conn, 1, &check_new(input)?)
    }

    /// Checks and updates, as the doors do.
    fn change(conn: &mut Connection, id: i64, input: &IssueInput) -> DomainResult<Issue> {
        update(conn, 1, id, &check_changes(input)?)
    }

    #[test]
    fn lifecycle_rules() {
        let mut conn = db();
        crate::domain::testing::listen(&mut conn, 1, &["issue.published"]);
        let urls = SiteUrls::new("http://localhost:8080", "localhost:8080");
        let issue = new(&mut conn, &input("Hello, World!")).unwrap();
        assert_eq!(
            (issue.status, issue.path.as_str()),
            (Status::Draft, "hello-world")
        );
        assert_eq!(
            new(&mut conn, &input("Hello world")).unwrap().path,
            "hello-world-2"
        );

        let scheduled = IssueInput {
            status: Some("scheduled".into()),
            ..input("Later")
        };
        assert!(
            matches!(new(&mut conn, &scheduled), Err(DomainError::Invalid(..))),
            "no frequency, no time"
        );
        conn.execute("UPDATE newsletters SET frequency = 'weekly'", [])
            .unwrap();
        assert!(new(&mut conn, &scheduled).unwrap().scheduled_for.is_some());

        assert!(matches!(
            publish(&mut conn, &urls, 1, issue.id),
            Err(DomainError::Rejected(ErrorCode::InvalidState, _))
        ));
        let approve = IssueInput {
            status: Some("approved".into()),
            content_markdown: Some("# Hi".into()),
            ..Default::default()
        };
        change(&mut conn, issue.id, &approve).unwrap();
        assert!(matches!(
            send_now(&mut conn, 1, issue.id, None),
            Err(DomainError::Rejected(ErrorCode::NoActiveSubscribers, _))
        ));
        conn.execute(
            "INSERT INTO subscribers (newsletter_id, email, created_at) VALUES (1, 'r@x.co', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
        let queued = send_now(&mut conn, 1, issue.id, None).unwrap();
        assert_eq!(
            (queued.issue.status, queued.recipients),
            (Status::Approved, 1)
        );
        assert_eq!(get(&conn, 1, issue.id).unwrap().status, Status::Sending);
        assert!(matches!(
            send_now(&mut conn, 1, issue.id, None),
            Err(DomainError::Rejected(ErrorCode::InvalidState, _))
        ));
        assert!(matches!(
            change(&mut conn, issue.id, &input("x")),
            Err(DomainError::Rejected(ErrorCode::InvalidState, _))
        ));
        assert!(matches!(
            delete(&mut conn, 1, issue.id),
            Err(DomainError::Rejected(ErrorCode::InvalidState, _))
        ));

        let first = publish(&mut conn, &urls, 1, issue.id).unwrap();
        assert!(first.first_time);
        assert_eq!(first.web_url, "http://n.localhost:8080/p/hello-world");
        let again = publish(&mut conn, &urls, 1, issue.id).unwrap();
        assert!(!again.first_time);
        assert_eq!(again.web_url, first.web_url);
        let published: i64 = conn
            .query_row(
                "SELECT count(*) FROM events WHERE kind = 'issue.published'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(published, 1);
    }

    #[test]
    fn excerpts_and_image_uses_follow_every_write_of_the_content() {
        let mut conn = db();
        let hash = "ab".repeat(32);
        let image = format!("https://n.example.com/media/{hash}.png");
        let issue = new(
            &mut conn,
            &IssueInput {
                content_markdown: Some(format!("# Title\n\nOpening words.\n\n![x]({image})")),
                ..input("Title")
            },
        )
        .unwrap();
        assert_eq!(issue.excerpt.as_deref(), Some("Opening words."));
        assert_eq!(issue.social_image(), Some(image.clone()));
        let uses = |conn: &Connection, id: i64| -> i64 {
            conn.query_row(
                "SELECT count(*) FROM issue_media WHERE issue_id = ?1 AND hash = ?2",
                (id, &hash),
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(uses(&conn, issue.id), 1);
        // A copy names the same image: deleting it is refused while the copy uses it.
        let copy = duplicate(&mut conn, 1, issue.id).unwrap();
        assert_eq!(copy.excerpt.as_deref(), Some("Opening words."));
        assert_eq!(uses(&conn, copy.id), 1);
        // The web copy of a sent issue, edited: its excerpt and uses follow.
        conn.execute(
            "UPDATE issues SET status = 'sent', sent_at = created_at WHERE id = ?1",
            [issue.id],
        )
        .unwrap();
        let edited = change(
            &mut conn,
            issue.id,
            &IssueInput {
                content_markdown: Some("New words.".into()),
                social_image_url: Some("https://cdn.example.com/cover.jpg".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(edited.excerpt.as_deref(), Some("New words."));
        assert_eq!(uses(&conn, issue.id), 0);
        assert_eq!(
            edited.social_image().as_deref(),
            Some("https://cdn.example.com/cover.jpg")
        );
        // Saved before excerpts were kept: the job's step fills it from the stored HTML.
        conn.execute("UPDATE issues SET excerpt = NULL", [])
            .unwrap();
        assert_eq!(next_without_excerpt(&conn, 0).unwrap(), Some(issue.id));
        fill_excerpt(&conn, issue.id).unwrap();
        assert_eq!(
            get(&conn, 1, issue.id).unwrap().excerpt.as_deref(),
            Some("New words.")
        );
        assert_eq!(
            next_without_excerpt(&conn, issue.id).unwrap(),
            Some(copy.id)
        );
    }

    #[test]
    fn the_first_image_is_a_web_address_of_an_img() {
        assert_eq!(
            first_image(
                "<p>x</p><p><img src=\"https://a.example/i.png?a=1&amp;b=2\" alt=\"\" /></p>"
            ),
            Some("https://a.example/i.png?a=1&b=2".into())
        );
        assert_eq!(
            first_image("<p><img src=\"data:image/png;base64,AA\" /></p>"),
            None
        );
        assert_eq!(first_image("<p>no image</p>"), None);
    }

    #[test]
    fn a_sent_issue_takes_its_web_copy_and_keeps_the_mail() {
        let mut conn = db();
        let with = |markdown: &str| IssueInput {
            content_markdown: Some(markdown.into()),
            ..Default::default()
        };
        let issue = new(
            &mut conn,
            &IssueInput {
                status: Some("approved".into()),
                ..IssueInput {
                    subject: Some("Mailed".into()),
                    ..with("*first*")
                }
            },
        )
        .unwrap();
        conn.execute(
            "UPDATE issues SET status = 'sent', sent_at = created_at WHERE id = ?1",
            [issue.id],
        )
        .unwrap();
        // Other fields are refused by name, together, and nothing changes.
        let refused = change(
            &mut conn,
            issue.id,
            &IssueInput {
                subject: Some("Other".into()),
                status: Some("draft".into()),
                ..with("changed")
            },
        );
        let Err(DomainError::Invalid(_, fields)) = refused else {
            panic!("{refused:?}")
        };
        assert_eq!(
            fields
                .by_field()
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["status", "subject"]
        );
        assert_eq!(get(&conn, 1, issue.id).unwrap().content_markdown, "*first*");
        // The same subject is no change.
        let edited = change(
            &mut conn,
            issue.id,
            &IssueInput {
                subject: Some("Mailed".into()),
                ..with("**second**")
            },
        )
        .unwrap();
        assert!(edited.edited_at.is_some());
        assert_eq!(edited.body_html(), "<p><strong>second</strong></p>");
        let mailed = get_as_mailed(&conn, 1, issue.id).unwrap();
        assert_eq!(mailed.content_markdown, "*first*");
        assert_eq!(mailed.body_html(), "<p><em>first</em></p>");
        // A second edit keeps the first mail, not the first edit.
        change(&mut conn, issue.id, &with("third")).unwrap();
        assert_eq!(
            get_as_mailed(&conn, 1, issue.id).unwrap().content_markdown,
            "*first*"
        );
        // An unsent issue is its own mail.
        let draft = new(
            &mut conn,
            &IssueInput {
                subject: Some("Draft".into()),
                ..with("draft text")
            },
        )
        .unwrap();
        assert_eq!(
            get_as_mailed(&conn, 1, draft.id).unwrap().content_markdown,
            "draft text"
        );
        // Duplicated: a draft of the web copy, without the audience.
        let copy = duplicate(&mut conn, 1, issue.id).unwrap();
        assert_eq!(
            (
                copy.subject.as_str(),
                copy.status,
                copy.content_markdown.as_str()
            ),
            ("Copy of Mailed", Status::Draft, "third")
        );
        assert!(copy.published_at.is_none() && copy.audience.is_everyone());
    }

    #[test]
    fn unpublished_issues_come_back_in_their_place_without_a_second_event() {
        let mut conn = db();
        crate::domain::testing::listen(&mut conn, 1, &["issue.published"]);
        let urls = SiteUrls::new("http://localhost:8080", "localhost:8080");
        let issue = new(
            &mut conn,
            &IssueInput {
                status: Some("approved".into()),
                content_markdown: Some("x".into()),
                ..input("Shown")
            },
        )
        .unwrap();
        let first = publish(&mut conn, &urls, 1, issue.id).unwrap().issue;
        let hidden = unpublish(&mut conn, 1, issue.id).unwrap();
        assert!(hidden.published_at.is_none());
        assert!(get_published_by_path(&conn, 1, &issue.path).is_err());
        // The path stays fixed while it is off the site.
        let renamed = change(&mut conn, issue.id, &input("Renamed")).unwrap();
        assert_eq!(renamed.path, issue.path);
        let again = publish(&mut conn, &urls, 1, issue.id).unwrap();
        assert!(again.first_time);
        assert_eq!(again.issue.published_at, first.published_at);
        let published: i64 = conn
            .query_row(
                "SELECT count(*) FROM events WHERE kind = 'issue.published'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(published, 1);
        // `published` in an update does the same.
        let off = change(
            &mut conn,
            issue.id,
            &IssueInput {
                published: Some(false),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(off.published_at.is_none());
    }

    #[test]
    fn a_segment_send_publishes_only_when_asked_and_a_draft_sends_in_one_step() {
        let mut conn = db();
        conn.execute("UPDATE newsletters SET publish_on_send = 1", [])
            .unwrap();
        let newsletter = newsletters::get(&conn, 1).unwrap();
        let segment = Audience {
            tags: vec!["news".into()],
            ..Default::default()
        };
        assert!(publishes_by_default(&newsletter, &Audience::default()));
        assert!(!publishes_by_default(&newsletter, &segment));
        conn.execute(
            "INSERT INTO subscribers (newsletter_id, email, created_at) VALUES (1, 'r@x.co', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
        let draft = new(
            &mut conn,
            &IssueInput {
                content_markdown: Some("x".into()),
                ..input("One step")
            },
        )
        .unwrap();
        assert!(matches!(
            send_now(&mut conn, 1, draft.id, None),
            Err(DomainError::Rejected(ErrorCode::InvalidState, _))
        ));
        assert_eq!(sendable_in_one_step(&conn, &newsletter, &draft).unwrap(), 1);
        let choice = SendChoice {
            publish: Some(false),
            approve_draft: true,
            ..SendChoice::default()
        };
        send_with(&mut conn, 1, draft.id, &choice).unwrap();
        let sending = get(&conn, 1, draft.id).unwrap();
        assert_eq!(sending.status, Status::Sending);
        assert!(!publishes_when_sent(&conn, &newsletter, &sending).unwrap());
    }

    #[test]
    fn preview_applies_the_input_without_saving() {
        let mut conn = db();
        let stored = new(&mut conn, &input("Stored")).unwrap();
        let changed = IssueInput {
            content_markdown: Some("**new**".into()),
            articles: Some(vec![ArticleInput {
                title: "A".into(),
                url: "https://a.example/".into(),
                summarized_article: String::new(),
            }]),
            ..input("Changed")
        };
        let shown = preview(1, Some(&stored), check_changes(&changed).unwrap());
        assert_eq!((shown.id, shown.subject.as_str()), (stored.id, "Changed"));
        assert_eq!((shown.articles_count, shown.articles[0].position), (1, 1));
        assert_eq!(
            shown.content_html.as_deref(),
            Some("<p><strong>new</strong></p>")
        );
        assert_eq!(get(&conn, 1, stored.id).unwrap().subject, "Stored");
        assert!(check_new(&IssueInput::default()).is_err());
    }

    #[test]
    fn html_is_rendered_on_save_and_backfilled_for_older_issues() {
        let mut conn = db();
        let with_content = |markdown: &str| IssueInput {
            content_markdown: Some(markdown.into()),
            ..input("Rendered")
        };
        let issue = new(&mut conn, &with_content("*a*")).unwrap();
        assert_eq!(issue.content_html.as_deref(), Some("<p><em>a</em></p>"));
        let renamed = change(&mut conn, issue.id, &input("Renamed")).unwrap();
        assert_eq!(renamed.content_html, issue.content_html, "kept");
        let edited = change(&mut conn, issue.id, &with_content("**b**")).unwrap();
        assert_eq!(edited.body_html(), "<p><strong>b</strong></p>");
        let refused = change(&mut conn, issue.id, &with_content(&("* ".repeat(20) + "x")));
        assert!(matches!(refused, Err(DomainError::Invalid(..))));
        assert_eq!(get(&conn, 1, issue.id).unwrap(), edited, "nothing changed");

        // An issue from before HTML was stored shows its text until the backfill renders it.
        conn.execute(
            "UPDATE issues SET content_html = NULL, content_markdown = '# <old>' WHERE id = ?1",
            [issue.id],
        )
        .unwrap();
        assert_eq!(
            get(&conn, 1, issue.id).unwrap().body_html(),
            "<p># &lt;old&gt;</p>"
        );
        let (id, markdown) = next_unrendered(&conn, 0).unwrap().unwrap();
        assert!(!store_rendered(&conn, id, "# changed meanwhile", "<h1>x</h1>").unwrap());
        let html = content::render_saved(&markdown).unwrap().unwrap();
        assert!(store_rendered(&conn, id, &markdown, &html).unwrap());
        assert_eq!(
            get(&conn, 1, id).unwrap().body_html(),
            "<h1>&lt;old&gt;</h1>"
        );
        assert_eq!(next_unrendered(&conn, 0).unwrap(), None);
    }

    #[test]
    fn articles_replace_in_order_and_validate() {
        let mut conn = db();
        let with = |urls: &[&str]| IssueInput {
            articles: Some(
                urls.iter()
                    .map(|u| ArticleInput {
                        title: "T".into(),
                        url: u.to_string(),
                        summarized_article: "S".into(),
                    })
                    .collect(),
            ),
            ..input("Links")
        };
        let issue = new(
            &mut conn,
            &with(&["https://a.example/1", "https://b.example/2"]),
        )
        .unwrap();
        assert_eq!(
            issue
                .articles
                .iter()
                .map(|a| a.position)
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(new(&mut conn, &with(&["javascript:alert(1)"])).is_err());
        let updated = change(
            &mut conn,
            issue.id,
            &IssueInput {
                articles: Some(vec![]),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(updated.articles_count, 0);
    }

    /// A sent issue with one subscriber (`r<n>@x.co`) per entry of `outcomes`, whose
    /// deliveries ended as those say, in order (`None`: unconfirmed), through the send's own
    /// steps; returns the issue's id.
    fn sent_issue(conn: &mut Connection, outcomes: &[Option<Outcome>]) -> i64 {
        use crate::domain::delivery::sending::{
            Next, finish_or_wait, mark_sending, prepare, record_outcomes,
        };
        let now = Timestamp::now();
        for n in 0..outcomes.len() {
            conn.execute(
                "INSERT INTO subscribers (newsletter_id, email, created_at) VALUES (1, ?1, ?2)",
                (format!("r{n}@x.co"), &now),
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO issues (newsletter_id, subject, content_markdown, status, path, created_at, updated_at)
             VALUES (1, 'S', 'x', 'sending', 's', ?1, ?1)",
            [&now],
        )
        .unwrap();
        let id = conn.last_insert_rowid();
        prepare(conn, id).unwrap().expect("a sending issue");
        let batch = sending::due_batch(conn, id, 0, 10).unwrap();
        let ids: Vec<i64> = batch.iter().map(|r| r.delivery_id).collect();
        mark_sending(conn, &ids).unwrap();
        let done: Vec<(i64, Outcome)> = ids
            .iter()
            .zip(outcomes)
            .map(|(id, o)| {
                (
                    *id,
                    o.clone()
                        .unwrap_or(Outcome::Unconfirmed("timed out".into())),
                )
            })
            .collect();
        record_outcomes(conn, &done, jiff::SignedDuration::from_mins(1)).unwrap();
        assert_eq!(finish_or_wait(conn, id).unwrap(), Next::Finished);
        id
    }

    fn delivery_of(conn: &Connection, email: &str) -> (String, Option<String>, i64) {
        conn.query_row(
            "SELECT status, resent_at, attempts FROM deliveries WHERE email = ?1",
            [email],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
    }

    fn count(conn: &Connection, sql: &str) -> i64 {
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    use crate::domain::delivery::sending::{self, Outcome, resend_unconfirmed};

    #[test]
    fn unconfirmed_messages_go_out_again_once_at_the_owners_choice() {
        use crate::domain::testing::counter_mismatches;
        let mut conn = db();
        crate::domain::testing::listen(&mut conn, 1, &["issue.sent"]);
        let draft = new(&mut conn, &input("Not sent")).unwrap();
        assert!(matches!(
            resend_unconfirmed(&mut conn, 1, draft.id),
            Err(DomainError::Rejected(ErrorCode::InvalidState, _))
        ));
        assert!(matches!(
            resend_unconfirmed(&mut conn, 1, 999),
            Err(DomainError::NotFound(_))
        ));
        // r0 arrived; r1..r4 unconfirmed: r3's copy was opened (it arrived), r4 has left.
        let id = sent_issue(&mut conn, &[Some(Outcome::Sent), None, None, None, None]);
        conn.execute_batch(
            "UPDATE deliveries SET opened_at = '2026-01-02T00:00:00.000Z' WHERE email = 'r3@x.co';
             UPDATE subscribers SET status = 'unsubscribed' WHERE email = 'r4@x.co';",
        )
        .unwrap();
        assert_eq!(sending::resendable(&conn, id).unwrap(), 2);
        let jobs = "SELECT count(*) FROM jobs WHERE kind = 'send_issue'";
        assert_eq!(count(&conn, jobs), 0);

        let done = resend_unconfirmed(&mut conn, 1, id).unwrap();
        assert_eq!((done.resent, done.issue.status), (2, Status::Sent));
        assert!(
            done.issue
                .last_error
                .as_deref()
                .unwrap()
                .contains("2 message(s) to go"),
            "{:?}",
            done.issue.last_error
        );
        assert_eq!(count(&conn, jobs), 1, "the send job is queued with it");
        assert!(sending::resending(&conn, id).unwrap());
        let (status, resent_at, attempts) = delivery_of(&conn, "r1@x.co");
        assert_eq!(
            (status.as_str(), resent_at.is_some(), attempts),
            ("pending", true, 0)
        );
        assert_eq!(delivery_of(&conn, "r3@x.co").0, "unconfirmed");
        assert_eq!(delivery_of(&conn, "r4@x.co").0, "unconfirmed");
        let p = sending::progress(&conn, id).unwrap();
        assert_eq!((p.sent, p.unconfirmed, p.remaining), (1, 2, 2));
        assert_eq!(counter_mismatches(&conn), Vec::<String>::new());

        // Asking again changes nothing and queues nothing.
        assert_eq!(resend_unconfirmed(&mut conn, 1, id).unwrap().resent, 0);
        assert_eq!(count(&conn, jobs), 1);
        // Someone back while the resend is under way joins it: its job takes them too.
        conn.execute(
            "UPDATE subscribers SET status = 'active' WHERE email = 'r4@x.co'",
            [],
        )
        .unwrap();
        assert_eq!(resend_unconfirmed(&mut conn, 1, id).unwrap().resent, 1);
        assert_eq!(count(&conn, jobs), 1, "one send job per issue");

        // The send job takes the sent issue: r1 and r4 go out, r2 is in flight at a kill.
        let plan = sending::prepare(&mut conn, id).unwrap().expect("a resend");
        assert_eq!(plan.issue.status, Status::Sent);
        let due: Vec<i64> = sending::due_batch(&conn, id, 0, 10)
            .unwrap()
            .iter()
            .map(|r| r.delivery_id)
            .collect();
        assert_eq!(due.len(), 3);
        assert!(sending::still_sending(&conn, id).unwrap());
        sending::mark_sending(&conn, &due).unwrap();
        sending::record_outcomes(
            &conn,
            &[(due[0], Outcome::Sent), (due[2], Outcome::Sent)],
            jiff::SignedDuration::from_mins(1),
        )
        .unwrap();
        // The restart settles the one in flight: unconfirmed, and never offered again.
        sending::prepare(&mut conn, id).unwrap().expect("a resend");
        assert_eq!(delivery_of(&conn, "r2@x.co").0, "unconfirmed");
        assert_eq!(sending::resendable(&conn, id).unwrap(), 0);
        assert_eq!(
            sending::finish_or_wait(&mut conn, id).unwrap(),
            sending::Next::Finished
        );
        let issue = get(&conn, 1, id).unwrap();
        assert_eq!(issue.status, Status::Sent);
        assert_eq!(
            issue.last_error.as_deref(),
            Some(
                "Delivered 3 of 5 messages: 2 unconfirmed (the relay did not answer after the message; not sent again)."
            )
        );
        assert_eq!(
            count(
                &conn,
                "SELECT count(*) FROM events WHERE kind = 'issue.sent'"
            ),
            1,
            "no second issue.sent"
        );
        assert!(
            !sending::resending(&conn, id).unwrap(),
            "the job found it done"
        );
        assert!(sending::prepare(&mut conn, id).unwrap().is_none());
        assert_eq!(resend_unconfirmed(&mut conn, 1, id).unwrap().resent, 0);
        assert_eq!(counter_mismatches(&conn), Vec::<String>::new());
    }

    #[test]
    fn a_resend_the_relay_never_takes_leaves_them_unconfirmed_to_ask_again() {
        let mut conn = db();
        let id = sent_issue(&mut conn, &[Some(Outcome::Sent), None, None]);
        assert_eq!(resend_unconfirmed(&mut conn, 1, id).unwrap().resent, 2);
        let policy = sending::OutagePolicy {
            retry_base: jiff::SignedDuration::from_secs(5),
            give_up_after: jiff::SignedDuration::from_hours(1),
        };
        let long_ago = crate::clock::now() - jiff::SignedDuration::from_hours(2);
        let next = sending::relay_unreachable(&mut conn, id, long_ago, "refused", &policy).unwrap();
        assert_eq!(next, sending::Next::GaveUp);
        let issue = get(&conn, 1, id).unwrap();
        assert_eq!(issue.status, Status::Sent);
        let note = issue.last_error.unwrap();
        assert!(
            note.starts_with("Sending again stopped")
                && note.contains("2 message(s) were not sent again"),
            "{note}"
        );
        assert_eq!(delivery_of(&conn, "r1@x.co").0, "unconfirmed");
        assert_eq!(delivery_of(&conn, "r1@x.co").1, None, "none went out again");
        assert_eq!(sending::resendable(&conn, id).unwrap(), 2);
        assert!(!sending::resending(&conn, id).unwrap());
        assert!(sending::prepare(&mut conn, id).unwrap().is_none());
        assert_eq!(
            crate::domain::testing::counter_mismatches(&conn),
            Vec::<String>::new()
        );
        conn.execute("UPDATE newsletters SET status = 'paused'", [])
            .unwrap();
        assert!(matches!(
            resend_unconfirmed(&mut conn, 1, id),
            Err(DomainError::Rejected(ErrorCode::NewsletterPaused, _))
        ));
        conn.execute(
            "UPDATE newsletters SET status = 'active', tier = 'free'",
            [],
        )
        .unwrap();
        assert!(matches!(
            resend_unconfirmed(&mut conn, 1, id),
            Err(DomainError::Rejected(ErrorCode::PaymentRequired, _))
        ));
    }
}
