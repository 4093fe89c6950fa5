//! The dashboard's smaller dents: onboarding shows its steps, the create
//! form shows the subdomain it will use, the newsletter list shows each one's state, the
//! overview lists next steps ticked off as they are done, and the API key page's "Try it"
//! command wraps and has a copy button.

use crate::dash_stats::add_subscriber;
use crate::support::browser::{
    Driver, click, fill, runtime, screenshot, sign_in, wait_for_element, wait_for_text,
};
use crate::support::*;

/// The `<li>` of the overview's next step `step` (its `data-step`).
fn step<'a>(page: &'a str, step: &str) -> &'a str {
    let at = page
        .find(&format!("data-step=\"{step}\""))
        .unwrap_or_else(|| panic!("no step {step} on the page:\n{page}"));
    let start = page[..at].rfind("<li").unwrap();
    let end = at + page[at..].find("</li>").unwrap();
    &page[start..end]
}

#[test]
fn onboarding_numbers_its_steps_and_the_overview_ticks_off_next_steps() {
    let app = spawn_app();
    let client = app.client();
    let email = unique_email("dents");
    sign_up_confirmed(&app, &client, &email);

    // Step 1: the create form says where the site will be.
    let form = client.get("/newsletters/new");
    form.expect(200);
    assert!(form.body.contains("Step 1 of 3"), "{}", form.body);
    assert!(
        form.body
            .contains("data-subdomain-url=\"/newsletters/subdomain\"")
    );
    assert!(form.body.contains("src=\"/assets/widgets.js\""));
    // Shown again after a refusal, with the address the name gives.
    let refused = client.submit(
        "/newsletters/new",
        "/newsletters",
        &[
            ("newsletter[name]", "Field Notes!"),
            ("newsletter[from_email]", "not an address"),
        ],
    );
    refused.expect(422);
    let origin = format!("http://field-notes.{}", app.public_host);
    assert!(
        refused
            .body
            .contains(&format!("<strong data-subdomain>{origin}</strong>")),
        "{}",
        refused.body
    );
    // The live preview's answer: the same rule as creating, taken names included.
    let preview = client.get("/newsletters/subdomain?name=Field%20Notes%21");
    preview.expect(200);
    assert_eq!(preview.json()["subdomain"], "field-notes");
    assert_eq!(preview.json()["url"], origin.as_str());
    let id = create_newsletter(&client, "Field Notes");
    let preview = client.get("/newsletters/subdomain?name=field%20notes");
    assert_eq!(preview.json()["subdomain"], "field-notes-2");
    assert_eq!(
        app.client().get("/newsletters/subdomain?name=x").redirect(),
        "/session/new"
    );

    // Steps 2 and 3 are numbered while setting up, not when changed later.
    let second = client.submit(
        "/newsletters/new",
        "/newsletters",
        &[("newsletter[name]", "Second Thoughts")],
    );
    let frequency = client.get(&second.redirect());
    assert!(frequency.body.contains("Step 2 of 3"));
    let second_id = second.redirect().split('/').nth(2).unwrap().to_string();
    let preference = client.get(&format!("/newsletters/{second_id}/preference/edit"));
    assert!(preference.body.contains("Step 3 of 3"));
    let later = client.get(&format!("/newsletters/{id}/setup_frequency"));
    assert!(!later.body.contains("Step 2 of 3"));

    // The overview: nothing done yet, each step a link.
    let overview = format!("/newsletters/{id}");
    let page = client.get(&overview).body;
    assert!(page.contains("0 subscribers · no issues yet"), "{page}");
    let write = step(&page, "WriteFirstIssue");
    assert!(write.contains(&format!("href=\"/newsletters/{id}/issues/new\"")));
    assert!(!write.contains("done"));
    assert!(step(&page, "ShareSite").contains(&format!("href=\"{origin}/\"")));
    assert!(
        step(&page, "CreateApiKey").contains(&format!("href=\"/newsletters/{id}/api_keys/new\""))
    );

    // A key: its page wraps the command and offers copy buttons (shown by the script).
    let key_page = client.submit(
        &format!("/newsletters/{id}/api_keys/new"),
        &format!("/newsletters/{id}/api_keys"),
        &[
            ("api_key[name]", "script"),
            ("api_key[permissions][]", "write"),
        ],
    );
    key_page.expect(200);
    assert!(
        key_page
            .body
            .contains("class=\"panel try-it\" id=\"try-it\"")
    );
    assert!(key_page.body.contains("data-copy=\"#try-it\" hidden"));
    assert!(key_page.body.contains("src=\"/assets/widgets.js\""));
    let script = client.get("/assets/widgets.js");
    script.expect(200);
    assert!(
        script
            .header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(client.get("/assets/app.css").body.contains("pre.try-it"));
    let page = client.get(&overview).body;
    assert!(step(&page, "CreateApiKey").contains("✓ done"));
    assert!(!step(&page, "ShareSite").contains("✓ done"));

    // A subscriber and a draft: every step done, the figures counted in words.
    let key = create_api_key(&client, id, &["read", "write"]);
    let owner = Owner {
        client: app.client(),
        email,
        newsletter_id: id,
        subdomain: "field-notes".into(),
        key,
    };
    add_subscriber(&owner, "reader@example.com");
    owner
        .post(
            "/issues",
            &json!({"issue": {"subject": "First", "content_markdown": "Hi"}}),
        )
        .expect(201);
    let page = client.get(&overview).body;
    assert!(page.contains("1 subscriber · 1 draft"), "{page}");
    for s in ["WriteFirstIssue", "ShareSite", "CreateApiKey"] {
        assert!(step(&page, s).contains("✓ done"), "{s}");
    }

    // The list: each newsletter's state and figures.
    let list = client.get("/newsletters").body;
    assert!(list.contains("1 subscriber · 1 draft"), "{list}");
    assert!(list.contains("status status-active"));
    assert!(list.contains("free tier"));
    assert!(
        list.contains("setup not finished"),
        "the second one is not live yet"
    );
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn the_subdomain_preview_follows_the_name_and_the_key_command_wraps_and_copies() {
    let Some(driver) = Driver::start("dashboard dents") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard(&app, "Taken Name");
    let base = app.base_url.clone();
    let id = owner.newsletter_id;
    runtime().block_on(async {
        let c = driver.session().await;
        sign_in(&c, &base, &owner.email).await;

        // The address under the name follows what is typed, with the server's rule.
        c.goto(&format!("{base}/newsletters/new")).await.unwrap();
        fill(&c, "newsletter[name]", "Taken Name").await;
        let shown = wait_for_text(&c, "#subdomain-preview", "taken-name-2.").await;
        assert!(shown.contains(&format!("http://taken-name-2.{}", app.public_host)));
        screenshot(&c, "dash-new-newsletter-preview").await;

        // A phone: the key page's command wraps inside its box; Copy selects it.
        c.set_window_size(390, 1000).await.unwrap();
        c.goto(&format!("{base}/newsletters/{id}/api_keys/new"))
            .await
            .unwrap();
        fill(&c, "api_key[name]", "phone").await;
        click(&c, "main form button[type=submit]").await;
        let command = wait_for_element(&c, "#try-it").await.text().await.unwrap();
        let sizes = c
            .execute(
                "const e = document.getElementById('try-it'); \
                 return [e.scrollWidth, e.clientWidth, document.documentElement.scrollWidth, window.innerWidth];",
                vec![],
            )
            .await
            .unwrap();
        let sizes: Vec<f64> = sizes
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert!(sizes[0] <= sizes[1], "the command overflows its box: {sizes:?}");
        assert!(sizes[2] <= sizes[3], "the page scrolls sideways: {sizes:?}");
        click(&c, "button[data-copy=\"#try-it\"]").await;
        let selected = c
            .execute("return window.getSelection().toString()", vec![])
            .await
            .unwrap();
        assert_eq!(selected.as_str().unwrap().trim(), command.trim());
        screenshot(&c, "dash-api-key-phone").await;
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console errors: {errors:?}");
        c.close().await.unwrap();
    });
}

#[test]
fn a_send_in_progress_counts_from_its_recipients_before_they_are_recorded() {
    let mut app = spawn_app();
    let owner = onboard_paid(&app, "Counted From The Start");
    for n in 0..3 {
        add_subscriber(&owner, &format!("reader{n}@example.com"));
    }
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Counted", "status": "approved", "content_markdown": "Hello"}}),
    );
    let iid = issue.json()["id"].as_i64().unwrap();
    // The job runner now polls rarely: the send is queued but its recipients not recorded.
    app.set_args(&["--job-poll-ms", "600000"]);
    app.restart();
    let page = format!("/newsletters/{}/issues/{iid}", owner.newsletter_id);
    let sent = owner
        .client
        .submit(&format!("{page}/send"), &format!("{page}/send"), &[]);
    assert_eq!(sent.redirect(), page);
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {iid}"
        )),
        0
    );
    let body = owner.client.get(&page).body;
    assert!(
        body.contains("<strong data-progress=\"total\">3</strong>"),
        "{body}"
    );
    assert!(
        body.contains("id=\"send-progress\" max=\"3\" value=\"0\""),
        "{body}"
    );
    let progress = owner.client.get(&format!("{page}/progress")).json();
    assert_eq!(
        (progress["total"].as_i64(), progress["done"].as_i64()),
        (Some(3), Some(0))
    );
    assert_eq!(progress["remaining"], 3);
    // Once the runner records them, the same count comes from the deliveries.
    app.set_args(&[]);
    app.restart();
    let done = wait_for(
        "the send to finish",
        std::time::Duration::from_secs(30),
        || {
            let p = owner.client.get(&format!("{page}/progress")).json();
            (p["status"] == "sent").then_some(p)
        },
    );
    assert_eq!(
        (done["total"].as_i64(), done["sent"].as_i64()),
        (Some(3), Some(3))
    );
}

#[test]
fn counts_are_written_in_the_right_number() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "One Reader");
    add_subscriber(&owner, "only@example.com");
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "For one", "status": "approved", "content_markdown": "Hi"}}),
    );
    let page = format!(
        "/newsletters/{}/issues/{}",
        owner.newsletter_id,
        issue.json()["id"]
    );
    let confirm = owner.client.get(&format!("{page}/send")).body;
    assert!(
        confirm.contains("</strong> active subscriber. This"),
        "{confirm}"
    );
    assert!(confirm.contains("Send to 1 subscriber<"), "{confirm}");
    let sent = owner
        .client
        .submit(&format!("{page}/send"), &format!("{page}/send"), &[]);
    let shown = owner.client.get(&sent.redirect()).body;
    assert!(shown.contains("Sending to 1 subscriber."), "{shown}");
    let overview = owner
        .client
        .get(&format!("/newsletters/{}", owner.newsletter_id))
        .body;
    assert!(overview.contains("1 subscriber · 1 sent"), "{overview}");
}
