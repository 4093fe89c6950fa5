//! Which error statuses each operation can answer. Every operation fails with [`ApiError`],
//! but the OpenAPI document lists, per operation, only the statuses it can really return:
//! an operation's error type is [`Refusal`]`<{ ... }>`, whose set of classes filters
//! `ApiError`'s responses when the document is generated. The classes say why a status can
//! occur, so the set reads as the operation's story (`tests/it/api_contract.rs` provokes each
//! class on every operation and checks the status is listed).

use poem::{IntoResponse, Response};
use poem_openapi::ApiResponse;
use poem_openapi::registry::{MetaResponses, Registry};

use super::ApiError;
use crate::domain::DomainError;

/// The statuses `ApiError` has, in order; a class is a set of them, one bit each.
const STATUSES: [u16; 11] = [400, 401, 402, 403, 404, 405, 413, 422, 429, 500, 507];

const fn bit(status: u16) -> u32 {
    let mut i = 0;
    while i < STATUSES.len() {
        if STATUSES[i] == status {
            return 1 << i;
        }
        i += 1;
    }
    0
}

/// The guard, in front of every operation: no or a bad key (401), a key without the
/// permission or a cancelled newsletter on writes (403), past the hourly limit (429), and an
/// unexpected failure (500).
pub const GUARD: u32 = bit(401) | bit(403) | bit(429) | bit(500);
/// Operations with a request body: malformed JSON (400), over 2 MiB (413), JSON of the wrong
/// shape or values the domain refuses (422).
pub const BODY: u32 = bit(400) | bit(413) | bit(422);
/// A query parameter or a state rule can refuse the request (422).
pub const RULE: u32 = bit(422);
/// An id in the path: unknown, not a number, or another newsletter's (404).
pub const BY_ID: u32 = bit(404);
/// Sending mail needs the paid tier (402).
pub const PAID: u32 = bit(402);
/// The operation writes: a full disk refuses it (507).
pub const WRITES: u32 = bit(507);

/// An operation's error: any [`ApiError`], documented as the statuses of `CLASSES` only.
pub struct Refusal<const CLASSES: u32>(pub ApiError);

impl<const CLASSES: u32> Refusal<CLASSES> {
    /// Whether this operation documents `status`.
    pub fn documents(status: u16) -> bool {
        CLASSES & bit(status) != 0
    }
}

impl<const CLASSES: u32> ApiResponse for Refusal<CLASSES> {
    fn meta() -> MetaResponses {
        let mut meta = ApiError::meta();
        meta.responses
            .retain(|r| r.status.is_some_and(Self::documents));
        meta
    }

    fn register(registry: &mut Registry) {
        ApiError::register(registry);
    }
}

impl<const CLASSES: u32> IntoResponse for Refusal<CLASSES> {
    fn into_response(self) -> Response {
        let response = self.0.into_response();
        let status = response.status().as_u16();
        if !Self::documents(status) {
            // A status the document does not list for this operation: the list is wrong.
            eprintln!("api: undocumented status {status} answered by an operation");
        }
        response
    }
}

impl<const CLASSES: u32> From<Refusal<CLASSES>> for poem::Error {
    fn from(refusal: Refusal<CLASSES>) -> poem::Error {
        poem::Error::from_response(refusal.into_response())
    }
}

impl<const CLASSES: u32> From<ApiError> for Refusal<CLASSES> {
    fn from(e: ApiError) -> Self {
        Refusal(e)
    }
}

impl<const CLASSES: u32> From<DomainError> for Refusal<CLASSES> {
    fn from(e: DomainError) -> Self {
        Refusal(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_documents_only_its_classes() {
        type Read = Refusal<{ GUARD | BY_ID }>;
        let listed: Vec<u16> = Read::meta()
            .responses
            .iter()
            .filter_map(|r| r.status)
            .collect();
        assert_eq!(listed, [401, 403, 404, 429, 500]);
        assert!(STATUSES.iter().all(|s| bit(*s) != 0));
    }
}
