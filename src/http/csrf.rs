//! CSRF protection: a random value in an HttpOnly cookie, and in each form an HMAC of it and
//! of the session cookie under the server secret. A cross-site page can neither read the
//! cookies nor forge the token, and SameSite=Lax keeps them off cross-site posts in the first
//! place. Binding the session means a token works only in the session it was shown in: one
//! picked up before sign-in (or in another session) is refused, and signing in or out also
//! draws a new cookie value. The public sites use the same scheme on their own hosts, without
//! a session (they have none).

use std::sync::Arc;

use poem::http::{Method, header};
use poem::{Endpoint, Middleware, Request};

use super::cookies::cookie_name;
use crate::domain::values::secrets::ServerSecret;
use crate::state::AppState;

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

/// Refuses a request that sends a body without the CSRF cookie, before reading the body: its
/// token, an HMAC of that cookie, cannot verify. An HTML form carries its token in its body,
/// so this is all of the check that can come first (docs/security.md). For the doors whose
/// every form is checked (the dashboard and account pages, `/session` among them); not for
/// the public sites, whose one-click unsubscribe is posted by mail providers without cookies
/// (their two forms make the same check first themselves, `site::pages::verified_form`).
///
/// The request is only marked here ([`BodyRefused`]); the refusal is made once routing has
/// found the path and its method (`routing::Methods`), so a path that does not exist still
/// answers 404 and a method it does not take 405.
pub struct CookieBeforeBody {
    /// The door's own refusal (its "form expired" page).
    pub refusal: fn() -> poem::Error,
}

/// The mark of a request to refuse before its body is read: the door's refusal.
#[derive(Clone, Copy)]
pub struct BodyRefused(pub fn() -> poem::Error);

impl<E: Endpoint> Middleware<E> for CookieBeforeBody {
    type Output = CookieBeforeBodyEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        CookieBeforeBodyEndpoint {
            inner,
            refusal: self.refusal,
        }
    }
}

pub struct CookieBeforeBodyEndpoint<E> {
    inner: E,
    refusal: fn() -> poem::Error,
}

impl<E: Endpoint> Endpoint for CookieBeforeBodyEndpoint<E> {
    type Output = E::Output;

    async fn call(&self, mut req: Request) -> poem::Result<Self::Output> {
        let state = req.data::<Arc<AppState>>().expect("app state is installed");
        if sends_a_body(&req) && !has_cookie(&req, &cookie_name(state, COOKIE)) {
            req.extensions_mut().insert(BodyRefused(self.refusal));
        }
        self.inner.call(req).await
    }
}

/// Whether the request carries a non-empty cookie `name` (read from the headers: the
/// doors' cookie jar is not installed yet out here).
fn has_cookie(req: &Request, name: &str) -> bool {
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .any(|(key, value)| key == name && !value.trim_matches('"').is_empty())
}

/// A request that changes something and comes with a body (`Content-Length` above zero, or
/// chunked).
fn sends_a_body(req: &Request) -> bool {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let declared = req
        .header(header::CONTENT_LENGTH)
        .is_some_and(|length| length.trim() != "0");
    !safe && (declared || req.headers().contains_key(header::TRANSFER_ENCODING))
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
