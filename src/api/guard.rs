//! Authentication, permissions and rate limits for every API operation (docs/decisions.md §2).

use std::sync::Arc;

use poem::http::{HeaderValue, Method};
use poem::{Endpoint, IntoResponse, Request, Response};
use rusqlite::Connection;

use super::error::{ApiError, into_json_response, retry_hint};
use crate::domain::Window;
use crate::domain::accounts::api_keys::{self, ApiKey, Permission};
use crate::domain::accounts::rate_limit::{self, ApiClass, Bucket};
use crate::domain::{DomainError, ErrorCode, newsletters};
use crate::state::{AppState, RateLimits};

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

/// `response` with the caller's rate-limit window in its headers, so a client sees its
/// budget on every answer after the count, refusals included.
fn with_limits(mut response: Response, window: &Window) -> Response {
    let headers = response.headers_mut();
    headers.insert("X-RateLimit-Limit", HeaderValue::from(window.limit));
    headers.insert("X-RateLimit-Remaining", HeaderValue::from(window.remaining));
    headers.insert("X-RateLimit-Reset", HeaderValue::from(window.reset_at));
    response
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

/// The guard's steps in order: who calls and may they (before a byte of the body is read),
/// then the body, then the operation; every answer after the count carries the rate limit.
async fn checked<E: Endpoint>(ep: Arc<E>, mut req: Request) -> poem::Result<Response> {
    let state: Arc<AppState> = req
        .data::<Arc<AppState>>()
        .expect("app state is installed")
        .clone();
    let (principal, window) = match admit(&state, &req).await {
        Ok(admitted) => admitted,
        // The body is not read: the server sends this 401/403/429 at once and closes.
        Err(refusal) => return Ok(refusal),
    };
    if let Err(refusal) = take_body(&mut req, &window).await {
        return Ok(refusal);
    }
    req.extensions_mut().insert(principal);
    let response = match ep.call(req).await {
        Ok(output) => output.into_response(),
        Err(err) => into_json_response(err),
    };
    Ok(with_limits(response, &window))
}

/// The caller and their rate-limit window, or the answer instead: 401 (no key, or not a
/// live one), 429 (over the hour's limit, with `Retry-After`), 403 (a permission the key
/// lacks, or a change to a read-only newsletter). One database call decides all three, so a
/// refused request costs no more than an accepted one.
async fn admit(state: &AppState, req: &Request) -> Result<(Principal, Window), Response> {
    let (permission, class) = classify(req);
    let token = bearer_token(req);
    let limits = state.rate_limits;
    let admitted = state
        .db
        .run(
            move |conn| -> Result<(Principal, Window, Result<(), DomainError>), DomainError> {
                let key = authenticate(conn, token)?;
                let window = count(conn, &key, class, limits)?;
                let allowed = permitted(conn, &key, permission);
                let newsletter_id = key.newsletter_id;
                Ok((Principal { key, newsletter_id }, window, allowed))
            },
        )
        .await;
    match admitted {
        Ok((principal, window, Ok(()))) => Ok((principal, window)),
        Ok((_, window, Err(refusal))) => Err(with_limits(
            ApiError::from(refusal).into_response(),
            &window,
        )),
        Err(DomainError::RateLimited(window)) => {
            let mut response = with_limits(
                ApiError::from(DomainError::RateLimited(window)).into_response(),
                &window,
            );
            response
                .headers_mut()
                .insert("Retry-After", HeaderValue::from(window.retry_after));
            Err(response)
        }
        Err(e) => Err(ApiError::from(e).into_response()),
    }
}

/// The live key a bearer token names; a missing token says how to send one.
fn authenticate(conn: &Connection, token: Option<String>) -> Result<ApiKey, DomainError> {
    let token = token.ok_or_else(|| {
        DomainError::Unauthorized("Missing API key: send Authorization: Bearer <API_KEY>".into())
    })?;
    api_keys::authenticate(conn, &token)
}

/// Counts the request in its key's hourly bucket for its class (reads, writes, bulk), so each
/// class has its own limit; past it, `DomainError::RateLimited`.
fn count(
    conn: &Connection,
    key: &ApiKey,
    class: ApiClass,
    limits: RateLimits,
) -> Result<Window, DomainError> {
    let limit = match class {
        ApiClass::Get => limits.get,
        ApiClass::Bulk => limits.bulk,
        ApiClass::Write => limits.write,
    };
    let bucket = Bucket::Api {
        class,
        key_id: key.id,
    };
    match rate_limit::hit(conn, &bucket, HOUR, limit) {
        // A full disk cannot take the count: the request is held to its bucket uncounted, so
        // reads still work and a write answers 507 from its own write.
        Err(DomainError::Store(e)) if e.is_disk_full() => {
            rate_limit::peek(conn, &bucket, HOUR, limit)
        }
        counted => counted,
    }
}

/// Whether the key may do this: its permission, and for a change a newsletter that takes
/// changes (a cancelled one is read-only). Checked after the count, so a refused request
/// still spends its place in the limit.
fn permitted(conn: &Connection, key: &ApiKey, permission: Permission) -> Result<(), DomainError> {
    api_keys::require(key, permission)?;
    if permission != Permission::Read {
        newsletters::get(conn, key.newsletter_id)?.ensure_writable()?;
    }
    Ok(())
}

/// Reads the body here, bounded, so no operation ever buffers more than the limit (a missing
/// Content-Length or a chunked upload included), and hands it on as JSON; or the answer
/// instead: 413 too large, 400 not JSON, 422 a field the schema does not name. An operation
/// without a request body in the document gets none: whatever was sent is read and dropped,
/// so it never answers 400 or 413 for a body it does not take.
async fn take_body(req: &mut Request, window: &Window) -> Result<(), Response> {
    let takes_body = super::request_schema(req.method(), req.uri().path()).is_some();
    let bytes = match read_bounded(req).await {
        _ if !takes_body => return Ok(()),
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return Err(with_limits(
                ApiError::payload_too_large().into_response(),
                window,
            ));
        }
        Err(e) => {
            return Err(ApiError::bad_request(
                "invalid_json",
                format!("unreadable request body: {e}"),
            )
            .into_response());
        }
    };
    // No body at all is left as it is: operations that need one see JSON `null` and answer
    // 422, whatever Content-Type said; those that take none ignore it.
    if !bytes.iter().all(u8::is_ascii_whitespace) {
        ensure_json(&bytes)
            .and_then(|()| refuse_unknown_fields(req, &bytes))
            .map_err(|refusal| with_limits(refusal.into_response(), window))?;
    }
    // The API speaks only JSON: parse it as such whatever Content-Type says.
    req.headers_mut()
        .insert("Content-Type", HeaderValue::from_static("application/json"));
    req.set_body(bytes);
    Ok(())
}

/// 400 `invalid_json` unless the body is JSON text, which is UTF-8 (RFC 8259): checked here
/// because serde skips the strings an operation ignores without checking them.
fn ensure_json(bytes: &[u8]) -> Result<(), ApiError> {
    std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())
        .and_then(|text| {
            serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| e.to_string())
        })
        .map(|_| ())
        .map_err(|e| {
            ApiError::bad_request("invalid_json", format!("The body is not valid JSON: {e}"))
        })
}

/// 422 naming each field the request's schema does not, before anything else reads the body,
/// so a client's typo is not taken for success (`closed.rs`).
fn refuse_unknown_fields(req: &Request, bytes: &[u8]) -> Result<(), ApiError> {
    let unknown = serde_json::from_slice(bytes)
        .map(|body| super::unknown_fields(req.method(), req.uri().path(), &body))
        .unwrap_or_default();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(DomainError::Invalid(ErrorCode::ValidationError, unknown).into())
    }
}
