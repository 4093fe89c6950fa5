//! Random tokens and the server secret. Tokens given out (sessions, mailed links, API keys)
//! are stored only as SHA-256 hashes; the server secret signs CSRF tokens and tracking links.

use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use rusqlite::{Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use crate::store::StoreError;

/// `bytes` random bytes from the OS-seeded CSPRNG, hex encoded.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// Lowercase hex SHA-256, the stored form of every token.
pub fn sha256_hex(value: &str) -> String {
    hex::encode(Sha256::digest(value.as_bytes()))
}

/// Compares two strings in time independent of where they differ.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The per-installation signing key, created on first start and kept in `settings`.
#[derive(Clone)]
pub struct ServerSecret(Vec<u8>);

impl ServerSecret {
    /// Loads the secret, creating it once.
    pub fn load_or_create(conn: &Connection) -> Result<Self, StoreError> {
        const SELECT: &str = "SELECT value FROM settings WHERE key = 'server_secret'";
        const INSERT: &str = "INSERT INTO settings (key, value) VALUES ('server_secret', ?1) ON CONFLICT (key) DO NOTHING";
        let existing: Option<String> = conn.query_row(SELECT, [], |r| r.get(0)).optional()?;
        let hex_value = match existing {
            Some(value) => value,
            None => {
                conn.execute(INSERT, [random_hex(32)])?;
                conn.query_row(SELECT, [], |r| r.get(0))?
            }
        };
        Ok(ServerSecret(hex::decode(hex_value).unwrap_or_default()))
    }

    #[cfg(test)]
    pub fn for_tests(bytes: &[u8]) -> Self {
        ServerSecret(bytes.to_vec())
    }

    /// Lowercase hex HMAC-SHA256 of `purpose` and `value`, so a signature made for one use
    /// is worthless for another.
    pub fn sign(&self, purpose: &str, value: &str) -> String {
        self.signer(purpose).sign_hex(value, 64)
    }

    pub fn verify(&self, purpose: &str, value: &str, signature: &str) -> bool {
        constant_time_eq(&self.sign(purpose, value), signature)
    }

    /// A signer for one purpose with the key schedule done once: `signer(p).sign(v)` equals
    /// `sign(p, v)` at about half the cost, for the many links of a send.
    pub fn signer(&self, purpose: &str) -> Signer {
        Signer(keyed_hmac(&self.0, &[purpose.as_bytes(), b"\0"]))
    }
}

/// HMAC-SHA256 keyed with `key` (any length), fed `parts` in order: every signature of the
/// service (CSRF tokens, tracking links, webhook payloads) starts here.
pub fn keyed_hmac(key: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac
}

/// A keyed HMAC-SHA256 for one purpose; see [`ServerSecret::signer`].
#[derive(Clone)]
pub struct Signer(Hmac<Sha256>);

impl Signer {
    /// The first `hex_len` lowercase hex characters of the signature of `value`.
    pub fn sign_hex(&self, value: &str, hex_len: usize) -> String {
        let mut mac = self.0.clone();
        mac.update(value.as_bytes());
        let digest = mac.finalize().into_bytes();
        let bytes = hex_len.div_ceil(2).min(digest.len());
        let mut out = hex::encode(&digest[..bytes]);
        out.truncate(hex_len);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prepared_signer_signs_like_sign() {
        let secret = ServerSecret::for_tests(b"key");
        let signer = secret.signer("click");
        assert_eq!(
            signer.sign_hex("7:https://x.example/", 32),
            secret.sign("click", "7:https://x.example/")[..32]
        );
        assert_eq!(signer.sign_hex("v", 64), secret.sign("click", "v"));
    }

    #[test]
    fn signatures_are_bound_to_purpose_and_value() {
        let secret = ServerSecret::for_tests(b"k");
        let sig = secret.sign("csrf", "abc");
        assert!(secret.verify("csrf", "abc", &sig));
        assert!(!secret.verify("click", "abc", &sig));
        assert!(!secret.verify("csrf", "abd", &sig));
        assert_eq!(random_hex(16).len(), 32);
        assert_ne!(random_hex(16), random_hex(16));
    }
}
