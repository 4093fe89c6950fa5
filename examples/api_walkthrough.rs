//! A walk through the Broadsheet REST API v1 with a plain HTTP client (`ureq`): it reads the
//! newsletter, adds subscribers one by one and in bulk, writes an issue with articles and
//! approves it, printing each step.
//!
//! Run it against a local server:
//!
//! ```text
//! # 1. Start the service (mail goes to ./data/outbox when no --smtp-url is given).
//! cargo run -- serve
//! # 2. In a browser at http://localhost:8080: sign up, confirm (the link is in the .eml file
//! #    under ./data/outbox), create a newsletter, then generate an API key with the
//! #    read and write permissions on the newsletter's "API keys" page.
//! # 3. Run the walk-through with that key:
//! BROADSHEET_URL=http://localhost:8080 BROADSHEET_API_KEY=<API_KEY> \
//!     cargo run --example api_walkthrough
//! ```
//!
//! `BROADSHEET_URL` is the service origin (`--base-url`); the API lives under `/api/v1`.
//! The program exits non-zero at the first answer that is not what it expected, printing
//! the JSON error body (`{"error": {"code", "message", "details"}}`).

use std::process::ExitCode;

use serde_json::{Value, json};

/// A tiny API client: a bearer key, JSON in, JSON out.
struct Api {
    agent: ureq::Agent,
    root: String,
    auth: String,
}

/// What went wrong on one call.
type Failure = String;

impl Api {
    fn new(base_url: &str, key: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(30)))
            .build()
            .into();
        Api {
            agent,
            root: format!("{}/api/v1", base_url.trim_end_matches('/')),
            auth: format!("Bearer {key}"),
        }
    }

    /// Sends one request and returns (status, JSON body, remaining requests in the bucket).
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value, String), Failure> {
        let url = format!("{}{path}", self.root);
        let result = match (method, body) {
            ("GET", _) => self
                .agent
                .get(&url)
                .header("Authorization", &self.auth)
                .call(),
            ("DELETE", _) => self
                .agent
                .delete(&url)
                .header("Authorization", &self.auth)
                .call(),
            ("POST", Some(body)) => self
                .agent
                .post(&url)
                .header("Authorization", &self.auth)
                .send_json(body),
            ("POST", None) => self
                .agent
                .post(&url)
                .header("Authorization", &self.auth)
                .send_empty(),
            ("PATCH", Some(body)) => self
                .agent
                .patch(&url)
                .header("Authorization", &self.auth)
                .send_json(body),
            _ => return Err(format!("unsupported call {method} {path}")),
        };
        let mut response = result.map_err(|e| format!("{method} {path}: {e}"))?;
        let status = response.status().as_u16();
        let remaining = response
            .headers()
            .get("X-RateLimit-Remaining")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?")
            .to_string();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("{method} {path}: reading the answer: {e}"))?;
        let json = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .map_err(|e| format!("{method} {path}: not JSON ({e}): {text}"))?
        };
        Ok((status, json, remaining))
    }

    /// Like [`Api::call`], failing unless the status is one of `expected`.
    fn expect(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        expected: &[u16],
    ) -> Result<(u16, Value), Failure> {
        let (status, json, remaining) = self.call(method, path, body)?;
        if !expected.contains(&status) {
            return Err(format!(
                "{method} {path}: expected {expected:?}, got {status}: {json}"
            ));
        }
        println!("  {method} /api/v1{path} -> {status} (rate limit remaining: {remaining})");
        Ok((status, json))
    }
}

fn run(api: &Api) -> Result<(), Failure> {
    println!("1. The newsletter this key belongs to");
    let (_, me) = api.expect("GET", "/newsletter", None, &[200])?;
    let newsletter = &me["data"];
    println!(
        "   {} ({}), tier {}, {} active subscriber(s), site {}",
        newsletter["name"].as_str().unwrap_or("?"),
        newsletter["subdomain"].as_str().unwrap_or("?"),
        newsletter["tier"].as_str().unwrap_or("?"),
        newsletter["subscriber_count"],
        newsletter["urls"]["home"].as_str().unwrap_or("?"),
    );

    println!("2. Subscribers, one at a time (201 new, 200 already there)");
    for (email, name, tags) in [
        ("ada@example.com", "Ada", json!(["early-reader"])),
        ("grace@example.com", "Grace", json!([])),
    ] {
        let (status, s) = api.expect(
            "POST",
            "/subscribers",
            Some(&json!({"email": email, "name": name, "tags": tags})),
            &[200, 201],
        )?;
        let verb = if status == 201 {
            "created"
        } else {
            "already subscribed"
        };
        println!("   #{} {} {verb}, tags {}", s["id"], s["email"], s["tags"]);
    }

    println!("3. Subscribers in bulk (up to 1000 per request)");
    let (_, bulk) = api.expect(
        "POST",
        "/subscribers/bulk_create",
        Some(&json!({"subscribers": [
            {"email": "linus@example.com"},
            {"email": "Ada@Example.com"},
            {"email": "not an address"}
        ]})),
        &[200],
    )?;
    println!(
        "   created {}, existing {}, errors {}",
        bulk["created"], bulk["existing"], bulk["errors"]
    );

    println!("4. Write an issue with articles (a draft)");
    let (_, issue) = api.expect(
        "POST",
        "/issues",
        Some(&json!({"issue": {
            "subject": "Field notes: week one",
            "content_markdown": "# Hello\n\nThis week: two links worth your time.",
            "articles": [
                {"title": "SQLite in production", "url": "https://www.sqlite.org/whentouse.html",
                 "summarized_article": "When SQLite is the right database."},
                {"title": "The Rust book", "url": "https://doc.rust-lang.org/book/",
                 "summarized_article": "Where to start with Rust."}
            ]
        }})),
        &[201],
    )?;
    let id = issue["id"].as_i64().ok_or("the issue has no id")?;
    println!(
        "   issue #{id} \"{}\" is {}, {} article(s), path /p/{}",
        issue["subject"].as_str().unwrap_or("?"),
        issue["status"].as_str().unwrap_or("?"),
        issue["articles_count"],
        issue["path"].as_str().unwrap_or("?"),
    );

    println!("5. Approve it");
    let (_, approved) = api.expect(
        "PATCH",
        &format!("/issues/{id}"),
        Some(&json!({"issue": {"status": "approved"}})),
        &[200],
    )?;
    println!(
        "   issue #{id} is now {}",
        approved["status"].as_str().unwrap_or("?")
    );
    for article in approved["articles"].as_array().into_iter().flatten() {
        println!(
            "   {}. {} <{}>",
            article["position"],
            article["title"].as_str().unwrap_or("?"),
            article["url"].as_str().unwrap_or("?")
        );
    }

    println!("6. The latest issues");
    let (_, list) = api.expect("GET", "/issues?per_page=5", None, &[200])?;
    for i in list["issues"].as_array().into_iter().flatten() {
        println!(
            "   #{} {} [{}]",
            i["id"],
            i["subject"].as_str().unwrap_or("?"),
            i["status"].as_str().unwrap_or("?")
        );
    }
    println!(
        "Done. Send it with POST /api/v1/issues/{id}/send_now (paid tier) or publish it with \
         POST /api/v1/issues/{id}/publish."
    );
    Ok(())
}

fn main() -> ExitCode {
    let (Ok(url), Ok(key)) = (
        std::env::var("BROADSHEET_URL"),
        std::env::var("BROADSHEET_API_KEY"),
    ) else {
        eprintln!(
            "Set BROADSHEET_URL (e.g. http://localhost:8080) and BROADSHEET_API_KEY (a key with \
             read and write permissions from the dashboard)."
        );
        return ExitCode::from(2);
    };
    match run(&Api::new(&url, &key)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::FAILURE
        }
    }
}
