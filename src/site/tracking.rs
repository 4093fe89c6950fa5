//! Where the links in sent mail lead: unsubscribe (a confirm page, and the RFC 8058
//! one-click POST; an issue's link names its delivery, a welcome e-mail's the subscriber as
//! `s<id>`), the open pixel and the signed click redirect. A test send's links name the test
//! delivery (`test_send::TEST_DELIVERY`): they work the same and record nothing.

use maud::{Markup, html};
use poem::http::StatusCode;
use poem::web::{Data, Path, Query};
use poem::{Body, IntoResponse, Request, Response, handler};
use serde::Deserialize;

use super::pages::answer;
use super::{Site, SiteError, SiteResult};
use crate::domain::delivery::{step_tracking, tracking};
use crate::domain::issues::test_send::TEST_DELIVERY;
use crate::domain::{DomainError, subscribers};
use crate::http::client::client_ip_of;
use crate::http::csrf;
use crate::state::AppState;

type State = std::sync::Arc<AppState>;

/// The delivery a signed link names, if the signature is right and it belongs to this site
/// (the test delivery belongs to every site: its links change nothing).
async fn checked_delivery(
    state: &State,
    site: &Site,
    raw_id: &str,
    verify: impl FnOnce(i64) -> bool,
) -> Option<i64> {
    let id: i64 = raw_id.parse().ok()?;
    if !verify(id) {
        return None;
    }
    if id == TEST_DELIVERY {
        return Some(id);
    }
    let newsletter_id = site.0.id;
    let delivery = state
        .db
        .run(move |conn| tracking::delivery(conn, id))
        .await
        .ok()?;
    (delivery.newsletter_id == newsletter_id).then_some(id)
}

/// The step and subscriber a signed link of a sequence step's mail names
/// (`tracking::step_key`), if the signature is right and the step went to them from this
/// site's newsletter.
async fn checked_step(
    state: &State,
    site: &Site,
    raw: &str,
    verify: impl FnOnce(&str) -> bool,
) -> Option<(i64, i64)> {
    let (step, subscriber) = tracking::parse_step_key(raw)?;
    if !verify(raw) {
        return None;
    }
    let newsletter = state
        .db
        .run(move |conn| step_tracking::newsletter_of(conn, step, subscriber))
        .await
        .ok()??;
    (newsletter == site.0.id).then_some((step, subscriber))
}

/// Who an unsubscribe link names.
#[derive(Debug, Clone, Copy)]
enum Leaving {
    /// The recipient of an issue's delivery.
    Delivery(i64),
    /// A subscriber of this site's newsletter (mail that is no delivery: the welcome).
    Subscriber(i64),
    /// Nobody: the link of a test send.
    Test,
}

/// Whom a signed unsubscribe link names, if the signature is right and it belongs to this
/// site.
async fn checked_leaving(state: &State, site: &Site, raw_id: &str, sig: &str) -> Option<Leaving> {
    let secret = state.secret.clone();
    match raw_id.strip_prefix('s') {
        Some(subscriber) => {
            let id: i64 = subscriber.parse().ok()?;
            tracking::verify_subscriber_unsubscribe(&secret, id, sig).then_some(())?;
            let newsletter_id = site.0.id;
            state
                .db
                .run(move |conn| subscribers::get(conn, newsletter_id, id))
                .await
                .ok()
                .map(|_| Leaving::Subscriber(id))
        }
        None => checked_delivery(state, site, raw_id, |id| {
            tracking::verify_unsubscribe(&secret, id, sig)
        })
        .await
        .map(|id| match id {
            TEST_DELIVERY => Leaving::Test,
            id => Leaving::Delivery(id),
        }),
    }
}

#[handler]
pub async fn unsubscribe_page(
    req: &Request,
    Path((delivery, sig)): Path<(String, String)>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    match checked_leaving(state, site, &delivery, &sig).await {
        None => return Err(SiteError::NotFound),
        Some(Leaving::Test) => return Ok(test_unsubscribe_page(state, site)),
        Some(_) => {}
    }
    Ok(answer(
        state,
        site,
        &format!("Unsubscribe from {}", site.0.name),
        html! {
            p { "Press the button to stop receiving " (site.0.name) " by e-mail." }
            form method="post" action={ "/u/" (delivery) "/" (sig) } {
                button type="submit" { "Unsubscribe" }
            }
            p.muted { "Its issues stay on this site: " a href="/archive" { "the archive" } " is open to everyone." }
            (super::preferences::offer(req, state, site, &format!("/u/{delivery}/{sig}")))
        },
    ))
}

/// "Open my preferences" on the unsubscribe page: the signed link names the reader, the
/// site's CSRF token shows the button was pressed on its page; they are signed in to their
/// account page (docs/growth.md, "The preference centre").
#[handler]
pub async fn preferences(
    req: &Request,
    Path((delivery, sig)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    match pressed_for(req, (state, site), body, (&delivery, &sig)).await? {
        Some(id) => super::preferences::open_for(req, state, site, id).await,
        None => Ok(test_unsubscribe_page(state, site)),
    }
}

/// The subscriber a button of the unsubscribe page was pressed for: the form's CSRF token
/// fits, and the signed link names them (`None`: the link of a test send).
async fn pressed_for(
    req: &Request,
    (state, site): (&State, &Site),
    body: Body,
    (delivery, sig): (&str, &str),
) -> Result<Option<i64>, SiteError> {
    super::pages::verified_form(
        req,
        state,
        body,
        "Please follow the link in the e-mail again.",
    )
    .await?;
    let Some(leaving) = checked_leaving(state, site, delivery, sig).await else {
        return Err(SiteError::NotFound);
    };
    state
        .db
        .run(move |conn| match leaving {
            Leaving::Delivery(id) => tracking::recipient(conn, id).map(Some),
            Leaving::Subscriber(id) => Ok(Some(id)),
            Leaving::Test => Ok(None),
        })
        .await
        .map_err(|e: DomainError| SiteError::domain(e, site, "reading an unsubscribe link"))
}

/// The "Subscribe again" form of the page a reader sees after leaving, posting to the same
/// signed link (`/u/<id>/<sig>/resubscribe`) with the site's CSRF token.
fn resubscribe_form(req: &Request, state: &State, delivery: &str, sig: &str) -> Markup {
    html! {
        form method="post" action={ "/u/" (delivery) "/" (sig) "/resubscribe" } {
            input type="hidden" name=(csrf::FIELD) value=(super::pages::csrf_token(req, state));
            button type="submit" { "Subscribe again" }
        }
    }
}

/// One-click unsubscribe (RFC 8058) and the confirm page's button.
#[handler]
pub async fn unsubscribe(
    req: &Request,
    Path((delivery, sig)): Path<(String, String)>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let Some(leaving) = checked_leaving(state, site, &delivery, &sig).await else {
        return Err(SiteError::NotFound);
    };
    if let Leaving::Test = leaving {
        return Ok(test_unsubscribe_page(state, site));
    }
    let newsletter_id = site.0.id;
    state
        .db
        .run(move |conn| match leaving {
            Leaving::Delivery(id) => tracking::unsubscribe(conn, id).map(|_| ()),
            Leaving::Subscriber(id) => tracking::unsubscribe_subscriber(conn, newsletter_id, id),
            Leaving::Test => Ok(()),
        })
        .await
        .map_err(|e| {
            SiteError::failed(&format!("unsubscribe ({leaving:?}) failed"), &e)
                .with_hint("Please try the link again.")
        })?;
    Ok(answer(
        state,
        site,
        "You are unsubscribed",
        html! {
            p { "You will receive no more issues of " (site.0.name) "." }
            p { "Unsubscribed by mistake?" }
            (resubscribe_form(req, state, &delivery, &sig))
        },
    ))
}

/// "Subscribe again" after leaving: the same signed link names the reader, and the site's
/// CSRF token shows the button was pressed on its page. A bounced address stays out.
#[handler]
pub async fn resubscribe(
    req: &Request,
    Path((delivery, sig)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let Some(subscriber_id) = pressed_for(req, (state, site), body, (&delivery, &sig)).await?
    else {
        return Ok(test_unsubscribe_page(state, site));
    };
    let newsletter_id = site.0.id;
    let subscriber = state
        .db
        .run(move |conn| tracking::resubscribe(conn, newsletter_id, subscriber_id))
        .await
        .map_err(|e| SiteError::domain(e, site, "subscribing again"))?;
    Ok(match subscriber.status {
        subscribers::Status::Active => answer(
            state,
            site,
            "You are subscribed again",
            html! { p { strong { (subscriber.email) } " will receive " (site.0.name) " again. Welcome back!" } },
        ),
        _ => answer(
            state,
            site,
            "This address cannot be subscribed again",
            html! { p { "Mail to " strong { (subscriber.email) } " bounced, so " (site.0.name) " cannot send to it. " a href="/subscribe" { "Subscribe with another address" } "." } },
        ),
    })
}

/// What the unsubscribe link of a test send shows, before and after its button alike.
fn test_unsubscribe_page(state: &State, site: &Site) -> Response {
    answer(
        state,
        site,
        &format!("Unsubscribe from {}", site.0.name),
        html! {
            p { "This link came in a test send of " (site.0.name) ", so nobody was unsubscribed. In the real issue it unsubscribes its reader." }
        },
    )
}

/// A transparent 1x1 GIF.
const PIXEL: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

#[handler]
pub async fn open_pixel(
    req: &Request,
    Path((delivery, file)): Path<(String, String)>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let Some(sig) = file.strip_suffix(".gif").map(str::to_string) else {
        return Err(SiteError::NotFound);
    };
    let secret = state.secret.clone();
    if let Some((step, subscriber)) = checked_step(state, site, &delivery, |key| {
        tracking::verify_step_open(&secret, key, &sig)
    })
    .await
    {
        let client = client_ip_of(req, state);
        if let Err(e) = state
            .db
            .run(move |conn| step_tracking::record_open(conn, step, subscriber, client))
            .await
        {
            eprintln!("site: recording an open of step {step} failed: {e}");
        }
        return Ok(pixel());
    }
    let Some(id) = checked_delivery(state, site, &delivery, |id| {
        tracking::verify_open(&secret, id, &sig)
    })
    .await
    else {
        return Err(SiteError::NotFound);
    };
    let client = client_ip_of(req, state);
    if id != TEST_DELIVERY
        && let Err(e) = state
            .db
            .run(move |conn| tracking::record_open(conn, id, client))
            .await
    {
        eprintln!("site: recording an open of delivery {id} failed: {e}");
    }
    Ok(pixel())
}

fn pixel() -> Response {
    Response::builder()
        .content_type("image/gif")
        .header("Cache-Control", "no-store, max-age=0")
        .body(PIXEL)
}

#[derive(Deserialize)]
pub struct ClickQuery {
    /// The target.
    u: Option<String>,
    /// The target's signature.
    t: Option<String>,
}

#[handler]
pub async fn click(
    req: &Request,
    Path((delivery, sig)): Path<(String, String)>,
    Query(query): Query<ClickQuery>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let Some(target) = query
        .u
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
    else {
        return Err(SiteError::NotFound);
    };
    let (secret, newsletter_id) = (state.secret.clone(), site.0.id);
    let target_sig = query.t.unwrap_or_default();
    let checked_target = target.clone();
    let verify_step = |key: &str| {
        tracking::verify_step_click(&secret, newsletter_id, key, &target, &sig, &target_sig)
    };
    if let Some((step, subscriber)) = checked_step(state, site, &delivery, verify_step).await {
        let client = client_ip_of(req, state);
        if let Err(e) = state
            .db
            .run(move |conn| step_tracking::record_click(conn, step, subscriber, client))
            .await
        {
            eprintln!("site: recording a click of step {step} failed: {e}");
        }
        return Ok(redirect(target));
    }
    let Some(id) = checked_delivery(state, site, &delivery, |id| {
        tracking::verify_click(
            &secret,
            newsletter_id,
            id,
            &checked_target,
            &sig,
            &target_sig,
        )
    })
    .await
    else {
        return Err(SiteError::NotFound);
    };
    let (recorded, client) = (target.clone(), client_ip_of(req, state));
    if id != TEST_DELIVERY
        && let Err(e) = state
            .db
            .run(move |conn| tracking::record_click(conn, id, &recorded, client))
            .await
    {
        eprintln!("site: recording a click of delivery {id} failed: {e}");
    }
    Ok(redirect(target))
}

/// The click's way on: 302 to the (verified) target.
fn redirect(target: String) -> Response {
    let mut response = poem::web::Redirect::temporary(target).into_response();
    response.set_status(StatusCode::FOUND);
    response
}
