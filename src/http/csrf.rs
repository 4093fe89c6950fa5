//! CSRF protection: a random value in an HttpOnly cookie, and in each form an HMAC of it and
//! of the session cookie under the server secret. A cross-site page can neither read the
//! cookies nor forge the token, and SameSite=Lax keeps them off cross-site posts in the first
//! place. Binding the session means a token works only in the session it was shown in: one
//! picked up before sign-in (or in another session) is refused, and signing in or out also
//! draws a new cookie value. The public sites use the same scheme on their own hosts, without
//! a session (they have none).

use crate::domain::values::secrets::ServerSecret;

/// The cookie's name on http; on https it is `__Host-broadsheet_csrf` (see `cookies::cookie_name`).
pub const COOKIE: &str = "broadsheet_csrf";
pub const FIELD: &str = "authenticity_token";
const PURPOSE: &str = "csrf";

/// What a token signs: the cookie value and the session cookie (both hex, so `:` parts them).
fn message(cookie_value: &str, session: Option<&str>) -> String {
    format!("{cookie_value}:{}", session.unwrap_or(""))
}

/// The form token for a cookie value and the session cookie beside it (none on the public
/// sites and before sign-in).
pub fn token_for(secret: &ServerSecret, cookie_value: &str, session: Option<&str>) -> String {
    secret.sign(PURPOSE, &message(cookie_value, session))
}

/// Whether `submitted` is the token of `cookie_value` and `session`.
pub fn verify(
    secret: &ServerSecret,
    cookie_value: Option<&str>,
    session: Option<&str>,
    submitted: &str,
) -> bool {
    match cookie_value {
        Some(value) if !value.is_empty() && !submitted.is_empty() => {
            secret.verify(PURPOSE, &message(value, session), submitted)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_fits_one_cookie_and_one_session() {
        let secret = ServerSecret::for_tests(b"k");
        let token = token_for(&secret, "c1", Some("s1"));
        assert!(verify(&secret, Some("c1"), Some("s1"), &token));
        assert!(!verify(&secret, Some("c1"), Some("s2"), &token));
        assert!(!verify(&secret, Some("c1"), None, &token));
        assert!(!verify(&secret, Some("c2"), Some("s1"), &token));
        let anonymous = token_for(&secret, "c1", None);
        assert!(verify(&secret, Some("c1"), None, &anonymous));
        assert!(!verify(&secret, Some("c1"), Some("s1"), &anonymous));
        assert!(!verify(&secret, None, None, &anonymous));
    }
}
