//! Bounces mailed back: the VERP return path of each issue message names its
//! delivery, and the bounce listener (`serve --bounce-listen`) takes DSN and ARF messages
//! sent to those addresses, and nothing else.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpStream};
use std::time::Duration;

use broadsheet::mail::bounce_listener::MAX_SESSIONS_PER_CLIENT;

use crate::support::net::Dialer;
use crate::support::send::{approved_issue, send_now, wait_status};
use crate::support::*;

/// The delivery id and signature of a return path `bounce+<id>-<signature>@<domain>`.
fn return_path_parts(address: &str, domain: &str) -> (i64, String) {
    let local = address
        .strip_suffix(&format!("@{domain}"))
        .unwrap_or_else(|| panic!("{address} is not at {domain}"));
    let (id, signature) = local
        .strip_prefix("bounce+")
        .and_then(|token| token.split_once('-'))
        .unwrap_or_else(|| panic!("{address} is not bounce+<id>-<signature>"));
    (id.parse().expect("a delivery id"), signature.to_string())
}

/// A paid newsletter with one subscriber for each address and one issue sent to them all.
fn sent_to(app: &App, addresses: &[&str]) -> Owner {
    let owner = onboard_paid(app, "Returns");
    listen(app, &owner, &["email.bounced", "email.unsubscribed"]);
    let emails: Vec<String> = addresses.iter().map(|a| a.to_string()).collect();
    send::subscribe_all(&owner, &emails);
    let id = approved_issue(&owner, "Issue 1");
    send_now(&owner, id);
    wait_status(&owner, id, "sent", Duration::from_secs(30));
    owner
}

/// The delivery id of the newest message to `email`.
fn delivery_of(app: &App, email: &str) -> i64 {
    app.db()
        .query_row(
            "SELECT max(id) FROM deliveries WHERE email = ?1",
            [email],
            |r| r.get(0),
        )
        .expect("a delivery")
}

#[test]
fn verp_each_issue_message_has_a_return_path_naming_its_delivery() {
    let app = spawn_app_with(&["--bounce-domain", "Bounces.Example.org"]);
    let addresses = ["ann@example.net", "bob@example.net"];
    let owner = sent_to(&app, &addresses);
    let mut signatures = Vec::new();
    for email in addresses {
        let received = app.smtp.wait_for_message_to(email, 1);
        let (delivery, signature) = return_path_parts(&received.from, "bounces.example.org");
        assert_eq!(delivery, delivery_of(&app, email), "{}", received.from);
        assert_eq!(signature.len(), 24, "{}", received.from);
        assert!(
            signature
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
            "lower-case hex: {}",
            received.from
        );
        // The From header is the newsletter's sender, not the return path.
        let from = received.header("From").expect("a From header");
        assert!(!from.contains("bounce+"), "{from}");
        signatures.push(signature);
    }
    assert_ne!(signatures[0], signatures[1]);
    drop(owner);
}

#[test]
fn verp_the_bounce_domain_defaults_to_the_public_host() {
    let app = spawn_app();
    sent_to(&app, &["cat@example.net"]);
    let received = app.smtp.wait_for_message_to("cat@example.net", 1);
    let (delivery, _) = return_path_parts(&received.from, "localhost");
    assert_eq!(delivery, delivery_of(&app, "cat@example.net"));
}

/// A server with the bounce listener on a free port (which it takes itself); returns it and
/// the port.
fn spawn_with_listener(extra: &[&str]) -> (App, u16) {
    let mut args = vec!["--bounce-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let app = spawn_app_with(&args);
    let port = app.bounce_port();
    (app, port)
}

/// A bounce or complaint message as an MTA writes it (tests/fixtures/bounces), CRLF ended.
fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/bounces/{name}.eml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).expect("bounce fixture");
    text.replace("\r\n", "\n")
        .replace('\n', "\r\n")
        .into_bytes()
}

/// The `data` of every `kind` event, oldest first.
fn events_of(app: &App, kind: &str) -> Vec<Value> {
    let db = app.db();
    let mut query = db
        .prepare("SELECT payload FROM events WHERE kind = ?1 ORDER BY id")
        .unwrap();
    let payloads = query
        .query_map([kind], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|p| serde_json::from_str::<Value>(&p.unwrap()).unwrap()["data"].clone());
    payloads.collect()
}

/// The subscriber `email` as the API shows it.
fn subscriber_shown(app: &App, owner: &Owner, email: &str) -> Value {
    let id: i64 = app
        .db()
        .query_row(
            "SELECT id FROM subscribers WHERE email = ?1",
            [email],
            |r| r.get(0),
        )
        .expect("a subscriber");
    let resp = owner.get(&format!("/subscribers/{id}"));
    resp.expect(200);
    resp.json()
}

/// A bounce-sending MTA, as far as the tests need one: one connection, one reply at a time.
struct Mta {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Mta {
    /// Connects and says EHLO; the greeting and the EHLO answer are checked.
    fn connect(port: u16) -> Self {
        Mta::greeted(TcpStream::connect(("127.0.0.1", port)).expect("the bounce listener"))
            .unwrap_or_else(|said| panic!("not greeted: {said}"))
    }

    /// On a connected stream: says EHLO once greeted with 220, checking the answer; what the
    /// listener said and did when it greets with anything else (read until it closes).
    fn greeted(stream: TcpStream) -> Result<Self, String> {
        // Only a guard against a hung test: every wait below ends on a reply or a close.
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut mta = Mta {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        let (code, greeting) = mta.reply();
        if code != 220 {
            return Err(greeting + &mta.wait_closed());
        }
        let (code, text) = mta.command("EHLO mta.example.net");
        assert_eq!(code, 250, "{text}");
        assert!(text.contains("SIZE 1048576"), "{text}");
        assert!(
            !text.contains("AUTH") && !text.contains("STARTTLS"),
            "{text}"
        );
        Ok(mta)
    }

    /// The next reply (all its lines): its code and text.
    fn reply(&mut self) -> (u16, String) {
        let mut text = String::new();
        loop {
            let mut line = String::new();
            let read = self.reader.read_line(&mut line).expect("a reply");
            assert!(
                read > 0,
                "the listener closed the connection; so far: {text}"
            );
            text.push_str(&line);
            if line.as_bytes().get(3) != Some(&b'-') {
                return (line[..3].parse().expect("a reply code"), text);
            }
        }
    }

    fn command(&mut self, line: &str) -> (u16, String) {
        self.write(format!("{line}\r\n").as_bytes());
        self.reply()
    }

    fn write(&mut self, bytes: &[u8]) {
        self.writer
            .write_all(bytes)
            .expect("the listener takes data");
    }

    /// One message from the null sender to `rcpt`: the code of RCPT when it is refused, else
    /// that of the end of DATA.
    fn deliver(&mut self, rcpt: &str, message: &[u8]) -> u16 {
        assert_eq!(self.command("MAIL FROM:<>").0, 250);
        let (code, text) = self.command(&format!("RCPT TO:<{rcpt}>"));
        if code != 250 {
            assert_eq!(self.command("RSET").0, 250);
            return code;
        }
        assert_eq!(self.command("DATA").0, 354, "{text}");
        let mut stuffed = Vec::new();
        for line in message.split_inclusive(|&b| b == b'\n') {
            if line.starts_with(b".") {
                stuffed.push(b'.');
            }
            stuffed.extend_from_slice(line);
        }
        if !stuffed.ends_with(b"\r\n") {
            stuffed.extend_from_slice(b"\r\n");
        }
        stuffed.extend_from_slice(b".\r\n");
        self.write(&stuffed);
        self.reply().0
    }

    /// Reads until the listener closes the connection; returns what it said meanwhile.
    fn wait_closed(&mut self) -> String {
        let mut said = String::new();
        match self.reader.read_to_string(&mut said) {
            Ok(_) => said,
            Err(e) => panic!("the connection was not closed: {e}; said: {said}"),
        }
    }
}

#[test]
fn bounce_listener_applies_dsns_and_complaints_sent_to_return_paths() {
    let (app, port) = spawn_with_listener(&[]);
    let owner = sent_to(
        &app,
        &[
            "gone@example.net",
            "slow@example.org",
            "reader@yahoo.example",
        ],
    );
    let return_path = |email: &str| app.smtp.wait_for_message_to(email, 1).from;
    let mut mta = Mta::connect(port);
    // Postfix's DSN to gone@'s return path: the delivery and the subscriber bounce.
    assert_eq!(
        mta.deliver(&return_path("gone@example.net"), &fixture("postfix-dsn")),
        250
    );
    assert_eq!(
        subscriber_shown(&app, &owner, "gone@example.net")["status"],
        "bounced"
    );
    let bounced = events_of(&app, "email.bounced");
    assert_eq!(bounced.len(), 1, "{bounced:?}");
    assert_eq!(bounced[0]["email"], "gone@example.net");
    assert_eq!(
        bounced[0]["delivery_id"],
        delivery_of(&app, "gone@example.net")
    );
    assert_eq!(bounced[0]["status"], "5.1.1");
    assert!(
        bounced[0]["diagnostic"]
            .as_str()
            .is_some_and(|d| d.contains("User unknown")),
        "{bounced:?}"
    );
    // A delay is noted on its delivery; the subscriber stays active.
    assert_eq!(
        mta.deliver(&return_path("slow@example.org"), &fixture("delayed-dsn")),
        250
    );
    assert_eq!(
        subscriber_shown(&app, &owner, "slow@example.org")["status"],
        "active"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM deliveries WHERE email = 'slow@example.org' AND soft_bounced_at IS NOT NULL"),
        1
    );
    // A complaint unsubscribes, with the reason.
    assert_eq!(
        mta.deliver(
            &return_path("reader@yahoo.example"),
            &fixture("arf-complaint")
        ),
        250
    );
    assert_eq!(
        subscriber_shown(&app, &owner, "reader@yahoo.example")["status"],
        "unsubscribed"
    );
    let unsubscribed = events_of(&app, "email.unsubscribed");
    assert_eq!(unsubscribed.len(), 1, "{unsubscribed:?}");
    assert_eq!(unsubscribed[0]["reason"], "complaint");
    assert_eq!(unsubscribed[0]["email"], "reader@yahoo.example");
    // Anything else is taken (the sender has nothing to fix) but kept out of the data.
    let events = app.count("SELECT count(*) FROM events");
    assert_eq!(
        mta.deliver(&return_path("slow@example.org"), &fixture("not-a-report")),
        250
    );
    assert_eq!(app.count("SELECT count(*) FROM events"), events);
    assert!(app.log().contains("was ignored"), "the log says so");
    assert_eq!(mta.command("QUIT").0, 221);
}

#[test]
fn bounce_listener_refuses_other_recipients_large_and_slow_messages() {
    let (app, port) = spawn_with_listener(&[
        "--bounce-domain",
        "bounces.example.org",
        "--bounce-command-timeout-ms",
        "400",
    ]);
    sent_to(&app, &["gone@example.net"]);
    let return_path = app.smtp.wait_for_message_to("gone@example.net", 1).from;
    let (local, _) = return_path.split_once('@').unwrap();
    let (prefix, signature) = local.rsplit_once('-').unwrap();
    let mut forged_signature = signature.to_string();
    let last = forged_signature.pop().unwrap();
    forged_signature.push(if last == '0' { '1' } else { '0' });
    let dsn = fixture("postfix-dsn");
    let mut mta = Mta::connect(port);
    for refused in [
        "postmaster@bounces.example.org".to_string(),
        format!("{local}@other.example.org"),
        format!("{prefix}-{forged_signature}@bounces.example.org"),
        format!("{local}@bounces.example.org.evil.example"),
        "gone@example.net".to_string(),
    ] {
        assert_eq!(mta.deliver(&refused, &dsn), 550, "{refused}");
    }
    // Too large, declared: 552 at MAIL; undeclared: the whole message is read, then 552.
    assert_eq!(mta.command("MAIL FROM:<> SIZE=2000000").0, 552);
    let mut big = dsn.clone();
    for _ in 0..(1024 * 1024 / 64) {
        big.extend_from_slice(&[b'x'; 62]);
        big.extend_from_slice(b"\r\n");
    }
    assert_eq!(mta.deliver(&return_path, &big), 552);
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers WHERE status = 'bounced'"),
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'email.bounced'"),
        0
    );
    // Upper case (a case-folding MTA) is the same address; the right one is taken.
    assert_eq!(mta.deliver(&return_path.to_uppercase(), &dsn), 250);
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers WHERE status = 'bounced'"),
        1
    );

    // A client that stalls in the middle of a message is cut off by the time limit.
    let mut slow = Mta::connect(port);
    assert_eq!(slow.command("MAIL FROM:<>").0, 250);
    assert_eq!(slow.command(&format!("RCPT TO:<{return_path}>")).0, 250);
    assert_eq!(slow.command("DATA").0, 354);
    slow.write(b"From: MAILER-DAEMON@mta.example.net\r\nSubject: half");
    let said = slow.wait_closed();
    assert!(said.starts_with("421 "), "{said}");
}

#[test]
fn bounce_listener_caps_sessions_per_client_address() {
    let (app, port) = spawn_with_listener(&["--bounce-domain", "bounces.example.org"]);
    sent_to(&app, &["gone@example.net"]);
    let return_path = app.smtp.wait_for_message_to("gone@example.net", 1).from;
    let dialer = Dialer::new();
    let one = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
    let session_from = |from| {
        Mta::greeted(
            dialer
                .connect_from(from, port)
                .expect("the bounce listener"),
        )
    };
    // One client holds every session it may: each is greeted and answers EHLO.
    let mut held: Vec<Mta> = (0..MAX_SESSIONS_PER_CLIENT)
        .map(|n| session_from(one).unwrap_or_else(|said| panic!("session {n}: {said}")))
        .collect();
    // One more from that address is told 421 at once, and closed.
    let Err(said) = session_from(one) else {
        panic!("a session past {MAX_SESSIONS_PER_CLIENT} from one address was greeted");
    };
    assert!(
        said.starts_with("421 4.7.0 bounces.example.org too many sessions from your address"),
        "{said}"
    );
    // Another address still gets a session, and its bounce is applied.
    let mut other = session_from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
        .unwrap_or_else(|said| panic!("another address: {said}"));
    assert_eq!(other.deliver(&return_path, &fixture("postfix-dsn")), 250);
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers WHERE status = 'bounced'"),
        1
    );
    // The held sessions are still served; once one ends, its place is free again.
    assert_eq!(held[1].command("NOOP").0, 250);
    let mut ended = held.remove(0);
    assert_eq!(ended.command("QUIT").0, 221);
    ended.wait_closed();
    wait_for(
        "a session for 127.0.0.1 again",
        Duration::from_secs(10),
        || session_from(one).ok(),
    );
}

#[test]
fn bounce_setup_is_shown_on_the_settings_page_and_by_bounce_token() {
    let app = spawn_app_with(&["--bounce-domain", "bounces.example.org"]);
    let owner = onboard(&app, "Field Notes");
    let token: String = app
        .db()
        .query_row(
            "SELECT bounce_token FROM newsletters WHERE id = ?1",
            [owner.newsletter_id],
            |r| r.get(0),
        )
        .unwrap();
    let page = owner
        .client
        .get(&format!("/newsletters/{}/settings", owner.newsletter_id));
    page.expect(200);
    let shown = |id: &str| {
        let start = page
            .body
            .find(&format!("id=\"{id}\">"))
            .unwrap_or_else(|| panic!("#{id} on the page"));
        let rest = &page.body[start..];
        rest[rest.find('>').unwrap() + 1..rest.find('<').unwrap()].to_string()
    };
    let return_paths = "bounce+&lt;delivery&gt;-&lt;signature&gt;@bounces.example.org";
    assert_eq!(shown("bounce-return-paths"), return_paths);
    assert_eq!(
        shown("bounce-url"),
        format!("{}/bounces/{token}", app.base_url)
    );
    let pipe = format!("broadsheet bounce {}", owner.subdomain);
    assert_eq!(shown("bounce-pipe"), pipe);

    let base_url = app.base_url.clone();
    let (code, out, err) = app.cli(&[
        "bounce-token",
        &owner.subdomain,
        "--base-url",
        &base_url,
        "--bounce-domain",
        "bounces.example.org",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "token: {token}\nurl: {base_url}/bounces/{token}\nreturn path: bounce+<delivery>-<signature>@bounces.example.org\npipe: {pipe}\n"
        )
    );
}

#[test]
fn bounce_with_a_return_path_applies_a_piped_report_to_its_delivery() {
    let app = spawn_app_with(&["--bounce-domain", "bounces.example.org"]);
    let owner = sent_to(&app, &["gone@example.net"]);
    let return_path = app.smtp.wait_for_message_to("gone@example.net", 1).from;
    let pipe = |address: &str, message: &[u8]| {
        app.cli_with_input(
            &[
                "bounce",
                "--return-path",
                address,
                "--bounce-domain",
                "bounces.example.org",
            ],
            message,
        )
    };
    let forged = return_path.replacen("bounce+", "bounce+1", 1);
    let (code, _, err) = pipe(&forged, &fixture("postfix-dsn"));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not a return path"), "{err}");
    assert_eq!(pipe(&return_path, &fixture("not-a-report")).0, 6);
    assert_eq!(
        subscriber_shown(&app, &owner, "gone@example.net")["status"],
        "active"
    );
    let (code, out, err) = pipe(&return_path, &fixture("postfix-dsn"));
    assert_eq!(code, 0, "{err}");
    let delivery = delivery_of(&app, "gone@example.net");
    assert_eq!(
        out,
        format!("delivery {delivery}: gone@example.net: bounced\n")
    );
    assert_eq!(
        subscriber_shown(&app, &owner, "gone@example.net")["status"],
        "bounced"
    );
}
