//! Per-request page context: the signed-in user (from the session cookie), the CSRF token,
//! and a one-time notice carried across a redirect.

use poem::Request;
use poem::web::cookie::{Cookie, SameSite};

use super::{FormData, State, WebError, csrf};
use crate::domain::accounts::{self, NewSession, User};
use crate::domain::secrets::random_hex;

pub const SESSION_COOKIE: &str = "broadsheet_session";
const NOTICE_COOKIE: &str = "broadsheet_notice";

/// What every page handler needs to know about the request.
pub struct Ctx {
    pub user: Option<User>,
    pub csrf_token: String,
    csrf_cookie: Option<String>,
    pub notice: Option<String>,
    state: State,
}

fn cookie(state: &State, name: &str, value: &str) -> Cookie {
    let mut cookie = Cookie::new_with_str(name, value);
    cookie.set_path("/");
    cookie.set_http_only(true);
    cookie.set_same_site(SameSite::Lax);
    cookie.set_secure(state.urls.is_https());
    cookie
}

fn removal(state: &State, name: &str) -> Cookie {
    let mut cookie = cookie(state, name, "");
    cookie.make_removal();
    cookie
}

impl Ctx {
    /// Reads the cookies; creates the CSRF cookie on first visit; consumes the notice.
    pub async fn load(req: &Request, state: &State) -> Result<Ctx, WebError> {
        let jar = req.cookie();
        let user = match jar.get(SESSION_COOKIE).map(|c| c.value_str().to_string()) {
            Some(token) if !token.is_empty() => {
                state
                    .db
                    .run(move |conn| accounts::session_user(conn, &token))
                    .await?
            }
            _ => None,
        };
        let existing = jar
            .get(csrf::COOKIE)
            .map(|c| c.value_str().to_string())
            .filter(|v| v.len() == 32);
        let csrf_cookie = match existing {
            Some(value) => value,
            None => {
                let value = random_hex(16);
                jar.add(cookie(state, csrf::COOKIE, &value));
                value
            }
        };
        let notice = jar
            .get(NOTICE_COOKIE)
            .map(|c| c.value_str().to_string())
            .filter(|n| !n.is_empty());
        if notice.is_some() {
            jar.add(removal(state, NOTICE_COOKIE));
        }
        Ok(Ctx {
            user,
            csrf_token: csrf::token_for(&state.secret, &csrf_cookie),
            csrf_cookie: Some(csrf_cookie),
            notice,
            state: state.clone(),
        })
    }

    /// Like [`Ctx::load`] for a form post: the CSRF token must match before anything happens.
    pub async fn load_verified(
        req: &Request,
        state: &State,
        form: &FormData,
    ) -> Result<Ctx, WebError> {
        let submitted_cookie = req
            .cookie()
            .get(csrf::COOKIE)
            .map(|c| c.value_str().to_string());
        if !csrf::verify(
            &state.secret,
            submitted_cookie.as_deref(),
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

    /// Starts a signed-in session in the browser.
    pub fn sign_in(&self, req: &Request, session: &NewSession) {
        req.cookie()
            .add(cookie(&self.state, SESSION_COOKIE, &session.token));
    }

    pub fn sign_out(&self, req: &Request) {
        req.cookie().add(removal(&self.state, SESSION_COOKIE));
    }

    /// Shows `message` once on the next page.
    pub fn notice_next(&self, req: &Request, message: &str) {
        req.cookie()
            .add(cookie(&self.state, NOTICE_COOKIE, message));
    }

    /// The session token of this request, if any.
    pub fn session_token(req: &Request) -> Option<String> {
        req.cookie()
            .get(SESSION_COOKIE)
            .map(|c| c.value_str().to_string())
            .filter(|t| !t.is_empty())
    }

    pub fn has_csrf_cookie(&self) -> bool {
        self.csrf_cookie.is_some()
    }
}
