//! The records of an imported CSV file with the line of the file each starts on, as an editor
//! or a spreadsheet numbers them (the header is line 1). The csv crate's own count
//! (`Position::line`) is one short on every line of a file with CRLF line ends (what
//! spreadsheets and Mailchimp export: the record ends at the `\r`, and its `\n` is counted
//! on the next one), off after each blank line (which it skips after noting the record's
//! start), and 1 throughout a file with lone CRs. So the bytes are counted here on their way
//! into the reader: a line ends at `\r\n`, `\n` or a lone `\r`, and a record's line is the
//! line of its first byte (a quoted cell over several lines moves the next record down as
//! many lines). Memory stays flat: a window of the last bytes read, twice the reader's
//! buffer; each byte is looked at a bounded number of times.
//!
//! Used by `domain::subscribers::import` for the import, the preview and the header check.

use std::io::Read;

use csv::{ByteRecord, Reader, ReaderBuilder};

/// The CSV reader's buffer: at most this many bytes have been read ahead of where it stands.
const READ_BUFFER: usize = 64 * 1024;
/// The bytes kept behind the reader: its buffer, and the byte before where it stands.
const WINDOW: usize = 2 * READ_BUFFER;

/// Whether byte `b`, after `before`, ends a line: `\r`, and `\n` unless it completes `\r\n`.
fn ends_line(before: Option<u8>, b: u8) -> bool {
    b == b'\r' || (b == b'\n' && before != Some(b'\r'))
}

/// The CSV records of an input, each with its line.
pub struct Rows<R: Read> {
    reader: Reader<Counted<R>>,
}

impl<R: Read> Rows<R> {
    pub fn new(input: R) -> Self {
        Rows {
            reader: ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .buffer_capacity(READ_BUFFER)
                .from_reader(Counted::new(input)),
        }
    }

    /// Reads the next record into `record`: the line it starts on, or `None` at the end.
    pub fn next(&mut self, record: &mut ByteRecord) -> csv::Result<Option<u64>> {
        let at = self.reader.position().byte();
        self.reader.get_mut().record_starts_at(at);
        if !self.reader.read_byte_record(record)? {
            return Ok(None);
        }
        Ok(Some(self.reader.get_ref().record_line()))
    }

    /// Bytes of the input read up to the end of the last record.
    pub fn bytes_read(&self) -> u64 {
        self.reader.position().byte()
    }
}

/// Where the search for a record's first byte stands: the CSV reader passes over line ends
/// (blank lines, the `\n` of a `\r\n`) before a record.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// Not yet seen: the bytes up to `next` are line ends, `lines_before` of them end lines
    /// (with those before the search began), and `last` is the byte before `next`.
    Looking {
        next: u64,
        lines_before: u64,
        last: Option<u8>,
    },
    /// The record starts on this line.
    Found(u64),
}

/// The input, passed on unchanged, with the last [`WINDOW`] bytes kept and the line ends
/// counted once each, behind the CSV reader.
struct Counted<R> {
    inner: R,
    /// A ring of the last bytes passed on: byte `i` of the input is at `i % WINDOW`.
    window: Box<[u8]>,
    /// Bytes passed on so far.
    passed: u64,
    /// Line ends are counted up to this byte (never past the next record's start)...
    counted_to: u64,
    /// ...there are this many before it...
    lines: u64,
    /// ...and this is the byte before it.
    last: Option<u8>,
    start: Start,
}

impl<R> Counted<R> {
    fn new(inner: R) -> Self {
        Counted {
            inner,
            window: vec![0; WINDOW].into_boxed_slice(),
            passed: 0,
            counted_to: 0,
            lines: 0,
            last: None,
            start: Start::Found(1),
        }
    }

    fn byte(&self, at: u64) -> u8 {
        self.window[(at % WINDOW as u64) as usize]
    }

    /// Counts the line ends up to byte `to` (which must still be in the window).
    fn count_to(&mut self, to: u64) {
        while self.counted_to < to {
            let at = (self.counted_to % WINDOW as u64) as usize;
            let run = ((to - self.counted_to) as usize).min(WINDOW - at);
            for &b in &self.window[at..at + run] {
                self.lines += ends_line(self.last, b) as u64;
                self.last = Some(b);
            }
            self.counted_to += run as u64;
        }
    }

    /// The reader stands at byte `at`, about to read a record: the record starts at the first
    /// byte from there that is not a line end.
    fn record_starts_at(&mut self, at: u64) {
        debug_assert!(at >= self.counted_to && self.passed - at <= READ_BUFFER as u64);
        self.count_to(at);
        self.start = Start::Looking {
            next: at,
            lines_before: self.lines,
            last: self.last,
        };
        self.look(self.passed);
    }

    /// Goes on looking for the record's first byte among the bytes passed, up to `to`.
    fn look(&mut self, to: u64) {
        while let Start::Looking {
            next,
            lines_before,
            last,
        } = self.start
        {
            if next >= to {
                return;
            }
            let b = self.byte(next);
            self.start = if b == b'\r' || b == b'\n' {
                Start::Looking {
                    next: next + 1,
                    lines_before: lines_before + ends_line(last, b) as u64,
                    last: Some(b),
                }
            } else {
                Start::Found(lines_before + 1)
            };
        }
    }

    /// The line of the record just read.
    fn record_line(&self) -> u64 {
        match self.start {
            Start::Found(line) => line,
            // A record always has a first byte: this is not reached.
            Start::Looking { lines_before, .. } => lines_before + 1,
        }
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // Never more than the reader's buffer at once, so the window keeps what it needs.
        let room = buf.len().min(READ_BUFFER);
        let read = self.inner.read(&mut buf[..room])?;
        // Bytes about to leave the window are counted first (the reader is past them).
        let end = self.passed + read as u64;
        let keep_from = end.saturating_sub(WINDOW as u64);
        if self.counted_to < keep_from {
            self.count_to(keep_from);
        }
        let at = (self.passed % WINDOW as u64) as usize;
        let first = read.min(WINDOW - at);
        self.window[at..at + first].copy_from_slice(&buf[..first]);
        self.window[..read - first].copy_from_slice(&buf[first..read]);
        self.passed = end;
        self.look(end);
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first cell of each record and its line.
    fn lines_of(input: &[u8]) -> Vec<(String, u64)> {
        let mut rows = Rows::new(input);
        let mut record = ByteRecord::new();
        let mut seen = Vec::new();
        while let Some(line) = rows.next(&mut record).unwrap() {
            seen.push((String::from_utf8_lossy(&record[0]).into_owned(), line));
        }
        seen
    }

    fn expect(input: &str, lines: &[(&str, u64)]) {
        let want: Vec<(String, u64)> = lines.iter().map(|(c, l)| (c.to_string(), *l)).collect();
        assert_eq!(lines_of(input.as_bytes()), want, "{input:?}");
    }

    #[test]
    fn lines_are_the_files_own_whatever_ends_them() {
        let rows = [("h", 1), ("a", 2), ("b", 3)];
        expect("h\na\nb\n", &rows);
        expect("h\na\nb", &rows);
        expect("h\r\na\r\nb\r\n", &rows);
        expect("h\ra\rb\r", &rows);
        expect("h\r\na\nb\r", &rows);
    }

    #[test]
    fn blank_lines_and_cells_over_several_lines_count() {
        expect("h\n\na\n\n\nb\n", &[("h", 1), ("a", 3), ("b", 6)]);
        expect("h\r\n\r\na\r\n", &[("h", 1), ("a", 3)]);
        expect("\n\nh\na\n", &[("h", 3), ("a", 4)]);
        expect(
            "h\n\"two\nlines\",x\nb\n\"three\r\nlines\r\nhere\"\nc\n",
            &[
                ("h", 1),
                ("two\nlines", 2),
                ("b", 4),
                ("three\r\nlines\r\nhere", 5),
                ("c", 8),
            ],
        );
    }

    /// Files much larger than the window, read through a reader that hands out a few bytes
    /// at a time: lines stay exact across its edges, with long records and long runs of
    /// blank lines among them.
    #[test]
    fn long_files_keep_their_count() {
        struct Trickle<'a>(&'a [u8], usize);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.1.min(buf.len()).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut file = String::from("email\r\n");
        let mut want = vec![("email".to_string(), 1u64)];
        let mut line = 2;
        for i in 0..5000u64 {
            let cell = match i % 500 {
                7 => "x".repeat(3 * WINDOW),
                9 => format!("\"{}\"", "y\r\n".repeat(WINDOW)),
                _ => format!("r{i}"),
            };
            want.push((cell.trim_matches('"').to_string(), line));
            line += 1 + cell.matches('\n').count() as u64;
            file.push_str(&cell);
            file.push_str("\r\n");
            if i % 1000 == 3 {
                file.push_str(&"\n".repeat(WINDOW + 5));
                line += WINDOW as u64 + 5;
            }
        }
        for step in [1 << 20, 7, 65_537] {
            let mut rows = Rows::new(Trickle(file.as_bytes(), step));
            let mut record = ByteRecord::new();
            let mut seen = Vec::new();
            while let Some(line) = rows.next(&mut record).unwrap() {
                seen.push((String::from_utf8_lossy(&record[0]).into_owned(), line));
            }
            assert_eq!(seen.len(), want.len());
            for (got, want) in seen.iter().zip(&want) {
                assert_eq!(
                    got.1,
                    want.1,
                    "{} (step {step})",
                    &want.0[..want.0.len().min(12)]
                );
                assert_eq!(got.0, want.0);
            }
            assert_eq!(rows.bytes_read(), file.len() as u64);
        }
    }
}
