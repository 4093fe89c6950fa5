//! Per-request page context: the signed-in user (from the session cookie), the CSRF token,
//! and a one-time notice carried across a redirect. Also the cookies both hosts set.

use poem::Request;
use poem::web::cookie::{Cookie, SameSite};

use super::{FormData, State, WebError, csrf};
use crate::app::AppState;
use crate::domain::accounts::{self, NewSession, User};
use crate::domain::secrets::random_hex;

/// The session cookie's name on http; on https it is `__Host-broadsheet_session`.
pub const SESSION_COOKIE: &str = "broadsheet_session";
const NOTICE_COOKIE: &str = "broadsheet_notice";

/// What every page handler needs to know about the request.
pub struct Ctx {
    pub user: Option<User>,
    pub csrf_token: String,
    csrf_cookie: Option<String>,
    /// The session cookie as sent (live or not): the CSRF token is bound to it.
    session_token: Option<String>,
    pub notice: Option<String>,
    state: State,
}

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

fn removal(state: &AppState, name: &str) -> Cookie {
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
fn renew_csrf_cookie(req: &Request, state: &AppState) -> String {
    let value = random_hex(16);
    req.cookie().add(cookie(state, csrf::COOKIE, &value));
    value
}

impl Ctx {
    /// Reads the cookies; creates the CSRF cookie on first visit; consumes the notice.
    pub async fn load(req: &Request, state: &State) -> Result<Ctx, WebError> {
        let session_token = read_cookie(req, state, SESSION_COOKIE);
        let user = match session_token.clone() {
            Some(token) => {
                let lifetimes = state.sessions;
                state
                    .db
                    .run(move |conn| accounts::session_user(conn, &token, &lifetimes))
                    .await?
            }
            None => None,
        };
        let csrf_cookie = csrf_cookie_value(req, state);
        let notice = read_cookie(req, state, NOTICE_COOKIE);
        if notice.is_some() {
            req.cookie().add(removal(state, NOTICE_COOKIE));
        }
        Ok(Ctx {
            user,
            csrf_token: csrf::token_for(&state.secret, &csrf_cookie, session_token.as_deref()),
            csrf_cookie: Some(csrf_cookie),
            session_token,
            notice,
            state: state.clone(),
        })
    }

    /// Like [`Ctx::load`] for a form post: the CSRF token must match the browser's CSRF
    /// cookie and its session cookie before anything happens.
    pub async fn load_verified(
        req: &Request,
        state: &State,
        form: &FormData,
    ) -> Result<Ctx, WebError> {
        let submitted_cookie = read_cookie(req, state, csrf::COOKIE);
        let session = read_cookie(req, state, SESSION_COOKIE);
        if !csrf::verify(
            &state.secret,
            submitted_cookie.as_deref(),
            session.as_deref(),
            form.get(csrf::FIELD),
        ) {
            return Err(WebError::BadCsrfToken);
        }
        let mut ctx = Ctx::load(req, state).await?;
        ctx.csrf_cookie = submitted_cookie;
        Ok(ctx)
    }

    /// The signed-in user, or a redirect to the sign-in form.
    pub fn user(&self) -> Result<&User, WebError> {
        self.user.as_ref().ok_or(WebError::SignInRequired)
    }

    /// Starts a signed-in session in the browser, kept as long as the session may live, and
    /// draws a new CSRF cookie.
    pub fn sign_in(&self, req: &Request, session: &NewSession) {
        let mut session_cookie = cookie(&self.state, SESSION_COOKIE, &session.token);
        session_cookie.set_max_age(self.state.sessions.absolute.unsigned_abs());
        req.cookie().add(session_cookie);
        renew_csrf_cookie(req, &self.state);
    }

    /// Drops the session cookie and draws a new CSRF cookie.
    pub fn sign_out(&self, req: &Request) {
        req.cookie().add(removal(&self.state, SESSION_COOKIE));
        renew_csrf_cookie(req, &self.state);
    }

    /// Shows `message` once on the next page.
    pub fn notice_next(&self, req: &Request, message: &str) {
        req.cookie()
            .add(cookie(&self.state, NOTICE_COOKIE, message));
    }

    /// The session cookie of this request, if any.
    pub fn session_token(&self) -> Option<&str> {
        self.session_token.as_deref()
    }

    pub fn has_csrf_cookie(&self) -> bool {
        self.csrf_cookie.is_some()
    }
}
