//! Clients that send slowly, over raw TCP: a request head trickled a line at a time and a
//! connection that sends nothing are closed once the head's deadline passes; a body that
//! trickles is answered 408 and closed; a slow but steady body goes through. Short limits
//! are set by flag, and each test waits for the server's answer or its close, within a bound.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::*;

/// What a read on a socket with a read timeout came to.
enum Heard {
    /// Bytes of an answer.
    Bytes(usize),
    /// Nothing within the read timeout: the connection is still open.
    Nothing,
    /// The server closed the connection (EOF or a reset).
    Closed,
}

fn listen(stream: &mut TcpStream, buf: &mut [u8]) -> Heard {
    match stream.read(buf) {
        Ok(0) => Heard::Closed,
        Ok(n) => Heard::Bytes(n),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Heard::Nothing,
        Err(_) => Heard::Closed,
    }
}

/// Connects to the app; reads give up after `pace`, which also paces what the test sends.
fn connect(app: &App, pace: Duration) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", app.port)).expect("connecting");
    stream.set_read_timeout(Some(pace)).unwrap();
    stream
}

/// Sends `next()` every time `pace` passes without an answer, until the server closes the
/// connection; returns how long that took and what it answered. Fails past `bound`.
fn trickle_until_closed(
    stream: &mut TcpStream,
    bound: Duration,
    mut next: impl FnMut() -> Vec<u8>,
) -> (Duration, String) {
    let start = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match listen(stream, &mut buf) {
            Heard::Closed => return (start.elapsed(), String::from_utf8_lossy(&answer).into()),
            Heard::Bytes(n) => answer.extend_from_slice(&buf[..n]),
            Heard::Nothing => {
                assert!(
                    start.elapsed() < bound,
                    "the connection is still open after {:?}; answered so far: {:?}",
                    start.elapsed(),
                    String::from_utf8_lossy(&answer)
                );
                if stream.write_all(&next()).is_err() {
                    return (start.elapsed(), String::from_utf8_lossy(&answer).into());
                }
            }
        }
    }
}

#[test]
fn a_head_sent_a_line_a_second_and_a_silent_connection_are_closed() {
    let app = spawn_app_with(&["--header-read-timeout-ms", "2000"]);
    let mut silent = connect(&app, Duration::from_secs(1));
    let mut slow = connect(&app, Duration::from_secs(1));
    slow.write_all(b"GET /up HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let mut line = 0;
    let (closed_after, answer) = trickle_until_closed(&mut slow, Duration::from_secs(8), || {
        line += 1;
        format!("X-Slow-{line}: still coming\r\n").into_bytes()
    });
    assert!(
        closed_after >= Duration::from_millis(1500) && closed_after < Duration::from_secs(5),
        "closed after {closed_after:?}, {line} header lines"
    );
    assert!(line >= 1, "the test kept sending");
    assert!(!answer.contains("200 OK"), "{answer}");

    // The connection that never sent a byte had the same deadline.
    let (_, answer) = trickle_until_closed(&mut silent, Duration::from_secs(4), Vec::new);
    assert!(!answer.contains("200 OK"), "{answer}");

    // Meanwhile everyone else is served.
    app.client().get("/up").expect(200);
}

#[test]
fn a_body_that_trickles_is_answered_408_and_closed() {
    let app = spawn_app_with(&["--body-read-timeout-ms", "1000", "--body-min-rate", "100"]);
    let mut stream = connect(&app, Duration::from_millis(250));
    stream
        .write_all(
            b"POST /signup HTTP/1.1\r\nHost: 127.0.0.1\r\n\
              Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n\
              user%5Bemail_address%5D=",
        )
        .unwrap();
    // A byte every 250 ms: 4 bytes a second against the 100 asked for.
    let (closed_after, answer) =
        trickle_until_closed(&mut stream, Duration::from_secs(8), || b"a".to_vec());
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "answered: {answer:?} after {closed_after:?}"
    );
    assert!(
        answer.to_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(
        closed_after >= Duration::from_millis(900) && closed_after < Duration::from_secs(5),
        "closed after {closed_after:?}"
    );
    app.client().get("/up").expect(200);
}

#[test]
fn a_slow_but_steady_body_goes_through() {
    let app = spawn_app_with(&["--body-read-timeout-ms", "1000", "--body-min-rate", "2000"]);
    let owner = onboard(&app, "Patient Post");
    let people: Vec<Value> = (0..100)
        .map(|i| json!({"email": format!("steady{i}@example.com"), "name": format!("Steady reader number {i:03} of a slow but honest upload")}))
        .collect();
    let body = serde_json::to_vec(&json!({"subscribers": people})).unwrap();
    assert!(body.len() > 8_000, "{} bytes", body.len());
    let mut stream = connect(&app, Duration::from_millis(100));
    stream
        .write_all(
            format!(
                "POST /api/v1/subscribers/bulk_create HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                owner.key,
                body.len()
            )
            .as_bytes(),
        )
        .unwrap();
    // 400 bytes every 100 ms: about 4,000 bytes a second for over two seconds, past the
    // first second's allowance and above the 2,000 a second asked for.
    let mut chunks = body.chunks(400);
    let start = Instant::now();
    let (_, answer) = trickle_until_closed(&mut stream, Duration::from_secs(20), || {
        chunks.next().map(<[u8]>::to_vec).unwrap_or_default()
    });
    assert!(
        start.elapsed() > Duration::from_secs(2),
        "the body took {:?}",
        start.elapsed()
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"created\":100"), "{answer}");
    let listed = owner.get("/subscribers?per_page=100").json();
    assert_eq!(listed["subscribers"].as_array().unwrap().len(), 100);
}
