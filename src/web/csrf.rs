//! CSRF protection: a random value in an HttpOnly cookie, and in each form an HMAC of it
//! under the server secret. A cross-site page can neither read the cookie nor forge the
//! token, and SameSite=Lax keeps the cookie off cross-site posts in the first place.

use crate::domain::secrets::ServerSecret;

pub const COOKIE: &str = "broadsheet_csrf";
pub const FIELD: &str = "authenticity_token";
const PURPOSE: &str = "csrf";

/// The form token for a cookie value.
pub fn token_for(secret: &ServerSecret, cookie_value: &str) -> String {
    secret.sign(PURPOSE, cookie_value)
}

/// Whether `submitted` is the token of `cookie_value`.
pub fn verify(secret: &ServerSecret, cookie_value: Option<&str>, submitted: &str) -> bool {
    match cookie_value {
        Some(value) if !value.is_empty() && !submitted.is_empty() => {
            secret.verify(PURPOSE, value, submitted)
        }
        _ => false,
    }
}
