//! Bounce reports from an MTA or e-mail provider: `POST /api/v1/bounces` with an API key, or
//! `POST /bounces/<bounce-token>` for senders that cannot set headers. Either marks the
//! address bounced (and its newest delivery), firing `email.bounced`.

use poem::web::{Data, Json as PoemJson, Path};
use poem::{Body, IntoResponse, Response, handler};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi, Tags};
use serde::Deserialize;

use super::{ApiError, ApiKeyAuth, Principal, State};
use crate::domain::{DomainError, newsletters, tracking};

#[derive(Tags)]
enum ApiTags {
    /// Reports of mail that could not be delivered.
    Bounces,
}

/// A hard bounce of one address.
#[derive(Debug, Object, Deserialize)]
pub struct BounceReport {
    pub email: String,
    /// The reason the receiving server gave, kept with the delivery.
    pub reason: Option<String>,
}

#[derive(Debug, Object)]
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
        .clone()
        .unwrap_or_else(|| "reported bounce".into())
        .chars()
        .take(500)
        .collect()
}

pub struct BouncesApi;

#[OpenApi(tag = "ApiTags::Bounces")]
impl BouncesApi {
    /// Marks an address as bounced: it gets no more mail.
    #[oai(path = "/bounces", method = "post", operation_id = "reportBounce")]
    async fn report(
        &self,
        _auth: ApiKeyAuth,
        body: Json<BounceReport>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<BounceResponse, ApiError> {
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

/// `POST /bounces/<token>`: the same report, authenticated by the newsletter's bounce token.
#[handler]
pub async fn report_with_token(
    Path(token): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> Response {
    let report: BounceReport = match body
        .into_bytes_limit(64 * 1024)
        .await
        .map(|b| serde_json::from_slice(&b))
    {
        Ok(Ok(report)) => report,
        _ => {
            return ApiError::bad_request(
                "invalid_json",
                "Send {\"email\": \"...\", \"reason\": \"...\"} as JSON",
            )
            .into_response();
        }
    };
    let reason = reason_of(&report);
    let outcome = state
        .db
        .run(move |conn| {
            let newsletter = newsletters::get_by_bounce_token(conn, &token)
                .map_err(|_| DomainError::Unauthorized("Unknown bounce token".into()))?;
            tracking::report_bounce(conn, newsletter.id, &report.email, &reason)
        })
        .await;
    match outcome {
        Ok(()) => PoemJson(serde_json::json!({"message": "Bounce recorded"})).into_response(),
        Err(e) => {
            let mut response = ApiError::from(e).into_response();
            super::error::retry_hint(&mut response);
            response
        }
    }
}
