//! Reading the reports mail servers send back: delivery status notifications (RFC 3464,
//! `multipart/report; report-type=delivery-status`) and complaint feedback reports (ARF,
//! RFC 5965, `report-type=feedback-report`). Pure: bytes in, a typed [`Report`] out; applying
//! it is `tracking::apply_report`. MIME is parsed by `mail-parser`; the report parts' fields
//! have the syntax of message headers, so they go through its header parser too.

use mail_parser::{Message, MessageParser, MimeHeaders, PartType};

/// Largest message read (1 MiB): a DSN or ARF report is a few kilobytes plus, at most, the
/// returned message.
pub const MAX_REPORT_BYTES: usize = 1024 * 1024;

/// How a recipient failed, from the first digit of its RFC 3463 status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// `5.x.x`: the address will not take mail; it is marked bounced at once.
    Permanent,
    /// `4.x.x` (or `Action: delayed`): counted; see `tracking::SOFT_BOUNCE_LIMIT`.
    Soft,
}

/// One per-recipient block of a DSN that reports a failure or a delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub email: String,
    pub severity: Severity,
    /// `Action:` as written (`failed`, `delayed`).
    pub action: String,
    /// `Status:` (`5.1.1`).
    pub status: String,
    /// `Diagnostic-Code:` without its type (`550 5.1.1 <a@b>: user unknown`), when given.
    pub diagnostic: Option<String>,
}

/// A spam complaint about a message sent to `email`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Complaint {
    pub email: String,
    /// `Feedback-Type:` (`abuse`, `fraud`, ...).
    pub feedback_type: String,
}

/// What a message turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// A DSN; blocks that report success (`delivered`, `relayed`, `expanded`) are left out.
    Delivery(Vec<Failure>),
    Complaint(Complaint),
}

/// Why a message was not read as a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAReport {
    /// Larger than [`MAX_REPORT_BYTES`].
    TooLarge(usize),
    /// Not a parseable message, not a `multipart/report` of a known type, or a report that
    /// names no recipient: the text says which.
    Unrecognised(String),
}

impl std::fmt::Display for NotAReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotAReport::TooLarge(size) => write!(
                f,
                "the message is {size} bytes; reports larger than {MAX_REPORT_BYTES} bytes are refused"
            ),
            NotAReport::Unrecognised(why) => write!(f, "not a bounce or complaint report: {why}"),
        }
    }
}

fn unrecognised(why: &str) -> NotAReport {
    NotAReport::Unrecognised(why.to_string())
}

/// Reads one raw message (headers and body, as an MTA hands it over).
pub fn parse(raw: &[u8]) -> Result<Report, NotAReport> {
    if raw.len() > MAX_REPORT_BYTES {
        return Err(NotAReport::TooLarge(raw.len()));
    }
    let message = MessageParser::default()
        .parse(raw)
        .ok_or_else(|| unrecognised("no message headers"))?;
    let report_type = message
        .content_type()
        .filter(|ct| {
            ct.ctype().eq_ignore_ascii_case("multipart")
                && ct
                    .subtype()
                    .is_some_and(|s| s.eq_ignore_ascii_case("report"))
        })
        .and_then(|ct| ct.attribute("report-type"))
        .map(str::to_ascii_lowercase)
        .ok_or_else(|| unrecognised("not a multipart/report message"))?;
    match report_type.as_str() {
        "delivery-status" => delivery_status(&message),
        "feedback-report" => feedback_report(&message),
        other => Err(NotAReport::Unrecognised(format!(
            "unknown report-type {other}"
        ))),
    }
}

/// The body of the part whose type is `message/<subtype>` (mail-parser keeps such parts as
/// bytes, except `message/rfc822`, which it parses).
fn part_body<'a>(message: &'a Message, subtype: &str) -> Option<&'a [u8]> {
    message.parts.iter().find_map(|part| {
        let ct = part.content_type()?;
        (ct.ctype().eq_ignore_ascii_case("message")
            && ct
                .subtype()
                .is_some_and(|s| s.eq_ignore_ascii_case(subtype)))
        .then(|| part.contents())
    })
}

/// Field groups of a report part: header-syntax fields, groups separated by blank lines.
fn field_groups(text: &[u8]) -> Vec<Message<'_>> {
    let mut groups = Vec::new();
    let mut start = 0;
    let mut i = 0;
    // A group ends at an empty line (CRLF or LF line ends).
    while i < text.len() {
        let rest = &text[i..];
        let blank = if rest.starts_with(b"\n\n") {
            Some(2)
        } else if rest.starts_with(b"\r\n\r\n") {
            Some(4)
        } else {
            None
        };
        if let Some(len) = blank {
            groups.push(&text[start..i + len]);
            start = i + len;
            i = start;
        } else {
            i += 1;
        }
    }
    groups.push(&text[start..]);
    groups
        .into_iter()
        .filter(|g| !g.iter().all(u8::is_ascii_whitespace))
        .filter_map(|g| MessageParser::default().parse_headers(g))
        .collect()
}

/// A field's value, unfolded (mail-parser keeps the line breaks of folded unknown fields).
fn field(fields: &Message, name: &str) -> Option<String> {
    fields
        .header(name)
        .and_then(|v| v.as_text())
        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|v| !v.is_empty())
}

/// `rfc822; a@example.com` → `a@example.com` (the address type is dropped, as are angle
/// brackets some MTAs add).
fn typed_value(value: &str) -> &str {
    let value = value.split_once(';').map_or(value, |(_, v)| v).trim();
    value.trim_start_matches('<').trim_end_matches('>')
}

fn delivery_status(message: &Message) -> Result<Report, NotAReport> {
    let body = part_body(message, "delivery-status")
        .ok_or_else(|| unrecognised("no message/delivery-status part"))?;
    let groups = field_groups(body);
    if groups.len() < 2 {
        return Err(unrecognised("the delivery status names no recipient"));
    }
    // The first group is per-message (Reporting-MTA, ...); the rest are per-recipient.
    Ok(Report::Delivery(
        groups.iter().skip(1).filter_map(failure).collect(),
    ))
}

fn failure(fields: &Message) -> Option<Failure> {
    let recipient =
        field(fields, "Final-Recipient").or_else(|| field(fields, "Original-Recipient"))?;
    let action = field(fields, "Action")?.to_ascii_lowercase();
    let status = field(fields, "Status")
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_default();
    let severity = match (action.as_str(), status.chars().next()) {
        ("failed", Some('5')) => Severity::Permanent,
        ("failed", Some('4')) | ("delayed", _) => Severity::Soft,
        // A failure without a usable status is taken as permanent, as RFC 3464 §2.3.3 means it.
        ("failed", _) => Severity::Permanent,
        _ => return None,
    };
    let diagnostic = field(fields, "Diagnostic-Code").map(|d| typed_value(&d).to_string());
    Some(Failure {
        email: typed_value(&recipient).to_string(),
        severity,
        action,
        status,
        diagnostic,
    })
}

fn feedback_report(message: &Message) -> Result<Report, NotAReport> {
    let body = part_body(message, "feedback-report")
        .ok_or_else(|| unrecognised("no message/feedback-report part"))?;
    let fields = field_groups(body)
        .into_iter()
        .next()
        .ok_or_else(|| unrecognised("an empty feedback report"))?;
    let feedback_type = field(&fields, "Feedback-Type")
        .unwrap_or_else(|| "abuse".into())
        .to_ascii_lowercase();
    let email = field(&fields, "Original-Rcpt-To")
        .map(|v| typed_value(&v).to_string())
        .or_else(|| original_to(message))
        .ok_or_else(|| unrecognised("the complaint names no recipient"))?;
    Ok(Report::Complaint(Complaint {
        email,
        feedback_type,
    }))
}

/// The `To:` of the returned message, given as `message/rfc822` or `text/rfc822-headers`.
fn original_to(message: &Message) -> Option<String> {
    message.parts.iter().find_map(|part| {
        let first_to = |m: &Message| {
            m.to()
                .and_then(|a| a.first())
                .and_then(|a| a.address())
                .map(str::to_string)
        };
        match &part.body {
            PartType::Message(inner) => first_to(inner),
            _ if part.content_type().is_some_and(|ct| {
                ct.subtype()
                    .is_some_and(|s| s.eq_ignore_ascii_case("rfc822-headers"))
            }) =>
            {
                MessageParser::default()
                    .parse_headers(part.contents())
                    .as_ref()
                    .and_then(first_to)
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The same messages the integration tests send, as MTAs write them.
    const POSTFIX_DSN: &str = include_str!("../../../tests/fixtures/bounces/postfix-dsn.eml");
    const EXIM_DSN: &str = include_str!("../../../tests/fixtures/bounces/exim-dsn.eml");
    const DELAYED_DSN: &str = include_str!("../../../tests/fixtures/bounces/delayed-dsn.eml");
    const ARF_COMPLAINT: &str = include_str!("../../../tests/fixtures/bounces/arf-complaint.eml");
    const NOT_A_REPORT: &str = include_str!("../../../tests/fixtures/bounces/not-a-report.eml");

    #[test]
    fn a_postfix_dsn_is_a_permanent_failure() {
        let report = parse(POSTFIX_DSN.as_bytes()).unwrap();
        assert_eq!(
            report,
            Report::Delivery(vec![Failure {
                email: "gone@example.net".into(),
                severity: Severity::Permanent,
                action: "failed".into(),
                status: "5.1.1".into(),
                diagnostic: Some(
                    "550 5.1.1 <gone@example.net>: Recipient address rejected: User unknown in virtual mailbox table".into()
                ),
            }])
        );
    }

    #[test]
    fn an_exim_dsn_with_crlf_and_a_folded_diagnostic_is_read() {
        let raw = EXIM_DSN.replace('\n', "\r\n");
        let Report::Delivery(failures) = parse(raw.as_bytes()).unwrap() else {
            panic!("not a delivery report")
        };
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].email, "nobody@gmail.example");
        assert_eq!(failures[0].severity, Severity::Permanent);
        assert_eq!(failures[0].status, "5.1.1");
        let diagnostic = failures[0].diagnostic.as_deref().unwrap();
        assert!(
            diagnostic.starts_with("550-5.1.1 The email account"),
            "{diagnostic}"
        );
        assert!(diagnostic.contains("does not exist"), "{diagnostic}");
    }

    #[test]
    fn a_delay_is_soft() {
        let Report::Delivery(failures) = parse(DELAYED_DSN.as_bytes()).unwrap() else {
            panic!("not a delivery report")
        };
        assert_eq!(failures[0].email, "slow@example.org");
        assert_eq!(failures[0].severity, Severity::Soft);
        assert_eq!(failures[0].action, "delayed");
        assert_eq!(failures[0].status, "4.4.1");
    }

    #[test]
    fn an_arf_report_is_a_complaint() {
        assert_eq!(
            parse(ARF_COMPLAINT.as_bytes()).unwrap(),
            Report::Complaint(Complaint {
                email: "reader@yahoo.example".into(),
                feedback_type: "abuse".into()
            })
        );
        // Without Original-Rcpt-To the returned message's To: names the reader.
        let redacted = ARF_COMPLAINT.replace("Original-Rcpt-To: reader@yahoo.example\n", "");
        assert_eq!(
            parse(redacted.as_bytes()).unwrap(),
            Report::Complaint(Complaint {
                email: "reader@yahoo.example".into(),
                feedback_type: "abuse".into()
            })
        );
    }

    #[test]
    fn other_mail_is_not_a_report() {
        assert!(matches!(
            parse(NOT_A_REPORT.as_bytes()),
            Err(NotAReport::Unrecognised(_))
        ));
        assert!(matches!(parse(b""), Err(NotAReport::Unrecognised(_))));
        let big = format!("{POSTFIX_DSN}{}", "x".repeat(MAX_REPORT_BYTES));
        assert_eq!(parse(big.as_bytes()), Err(NotAReport::TooLarge(big.len())));
    }
}
