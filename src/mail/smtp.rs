//! SMTP delivery through mail-send: URL parsing, connection set-up (plain, STARTTLS or
//! implicit TLS) and the mapping of server replies to permanent or temporary failures.

use std::time::Duration;

use mail_send::SmtpClientBuilder;
use mail_send::smtp::AssertReply;
use mail_send::smtp::message::{Message, Parameters};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{MailError, OutgoingMail};

type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// How to reach the SMTP server, from `--smtp-url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub security: Security,
    pub credentials: Option<(String, String)>,
    pub timeout: Duration,
}

/// `smtp://` upgrades with STARTTLS when the server offers it and stays plain otherwise (a
/// local relay); `smtps://` is TLS from the first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    Opportunistic,
    ImplicitTls,
}

impl SmtpSettings {
    /// Parses `smtp://[user:pass@]host[:port]` (default port 25; `smtps` 465).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let url = url::Url::parse(raw).map_err(|e| format!("invalid SMTP URL {raw:?}: {e}"))?;
        let security = match url.scheme() {
            "smtp" => Security::Opportunistic,
            "smtps" => Security::ImplicitTls,
            other => {
                return Err(format!(
                    "SMTP URL scheme must be smtp or smtps, not {other:?}"
                ));
            }
        };
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("SMTP URL {raw:?} has no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = url.port().unwrap_or(match security {
            Security::ImplicitTls => 465,
            Security::Opportunistic => 25,
        });
        let decode = |s: &str| {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let credentials = (!url.username().is_empty())
            .then(|| (decode(url.username()), decode(url.password().unwrap_or(""))));
        Ok(SmtpSettings {
            host,
            port,
            security,
            credentials,
            timeout: Duration::from_secs(30),
        })
    }

    fn builder(&self) -> SmtpClientBuilder<String> {
        let connector = mail_send::smtp::tls::build_tls_connector(false).unwrap_or_else(|e| {
            eprintln!("smtp: no platform certificate store ({e}); TLS will fail to verify");
            mail_send::smtp::tls::build_tls_connector(true).expect("dummy verifier always builds")
        });
        let mut builder =
            SmtpClientBuilder::new_with_tls_connector(self.host.clone(), self.port, connector)
                .implicit_tls(self.security == Security::ImplicitTls)
                .timeout(self.timeout);
        if let Some((user, pass)) = &self.credentials {
            builder = builder.credentials((user.clone(), pass.clone()));
        }
        builder
    }
}

/// An open, authenticated SMTP session; reused for many messages when sending an issue.
pub struct SmtpConnection {
    session: Session,
    /// The server offers PIPELINING (RFC 2920): a message's envelope goes in one write.
    pipelining: bool,
}

enum Session {
    Plain(mail_send::SmtpClient<TcpStream>),
    Tls(mail_send::SmtpClient<TlsStream>),
}

impl SmtpConnection {
    pub async fn open(settings: &SmtpSettings) -> Result<Self, MailError> {
        let builder = settings.builder();
        let mut session = match settings.security {
            Security::ImplicitTls => builder.connect().await.map(Session::Tls).map_err(classify),
            Security::Opportunistic => match builder.connect().await {
                Ok(client) => Ok(Session::Tls(client)),
                Err(mail_send::Error::MissingStartTls) => builder
                    .connect_plain()
                    .await
                    .map(Session::Plain)
                    .map_err(classify),
                Err(e) => Err(classify(e)),
            },
        }?;
        // mail-send does not keep the capabilities it read: ask once more, per connection.
        let local_host = builder.local_host.clone();
        let capabilities = match &mut session {
            Session::Plain(client) => client.capabilities(&local_host, false).await,
            Session::Tls(client) => client.capabilities(&local_host, false).await,
        }
        .map_err(classify)?;
        let pipelining = capabilities.has_capability(smtp_proto::EXT_PIPELINING);
        // SMTP is a conversation of small writes, each waiting for its reply; with Nagle's
        // algorithm the short end-of-data mark after a message waits for a delayed ACK
        // (40 ms on Linux), which caps a connection at about 25 messages a second.
        let tcp = match &session {
            Session::Plain(client) => &client.stream,
            Session::Tls(client) => client.stream.get_ref().0,
        };
        let _ = tcp.set_nodelay(true);
        Ok(SmtpConnection {
            session,
            pipelining,
        })
    }

    /// Sends one message; on a refusal the session is reset so it can carry the next one.
    pub async fn send(&mut self, mail: &OutgoingMail) -> Result<(), MailError> {
        let body = mail.to_mime();
        match &mut self.session {
            Session::Plain(client) => send_on(client, mail, body).await,
            Session::Tls(client) => send_on(client, mail, body).await,
        }
    }

    /// Sends one message of a bulk send in two steps: the envelope and the whole message but
    /// its end-of-data mark go out first; then `commit` runs (it durably records that this
    /// message is on its way and answers whether to go on), and only then the end mark that
    /// makes the server take the message. A stop before the mark leaves no message (a server
    /// drops a transaction cut off mid-DATA); a stop after it leaves one that was recorded.
    /// After the mark, a missing reply is [`MailError::Unconfirmed`]: never sent again.
    /// `body` is `mail` as MIME, rendered by the caller (off the async threads). On a plain
    /// connection `commit` also gets a handle on the socket, so whoever commits can write the
    /// end-of-data mark the moment the commit returns, and answers how many of its bytes it
    /// wrote; the rest is written here.
    pub async fn send_committed<F, Fut>(
        &mut self,
        mail: &OutgoingMail,
        body: &[u8],
        commit: F,
    ) -> Result<(), MailError>
    where
        F: FnOnce(Option<std::net::TcpStream>) -> Fut,
        Fut: std::future::Future<Output = Commit>,
    {
        let pipelining = self.pipelining;
        match &mut self.session {
            Session::Plain(client) => {
                use std::os::fd::AsFd;
                let socket = client
                    .stream
                    .as_fd()
                    .try_clone_to_owned()
                    .ok()
                    .map(std::net::TcpStream::from);
                send_committed_on(client, pipelining, mail, body, || commit(socket)).await
            }
            Session::Tls(client) => {
                send_committed_on(client, pipelining, mail, body, || commit(None)).await
            }
        }
    }

    pub async fn close(self) {
        let _ = match self.session {
            Session::Plain(client) => client.quit().await,
            Session::Tls(client) => client.quit().await,
        };
    }
}

async fn send_on<T: AsyncRead + AsyncWrite + Unpin>(
    client: &mut mail_send::SmtpClient<T>,
    mail: &OutgoingMail,
    body: Vec<u8>,
) -> Result<(), MailError> {
    let message = Message::new(mail.from_email.as_str(), [mail.to.as_str()], body);
    match client.send(message).await {
        Ok(_) => Ok(()),
        Err(e) => {
            let error = classify(e);
            if matches!(error, MailError::Permanent(_) | MailError::Temporary(_))
                && client.rset().await.is_err()
            {
                // The server answered, but the session cannot be reset: start a new one.
                return Err(match error {
                    MailError::Permanent(e) => MailError::Permanent(e),
                    other => MailError::Connection(other.to_string()),
                });
            }
            Err(error)
        }
    }
}

async fn send_committed_on<T, F, Fut>(
    client: &mut mail_send::SmtpClient<T>,
    pipelining: bool,
    mail: &OutgoingMail,
    body: &[u8],
    commit: F,
) -> Result<(), MailError>
where
    T: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Commit>,
{
    if let Err(e) = envelope(client, pipelining, mail).await {
        let error = classify(e);
        if matches!(error, MailError::Permanent(_) | MailError::Temporary(_))
            && client.rset().await.is_err()
        {
            return Err(match error {
                MailError::Permanent(e) => MailError::Permanent(e),
                other => MailError::Connection(other.to_string()),
            });
        }
        return Err(error);
    }
    let timeout = client.timeout;
    let stuffed = dot_stuff(body);
    let written = tokio::time::timeout(timeout, async {
        client.stream.write_all(&stuffed).await?;
        client.stream.flush().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return Err(MailError::Connection("writing the message failed".into()));
    }
    let Commit::Claimed { end_written } = commit().await else {
        return Err(MailError::Connection(
            "the message was not claimed; transaction abandoned".into(),
        ));
    };
    let rest = &END_OF_DATA[end_written.min(END_OF_DATA.len())..];
    let ended = tokio::time::timeout(timeout, async {
        client.stream.write_all(rest).await?;
        client.stream.flush().await
    })
    .await;
    if !matches!(ended, Ok(Ok(()))) {
        return Err(MailError::Connection(
            "the connection broke before the end of the message".into(),
        ));
    }
    match tokio::time::timeout(timeout, client.read()).await {
        Ok(Ok(reply)) if reply.is_positive_completion() => Ok(()),
        Ok(Ok(reply)) => {
            let error = classify(mail_send::Error::UnexpectedReply(reply));
            if client.rset().await.is_err() {
                return Err(match error {
                    MailError::Permanent(e) => MailError::Permanent(e),
                    other => MailError::Connection(other.to_string()),
                });
            }
            Err(error)
        }
        Ok(Err(e)) => Err(MailError::Unconfirmed(e.to_string())),
        Err(_) => Err(MailError::Unconfirmed(
            "no reply after the end of the message".into(),
        )),
    }
}

/// What the commit of a message answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Recorded; `end_written` bytes of [`END_OF_DATA`] were already written by the committer.
    Claimed { end_written: usize },
    /// Not ours to send: the transaction is abandoned.
    Refused,
}

/// The end-of-data mark that makes the server take a message.
pub const END_OF_DATA: &[u8] = b"\r\n.\r\n";

/// The SMTP transparency procedure (RFC 5321 4.5.2) in one buffer: a dot after a line break
/// is doubled. The end-of-data mark is not included.
fn dot_stuff(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 64 + 8);
    let mut lines = body.split_inclusive(|&b| b == b'\n' || b == b'\r');
    if let Some(first) = lines.next() {
        out.extend_from_slice(first);
    }
    for line in lines {
        if line.first() == Some(&b'.') {
            out.push(b'.');
        }
        out.extend_from_slice(line);
    }
    out
}

/// MAIL FROM, RCPT TO and DATA up to the server's 354: one write and one read of three
/// replies where the server pipelines, three round trips where it does not.
async fn envelope<T: AsyncRead + AsyncWrite + Unpin>(
    client: &mut mail_send::SmtpClient<T>,
    pipelining: bool,
    mail: &OutgoingMail,
) -> mail_send::Result<()> {
    if !pipelining {
        let params = Parameters::default();
        client.mail_from(&mail.from_email, &params).await?;
        client.rcpt_to(&mail.to, &params).await?;
        return client.cmd(b"DATA\r\n").await?.assert_code(354);
    }
    let commands = format!(
        "MAIL FROM:<{}>\r\nRCPT TO:<{}>\r\nDATA\r\n",
        mail.from_email, mail.to
    );
    client.stream.write_all(commands.as_bytes()).await?;
    client.stream.flush().await?;
    let replies = client.read_many(3).await?;
    let mut replies = replies.into_iter();
    let (mail_from, rcpt_to, data) = match (replies.next(), replies.next(), replies.next()) {
        (Some(a), Some(b), Some(c)) => (a, b, c),
        _ => return Err(mail_send::Error::UnparseableReply),
    };
    if data.code() == 354
        && !(mail_from.is_positive_completion() && rcpt_to.is_positive_completion())
    {
        // A server that opened DATA despite a refusal: close the empty message unsent.
        client.stream.write_all(b".\r\n").await?;
        client.stream.flush().await?;
        client.read().await?;
    }
    mail_from.assert_positive_completion()?;
    rcpt_to.assert_positive_completion()?;
    data.assert_code(354)
}

/// 5xx replies are permanent; 4xx replies, timeouts and broken connections are temporary.
fn classify(error: mail_send::Error) -> MailError {
    match error {
        mail_send::Error::UnexpectedReply(reply)
        | mail_send::Error::AuthenticationFailed(reply) => {
            let text = format!("server replied {} {}", reply.code(), reply.message());
            if (500..600).contains(&reply.code()) {
                MailError::Permanent(text)
            } else {
                MailError::Temporary(text)
            }
        }
        other => MailError::Connection(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_smtp_urls() {
        let s = SmtpSettings::parse("smtp://127.0.0.1:2525").unwrap();
        assert_eq!(
            (s.host.as_str(), s.port, s.security, s.credentials),
            ("127.0.0.1", 2525, Security::Opportunistic, None)
        );
        let s = SmtpSettings::parse("smtps://me%40x.com:p%3Ass@mail.example.com").unwrap();
        assert_eq!(s.port, 465);
        assert_eq!(s.credentials, Some(("me@x.com".into(), "p:ss".into())));
        assert!(SmtpSettings::parse("http://x").is_err());
        assert!(SmtpSettings::parse("smtp://").is_err());
    }

    #[test]
    fn stuffs_dots_at_line_starts() {
        assert_eq!(dot_stuff(b"a\r\n.b\r\n..c"), b"a\r\n..b\r\n...c".to_vec());
        assert_eq!(dot_stuff(b".x"), b".x".to_vec());
        assert_eq!(dot_stuff(b"a\n.\r.\r\n"), b"a\n..\r..\r\n".to_vec());
        assert_eq!(dot_stuff(b"a.b\r\n"), b"a.b\r\n".to_vec());
        assert_eq!(dot_stuff(b""), b"".to_vec());
    }
}
