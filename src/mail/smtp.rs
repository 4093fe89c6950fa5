//! SMTP delivery through mail-send: URL parsing, connection set-up (plain, STARTTLS or
//! implicit TLS) and the mapping of server replies to permanent or temporary failures.
//!
//! TLS is never silently insecure: the relay's certificate is always verified (against
//! [`TlsTrust`]), and credentials never go over a connection without TLS unless the operator
//! said so (`--smtp-allow-plaintext-auth`).

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mail_send::SmtpClientBuilder;
use mail_send::smtp::AssertReply;
use mail_send::smtp::message::{Message, Parameters};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Envelope, MailError, Mime, OutgoingMail};
use crate::domain::delivery::relays::RelayLimits;

type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// How to reach the SMTP server, from `--smtp-url`.
#[derive(Debug, Clone)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub security: Security,
    pub credentials: Option<(String, String)>,
    pub timeout: Duration,
    /// Whom the relay's certificate must chain to.
    pub trust: TlsTrust,
    /// Send the credentials even on a connection without TLS (`--smtp-allow-plaintext-auth`,
    /// for a relay on this machine).
    pub allow_plaintext_auth: bool,
    /// Connect to this address instead of looking `host` up (TLS still checks the
    /// certificate against `host`): the address a guard has checked, so the connection goes
    /// exactly where the check allowed (a relay set by a newsletter's owner).
    pub pinned: Option<std::net::SocketAddr>,
    /// What the relay takes at most (`?per_second=..&per_hour=..&per_day=..` in the URL).
    pub limits: RelayLimits,
}

/// The roots the relay's TLS certificate is verified against: the system's root certificates
/// or, on a system that has none (a container, a static binary on a bare host), the Mozilla
/// set bundled through webpki-roots; plus any private CA from `--smtp-ca`. There is no way to
/// turn verification off: a relay with a certificate of its own making needs `--smtp-ca`.
#[derive(Clone)]
pub struct TlsTrust {
    connector: tokio_rustls::TlsConnector,
    /// Which roots, for the start-up log.
    pub described: String,
}

impl std::fmt::Debug for TlsTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsTrust")
            .field("described", &self.described)
            .finish_non_exhaustive()
    }
}

impl TlsTrust {
    /// The system's roots (or the bundled ones) and the certificates of the PEM file `ca`.
    pub fn load(ca: Option<&Path>) -> Result<Self, String> {
        let native = rustls_native_certs::load_native_certs();
        let (mut roots, mut described) = roots_or_bundled(native.certs);
        if let Some(path) = ca {
            use rustls::pki_types::CertificateDer;
            use rustls::pki_types::pem::PemObject;
            let unreadable = |e: &dyn std::fmt::Display| {
                format!(
                    "--smtp-ca {}: cannot read a PEM certificate: {e}",
                    path.display()
                )
            };
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| unreadable(&e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| unreadable(&e))?;
            if certs.is_empty() {
                return Err(format!(
                    "--smtp-ca {}: the file holds no PEM certificate",
                    path.display()
                ));
            }
            let count = certs.len();
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("--smtp-ca {}: {e}", path.display()))?;
            }
            described.push_str(&format!(" and {count} from --smtp-ca"));
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(TlsTrust {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            described,
        })
    }
}

/// A root store of `system` certificates, or of the bundled Mozilla roots when the system
/// has none that parse; with a description of which.
fn roots_or_bundled(
    system: Vec<rustls::pki_types::CertificateDer<'static>>,
) -> (rustls::RootCertStore, String) {
    let mut roots = rustls::RootCertStore::empty();
    let (added, _unparsable) = roots.add_parsable_certificates(system);
    if added > 0 {
        return (roots, format!("{added} system root certificates"));
    }
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    (
        roots,
        format!(
            "the {} bundled Mozilla root certificates (the system has none)",
            webpki_roots::TLS_SERVER_ROOTS.len()
        ),
    )
}

/// The URL without its password, for messages.
fn redacted(url: &url::Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some("***"));
    }
    shown.to_string()
}

/// `smtp://` upgrades with STARTTLS when the server offers it and stays plain otherwise (a
/// local relay); `smtps://` is TLS from the first byte; a relay set by a newsletter's owner
/// is one or the other with STARTTLS required (never plain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    Opportunistic,
    ImplicitTls,
    /// STARTTLS or nothing: a relay that does not offer it is refused.
    RequiredStartTls,
}

impl SmtpSettings {
    /// Parses `smtp://[user:pass@]host[:port]` (default port 25; `smtps` 465); the relay's
    /// certificate will be checked against `trust`.
    pub fn parse(raw: &str, trust: TlsTrust) -> Result<Self, String> {
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
            _ => 25,
        });
        let decode = |s: &str| {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let credentials = (!url.username().is_empty())
            .then(|| (decode(url.username()), decode(url.password().unwrap_or(""))));
        let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let limits = RelayLimits::from_query(query.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|e| format!("SMTP URL {}: {e}", redacted(&url)))?;
        Ok(SmtpSettings {
            host,
            port,
            security,
            credentials,
            timeout: Duration::from_secs(30),
            trust,
            allow_plaintext_auth: false,
            pinned: None,
            limits,
        })
    }

    fn builder(&self) -> SmtpClientBuilder<String> {
        let mut builder = SmtpClientBuilder::new_with_tls_connector(
            self.host.clone(),
            self.port,
            self.trust.connector.clone(),
        )
        .implicit_tls(self.security == Security::ImplicitTls)
        .timeout(self.timeout);
        if let Some((user, pass)) = &self.credentials {
            builder = builder.credentials((user.clone(), pass.clone()));
        }
        if let Some(address) = self.pinned {
            builder.addr = address.to_string();
        }
        builder
    }

    /// Whether `other` reaches the same relay the same way (address, security, credentials,
    /// limits): a relay kept in use stays while this holds.
    pub fn same_as(&self, other: &SmtpSettings) -> bool {
        (
            &self.host,
            self.port,
            self.security,
            &self.credentials,
            self.pinned,
            self.limits,
            self.timeout,
        ) == (
            &other.host,
            other.port,
            other.security,
            &other.credentials,
            other.pinned,
            other.limits,
            other.timeout,
        )
    }

    /// The relay's name in messages: host and port, never the credentials.
    pub fn name(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// An open, authenticated SMTP session; reused for many messages when sending an issue.
pub struct SmtpConnection {
    session: Session,
    /// The server offers PIPELINING (RFC 2920): a message's envelope goes in one write.
    pipelining: bool,
}

// Boxing the TLS variant would cost a pointer chase per write for nothing: a send holds a few
// sessions (one per connection), never a collection of them.
#[allow(clippy::large_enum_variant)]
enum Session {
    Plain(mail_send::SmtpClient<TcpStream>),
    Tls(mail_send::SmtpClient<TlsStream>),
}

impl SmtpConnection {
    /// Connects, greets, upgrades to TLS where offered and authenticates. Whatever goes wrong
    /// here (no answer, a 4xx or 5xx greeting, refused credentials, a failed handshake, a
    /// certificate that does not verify, credentials that would go in the clear) is a
    /// [`MailError::Connection`]: it is about the relay, never about a recipient.
    pub async fn open(settings: &SmtpSettings) -> Result<Self, MailError> {
        Self::try_open(settings).await.map_err(|e| match e {
            MailError::Connection(e) => MailError::Connection(e),
            other => MailError::Connection(other.to_string()),
        })
    }

    async fn try_open(settings: &SmtpSettings) -> Result<Self, MailError> {
        let builder = settings.builder();
        let mut session = match settings.security {
            Security::ImplicitTls => builder.connect().await.map(Session::Tls).map_err(classify),
            Security::RequiredStartTls => match builder.connect().await {
                Ok(client) => Ok(Session::Tls(client)),
                Err(mail_send::Error::MissingStartTls) => Err(MailError::Connection(
                    "the relay does not offer STARTTLS, which this relay's settings require".into(),
                )),
                Err(e) => Err(classify(e)),
            },
            Security::Opportunistic => match builder.connect().await {
                Ok(client) => Ok(Session::Tls(client)),
                // mail-send gives up before AUTH when STARTTLS is missing; only a plain
                // connection of our own choosing would send the credentials.
                Err(mail_send::Error::MissingStartTls)
                    if settings.credentials.is_some() && !settings.allow_plaintext_auth =>
                {
                    Err(MailError::Connection(
                        "the relay offers no STARTTLS, so the credentials of --smtp-url would \
                         go in the clear; not sent (use smtps://, a relay that offers STARTTLS, \
                         or --smtp-allow-plaintext-auth for a relay on this machine)"
                            .into(),
                    ))
                }
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

    /// Sends `body`, the MIME form of `mail` as it goes out; on a refusal the session is reset
    /// so it can carry the next one.
    pub async fn send(&mut self, mail: &OutgoingMail, body: Vec<u8>) -> Result<(), MailError> {
        match &mut self.session {
            Session::Plain(client) => send_on(client, mail, body).await,
            Session::Tls(client) => send_on(client, mail, body).await,
        }
    }

    /// Sends one message of a bulk send in two steps: the envelope and the whole message but
    /// its end-of-data mark go out first; then `commit` runs (it durably records that this
    /// message is on its way and answers whether to go on), and only then the end mark that
    /// lets the relay take the message. A stop before the mark leaves no message (a relay
    /// drops a transaction cut off mid-DATA); a stop after it leaves one that was recorded.
    /// `body` is the MIME message; it is dot-stuffed here unless it is known to be dot-free.
    ///
    /// `commit` gets a handle on the socket: on a plain connection whoever commits writes the
    /// end-of-data mark the moment the commit returns (see [`write_end_of_data`]) and answers
    /// how many of its bytes it wrote; the rest is written here. On TLS the mark is written
    /// here, once the socket shows the relay has not closed the connection meanwhile.
    ///
    /// Errors: [`MailError::Connection`] when the connection broke (or the relay hung up)
    /// before the end mark went out whole, or the relay reset it before answering (see
    /// [`is_reset`]), so the relay cannot have the message; [`MailError::Unconfirmed`] when
    /// the end mark went out and no answer came (a clean close, a timeout); [`MailError::Permanent`] or
    /// [`MailError::Temporary`] for a refusal, after which the session needs [`Self::reset`]
    /// before the next message; [`MailError::Abandoned`] when `commit` said no. After any but
    /// a refusal the connection is no longer usable.
    pub async fn send_committed<F, Fut>(
        &mut self,
        envelope: Envelope<'_>,
        body: &Mime,
        commit: F,
    ) -> Result<(), MailError>
    where
        F: FnOnce(MessageSocket) -> Fut,
        Fut: std::future::Future<Output = Commit>,
    {
        let pipelining = self.pipelining;
        let socket = self.raw_socket();
        match &mut self.session {
            Session::Plain(client) => {
                send_committed_on(client, pipelining, envelope, body, || {
                    commit(MessageSocket::Plain(socket))
                })
                .await
            }
            Session::Tls(client) => {
                let peek = socket.clone();
                send_committed_on(client, pipelining, envelope, body, || async move {
                    match commit(MessageSocket::NotShared).await {
                        // Claimed: check the relay is still there before the end mark.
                        Commit::Claimed { .. }
                            if peek.as_ref().is_some_and(|s| relay_hung_up(s, false)) =>
                        {
                            Commit::Closed
                        }
                        other => other,
                    }
                })
                .await
            }
        }
    }

    /// A second handle on the connection's TCP socket (non-blocking, like the first).
    fn raw_socket(&self) -> Option<std::sync::Arc<std::net::TcpStream>> {
        use std::os::fd::AsFd;
        let tcp = match &self.session {
            Session::Plain(client) => &client.stream,
            Session::Tls(client) => client.stream.get_ref().0,
        };
        tcp.as_fd()
            .try_clone_to_owned()
            .ok()
            .map(|fd| std::sync::Arc::new(std::net::TcpStream::from(fd)))
    }

    /// RSET after a refusal, so the connection can carry the next message.
    pub async fn reset(&mut self) -> Result<(), MailError> {
        match &mut self.session {
            Session::Plain(client) => client.rset().await,
            Session::Tls(client) => client.rset().await,
        }
        .map_err(|e| MailError::Connection(e.to_string()))
    }

    /// QUIT, waiting a second at most for the relay's goodbye.
    pub async fn close(self) {
        let quit = async {
            let _ = match self.session {
                Session::Plain(client) => client.quit().await,
                Session::Tls(client) => client.quit().await,
            };
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), quit).await;
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
    envelope: Envelope<'_>,
    body: &Mime,
    commit: F,
) -> Result<(), MailError>
where
    T: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Commit>,
{
    let timeout = client.timeout;
    match tokio::time::timeout(timeout, send_envelope(client, pipelining, envelope)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(classify(e)),
        Err(_) => return Err(MailError::Connection("no answer to the envelope".into())),
    }
    let stuffed = if body.dot_free {
        Cow::Borrowed(body.bytes.as_slice())
    } else {
        dot_stuff(&body.bytes)
    };
    let written = tokio::time::timeout(timeout, async {
        client.stream.write_all(&stuffed).await?;
        client.stream.flush().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return Err(MailError::Connection(
            "the connection broke while writing the message".into(),
        ));
    }
    let end_written = match commit().await {
        Commit::Claimed { end_written } => end_written,
        Commit::Closed => {
            return Err(MailError::Connection(
                "the relay closed the connection before the end of the message".into(),
            ));
        }
        Commit::Refused => {
            return Err(MailError::Abandoned(
                "the message was not claimed; transaction abandoned".into(),
            ));
        }
    };
    let rest = &END_OF_DATA[end_written.min(END_OF_DATA.len())..];
    if !rest.is_empty() {
        let ended = tokio::time::timeout(timeout, async {
            client.stream.write_all(rest).await?;
            client.stream.flush().await
        })
        .await;
        // The mark did not go out whole (the write failed, or the relay stopped reading),
        // so the relay cannot have the end of the message.
        match ended {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(MailError::Connection(format!(
                    "the relay {} before the end of the message went out; not taken",
                    broke(&e)
                )));
            }
            Err(_) => {
                return Err(MailError::Connection(
                    "the relay stopped reading before the end of the message went out; not taken"
                        .into(),
                ));
            }
        }
    }
    match tokio::time::timeout(timeout, client.read()).await {
        Ok(Ok(reply)) if reply.is_positive_completion() => Ok(()),
        Ok(Ok(reply)) => Err(classify(mail_send::Error::UnexpectedReply(reply))),
        Ok(Err(mail_send::Error::Io(e))) if is_reset(&e) => Err(MailError::Connection(format!(
            "the relay reset the connection before answering ({e}), so it had not read the \
             whole message; not taken"
        ))),
        Ok(Err(e)) => Err(MailError::Unconfirmed(format!(
            "the relay closed the connection after the end of the message without answering ({})",
            closed_how(&e)
        ))),
        Err(_) => Err(MailError::Unconfirmed(format!(
            "no answer within {} s after the end of the message",
            timeout.as_secs()
        ))),
    }
}

/// Whether an I/O error is a reset of the connection by the relay (or a write after one).
///
/// A relay that closes its socket with part of the message still unread makes its system
/// answer with a reset (RST) instead of a clean close (FIN), and a write to a socket the relay
/// has closed is answered with a reset too. Since nothing is written after the end-of-data
/// mark until the relay answers, a reset seen while writing the message, its end mark or
/// while waiting for the answer means the relay closed before reading the whole message: it
/// cannot have taken it. A relay that read everything and closed cleanly, or never answered,
/// may have taken it; only those cases are `unconfirmed`.
pub fn is_reset(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::ConnectionAborted
    )
}

/// "reset the connection" or "broke the connection (..)", for messages.
fn broke(error: &std::io::Error) -> String {
    if is_reset(error) {
        format!("reset the connection ({error})")
    } else {
        format!("broke the connection ({error})")
    }
}

/// Why no reply could be read, when it was not a reset: the end of the stream (a clean
/// close, or a reply mail-send cannot parse) or another error.
fn closed_how(error: &mail_send::Error) -> String {
    match error {
        mail_send::Error::UnparseableReply => "the connection ended with no readable answer".into(),
        other => other.to_string(),
    }
}

/// What the commit of a message answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Recorded; `end_written` bytes of [`END_OF_DATA`] were already written by the committer.
    Claimed { end_written: usize },
    /// Recorded, but the relay had hung up, so the end mark was not written: the message was
    /// not taken.
    Closed,
    /// Not ours to send: the transaction is abandoned.
    Refused,
}

/// The socket a message's commit may finish it on.
pub enum MessageSocket {
    /// Plain SMTP: the committer writes the end-of-data mark itself, right after the commit.
    Plain(Option<std::sync::Arc<std::net::TcpStream>>),
    /// TLS (only the connection's own task can write; it does so after the commit), or the
    /// outbox (no socket at all).
    NotShared,
}

/// Whether the relay has closed or broken the connection, seen without blocking: a peek that
/// finds the end of the stream or an error. With `strict`, any byte waiting counts too: on
/// plain SMTP a relay says nothing during DATA unless it is giving up (TLS may carry records
/// of its own, so there only the end of the stream counts).
pub fn relay_hung_up(socket: &std::net::TcpStream, strict: bool) -> bool {
    let mut byte = [0u8; 1];
    match socket.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => strict,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// Finishes a claimed message on a plain connection: unless the relay has hung up, writes
/// what the (non-blocking) socket takes of the end-of-data mark at once; the connection's
/// task writes the rest. Called right after the claim's commit returns, so nothing lies
/// between the durable claim and the mark but this check.
pub fn write_end_of_data(socket: Option<&std::net::TcpStream>) -> Commit {
    use std::io::Write as _;
    let Some(mut socket) = socket else {
        return Commit::Claimed { end_written: 0 };
    };
    if relay_hung_up(socket, true) {
        return Commit::Closed;
    }
    let mut written = 0;
    while written < END_OF_DATA.len() {
        match socket.write(&END_OF_DATA[written..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n,
        }
    }
    Commit::Claimed {
        end_written: written,
    }
}

/// The end-of-data mark that makes the server take a message.
pub const END_OF_DATA: &[u8] = b"\r\n.\r\n";

/// Whether no line of `text` starts with a dot (a line starts after CR or LF, as
/// [`dot_stuff`] counts them).
pub fn dot_free(text: &[u8]) -> bool {
    text.first() != Some(&b'.')
        && !text
            .windows(2)
            .any(|pair| matches!(pair[0], b'\n' | b'\r') && pair[1] == b'.')
}

/// The SMTP transparency procedure (RFC 5321 4.5.2) in one buffer: a dot at the start of a
/// line (the first one included) is doubled. The end-of-data mark is not included. A body
/// with no such dot is used as it is, without a copy.
fn dot_stuff(body: &[u8]) -> Cow<'_, [u8]> {
    if dot_free(body) {
        return Cow::Borrowed(body);
    }
    let mut out = Vec::with_capacity(body.len() + body.len() / 64 + 8);
    for line in body.split_inclusive(|&b| b == b'\n' || b == b'\r') {
        if line.first() == Some(&b'.') {
            out.push(b'.');
        }
        out.extend_from_slice(line);
    }
    Cow::Owned(out)
}

/// MAIL FROM, RCPT TO and DATA up to the server's 354: one write and one read of three
/// replies where the server pipelines, three round trips where it does not.
async fn send_envelope<T: AsyncRead + AsyncWrite + Unpin>(
    client: &mut mail_send::SmtpClient<T>,
    pipelining: bool,
    envelope: Envelope<'_>,
) -> mail_send::Result<()> {
    if !pipelining {
        let params = Parameters::default();
        client.mail_from(envelope.from, &params).await?;
        client.rcpt_to(envelope.to, &params).await?;
        return client.cmd(b"DATA\r\n").await?.assert_code(354);
    }
    let commands = format!(
        "MAIL FROM:<{}>\r\nRCPT TO:<{}>\r\nDATA\r\n",
        envelope.from, envelope.to
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

/// A relay's answer that says we send too fast, or that its sending quota is used up
/// (`Some(true)`): 421 (the relay closes for now); a 4xx whose enhanced code is 4.7.x (policy:
/// 451 4.7.0 "too many messages", SES's 454 4.7.0 throttling); or any answer with the words
/// rate, too many, throttled or quota, unless its enhanced code is about the recipient's
/// mailbox (X.2.x: "mailbox over quota" is the recipient's, not the relay's); and Gmail's
/// 550 5.4.5 "daily sending quota exceeded". `None`: an ordinary refusal.
pub fn throttling(code: u16, esc: [u8; 3], message: &str) -> Option<bool> {
    static WORDS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\b(rate|too many|throttl\w*|quota)\b").expect("a valid pattern")
    });
    static QUOTA: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(?i)\bquota\b").expect("a valid pattern"));
    let mailbox = esc[1] == 2;
    let quota = !mailbox && (QUOTA.is_match(message) || esc == [5, 4, 5]);
    let policy = esc[0] == 4 && esc[1] == 7;
    let worded = !mailbox && WORDS.is_match(message);
    (code == 421 || policy || worded || quota).then_some(quota)
}

/// A reply as the owner reads it: code, enhanced code (when given) and text.
fn reply_text(reply: &smtp_proto::Response<String>) -> String {
    match reply.esc {
        [0, 0, 0] => format!("{} {}", reply.code(), reply.message()),
        [a, b, c] => format!("{} {a}.{b}.{c} {}", reply.code(), reply.message()),
    }
}

/// 5xx replies are permanent; 4xx replies, timeouts and broken connections are temporary;
/// throttling answers ([`throttling`]) are the relay's and nobody's fault among the
/// recipients.
fn classify(error: mail_send::Error) -> MailError {
    match error {
        mail_send::Error::UnexpectedReply(reply) => {
            if let Some(quota) = throttling(reply.code(), reply.esc, reply.message()) {
                return MailError::Throttled {
                    answer: reply_text(&reply),
                    quota,
                };
            }
            let text = format!("server replied {}", reply_text(&reply));
            if (500..600).contains(&reply.code()) {
                MailError::Permanent(text)
            } else {
                MailError::Temporary(text)
            }
        }
        mail_send::Error::AuthenticationFailed(reply) => {
            let text = format!("server replied {} {}", reply.code(), reply.message());
            if (500..600).contains(&reply.code()) {
                MailError::Permanent(text)
            } else {
                MailError::Temporary(text)
            }
        }
        mail_send::Error::Tls(e) => MailError::Connection(tls_failure(&e)),
        other => MailError::Connection(other.to_string()),
    }
}

/// A failed TLS handshake in words that name the certificate problem and what helps.
fn tls_failure(error: &rustls::Error) -> String {
    match error {
        rustls::Error::InvalidCertificate(problem) => {
            let hint = match problem {
                rustls::CertificateError::UnknownIssuer => {
                    "; if the relay uses a private CA, give it with --smtp-ca"
                }
                _ => "",
            };
            format!("the relay's TLS certificate was refused ({error}){hint}")
        }
        other => format!("the TLS handshake with the relay failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_smtp_urls() {
        let trust = || TlsTrust::load(None).unwrap();
        let s = SmtpSettings::parse("smtp://127.0.0.1:2525", trust()).unwrap();
        assert_eq!(
            (s.host.as_str(), s.port, s.security, s.credentials),
            ("127.0.0.1", 2525, Security::Opportunistic, None)
        );
        assert!(!s.allow_plaintext_auth);
        let s = SmtpSettings::parse("smtps://me%40x.com:p%3Ass@mail.example.com", trust()).unwrap();
        assert_eq!(s.port, 465);
        assert_eq!(s.credentials, Some(("me@x.com".into(), "p:ss".into())));
        assert!(SmtpSettings::parse("http://x", trust()).is_err());
        assert!(SmtpSettings::parse("smtp://", trust()).is_err());
    }

    #[test]
    fn a_system_without_roots_gets_the_bundled_ones() {
        let (roots, described) = roots_or_bundled(Vec::new());
        assert_eq!(roots.len(), webpki_roots::TLS_SERVER_ROOTS.len());
        assert!(described.contains("bundled"), "{described}");
        // Something that does not parse as a certificate is no root either.
        let junk = rustls::pki_types::CertificateDer::from(vec![1, 2, 3]);
        assert!(roots_or_bundled(vec![junk]).1.contains("bundled"));
    }

    #[test]
    fn smtp_ca_must_hold_a_certificate() {
        let dir = std::env::temp_dir().join(format!("broadsheet-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let error = TlsTrust::load(Some(&empty)).unwrap_err();
        assert!(error.contains("no PEM certificate"), "{error}");
        let error = TlsTrust::load(Some(&dir.join("missing.pem"))).unwrap_err();
        assert!(error.contains("cannot read"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_the_certificate_problem() {
        let unknown = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let text = classify(mail_send::Error::Tls(Box::new(unknown))).to_string();
        assert!(
            text.starts_with("connection failure: the relay's TLS certificate was refused"),
            "{text}"
        );
        assert!(text.contains("--smtp-ca"), "{text}");
        let expired = rustls::Error::InvalidCertificate(rustls::CertificateError::Expired);
        let text = classify(mail_send::Error::Tls(Box::new(expired))).to_string();
        assert!(
            text.contains("certificate") && !text.contains("--smtp-ca"),
            "{text}"
        );
    }

    #[test]
    fn tells_throttling_from_refusals() {
        assert_eq!(
            throttling(421, [4, 3, 2], "Closing the connection"),
            Some(false)
        );
        assert_eq!(
            throttling(451, [4, 7, 0], "Too many messages, slow down"),
            Some(false)
        );
        assert_eq!(
            throttling(454, [4, 7, 0], "Throttling failure"),
            Some(false)
        );
        assert_eq!(
            throttling(450, [0, 0, 0], "Rate limit exceeded"),
            Some(false)
        );
        assert_eq!(
            throttling(451, [4, 7, 0], "Daily sending quota exceeded"),
            Some(true)
        );
        assert_eq!(
            throttling(550, [5, 4, 5], "Daily user sending quota exceeded"),
            Some(true)
        );
        // The recipient's mailbox is over its quota: the recipient's problem.
        assert_eq!(throttling(452, [4, 2, 2], "Mailbox over quota"), None);
        assert_eq!(
            throttling(552, [5, 2, 2], "Mailbox full, quota exceeded"),
            None
        );
        assert_eq!(throttling(451, [4, 3, 0], "Try again later"), None);
        assert_eq!(
            throttling(550, [5, 1, 1], "No such user; separate generated"),
            None
        );
    }

    #[test]
    fn stuffs_dots_at_line_starts() {
        assert_eq!(*dot_stuff(b"a\r\n.b\r\n..c"), *b"a\r\n..b\r\n...c");
        assert_eq!(*dot_stuff(b".x"), *b"..x");
        assert_eq!(*dot_stuff(b"a\n.\r.\r\n"), *b"a\n..\r..\r\n");
        assert_eq!(*dot_stuff(b"a\r\n.\r\n"), *b"a\r\n..\r\n");
        assert!(matches!(dot_stuff(b"a.b\r\n"), Cow::Borrowed(b"a.b\r\n")));
        assert!(matches!(dot_stuff(b""), Cow::Borrowed(b"")));
    }
}
