//! Images for issues, through the real binary: uploads over multipart with the session and
//! CSRF token (the no-JavaScript form and the editor script's JSON answer), re-encoding that
//! strips EXIF and GPS and caps the width, the site's answer (headers), refusals that store
//! nothing, delete refused while an issue uses the image, other accounts' 404s, the
//! editor's warning about `http://` images, backup and restore, and the media page in
//! Chromium (no sideways scroll at 1280 and 390 px, axe clean; a pasted image uploaded).

use std::io::Cursor;
use std::path::Path;

use base64::Engine;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader};

use crate::support::axe::Axe;
use crate::support::browser::{Driver, runtime, screenshot, sign_in, wait_for_element};
use crate::support::http::{Resp, unescape};
use crate::support::*;

/// A camera maker that only the test's EXIF block holds.
const CAMERA: &str = "SpyCam9000";

fn media_page(owner: &Owner) -> String {
    format!("/newsletters/{}/media", owner.newsletter_id)
}

/// A photo-like RGB picture.
pub(crate) fn picture(width: u32, height: u32) -> DynamicImage {
    DynamicImage::ImageRgb8(image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 251) as u8, (y % 241) as u8, ((x + y) % 239) as u8])
    }))
}

pub(crate) fn encoded(picture: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Vec::new();
    picture
        .write_to(&mut Cursor::new(&mut out), format)
        .unwrap();
    out
}

/// An EXIF block (APP1) naming the camera [`CAMERA`] and a GPS position, as phones write it:
/// a little-endian TIFF structure with IFD0 (Make, GPSInfo) and a GPS IFD (latitude).
fn exif_segment() -> Vec<u8> {
    let mut tiff: Vec<u8> = b"II\x2a\x00\x08\x00\x00\x00".to_vec();
    let entry = |tag: u16, kind: u16, count: u32, value: u32| {
        let mut e = tag.to_le_bytes().to_vec();
        e.extend(kind.to_le_bytes());
        e.extend(count.to_le_bytes());
        e.extend(value.to_le_bytes());
        e
    };
    // IFD0 at 8: two entries (30 bytes), then the maker's name at 38, the GPS IFD at 50.
    tiff.extend(2u16.to_le_bytes());
    tiff.extend(entry(0x010f, 2, CAMERA.len() as u32 + 1, 38));
    tiff.extend(entry(0x8825, 4, 1, 50));
    tiff.extend(0u32.to_le_bytes());
    tiff.extend(CAMERA.as_bytes());
    tiff.push(0);
    tiff.resize(50, 0);
    // The GPS IFD: latitude reference "N" (inline) and latitude 52° 31' 0" at 80.
    tiff.extend(2u16.to_le_bytes());
    tiff.extend(entry(0x0001, 2, 2, u32::from_le_bytes(*b"N\0\0\0")));
    tiff.extend(entry(0x0002, 5, 3, 80));
    tiff.extend(0u32.to_le_bytes());
    for (num, den) in [(52u32, 1u32), (31, 1), (0, 1)] {
        tiff.extend(num.to_le_bytes());
        tiff.extend(den.to_le_bytes());
    }
    let mut body = b"Exif\0\0".to_vec();
    body.extend(tiff);
    let mut segment = vec![0xff, 0xe1];
    segment.extend(((body.len() + 2) as u16).to_be_bytes());
    segment.extend(body);
    segment
}

/// A JPEG `width` × `height` carrying [`exif_segment`] right after its start marker.
fn jpeg_with_exif(width: u32, height: u32) -> Vec<u8> {
    let plain = encoded(&picture(width, height), ImageFormat::Jpeg);
    assert_eq!(&plain[..2], [0xff, 0xd8]);
    let mut out = plain[..2].to_vec();
    out.extend(exif_segment());
    out.extend(&plain[2..]);
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The CRC-32 of PNG chunks.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
    let mut body = kind.to_vec();
    body.extend(data);
    chunk.extend(&body);
    chunk.extend(crc32(&body).to_be_bytes());
    chunk
}

/// A small file whose PNG header claims `width` × `height` pixels: a decompression bomb's
/// shape, refused from its header alone.
fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = width.to_be_bytes().to_vec();
    header.extend(height.to_be_bytes());
    header.extend([8, 2, 0, 0, 0]);
    out.extend(png_chunk(b"IHDR", &header));
    out.extend(png_chunk(b"IDAT", &[0x78, 0x9c, 0x03, 0x00]));
    out.extend(png_chunk(b"IEND", &[]));
    out
}

/// A multipart upload form: the CSRF token, `issue` when given, and `file`.
fn upload_body(token: &str, issue: Option<&str>, name: &str, content: &[u8]) -> (String, Vec<u8>) {
    let boundary = "----broadsheet-media-5e2c";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"authenticity_token\"\r\n\r\n{token}\r\n"
    );
    if let Some(issue) = issue {
        body.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"issue\"\r\n\r\n{issue}\r\n"
        ));
    }
    body.push_str(&format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    ));
    let mut bytes = body.into_bytes();
    bytes.extend_from_slice(content);
    bytes.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), bytes)
}

/// Uploads `content` to newsletter `nid` with a token from `client`'s own media page of
/// `form_nid`; `json` asks for the script's JSON answer.
fn upload_to(
    client: &Client,
    form_nid: i64,
    nid: i64,
    issue: Option<&str>,
    content: &[u8],
    json: bool,
) -> Resp {
    let page = client.get(&format!("/newsletters/{form_nid}/media"));
    page.expect(200);
    let (content_type, body) = upload_body(&page.csrf_token(), issue, "photo.jpg", content);
    let accept: &[(&str, &str)] = if json {
        &[("Accept", "application/json")]
    } else {
        &[]
    };
    client
        .request(
            "POST",
            &format!("/newsletters/{nid}/media"),
            accept,
            Some((&content_type, body)),
        )
        .expect("the upload is answered")
}

fn upload(owner: &Owner, content: &[u8]) -> Resp {
    upload_to(
        &owner.client,
        owner.newsletter_id,
        owner.newsletter_id,
        None,
        content,
        true,
    )
}

/// Uploads through the script's JSON answer; returns the image's absolute URL.
pub(crate) fn uploaded_url(owner: &Owner, content: &[u8]) -> String {
    let resp = upload(owner, content);
    resp.expect(201);
    let body = resp.json();
    let url = body["url"].as_str().expect("url").to_string();
    assert_eq!(body["markdown"], format!("![]({url})"));
    url
}

/// A GET to `url` (absolute, on a site's host) read as bytes: status, headers, body.
fn fetch(app: &App, url: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let parsed = url::Url::parse(url).unwrap();
    let host = format!(
        "{}:{}",
        parsed.host_str().unwrap(),
        parsed.port().unwrap_or(80)
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let request = ureq::http::Request::builder()
        .uri(format!("{}{}", app.base_url, parsed.path()))
        .header("Host", host)
        .body(())
        .unwrap();
    let mut response = agent.run(request).unwrap();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_vec()
        .unwrap();
    (status, headers, body)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The files in the data directory's media folder.
fn media_files(data_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir.join("media"))
        .map(|dir| {
            dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn file_name_of(url: &str) -> String {
    url.rsplit('/').next().unwrap().to_string()
}

/// Creates an issue with `markdown` through the editor; returns its id.
fn issue_with(owner: &Owner, subject: &str, markdown: &str) -> i64 {
    let resp = owner.client.submit(
        &format!("/newsletters/{}/issues/new", owner.newsletter_id),
        &format!("/newsletters/{}/issues", owner.newsletter_id),
        &editor(subject, markdown, "save"),
    );
    resp.redirect()
        .rsplit('/')
        .next()
        .and_then(|s| s.parse().ok())
        .expect("the new issue's id")
}

fn editor<'a>(subject: &'a str, markdown: &'a str, commit: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("issue[subject]", subject),
        ("issue[content_markdown]", markdown),
        ("issue[status]", "draft"),
        ("issue[scheduled_for]", ""),
        ("commit", commit),
    ]
}

#[test]
fn uploads_are_reencoded_without_metadata_capped_in_width_and_served_immutable() {
    let app = spawn_app();
    let owner = onboard(&app, "Pictured Weekly");
    let original = jpeg_with_exif(2400, 1200);
    assert!(contains(&original, b"Exif") && contains(&original, CAMERA.as_bytes()));

    // The form without JavaScript: back to the media page with the Markdown to paste.
    let resp = upload_to(
        &owner.client,
        owner.newsletter_id,
        owner.newsletter_id,
        None,
        &original,
        false,
    );
    assert_eq!(resp.redirect(), media_page(&owner));
    let page = owner.client.get(&media_page(&owner));
    page.expect(200);
    let site = format!("http://{}.{}", owner.subdomain, app.public_host);
    assert!(
        unescape(&page.body).contains(&format!(
            "Image uploaded. Put it in the Markdown where it should show: ![]({site}/media/"
        )),
        "{}",
        page.body
    );
    assert!(page.body.contains("1600 × 800 px"), "{}", page.body);
    assert!(page.body.contains("Not used in any issue."));

    // The same picture again (the script's way) is the same image: one row, one file.
    let url = uploaded_url(&owner, &original);
    assert!(url.starts_with(&format!("{site}/media/")), "{url}");
    assert!(url.ends_with(".jpg"), "{url}");
    let name = file_name_of(&url);
    assert_eq!(media_files(app.data_dir()), std::slice::from_ref(&name));
    assert_eq!(app.count("SELECT count(*) FROM media"), 1);
    let (width, height, bytes, kind): (i64, i64, i64, String) = app
        .db()
        .query_row(
            "SELECT width, height, bytes, type FROM media WHERE newsletter_id = ?1",
            [owner.newsletter_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!((width, height, kind.as_str()), (1600, 800, "jpeg"));

    // The site serves it: the type, a year's immutable caching, nosniff.
    let (status, headers, body) = fetch(&app, &url);
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-type"), Some("image/jpeg"));
    assert_eq!(
        header(&headers, "cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    assert_eq!(header(&headers, "x-content-type-options"), Some("nosniff"));
    assert_eq!(body.len() as i64, bytes);
    assert_eq!(name, format!("{}.jpg", sha256_hex(&body)));
    // No EXIF, no GPS, no camera left; the width capped and the aspect kept.
    assert!(!contains(&body, b"Exif"), "EXIF left in the served file");
    assert!(!contains(&body, CAMERA.as_bytes()));
    let mut decoder = ImageReader::new(Cursor::new(&body))
        .with_guessed_format()
        .unwrap()
        .into_decoder()
        .unwrap();
    assert_eq!(decoder.dimensions(), (1600, 800));
    assert_eq!(decoder.exif_metadata().unwrap(), None);

    // A narrow PNG keeps its size and type; a GIF becomes a PNG.
    let png = uploaded_url(&owner, &encoded(&picture(300, 200), ImageFormat::Png));
    assert!(png.ends_with(".png"));
    let (_, headers, body) = fetch(&app, &png);
    assert_eq!(header(&headers, "content-type"), Some("image/png"));
    let shown = image::load_from_memory(&body).unwrap();
    assert_eq!((shown.width(), shown.height()), (300, 200));
    let gif = uploaded_url(&owner, &encoded(&picture(40, 30), ImageFormat::Gif));
    assert!(gif.ends_with(".png"), "{gif}");
    let webp = uploaded_url(&owner, &encoded(&picture(64, 48), ImageFormat::WebP));
    let (_, headers, _) = fetch(&app, &webp);
    assert_eq!(header(&headers, "content-type"), Some("image/webp"));

    // An unknown name on the site, or the right hash with another extension, is a 404.
    let (status, _, _) = fetch(&app, &url.replace(".jpg", ".png"));
    assert_eq!(status, 404);
    let (status, _, _) = fetch(&app, &format!("{site}/media/{}.jpg", "0".repeat(64)));
    assert_eq!(status, 404);
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn bad_files_get_a_clear_message_and_store_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Refusing Review");
    let whole = encoded(&picture(64, 64), ImageFormat::Png);
    let mut oversized = b"\x89PNG\r\n\x1a\n".to_vec();
    oversized.resize(10 * 1024 * 1024 + 1, 0);
    // A bitmap's signature: a real image format, but not one taken.
    let mut bmp = b"BM\x3e\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00\x28\x00".to_vec();
    bmp.resize(62, 0);
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "text",
            b"just some words".to_vec(),
            "is not a PNG, JPEG, WebP or GIF image",
        ),
        ("bmp", bmp, "is not a PNG, JPEG, WebP or GIF image"),
        (
            "truncated",
            whole[..whole.len() / 2].to_vec(),
            "could not be read as an image",
        ),
        ("oversized", oversized, "is too large (the limit is 10 MiB)"),
        ("bomb", png_claiming(10_000, 5_000), "has too many pixels"),
    ];
    for (what, content, message) in &cases {
        // The form: the media page again, 422, with the message.
        let resp = upload_to(
            &owner.client,
            owner.newsletter_id,
            owner.newsletter_id,
            None,
            content,
            false,
        );
        resp.expect(422);
        assert!(resp.body.contains(message), "{what}: {}", resp.body);
        // The script: the JSON error body.
        let resp = upload(&owner, content);
        assert_eq!(resp.error_code(422), "validation_error", "{what}");
        let said = resp.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(said.contains(message), "{what}: {said}");
    }
    // From the editor without JavaScript: the editor again, with the message.
    let id = issue_with(&owner, "Draft", "Words.");
    let resp = upload_to(
        &owner.client,
        owner.newsletter_id,
        owner.newsletter_id,
        Some(&id.to_string()),
        b"not an image",
        false,
    );
    resp.expect(422);
    assert!(
        resp.body.contains("name=\"issue[content_markdown]\""),
        "{}",
        resp.body
    );
    assert!(resp.body.contains("is not a PNG, JPEG, WebP or GIF image"));
    // An empty choice, and a bad token.
    let resp = upload_to(
        &owner.client,
        owner.newsletter_id,
        owner.newsletter_id,
        None,
        b"",
        false,
    );
    resp.expect(422);
    assert!(resp.body.contains("is missing"), "{}", resp.body);
    let (content_type, body) = upload_body("forged", None, "a.png", &whole);
    let resp = owner
        .client
        .request(
            "POST",
            &media_page(&owner),
            &[],
            Some((&content_type, body)),
        )
        .unwrap();
    resp.expect(403);
    assert_eq!(app.count("SELECT count(*) FROM media"), 0);
    assert!(
        media_files(app.data_dir()).is_empty(),
        "{:?}",
        media_files(app.data_dir())
    );
}

#[test]
fn an_image_in_use_is_not_deleted_and_one_no_longer_used_is() {
    let app = spawn_app();
    let owner = onboard(&app, "Careful Courier");
    let url = uploaded_url(&owner, &encoded(&picture(120, 80), ImageFormat::Png));
    let name = file_name_of(&url);
    let id = issue_with(
        &owner,
        "With a picture",
        &format!("Look:\n\n![a chart]({url})\n"),
    );
    let page = owner.client.get(&media_page(&owner));
    assert!(page.body.contains("With a picture"), "{}", page.body);
    assert!(
        page.body
            .contains(&format!("/newsletters/{}/issues/{id}", owner.newsletter_id))
    );

    let delete = |owner: &Owner| {
        owner.client.submit(
            &media_page(owner),
            &format!("{}/{name}", media_page(owner)),
            &[("_method", "delete")],
        )
    };
    let resp = delete(&owner);
    resp.expect(422);
    assert!(
        unescape(&resp.body).contains("This image is used in 1 issue (“With a picture”); take it out of that issue first. Nothing was deleted."),
        "{}",
        resp.body
    );
    assert_eq!(app.count("SELECT count(*) FROM media"), 1);
    assert_eq!(media_files(app.data_dir()), std::slice::from_ref(&name));
    assert_eq!(fetch(&app, &url).0, 200);

    // Taken out of the issue (saved through the editor), it can go: row, file and address.
    let resp = owner.client.submit(
        &format!("/newsletters/{}/issues/{id}/edit", owner.newsletter_id),
        &format!("/newsletters/{}/issues/{id}", owner.newsletter_id),
        &[
            &[("_method", "patch")][..],
            &editor("With a picture", "No picture now.", "save"),
        ]
        .concat(),
    );
    resp.redirect();
    let resp = delete(&owner);
    assert_eq!(resp.redirect(), media_page(&owner));
    assert!(
        owner
            .client
            .get(&media_page(&owner))
            .body
            .contains("Image deleted.")
    );
    assert_eq!(app.count("SELECT count(*) FROM media"), 0);
    assert!(media_files(app.data_dir()).is_empty());
    assert_eq!(fetch(&app, &url).0, 404);
    // Deleting it again: nothing there.
    delete(&owner).expect(404);
}

#[test]
fn another_accounts_images_answer_404_and_change_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Private Pictures");
    let other = onboard(&app, "Nosy Neighbour");
    let url = uploaded_url(&owner, &encoded(&picture(50, 50), ImageFormat::Png));
    let name = file_name_of(&url);
    let theirs = format!("/newsletters/{}/media", owner.newsletter_id);

    other.client.get(&theirs).expect(404);
    other.client.get(&format!("{theirs}/{name}")).expect(404);
    owner.client.get(&format!("{theirs}/{name}")).expect(200);
    // A delete with the other account's own valid token.
    let resp = other.client.submit(
        &media_page(&other),
        &format!("{theirs}/{name}"),
        &[("_method", "delete")],
    );
    resp.expect(404);
    // An upload into the owner's newsletter with the other account's own token.
    let resp = upload_to(
        &other.client,
        other.newsletter_id,
        owner.newsletter_id,
        None,
        &encoded(&picture(20, 20), ImageFormat::Png),
        false,
    );
    resp.expect(404);
    // The other site does not serve it either.
    let elsewhere = url.replace(&owner.subdomain, &other.subdomain);
    assert_eq!(fetch(&app, &elsewhere).0, 404);
    assert_eq!(app.count("SELECT count(*) FROM media"), 1);
    assert_eq!(media_files(app.data_dir()), [name]);
    assert_eq!(fetch(&app, &url).0, 200);
}

#[test]
fn the_editor_uploads_without_javascript_and_flags_http_images() {
    let app = spawn_app();
    let owner = onboard(&app, "Warning Weekly");
    let id = issue_with(&owner, "Draft", "Words.");
    let edit = format!("/newsletters/{}/issues/{id}/edit", owner.newsletter_id);
    let page = owner.client.get(&edit);
    assert!(
        page.body.contains("class=\"stack media-upload\""),
        "{}",
        page.body
    );
    assert!(page.body.contains("src=\"/assets/media.js\""));

    // The editor's own form: back to the editor with the Markdown to paste.
    let resp = upload_to(
        &owner.client,
        owner.newsletter_id,
        owner.newsletter_id,
        Some(&id.to_string()),
        &encoded(&picture(30, 20), ImageFormat::Png),
        false,
    );
    assert_eq!(resp.redirect(), edit);
    let page = owner.client.get(&edit);
    let site = format!("http://{}.{}", owner.subdomain, app.public_host);
    let text = unescape(&page.body);
    let at = text
        .find(&format!("![]({site}/media/"))
        .expect("the Markdown to paste");
    let own = text[at + 4..].split(')').next().unwrap().to_string();

    // Preview and save with an http:// image: a warning; the newsletter's own images
    // (http:// in this test setup) are not flagged.
    let warning = "will not show on the https site and in many mail clients";
    let markdown = format!("![mine]({own})\n\n![remote](http://images.example.com/a.png)\n");
    let issue_url = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);
    let resp = owner.client.submit(
        &edit,
        &issue_url,
        &[
            &[("_method", "patch")][..],
            &editor("Draft", &markdown, "preview"),
        ]
        .concat(),
    );
    resp.expect(200);
    assert!(resp.body.contains(warning), "{}", resp.body);
    assert!(resp.body.contains("http://images.example.com/a.png"));
    let resp = owner.client.submit(
        &edit,
        &issue_url,
        &[
            &[("_method", "patch")][..],
            &editor("Draft", &markdown, "save"),
        ]
        .concat(),
    );
    assert_eq!(resp.redirect(), issue_url);
    let shown = owner.client.get(&issue_url);
    assert!(shown.body.contains(warning), "{}", shown.body);
    // Only its own image: saved without a warning.
    let markdown = format!("![mine]({own})\n");
    let resp = owner.client.submit(
        &edit,
        &issue_url,
        &[
            &[("_method", "patch")][..],
            &editor("Draft", &markdown, "save"),
        ]
        .concat(),
    );
    assert_eq!(resp.redirect(), issue_url);
    let shown = owner.client.get(&issue_url);
    assert!(shown.body.contains("Saved."));
    assert!(!shown.body.contains(warning), "{}", shown.body);

    // In mail the image is the same absolute address on the newsletter's site.
    let resp = owner.client.submit(
        &edit,
        &format!("{issue_url}/send_test"),
        &[("emails", owner.email.as_str())],
    );
    assert!(resp.redirect().starts_with(&issue_url));
    let mail = app.smtp.wait_for_message_to(&owner.email, 2);
    assert!(
        mail.html().contains(&format!("src=\"{own}\" alt=\"mine\"")),
        "{}",
        mail.html()
    );
}

#[test]
fn backup_and_restore_carry_the_images() {
    let mut app = spawn_app();
    let owner = onboard(&app, "Archived Album");
    let url = uploaded_url(&owner, &jpeg_with_exif(200, 100));
    let name = file_name_of(&url);
    let (_, _, served) = fetch(&app, &url);

    // While the server runs: the database and, beside it, the images.
    let backup = app.data_dir().join("copy.db");
    let (code, out, err) = app.cli(&["backup", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let kept = app.data_dir().join("copy.db.media");
    assert!(
        out.contains(&format!("1 image file(s) copied to {}", kept.display())),
        "{out}"
    );
    assert_eq!(std::fs::read(kept.join(&name)).unwrap(), served);
    // A second backup to the same name is refused before anything is written.
    let (code, _, err) = app.cli(&["backup", backup.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("already exists"), "{err}");

    // Lost images come back with the restore.
    app.stop();
    std::fs::remove_dir_all(app.data_dir().join("media")).unwrap();
    let (code, out, err) = app.cli(&["restore", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 image file(s) restored"), "{out}");
    assert_eq!(media_files(app.data_dir()), [name]);
    app.restart();
    let (status, _, body) = fetch(&app, &url);
    assert_eq!(status, 200);
    assert_eq!(body, served);
}

#[test]
#[cfg_attr(
    not(all(has_chromium, has_axe)),
    ignore = "needs chromium, chromedriver and axe-core (apt-get install chromium chromium-driver; npm install --prefix target/npm axe-core@4)"
)]
fn the_media_page_fits_phones_passes_axe_and_pasted_images_upload() {
    let Some(driver) = Driver::start("media page") else {
        return;
    };
    let Some(axe) = Axe::load("media page") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard(&app, "Browsed Gallery");
    let url = uploaded_url(&owner, &encoded(&picture(1800, 600), ImageFormat::Jpeg));
    uploaded_url(&owner, &encoded(&picture(200, 900), ImageFormat::Png));
    issue_with(
        &owner,
        "A very long subject that has to wrap on a phone without pushing the page sideways",
        &format!("![]({url})"),
    );
    let id = issue_with(&owner, "Pasted", "Start.");
    // Published with its own image: the site (plain http in this setup) shows it.
    let published = owner.post(
        "/issues",
        &serde_json::json!({"issue": {"subject": "On the site", "content_markdown": format!("![a wide picture]({url})"), "status": "approved"}}),
    );
    published.expect(201);
    let published_id = published.json()["id"].as_i64().unwrap();
    let resp = owner.post(
        &format!("/issues/{published_id}/publish"),
        &serde_json::json!({}),
    );
    resp.expect(200);
    let web_url = resp.json()["web_url"]
        .as_str()
        .expect("web_url")
        .to_string();
    let pasted = base64::engine::general_purpose::STANDARD
        .encode(encoded(&picture(48, 32), ImageFormat::Png));
    let found = runtime().block_on(async {
        let c = driver.session().await;
        sign_in(&c, &app.base_url, &owner.email).await;
        let mut found = Vec::new();
        for (scheme, width) in [("light", 1280), ("light", 390), ("dark", 1280), ("dark", 390)] {
            let media = serde_json::json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]});
            driver.cdp(&c, "Emulation.setEmulatedMedia", media).await;
            c.set_window_size(width, 900).await.unwrap();
            c.goto(&format!("{}{}", app.base_url, media_page(&owner))).await.unwrap();
            wait_for_element(&c, "ul.media-list img.thumb").await;
            found.extend(axe.violations(&c, &format!("media page, {scheme}, at {width} px")).await);
            let overflow = c
                .execute(
                    "return document.documentElement.scrollWidth > window.innerWidth",
                    vec![],
                )
                .await
                .unwrap();
            assert_eq!(overflow, serde_json::json!(false), "the media page scrolls sideways at {width}px ({scheme})");
            let loaded = c
                .execute(
                    "return Array.from(document.querySelectorAll('img.thumb')).every(i => i.complete && i.naturalWidth > 0)",
                    vec![],
                )
                .await
                .unwrap();
            assert_eq!(loaded, serde_json::json!(true), "a thumbnail did not load");
            screenshot(&c, &format!("media-page-{scheme}-{width}")).await;
        }
        c.goto(&web_url).await.unwrap();
        wait_for_element(&c, "main img").await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let shown = c
                .execute(
                    "const i = document.querySelector('main img'); return i.complete && i.naturalWidth",
                    vec![],
                )
                .await
                .unwrap();
            if shown == serde_json::json!(1600) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the site does not show its image: {shown}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // A pasted image is uploaded and its Markdown goes in at the cursor.
        c.set_window_size(1280, 900).await.unwrap();
        c.goto(&format!(
            "{}/newsletters/{}/issues/{id}/edit",
            app.base_url, owner.newsletter_id
        ))
        .await
        .unwrap();
        wait_for_element(&c, "form.media-upload").await;
        let paste = format!(
            "const box = document.querySelector('textarea.markdown');
             box.focus(); box.selectionStart = box.selectionEnd = box.value.length;
             const bytes = Uint8Array.from(atob('{pasted}'), ch => ch.charCodeAt(0));
             const data = new DataTransfer();
             data.items.add(new File([bytes], 'pasted.png', {{ type: 'image/png' }}));
             box.dispatchEvent(new ClipboardEvent('paste', {{ clipboardData: data, bubbles: true, cancelable: true }}));"
        );
        c.execute(&paste, vec![]).await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let value = loop {
            let value = c
                .execute("return document.querySelector('textarea.markdown').value", vec![])
                .await
                .unwrap();
            let text = value.as_str().unwrap_or("").to_string();
            if text.contains("/media/") {
                break text;
            }
            assert!(std::time::Instant::now() < deadline, "the pasted image never arrived: {text:?}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert!(value.starts_with("Start.\n\n![](http://"), "{value:?}");
        assert!(value.trim_end().ends_with(".png)"), "{value:?}");
        assert!(driver.console_errors(&c).await.is_empty());
        found
    });
    assert!(found.is_empty(), "axe violations:\n{}", found.join("\n"));
    assert_eq!(app.count("SELECT count(*) FROM media"), 3);
}
