//! Authentication, permissions and rate limits for every API operation (docs/decisions.md §2).

use std::sync::Arc;

use poem::http::{HeaderValue, Method};
use poem::{Endpoint, IntoResponse, Request, Response};

use super::error::{ApiError, into_json_response, retry_hint};
use crate::domain::Window;
use crate::domain::accounts::api_keys::{self, ApiKey, Permission};
use crate::domain::accounts::rate_limit::{self, ApiClass, Bucket};
use crate::domain::{DomainError, ErrorCode, newsletters};
use crate::state::AppState;

/// The authenticated caller, available to operations as `Data<&Principal>`.
#[derive(Debug, Clone)]
pub struct Principal {
    pub key: ApiKey,
    pub newsletter_id: i64,
}

const HOUR: i64 = 3600;

/// Which permission and which rate-limit bucket a request uses.
fn classify(req: &Request) -> (Permission, ApiClass) {
    let bulk = req.uri().path().ends_with("/bulk_create");
    match *req.method() {
        Method::GET | Method::HEAD | Method::OPTIONS => (Permission::Read, ApiClass::Get),
        Method::DELETE => (Permission::Delete, ApiClass::Write),
        _ if bulk => (Permission::Write, ApiClass::Bulk),
        _ => (Permission::Write, ApiClass::Write),
    }
}

fn bearer_token(req: &Request) -> Option<String> {
    let header = req.header("Authorization")?.trim();
    let (scheme, token) = header.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

fn limit_headers(response: &mut Response, window: &Window) {
    let headers = response.headers_mut();
    headers.insert("X-RateLimit-Limit", HeaderValue::from(window.limit));
    headers.insert("X-RateLimit-Remaining", HeaderValue::from(window.remaining));
    headers.insert("X-RateLimit-Reset", HeaderValue::from(window.reset_at));
}

/// The body if it is at most [`super::BODY_LIMIT`] bytes, `None` if it is larger: a declared
/// `Content-Length` past the limit before a byte is read, else at the first byte past it (a
/// chunked upload included). The rest is never read: the server answers at once and closes
/// the connection (`http::server`).
async fn read_bounded(req: &mut Request) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    let limit = super::BODY_LIMIT as u64;
    let declared = req
        .header("Content-Length")
        .and_then(|n| n.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit) {
        return Ok(None);
    }
    let mut kept = Vec::new();
    let mut reader = req.take_body().into_async_read().take(limit + 1);
    reader.read_to_end(&mut kept).await?;
    Ok((kept.len() as u64 <= limit).then_some(kept))
}

/// Authenticates and counts the request, then runs the operation; every answer passes here.
pub async fn guard<E: Endpoint>(ep: Arc<E>, req: Request) -> poem::Result<Response> {
    let mut response = checked(ep, req).await?;
    retry_hint(&mut response);
    Ok(response)
}

async fn checked<E: Endpoint>(ep: Arc<E>, mut req: Request) -> poem::Result<Response> {
    let state: Arc<AppState> = req
        .data::<Arc<AppState>>()
        .expect("app state is installed")
        .clone();
    let (permission, class) = classify(&req);
    let token = bearer_token(&req);
    let limits = state.rate_limits;
    let writes = permission != Permission::Read;
    let checked = state
        .db
        .run(
            move |conn| -> Result<(Principal, Window, Result<(), DomainError>), DomainError> {
                let token = token.ok_or_else(|| {
                    DomainError::Unauthorized(
                        "Missing API key: send Authorization: Bearer <API_KEY>".into(),
                    )
                })?;
                let key = api_keys::authenticate(conn, &token)?;
                let limit = match class {
                    ApiClass::Get => limits.get,
                    ApiClass::Bulk => limits.bulk,
                    ApiClass::Write => limits.write,
                };
                let bucket = Bucket::Api {
                    class,
                    key_id: key.id,
                };
                let window = match rate_limit::hit(conn, &bucket, HOUR, limit) {
                    // A full disk cannot take the count: the request is held to its bucket
                    // uncounted, so reads still work and a write answers 507 from its own
                    // write.
                    Err(DomainError::Store(e)) if e.is_disk_full() => {
                        rate_limit::peek(conn, &bucket, HOUR, limit)?
                    }
                    counted => counted?,
                };
                let allowed = api_keys::require(&key, permission).and_then(|()| {
                    if writes {
                        newsletters::get(conn, key.newsletter_id)?.ensure_writable()
                    } else {
                        Ok(())
                    }
                });
                let newsletter_id = key.newsletter_id;
                Ok((Principal { key, newsletter_id }, window, allowed))
            },
        )
        .await;
    let refused = match checked {
        Ok((principal, window, Ok(()))) => Ok((principal, window)),
        Ok((_, window, Err(refusal))) => {
            let mut response = ApiError::from(refusal).into_response();
            limit_headers(&mut response, &window);
            Err(response)
        }
        Err(DomainError::RateLimited(window)) => {
            let mut response = ApiError::from(DomainError::RateLimited(window)).into_response();
            limit_headers(&mut response, &window);
            response
                .headers_mut()
                .insert("Retry-After", HeaderValue::from(window.retry_after));
            Err(response)
        }
        Err(e) => Err(ApiError::from(e).into_response()),
    };
    let (principal, window) = match refused {
        Ok(allowed) => allowed,
        // The body is not read: the server sends this 401/403/429 at once and closes.
        Err(response) => return Ok(response),
    };
    // Read the body here, bounded, so no operation ever buffers more than the limit (a
    // missing Content-Length or a chunked upload included). An operation without a request
    // body in the document gets none: whatever was sent is read and dropped, so it never
    // answers 400 or 413 for a body it does not take.
    let takes_body = super::request_schema(req.method(), req.uri().path()).is_some();
    match read_bounded(&mut req).await {
        _ if !takes_body => {}
        Ok(Some(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => {
            // No body: operations that need one see JSON `null` and answer 422, whatever
            // Content-Type said; those that take none ignore it.
            req.headers_mut()
                .insert("Content-Type", HeaderValue::from_static("application/json"));
            req.set_body(bytes)
        }
        Ok(Some(bytes)) => {
            // JSON text is UTF-8 (RFC 8259); serde skips ignored strings unchecked.
            let parsed = std::str::from_utf8(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|text| {
                    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| e.to_string())
                });
            if let Err(e) = parsed {
                let mut response = ApiError::bad_request(
                    "invalid_json",
                    format!("The body is not valid JSON: {e}"),
                )
                .into_response();
                limit_headers(&mut response, &window);
                return Ok(response);
            }
            // A field the request's schema does not name is refused, each one named, before
            // anything else reads the body (`closed.rs`).
            let unknown = serde_json::from_slice(&bytes)
                .map(|body| super::unknown_fields(req.method(), req.uri().path(), &body))
                .unwrap_or_default();
            if !unknown.is_empty() {
                let invalid = DomainError::Invalid(ErrorCode::ValidationError, unknown);
                let mut response = ApiError::from(invalid).into_response();
                limit_headers(&mut response, &window);
                return Ok(response);
            }
            // The API speaks only JSON: parse it as such whatever Content-Type says.
            req.headers_mut()
                .insert("Content-Type", HeaderValue::from_static("application/json"));
            req.set_body(bytes)
        }
        Ok(None) => {
            let mut response = ApiError::payload_too_large().into_response();
            limit_headers(&mut response, &window);
            return Ok(response);
        }
        Err(e) => {
            return Ok(ApiError::bad_request(
                "invalid_json",
                format!("unreadable request body: {e}"),
            )
            .into_response());
        }
    }
    req.extensions_mut().insert(principal);
    let mut response = match ep.call(req).await {
        Ok(output) => output.into_response(),
        Err(err) => into_json_response(err),
    };
    limit_headers(&mut response, &window);
    Ok(response)
}
