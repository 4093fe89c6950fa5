//! Markdown as the plain text a reader sees: the text part of an e-mail. The Markdown crate
//! parses the source into its syntax tree (`markdown::to_mdast`, the same parser the HTML comes
//! from) and this module writes the tree out as text. Parsing costs what rendering costs, so
//! it runs where rendering runs: within the render budget (`content::text_within_budget`).
//!
//! Paragraphs are separated by a blank line, headings stand on their own line (the first two
//! levels underlined), list items start with `-` or their number, quotes with `> `, code
//! blocks are indented, and a link is written out as `text (url)` unless its text is the URL.

use std::collections::HashMap;

use markdown::mdast::{List, ListItem, Node};

/// `source` as plain text, with each link's target written out.
pub fn markdown_to_text(source: &str) -> String {
    let tree = markdown::to_mdast(source, &markdown::ParseOptions::gfm())
        .or_else(|_| markdown::to_mdast(source, &markdown::ParseOptions::default()));
    let Ok(tree) = tree else {
        // Only MDX syntax errors are reported, and MDX is off: keep the source readable.
        return source.trim().to_string();
    };
    let mut definitions = HashMap::new();
    collect_definitions(&tree, &mut definitions);
    let writer = Writer { definitions };
    writer.blocks(children(&tree)).join("\n\n")
}

/// Reference-style link targets (`[text][id]` ... `[id]: url`), by identifier.
fn collect_definitions(node: &Node, into: &mut HashMap<String, String>) {
    if let Node::Definition(d) = node {
        into.entry(d.identifier.clone())
            .or_insert_with(|| d.url.clone());
    }
    for child in children(node) {
        collect_definitions(child, into);
    }
}

fn children(node: &Node) -> &[Node] {
    node.children().map_or(&[], Vec::as_slice)
}

struct Writer {
    definitions: HashMap<String, String>,
}

impl Writer {
    /// Each block of `nodes` as text (lines joined by `\n`), in order; blocks that write
    /// nothing (definitions, empty HTML) are left out.
    fn blocks(&self, nodes: &[Node]) -> Vec<String> {
        nodes
            .iter()
            .filter_map(|node| self.block(node))
            .filter(|text| !text.is_empty())
            .collect()
    }

    fn block(&self, node: &Node) -> Option<String> {
        Some(match node {
            Node::Heading(h) => {
                let text = self.inline(&h.children);
                let underline = match h.depth {
                    1 => '=',
                    2 => '-',
                    _ => return Some(text),
                };
                let width = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
                format!("{text}\n{}", underline.to_string().repeat(width.min(72)))
            }
            Node::Blockquote(q) => quoted(&self.blocks(&q.children).join("\n\n")),
            Node::List(list) => self.list(list),
            Node::Code(code) => indented(&code.value, "    "),
            Node::Math(math) => indented(&math.value, "    "),
            Node::ThematicBreak(_) => "* * *".to_string(),
            Node::Table(table) => self.blocks(&table.children).join("\n"),
            Node::TableRow(row) => row
                .children
                .iter()
                .map(|cell| self.inline(children(cell)))
                .collect::<Vec<_>>()
                .join(" | "),
            Node::FootnoteDefinition(f) => {
                format!(
                    "[^{}]: {}",
                    f.identifier,
                    self.blocks(&f.children).join("\n\n")
                )
            }
            Node::Definition(_) | Node::Yaml(_) | Node::Toml(_) => return None,
            Node::Html(html) => html.value.trim().to_string(),
            // A paragraph, or inline content standing where a block is expected.
            other => self.inline(std::slice::from_ref(other)),
        })
    }

    fn list(&self, list: &List) -> String {
        let mut number = list.start.unwrap_or(1);
        let items: Vec<String> = list
            .children
            .iter()
            .filter_map(|node| match node {
                Node::ListItem(item) => Some(item),
                _ => None,
            })
            .map(|item| {
                let marker = if list.ordered {
                    number += 1;
                    format!("{}. ", number - 1)
                } else {
                    "- ".to_string()
                };
                self.list_item(item, &marker)
            })
            .collect();
        items.join(if list.spread { "\n\n" } else { "\n" })
    }

    /// An item: its marker (and task box) on the first line, later lines indented under it.
    fn list_item(&self, item: &ListItem, marker: &str) -> String {
        let task = match item.checked {
            Some(true) => "[x] ",
            Some(false) => "[ ] ",
            None => "",
        };
        let body = self
            .blocks(&item.children)
            .join(if item.spread { "\n\n" } else { "\n" });
        let indent = " ".repeat(marker.chars().count());
        let mut lines = body.lines();
        let first = lines.next().unwrap_or("");
        let mut out = format!("{marker}{task}{first}");
        for line in lines {
            out.push('\n');
            if !line.is_empty() {
                out.push_str(&indent);
                out.push_str(line);
            }
        }
        out
    }

    /// Inline content as one run of text: soft line breaks become spaces, hard ones stay.
    fn inline(&self, nodes: &[Node]) -> String {
        let mut out = String::new();
        for node in nodes {
            match node {
                Node::Text(t) => out.push_str(&t.value.replace(['\r', '\n'], " ")),
                Node::InlineCode(c) => out.push_str(&c.value),
                Node::InlineMath(m) => out.push_str(&m.value),
                Node::Html(h) => out.push_str(&h.value),
                Node::Break(_) => out.push('\n'),
                Node::Link(link) => {
                    out.push_str(&with_target(self.inline(&link.children), &link.url))
                }
                Node::Image(image) => out.push_str(&with_target(image.alt.clone(), &image.url)),
                Node::LinkReference(link) => {
                    let text = self.inline(&link.children);
                    out.push_str(&match self.definitions.get(&link.identifier) {
                        Some(url) => with_target(text, url),
                        None => text,
                    });
                }
                Node::ImageReference(image) => {
                    out.push_str(&match self.definitions.get(&image.identifier) {
                        Some(url) => with_target(image.alt.clone(), url),
                        None => image.alt.clone(),
                    });
                }
                Node::FootnoteReference(f) => out.push_str(&format!("[^{}]", f.identifier)),
                other => out.push_str(&self.inline(children(other))),
            }
        }
        out
    }
}

/// `text (url)`, or the URL alone when the text is the URL (an autolink) or empty.
fn with_target(text: String, url: &str) -> String {
    let bare = |u: &str| {
        u.trim_start_matches("mailto:")
            .trim_end_matches('/')
            .to_string()
    };
    if text.trim().is_empty() || bare(&text) == bare(url) {
        url.to_string()
    } else {
        format!("{text} ({url})")
    }
}

fn indented(text: &str, by: &str) -> String {
    text.lines()
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else {
                format!("{by}{line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn quoted(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.is_empty() {
                ">".to_string()
            } else {
                format!("> {line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::markdown_to_text as text_of;

    #[test]
    fn markdown_becomes_text_without_its_syntax_and_keeps_links() {
        let markdown = "# The Title\n\nSome **bold** and *emphasis* and `code`, with a \
            [link](https://example.org/a?b=1&c=2) and <https://auto.example/>.\n\n\
            ## Part two\n\n- first item\n- second [item](https://example.org/item)\n  - nested\n\n\
            1. one\n2. two\n\n> A quote\n> on two lines\n>\n> > nested quote\n\n```rust\nfn main() {\n    let x = 1 < 2;\n}\n```\n\n\
            ### Small heading\n\nTom &amp; Jerry ~~gone~~ ![a chart](https://example.org/c.png)\n\n\
            ---\n\nLast line.";
        let text = text_of(markdown);
        for syntax in ["**", "# ", "](", "`", "~~", "![", "<https"] {
            assert!(!text.contains(syntax), "{syntax:?} in:\n{text}");
        }
        let expected = [
            "The Title\n=========",
            "Some bold and emphasis and code, with a link (https://example.org/a?b=1&c=2) and https://auto.example/.",
            "Part two\n--------",
            "- first item\n- second item (https://example.org/item)\n  - nested",
            "1. one\n2. two",
            "> A quote on two lines\n>\n> > nested quote",
            "    fn main() {\n        let x = 1 < 2;\n    }",
            "Small heading\n\nTom & Jerry gone a chart (https://example.org/c.png)",
            "* * *\n\nLast line.",
        ];
        for part in expected {
            assert!(text.contains(part), "{part:?} missing from:\n{text}");
        }
        assert!(!text.contains("\n\n\n"), "{text}");
    }

    #[test]
    fn loose_lists_ordered_starts_and_tasks() {
        let text = text_of("3. three\n\n4. four\n\n- [x] done\n- [ ] open\n");
        assert!(text.contains("3. three\n\n4. four"), "{text}");
        assert!(text.contains("- [x] done\n- [ ] open"), "{text}");
    }

    #[test]
    fn entities_hard_breaks_and_reference_links() {
        assert_eq!(
            text_of("a &lt;b&gt; &#233; &#xE9;\n\nline\\\nbreak"),
            "a <b> é é\n\nline\nbreak"
        );
        assert_eq!(
            text_of("See [the site][s] and ![logo][s].\n\n[s]: https://example.org/"),
            "See the site (https://example.org/) and logo (https://example.org/)."
        );
    }

    #[test]
    fn raw_html_is_kept_as_the_text_it_is() {
        // The HTML part escapes raw HTML (it shows as text), so the text part shows it too.
        assert_eq!(text_of("<b>hi</b> there"), "<b>hi</b> there");
    }
}
