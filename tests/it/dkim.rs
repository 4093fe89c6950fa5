//! DKIM signing with the operator's key: every message the service sends, issues,
//! account mail and the welcome e-mail alike, verifies with an independent implementation (dkimpy) against the
//! record `broadsheet dkim` prints; a message changed after signing does not.

use std::time::Duration;

use crate::support::dkimpy::Dkimpy;
use crate::support::send::{approved_issue, send_now, subscribe_all, wait_status};
use crate::support::*;

#[test]
#[cfg_attr(
    not(has_dkimpy),
    ignore = "needs dkimpy in target/py (python3 -m venv target/py && target/py/bin/pip install dkimpy)"
)]
fn dkim_signs_every_message_and_an_independent_verifier_accepts_them() {
    let Some(dkimpy) = Dkimpy::find("dkim_signs_every_message") else {
        return;
    };
    let app = spawn_app_with(&["--dkim-domain", "mail.example.org"]);
    let owner = onboard_paid(&app, "Signed Notes");
    let readers: Vec<String> = (0..3).map(|_| unique_email("signed")).collect();
    subscribe_all(&owner, &readers);
    let welcomed = unique_email("welcomed");
    owner
        .post(
            "/subscribers",
            &json!({"email": welcomed, "send_welcome": true}),
        )
        .expect(201);
    let id = approved_issue(&owner, "Signed, sealed, delivered");
    assert_eq!(send_now(&owner, id), 4);
    wait_status(&owner, id, "sent", Duration::from_secs(30));

    let (code, record, err) = app.cli(&["dkim"]);
    assert_eq!(code, 0, "broadsheet dkim: {err}");
    let record = record.trim();
    assert!(
        record.starts_with("broadsheet._domainkey.mail.example.org TXT \"v=DKIM1; k=rsa; p="),
        "{record}"
    );

    let account_mail = app.smtp.messages_to(&owner.email);
    assert!(!account_mail.is_empty(), "the sign-up confirmation");
    let issue_mail: Vec<Received> = readers
        .iter()
        .map(|r| app.smtp.wait_for_message_to(r, 1))
        .collect();
    // The welcomed reader's two messages: the welcome and the issue, in either order.
    app.smtp.wait_for_message_to(&welcomed, 2);
    let welcome = app
        .smtp
        .messages_to(&welcomed)
        .into_iter()
        .find(|m| m.parsed().subject() == Some("Welcome to Signed Notes"))
        .expect("the welcome e-mail");
    for message in account_mail.iter().chain(&issue_mail).chain([&welcome]) {
        let signature = message.header("DKIM-Signature").expect("a DKIM-Signature");
        for tag in [
            "a=rsa-sha256",
            "c=relaxed/relaxed",
            "d=mail.example.org",
            "s=broadsheet",
        ] {
            assert!(signature.contains(tag), "{tag} in {signature}");
        }
        let signed: String = signature.split_whitespace().collect();
        for header in [
            "from",
            "to",
            "subject",
            "date",
            "message-id",
            "list-unsubscribe",
        ]
        .iter()
        .filter(|h| **h != "list-unsubscribe" || message.header("List-Unsubscribe").is_some())
        {
            assert!(
                signed
                    .to_lowercase()
                    .split(['=', ':', ';'])
                    .any(|h| h == *header),
                "{header} signed: {signature}"
            );
        }
        assert!(
            dkimpy.verifies(&message.data, record),
            "dkimpy rejects the message to {:?}:\n{}",
            message.to,
            String::from_utf8_lossy(&message.data)
        );
    }

    // Changed after signing: a word of the body, or the subject.
    let original = &issue_mail[0].data;
    let text = String::from_utf8_lossy(original);
    let body_changed = text.replacen("Every reader", "Every leader", 1);
    assert_ne!(body_changed, text, "the issue's text is in the message");
    assert!(!dkimpy.verifies(body_changed.as_bytes(), record));
    let subject_changed = text.replacen("Subject: Signed", "Subject: Forged", 1);
    assert_ne!(subject_changed, text, "the subject is in the message");
    assert!(!dkimpy.verifies(subject_changed.as_bytes(), record));
    assert!(
        dkimpy.verifies(original, record),
        "the original still verifies"
    );
}

#[test]
fn dkim_record_needs_a_key_first() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli(dir.path(), &["migrate"]);
    assert_eq!(code, 0, "{out} {err}");
    let (code, out, err) = run_cli(dir.path(), &["dkim"]);
    assert_eq!(code, 3, "{out} {err}");
    assert!(err.contains("--dkim-domain"), "{err}");
}
