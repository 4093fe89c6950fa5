//! REST API v1, served by poem-openapi so the OpenAPI document is generated from the same
//! code that answers. A guard in front of every operation authenticates the key, checks the
//! permission its method needs, counts the rate-limit bucket and adds its headers.

pub mod bounces;
mod common;
mod error;
mod guard;
mod issues;
mod newsletter;
mod subscribers;
mod webhooks;

use poem::{Endpoint, EndpointExt, Route};
use poem_openapi::auth::Bearer;
use poem_openapi::{OpenApiService, SecurityScheme};

pub use error::{ApiError, ErrorBody};
pub use guard::Principal;

/// Largest request body the API reads.
pub const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// `Authorization: Bearer <API_KEY>`: 8-character prefix and 64 hex characters, created in
/// the dashboard. GET needs `read`, POST/PATCH `write`, DELETE `delete`.
#[derive(SecurityScheme)]
#[oai(ty = "bearer", bearer_format = "API key")]
pub struct ApiKeyAuth(#[allow(dead_code)] Bearer);

type Apis = (
    newsletter::NewsletterApi,
    issues::IssuesApi,
    subscribers::SubscribersApi,
    webhooks::WebhooksApi,
    bounces::BouncesApi,
);

/// The shared application state, as operations receive it.
pub type State = std::sync::Arc<crate::app::AppState>;

fn service() -> OpenApiService<Apis, ()> {
    OpenApiService::new(
        (
            newsletter::NewsletterApi,
            issues::IssuesApi,
            subscribers::SubscribersApi,
            webhooks::WebhooksApi,
            bounces::BouncesApi,
        ),
        "Broadsheet API",
        "1",
    )
        .description(
            "REST API of a Broadsheet newsletter. Every request carries `Authorization: Bearer <API_KEY>`; \
             the key names the newsletter. Errors answer `{\"error\": {\"code\", \"message\", \"details\"}}`. \
             Responses carry `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`.",
        )
        .server("/api/v1")
}

/// The OpenAPI document as JSON (also `broadsheet openapi`).
pub fn openapi_document() -> String {
    service().spec()
}

/// Everything under `/api/v1`.
pub fn routes() -> impl Endpoint {
    let service = service();
    let spec = service.spec_endpoint();
    let docs = service.swagger_ui();
    Route::new()
        .at("/openapi.json", spec)
        .nest("/docs", docs)
        .nest("/", service.around(guard::guard))
        .catch_all_error(|err| async move { error::into_json_response(err) })
}

/// Anything under `/api` outside `/api/v1` (another version, a typo): the same JSON 404 as an
/// unknown path inside it. Only version 1 exists.
pub fn other_versions() -> impl Endpoint {
    poem::endpoint::make_sync(|_| {
        use poem::IntoResponse;
        ApiError::not_found("No such API endpoint: only /api/v1 exists").into_response()
    })
}
