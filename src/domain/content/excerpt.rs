//! The opening words of an issue as a reader sees them, for a page's meta description and
//! its Open Graph card: read from the HTML stored when the issue was saved (tags dropped,
//! entities decoded), never from the Markdown source, and never by rendering on a request.
//! Only the start of the HTML is read, so the cost is bounded whatever the size.

/// The longest description, in characters (search engines show about this much).
pub const DESCRIPTION_MAX: usize = 160;

/// The longest excerpt an archive shows under an issue's title, in characters.
pub const EXCERPT_MAX: usize = 240;

/// An issue's excerpt for its archive entry: the opening words of its HTML after a heading it
/// may open with (the title the archive shows already), at most [`EXCERPT_MAX`] characters;
/// merge tags as their fallbacks, since an excerpt has no one reader (the archive, link
/// previews, a paid issue's teaser).
pub fn opening_words(html: &str) -> String {
    let html = super::merge_tags::with_fallbacks(html);
    text_of_html(after_leading_heading(&html), EXCERPT_MAX)
}

/// `html` past the heading element (`<h1>` to `<h6>`) it starts with, if it starts with one.
pub fn after_leading_heading(html: &str) -> &str {
    let (_, rest) = split_leading_heading(html);
    rest
}

/// The most of a leading heading's text read (more than any subject).
const HEADING_MAX: usize = 1_000;

/// The text of the heading `html` starts with (`<h1>` to `<h6>`, whitespace before it
/// allowed), and what follows it; `(None, html)` when it starts with anything else.
pub fn split_leading_heading(html: &str) -> (Option<String>, &str) {
    let trimmed = html.trim_start();
    let level = match trimmed.as_bytes() {
        [b'<', b'h' | b'H', level @ b'1'..=b'6', b'>' | b' ', ..] => *level as char,
        _ => return (None, html),
    };
    let close = format!("</h{level}>");
    match trimmed.find(&close) {
        Some(end) => {
            let text = text_of_html(&trimmed[..end], HEADING_MAX);
            (Some(text), &trimmed[end + close.len()..])
        }
        None => (None, html),
    }
}

/// The text of `html` with its whitespace collapsed, cut at a word to at most `max` characters
/// (an ellipsis marks a cut).
pub fn text_of_html(html: &str, max: usize) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut length = 0;
    let mut rest = html;
    // One character past `max` tells whether the text was cut.
    while length + word.chars().count() <= max && !rest.is_empty() {
        let c = rest.chars().next().expect("rest is not empty");
        let (decoded, taken) = match c {
            '<' => match rest.find('>') {
                // A block's tag (`<p>`, `<li>`, `<br>`) separates words, an inline one
                // (`<a>`, `<strong>`) does not.
                Some(end) => (separator(&rest[1..end]), end + 1),
                None => break,
            },
            '&' => entity(rest),
            c => (Some(c), c.len_utf8()),
        };
        rest = &rest[taken..];
        match decoded {
            Some(c) if !c.is_whitespace() => word.push(c),
            Some(_) if !word.is_empty() => {
                length += word.chars().count() + usize::from(!words.is_empty());
                words.push(std::mem::take(&mut word));
            }
            _ => {}
        }
    }
    if !word.is_empty() {
        length += word.chars().count() + usize::from(!words.is_empty());
        words.push(word);
    }
    if length <= max {
        return words.join(" ");
    }
    // Cut: whole words up to `max` less the ellipsis.
    let mut out = String::new();
    for word in words {
        let needed = out.chars().count() + usize::from(!out.is_empty()) + word.chars().count();
        if needed + 1 > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&word);
    }
    out.push('…');
    out
}

/// Elements inside a line of text: their tags join what is on either side.
const INLINE: &[&str] = &[
    "a", "abbr", "b", "code", "del", "em", "i", "ins", "kbd", "mark", "s", "small", "span",
    "strong", "sub", "sup", "u",
];

/// What the tag whose text (between `<` and `>`) is `tag` stands for in the text.
fn separator(tag: &str) -> Option<char> {
    let name: String = tag
        .trim_start_matches('/')
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    (!INLINE.contains(&name.as_str())).then_some(' ')
}

/// The character an entity at the start of `text` stands for, and its length in bytes. The
/// renderer writes only `&amp;` `&lt;` `&gt;` `&quot;` and numeric ones; others are kept as
/// written.
fn entity(text: &str) -> (Option<char>, usize) {
    let Some(end) = text[..text.len().min(12)].find(';') else {
        return (Some('&'), 1);
    };
    let name = &text[1..end];
    let c = match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some(' '),
        _ => name
            .strip_prefix("#x")
            .or_else(|| name.strip_prefix("#X"))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
            .and_then(char::from_u32),
    };
    match c {
        Some(c) => (Some(c), end + 1),
        None => (Some('&'), 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_start_after_a_leading_heading() {
        let html = "<h1>Week 12</h1>\n<p>Dear <em>readers</em>, hello.</p><h2>More</h2><p>x</p>";
        assert_eq!(opening_words(html), "Dear readers, hello. More x");
        assert_eq!(
            split_leading_heading("\n<h2 id=\"a\">A &amp; B</h2><p>c</p>"),
            (Some("A & B".to_string()), "<p>c</p>")
        );
        assert_eq!(split_leading_heading("<p>x</p>"), (None, "<p>x</p>"));
        assert_eq!(
            split_leading_heading("<hr><p>x</p>"),
            (None, "<hr><p>x</p>")
        );
        assert_eq!(opening_words("<p>Only text</p>"), "Only text");
        let long = format!("<p>{}</p>", "word ".repeat(100));
        assert!(opening_words(&long).chars().count() <= EXCERPT_MAX);
        assert!(opening_words(&long).ends_with('…'));
    }

    #[test]
    fn reads_the_text_a_reader_sees() {
        let html = "<h2>Hello</h2>\n<p>Dear <strong>readers</strong> &amp; <a href=\"x\">friends</a>, \
                    &lt;b&gt; is &quot;bold&quot;&#39;s tag.</p><p>Next</p>";
        assert_eq!(
            text_of_html(html, 160),
            "Hello Dear readers & friends, <b> is \"bold\"'s tag. Next"
        );
    }

    #[test]
    fn cuts_at_a_word_with_an_ellipsis() {
        let html = "<p>one two three four five six</p>";
        assert_eq!(text_of_html(html, 14), "one two three…");
        assert_eq!(text_of_html(html, 27), "one two three four five six");
        assert_eq!(text_of_html("", 10), "");
        let huge = format!("<p>{}</p>", "word ".repeat(1_000_000));
        assert!(text_of_html(&huge, DESCRIPTION_MAX).chars().count() <= DESCRIPTION_MAX);
    }
}
