//! DKIM signing (RFC 6376) of every message the service sends, with mail-auth: rsa-sha256,
//! relaxed/relaxed. [`super::Transport`] and [`super::Lane`] sign the final bytes of each
//! message (SMTP or outbox) here, before any dot-stuffing, and put the `DKIM-Signature` header
//! in front.

use mail_auth::common::crypto::{RsaKey, Sha256};
use mail_auth::common::headers::HeaderWriter;
use mail_auth::dkim::{Canonicalization, DkimSigner, Done};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs1KeyDer};

use crate::domain::dkim::{OperatorKey, SigningKey};

/// The headers signed when present. Absent ones are signed as empty too (RFC 6376 §5.4), so
/// nobody can add them later without breaking the signature.
const SIGNED_HEADERS: [&str; 11] = [
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "MIME-Version",
    "Content-Type",
    "List-Id",
    "List-Unsubscribe",
    "List-Unsubscribe-Post",
    "Feedback-ID",
];

/// Signs messages as one domain and selector: the operator's, or a newsletter's own.
pub struct Signer {
    inner: DkimSigner<RsaKey<Sha256>, Done>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer")
    }
}

impl Signer {
    /// Signs as the operator's domain and selector.
    pub fn new(key: &OperatorKey) -> Result<Self, String> {
        Self::with_key(&key.signing_key())
    }

    /// Signs as `key`'s domain and selector (a newsletter's verified sending domain).
    pub fn with_key(key: &SigningKey) -> Result<Self, String> {
        let der = PrivateKeyDer::Pkcs1(PrivatePkcs1KeyDer::from(key.private_key.clone()));
        let rsa = RsaKey::<Sha256>::from_key_der(der)
            .map_err(|e| format!("the DKIM key is unreadable: {e}"))?;
        Ok(Signer {
            inner: DkimSigner::from_key(rsa)
                .domain(key.domain.as_str())
                .selector(key.selector.as_str())
                .headers(SIGNED_HEADERS)
                .header_canonicalization(Canonicalization::Relaxed)
                .body_canonicalization(Canonicalization::Relaxed),
        })
    }

    /// `message` (headers and body, as they go out) with a `DKIM-Signature` header in front.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        let signature = self
            .inner
            .sign(message)
            .map_err(|e| format!("DKIM signing failed: {e}"))?;
        let mut signed = signature.to_header().into_bytes();
        signed.extend_from_slice(message);
        Ok(signed)
    }
}
