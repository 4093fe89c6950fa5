//! Pieces shared by the list endpoints.

use std::borrow::Cow;

use poem_openapi::Object;
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::{ParseError, ParseFromJSON, ParseResult, ToJSON, Type};
use serde_json::Value;

use super::ApiError;
use crate::domain::pagination::Page;

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

/// A JSON string and only a string in request bodies: poem-openapi's `String` also accepts
/// numbers and booleans (turning `12` into `"12"`), where the contract wants a 422.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text(pub String);

impl Type for Text {
    const IS_REQUIRED: bool = true;
    type RawValueType = String;
    type RawElementValueType = String;

    fn name() -> Cow<'static, str> {
        "string".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema::new("string")))
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        Some(&self.0)
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        Box::new(std::iter::once(&self.0))
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl ParseFromJSON for Text {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value.unwrap_or_default() {
            Value::String(text) => Ok(Text(text)),
            other => Err(ParseError::expected_type(other)),
        }
    }
}

impl ToJSON for Text {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.0.clone()))
    }
}

impl From<Text> for String {
    fn from(text: Text) -> String {
        text.0
    }
}
