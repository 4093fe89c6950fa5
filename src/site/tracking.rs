//! Where the links in sent mail lead: unsubscribe (a confirm page, and the RFC 8058
//! one-click POST), the open pixel and the signed click redirect.

use maud::html;
use poem::http::StatusCode;
use poem::web::{Data, Path, Query};
use poem::{IntoResponse, Response, handler};
use serde::Deserialize;

use super::{Site, SiteError, SiteResult};
use crate::domain::tracking;
use crate::http::public_page::page_response;
use crate::state::AppState;

type State = std::sync::Arc<AppState>;

/// The delivery a signed link names, if the signature is right and it belongs to this site.
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
    let newsletter_id = site.0.id;
    let delivery = state
        .db
        .run(move |conn| tracking::delivery(conn, id))
        .await
        .ok()?;
    (delivery.newsletter_id == newsletter_id).then_some(id)
}

#[handler]
pub async fn unsubscribe_page(
    Path((delivery, sig)): Path<(String, String)>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let secret = state.secret.clone();
    let Some(_) = checked_delivery(state, site, &delivery, |id| {
        tracking::verify_unsubscribe(&secret, id, &sig)
    })
    .await
    else {
        return Err(SiteError::NotFound);
    };
    Ok(page_response(
        StatusCode::OK,
        &format!("Unsubscribe from {}", site.0.name),
        html! {
            p { "Press the button to stop receiving " (site.0.name) " by e-mail." }
            form method="post" action={ "/u/" (delivery) "/" (sig) } {
                button type="submit" { "Unsubscribe" }
            }
        },
    ))
}

/// One-click unsubscribe (RFC 8058) and the confirm page's button.
#[handler]
pub async fn unsubscribe(
    Path((delivery, sig)): Path<(String, String)>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let secret = state.secret.clone();
    let Some(id) = checked_delivery(state, site, &delivery, |id| {
        tracking::verify_unsubscribe(&secret, id, &sig)
    })
    .await
    else {
        return Err(SiteError::NotFound);
    };
    state
        .db
        .run(move |conn| tracking::unsubscribe(conn, id))
        .await
        .map_err(|e| {
            SiteError::failed(&format!("unsubscribe of delivery {id} failed"), &e)
                .with_hint("Please try the link again.")
        })?;
    Ok(page_response(
        StatusCode::OK,
        "You are unsubscribed",
        html! {
            p { "You will receive no more issues of " (site.0.name) "." }
        },
    ))
}

/// A transparent 1x1 GIF.
const PIXEL: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

#[handler]
pub async fn open_pixel(
    Path((delivery, file)): Path<(String, String)>,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let Some(sig) = file.strip_suffix(".gif").map(str::to_string) else {
        return Err(SiteError::NotFound);
    };
    let secret = state.secret.clone();
    let Some(id) = checked_delivery(state, site, &delivery, |id| {
        tracking::verify_open(&secret, id, &sig)
    })
    .await
    else {
        return Err(SiteError::NotFound);
    };
    if let Err(e) = state
        .db
        .run(move |conn| tracking::record_open(conn, id))
        .await
    {
        eprintln!("site: recording an open of delivery {id} failed: {e}");
    }
    Ok(Response::builder()
        .content_type("image/gif")
        .header("Cache-Control", "no-store, max-age=0")
        .body(PIXEL))
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
    let recorded = target.clone();
    if let Err(e) = state
        .db
        .run(move |conn| tracking::record_click(conn, id, &recorded))
        .await
    {
        eprintln!("site: recording a click of delivery {id} failed: {e}");
    }
    let mut response = poem::web::Redirect::temporary(target).into_response();
    response.set_status(StatusCode::FOUND);
    Ok(response)
}
