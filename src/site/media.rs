//! `/media/<hash>.<ext>`: the images a newsletter's owner uploaded (docs/images.md), served
//! by its site to readers and mail clients. A file's address names its content, so it is
//! cached for a year as immutable; the site serves only the images its own newsletter has
//! (the file may be shared with another newsletter's upload of the same picture).

use poem::web::{Data, Path};
use poem::{Response, handler};

use super::{Site, SiteError, SiteResult};
use crate::domain::DomainError;
use crate::domain::issues::media;
use crate::http::public_page::IMMUTABLE;
use crate::state::AppState;

type State = std::sync::Arc<AppState>;

#[handler]
pub async fn image(
    Path(name): Path<String>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let (hash, media_type) = media::parse_file_name(&name).ok_or(SiteError::NotFound)?;
    let nid = site.0.id;
    let bytes = state
        .db
        .run(move |conn| {
            let image = media::get(conn, nid, &hash)?;
            if image.media_type != media_type {
                return Err(DomainError::NotFound("image"));
            }
            std::fs::read(media::media_dir(conn)?.join(image.file_name()))
                .map_err(|_| DomainError::NotFound("image file"))
        })
        .await
        .map_err(|e| SiteError::domain(e, site, "serving an image"))?;
    Ok(Response::builder()
        .content_type(media_type.content_type())
        .header("Cache-Control", IMMUTABLE)
        .body(bytes))
}
