//! Page/per_page as the API takes them: positive integers, `per_page` capped at 100; and the
//! opaque cursor of the subscriber list, which continues after the last row of a page.

use crate::domain::{DomainError, DomainResult, FieldErrors};

pub const DEFAULT_PER_PAGE: u32 = 25;
pub const MAX_PER_PAGE: u32 = 100;

/// A validated page request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub page: u32,
    pub per_page: u32,
}

impl Page {
    /// Parses the raw query values; absent means the default, anything not a positive integer
    /// is a validation error, and `per_page` above 100 is taken as 100.
    pub fn parse(page: Option<&str>, per_page: Option<&str>) -> DomainResult<Page> {
        let mut errors = FieldErrors::new();
        let mut positive = |field: &str, raw: Option<&str>, default: u32| -> u32 {
            match raw.map(str::trim) {
                None => default,
                Some(text) => match text.parse::<u64>() {
                    Ok(n) if n >= 1 => n.min(u32::MAX as u64) as u32,
                    // Still a positive integer, only a very large one: past every page.
                    Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => u32::MAX,
                    _ => {
                        errors.add(field, "must be a positive integer");
                        default
                    }
                },
            }
        };
        let page = positive("page", page, 1);
        let per_page = positive("per_page", per_page, DEFAULT_PER_PAGE).min(MAX_PER_PAGE);
        errors.into_result()?;
        Ok(Page { page, per_page })
    }

    /// Rows to skip.
    pub fn offset(&self) -> i64 {
        (self.page as i64 - 1) * self.per_page as i64
    }

    /// Rows to fetch: one more than shown, to learn whether another page exists.
    pub fn fetch(&self) -> i64 {
        self.per_page as i64 + 1
    }

    /// Trims the extra row and reports `has_more`.
    pub fn finish<T>(&self, mut rows: Vec<T>) -> (Vec<T>, bool) {
        let has_more = rows.len() > self.per_page as usize;
        rows.truncate(self.per_page as usize);
        (rows, has_more)
    }
}

/// Where the next page of a newest-first list starts: below the last id shown. It also
/// carries the number that page has, so `meta.page` keeps counting while a client follows
/// cursors. Written `<page>.<id>`; clients treat it as opaque.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub page: u32,
    pub before_id: i64,
}

impl Cursor {
    /// The cursors [`Cursor::encode`] writes, as a regular expression (for the API's
    /// document): a page of up to 9 digits and an id of up to 18, neither starting with 0,
    /// whitespace around it allowed; or blank, which is no cursor ([`Cursor::from_query`]).
    pub fn pattern() -> String {
        let spaces = format!("[{}]*", crate::domain::values::text_pattern::WHITESPACE);
        format!(r"^{spaces}(?:[1-9][0-9]{{0,8}}\.[1-9][0-9]{{0,17}}{spaces})?$")
    }

    /// The cursor of the page after `page`, whose last row has `last_id`.
    pub fn after(page: u32, last_id: i64) -> Cursor {
        Cursor {
            page: page.saturating_add(1),
            before_id: last_id,
        }
    }

    pub fn parse(text: &str) -> DomainResult<Cursor> {
        text.trim()
            .split_once('.')
            .and_then(|(page, id)| {
                Some(Cursor {
                    page: page.parse().ok().filter(|p| *p >= 1)?,
                    before_id: id.parse().ok().filter(|id| *id >= 1)?,
                })
            })
            .ok_or_else(|| {
                DomainError::invalid("cursor", "is not one this list gave (use meta.next_cursor)")
            })
    }

    pub fn encode(&self) -> String {
        format!("{}.{}", self.page, self.before_id)
    }

    /// The `cursor` query value (empty is absent). Given with `page`, the cursor says where to
    /// start (it carries its own page number): a client that keeps `page` among the parameters
    /// it repeats still walks the list. `page` is checked all the same.
    pub fn from_query(cursor: Option<&str>) -> DomainResult<Option<Cursor>> {
        match cursor.map(str::trim).filter(|c| !c.is_empty()) {
            None => Ok(None),
            Some(text) => Cursor::parse(text).map(Some),
        }
    }
}

/// The unknown-value error for list filters.
pub fn invalid_filter(field: &str, allowed: &str) -> DomainError {
    DomainError::invalid(field, format!("must be one of {allowed}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_defaults_caps_and_refuses_junk() {
        assert_eq!(
            Page::parse(None, None).unwrap(),
            Page {
                page: 1,
                per_page: 25
            }
        );
        assert_eq!(
            Page::parse(Some("3"), Some("99999999999999999999999")).unwrap(),
            Page {
                page: 3,
                per_page: 100
            }
        );
        for (p, pp) in [
            (Some("0"), None),
            (Some("-1"), None),
            (None, Some("abc")),
            (Some("1.5"), None),
            (None, Some("")),
        ] {
            assert!(Page::parse(p, pp).is_err(), "{p:?} {pp:?}");
        }
        let page = Page {
            page: 2,
            per_page: 2,
        };
        assert_eq!(page.offset(), 2);
        assert_eq!(page.finish(vec![1, 2, 3]), (vec![1, 2], true));
        assert_eq!(page.finish(vec![1, 2]), (vec![1, 2], false));
    }

    #[test]
    fn cursors_round_trip_and_refuse_junk() {
        let cursor = Cursor::after(3, 999_901);
        assert_eq!(cursor.encode(), "4.999901");
        assert_eq!(Cursor::parse(&cursor.encode()).unwrap(), cursor);
        let pattern = regex::Regex::new(&Cursor::pattern()).unwrap();
        assert!(pattern.is_match(&cursor.encode()));
        assert!(pattern.is_match(&Cursor::after(999_999_998, 999_999_999_999_999_999).encode()));
        for junk in [
            "",
            "4",
            "4.",
            ".5",
            "0.5",
            "4.0",
            "4.-1",
            "a.b",
            "4.5.6",
            "99999999999.1",
        ] {
            assert!(Cursor::parse(junk).is_err(), "{junk:?}");
            assert!(junk.is_empty() || !pattern.is_match(junk), "{junk:?}");
            assert!(pattern.is_match(&format!(" {} ", cursor.encode())));
        }
    }
}
