//! A real SMTP listener on a random loopback port: it speaks enough ESMTP for mail-send,
//! keeps every message it accepts, and can refuse chosen recipients permanently (550) or
//! for a number of tries (451), or answer slowly.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One accepted message.
#[derive(Debug, Clone)]
pub struct Received {
    pub from: String,
    pub to: Vec<String>,
    pub data: Vec<u8>,
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

/// How the listener answers; can be changed while it runs.
#[derive(Debug, Default, Clone)]
pub struct Rules {
    /// Recipients refused with 550 at RCPT.
    pub permanent: Vec<String>,
    /// Recipients refused with 451 this many more times, then accepted.
    pub temporary: HashMap<String, u32>,
    /// Pause before answering each DATA, to make a send take a while.
    pub delay: Duration,
    /// Leave PIPELINING out of the EHLO answer (it is offered by default, as real servers do).
    pub no_pipelining: bool,
}

#[derive(Default)]
struct Shared {
    rules: Rules,
    received: Vec<Received>,
    /// RCPT replies given, per address: (code, count).
    refusals: Vec<(String, u16)>,
}

/// The listener; runs until the test process ends.
#[derive(Clone)]
pub struct SmtpSink {
    pub port: u16,
    shared: Arc<Mutex<Shared>>,
}

impl SmtpSink {
    pub fn start() -> Self {
        Self::start_with(Rules::default())
    }

    pub fn start_with(rules: Rules) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the SMTP listener");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Mutex::new(Shared {
            rules,
            ..Shared::default()
        }));
        let for_thread = shared.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = for_thread.clone();
                std::thread::spawn(move || {
                    let _ = session(stream, &shared);
                });
            }
        });
        SmtpSink { port, shared }
    }

    pub fn set_rules(&self, rules: Rules) {
        self.shared.lock().unwrap().rules = rules;
    }

    /// Every message accepted so far.
    pub fn messages(&self) -> Vec<Received> {
        self.shared.lock().unwrap().received.clone()
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
        super::app::wait_for(
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
        super::app::wait_for(&format!("{n} messages"), timeout, || {
            let m = self.messages();
            (m.len() >= n).then_some(m)
        })
    }

    /// RCPT refusals given so far: (address, code).
    pub fn refusals(&self) -> Vec<(String, u16)> {
        self.shared.lock().unwrap().refusals.clone()
    }
}

fn address(arg: &str) -> String {
    let arg = arg.trim();
    let start = arg.find('<').map(|i| i + 1).unwrap_or(0);
    let end = arg.rfind('>').unwrap_or(arg.len());
    arg[start..end.max(start)].trim().to_lowercase()
}

fn session(stream: TcpStream, shared: &Mutex<Shared>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
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
        if upper.starts_with("EHLO") {
            if shared.lock().unwrap().rules.no_pipelining {
                out.write_all(b"250-test-sink\r\n250-8BITMIME\r\n250 SIZE 52428800\r\n")?;
            } else {
                out.write_all(
                    b"250-test-sink\r\n250-PIPELINING\r\n250-8BITMIME\r\n250 SIZE 52428800\r\n",
                )?;
            }
        } else if upper.starts_with("HELO") {
            out.write_all(b"250 test-sink\r\n")?;
        } else if upper.starts_with("MAIL FROM:") {
            from = address(&command[10..]);
            to.clear();
            out.write_all(b"250 2.1.0 OK\r\n")?;
        } else if upper.starts_with("RCPT TO:") {
            let rcpt = address(&command[8..]);
            let reply = {
                let mut s = shared.lock().unwrap();
                let code = if s
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
            match reply {
                550 => out.write_all(b"550 5.1.1 No such user here\r\n")?,
                451 => out.write_all(b"451 4.3.0 Try again later\r\n")?,
                _ => {
                    to.push(rcpt);
                    out.write_all(b"250 2.1.5 OK\r\n")?
                }
            }
        } else if upper == "DATA" {
            if to.is_empty() {
                out.write_all(b"554 5.5.1 No valid recipients\r\n")?;
                continue;
            }
            out.write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")?;
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
            }
            let delay = shared.lock().unwrap().rules.delay;
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            shared.lock().unwrap().received.push(Received {
                from: from.clone(),
                to: std::mem::take(&mut to),
                data,
            });
            out.write_all(b"250 2.0.0 Queued\r\n")?;
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
