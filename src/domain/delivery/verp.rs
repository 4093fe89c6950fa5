//! VERP return paths: the envelope sender (MAIL FROM) of every issue message is
//! `bounce+<delivery>-<signature>@<bounce domain>`, so a bounce mailed back to it names the
//! delivery it is about, whatever the report says or fails to say. The signature is a
//! truncated HMAC of the delivery id under its own purpose: the address cannot be guessed,
//! and it is checked without a database lookup. Lower-case hex, because some MTAs change the
//! case of the local part.

use rusqlite::Connection;

use crate::domain::DomainResult;
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::values::secrets::{ServerSecret, Signer, constant_time_eq};

/// The local part's prefix, before the `+` that carries the token.
const PREFIX: &str = "bounce+";

/// Hex characters of signature kept in the address (96 bits).
const SIG_LEN: usize = 24;

/// Makes and checks the return paths of one bounce domain.
#[derive(Clone)]
pub struct ReturnPaths {
    signer: Signer,
    domain: String,
}

impl ReturnPaths {
    pub fn new(secret: &ServerSecret, domain: &str) -> Self {
        ReturnPaths {
            signer: secret.signer("verp"),
            domain: domain.trim_end_matches('.').to_ascii_lowercase(),
        }
    }

    /// The bounce domain: where the return paths point (its MX is the bounce listener).
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The envelope sender of the message of `delivery_id`.
    pub fn address(&self, delivery_id: i64) -> String {
        format!(
            "{PREFIX}{delivery_id}-{}@{}",
            self.signer.sign_hex(&delivery_id.to_string(), SIG_LEN),
            self.domain
        )
    }

    /// What every return path looks like, for the operator to configure.
    pub fn pattern(&self) -> String {
        pattern(&self.domain)
    }

    /// The delivery a return path names, if `address` is one of this domain's with a valid
    /// signature (case does not matter); `None` for any other address.
    pub fn delivery_of(&self, address: &str) -> Option<i64> {
        let address = address.to_ascii_lowercase();
        let (local, domain) = address.rsplit_once('@')?;
        if domain.trim_end_matches('.') != self.domain {
            return None;
        }
        let (id, signature) = local.strip_prefix(PREFIX)?.split_once('-')?;
        // Only the canonical form of the number: no sign, no leading zeros.
        let delivery_id: i64 = id.parse().ok()?;
        if delivery_id.to_string() != id {
            return None;
        }
        let expected = self.signer.sign_hex(id, SIG_LEN);
        constant_time_eq(&expected, signature).then_some(delivery_id)
    }
}

/// What every return path on `domain` looks like.
pub fn pattern(domain: &str) -> String {
    format!("{PREFIX}<delivery>-<signature>@{domain}")
}

/// The three ways a newsletter's bounces and complaints come back, as the dashboard and
/// `broadsheet bounce-token` show them to configure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BounceSetup {
    /// The newsletter's bounce token.
    pub token: String,
    /// `POST` a report (JSON, or a raw DSN or ARF message) here: `<base URL>/bounces/<token>`.
    pub url: String,
    /// The return paths of its issues (`bounce+<delivery>-<signature>@<bounce domain>`): the
    /// bounce domain's MX takes them, the bounce listener or an MTA.
    pub return_paths: String,
    /// The command an MTA's pipe transport runs with the message on standard input.
    pub pipe_command: String,
}

/// The [`BounceSetup`] of `newsletter`, on the service at `base_url` with return paths on
/// `bounce_domain`.
pub fn setup(
    conn: &Connection,
    newsletter: &Newsletter,
    base_url: &str,
    bounce_domain: &str,
) -> DomainResult<BounceSetup> {
    let token = newsletters::bounce_token(conn, newsletter.id)?;
    Ok(BounceSetup {
        url: format!("{}/bounces/{token}", base_url.trim_end_matches('/')),
        token,
        return_paths: pattern(bounce_domain),
        pipe_command: format!("broadsheet bounce {}", newsletter.subdomain),
    })
}

/// The bounce domain from the flags: `--bounce-domain`, else the DKIM domain, else the public
/// host without its port.
pub fn bounce_domain(
    bounce_domain: Option<&str>,
    dkim_domain: Option<&str>,
    public_host_name: &str,
) -> String {
    bounce_domain
        .or(dkim_domain)
        .unwrap_or(public_host_name)
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_return_path_names_its_delivery_and_nothing_else_verifies() {
        let paths = ReturnPaths::new(&ServerSecret::for_tests(b"k"), "Bounces.Example.com.");
        let address = paths.address(42);
        assert!(address.starts_with("bounce+42-"), "{address}");
        assert!(address.ends_with("@bounces.example.com"), "{address}");
        assert_eq!(paths.delivery_of(&address), Some(42));
        assert_eq!(paths.delivery_of(&address.to_uppercase()), Some(42));
        assert_ne!(paths.address(43), address);
        let signature = address
            .trim_start_matches("bounce+42-")
            .split('@')
            .next()
            .unwrap();
        assert_eq!(signature.len(), SIG_LEN);
        for forged in [
            format!("bounce+43-{signature}@bounces.example.com"),
            format!("bounce+042-{signature}@bounces.example.com"),
            format!("bounce+42-{signature}@other.example.com"),
            format!("other+42-{signature}@bounces.example.com"),
            format!("bounce+42-{}@bounces.example.com", &signature[1..]),
            "bounce+42@bounces.example.com".to_string(),
            "postmaster@bounces.example.com".to_string(),
        ] {
            assert_eq!(paths.delivery_of(&forged), None, "{forged}");
        }
        let other_secret = ReturnPaths::new(&ServerSecret::for_tests(b"j"), "bounces.example.com");
        assert_eq!(other_secret.delivery_of(&address), None);
    }

    #[test]
    fn the_bounce_domain_defaults_to_dkim_then_public_host() {
        assert_eq!(
            bounce_domain(Some("B.example"), Some("d.example"), "h"),
            "b.example"
        );
        assert_eq!(bounce_domain(None, Some("d.example"), "h"), "d.example");
        assert_eq!(bounce_domain(None, None, "localhost"), "localhost");
    }
}
