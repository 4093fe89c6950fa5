//! Bounce reports from an MTA or e-mail provider: `POST /api/v1/bounces` with an API key, or
//! `POST /bounces/<bounce-token>` for senders that cannot set headers. Either marks the
//! address bounced (and its newest delivery), firing `email.bounced`. The token door also
//! takes a raw DSN or ARF message, whatever `Content-Type` it is declared as (a forwarder
//! piping the message sends its own, `multipart/report`; others `message/rfc822`,
//! `text/plain` or none), read and applied by `tracking::apply_raw_report`, the path
//! `broadsheet bounce` takes too. A body is the JSON report when declared JSON or when it
//! starts with `{`, which no mail message does.

use poem::http::{HeaderMap, Method};
use poem::web::{Data, Json as PoemJson, Path};
use poem::{Body, IntoResponse, Response, handler};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi, Tags};
use serde::Deserialize;

use super::fields::{Email, Field, Text};
use super::statuses::{BODY, BY_ID, GUARD, Refusal, WRITES};
use super::{ApiError, ApiKeyAuth, Principal, State};
use crate::domain::delivery::bounce_report::{MAX_REPORT_BYTES, NotAReport};
use crate::domain::{DomainError, DomainResult, ErrorCode, delivery::tracking, newsletters};

#[derive(Tags)]
enum ApiTags {
    /// Reports of mail that could not be delivered.
    Bounces,
}

/// A hard bounce of one address.
#[derive(Debug, Object, Deserialize)]
#[oai(example)]
pub struct BounceReport {
    pub email: Field<Email>,
    /// The reason the receiving server gave, kept with the delivery (its first 500
    /// characters).
    #[oai(nullable)]
    pub reason: Option<Text>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct BounceResult {
    pub message: String,
}

#[derive(ApiResponse)]
pub enum BounceResponse {
    #[oai(status = 200)]
    Ok(Json<BounceResult>),
}

fn reason_of(report: &BounceReport) -> String {
    report
        .reason
        .as_deref()
        .unwrap_or("reported bounce")
        .chars()
        .take(500)
        .collect()
}

pub struct BouncesApi;

#[OpenApi(tag = "ApiTags::Bounces")]
impl BouncesApi {
    /// Reports a hard bounce of one address.
    ///
    /// Marks the subscriber bounced (and its newest delivery), so it gets no more mail, and fires
    /// `email.bounced`. An address that is not a subscriber of this newsletter is 404.
    #[oai(path = "/bounces", method = "post", operation_id = "reportBounce")]
    async fn report(
        &self,
        _auth: ApiKeyAuth,
        body: Json<BounceReport>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<BounceResponse, Refusal<{ GUARD | BODY | BY_ID | WRITES }>> {
        let (nid, report) = (p.newsletter_id, body.0);
        let reason = reason_of(&report);
        state
            .db
            .run(move |conn| tracking::report_bounce(conn, nid, &report.email, &reason))
            .await?;
        Ok(BounceResponse::Ok(Json(BounceResult {
            message: "Bounce recorded".into(),
        })))
    }
}

/// The declared `Content-Type`, as sent (a boundary is case-sensitive), and its media type in
/// lower case; both empty when none was declared.
fn declared_type(headers: &HeaderMap) -> (String, String) {
    let declared = headers
        .get(poem::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim()
        .to_string();
    let media = declared
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    (declared, media)
}

/// Whether a posted body is the JSON report rather than a mail message: declared JSON, or,
/// whatever was declared, starting with `{` (a mail message starts with a header field).
fn is_json(media: &str, body: &[u8]) -> bool {
    media == "application/json"
        || media.ends_with("+json")
        || body.trim_ascii_start().starts_with(b"{")
}

/// The posted mail message as a whole message. A forwarder may send a report's MIME body with
/// the report's own `Content-Type: multipart/report; boundary=...` as the request's, its
/// header fields left behind: that type is then put back in front, as the message's header.
fn as_message(declared: &str, media: &str, body: Vec<u8>) -> Vec<u8> {
    let first_line = body.split(|b| *b == b'\n').next().unwrap_or_default();
    let starts_with_field = first_line
        .iter()
        .position(|b| *b == b':')
        .is_some_and(|colon| colon > 0 && first_line[..colon].iter().all(|b| b.is_ascii_graphic()));
    if !media.starts_with("multipart/") || starts_with_field {
        return body;
    }
    let mut whole = format!("MIME-Version: 1.0\r\nContent-Type: {declared}\r\n\r\n").into_bytes();
    whole.extend_from_slice(&body);
    whole
}

/// `POST /bounces/<token>`: the same report as `POST /api/v1/bounces`, authenticated by the
/// newsletter's bounce token, as JSON; or a raw DSN or ARF message, whatever its declared type
/// (`message/rfc822`, `multipart/report`, `text/plain`, another, or none). The token is
/// checked before the body is read: a stranger's upload is never read (the server answers 401
/// at once and closes the connection).
#[handler]
pub async fn report_with_token(
    Path(token): Path<String>,
    headers: &HeaderMap,
    body: Body,
    Data(state): Data<&State>,
) -> Response {
    let newsletter = run(state, move |conn| {
        newsletters::get_by_bounce_token(conn, &token)
            .map(|newsletter| newsletter.id)
            .map_err(|_| DomainError::Unauthorized("Unknown bounce token".into()))
    })
    .await;
    let newsletter_id = match newsletter {
        Ok(id) => id,
        Err(response) => return response,
    };
    let Ok(posted) = body.into_bytes_limit(MAX_REPORT_BYTES).await else {
        return ApiError::too_large(NotAReport::TooLarge(MAX_REPORT_BYTES + 1).to_string())
            .into_response();
    };
    let (declared, media) = declared_type(headers);
    if !is_json(&media, &posted) {
        return raw_report(
            newsletter_id,
            as_message(&declared, &media, posted.to_vec()),
            state,
        )
        .await;
    }
    let invalid_json = || {
        ApiError::bad_request(
            "invalid_json",
            "Send {\"email\": \"...\", \"reason\": \"...\"} as JSON, or a raw DSN/ARF message (the whole message) as the body",
        )
        .into_response()
    };
    let Ok(sent) = serde_json::from_slice::<serde_json::Value>(&posted) else {
        return invalid_json();
    };
    // The fields `POST /api/v1/bounces` does not name are refused, as there (`closed.rs`).
    let unknown = super::unknown_fields(&Method::POST, "/bounces", &sent);
    if !unknown.is_empty() {
        return ApiError::from(DomainError::Invalid(ErrorCode::ValidationError, unknown))
            .into_response();
    }
    let Ok(report) = serde_json::from_value::<BounceReport>(sent) else {
        return invalid_json();
    };
    let reason = reason_of(&report);
    let outcome = run(state, move |conn| {
        tracking::report_bounce(conn, newsletter_id, &report.email, &reason)
    })
    .await;
    match outcome {
        Ok(()) => PoemJson(serde_json::json!({"message": "Bounce recorded"})).into_response(),
        Err(response) => response,
    }
}

/// Runs `apply` on the database; an error is already the door's response.
async fn run<T: Send + 'static>(
    state: &State,
    apply: impl FnOnce(&mut rusqlite::Connection) -> DomainResult<T> + Send + 'static,
) -> Result<T, Response> {
    state.db.run(apply).await.map_err(|e| {
        let mut response = ApiError::from(e).into_response();
        super::error::retry_hint(&mut response);
        response
    })
}

/// A raw DSN or ARF message for the newsletter the token named: 200 with what was applied,
/// 422 `not_a_report` (logged, nothing stored). Past [`MAX_REPORT_BYTES`] the door has
/// answered 413 already.
async fn raw_report(newsletter_id: i64, raw: Vec<u8>, state: &State) -> Response {
    // The message is read on the database's blocking thread: the async threads never parse
    // a megabyte of MIME.
    let outcome = run(state, move |conn| {
        tracking::apply_raw_report(conn, tracking::ReportAbout::Newsletter(newsletter_id), &raw)
    })
    .await;
    match outcome {
        Ok(Err(why)) => {
            eprintln!("bounces: a message posted to /bounces was ignored: {why}");
            ApiError::unprocessable("not_a_report", why.to_string()).into_response()
        }
        Ok(Ok(applied)) => PoemJson(serde_json::json!({
            "message": "Report applied",
            "bounced": applied.bounced,
            "soft_bounced": applied.soft,
            "complained": applied.complained,
            "unknown": applied.unknown,
        }))
        .into_response(),
        Err(response) => response,
    }
}
