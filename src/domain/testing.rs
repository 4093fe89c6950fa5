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
        "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', 'n', 'n');",
    )
    .unwrap();
    conn.execute(
        "INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
         VALUES (1, 'N', 'n', ?1, 'bt', 'n', 'n')",
        [tier],
    )
    .unwrap();
    conn
}

/// Subscribes a webhook of newsletter `newsletter_id` to `kinds`, so those events are
/// recorded (nothing is recorded for events no subscription wants).
pub fn listen(conn: &mut Connection, newsletter_id: i64, kinds: &[&str]) {
    let input = super::webhooks::NewSubscription {
        url: "https://hooks.example.com/listen".into(),
        events: kinds.iter().map(|k| k.to_string()).collect(),
    };
    super::webhooks::create(conn, newsletter_id, &input, &|_| Ok(())).unwrap();
}
