//! Subscribers in the dashboard: a paged list with search and filters, add, edit (name,
//! status), tags, delete with confirmation, CSV export, one subscriber's data as JSON (a data
//! request), and CSV import: upload, preview of the first rows, then an import job whose
//! progress and result (with the refused rows) the import's page shows.

use std::path::Path as FsPath;

use maud::{Markup, html};
use poem::web::{Data, Multipart, Path, Query};
use poem::{Body, Request, Response, handler, http::StatusCode};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::layout::{
    Confirmation, Section, confirmation_page, csrf_field, errors, field, newsletter_page,
    table_wrap,
};
use super::newsletters::{owned, owned_post, parse_id};
use super::time_zones::shown;
use super::{Ctx, FormData, State, WebError, WebResult, csrf, invalid_fields, render, see_other};
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::import::{self, ColumnUse, Upload, UploadState};
use crate::domain::subscribers::personal_data;
use crate::domain::subscribers::{self, Changes, Filter, NewSubscriber, Status, Subscriber};
use crate::domain::values::pagination::Page;
use crate::domain::{DomainError, ErrorCode, FieldErrors};
use crate::http::plural;

/// Subscribers per page of the list.
const PER_PAGE: &str = "50";
/// Rows of an uploaded file shown before the import starts.
const PREVIEW_ROWS: usize = 10;
/// Imports listed on the import page.
const RECENT_IMPORTS: i64 = 10;
/// Characters of a file's cell shown on the import pages: a row of 10,000 characters would
/// make the tables unreadable (and the page heavy), and the start says which row it is.
const CELL_CHARS: usize = 200;

/// `text` cut to [`CELL_CHARS`] characters, with an ellipsis when something was cut.
fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(CELL_CHARS) {
        None => text.into(),
        Some((end, _)) => format!("{}…", &text[..end]).into(),
    }
}

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
                a href={ (url) "/export.csv" } download { "Export CSV" }
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
                            option value=(tag) selected[chosen(&params.tag, tag)] { (tag) " (" (count) ")" }
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
        .run(move |conn| subscribers::create(conn, nid, &input))
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
}

fn edit_page(
    ctx: &Ctx,
    n: &Newsletter,
    s: &Subscriber,
    form: &EditForm,
    problems: &FieldErrors,
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
            }
            p { a href={ (url) "/export.json" } download { "Download this subscriber's data (JSON)" } " · for a data request: the record, tags, every issue sent and its history" }
            (errors(problems))
            @if can_write {
                form.stack method="post" action=(url) {
                    (csrf_field(ctx))
                    input type="hidden" name="_method" value="patch";
                    (field("Name", "text", "subscriber[name]", &form.name, "off", false))
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
                h2 { "Delete" }
                p { a.button.danger href={ (url) "/delete" } { "Delete this subscriber…" } }
            }
        },
    )
}

fn stored_form(s: &Subscriber) -> EditForm {
    EditForm {
        name: s.name.clone().unwrap_or_default(),
        status: s.status.as_str().to_string(),
    }
}

#[handler]
pub async fn show(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let s = subscriber_of(state, &n, &sid).await?;
    render(
        StatusCode::OK,
        edit_page(&ctx, &n, &s, &stored_form(&s), &FieldErrors::new()),
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
            let submitted = EditForm {
                name: form.get("subscriber[name]").to_string(),
                status: form.get("subscriber[status]").to_string(),
            };
            let changes = Changes {
                // Keeping the current status (even bounced) is no change.
                status: (submitted.status != s.status.as_str()).then(|| submitted.status.clone()),
                name: Some(Some(submitted.name.clone()).filter(|n| !n.trim().is_empty())),
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
                Err(e) => render(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    edit_page(&ctx, &n, &s, &submitted, &invalid_fields(e)?),
                ),
            }
        }
        other => Err(WebError::BadForm(format!("unknown _method {other:?}"))),
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
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            edit_page(&ctx, &n, &s, &stored_form(&s), &invalid_fields(e)?),
        ),
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

/// `std::io::Write` for a blocking thread feeding an async pipe (the export's response body).
struct PipeWriter {
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

/// The subscribers as a CSV download, streamed from the database as the client reads it.
#[handler]
pub async fn export(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let (reader, pipe) = tokio::io::duplex(64 * 1024);
    let (pool, nid) = (state.db.pool().clone(), n.id);
    let writer = PipeWriter {
        runtime: tokio::runtime::Handle::current(),
        pipe,
    };
    tokio::task::spawn_blocking(move || {
        let written = pool
            .get()
            .map_err(|e| DomainError::Store(e.into()))
            .and_then(|conn| import::export_csv(&conn, nid, writer));
        match written {
            Ok(_) => {}
            // The browser went away mid-download.
            Err(DomainError::Store(crate::store::StoreError::Io(e)))
                if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => eprintln!("export: newsletter {nid}: {e}"),
        }
    });
    let day = crate::clock::now().date();
    let file_name = format!("{}-subscribers-{day}.csv", n.subdomain);
    Ok(Response::builder()
        .content_type("text/csv; charset=utf-8")
        .header(
            "Content-Disposition",
            format!("attachment; filename=\"{file_name}\""),
        )
        .header("Cache-Control", "no-store")
        .body(Body::from_async_read(reader)))
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

fn import_form_page(
    ctx: &Ctx,
    n: &Newsletter,
    recent: &[Upload],
    problems: &FieldErrors,
) -> Markup {
    let url = base(n);
    newsletter_page(
        ctx,
        n,
        Section::Subscribers,
        "Import subscribers",
        html! {
            p { a href=(url) { "← Subscribers" } }
            h1 { "Import subscribers from CSV" }
            div.panel {
                p { "The first line must name the columns; they may come in any order:" }
                ul {
                    li { code { "email" } " (required)" }
                    li { code { "name" } }
                    li { code { "tags" } ": several tags separated by " code { ";" } ", e.g. " code { "vip;2024" } }
                    li { code { "status" } ": rows marked " code { "unsubscribed" } " or " code { "bounced" } " are skipped, so nobody who left is subscribed again" }
                }
                p { "Exports from Mailchimp (the audience export) and Substack (the subscriber export) can be uploaded as they are: names, every tag and the original subscription dates are kept, and readers who left are skipped. The preview shows how each column is read." }
                p.muted { "Other columns are ignored. Addresses already subscribed are left as they are, so importing the same file twice adds nobody twice. Files up to 50 MiB; for larger ones the server's operator can run " code { "broadsheet import" } ". An account may have " (import::OWNER_UPLOADS) " uploads waiting or being imported at once, " (import::OWNER_UPLOAD_BYTES / (1024 * 1024)) " MiB in all." }
                pre { "email,name,tags\nann@example.com,Ann Lee,vip;early\nbob@example.com,," }
            }
            (errors(problems))
            @if n.ensure_writable().is_ok() {
                form.stack method="post" action={ (url) "/import" } enctype="multipart/form-data" {
                    (csrf_field(ctx))
                    label { "CSV file (UTF-8, at most 50 MiB)"
                        input type="file" name="file" accept=".csv,text/csv" required;
                    }
                    button type="submit" { "Upload and preview" }
                }
            }
            @if !recent.is_empty() {
                h2 { "Recent imports" }
                (table_wrap("Recent imports", html! { table {
                    thead { tr { th { "File" } th { "State" } th { "Created" } th { "Existing" } th { "Refused" } th { "Uploaded" } } }
                    tbody {
                        @for u in recent {
                            tr {
                                td { a href={ (url) "/imports/" (u.id) } { (u.file_name) } }
                                td { (u.state.as_str()) }
                                td { (u.totals.created) }
                                td { (u.totals.existing) }
                                td { (u.totals.error_count) }
                                td { (shown(u.created_at, &ctx.zone())) }
                            }
                        }
                    }
                } }))
            }
        },
    )
}

async fn recent_imports(state: &State, n: &Newsletter) -> Result<Vec<Upload>, WebError> {
    let nid = n.id;
    Ok(state
        .db
        .run(move |conn| import::recent_uploads(conn, nid, RECENT_IMPORTS))
        .await?)
}

#[handler]
pub async fn import_form(
    req: &Request,
    Path(id): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let recent = recent_imports(state, &n).await?;
    render(
        StatusCode::OK,
        import_form_page(&ctx, &n, &recent, &FieldErrors::new()),
    )
}

/// Streams an uploaded file to `path`; `None` (and no file) when it exceeds `limit` bytes.
async fn save_upload(
    field: poem::web::Field,
    path: &FsPath,
    limit: u64,
) -> std::io::Result<Option<u64>> {
    let mut reader = Box::pin(field.into_async_read());
    let mut file = tokio::fs::File::create(path).await?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let read = reader.read(&mut buf).await?;
        if read == 0 {
            break;
        }
        size += read as u64;
        if size > limit {
            drop(file);
            tokio::fs::remove_file(path).await?;
            return Ok(None);
        }
        file.write_all(&buf[..read]).await?;
    }
    // The import job may run after a restart: the file must be on disk, not in a cache.
    file.sync_all().await?;
    Ok(Some(size))
}

/// What came out of reading an upload form.
struct Uploaded {
    token: String,
    /// (name the browser sent, name stored under), when a file was saved.
    file: Option<(String, String)>,
    problem: Option<FieldErrors>,
}

/// Reads the form, saving its file to `dir` when it fits in the owner's `room`; a file that
/// does not is read past (so the browser gets the answer, not a reset) and never stored.
async fn read_upload(
    mut multipart: Multipart,
    dir: &FsPath,
    room: import::UploadRoom,
) -> Result<Uploaded, WebError> {
    let mut uploaded = Uploaded {
        token: String::new(),
        file: None,
        problem: None,
    };
    let unreadable =
        |e: &dyn std::fmt::Display| WebError::BadForm(format!("unreadable upload: {e}"));
    while let Some(field) = multipart.next_field().await.map_err(|e| unreadable(&e))? {
        match field.name() {
            Some(csrf::FIELD) => {
                let mut token = String::new();
                Box::pin(field.into_async_read())
                    .take(256)
                    .read_to_string(&mut token)
                    .await
                    .map_err(|e| unreadable(&e))?;
                uploaded.token = token;
            }
            Some("file") if uploaded.file.is_none() => {
                let name = field.file_name().unwrap_or("").to_string();
                if name.is_empty() {
                    continue;
                }
                if let Err(e) = room.check(0) {
                    uploaded.problem = Some(invalid_fields(e)?);
                    continue;
                }
                let stored = import::new_stored_name();
                let path = dir.join(&stored);
                let limit = import::UPLOAD_LIMIT.min(room.bytes_left());
                match save_upload(field, &path, limit).await {
                    Ok(Some(_)) => uploaded.file = Some((name, stored)),
                    Ok(None) if limit < import::UPLOAD_LIMIT => {
                        let refused = room.check(limit + 1).err().map(invalid_fields);
                        uploaded.problem = refused.transpose()?;
                    }
                    Ok(None) => {
                        uploaded.problem = Some(FieldErrors::single(
                            "base",
                            "The file is larger than 50 MiB. Split it, or ask the server's operator to run broadsheet import.",
                        ))
                    }
                    Err(e) => {
                        let _ = tokio::fs::remove_file(&path).await;
                        if crate::store::is_disk_full_io(&e) {
                            return Err(WebError::DiskFull(format!("saving an upload: {e}")));
                        }
                        return Err(unreadable(&e));
                    }
                }
            }
            // Anything else is read past (multer skips the rest of an unread field).
            _ => {}
        }
    }
    Ok(uploaded)
}

/// `POST /subscribers/import`: a multipart form with the CSRF field and `file`. The file is
/// kept under `<data-dir>/imports/` once its header is known to be usable; the answer is the
/// import's preview page.
#[handler]
pub async fn upload_csv(
    req: &Request,
    Path(id): Path<String>,
    multipart: poem::Result<Multipart>,
    Data(state): Data<&State>,
) -> WebResult {
    // Only the newsletter's owner gets as far as sending a file to disk.
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let multipart =
        multipart.map_err(|_| WebError::BadForm("expected a multipart/form-data upload".into()))?;
    let nid = n.id;
    let (dir, room) = state
        .db
        .run(move |conn| {
            import::purge_stale_uploads(conn)?;
            Ok::<_, DomainError>((import::uploads_dir(conn)?, import::upload_room(conn, nid)?))
        })
        .await?;
    let uploaded = read_upload(multipart, &dir, room).await?;
    let remove = |stored: &Option<(String, String)>| {
        if let Some((_, stored)) = stored {
            let _ = std::fs::remove_file(dir.join(stored));
        }
    };
    let form = FormData::parse(
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair(csrf::FIELD, &uploaded.token)
            .finish()
            .as_bytes(),
    );
    let ctx = match Ctx::load_verified(req, state, &form).await {
        Ok(ctx) => ctx,
        Err(e) => {
            remove(&uploaded.file);
            return Err(e);
        }
    };
    if let Err(e) = n.ensure_writable() {
        remove(&uploaded.file);
        return Err(e.into());
    }
    let problems = match (&uploaded.file, uploaded.problem) {
        (_, Some(problem)) => problem,
        (None, None) => FieldErrors::single("base", "Choose a CSV file to upload."),
        (Some((name, stored)), None) => {
            let (nid, name, stored) = (n.id, name.clone(), stored.clone());
            match state
                .db
                .run(move |conn| import::record_upload(conn, nid, &name, &stored))
                .await
            {
                Ok(upload) => return see_other(&format!("{}/imports/{}", base(&n), upload.id)),
                Err(e) => invalid_fields(e)?,
            }
        }
    };
    remove(&uploaded.file);
    let recent = recent_imports(state, &n).await?;
    render(
        StatusCode::UNPROCESSABLE_ENTITY,
        import_form_page(&ctx, &n, &recent, &problems),
    )
}

async fn upload_of(state: &State, n: &Newsletter, raw_id: &str) -> Result<Upload, WebError> {
    let (nid, iid) = (n.id, parse_id(raw_id)?);
    Ok(state
        .db
        .run(move |conn| import::get_upload(conn, nid, iid))
        .await?)
}

fn percent(done: u64, total: u64) -> u64 {
    (done.saturating_mul(100) / total.max(1)).min(100)
}

/// The import's page: preview and start button, progress, or the result.
async fn import_page(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    upload: &Upload,
    problems: &FieldErrors,
) -> Result<Markup, WebError> {
    let (iid, waiting, stored) = (
        upload.id,
        upload.state == UploadState::Uploaded,
        upload.clone(),
    );
    let (preview, refused) = state
        .db
        .run(move |conn| {
            let upload = stored;
            let preview = if waiting {
                let file = std::fs::File::open(import::upload_path(conn, &upload)?)
                    .map_err(crate::store::StoreError::from)?;
                Some(import::preview(file, PREVIEW_ROWS))
            } else {
                None
            };
            Ok::<_, DomainError>((preview, import::upload_errors(conn, iid)?))
        })
        .await?;
    let url = format!("{}/imports/{}", base(n), upload.id);
    let t = &upload.totals;
    Ok(newsletter_page(
        ctx,
        n,
        Section::Subscribers,
        "Import",
        html! {
            p { a href={ (base(n)) "/import" } { "← Imports" } }
            h1 { "Import of " (upload.file_name) }
            (errors(problems))
            @match upload.state {
                UploadState::Uploaded => {
                    p.muted { (plural::count(upload.size_bytes as i64, "byte", "bytes")) " uploaded " (shown(upload.created_at, &ctx.zone())) ". Nothing is imported until you start." }
                    @match &preview {
                        Some(Ok(preview)) => {
                            h2 { "Columns" }
                            p id="import-source" { "Read as: " (preview.columns.source.label()) "." }
                            ul.columns {
                                @for (i, (name, used)) in preview.columns.header.iter().enumerate() {
                                    li class=(if *used == ColumnUse::Ignored { "ignored" } else { "used" }) {
                                        code { (clip(name)) } " → " (preview.columns.meaning(i))
                                    }
                                }
                            }
                            h2 { "First rows" }
                            (table_wrap("First rows", html! { table.preview {
                                thead { tr { th { "Line" } th { "E-mail" } th { "Name" } th { "Tags" } th { "Subscribed" } th { "Check" } } }
                                tbody {
                                    @for row in &preview.rows {
                                        tr class=(if row.problem.is_some() { "refused" } else { "ok" }) {
                                            td { (row.line) }
                                            td { (clip(&row.email)) }
                                            td { (clip(&row.name)) }
                                            td { (clip(&row.tags.join("; "))) }
                                            td { (row.subscribed_at.map(|at| at.human()).unwrap_or_default()) }
                                            td { (clip(row.problem.as_deref().unwrap_or("ok"))) }
                                        }
                                    }
                                }
                            } }))
                            @if preview.rows.is_empty() { p { "The file has a header but no rows." } }
                            form.inline method="post" action={ (url) "/start" } {
                                (csrf_field(ctx))
                                button type="submit" { "Start import" }
                            }
                        }
                        Some(Err(e)) => { ul.errors role="alert" { li { (e) } } }
                        None => {}
                    }
                    " "
                    form.inline method="post" action=(url) {
                        (csrf_field(ctx))
                        input type="hidden" name="_method" value="delete";
                        button.link type="submit" { "Discard this file" }
                    }
                }
                UploadState::Queued | UploadState::Running => {
                    p role="status" { "Importing… " (plural::count(t.rows as i64, "row", "rows")) " so far (" (percent(upload.bytes_done, upload.size_bytes)) "% of the file). This page refreshes itself." }
                    progress max="100" value=(percent(upload.bytes_done, upload.size_bytes)) {}
                }
                UploadState::Done | UploadState::Failed => {
                    @if let Some(failure) = &upload.failure {
                        p.bad role="alert" { "The import stopped: " (failure) }
                    } @else {
                        p.notice role="status" id="import-result" { "Import finished: " (plural::count(t.rows as i64, "row", "rows")) " read." }
                    }
                }
            }
            @if upload.state != UploadState::Uploaded {
                dl.summary {
                    dt { "Created" } dd id="created" { (t.created) }
                    dt { "Already subscribed" } dd id="existing" { (t.existing) }
                    dt { "Skipped (unsubscribed or bounced)" } dd id="skipped" { (t.skipped) }
                    dt { "Refused" } dd id="refused" { (t.error_count) }
                }
                @if !refused.is_empty() {
                    h2 { "Refused rows" }
                    (table_wrap("Refused rows", html! { table.refused {
                        thead { tr { th { "Line" } th { "E-mail" } th { "Reason" } } }
                        tbody {
                            @for e in &refused {
                                tr { td { (e.line) } td { (clip(&e.email)) } td { (clip(&e.reason)) } }
                            }
                        }
                    } }))
                    @if t.error_count > refused.len() as u64 {
                        p.muted { "And " (t.error_count - refused.len() as u64) " more refused rows, not listed." }
                    }
                }
                p { a href=(base(n)) { "Back to subscribers" } }
            }
        },
    ))
}

#[handler]
pub async fn show_import(
    req: &Request,
    Path((id, iid)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let upload = upload_of(state, &n, &iid).await?;
    let mut response = render(
        StatusCode::OK,
        import_page(&ctx, state, &n, &upload, &FieldErrors::new()).await?,
    )?;
    if upload.state.in_progress() {
        // Progress without JavaScript: the browser reloads the page every two seconds.
        response
            .headers_mut()
            .insert("Refresh", poem::http::HeaderValue::from_static("2"));
    }
    Ok(response)
}

/// An import that is not waiting any more: its page again with the reason, 422.
async fn refused(ctx: &Ctx, state: &State, n: &Newsletter, iid: i64, e: DomainError) -> WebResult {
    let message = match e {
        DomainError::Rejected(ErrorCode::InvalidState, message) => message,
        other => return Err(other.into()),
    };
    let nid = n.id;
    let upload = state
        .db
        .run(move |conn| import::get_upload(conn, nid, iid))
        .await?;
    render(
        StatusCode::UNPROCESSABLE_ENTITY,
        import_page(
            ctx,
            state,
            n,
            &upload,
            &FieldErrors::single("base", message),
        )
        .await?,
    )
}

#[handler]
pub async fn start_import(
    req: &Request,
    Path((id, iid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, ctx, n) = owned_post(req, state, &id, body).await?;
    let upload = upload_of(state, &n, &iid).await?;
    let (nid, iid) = (n.id, upload.id);
    match state
        .db
        .run(move |conn| import::start_upload(conn, nid, iid))
        .await
    {
        Ok(_) => {
            ctx.notice_next(req, "The import has started.");
            see_other(&format!("{}/imports/{iid}", base(&n)))
        }
        Err(e) => refused(&ctx, state, &n, iid, e).await,
    }
}

/// `POST /subscribers/imports/:iid` with `_method=delete`: discards a file never imported.
#[handler]
pub async fn discard_import(
    req: &Request,
    Path((id, iid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let upload = upload_of(state, &n, &iid).await?;
    if form.get("_method") != "delete" {
        return Err(WebError::BadForm("expected _method=delete".into()));
    }
    let (nid, iid) = (n.id, upload.id);
    match state
        .db
        .run(move |conn| import::discard_upload(conn, nid, iid))
        .await
    {
        Ok(()) => {
            ctx.notice_next(req, &format!("{} is discarded.", upload.file_name));
            see_other(&format!("{}/import", base(&n)))
        }
        Err(e) => refused(&ctx, state, &n, iid, e).await,
    }
}
