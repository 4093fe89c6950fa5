//! Each newsletter's public site, on `<subdomain>.<public-host>` or its active custom
//! domain: its pages and the routes the links in sent mail lead to (unsubscribe, open pixel,
//! click redirect).

mod error;
mod forms;
mod media;
mod pages;
mod preferences;
mod readers;
mod tracking;

use std::sync::Arc;

use poem::error::ResponseError;
use poem::{Endpoint, EndpointExt, Request, Response, Route};

use crate::domain::DomainError;
use crate::domain::newsletters::custom_domains;
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::values::urls::{split_port, subdomain_of};
use crate::http::public_page::{no_favicon, robots, site_asset};
use crate::http::routing::{get, post};
use crate::state::AppState;

pub use error::{SiteError, SiteResult};

/// The newsletter whose site a request is for, found from its Host.
#[derive(Clone)]
pub struct Site(pub Arc<Newsletter>);

/// The routes of one newsletter's site.
pub fn routes() -> impl Endpoint<Output = Response> {
    Route::new()
        .at("/", get(pages::home))
        .at(
            "/subscribe",
            get(pages::subscribe_page).post(pages::subscribe),
        )
        .at(
            "/subscribe/confirm/:token",
            get(pages::confirm_page).post(pages::confirm),
        )
        .at(
            "/f/:public_id",
            get(forms::show).post(forms::post).options(forms::preflight),
        )
        .at(
            "/f/:public_id/challenge",
            get(forms::challenge).options(forms::preflight),
        )
        .at("/forms.js", get(forms::script))
        .at("/archive", get(pages::archive))
        .at("/about", get(pages::about))
        .at("/p/:path", get(pages::issue_page))
        .at("/view/:issue/:sig", get(pages::view_in_browser))
        .at("/feed.xml", get(pages::feed))
        .at("/favicon.ico", get(no_favicon))
        .at("/assets/:file", get(site_asset))
        .at("/media/:file", get(media::image))
        .at("/robots.txt", get(robots))
        .at(
            "/u/:delivery/:sig",
            get(tracking::unsubscribe_page).post(tracking::unsubscribe),
        )
        .at("/u/:delivery/:sig/resubscribe", post(tracking::resubscribe))
        .at("/u/:delivery/:sig/preferences", post(tracking::preferences))
        .at("/signin", get(readers::sign_in_page).post(readers::sign_in))
        .at(
            "/signin/:token",
            get(readers::link_page).post(readers::follow_link),
        )
        .at("/signout", post(readers::sign_out))
        .at("/account", get(readers::account))
        .at("/account/upgrade", post(readers::upgrade))
        .at("/account/billing", post(readers::billing))
        .at("/account/email", post(readers::change_email))
        .at(
            "/account/email/:token",
            get(readers::email_link_page).post(readers::follow_email_link),
        )
        .at("/account/unsubscribe", post(readers::unsubscribe))
        .at("/account/name", post(preferences::save))
        .at("/account/topics", post(preferences::save))
        .at("/account/pause", post(preferences::save))
        .at("/account/resume", post(preferences::save))
        .at("/stripe/webhook", post(readers::stripe_webhook))
        .at("/o/:delivery/:file", get(tracking::open_pixel))
        .at("/c/:delivery/:sig", get(tracking::click))
        .with(poem::middleware::CookieJarManager::new())
        .around(|route, req| async move {
            let site = req.data::<Site>().cloned();
            let state = req.data::<State>().cloned();
            let err = match route.call(req).await {
                Ok(response) => return Ok(response),
                Err(err) if err.is_from_response() => return Ok(err.into_response()),
                Err(err) => err,
            };
            // Every refusal, an unknown path included, is a page of the site it was asked of.
            let refusal = err
                .downcast_ref::<SiteError>()
                .unwrap_or(&SiteError::NotFound);
            Ok(match (site, state) {
                (Some(site), Some(state)) => refusal.on_site(&state.urls, &site.0),
                _ => refusal.as_response(),
            })
        })
        .map_to_response()
}

type State = Arc<AppState>;

/// Finds the site a request is for, by Host: `<subdomain>.<public-host>` or an active
/// custom domain. `Ok(None)` means the request is for the service itself (the base host, the
/// public host, or an IP address or single-label name such as `localhost`); any other
/// domain that is not an active custom domain, an unknown subdomain and a site not yet live
/// get the 404 page.
pub async fn resolve(req: &Request, state: &AppState) -> Result<Option<Site>, Response> {
    let host = req
        .header("Host")
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default()
        .to_lowercase();
    // Ports are ignored: behind a proxy on a non-standard port the Host carries one.
    let name = split_port(&host).0.trim_end_matches('.').to_string();
    let subdomain = subdomain_of(&name, state.urls.public_host_name()).map(str::to_string);
    let service_host = !name.contains('.')
        || name.parse::<std::net::IpAddr>().is_ok()
        || name.starts_with('[')
        || name == state.urls.base_host_name()
        || name == state.urls.public_host_name();
    if subdomain.is_none() && service_host {
        return Ok(None);
    }
    let found = state
        .db
        .run(move |conn| match subdomain {
            Some(subdomain) => newsletters::get_by_subdomain(conn, &subdomain),
            None => custom_domains::newsletter_on_domain(conn, &name)?
                .ok_or(DomainError::NotFound("custom domain")),
        })
        .await;
    match found {
        // The site answers once onboarding is done (the preferences step sets live_at).
        Ok(newsletter) if newsletter.live_at.is_some() => Ok(Some(Site(Arc::new(newsletter)))),
        Ok(_) | Err(DomainError::NotFound(_)) => Err(SiteError::NotFound.as_response()),
        Err(e) => Err(SiteError::failed(&format!("cannot resolve {host}"), &e)
            .with_hint("Please try again.")
            .as_response()),
    }
}
