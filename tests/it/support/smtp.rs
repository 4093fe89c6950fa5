//! A real SMTP listener on a loopback port that can fail the way relays do: it speaks enough
//! ESMTP for mail-send and keeps every message it takes, and on command it refuses chosen
//! recipients at RCPT (421, 451, 550) or after the end of the message (451, 550), resets the
//! connection in the middle of a message or after its end (not taking it), closes cleanly
//! after reading a whole message without answering, never answers, answers slowly, greets
//! with a refusal, or goes down altogether (its port closed, its connections cut) and comes
//! back.
//! It can also speak TLS (STARTTLS, or TLS from the first byte as on port 465) with a
//! certificate the test gives it, offer AUTH PLAIN, and it notes the session commands it
//! gets (EHLO, STARTTLS, AUTH, ...) so a test can see what went over the wire, and how.
//!
//! Self-contained (no other test module), so `examples/fault_soak.rs` runs the same sink as
//! a process of its own.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One accepted message.
#[derive(Debug, Clone)]
pub struct Received {
    pub from: String,
    pub to: Vec<String>,
    pub data: Vec<u8>,
    /// It came over TLS.
    pub tls: bool,
}

impl Received {
    /// The message parsed as MIME.
    pub fn parsed(&self) -> mail_parser::Message<'_> {
        mail_parser::MessageParser::default()
            .parse(&self.data)
            .expect("a parseable MIME message")
    }

    /// The text/plain body.
    pub fn text(&self) -> String {
        self.parsed()
            .body_text(0)
            .map(|t| t.into_owned())
            .unwrap_or_default()
    }

    /// The text/html body.
    pub fn html(&self) -> String {
        self.parsed()
            .body_html(0)
            .map(|t| t.into_owned())
            .unwrap_or_default()
    }

    /// A header's raw value, trimmed.
    pub fn header(&self, name: &str) -> Option<String> {
        self.parsed().header_raw(name).map(|v| v.trim().to_string())
    }
}

/// A fault played once on a message to one recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer RCPT with this code; 421 also hangs up, as RFC 5321 says.
    AtRcpt(u16),
    /// Answer the end of the message with this code: the message is not taken.
    AfterData(u16),
    /// Hang up right after inviting the message (354), before any of it arrives: not taken.
    DropAtData,
    /// Close the connection after about 1 KB of the message with the rest unread, as a relay
    /// process that gives up (or dies) mid-message does: its system answers with a reset
    /// (RST). Not taken.
    ResetMidData,
    /// Read the whole message and its end mark, then reset the connection without answering
    /// and without taking it.
    ResetAfterData,
    /// Take the message, then close the connection cleanly (FIN) without answering: the
    /// sender cannot know it was taken.
    DropAfterData,
    /// Take the message and never answer (the connection stays open until the client leaves).
    NoReply,
}

/// TLS the sink speaks, with the certificate of `config`.
#[derive(Debug, Clone)]
pub struct SinkTls {
    pub config: Arc<rustls::ServerConfig>,
    /// TLS from the first byte (`smtps://`); otherwise STARTTLS is offered on a plain start.
    pub implicit: bool,
}

/// A session command the sink received (not the commands of a message: MAIL, RCPT, DATA,
/// RSET, NOOP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The line as sent, AUTH arguments included.
    pub line: String,
    /// Whether it came over TLS.
    pub tls: bool,
}

/// How the listener answers; can be changed while it runs.
#[derive(Debug, Default, Clone)]
pub struct Rules {
    /// Recipients refused with 550 at RCPT.
    pub permanent: Vec<String>,
    /// Recipients refused with 451 this many more times, then accepted.
    pub temporary: HashMap<String, u32>,
    /// Pause before answering each end of message, to make a send take a while.
    pub delay: Duration,
    /// Leave PIPELINING out of the EHLO answer (it is offered by default, as real servers do).
    pub no_pipelining: bool,
    /// Faults to play, in order, on the next messages to each recipient.
    pub faults: HashMap<String, VecDeque<Fault>>,
    /// Reset the connection in the middle of every n-th message (0: never), counting all
    /// messages ([`Fault::ResetMidData`]).
    pub reset_every: u64,
    /// Reset the connection after the end of every n-th message, not taking it (0: never;
    /// [`Fault::ResetAfterData`]).
    pub reset_after_every: u64,
    /// Take every n-th message, then close the connection cleanly without answering (0:
    /// never; [`Fault::DropAfterData`]).
    pub close_after_every: u64,
    /// Greet with this code and hang up (421: too busy; 554: go away).
    pub greeting: Option<u16>,
    /// After refusing a message at its end, hold that connection: read the client's next
    /// command, note it ([`SmtpSink::held_after_refusal`]) and never answer it.
    pub hold_after_refusal: bool,
    /// Keep the envelope of each message but not its content (long soaks).
    pub discard_bodies: bool,
    /// Speak TLS; plain SMTP without STARTTLS when `None`.
    pub tls: Option<SinkTls>,
    /// Offer AUTH PLAIN and take any user name and password.
    pub auth: bool,
    /// Let at most this many recipients in during any one second (counted at RCPT); past it,
    /// refuse at RCPT with `451 4.7.0`, as a relay that throttles does.
    pub per_second: Option<u32>,
    /// Let at most this many recipients in (counted at RCPT); past it, refuse at RCPT with
    /// this quota's answer ([`Quota`]) until [`SmtpSink::renew_quota`].
    pub quota: Option<Quota>,
}

/// A relay's sending quota (a daily quota, renewed by the test).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub messages: u32,
    /// The answer past it: 451 (`4.7.0 daily sending quota exceeded`) or 550 (`5.4.5`, as
    /// Gmail answers).
    pub code: u16,
}

#[derive(Default)]
struct Shared {
    rules: Rules,
    received: Vec<Received>,
    /// RCPT and end-of-message refusals given so far: (address, code).
    refusals: Vec<(String, u16)>,
    /// Live sessions by number, to cut when the sink goes down.
    sessions: HashMap<u64, TcpStream>,
    next_session: u64,
    /// Messages begun (DATA answered with 354), for `drop_every`.
    begun: u64,
    /// Messages cut off mid-DATA, ended without an answer, or never answered.
    cut: Vec<(String, Fault)>,
    held: bool,
    commands: Vec<Command>,
    /// When each message was taken, as the sink's clock saw it.
    taken_at: Vec<Instant>,
    /// The second being counted for `per_second`, and how many were let in during it.
    this_second: Option<(Instant, u32)>,
    /// Messages taken against the quota since it was last renewed.
    quota_used: u32,
    /// Throttling and quota refusals given (`451 4.7.0`, the quota's answer).
    throttled: u32,
    /// What happened last to a message for each recipient, for the fault soak.
    last: HashMap<String, Ending>,
}

/// How a message to a recipient ended at the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Ending {
    /// Taken and answered.
    Taken,
    /// The connection was reset (mid-message or after its end) and the message not taken.
    Reset,
    /// Taken, then the connection closed cleanly without an answer.
    Closed,
}

/// The listener; runs until the test process ends.
#[derive(Clone)]
pub struct SmtpSink {
    pub port: u16,
    shared: Arc<Mutex<Shared>>,
    down: Arc<AtomicBool>,
}

impl SmtpSink {
    pub fn start() -> Self {
        Self::start_with(Rules::default())
    }

    pub fn start_with(rules: Rules) -> Self {
        Self::start_on(0, rules)
    }

    /// Listens on `port` (0 for any free one).
    pub fn start_on(port: u16, rules: Rules) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("binding the SMTP listener");
        let port = listener.local_addr().unwrap().port();
        let sink = SmtpSink {
            port,
            shared: Arc::new(Mutex::new(Shared {
                rules,
                ..Shared::default()
            })),
            down: Arc::new(AtomicBool::new(false)),
        };
        let for_thread = sink.clone();
        std::thread::spawn(move || for_thread.accept_loop(listener));
        sink
    }

    /// Accepts until the sink goes down; then waits, port closed, until it is up again.
    fn accept_loop(&self, listener: TcpListener) {
        let mut listener = Some(listener);
        loop {
            // Every handle but this thread's own is gone: the test is over, and the port
            // closes. (A sink left polling would wake a thousand times a second for the rest
            // of the run.)
            if Arc::strong_count(&self.down) == 1 {
                return;
            }
            if self.down.load(Ordering::SeqCst) {
                listener = None;
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            let Some(open) = listener.as_ref() else {
                // Back up: the same port again (SO_REUSEADDR is set by std on Unix).
                match TcpListener::bind(("127.0.0.1", self.port)) {
                    Ok(l) => {
                        l.set_nonblocking(true).unwrap();
                        listener = Some(l);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
                continue;
            };
            open.set_nonblocking(true).unwrap();
            match open.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).unwrap();
                    let number = {
                        let mut s = self.shared.lock().unwrap();
                        s.next_session += 1;
                        if let Ok(copy) = stream.try_clone() {
                            let number = s.next_session;
                            s.sessions.insert(number, copy);
                        }
                        s.next_session
                    };
                    let shared = self.shared.clone();
                    std::thread::spawn(move || {
                        let _ = session(stream, &shared);
                        shared.lock().unwrap().sessions.remove(&number);
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    pub fn set_rules(&self, rules: Rules) {
        self.shared.lock().unwrap().rules = rules;
    }

    /// Changes the rules in place.
    pub fn change_rules(&self, change: impl FnOnce(&mut Rules)) {
        change(&mut self.shared.lock().unwrap().rules);
    }

    /// Plays `faults`, in order, on the next messages to `email`.
    pub fn add_faults(&self, email: &str, faults: &[Fault]) {
        self.change_rules(|r| {
            r.faults
                .entry(email.to_lowercase())
                .or_default()
                .extend(faults.iter().copied())
        });
    }

    /// The relay goes down: its port refuses connections and open ones are cut.
    pub fn go_down(&self) {
        self.down.store(true, Ordering::SeqCst);
        for (_, session) in self.shared.lock().unwrap().sessions.drain() {
            let _ = session.shutdown(Shutdown::Both);
        }
        // Wait until the port is closed, so a test's next step sees it down.
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The relay comes back on the same port.
    pub fn go_up(&self) {
        self.down.store(false, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "the sink could not listen again");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Every message accepted so far.
    pub fn messages(&self) -> Vec<Received> {
        self.shared.lock().unwrap().received.clone()
    }

    /// How many messages each recipient got.
    pub fn counts(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for message in self.shared.lock().unwrap().received.iter() {
            for to in &message.to {
                *counts.entry(to.clone()).or_default() += 1;
            }
        }
        counts
    }

    /// Messages addressed to `email`.
    pub fn messages_to(&self, email: &str) -> Vec<Received> {
        self.messages()
            .into_iter()
            .filter(|m| m.to.iter().any(|t| t.eq_ignore_ascii_case(email)))
            .collect()
    }

    /// Waits until at least `n` messages went to `email`; returns the last.
    pub fn wait_for_message_to(&self, email: &str, n: usize) -> Received {
        wait_for(
            &format!("message {n} to {email}"),
            Duration::from_secs(20),
            || {
                let m = self.messages_to(email);
                (m.len() >= n).then(|| m[n - 1].clone())
            },
        )
    }

    /// Waits until `n` messages in all were accepted.
    pub fn wait_for_count(&self, n: usize, timeout: Duration) -> Vec<Received> {
        wait_for(&format!("{n} messages"), timeout, || {
            let m = self.messages();
            (m.len() >= n).then_some(m)
        })
    }

    /// Refusals given so far, at RCPT or after the message: (address, code).
    pub fn refusals(&self) -> Vec<(String, u16)> {
        self.shared.lock().unwrap().refusals.clone()
    }

    /// Messages the sink cut off or left unanswered: (address, fault).
    pub fn cut(&self) -> Vec<(String, Fault)> {
        self.shared.lock().unwrap().cut.clone()
    }

    /// Whether a connection sent a command after a refusal at the end of a message (with
    /// [`Rules::hold_after_refusal`]).
    pub fn held_after_refusal(&self) -> bool {
        self.shared.lock().unwrap().held
    }

    /// The session commands received so far, in order.
    pub fn commands(&self) -> Vec<Command> {
        self.shared.lock().unwrap().commands.clone()
    }

    /// The most messages taken within any one second (a sliding window).
    pub fn busiest_second(&self) -> usize {
        let taken = self.shared.lock().unwrap().taken_at.clone();
        let mut most = 0;
        let mut start = 0;
        for end in 0..taken.len() {
            while taken[end].duration_since(taken[start]) >= Duration::from_secs(1) {
                start += 1;
            }
            most = most.max(end - start + 1);
        }
        most
    }

    /// The time from the message taken `first` (0 for the first) to the last.
    pub fn taken_span_from(&self, first: usize) -> Duration {
        let taken = &self.shared.lock().unwrap().taken_at;
        match (taken.get(first), taken.last()) {
            (Some(first), Some(last)) => last.duration_since(*first),
            _ => Duration::ZERO,
        }
    }

    /// Throttling and quota refusals given so far.
    pub fn throttled(&self) -> u32 {
        self.shared.lock().unwrap().throttled
    }

    /// How the last message to each recipient ended.
    pub fn endings(&self) -> HashMap<String, Ending> {
        self.shared.lock().unwrap().last.clone()
    }

    /// A new quota period: the quota's messages may be taken again.
    pub fn renew_quota(&self) {
        self.shared.lock().unwrap().quota_used = 0;
    }
}

/// The refusal a relay that throttles gives at RCPT, if this message is one too many: past
/// its quota, or past its messages per second.
fn throttle(s: &mut Shared) -> Option<String> {
    if let Some(quota) = s.rules.quota
        && s.quota_used >= quota.messages
    {
        s.throttled += 1;
        return Some(if quota.code >= 500 {
            format!("{} 5.4.5 Daily user sending quota exceeded\r\n", quota.code)
        } else {
            format!("{} 4.7.0 Daily sending quota exceeded\r\n", quota.code)
        });
    }
    if let Some(limit) = s.rules.per_second {
        let now = Instant::now();
        let (start, count) = match s.this_second {
            Some((start, count)) if now.duration_since(start) < Duration::from_secs(1) => {
                (start, count)
            }
            _ => (now, 0),
        };
        if count >= limit {
            s.this_second = Some((start, count));
            s.throttled += 1;
            return Some("451 4.7.0 Too many messages, slow down\r\n".into());
        }
        s.this_second = Some((start, count + 1));
    }
    s.quota_used += 1;
    None
}

/// A byte stream a session can run over: the TCP socket, or TLS on it.
trait Duplex: Read + Write + Send {}
impl<T: Read + Write + Send> Duplex for T {}

/// One session's connection, plain or TLS, shared by its reader and its writer (the session
/// is one thread that never reads and writes at once, so the lock is never contended).
#[derive(Clone)]
struct Wire {
    stream: Arc<Mutex<Box<dyn Duplex>>>,
    tcp: Arc<TcpStream>,
}

impl Wire {
    fn new(tcp: TcpStream) -> std::io::Result<Self> {
        Ok(Wire {
            stream: Arc::new(Mutex::new(Box::new(tcp.try_clone()?))),
            tcp: Arc::new(tcp),
        })
    }

    /// From now on TLS, on the same socket; the handshake runs on the next read or write.
    fn start_tls(&self, config: &Arc<rustls::ServerConfig>) -> std::io::Result<()> {
        let server =
            rustls::ServerConnection::new(config.clone()).map_err(std::io::Error::other)?;
        *self.stream.lock().unwrap() =
            Box::new(rustls::StreamOwned::new(server, self.tcp.try_clone()?));
        Ok(())
    }

    fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        self.tcp.shutdown(how)
    }
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.stream.lock().unwrap().read(buf)
    }
}

impl Write for Wire {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.stream.lock().unwrap().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.lock().unwrap().flush()
    }
}

/// Makes the socket's close a reset (RST) instead of a clean close (SO_LINGER with a zero
/// timeout), as when a process closes a socket with data still unread; the session then
/// returns, and the last of its handles closes the socket.
fn reset_on_close(tcp: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a `linger` of the size given.
    let done = unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(done, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
}

/// Polls `check` until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn address(arg: &str) -> String {
    let arg = arg.trim();
    let start = arg.find('<').map(|i| i + 1).unwrap_or(0);
    let end = arg.rfind('>').unwrap_or(arg.len());
    arg[start..end.max(start)].trim().to_lowercase()
}

/// The next fault for the message to `to`, from the per-recipient list or `drop_every`.
fn next_fault(s: &mut Shared, to: &[String], at: fn(&Fault) -> bool) -> Option<Fault> {
    for rcpt in to {
        if let Some(queue) = s.rules.faults.get_mut(rcpt)
            && queue.front().is_some_and(at)
        {
            return queue.pop_front();
        }
    }
    None
}

fn session(stream: TcpStream, shared: &Mutex<Shared>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    // Each reply is its own write; without this, Nagle holds the second of a pipelined
    // envelope's replies for the client's delayed ACK (40 ms a message).
    stream.set_nodelay(true)?;
    let mut out = Wire::new(stream)?;
    let tls = shared.lock().unwrap().rules.tls.clone();
    let mut secure = false;
    if let Some(implicit) = tls.as_ref().filter(|t| t.implicit) {
        out.start_tls(&implicit.config)?;
        secure = true;
    }
    let mut reader = BufReader::new(out.clone());
    if let Some(code) = shared.lock().unwrap().rules.greeting {
        out.write_all(format!("{code} test-sink not available\r\n").as_bytes())?;
        return Ok(());
    }
    out.write_all(b"220 test-sink ESMTP\r\n")?;
    let (mut from, mut to) = (String::new(), Vec::<String>::new());
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_string();
        let upper = command.to_ascii_uppercase();
        if !["MAIL", "RCPT", "DATA", "RSET", "NOOP"]
            .iter()
            .any(|verb| upper.starts_with(verb))
        {
            shared.lock().unwrap().commands.push(Command {
                line: command.clone(),
                tls: secure,
            });
        }
        if upper.starts_with("EHLO") {
            let (no_pipelining, auth) = {
                let rules = &shared.lock().unwrap().rules;
                (rules.no_pipelining, rules.auth)
            };
            let mut lines = vec!["test-sink"];
            if !no_pipelining {
                lines.push("PIPELINING");
            }
            if tls.is_some() && !secure {
                lines.push("STARTTLS");
            }
            if auth {
                lines.push("AUTH PLAIN");
            }
            lines.extend(["8BITMIME", "SIZE 52428800"]);
            let last = lines.len() - 1;
            let reply: String = lines
                .iter()
                .enumerate()
                .map(|(n, l)| format!("250{}{l}\r\n", if n == last { ' ' } else { '-' }))
                .collect();
            out.write_all(reply.as_bytes())?;
        } else if upper == "STARTTLS" && !secure && tls.is_some() {
            out.write_all(b"220 2.0.0 Ready to start TLS\r\n")?;
            out.start_tls(&tls.as_ref().unwrap().config)?;
            secure = true;
            // Anything sent before the handshake is discarded (RFC 3207), and so is the
            // session so far.
            reader = BufReader::new(out.clone());
            (from, to) = (String::new(), Vec::new());
        } else if upper.starts_with("AUTH PLAIN") && shared.lock().unwrap().rules.auth {
            out.write_all(b"235 2.7.0 Authentication successful\r\n")?;
        } else if upper.starts_with("HELO") {
            out.write_all(b"250 test-sink\r\n")?;
        } else if upper.starts_with("MAIL FROM:") {
            from = address(&command[10..]);
            to.clear();
            out.write_all(b"250 2.1.0 OK\r\n")?;
        } else if upper.starts_with("RCPT TO:") {
            let rcpt = address(&command[8..]);
            let throttled = throttle(&mut shared.lock().unwrap());
            if let Some(answer) = throttled {
                out.write_all(answer.as_bytes())?;
                continue;
            }
            let code = {
                let mut s = shared.lock().unwrap();
                let fault = next_fault(&mut s, std::slice::from_ref(&rcpt), |f| {
                    matches!(f, Fault::AtRcpt(_))
                });
                let code = if let Some(Fault::AtRcpt(code)) = fault {
                    code
                } else if s
                    .rules
                    .permanent
                    .iter()
                    .any(|p| p.eq_ignore_ascii_case(&rcpt))
                {
                    550
                } else if let Some(left) = s.rules.temporary.get_mut(&rcpt).filter(|n| **n > 0) {
                    *left -= 1;
                    451
                } else {
                    250
                };
                if code != 250 {
                    s.refusals.push((rcpt.clone(), code));
                }
                code
            };
            match code {
                250 => {
                    to.push(rcpt);
                    out.write_all(b"250 2.1.5 OK\r\n")?
                }
                421 => {
                    out.write_all(b"421 4.3.2 Closing the connection\r\n")?;
                    return Ok(());
                }
                code if code >= 500 => {
                    out.write_all(format!("{code} 5.1.1 No such user here\r\n").as_bytes())?
                }
                code => out.write_all(format!("{code} 4.3.0 Try again later\r\n").as_bytes())?,
            }
        } else if upper == "DATA" {
            if to.is_empty() {
                out.write_all(b"554 5.5.1 No valid recipients\r\n")?;
                continue;
            }
            let fault = {
                let mut s = shared.lock().unwrap();
                s.begun += 1;
                let begun = s.begun;
                let every = |n: u64| n > 0 && begun.is_multiple_of(n);
                let fault = next_fault(&mut s, &to, |f| !matches!(f, Fault::AtRcpt(_)));
                fault
                    .or(every(s.rules.reset_every).then_some(Fault::ResetMidData))
                    .or(every(s.rules.reset_after_every).then_some(Fault::ResetAfterData))
                    .or(every(s.rules.close_after_every).then_some(Fault::DropAfterData))
            };
            out.write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")?;
            if fault == Some(Fault::DropAtData) {
                shared
                    .lock()
                    .unwrap()
                    .cut
                    .push((to[0].clone(), Fault::DropAtData));
                let _ = out.shutdown(Shutdown::Both);
                return Ok(());
            }
            let mut data = Vec::new();
            let mut raw = Vec::new();
            loop {
                raw.clear();
                if reader.read_until(b'\n', &mut raw)? == 0 {
                    return Ok(());
                }
                if raw == b".\r\n" || raw == b".\n" {
                    break;
                }
                let unstuffed = if raw.starts_with(b"..") {
                    &raw[1..]
                } else {
                    &raw[..]
                };
                data.extend_from_slice(unstuffed);
                if fault == Some(Fault::ResetMidData) && data.len() >= 1024 {
                    let mut s = shared.lock().unwrap();
                    s.cut.push((to[0].clone(), Fault::ResetMidData));
                    s.last.insert(to[0].clone(), Ending::Reset);
                    drop(s);
                    reset_on_close(&out.tcp);
                    return Ok(());
                }
            }
            if fault == Some(Fault::ResetAfterData) {
                let mut s = shared.lock().unwrap();
                s.cut.push((to[0].clone(), Fault::ResetAfterData));
                s.last.insert(to[0].clone(), Ending::Reset);
                drop(s);
                reset_on_close(&out.tcp);
                return Ok(());
            }
            let delay = shared.lock().unwrap().rules.delay;
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            if let Some(Fault::AfterData(code)) = fault {
                let hold = {
                    let mut s = shared.lock().unwrap();
                    s.refusals.push((to[0].clone(), code));
                    s.rules.hold_after_refusal
                };
                let text = if code >= 500 {
                    "5.7.1 Message refused"
                } else {
                    "4.3.0 Try again later"
                };
                out.write_all(format!("{code} {text}\r\n").as_bytes())?;
                to.clear();
                if hold {
                    line.clear();
                    let got = reader.read_line(&mut line)?;
                    if got > 0 {
                        shared.lock().unwrap().held = true;
                    }
                    // Never answer: wait for the client to leave.
                    let mut rest = String::new();
                    while reader.read_line(&mut rest)? > 0 {
                        rest.clear();
                    }
                    return Ok(());
                }
                continue;
            }
            {
                let mut s = shared.lock().unwrap();
                if s.rules.discard_bodies {
                    data = Vec::new();
                }
                s.received.push(Received {
                    from: from.clone(),
                    to: std::mem::take(&mut to),
                    data,
                    tls: secure,
                });
                s.taken_at.push(Instant::now());
                let ending = if fault == Some(Fault::DropAfterData) {
                    Ending::Closed
                } else {
                    Ending::Taken
                };
                for rcpt in &s.received.last().unwrap().to.clone() {
                    s.last.insert(rcpt.clone(), ending);
                }
                if let Some(f @ (Fault::DropAfterData | Fault::NoReply)) = fault {
                    let rcpt = s.received.last().unwrap().to[0].clone();
                    s.cut.push((rcpt, f));
                }
            }
            match fault {
                Some(Fault::DropAfterData) => {
                    let _ = out.shutdown(Shutdown::Both);
                    return Ok(());
                }
                Some(Fault::NoReply) => {
                    let mut rest = String::new();
                    while reader.read_line(&mut rest)? > 0 {
                        rest.clear();
                    }
                    return Ok(());
                }
                _ => out.write_all(b"250 2.0.0 Queued\r\n")?,
            }
        } else if upper == "RSET" {
            to.clear();
            out.write_all(b"250 2.0.0 OK\r\n")?;
        } else if upper == "NOOP" {
            out.write_all(b"250 2.0.0 OK\r\n")?;
        } else if upper == "QUIT" {
            out.write_all(b"221 2.0.0 Bye\r\n")?;
            return Ok(());
        } else {
            out.write_all(b"502 5.5.2 Command not recognised\r\n")?;
        }
    }
}
