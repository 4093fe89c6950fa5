//! The CSV import's dashboard pages: the import page (the form and the recent imports), the
//! upload, the preview with each column's meaning, the progress and result, start and
//! discard. The rest of the import: `domain::subscribers::import` (the streaming import, the
//! uploads and their limits) and `domain::subscribers::import_columns` (how a file's columns
//! are read), `jobs::import_subscribers` (the job that imports an upload) and `cli::import`
//! (`broadsheet import`, the same import from a file on the server); docs/subscribers.md
//! ("Import CSV") describes it.

use std::path::Path as FsPath;

use maud::{Markup, html};
use poem::web::{Data, Multipart, Path};
use poem::{Body, Request, handler, http::StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::base;
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::import::{self, ColumnUse, Upload, UploadState};
use crate::domain::{DomainError, ErrorCode, FieldErrors};
use crate::http::plural;
use crate::web::layout::{Section, csrf_field, errors, newsletter_page, table_wrap};
use crate::web::newsletters::{owned, owned_post, parse_id};
use crate::web::time_zones::shown;
use crate::web::{
    Ctx, FormData, State, WebError, WebResult, csrf, invalid_fields, render, see_other,
};

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
                p.muted { "Other columns are ignored. Addresses already subscribed are left as they are, so importing the same file twice adds nobody twice. Files up to " (import::mib(import::UPLOAD_LIMIT)) "; for larger ones the server's operator can run " code { "broadsheet import" } ". An account may have " (import::OWNER_UPLOADS) " uploads waiting or being imported at once, " (import::mib(import::OWNER_UPLOAD_BYTES)) " in all." }
                pre { "email,name,tags\nann@example.com,Ann Lee,vip;early\nbob@example.com,," }
            }
            (errors(problems))
            @if n.ensure_writable().is_ok() {
                form.stack method="post" action={ (url) "/import" } enctype="multipart/form-data" {
                    (csrf_field(ctx))
                    label { "CSV file (UTF-8, at most " (import::mib(import::UPLOAD_LIMIT)) ")"
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
                            format!(
                                "The file is larger than {}. Split it, or ask the server's operator to run broadsheet import.",
                                import::mib(import::UPLOAD_LIMIT)
                            ),
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
                Some(import::preview_upload(conn, &upload, PREVIEW_ROWS)?)
            } else {
                None
            };
            let refused = import::upload_errors(conn, iid, 0, import::ERRORS_KEPT as u64)?;
            Ok::<_, DomainError>((preview, refused))
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
                    p.muted { "Lines are the file's own: the header is line 1." }
                    (table_wrap("Refused rows", html! { table.refused {
                        thead { tr { th { "Line" } th { "E-mail" } th { "Reason" } } }
                        tbody {
                            @for e in &refused {
                                tr { td { (e.line) } td { (clip(&e.email)) } td { (clip(&e.reason)) } }
                            }
                        }
                    } }))
                    @if t.error_count > refused.len() as u64 {
                        p.muted { "And " (plural::count((t.error_count - refused.len() as u64) as i64, "more refused row", "more refused rows")) ", not listed here." }
                    }
                    p {
                        a.button.secondary #refused-download href={ (url) "/refused.csv" } download {
                            "Download the refused rows (CSV)"
                        }
                        @if t.error_count > import::ERRORS_STORED {
                            " " span.muted { "The first " (import::ERRORS_STORED) " of " (t.error_count) "." }
                        }
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

/// `GET …/imports/:iid/refused.csv`: the rows the import refused (line, e-mail, reason), the
/// lines the file's own, streamed a page at a time from the stored rows. Another account's
/// import, or another newsletter's, is a 404.
#[handler]
pub async fn refused_csv(
    req: &Request,
    Path((id, iid)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let upload = upload_of(state, &n, &iid).await?;
    let iid = upload.id;
    super::csv_download(
        state,
        &format!("{}-import-{iid}-refused.csv", n.subdomain),
        format!("refused rows of import {iid}"),
        move |conn, out| import::refused_csv(conn, iid, out),
    )
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
