//! Fixtures for the domain's unit tests: a migrated in-memory database with one owner and
//! one newsletter (id 1, subdomain `n`).

use rusqlite::Connection;

pub fn db() -> Connection {
    let mut conn = Connection::open_in_memory().expect("in-memory database");
    crate::store::migrate(&mut conn).expect("migrations apply");
    conn
}

pub fn db_with_newsletter(tier: &str) -> Connection {
    let conn = db();
    conn.execute_batch(
        "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
    )
    .unwrap();
    conn.execute(
        "INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
         VALUES (1, 'N', 'n', ?1, 'bt', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
        [tier],
    )
    .unwrap();
    conn
}

/// Subscribes a webhook of newsletter `newsletter_id` to `kinds`, so those events are
/// recorded (nothing is recorded for events no subscription wants).
pub fn listen(conn: &mut Connection, newsletter_id: i64, kinds: &[&str]) {
    let input = super::events::webhooks::NewSubscription {
        url: "https://hooks.example.com/listen".into(),
        events: kinds.iter().map(|k| k.to_string()).collect(),
    };
    super::events::webhooks::create(conn, newsletter_id, &input, &|_| Ok(())).unwrap();
}

/// Each counter table of migration 0011 compared with a recount from the rows: one line per
/// row that differs (empty when every counter is right). `active_change` is history, not a
/// recount; what can be checked is that the changes of all days add up to the active count.
pub fn counter_mismatches(conn: &Connection) -> Vec<String> {
    const CHECKS: &[(&str, &str, &str)] = &[
        (
            "subscriber_totals",
            "SELECT newsletter_id, active, unsubscribed, bounced FROM subscriber_totals",
            "SELECT n.id, coalesce(sum(s.status = 'active'), 0), coalesce(sum(s.status = 'unsubscribed'), 0),
                    coalesce(sum(s.status = 'bounced'), 0)
             FROM newsletters n LEFT JOIN subscribers s ON s.newsletter_id = n.id GROUP BY n.id",
        ),
        (
            "subscriber_blocks",
            "SELECT newsletter_id, block, active, unsubscribed, bounced FROM subscriber_blocks
             WHERE active != 0 OR unsubscribed != 0 OR bounced != 0",
            "SELECT newsletter_id, id >> 10, sum(status = 'active'), sum(status = 'unsubscribed'), sum(status = 'bounced')
             FROM subscribers GROUP BY 1, 2",
        ),
        (
            "tag_counts",
            "SELECT newsletter_id, tag, subscribers, active FROM tag_counts",
            "SELECT s.newsletter_id, t.tag, count(*), sum(s.status = 'active')
             FROM subscriber_tags t JOIN subscribers s ON s.id = t.subscriber_id
             GROUP BY 1, 2",
        ),
        (
            "newsletter_days",
            "SELECT newsletter_id, day, created, unsubscribed, sent, unconfirmed, opened, clicked FROM newsletter_days
             WHERE created != 0 OR unsubscribed != 0 OR sent != 0 OR unconfirmed != 0 OR opened != 0 OR clicked != 0",
            "SELECT newsletter_id, day, sum(created), sum(unsubscribed), sum(sent), sum(unconfirmed), sum(opened), sum(clicked)
             FROM (
                 SELECT newsletter_id, substr(created_at, 1, 10) AS day, 1 AS created, 0 AS unsubscribed, 0 AS sent,
                        0 AS unconfirmed, 0 AS opened, 0 AS clicked FROM subscribers
                 UNION ALL SELECT newsletter_id, substr(unsubscribed_at, 1, 10), 0, 1, 0, 0, 0, 0
                 FROM subscribers WHERE unsubscribed_at IS NOT NULL
                 UNION ALL SELECT i.newsletter_id, substr(d.sent_at, 1, 10), 0, 0, d.status != 'unconfirmed',
                        d.status = 'unconfirmed', 0, 0
                 FROM deliveries d JOIN issues i ON i.id = d.issue_id WHERE d.sent_at IS NOT NULL
                 UNION ALL SELECT i.newsletter_id, substr(d.opened_at, 1, 10), 0, 0, 0, 0, 1, 0
                 FROM deliveries d JOIN issues i ON i.id = d.issue_id WHERE d.opened_at IS NOT NULL
                 UNION ALL SELECT i.newsletter_id, substr(d.clicked_at, 1, 10), 0, 0, 0, 0, 0, 1
                 FROM deliveries d JOIN issues i ON i.id = d.issue_id WHERE d.clicked_at IS NOT NULL
             ) GROUP BY 1, 2",
        ),
        (
            "newsletter_source_days",
            "SELECT newsletter_id, day, source, created FROM newsletter_source_days WHERE created != 0",
            "SELECT newsletter_id, substr(created_at, 1, 10), source, count(*) FROM subscribers
             WHERE source IS NOT NULL GROUP BY 1, 2, 3",
        ),
        (
            "active_change",
            "SELECT newsletter_id, sum(active_change) FROM newsletter_days GROUP BY 1 HAVING sum(active_change) != 0",
            "SELECT newsletter_id, count(*) FROM subscribers WHERE status = 'active' GROUP BY 1",
        ),
        (
            "issue_counts",
            "SELECT issue_id, total, remaining, sent, unconfirmed, bounced, failed, opened, clicked, unsubscribed,
                    auto_opened
             FROM issue_counts",
            "SELECT i.id, count(d.id), coalesce(sum(d.status IN ('pending', 'sending')), 0),
                    coalesce(sum(d.status = 'sent'), 0), coalesce(sum(d.status = 'unconfirmed'), 0),
                    coalesce(sum(d.status = 'bounced'), 0), coalesce(sum(d.status = 'failed'), 0),
                    coalesce(sum(d.status = 'sent' AND d.opened_at IS NOT NULL), 0),
                    coalesce(sum(d.status = 'sent' AND d.clicked_at IS NOT NULL), 0),
                    coalesce(sum(d.unsubscribed_at IS NOT NULL), 0),
                    coalesce(sum(d.opened_at IS NOT NULL AND d.opened_auto = 1), 0)
             FROM issues i LEFT JOIN deliveries d ON d.issue_id = i.id GROUP BY i.id",
        ),
    ];
    let rows = |sql: &str| -> Vec<String> {
        let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let columns = stmt.column_count();
        let mut found: Vec<String> = stmt
            .query_map([], |r| {
                (0..columns)
                    .map(|i| {
                        r.get::<_, rusqlite::types::Value>(i)
                            .map(|v| format!("{v:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(|v| v.join("|"))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        found.sort();
        found
    };
    let mut mismatches = Vec::new();
    for (name, kept, recount) in CHECKS {
        let (kept, recount) = (rows(kept), rows(recount));
        for row in kept.iter().filter(|r| !recount.contains(r)) {
            mismatches.push(format!("{name}: kept {row}"));
        }
        for row in recount.iter().filter(|r| !kept.contains(r)) {
            mismatches.push(format!("{name}: recount {row}"));
        }
    }
    mismatches
}
