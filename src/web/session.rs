//! Per-request page context: the signed-in user (from the session cookie), the CSRF token,
//! and a one-time notice carried across a redirect. The cookies themselves are made in
//! `http::cookies`, which the public sites share.

use poem::Request;

use super::{FormData, State, WebError, csrf};
use crate::domain::accounts::{self, NewSession, User};
use crate::domain::newsletters::operators;
use crate::domain::values::time_zones::TimeZoneName;
use crate::http::cookies::{cookie, csrf_cookie_value, read_cookie, removal, renew_csrf_cookie};

/// The session cookie's name on http; on https it is `__Host-broadsheet_session`.
pub const SESSION_COOKIE: &str = "broadsheet_session";
const NOTICE_COOKIE: &str = "broadsheet_notice";

/// What every page handler needs to know about the request.
pub struct Ctx {
    pub user: Option<User>,
    /// The signed-in user is an operator of the installation (the top bar links the operator
    /// page).
    pub operator: bool,
    pub csrf_token: String,
    csrf_cookie: Option<String>,
    /// The session cookie as sent (live or not): the CSRF token is bound to it.
    session_token: Option<String>,
    pub notice: Option<String>,
    /// The zone of the newsletter whose page this is, once [`Ctx::on_newsletter`] was told.
    newsletter_zone: std::sync::OnceLock<TimeZoneName>,
    state: State,
}

impl Ctx {
    /// Reads the cookies; creates the CSRF cookie on first visit; consumes the notice.
    pub async fn load(req: &Request, state: &State) -> Result<Ctx, WebError> {
        let session_token = read_cookie(req, state, SESSION_COOKIE);
        let (user, operator) = match session_token.clone() {
            Some(token) => {
                let lifetimes = state.sessions;
                state
                    .db
                    .run(move |conn| {
                        let user = accounts::session_user(conn, &token, &lifetimes)?;
                        let operator = match &user {
                            Some(user) => operators::is_operator(conn, user.id)?,
                            None => false,
                        };
                        Ok::<_, crate::domain::DomainError>((user, operator))
                    })
                    .await?
            }
            None => (None, false),
        };
        let csrf_cookie = csrf_cookie_value(req, state);
        let notice = read_cookie(req, state, NOTICE_COOKIE);
        if notice.is_some() {
            req.cookie().add(removal(state, NOTICE_COOKIE));
        }
        Ok(Ctx {
            user,
            operator,
            csrf_token: csrf::token_for(&state.secret, &csrf_cookie, session_token.as_deref()),
            csrf_cookie: Some(csrf_cookie),
            session_token,
            notice,
            newsletter_zone: std::sync::OnceLock::new(),
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

    /// The zone the signed-in user reads and types times in: on a newsletter's pages its
    /// zone, unless the account picked its own; the account's elsewhere; UTC for anyone else.
    /// One zone, so a newsletter set to Berlin is read in Berlin time on every screen.
    pub fn zone(&self) -> TimeZoneName {
        match (&self.user, self.newsletter_zone.get()) {
            (None, _) => TimeZoneName::utc(),
            (Some(user), Some(zone)) if !user.own_time_zone => zone.clone(),
            (Some(user), _) => user.time_zone.clone(),
        }
    }

    /// This request is about newsletter `n`'s pages: times are shown in its zone (see
    /// [`Ctx::zone`]).
    pub fn on_newsletter(&self, n: &crate::domain::newsletters::Newsletter) {
        let _ = self.newsletter_zone.set(n.time_zone.clone());
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
