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
        "0011_counters",
        include_str!("../../migrations/0011_counters.sql"),
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

    #[test]
    fn rebuilding_a_table_keeps_the_rows_that_reference_it() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        let (old, new) = MIGRATIONS.split_at(6);
        for (_, sql) in old {
            conn.execute_batch(sql).unwrap();
        }
        conn.execute_batch(
            "CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL);
             INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', 'n', 'n');
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
               VALUES (1, 'N', 'n', 'paid', 'bt', 'n', 'n');
             INSERT INTO issues (newsletter_id, subject, status, path, created_at, updated_at)
               VALUES (1, 'S', 'sending', 's', 'n', 'n');
             INSERT INTO articles (issue_id, position, title, url, summarized_article) VALUES (1, 1, 'A', 'https://a.example', '');
             INSERT INTO deliveries (issue_id, email, status, created_at) VALUES (1, 'a@x.co', 'sending', 'n');",
        )
        .unwrap();
        for (name, _) in old {
            conn.execute("INSERT INTO schema_migrations VALUES (?1, 'n')", [name])
                .unwrap();
        }
        assert_eq!(migrate(&mut conn).unwrap().len(), new.len());
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
}
