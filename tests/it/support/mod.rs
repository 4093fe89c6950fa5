//! What every integration test shares: the server under test, the SMTP listener, an HTTP
//! client, and the onboarding walk that ends in a working API key.

#![allow(dead_code, unused_imports)]

pub mod app;
pub mod axe;
pub mod browser;
pub mod disk;
pub mod dkimpy;
pub mod dns;
pub mod http;
pub mod net;
pub mod openapi;
pub mod postfix;
pub mod receiver;
pub mod send;
pub mod smtp;
pub mod stripe;
pub mod times;
pub mod tls;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub use app::{
    App, run_cli, spawn_app, spawn_app_in_memory, spawn_app_on, spawn_app_on_small_disk,
    spawn_app_outbox, spawn_app_with, wait_for,
};
pub use http::{Client, Resp};
pub use serde_json::{Value, json};
pub use smtp::{Fault, Quota, Received, Rules, SmtpSink};
pub use times::{instant, next_tuesday_nine, stored, utc_day};

pub const PASSWORD: &str = "correct horse battery";

/// A unique e-mail address for this test process.
pub fn unique_email(stem: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{stem}{}@example.com", N.fetch_add(1, Ordering::SeqCst))
}

/// The first `http(s)://...` link in `text` whose path contains `needle`.
pub fn link_containing(text: &str, needle: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || c == '"' || c == '<' || c == '>' || c == '\'')
        .find(|w| (w.starts_with("http://") || w.starts_with("https://")) && w.contains(needle))
        .map(|w| http::unescape(w.trim_end_matches(['.', ')', ','])))
}

/// The path (and query) of an absolute `http(s)://host/...` URL.
pub fn path_of(url: &str) -> String {
    format!("/{}", url.splitn(4, '/').nth(3).unwrap_or(""))
}

/// Appends every `.rs` file under `dir` (at any depth) to `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Submits the sign-up form; the answer sends the browser to wait for the confirmation mail.
pub fn submit_sign_up(client: &Client, email: &str) {
    let resp = client.submit(
        "/signup",
        "/signup",
        &[
            ("user[email_address]", email),
            ("user[password]", PASSWORD),
            ("user[password_confirmation]", PASSWORD),
        ],
    );
    assert_eq!(resp.redirect(), "/email_confirmation_pending");
}

/// Signs up through the form and returns the confirmation link from the mail that arrives.
pub fn sign_up(app: &App, client: &Client, email: &str) -> String {
    submit_sign_up(client, email);
    let mail = app.smtp.wait_for_message_to(email, 1);
    link_containing(&mail.text(), "/email_confirmations/")
        .unwrap_or_else(|| panic!("no confirmation link in:\n{}", mail.text()))
}

/// Signs up and follows the confirmation link: the client is signed in.
pub fn sign_up_confirmed(app: &App, client: &Client, email: &str) {
    let link = sign_up(app, client, email);
    let resp = client.get(&link);
    assert_eq!(resp.redirect(), "/newsletters");
}

/// Creates a newsletter and completes frequency and preferences; returns its id.
pub fn create_newsletter(client: &Client, name: &str) -> i64 {
    let resp = client.submit(
        "/newsletters/new",
        "/newsletters",
        &[
            ("newsletter[name]", name),
            ("newsletter[tagline]", "Notes from the field"),
            ("newsletter[keywords]", "rust, sqlite"),
            ("newsletter[from_name]", "Field Notes"),
            ("newsletter[from_email]", "editor@example.com"),
        ],
    );
    let next = resp.redirect();
    let id: i64 = next
        .trim_start_matches("/newsletters/")
        .split('/')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("unexpected redirect {next}"));
    assert_eq!(next, format!("/newsletters/{id}/setup_frequency"));
    let resp = client.submit(
        &next,
        &format!("/newsletters/{id}/apply_frequency"),
        &[("frequency", "weekly")],
    );
    assert_eq!(
        resp.redirect(),
        format!("/newsletters/{id}/preference/edit")
    );
    let resp = client.submit(
        &format!("/newsletters/{id}/preference/edit"),
        &format!("/newsletters/{id}/preference"),
        &[
            ("_method", "patch"),
            (
                "newsletter_preference[target_audience]",
                "Engineers who run small servers",
            ),
            ("newsletter_preference[content_tone]", "friendly"),
            ("newsletter_preference[newsletter_length]", "short"),
        ],
    );
    assert_eq!(resp.redirect(), format!("/newsletters/{id}"));
    id
}

/// Creates an API key with `permissions` in the dashboard and returns the full key.
pub fn create_api_key(client: &Client, newsletter_id: i64, permissions: &[&str]) -> String {
    let mut fields = vec![("api_key[name]", "test script")];
    for p in permissions {
        fields.push(("api_key[permissions][]", p));
    }
    let resp = client.submit(
        &format!("/newsletters/{newsletter_id}/api_keys/new"),
        &format!("/newsletters/{newsletter_id}/api_keys"),
        &fields,
    );
    resp.expect(200);
    let start = resp
        .body
        .find("id=\"api-key\"")
        .unwrap_or_else(|| panic!("no key on the page:\n{}", resp.body));
    let after = &resp.body[start..];
    let open = after.find('>').unwrap() + 1;
    let close = after[open..].find('<').unwrap() + open;
    let key = after[open..close].trim().to_string();
    assert_eq!(key.len(), 72, "key {key:?}");
    key
}

/// A signed-in owner with a live newsletter and an API key with every permission.
pub struct Owner {
    pub client: Client,
    pub email: String,
    pub newsletter_id: i64,
    pub subdomain: String,
    pub key: String,
}

impl Owner {
    pub fn api(&self, method: &str, path: &str, body: Option<&Value>) -> Resp {
        self.client.api(method, path, &self.key, body)
    }
    pub fn get(&self, path: &str) -> Resp {
        self.api("GET", path, None)
    }
    pub fn post(&self, path: &str, body: &Value) -> Resp {
        self.api("POST", path, Some(body))
    }
    pub fn patch(&self, path: &str, body: &Value) -> Resp {
        self.api("PATCH", path, Some(body))
    }
    pub fn delete(&self, path: &str) -> Resp {
        self.api("DELETE", path, None)
    }
}

/// Walks the whole browser onboarding over HTTP and returns the owner.
pub fn onboard(app: &App, name: &str) -> Owner {
    let client = app.client();
    let email = unique_email("owner");
    sign_up_confirmed(app, &client, &email);
    let newsletter_id = create_newsletter(&client, name);
    let key = create_api_key(&client, newsletter_id, &["read", "write", "delete"]);
    let me = client.api("GET", "/newsletter", &key, None);
    me.expect(200);
    let subdomain = me.json()["data"]["subdomain"]
        .as_str()
        .expect("subdomain")
        .to_string();
    Owner {
        client,
        email,
        newsletter_id,
        subdomain,
        key,
    }
}

/// The owner's bounce token (for `POST /bounces/<token>`), as `broadsheet bounce-token`
/// prints it.
pub fn bounce_token(app: &App, owner: &Owner) -> String {
    let (code, out, err) = app.cli(&["bounce-token", &owner.subdomain]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .find_map(|l| l.strip_prefix("token: "))
        .expect("token line")
        .to_string()
}

/// Gives the owner's newsletter the sender that [`assert_from_sender`] expects.
pub fn set_sender(owner: &Owner) {
    owner
        .patch(
            "/newsletter",
            &json!({"sender_name": "Sam Sender", "sender_email": "sam@sender.example"}),
        )
        .expect(200);
}

/// `mail` comes from the sender [`set_sender`] sets: the envelope and the `From` header.
#[track_caller]
pub fn assert_from_sender(mail: &Received) {
    assert_eq!(mail.from, "sam@sender.example", "the envelope sender");
    let parsed = mail.parsed();
    let from = parsed.from().and_then(|f| f.first()).expect("From");
    assert_eq!(from.name(), Some("Sam Sender"));
    assert_eq!(from.address(), Some("sam@sender.example"));
}

/// Onboards and sets the newsletter's tier to paid through the CLI (the API cannot).
pub fn onboard_paid(app: &App, name: &str) -> Owner {
    let owner = onboard(app, name);
    let (code, out, err) = app.cli(&["tier", &owner.subdomain, "paid"]);
    assert_eq!(code, 0, "tier: {out} {err}");
    owner
}

/// The owner asks for the paid tier from the settings page (the operator page lists it).
pub fn request_upgrade(owner: &Owner) {
    let settings = format!("/newsletters/{}/settings", owner.newsletter_id);
    owner
        .client
        .submit(&settings, &format!("{settings}/upgrade"), &[])
        .redirect();
}

/// A `multipart/form-data` body with the CSRF field and one file.
pub fn multipart(token: &str, file_name: &str, content: &[u8]) -> (String, Vec<u8>) {
    let boundary = "----broadsheet-test-7d1f0a";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"authenticity_token\"\r\n\r\n{token}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
         Content-Type: text/csv\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Uploads the CSV `content` through the dashboard's import form of newsletter `nid`, with `client`'s own token
/// taken from `form_nid`'s import page.
pub fn upload_as(client: &Client, form_nid: i64, nid: i64, name: &str, content: &[u8]) -> Resp {
    let page = client.get(&format!("/newsletters/{form_nid}/subscribers/import"));
    page.expect(200);
    let (content_type, body) = multipart(&page.csrf_token(), name, content);
    client
        .request(
            "POST",
            &format!("/newsletters/{nid}/subscribers/import"),
            &[],
            Some((&content_type, body)),
        )
        .unwrap()
}

/// The subscriber with `email`, through the API.
pub fn api_subscriber(owner: &Owner, email: &str) -> Option<Value> {
    for page in 1.. {
        let list = owner
            .get(&format!("/subscribers?per_page=100&page={page}"))
            .json();
        let rows = list["subscribers"].as_array().unwrap();
        if let Some(found) = rows.iter().find(|s| s["email"] == email) {
            return Some(found.clone());
        }
        if list["meta"]["has_more"] != true {
            break;
        }
    }
    None
}

pub fn upload(owner: &Owner, name: &str, content: &[u8]) -> Resp {
    upload_as(
        &owner.client,
        owner.newsletter_id,
        owner.newsletter_id,
        name,
        content,
    )
}

/// Subscribes a webhook of the owner's newsletter to `kinds`, straight in the database (its
/// URL is a closed local port, so attempts fail and retry later): events are recorded only
/// when a subscription wants them, and tests that read the events table need some.
pub fn listen(app: &App, owner: &Owner, kinds: &[&str]) {
    rusqlite::Connection::open(app.data_dir().join("broadsheet.db"))
        .unwrap()
        .execute(
            "INSERT INTO webhook_subscriptions (newsletter_id, url, events, secret, created_at, updated_at)
             VALUES (?1, 'http://127.0.0.1:9/', ?2, 'whsec_test', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
            (owner.newsletter_id, serde_json::to_string(kinds).unwrap()),
        )
        .unwrap();
}

/// Mail jobs queued for `email` whose link contains `needle` (`""`: any). The service queues
/// its mail in the transaction of the request that asks for it, so after the answer this
/// count is final for that request.
pub fn queued_mails(app: &App, email: &str, needle: &str) -> i64 {
    app.db()
        .query_row(
            "SELECT count(*) FROM jobs WHERE kind = 'send_mail' AND json_extract(payload, '$.to') = ?1
             AND coalesce(json_extract(payload, '$.link'), '') LIKE '%' || ?2 || '%'",
            (email, needle),
            |r| r.get(0),
        )
        .unwrap()
}

/// Waits until every mail job for `email` is done, then returns what the sink holds for it:
/// from then on nothing more can arrive.
pub fn settled_mail(app: &App, email: &str) -> Vec<Received> {
    wait_for(
        &format!("the mail jobs for {email}"),
        Duration::from_secs(20),
        || {
            let pending: i64 = app
                .db()
                .query_row(
                    "SELECT count(*) FROM jobs WHERE kind = 'send_mail'
                     AND json_extract(payload, '$.to') = ?1 AND state <> 'done'",
                    [email],
                    |r| r.get(0),
                )
                .unwrap();
            (pending == 0).then_some(())
        },
    );
    app.smtp.messages_to(email)
}

/// The `data` of the newest `kind` event (recorded only when a webhook listens: [`listen`]).
pub fn last_event(app: &App, kind: &str) -> Value {
    let payload: String = app
        .db()
        .query_row(
            "SELECT payload FROM events WHERE kind = ?1 ORDER BY id DESC LIMIT 1",
            [kind],
            |r| r.get(0),
        )
        .unwrap();
    serde_json::from_str::<Value>(&payload).unwrap()["data"].clone()
}

/// Runs a helper program of the tests to its end; when it fails, why (its output).
pub fn run_tool(program: &str, args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {} {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
