//! Quoted-printable (RFC 2045, 6.7) in pieces that join in any order: each piece starts at
//! the start of a line and ends with a soft line break, so a send encodes the fixed parts of
//! a message once and each recipient's copy only encodes its few personal strings and copies
//! the rest.
//!
//! The output never has a line that starts with `.`, so it needs no SMTP dot-stuffing, and
//! never holds `=_`, so a MIME boundary containing `=_` cannot occur in it.

/// The longest encoded line, the soft break's `=` included (RFC 2045).
const LINE: usize = 76;

/// Appends `text` as quoted-printable, starting at the start of a line. With `soft_end` the
/// piece ends with a soft line break (`=` CRLF: the decoded text goes straight on with
/// whatever piece follows); without, it ends where the text ends. A `\n` (or `\r\n`) is a
/// line break of the text (CRLF); every other control byte, `=`, and any byte above 126 is
/// encoded, as is a space or tab before a line break or at the very end, and a `.` that
/// would start a line.
pub fn encode_piece(out: &mut Vec<u8>, text: &[u8], soft_end: bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    // Printable and never encoded (`.` only matters at the start of a line).
    let plain = |byte: u8| matches!(byte, 33..=60 | 62..=126);
    out.reserve(text.len() + text.len() / 16 + 8);
    let mut column = 0;
    let mut i = 0;
    while i < text.len() {
        let byte = text[i];
        // The common case: a run of plain bytes, as much of it as fits before a soft break.
        if plain(byte) && !(byte == b'.' && column == 0) {
            let run = text[i..]
                .iter()
                .take((LINE - 1).saturating_sub(column))
                .take_while(|&&b| plain(b))
                .count();
            if run > 0 {
                out.extend_from_slice(&text[i..i + run]);
                column += run;
                i += run;
                continue;
            }
        }
        let next = text.get(i + 1).copied();
        i += 1;
        if byte == b'\n' || (byte == b'\r' && next == Some(b'\n')) {
            if byte == b'\n' {
                out.extend_from_slice(b"\r\n");
                column = 0;
            }
            continue;
        }
        let line_ends_here = match next {
            None => !soft_end,
            Some(b'\n') => true,
            Some(b'\r') => text.get(i + 1) == Some(&b'\n'),
            Some(_) => false,
        };
        let literal = match byte {
            b' ' | b'\t' => !line_ends_here,
            _ => plain(byte),
        };
        let width = |column: usize| {
            if literal && !(byte == b'.' && column == 0) {
                1
            } else {
                3
            }
        };
        // Room for this byte and, unless the line ends right after it, a soft break.
        let room = if line_ends_here { LINE } else { LINE - 1 };
        if column + width(column) > room {
            out.extend_from_slice(b"=\r\n");
            column = 0;
        }
        if width(column) == 1 {
            out.push(byte);
            column += 1;
        } else {
            out.extend_from_slice(&[b'=', HEX[(byte >> 4) as usize], HEX[(byte & 15) as usize]]);
            column += 3;
        }
    }
    if soft_end {
        out.extend_from_slice(b"=\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(text: &str, soft_end: bool) -> String {
        let mut out = Vec::new();
        encode_piece(&mut out, text.as_bytes(), soft_end);
        String::from_utf8(out).unwrap()
    }

    /// RFC 2045 decoding, enough to check the encoder.
    fn decode(encoded: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let bytes = encoded.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'=' if bytes[i + 1..].starts_with(b"\r\n") => i += 3,
                b'=' if i + 1 == bytes.len() => i += 1,
                b'=' => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 3;
                }
                b'\r' if bytes.get(i + 1) == Some(&b'\n') => {
                    out.push(b'\n');
                    i += 2;
                }
                other => {
                    out.push(other);
                    i += 1;
                }
            }
        }
        out
    }

    fn assert_well_formed(encoded: &str) {
        for line in encoded.split("\r\n") {
            assert!(line.len() <= LINE, "line of {}: {line:?}", line.len());
            assert!(!line.starts_with('.'), "line starts with a dot: {line:?}");
            assert!(
                !line.ends_with(' ') && !line.ends_with('\t'),
                "trailing space: {line:?}"
            );
            assert!(line.bytes().all(|b| (32..127).contains(&b) || b == b'\t'));
        }
        assert!(!encoded.contains("=_"));
        assert!(!encoded.replace("\r\n", "").contains(['\r', '\n']));
    }

    #[test]
    fn round_trips_and_keeps_lines_short() {
        let long = "word ".repeat(40);
        let cases = [
            "",
            "a=b",
            "héllo wörld €",
            ".starts with a dot\n.and again\n..",
            "trailing space \nand tab\t\r\nend ",
            "-- \nUnsubscribe: https://x.example/u/1/abc",
            long.as_str(),
            &"=".repeat(100),
            &"é".repeat(60),
            "lone\rcarriage and \x00 nul \x7f del",
            "a\n\n\nb\r\n\r\n",
        ];
        for text in cases {
            for soft_end in [false, true] {
                let encoded = encode(text, soft_end);
                assert_well_formed(&encoded);
                let expected = text.replace("\r\n", "\n");
                assert_eq!(
                    String::from_utf8(decode(&encoded)).unwrap(),
                    expected,
                    "{encoded:?}"
                );
            }
        }
    }

    #[test]
    fn pieces_join_into_the_whole() {
        let parts = [
            "<a href=\"",
            "https://x.example/c/1/ab",
            "?u=y&t=z\">. x</a> ",
        ];
        let mut out = Vec::new();
        for (n, part) in parts.iter().enumerate() {
            encode_piece(&mut out, part.as_bytes(), n + 1 < parts.len());
        }
        let encoded = String::from_utf8(out).unwrap();
        assert_well_formed(&encoded);
        assert_eq!(decode(&encoded), parts.concat().into_bytes());
    }

    #[test]
    fn exact_forms() {
        assert_eq!(encode("a=b", false), "a=3Db");
        assert_eq!(encode(".x", false), "=2Ex");
        assert_eq!(encode("a \nb ", false), "a=20\r\nb=20");
        assert_eq!(encode("a ", true), "a =\r\n");
        assert_eq!(encode("", true), "=\r\n");
        // A full line of 76 ends in a byte, not a soft break, where the text's line ends.
        let line = "x".repeat(76);
        assert_eq!(encode(&line, false), line);
        assert_eq!(
            encode(&"x".repeat(77), false),
            format!("{}=\r\nxx", "x".repeat(75))
        );
    }
}
