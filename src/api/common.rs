//! Pieces shared by the list endpoints.

use poem_openapi::Object;

use super::ApiError;
use crate::domain::values::pagination::Page;

/// `meta` of every list answer.
#[derive(Debug, Object)]
pub struct ListMeta {
    pub page: u32,
    pub per_page: u32,
    /// Whether a next page exists.
    pub has_more: bool,
}

impl ListMeta {
    pub fn new(page: Page, has_more: bool) -> Self {
        ListMeta {
            page: page.page,
            per_page: page.per_page,
            has_more,
        }
    }
}

/// Path ids that are not numbers name nothing: 404.
pub fn parse_id(raw: &str) -> Result<i64, ApiError> {
    raw.trim()
        .parse()
        .map_err(|_| ApiError::not_found("No such resource"))
}
