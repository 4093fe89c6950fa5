//! The plain-text part of an issue: readable text made from the issue's stored HTML, not its
//! Markdown source. The HTML was rendered once per change of content within the render budget
//! (`domain::content`); reading it back into text is one linear pass over the tags the
//! Markdown renderer writes, so the send derives the text once, with its template, and never
//! parses Markdown.
//!
//! Paragraphs are separated by a blank line, headings stand on their own line (the first two
//! levels underlined), list items start with `-` or their number, quotes with `> `, code
//! blocks are indented, and a link is written out as `text (url)` unless its text is the URL.

/// The text a reader of `html` sees, with each link's target written out.
pub fn html_to_text(html: &str) -> String {
    let mut out = Writer::default();
    let mut rest = html;
    while !rest.is_empty() {
        match rest.find('<') {
            Some(0) => {
                let end = rest.find('>').map_or(rest.len(), |e| e + 1);
                out.tag(&rest[..end]);
                rest = &rest[end..];
            }
            Some(start) => {
                out.text(&unescape(&rest[..start]));
                rest = &rest[start..];
            }
            None => {
                out.text(&unescape(rest));
                rest = "";
            }
        }
    }
    out.finish()
}

/// A list being written: bullets, or the number of the next item.
enum List {
    Bullets,
    Numbered(u64),
}

#[derive(Default)]
struct Writer {
    out: String,
    /// Line breaks owed before the next text: 1 ends the line, 2 leaves a blank line.
    breaks: usize,
    /// What starts the next line written: a list item's bullet, once.
    item_marker: Option<String>,
    lists: Vec<List>,
    quotes: usize,
    /// Quotes opened since the last line was written: the blank lines before them are not
    /// part of them.
    quotes_opening: usize,
    pre: bool,
    /// Link targets of the open `<a>` tags, and where their text started.
    links: Vec<(String, usize)>,
    /// Where the open heading's text started, and its level.
    heading: Option<(usize, u8)>,
    /// A table cell was written on this row.
    cell_written: bool,
}

impl Writer {
    fn block(&mut self, breaks: usize) {
        if !self.out.is_empty() {
            self.breaks = self.breaks.max(breaks);
        }
    }

    /// What starts each line: the quote marks, and the indentation of list items.
    fn line_prefix(&self) -> String {
        let mut prefix = "> ".repeat(self.quotes);
        prefix.push_str(&"  ".repeat(self.lists.len().saturating_sub(1)));
        prefix
    }

    fn at_line_start(&self) -> bool {
        self.out.is_empty() || self.out.ends_with('\n') || self.breaks > 0
    }

    fn start_line_if_owed(&mut self) {
        if self.breaks > 0 {
            let quote = "> ".repeat(self.quotes);
            for n in 0..self.breaks {
                // A blank line inside a quote keeps its quote mark.
                if n > 0 {
                    self.out.push_str(quote.trim_end());
                }
                self.out.push('\n');
            }
            self.breaks = 0;
        }
        self.quotes += std::mem::take(&mut self.quotes_opening);
        if self.out.is_empty() || self.out.ends_with('\n') {
            self.out.push_str(&self.line_prefix());
            if let Some(marker) = self.item_marker.take() {
                self.out.push_str(&marker);
            } else if !self.lists.is_empty() {
                // Continuation lines line up with the item's text.
                self.out.push_str("  ");
            }
        }
    }

    fn text(&mut self, text: &str) {
        if self.pre {
            for (n, line) in text.split('\n').enumerate() {
                if n > 0 {
                    self.out.push('\n');
                }
                if !line.is_empty() {
                    let line_start = self.at_line_start();
                    self.start_line_if_owed();
                    if line_start {
                        self.out.push_str("    ");
                    }
                    self.out.push_str(line);
                }
            }
            return;
        }
        let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let space_before = text.starts_with(char::is_whitespace);
        let space_after = text.ends_with(char::is_whitespace) && !collapsed.is_empty();
        if collapsed.is_empty() {
            if space_before && !self.at_line_start() && !self.out.ends_with(' ') {
                self.out.push(' ');
            }
            return;
        }
        if space_before && !self.at_line_start() && !self.out.ends_with(' ') {
            self.out.push(' ');
        }
        self.start_line_if_owed();
        self.out.push_str(&collapsed);
        if space_after {
            self.out.push(' ');
        }
    }

    fn trim_trailing_space(&mut self) {
        while self.out.ends_with(' ') {
            self.out.pop();
        }
    }

    fn tag(&mut self, tag: &str) {
        let inner = tag.trim_start_matches('<').trim_end_matches('>');
        let inner = inner.trim_end_matches('/').trim();
        let closing = inner.starts_with('/');
        let name_end = inner
            .find(|c: char| c.is_whitespace())
            .unwrap_or(inner.len());
        let name = inner[..name_end]
            .trim_start_matches('/')
            .to_ascii_lowercase();
        match (name.as_str(), closing) {
            ("p" | "div" | "table" | "dl" | "section", _) => self.block(2),
            ("h1" | "h2" | "h3" | "h4" | "h5" | "h6", false) => {
                self.block(2);
                self.start_line_if_owed();
                self.heading = Some((self.out.len(), name.as_bytes()[1] - b'0'));
            }
            ("h1" | "h2" | "h3" | "h4" | "h5" | "h6", true) => {
                self.trim_trailing_space();
                if let Some((start, level)) = self.heading.take()
                    && level <= 2
                {
                    let width = self.out[start..].chars().count().clamp(3, 72);
                    let rule = if level == 1 { "=" } else { "-" };
                    self.out.push('\n');
                    self.out.push_str(&self.line_prefix());
                    self.out.push_str(&rule.repeat(width));
                }
                self.block(2);
            }
            ("ul", false) => {
                self.block(if self.lists.is_empty() { 2 } else { 1 });
                self.lists.push(List::Bullets);
            }
            ("ol", false) => {
                self.block(if self.lists.is_empty() { 2 } else { 1 });
                let start = attribute(inner, "start")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(1);
                self.lists.push(List::Numbered(start));
            }
            ("ul" | "ol", true) => {
                self.lists.pop();
                self.item_marker = None;
                self.block(if self.lists.is_empty() { 2 } else { 1 });
            }
            ("li", false) => {
                self.block(1);
                let marker = match self.lists.last_mut() {
                    Some(List::Numbered(n)) => {
                        *n += 1;
                        format!("{}. ", *n - 1)
                    }
                    _ => "- ".to_string(),
                };
                self.item_marker = Some(marker);
            }
            ("li", true) => self.block(1),
            ("blockquote", false) => {
                self.block(2);
                self.quotes_opening += 1;
            }
            ("blockquote", true) => {
                match self.quotes_opening {
                    0 => self.quotes = self.quotes.saturating_sub(1),
                    _ => self.quotes_opening -= 1,
                }
                self.block(2);
            }
            ("pre", false) => {
                self.block(2);
                self.pre = true;
            }
            ("pre", true) => {
                self.pre = false;
                while self.out.ends_with('\n') {
                    self.out.pop();
                }
                self.block(2);
            }
            ("br", _) => {
                self.trim_trailing_space();
                self.breaks = self.breaks.max(1);
            }
            ("hr", _) => {
                self.block(2);
                self.start_line_if_owed();
                self.out.push_str("* * *");
                self.block(2);
            }
            ("tr", false) => {
                self.block(1);
                self.cell_written = false;
            }
            ("td" | "th", false) => {
                if self.cell_written {
                    self.out.push_str(" | ");
                }
                self.cell_written = true;
            }
            ("a", false) => {
                let href = attribute(inner, "href").map(|h| unescape(&h));
                self.links.push((href.unwrap_or_default(), self.out.len()));
            }
            ("a", true) => {
                if let Some((href, start)) = self.links.pop() {
                    let text = self.out.get(start..).unwrap_or_default().trim().to_string();
                    let shown = href.strip_prefix("mailto:").unwrap_or(&href);
                    if !href.is_empty() && !href.starts_with('#') && text != shown && text != href {
                        self.trim_trailing_space();
                        if text.is_empty() {
                            self.start_line_if_owed();
                            self.out.push_str(&href);
                        } else {
                            self.out.push_str(&format!(" ({href})"));
                        }
                    }
                }
            }
            ("img", _) => {
                let alt = attribute(inner, "alt").map(|a| unescape(&a));
                let src = attribute(inner, "src").map(|s| unescape(&s));
                let shown = match (alt.filter(|a| !a.is_empty()), src) {
                    (Some(alt), Some(src)) => format!("{alt} ({src})"),
                    (Some(alt), None) => alt,
                    (None, Some(src)) => src,
                    (None, None) => String::new(),
                };
                if !shown.is_empty() {
                    self.start_line_if_owed();
                    self.out.push_str(&shown);
                }
            }
            ("input", _) if attribute(inner, "type").as_deref() == Some("checkbox") => {
                self.start_line_if_owed();
                let checked = inner.split_whitespace().any(|a| a.starts_with("checked"));
                self.out.push_str(if checked { "[x] " } else { "[ ] " });
            }
            _ => {}
        }
    }

    fn finish(mut self) -> String {
        let lines: Vec<&str> = self.out.lines().map(str::trim_end).collect();
        self.out = lines.join("\n");
        self.out.trim_matches('\n').to_string()
    }
}

/// The value of attribute `name` in the inside of a tag (`a href="…"`), as written.
fn attribute(inner: &str, name: &str) -> Option<String> {
    let mut rest = inner;
    while let Some(at) = rest.find(name) {
        let before_ok = rest[..at].ends_with(char::is_whitespace);
        let after = &rest[at + name.len()..];
        if before_ok && let Some(value) = after.strip_prefix("=\"") {
            return value.find('"').map(|end| value[..end].to_string());
        }
        rest = &rest[at + name.len()..];
    }
    None
}

/// Character references back to characters: the named ones the Markdown renderer writes and
/// any numeric one.
fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|e| {
            let name = &rest[1..e];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some('\u{a0}'),
                _ => name
                    .strip_prefix("#x")
                    .or_else(|| name.strip_prefix("#X"))
                    .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                    .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            };
            c.map(|c| (c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::content::markdown_to_html;

    fn text_of(markdown: &str) -> String {
        html_to_text(&markdown_to_html(markdown))
    }

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
    fn plain_paragraphs_and_entities() {
        assert_eq!(
            html_to_text("<p>a &lt;b&gt; &#233; &#xE9;</p><p>line<br>break</p>"),
            "a <b> é é\n\nline\nbreak"
        );
    }
}
