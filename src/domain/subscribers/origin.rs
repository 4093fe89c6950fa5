//! Where a subscriber came from (docs/growth.md, "Where readers came from"): the way they
//! were added, and for a signup the page it was made on and that page's campaign tags
//! (`utm_source`, `utm_medium`, `utm_campaign`). A signup's details come from the reader's
//! browser, so they are kept only when fit to show and never refuse the signup: a referrer
//! that is not a web address, or a tag with a line break, is dropped; a long tag is cut.

use crate::domain::values::text_pattern::Refused;
use crate::domain::values::web_url::{self, Schemes};

crate::string_enum!(
    /// How a subscriber was added.
    pub Source {
        /// A signup form or the site's subscribe page, once the address was confirmed.
        Form => "form",
        /// A CSV import (the dashboard's, the API's or the `import` command's).
        Import => "import",
        /// A create or bulk create through the API.
        Api => "api",
        /// Added by hand in the dashboard.
        Dashboard => "dashboard",
    }
);

/// The longest referrer kept, in characters.
pub const REFERRER_MAX: usize = 300;
/// The longest campaign tag kept, in characters; a longer one is cut.
pub const UTM_MAX: usize = 100;

/// The campaign tags of a signup.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Utm {
    #[serde(rename = "utm_source")]
    pub source: Option<String>,
    #[serde(rename = "utm_medium")]
    pub medium: Option<String>,
    #[serde(rename = "utm_campaign")]
    pub campaign: Option<String>,
}

/// Where one subscriber came from. `source` is `None` only for subscribers made before
/// sources were recorded (migration 0036).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Origin {
    pub source: Option<Source>,
    pub referrer: Option<String>,
    #[serde(flatten)]
    pub utm: Utm,
}

/// What a signup's browser said about where it came from, as posted (each may be empty).
#[derive(Debug, Clone, Default)]
pub struct Came {
    pub referrer: String,
    pub utm_source: String,
    pub utm_medium: String,
    pub utm_campaign: String,
}

impl Origin {
    /// Added by `source`, with nothing known of a page.
    pub fn of(source: Source) -> Self {
        Origin {
            source: Some(source),
            ..Origin::default()
        }
    }

    /// A signup's origin from what its browser said: the referrer when it is a web
    /// address, and each campaign tag as posted or, when not posted, from the referrer's
    /// own address (a page reached by `…?utm_source=…`).
    pub fn of_signup(came: &Came) -> Self {
        let referrer = web_url::check(&came.referrer, Schemes::HttpOrHttps, REFERRER_MAX).ok();
        let from_referrer = |key: &str| -> Option<String> {
            let url = url::Url::parse(referrer.as_deref()?).ok()?;
            let value = url.query_pairs().find(|(k, _)| k == key)?.1.into_owned();
            campaign_tag(&value)
        };
        let tag = |posted: &str, key: &str| campaign_tag(posted).or_else(|| from_referrer(key));
        Origin {
            source: Some(Source::Form),
            utm: Utm {
                source: tag(&came.utm_source, "utm_source"),
                medium: tag(&came.utm_medium, "utm_medium"),
                campaign: tag(&came.utm_campaign, "utm_campaign"),
            },
            referrer,
        }
    }
}

/// A campaign tag fit to keep: trimmed, one line without control characters, at most
/// [`UTM_MAX`] characters (cut there); `None` when empty or not one line.
fn campaign_tag(raw: &str) -> Option<String> {
    let text = raw.trim();
    if text.is_empty() || text.chars().any(|c| Refused::Controls.refuses(c)) {
        return None;
    }
    Some(text.chars().take(UTM_MAX).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn came(referrer: &str, utm_source: &str) -> Came {
        Came {
            referrer: referrer.to_string(),
            utm_source: utm_source.to_string(),
            ..Came::default()
        }
    }

    #[test]
    fn a_signup_keeps_what_is_fit_to_show_and_never_fails() {
        let origin = Origin::of_signup(&came(
            "https://blog.example/post?utm_source=blog&utm_campaign=launch",
            "",
        ));
        assert_eq!(origin.source, Some(Source::Form));
        assert_eq!(
            origin.referrer.as_deref(),
            Some("https://blog.example/post?utm_source=blog&utm_campaign=launch")
        );
        assert_eq!(
            origin.utm.source.as_deref(),
            Some("blog"),
            "from the referrer"
        );
        assert_eq!(origin.utm.campaign.as_deref(), Some("launch"));
        assert_eq!(origin.utm.medium, None);

        let posted = Origin::of_signup(&came("https://blog.example/?utm_source=blog", "news"));
        assert_eq!(posted.utm.source.as_deref(), Some("news"), "posted wins");

        let hostile = Origin::of_signup(&came("javascript:alert(1)", "a\r\nBcc: x"));
        assert_eq!(hostile.referrer, None);
        assert_eq!(hostile.utm.source, None);

        let long = Origin::of_signup(&came(
            &format!("https://a.example/{}", "x".repeat(400)),
            &"é".repeat(150),
        ));
        assert_eq!(long.referrer, None);
        assert_eq!(long.utm.source.unwrap().chars().count(), UTM_MAX);
    }
}
