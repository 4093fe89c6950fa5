//! The text rules of [`clean_text`](crate::domain::clean_text) and [`clean_line`](crate::domain::clean_line)
//! written as regular expressions, for documents that state them (the API's OpenAPI schema):
//! the characters each rule refuses are declared here once, and the checks use the same
//! declaration. The expressions use only character classes, `\uXXXX` escapes and groups, which
//! ECMA-262, Python's `re` and Rust's `regex` read alike.

/// What `str::trim` removes: Unicode White_Space (`char::is_whitespace`).
pub const WHITESPACE: &str =
    r"\t\n\u000B\u000C\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000";

/// The characters a text field refuses once trimmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every control character (`char::is_control`): one-line fields that end up in mail
    /// headers (names, taglines, tags).
    Controls,
    /// Control characters other than line breaks and tabs: multi-line text.
    ControlsButBreaks,
    /// Control characters other than tabs: one line of free text (an issue's subject).
    ControlsButTab,
}

impl Refused {
    /// Whether the rule refuses `c` inside a value.
    pub fn refuses(self, c: char) -> bool {
        c.is_control()
            && match self {
                Refused::Controls => true,
                Refused::ControlsButBreaks => !matches!(c, '\n' | '\r' | '\t'),
                Refused::ControlsButTab => c != '\t',
            }
    }

    /// The refused characters as the inside of a regular-expression character class.
    pub fn class(self) -> &'static str {
        match self {
            Refused::Controls => r"\u0000-\u001F\u007F-\u009F",
            Refused::ControlsButBreaks => r"\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F",
            Refused::ControlsButTab => r"\u0000-\u0008\u000A-\u001F\u007F-\u009F",
        }
    }
}

/// The values a trimmed text field accepts: any surrounding whitespace, then (unless `blank`
/// is allowed) a first and a last character that are neither whitespace nor refused, and
/// nothing refused between them. `also` adds characters refused anywhere (inside a class, e.g.
/// `"<>` for a sender name). Lengths are stated apart (`maxLength`), as the trimmed value's.
pub fn pattern(blank: bool, refused: Refused, also: &str) -> String {
    let inner = format!("[^{}{also}]", refused.class());
    let edge = format!("[^{WHITESPACE}{}{also}]", refused.class());
    let body = format!("{edge}(?:{inner}*{edge})?");
    let spaces = format!("[{WHITESPACE}]*");
    if blank {
        format!("^{spaces}(?:{body}{spaces})?$")
    } else {
        format!("^{spaces}{body}{spaces}$")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::FieldErrors;

    /// Every character up to U+3100 (all whitespace and controls among them) and a few above.
    fn characters() -> impl Iterator<Item = char> {
        (0u32..0x3100)
            .chain([0xFEFF, 0x1F4A5])
            .filter_map(char::from_u32)
    }

    #[test]
    fn the_classes_are_the_checks() {
        let whitespace = regex::Regex::new(&format!("^[{WHITESPACE}]$")).unwrap();
        for c in characters() {
            assert_eq!(
                whitespace.is_match(&c.to_string()),
                c.is_whitespace(),
                "{c:?}"
            );
        }
        for rule in [
            Refused::Controls,
            Refused::ControlsButBreaks,
            Refused::ControlsButTab,
        ] {
            let class = regex::Regex::new(&format!("^[{}]$", rule.class())).unwrap();
            for c in characters() {
                assert_eq!(
                    class.is_match(&c.to_string()),
                    rule.refuses(c),
                    "{rule:?} {c:?}"
                );
            }
        }
    }

    #[test]
    fn a_pattern_accepts_what_the_check_accepts() {
        let probes = [
            "",
            " ",
            "\t",
            "a",
            " a ",
            "\ta\n",
            "a b",
            "a\tb",
            "a\nb",
            "a\u{1}b",
            "\u{1}",
            " \u{85}",
            "\u{85}a",
            "a\u{a0}",
            "é ü",
            "\u{2028}x\u{2028}",
            "x\u{7f}",
            "\u{202e}💥",
        ];
        for (rule, line) in [
            (Refused::Controls, true),
            (Refused::ControlsButBreaks, false),
        ] {
            for blank in [true, false] {
                let pattern = regex::Regex::new(&pattern(blank, rule, "")).unwrap();
                for probe in probes {
                    let mut errors = FieldErrors::new();
                    if line {
                        crate::domain::clean_line(&mut errors, "f", probe, !blank, 1000);
                    } else {
                        crate::domain::clean_text(&mut errors, "f", probe, !blank, 1000);
                    }
                    assert_eq!(
                        pattern.is_match(probe),
                        errors.is_empty(),
                        "{rule:?} blank {blank}: {probe:?} {errors:?}"
                    );
                }
            }
        }
    }
}
