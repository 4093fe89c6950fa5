//! A newsletter's name, tagline and sender name go into mail headers (From,
//! List-Id, Subject), so every door refuses line breaks and other control characters in
//! them, at creation as on update, with a field message, and stores nothing.

use crate::support::send;
use crate::support::*;

const ONE_LINE: &str = "must be one line, without line breaks, tabs or other control characters";

#[test]
fn header_names_api_patch_refuses_control_characters_and_changes_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Header Safe");
    let before = owner.get("/newsletter").json()["data"].clone();
    for (name, tagline, sender_name) in [
        ("News\r\nBcc: victim@example.com", "one\ntwo", "The\rDesk"),
        ("Tab\tbed", "bell\u{7}", "next\u{85}line"),
    ] {
        let resp = owner.patch(
            "/newsletter",
            &json!({"name": name, "tagline": tagline, "sender_name": sender_name}),
        );
        assert_eq!(resp.error_code(422), "validation_error");
        let details = &resp.json()["error"]["details"];
        for field in ["name", "tagline", "sender_name"] {
            assert_eq!(details[field], json!([ONE_LINE]), "{field}: {details}");
        }
    }
    assert_eq!(owner.get("/newsletter").json()["data"], before);
}

#[test]
fn header_names_dashboard_settings_refuse_control_characters_and_change_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Header Safe");
    let before = owner.get("/newsletter").json()["data"].clone();
    let settings = format!("/newsletters/{}/settings", owner.newsletter_id);
    let resp = owner.client.submit(
        &settings,
        &format!("{settings}/details"),
        &[
            ("_method", "patch"),
            ("newsletter[name]", "News\r\nBcc: victim@example.com"),
            ("newsletter[tagline]", "one\ntwo"),
            ("newsletter[sender_name]", "The\tDesk"),
            ("newsletter[sender_email]", "desk@example.com"),
        ],
    );
    resp.expect(422);
    for label in ["Name", "Tagline", "Sender name"] {
        let sentence = format!("{label} {ONE_LINE}");
        assert!(resp.body.contains(&sentence), "{sentence}: {}", resp.body);
    }
    assert_eq!(owner.get("/newsletter").json()["data"], before);
}

#[test]
fn header_names_onboarding_refuses_control_characters_and_creates_nothing() {
    let app = spawn_app();
    let client = app.client();
    sign_up_confirmed(&app, &client, &unique_email("onboard"));
    let create = |name: &str, tagline: &str, from_name: &str| {
        client.submit(
            "/newsletters/new",
            "/newsletters",
            &[
                ("newsletter[name]", name),
                ("newsletter[tagline]", tagline),
                ("newsletter[keywords]", "rust"),
                ("newsletter[from_name]", from_name),
                ("newsletter[from_email]", "editor@example.com"),
            ],
        )
    };
    let resp = create("News\r\nBcc: victim@example.com", "one\ntwo", "The\rDesk");
    resp.expect(422);
    for label in ["Name", "Tagline", "From name"] {
        let sentence = format!("{label} {ONE_LINE}");
        assert!(resp.body.contains(&sentence), "{sentence}: {}", resp.body);
    }
    // The sender name's other rule holds at creation too.
    let resp = create("Fine Name", "", "Ed \"<x@example.com>");
    resp.expect(422);
    assert!(
        resp.body
            .contains("From name must not contain quotes or angle brackets"),
        "{}",
        resp.body
    );
    assert_eq!(app.count("SELECT count(*) FROM newsletters"), 0);
}

#[test]
fn header_names_with_line_separators_are_encoded_in_sent_mail() {
    // U+2028 and U+2029 are not control characters: a one-line name may hold them (they are
    // text to an editor). They never reach a header raw, where a reader that treats them as
    // line breaks would see a header of the attacker's making: each name is RFC 2047-encoded.
    let app = spawn_app();
    let owner = onboard_paid(&app, "Separators");
    let name = "News\u{2028}Bcc: all@example.com\u{2029}Weekly";
    let sender = "Ann\u{2028}Bcc: b@example.com";
    let subject = "Issue\u{2028}Bcc: c@example.com";
    owner
        .patch("/newsletter", &json!({"name": name, "sender_name": sender}))
        .expect(200);
    send::subscribe_all(&owner, &["reader@example.net".to_string()]);
    let id = send::approved_issue(&owner, subject);
    send::send_now(&owner, id);
    let received = app.smtp.wait_for_message_to("reader@example.net", 1);
    let text = String::from_utf8(received.data.clone()).expect("a UTF-8 message");
    let (head, _) = text.split_once("\r\n\r\n").expect("a head and a body");
    // Nothing of the names was written raw: the head is ASCII, with no header they made.
    assert!(head.is_ascii(), "{head}");
    assert!(!head.to_lowercase().contains("\nbcc"), "{head}");
    // A mail reader decodes each back to what the creator typed.
    let parsed = received.parsed();
    let list = parsed.list_id().as_address().expect("a List-Id");
    let list = list.first().expect("one list");
    assert_eq!(list.name(), Some(name), "{head}");
    assert_eq!(
        list.address(),
        Some(format!("{}.localhost", owner.subdomain).as_str())
    );
    let from = parsed.from().expect("a From").first().expect("one sender");
    assert_eq!(from.name(), Some(sender), "{head}");
    assert_eq!(parsed.subject(), Some(subject), "{head}");
}
