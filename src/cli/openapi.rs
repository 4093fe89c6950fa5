//! `broadsheet openapi`: prints the OpenAPI document the server serves at
//! `/api/v1/openapi.json`.

use super::Failure;

pub(super) fn run() -> Result<(), Failure> {
    println!("{}", crate::api::openapi_document());
    Ok(())
}
