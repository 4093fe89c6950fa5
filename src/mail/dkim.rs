//! DKIM signing (RFC 6376) of every message the service sends, with mail-auth: rsa-sha256,
//! relaxed/relaxed. [`super::Transport`] and [`super::Lane`] sign the final bytes of each
//! message (SMTP or outbox) here, before any dot-stuffing, and put the `DKIM-Signature` header
//! in front.
//!
//! An RSA-2048 signature costs far more than anything else a message needs (about 0.5 ms
//! against 40 µs for the rest of the send), and the body differs per recipient, so with DKIM
//! on the signing rate bounds a send. A send's connections all run on one thread, so they
//! sign on the blocking pool, at most one signature per core at once
//! ([`Signer::sign_off_thread`]): the send signs on every core the server has.
//! The RSA is `ring`'s, the provider rustls uses too (docs/performance.md has the rates).

use std::sync::{Arc, LazyLock};

use mail_auth::common::crypto::{RsaKey, Sha256};
use mail_auth::common::headers::HeaderWriter;
use mail_auth::dkim::{Canonicalization, DkimSigner, Done};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs1KeyDer};
use tokio::sync::Semaphore;

use crate::domain::newsletters::dkim::{OperatorKey, SigningKey};

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
    inner: Arc<DkimSigner<RsaKey<Sha256>, Done>>,
}

/// How many signatures are made at once, process-wide: one per core. More would only take
/// turns on the same cores, and leave none to the connections waiting for them.
pub fn signing_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

static SIGNING_SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(signing_threads()));

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
            inner: Arc::new(
                DkimSigner::from_key(rsa)
                    .domain(key.domain.as_str())
                    .selector(key.selector.as_str())
                    .headers(SIGNED_HEADERS)
                    .header_canonicalization(Canonicalization::Relaxed)
                    .body_canonicalization(Canonicalization::Relaxed),
            ),
        })
    }

    /// `message` (headers and body, as they go out) with a `DKIM-Signature` header in front.
    /// Blocks for the signature's time: on async threads use [`Signer::sign_off_thread`].
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        sign_with(&self.inner, message)
    }

    /// [`Signer::sign`] on the blocking pool, once one of the [`signing_threads`] slots is
    /// free, so that the one thread a send runs on keeps its connections moving while every
    /// core signs.
    pub async fn sign_off_thread(&self, message: Vec<u8>) -> Result<Vec<u8>, String> {
        let _slot = SIGNING_SLOTS
            .acquire()
            .await
            .map_err(|e| format!("DKIM signing stopped: {e}"))?;
        let signer = self.inner.clone();
        tokio::task::spawn_blocking(move || sign_with(&signer, &message))
            .await
            .map_err(|e| format!("DKIM signing stopped: {e}"))?
    }
}

fn sign_with(signer: &DkimSigner<RsaKey<Sha256>, Done>, message: &[u8]) -> Result<Vec<u8>, String> {
    let signature = signer
        .sign(message)
        .map_err(|e| format!("DKIM signing failed: {e}"))?;
    let mut signed = signature.to_header().into_bytes();
    signed.extend_from_slice(message);
    Ok(signed)
}
