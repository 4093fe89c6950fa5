//! API keys: 8 lowercase alphanumerics (the public prefix) then 64 lowercase hex characters.
//! Only the prefix and a SHA-256 of the whole key are stored; a key is shown once.

use rand::Rng;
use rusqlite::{Connection, OptionalExtension};

use crate::clock::{self, Timestamp};
use crate::domain::values::secrets::{constant_time_eq, random_hex, sha256_hex};
use crate::domain::{DomainError, DomainResult, FieldErrors, clean_text};
use crate::store::StoreError;

pub const PREFIX_LEN: usize = 8;
pub const KEY_LEN: usize = 72;

crate::string_enum!(
    /// What a key may do; the API asks for one per HTTP method.
    pub Permission { Read => "read", Write => "write", Delete => "delete" }
);

/// A key as listed (never with its secret part).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: i64,
    pub newsletter_id: i64,
    pub name: String,
    pub prefix: String,
    pub permissions: Vec<Permission>,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
}

impl ApiKey {
    pub fn allows(&self, permission: Permission) -> bool {
        self.permissions.contains(&permission)
    }
}

fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKey> {
    let flags: [bool; 3] = [row.get(4)?, row.get(5)?, row.get(6)?];
    Ok(ApiKey {
        id: row.get(0)?,
        newsletter_id: row.get(1)?,
        name: row.get(2)?,
        prefix: row.get(3)?,
        permissions: Permission::ALL
            .iter()
            .copied()
            .zip(flags)
            .filter(|(_, on)| *on)
            .map(|(p, _)| p)
            .collect(),
        created_at: row.get(7)?,
        last_used_at: row.get(8)?,
    })
}

/// Creates a key for `newsletter_id`; returns it with the full key, which is shown once.
pub fn create(
    conn: &Connection,
    newsletter_id: i64,
    name: &str,
    permissions: &[String],
) -> DomainResult<(ApiKey, String)> {
    let mut errors = FieldErrors::new();
    let name = clean_text(&mut errors, "name", name, true, 100);
    let mut chosen = Vec::new();
    for text in permissions {
        match Permission::parse(text.trim()) {
            Some(p) if !chosen.contains(&p) => chosen.push(p),
            Some(_) => {}
            None => errors.add("permissions", format!("has an unknown value {text:?}")),
        }
    }
    if chosen.is_empty() && errors.is_empty() {
        errors.add(
            "permissions",
            "must include at least one of read, write or delete",
        );
    }
    errors.into_result()?;
    const INSERT: &str = "INSERT INTO api_keys (newsletter_id, name, prefix, key_hash, can_read, can_write, can_delete, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (prefix) DO NOTHING";
    loop {
        let prefix = random_prefix();
        let key = format!("{prefix}{}", random_hex(32));
        let has = |p| chosen.contains(&p);
        let inserted = conn.execute(
            INSERT,
            (
                newsletter_id,
                &name,
                &prefix,
                sha256_hex(&key),
                has(Permission::Read),
                has(Permission::Write),
                has(Permission::Delete),
                Timestamp::now(),
            ),
        )?;
        if inserted == 1 {
            let id = conn.last_insert_rowid();
            return Ok((get(conn, newsletter_id, id)?, key));
        }
        // A prefix collision (one in 36^8): draw again.
    }
}

fn random_prefix() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..PREFIX_LEN)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

const SELECT_LIVE_BY_NEWSLETTER: &str = "SELECT id, newsletter_id, name, prefix, can_read, can_write, can_delete, created_at, last_used_at
     FROM api_keys WHERE newsletter_id = ?1 AND revoked_at IS NULL ORDER BY id DESC";

/// The newsletter's keys that still work, newest first.
pub fn list(conn: &Connection, newsletter_id: i64) -> DomainResult<Vec<ApiKey>> {
    let mut stmt = conn.prepare(SELECT_LIVE_BY_NEWSLETTER)?;
    let rows = stmt.query_map([newsletter_id], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A live (not revoked) key of `newsletter_id`.
pub fn get(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<ApiKey> {
    const SQL: &str = "SELECT id, newsletter_id, name, prefix, can_read, can_write, can_delete, created_at, last_used_at
         FROM api_keys WHERE newsletter_id = ?1 AND id = ?2 AND revoked_at IS NULL";
    conn.query_row(SQL, (newsletter_id, id), from_row)
        .optional()?
        .ok_or(DomainError::NotFound("API key"))
}

/// Revokes a key of `newsletter_id`; it answers 401 from then on.
pub fn revoke(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<()> {
    const REVOKE: &str = "UPDATE api_keys SET revoked_at = ?3 WHERE newsletter_id = ?1 AND id = ?2 AND revoked_at IS NULL";
    match conn.execute(REVOKE, (newsletter_id, id, Timestamp::now()))? {
        0 => Err(DomainError::NotFound("API key")),
        _ => Ok(()),
    }
}

/// Finds the live key a bearer token names, comparing hashes in constant time, and notes its
/// use (at most once a minute, to spare writes). Anything else is `Unauthorized`.
pub fn authenticate(conn: &Connection, token: &str) -> DomainResult<ApiKey> {
    const FIND: &str = "SELECT id, newsletter_id, name, prefix, can_read, can_write, can_delete, created_at, last_used_at, key_hash
         FROM api_keys WHERE prefix = ?1 AND revoked_at IS NULL";
    const TOUCH: &str = "UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1 AND (last_used_at IS NULL OR last_used_at < ?3)";
    let unauthorized = || DomainError::Unauthorized("missing, unknown or revoked API key".into());
    let token = token.trim();
    if token.len() != KEY_LEN || !token.is_ascii() {
        return Err(unauthorized());
    }
    let (prefix, _) = token.split_at(PREFIX_LEN);
    let found = conn
        .query_row(FIND, [prefix], |row| {
            Ok((from_row(row)?, row.get::<_, String>(9)?))
        })
        .optional()?;
    let Some((key, stored_hash)) = found else {
        return Err(unauthorized());
    };
    if !constant_time_eq(&sha256_hex(token), &stored_hash) {
        return Err(unauthorized());
    }
    let now = clock::now();
    let touched = conn.execute(
        TOUCH,
        (
            key.id,
            Timestamp::from(now),
            Timestamp::from(now - jiff::SignedDuration::from_mins(1)),
        ),
    );
    // Noting the use is bookkeeping: on a full disk the request goes on without it (a read
    // still works; a write fails at its own write).
    if let Err(e) = touched.map_err(StoreError::from)
        && !e.is_disk_full()
    {
        return Err(e.into());
    }
    Ok(key)
}

/// `Forbidden` unless `key` carries `permission`.
pub fn require(key: &ApiKey, permission: Permission) -> DomainResult<()> {
    if key.allows(permission) {
        Ok(())
    } else {
        Err(DomainError::Forbidden(format!(
            "This API key lacks the {} permission",
            permission.as_str()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_shown_once_hashed_and_revocable() {
        let conn = crate::domain::testing::db_with_newsletter("free");
        let (key, secret) = create(&conn, 1, "ci", &["read".into(), "read".into()]).unwrap();
        assert_eq!(secret.len(), KEY_LEN);
        assert!(
            secret[..8]
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert!(
            secret[8..]
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(key.prefix, &secret[..8]);
        assert_eq!(key.permissions, vec![Permission::Read]);
        let stored: String = conn
            .query_row("SELECT key_hash FROM api_keys", [], |r| r.get(0))
            .unwrap();
        assert_ne!(stored, secret);

        let found = authenticate(&conn, &secret).unwrap();
        assert!(require(&found, Permission::Read).is_ok());
        assert!(matches!(
            require(&found, Permission::Write),
            Err(DomainError::Forbidden(_))
        ));
        let mut wrong = secret.clone();
        wrong.replace_range(70..72, if &secret[70..72] == "00" { "11" } else { "00" });
        assert!(matches!(
            authenticate(&conn, &wrong),
            Err(DomainError::Unauthorized(_))
        ));

        revoke(&conn, 1, key.id).unwrap();
        assert!(matches!(
            authenticate(&conn, &secret),
            Err(DomainError::Unauthorized(_))
        ));
        assert!(list(&conn, 1).unwrap().is_empty());
        assert!(matches!(
            create(&conn, 1, "", &[]),
            Err(DomainError::Invalid(..))
        ));
    }
}
