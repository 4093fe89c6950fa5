//! Merge tags (docs/growth.md, "Merge tags"): `{{ first_name }}` or
//! `{{ first_name | default: "friend" }}` in an issue puts each reader's own value in their
//! copy, or the fallback when they have none. A tag names a custom field, or `name` or
//! `email` (the subscriber's own). Values go in as text: escaped in the HTML part, never
//! read as markup or code. What is not a well-formed tag stays as it was written.

use std::collections::BTreeMap;

use serde_json::Value;

/// One tag: the name it reads and the text shown when the reader has no value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tag {
    pub name: String,
    /// As the author wrote it, unescaped.
    pub fallback: String,
}

/// A piece of text: as written, or a tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part<'a> {
    Text(&'a str),
    Tag(Tag),
}

/// The longest tag, `{{` to `}}`, in bytes; anything longer is text.
const TAG_MAX: usize = 300;
/// The subscriber's own details a tag may name besides the custom fields.
pub const OWN: [&str; 2] = ["name", "email"];

/// `text` cut at its tags. `html`: the text is rendered HTML, where the fallback's quotes
/// are `&quot;` and its characters escaped.
pub fn split(text: &str, html: bool) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut rest = text;
    let mut pending = 0;
    while let Some(open) = rest[pending..].find("{{").map(|i| i + pending) {
        let after = &rest[open + 2..];
        let tag = after
            .find("}}")
            .filter(|&close| close + 4 <= TAG_MAX)
            .and_then(|close| parse(&after[..close], html).map(|tag| (tag, close)));
        match tag {
            Some((tag, close)) => {
                if open > 0 {
                    parts.push(Part::Text(&rest[..open]));
                }
                parts.push(Part::Tag(tag));
                rest = &after[close + 2..];
                pending = 0;
            }
            None => pending = open + 2,
        }
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest));
    }
    parts
}

/// The inside of `{{ … }}` as a tag, if it is one.
fn parse(inner: &str, html: bool) -> Option<Tag> {
    let (name, filter) = match inner.split_once('|') {
        Some((name, filter)) => (name.trim(), Some(filter.trim())),
        None => (inner.trim(), None),
    };
    let mut chars = name.chars();
    let named = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    // `{{unsubscribe}}` is the footer's link, filled in by the mail itself.
    if !named || name == "unsubscribe" {
        return None;
    }
    let fallback = match filter {
        None => String::new(),
        Some(filter) => {
            let quoted = filter.strip_prefix("default:")?.trim();
            let quote = if html { "&quot;" } else { "\"" };
            let text = quoted.strip_prefix(quote)?.strip_suffix(quote)?;
            if html {
                unescape(text)
            } else {
                text.to_string()
            }
        }
    };
    Some(Tag {
        name: name.to_string(),
        fallback,
    })
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The tags of `markdown` that name nothing the newsletter has (`fields`, or [`OWN`]), each
/// once, in order: the editor shows them and a send refuses them.
pub fn unknown<'a>(markdown: &str, fields: impl Fn(&str) -> bool + 'a) -> Vec<String> {
    let mut unknown: Vec<String> = Vec::new();
    for part in split(markdown, false) {
        if let Part::Tag(tag) = part
            && !OWN.contains(&tag.name.as_str())
            && !fields(&tag.name)
            && !unknown.contains(&tag.name)
        {
            unknown.push(tag.name);
        }
    }
    unknown
}

/// Rendered HTML with each tag as its fallback, for the web copy and the feed, where there
/// is no one reader: linear in the text, and borrowed when it has no tag.
pub fn with_fallbacks(html: &str) -> std::borrow::Cow<'_, str> {
    fallbacks(html, true)
}

/// Plain text (a subject) with each tag as its fallback, for pages where there is no one
/// reader: borrowed when it has no tag.
pub fn text_with_fallbacks(text: &str) -> std::borrow::Cow<'_, str> {
    fallbacks(text, false)
}

/// `text` with each tag as its fallback, escaped for HTML when `html`.
fn fallbacks(text: &str, html: bool) -> std::borrow::Cow<'_, str> {
    if !text.contains("{{") {
        return std::borrow::Cow::Borrowed(text);
    }
    let parts = split(text, html);
    if !parts.iter().any(|p| matches!(p, Part::Tag(_))) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for part in parts {
        match part {
            Part::Text(text) => out.push_str(text),
            Part::Tag(tag) if html => out.push_str(&maud::html! { (tag.fallback) }.into_string()),
            Part::Tag(tag) => out.push_str(&tag.fallback),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// One reader's values, as the send reads them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reader {
    pub name: Option<String>,
    pub email: String,
    /// Custom field values by name, as `subscribers::custom_fields::Values`.
    pub fields: BTreeMap<String, Value>,
}

impl Reader {
    /// The text `tag` shows this reader: their value, else the fallback.
    pub fn value(&self, tag: &Tag) -> String {
        let own = match tag.name.as_str() {
            "name" => self.name.clone(),
            "email" => Some(self.email.clone()).filter(|e| !e.is_empty()),
            name => self.fields.get(name).map(value_text),
        };
        own.filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| tag.fallback.clone())
    }
}

/// A custom field's value as people read it, in a mail, a form or a CSV cell: a string as
/// it is, a number as written, yes/no for a boolean (which the fields take back as given).
pub fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(name: &str, fallback: &str) -> Part<'static> {
        Part::Tag(Tag {
            name: name.into(),
            fallback: fallback.into(),
        })
    }

    #[test]
    fn tags_are_found_in_markdown_and_in_rendered_html() {
        assert_eq!(
            split(
                "Hi {{ first_name | default: \"friend\" }}, {{name}}!",
                false
            ),
            vec![
                Part::Text("Hi "),
                tag("first_name", "friend"),
                Part::Text(", "),
                tag("name", ""),
                Part::Text("!")
            ]
        );
        assert_eq!(
            split(
                "Hi {{ first_name | default: &quot;a &amp; b&quot; }}.",
                true
            ),
            vec![
                Part::Text("Hi "),
                tag("first_name", "a & b"),
                Part::Text(".")
            ]
        );
        // Not tags: left as written.
        for text in [
            "{{ }}",
            "{{ First }}",
            "{{ x | upcase }}",
            "{{ x | default: friend }}",
            "{{unsubscribe}}",
            "{{ open",
            "}} {{",
        ] {
            assert_eq!(split(text, false), vec![Part::Text(text)], "{text}");
        }
        assert_eq!(
            split("{{ bad }} and {{ {{ good }}", false),
            vec![tag("bad", ""), Part::Text(" and {{ "), tag("good", "")]
        );
    }

    #[test]
    fn a_reader_sees_their_value_or_the_fallback() {
        let reader = Reader {
            name: Some("Ann".into()),
            email: "ann@example.com".into(),
            fields: [
                ("age".to_string(), serde_json::json!(41)),
                ("vip".to_string(), serde_json::json!(true)),
                ("nick".to_string(), serde_json::json!("  ")),
            ]
            .into_iter()
            .collect(),
        };
        let t = |name: &str| Tag {
            name: name.into(),
            fallback: "friend".into(),
        };
        assert_eq!(reader.value(&t("name")), "Ann");
        assert_eq!(reader.value(&t("age")), "41");
        assert_eq!(reader.value(&t("vip")), "yes");
        assert_eq!(reader.value(&t("nick")), "friend");
        assert_eq!(reader.value(&t("missing")), "friend");
        assert_eq!(
            unknown("{{ age }} {{ nope }} {{ name }} {{ nope }}", |f| f == "age"),
            vec!["nope".to_string()]
        );
    }
}
