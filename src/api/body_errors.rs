//! poem-openapi's reasons for refusing a request body or parameter, such as
//! `Expected input type "IssueFields", found null. (occurred while parsing "IssueBody")`, said in
//! the API's words: which field (as far as the reason tells) and what JSON it needs. Users of
//! the API see the document's field names, never the Rust types behind the schemas.
//!
//! poem-openapi gives its reasons only as English text, so this reads that text: its
//! wordings are pinned by `poem_openapi_wordings` below, which asks poem-openapi itself,
//! and Cargo.toml pins the version; an upgrade that rewords a reason fails that test.

use std::sync::OnceLock;

use serde_json::{Map, Value};

/// The field a refusal is about (`"body"` when it is the whole body or cannot be told) and
/// what it needs.
pub struct Explained {
    pub field: String,
    pub message: String,
}

/// Explains `reason`, a parse failure of the request body, or of the parameter `param`.
pub fn explain(reason: &str, param: Option<&str>) -> Explained {
    let outer = param.unwrap_or("body");
    let Some(failure) = TypeMismatch::parse(reason) else {
        return Explained {
            field: outer.to_string(),
            message: without_type_names(reason),
        };
    };
    let schemas = schemas();
    let (path, ambiguous) = field_path(schemas, &failure.parents, &failure.expected);
    let needs = describe(schemas, &failure.expected);
    let found = shorten(failure.found);
    let field = if path.is_empty() {
        outer.to_string()
    } else {
        path.join(".")
    };
    let message = match (failure.found, ambiguous.is_empty()) {
        ("null", true) => format!("is required: {needs}"),
        ("null", false) => format!("needs {ambiguous}: {needs}"),
        (_, true) => format!("must be {needs} (found {found})"),
        (_, false) => format!("needs {ambiguous} to be {needs} (found {found})"),
    };
    Explained { field, message }
}

/// `Expected input type "T", found V.` followed by ` (occurred while parsing "P")` once per
/// enclosing object, innermost first.
struct TypeMismatch<'a> {
    expected: String,
    found: &'a str,
    /// Enclosing schemas, outermost first.
    parents: Vec<String>,
}

impl<'a> TypeMismatch<'a> {
    fn parse(reason: &'a str) -> Option<Self> {
        let rest = reason.strip_prefix("Expected input type \"")?;
        let (expected, rest) = rest.split_once("\", found ")?;
        let (found, mut rest) = match rest.find(". (occurred while parsing \"") {
            Some(at) => (&rest[..at], &rest[at + 1..]),
            None => (rest.strip_suffix('.').unwrap_or(rest), ""),
        };
        let expected = schema_name(expected);
        let mut parents: Vec<String> = Vec::new();
        while let Some(next) = rest.strip_prefix(" (occurred while parsing \"") {
            let (parent, after) = next.split_once("\")")?;
            let parent = schema_name(parent);
            // `Option<T>` is parsed as a wrapper of T: the same value, no step of its own.
            let inner = parents.last().unwrap_or(&expected);
            if parent != *inner {
                parents.push(parent);
            }
            rest = after;
        }
        parents.reverse();
        Some(TypeMismatch {
            expected,
            found,
            parents,
        })
    }
}

/// poem-openapi's name of a type in its parse errors as the name its schema has in the
/// document: `optional_T` is T, `list_T` is `[T]`.
fn schema_name(name: &str) -> String {
    let mut name = name;
    while let Some(inner) = name.strip_prefix("optional_") {
        name = inner;
    }
    match name.strip_prefix("list_") {
        Some(element) => format!("[{}]", schema_name(element)),
        None => name.to_string(),
    }
}

/// The components' schemas of the API's own OpenAPI document, read once.
fn schemas() -> &'static Map<String, Value> {
    static SCHEMAS: OnceLock<Map<String, Value>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        serde_json::from_str::<Value>(&super::openapi_document())
            .ok()
            .and_then(|doc| doc["components"]["schemas"].as_object().cloned())
            .unwrap_or_default()
    })
}

/// The property names leading from the outermost schema through `parents` to `expected`;
/// where the last step fits several properties, the path stops before it and the candidates
/// come back as "a, b or c".
fn field_path(
    schemas: &Map<String, Value>,
    parents: &[String],
    expected: &str,
) -> (Vec<String>, String) {
    let mut path: Vec<String> = Vec::new();
    for (i, parent) in parents.iter().enumerate() {
        let child = parents.get(i + 1).map_or(expected, String::as_str);
        if *parent == format!("[{child}]") {
            // An element of the list the path has reached.
            match path.last_mut() {
                Some(last) => last.push_str("[]"),
                None => path.push("body[]".to_string()),
            }
            continue;
        }
        let candidates: Vec<&String> = schemas
            .get(parent.as_str())
            .and_then(|s| s["properties"].as_object())
            .into_iter()
            .flatten()
            .filter(|(_, property)| type_name(property) == child)
            .map(|(name, _)| name)
            .collect();
        match candidates.as_slice() {
            [one] => path.push((*one).clone()),
            [] => break,
            several => {
                let names: Vec<String> = several.iter().map(|n| format!("`{n}`")).collect();
                return (path, either(&names));
            }
        }
    }
    (path, String::new())
}

/// The poem-openapi type name a property's schema stands for: a component's name, a primitive
/// with its format (`integer(int64)`), or `[T]` for a list.
fn type_name(schema: &Value) -> String {
    if let Some(reference) = schema["$ref"].as_str() {
        return reference.rsplit('/').next().unwrap_or_default().to_string();
    }
    if let Some(all_of) = schema["allOf"].as_array().and_then(|a| a.first()) {
        return type_name(all_of);
    }
    match (schema["type"].as_str(), schema["format"].as_str()) {
        (Some("array"), _) => format!("[{}]", type_name(&schema["items"])),
        (Some(kind), Some(format)) => format!("{kind}({format})"),
        (Some(kind), None) => kind.to_string(),
        (None, _) => String::new(),
    }
}

/// What a value of poem-openapi type `name` is, in JSON terms.
fn describe(schemas: &Map<String, Value>, name: &str) -> String {
    if let Some(inner) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        return format!("a list of {}", plural(&describe(schemas, inner)));
    }
    if let Some(schema) = schemas.get(name) {
        if let Some(values) = schema["enum"].as_array() {
            let names: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            return format!("one of {}", either(&names));
        }
        return "a JSON object".to_string();
    }
    let base = name.split('(').next().unwrap_or(name);
    match base {
        "string" => "a string",
        "integer" => "a whole number",
        "number" => "a number",
        "boolean" => "true or false",
        "object" => "a JSON object",
        _ => "a value of another type",
    }
    .to_string()
}

/// "a string" -> "strings", "a JSON object" -> "JSON objects".
fn plural(described: &str) -> String {
    let bare = described
        .strip_prefix("a ")
        .or_else(|| described.strip_prefix("an "))
        .unwrap_or(described);
    if bare.starts_with("one of") || bare.starts_with("list of") || bare.contains(" or ") {
        return format!("values each {described}");
    }
    format!("{bare}s")
}

/// "a", "a or b", "a, b or c".
fn either(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// The value a client sent, as the reason quotes it, cut to a readable length.
fn shorten(found: &str) -> String {
    const MAX: usize = 40;
    match found.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &found[..at]),
        None => found.to_string(),
    }
}

/// A reason of another form (a validator's), with poem-openapi's `failed to parse "T": `
/// prefixes taken off.
fn without_type_names(reason: &str) -> String {
    let mut rest = reason;
    while let Some(after) = rest.strip_prefix("failed to parse \"") {
        match after.split_once("\": ") {
            Some((_, tail)) => rest = tail,
            None => break,
        }
    }
    rest.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> Map<String, Value> {
        json!({
            "IssueBody": {"type": "object", "properties": {"issue": {"$ref": "#/components/schemas/IssueFields"}}},
            "IssueFields": {"type": "object", "properties": {
                "subject": {"type": "string"},
                "content_markdown": {"type": "string"},
                "articles": {"type": "array", "items": {"$ref": "#/components/schemas/Article"}},
                "status": {"$ref": "#/components/schemas/State"}
            }},
            "State": {"type": "string", "enum": ["active", "paused"]},
            "Article": {"type": "object", "properties": {"title": {"type": "string"}}}
        })
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn a_reason_names_the_field_it_can_and_the_json_it_needs() {
        let s = schemas();
        let failure = TypeMismatch::parse(
            "Expected input type \"IssueFields\", found null. (occurred while parsing \"IssueBody\")",
        )
        .unwrap();
        assert_eq!(failure.parents, ["IssueBody"]);
        assert_eq!(
            field_path(&s, &failure.parents, &failure.expected),
            (vec!["issue".to_string()], String::new())
        );
        let nested = TypeMismatch::parse(
            "Expected input type \"string\", found [1]. (occurred while parsing \"optional_string\") \
             (occurred while parsing \"IssueFields\") (occurred while parsing \"IssueBody\")",
        )
        .unwrap();
        assert_eq!(nested.parents, ["IssueBody", "IssueFields"]);
        let in_list = TypeMismatch::parse(
            "Expected input type \"Article\", found 1. (occurred while parsing \"list_Article\") \
             (occurred while parsing \"IssueFields\") (occurred while parsing \"IssueBody\")",
        )
        .unwrap();
        assert_eq!(
            field_path(&s, &in_list.parents, &in_list.expected).0,
            ["issue", "articles[]"]
        );
        let (path, ambiguous) = field_path(&s, &nested.parents, &nested.expected);
        assert_eq!(path, ["issue"]);
        assert_eq!(ambiguous, "`content_markdown` or `subject`");
        assert_eq!(describe(&s, "State"), "one of \"active\" or \"paused\"");
        assert_eq!(describe(&s, "[Article]"), "a list of JSON objects");
        assert_eq!(describe(&s, "integer(int64)"), "a whole number");
        assert_eq!(describe(&s, "[string]"), "a list of strings");
    }

    #[test]
    fn other_reasons_lose_the_type_prefixes() {
        assert_eq!(
            without_type_names("failed to parse \"string\": the length must be at most 5"),
            "the length must be at most 5"
        );
        assert_eq!(shorten(&"x".repeat(100)).chars().count(), 41);
    }
}

/// The wordings of poem-openapi's reasons that [`explain`] reads, produced by poem-openapi
/// itself: its derived objects, its option and list wrappers, its parameter parsing. When an
/// upgrade of poem-openapi (pinned in Cargo.toml for this reason) changes one, this fails
/// and says which; the reading above is then changed to the new words.
#[cfg(test)]
mod poem_openapi_wordings {
    use poem_openapi::Object;
    use poem_openapi::types::{ParseError, ParseFromJSON, ParseFromParameter, Type};
    use serde_json::{Value, json};

    use super::{TypeMismatch, without_type_names};

    #[derive(Object)]
    struct PinBody {
        issue: PinFields,
    }

    #[derive(Object)]
    struct PinFields {
        subject: Option<String>,
        articles: Option<Vec<PinArticle>>,
    }

    #[derive(Object)]
    struct PinArticle {
        title: String,
    }

    fn reason(body: Value) -> String {
        match PinBody::parse_from_json(Some(body)) {
            Ok(_) => panic!("poem-openapi took a body of the wrong shape"),
            Err(e) => e.into_message(),
        }
    }

    #[test]
    fn a_missing_object_is_a_null_found_inside_its_parent() {
        let text = reason(json!({}));
        assert_eq!(
            text,
            r#"Expected input type "PinFields", found null. (occurred while parsing "PinBody")"#
        );
        let read = TypeMismatch::parse(&text).expect("read");
        assert_eq!(
            (read.expected.as_str(), read.found, read.parents),
            ("PinFields", "null", vec!["PinBody".to_string()])
        );
    }

    #[test]
    fn a_wrong_value_names_each_enclosing_type_innermost_first() {
        let text = reason(json!({"issue": {"subject": [1]}}));
        assert_eq!(
            text,
            r#"Expected input type "string", found [1]. (occurred while parsing "optional_string") (occurred while parsing "PinFields") (occurred while parsing "PinBody")"#
        );
        let read = TypeMismatch::parse(&text).expect("read");
        assert_eq!(
            (read.expected.as_str(), read.found, read.parents),
            (
                "string",
                "[1]",
                vec!["PinBody".to_string(), "PinFields".to_string()]
            )
        );
    }

    #[test]
    fn a_list_element_names_the_list_and_its_option() {
        let text = reason(json!({"issue": {"articles": [1]}}));
        assert_eq!(
            text,
            r#"Expected input type "PinArticle", found 1. (occurred while parsing "list_PinArticle") (occurred while parsing "optional_list_PinArticle") (occurred while parsing "PinFields") (occurred while parsing "PinBody")"#
        );
        let read = TypeMismatch::parse(&text).expect("read");
        assert_eq!(
            read.parents,
            ["PinBody", "PinFields", "[PinArticle]"].map(String::from)
        );
    }

    #[test]
    fn wrappers_and_primitives_keep_their_names() {
        assert_eq!(<Option<String>>::name(), "optional_string");
        assert_eq!(<Vec<PinArticle>>::name(), "list_PinArticle");
        assert_eq!(<Option<Vec<bool>>>::name(), "optional_list_boolean");
        assert_eq!(String::name(), "string");
        assert_eq!(bool::name(), "boolean");
    }

    #[test]
    fn other_reasons_start_with_the_type_they_failed_to_parse() {
        let custom = ParseError::<String>::custom("must be short").into_message();
        assert_eq!(custom, r#"failed to parse "string": must be short"#);
        assert_eq!(without_type_names(&custom), "must be short");
        // The same prefix on a parameter's reason, with std's words after it.
        let param = match i64::parse_from_parameter("soon") {
            Ok(_) => panic!("took a word for a number"),
            Err(e) => e.into_message(),
        };
        assert!(
            param.starts_with(r#"failed to parse "integer_int64": "#),
            "{param}"
        );
        assert!(!without_type_names(&param).contains("failed to parse"));
        // A reason passed up to a type of the same name is not repeated.
        let same = ParseError::<String>::custom("x").propagate::<String>();
        assert_eq!(same.into_message(), r#"failed to parse "string": x"#);
    }
}
