//! A newsletter's own relay (`domain::delivery::relays`) as the SMTP settings a connection is opened
//! with, and the dashboard's "Test connection": one connection opened and closed, its outcome
//! said in words for the owner. The caller resolves and checks the relay's address first
//! (`webhooks::ssrf::resolve_host`) and pins the connection to it.

use std::net::SocketAddr;
use std::time::Duration;

use super::smtp::Security;
use super::{MailError, SmtpConnection, SmtpSettings, TlsTrust};
use crate::domain::delivery::relays::{NewsletterRelay, TlsMode};

/// How long "Test connection" waits for each step of the relay.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings to reach `relay` at `pinned` (its checked address), its certificate verified
/// against `trust` for its host name. TLS is always required (`tls`: from the first byte;
/// `starttls`: STARTTLS or nothing), so the credentials never go in the clear. `Err` says why
/// the relay cannot be used as stored (its password cannot be read with this server's key).
pub fn newsletter_relay_settings(
    relay: &NewsletterRelay,
    trust: &TlsTrust,
    timeout: Duration,
    pinned: SocketAddr,
) -> Result<SmtpSettings, String> {
    Ok(SmtpSettings {
        host: relay.host.clone(),
        port: relay.port,
        security: match relay.tls_mode {
            TlsMode::Tls => Security::ImplicitTls,
            TlsMode::StartTls => Security::RequiredStartTls,
        },
        credentials: relay.credentials()?,
        timeout,
        trust: trust.clone(),
        allow_plaintext_auth: false,
        pinned: Some(pinned),
        limits: relay.limits,
    })
}

/// Opens a connection with `settings` (greeting, TLS, sign-in) and closes it: `Ok` with what
/// worked, `Err` with what went wrong, both in plain words.
pub async fn test_connection(settings: &SmtpSettings) -> Result<String, String> {
    match SmtpConnection::open(settings).await {
        Ok(connection) => {
            connection.close().await;
            Ok(success(settings))
        }
        Err(error) => Err(describe_failure(settings, &error)),
    }
}

fn success(settings: &SmtpSettings) -> String {
    let how = match settings.security {
        Security::ImplicitTls => "over TLS from the start",
        _ => "over TLS (STARTTLS)",
    };
    match &settings.credentials {
        Some((user, _)) => format!(
            "Connected to {} {how}, its certificate verified, and signed in as {user}.",
            settings.name()
        ),
        None => format!(
            "Connected to {} {how}, its certificate verified. No user name is set, so it did \
             not sign in: the relay must take mail from this server without it.",
            settings.name()
        ),
    }
}

/// What [`SmtpConnection::open`]'s error means, for the owner of the relay.
pub fn describe_failure(settings: &SmtpSettings, error: &MailError) -> String {
    let name = settings.name();
    let text = match error {
        MailError::Connection(t)
        | MailError::Permanent(t)
        | MailError::Temporary(t)
        | MailError::Unconfirmed(t)
        | MailError::Abandoned(t) => t.clone(),
        other @ (MailError::Throttled { .. } | MailError::Held { .. }) => other.to_string(),
    };
    let text = text.as_str();
    if let Some((_, reply)) = text.split_once("server replied ") {
        // 530, 534, 535 and 538 answer AUTH (RFC 4954): the user name or password.
        return if ["530", "534", "535", "538"]
            .iter()
            .any(|c| reply.starts_with(c))
        {
            format!("The relay at {name} refused the user name or password ({reply}).")
        } else {
            format!("The relay at {name} refused the connection: it answered {reply}.")
        };
    }
    if let Some((_, problem)) = text.split_once("the relay's TLS certificate was refused ") {
        // "(invalid peer certificate: UnknownIssuer); if the relay uses a private CA, ..."
        let problem = problem
            .strip_prefix('(')
            .map(|p| p.replacen(')', "", 1))
            .unwrap_or_else(|| problem.to_string())
            .replace(
                "give it with --smtp-ca",
                "the server's operator can add it with --smtp-ca",
            );
        return format!("The relay's certificate was refused: {problem}.");
    }
    if text.contains("does not offer STARTTLS") {
        return format!(
            "The relay at {name} does not offer STARTTLS, which this setting requires; if it \
             takes TLS from the first byte (usually port 465), choose that instead."
        );
    }
    if let Some((_, problem)) = text.split_once("the TLS handshake with the relay failed: ") {
        return format!(
            "The TLS handshake with {name} failed ({problem}); check the TLS mode: port 465 \
             usually takes TLS from the start, port 587 STARTTLS."
        );
    }
    if let Some(io) = text.strip_prefix("I/O error: ") {
        let reason = io.split(" (os error").next().unwrap_or(io);
        let mut letters = reason.chars();
        let reason: String = letters
            .next()
            .map(|first| first.to_lowercase().chain(letters).collect())
            .unwrap_or_default();
        return format!("Could not connect to {name}: {reason}.");
    }
    if text == "Connection timeout" {
        return format!(
            "Could not connect to {name}: no answer within {} seconds.",
            settings.timeout.as_secs()
        );
    }
    if text.contains("authentication methods") {
        return format!(
            "The relay at {name} offers no way of signing in that Broadsheet speaks (AUTH PLAIN \
             or LOGIN) over this connection."
        );
    }
    format!("The connection to {name} failed: {text}.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Timestamp;
    use crate::domain::delivery::relays::{RelayLimits, RelayPassword};
    use crate::domain::values::credentials::Unreadable;

    fn relay(password: RelayPassword) -> NewsletterRelay {
        NewsletterRelay {
            newsletter_id: 1,
            host: "smtp.example.com".into(),
            port: 587,
            tls_mode: TlsMode::StartTls,
            username: Some("me".into()),
            password,
            limits: RelayLimits {
                per_second: Some(5),
                ..RelayLimits::default()
            },
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
        }
    }

    fn settings() -> SmtpSettings {
        let trust = TlsTrust::load(None).unwrap();
        let pinned = "203.0.113.5:587".parse().unwrap();
        newsletter_relay_settings(
            &relay(RelayPassword::Readable("pw".into())),
            &trust,
            TEST_TIMEOUT,
            pinned,
        )
        .unwrap()
    }

    #[test]
    fn a_relay_becomes_pinned_settings_that_require_tls() {
        let s = settings();
        assert_eq!(s.security, Security::RequiredStartTls);
        assert_eq!(s.pinned, Some("203.0.113.5:587".parse().unwrap()));
        assert_eq!(s.credentials, Some(("me".into(), "pw".into())));
        assert!(!s.allow_plaintext_auth);
        assert_eq!(s.limits.per_second, Some(5));
        assert_eq!(s.name(), "smtp.example.com:587");
        let unreadable = relay(RelayPassword::Unreadable(Unreadable::OtherKey));
        let trust = TlsTrust::load(None).unwrap();
        let error = newsletter_relay_settings(&unreadable, &trust, TEST_TIMEOUT, s.pinned.unwrap())
            .unwrap_err();
        assert!(
            error.contains("cannot be read with this server's key file"),
            "{error}"
        );
    }

    #[test]
    fn failures_are_said_in_plain_words() {
        let s = settings();
        let said = |error: MailError| describe_failure(&s, &error);
        assert_eq!(
            said(MailError::Connection(
                "permanent failure: server replied 535 5.7.8 Authentication failed".into()
            )),
            "The relay at smtp.example.com:587 refused the user name or password (535 5.7.8 \
             Authentication failed)."
        );
        assert_eq!(
            said(MailError::Connection(
                "I/O error: Connection refused (os error 111)".into()
            )),
            "Could not connect to smtp.example.com:587: connection refused."
        );
        let certificate = said(MailError::Connection(
            "the relay's TLS certificate was refused (invalid peer certificate: UnknownIssuer); \
             if the relay uses a private CA, give it with --smtp-ca"
                .into(),
        ));
        assert!(
            certificate
                == "The relay's certificate was refused: invalid peer certificate: UnknownIssuer; \
                    if the relay uses a private CA, the server's operator can add it with --smtp-ca.",
            "{certificate}"
        );
        assert!(
            said(MailError::Connection(
                "the relay does not offer STARTTLS, which this relay's settings require".into()
            ))
            .starts_with("The relay at smtp.example.com:587 does not offer STARTTLS")
        );
        assert!(said(MailError::Connection("Connection timeout".into())).contains("10 seconds"));
        assert!(
            said(MailError::Connection(
                "temporary failure: server replied 421 4.3.2 Busy".into()
            ))
            .contains("refused the connection: it answered 421 4.3.2 Busy")
        );
    }
}
