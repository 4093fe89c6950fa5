//! A newsletter's images in the dashboard (docs/images.md): the media page (each image with
//! its thumbnail, size, address and the issues that use it, and delete), the upload, which a
//! plain form posts (the editor has one too) and the editor's script sends with `fetch` for
//! a dropped or pasted image, and the owner's copy of each file for the thumbnails. The
//! rules are `domain::issues::media`; the public site serves the files (`site::media`).

use std::sync::LazyLock;

use maud::{Markup, html};
use poem::web::{Data, Multipart, Path};
use poem::{Body, Request, Response, handler, http::StatusCode};
use tokio::io::AsyncReadExt;
use tokio::sync::Semaphore;

use crate::domain::issues::media::{self, Media, Use};
use crate::domain::issues::{self, Issue};
use crate::domain::newsletters::Newsletter;
use crate::domain::{DomainError, FieldErrors};
use crate::http::public_page::{JAVASCRIPT, asset};
use crate::web::layout::{Section, csrf_field, errors, newsletter_page};
use crate::web::newsletters::{owned, parse_id};
use crate::web::{Ctx, FormData, State, WebError, WebResult, csrf, render, see_other};

/// Images decoded and encoded at once, server-wide: each may take a few hundred megabytes
/// and a core for a second or two, so more uploads wait their turn.
static PROCESSING: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(2));

/// Bytes of a multipart body read past a refused file before answering: a browser that is
/// still sending gets the answer instead of a reset, within reason.
const READ_PAST_LIMIT: u64 = 64 * 1024 * 1024;

fn media_url(newsletter_id: i64) -> String {
    format!("/newsletters/{newsletter_id}/media")
}

/// The Markdown that shows `image` where it is pasted.
fn markdown_of(image: &Media, site_origin: &str) -> String {
    format!("![]({})", image.url(site_origin))
}

/// The upload form for the editor, outside the editor's own form (a file cannot travel in
/// its URL-encoded post). Without JavaScript it posts the file and comes back to the editor
/// with the Markdown to paste; `/assets/media.js` also sends images dropped or pasted into
/// the Markdown box through it.
pub fn editor_upload_form(ctx: &Ctx, n: &Newsletter, issue: Option<&Issue>) -> Markup {
    html! {
        form.stack.media-upload method="post" action=(media_url(n.id)) enctype="multipart/form-data" {
            (csrf_field(ctx))
            input type="hidden" name="issue" value=(issue.map_or_else(|| "new".to_string(), |i| i.id.to_string()));
            label {
                "Add an image (PNG, JPEG, WebP or GIF, up to " (media::MAX_UPLOAD_BYTES / (1024 * 1024)) " MiB)"
                input type="file" name="file" accept="image/png,image/jpeg,image/webp,image/gif" required;
            }
            p.muted { "You can also drop or paste an image into the Markdown box. Images are stored without their metadata (camera, place) and at most " (media::MAX_WIDTH) " px wide. " a href=(media_url(n.id)) { "All images" } }
            div.buttons { button.secondary type="submit" { "Upload image" } }
            p.media-status role="status" aria-live="polite" {}
        }
        script src="/assets/media.js" defer {}
    }
}

fn media_page(
    ctx: &Ctx,
    n: &Newsletter,
    site_origin: &str,
    images: &[(Media, Vec<Use>, i64)],
    found: &FieldErrors,
) -> Markup {
    let url = media_url(n.id);
    newsletter_page(
        ctx,
        n,
        Section::Media,
        "Images",
        html! {
            h1 { "Images" }
            (errors(found))
            form.stack.panel method="post" action=(url) enctype="multipart/form-data" {
                (csrf_field(ctx))
                label {
                    "Upload an image (PNG, JPEG, WebP or GIF, up to " (media::MAX_UPLOAD_BYTES / (1024 * 1024)) " MiB)"
                    input type="file" name="file" accept="image/png,image/jpeg,image/webp,image/gif" required;
                }
                p.muted { "Images are stored without their metadata (camera, place) and at most " (media::MAX_WIDTH) " px wide. Put one in an issue with the Markdown shown beside it." }
                div.buttons { button type="submit" { "Upload" } }
            }
            @if images.is_empty() {
                p { "No images yet." }
            } @else {
                p.muted { "The newest " (media::PAGE_SIZE) " images are shown." }
                ul.media-list {
                    @for (image, uses, count) in images {
                        @let name = image.file_name();
                        @let code_id = format!("md-{}", &image.hash[..16]);
                        li.media-item {
                            img.thumb src={ (url) "/" (name) } width=(image.width) height=(image.height) alt="" loading="lazy";
                            div.media-facts {
                                p { (image.width) " × " (image.height) " px, " (size(image.bytes)) ", " (image.media_type.as_str().to_uppercase()) }
                                p.media-markdown {
                                    "Markdown: " code id=(code_id) { (markdown_of(image, site_origin)) }
                                    " " button.secondary type="button" data-copy={ "#" (code_id) } hidden { "Copy" }
                                }
                                @if *count == 0 {
                                    p.muted { "Not used in any issue." }
                                } @else {
                                    p {
                                        "Used in "
                                        @for (k, u) in uses.iter().enumerate() {
                                            @if k > 0 { ", " }
                                            a href={ "/newsletters/" (n.id) "/issues/" (u.issue_id) } { (u.subject) }
                                        }
                                        @if *count > uses.len() as i64 { " and " (*count - uses.len() as i64) " more" }
                                        "."
                                    }
                                }
                                form method="post" action={ (url) "/" (name) } {
                                    (csrf_field(ctx))
                                    input type="hidden" name="_method" value="delete";
                                    button.danger type="submit" aria-label={ "Delete image " (name) } { "Delete" }
                                }
                            }
                        }
                    }
                }
            }
            script src="/assets/widgets.js" defer {}
        },
    )
}

fn size(bytes: i64) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    } else {
        format!("{} KiB", (bytes + 1023) / 1024)
    }
}

async fn show_page(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    status: StatusCode,
    found: &FieldErrors,
) -> WebResult {
    let nid = n.id;
    let images = state.db.run(move |conn| media::list(conn, nid)).await?;
    let origin = n.site_origin(&state.urls);
    render(status, media_page(ctx, n, &origin, &images, found))
}

/// `GET /newsletters/:id/media`: the media page.
#[handler]
pub async fn index(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    show_page(&ctx, state, &n, StatusCode::OK, &FieldErrors::new()).await
}

/// What an upload form carried.
#[derive(Default)]
struct Posted {
    token: String,
    /// The issue whose editor sent it (`new` for the new-issue editor), to go back to.
    issue: String,
    file: Option<Vec<u8>>,
    /// The file was larger than the limit (and was read past, not kept).
    too_large: bool,
}

async fn read_form(mut multipart: Multipart) -> Result<Posted, WebError> {
    let unreadable =
        |e: &dyn std::fmt::Display| WebError::BadForm(format!("unreadable upload: {e}"));
    let mut posted = Posted::default();
    // Bytes read past (a file too large, fields nobody asked for): bounded, so a body of any
    // size costs at most this much reading before the answer.
    let mut read_past = 0u64;
    while let Some(field) = multipart.next_field().await.map_err(|e| unreadable(&e))? {
        let name = field.name().unwrap_or("").to_string();
        let mut reader = Box::pin(field.into_async_read());
        match name.as_str() {
            csrf::FIELD | "issue" => {
                let mut text = String::new();
                (&mut reader)
                    .take(256)
                    .read_to_string(&mut text)
                    .await
                    .map_err(|e| unreadable(&e))?;
                if name == "issue" {
                    posted.issue = text;
                } else {
                    posted.token = text;
                }
            }
            "file" if posted.file.is_none() && !posted.too_large => {
                let mut bytes = Vec::new();
                (&mut reader)
                    .take(media::MAX_UPLOAD_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)
                    .await
                    .map_err(|e| unreadable(&e))?;
                if bytes.len() > media::MAX_UPLOAD_BYTES {
                    posted.too_large = true;
                } else if !bytes.is_empty() {
                    posted.file = Some(bytes);
                }
            }
            _ => {}
        }
        // Whatever is left of this field is read past, within the bound; beyond it the
        // answer goes out with the rest unread (the forms send the token and `issue` first).
        let room = READ_PAST_LIMIT.saturating_sub(read_past);
        let skipped = tokio::io::copy(&mut (&mut reader).take(room + 1), &mut tokio::io::sink())
            .await
            .map_err(|e| unreadable(&e))?;
        read_past += skipped;
        if skipped > room {
            if posted.too_large {
                break;
            }
            return Err(WebError::BadForm("the upload form is too large".into()));
        }
    }
    Ok(posted)
}

/// Whether the request is the editor script's `fetch`, which wants JSON back.
fn wants_json(req: &Request) -> bool {
    req.header("Accept")
        .is_some_and(|a| a.contains("application/json"))
}

fn json(status: StatusCode, body: serde_json::Value) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json")
        .header("Cache-Control", "no-store")
        .body(body.to_string())
}

/// The project's JSON error body, for the script.
fn json_error(status: StatusCode, code: &str, message: &str) -> Response {
    json(
        status,
        serde_json::json!({ "error": { "code": code, "message": message, "details": {} } }),
    )
}

/// `POST /newsletters/:id/media`: a multipart form with the CSRF field, `file` and, from an
/// editor, `issue`. Success: 201 JSON for the script; otherwise back to the editor (or the
/// media page) with the Markdown to paste. A refused file stores nothing.
#[handler]
pub async fn upload(
    req: &Request,
    Path(id): Path<String>,
    multipart: poem::Result<Multipart>,
    Data(state): Data<&State>,
) -> WebResult {
    let as_json = wants_json(req);
    let result = upload_inner(req, &id, multipart, state, as_json).await;
    match result {
        Err(e) if as_json => {
            use poem::error::ResponseError;
            let (code, message) = match &e {
                WebError::BadCsrfToken => (
                    "invalid_csrf_token",
                    "This page's security token is out of date; reload the page and try again."
                        .to_string(),
                ),
                WebError::NotFound => ("not_found", "Not found.".to_string()),
                WebError::SignInRequired => (
                    "unauthorized",
                    "Sign in again, then try once more.".to_string(),
                ),
                WebError::BadForm(m) | WebError::Forbidden(m) => ("bad_request", m.clone()),
                _ => (
                    "internal_error",
                    "The image could not be saved; please try again.".to_string(),
                ),
            };
            let status = match e {
                WebError::SignInRequired => StatusCode::UNAUTHORIZED,
                _ => e.status(),
            };
            Ok(json_error(status, code, &message))
        }
        other => other,
    }
}

async fn upload_inner(
    req: &Request,
    id: &str,
    multipart: poem::Result<Multipart>,
    state: &State,
    as_json: bool,
) -> WebResult {
    // Only the newsletter's owner gets as far as sending a file.
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, id).await?;
    let multipart =
        multipart.map_err(|_| WebError::BadForm("expected a multipart/form-data upload".into()))?;
    let posted = read_form(multipart).await?;
    let form = FormData::parse(
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair(csrf::FIELD, &posted.token)
            .finish()
            .as_bytes(),
    );
    let ctx = Ctx::load_verified(req, state, &form).await?;
    n.ensure_writable()?;
    let back_to = editor_of(state, &n, &posted.issue).await?;
    let chosen = match (posted.file, posted.too_large) {
        (_, true) => Err(DomainError::invalid(
            "file",
            format!(
                "is too large (the limit is {} MiB)",
                media::MAX_UPLOAD_BYTES / (1024 * 1024)
            ),
        )),
        (None, false) => Err(DomainError::invalid(
            "file",
            "is missing; choose an image to upload",
        )),
        (Some(bytes), false) => Ok(bytes),
    };
    let stored = match chosen {
        Ok(bytes) => {
            let _turn = PROCESSING
                .acquire()
                .await
                .map_err(|e| WebError::Internal(e.to_string()))?;
            let nid = n.id;
            state
                .db
                .run_after(
                    move || media::process(&bytes),
                    move |conn, processed| {
                        let dir = media::media_dir(conn)?;
                        media::store(conn, &dir, nid, &processed)
                    },
                )
                .await
        }
        Err(e) => Err(e),
    };
    let origin = n.site_origin(&state.urls);
    match stored {
        Ok(image) => {
            let markdown = markdown_of(&image, &origin);
            if as_json {
                return Ok(json(
                    StatusCode::CREATED,
                    serde_json::json!({
                        "url": image.url(&origin),
                        "markdown": markdown,
                        "width": image.width,
                        "height": image.height,
                        "type": image.media_type.as_str(),
                    }),
                ));
            }
            ctx.notice_next(
                req,
                &format!("Image uploaded. Put it in the Markdown where it should show: {markdown}"),
            );
            see_other(&match &back_to {
                Editor::Existing(issue) => {
                    format!("/newsletters/{}/issues/{}/edit", n.id, issue.id)
                }
                Editor::New => format!("/newsletters/{}/issues/new", n.id),
                Editor::None => media_url(n.id),
            })
        }
        Err(e) => {
            let found = super::problems(e)?;
            if as_json {
                let message = found.sentences().join(" ");
                return Ok(json_error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "validation_error",
                    &message,
                ));
            }
            match back_to {
                Editor::None => {
                    show_page(&ctx, state, &n, StatusCode::UNPROCESSABLE_ENTITY, &found).await
                }
                editor => {
                    let issue = match editor {
                        Editor::Existing(issue) => Some(*issue),
                        _ => None,
                    };
                    render_editor(&ctx, &n, issue.as_ref(), &found)
                }
            }
        }
    }
}

fn render_editor(
    ctx: &Ctx,
    n: &Newsletter,
    issue: Option<&Issue>,
    found: &FieldErrors,
) -> WebResult {
    super::form::saved_editor(ctx, n, issue, found, StatusCode::UNPROCESSABLE_ENTITY)
}

/// Where an upload goes back to.
enum Editor {
    Existing(Box<Issue>),
    New,
    None,
}

/// The editor named by an upload's `issue` field: one of this newsletter's editable issues,
/// the new-issue editor, or none (the media page; also for an issue no longer editable).
async fn editor_of(state: &State, n: &Newsletter, raw: &str) -> Result<Editor, WebError> {
    match raw.trim() {
        "" => Ok(Editor::None),
        "new" => Ok(Editor::New),
        raw => {
            let (nid, issue_id) = (n.id, parse_id(raw)?);
            let issue = state
                .db
                .run(move |conn| issues::get(conn, nid, issue_id))
                .await?;
            Ok(if issue.status.is_editable() {
                Editor::Existing(Box::new(issue))
            } else {
                Editor::None
            })
        }
    }
}

/// `GET /newsletters/:id/media/:file`: the owner's copy of an image, for the thumbnails.
#[handler]
pub async fn file(
    req: &Request,
    Path((id, name)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let (hash, media_type) = media::parse_file_name(&name).ok_or(WebError::NotFound)?;
    let nid = n.id;
    let bytes = state
        .db
        .run(move |conn| {
            let image = media::get(conn, nid, &hash)?;
            if image.media_type != media_type {
                return Err(DomainError::NotFound("image"));
            }
            let dir = media::media_dir(conn)?;
            std::fs::read(dir.join(image.file_name()))
                .map_err(|_| DomainError::NotFound("image file"))
        })
        .await?;
    Ok(Response::builder()
        .content_type(media_type.content_type())
        .header("Cache-Control", "private, max-age=31536000, immutable")
        .body(bytes))
}

/// `POST /newsletters/:id/media/:file` with `_method=delete` (or a real DELETE): deletes the
/// image, refused while an issue uses it.
#[handler]
pub async fn delete(
    req: &Request,
    Path((id, name)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let n = owned(&ctx, state, &id).await?;
    let method = match form.get("_method") {
        "" => req.method().as_str().to_ascii_lowercase(),
        given => given.to_ascii_lowercase(),
    };
    if method != "delete" {
        return Err(WebError::NotFound);
    }
    let (hash, _) = media::parse_file_name(&name).ok_or(WebError::NotFound)?;
    let nid = n.id;
    let deleted = state
        .db
        .run(move |conn| {
            let dir = media::media_dir(conn)?;
            media::delete(conn, &dir, nid, &hash)
        })
        .await;
    match deleted {
        Ok(()) => {
            ctx.notice_next(req, "Image deleted.");
            see_other(&media_url(n.id))
        }
        Err(e) => {
            let found = super::problems(e)?;
            show_page(&ctx, state, &n, StatusCode::UNPROCESSABLE_ENTITY, &found).await
        }
    }
}

/// `GET /assets/media.js`: drop or paste an image into the editor's Markdown box.
#[handler]
pub fn script() -> Response {
    asset(
        JAVASCRIPT,
        crate::http::public_page::FOR_AN_HOUR,
        include_str!("../../../assets/media.js"),
    )
}

/// A warning for Markdown whose rendered `html` shows images from `http://` addresses, or
/// `None`: an https site blocks them (mixed content) and many mail clients do too.
/// The newsletter's own images (`n`'s site, on its subdomain or custom domain) are not
/// flagged: where the service itself runs on plain http, so do they.
pub fn http_image_warning(state: &State, n: &Newsletter, html: &str) -> Option<String> {
    let own = [
        format!("{}/media/", n.site_origin(&state.urls)),
        format!("{}/media/", state.urls.subdomain_origin(&n.subdomain)),
    ];
    let found = media::insecure_images(html, &own, 3);
    let first = found.first()?;
    let shown: String = first.chars().take(120).collect();
    Some(format!(
        "Warning: {} in this issue {} a plain http:// address ({shown}{}): {} not show on the https site and in many mail clients. Use an https:// address, or upload the image here.",
        if found.len() == 1 {
            "an image"
        } else {
            "images"
        },
        if found.len() == 1 { "has" } else { "have" },
        if found.len() > 1 { ", …" } else { "" },
        if found.len() == 1 {
            "it will"
        } else {
            "they will"
        },
    ))
}
