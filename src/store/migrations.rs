//! Numbered `.sql` files from `migrations/`, embedded in the binary and applied once each.

use rusqlite::Connection;

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
];

/// Applies the migrations not yet recorded in `schema_migrations`; returns their names.
pub fn migrate(conn: &mut Connection) -> Result<Vec<&'static str>, StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             name TEXT PRIMARY KEY,
             applied_at TEXT NOT NULL
         )",
    )?;
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
}
