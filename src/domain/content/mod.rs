//! An issue's Markdown: the limits it keeps to, checked by a scan of its lines before anything
//! renders it, and its rendering to HTML within a time budget, once per change of content (the
//! HTML is stored with the issue; readers' requests never render Markdown).
//!
//! The renderer's time grows with the square of some shapes (deep nesting on one line, many
//! table cells, dense inline markup), so the limits refuse the shapes known to be costly
//! without rendering, and the budget stops whatever else overruns (docs/security.md).

pub mod excerpt;
pub mod markdown_html;
pub mod markdown_text;
pub mod merge_tags;
pub mod render_budget;

use std::time::Duration;

use maud::html;

use crate::domain::content::render_budget::{Output, RenderFailure};
use crate::domain::{DomainError, DomainResult};
use crate::store::StoreError;

/// Text as Markdown that reads as the text: its punctuation backslash-escaped, so it shows as
/// typed (a newsletter's name in the default welcome, a feed item's summary).
pub fn escape_markdown(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_punctuation() {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Text as HTML paragraphs (split at blank lines), escaped, without rendering any Markdown:
/// the body of an issue whose HTML is not stored (docs/security.md). Linear in the text.
pub fn plain_paragraphs(text: &str) -> String {
    let paragraphs = text.split("\n\n").map(str::trim).filter(|p| !p.is_empty());
    html! { @for paragraph in paragraphs { p { (paragraph) } } }.into_string()
}

/// The longest `content_markdown`, in bytes: about 30,000 words, several times the longest
/// newsletter issue, and a size whose ordinary Markdown renders in well under the budget.
pub const MAX_BYTES: usize = 200_000;
/// The deepest nesting of lists and block quotes; real issues stay within 3 or 4.
pub const MAX_NESTING: usize = 16;
/// Columns of one table.
pub const MAX_TABLE_COLUMNS: usize = 64;
/// Cells of all tables together: the renderer's time grows with the square of their number.
pub const MAX_TABLE_CELLS: usize = 5_000;
/// How long rendering may take, waiting for a free render slot included.
pub const RENDER_BUDGET: Duration = Duration::from_secs(2);

const FIELD: &str = "content_markdown";

/// What keeps `markdown` outside the limits, as a message for the `content_markdown` field;
/// `None` when it keeps to them. One pass over the lines, looking at how each starts; nothing
/// is rendered.
///
/// Nesting is counted generously: every container marker at the start of a line (`>`, `-`,
/// `*`, `+`, `1.`, `1)`) is one level, and every two columns of indentation another (a nested
/// list item is indented by at least two), except indentation inside fenced code. Table cells
/// are counted on the lines from a delimiter row (`|---|---|`) to the next blank line.
pub fn shape_problem(markdown: &str) -> Option<String> {
    if markdown.len() > MAX_BYTES {
        return Some(format!(
            "is too long (maximum is {} bytes)",
            with_commas(MAX_BYTES)
        ));
    }
    let mut fence: Option<(u8, usize)> = None;
    let (mut in_table, mut cells) = (false, 0);
    for (index, line) in lines(markdown).enumerate() {
        let number = index + 1;
        let prefix = Prefix::of(line);
        let rest = &line[prefix.end..];
        let in_code = match fence {
            Some(open) => {
                if closes_fence(rest, open) {
                    fence = None;
                }
                true
            }
            None => {
                fence = opens_fence(rest);
                false
            }
        };
        let depth = if is_thematic_break(line) {
            0
        } else if in_code {
            prefix.markers
        } else {
            prefix.markers + prefix.indent / 2
        };
        if depth > MAX_NESTING {
            return Some(format!(
                "nests lists and block quotes too deeply ({depth} levels on line {number}; the maximum is {MAX_NESTING})"
            ));
        }
        if rest.trim().is_empty() {
            in_table = false;
            continue;
        }
        if let Some(columns) = delimiter_row_cells(rest) {
            if columns > MAX_TABLE_COLUMNS {
                return Some(format!(
                    "has a table with too many columns ({columns} on line {number}; the maximum is {MAX_TABLE_COLUMNS})"
                ));
            }
            in_table = true;
        }
        if in_table {
            cells += rest.bytes().filter(|&b| b == b'|').count() + 1;
            if cells > MAX_TABLE_CELLS {
                return Some(format!(
                    "has too many table cells (more than {} by line {number})",
                    with_commas(MAX_TABLE_CELLS)
                ));
            }
        }
    }
    None
}

/// `markdown` as HTML when it keeps to the limits and renders within [`RENDER_BUDGET`]; else a
/// `content_markdown` field error that says why. Blocks for up to the budget: call it on a
/// blocking thread, and before taking a database connection.
pub fn render(markdown: &str) -> DomainResult<String> {
    render_as(markdown, FIELD)
}

/// [`render`] for Markdown held in another field (a welcome e-mail's body): its errors name
/// `field`.
pub fn render_as(markdown: &str, field: &str) -> DomainResult<String> {
    attempt(markdown, Output::Html).map_err(|refusal| match refusal {
        Refusal::Content(message) => DomainError::invalid(field, message),
        Refusal::Busy => DomainError::invalid(
            field,
            "could not be rendered now: the server is busy rendering other issues; try again in a moment",
        ),
        Refusal::Server(e) => DomainError::Store(StoreError::Io(e)),
    })
}

/// HTML for an issue saved before HTML was stored: rendered as a save would be, or, when its
/// content breaks today's limits or overruns the budget, its text as plain paragraphs (it was
/// accepted under the old limits and must still show). `None` when the server was too busy to
/// render it now.
pub fn render_saved(markdown: &str) -> DomainResult<Option<String>> {
    match attempt(markdown, Output::Html) {
        Ok(html) => Ok(Some(html)),
        Err(Refusal::Content(_)) => Ok(Some(plain_paragraphs(markdown))),
        Err(Refusal::Busy) => Ok(None),
        Err(Refusal::Server(e)) => Err(DomainError::Store(StoreError::Io(e))),
    }
}

/// The plain text of `markdown` for a mail's text part ([`markdown_text`]), rendered within
/// the same budget as its HTML. Content the renderer cannot finish in time (accepted under
/// older limits) keeps its source as the text: readable, only unformatted. `None` when the
/// server was too busy to render it now. Blocks for up to the budget: call it on a blocking
/// thread.
///
/// [`markdown_text`]: crate::domain::content::markdown_text
pub fn plain_text(markdown: &str) -> DomainResult<Option<String>> {
    match attempt(markdown, Output::Text) {
        Ok(text) => Ok(Some(text)),
        Err(Refusal::Content(_)) => Ok(Some(markdown.trim().to_string())),
        Err(Refusal::Busy) => Ok(None),
        Err(Refusal::Server(e)) => Err(DomainError::Store(StoreError::Io(e))),
    }
}

/// Why [`attempt`] gave no output.
enum Refusal {
    /// The content's fault, in words for its field.
    Content(String),
    /// Other renders held every slot for the whole budget.
    Busy,
    /// The renderer could not be started.
    Server(std::io::Error),
}

fn attempt(markdown: &str, output: Output) -> Result<String, Refusal> {
    if let Some(problem) = shape_problem(markdown) {
        return Err(Refusal::Content(problem));
    }
    if markdown.is_empty() {
        return Ok(String::new());
    }
    render_budget::render_within(markdown, output, RENDER_BUDGET).map_err(|failure| match failure {
        RenderFailure::TooSlow => Refusal::Content(format!(
            "takes too long to render (more than {} seconds); simplify its markup or split it into several issues",
            RENDER_BUDGET.as_secs()
        )),
        RenderFailure::Crashed(why) => {
            eprintln!("render: the Markdown renderer failed: {why}");
            Refusal::Content("could not be rendered; simplify its markup".into())
        }
        RenderFailure::Busy => Refusal::Busy,
        RenderFailure::Io(e) => Refusal::Server(e),
    })
}

/// The lines of `text` as Markdown sees them: ended by `\n`, `\r\n` or a lone `\r`.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n')
        .flat_map(|line| line.strip_suffix('\r').unwrap_or(line).split('\r'))
}

/// How a line starts: its container markers, the columns of whitespace around them (beyond
/// the one space that ends each marker), and where the rest of the line begins.
struct Prefix {
    markers: usize,
    indent: usize,
    end: usize,
}

impl Prefix {
    fn of(line: &str) -> Prefix {
        let bytes = line.as_bytes();
        let (mut at, mut markers, mut indent) = (0, 0, 0);
        loop {
            while let Some(&space @ (b' ' | b'\t')) = bytes.get(at) {
                indent += if space == b'\t' { 4 } else { 1 };
                at += 1;
            }
            let ends_marker = |next: usize| matches!(bytes.get(next), None | Some(b' ' | b'\t'));
            let length = match bytes.get(at) {
                Some(b'>') => 1,
                Some(b'-' | b'*' | b'+') if ends_marker(at + 1) => 1,
                Some(b'0'..=b'9') => {
                    let digits = bytes[at..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit())
                        .count();
                    match bytes.get(at + digits) {
                        Some(b'.' | b')') if digits <= 9 && ends_marker(at + digits + 1) => {
                            digits + 1
                        }
                        _ => break,
                    }
                }
                _ => break,
            };
            markers += 1;
            at += length;
            if bytes.get(at) == Some(&b' ') {
                at += 1;
            }
        }
        Prefix {
            markers,
            indent,
            end: at,
        }
    }
}

/// `* * *`, `---`, `___`: a rule, not a list however many markers it has.
fn is_thematic_break(line: &str) -> bool {
    let mut marks = line.bytes().filter(|b| !matches!(b, b' ' | b'\t'));
    match marks.next() {
        Some(first @ (b'-' | b'*' | b'_')) => {
            let rest: Vec<u8> = marks.collect();
            rest.len() >= 2 && rest.iter().all(|&b| b == first)
        }
        _ => false,
    }
}

/// A code fence opened by `rest`: its character and length.
fn opens_fence(rest: &str) -> Option<(u8, usize)> {
    let mark = *rest
        .as_bytes()
        .first()
        .filter(|b| matches!(b, b'`' | b'~'))?;
    let run = rest.bytes().take_while(|&b| b == mark).count();
    let info = &rest[run..];
    (run >= 3 && !(mark == b'`' && info.contains('`'))).then_some((mark, run))
}

fn closes_fence(rest: &str, (mark, length): (u8, usize)) -> bool {
    let run = rest.bytes().take_while(|&b| b == mark).count();
    run >= length && rest[run..].trim().is_empty()
}

/// The cells of a table's delimiter row (`| --- | :-: |`), or `None` when `rest` is not one.
fn delimiter_row_cells(rest: &str) -> Option<usize> {
    let only_delimiters = rest
        .bytes()
        .all(|b| matches!(b, b'|' | b'-' | b':' | b' ' | b'\t'));
    (only_delimiters && rest.contains('|') && rest.contains('-'))
        .then(|| rest.split('|').filter(|cell| cell.contains('-')).count())
}

/// `200000` as `200,000`.
fn with_commas(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::content::markdown_html::markdown_to_html;

    #[test]
    fn markdown_escapes_raw_html_and_dangerous_links() {
        let html = markdown_to_html("<script>alert(1)</script>\n\n[x](javascript:alert(1)) **b**");
        assert!(!html.contains("<script>"));
        assert!(!html.contains("javascript:"));
        assert!(html.contains("<strong>b</strong>"));
    }

    #[test]
    fn plain_paragraphs_escape_and_render_nothing() {
        assert_eq!(
            plain_paragraphs("**a** <b>\n\n\n# c\n"),
            "<p>**a** &lt;b&gt;</p><p># c</p>"
        );
    }

    #[test]
    fn plain_text_keeps_the_source_of_content_it_cannot_render() {
        assert_eq!(
            plain_text("**b** [l](https://x.example/)")
                .unwrap()
                .unwrap(),
            "b l (https://x.example/)"
        );
        assert_eq!(plain_text("").unwrap().unwrap(), "");
        // Past today's limits (accepted under older ones): the source, trimmed, not an error.
        let deep = format!("{}a\n", "> ".repeat(40));
        assert!(shape_problem(&deep).is_some());
        assert_eq!(plain_text(&deep).unwrap().unwrap(), deep.trim());
    }

    fn refused(markdown: &str) -> String {
        shape_problem(markdown).unwrap_or_else(|| panic!("not refused: {markdown:.80?}"))
    }

    #[test]
    fn the_shape_check_refuses_the_costly_shapes_without_rendering() {
        assert!(refused(&"x".repeat(MAX_BYTES + 1)).contains("maximum is 200,000 bytes"));
        assert!(refused(&("* ".repeat(8000) + "a")).contains("8000 levels on line 1"));
        assert!(refused(&("1. ".repeat(1000) + "a")).contains("1000 levels"));
        assert!(refused(&("> - ".repeat(1000) + "a")).contains("2000 levels"));
        assert!(refused(&">".repeat(17)).contains("17 levels"));
        let indented: String = (0..40)
            .map(|i| format!("{}- a\n", "  ".repeat(i)))
            .collect();
        assert!(refused(&indented).contains("17 levels on line 17"));
        // A lone CR ends a line too, so it cannot hide the markers after it.
        assert!(refused(&format!("a\r{}b", "* ".repeat(20))).contains("20 levels on line 2"));

        let wide = format!("|{}\n|{}\n", "a|".repeat(1000), "-|".repeat(1000));
        assert!(refused(&wide).contains("1000 on line 2"));
        let long = format!("|a|b|\n|-|-|\n{}", "|1|2|\n".repeat(2000));
        assert!(refused(&long).contains("more than 5,000"));
        let no_pipes = format!("|a|\n|-|\n{}", "a\n".repeat(MAX_TABLE_CELLS));
        assert!(refused(&no_pipes).contains("table cells"));
    }

    #[test]
    fn the_shape_check_lets_real_newsletters_through() {
        let issue = "# This week\n\nSome **bold** text, a [link](https://example.com/a_b).\n\n\
            - one\n  - nested\n    1. deeper\n       > quoted\n- two\n\n\
            * * *\n\n- - - - - - - - - - - - - - - - - - - -\n\n\
            | a | b |\n|---|:-:|\n| 1 | 2 |\n\nAfter the table | a pipe.\n\n\
            ```python\ndef f():\n                                        return [\n                                            1]\n```\n";
        assert_eq!(shape_problem(issue), None);
        let many_tables = "| a | b |\n|---|---|\n| 1 | 2 |\n\n".repeat(500);
        assert_eq!(shape_problem(&many_tables), None);
        assert_eq!(shape_problem(&"word ".repeat(MAX_BYTES / 5)), None);
        assert_eq!(shape_problem(&">".repeat(16)), None);
    }

    #[test]
    fn limits_read_as_numbers() {
        assert_eq!(with_commas(200_000), "200,000");
        assert_eq!(with_commas(5_000), "5,000");
        assert_eq!(with_commas(64), "64");
    }
}
