//! The bounce listener (`serve --bounce-listen`): a small SMTP server, run as tasks of the
//! server's runtime, that takes the bounces and complaints mailed back to the return paths of
//! sent issues (`domain::delivery::verp`) and nothing else. It accepts a recipient only if it is a valid
//! `bounce+<token>@<bounce domain>` address (550 for any other: it never relays), one per
//! message; it offers no AUTH and no STARTTLS; a message is capped at the report parser's
//! 1 MiB (`SIZE` in the EHLO answer, 552 past it); every command and the whole session have a
//! time limit (421 and the connection closed); sessions are capped in all and per client
//! (421 for one more), so one client cannot hold them all.
//!
//! Written here rather than taken from a crate: the embeddable SMTP servers for Rust are
//! either unmaintained or bring their own runtime or TLS provider, and the part needed is the
//! small dialog of RFC 5321 a bounce-sending MTA speaks (EHLO/HELO, MAIL, RCPT, DATA with
//! dot-unstuffing, RSET, NOOP, QUIT). The message is read by `mail-parser`, on the database's
//! blocking thread, through `tracking::apply_raw_report`, the path of every raw report.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::domain::delivery::bounce_report::MAX_REPORT_BYTES;
use crate::domain::delivery::tracking::{self, ReportAbout};
use crate::domain::delivery::verp::ReturnPaths;
use crate::domain::{DomainError, DomainResult};
use crate::net::{ConnectionCaps, Over, Places};
use crate::store::Db;

/// The longest command line taken (RFC 5321 allows 512 octets; some clients send more).
const MAX_COMMAND: usize = 1000;

/// Sessions served at once; one more is told 421 and closed.
const MAX_SESSIONS: usize = 32;

/// Sessions served at once for one client (an IPv4 address, or an IPv6 /64); one more is told
/// 421 and closed. A bounce-sending MTA opens a few at most and tries again later on a 421.
pub const MAX_SESSIONS_PER_CLIENT: usize = 8;

/// Refused commands after which a session is closed.
const MAX_ERRORS: u32 = 10;

/// What the listener needs: the return paths it accepts and its time limits.
#[derive(Clone)]
pub struct ListenerSettings {
    pub return_paths: ReturnPaths,
    /// How long the client may take to send one command, or one line of a message.
    pub command_timeout: Duration,
    /// How long a whole session may last.
    pub session_timeout: Duration,
}

/// Serves `listener` until the runtime stops.
pub async fn run(listener: TcpListener, settings: ListenerSettings, db: Db) {
    let settings = Arc::new(settings);
    let sessions = Places::new(ConnectionCaps {
        per_client: MAX_SESSIONS_PER_CLIENT,
        total: MAX_SESSIONS,
        exempt: Vec::new(),
    });
    loop {
        let (mut socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, most likely: give the sessions a moment to end.
                eprintln!("bounces: cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        let place = match sessions.take(peer.ip()) {
            Ok(place) => place,
            Err(over) => {
                let (code, why) = match over {
                    Over::Client => ("4.7.0", "too many sessions from your address"),
                    Over::Total => ("4.3.2", "busy"),
                };
                let busy = format!(
                    "421 {code} {} {why}, try later\r\n",
                    settings.return_paths.domain()
                );
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(
                        Duration::from_secs(1),
                        socket.write_all(busy.as_bytes()),
                    )
                    .await;
                });
                continue;
            }
        };
        let (settings, db) = (settings.clone(), db.clone());
        tokio::spawn(async move {
            Session::new(socket, &settings, db).serve().await;
            drop(place);
        });
    }
}

/// One line read from the client.
enum Line {
    Complete,
    /// Longer than the cap: the rest up to the newline was read and dropped.
    TooLong,
    /// The client closed the connection.
    Closed,
}

/// Reads one line (with its newline) into `line`, keeping at most `cap` bytes of it.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::Closed);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        let room = cap.saturating_sub(line.len());
        too_long |= chunk.len() > room;
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = chunk.len();
        reader.consume(used);
        if done {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

/// Why a session ended early.
enum Cut {
    /// A time limit passed: 421 is said before closing.
    TimedOut,
    /// The client went away or the connection broke.
    Gone,
}

/// The SMTP transaction under way.
#[derive(Default)]
struct Transaction {
    mail: bool,
    delivery: Option<i64>,
}

struct Session<'a> {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    settings: &'a ListenerSettings,
    db: Db,
    ends_at: Instant,
    greeted: bool,
    transaction: Transaction,
    errors: u32,
}

impl<'a> Session<'a> {
    fn new(socket: TcpStream, settings: &'a ListenerSettings, db: Db) -> Self {
        let (read, writer) = socket.into_split();
        Session {
            reader: BufReader::new(read),
            writer,
            settings,
            db,
            ends_at: Instant::now() + settings.session_timeout,
            greeted: false,
            transaction: Transaction::default(),
            errors: 0,
        }
    }

    fn domain(&self) -> &str {
        self.settings.return_paths.domain()
    }

    /// The dialog, until QUIT, a time limit, too many errors, or the client leaves.
    async fn serve(mut self) {
        let greeting = format!("220 {} ESMTP Broadsheet bounce listener", self.domain());
        let ended = match self.reply(&greeting).await {
            Ok(()) => self.commands().await,
            Err(cut) => Err(cut),
        };
        if let Err(Cut::TimedOut) = ended {
            let bye = format!("421 4.4.2 {} time limit reached, closing", self.domain());
            let _ = self.reply(&bye).await;
        }
        let _ = self.writer.shutdown().await;
    }

    /// The deadline of the next read: the command limit, within the session's.
    fn deadline(&self) -> Instant {
        (Instant::now() + self.settings.command_timeout).min(self.ends_at)
    }

    async fn reply(&mut self, text: &str) -> Result<(), Cut> {
        let line = format!("{text}\r\n");
        let deadline = self.deadline();
        match tokio::time::timeout_at(deadline, write_all(&mut self.writer, line.as_bytes())).await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Cut::Gone),
            Err(_) => Err(Cut::TimedOut),
        }
    }

    async fn read(&mut self, line: &mut Vec<u8>, cap: usize) -> Result<Line, Cut> {
        let deadline = self.deadline();
        match tokio::time::timeout_at(deadline, read_line(&mut self.reader, line, cap)).await {
            Ok(Ok(Line::Closed)) | Ok(Err(_)) => Err(Cut::Gone),
            Ok(Ok(read)) => Ok(read),
            Err(_) => Err(Cut::TimedOut),
        }
    }

    /// A refused command; past [`MAX_ERRORS`] the session ends.
    async fn refuse(&mut self, text: &str) -> Result<(), Cut> {
        self.errors += 1;
        self.reply(text).await?;
        if self.errors >= MAX_ERRORS {
            let bye = format!("421 4.7.0 {} too many errors, closing", self.domain());
            self.reply(&bye).await?;
            return Err(Cut::Gone);
        }
        Ok(())
    }

    async fn commands(&mut self) -> Result<(), Cut> {
        let mut line = Vec::new();
        loop {
            if let Line::TooLong = self.read(&mut line, MAX_COMMAND).await? {
                self.refuse("500 5.5.2 line too long").await?;
                continue;
            }
            let text = String::from_utf8_lossy(&line).trim_end().to_string();
            let (verb, rest) = text.split_once(' ').unwrap_or((&text, ""));
            match verb.to_ascii_uppercase().as_str() {
                "EHLO" => {
                    self.greeted = true;
                    self.transaction = Transaction::default();
                    let answer = format!(
                        "250-{}\r\n250-SIZE {MAX_REPORT_BYTES}\r\n250-8BITMIME\r\n250 ENHANCEDSTATUSCODES",
                        self.domain()
                    );
                    self.reply(&answer).await?;
                }
                "HELO" => {
                    self.greeted = true;
                    self.transaction = Transaction::default();
                    let answer = format!("250 {}", self.domain());
                    self.reply(&answer).await?;
                }
                "MAIL" => self.mail(rest).await?,
                "RCPT" => self.rcpt(rest).await?,
                "DATA" => self.data().await?,
                "RSET" => {
                    self.transaction = Transaction::default();
                    self.reply("250 2.0.0 OK").await?;
                }
                "NOOP" => self.reply("250 2.0.0 OK").await?,
                "QUIT" => {
                    let bye = format!("221 2.0.0 {} closing", self.domain());
                    self.reply(&bye).await?;
                    return Ok(());
                }
                _ => self.refuse("502 5.5.1 command not implemented").await?,
            }
        }
    }

    async fn mail(&mut self, rest: &str) -> Result<(), Cut> {
        if !self.greeted {
            return self.refuse("503 5.5.1 say EHLO first").await;
        }
        if self.transaction.mail {
            return self.refuse("503 5.5.1 a transaction is under way").await;
        }
        let Some(parameters) = path_argument(rest, "FROM:").map(|(_, params)| params) else {
            return self.refuse("501 5.5.4 syntax: MAIL FROM:<address>").await;
        };
        let declared = parameters.split_whitespace().find_map(|p| {
            let (name, value) = p.split_once('=')?;
            name.eq_ignore_ascii_case("SIZE")
                .then(|| value.parse::<u64>().ok())
                .flatten()
        });
        if declared.is_some_and(|size| size > MAX_REPORT_BYTES as u64) {
            return self
                .refuse("552 5.3.4 message larger than this server takes")
                .await;
        }
        self.transaction.mail = true;
        self.reply("250 2.1.0 OK").await
    }

    async fn rcpt(&mut self, rest: &str) -> Result<(), Cut> {
        if !self.transaction.mail {
            return self.refuse("503 5.5.1 MAIL first").await;
        }
        let Some((address, _)) = path_argument(rest, "TO:") else {
            return self.refuse("501 5.5.4 syntax: RCPT TO:<address>").await;
        };
        if self.transaction.delivery.is_some() {
            // One message, one delivery: the client sends the rest in another transaction.
            return self.reply("452 4.5.3 one recipient per message").await;
        }
        match self.settings.return_paths.delivery_of(&address) {
            Some(delivery_id) => {
                self.transaction.delivery = Some(delivery_id);
                self.reply("250 2.1.5 OK").await
            }
            None => self.refuse("550 5.1.1 no such recipient here").await,
        }
    }

    async fn data(&mut self) -> Result<(), Cut> {
        if !self.transaction.mail {
            return self.refuse("503 5.5.1 MAIL first").await;
        }
        let Some(delivery_id) = self.transaction.delivery else {
            return self.refuse("554 5.5.1 no valid recipient").await;
        };
        self.reply("354 end with <CRLF>.<CRLF>").await?;
        let mut message = Vec::new();
        let mut too_large = false;
        let mut line = Vec::new();
        loop {
            // One byte past the cap is enough to know the message is too large.
            let room = (MAX_REPORT_BYTES + 1).saturating_sub(message.len());
            let read = self.read(&mut line, room.max(3)).await?;
            if matches!(read, Line::Complete) && matches!(line.as_slice(), b".\r\n" | b".\n") {
                break;
            }
            let unstuffed = line.strip_prefix(b".").unwrap_or(&line);
            too_large |= matches!(read, Line::TooLong) || unstuffed.len() > room;
            if !too_large {
                message.extend_from_slice(unstuffed);
            }
        }
        self.transaction = Transaction::default();
        if too_large {
            return self
                .reply("552 5.3.4 message larger than this server takes")
                .await;
        }
        let answer = match self.apply(delivery_id, message).await {
            Ok(()) => "250 2.0.0 OK",
            Err(e) => {
                eprintln!("bounces: a report for delivery {delivery_id} could not be stored: {e}");
                "451 4.3.0 cannot store the report now, try later"
            }
        };
        self.reply(answer).await
    }

    /// Applies the message to the delivery on the database's blocking thread and logs what
    /// it did; a message that is not a report, or about a delivery that no longer exists, is
    /// logged and kept out of the data.
    async fn apply(&self, delivery_id: i64, message: Vec<u8>) -> DomainResult<()> {
        let outcome = self
            .db
            .run(move |conn| {
                tracking::apply_raw_report(conn, ReportAbout::Delivery(delivery_id), &message)
            })
            .await;
        match outcome {
            Ok(Ok(applied)) => {
                eprintln!(
                    "bounces: delivery {delivery_id}: bounced {:?}, soft bounce {:?}, complaint {:?}",
                    applied.bounced, applied.soft, applied.complained
                );
                Ok(())
            }
            Ok(Err(why)) => {
                eprintln!(
                    "bounces: a message to delivery {delivery_id}'s return path was ignored: {why}"
                );
                Ok(())
            }
            Err(DomainError::NotFound(_)) => {
                eprintln!(
                    "bounces: a report for delivery {delivery_id}, which no longer exists, was ignored"
                );
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

async fn write_all<W: AsyncWrite + Unpin>(writer: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    writer.write_all(bytes).await?;
    writer.flush().await
}

/// `FROM:<path> params` (after MAIL) or `TO:<path> params` (after RCPT): the path without
/// its angle brackets, and the parameters.
fn path_argument<'t>(rest: &'t str, keyword: &str) -> Option<(String, &'t str)> {
    let rest = rest.trim_start();
    let head = rest.get(..keyword.len())?;
    if !head.eq_ignore_ascii_case(keyword) {
        return None;
    }
    let rest = rest[keyword.len()..].trim_start();
    let inner = rest.strip_prefix('<')?;
    let (path, params) = inner.split_once('>')?;
    Some((path.to_string(), params.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_paths_and_parameters() {
        assert_eq!(
            path_argument("FROM:<> SIZE=10", "FROM:"),
            Some((String::new(), "SIZE=10"))
        );
        assert_eq!(
            path_argument("to: <A@b.example>", "TO:"),
            Some(("A@b.example".to_string(), ""))
        );
        assert_eq!(path_argument("TO:a@b", "TO:"), None);
        assert_eq!(path_argument("FROM:<a@b>", "TO:"), None);
    }

    #[tokio::test]
    async fn a_line_past_the_cap_is_read_whole_and_kept_short() {
        let mut input: &[u8] = b"0123456789\r\nok\r\npartial";
        let mut line = Vec::new();
        assert!(matches!(
            read_line(&mut input, &mut line, 4).await.unwrap(),
            Line::TooLong
        ));
        assert_eq!(line, b"0123");
        assert!(matches!(
            read_line(&mut input, &mut line, 4).await.unwrap(),
            Line::Complete
        ));
        assert_eq!(line, b"ok\r\n");
        assert!(matches!(
            read_line(&mut input, &mut line, 4).await.unwrap(),
            Line::Closed
        ));
    }
}
