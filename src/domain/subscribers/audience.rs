//! Segments: who a send goes to. An audience is the active subscribers having ANY of its
//! `tags` (no tags: every active subscriber) and NONE of its `exclude_tags`. It is recorded
//! on the issue (`issue_audience_tags`), counted exactly for the confirmation, and read once
//! by the send when it records its deliveries (`domain::delivery::sending::prepare`).
//!
//! Counting stays bounded at a million subscribers: everyone is the stored counter
//! (`subscriber_totals`); a count with tags reads the rows of those tags in the tag index
//! (`subscriber_tags_tag`) when they are few, else one index entry and one tag probe per
//! active subscriber. Doors count on the blocking pool (`store::Db`), never on async threads.

use rusqlite::{Connection, OptionalExtension};

use crate::domain::subscribers::{self, clean_tag};
use crate::domain::{DomainResult, FieldErrors};

/// Tags in each list: more is a mistake, and keeps each count's lookups few.
pub const TAGS_MAX: usize = 20;

/// A checked audience: tags trimmed, without repeats, sorted. Empty lists: everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audience {
    pub tags: Vec<String>,
    pub exclude_tags: Vec<String>,
    /// Members with paid access only (a paid issue sent to paid members only; the issue's
    /// `paid_members_only`, not a tag).
    pub paid_only: bool,
}

/// An audience as a door received it, not yet checked.
#[derive(Debug, Clone, Default)]
pub struct AudienceInput {
    pub tags: Vec<String>,
    pub exclude_tags: Vec<String>,
}

impl Audience {
    /// No tags either way: every active subscriber.
    pub fn is_everyone(&self) -> bool {
        self.tags.is_empty() && self.exclude_tags.is_empty() && !self.paid_only
    }

    /// The audience in words, for pages: "subscribers tagged a or b, except those tagged c".
    pub fn describe(&self) -> String {
        let quoted = |tags: &[String]| {
            tags.iter()
                .map(|t| format!("“{t}”"))
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let who = if self.paid_only {
            "paid member"
        } else {
            "active subscriber"
        };
        let mut text = if self.tags.is_empty() {
            format!("every {who}")
        } else {
            format!("{who}s tagged {}", quoted(&self.tags))
        };
        if !self.exclude_tags.is_empty() {
            text.push_str(&format!(
                ", except those tagged {}",
                quoted(&self.exclude_tags)
            ));
        }
        text
    }

    /// Reads the two lists stored as lines (the issue queries' `group_concat`).
    pub fn from_lines(tags: Option<String>, exclude_tags: Option<String>) -> Self {
        let lines = |text: Option<String>| {
            text.map(|t| t.split('\n').map(str::to_string).collect())
                .unwrap_or_default()
        };
        Audience {
            tags: lines(tags),
            exclude_tags: lines(exclude_tags),
            paid_only: false,
        }
    }

    fn json(tags: &[String]) -> String {
        serde_json::to_string(tags).expect("strings serialise")
    }
}

/// Checks the shape of `input` (each tag as a subscriber's tag must be, at most [`TAGS_MAX`]
/// a list, no tag both wanted and excluded), adding problems to `errors` under `prefix`
/// (`""` or `"audience."`) and the list's name.
pub fn check_shape(input: &AudienceInput, prefix: &str, errors: &mut FieldErrors) -> Audience {
    let mut clean = |field: &str, raw: &[String]| {
        let field = format!("{prefix}{field}");
        let mut tags: Vec<String> = Vec::new();
        for tag in raw {
            match clean_tag(tag) {
                Ok(tag) if !tags.contains(&tag) => tags.push(tag),
                Ok(_) => {}
                Err(message) => errors.add(&field, message),
            }
        }
        if tags.len() > TAGS_MAX {
            errors.add(&field, format!("are too many (maximum is {TAGS_MAX})"));
        }
        tags.sort();
        tags
    };
    let tags = clean("tags", &input.tags);
    let exclude_tags = clean("exclude_tags", &input.exclude_tags);
    for tag in tags.iter().filter(|t| exclude_tags.contains(t)) {
        errors.add(
            &format!("{prefix}exclude_tags"),
            format!("cannot also name “{tag}”, a tag the audience includes"),
        );
    }
    Audience {
        tags,
        exclude_tags,
        paid_only: false,
    }
}

/// Refuses a tag no subscriber of the newsletter carries (in any status): it is almost
/// always a typo, and would silently make the audience smaller or larger than meant.
pub fn check_known(
    conn: &Connection,
    newsletter_id: i64,
    audience: &Audience,
    prefix: &str,
) -> DomainResult<()> {
    const KNOWN: &str = "SELECT 1 FROM tag_counts WHERE newsletter_id = ?1 AND tag = ?2";
    let mut stmt = conn.prepare_cached(KNOWN)?;
    let mut errors = FieldErrors::new();
    for (field, tags) in [
        ("tags", &audience.tags),
        ("exclude_tags", &audience.exclude_tags),
    ] {
        for tag in tags {
            if stmt
                .query_row((newsletter_id, tag), |_| Ok(()))
                .optional()?
                .is_none()
            {
                errors.add(
                    &format!("{prefix}{field}"),
                    format!("include “{tag}”, a tag no subscriber has"),
                );
            }
        }
    }
    errors.into_result()
}

/// [`check_shape`] and [`check_known`] together, as a door's input is checked.
pub fn check(
    conn: &Connection,
    newsletter_id: i64,
    input: &AudienceInput,
    prefix: &str,
) -> DomainResult<Audience> {
    let mut errors = FieldErrors::new();
    let audience = check_shape(input, prefix, &mut errors);
    errors.into_result()?;
    check_known(conn, newsletter_id, &audience, prefix)?;
    Ok(audience)
}

/// The exact number of subscribers in the audience now. Everyone is the stored counter; with
/// tags, the tagged subscribers are found through the tag index (the tagged rows only).
pub fn count(conn: &Connection, newsletter_id: i64, audience: &Audience) -> DomainResult<i64> {
    if audience.paid_only {
        return paid_members(conn, newsletter_id, audience);
    }
    if audience.is_everyone() {
        return subscribers::active_count(conn, newsletter_id);
    }
    if audience.tags.is_empty() {
        let everyone = subscribers::active_count(conn, newsletter_id)?;
        let excluded = tagged(conn, newsletter_id, &audience.exclude_tags, &[])?;
        return Ok(everyone - excluded);
    }
    tagged(conn, newsletter_id, &audience.tags, &audience.exclude_tags)
}

/// Active subscribers of the newsletter with any of `tags` and none of `except`, read the
/// cheaper of two ways, chosen from the tag counters: when the tags' subscribers are a small
/// part of the list, through the tag index (those rows only, each one lookup of its
/// subscriber); otherwise along the newsletter's active subscribers in the list index, each
/// one probe of its own tags (`docs/performance.md`, "Counting a segment"). A probe reads
/// the subscriber's own few tag rows (`+tag` keeps SQLite from seeking once per listed tag).
fn tagged(
    conn: &Connection,
    newsletter_id: i64,
    tags: &[String],
    except: &[String],
) -> DomainResult<i64> {
    const CARRIERS: &str = "SELECT coalesce(sum(subscribers), 0) FROM tag_counts
         WHERE newsletter_id = ?1 AND tag IN (SELECT value FROM json_each(?2))";
    const BY_TAG: &str = "SELECT count(*) FROM subscribers s
         WHERE s.id IN (SELECT t.subscriber_id FROM subscriber_tags t
                        WHERE t.tag IN (SELECT value FROM json_each(?2)))
           AND s.newsletter_id = ?1 AND s.status = 'active'
           AND NOT EXISTS (SELECT 1 FROM subscriber_tags x
                           WHERE x.subscriber_id = s.id AND +x.tag IN (SELECT value FROM json_each(?3)))";
    const BY_LIST: &str = "SELECT count(*) FROM subscribers s INDEXED BY subscribers_list
         WHERE s.newsletter_id = ?1 AND s.status = 'active'
           AND EXISTS (SELECT 1 FROM subscriber_tags t
                       WHERE t.subscriber_id = s.id AND +t.tag IN (SELECT value FROM json_each(?2)))
           AND NOT EXISTS (SELECT 1 FROM subscriber_tags x
                           WHERE x.subscriber_id = s.id AND +x.tag IN (SELECT value FROM json_each(?3)))";
    let (tags, except) = (Audience::json(tags), Audience::json(except));
    let carriers: i64 = conn
        .prepare_cached(CARRIERS)?
        .query_row((newsletter_id, &tags), |r| r.get(0))?;
    let everyone = subscribers::active_count(conn, newsletter_id)?;
    let sql = if carriers * 3 < everyone {
        BY_TAG
    } else {
        BY_LIST
    };
    Ok(conn
        .prepare_cached(sql)?
        .query_row((newsletter_id, tags, except), |r| r.get(0))?)
}

/// Active subscribers with paid access now, with any of the audience's tags (none: all of
/// them) and none of its excluded ones: along the members' rows (`memberships_newsletter`),
/// never the whole list.
fn paid_members(conn: &Connection, newsletter_id: i64, audience: &Audience) -> DomainResult<i64> {
    const SQL: &str =
        "SELECT count(*) FROM memberships m CROSS JOIN subscribers s ON s.id = m.subscriber_id
         WHERE m.newsletter_id = ?1 AND m.status != 'free'
           AND (m.access_until IS NULL OR m.access_until > ?4) AND s.status = 'active'
           AND (?2 = '[]' OR EXISTS (SELECT 1 FROM subscriber_tags t
                WHERE t.subscriber_id = s.id AND +t.tag IN (SELECT value FROM json_each(?2))))
           AND NOT EXISTS (SELECT 1 FROM subscriber_tags x
                WHERE x.subscriber_id = s.id AND +x.tag IN (SELECT value FROM json_each(?3)))";
    let (tags, except) = (
        Audience::json(&audience.tags),
        Audience::json(&audience.exclude_tags),
    );
    Ok(conn.prepare_cached(SQL)?.query_row(
        (newsletter_id, tags, except, crate::clock::Timestamp::now()),
        |r| r.get(0),
    )?)
}

/// Replaces the audience recorded on issue `issue_id`.
pub fn store(conn: &Connection, issue_id: i64, audience: &Audience) -> DomainResult<()> {
    const CLEAR: &str = "DELETE FROM issue_audience_tags WHERE issue_id = ?1";
    const ADD: &str =
        "INSERT INTO issue_audience_tags (issue_id, excluded, tag) VALUES (?1, ?2, ?3)";
    conn.execute(CLEAR, [issue_id])?;
    let mut stmt = conn.prepare_cached(ADD)?;
    for (excluded, tags) in [(false, &audience.tags), (true, &audience.exclude_tags)] {
        for tag in tags {
            stmt.execute((issue_id, excluded, tag))?;
        }
    }
    Ok(())
}

/// The JSON lists (`tags`, `exclude_tags`) of issue `issue_id`'s recorded audience, for the
/// send's recipient query.
pub fn stored_json(conn: &Connection, issue_id: i64) -> DomainResult<(String, String)> {
    const SQL: &str = "SELECT
         (SELECT json_group_array(tag) FROM issue_audience_tags WHERE issue_id = ?1 AND excluded = 0),
         (SELECT json_group_array(tag) FROM issue_audience_tags WHERE issue_id = ?1 AND excluded = 1)";
    Ok(conn.query_row(SQL, [issue_id], |r| Ok((r.get(0)?, r.get(1)?)))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DomainError;

    fn input(tags: &[&str], exclude: &[&str]) -> AudienceInput {
        AudienceInput {
            tags: tags.iter().map(|t| t.to_string()).collect(),
            exclude_tags: exclude.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn shapes_are_cleaned_and_contradictions_refused() {
        let mut errors = FieldErrors::new();
        let audience = check_shape(&input(&[" b ", "a", "b"], &["c"]), "", &mut errors);
        assert!(errors.is_empty());
        assert_eq!(audience.tags, ["a", "b"]);
        let mut errors = FieldErrors::new();
        check_shape(&input(&["a", ""], &["a"]), "audience.", &mut errors);
        let fields = errors.by_field();
        assert!(fields.contains_key("audience.tags"), "{fields:?}");
        assert!(fields.contains_key("audience.exclude_tags"), "{fields:?}");
        let many: Vec<String> = (0..=TAGS_MAX).map(|i| format!("t{i}")).collect();
        let mut errors = FieldErrors::new();
        check_shape(
            &AudienceInput {
                tags: many,
                exclude_tags: vec![],
            },
            "",
            &mut errors,
        );
        assert!(!errors.is_empty());
    }

    #[test]
    fn counts_any_of_the_tags_and_none_of_the_excluded() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute_batch(
            "INSERT INTO newsletters (id, owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
               VALUES (2, 1, 'Other', 'other', 'paid', 'bt2', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO subscribers (id, newsletter_id, email, status, created_at) VALUES
               (1, 1, 'a@x.co', 'active', '2026-01-01T00:00:00.000Z'),
               (2, 1, 'ab@x.co', 'active', '2026-01-01T00:00:00.000Z'),
               (3, 1, 'b@x.co', 'active', '2026-01-01T00:00:00.000Z'),
               (4, 1, 'none@x.co', 'active', '2026-01-01T00:00:00.000Z'),
               (5, 1, 'gone@x.co', 'unsubscribed', '2026-01-01T00:00:00.000Z'),
               (6, 2, 'other@x.co', 'active', '2026-01-01T00:00:00.000Z');
             INSERT INTO subscriber_tags (subscriber_id, tag) VALUES
               (1, 'a'), (2, 'a'), (2, 'b'), (3, 'b'), (5, 'a'), (5, 'old'), (6, 'a');",
        )
        .unwrap();
        let count = |tags: &[&str], exclude: &[&str]| {
            let audience = check(&conn, 1, &input(tags, exclude), "").unwrap();
            super::count(&conn, 1, &audience).unwrap()
        };
        assert_eq!(count(&[], &[]), 4);
        assert_eq!(count(&["a"], &[]), 2);
        assert_eq!(count(&["a", "b"], &[]), 3);
        assert_eq!(count(&["a"], &["b"]), 1);
        assert_eq!(count(&[], &["b"]), 2);
        assert_eq!(count(&["old"], &[]), 0, "only an unsubscribed one has it");
        // Among many untagged subscribers the tags' rows are few: read through the tag index.
        for n in 1..=20 {
            conn.execute(
                "INSERT INTO subscribers (newsletter_id, email, status, created_at)
                 VALUES (1, ?1, 'active', '2026-01-01T00:00:00.000Z')",
                [format!("u{n}@x.co")],
            )
            .unwrap();
        }
        assert_eq!(count(&[], &[]), 24);
        assert_eq!(count(&["a"], &["b"]), 1);
        assert_eq!(count(&["a", "b"], &[]), 3);
        assert_eq!(count(&[], &["b"]), 22);
        let unknown = check(&conn, 1, &input(&["a", "typo"], &[]), "");
        assert!(matches!(unknown, Err(DomainError::Invalid(..))));
    }

    #[test]
    fn stored_audiences_read_back() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute(
            "INSERT INTO issues (id, newsletter_id, subject, content_markdown, status, path, created_at, updated_at)
             VALUES (7, 1, 'S', 'x', 'approved', 's', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
        let audience = Audience {
            tags: vec!["a".into(), "b".into()],
            exclude_tags: vec!["c".into()],
            paid_only: false,
        };
        store(&conn, 7, &audience).unwrap();
        assert_eq!(
            stored_json(&conn, 7).unwrap(),
            (r#"["a","b"]"#.to_string(), r#"["c"]"#.to_string())
        );
        store(&conn, 7, &Audience::default()).unwrap();
        assert_eq!(
            stored_json(&conn, 7).unwrap(),
            ("[]".to_string(), "[]".to_string())
        );
        assert_eq!(
            audience.describe(),
            "active subscribers tagged “a” or “b”, except those tagged “c”"
        );
    }
}
