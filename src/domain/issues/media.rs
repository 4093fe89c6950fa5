//! Images for issues (docs/images.md): an upload is decoded within limits, turned the way its
//! EXIF orientation says, scaled down to [`MAX_WIDTH`] and encoded again, which leaves every
//! byte of its metadata (EXIF, GPS, comments, colour profiles) behind. The result is kept
//! once in `<data-dir>/media/<sha256>.<type>` and recorded per newsletter in `media`; each
//! save of an issue's Markdown records the images it names in `issue_media`, so the media
//! page says where each is used and an image in use cannot be deleted.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};
use rusqlite::{Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use crate::clock::Timestamp;
use crate::domain::{DomainError, DomainResult, ErrorCode};
use crate::store::{StoreError, write_tx};

/// The largest upload, in bytes: a large phone photo is 3 to 8 MiB.
pub const MAX_UPLOAD_BYTES: usize = 10 * 1024 * 1024;
/// The most pixels an upload may have (width times height, 40 megapixels): checked from its
/// header before any pixel is decoded, so a small file that unpacks to gigabytes (a
/// decompression bomb) is refused unread.
pub const MAX_PIXELS: u64 = 40_000_000;
/// Neither side may be longer than this.
pub const MAX_SIDE: u32 = 20_000;
/// Memory the decoder may take for one image (40 megapixels of RGBA is 160 MB).
const MAX_DECODE_BYTES: u64 = 256 * 1024 * 1024;
/// Wider images are scaled down to this width, keeping their aspect: the sites' column and
/// mail are at most 700 px wide, so this is sharp on screens of twice the density.
pub const MAX_WIDTH: u32 = 1600;
/// A re-encoded image larger than this is refused (a very tall lossless picture).
pub const MAX_STORED_BYTES: usize = 20 * 1024 * 1024;
/// JPEG quality of re-encoded photos.
const JPEG_QUALITY: u8 = 85;
/// The "used in" issues listed per image.
pub const USES_SHOWN: i64 = 10;
/// Images listed on the media page.
pub const PAGE_SIZE: i64 = 100;

const FIELD: &str = "file";

/// How an image is stored and served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaType {
    Png,
    Jpeg,
    Webp,
}

impl MediaType {
    pub fn as_str(self) -> &'static str {
        match self {
            MediaType::Png => "png",
            MediaType::Jpeg => "jpeg",
            MediaType::Webp => "webp",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "png" => Some(MediaType::Png),
            "jpeg" => Some(MediaType::Jpeg),
            "webp" => Some(MediaType::Webp),
            _ => None,
        }
    }

    /// The file name extension (also in the URL).
    pub fn extension(self) -> &'static str {
        match self {
            MediaType::Png => "png",
            MediaType::Jpeg => "jpg",
            MediaType::Webp => "webp",
        }
    }

    pub fn from_extension(ext: &str) -> Option<Self> {
        match ext {
            "png" => Some(MediaType::Png),
            "jpg" => Some(MediaType::Jpeg),
            "webp" => Some(MediaType::Webp),
            _ => None,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            MediaType::Png => "image/png",
            MediaType::Jpeg => "image/jpeg",
            MediaType::Webp => "image/webp",
        }
    }
}

/// An image ready to store: re-encoded bytes and what the record says of them.
#[derive(Debug, Clone)]
pub struct Processed {
    pub hash: String,
    pub media_type: MediaType,
    pub width: u32,
    pub height: u32,
    pub bytes: Vec<u8>,
}

/// One recorded image of a newsletter.
#[derive(Debug, Clone, PartialEq)]
pub struct Media {
    pub hash: String,
    pub media_type: MediaType,
    pub width: u32,
    pub height: u32,
    pub bytes: i64,
    pub created_at: Timestamp,
}

impl Media {
    /// `<hash>.<ext>`: the file's name and the last part of its URL.
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.hash, self.media_type.extension())
    }

    /// The image's absolute URL on the newsletter's site (`site_origin`, without a slash
    /// at the end): what goes into Markdown, so it shows on the site and in mail alike.
    pub fn url(&self, site_origin: &str) -> String {
        format!("{site_origin}/media/{}", self.file_name())
    }
}

/// An issue that names an image.
#[derive(Debug, Clone, PartialEq)]
pub struct Use {
    pub issue_id: i64,
    pub subject: String,
}

fn refused(message: impl Into<String>) -> DomainError {
    DomainError::invalid(FIELD, message)
}

/// A name `<64 hex>.<ext>` read back into its hash and type; `None` for anything else.
pub fn parse_file_name(name: &str) -> Option<(String, MediaType)> {
    let (hash, ext) = name.split_once('.')?;
    let hex = hash.len() == 64
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    Some((hash.to_string(), MediaType::from_extension(ext)?)).filter(|_| hex)
}

/// Decodes `upload` (PNG, JPEG, WebP or GIF, told by its bytes, not its name), turns it
/// upright, scales it to at most [`MAX_WIDTH`] wide and encodes it again: PNG stays PNG,
/// JPEG stays JPEG, WebP stays WebP (lossless), and a GIF becomes a PNG of its first frame.
/// CPU-bound (up to a second or two for a large photo): call it on a blocking thread.
pub fn process(upload: &[u8]) -> DomainResult<Processed> {
    if upload.is_empty() {
        return Err(refused("is empty; choose an image file"));
    }
    if upload.len() > MAX_UPLOAD_BYTES {
        return Err(refused(format!(
            "is too large (the limit is {} MiB)",
            MAX_UPLOAD_BYTES / (1024 * 1024)
        )));
    }
    let not_an_image = || refused("is not a PNG, JPEG, WebP or GIF image");
    let mut reader = ImageReader::new(Cursor::new(upload))
        .with_guessed_format()
        .map_err(|_| not_an_image())?;
    let format = reader.format().ok_or_else(not_an_image)?;
    let stored = match format {
        ImageFormat::Png | ImageFormat::Gif => MediaType::Png,
        ImageFormat::Jpeg => MediaType::Jpeg,
        ImageFormat::WebP => MediaType::Webp,
        _ => return Err(not_an_image()),
    };
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let unreadable = |e: image::ImageError| match e {
        image::ImageError::Limits(_) => too_many_pixels(),
        _ => refused("could not be read as an image (it may be damaged or cut short)"),
    };
    let mut decoder = reader.into_decoder().map_err(unreadable)?;
    let (width, height) = decoder.dimensions();
    if u64::from(width) * u64::from(height) > MAX_PIXELS || width > MAX_SIDE || height > MAX_SIDE {
        return Err(too_many_pixels());
    }
    if width == 0 || height == 0 {
        return Err(not_an_image());
    }
    let orientation = decoder.orientation().ok();
    let mut picture = DynamicImage::from_decoder(decoder).map_err(unreadable)?;
    if let Some(orientation) = orientation {
        picture.apply_orientation(orientation);
    }
    let picture = scaled(picture);
    let bytes = encode(&picture, stored)?;
    if bytes.len() > MAX_STORED_BYTES {
        return Err(refused(format!(
            "is too large once prepared for the web (more than {} MiB); crop or shrink it first",
            MAX_STORED_BYTES / (1024 * 1024)
        )));
    }
    Ok(Processed {
        hash: hex::encode(Sha256::digest(&bytes)),
        media_type: stored,
        width: picture.width(),
        height: picture.height(),
        bytes,
    })
}

fn too_many_pixels() -> DomainError {
    refused(format!(
        "has too many pixels (the limit is {} megapixels, and {} px a side)",
        MAX_PIXELS / 1_000_000,
        MAX_SIDE
    ))
}

/// `picture` at most [`MAX_WIDTH`] wide, its aspect kept.
fn scaled(picture: DynamicImage) -> DynamicImage {
    let (width, height) = (picture.width(), picture.height());
    if width <= MAX_WIDTH {
        return picture;
    }
    let new_height = ((u64::from(height) * u64::from(MAX_WIDTH) + u64::from(width) / 2)
        / u64::from(width))
    .max(1) as u32;
    picture.resize_exact(
        MAX_WIDTH,
        new_height,
        image::imageops::FilterType::CatmullRom,
    )
}

fn encode(picture: &DynamicImage, as_type: MediaType) -> DomainResult<Vec<u8>> {
    let mut out = Vec::new();
    let written = match as_type {
        MediaType::Png => picture.write_with_encoder(image::codecs::png::PngEncoder::new(&mut out)),
        // JPEG has no alpha channel; WebP's lossless encoder takes 8-bit RGB(A) only.
        MediaType::Jpeg => DynamicImage::ImageRgb8(picture.to_rgb8()).write_with_encoder(
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY),
        ),
        MediaType::Webp => {
            let eight_bit = if picture.color().has_alpha() {
                DynamicImage::ImageRgba8(picture.to_rgba8())
            } else {
                DynamicImage::ImageRgb8(picture.to_rgb8())
            };
            eight_bit.write_with_encoder(image::codecs::webp::WebPEncoder::new_lossless(&mut out))
        }
    };
    written.map_err(|_| refused("could not be prepared for the web; try another format"))?;
    Ok(out)
}

/// `<data-dir>/media`, next to the database `conn` has open; made when missing.
pub fn media_dir(conn: &Connection) -> DomainResult<PathBuf> {
    let db = conn.path().filter(|p| !p.is_empty()).ok_or_else(|| {
        DomainError::Store(StoreError::Io(std::io::Error::other(
            "an in-memory database has no data directory for images",
        )))
    })?;
    let dir = Path::new(db)
        .parent()
        .unwrap_or(Path::new("."))
        .join("media");
    std::fs::create_dir_all(&dir).map_err(StoreError::from)?;
    Ok(dir)
}

/// Writes the file of `image` into `dir` (unless it is there: the name is its content) and
/// records it for newsletter `newsletter_id`; uploading the same picture again returns the
/// record made the first time. The file is written under a temporary name and renamed, so
/// no one ever reads half of it; when the record cannot be made, a file this call wrote is
/// removed again.
pub fn store(
    conn: &mut Connection,
    dir: &Path,
    newsletter_id: i64,
    image: &Processed,
) -> DomainResult<Media> {
    let path = dir.join(format!("{}.{}", image.hash, image.media_type.extension()));
    let wrote = if path.is_file() {
        false
    } else {
        let partial = dir.join(format!(".{}.{}.partial", image.hash, rand::random::<u64>()));
        let written = std::fs::write(&partial, &image.bytes)
            .and_then(|()| std::fs::File::open(&partial)?.sync_all())
            .and_then(|()| std::fs::rename(&partial, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&partial);
            return Err(StoreError::from(e).into());
        }
        true
    };
    let recorded = write_tx(conn, |tx| {
        crate::domain::newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        tx.execute(
            "INSERT INTO media (newsletter_id, hash, type, width, height, bytes, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (newsletter_id, hash) DO NOTHING",
            (
                newsletter_id,
                &image.hash,
                image.media_type.as_str(),
                image.width,
                image.height,
                image.bytes.len() as i64,
                Timestamp::now(),
            ),
        )?;
        get(tx, newsletter_id, &image.hash)
    });
    if recorded.is_err() && wrote {
        let _ = std::fs::remove_file(&path);
    }
    recorded
}

fn from_row(row: &rusqlite::Row) -> rusqlite::Result<Media> {
    let kind: String = row.get(1)?;
    Ok(Media {
        hash: row.get(0)?,
        media_type: MediaType::parse(&kind).unwrap_or(MediaType::Png),
        width: row.get(2)?,
        height: row.get(3)?,
        bytes: row.get(4)?,
        created_at: row.get(5)?,
    })
}

/// The image `hash` of newsletter `newsletter_id`; another newsletter's is not found.
pub fn get(conn: &Connection, newsletter_id: i64, hash: &str) -> DomainResult<Media> {
    conn.query_row(
        "SELECT hash, type, width, height, bytes, created_at
         FROM media WHERE newsletter_id = ?1 AND hash = ?2",
        (newsletter_id, hash),
        from_row,
    )
    .optional()?
    .ok_or(DomainError::NotFound("image"))
}

/// The newest [`PAGE_SIZE`] images of a newsletter, with the first [`USES_SHOWN`] issues
/// each is used in and how many there are.
pub fn list(conn: &Connection, newsletter_id: i64) -> DomainResult<Vec<(Media, Vec<Use>, i64)>> {
    let images: Vec<Media> = conn
        .prepare_cached(
            "SELECT hash, type, width, height, bytes, created_at FROM media
             WHERE newsletter_id = ?1 ORDER BY created_at DESC, hash DESC LIMIT ?2",
        )?
        .query_map((newsletter_id, PAGE_SIZE), from_row)?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(images.len());
    for image in images {
        let (uses, count) = uses(conn, newsletter_id, &image.hash)?;
        out.push((image, uses, count));
    }
    Ok(out)
}

/// The issues (newest first, at most [`USES_SHOWN`]) whose Markdown names `hash`, and how
/// many do. Reads the `issue_media` index, never the issues' text.
pub fn uses(conn: &Connection, newsletter_id: i64, hash: &str) -> DomainResult<(Vec<Use>, i64)> {
    let shown = conn
        .prepare_cached(
            "SELECT i.id, i.subject FROM issue_media u JOIN issues i ON i.id = u.issue_id
             WHERE u.newsletter_id = ?1 AND u.hash = ?2 ORDER BY u.issue_id DESC LIMIT ?3",
        )?
        .query_map((newsletter_id, hash, USES_SHOWN), |r| {
            Ok(Use {
                issue_id: r.get(0)?,
                subject: r.get(1)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let count = conn.query_row(
        "SELECT count(*) FROM issue_media WHERE newsletter_id = ?1 AND hash = ?2",
        (newsletter_id, hash),
        |r| r.get(0),
    )?;
    Ok((shown, count))
}

/// Deletes newsletter `newsletter_id`'s image `hash`, refused (`invalid_state`, nothing
/// deleted) while an issue's Markdown names it. The file goes too unless another newsletter
/// has the same picture.
pub fn delete(
    conn: &mut Connection,
    dir: &Path,
    newsletter_id: i64,
    hash: &str,
) -> DomainResult<()> {
    let image = write_tx(conn, |tx| {
        crate::domain::newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        let image = get(tx, newsletter_id, hash)?;
        let (uses, count) = uses(tx, newsletter_id, hash)?;
        if count > 0 {
            let named: Vec<String> = uses.iter().map(|u| format!("“{}”", u.subject)).collect();
            return Err(DomainError::rejected(
                ErrorCode::InvalidState,
                format!(
                    "This image is used in {count} {} ({}); take it out of {} first. Nothing was deleted.",
                    if count == 1 { "issue" } else { "issues" },
                    named.join(", "),
                    if count == 1 {
                        "that issue"
                    } else {
                        "those issues"
                    }
                ),
            ));
        }
        tx.execute(
            "DELETE FROM media WHERE newsletter_id = ?1 AND hash = ?2",
            (newsletter_id, hash),
        )?;
        let shared: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM media WHERE hash = ?1)",
            [hash],
            |r| r.get(0),
        )?;
        Ok((image, shared))
    })?;
    let (image, shared) = image;
    if !shared {
        // The record is gone; a file left behind (a failed removal) is never served.
        let _ = std::fs::remove_file(dir.join(image.file_name()));
    }
    Ok(())
}

/// The hashes of the images `markdown` names: every `/media/<64 hex>.<ext>` in it, in a
/// link, an image or plain text alike (an image named anywhere counts as used). One pass.
pub fn named_hashes(markdown: &str) -> Vec<String> {
    const MARK: &str = "/media/";
    let mut found: Vec<String> = Vec::new();
    let mut rest = markdown;
    while let Some(at) = rest.find(MARK) {
        let after = &rest[at + MARK.len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
            .unwrap_or(after.len());
        if let Some((hash, _)) = parse_file_name(&after[..end])
            && !found.contains(&hash)
        {
            found.push(hash);
        }
        rest = after;
    }
    found
}

/// Records which images issue `issue_id`'s Markdown names, replacing what was recorded:
/// called in the transaction that saves the Markdown.
pub fn record_uses(
    conn: &Connection,
    newsletter_id: i64,
    issue_id: i64,
    markdown: &str,
) -> DomainResult<()> {
    conn.execute("DELETE FROM issue_media WHERE issue_id = ?1", [issue_id])?;
    let mut insert = conn.prepare_cached(
        "INSERT OR IGNORE INTO issue_media (newsletter_id, hash, issue_id) VALUES (?1, ?2, ?3)",
    )?;
    for hash in named_hashes(markdown) {
        insert.execute((newsletter_id, &hash, issue_id))?;
    }
    Ok(())
}

/// The `http://` image addresses in rendered `html` (the `src` of its `<img>` tags), at most
/// `limit` of them: images a site served over https does not show, nor do many mail clients.
/// Addresses starting with one of `own` (the newsletter's own images, `http://` only where
/// the whole service is) are not counted.
pub fn insecure_images(html: &str, own: &[String], limit: usize) -> Vec<String> {
    const MARK: &str = "<img src=\"";
    let mut found = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(MARK) {
        let after = &rest[at + MARK.len()..];
        let end = after.find('"').unwrap_or(after.len());
        let src = &after[..end];
        let plain_http = src
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
        if plain_http && !own.iter().any(|prefix| src.starts_with(prefix.as_str())) {
            if found.len() == limit {
                break;
            }
            found.push(src.replace("&amp;", "&"));
        }
        rest = &after[end..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let picture = image::RgbImage::from_fn(width, height, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 90])
        });
        let mut out = Vec::new();
        DynamicImage::ImageRgb8(picture)
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .unwrap();
        out
    }

    #[test]
    fn wide_images_are_scaled_to_the_maximum_width_keeping_their_aspect() {
        let done = process(&png(3200, 1000)).unwrap();
        assert_eq!((done.width, done.height), (1600, 500));
        assert_eq!(done.media_type, MediaType::Png);
        assert_eq!(done.hash, hex::encode(Sha256::digest(&done.bytes)));
        let small = process(&png(40, 30)).unwrap();
        assert_eq!((small.width, small.height), (40, 30));
    }

    /// A phone photo taken upright is stored landscape with an EXIF orientation; stored
    /// without EXIF, it must be turned first.
    #[test]
    fn the_exif_orientation_is_applied_before_it_is_dropped() {
        let mut jpeg = Vec::new();
        DynamicImage::ImageRgb8(image::RgbImage::new(40, 20))
            .write_to(&mut Cursor::new(&mut jpeg), ImageFormat::Jpeg)
            .unwrap();
        // TIFF, little-endian, IFD0 with one entry: Orientation (0x0112) = 6 (turn right).
        let mut tiff = b"II\x2a\x00\x08\x00\x00\x00\x01\x00".to_vec();
        tiff.extend([0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0]);
        let mut body = b"Exif\0\0".to_vec();
        body.extend(tiff);
        let mut with_exif = jpeg[..2].to_vec();
        with_exif.extend([0xff, 0xe1]);
        with_exif.extend(((body.len() + 2) as u16).to_be_bytes());
        with_exif.extend(body);
        with_exif.extend(&jpeg[2..]);
        let done = process(&with_exif).unwrap();
        assert_eq!((done.width, done.height), (20, 40));
        assert!(!done.bytes.windows(4).any(|w| w == b"Exif"));
    }

    #[test]
    fn what_is_not_an_image_or_is_cut_short_is_refused() {
        assert!(process(b"GIF89a but not really").is_err());
        assert!(process(b"hello, world").is_err());
        let whole = png(64, 64);
        assert!(process(&whole[..whole.len() / 2]).is_err());
        assert!(process(&[]).is_err());
    }

    #[test]
    fn file_names_and_named_hashes() {
        let hash = "a".repeat(64);
        assert_eq!(
            parse_file_name(&format!("{hash}.jpg")),
            Some((hash.clone(), MediaType::Jpeg))
        );
        assert_eq!(parse_file_name(&format!("{hash}.gif")), None);
        assert_eq!(parse_file_name(&format!("{}.png", "A".repeat(64))), None);
        assert_eq!(parse_file_name("../x.png"), None);
        let markdown = format!(
            "![a](https://n.example.com/media/{hash}.png) and again /media/{hash}.png, \
             [b](/media/{}.webp) /media/short.png",
            "b".repeat(64)
        );
        assert_eq!(named_hashes(&markdown), [hash, "b".repeat(64)]);
    }

    /// Every read of the media page, the site and a delete is an index search, never a scan
    /// of every newsletter's images or every issue.
    #[test]
    fn reads_use_the_indexes() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::store::migrate(&mut conn).unwrap();
        let plan = |sql: &str| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows: Vec<String> = stmt
                .query_map([], |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            rows.join("; ")
        };
        let listing = plan(
            "SELECT hash, type, width, height, bytes, created_at FROM media \
             WHERE newsletter_id = 1 ORDER BY created_at DESC, hash DESC LIMIT 100",
        );
        assert!(listing.contains("media_by_newsletter"), "{listing}");
        assert!(!listing.contains("TEMP B-TREE"), "{listing}");
        let shared = plan("SELECT EXISTS (SELECT 1 FROM media WHERE hash = 'x')");
        assert!(shared.contains("media_by_hash"), "{shared}");
        let uses = plan(
            "SELECT i.id, i.subject FROM issue_media u JOIN issues i ON i.id = u.issue_id \
             WHERE u.newsletter_id = 1 AND u.hash = 'x' ORDER BY u.issue_id DESC LIMIT 10",
        );
        assert!(uses.contains("SEARCH u USING PRIMARY KEY"), "{uses}");
        assert!(!uses.contains("SCAN i"), "{uses}");
        let by_issue = plan("DELETE FROM issue_media WHERE issue_id = 1");
        assert!(by_issue.contains("issue_media_by_issue"), "{by_issue}");
    }

    #[test]
    fn insecure_images_are_the_plain_http_ones() {
        let html = "<p><img src=\"http://a.example/x.png?a=1&amp;b=2\" alt=\"\" />\
                    <img src=\"https://b.example/y.png\" alt=\"\" />\
                    <img src=\"HTTP://c.example/z.png\" alt=\"\" /></p>";
        assert_eq!(
            insecure_images(html, &[], 10),
            ["http://a.example/x.png?a=1&b=2", "HTTP://c.example/z.png"]
        );
        assert_eq!(insecure_images(html, &[], 1).len(), 1);
        let own = ["http://a.example/".to_string()];
        assert_eq!(insecure_images(html, &own, 10), ["HTTP://c.example/z.png"]);
    }
}
