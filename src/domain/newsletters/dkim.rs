//! The operator's DKIM key: an RSA 2048 key pair generated the first time `serve` starts with
//! `--dkim-domain`, kept in `dkim_keys` (so backups carry it), and the DNS record that
//! publishes its public half (docs/deliverability.md, "DKIM signing").

use base64::Engine;
use mail_auth::dkim::generate::DkimKeyPair;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::EncodePublicKey;
use rusqlite::{Connection, OptionalExtension, params};

use crate::store::StoreError;

/// The selector used when `--dkim-selector` is not given.
pub const DEFAULT_SELECTOR: &str = "broadsheet";

/// RFC 8301 asks for at least 1024 bits and recommends 2048; larger keys do not fit a single
/// 255-character TXT string and cost more per message.
const KEY_BITS: usize = 2048;

/// What a signature is made with: its `d=` and `s=`, and the private key (PKCS #1 DER). The
/// operator's key ([`OperatorKey::signing_key`]) or a newsletter's verified sending domain
/// (`domain::newsletters::sender_domains::signing_key`).
#[derive(Clone)]
pub struct SigningKey {
    pub domain: String,
    pub selector: String,
    pub private_key: Vec<u8>,
}

/// The operator's key with the domain and selector it signs as.
#[derive(Clone)]
pub struct OperatorKey {
    pub domain: String,
    pub selector: String,
    /// RSA private key, PKCS #1 DER.
    pub private_key: Vec<u8>,
}

impl std::fmt::Debug for OperatorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorKey")
            .field("domain", &self.domain)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

impl OperatorKey {
    /// The stored key, if `serve --dkim-domain` has made one.
    pub fn load(conn: &Connection) -> Result<Option<Self>, StoreError> {
        const SELECT: &str = "SELECT domain, selector, private_key FROM dkim_keys WHERE id = 1";
        Ok(conn
            .query_row(SELECT, [], |r| {
                Ok(OperatorKey {
                    domain: r.get(0)?,
                    selector: r.get(1)?,
                    private_key: r.get(2)?,
                })
            })
            .optional()?)
    }

    /// The stored key signing as `domain`/`selector` (recorded, so `broadsheet dkim` prints
    /// what serve signs with); a new key is generated when none is stored.
    pub fn load_or_create(
        conn: &Connection,
        domain: &str,
        selector: &str,
    ) -> Result<Self, StoreError> {
        const INSERT: &str = "INSERT INTO dkim_keys (id, domain, selector, private_key, created_at)
             VALUES (1, ?1, ?2, ?3, ?4)
             ON CONFLICT (id) DO UPDATE SET domain = excluded.domain, selector = excluded.selector";
        let private_key = match Self::load(conn)? {
            Some(existing) => existing.private_key,
            None => generate_private_key()?,
        };
        conn.execute(
            INSERT,
            params![domain, selector, private_key, crate::clock::now_string()],
        )?;
        // Read back: a key another process stored first wins over the one made here.
        Self::load(conn)?.ok_or_else(|| invalid("the DKIM key was not stored".into()))
    }

    pub fn signing_key(&self) -> SigningKey {
        SigningKey {
            domain: self.domain.clone(),
            selector: self.selector.clone(),
            private_key: self.private_key.clone(),
        }
    }

    /// The public key as base64 SubjectPublicKeyInfo DER, the `p=` of the DNS record.
    pub fn public_key_base64(&self) -> Result<String, StoreError> {
        public_key_base64(&self.private_key)
    }

    /// The TXT record to publish, one line (see [`dns_record`]).
    pub fn dns_record(&self) -> Result<String, StoreError> {
        Ok(dns_record(
            &self.selector,
            &self.domain,
            &self.public_key_base64()?,
        ))
    }
}

/// The public half of `private_key` (PKCS #1 DER) as base64 SubjectPublicKeyInfo DER, the
/// `p=` of the DNS record.
pub fn public_key_base64(private_key: &[u8]) -> Result<String, StoreError> {
    let private = rsa::RsaPrivateKey::from_pkcs1_der(private_key)
        .map_err(|e| invalid(format!("the stored DKIM key is unreadable: {e}")))?;
    let spki = rsa::RsaPublicKey::from(&private)
        .to_public_key_der()
        .map_err(|e| invalid(format!("cannot encode the DKIM public key: {e}")))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(spki.as_bytes()))
}

/// The TXT record that publishes a key, one line:
/// `<selector>._domainkey.<domain> TXT "v=DKIM1; k=rsa; p=<base64>"`.
pub fn dns_record(selector: &str, domain: &str, public_key: &str) -> String {
    format!("{selector}._domainkey.{domain} TXT \"v=DKIM1; k=rsa; p={public_key}\"")
}

/// A new RSA 2048 private key, PKCS #1 DER. Takes 100 ms or more: call it on a blocking
/// thread, never on the async ones.
pub fn generate_private_key() -> Result<Vec<u8>, StoreError> {
    let pair = DkimKeyPair::generate_rsa(KEY_BITS)
        .map_err(|e| invalid(format!("cannot generate the DKIM key: {e}")))?;
    Ok(pair.private_key().to_vec())
}

fn invalid(message: String) -> StoreError {
    StoreError::Io(std::io::Error::other(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_and_renamed_in_place() {
        let conn = crate::domain::testing::db();
        assert!(OperatorKey::load(&conn).unwrap().is_none());
        let first = OperatorKey::load_or_create(&conn, "example.org", "s1").unwrap();
        let again = OperatorKey::load_or_create(&conn, "mail.example.org", "s2").unwrap();
        assert_eq!(first.private_key, again.private_key);
        assert_eq!(
            (again.domain.as_str(), again.selector.as_str()),
            ("mail.example.org", "s2")
        );
        let record = again.dns_record().unwrap();
        assert!(
            record.starts_with("s2._domainkey.mail.example.org TXT \"v=DKIM1; k=rsa; p=MIIBIjAN"),
            "{record}"
        );
    }
}
