//! An issue's HTML as a `7bit` MIME part: plain ASCII (every other character becomes a
//! numeric character reference, which HTML reads back as the same character) in lines of at
//! most [`LINE`] characters, broken only where HTML ignores the break: inside a tag (before
//! its `>` or at a space between attributes) or at a space of text outside `<pre>`, `<style>`
//! and `<title>`.
//!
//! Compared with quoted-printable the part has a fraction of the lines (a relay reads a
//! message line by line) and no `=3D` escapes, and a recipient's personal strings go in as
//! they are. HTML this cannot lay out that way (a `<pre>` line too long to break, a control
//! character, a comment, script or textarea it does not look into) is refused, and the
//! caller uses quoted-printable instead.

/// The longest line, personal strings counted at their longest (RFC 5322 allows 998).
const LINE: usize = 990;

/// One piece of the HTML part: text every recipient gets, or a personal string of at most
/// `width` ASCII characters (it must not contain a line break; it never starts a line).
pub enum Piece<S> {
    Fixed(String),
    Slot(S, usize),
}

/// The part laid out in lines, pieces in the same order: fixed text as the bytes to send.
pub enum Laid<S> {
    Fixed(Vec<u8>),
    Slot(S),
}

/// `pieces` as 7bit lines, or `None` when the HTML cannot be laid out that way.
pub fn lay_out<S: Copy>(pieces: &[Piece<S>]) -> Option<Vec<Laid<S>>> {
    let mut tokens = tokens(pieces)?;
    let breaks = line_breaks(&mut tokens)?;
    let mut laid = Vec::new();
    let mut fixed = Vec::new();
    let mut next_break = breaks.iter().peekable();
    for (at, token) in tokens.iter().enumerate() {
        let break_here = next_break
            .next_if(|(index, _)| *index == at)
            .map(|(_, b)| *b);
        match break_here {
            Some(Break::Replace) => {
                fixed.extend_from_slice(b"\r\n");
                continue;
            }
            Some(Break::Insert) => fixed.extend_from_slice(b"\r\n"),
            None => {}
        }
        match token {
            Token::Byte(b'\n') => fixed.extend_from_slice(b"\r\n"),
            Token::Byte(byte) => fixed.push(*byte),
            Token::Slot(slot, _) => {
                laid.push(Laid::Fixed(std::mem::take(&mut fixed)));
                laid.push(Laid::Slot(*slot));
            }
        }
    }
    laid.push(Laid::Fixed(fixed));
    Some(laid)
}

enum Token<S> {
    Byte(u8),
    Slot(S, usize),
}

/// The pieces as ASCII bytes and slots; `None` for HTML that is not left to [`lay_out`].
fn tokens<S: Copy>(pieces: &[Piece<S>]) -> Option<Vec<Token<S>>> {
    let mut tokens = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Fixed(text) => {
                let lower = text.to_ascii_lowercase();
                // Markup whose insides follow other rules (and that issue HTML never holds:
                // its raw HTML is escaped when it is rendered).
                if [
                    "<!--",
                    "<script",
                    "<textarea",
                    "<xmp",
                    "<plaintext",
                    "<![cdata[",
                ]
                .iter()
                .any(|tag| lower.contains(tag))
                {
                    return None;
                }
                let mut chars = text.chars().peekable();
                while let Some(c) = chars.next() {
                    match c {
                        // HTML reads CR LF and a lone CR as LF.
                        '\r' => {
                            chars.next_if_eq(&'\n');
                            tokens.push(Token::Byte(b'\n'));
                        }
                        '\n' | '\t' | ' '..='~' => tokens.push(Token::Byte(c as u8)),
                        c if c.is_ascii() => return None,
                        c => tokens.extend(format!("&#x{:X};", c as u32).bytes().map(Token::Byte)),
                    }
                }
            }
            Piece::Slot(slot, width) => tokens.push(Token::Slot(*slot, *width)),
        }
    }
    Some(tokens)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Break {
    /// A line break goes in before the token (it is the `>` of a tag).
    Insert,
    /// The token (a space or tab) becomes the line break.
    Replace,
}

/// Where the lines break, by token index: greedily at the last place HTML ignores a break
/// before a line would grow too long. `None` when some stretch has no such place. A line
/// break of the HTML before a `.` becomes a space (SMTP would have to double that dot), or,
/// inside `<pre>`, makes the HTML one this cannot lay out.
fn line_breaks<S>(tokens: &mut [Token<S>]) -> Option<Vec<(usize, Break)>> {
    let mut breaks = Vec::new();
    let mut scan = Scan::default();
    // The width of the line so far, and the last place it may break with the width before it.
    let mut width = 0;
    let mut last: Option<(usize, Break, usize)> = None;
    for at in 0..tokens.len() {
        let before_a_dot = matches!(tokens.get(at + 1), Some(Token::Byte(b'.')));
        if matches!(tokens[at], Token::Byte(b'\n')) && before_a_dot {
            if scan.keeping > 0 || scan.quote.is_some() {
                return None;
            }
            tokens[at] = Token::Byte(b' ');
        }
        let (token_width, may_break) = match &tokens[at] {
            Token::Byte(b'\n') => {
                scan.byte(b'\n', None);
                width = 0;
                last = None;
                continue;
            }
            Token::Byte(byte) => {
                let next = match tokens.get(at + 1) {
                    Some(Token::Byte(next)) => Some(*next),
                    _ => None,
                };
                (1, scan.byte(*byte, next))
            }
            Token::Slot(_, slot_width) => (*slot_width, None),
        };
        if let Some(kind) = may_break {
            last = Some((at, kind, width));
        }
        width += token_width;
        if width > LINE {
            // The new line starts at the break (after it, when the break replaces a space).
            let (index, kind, before) = last.take()?;
            breaks.push((index, kind));
            width -= before + usize::from(kind == Break::Replace);
            if width > LINE {
                return None;
            }
        }
    }
    Some(breaks)
}

/// Where the scan is in the HTML: in a tag (and in which quotes), and how many elements
/// that keep their whitespace it is inside.
#[derive(Default)]
struct Scan {
    in_tag: bool,
    quote: Option<u8>,
    /// The name of the tag being read, lower case, with a leading `/` for an end tag.
    name: Vec<u8>,
    reading_name: bool,
    /// Open `<pre>`, `<style>`, `<title>` (whose whitespace counts or that hold no markup).
    keeping: usize,
}

impl Scan {
    /// Reads `byte` (followed by `next`) and says whether a line may break at it.
    fn byte(&mut self, byte: u8, next: Option<u8>) -> Option<Break> {
        if !self.in_tag {
            if byte == b'<' && next.is_some_and(|n| n.is_ascii_alphabetic() || n == b'/') {
                self.in_tag = true;
                self.reading_name = true;
                self.name.clear();
                return None;
            }
            let space = matches!(byte, b' ' | b'\t');
            return (space && self.keeping == 0 && next != Some(b'.')).then_some(Break::Replace);
        }
        if let Some(quote) = self.quote {
            if byte == quote {
                self.quote = None;
            }
            return None;
        }
        if self.reading_name {
            if byte.is_ascii_alphanumeric() || (byte == b'/' && self.name.is_empty()) {
                self.name.push(byte.to_ascii_lowercase());
                return None;
            }
            self.reading_name = false;
        }
        match byte {
            b'"' | b'\'' => {
                self.quote = Some(byte);
                None
            }
            b'>' => {
                self.in_tag = false;
                const KEEPING: [&[u8]; 3] = [b"pre", b"style", b"title"];
                match self.name.split_first() {
                    Some((b'/', name)) if KEEPING.contains(&name) => {
                        self.keeping = self.keeping.saturating_sub(1)
                    }
                    _ if KEEPING.contains(&self.name.as_slice()) => self.keeping += 1,
                    _ => {}
                }
                Some(Break::Insert)
            }
            b' ' | b'\t' => Some(Break::Replace),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn laid_text(pieces: &[Piece<u8>], slot_text: &str) -> Option<String> {
        let laid = lay_out(pieces)?;
        let mut out = String::new();
        for part in laid {
            match part {
                Laid::Fixed(bytes) => out.push_str(std::str::from_utf8(&bytes).unwrap()),
                Laid::Slot(_) => out.push_str(slot_text),
            }
        }
        Some(out)
    }

    fn fixed(text: &str) -> Vec<Piece<u8>> {
        vec![Piece::Fixed(text.to_string())]
    }

    /// What an HTML reader makes of the whitespace: runs of it as one space, outside `<pre>`.
    fn collapsed(html: &str) -> String {
        html.replace("\r\n", " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace(" >", ">")
    }

    #[test]
    fn short_ascii_html_is_left_alone() {
        let html = "<p class=\"a\">Hello <b>there</b></p>\n<p>.x</p>";
        assert_eq!(
            laid_text(&fixed(html), "").unwrap(),
            html.replace('\n', "\r\n")
        );
    }

    #[test]
    fn no_line_starts_with_a_dot() {
        assert_eq!(
            laid_text(&fixed("<p>a\n.b</p>\r\n.<i>c</i>"), "").unwrap(),
            "<p>a .b</p> .<i>c</i>"
        );
        assert!(laid_text(&fixed("<pre>a\n.b</pre>"), "").is_none());
    }

    #[test]
    fn other_characters_become_references() {
        assert_eq!(
            laid_text(&fixed("<p title=\"é\">Zoë €</p>"), "").unwrap(),
            "<p title=\"&#xE9;\">Zo&#xEB; &#x20AC;</p>"
        );
    }

    #[test]
    fn long_lines_break_where_html_ignores_it() {
        let mut html = String::from("<div class=\"content\">");
        for n in 0..300 {
            html.push_str(&format!(
                "<a href=\"https://x.example/{n}\">link {n}</a> and text "
            ));
        }
        html.push_str("</div><pre>keep  these   spaces\n</pre>");
        let laid = laid_text(&fixed(&html), "").unwrap();
        for line in laid.split("\r\n") {
            assert!(line.len() <= LINE, "{}", line.len());
            assert!(!line.starts_with('.'));
        }
        assert!(laid.contains("keep  these   spaces"));
        assert_eq!(collapsed(&laid), collapsed(&html));
        // Never inside a quoted value.
        assert!(!laid.contains("https://x.example/\r\n"));
    }

    #[test]
    fn a_long_paragraph_breaks_at_its_spaces_but_not_before_a_dot() {
        let html = format!("<p>{}</p>", "word .dot ".repeat(300));
        let laid = laid_text(&fixed(&html), "").unwrap();
        assert!(
            laid.split("\r\n")
                .all(|l| l.len() <= LINE && !l.starts_with('.'))
        );
        assert_eq!(collapsed(&laid), collapsed(&html));
    }

    #[test]
    fn slots_count_at_their_widest() {
        let mut pieces = Vec::new();
        for _ in 0..100 {
            pieces.push(Piece::Fixed("<a href=\"".into()));
            pieces.push(Piece::Slot(1, 80));
            pieces.push(Piece::Fixed("?u=x\">x</a>".into()));
        }
        let laid = laid_text(&pieces, &"s".repeat(80)).unwrap();
        assert!(laid.split("\r\n").all(|l| l.len() <= LINE));
        assert_eq!(laid.matches(&"s".repeat(80)).count(), 100);
    }

    #[test]
    fn what_cannot_be_laid_out_is_refused() {
        let long_pre = format!("<pre>{}</pre>", "x ".repeat(600));
        assert!(laid_text(&fixed(&long_pre), "").is_none());
        let long_style = format!("<style>{}</style>", "a{b:c} ".repeat(200));
        assert!(laid_text(&fixed(&long_style), "").is_none());
        assert!(laid_text(&fixed("<p>a\u{1}b</p>"), "").is_none());
        assert!(laid_text(&fixed("<!-- x --><p>a</p>"), "").is_none());
        assert!(laid_text(&fixed("<SCRIPT>x</SCRIPT>"), "").is_none());
        // A title longer than a line has nowhere to break either.
        let title = format!("<title>{}</title>", "t ".repeat(600));
        assert!(laid_text(&fixed(&title), "").is_none());
    }
}
