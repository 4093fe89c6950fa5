//! Signup forms that live anywhere (docs/growth.md), through the real binary: a form made in
//! the dashboard, its snippet posted from another origin without JavaScript (the success
//! page, the owner's redirect, the form's tags on the confirmed subscriber) and for JSON
//! (CORS only for the listed origins); the honeypot; the proof-of-work's single use and
//! expiry (the test clock moved); a flood of 2,000 posts from rotating addresses behind a
//! trusted proxy, with and without the work solved, sending no more confirmation mails than
//! the documented limits; and in Chromium, a person on another site subscribing in one step,
//! with the script and without it.

use std::time::Duration;

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::support::http::attribute_after;
use crate::support::*;

/// Whatever page `another site` is: the origin the snippet is pasted on.
const ELSEWHERE: &str = "http://127.0.0.1:9";

/// A form made on the dashboard's Forms page; its public id.
fn make_form(owner: &Owner, fields: &[(&str, &str)]) -> String {
    let list = format!("/newsletters/{}/forms", owner.newsletter_id);
    let page = owner.client.get(&list);
    page.expect(200);
    let mut all = vec![
        ("authenticity_token", page.csrf_token()),
        ("form[name]", "Blog sidebar".to_string()),
        ("form[ask_name]", "yes".to_string()),
        ("form[button_text]", "Join".to_string()),
        (
            "form[success_message]",
            "Almost there: check your inbox.".to_string(),
        ),
        ("form[pow_cost]", "1000".to_string()),
    ];
    for (k, v) in fields {
        all.retain(|(key, _)| key != k);
        all.push((k, v.to_string()));
    }
    let pairs: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let created = owner.client.post_form(&list, &pairs);
    let at = created.redirect();
    let shown = owner.client.get(&at);
    shown.expect(200);
    assert!(shown.body.contains("Snippet"), "{}", shown.body);
    let start = shown.body.find("/f/").expect("the form's address") + 3;
    shown.body[start..start + 16].to_string()
}

/// Posts `fields` to the form as a page elsewhere would (no cookie), with `headers`.
fn post(
    app: &App,
    owner: &Owner,
    id: &str,
    fields: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Resp {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    app.site_client(&owner.subdomain)
        .request(
            "POST",
            &format!("/f/{id}"),
            headers,
            Some(("application/x-www-form-urlencoded", body.into_bytes())),
        )
        .expect("an answer")
}

/// A challenge of the form, solved as the ALTCHA widget does: the posted payload.
fn solved(app: &App, owner: &Owner, id: &str) -> String {
    let c = app
        .site_client(&owner.subdomain)
        .get_with(&format!("/f/{id}/challenge"), &[("Origin", ELSEWHERE)]);
    c.expect(200);
    assert_eq!(c.header("Access-Control-Allow-Origin"), Some(ELSEWHERE));
    let c = c.json();
    let (salt, challenge) = (
        c["salt"].as_str().unwrap(),
        c["challenge"].as_str().unwrap(),
    );
    let number = (0..=c["maxnumber"].as_i64().unwrap())
        .find(|n| hex::encode(Sha256::digest(format!("{salt}{n}"))) == challenge)
        .expect("a solution");
    let payload = json!({"algorithm": c["algorithm"], "challenge": challenge, "number": number,
        "salt": salt, "signature": c["signature"]});
    base64::engine::general_purpose::STANDARD.encode(payload.to_string())
}

fn requests(app: &App) -> i64 {
    app.count("SELECT count(*) FROM subscription_requests")
}

#[test]
fn a_pasted_form_subscribes_from_anywhere_with_its_tags_and_keeps_bots_out() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Forms Anywhere");
    let id = make_form(
        &owner,
        &[
            ("form[tags]", "from-blog, sidebar"),
            ("form[allowed_origins]", "https://friendly.example"),
        ],
    );

    // Without JavaScript: a plain post, the success page, the mail, the tags.
    let email = unique_email("pasted");
    let answer = post(
        &app,
        &owner,
        &id,
        &[("email", &email), ("name", "Ada")],
        &[("Origin", ELSEWHERE)],
    );
    answer.expect(200);
    assert!(
        answer.body.contains("Almost there: check your inbox."),
        "{}",
        answer.body
    );
    let mail = app.smtp.wait_for_message_to(&email, 1);
    let link = link_containing(&mail.text(), "/subscribe/confirm/").unwrap();
    let site = app.site_client(&owner.subdomain);
    let page = site.get(&path_of(&link));
    site.post_form(
        &path_of(&link),
        &[("authenticity_token", &page.csrf_token())],
    )
    .expect(200);
    let listed = owner.get("/subscribers").json();
    let s = &listed["subscribers"][0];
    assert_eq!((&s["email"], &s["name"]), (&json!(email), &json!("Ada")));
    assert_eq!(s["tags"], json!(["from-blog", "sidebar"]));

    // A bad address: the form again with what to fix, nothing recorded.
    let before = requests(&app);
    let bad = post(&app, &owner, &id, &[("email", "not-an-address")], &[]);
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.body.contains("Email is invalid"), "{}", bad.body);
    assert_eq!(requests(&app), before);

    // The honeypot filled: answered like a person, nothing recorded or mailed.
    let bot = unique_email("honeypot");
    let trap = post(
        &app,
        &owner,
        &id,
        &[("email", &bot), ("website", "http://spam.example")],
        &[],
    );
    trap.expect(200);
    assert!(trap.body.contains("Almost there"));
    assert_eq!(requests(&app), before);

    // For JSON: readable from the listed origin only.
    let listed_origin = post(
        &app,
        &owner,
        &id,
        &[("email", &unique_email("json"))],
        &[
            ("Accept", "application/json"),
            ("Origin", "https://friendly.example"),
        ],
    );
    listed_origin.expect(200);
    assert_eq!(listed_origin.json()["ok"], true);
    assert_eq!(
        listed_origin.header("Access-Control-Allow-Origin"),
        Some("https://friendly.example")
    );
    let other = post(
        &app,
        &owner,
        &id,
        &[("email", "bad")],
        &[
            ("Accept", "application/json"),
            ("Origin", "https://stranger.example"),
        ],
    );
    assert_eq!(other.status, 422);
    assert_eq!(other.header("Access-Control-Allow-Origin"), None);
    assert!(
        other.json()["errors"][0]
            .as_str()
            .unwrap()
            .contains("invalid")
    );

    // With a redirect, a plain post ends on the owner's page.
    let redirecting = make_form(
        &owner,
        &[("form[redirect_url]", "https://example.com/thanks")],
    );
    let gone = post(
        &app,
        &owner,
        &redirecting,
        &[("email", &unique_email("redirect"))],
        &[],
    );
    assert_eq!(gone.status, 303);
    assert_eq!(gone.header("location"), Some("https://example.com/thanks"));
    // An unknown form is the site's 404.
    assert_eq!(
        post(&app, &owner, "0000000000000000", &[("email", &email)], &[]).status,
        404
    );
}

#[test]
fn a_solved_challenge_works_once_and_not_after_it_expires() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Forms Challenges");
    let id = make_form(&owner, &[]);
    let solution = solved(&app, &owner, &id);
    let first = post(
        &app,
        &owner,
        &id,
        &[("email", &unique_email("once")), ("altcha", &solution)],
        &[],
    );
    first.expect(200);
    let before = requests(&app);
    let again = post(
        &app,
        &owner,
        &id,
        &[("email", &unique_email("twice")), ("altcha", &solution)],
        &[],
    );
    assert_eq!(again.status, 422, "{}", again.body);
    assert!(
        again.body.contains("could not be checked"),
        "{}",
        again.body
    );
    // A challenge solved, then posted eleven minutes later: expired.
    let late = solved(&app, &owner, &id);
    app.advance_clock(Duration::from_secs(11 * 60));
    let expired = post(
        &app,
        &owner,
        &id,
        &[("email", &unique_email("late")), ("altcha", &late)],
        &[],
    );
    assert_eq!(expired.status, 422, "{}", expired.body);
    assert_eq!(requests(&app), before);
}

#[test]
fn a_flood_of_2000_signups_sends_no_more_mail_than_the_limits() {
    let app = spawn_app_with(&["--trusted-proxy", "127.0.0.1"]);
    let owner = onboard_paid(&app, "Forms Flood");
    let id = make_form(&owner, &[]);
    // 2,000 posts from 2,000 client addresses, to addresses at 100 domains: half without
    // the work, half solving it.
    let mut answers = std::collections::HashMap::<u16, usize>::new();
    for i in 0..2000 {
        let client = format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256);
        let email = format!("bot{i}@domain{}.example", i % 100);
        let solution = if i >= 1000 {
            solved(&app, &owner, &id)
        } else {
            String::new()
        };
        let answer = post(
            &app,
            &owner,
            &id,
            &[("email", &email), ("altcha", &solution)],
            &[("X-Forwarded-For", &client)],
        );
        *answers.entry(answer.status).or_default() += 1;
    }
    // Every confirmation queued is sent; then count what reached the inboxes.
    wait_for("the confirmation mails", Duration::from_secs(60), || {
        (app.count(
            "SELECT count(*) FROM jobs WHERE kind = 'send_mail' AND state IN ('queued', 'running')",
        ) == 0)
            .then_some(())
    });
    let mailed = app
        .smtp
        .messages()
        .iter()
        .filter(|m| m.to.iter().any(|to| to.starts_with("bot")))
        .count();
    let (unproven, proven) = (30, 300);
    assert_eq!(
        mailed as i64,
        requests(&app),
        "one mail per recorded request"
    );
    assert!(
        mailed <= unproven + proven,
        "{mailed} mails; answers {answers:?}"
    );
    assert_eq!(
        mailed,
        unproven + proven,
        "the limits, and no fewer: {answers:?}"
    );
    assert_eq!(answers.get(&429), Some(&(2000 - mailed)), "{answers:?}");
}

/// The pages of "another site": the snippet with its script (`/with-script`) and without.
#[poem::handler]
fn elsewhere_page(
    req: &poem::Request,
    poem::web::Data(snippet): poem::web::Data<&std::sync::Arc<std::sync::Mutex<String>>>,
) -> poem::Response {
    let snippet = snippet.lock().unwrap().clone();
    let shown = match req.uri().path() {
        "/with-script" => snippet,
        _ => snippet.lines().next().unwrap_or_default().to_string(),
    };
    poem::Response::builder()
        .content_type("text/html; charset=utf-8")
        .body(format!(
            "<!doctype html><html lang=\"en\"><head><title>A blog</title><link rel=\"icon\" href=\"data:,\"></head><body><main><h1>A blog</h1>{shown}</main></body></html>"
        ))
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn a_person_on_another_site_subscribes_in_one_step_with_or_without_the_script() {
    use crate::support::browser::{Driver, click, fill, runtime, wait_for_text};
    use poem::EndpointExt;
    let Some(driver) = Driver::start("signup forms") else {
        return;
    };
    // Bots come from many addresses (through the trusted proxy); the person from loopback.
    let app = spawn_app_with(&["--trusted-proxy", "127.0.0.1"]);
    let owner = onboard_paid(&app, "Forms Browser");
    let snippet = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let port = crate::support::net::serve(
        poem::Route::new()
            .at("/with-script", poem::get(elsewhere_page))
            .at("/without-script", poem::get(elsewhere_page))
            .data(snippet.clone()),
    );
    let blog = format!("http://127.0.0.1:{port}");
    let id = make_form(&owner, &[("form[allowed_origins]", &blog)]);
    let page = owner
        .client
        .get(&format!("/newsletters/{}/forms", owner.newsletter_id));
    let form_page = page
        .body
        .find(&format!("/newsletters/{}/forms/", owner.newsletter_id))
        .unwrap();
    let link: String = page.body[form_page..]
        .chars()
        .take_while(|c| *c != '"')
        .collect();
    let shown = owner.client.get(&link);
    let start = shown.body.find("<textarea id=\"snippet-code\"").unwrap();
    let code = &shown.body[start..];
    let code = &code[code.find('>').unwrap() + 1..code.find("</textarea>").unwrap()];
    let code = code
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    assert!(code.contains(&format!("/f/{id}")), "{code}");
    *snippet.lock().unwrap() = code;

    runtime().block_on(async {
        let c = driver.session().await;
        // Without the script: the form posts as a page does, and the site says what next.
        let plain = unique_email("plain-person");
        c.goto(&format!("{blog}/without-script")).await.unwrap();
        fill(&c, "email", &plain).await;
        click(&c, "form button[type=submit]").await;
        wait_for_text(&c, "main", "Almost there: check your inbox.").await;
        app.smtp.wait_for_message_to(&plain, 1);

        // Bots use up what the form sends without the work solved...
        for i in 0..40 {
            let (client, email) = (format!("10.0.0.{i}"), format!("bot{i}@flood{i}.example"));
            post(
                &app,
                &owner,
                &id,
                &[("email", &email)],
                &[("X-Forwarded-For", &client)],
            );
        }
        let refused = post(
            &app,
            &owner,
            &id,
            &[("email", "one.more@flood.example")],
            &[("X-Forwarded-For", "10.0.1.1")],
        );
        assert_eq!(refused.status, 429, "{}", refused.body);
        // ...and a person with the script still subscribes in one step, answered in place.
        let person = unique_email("scripted-person");
        c.goto(&format!("{blog}/with-script")).await.unwrap();
        fill(&c, "email", &person).await;
        click(&c, "form button[type=submit]").await;
        wait_for_text(
            &c,
            ".broadsheet-form-answer",
            "Almost there: check your inbox.",
        )
        .await;
        assert_eq!(
            c.current_url().await.unwrap().as_str(),
            format!("{blog}/with-script"),
            "answered in the page"
        );
        app.smtp.wait_for_message_to(&person, 1);
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "browser console: {errors:?}");

        // The form's own page on the site, light and dark, on a phone: axe finds nothing.
        if let Some(axe) = crate::support::axe::Axe::load("signup forms") {
            let site = format!("http://{}.{}", owner.subdomain, app.public_host);
            c.goto(&format!("{site}/f/{id}")).await.unwrap();
            wait_for_text(&c, "main", "Subscribe to Forms Browser").await;
            let found = crate::accessibility::check(&driver, &axe, &c, "form page").await;
            assert!(found.is_empty(), "axe-core:\n{}", found.join("\n"));
        }
        c.close().await.unwrap();
    });
}

/// The value of the hidden field `name` on a page, if there is one.
fn hidden(html: &str, name: &str) -> Option<String> {
    attribute_after(html, &format!("name=\"{name}\""), "value")
}

/// Follows the newest confirmation link mailed to `email` (the `n`th mail), on the site.
fn confirm_nth(app: &App, owner: &Owner, email: &str, n: usize) {
    let mail = app.smtp.wait_for_message_to(email, n);
    let path = path_of(&link_containing(&mail.text(), "/subscribe/confirm/").unwrap());
    let site = app.site_client(&owner.subdomain);
    let done = site.submit(&path, &path, &[]);
    done.expect(200);
    assert!(done.body.contains("You are subscribed"), "{}", done.body);
}

/// The API's subscriber object of `email`.
fn subscriber_of(owner: &Owner, email: &str) -> Value {
    let list = owner.get("/subscribers?per_page=100").json();
    list["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["email"] == email)
        .unwrap_or_else(|| panic!("{email} is a subscriber: {list}"))
        .clone()
}

#[test]
fn each_subscriber_keeps_where_they_came_from_and_the_stats_count_new_ones_by_source() {
    let app = spawn_app_with(&["--trusted-proxy", "127.0.0.1"]);
    let owner = onboard(&app, "Sourced Sheet");
    let id = make_form(&owner, &[]);
    let site = app.site_client(&owner.subdomain);

    // The site's subscribe page, reached from a friend's post by a campaign link: its form
    // carries both, and the confirmed subscriber keeps them.
    let page = site.get_with(
        "/subscribe?utm_source=swap&utm_medium=email&utm_campaign=spring",
        &[("Referer", "https://friend.example/reads")],
    );
    page.expect(200);
    let referrer = hidden(&page.body, "referrer").expect("the referrer, in the form");
    assert_eq!(referrer, "https://friend.example/reads");
    let utm: Vec<(String, String)> = ["utm_source", "utm_medium", "utm_campaign"]
        .iter()
        .map(|k| {
            (
                k.to_string(),
                hidden(&page.body, k).expect("a campaign tag"),
            )
        })
        .collect();
    let mut fields = vec![
        ("authenticity_token".to_string(), page.csrf_token()),
        ("email".to_string(), "site@example.com".to_string()),
        ("referrer".to_string(), referrer),
    ];
    fields.extend(utm);
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    site.post_form("/subscribe", &pairs).expect(200);
    confirm_nth(&app, &owner, "site@example.com", 1);
    let s = subscriber_of(&owner, "site@example.com");
    assert_eq!(
        s["origin"],
        json!({"source": "form", "referrer": "https://friend.example/reads",
               "utm_source": "swap", "utm_medium": "email", "utm_campaign": "spring"})
    );

    // The snippet posted from a page elsewhere without JavaScript: the browser's Referer is
    // the page holding the form, and its campaign tags come from that page's address.
    post(
        &app,
        &owner,
        &id,
        &[("email", "blog@example.com")],
        &[(
            "Referer",
            "https://blog.example/post?utm_source=blog&utm_campaign=launch",
        )],
    )
    .expect(200);
    confirm_nth(&app, &owner, "blog@example.com", 1);
    let s = subscriber_of(&owner, "blog@example.com");
    assert_eq!(s["origin"]["source"], "form");
    assert_eq!(s["origin"]["utm_source"], "blog");
    assert_eq!(s["origin"]["utm_campaign"], "launch");
    assert_eq!(s["origin"]["utm_medium"], Value::Null);

    // Hostile values never refuse a signup: a referrer that is no web address is dropped, a
    // tag with a line break too, and markup is shown as text on the subscriber's page.
    post(
        &app,
        &owner,
        &id,
        &[
            ("email", "odd@example.com"),
            ("referrer", "javascript:alert(1)"),
            ("utm_source", "<script>alert(1)</script>"),
            ("utm_medium", "mail\r\nBcc: victim@example.com"),
            ("utm_campaign", &"c".repeat(500)),
        ],
        &[("X-Forwarded-For", "198.51.100.9")],
    )
    .expect(200);
    confirm_nth(&app, &owner, "odd@example.com", 1);
    let odd = subscriber_of(&owner, "odd@example.com");
    assert_eq!(odd["origin"]["referrer"], Value::Null);
    assert_eq!(odd["origin"]["utm_source"], "<script>alert(1)</script>");
    assert_eq!(odd["origin"]["utm_medium"], Value::Null);
    assert_eq!(odd["origin"]["utm_campaign"].as_str().unwrap().len(), 100);
    let shown = owner.client.get(&format!(
        "/newsletters/{}/subscribers/{}",
        owner.newsletter_id, odd["id"]
    ));
    shown.expect(200);
    assert!(
        shown
            .body
            .contains("Came by <strong>a signup form</strong>"),
        "{}",
        shown.body
    );
    assert!(shown.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!shown.body.contains("<script>alert(1)"));

    // The API, the dashboard and an import each say so.
    owner
        .post("/subscribers", &json!({"email": "api@example.com"}))
        .expect(201);
    assert_eq!(
        subscriber_of(&owner, "api@example.com")["origin"],
        json!({"source": "api", "referrer": null, "utm_source": null, "utm_medium": null,
               "utm_campaign": null})
    );
    let url = format!("/newsletters/{}/subscribers", owner.newsletter_id);
    let added = owner
        .client
        .submit(&url, &url, &[("subscriber[email]", "hand@example.com")]);
    assert_eq!(added.redirect(), url);
    assert_eq!(
        subscriber_of(&owner, "hand@example.com")["origin"]["source"],
        "dashboard"
    );
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("readers.csv");
    std::fs::write(&csv, "email\none@example.com\ntwo@example.com\n").unwrap();
    let (code, out, err) = app.cli(&["import", &owner.subdomain, csv.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        subscriber_of(&owner, "two@example.com")["origin"]["source"],
        "import"
    );

    // The stats, in the API and on the dashboard: new subscribers by source. A deleted
    // subscriber leaves the count, as the growth figure does.
    let gone = subscriber_of(&owner, "one@example.com")["id"].clone();
    owner.delete(&format!("/subscribers/{gone}")).expect(204);
    let expected = json!({"form": 3, "import": 1, "api": 1, "dashboard": 1});
    let stats = owner.get("/newsletter/stats").json();
    assert_eq!(
        stats["data"]["subscribers"]["new_by_source_last_30_days"],
        expected
    );
    let page = owner
        .client
        .get(&format!("/newsletters/{}/stats", owner.newsletter_id));
    page.expect(200);
    for (source, count) in expected.as_object().unwrap() {
        let path = format!("subscribers.new_by_source_last_30_days.{source}");
        let shown = attribute_after(&page.body, &format!("data-stat=\"{path}\""), "data-value");
        assert_eq!(shown.as_deref(), Some(count.to_string().as_str()), "{path}");
    }

    // Thirty days on, they have left the window.
    app.advance_clock(Duration::from_secs(31 * 24 * 3600));
    let later = owner.get("/newsletter/stats").json();
    assert_eq!(
        later["data"]["subscribers"]["new_by_source_last_30_days"],
        json!({"form": 0, "import": 0, "api": 0, "dashboard": 0})
    );
}

#[test]
fn a_form_asks_for_custom_fields_and_a_confirmed_reader_gets_their_values() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Fielded Forms");
    let define = |field: Value| -> i64 {
        let resp = owner.post("/fields", &json!({ "field": field }));
        resp.expect(201);
        resp.json()["id"].as_i64().unwrap()
    };
    let first = define(json!({"name": "first_name", "type": "text"}));
    let age = define(json!({"name": "age", "type": "number"}));
    let topic = define(json!({"name": "topic", "type": "choice", "options": ["rust", "go"]}));
    let consent = define(json!({"name": "consent", "type": "boolean"}));
    let unasked = define(json!({"name": "score", "type": "number"}));
    let uses = [
        (format!("form[fields][{first}]"), "required"),
        (format!("form[fields][{age}]"), "optional"),
        (format!("form[fields][{topic}]"), "optional"),
        (format!("form[fields][{consent}]"), "required"),
        (format!("form[fields][{unasked}]"), "off"),
    ];
    let uses: Vec<(&str, &str)> = uses.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let id = make_form(&owner, &uses);

    // The form asks for each by its type, required ones marked so.
    let page = app.site_client(&owner.subdomain).get(&format!("/f/{id}"));
    page.expect(200);
    for expected in [
        "First name <input type=\"text\" name=\"fields[first_name]\" maxlength=\"500\" required>",
        "Age (optional) <input type=\"number\" step=\"any\" name=\"fields[age]\">",
        "<select name=\"fields[topic]\"><option value=\"\">Choose…</option><option value=\"rust\">rust</option>",
        "<input type=\"checkbox\" name=\"fields[consent]\" value=\"yes\" required> Consent",
    ] {
        assert!(
            page.body.contains(expected),
            "{expected:?} not in:\n{}",
            page.body
        );
    }
    assert!(!page.body.contains("fields[score]"), "{}", page.body);

    // Missing and unfit values: the form again saying each, nothing recorded.
    let email = unique_email("fielded");
    let before = requests(&app);
    let bad = post(
        &app,
        &owner,
        &id,
        &[
            ("email", &email),
            ("fields[age]", "many"),
            ("fields[topic]", "java"),
        ],
        &[],
    );
    assert_eq!(bad.status, 422, "{}", bad.body);
    for problem in [
        "First name can&#39;t be blank",
        "Age must be a number",
        "Topic must be one of rust, go",
        "Consent must be ticked",
    ] {
        assert!(
            bad.body.contains(problem) || bad.body.contains(&problem.replace("&#39;", "'")),
            "{problem:?} not in:\n{}",
            bad.body
        );
    }
    assert_eq!(requests(&app), before);

    // A good post, hostile text kept as text; a field the form does not ask is not read.
    let good = post(
        &app,
        &owner,
        &id,
        &[
            ("email", &email),
            ("fields[first_name]", "<b>Zoe</b>"),
            ("fields[age]", "33"),
            ("fields[topic]", "rust"),
            ("fields[consent]", "yes"),
            ("fields[score]", "99"),
        ],
        &[],
    );
    good.expect(200);
    confirm_nth(&app, &owner, &email, 1);
    assert_eq!(
        subscriber_of(&owner, &email)["fields"],
        json!({"first_name": "<b>Zoe</b>", "age": 33, "topic": "rust", "consent": true})
    );

    // The settings show each field's use; a field deleted since the page was shown is refused.
    let form_id: i64 = app
        .db()
        .query_row(
            "SELECT id FROM signup_forms WHERE public_id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    let at = format!("/newsletters/{}/forms/{form_id}", owner.newsletter_id);
    let settings = owner.client.get(&at);
    assert!(
        settings.body.contains(&format!("name=\"form[fields][{first}]\"><option value=\"off\">Not asked</option><option value=\"optional\">Asked, optional</option><option value=\"required\" selected>")),
        "{}",
        settings.body
    );
    owner.delete(&format!("/fields/{unasked}")).expect(204);
    let stale = owner.client.submit(
        &at,
        &at,
        &[
            ("form[name]", "Blog sidebar"),
            ("form[button_text]", "Join"),
            ("form[success_message]", "Almost there: check your inbox."),
            ("form[pow_cost]", "1000"),
            (&format!("form[fields][{unasked}]"), "optional"),
        ],
    );
    stale.expect(422);
    assert!(stale.body.contains("no longer there"), "{}", stale.body);
    // A deleted field is no longer asked.
    owner.delete(&format!("/fields/{age}")).expect(204);
    let page = app.site_client(&owner.subdomain).get(&format!("/f/{id}"));
    assert!(!page.body.contains("fields[age]"), "{}", page.body);
    assert!(page.body.contains("fields[first_name]"));
}
