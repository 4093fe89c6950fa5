//! Numbered `.sql` files from `migrations/`, embedded in the binary and applied once each.

use rusqlite::{Connection, OptionalExtension};

use super::StoreError;

/// Every migration, in order. Add new files here; never edit one that has shipped.
pub const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_foundation",
        include_str!("../../migrations/0001_foundation.sql"),
    ),
    (
        "0002_issues_subscribers",
        include_str!("../../migrations/0002_issues_subscribers.sql"),
    ),
    (
        "0003_webhooks",
        include_str!("../../migrations/0003_webhooks.sql"),
    ),
    (
        "0004_subscription_requests",
        include_str!("../../migrations/0004_subscription_requests.sql"),
    ),
    (
        "0005_custom_domains",
        include_str!("../../migrations/0005_custom_domains.sql"),
    ),
    (
        "0006_subscriber_imports",
        include_str!("../../migrations/0006_subscriber_imports.sql"),
    ),
    (
        "0007_send_faults",
        include_str!("../../migrations/0007_send_faults.sql"),
    ),
    (
        "0008_rendered_content",
        include_str!("../../migrations/0008_rendered_content.sql"),
    ),
    (
        "0009_accounts_security",
        include_str!("../../migrations/0009_accounts_security.sql"),
    ),
    (
        "0010_lean_storage",
        include_str!("../../migrations/0010_lean_storage.sql"),
    ),
    (
        "0011_counters",
        include_str!("../../migrations/0011_counters.sql"),
    ),
    ("0012_dkim", include_str!("../../migrations/0012_dkim.sql")),
    (
        "0013_soft_bounces",
        include_str!("../../migrations/0013_soft_bounces.sql"),
    ),
    (
        "0014_sender_domains",
        include_str!("../../migrations/0014_sender_domains.sql"),
    ),
    (
        "0015_welcome",
        include_str!("../../migrations/0015_welcome.sql"),
    ),
    (
        "0016_operators",
        include_str!("../../migrations/0016_operators.sql"),
    ),
    (
        "0017_publish_on_send",
        include_str!("../../migrations/0017_publish_on_send.sql"),
    ),
    (
        "0018_issue_audience",
        include_str!("../../migrations/0018_issue_audience.sql"),
    ),
    (
        "0019_time_zones",
        include_str!("../../migrations/0019_time_zones.sql"),
    ),
    (
        "0020_site_theme",
        include_str!("../../migrations/0020_site_theme.sql"),
    ),
    (
        "0021_ids_never_reused",
        include_str!("../../migrations/0021_ids_never_reused.sql"),
    ),
    (
        "0022_events_by_subscriber",
        include_str!("../../migrations/0022_events_by_subscriber.sql"),
    ),
    (
        "0023_resend_unconfirmed",
        include_str!("../../migrations/0023_resend_unconfirmed.sql"),
    ),
    (
        "0024_connection_cut_offs",
        include_str!("../../migrations/0024_connection_cut_offs.sql"),
    ),
    (
        "0025_newsletter_relays",
        include_str!("../../migrations/0025_newsletter_relays.sql"),
    ),
    (
        "0026_send_usage",
        include_str!("../../migrations/0026_send_usage.sql"),
    ),
    (
        "0027_media",
        include_str!("../../migrations/0027_media.sql"),
    ),
    (
        "0028_issue_edits",
        include_str!("../../migrations/0028_issue_edits.sql"),
    ),
    (
        "0029_link_reports",
        include_str!("../../migrations/0029_link_reports.sql"),
    ),
    (
        "0030_mail_details",
        include_str!("../../migrations/0030_mail_details.sql"),
    ),
    (
        "0031_account_changes",
        include_str!("../../migrations/0031_account_changes.sql"),
    ),
    (
        "0032_site_pages",
        include_str!("../../migrations/0032_site_pages.sql"),
    ),
    (
        "0033_memberships",
        include_str!("../../migrations/0033_memberships.sql"),
    ),
    (
        "0034_membership_lapses",
        include_str!("../../migrations/0034_membership_lapses.sql"),
    ),
    (
        "0035_signup_forms",
        include_str!("../../migrations/0035_signup_forms.sql"),
    ),
    (
        "0036_sources",
        include_str!("../../migrations/0036_sources.sql"),
    ),
    (
        "0037_custom_fields",
        include_str!("../../migrations/0037_custom_fields.sql"),
    ),
    (
        "0038_field_segments",
        include_str!("../../migrations/0038_field_segments.sql"),
    ),
    (
        "0039_form_fields",
        include_str!("../../migrations/0039_form_fields.sql"),
    ),
    (
        "0040_preferences",
        include_str!("../../migrations/0040_preferences.sql"),
    ),
    (
        "0041_resend_unopened",
        include_str!("../../migrations/0041_resend_unopened.sql"),
    ),
    (
        "0042_feeds",
        include_str!("../../migrations/0042_feeds.sql"),
    ),
    (
        "0043_feed_modes",
        include_str!("../../migrations/0043_feed_modes.sql"),
    ),
    (
        "0044_sequences",
        include_str!("../../migrations/0044_sequences.sql"),
    ),
    (
        "0045_sequence_welcome_and_opens",
        include_str!("../../migrations/0045_sequence_welcome_and_opens.sql"),
    ),
];

/// Applies the migrations not yet recorded in `schema_migrations`; returns their names.
///
/// Foreign keys are off while migrations run (SQLite only changes that setting outside a
/// transaction), so a migration can rebuild a table, SQLite's way of changing a constraint,
/// without the drop of the old table cascading into the tables that reference it; each
/// migration's references are checked before it commits, and the setting is restored.
pub fn migrate(conn: &mut Connection) -> Result<Vec<&'static str>, StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             name TEXT PRIMARY KEY,
             applied_at TEXT NOT NULL
         )",
    )?;
    let enforced: bool = conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
    conn.pragma_update(None, "foreign_keys", false)?;
    let result = apply_pending(conn);
    conn.pragma_update(None, "foreign_keys", enforced)?;
    result
}

fn apply_pending(conn: &mut Connection) -> Result<Vec<&'static str>, StoreError> {
    let mut applied = Vec::new();
    for (name, sql) in MIGRATIONS {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let done: bool = tx.query_row(
            "SELECT EXISTS(SELECT 1 FROM schema_migrations WHERE name = ?1)",
            [name],
            |row| row.get(0),
        )?;
        if !done {
            tx.execute_batch(sql)?;
            let broken: Option<String> = tx
                .query_row("PRAGMA foreign_key_check", [], |r| r.get(0))
                .optional()?;
            if let Some(table) = broken {
                return Err(StoreError::Io(std::io::Error::other(format!(
                    "migration {name} leaves rows in {table} that reference missing rows"
                ))));
            }
            tx.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?1, ?2)",
                (name, crate::clock::now_string()),
            )?;
            applied.push(*name);
        }
        tx.commit()?;
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_once_and_is_idempotent() {
        let mut conn = Connection::open_in_memory().unwrap();
        let first = migrate(&mut conn).unwrap();
        assert_eq!(first.len(), MIGRATIONS.len());
        assert!(migrate(&mut conn).unwrap().is_empty());
        let count: i64 = conn
            .query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count as usize, MIGRATIONS.len());
    }

    /// A database as the migrations before `name` left it, with `rows` (SQL) added, then
    /// migrated the rest of the way as an upgrade would: the connection and the names applied.
    fn upgraded_from_before(name: &str, rows: &str) -> (Connection, Vec<&'static str>) {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        let at = MIGRATIONS.iter().position(|(n, _)| *n == name).unwrap();
        let (old, _) = MIGRATIONS.split_at(at);
        for (_, sql) in old {
            conn.execute_batch(sql).unwrap();
        }
        conn.execute_batch(
            "CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL);",
        )
        .unwrap();
        conn.execute_batch(rows).unwrap();
        for (name, _) in old {
            conn.execute("INSERT INTO schema_migrations VALUES (?1, 'n')", [name])
                .unwrap();
        }
        let applied = migrate(&mut conn).unwrap();
        (conn, applied)
    }

    /// Migration 0011 fills its counters from the rows already there: each equals a recount,
    /// and the history of active subscribers is rebuilt as the growth chart rebuilt it.
    #[test]
    fn the_counters_start_from_the_rows_already_there() {
        let (conn, applied) = upgraded_from_before(
            "0011_counters",
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', 'n', 'n');
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at) VALUES
               (1, 'N', 'n', 'paid', 'bt', 'n', 'n'), (1, 'Empty', 'e', 'free', 'bt2', 'n', 'n');
             WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 3000)
             INSERT INTO subscribers (newsletter_id, email, status, resubscribed_at, unsubscribed_at, created_at, changed_at)
             SELECT 1, 'r' || i || '@x.co', CASE i % 10 WHEN 0 THEN 'unsubscribed' WHEN 1 THEN 'bounced' ELSE 'active' END,
                    '2026-03-0' || (1 + i % 5) || 'T10:00:00.000Z',
                    CASE WHEN i % 10 = 0 THEN '2026-03-0' || (5 + i % 4) || 'T10:00:00.000Z' END,
                    '2026-02-0' || (1 + i % 7) || 'T10:00:00.000Z', '2026-03-09T10:00:00.000Z'
             FROM k;
             INSERT INTO subscriber_tags (subscriber_id, tag) SELECT id, 'group-' || (id % 7) FROM subscribers;
             INSERT INTO subscriber_tags (subscriber_id, tag) SELECT id, 'vip' FROM subscribers WHERE id % 20 = 0;
             INSERT INTO issues (newsletter_id, subject, status, sent_at, path, created_at, updated_at) VALUES
               (1, 'One', 'sent', '2026-03-06T09:00:00.000Z', 'one', 'n', 'n'),
               (1, 'Two', 'sending', NULL, 'two', 'n', 'n'),
               (1, 'Draft', 'draft', NULL, 'three', 'n', 'n');
             INSERT INTO deliveries (issue_id, subscriber_id, email, status, sent_at, opened_at, clicked_at, bounced_at, unsubscribed_at, created_at)
             SELECT 1, id, email, CASE WHEN status = 'bounced' THEN 'bounced' WHEN id % 50 = 3 THEN 'unconfirmed' ELSE 'sent' END,
                    '2026-03-06T09:00:00.000Z',
                    CASE WHEN id % 3 = 0 THEN '2026-03-0' || (6 + id % 3) || 'T11:00:00.000Z' END,
                    CASE WHEN id % 9 = 0 THEN '2026-03-08T12:00:00.000Z' END,
                    CASE WHEN status = 'bounced' THEN '2026-03-07T09:00:00.000Z' END,
                    CASE WHEN status = 'unsubscribed' THEN unsubscribed_at END, 'n'
             FROM subscribers;
             INSERT INTO deliveries (issue_id, subscriber_id, email, status, created_at)
             SELECT 2, id, email, CASE id % 4 WHEN 0 THEN 'sending' WHEN 1 THEN 'failed' ELSE 'pending' END, 'n'
             FROM subscribers WHERE status = 'active';",
        );
        assert_eq!(applied.first(), Some(&"0011_counters"));
        let wrong = crate::domain::testing::counter_mismatches(&conn);
        assert!(wrong.is_empty(), "{wrong:#?}");
        // Bounced subscribers left on their delivery's bounce (03-07), unsubscribed ones on
        // their unsubscribed_at; everyone joined on subscribed_at.
        let change = |day: &str| -> i64 {
            conn.query_row(
                "SELECT active_change FROM newsletter_days WHERE newsletter_id = 1 AND day = ?1",
                [day],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(
            change("2026-03-07"),
            -300 - 150,
            "bounces, and unsubscribes of 03-07"
        );
        assert_eq!(change("2026-03-01"), 600);
        let empty: (i64, i64) = conn
            .query_row(
                "SELECT active + unsubscribed + bounced, (SELECT count(*) FROM newsletter_days WHERE newsletter_id = 2)
                 FROM subscriber_totals WHERE newsletter_id = 2",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(empty, (0, 0), "a newsletter without rows has zero counters");
    }

    #[test]
    fn rebuilding_a_table_keeps_the_rows_that_reference_it() {
        let (conn, applied) = upgraded_from_before(
            MIGRATIONS[6].0,
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', 'n', 'n');
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
               VALUES (1, 'N', 'n', 'paid', 'bt', 'n', 'n');
             INSERT INTO issues (newsletter_id, subject, status, path, created_at, updated_at)
               VALUES (1, 'S', 'sending', 's', 'n', 'n');
             INSERT INTO articles (issue_id, position, title, url, summarized_article) VALUES (1, 1, 'A', 'https://a.example', '');
             INSERT INTO deliveries (issue_id, email, status, created_at) VALUES (1, 'a@x.co', 'sending', 'n');",
        );
        assert_eq!(applied.len(), MIGRATIONS.len() - 6);
        let rows: (i64, i64, i64) = conn
            .query_row(
                "SELECT (SELECT count(*) FROM issues), (SELECT count(*) FROM articles), (SELECT count(*) FROM deliveries)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(rows, (1, 1, 1));
        let enforced: bool = conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert!(enforced, "foreign keys are on again");
        conn.execute("UPDATE deliveries SET status = 'unconfirmed'", [])
            .unwrap();
        conn.execute("UPDATE issues SET status = 'failed'", [])
            .unwrap();
    }

    #[test]
    fn lean_storage_keeps_subscribers_tags_and_deliverable_events() {
        let (conn, applied) = upgraded_from_before(
            "0010_lean_storage",
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', 'n', 'n');
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
               VALUES (1, 'N', 'n', 'paid', 'bt', 'n', 'n');
             INSERT INTO subscribers (id, newsletter_id, email, name, status, subscribed_at, unsubscribed_at, created_at, updated_at)
               VALUES (7, 1, 'a@x.co', 'A', 'active', 't1', NULL, 't1', 't1'),
                      (9, 1, 'b@x.co', NULL, 'unsubscribed', 't2', 't3', 't1', 't3');
             INSERT INTO subscriber_tags (subscriber_id, tag) VALUES (7, 'vip'), (7, 'early'), (9, 'x');
             INSERT INTO issues (newsletter_id, subject, status, path, created_at, updated_at)
               VALUES (1, 'S', 'sent', 's', 'n', 'n');
             INSERT INTO deliveries (issue_id, subscriber_id, email, status, created_at) VALUES (1, 9, 'b@x.co', 'sent', 'n');
             INSERT INTO webhook_subscriptions (newsletter_id, url, events, secret, created_at, updated_at)
               VALUES (1, 'https://h.example.com', '[\"issue.sent\"]', 's', 'n', 'n');
             INSERT INTO events (id, newsletter_id, kind, payload, created_at)
               VALUES (1, 1, 'subscriber.created', '{}', 'n'), (2, 1, 'issue.sent', '{}', 'n');
             INSERT INTO webhook_deliveries (subscription_id, event_id, uid, event, body, created_at, updated_at)
               VALUES (1, 2, 'msg_1', 'issue.sent', '{}', 'n', 'n');",
        );
        assert_eq!(applied.first(), Some(&"0010_lean_storage"));
        assert_eq!(applied.len(), MIGRATIONS.len() - 9);
        // Each row as text, NULL as "-".
        let rows: Vec<String> = conn
            .prepare(
                "SELECT concat_ws(' ', id, email, coalesce(name, '-'), status, subscribed_at,
                        coalesce(unsubscribed_at, '-'), created_at, updated_at)
                 FROM subscribers ORDER BY id",
            )
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            vec![
                "7 a@x.co A active t1 - t1 t1",
                "9 b@x.co - unsubscribed t2 t3 t1 t3"
            ]
        );
        let stored: (Option<String>, Option<String>) = conn
            .query_row(
                "SELECT resubscribed_at, changed_at FROM subscribers WHERE id = 7",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            stored,
            (None, None),
            "one timestamp stored while nothing changed"
        );
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(
            count("SELECT count(*) FROM subscriber_tags WHERE subscriber_id = 7"),
            2
        );
        assert_eq!(
            count("SELECT count(*) FROM subscriber_tags WHERE tag = 'x'"),
            1
        );
        assert_eq!(
            count("SELECT count(*) FROM events WHERE id = 2")
                + count("SELECT count(*) FROM events"),
            2,
            "the event no delivery carries is gone"
        );
        assert_eq!(
            count("SELECT count(*) FROM deliveries WHERE subscriber_id = 9"),
            1
        );
    }

    /// Migration 0022 gives each kept event the subscriber it names: by `subscription_id`
    /// (a deleted subscriber's id too), else by its delivery's subscriber, else by who has its
    /// address in that newsletter; other events name no one.
    #[test]
    fn events_learn_the_subscriber_they_name() {
        let (conn, applied) = upgraded_from_before(
            "0022_events_by_subscriber",
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', 'n', 'n');
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
               VALUES (1, 'N', 'n', 'paid', 'bt', 'n', 'n'), (1, 'M', 'm', 'paid', 'bt2', 'n', 'n');
             INSERT INTO subscribers (id, newsletter_id, email, created_at)
               VALUES (5, 1, 'ann@x.co', 'n'), (6, 1, 'bob@x.co', 'n'), (8, 2, 'ann@x.co', 'n');
             INSERT INTO issues (id, newsletter_id, subject, path, created_at, updated_at)
               VALUES (3, 1, 'I', 'i', 'n', 'n');
             INSERT INTO deliveries (id, issue_id, subscriber_id, email, status, created_at)
               VALUES (70, 3, 6, 'ann@x.co', 'sent', 'n');
             INSERT INTO events (id, newsletter_id, kind, payload, created_at) VALUES
               (1, 1, 'subscriber.deleted', '{\"data\":{\"subscription_id\":9,\"email\":\"ann@x.co\"}}', 'n'),
               (2, 1, 'email.opened', '{\"data\":{\"delivery_id\":70,\"email\":\"ann@x.co\"}}', 'n'),
               (3, 1, 'email.unsubscribed', '{\"data\":{\"email\":\"ann@x.co\"}}', 'n'),
               (4, 2, 'email.unsubscribed', '{\"data\":{\"email\":\"ann@x.co\"}}', 'n'),
               (5, 1, 'email.opened', '{\"data\":{\"delivery_id\":71,\"email\":\"ann@x.co\"}}', 'n'),
               (6, 1, 'issue.sent', '{\"data\":{\"id\":3}}', 'n');",
        );
        assert_eq!(applied.first(), Some(&"0022_events_by_subscriber"));
        let named: Vec<(i64, Option<i64>)> = conn
            .prepare("SELECT id, subscriber_id FROM events ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            named,
            vec![
                (1, Some(9)),
                (2, Some(6)),
                (3, Some(5)),
                (4, Some(8)),
                (5, None),
                (6, None)
            ],
            "by subscription_id, by delivery (bob's, though to ann's address), by address in \
             its own newsletter; a delivery no longer kept and an issue event name no one"
        );
    }

    /// Migration 0029 starts the report counters from the rows already there: each
    /// delivery's first open and first click on its day after the send, the links of the
    /// click events still kept, and each tag's active subscribers.
    #[test]
    fn link_reports_start_from_the_rows_already_there() {
        let (conn, applied) = upgraded_from_before(
            "0029_link_reports",
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', 'n', 'n');
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
               VALUES (1, 'N', 'n', 'paid', 'bt', 'n', 'n');
             INSERT INTO subscribers (id, newsletter_id, email, status, created_at)
               VALUES (5, 1, 'a@x.co', 'active', 'n'), (6, 1, 'b@x.co', 'active', 'n'),
                      (7, 1, 'c@x.co', 'unsubscribed', 'n');
             INSERT INTO subscriber_tags (subscriber_id, tag) VALUES (5, 'vip'), (6, 'vip'), (7, 'vip'), (7, 'old');
             INSERT INTO issues (id, newsletter_id, subject, status, sent_at, path, created_at, updated_at)
               VALUES (3, 1, 'I', 'sent', '2026-03-01T10:00:00.000Z', 'i', 'n', 'n');
             INSERT INTO deliveries (id, issue_id, subscriber_id, email, status, sent_at, opened_at, clicked_at, created_at) VALUES
               (70, 3, 5, 'a@x.co', 'sent', '2026-03-01T10:00:00.000Z', '2026-03-01T12:00:00.000Z', '2026-03-02T11:00:00.000Z', 'n'),
               (71, 3, 6, 'b@x.co', 'sent', '2026-03-01T10:00:00.000Z', '2026-03-02T09:59:00.000Z', NULL, 'n'),
               (72, 3, 7, 'c@x.co', 'sent', '2026-03-01T10:00:00.000Z', '2026-03-12T09:00:00.000Z', NULL, 'n');
             INSERT INTO events (id, newsletter_id, kind, payload, created_at) VALUES
               (1, 1, 'email.clicked', '{\"data\":{\"delivery_id\":70,\"issue_id\":3,\"clicked_url\":\"https://a.example/\"}}', 'n'),
               (2, 1, 'email.opened', '{\"data\":{\"delivery_id\":71,\"issue_id\":3}}', 'n');",
        );
        assert_eq!(applied.first(), Some(&"0029_link_reports"));
        let rows = |sql: &str| -> Vec<String> {
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            stmt.query_map([], |r| {
                Ok((0..n)
                    .map(|i| {
                        r.get::<_, rusqlite::types::Value>(i)
                            .map(|v| format!("{v:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?
                    .join(" "))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
        };
        // Day 0: a's and b's first opens (b's 1 minute before 24 hours); day 1: a's first
        // click; c's open, 11 days on, in no day.
        assert_eq!(
            rows("SELECT issue_id, day, opened, clicked, clicks FROM issue_days ORDER BY day"),
            [
                "Integer(3) Integer(0) Integer(2) Integer(0) Integer(0)",
                "Integer(3) Integer(1) Integer(0) Integer(1) Integer(1)"
            ]
        );
        assert_eq!(
            rows("SELECT issue_id, url, clickers, clicks FROM issue_links"),
            ["Integer(3) Text(\"https://a.example/\") Integer(1) Integer(1)"]
        );
        assert_eq!(
            rows("SELECT delivery_id FROM link_clickers"),
            ["Integer(70)"]
        );
        assert_eq!(
            rows("SELECT tag, subscribers, active FROM tag_counts ORDER BY tag"),
            [
                "Text(\"old\") Integer(1) Integer(0)",
                "Text(\"vip\") Integer(3) Integer(2)"
            ]
        );
    }
}
