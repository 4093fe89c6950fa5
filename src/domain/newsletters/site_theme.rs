//! A newsletter's look on its public site: an accent colour and a logo, both optional, set by
//! the owner (dashboard settings, API `PATCH /newsletter`). What they may hold is checked here
//! once, and so is the text colour that stays readable on the accent (WCAG AA, 4.5:1), so no
//! colour an owner picks can make the site's buttons or links unreadable.

use rusqlite::Connection;

use crate::domain::values::web_url::{self, Schemes};
use crate::domain::{DomainResult, FieldErrors};

/// The longest logo URL, in characters.
pub const LOGO_URL_MAX: usize = 500;

/// WCAG AA contrast for normal text.
const AA: f64 = 4.5;

/// An accent colour, written `#rrggbb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccentColor([u8; 3]);

impl AccentColor {
    /// What [`AccentColor::parse`] accepts, as a regular expression (for the API's document).
    pub const PATTERN: &'static str = "#[0-9a-fA-F]{6}";

    /// `#rrggbb` (either case), nothing else: no names, no short form, no alpha.
    pub fn parse(raw: &str) -> Option<AccentColor> {
        let hex = raw.strip_prefix('#')?;
        if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
        Some(AccentColor([byte(0)?, byte(2)?, byte(4)?]))
    }

    /// `#rrggbb` in lower case, as stored and served.
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0[0], self.0[1], self.0[2])
    }

    /// Relative luminance (WCAG 2).
    fn luminance(self) -> f64 {
        let channel = |c: u8| {
            let c = f64::from(c) / 255.0;
            if c <= 0.03928 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * channel(self.0[0]) + 0.7152 * channel(self.0[1]) + 0.0722 * channel(self.0[2])
    }

    /// The contrast ratio of two colours, from 1 to 21.
    pub fn contrast(self, other: AccentColor) -> f64 {
        let (a, b) = (self.luminance(), other.luminance());
        (a.max(b) + 0.05) / (a.min(b) + 0.05)
    }

    /// The text colour of a button filled with this colour: white or black, whichever
    /// contrasts more; one of them always reaches 4.5:1.
    pub fn text_on(self) -> AccentColor {
        let (white, black) = (AccentColor([255; 3]), AccentColor([0; 3]));
        if self.contrast(white) >= self.contrast(black) {
            white
        } else {
            black
        }
    }

    /// Whether it can be the colour of link text on `background` (AA for normal text).
    pub fn readable_on(self, background: AccentColor) -> bool {
        self.contrast(background) >= AA
    }
}

/// A newsletter's theme as stored; `None` is the site's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteTheme {
    pub accent_color: Option<AccentColor>,
    /// An `https://` image shown beside the name in the site's header.
    pub logo_url: Option<String>,
}

/// The theme fields a change may carry; `None` leaves a field as it is, an empty value goes
/// back to the default.
#[derive(Debug, Clone, Default)]
pub struct ThemeChanges {
    pub accent_color: Option<String>,
    pub logo_url: Option<String>,
}

/// [`ThemeChanges`] checked; `Some(None)` is back to the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckedTheme {
    accent_color: Option<Option<AccentColor>>,
    logo_url: Option<Option<String>>,
}

/// Checks `changes`, adding what is wrong to `errors` (fields `accent_color`, `logo_url`).
pub fn check(changes: &ThemeChanges, errors: &mut FieldErrors) -> CheckedTheme {
    let accent_color = changes.accent_color.as_deref().map(str::trim).map(|raw| {
        if raw.is_empty() {
            return None;
        }
        let color = AccentColor::parse(raw);
        if color.is_none() {
            errors.add("accent_color", "must be a colour written #rrggbb");
        }
        color
    });
    let logo_url = changes.logo_url.as_deref().map(|raw| {
        if raw.trim().is_empty() {
            return None;
        }
        // https only: the site's policy loads no other images, and a reader's browser would
        // warn of mixed content.
        match web_url::check(raw, Schemes::HttpsOnly, LOGO_URL_MAX) {
            Ok(url) => Some(url),
            Err(problem) => {
                errors.add(
                    "logo_url",
                    problem.message(LOGO_URL_MAX, "must be an https:// address of an image"),
                );
                None
            }
        }
    });
    CheckedTheme {
        accent_color,
        logo_url,
    }
}

/// Writes checked changes to newsletter `id` inside the caller's transaction; true when
/// anything changed.
pub(in crate::domain) fn apply(
    conn: &Connection,
    id: i64,
    current: &SiteTheme,
    checked: &CheckedTheme,
) -> DomainResult<bool> {
    let next = SiteTheme {
        accent_color: checked.accent_color.unwrap_or(current.accent_color),
        logo_url: checked
            .logo_url
            .clone()
            .unwrap_or_else(|| current.logo_url.clone()),
    };
    if &next == current {
        return Ok(false);
    }
    const UPDATE: &str = "UPDATE newsletters SET accent_color = ?2, logo_url = ?3 WHERE id = ?1";
    conn.execute(
        UPDATE,
        (id, next.accent_color.map(AccentColor::hex), next.logo_url),
    )?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accents_are_rrggbb_only() {
        assert_eq!(AccentColor::parse("#1D4ed8").unwrap().hex(), "#1d4ed8");
        for bad in ["1d4ed8", "#fff", "#1d4ed8ff", "#1d4eg8", "red", "", "#ééé"] {
            assert_eq!(AccentColor::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn button_text_stays_readable_on_any_accent() {
        let white = AccentColor([255; 3]);
        assert_eq!(AccentColor::parse("#1d4ed8").unwrap().text_on(), white);
        assert_eq!(
            AccentColor::parse("#ffe14d").unwrap().text_on(),
            AccentColor([0; 3])
        );
        for hex in [
            "#777777", "#808080", "#ff0000", "#00ff00", "#0000ff", "#767676",
        ] {
            let accent = AccentColor::parse(hex).unwrap();
            assert!(accent.contrast(accent.text_on()) >= AA, "{hex}");
        }
        assert!(!AccentColor::parse("#ffe14d").unwrap().readable_on(white));
    }

    #[test]
    fn logos_are_https_and_bounded() {
        let mut errors = FieldErrors::new();
        let ok = check(
            &ThemeChanges {
                accent_color: Some(" ".into()),
                logo_url: Some("https://cdn.example.com/logo.png".into()),
            },
            &mut errors,
        );
        assert!(errors.is_empty());
        assert_eq!(
            ok.logo_url,
            Some(Some("https://cdn.example.com/logo.png".into()))
        );
        assert_eq!(ok.accent_color, Some(None), "empty is the default again");
        let long = format!("https://example.com/{}", "a".repeat(LOGO_URL_MAX));
        for bad in [
            "http://example.com/logo.png",
            "javascript:alert(1)",
            "https://u:p@example.com/l.png",
            "/logo.png",
            long.as_str(),
        ] {
            let mut errors = FieldErrors::new();
            check(
                &ThemeChanges {
                    accent_color: None,
                    logo_url: Some(bad.into()),
                },
                &mut errors,
            );
            assert!(!errors.is_empty(), "{bad}");
        }
    }
}
