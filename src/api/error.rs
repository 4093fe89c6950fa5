//! The REST API's one error type and its single mapping to HTTP: every failure, whether a
//! domain rule, a bad key or poem-openapi's own parsing, answers
//! `{"error": {"code", "message", "details"}}` (plus `errors` on 422).

use std::collections::BTreeMap;

use poem::http::StatusCode;
use poem::{IntoResponse, Response};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object};

use super::body_errors;
use crate::domain::{DomainError, ErrorCode, FieldErrors};

/// The error object inside the body.
#[derive(Debug, Clone, Object)]
pub struct ErrorDetail {
    /// Machine-readable code, e.g. `validation_error`, `not_found`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
    /// Field name to messages; empty when the error is not about fields.
    pub details: BTreeMap<String, Vec<String>>,
}

/// The body of every error response.
#[derive(Debug, Clone, Object)]
pub struct ErrorBody {
    pub error: ErrorDetail,
    /// Whole-sentence messages, on validation failures (422) only.
    #[oai(skip_serializing_if_is_none)]
    pub errors: Option<Vec<String>>,
}

/// Every error status the API answers with, for the OpenAPI document and for handlers.
#[derive(Debug, ApiResponse)]
pub enum ApiError {
    /// Malformed JSON or a body that does not fit the schema.
    #[oai(status = 400)]
    BadRequest(Json<ErrorBody>),
    /// Missing, unknown or revoked API key.
    #[oai(status = 401)]
    Unauthorized(Json<ErrorBody>),
    /// The newsletter is not on the paid tier.
    #[oai(status = 402)]
    PaymentRequired(Json<ErrorBody>),
    /// The key lacks the permission, or the newsletter is cancelled (read-only).
    #[oai(status = 403)]
    Forbidden(Json<ErrorBody>),
    /// No such resource for this key's newsletter.
    #[oai(status = 404)]
    NotFound(Json<ErrorBody>),
    /// The path exists but not with this method.
    #[oai(status = 405)]
    MethodNotAllowed(Json<ErrorBody>),
    /// The body is larger than 2 MiB.
    #[oai(status = 413)]
    PayloadTooLarge(Json<ErrorBody>),
    /// Validation failed, or a rule refuses the request in the current state.
    #[oai(status = 422)]
    Unprocessable(Json<ErrorBody>),
    /// Past the hourly limit of this key's bucket; see `Retry-After`.
    #[oai(status = 429)]
    RateLimited(Json<ErrorBody>),
    /// An unexpected server failure.
    #[oai(status = 500)]
    Internal(Json<ErrorBody>),
    /// The server's disk is full: nothing was saved. Try again later; see `Retry-After`.
    #[oai(status = 507)]
    InsufficientStorage(Json<ErrorBody>),
}

/// Seconds a client is asked to wait after a 507: freeing disk space takes an operator.
pub const DISK_FULL_RETRY_AFTER: u32 = 60;

fn body(code: &str, message: impl Into<String>, fields: Option<&FieldErrors>) -> Json<ErrorBody> {
    Json(ErrorBody {
        error: ErrorDetail {
            code: code.to_string(),
            message: message.into(),
            details: fields.map(FieldErrors::by_field).unwrap_or_default(),
        },
        errors: fields.map(FieldErrors::sentences),
    })
}

impl ApiError {
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::Unauthorized(body("unauthorized", message, None))
    }
    pub fn forbidden(code: &str, message: impl Into<String>) -> Self {
        ApiError::Forbidden(body(code, message, None))
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::NotFound(body("not_found", message, None))
    }
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        ApiError::BadRequest(body(code, message, None))
    }
    pub fn validation(fields: &FieldErrors) -> Self {
        ApiError::Unprocessable(body("validation_error", "Validation failed", Some(fields)))
    }
    pub fn rate_limited(message: impl Into<String>) -> Self {
        ApiError::RateLimited(body("rate_limited", message, None))
    }
    pub fn payload_too_large() -> Self {
        ApiError::PayloadTooLarge(body(
            "payload_too_large",
            "The request body is larger than 2 MiB",
            None,
        ))
    }
    /// 413 with a limit other than the API's own, named in `message`.
    pub fn too_large(message: impl Into<String>) -> Self {
        ApiError::PayloadTooLarge(body("payload_too_large", message, None))
    }
    /// 422 with its own code, for a body that is well-formed but cannot be used.
    pub fn unprocessable(code: &str, message: impl Into<String>) -> Self {
        ApiError::Unprocessable(body(code, message, None))
    }
    pub fn disk_full() -> Self {
        ApiError::InsufficientStorage(body(
            "disk_full",
            "The server's disk is full, so nothing was saved. Try again once the operator has freed some space.",
            None,
        ))
    }
    pub fn internal() -> Self {
        ApiError::Internal(body(
            "internal_error",
            "The server could not finish this request",
            None,
        ))
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        match e {
            DomainError::Invalid(code, fields) => {
                let message = match code {
                    ErrorCode::InvalidEmail => "Email is invalid".to_string(),
                    _ => fields.sentences().join("; "),
                };
                ApiError::Unprocessable(body(code.as_str(), message, Some(&fields)))
            }
            DomainError::Rejected(ErrorCode::PaymentRequired, message) => {
                ApiError::PaymentRequired(body("payment_required", message, None))
            }
            DomainError::Rejected(ErrorCode::NewsletterCancelled, message) => {
                ApiError::Forbidden(body("newsletter_cancelled", message, None))
            }
            DomainError::Rejected(code, message) => {
                ApiError::Unprocessable(body(code.as_str(), message, None))
            }
            DomainError::NotFound(what) => {
                ApiError::not_found(format!("{} not found", capitalise(what)))
            }
            DomainError::Unauthorized(message) => ApiError::unauthorized(message),
            DomainError::Forbidden(message) => ApiError::forbidden("forbidden", message),
            DomainError::RateLimited(window) => ApiError::rate_limited(format!(
                "Rate limit of {} requests per hour reached; try again in {} seconds",
                window.limit, window.retry_after
            )),
            DomainError::Store(e) if e.is_disk_full() => {
                eprintln!("api: the disk is full, a write was refused: {e}");
                ApiError::disk_full()
            }
            DomainError::Store(e) => {
                eprintln!("api: internal error: {e}");
                ApiError::internal()
            }
        }
    }
}

/// Adds `Retry-After` to a 507, wherever in the API it was answered.
pub fn retry_hint(response: &mut Response) {
    if response.status() == StatusCode::INSUFFICIENT_STORAGE {
        response
            .headers_mut()
            .insert("Retry-After", DISK_FULL_RETRY_AFTER.into());
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Turns any error that escaped a handler (poem's routing, poem-openapi's parsing) into the
/// contract's JSON body; errors that already carry a response pass through. The guard has
/// already answered malformed JSON with 400, so a payload that fails to parse here is
/// well-formed JSON of the wrong shape: a 422.
pub fn into_json_response(err: poem::Error) -> Response {
    use poem_openapi::error::{ParseParamError, ParsePathError, ParseRequestPayloadError};
    if err.is_from_response() {
        return err.into_response();
    }
    let message = err.to_string();
    let error = if let Some(e) = err.downcast_ref::<ParseRequestPayloadError>() {
        let explained = body_errors::explain(&e.reason, None);
        ApiError::validation(&FieldErrors::single(&explained.field, explained.message))
    } else if let Some(e) = err.downcast_ref::<ParseParamError>() {
        let explained = body_errors::explain(&e.reason, Some(e.name));
        ApiError::validation(&FieldErrors::single(&explained.field, explained.message))
    } else if err.downcast_ref::<ParsePathError>().is_some() {
        ApiError::not_found("No such resource")
    } else {
        match err.status() {
            StatusCode::NOT_FOUND => ApiError::not_found("No such API endpoint"),
            StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed(body(
                "method_not_allowed",
                "This endpoint does not accept that method",
                None,
            )),
            StatusCode::UNAUTHORIZED => ApiError::unauthorized("Missing or invalid API key"),
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::payload_too_large(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ApiError::bad_request("invalid_json", "Send the body as application/json")
            }
            s if s.is_client_error() => ApiError::validation(&FieldErrors::single("base", message)),
            _ => {
                eprintln!("api: unhandled error: {message}");
                ApiError::internal()
            }
        }
    };
    error.into_response()
}
