//! `POST /bounces/<token>` takes a raw report whatever its declared type: a
//! forwarder piping a DSN sends the message's own `Content-Type: multipart/report`, tools
//! send files as `text/plain` or `application/octet-stream`, a bare pipe sends none. Each
//! bounces the subscriber the report names; the JSON report keeps working, declared or not.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::support::*;

/// A bounce message as an MTA writes it (tests/fixtures/bounces), about `address` instead of
/// the address it names.
fn report(name: &str, named: &str, address: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/bounces/{name}.eml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).expect("bounce fixture");
    assert!(text.contains(named), "{name} names {named}");
    text.replace(named, address)
}

/// POSTs `body` to `path` over a plain connection, with `Content-Type: content_type` or
/// without any (which the test client always sets); returns the status and the body.
fn post_raw(app: &App, path: &str, content_type: Option<&str>, body: &[u8]) -> (u16, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", app.port)).expect("connecting");
    let declared = content_type.map_or(String::new(), |t| format!("Content-Type: {t}\r\n"));
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{declared}Content-Length: {}\r\nConnection: close\r\n\r\n",
        app.port,
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {answer}"));
    let (headers, rest) = answer.split_once("\r\n\r\n").expect("a header block");
    assert!(
        !headers
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{headers}"
    );
    (status, serde_json::from_str(rest).unwrap_or(Value::Null))
}

#[test]
fn bounce_url_takes_a_raw_report_whatever_its_declared_type() {
    let app = spawn_app();
    let owner = onboard(&app, "Returned Mail");
    let token = bounce_token(&app, &owner);
    let path = format!("/bounces/{token}");
    let mut ids = std::collections::HashMap::new();
    for name in [
        "multipart",
        "body-only",
        "text",
        "octets",
        "undeclared",
        "json",
        "kept",
    ] {
        let email = format!("{name}@example.net");
        let created = owner.post("/subscribers", &json!({"email": email}));
        created.expect(201);
        ids.insert(name, created.json()["id"].as_i64().unwrap());
    }
    let status =
        |name: &str| owner.get(&format!("/subscribers/{}", ids[name])).json()["status"].clone();
    let postfix = |address: &str| report("postfix-dsn", "gone@example.net", address);
    // The report's own type, as a forwarder piping the whole message declares it.
    let own_type = "multipart/report; report-type=delivery-status;\
                    boundary=\"4ZxQ1k3Hb2z9sW.1795708931/mail.example.com\"";

    let cases: [(&str, Option<&str>, String); 4] = [
        (
            "multipart",
            Some(own_type),
            postfix("multipart@example.net"),
        ),
        (
            "text",
            Some("text/plain; charset=us-ascii"),
            report("exim-dsn", "nobody@gmail.example", "text@example.net").replace('\n', "\r\n"),
        ),
        (
            "octets",
            Some("application/octet-stream"),
            postfix("octets@example.net"),
        ),
        ("undeclared", None, postfix("undeclared@example.net")),
    ];
    for (name, content_type, message) in cases {
        let (code, answer) = post_raw(&app, &path, content_type, message.as_bytes());
        assert_eq!(code, 200, "{name}: {answer}");
        assert_eq!(
            answer["bounced"],
            json!([format!("{name}@example.net")]),
            "{name}"
        );
        assert_eq!(status(name), "bounced", "{name}");
    }

    // The report's MIME body alone, its type (with the boundary) sent as the request's.
    let whole = postfix("body-only@example.net");
    let (_, body) = whole.split_once("\n\n").expect("a header block");
    let (code, answer) = post_raw(&app, &path, Some(own_type), body.as_bytes());
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["bounced"], json!(["body-only@example.net"]));
    assert_eq!(status("body-only"), "bounced");

    // The JSON report, undeclared: still JSON.
    let json_report = br#"{"email": "json@example.net", "reason": "550 5.1.1 user unknown"}"#;
    let (code, answer) = post_raw(&app, &path, None, json_report);
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["message"], "Bounce recorded");
    assert_eq!(status("json"), "bounced");

    // What is not a report is refused, undeclared or not, and changes nothing.
    let events = app.count("SELECT count(*) FROM events");
    let not_a_report = report("not-a-report", "reader@example.org", "reader@example.org");
    for content_type in [None, Some("multipart/report; boundary=nothing-here")] {
        let (code, answer) = post_raw(&app, &path, content_type, not_a_report.as_bytes());
        assert_eq!(code, 422, "{content_type:?}: {answer}");
        assert_eq!(answer["error"]["code"], "not_a_report");
    }
    assert_eq!(app.count("SELECT count(*) FROM events"), events);
    assert_eq!(status("kept"), "active");
    // A wrong token, undeclared: 401.
    let (code, answer) = post_raw(
        &app,
        "/bounces/nottoken",
        None,
        postfix("kept@example.net").as_bytes(),
    );
    assert_eq!(
        (code, answer["error"]["code"].clone()),
        (401, json!("unauthorized"))
    );
    assert_eq!(status("kept"), "active");
}
