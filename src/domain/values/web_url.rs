//! The web addresses the service keeps (article links, webhook endpoints, a site's logo):
//! one rule, written once as the regular expression the API's document states
//! ([`pattern`]) and applied by [`check`] with that same expression, so a client that
//! checks the pattern and the server agree on every ASCII address.
//!
//! The expression takes a scheme followed by `://`, a host name of letters, digits and
//! hyphens (its last label starting with a letter) or a dotted IPv4 address, an optional
//! port, then a path, query or fragment without control characters; surrounding
//! whitespace is trimmed. Host names in other scripts (`https://münchen.de`) and IPv6
//! literals (`https://[2001:db8::1]/`) cannot be stated that way; [`check`] takes them too,
//! when the URL standard's parser (`url`) does, and docs/api.md says so.

use std::sync::LazyLock;

use regex::Regex;

use crate::domain::values::text_pattern::{Refused, WHITESPACE};

/// The schemes an address may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schemes {
    HttpOrHttps,
    /// A logo the public site loads: its content policy loads no plain-http images.
    HttpsOnly,
}

impl Schemes {
    /// The scheme part of the pattern, in any letter case (as URLs are read).
    fn pattern(self) -> &'static str {
        match self {
            Schemes::HttpOrHttps => "[hH][tT][tT][pP][sS]?",
            Schemes::HttpsOnly => "[hH][tT][tT][pP][sS]",
        }
    }

    fn allows(self, scheme: &str) -> bool {
        match self {
            Schemes::HttpOrHttps => matches!(scheme, "http" | "https"),
            Schemes::HttpsOnly => scheme == "https",
        }
    }
}

/// Why an address is refused; each caller words it for its field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Longer than the field's most, counted as sent (whitespace included).
    TooLong,
    /// Not an absolute address of an allowed scheme with a host.
    NotWebUrl,
    /// A user name or password before the host (only an IPv6 or international address can
    /// carry one past the pattern).
    Credentials,
}

impl Problem {
    /// The field's message: `what` is the field's own words for an address it cannot take
    /// (e.g. "must be an https:// address of an image").
    pub fn message(self, max: usize, what: &str) -> String {
        match self {
            Problem::TooLong => format!("is too long (maximum is {max} characters)"),
            Problem::NotWebUrl => what.to_string(),
            Problem::Credentials => "must not contain a user name or password".to_string(),
        }
    }
}

/// The alternatives of a label starting with `x`: `x`, `xn`, `xn-` alone or followed by anything
/// but what would make `xn--` (a macro, as `concat!` takes only literals).
macro_rules! x_but_not_xn_dash_dash {
    () => {
        concat!(
            "|[xX](?:[A-MO-Za-mo-z0-9-][A-Za-z0-9-]*)?",
            "|[xX][nN](?:[A-Za-z0-9][A-Za-z0-9-]*)?",
            "|[xX][nN]-(?:[A-Za-z0-9][A-Za-z0-9-]*)?"
        )
    };
}

/// A host name's label other than the last: letters, digits and hyphens, not starting `xn--`
/// (the URL parser decodes such a label as Punycode, which most spellings are not; a real
/// `xn--` name goes to the parser, see [`beyond_the_pattern`]). Written without look-ahead,
/// which not every regular-expression dialect reads: a label starting with anything but `x`,
/// or one of the alternatives of `x_but_not_xn_dash_dash!`.
const LABEL: &str = concat!(
    "(?:[A-WYZa-wyz0-9-][A-Za-z0-9-]*",
    x_but_not_xn_dash_dash!(),
    ")"
);
/// The last label: as [`LABEL`], starting with a letter (the URL standard reads a last label
/// of digits, or `0x…`, as an IPv4 number, which `1.2.3.999` is not).
const LAST_LABEL: &str = concat!(
    "(?:[A-WYZa-wyz][A-Za-z0-9-]*",
    x_but_not_xn_dash_dash!(),
    ")"
);
/// One IPv4 octet, 0-255, without leading zeros (`010` would be read as octal).
const OCTET: &str = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
/// A port, 0-65535 (leading zeros allowed, as the URL standard reads them), or none after `:`.
const PORT: &str =
    r"(?::0*(?:[0-9]{0,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?";

/// The addresses [`check`] takes with `schemes`, as a regular expression in the subset that
/// ECMA-262, Python's `re` and Rust's `regex` read alike (see `text_pattern`).
pub fn pattern(schemes: Schemes) -> String {
    let spaces = format!("[{WHITESPACE}]*");
    let host = format!(r"(?:(?:{LABEL}\.)*{LAST_LABEL}|{OCTET}(?:\.{OCTET}){{3}})");
    let rest = format!(r"(?:[/?#\\][^{}]*)?", Refused::Controls.class());
    format!(
        "^{spaces}{}://{host}{PORT}{rest}{spaces}$",
        schemes.pattern()
    )
}

static HTTP_OR_HTTPS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&pattern(Schemes::HttpOrHttps)).expect("a valid pattern"));
static HTTPS_ONLY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&pattern(Schemes::HttpsOnly)).expect("a valid pattern"));

/// `raw` trimmed, when it is an address with one of `schemes` of at most `max` characters.
pub fn check(raw: &str, schemes: Schemes, max: usize) -> Result<String, Problem> {
    if raw.chars().count() > max {
        return Err(Problem::TooLong);
    }
    let stated = match schemes {
        Schemes::HttpOrHttps => &*HTTP_OR_HTTPS,
        Schemes::HttpsOnly => &*HTTPS_ONLY,
    };
    let text = raw.trim();
    if !stated.is_match(raw) && !beyond_the_pattern(text) {
        return Err(Problem::NotWebUrl);
    }
    let url = url::Url::parse(text).map_err(|_| Problem::NotWebUrl)?;
    if !schemes.allows(url.scheme()) || url.host_str().is_none_or(str::is_empty) {
        return Err(Problem::NotWebUrl);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Problem::Credentials);
    }
    Ok(text.to_string())
}

/// Whether trimmed `text` is written `scheme://authority…` with an authority the pattern
/// cannot state (non-ASCII, an IPv6 literal, or an `xn--` label: an international name
/// written in ASCII), and has no control character: left to the URL parser.
fn beyond_the_pattern(text: &str) -> bool {
    let Some((_, after)) = text.split_once("://") else {
        return false;
    };
    let authority = after.split(['/', '?', '#', '\\']).next().unwrap_or("");
    let punycode = authority.split(['.', ':', '@']).any(|label| {
        label
            .get(..4)
            .is_some_and(|p| p.eq_ignore_ascii_case("xn--"))
    });
    (!authority.is_ascii() || authority.starts_with('[') || punycode)
        && !text.chars().any(|c| Refused::Controls.refuses(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str, schemes: Schemes) -> bool {
        check(raw, schemes, 2000).is_ok()
    }

    #[test]
    fn the_pattern_and_the_check_agree() {
        let taken = [
            "https://example.com",
            "http://example.com/",
            " HTTPS://Example.COM/a b?c=d#e \n",
            "https://a",
            "https://a-.b-c.d",
            "https://0.example",
            "https://127.0.0.1:8080/hook",
            "https://255.255.255.255",
            "https://0.0.0.0",
            "https://a:",
            "https://a:0",
            "https://a:65535",
            "https://a:0000080",
            "https://a\\b",
            "https://a?",
            "https://a#",
            "https://a/\u{2028}/é💥",
            "https://x",
            "https://xn",
            "https://xn-",
            "https://xn-a.x-n.xna.xn-1",
            "https://Xx--a",
        ];
        let refused = [
            "",
            "https://",
            "HTTPS://",
            "\u{85}HTTPS://",
            "hTTpS://",
            "https:/a",
            "https:a",
            "https:///a",
            "ftp://a",
            "https://a b",
            "https://a\u{0}",
            "https://a/\u{1}",
            "https://a/b\tc",
            "https://a/\u{85}b",
            "https://user:pw@a",
            "https://@a",
            "https://a.1",
            "https://1.2.3",
            "https://1.2.3.999",
            "https://01.2.3.4",
            "https://a.",
            "https://a..b",
            "https://a:65536",
            "https://a:x",
            "https://a!b",
            "https://a_b",
            "mailto:a@b",
            "https://xn--a",
            "https://XN--abc-.de",
            "https://a.xn--",
        ];
        let pattern = Regex::new(&pattern(Schemes::HttpOrHttps)).unwrap();
        for raw in taken {
            assert!(pattern.is_match(raw), "the pattern refuses {raw:?}");
            assert!(ok(raw, Schemes::HttpOrHttps), "the check refuses {raw:?}");
        }
        for raw in refused {
            assert!(!pattern.is_match(raw), "the pattern takes {raw:?}");
            assert!(!ok(raw, Schemes::HttpOrHttps), "the check takes {raw:?}");
        }
    }

    /// Every host the pattern's alphabet can spell (short ones exhaustively, longer ones by
    /// a fixed walk) is one the URL parser takes: the pattern never promises what the parser
    /// refuses.
    #[test]
    fn every_host_the_pattern_spells_parses() {
        let alphabet: Vec<char> = ('a'..='z').chain('0'..='9').chain(['-', 'X']).collect();
        let pattern = Regex::new(&pattern(Schemes::HttpOrHttps)).unwrap();
        let mut spelled = 0;
        let mut state: u64 = 20261127;
        for n in 0..200_000u64 {
            let host: String = if n < 38 * 38 {
                [alphabet[(n / 38) as usize], alphabet[(n % 38) as usize]]
                    .iter()
                    .collect()
            } else {
                (0..1 + n % 12)
                    .map(|_| {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                        let pick = (state >> 33) as usize % (alphabet.len() + 1);
                        alphabet.get(pick).copied().unwrap_or('.')
                    })
                    .collect()
            };
            for raw in [format!("https://{host}"), format!("http://xn--{host}")] {
                if pattern.is_match(&raw) {
                    spelled += 1;
                    assert!(ok(&raw, Schemes::HttpOrHttps), "{raw:?} does not parse");
                }
            }
        }
        assert!(spelled > 100_000, "only {spelled} hosts tried");
    }

    #[test]
    fn international_names_and_ipv6_pass_through_the_parser() {
        assert_eq!(
            check(" https://münchen.de/x ", Schemes::HttpsOnly, 100),
            Ok("https://münchen.de/x".to_string())
        );
        assert!(ok("http://[2001:db8::1]:8080/hook", Schemes::HttpOrHttps));
        assert!(ok("https://xn--mnchen-3ya.de/x", Schemes::HttpsOnly));
        assert!(
            !Regex::new(&pattern(Schemes::HttpsOnly))
                .unwrap()
                .is_match("https://xn--mnchen-3ya.de/x")
        );
        assert_eq!(
            check("https://ü:pw@münchen.de", Schemes::HttpOrHttps, 100),
            Err(Problem::Credentials)
        );
        assert!(!ok("https://[::1", Schemes::HttpOrHttps));
        assert!(!ok("https://münchen.de/\u{1}", Schemes::HttpOrHttps));
        assert!(!ok("https://\u{ffff}", Schemes::HttpOrHttps));
    }

    #[test]
    fn https_only_and_lengths_as_sent() {
        assert!(ok("https://a", Schemes::HttpsOnly));
        assert!(!ok("http://a", Schemes::HttpsOnly));
        assert!(!ok("http://münchen.de", Schemes::HttpsOnly));
        assert_eq!(
            check("https://a", Schemes::HttpsOnly, 9),
            Ok("https://a".into())
        );
        assert_eq!(
            check(" https://a", Schemes::HttpsOnly, 9),
            Err(Problem::TooLong)
        );
    }
}
