//! SMTP is never silently insecure: the relay's certificate is verified (a private
//! CA through `--smtp-ca`, never "accept anything"), a certificate that does not verify sends
//! nothing and says why, and credentials never cross a connection without TLS unless
//! `--smtp-allow-plaintext-auth` says so. Against a real TLS listener with a certificate of
//! the test's own CA (rcgen), for account mail and issue sends alike.

use std::time::Duration;

use base64::Engine;

use crate::support::send::{
    addresses, approved_issue, issue, send_now, subscribe_all, wait_status,
};
use crate::support::tls::TestCa;
use crate::support::*;

/// Submits the sign-up form without waiting for the confirmation mail.
fn sign_up_only(app: &App, email: &str) {
    submit_sign_up(&app.client(), email);
}

/// Waits until the server log has a line containing every one of `parts`; returns it.
fn wait_for_log_line(app: &App, parts: &[&str]) -> String {
    wait_for(
        &format!("a log line with {parts:?}"),
        Duration::from_secs(30),
        || {
            app.log()
                .lines()
                .find(|l| parts.iter().all(|p| l.contains(p)))
                .map(str::to_string)
        },
    )
}

/// Waits until the issue is held back because the relay cannot be reached; returns why.
fn wait_for_outage(owner: &Owner, id: i64) -> String {
    wait_for("the relay to be reported", Duration::from_secs(30), || {
        let shown = issue(owner, id);
        shown["last_error"]
            .as_str()
            .filter(|e| e.contains("unreachable since"))
            .map(str::to_string)
    })
}

#[test]
fn smtp_starttls_is_verified_against_smtp_ca_and_refused_without_it() {
    let ca = TestCa::new();
    let sink = SmtpSink::start_with(Rules {
        tls: Some(ca.sink_tls(false)),
        ..Rules::default()
    });
    let url = format!("smtp://127.0.0.1:{}", sink.port);
    let mut app = spawn_app_on(
        sink,
        &[
            "--smtp-url",
            &url,
            "--smtp-ca",
            ca.ca_path(),
            "--send-outage-retry-ms",
            "100",
        ],
    );
    // With the CA: the confirmation mail and an issue go out, all over TLS.
    let owner = onboard_paid(&app, "Sealed Notes");
    assert!(
        app.log().contains("and 1 from --smtp-ca"),
        "the start-up log names the roots:\n{}",
        app.log()
    );
    let readers = addresses("sealed", 3);
    subscribe_all(&owner, &readers);
    let id = approved_issue(&owner, "Over TLS");
    send_now(&owner, id);
    wait_status(&owner, id, "sent", Duration::from_secs(30));
    for reader in &readers {
        assert_eq!(app.smtp.messages_to(reader).len(), 1, "{reader}");
    }
    assert!(app.smtp.messages().iter().all(|m| m.tls), "all over TLS");
    assert!(app.smtp.commands().iter().any(|c| c.line == "STARTTLS"));

    // Without it the certificate is not trusted: nothing goes out, and the issue says why.
    app.set_args(&["--smtp-url", &url, "--send-outage-retry-ms", "100"]);
    app.restart();
    let taken = app.smtp.messages().len();
    let id = approved_issue(&owner, "Not to a stranger");
    send_now(&owner, id);
    let reason = wait_for_outage(&owner, id);
    assert!(
        reason.contains("TLS certificate was refused") && reason.contains("--smtp-ca"),
        "{reason}"
    );
    assert_eq!(issue(&owner, id)["status"], "sending");
    // Account mail waits the same way, and the log says why.
    let email = unique_email("untrusted");
    sign_up_only(&app, &email);
    let line = wait_for_log_line(
        &app,
        &["send_mail", "will retry", "certificate was refused"],
    );
    assert!(line.contains("UnknownIssuer"), "{line}");
    assert_eq!(app.smtp.messages().len(), taken, "nothing went out");
    assert!(app.smtp.messages_to(&email).is_empty());
}

#[test]
fn smtp_implicit_tls_without_the_ca_sends_nothing_and_with_it_delivers() {
    let ca = TestCa::new();
    let sink = SmtpSink::start_with(Rules {
        tls: Some(ca.sink_tls(true)),
        ..Rules::default()
    });
    let url = format!("smtps://127.0.0.1:{}", sink.port);
    let mut app = spawn_app_on(sink, &["--smtp-url", &url]);
    let email = unique_email("smtps");
    sign_up_only(&app, &email);
    let line = wait_for_log_line(
        &app,
        &["send_mail", "will retry", "certificate was refused"],
    );
    assert!(line.contains("--smtp-ca"), "{line}");
    assert!(app.smtp.messages().is_empty(), "nothing delivered");
    assert!(
        app.smtp.commands().is_empty(),
        "not one SMTP command crossed a connection whose certificate failed"
    );

    app.set_args(&["--smtp-url", &url, "--smtp-ca", ca.ca_path()]);
    app.restart();
    let client = app.client();
    let other = unique_email("smtps");
    sign_up(&app, &client, &other);
    let mail = app.smtp.messages_to(&other).pop().unwrap();
    assert!(mail.tls);
    assert!(app.smtp.commands().iter().all(|c| c.tls));
}

#[test]
fn smtp_credentials_never_go_in_the_clear_unless_allowed() {
    let sink = SmtpSink::start_with(Rules {
        auth: true,
        ..Rules::default()
    });
    let url = format!("smtp://news%40example.com:s3cret@127.0.0.1:{}", sink.port);
    let refuse = ["--smtp-url", url.as_str(), "--send-outage-retry-ms", "100"];
    let mut app = spawn_app_on(sink, &refuse);
    let auths = |app: &App| {
        app.smtp
            .commands()
            .into_iter()
            .filter(|c| c.line.to_ascii_uppercase().starts_with("AUTH"))
            .count()
    };

    // No STARTTLS on offer: the credentials stay home and the account mail waits.
    let email = unique_email("clear");
    sign_up_only(&app, &email);
    let line = wait_for_log_line(&app, &["send_mail", "will retry", "in the clear"]);
    assert!(line.contains("--smtp-allow-plaintext-auth"), "{line}");
    assert_eq!(auths(&app), 0, "no AUTH reached the relay");
    assert!(app.smtp.messages().is_empty());
    assert!(
        app.smtp
            .commands()
            .iter()
            .any(|c| c.line.starts_with("EHLO")),
        "the relay was reached and asked what it offers"
    );

    // Allowed for a relay on this machine: AUTH goes out, and so does the mail.
    let allow = [
        "--smtp-url",
        url.as_str(),
        "--send-outage-retry-ms",
        "100",
        "--smtp-allow-plaintext-auth",
    ];
    app.set_args(&allow);
    app.restart();
    let owner = onboard_paid(&app, "Open Wire");
    let plain = base64::engine::general_purpose::STANDARD.encode("\0news@example.com\0s3cret");
    let sent_auth = app
        .smtp
        .commands()
        .into_iter()
        .find(|c| c.line.starts_with("AUTH"))
        .expect("an AUTH command");
    assert_eq!(sent_auth.line, format!("AUTH PLAIN {plain}"));
    assert!(!sent_auth.tls);
    assert!(app.log().contains("credentials may go in the clear"));

    // Without the flag again, an issue waits and says why; still no AUTH in the clear.
    app.set_args(&refuse);
    app.restart();
    let before = (auths(&app), app.smtp.messages().len());
    subscribe_all(&owner, &addresses("clear", 2));
    let id = approved_issue(&owner, "Kept off the wire");
    send_now(&owner, id);
    let reason = wait_for_outage(&owner, id);
    assert!(reason.contains("would go in the clear"), "{reason}");
    assert_eq!((auths(&app), app.smtp.messages().len()), before);
}
