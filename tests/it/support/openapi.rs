//! Reading the OpenAPI document the server serves.

use serde_json::Value;

/// Follows `$ref`s to `#/components/schemas/...` until a schema that is not a reference; a
/// reference elsewhere, or to a schema the document lacks, fails the test.
pub fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    let mut s = schema;
    while let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected $ref {r}"));
        s = &doc["components"]["schemas"][name];
        assert!(!s.is_null(), "dangling $ref {r}");
    }
    s
}
