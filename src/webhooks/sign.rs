//! Webhook signatures. `X-Webhook-Signature` is `sha256=` and the lowercase hex HMAC-SHA256 of
//! the body keyed with the secret as given to the owner; `webhook-signature` follows Standard
//! Webhooks: `v1,` and the base64 HMAC-SHA256 of `<id>.<timestamp>.<body>`, keyed with the
//! bytes the `whsec_` secret encodes, so that project's verification libraries work.

use base64::Engine;
use hmac::Mac;

use crate::domain::values::secrets::keyed_hmac;

fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    keyed_hmac(key, parts).finalize().into_bytes().to_vec()
}

/// `sha256=<hex>` over the exact body bytes.
pub fn contract_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(hmac(secret.as_bytes(), &[body])))
}

/// `v1,<base64>` over `<id>.<timestamp>.<body>`.
pub fn standard_signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = secret
        .strip_prefix("whsec_")
        .and_then(|k| b64.decode(k).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec());
    let timestamp = timestamp.to_string();
    let signed = hmac(
        &key,
        &[id.as_bytes(), b".", timestamp.as_bytes(), b".", body],
    );
    format!("v1,{}", b64.encode(signed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_published_vectors() {
        // RFC 4231 test case 2.
        assert_eq!(
            contract_signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // The Standard Webhooks specification's example.
        assert_eq!(
            standard_signature(
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
