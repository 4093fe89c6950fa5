//! The cookies both hosts set (the dashboard's session, notice and CSRF cookies, the public
//! sites' CSRF cookie): one set of attributes and one naming rule for all of them.

use poem::Request;
use poem::web::cookie::{Cookie, SameSite};

use super::csrf;
use crate::domain::values::secrets::random_hex;
use crate::state::AppState;

/// The name a cookie goes by: on https with the `__Host-` prefix, which browsers accept only
/// from a secure page of this very host with `Path=/` and no `Domain`, so neither a plain-http
/// page nor a sibling subdomain (a newsletter's site) can plant or replace it.
pub fn cookie_name(state: &AppState, name: &str) -> String {
    if state.urls.is_https() {
        format!("__Host-{name}")
    } else {
        name.to_string()
    }
}

/// One of our cookies: HttpOnly, SameSite=Lax, `Path=/`, no `Domain`, Secure on https.
pub fn cookie(state: &AppState, name: &str, value: &str) -> Cookie {
    let mut cookie = Cookie::new_with_str(cookie_name(state, name), value);
    cookie.set_path("/");
    cookie.set_http_only(true);
    cookie.set_same_site(SameSite::Lax);
    cookie.set_secure(state.urls.is_https());
    cookie
}

pub fn removal(state: &AppState, name: &str) -> Cookie {
    let mut cookie = cookie(state, name, "");
    cookie.make_removal();
    cookie
}

/// The value of our cookie `name` in the request; an empty one counts as none.
pub fn read_cookie(req: &Request, state: &AppState, name: &str) -> Option<String> {
    req.cookie()
        .get(&cookie_name(state, name))
        .map(|c| c.value_str().to_string())
        .filter(|v| !v.is_empty())
}

/// The browser's CSRF cookie value, set now when it has none (first visit).
pub fn csrf_cookie_value(req: &Request, state: &AppState) -> String {
    match read_cookie(req, state, csrf::COOKIE).filter(|v| v.len() == 32) {
        Some(value) => value,
        None => renew_csrf_cookie(req, state),
    }
}

/// Draws a new CSRF cookie value, so tokens shown before no longer work.
pub fn renew_csrf_cookie(req: &Request, state: &AppState) -> String {
    let value = random_hex(16);
    req.cookie().add(cookie(state, csrf::COOKIE, &value));
    value
}
