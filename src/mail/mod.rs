//! Outgoing mail: rendering messages to MIME and handing them to a transport (an SMTP server
//! through mail-send, or the `.eml` outbox that makes a fresh install work with no mail server).

pub mod account;
pub mod bounce_listener;
pub mod dkim;
mod qp;
pub mod relay_settings;
pub mod relays;
mod seven_bit;
mod smtp;

use std::path::PathBuf;
use std::sync::Arc;

use mail_send::mail_builder::MessageBuilder;
use serde::{Deserialize, Serialize};

use crate::domain::delivery::send_limits::HeldBy;
pub use relays::{Permit, Relay, RelaySet};
pub use smtp::{
    Commit, MessageSocket, Security, SmtpConnection, SmtpSettings, TlsTrust, write_end_of_data,
};

/// A message ready to render: sender, one recipient, both bodies and extra headers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutgoingMail {
    pub from_name: String,
    pub from_email: String,
    pub to: String,
    pub subject: String,
    pub text: String,
    pub html: String,
    /// Extra headers such as `List-Unsubscribe`, in order.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Without angle brackets; generated when absent.
    #[serde(default)]
    pub message_id: Option<String>,
    /// The link the reader is meant to follow, logged by the outbox transport.
    #[serde(default)]
    pub primary_link: Option<String>,
}

impl OutgoingMail {
    /// The message as MIME bytes: multipart/alternative with text and HTML.
    pub fn to_mime(&self) -> Vec<u8> {
        let message_id = self.message_id.clone().unwrap_or_else(|| {
            let domain = self
                .from_email
                .rsplit_once('@')
                .map(|(_, d)| d)
                .unwrap_or("localhost");
            format!(
                "{}@{}",
                crate::domain::values::secrets::random_hex(16),
                domain
            )
        });
        let mut builder = MessageBuilder::new()
            .from((self.from_name.as_str(), self.from_email.as_str()))
            .to(self.to.as_str())
            .subject(self.subject.as_str())
            .date(crate::clock::now().as_second())
            .message_id(message_id)
            .text_body(self.text.as_str())
            .html_body(self.html.as_str());
        for (name, value) in &self.headers {
            builder = builder.header(
                name.as_str(),
                mail_send::mail_builder::headers::raw::Raw::new(value.as_str()),
            );
        }
        builder
            .write_to_vec()
            .expect("writing to a Vec cannot fail")
    }
}

/// The SMTP envelope of one message: whose it is and who gets it.
#[derive(Debug, Clone, Copy)]
pub struct Envelope<'a> {
    pub from: &'a str,
    pub to: &'a str,
}

/// A MIME message to send.
pub struct Mime {
    pub bytes: Vec<u8>,
    /// No line starts with a dot, so SMTP sends it as it is, without dot-stuffing (whoever
    /// sets this has made sure of it).
    pub dot_free: bool,
}

/// Why a message was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailError {
    /// The server refused for good (5xx): do not retry; the address bounces.
    Permanent(String),
    /// Worth trying again later (4xx).
    Temporary(String),
    /// The connection broke or never opened: try again later, on a new connection.
    Connection(String),
    /// The whole message went out but no reply came: the server may have taken it, so it is
    /// not sent again.
    Unconfirmed(String),
    /// The message was not handed over because the sender said no at the last moment (its
    /// commit was refused) or could not write it out (the outbox): nobody's fault among the
    /// recipients, so it stays due.
    Abandoned(String),
    /// The relay answered that we send too fast (421; 451 or 454 with 4.7.x; or words of
    /// rate, too many or quota), or, with `quota`, that its sending quota is used up: not
    /// taken, and nobody's fault among the recipients.
    Throttled { answer: String, quota: bool },
    /// Every relay is held by a limit until then; nothing was tried.
    Held {
        until: jiff::Timestamp,
        by: HeldBy,
        relay: String,
    },
}

impl std::fmt::Display for MailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MailError::Permanent(e) => write!(f, "permanent failure: {e}"),
            MailError::Temporary(e) => write!(f, "temporary failure: {e}"),
            MailError::Connection(e) => write!(f, "connection failure: {e}"),
            MailError::Unconfirmed(e) => write!(f, "unconfirmed: {e}"),
            MailError::Abandoned(e) => write!(f, "not handed over: {e}"),
            MailError::Throttled { answer, .. } => write!(f, "throttled by the relay: {answer}"),
            MailError::Held { until, by, relay } => write!(
                f,
                "held by {} of {relay} until {}",
                by.describe(),
                crate::clock::human(*until)
            ),
        }
    }
}

impl std::error::Error for MailError {}

/// Where mail goes: through relays (each `--smtp-url` in order, or a newsletter's own), or
/// the outbox under the data directory.
#[derive(Clone)]
pub enum MailRoute {
    Relays(RelaySet),
    Outbox(PathBuf),
}

/// How mail leaves: its route, and the DKIM signer every message passes through when
/// `--dkim-domain` is set.
#[derive(Clone)]
pub struct Transport {
    pub route: MailRoute,
    pub dkim: Option<Arc<dkim::Signer>>,
}

impl Transport {
    /// The same route, signing as `signer` instead (a newsletter's verified sending domain).
    pub fn signed_by(&self, signer: Arc<dkim::Signer>) -> Transport {
        Transport {
            route: self.route.clone(),
            dkim: Some(signer),
        }
    }

    /// The same signing, through `relays` instead (a newsletter's own relay).
    pub fn through(&self, relays: RelaySet) -> Transport {
        Transport {
            route: MailRoute::Relays(relays),
            dkim: self.dkim.clone(),
        }
    }

    /// Sends one message on a connection of its own (account mail; bulk sending keeps an
    /// [`SmtpConnection`] open instead), through the first relay that can be reached and is
    /// not held by a limit.
    pub async fn send(&self, mail: &OutgoingMail) -> Result<(), MailError> {
        let mime = signed(self.dkim.as_deref(), mail.to_mime()).await?;
        match &self.route {
            MailRoute::Relays(set) => {
                let (relay, mut connection) = open_first(set).await?;
                match relay.permit() {
                    Permit::After(wait) => tokio::time::sleep(wait).await,
                    Permit::Held { until, by } => {
                        connection.close().await;
                        let relay = relay.name.clone();
                        return Err(MailError::Held { until, by, relay });
                    }
                }
                let result = connection.send(mail, mime).await;
                connection.close().await;
                match &result {
                    Ok(()) => {
                        relay.went_through();
                        let counted = relay.clone();
                        let _ = tokio::task::spawn_blocking(move || counted.record_one()).await;
                    }
                    Err(MailError::Throttled { answer, quota }) => {
                        if *quota {
                            relay.quota_reached(answer);
                        } else {
                            relay.throttled(answer);
                        }
                    }
                    Err(_) => {}
                }
                result
            }
            MailRoute::Outbox(dir) => {
                write_to_outbox(dir, &mail.to, mail.primary_link.as_deref(), &mime)
            }
        }
    }
}

/// Opens a connection to the first relay of `set` that answers (see [`RelaySet::to_try`]),
/// noting which could not be reached. The error names every relay tried and why, or, when
/// every relay is held by a limit, which one opens first and when.
async fn open_first(set: &RelaySet) -> Result<(Arc<Relay>, SmtpConnection), MailError> {
    let candidates = set.to_try();
    if candidates.is_empty()
        && let Some((until, by, relay)) = set.all_held()
    {
        return Err(MailError::Held { until, by, relay });
    }
    let mut reasons = Vec::new();
    for (_, relay) in candidates {
        match SmtpConnection::open(&relay.settings).await {
            Ok(connection) => {
                relay.mark_up();
                return Ok((relay, connection));
            }
            Err(e) => {
                let reason = match e {
                    MailError::Connection(reason) => reason,
                    other => other.to_string(),
                };
                relay.mark_down(&reason);
                reasons.push(if set.relays.len() > 1 {
                    format!("{}: {reason}", relay.name)
                } else {
                    reason
                });
            }
        }
    }
    Err(MailError::Connection(reasons.join("; ")))
}

/// The final bytes of a message as they go out: with a `DKIM-Signature` header in front when
/// signing is on. The one place every message passes through (account mail, bulk sends, the
/// outbox), signing off the async threads. A failure is nobody's fault among the recipients:
/// the message stays due.
async fn signed(dkim: Option<&dkim::Signer>, mime: Vec<u8>) -> Result<Vec<u8>, MailError> {
    match dkim {
        Some(signer) => signer
            .sign_off_thread(mime)
            .await
            .map_err(MailError::Abandoned),
        None => Ok(mime),
    }
}

/// One sending lane of a bulk send: an SMTP connection to one of the relays kept open across
/// messages (and reopened after a failure, to the most preferred relay that answers), or the
/// outbox.
// A send has a handful of lanes, so the size of the SMTP variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum LaneRoute {
    Relays {
        set: RelaySet,
        /// The open connection, with the relay it goes to and that relay's place in the set.
        connection: Option<(usize, Arc<Relay>, SmtpConnection)>,
    },
    Outbox(PathBuf),
}

/// One sending lane of a bulk send, signing each message like its [`Transport`].
pub struct Lane {
    route: LaneRoute,
    dkim: Option<Arc<dkim::Signer>>,
}

impl Lane {
    pub fn new(transport: &Transport) -> Self {
        let route = match &transport.route {
            MailRoute::Relays(set) => LaneRoute::Relays {
                set: set.clone(),
                connection: None,
            },
            MailRoute::Outbox(dir) => LaneRoute::Outbox(dir.clone()),
        };
        Lane {
            route,
            dkim: transport.dkim.clone(),
        }
    }

    /// Opens the lane's connection unless one is open, to the most preferred relay that
    /// answers and is not held by a limit. An error means no relay can be reached now
    /// ([`MailError::Connection`], naming each), or every one is held
    /// ([`MailError::Held`]).
    pub async fn connect(&mut self) -> Result<(), MailError> {
        match &mut self.route {
            LaneRoute::Outbox(dir) => std::fs::create_dir_all(&*dir).map_err(|e| {
                MailError::Connection(format!("cannot create the outbox {}: {e}", dir.display()))
            }),
            LaneRoute::Relays { set, connection } => {
                if connection.is_none() {
                    let (relay, open) = open_first(set).await?;
                    let index = set
                        .relays
                        .iter()
                        .position(|r| Arc::ptr_eq(r, &relay))
                        .unwrap_or(0);
                    *connection = Some((index, relay, open));
                }
                Ok(())
            }
        }
    }

    /// The relay the open connection goes to, and its place among the lane's relays (0: the
    /// most preferred).
    pub fn relay(&self) -> Option<(usize, &Arc<Relay>)> {
        match &self.route {
            LaneRoute::Relays {
                connection: Some((index, relay, _)),
                ..
            } => Some((*index, relay)),
            _ => None,
        }
    }

    /// The relays this lane may use (none for the outbox).
    pub fn relays(&self) -> &[Arc<Relay>] {
        match &self.route {
            LaneRoute::Relays { set, .. } => &set.relays,
            LaneRoute::Outbox(_) => &[],
        }
    }

    /// Whether a relay preferred to the one the connection goes to can be tried again (it
    /// came back, or its limits have room): then the lane closes its connection between two
    /// messages and [`Lane::connect`] goes back to it.
    pub fn better_relay_due(&self) -> bool {
        match &self.route {
            LaneRoute::Relays {
                set,
                connection: Some((index, _, _)),
            } => *index > 0 && set.better_than(*index),
            _ => false,
        }
    }

    /// Asks the connection's relay whether the next message may go ([`Relay::permit`]); the
    /// outbox has no limits.
    pub fn permit(&self) -> Permit {
        match self.relay() {
            Some((_, relay)) => relay.permit(),
            None => Permit::After(std::time::Duration::ZERO),
        }
    }

    /// Closes the connection (QUIT) between two messages, so the next [`Lane::connect`]
    /// chooses a relay again.
    pub async fn reconnect_later(&mut self) {
        if let LaneRoute::Relays { connection, .. } = &mut self.route
            && let Some((_, _, open)) = connection.take()
        {
            open.close().await;
        }
    }

    /// Sends the message `mime` on the open connection, calling `commit` at the last moment
    /// before the message is final (see [`SmtpConnection::send_committed`]). After an error
    /// other than a refusal the connection is closed and [`Lane::connect`] opens a new one;
    /// after a refusal call [`Lane::reset`].
    pub async fn send<F, Fut>(
        &mut self,
        envelope: Envelope<'_>,
        mime: &Mime,
        commit: F,
    ) -> Result<(), MailError>
    where
        F: FnOnce(MessageSocket) -> Fut,
        Fut: std::future::Future<Output = Commit>,
    {
        // The signature goes in front of the headers: no line of it starts with a dot, so a
        // dot-free message stays dot-free.
        let signed_mime = match self.dkim.as_deref() {
            Some(signer) => Some(Mime {
                bytes: signed(Some(signer), mime.bytes.clone()).await?,
                dot_free: mime.dot_free,
            }),
            None => None,
        };
        let mime = signed_mime.as_ref().unwrap_or(mime);
        match &mut self.route {
            LaneRoute::Outbox(dir) => {
                if !matches!(
                    commit(MessageSocket::NotShared).await,
                    Commit::Claimed { .. }
                ) {
                    return Err(MailError::Abandoned("the message was not claimed".into()));
                }
                // A file that cannot be written (a full disk) was not handed over.
                write_to_outbox(dir, envelope.to, None, &mime.bytes)
                    .map_err(|e| MailError::Abandoned(e.to_string()))
            }
            LaneRoute::Relays { connection, .. } => {
                let Some((_, relay, open)) = connection.as_mut() else {
                    return Err(MailError::Connection("no connection is open".into()));
                };
                let result = open.send_committed(envelope, mime, commit).await;
                match &result {
                    Ok(()) => relay.went_through(),
                    Err(MailError::Throttled {
                        answer,
                        quota: false,
                    }) => {
                        relay.throttled(answer);
                    }
                    Err(MailError::Throttled {
                        answer,
                        quota: true,
                    }) => {
                        relay.quota_reached(answer);
                    }
                    _ => {}
                }
                if !matches!(
                    result,
                    Ok(())
                        | Err(MailError::Permanent(_)
                            | MailError::Temporary(_)
                            | MailError::Throttled { .. })
                ) && let Some(broken) = connection.take()
                {
                    drop(broken);
                }
                result
            }
        }
    }

    /// After a refusal: RSET, so the connection can carry the next message; a connection
    /// that cannot be reset is closed.
    pub async fn reset(&mut self) {
        if let LaneRoute::Relays { connection, .. } = &mut self.route
            && let Some((_, _, open)) = connection.as_mut()
            && open.reset().await.is_err()
        {
            *connection = None;
        }
    }

    /// Closes the connection (QUIT), if one is open.
    pub async fn close(self) {
        if let LaneRoute::Relays {
            connection: Some((_, _, c)),
            ..
        } = self.route
        {
            c.close().await;
        }
    }
}

/// Writes `<dir>/<timestamp>-<random>.eml` and logs its path and link.
fn write_to_outbox(
    dir: &std::path::Path,
    to: &str,
    primary_link: Option<&str>,
    mime: &[u8],
) -> Result<(), MailError> {
    std::fs::create_dir_all(dir).map_err(|e| MailError::Temporary(e.to_string()))?;
    let name = format!(
        "{}-{}.eml",
        crate::clock::now().as_nanosecond(),
        crate::domain::values::secrets::random_hex(4)
    );
    let path = dir.join(name);
    std::fs::write(&path, mime).map_err(|e| MailError::Temporary(e.to_string()))?;
    match primary_link {
        Some(link) => eprintln!("outbox: wrote {} to {to} (link: {link})", path.display()),
        None => eprintln!("outbox: wrote {} to {to}", path.display()),
    }
    Ok(())
}
pub mod render;
