//! What a newsletter's site says about itself: an about page the owner writes in Markdown
//! (`/about`), and the author's name and picture, shown on the about page, beside every
//! issue and in the feed. All optional, set by the owner (dashboard settings, API `PATCH
//! /newsletter`), checked here once for every door. The about page is rendered when it is
//! saved, within the render budget, so the site never renders Markdown on a reader's request.

use std::sync::LazyLock;

use rusqlite::Connection;

use crate::domain::newsletters::welcome::{RenderedBody, rendered_markdown};
use crate::domain::values::web_url::{self, Schemes};
use crate::domain::{DomainResult, FieldErrors, clean_line};

/// The longest about page, in characters of Markdown.
pub const ABOUT_MAX: usize = 20_000;
/// The longest author name, in characters.
pub const AUTHOR_NAME_MAX: usize = 100;
/// The longest author picture address, in characters.
pub const AUTHOR_IMAGE_MAX: usize = 500;

/// An image of the newsletter's own Media page, as the site serves it: `/media/<sha256>.<ext>`
/// (the form `domain/issues/media.rs` names its files with), as a regular expression.
pub const OWN_IMAGE_PATTERN: &str = "/media/[0-9a-f]{64}\\.(png|jpg|webp)";

static OWN_IMAGE: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(&format!("^{OWN_IMAGE_PATTERN}$")).expect("a pattern"));

/// A newsletter's about page and author as every page of its site needs them; `None` is
/// none. The about page's text is read by [`about`] on its own page only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SitePages {
    /// Whether the owner wrote an about text.
    pub has_about: bool,
    pub author_name: Option<String>,
    /// An `https://` image, or a path `/media/…` of one of the newsletter's own images.
    pub author_image: Option<String>,
}

impl SitePages {
    /// The author picture's address from a page of the site at `origin`: own images by their
    /// path on whichever address the site has now (a custom domain included), others as given.
    pub fn author_image_url(&self, origin: &str) -> Option<String> {
        self.author_image
            .as_ref()
            .map(|image| match image.starts_with('/') {
                true => format!("{origin}{image}"),
                false => image.clone(),
            })
    }

    /// Whether the site has an about page (an about text, or at least an author to show).
    pub fn has_about_page(&self) -> bool {
        self.has_about || self.author_name.is_some()
    }
}

/// The about page of newsletter `id`, its Markdown and the HTML stored with it; `None` when
/// the owner wrote none.
pub fn about(conn: &Connection, id: i64) -> DomainResult<Option<RenderedBody>> {
    const SQL: &str = "SELECT about_markdown, about_html FROM newsletters WHERE id = ?1";
    let (markdown, html): (Option<String>, Option<String>) =
        conn.query_row(SQL, [id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(markdown
        .zip(html)
        .map(|(markdown, html)| RenderedBody { markdown, html }))
}

/// The fields a change may carry; `None` leaves a field as it is, a blank value removes it.
#[derive(Debug, Clone, Default)]
pub struct SitePagesChanges {
    pub about_markdown: Option<String>,
    pub author_name: Option<String>,
    pub author_image: Option<String>,
}

/// [`SitePagesChanges`] checked and rendered; `Some(None)` removes the value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckedSitePages {
    about: Option<Option<RenderedBody>>,
    author_name: Option<Option<String>>,
    author_image: Option<Option<String>>,
}

/// Checks `changes` (fields `about_markdown`, `author_name`, `author_image_url`) and renders
/// the about page within the render budget, adding what is wrong to `errors`. Blocks for up
/// to the budget: call it before taking a database connection. Errors other than the
/// content's (the renderer could not start) are returned.
pub fn check(
    changes: &SitePagesChanges,
    errors: &mut FieldErrors,
) -> DomainResult<CheckedSitePages> {
    let about = match changes.about_markdown.as_deref() {
        None => None,
        // A form's "\r\n" is one line break.
        Some(raw) => Some(rendered_markdown(
            errors,
            "about_markdown",
            &raw.replace("\r\n", "\n"),
            ABOUT_MAX,
        )?),
    };
    let author_name = changes.author_name.as_deref().map(|raw| {
        let line = clean_line(errors, "author_name", raw, false, AUTHOR_NAME_MAX);
        (!line.is_empty()).then_some(line)
    });
    let author_image = changes.author_image.as_deref().map(|raw| {
        check_image(raw)
            .map_err(|m| errors.add("author_image_url", m))
            .ok()?
    });
    Ok(CheckedSitePages {
        about,
        author_name,
        author_image,
    })
}

/// An author picture as stored: blank is none; `/media/…` is kept as that path; else an
/// `https://` address (the site's policy loads no plain-http images), kept as its path when
/// it names one of the site's own `/media/…` images, so the picture follows the site to a
/// custom domain.
fn check_image(raw: &str) -> Result<Option<String>, String> {
    let text = raw.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if OWN_IMAGE.is_match(text) {
        return Ok(Some(text.to_string()));
    }
    match web_url::check(raw, Schemes::HttpsOnly, AUTHOR_IMAGE_MAX) {
        Ok(url) => {
            let own_path = url::Url::parse(&url)
                .ok()
                .filter(|u| u.query().is_none() && u.fragment().is_none())
                .map(|u| u.path().to_string())
                .filter(|path| OWN_IMAGE.is_match(path));
            Ok(Some(own_path.unwrap_or(url)))
        }
        Err(problem) => Err(problem.message(
            AUTHOR_IMAGE_MAX,
            "must be an https:// address of an image, or /media/… (an image of your Media page)",
        )),
    }
}

/// Writes checked changes to newsletter `id` inside the caller's transaction; true when
/// anything changed.
pub(in crate::domain) fn apply(
    conn: &Connection,
    id: i64,
    current: &SitePages,
    checked: &CheckedSitePages,
) -> DomainResult<bool> {
    let mut changed = false;
    if let Some(next_about) = &checked.about
        && about(conn, id)? != *next_about
    {
        const ABOUT: &str =
            "UPDATE newsletters SET about_markdown = ?2, about_html = ?3 WHERE id = ?1";
        let (markdown, html) = match next_about {
            Some(about) => (Some(&about.markdown), Some(&about.html)),
            None => (None, None),
        };
        conn.execute(ABOUT, (id, markdown, html))?;
        changed = true;
    }
    let next = (
        checked
            .author_name
            .clone()
            .unwrap_or_else(|| current.author_name.clone()),
        checked
            .author_image
            .clone()
            .unwrap_or_else(|| current.author_image.clone()),
    );
    if next == (current.author_name.clone(), current.author_image.clone()) {
        return Ok(changed);
    }
    const AUTHOR: &str = "UPDATE newsletters SET author_name = ?2, author_image = ?3 WHERE id = ?1";
    conn.execute(AUTHOR, (id, next.0, next.1))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(about: &str, name: &str, image: &str) -> (CheckedSitePages, FieldErrors) {
        let mut errors = FieldErrors::new();
        let checked = check(
            &SitePagesChanges {
                about_markdown: Some(about.into()),
                author_name: Some(name.into()),
                author_image: Some(image.into()),
            },
            &mut errors,
        )
        .unwrap();
        (checked, errors)
    }

    #[test]
    fn the_about_page_is_rendered_and_blank_values_remove() {
        let (c, errors) = checked("# About\r\n\r\nWe *write*.", "  Ada Lovelace ", "");
        assert!(errors.into_result().is_ok());
        let about = c.about.clone().unwrap().unwrap();
        assert_eq!(about.markdown, "# About\n\nWe *write*.");
        assert!(about.html.contains("<em>write</em>"), "{}", about.html);
        assert_eq!(c.author_name, Some(Some("Ada Lovelace".into())));
        assert_eq!(c.author_image, Some(None));
        let (c, _) = checked("  ", "", "");
        assert_eq!(c.about, Some(None));
        assert_eq!(c.author_name, Some(None));
    }

    #[test]
    fn pictures_are_https_or_the_sites_own_images() {
        let hash = "ab".repeat(32);
        let own = format!("/media/{hash}.webp");
        for given in [own.clone(), format!("https://www.tides.example{own}")] {
            let (c, errors) = checked("", "", &given);
            assert!(errors.into_result().is_ok(), "{given}");
            assert_eq!(c.author_image, Some(Some(own.clone())), "{given}");
        }
        let (c, errors) = checked("", "", "https://cdn.example.com/me.jpg");
        assert!(errors.into_result().is_ok());
        assert_eq!(
            c.author_image,
            Some(Some("https://cdn.example.com/me.jpg".into()))
        );
        for bad in [
            "http://cdn.example.com/me.jpg",
            &format!("http://tides.localhost:8080{own}"),
            "/media/short.png",
            "javascript:alert(1)",
        ] {
            let (_, errors) = checked("", "", bad);
            let fields: Vec<String> = errors.by_field().into_keys().collect();
            assert_eq!(fields, ["author_image_url"], "{bad}");
        }
        let pages = SitePages {
            author_image: Some(own.clone()),
            ..SitePages::default()
        };
        assert_eq!(
            pages.author_image_url("https://www.tides.example").unwrap(),
            format!("https://www.tides.example{own}")
        );
    }

    #[test]
    fn bad_values_name_their_fields() {
        let (_, errors) = checked(&"x".repeat(ABOUT_MAX + 1), "two\nlines", "");
        let fields: Vec<String> = errors.by_field().into_keys().collect();
        assert_eq!(fields, ["about_markdown", "author_name"]);
    }
}
