//! REST API v1, served by poem-openapi so the OpenAPI document is generated from the same
//! code that answers. A guard in front of every operation authenticates the key, checks the
//! permission its method needs, counts the rate-limit bucket and adds its headers.

/// `#[OpenApi]` for one group of operations (`tag`, then the `impl`), with the rate-limit
/// headers that the guard adds to each of their answers documented once, here. The `impl`
/// inside stays at the left margin, as it was before it moved into the macro.
macro_rules! rate_limited_api {
    ($tag:tt, $($api:tt)*) => {
        #[poem_openapi::OpenApi(
            tag = $tag,
            response_header(
                name = "X-RateLimit-Limit",
                ty = "Option<u32>",
                description = "Requests allowed per hour in the bucket this request counted in (GET, writes or bulk); absent on 401"
            ),
            response_header(
                name = "X-RateLimit-Remaining",
                ty = "Option<u32>",
                description = "Requests left in the bucket this hour; absent on 401"
            ),
            response_header(
                name = "X-RateLimit-Reset",
                ty = "Option<i64>",
                description = "Unix seconds at which the hourly window ends; absent on 401"
            ),
            response_header(
                name = "Retry-After",
                ty = "Option<i64>",
                description = "On 429: seconds until the window ends; on 507 (the server's disk is full): seconds to wait before trying again"
            )
        )]
        $($api)*
    };
}

mod body_errors;
pub mod bounces;
mod closed;
mod common;
mod custom_fields;
mod error;
mod examples;
mod fields;
mod guard;
mod issues;
mod newsletter;
mod reports;
mod sequences;
mod statuses;
mod subscribers;
mod webhooks;

use std::sync::LazyLock;

use poem::endpoint::make_sync;
use poem::http::{HeaderValue, Method, StatusCode};
use poem::web::Html;
use poem::{Endpoint, EndpointExt, IntoResponse, Response, Route};
use poem_openapi::auth::Bearer;
use poem_openapi::{OpenApiService, SecurityScheme};

use serde_json::Value;

use crate::domain::FieldErrors;
use crate::http::headers::Policy;

pub use error::{ApiError, ErrorBody};
pub use guard::Principal;

/// Largest request body the API reads.
pub const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// `Authorization: Bearer <API_KEY>`: 8-character prefix and 64 hex characters, created in
/// the dashboard. GET needs `read`, POST/PATCH `write`, DELETE `delete`.
#[derive(SecurityScheme)]
#[oai(ty = "bearer", bearer_format = "API key")]
pub struct ApiKeyAuth(#[allow(dead_code)] Bearer);

/// Every group of operations, their request bodies closed to fields they do not name.
type Apis = closed::Closed<(
    newsletter::NewsletterApi,
    issues::IssuesApi,
    reports::ReportsApi,
    subscribers::SubscribersApi,
    custom_fields::FieldsApi,
    sequences::SequencesApi,
    webhooks::WebhooksApi,
    bounces::BouncesApi,
)>;

/// The shared application state, as operations receive it.
pub type State = std::sync::Arc<crate::state::AppState>;

fn service() -> OpenApiService<Apis, ()> {
    OpenApiService::new(
        closed::Closed((
            newsletter::NewsletterApi,
            issues::IssuesApi,
            reports::ReportsApi,
            subscribers::SubscribersApi,
            custom_fields::FieldsApi,
            sequences::SequencesApi,
            webhooks::WebhooksApi,
            bounces::BouncesApi,
        )),
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

/// The OpenAPI document as JSON, made once (also `broadsheet openapi`).
static DOCUMENT: LazyLock<String> = LazyLock::new(|| closed::finish(&service().spec()));

/// The API reference page (Swagger UI, which embeds the document), made once.
static REFERENCE_PAGE: LazyLock<String> =
    LazyLock::new(|| for_people(&closed::finish(&service().swagger_ui_html())));

/// The reference page's own styles (a phone's width, dark mode), inlined and hashed like
/// Swagger UI's.
const DOCS_CSS: &str = include_str!("../../assets/api-docs.css");

/// Swagger UI's page as poem-openapi makes it, made a page of the service: a document type
/// (standards mode), its language, a viewport (without one a phone lays it out 980 px wide
/// and shrinks it), a title and description, a bar with the way back to the dashboard, the
/// reference in a `main` landmark, and [`DOCS_CSS`]. Only the template's own text is
/// replaced: the head's, before the inlined bundle, and the element the bundle renders into,
/// after it (the bundle holds `<body>` and such in its strings).
fn for_people(page: &str) -> String {
    let head = format!(
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n    \
         <meta name=\"description\" content=\"The REST API of Broadsheet: every operation, its fields and answers.\">\n    \
         <title>API reference · Broadsheet</title>\n    <style>{DOCS_CSS}</style>"
    );
    let page = page
        .replacen(
            "<html charset=\"UTF-8\">",
            "<!DOCTYPE html>\n<html lang=\"en\">",
            1,
        )
        .replacen("<title>Swagger UI</title>", &head, 1);
    const UI: &str = "<div id=\"ui\"></div>";
    match page.rfind(UI) {
        Some(at) => format!(
            "{}<header class=\"docs-top\"><nav aria-label=\"Main\">\
             <a href=\"/newsletters\">← Back to the dashboard</a>\
             <a href=\"/api/v1/openapi.json\">The OpenAPI document (JSON)</a></nav></header>\n\
             <main id=\"ui\"></main>{}",
            &page[..at],
            &page[at + UI.len()..]
        ),
        None => page,
    }
}

/// The OpenAPI document as JSON (also `broadsheet openapi`).
pub fn openapi_document() -> String {
    DOCUMENT.clone()
}

/// The API reference page (Swagger UI) as `/api/v1/docs` serves it.
pub fn reference_page() -> String {
    REFERENCE_PAGE.clone()
}

/// The reference page's Content-Security-Policy, hashed once, on the first visit.
static DOCS_POLICY: LazyLock<HeaderValue> = LazyLock::new(|| Policy::api_docs(&reference_page()));

/// Everything under `/api/v1`.
pub fn routes() -> impl Endpoint {
    let service = service();
    // The document and the reference page as `DOCUMENT` and `REFERENCE_PAGE` finish them
    // (poem-openapi's own endpoints would serve them unfinished).
    let spec = make_sync(|_| {
        Response::builder()
            .content_type("application/json")
            .body(openapi_document())
    });
    let docs = make_sync(|_| {
        let mut page = Html(reference_page()).into_response();
        page.set_data(Policy::ApiDocs(&DOCS_POLICY));
        page
    });
    Route::new()
        .at("/openapi.json", spec)
        .nest("/docs", Route::new().at("/", docs))
        .nest("/", service.around(guard::guard))
        .catch_all_error(|err| async move { error::into_json_response(err) })
        .around(|ep, req| async move {
            let path = req.uri().path().to_string();
            let mut response = ep.call(req).await?;
            if response.status() == StatusCode::METHOD_NOT_ALLOWED
                && let Some(methods) = methods_of(&path)
            {
                response
                    .headers_mut()
                    .insert("Allow", crate::http::routing::allow_header(&methods));
            }
            Ok(response)
        })
}

/// A path of the document as its segments, and its methods, each with the schema of its
/// request body if it takes one.
type PathOperations = (Vec<String>, Vec<(Method, Option<Value>)>);

/// The OpenAPI document, parsed once.
static PARSED: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(&openapi_document()).expect("the OpenAPI document is JSON")
});

/// The methods of each path of the OpenAPI document, as (path segments, methods), each
/// method with the schema of its request body; `{name}` segments match any one segment.
/// poem-openapi's routes answer a method a path lacks with a bare 405; this is where its
/// `Allow` comes from, how the guard knows which requests have a body to read, and what
/// their bodies may hold.
static PATHS: LazyLock<Vec<PathOperations>> = LazyLock::new(|| {
    let paths = PARSED["paths"].as_object().cloned().unwrap_or_default();
    paths
        .into_iter()
        .map(|(path, operations)| {
            let segments = path.split('/').map(str::to_string).collect();
            let methods = operations
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(name, operation)| {
                    let method = Method::from_bytes(name.to_uppercase().as_bytes()).ok()?;
                    let body = operation.get("requestBody").map(|body| {
                        let media = body["content"].as_object().and_then(|c| c.values().next());
                        media.map_or(Value::Null, |m| m["schema"].clone())
                    });
                    Some((method, body))
                })
                .collect();
            (segments, methods)
        })
        .collect()
});

/// The methods of the API path `path` (inside `/api/v1`) when it is one; a literal segment
/// wins over a `{name}` (`/subscribers/bulk_create`, not `/subscribers/{id}`).
fn operations_of(path: &str) -> Option<&'static [(Method, Option<Value>)]> {
    let wanted: Vec<&str> = path.split('/').collect();
    PATHS
        .iter()
        .filter(|(segments, _)| {
            segments.len() == wanted.len()
                && segments
                    .iter()
                    .zip(&wanted)
                    .all(|(s, w)| s == w || (s.starts_with('{') && !w.is_empty()))
        })
        .max_by_key(|(segments, _)| segments.iter().filter(|s| !s.starts_with('{')).count())
        .map(|(_, methods)| methods.as_slice())
}

/// The methods `path` (inside `/api/v1`) accepts, in `Allow` order.
fn methods_of(path: &str) -> Option<Vec<Method>> {
    operations_of(path).map(|operations| {
        let mut methods: Vec<Method> = operations.iter().map(|(m, _)| m.clone()).collect();
        methods.sort_by_key(|m| ORDER.iter().position(|o| o == m));
        methods
    })
}

/// The schema of the request body of the operation `method path` (inside `/api/v1`), if it
/// takes one. Those that do not never read one, so they never answer 400 or 413 for it.
fn request_schema(method: &Method, path: &str) -> Option<&'static Value> {
    operations_of(path)
        .into_iter()
        .flatten()
        .find(|(m, _)| m == method)
        .and_then(|(_, body)| body.as_ref())
}

/// The fields of `body`, sent to `method path` (inside `/api/v1`), that its request body's
/// schema does not name (`closed.rs`); empty when there are none.
fn unknown_fields(method: &Method, path: &str, body: &Value) -> FieldErrors {
    match request_schema(method, path) {
        Some(schema) => closed::unknown_fields(&PARSED, schema, body),
        None => FieldErrors::new(),
    }
}

/// The order methods are listed in `Allow`.
const ORDER: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];

/// Anything under `/api` outside `/api/v1` (another version, a typo): the same JSON 404 as an
/// unknown path inside it. Only version 1 exists.
pub fn other_versions() -> impl Endpoint {
    poem::endpoint::make_sync(|_| {
        use poem::IntoResponse;
        ApiError::not_found("No such API endpoint: only /api/v1 exists").into_response()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_page_is_made_for_people_and_its_scripts_are_untouched() {
        let original = closed::finish(&service().swagger_ui_html());
        let page = reference_page();
        // Each inline script as it is: the bundle may hold "<script" in its strings, but
        // never "</script>".
        let scripts = |html: &str| {
            html.split("</script>")
                .filter_map(|part| part.find("<script").map(|at| part[at..].to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            scripts(&page),
            scripts(&original),
            "Swagger UI's bundle and start-up script"
        );
        assert!(
            page.trim_start()
                .starts_with("<!DOCTYPE html>\n<html lang=\"en\">")
        );
        assert!(
            page.contains(
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            )
        );
        assert_eq!(page.matches("<header class=\"docs-top\">").count(), 1);
        assert_eq!(page.matches("<main id=\"ui\"></main>").count(), 1);
        assert!(!page.contains("<div id=\"ui\"></div>"));
    }
}
