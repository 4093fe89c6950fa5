//! The issue editor: subject, Markdown, status and send time, and articles that are added,
//! reordered and removed with plain form fields (a position number per row, a remove box, an
//! empty row to fill). Its Preview button renders the unsaved issue below the form.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::live_preview;
use super::pages::preview_block;
use super::test_send::{self, AskedFrom};
use super::{Posted, issue_url, list_url, problems, render, typed_time, viewed};
use crate::clock::{self, Timestamp};
use crate::domain::issues::{self, ArticleInput, Issue, IssueInput, Status, Visibility};
use crate::domain::newsletters::Newsletter;
use crate::domain::values::time_zones::{TimeZoneName, local_input};
use crate::domain::{DomainResult, FieldErrors};
use crate::web::layout::{Section, csrf_field, errors, newsletter_page};
use crate::web::newsletters::{owned, owned_post};
use crate::web::time_zones::shown;
use crate::web::{Ctx, FormData, State, WebError, WebResult, see_other};

const TITLE: &str = "issue[articles][][title]";
const URL: &str = "issue[articles][][url]";
const SUMMARY: &str = "issue[articles][][summarized_article]";
const POSITION: &str = "issue[articles][][position]";
/// Holds the row numbers (0-based, in page order) whose remove box is ticked.
const REMOVE: &str = "issue[articles_remove][]";

/// One article row as typed.
#[derive(Debug, Clone, Default, PartialEq)]
struct ArticleRow {
    position: String,
    title: String,
    url: String,
    summarized_article: String,
}

impl ArticleRow {
    fn is_blank(&self) -> bool {
        [&self.title, &self.url, &self.summarized_article]
            .iter()
            .all(|v| v.trim().is_empty())
    }
}

/// The editor's choices of who reads an issue on the site.
const VISIBILITIES: &[(&str, &str)] = &[
    ("public", "Everyone (public)"),
    ("members", "Signed-in readers (members)"),
    ("paid", "Paid members only"),
];

/// The editor's fields as typed, kept when the form is shown again.
#[derive(Debug, Clone, PartialEq)]
struct IssueForm {
    subject: String,
    content_markdown: String,
    status: String,
    /// A datetime-local value, UTC.
    scheduled_for: String,
    /// The picture of its link previews; empty: the content's first image.
    social_image_url: String,
    /// `public`, `members` or `paid`.
    visibility: String,
    /// For a paid issue: `paid` mails paid members only, `everyone` everyone.
    mailed_to: String,
    articles: Vec<ArticleRow>,
    /// Empty rows to offer after the articles.
    empty_rows: usize,
}

impl IssueForm {
    fn blank() -> Self {
        IssueForm {
            subject: String::new(),
            content_markdown: String::new(),
            status: Status::Draft.as_str().to_string(),
            scheduled_for: String::new(),
            social_image_url: String::new(),
            visibility: Visibility::Public.as_str().to_string(),
            mailed_to: "everyone".to_string(),
            articles: Vec::new(),
            empty_rows: 1,
        }
    }

    fn from_issue(issue: &Issue, zone: &TimeZoneName) -> Self {
        IssueForm {
            subject: issue.subject.clone(),
            content_markdown: issue.content_markdown.clone(),
            status: issue.status.as_str().to_string(),
            scheduled_for: issue
                .scheduled_for
                .map(|at| local_input(at, zone))
                .unwrap_or_default(),
            social_image_url: issue.social_image_url.clone().unwrap_or_default(),
            visibility: issue.visibility.as_str().to_string(),
            mailed_to: if issue.paid_members_only {
                "paid"
            } else {
                "everyone"
            }
            .to_string(),
            articles: issue
                .articles
                .iter()
                .map(|a| ArticleRow {
                    position: a.position.to_string(),
                    title: a.title.clone(),
                    url: a.url.clone(),
                    summarized_article: a.summarized_article.clone(),
                })
                .collect(),
            empty_rows: 1,
        }
    }

    /// Reads a posted editor. Removed and empty rows are dropped and the others put in the
    /// order of their position numbers (a row without one goes last), then numbered 1, 2, ...
    /// as the domain will store them, so its "article 2" is the second row shown again.
    fn read(form: &FormData) -> (Self, FieldErrors) {
        let columns = [TITLE, URL, SUMMARY, POSITION].map(|name| form.all(name));
        let removed: Vec<usize> = form
            .all(REMOVE)
            .iter()
            .filter_map(|v| v.parse().ok())
            .collect();
        let cell =
            |column: usize, row: usize| columns[column].get(row).cloned().unwrap_or_default();
        let rows = columns.iter().map(Vec::len).max().unwrap_or(0);
        let mut problems = FieldErrors::new();
        let (mut kept, mut blank) = (Vec::new(), 0);
        for i in 0..rows {
            let row = ArticleRow {
                title: cell(0, i),
                url: cell(1, i),
                summarized_article: cell(2, i),
                position: cell(3, i).trim().to_string(),
            };
            if removed.contains(&i) {
                continue;
            }
            if row.is_blank() {
                blank += 1;
                continue;
            }
            let order = match row.position.as_str() {
                "" => i64::MAX,
                text => text.parse::<i64>().unwrap_or_else(|_| {
                    problems.add(
                        "base",
                        format!(
                            "Article row {} position must be a whole number",
                            kept.len() + 1
                        ),
                    );
                    i64::MAX
                }),
            };
            kept.push((order, i, row));
        }
        // With a bad number the rows stay as typed, for the owner to correct.
        if problems.is_empty() {
            kept.sort_by_key(|(order, i, _)| (*order, *i));
            for (n, (_, _, row)) in kept.iter_mut().enumerate() {
                row.position = (n + 1).to_string();
            }
        }
        let articles = kept.into_iter().map(|(_, _, row)| row).collect();
        let read = IssueForm {
            subject: form.get("issue[subject]").to_string(),
            content_markdown: form.get("issue[content_markdown]").to_string(),
            status: form.get("issue[status]").trim().to_string(),
            scheduled_for: form.get("issue[scheduled_for]").trim().to_string(),
            social_image_url: form.get("issue[social_image_url]").to_string(),
            visibility: form.get("issue[visibility]").trim().to_string(),
            mailed_to: form.get("issue[mailed_to]").trim().to_string(),
            articles,
            empty_rows: blank.max(1),
        };
        (read, problems)
    }

    /// What the issue rules take; the send time typed on the account's clocks (`zone`).
    fn input(&self, zone: &TimeZoneName) -> DomainResult<IssueInput> {
        Ok(IssueInput {
            subject: Some(self.subject.clone()),
            content_markdown: Some(self.content_markdown.clone()),
            status: (!self.status.is_empty()).then(|| self.status.clone()),
            scheduled_for: Some(match self.scheduled_for.as_str() {
                "" => None,
                typed => Some(typed_time(typed, zone)?),
            }),
            articles: Some(
                self.articles
                    .iter()
                    .map(|a| ArticleInput {
                        title: a.title.clone(),
                        url: a.url.clone(),
                        summarized_article: a.summarized_article.clone(),
                    })
                    .collect(),
            ),
            audience: None,
            published: None,
            social_image_url: Some(self.social_image_url.clone()),
            visibility: (!self.visibility.is_empty()).then(|| self.visibility.clone()),
            paid_members_only: match self.mailed_to.as_str() {
                "paid" => Some(true),
                "everyone" => Some(false),
                _ => None,
            },
        })
    }
}

/// The domain names article fields by their index (`articles[1].url`); the form says
/// "Article 2 URL", matching the rows as shown again.
pub(super) fn for_people(found: FieldErrors) -> FieldErrors {
    let mut out = FieldErrors::new();
    for (field, messages) in found.by_field() {
        let article = field.strip_prefix("articles[").and_then(|rest| {
            let (index, part) = rest.split_once("].")?;
            let label = match part {
                "url" => "URL",
                "summarized_article" => "summary",
                other => other,
            };
            Some(format!(
                "Article {} {label}",
                index.parse::<usize>().ok()? + 1
            ))
        });
        for message in messages {
            match (&article, field.as_str()) {
                (Some(label), _) => out.add("base", format!("{label} {message}")),
                (None, "scheduled_for") => out.add("send_time", message),
                (None, other) => out.add(other, message),
            }
        }
    }
    out
}

fn article_row(index: usize, row: &ArticleRow) -> Markup {
    html! {
        div.article-row {
            label.position { "Position" input type="number" name=(POSITION) min="1" value=(row.position) inputmode="numeric"; }
            label { "Title" input type="text" name=(TITLE) value=(row.title) maxlength="300"; }
            label { "URL" input type="url" name=(URL) value=(row.url) placeholder="https://"; }
            label.wide { "Summary" textarea name=(SUMMARY) rows="2" { (row.summarized_article) } }
            @if !row.is_blank() {
                label.check { input type="checkbox" name=(REMOVE) value=(index); "Remove" }
            }
        }
    }
}

fn form_page(
    ctx: &Ctx,
    n: &Newsletter,
    issue: Option<&Issue>,
    form: &IssueForm,
    found: &FieldErrors,
    preview: Option<Markup>,
) -> Markup {
    let (title, action) = match issue {
        Some(i) if i.status == Status::Sent => (
            format!("Edit the web copy of “{}”", i.subject),
            issue_url(n.id, i.id),
        ),
        Some(i) => (format!("Edit “{}”", i.subject), issue_url(n.id, i.id)),
        None => ("New issue".to_string(), list_url(n.id)),
    };
    // A sent issue's page shows its content only: the subject and articles went out by mail.
    let sent = issue.is_some_and(|i| i.status == Status::Sent);
    let next_slot = n
        .frequency
        .and_then(|f| issues::next_slot(f, clock::now(), &n.time_zone))
        .map(Timestamp::from);
    let zone = ctx.zone();
    let blank = ArticleRow::default();
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        &title,
        html! {
            p { a href=(match issue { Some(i) => issue_url(n.id, i.id), None => list_url(n.id) }) { "← Back" } }
            h1 { (title) }
            (errors(found))
            @if sent {
                p.notice #sent-edit-note {
                    "This issue was sent. Your changes update its page on the site, which will say “Updated” with the date; "
                    "the e-mail that went out stays as it was. The subject and the articles cannot change."
                }
            }
            div.editor-split {
            form.stack.issue-form method="post" action=(action) {
                (csrf_field(ctx))
                @if issue.is_some() { input type="hidden" name="_method" value="patch"; }
                @if sent {
                    p { "Subject: " strong { (form.subject) } }
                } @else {
                    label { "Subject" input type="text" name="issue[subject]" value=(form.subject) required maxlength="200"; }
                }
                label {
                    "Content (Markdown)"
                    textarea.markdown name="issue[content_markdown]" rows="14" spellcheck="true" { (form.content_markdown) }
                }
                p.muted { "GitHub-flavoured Markdown: **bold**, _italic_, [links](https://…), lists, tables. HTML you type is shown as text. Merge tags put each reader's own details in their copy: " code { "{{ name | default: \"friend\" }}" } ", " code { "{{ email }}" } " or a custom field's name." }
                label {
                    "Picture for link previews (optional; the first image of the content when empty)"
                    input type="url" name="issue[social_image_url]" value=(form.social_image_url) maxlength=(issues::URL_MAX) placeholder="https://…" autocomplete="off";
                }
                label {
                    "Who can read it on the site"
                    select name="issue[visibility]" {
                        @for (value, text) in VISIBILITIES {
                            option value=(value) selected[form.visibility == *value] { (text) }
                        }
                    }
                }
                p.muted { "Members and paid issues show their excerpt and a sign-in or upgrade box to everyone else; their full text is never in the archive, the feed or link previews." }
                @if !sent {
                    label {
                        "Who gets a paid issue by e-mail"
                        select name="issue[mailed_to]" {
                            option value="everyone" selected[form.mailed_to != "paid"] { "Everyone: free members get the excerpt and an upgrade link" }
                            option value="paid" selected[form.mailed_to == "paid"] { "Paid members only" }
                        }
                    }
                }
                @if !sent {
                fieldset.articles {
                    legend { "Articles" }
                    p.muted { "Articles follow the content, in the order of their position numbers. Fill the empty row to add one; tick Remove to drop one." }
                    @for (i, row) in form.articles.iter().enumerate() { (article_row(i, row)) }
                    @for k in 0..form.empty_rows { (article_row(form.articles.len() + k, &blank)) }
                    button.secondary type="submit" name="commit" value="add_article" formnovalidate { "Add another article row" }
                }
                fieldset {
                    legend { "Status and send time" }
                    label {
                        "Status"
                        select name="issue[status]" {
                            @for s in [Status::Draft, Status::Approved, Status::Scheduled] {
                                option value=(s.as_str()) selected[form.status == s.as_str()] { (s.as_str()) }
                            }
                        }
                    }
                    label { "Send time (" (zone) ")" input type="datetime-local" name="issue[scheduled_for]" value=(form.scheduled_for); }
                    p.muted {
                        "All times are in " (zone) ". A scheduled issue needs a time in the future"
                        @if let Some(slot) = &next_slot { "; left empty, it takes the next slot of your frequency, " strong { (shown(*slot, &zone)) } }
                        "."
                    }
                }
                }
                div.buttons {
                    button type="submit" name="commit" value="save" { "Save" }
                    button.secondary type="submit" name="commit" value="preview" formnovalidate { "Preview" }
                }
            }
            (live_preview::panel(n.id, issue.map(|i| i.id)))
            }
            (super::media::editor_upload_form(ctx, n, issue))
            @if let Some(shown) = preview {
                section id="preview" {
                    h2 { "Preview (not saved yet)" }
                    (shown)
                }
            }
            @if let Some(i) = issue { (test_send::form(ctx, n, i, "", AskedFrom::Editor)) }
        },
    )
}

/// The editor of `issue` as saved (a new one when `None`), with `found` above it: where an
/// image upload sent from the editor without JavaScript comes back when it is refused.
pub(super) fn saved_editor(
    ctx: &Ctx,
    n: &Newsletter,
    issue: Option<&Issue>,
    found: &FieldErrors,
    status: StatusCode,
) -> WebResult {
    let form = match issue {
        Some(i) => IssueForm::from_issue(i, &ctx.zone()),
        None => IssueForm::blank(),
    };
    render(status, form_page(ctx, n, issue, &form, found, None))
}

#[handler]
pub async fn new_form(
    req: &Request,
    Path(id): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    render(
        StatusCode::OK,
        form_page(
            &ctx,
            &n,
            None,
            &IssueForm::blank(),
            &FieldErrors::new(),
            None,
        ),
    )
}

#[handler]
pub async fn edit_form(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (ctx, n, issue) = viewed(req, state, &id, &issue_id).await?;
    if !issue.status.is_editable() && issue.status != Status::Sent {
        ctx.notice_next(
            req,
            &format!("A {} issue is read-only.", issue.status.as_str()),
        );
        return see_other(&issue_url(n.id, issue.id));
    }
    let form = IssueForm::from_issue(&issue, &ctx.zone());
    // Tags that name no field show before anything is sent (a send refuses them).
    let (nid, shown) = (n.id, issue.clone());
    let problem = state
        .db
        .run(move |conn| issues::merge_tag_problem(conn, nid, &shown))
        .await?;
    let mut found = FieldErrors::new();
    if let Some(problem) = problem {
        found.add("content_markdown", problem);
    }
    render(
        StatusCode::OK,
        form_page(&ctx, &n, Some(&issue), &form, &found, None),
    )
}

/// What a posted editor asks for.
enum Commit {
    Save,
    Preview,
    AddArticle,
}

/// Shared by create and update: shows the form again (more rows, a preview, or messages), or
/// saves through `save` and goes to the issue's page.
async fn submit(
    req: &Request,
    state: &State,
    ctx: &Ctx,
    n: &Newsletter,
    current: Option<Issue>,
    form: &FormData,
) -> WebResult {
    let (mut typed, found) = IssueForm::read(form);
    // A sent issue's editor posts its content only; a subject or status posted anyway goes to
    // the domain, which refuses a change by name.
    let (posted_subject, posted_status) = (typed.subject.clone(), typed.status.clone());
    if let Some(issue) = current.as_ref().filter(|i| i.status == Status::Sent) {
        typed.subject = issue.subject.clone();
    }
    let commit = match form.get("commit") {
        "preview" => Commit::Preview,
        "add_article" => Commit::AddArticle,
        _ => Commit::Save,
    };
    let again = |status, found: &FieldErrors, typed: &IssueForm, preview: Option<Markup>| {
        render(
            status,
            form_page(ctx, n, current.as_ref(), typed, found, preview),
        )
    };
    if !found.is_empty() {
        return again(StatusCode::UNPROCESSABLE_ENTITY, &found, &typed, None);
    }
    let input = match &current {
        // The web copy of a sent issue: its content is all the form holds.
        Some(issue) if issue.status == Status::Sent => Ok(IssueInput {
            content_markdown: Some(typed.content_markdown.clone()),
            subject: (!posted_subject.is_empty()).then_some(posted_subject),
            status: (!posted_status.is_empty()).then_some(posted_status),
            ..IssueInput::default()
        }),
        _ => typed.input(&ctx.zone()),
    };
    let creating = current.is_none();
    // Checking renders the content (up to the render budget): on a blocking thread.
    let check = move || {
        let input = input?;
        if creating {
            issues::check_new(&input)
        } else {
            issues::check_changes(&input)
        }
    };
    match commit {
        Commit::AddArticle => {
            typed.empty_rows += 1;
            again(StatusCode::OK, &found, &typed, None)
        }
        Commit::Preview => {
            let (state, n, current) = (state.clone(), n.clone(), current.clone());
            let shown = tokio::task::spawn_blocking(move || {
                let shown = issues::preview(n.id, current.as_ref(), check()?);
                let warning = super::media::http_image_warning(&state, &n, &shown.body_html());
                let block = preview_block(&state, &n, &shown)?;
                Ok::<_, crate::domain::DomainError>(html! {
                    @if let Some(warning) = warning { p.warning role="alert" { (warning) } }
                    (block)
                })
            })
            .await
            .map_err(|e| WebError::Internal(e.to_string()))?;
            match shown {
                Ok(block) => again(StatusCode::OK, &found, &typed, Some(block)),
                Err(e) => again(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &for_people(problems(e)?),
                    &typed,
                    None,
                ),
            }
        }
        Commit::Save => {
            let (nid, existing) = (n.id, current.as_ref().map(|i| i.id));
            let saved = state
                .db
                .run_after(check, move |conn, checked| match existing {
                    Some(id) => issues::update(conn, nid, id, &checked),
                    None => issues::create(conn, nid, &checked),
                })
                .await;
            match saved {
                Ok(issue) => {
                    let done = if existing.is_some() {
                        "Saved."
                    } else {
                        "Issue created."
                    };
                    match super::media::http_image_warning(state, n, &issue.body_html()) {
                        Some(warning) => ctx.notice_next(req, &format!("{done} {warning}")),
                        None => ctx.notice_next(req, done),
                    }
                    see_other(&issue_url(nid, issue.id))
                }
                Err(e) => again(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &for_people(problems(e)?),
                    &typed,
                    None,
                ),
            }
        }
    }
}

/// `POST /newsletters/:id/issues`: creates an issue from the editor.
#[handler]
pub async fn create(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    submit(req, state, &ctx, &n, None, &form).await
}

/// `PATCH /newsletters/:id/issues/:issue_id` (through [`super::change`]).
pub(super) async fn update(req: &Request, state: &State, p: Posted) -> WebResult {
    submit(req, state, &p.ctx, &p.n, Some(p.issue), &p.form).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> FormData {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        FormData::parse(body.as_bytes())
    }

    fn row(position: &str, title: &str) -> [(&'static str, String); 4] {
        [
            (POSITION, position.to_string()),
            (TITLE, title.to_string()),
            (URL, format!("https://example.com/{title}")),
            (SUMMARY, String::new()),
        ]
    }

    #[test]
    fn rows_are_ordered_removed_and_blank_ones_dropped() {
        let mut pairs: Vec<(&str, String)> = vec![("issue[subject]", "S".into())];
        pairs.extend(row("2", "first-typed"));
        pairs.extend(row("1", "second-typed"));
        pairs.extend(row("3", "removed"));
        pairs.extend(row("", "unnumbered"));
        pairs.extend([
            (POSITION, String::new()),
            (TITLE, String::new()),
            (URL, String::new()),
            (SUMMARY, String::new()),
        ]);
        pairs.push((REMOVE, "2".into()));
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (read, found) = IssueForm::read(&form(&borrowed));
        assert!(found.is_empty());
        let titles: Vec<&str> = read.articles.iter().map(|a| a.title.as_str()).collect();
        assert_eq!(titles, ["second-typed", "first-typed", "unnumbered"]);
        let positions: Vec<&str> = read.articles.iter().map(|a| a.position.as_str()).collect();
        assert_eq!(positions, ["1", "2", "3"]);
        assert_eq!(read.empty_rows, 1);
        assert_eq!(
            read.input(&TimeZoneName::utc())
                .unwrap()
                .articles
                .unwrap()
                .len(),
            3
        );
    }

    #[test]
    fn a_position_that_is_not_a_number_is_a_message() {
        let pairs: Vec<(&str, String)> = row("first", "x").into();
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (_, found) = IssueForm::read(&form(&borrowed));
        assert_eq!(
            found.sentences(),
            ["Article row 1 position must be a whole number"]
        );
    }

    #[test]
    fn article_errors_name_the_row() {
        let mut found = FieldErrors::new();
        found.add("articles[1].url", "must be an absolute http(s) URL");
        found.add("subject", "can't be blank");
        assert_eq!(
            for_people(found).sentences(),
            [
                "Article 2 URL must be an absolute http(s) URL",
                "Subject can't be blank"
            ]
        );
    }
}
