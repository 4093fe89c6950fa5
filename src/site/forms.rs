//! Signup forms on the newsletter's site (docs/growth.md): `/f/<public_id>` shows the form
//! (GET) and takes its posts (POST) from any page, with or without JavaScript;
//! `/f/<public_id>/challenge` hands out its proof-of-work; `/forms.js` is the optional script.
//! The posts carry no CSRF token (they come from other sites by design); the bot checks and
//! throttles of `opt_in::request_from_form` stand in its place.
//!
//! A post asking for JSON (`Accept: application/json`, the script's) gets `{ok, message}` or
//! `{ok: false, errors}`, readable (CORS) from the origins the owner listed; any other post
//! gets the success page, the owner's redirect, or the form again with what to fix.

use maud::html;
use poem::http::{HeaderValue, StatusCode};
use poem::web::{Data, Path};
use poem::{Body, Request, Response, handler};
use serde_json::json;

use super::pages::answer;
use super::{Site, SiteError, SiteResult};
use crate::domain::DomainError;
use crate::domain::subscribers::form_guard::{
    self, CHALLENGE_FIELD, HONEYPOT_FIELD, STARTED_FIELD,
};
use crate::domain::subscribers::opt_in::{self, FormOutcome, FormPost};
use crate::domain::subscribers::origin::Came;
use crate::domain::subscribers::signup_forms::{self, SignupForm};
use crate::http::client::client_address;
use crate::http::form::FormData;
use crate::http::headers::Policy;
use crate::http::public_page::{FOR_AN_HOUR, JAVASCRIPT, asset};
use crate::http::signup_form::{came_fields, came_from, came_to_page, form_markup, posted_fields};
use crate::state::AppState;

type State = std::sync::Arc<AppState>;

/// What the JSON answers and the pages say when the limits are reached.
const TOO_MANY: &str = "Too many sign-ups right now. Please try again in a little while.";

async fn form_of(state: &State, site: &Site, public_id: String) -> Result<SignupForm, SiteError> {
    let nid = site.0.id;
    state
        .db
        .run(move |conn| signup_forms::by_public_id(conn, nid, &public_id))
        .await
        .map_err(|e| SiteError::domain(e, site, "reading a signup form"))
}

/// The CORS headers of an answer to `req` about `form`: its JSON is readable from the
/// origins the owner listed; a challenge (`any`) from every page, since it is no secret.
fn cors(req: &Request, form: &SignupForm, any: bool, mut response: Response) -> Response {
    let origin = req.header("Origin").unwrap_or_default();
    let allowed = any || form.allows_origin(origin);
    let headers = response.headers_mut();
    headers.insert("Vary", HeaderValue::from_static("Origin"));
    if allowed
        && !origin.is_empty()
        && let Ok(value) = HeaderValue::from_str(origin)
    {
        headers.insert("Access-Control-Allow-Origin", value);
    }
    response
}

fn json_answer(status: StatusCode, body: serde_json::Value) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json")
        .header("Cache-Control", "no-store")
        .body(body.to_string())
}

/// The site's page of the form: the form itself, timed, with the script.
fn form_page(
    state: &State,
    site: &Site,
    form: &SignupForm,
    came: &Came,
    problems: &[String],
) -> Response {
    let action = format!("/f/{}", form.public_id);
    let started = form_guard::started_token(&state.secret, &form.public_id);
    let mut page = answer(
        state,
        site,
        &format!("Subscribe to {}", site.0.name),
        html! {
            @if !problems.is_empty() {
                ul.errors role="alert" { @for p in problems { li { (p) } } }
            }
            (form_markup(form, &action, Some(&started), Some(came_fields(came))))
            p.muted { "We will e-mail you a link to confirm. Nothing is sent until you follow it." }
            script src="/forms.js" defer {}
        },
    );
    page.set_data(Policy::SiteScripted);
    page.headers_mut()
        .insert("Cache-Control", HeaderValue::from_static("no-store"));
    page
}

/// `GET /f/:public_id`: the form on the site.
#[handler]
pub async fn show(
    req: &Request,
    Path(public_id): Path<String>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let form = form_of(state, site, public_id).await?;
    Ok(form_page(state, site, &form, &came_to_page(req), &[]))
}

/// `GET /f/:public_id/challenge`: a new proof-of-work in ALTCHA's format, plus `inline`:
/// whether the asking page may read the post's JSON answer (else the script posts the
/// form as a page would).
#[handler]
pub async fn challenge(
    req: &Request,
    Path(public_id): Path<String>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let form = form_of(state, site, public_id).await?;
    let origin = req.header("Origin").unwrap_or_default();
    let inline = origin.is_empty() || form.allows_origin(origin) || same_site(req, site, state);
    let mut body = serde_json::to_value(form_guard::challenge(&state.secret, &form))
        .expect("a challenge serialises");
    body["inline"] = json!(inline);
    Ok(cors(req, &form, true, json_answer(StatusCode::OK, body)))
}

/// Whether `req` comes from a page of the site itself.
fn same_site(req: &Request, site: &Site, state: &State) -> bool {
    req.header("Origin") == Some(site.0.site_origin(&state.urls).as_str())
}

/// `OPTIONS /f/:public_id[/challenge]`: the preflight of the script's requests.
#[handler]
pub async fn preflight(
    req: &Request,
    Path(public_id): Path<String>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let form = form_of(state, site, public_id).await?;
    let mut response = Response::builder()
        .status(StatusCode::NO_CONTENT)
        .header("Access-Control-Allow-Methods", "GET, POST")
        .header("Access-Control-Allow-Headers", "Accept, Content-Type")
        .header("Access-Control-Max-Age", "600")
        .finish();
    response = cors(
        req,
        &form,
        req.uri().path().ends_with("/challenge"),
        response,
    );
    Ok(response)
}

/// `POST /f/:public_id`: a signup from anywhere.
#[handler]
pub async fn post(
    req: &Request,
    Path(public_id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let form = form_of(state, site, public_id).await?;
    let wants_json = req
        .header("Accept")
        .is_some_and(|a| a.contains("application/json"));
    let fields = FormData::read(body).await?;
    let came = came_from(req, &fields);
    let post = FormPost {
        email: fields.get("email").to_string(),
        name: fields.get("name").to_string(),
        fields: posted_fields(&fields),
        honeypot: fields.get(HONEYPOT_FIELD).to_string(),
        started: fields.get(STARTED_FIELD).to_string(),
        solution: fields.get(CHALLENGE_FIELD).to_string(),
        client: client_address(req, state),
        came: came.clone(),
    };
    let (urls, secret, newsletter, stored) = (
        state.urls.clone(),
        state.secret.clone(),
        site.0.clone(),
        form.clone(),
    );
    let outcome = state
        .db
        .run(move |conn| {
            opt_in::request_from_form(conn, (&urls, &secret), &newsletter, &stored, &post)
        })
        .await;
    let problems: Vec<String> = match outcome {
        // A bot's post (honeypot, too fast) is answered as a person's: it learns nothing.
        Ok(FormOutcome::Requested(_) | FormOutcome::Dropped) => {
            return Ok(succeeded(req, state, site, &form, wants_json));
        }
        Err(DomainError::Invalid(_, problems)) => problems.sentences(),
        Err(DomainError::RateLimited(window)) if wants_json => {
            let mut answer = json_answer(
                StatusCode::TOO_MANY_REQUESTS,
                json!({"ok": false, "errors": [TOO_MANY]}),
            );
            answer
                .headers_mut()
                .insert("Retry-After", HeaderValue::from(window.retry_after));
            return Ok(cors(req, &form, false, answer));
        }
        Err(e) => return Err(SiteError::domain(e, site, "a signup form's post")),
    };
    Ok(match wants_json {
        true => cors(
            req,
            &form,
            false,
            json_answer(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"ok": false, "errors": problems}),
            ),
        ),
        false => {
            let mut page = form_page(state, site, &form, &came, &problems);
            page.set_status(StatusCode::UNPROCESSABLE_ENTITY);
            page
        }
    })
}

/// The answer to a post that was taken: the message as JSON, the owner's page, or the
/// success page.
fn succeeded(
    req: &Request,
    state: &State,
    site: &Site,
    form: &SignupForm,
    wants_json: bool,
) -> Response {
    if wants_json {
        let body = json!({"ok": true, "message": form.success_message});
        return cors(req, form, false, json_answer(StatusCode::OK, body));
    }
    match &form.redirect_url {
        Some(to) => Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header("Location", to.as_str())
            .header("Cache-Control", "no-store")
            .finish(),
        None => answer(
            state,
            site,
            "Check your inbox",
            html! {
                p role="status" { (form.success_message) }
                p { a href="/" { "← " (site.0.name) } }
            },
        ),
    }
}

/// `GET /forms.js`: the optional script of the snippet.
#[handler]
pub fn script() -> Response {
    asset(
        JAVASCRIPT,
        FOR_AN_HOUR,
        include_str!("../../assets/forms.js"),
    )
}
