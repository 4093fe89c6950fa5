//! Subscribers in the dashboard: a paged list with search and filters, add, edit (name,
//! status), tags, delete with confirmation, CSV export and one subscriber's data as JSON (a
//! data request). The CSV import's pages (upload, preview, progress and result) are in
//! `import.rs` beside this file.

mod import;
mod received;

use maud::{Markup, html};
use poem::web::{Data, Path, Query};
use poem::{Body, Request, Response, handler, http::StatusCode};
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use super::layout::{
    Confirmation, Section, confirmation_page, csrf_field, errors, field, newsletter_page,
    table_wrap,
};
use super::newsletters::{owned, owned_post, parse_id};
use super::time_zones::shown;
use super::{Ctx, FormData, State, WebError, WebResult, invalid_fields, render, see_other};
use crate::domain::content::merge_tags::value_text;
use crate::domain::newsletters::Newsletter;
use crate::domain::reports::received::ReceivedPage;
use crate::domain::subscribers::custom_fields::{CustomField, FieldType, TEXT_MAX};
use crate::domain::subscribers::memberships;
use crate::domain::subscribers::origin::{Origin, Source};
use crate::domain::subscribers::personal_data;
use crate::domain::subscribers::{self, Changes, Filter, NewSubscriber, Status, Subscriber};
use crate::domain::values::pagination::Page;
use crate::domain::values::time_zones::local_to_rfc3339;
use crate::domain::{DomainError, FieldErrors};
use crate::web::fields::fields_of;

pub use import::{discard_import, import_form, refused_csv, show_import, start_import, upload_csv};

/// Subscribers per page of the list.
const PER_PAGE: &str = "50";

/// The subscribers list's URL, under which the import's pages live too.
fn base(n: &Newsletter) -> String {
    format!("/newsletters/{}/subscribers", n.id)
}

/// The list's query string.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ListParams {
    /// Part of the e-mail address.
    q: Option<String>,
    status: Option<String>,
    tag: Option<String>,
    page: Option<String>,
}

impl ListParams {
    /// The list's address with these filters on `page`.
    fn url(&self, n: &Newsletter, page: u32) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in [("q", &self.q), ("status", &self.status), ("tag", &self.tag)] {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                query.append_pair(key, v);
            }
        }
        if page > 1 {
            query.append_pair("page", &page.to_string());
        }
        let query = query.finish();
        if query.is_empty() {
            base(n)
        } else {
            format!("{}?{query}", base(n))
        }
    }
}

/// What the add form carries.
#[derive(Debug, Default, Clone)]
struct AddForm {
    email: String,
    name: String,
    tags: String,
}

impl AddForm {
    fn read(form: &FormData) -> Self {
        AddForm {
            email: form.get("subscriber[email]").to_string(),
            name: form.get("subscriber[name]").to_string(),
            tags: form.get("subscriber[tags]").to_string(),
        }
    }

    /// Tags in the form are separated by commas.
    fn to_new(&self) -> NewSubscriber {
        NewSubscriber {
            email: self.email.clone(),
            name: Some(self.name.clone()),
            tags: self
                .tags
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
            subscribed_at: None,
        }
    }
}

/// One page of the list, or why the filters were refused.
struct Listing {
    rows: Vec<Subscriber>,
    page: u32,
    has_more: bool,
    active: i64,
    tags: Vec<(String, i64)>,
    problems: FieldErrors,
}

async fn load_listing(
    state: &State,
    n: &Newsletter,
    params: &ListParams,
) -> Result<Listing, WebError> {
    let (nid, params) = (n.id, params.clone());
    state
        .db
        .run(move |conn| {
            let active = subscribers::active_count(conn, nid)?;
            let tags = subscribers::tag_counts(conn, nid)?;
            let filter = Filter {
                status: params.status.clone(),
                tag: params.tag.clone(),
                search: params.q.clone(),
            };
            let listed = Page::parse(params.page.as_deref(), Some(PER_PAGE))
                .and_then(|page| subscribers::list(conn, nid, page, None, &filter));
            let (rows, has_more, page, problems) = match listed {
                Ok(listed) => (
                    listed.rows,
                    listed.has_more,
                    listed.page,
                    FieldErrors::new(),
                ),
                Err(DomainError::Invalid(_, problems)) => (Vec::new(), false, 1, problems),
                Err(other) => return Err(other),
            };
            Ok::<_, DomainError>(Listing {
                rows,
                page,
                has_more,
                active,
                tags,
                problems,
            })
        })
        .await
        .map_err(WebError::from)
}

fn list_page(
    ctx: &Ctx,
    n: &Newsletter,
    params: &ListParams,
    listing: &Listing,
    add: &AddForm,
    add_problems: &FieldErrors,
) -> Markup {
    let url = base(n);
    let chosen = |value: &Option<String>, option: &str| value.as_deref() == Some(option);
    newsletter_page(
        ctx,
        n,
        Section::Subscribers,
        "Subscribers",
        html! {
            h1 { "Subscribers" }
            p.muted {
                (listing.active) " active · "
                a href={ (url) "/import" } { "Import CSV" } " · "
                a href={ (url) "/export.csv" } download { "Export CSV" } " · "
                a href={ "/newsletters/" (n.id) "/fields" } { "Custom fields" } " · "
                a href={ "/newsletters/" (n.id) "/topics" } { "Topics" }
            }
            form.filters method="get" action=(url) role="search" {
                label { "E-mail contains"
                    input type="search" name="q" value=(params.q.as_deref().unwrap_or("")) placeholder="part of an address";
                }
                label { "Status"
                    select name="status" {
                        option value="" { "any" }
                        @for s in Status::ALL {
                            option value=(s) selected[chosen(&params.status, s.as_str())] { (s) }
                        }
                    }
                }
                label { "Tag"
                    select name="tag" {
                        option value="" { "any" }
                        @for (tag, count) in &listing.tags {
                            option value=(tag) selected[chosen(&params.tag, tag)] { (tag) " (" (count) " active)" }
                        }
                    }
                }
                button type="submit" { "Filter" }
            }
            (errors(&listing.problems))
            @if listing.rows.is_empty() {
                p.empty { @if listing.problems.is_empty() { "No subscribers match." } }
            } @else {
                (table_wrap("Subscribers", html! { table.subscribers {
                    thead { tr { th { "E-mail" } th { "Name" } th { "Status" } th { "Tags" } th { "Subscribed" } } }
                    tbody {
                        @for s in &listing.rows {
                            tr {
                                td { a href={ (url) "/" (s.id) } { (s.email) } }
                                td { (s.name.as_deref().unwrap_or("")) }
                                td { span class={ "status " (s.status.as_str()) } { (s.status.as_str()) } }
                                td { @for t in &s.tags { span.tag { (t) } " " } }
                                td { (shown(s.subscribed_at, &ctx.zone())) }
                            }
                        }
                    }
                } }))
            }
            nav.pager aria-label="Pages" {
                @if listing.page > 1 { a rel="prev" href=(params.url(n, listing.page - 1)) { "← Newer" } }
                span.muted { "Page " (listing.page) }
                @if listing.has_more { a rel="next" href=(params.url(n, listing.page + 1)) { "Older →" } }
            }
            @if n.ensure_writable().is_ok() {
                h2 id="add" { "Add a subscriber" }
                (errors(add_problems))
                form.stack method="post" action=(url) {
                    (csrf_field(ctx))
                    (field("E-mail address", "email", "subscriber[email]", &add.email, "off", true))
                    (field("Name (optional)", "text", "subscriber[name]", &add.name, "off", false))
                    (field("Tags (optional, separated by commas)", "text", "subscriber[tags]", &add.tags, "off", false))
                    button type="submit" { "Add subscriber" }
                }
            } @else {
                p.muted { "This newsletter is cancelled: its subscribers can be read and exported, not changed." }
            }
        },
    )
}

#[handler]
pub async fn index(
    req: &Request,
    Path(id): Path<String>,
    Query(params): Query<ListParams>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let listing = load_listing(state, &n, &params).await?;
    let status = if listing.problems.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    render(
        status,
        list_page(
            &ctx,
            &n,
            &params,
            &listing,
            &AddForm::default(),
            &FieldErrors::new(),
        ),
    )
}

#[handler]
pub async fn create(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let add = AddForm::read(&form);
    let (nid, input) = (n.id, add.to_new());
    match state
        .db
        .run(move |conn| subscribers::create(conn, nid, &input, Source::Dashboard))
        .await
    {
        Ok((s, true)) => {
            ctx.notice_next(req, &format!("{} is subscribed.", s.email));
            see_other(&base(&n))
        }
        Ok((s, false)) => {
            ctx.notice_next(
                req,
                &format!("{} was already a subscriber; nothing changed.", s.email),
            );
            see_other(&format!("{}/{}", base(&n), s.id))
        }
        Err(e) => {
            let problems = invalid_fields(e)?;
            let params = ListParams::default();
            let listing = load_listing(state, &n, &params).await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                list_page(&ctx, &n, &params, &listing, &add, &problems),
            )
        }
    }
}

/// The subscriber `raw_id` of newsletter `n`; another newsletter's is not found.
async fn subscriber_of(
    state: &State,
    n: &Newsletter,
    raw_id: &str,
) -> Result<Subscriber, WebError> {
    let (nid, sid) = (n.id, parse_id(raw_id)?);
    Ok(state
        .db
        .run(move |conn| subscribers::get(conn, nid, sid))
        .await?)
}

/// Values shown in the edit form (as stored, or as submitted when refused).
struct EditForm {
    name: String,
    status: String,
    /// The newsletter's custom fields, each with its value as text (empty: none).
    fields: Vec<(CustomField, String)>,
}

fn edit_page(
    ctx: &Ctx,
    n: &Newsletter,
    s: &Subscriber,
    form: &EditForm,
    problems: &FieldErrors,
    received: &ReceivedPage,
) -> Markup {
    let url = format!("{}/{}", base(n), s.id);
    let can_write = n.ensure_writable().is_ok();
    newsletter_page(
        ctx,
        n,
        Section::Subscribers,
        &s.email,
        html! {
            p { a href=(base(n)) { "← Subscribers" } }
            h1 { (s.email) }
            p.muted {
                "Status " strong { (s.status.as_str()) }
                " · subscribed " (shown(s.subscribed_at, &ctx.zone()))
                @if let Some(at) = s.unsubscribed_at { " · unsubscribed " (shown(at, &ctx.zone())) }
                " · added " (shown(s.created_at, &ctx.zone()))
                @if let Some(until) = s.paused_until { " · " strong { "paused" } " by the reader until " (shown(until, &ctx.zone())) }
            }
            (origin_line(&s.origin))
            p { a href={ (url) "/export.json" } download { "Download this subscriber's data (JSON)" } " · for a data request: the record, tags, every issue sent and its history" }
            (errors(problems))
            @if can_write {
                form.stack method="post" action=(url) {
                    (csrf_field(ctx))
                    input type="hidden" name="_method" value="patch";
                    (field("Name", "text", "subscriber[name]", &form.name, "off", false))
                    @for (custom, value) in &form.fields { (field_input(custom, value)) }
                    label { "Status"
                        select name="subscriber[status]" {
                            @if s.status == Status::Bounced {
                                option value="bounced" selected[form.status == "bounced"] { "bounced" }
                            }
                            @for option in ["active", "unsubscribed"] {
                                option value=(option) selected[form.status == option] { (option) }
                            }
                        }
                    }
                    button type="submit" { "Save" }
                }
            }
            h2 #membership { "Membership" }
            p #membership-state {
                strong { (s.membership.status.as_str()) }
                @if let Some(interval) = s.membership.interval { " · " (interval.as_str()) "ly" }
                @if let Some(until) = s.membership.until { " · until " (shown(until, &ctx.zone())) }
                @if let Some(since) = s.membership.since.filter(|_| s.membership.has_paid_access()) { " · since " (shown(since, &ctx.zone())) }
            }
            @if can_write {
                form.stack method="post" action={ (url) "/membership" } {
                    (csrf_field(ctx))
                    label { "Give paid access"
                        select name="membership[status]" {
                            option value="comped" { "Comped (free paid access)" }
                            option value="paid" { "Paid elsewhere (another payment platform)" }
                            option value="free" { "Free (end paid access)" }
                        }
                    }
                    label { "Until (blank: no end; the end of that day, on your clocks)" input type="date" name="membership[until]"; }
                    button type="submit" { "Set membership" }
                }
                p.muted { "A membership Stripe bills is replaced here, but Stripe keeps billing until it is canceled there." }
            }
            h2 { "Tags" }
            @if s.tags.is_empty() { p.muted { "No tags." } }
            ul.tags {
                @for tag in &s.tags {
                    li {
                        span.tag { (tag) }
                        @if can_write {
                            form.inline method="post" action={ (url) "/tags" } {
                                (csrf_field(ctx))
                                input type="hidden" name="_method" value="delete";
                                input type="hidden" name="tag" value=(tag);
                                button.link type="submit" aria-label={ "Remove tag " (tag) } { "remove" }
                            }
                        }
                    }
                }
            }
            @if can_write {
                form.inline-form method="post" action={ (url) "/tags" } {
                    (csrf_field(ctx))
                    label { "New tag" input type="text" name="tag" maxlength="50" required; }
                    button type="submit" { "Add tag" }
                }
            }
            (received::section(&url, received, &ctx.zone(), n.tracking_enabled))
            @if can_write {
                h2 { "Delete" }
                p { a.button.danger href={ (url) "/delete" } { "Delete this subscriber…" } }
            }
        },
    )
}

fn stored_form(s: &Subscriber, fields: Vec<CustomField>) -> EditForm {
    let text = |field: &CustomField| {
        s.fields
            .get(&field.name)
            .map(value_text)
            .unwrap_or_default()
    };
    EditForm {
        name: s.name.clone().unwrap_or_default(),
        status: s.status.as_str().to_string(),
        fields: fields
            .into_iter()
            .map(|f| {
                let value = text(&f);
                (f, value)
            })
            .collect(),
    }
}

/// The custom field values a subscriber's form posted (`fields[<name>]`), by name.
fn posted_fields(form: &FormData) -> std::collections::BTreeMap<String, String> {
    form.pairs()
        .filter_map(|(key, value)| {
            let name = key.strip_prefix("fields[")?.strip_suffix(']')?;
            Some((name.to_string(), value.to_string()))
        })
        .collect()
}

/// The input of one custom field on the subscriber's form, by its type.
fn field_input(field: &CustomField, value: &str) -> Markup {
    let name = format!("fields[{}]", field.name);
    html! {
        label {
            (field.name)
            @match field.field_type {
                FieldType::Text => input type="text" name=(name) value=(value) maxlength=(TEXT_MAX) autocomplete="off";,
                FieldType::Number => input type="number" step="any" name=(name) value=(value);,
                FieldType::Date => input type="date" name=(name) value=(value);,
                FieldType::Boolean => select name=(name) {
                    option value="" selected[value.is_empty()] { "—" }
                    option value="yes" selected[value == "yes"] { "yes" }
                    option value="no" selected[value == "no"] { "no" }
                },
                FieldType::Choice => select name=(name) {
                    option value="" selected[value.is_empty()] { "—" }
                    @for option in &field.options {
                        option value=(option) selected[value == option] { (option) }
                    }
                    @if !value.is_empty() && !field.options.iter().any(|o| o == value) {
                        option value=(value) selected { (value) " (no longer listed)" }
                    }
                },
            }
        }
    }
}

/// The subscriber page's query: `before`, the delivery the page of received issues starts
/// below (the newest when absent).
#[derive(Debug, Default, Deserialize)]
pub struct ShowParams {
    before: Option<String>,
}

#[handler]
pub async fn show(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    Query(params): Query<ShowParams>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let s = subscriber_of(state, &n, &sid).await?;
    let before = params.before.as_deref().map(parse_id).transpose()?;
    let received = received::load(state, &n, &s, before).await?;
    render(
        StatusCode::OK,
        edit_page(
            &ctx,
            &n,
            &s,
            &stored_form(&s, fields_of(state, &n).await?),
            &FieldErrors::new(),
            &received,
        ),
    )
}

/// The subscriber's page again with `e`'s problems (422), the edit form as `typed`.
async fn refused(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    s: &Subscriber,
    typed: &EditForm,
    e: DomainError,
) -> WebResult {
    let problems = invalid_fields(e)?;
    let received = received::load(state, n, s, None).await?;
    render(
        StatusCode::UNPROCESSABLE_ENTITY,
        edit_page(ctx, n, s, typed, &problems, &received),
    )
}

/// `POST /subscribers/:sid`: `_method=patch` saves the name and status, `_method=delete`
/// deletes the subscriber for good.
#[handler]
pub async fn change(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let s = subscriber_of(state, &n, &sid).await?;
    let (nid, sid) = (n.id, s.id);
    match form.get("_method") {
        "delete" => {
            state
                .db
                .run(move |conn| subscribers::delete(conn, nid, sid))
                .await?;
            ctx.notice_next(req, &format!("{} is deleted, for good.", s.email));
            see_other(&base(&n))
        }
        "patch" => {
            // Only the fields the page showed: a field added since keeps its values, and
            // one renamed or deleted since is refused by name.
            let posted = posted_fields(&form);
            let submitted = EditForm {
                name: form.get("subscriber[name]").to_string(),
                status: form.get("subscriber[status]").to_string(),
                fields: fields_of(state, &n)
                    .await?
                    .into_iter()
                    .filter_map(|f| {
                        let value = posted.get(&f.name)?.clone();
                        Some((f, value))
                    })
                    .collect(),
            };
            let changes = Changes {
                // Keeping the current status (even bounced) is no change.
                status: (submitted.status != s.status.as_str()).then(|| submitted.status.clone()),
                name: Some(Some(submitted.name.clone()).filter(|n| !n.trim().is_empty())),
                // Each field as typed; an empty one removes the value.
                fields: posted
                    .into_iter()
                    .map(|(name, v)| (name, serde_json::Value::String(v)))
                    .collect(),
            };
            match state
                .db
                .run(move |conn| subscribers::update(conn, nid, sid, &changes))
                .await
            {
                Ok(saved) => {
                    ctx.notice_next(req, &format!("{} is saved.", saved.email));
                    see_other(&format!("{}/{}", base(&n), sid))
                }
                Err(e) => refused(&ctx, state, &n, &s, &submitted, e).await,
            }
        }
        other => Err(WebError::BadForm(format!("unknown _method {other:?}"))),
    }
}

/// How the subscriber was added and where from; the referrer is shown as text, not a
/// link: it is what a reader's browser said.
fn origin_line(origin: &Origin) -> Markup {
    let Some(source) = origin.source else {
        return html! {};
    };
    let how = match source {
        Source::Form => "a signup form",
        Source::Import => "an import",
        Source::Api => "the API",
        Source::Dashboard => "the dashboard",
    };
    let utm = &origin.utm;
    let tags: Vec<String> = [
        ("source", &utm.source),
        ("medium", &utm.medium),
        ("campaign", &utm.campaign),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name} {v}")))
    .collect();
    html! {
        p.muted.url #origin {
            "Came by " strong { (how) }
            @if let Some(referrer) = &origin.referrer { " · from " (referrer) }
            @if !tags.is_empty() { " · campaign: " (tags.join(", ")) }
        }
    }
}

/// `POST /subscribers/:sid/membership`: comps a member, records paid access from another
/// platform, or ends paid access (`domain::subscribers::memberships::set_by_owner`).
#[handler]
pub async fn change_membership(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let s = subscriber_of(state, &n, &sid).await?;
    let (nid, sid) = (n.id, s.id);
    let status = form.get("membership[status]").to_string();
    let until = match form.get("membership[until]").trim() {
        "" => None,
        day => Some(local_to_rfc3339(
            &format!("{day}T23:59:59"),
            &ctx.zone(),
            "membership.until",
        )?),
    };
    match state
        .db
        .run(move |conn| memberships::set_by_owner(conn, nid, sid, &status, until.as_deref()))
        .await
    {
        Ok(m) => {
            ctx.notice_next(
                req,
                &format!("{}'s membership is {}.", s.email, m.status.as_str()),
            );
            see_other(&format!("{}/{}#membership", base(&n), sid))
        }
        Err(e) => {
            refused(
                &ctx,
                state,
                &n,
                &s,
                &stored_form(&s, fields_of(state, &n).await?),
                e,
            )
            .await
        }
    }
}

/// `POST /subscribers/:sid/tags`: adds `tag`, or removes it with `_method=delete`.
#[handler]
pub async fn change_tags(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let s = subscriber_of(state, &n, &sid).await?;
    let (nid, sid, tag) = (n.id, s.id, form.get("tag").to_string());
    let removing = form.get("_method") == "delete";
    let label = tag.trim().to_string();
    let result = state
        .db
        .run(move |conn| {
            if removing {
                subscribers::remove_tag(conn, nid, sid, &tag)
            } else {
                subscribers::add_tag(conn, nid, sid, &tag)
            }
        })
        .await;
    match result {
        Ok(_) => {
            let done = if removing { "removed" } else { "added" };
            ctx.notice_next(req, &format!("Tag {label:?} {done}."));
            see_other(&format!("{}/{}", base(&n), sid))
        }
        Err(e) => {
            refused(
                &ctx,
                state,
                &n,
                &s,
                &stored_form(&s, fields_of(state, &n).await?),
                e,
            )
            .await
        }
    }
}

#[handler]
pub async fn confirm_delete(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let s = subscriber_of(state, &n, &sid).await?;
    let url = format!("{}/{}", base(&n), s.id);
    render(
        StatusCode::OK,
        confirmation_page(
            &ctx,
            &n,
            Confirmation {
                section: Section::Subscribers,
                title: "Delete subscriber",
                question: format!("Delete {}?", s.email),
                consequences: html! {
                    "The address, its name and its tags are removed for good (past sends keep their counts, without the address). Webhooks receive " code { "subscriber.deleted" } ". To stop mail but keep the record, set the status to unsubscribed instead."
                },
                action: &url,
                button: "Delete for good",
                back: &url,
            },
        ),
    )
}

/// `std::io::Write` for a blocking thread feeding an async pipe (a download's response body).
pub(super) struct PipeWriter {
    runtime: tokio::runtime::Handle,
    pipe: tokio::io::DuplexStream,
}

impl std::io::Write for PipeWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.runtime.block_on(self.pipe.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.runtime.block_on(self.pipe.flush())
    }
}

/// A CSV download named `file_name`, written by `write` on a blocking thread with a
/// connection of its own and streamed as the client reads it (the pipe holds 64 KiB: the
/// writer waits for the client, so memory stays flat whatever the size). `what` names the
/// download in the server's log should it fail half way.
pub(super) fn csv_download<F>(state: &State, file_name: &str, what: String, write: F) -> WebResult
where
    F: FnOnce(&rusqlite::Connection, PipeWriter) -> Result<u64, DomainError> + Send + 'static,
{
    let (reader, pipe) = tokio::io::duplex(64 * 1024);
    let pool = state.db.pool().clone();
    let writer = PipeWriter {
        runtime: tokio::runtime::Handle::current(),
        pipe,
    };
    tokio::task::spawn_blocking(move || {
        let written = pool
            .get()
            .map_err(|e| DomainError::Store(e.into()))
            .and_then(|conn| write(&conn, writer));
        match written {
            Ok(_) => {}
            // The browser went away mid-download.
            Err(DomainError::Store(crate::store::StoreError::Io(e)))
                if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => eprintln!("{what}: {e}"),
        }
    });
    Ok(Response::builder()
        .content_type("text/csv; charset=utf-8")
        .header(
            "Content-Disposition",
            format!("attachment; filename=\"{file_name}\""),
        )
        .header("Cache-Control", "no-store")
        .body(Body::from_async_read(reader)))
}

/// The subscribers as a CSV download, streamed from the database as the client reads it.
#[handler]
pub async fn export(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let nid = n.id;
    let day = crate::clock::format_day(crate::clock::date_of(crate::clock::now()));
    let file_name = format!("{}-subscribers-{day}.csv", n.subdomain);
    csv_download(
        state,
        &file_name,
        format!("export: newsletter {nid}"),
        move |conn, out| subscribers::import::export_csv(conn, nid, out),
    )
}

/// One subscriber's data as a JSON download, for a data request: the document the API's
/// `GET /subscribers/{id}/export` answers (`domain::subscribers::personal_data`).
#[handler]
pub async fn export_one(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let (nid, sid) = (n.id, parse_id(&sid)?);
    let document = state
        .db
        .run(move |conn| personal_data::export(conn, nid, sid))
        .await?;
    let body = serde_json::to_vec_pretty(&document).expect("an export serialises");
    let file_name = format!("{}-subscriber-{sid}.json", n.subdomain);
    Ok(Response::builder()
        .content_type("application/json")
        .header(
            "Content-Disposition",
            format!("attachment; filename=\"{file_name}\""),
        )
        .header("Cache-Control", "no-store")
        .body(body))
}
