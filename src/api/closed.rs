//! Closed request bodies: every object a request body may hold states
//! `additionalProperties: false` in the OpenAPI document, and a field the document does not
//! name there is refused with 422 `validation_error` whose `details` name each one. A client's
//! typo (`"subjet"`), or a wrapper the operation does not take (`{"newsletter": {...}}` on
//! `PATCH /newsletter`), is never a silent success.
//!
//! The document is the one source of both halves: [`Closed`] marks the request schemas while
//! the document is made, and [`unknown_fields`] reads those marks back to check a body, so
//! what the document states and what the server refuses cannot part. poem-openapi's
//! `#[oai(deny_unknown_fields)]` is not used: it states nothing in the schema (its
//! `additionalProperties` stays unset) and names only the first unknown field.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::LazyLock;

use poem::endpoint::BoxEndpoint;
use poem::http::Method;
use poem_openapi::OpenApi;
use poem_openapi::registry::{MetaApi, MetaSchema, MetaSchemaRef, Registry};
use regex::Regex;
use serde_json::Value;

use crate::domain::FieldErrors;

/// poem-openapi's schema type cannot say `additionalProperties: false` (its
/// `additionalProperties` is a schema, never a boolean), so a closed object's is written as a
/// schema of this made-up type, which [`finish`] replaces by `false` in the printed document.
const PLACEHOLDER: &str = "x-broadsheet-closed";

/// At most this many unknown fields are named in one answer; the rest are counted.
const NAMED_AT_MOST: usize = 20;

/// The operations of `A`, with every object schema their request bodies reach closed.
pub struct Closed<A>(pub A);

impl<A: OpenApi> OpenApi for Closed<A> {
    fn meta() -> Vec<MetaApi> {
        // Request schemas written inline in an operation live here, not in the registry.
        let mut apis = A::meta();
        let (mut none, mut seen) = (Registry::new(), BTreeSet::new());
        for schema in request_schemas(&mut apis) {
            close(schema, &mut none, &mut seen);
        }
        apis
    }

    fn register(registry: &mut Registry) {
        A::register(registry);
        let mut apis = A::meta();
        let mut seen = BTreeSet::new();
        for schema in request_schemas(&mut apis) {
            close(schema, registry, &mut seen);
        }
    }

    fn add_routes(self, route_table: &mut HashMap<String, HashMap<Method, BoxEndpoint<'static>>>) {
        self.0.add_routes(route_table);
    }
}

/// The schema of each request body of `apis`.
fn request_schemas(apis: &mut [MetaApi]) -> impl Iterator<Item = &mut MetaSchemaRef> {
    apis.iter_mut()
        .flat_map(|api| api.paths.iter_mut())
        .flat_map(|path| path.operations.iter_mut())
        .filter_map(|operation| operation.request.as_mut())
        .flat_map(|request| request.content.iter_mut())
        .map(|media| &mut media.schema)
}

/// Closes the object schemas `schema` reaches (components through `registry`, once each).
fn close(schema: &mut MetaSchemaRef, registry: &mut Registry, seen: &mut BTreeSet<String>) {
    match schema {
        MetaSchemaRef::Reference(name) => {
            if !seen.insert(name.clone()) {
                return;
            }
            if let Some(mut component) = registry.schemas.remove(name.as_str()) {
                close_schema(&mut component, registry, seen);
                registry.schemas.insert(name.clone(), component);
            }
        }
        MetaSchemaRef::Inline(inline) => close_schema(inline, registry, seen),
    }
}

fn close_schema(schema: &mut MetaSchema, registry: &mut Registry, seen: &mut BTreeSet<String>) {
    if schema.ty == "object" && !schema.properties.is_empty() {
        schema.additional_properties.get_or_insert_with(|| {
            Box::new(MetaSchemaRef::Inline(Box::new(MetaSchema::new(
                PLACEHOLDER,
            ))))
        });
    }
    for (_, property) in &mut schema.properties {
        close(property, registry, seen);
    }
    if let Some(items) = &mut schema.items {
        close(items, registry, seen);
    }
    for part in schema
        .all_of
        .iter_mut()
        .chain(&mut schema.any_of)
        .chain(&mut schema.one_of)
    {
        close(part, registry, seen);
    }
}

/// `printed` (the document, or the reference page that embeds it) with each closed object's
/// placeholder written as `"additionalProperties": false`.
pub fn finish(printed: &str) -> String {
    static MARK: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&format!(
            r#""additionalProperties":\s*\{{\s*"type":\s*"{PLACEHOLDER}"\s*\}}"#
        ))
        .expect("a valid pattern")
    });
    let finished = MARK.replace_all(printed, r#""additionalProperties": false"#);
    assert!(
        !finished.contains(PLACEHOLDER),
        "a closed object's placeholder was left in the document"
    );
    finished.into_owned()
}

/// The fields of `body` that `schema` (a schema of `document`) does not name where it states
/// `additionalProperties: false`, as `validation_error` details: `newsletter`,
/// `issue.subjet`, `issue.articles[0].note`, each with what to send instead. Empty when there
/// are none. One pass over the body, whatever its size: past [`NAMED_AT_MOST`] unknown fields
/// are only counted.
pub fn unknown_fields(document: &Value, schema: &Value, body: &Value) -> FieldErrors {
    let mut found = Found::default();
    walk(document, schema, body, "", &mut found);
    let mut errors = FieldErrors::new();
    for (at, advice) in &found.named {
        errors.add(at, format!("is not a field of this request: {advice}"));
    }
    if found.more > 0 {
        errors.add(
            "base",
            format!("{} more fields are not fields of this request", found.more),
        );
    }
    errors
}

/// The fields an object's schema names, each with its schema, in name order.
type Properties<'a> = BTreeMap<&'a str, &'a Value>;

/// The unknown fields met so far: the first few by path with advice, the rest counted.
#[derive(Default)]
struct Found {
    named: Vec<(String, String)>,
    more: usize,
}

/// Collects, below `value` at `at`, each field `schema` does not name where it is closed.
/// An object's fields are those of every part of its schema (`parts`); it is closed when
/// one part is.
fn walk(document: &Value, schema: &Value, value: &Value, at: &str, found: &mut Found) {
    let parts = parts(document, schema);
    match value {
        Value::Object(fields) => {
            let mut properties = Properties::new();
            for part in &parts {
                for (name, property) in part["properties"].as_object().into_iter().flatten() {
                    properties.entry(name.as_str()).or_insert(property);
                }
            }
            let closed = parts
                .iter()
                .any(|part| part["additionalProperties"] == Value::Bool(false));
            for (name, field) in fields {
                let path = match at {
                    "" => name.clone(),
                    _ => format!("{at}.{name}"),
                };
                match properties.get(name.as_str()) {
                    Some(property) => walk(document, property, field, &path, found),
                    None if closed && found.named.len() < NAMED_AT_MOST => {
                        let advice = advice(document, &properties, name, field);
                        found.named.push((path, advice));
                    }
                    None if closed => found.more += 1,
                    None => {}
                }
            }
        }
        Value::Array(entries) => {
            for items in parts.iter().filter_map(|part| part.get("items")) {
                for (i, entry) in entries.iter().enumerate() {
                    walk(document, items, entry, &format!("{at}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

/// What to send instead of the unknown field `name` (holding `value`) beside `properties`:
/// the fields without a wrapper this operation does not take, the field inside the wrapper it
/// does take, the known name a typo is near, or else the names known here.
fn advice(document: &Value, properties: &Properties, name: &str, value: &Value) -> String {
    if value
        .as_object()
        .is_some_and(|inner| inner.keys().any(|k| properties.contains_key(k.as_str())))
    {
        return format!("send the fields inside `{name}` without that wrapper");
    }
    let wrapper = properties.iter().find(|(_, property)| {
        parts(document, property)
            .iter()
            .any(|part| part["properties"].get(name).is_some())
    });
    if let Some((wrapper, _)) = wrapper {
        return format!("it goes inside `{wrapper}`");
    }
    let near = properties
        .keys()
        .map(|known| (edit_distance(known, name), known))
        .filter(|(distance, _)| *distance <= 2 && *distance * 2 < name.chars().count())
        .min();
    if let Some((_, known)) = near {
        return format!("did you mean `{known}`?");
    }
    match properties
        .keys()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
    {
        known if known.is_empty() => "this object takes no fields".to_string(),
        known => format!("the fields here are {}", known.join(", ")),
    }
}

/// The Levenshtein distance of `a` and `b`, in characters, letter case aside.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (
        a.to_lowercase().chars().collect(),
        b.to_lowercase().chars().collect(),
    );
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// The schemas a value of `schema` must each satisfy: `schema` with its `$ref`s followed to
/// `#/components/schemas/...` of `document`, and each part of an `allOf` (a nullable
/// reference is `{"nullable": true, "allOf": [{"$ref": ...}, {"description": ...}]}`).
fn parts<'a>(document: &'a Value, schema: &'a Value) -> Vec<&'a Value> {
    let mut schema = schema;
    while let Some(name) = schema["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
    {
        schema = &document["components"]["schemas"][name];
    }
    let mut all = vec![schema];
    for part in schema["allOf"].as_array().into_iter().flatten() {
        all.extend(parts(document, part));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    fn document() -> Value {
        json!({"components": {"schemas": {
            "IssueBody": {"type": "object", "additionalProperties": false,
                "properties": {"issue": {"$ref": "#/components/schemas/IssueFields"}}},
            "IssueFields": {"type": "object", "additionalProperties": false, "properties": {
                "subject": {"type": "string"},
                "articles": {"type": "array", "items": {"$ref": "#/components/schemas/Article"}},
                "audience": {"nullable": true, "allOf": [{"$ref": "#/components/schemas/Audience"},
                    {"description": "Who", "nullable": true}]}
            }},
            "Article": {"type": "object", "additionalProperties": false,
                "properties": {"title": {"type": "string"}}},
            "Audience": {"type": "object", "additionalProperties": false,
                "properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
            "Open": {"type": "object", "properties": {"a": {"type": "string"}}}
        }}})
    }

    fn unknown(schema: &str, body: Value) -> Vec<String> {
        let schema = json!({"$ref": format!("#/components/schemas/{schema}")});
        unknown_fields(&document(), &schema, &body)
            .by_field()
            .into_keys()
            .collect()
    }

    #[test]
    fn every_unknown_field_is_named_by_its_path() {
        let body = json!({"newsletter": {}, "issue": {"subjet": "x", "subject": "y",
            "articles": [{"title": "t"}, {"title": "t", "note": 1}],
            "audience": {"tags": ["a"], "tag": "b"}}});
        assert_eq!(
            unknown("IssueBody", body),
            [
                "issue.articles[1].note",
                "issue.audience.tag",
                "issue.subjet",
                "newsletter"
            ]
        );
        assert!(unknown("IssueBody", json!({"issue": {"subject": "x"}})).is_empty());
        // Values of another type are left to the parser; open objects take anything.
        assert!(unknown("IssueBody", json!({"issue": [1, {"x": 1}]})).is_empty());
        assert!(unknown("Open", json!({"b": 1})).is_empty());
    }

    #[test]
    fn the_advice_names_what_to_send_instead_and_a_long_list_is_cut() {
        let advice = |schema: &str, body: Value| -> Vec<String> {
            let schema = json!({"$ref": format!("#/components/schemas/{schema}")});
            let errors = unknown_fields(&document(), &schema, &body);
            errors.by_field().into_values().flatten().collect()
        };
        let not = "is not a field of this request:";
        assert_eq!(
            advice("IssueFields", json!({"issue": {"subject": "x"}})),
            [format!(
                "{not} send the fields inside `issue` without that wrapper"
            )]
        );
        assert_eq!(
            advice("IssueBody", json!({"subject": "x"})),
            [format!("{not} it goes inside `issue`")]
        );
        assert_eq!(
            advice("IssueFields", json!({"Subjet": "x"})),
            [format!("{not} did you mean `subject`?")]
        );
        assert_eq!(
            advice("Article", json!({"note": "x"})),
            [format!("{not} the fields here are `title`")]
        );
        let many: Map<String, Value> = (0..30).map(|i| (format!("f{i:02}"), json!(i))).collect();
        let schema = json!({"$ref": "#/components/schemas/Article"});
        let errors = unknown_fields(&document(), &schema, &Value::Object(many));
        let by_field = errors.by_field();
        assert_eq!(by_field.len(), NAMED_AT_MOST + 1);
        assert_eq!(
            by_field["base"],
            ["10 more fields are not fields of this request"]
        );
        // One pass, however many there are: 200,000 entries with a stranger each (what a
        // 2 MiB body holds) are counted, not compared with one another.
        let entries: Vec<Value> = (0..200_000)
            .map(|i| json!({"title": "t", "x": i}))
            .collect();
        let schema = json!({"type": "object", "additionalProperties": false, "properties": {
            "articles": {"type": "array", "items": {"$ref": "#/components/schemas/Article"}}}});
        let errors = unknown_fields(&document(), &schema, &json!({ "articles": entries }));
        let by_field = errors.by_field();
        assert_eq!(by_field.len(), NAMED_AT_MOST + 1);
        assert!(by_field.contains_key("articles[19].x"), "{by_field:?}");
        assert_eq!(
            by_field["base"],
            ["199980 more fields are not fields of this request"]
        );
        assert_eq!(edit_distance("subject", "subjet"), 1);
        assert_eq!(edit_distance("tags", "tier"), 3);
    }

    #[test]
    fn the_placeholder_becomes_false() {
        let printed = "{\n  \"additionalProperties\": {\n    \"type\": \"x-broadsheet-closed\"\n  },\n  \"type\": \"object\"\n}";
        let finished: Value = serde_json::from_str(&finish(printed)).unwrap();
        assert_eq!(
            finished,
            json!({"additionalProperties": false, "type": "object"})
        );
    }
}
