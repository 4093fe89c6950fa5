//! The server behind a real Postfix relay (tests/it/support/postfix.rs): an issue goes
//! through Postfix to the next hop, which refuses one recipient only after Postfix has queued
//! the message, so Postfix itself writes the DSN and mails it to the message's return path, as
//! a relay does in production; its transport map hands the bounce domain's mail to the
//! server's bounce listener (or to a sink, for the pipe command).

use std::time::Duration;

use broadsheet::domain::delivery::bounce_report::{self, Failure, Report, Severity};

use crate::support::postfix::{self, Postfix, Routes};
use crate::support::send::{approved_issue, send_now, wait_status};
use crate::support::*;

/// The bounce domain (`--bounce-domain`), of the messages' return paths; the relay's
/// transport map sends its mail (the DSNs) to the bounce side.
const BOUNCE_DOMAIN: &str = "bounces.test";
/// The reader whose mailbox the next hop says does not exist.
const GONE: &str = "gone@example.net";
const KEPT: &str = "kept@example.net";

/// A Postfix relaying to `next_hop` (refusing [`GONE`] at RCPT), and mailing whatever is
/// addressed to [`BOUNCE_DOMAIN`] to `bounce_port`; `None` where Postfix cannot run here.
fn relay(test: &str, next_hop: &SmtpSink, bounce_port: u16) -> Option<Postfix> {
    next_hop.change_rules(|r| r.permanent.push(GONE.into()));
    Postfix::start(
        test,
        &Routes {
            next_hop: next_hop.port,
            bounce_domain: BOUNCE_DOMAIN.into(),
            bounce_port,
        },
    )
}

/// A server sending through `postfix`, with a paid newsletter whose bounces are recorded as
/// events, and an issue sent to [`KEPT`] and [`GONE`] and handed to the relay.
struct Sent {
    app: App,
    owner: Owner,
    kept: i64,
    gone: i64,
}

/// Starts the server with `extra` flags, mail to `postfix` with return paths at
/// [`BOUNCE_DOMAIN`], and sends the issue. No `--mail-from`: the service's own default sender
/// must be one Postfix takes although the test's base URL is an IP address (an address at a
/// bare IP is refused with 501).
fn send_through(postfix: &Postfix, next_hop: &SmtpSink, extra: &[&str]) -> Sent {
    let smtp_url = postfix.smtp_url();
    let mut flags = vec!["--smtp-url", &smtp_url, "--bounce-domain", BOUNCE_DOMAIN];
    flags.extend_from_slice(extra);
    let app = spawn_app_on(next_hop.clone(), &flags);
    // The sign-up mail of the onboarding already goes through Postfix.
    let owner = onboard_paid(&app, "Relayed Notes");
    listen(&app, &owner, &["email.bounced"]);
    let ids: Vec<i64> = [KEPT, GONE]
        .iter()
        .map(|email| {
            let resp = owner.post("/subscribers", &json!({ "email": email }));
            resp.expect(201);
            resp.json()["id"].as_i64().expect("subscriber id")
        })
        .collect();
    let issue = approved_issue(&owner, "Through a real relay");
    assert_eq!(send_now(&owner, issue), 2);
    let shown = wait_status(&owner, issue, "sent", Duration::from_secs(60));
    // Postfix took both: the refusal comes later, from the next hop (with the listener on, its
    // DSN may already have turned one of the two into a bounce).
    let delivery = &shown["delivery"];
    assert_eq!(delivery["failed"], 0, "{shown}");
    assert_eq!(
        delivery["sent"].as_i64().unwrap() + delivery["bounced"].as_i64().unwrap(),
        2,
        "{shown}"
    );
    Sent {
        app,
        owner,
        kept: ids[0],
        gone: ids[1],
    }
}

fn subscriber_status(owner: &Owner, id: i64) -> Value {
    let resp = owner.get(&format!("/subscribers/{id}"));
    resp.expect(200);
    resp.json()["status"].clone()
}

/// `address` is a VERP return path at [`BOUNCE_DOMAIN`].
fn assert_return_path(address: &str) {
    assert!(
        address.starts_with("bounce+") && address.ends_with(&format!("@{BOUNCE_DOMAIN}")),
        "not a return path: {address}"
    );
}

/// The one permanent failure Postfix reports when the next hop refuses [`GONE`] at RCPT.
fn assert_refusal_of_gone(report: Report) {
    let Report::Delivery(failures) = report else {
        panic!("not a delivery report: {report:?}")
    };
    let [
        Failure {
            email,
            severity,
            action,
            status,
            diagnostic,
        },
    ] = &failures[..]
    else {
        panic!("one failure expected: {failures:?}")
    };
    assert_eq!(email, GONE);
    assert_eq!(*severity, Severity::Permanent);
    assert_eq!(action, "failed");
    assert_eq!(status, "5.1.1");
    let diagnostic = diagnostic.as_deref().unwrap_or_default();
    assert!(
        diagnostic.starts_with("550 5.1.1") && diagnostic.contains("No such user here"),
        "{diagnostic}"
    );
}

#[test]
#[cfg_attr(
    not(has_postfix),
    ignore = "needs root and Postfix (apt-get install postfix, with No configuration)"
)]
fn postfix_relay_mails_its_own_dsn_for_a_recipient_the_next_hop_refuses() {
    let next_hop = SmtpSink::start();
    let bounces = SmtpSink::start();
    let Some(postfix) = relay(
        "postfix_relay_mails_its_own_dsn_for_a_recipient_the_next_hop_refuses",
        &next_hop,
        bounces.port,
    ) else {
        return;
    };
    let Sent {
        app,
        owner,
        kept,
        gone,
    } = send_through(&postfix, &next_hop, &[]);

    // The kept reader's copy came through Postfix.
    let copy = next_hop.wait_for_message_to(KEPT, 1);
    let text = String::from_utf8_lossy(&copy.data);
    assert!(
        text.contains(&format!("by {} (Postfix)", postfix::HOSTNAME)),
        "no Received header by Postfix:\n{text}"
    );
    let sender = copy.from.clone();
    assert_return_path(&sender);

    // Postfix's own DSN, from the null sender to the return path of the refused message
    // (Postfix relays the two messages independently: the refusal may come after the copy).
    let dsn = bounces.wait_for_count(1, Duration::from_secs(30)).remove(0);
    assert!(next_hop.refusals().contains(&(GONE.to_string(), 550)));
    assert_eq!(dsn.from, "", "a DSN comes from the null sender");
    let content_type = dsn.header("Content-Type").unwrap_or_default();
    assert!(
        content_type.starts_with("multipart/report;")
            && content_type.contains("report-type=delivery-status"),
        "{content_type}\n{}",
        postfix.log()
    );
    assert_refusal_of_gone(bounce_report::parse(&dsn.data).expect("a report"));

    // Handed to `broadsheet bounce --return-path` (what the pipe transport does with the
    // bounce domain's mail), it bounces the refused reader and no one else. The DSN went to
    // the refused message's own return path, not the kept one's.
    let return_path = &dsn.to[0];
    assert_return_path(return_path);
    assert_ne!(return_path, &sender);
    let (code, out, err) = app.cli_with_input(
        &[
            "bounce",
            "--return-path",
            return_path,
            "--bounce-domain",
            BOUNCE_DOMAIN,
        ],
        &dsn.data,
    );
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains(&format!("{GONE}: bounced")), "{out}");
    assert_eq!(subscriber_status(&owner, gone), "bounced");
    assert_eq!(subscriber_status(&owner, kept), "active");
    let event = last_event(&app, "email.bounced");
    assert_eq!(event["email"], GONE);
    assert_eq!(event["status"], "5.1.1");
}

/// The whole path of a late bounce: the server started with a bounce domain and its bounce
/// listener, Postfix's transport map sending that domain to the listener; the next hop refuses
/// one reader after Postfix queued the message, and Postfix's DSN, mailed to the VERP return
/// path, marks that reader bounced through the listener alone.
#[test]
#[cfg_attr(
    not(has_postfix),
    ignore = "needs root and Postfix (apt-get install postfix, with No configuration)"
)]
fn postfix_relay_dsn_reaches_the_bounce_listener_and_bounces_the_reader() {
    let next_hop = SmtpSink::start();
    let listener_port = app::free_port();
    let Some(postfix) = relay(
        "postfix_relay_dsn_reaches_the_bounce_listener_and_bounces_the_reader",
        &next_hop,
        listener_port,
    ) else {
        return;
    };
    let listen_on = format!("127.0.0.1:{listener_port}");
    let Sent {
        app,
        owner,
        kept,
        gone,
    } = send_through(&postfix, &next_hop, &["--bounce-listen", &listen_on]);

    // The kept reader's copy came with its own return path.
    assert_return_path(&next_hop.wait_for_message_to(KEPT, 1).from);

    wait_for(
        "the refused reader bounced",
        Duration::from_secs(30),
        || (subscriber_status(&owner, gone) == "bounced").then_some(()),
    );
    assert_eq!(subscriber_status(&owner, kept), "active");
    let event = last_event(&app, "email.bounced");
    assert_eq!(event["email"], GONE);
    assert_eq!(event["status"], "5.1.1", "{event}");
    assert!(
        event["diagnostic"]
            .as_str()
            .is_some_and(|d| d.contains("No such user here")),
        "{event}"
    );
}

/// A DSN the first test received from Postfix 3.7 (when the return path was still the
/// sender's address), kept as written but for the client's host name, and read by the parser
/// without a relay.
#[test]
fn postfix_relay_a_saved_postfix_dsn_is_a_permanent_failure_of_the_refused_recipient() {
    let raw = std::fs::read(format!(
        "{}/tests/fixtures/bounces/postfix-relay-dsn.eml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the saved DSN");
    assert_refusal_of_gone(bounce_report::parse(&raw).expect("a report"));
}
