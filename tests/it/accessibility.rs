//! axe-core over the signed-in dashboard: one Chromium session walks the
//! pages an owner (here also the operator) uses, axe checks each with every default rule, in
//! the light scheme and the dark one, and the test fails listing every violation found (page,
//! rule, impact, help URL, selectors). The public site and the signed-out account pages are
//! checked by `scripts/lighthouse.sh`. The API reference (`/api/v1/docs`) is Swagger UI's,
//! whose own markup axe faults (buttons inside buttons, an unnamed select): it is left out
//! here, and `dash_layout.rs` checks its layout with the dashboard's.

use fantoccini::Client;

use crate::support::axe::Axe;
use crate::support::browser::{
    Driver, click, fill, runtime, screenshot, sign_in, wait_for_element, wait_for_text,
};
use crate::support::*;

/// axe's findings on the page `c` shows at desktop width and on a phone (390 px, where wide
/// tables scroll inside their frame but the page itself must not scroll sideways), each in the light scheme and the dark one (`prefers-color-scheme`, which
/// `assets/app.css` follows: every colour's contrast is checked in both); the window is left
/// at desktop width, light.
pub(crate) async fn check(driver: &Driver, axe: &Axe, c: &Client, page: &str) -> Vec<String> {
    let mut found = Vec::new();
    for scheme in ["light", "dark"] {
        let media = json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]});
        driver.cdp(c, "Emulation.setEmulatedMedia", media).await;
        found.extend(axe.violations(c, &format!("{page} ({scheme})")).await);
        c.set_window_size(390, 844).await.unwrap();
        found.extend(
            axe.violations(c, &format!("{page} at 390 px ({scheme})"))
                .await,
        );
        // Every page works at 390 px: it does not scroll sideways there.
        found.extend(crate::support::browser::sideways(c, 390, page).await);
        c.set_window_size(1280, 900).await.unwrap();
    }
    let light = json!({"features": [{"name": "prefers-color-scheme", "value": "light"}]});
    driver.cdp(c, "Emulation.setEmulatedMedia", light).await;
    found
}

/// Opens `path` and waits for `ready` (an element only the finished page has).
async fn open(c: &Client, base: &str, path: &str, ready: &str) {
    c.goto(&format!("{base}{path}")).await.unwrap();
    wait_for_element(c, ready).await;
}

#[test]
#[cfg_attr(
    not(all(has_chromium, has_axe)),
    ignore = "needs chromium, chromedriver and axe-core (apt-get install chromium chromium-driver; npm install --prefix target/npm axe-core@4)"
)]
fn dashboard_pages_have_no_axe_violations() {
    let Some(driver) = Driver::start("axe on the dashboard") else {
        return;
    };
    let Some(axe) = Axe::load("axe on the dashboard") else {
        return;
    };
    let app = spawn_app();
    // The first account of a fresh install is the operator: its dashboard has /operator.
    let owner = onboard_paid(&app, "Accessible Almanac");
    // A field of each kind, so the fields page has its table and each subscriber page its
    // inputs.
    for field in [
        json!({"name": "first_name", "type": "text"}),
        json!({"name": "plan", "type": "choice", "options": ["weekly", "monthly"]}),
        json!({"name": "vip", "type": "boolean"}),
    ] {
        owner
            .post("/fields", &json!({ "field": field }))
            .expect(201);
    }
    let mut readers = Vec::new();
    for (n, tags) in [&["news"][..], &["news", "vip"], &["events"]]
        .into_iter()
        .enumerate()
    {
        let email = format!("axe-reader{n}@example.com");
        let resp = owner.post("/subscribers", &json!({"email": email, "tags": tags}));
        resp.expect(201);
        readers.push((email, resp.json()["id"].as_i64().unwrap()));
    }
    listen(&app, &owner, &["subscriber.unsubscribed"]);
    // Another owner's upgrade request, so the operator page lists one.
    let waiting = onboard(&app, "Waiting Weekly");
    request_upgrade(&waiting);
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Checked by axe", "status": "approved",
            "content_markdown": "Read the [guide](https://example.org/guide).",
            "articles": [{"title": "An article", "url": "https://example.com/a",
                "summarized_article": "Why it matters."}]}}),
    );
    issue.expect(201);
    let iid = issue.json()["id"].as_i64().unwrap();
    let sequence = owner.post(
        "/sequences",
        &json!({"sequence": {"name": "Onboarding", "trigger": "tag_added", "trigger_tag": "news",
            "steps": [
                {"subject": "Start here", "body_markdown": "Hello.", "delay_amount": 0, "delay_unit": "minutes"},
                {"subject": "A week in", "body_markdown": "Still here?", "delay_amount": 7,
                 "delay_unit": "days", "at_hour": 9, "on_weekday": "monday"}]}}),
    );
    sequence.expect(201);
    let sid = sequence.json()["id"].as_i64().unwrap();
    let nid = owner.newsletter_id;
    let n = format!("/newsletters/{nid}");
    // The sending domain's records with their copy buttons, a custom domain's, an import
    // done with refused rows and one waiting for its start.
    set_sender(&owner);
    let domains = format!("{n}/custom_domains");
    let domain = owner
        .client
        .submit(
            &format!("{domains}/choose_method"),
            &domains,
            &[
                ("custom_domain[method]", "subdomain"),
                ("custom_domain[domain]", "www.example.com"),
            ],
        )
        .redirect();
    let csv = "email,name\nok@example.com,Ok\nnot-an-email,Bad\n,Nobody\n";
    let done_import = upload(&owner, "refused.csv", csv.as_bytes()).redirect();
    owner
        .client
        .submit(&done_import, &format!("{done_import}/start"), &[])
        .redirect();
    wait_for("the import", std::time::Duration::from_secs(60), || {
        let page = owner.client.get(&done_import);
        page.body.contains("Import finished").then_some(())
    });
    let waiting_import = upload(
        &owner,
        "waiting.csv",
        b"email,shoe size\nann@example.com,41\n",
    )
    .redirect();
    let issue_path = format!("{n}/issues/{iid}");
    let base = app.base_url.clone();

    let found = runtime().block_on(async {
        let c = driver.session().await;
        let mut found = Vec::new();
        sign_in(&c, &base, &owner.email).await;

        let subscriber = readers[0].1;
        for (name, path, ready) in [
            ("newsletter list", "/newsletters".to_string(), "main h1"),
            ("overview", n.clone(), "main h1"),
            ("issue list", format!("{n}/issues"), "main h1"),
            (
                "issue editor",
                format!("{n}/issues/new"),
                "textarea[name=\"issue[content_markdown]\"]",
            ),
            ("issue (approved)", issue_path.clone(), "#issue-status"),
            (
                "issue preview",
                format!("{issue_path}/preview"),
                "#email-preview",
            ),
            ("subscribers", format!("{n}/subscribers"), "main table"),
            (
                "subscriber detail",
                format!("{n}/subscribers/{subscriber}"),
                "main h1",
            ),
            ("settings", format!("{n}/settings"), "main h1"),
            ("API keys", format!("{n}/api_keys"), "main table"),
            ("custom domains", format!("{n}/custom_domains"), "main h1"),
            ("memberships", format!("{n}/memberships"), "main h1"),
            ("forms", format!("{n}/forms"), "#new-form"),
            ("custom fields", format!("{n}/fields"), "#fields"),
            ("topics", format!("{n}/topics"), "main h1"),
            ("feed", format!("{n}/feed"), "#feed-form"),
            ("sequences", format!("{n}/sequences"), "#sequences"),
            (
                "new sequence",
                format!("{n}/sequences/new"),
                ".sequence-form",
            ),
            ("sequence", format!("{n}/sequences/{sid}"), "#steps"),
            (
                "send page with a field condition",
                format!("{issue_path}/send"),
                "select[name=field_name]",
            ),
            ("account", "/account".to_string(), "main h1"),
            ("operator", "/operator".to_string(), "#pending table"),
            ("custom domain records", domain.clone(), "table.records"),
            ("import preview", waiting_import.clone(), "table.preview"),
            (
                "import with refused rows",
                done_import.clone(),
                "#refused-download",
            ),
            ("not found", "/nope".to_string(), "#error"),
        ] {
            open(&c, &base, &path, ready).await;
            found.extend(check(&driver, &axe, &c, name).await);
        }

        // The editor again, showing the previews of what was typed.
        open(&c, &base, &format!("{n}/issues/new"), "textarea").await;
        fill(&c, "issue[subject]", "Typed, not saved").await;
        fill(&c, "issue[content_markdown]", "A *draft* to look at.").await;
        click(&c, "button[value=preview]").await;
        wait_for_element(&c, "#email-preview").await;
        found.extend(check(&driver, &axe, &c, "issue editor with its previews").await);

        // Webhooks with a delivery in the log (a test event; it fails, nothing listens).
        open(&c, &base, &format!("{n}/webhooks"), "main h1").await;
        click(&c, "form[action$=\"/webhooks/test\"] button[type=submit]").await;
        wait_for_element(&c, "#webhook-1 table").await;
        found.extend(check(&driver, &axe, &c, "webhooks").await);
        // The test event's delivery, with its payload.
        click(&c, "#webhook-1 table a[href*=\"/webhooks/deliveries/\"]").await;
        wait_for_element(&c, "#payload").await;
        found.extend(check(&driver, &axe, &c, "webhook delivery").await);

        // The send page: a tag ticked and counted by its script, then after Review, then
        // come back because a tick changed after the count (no change event: as without
        // the script).
        open(&c, &base, &format!("{issue_path}/send"), "#audience").await;
        found.extend(check(&driver, &axe, &c, "send page").await);
        click(&c, "#audience input[name=tags][value=news]").await;
        wait_for_text(&c, "#send-button", "Send to 2 subscribers").await;
        found.extend(check(&driver, &axe, &c, "send page (a tag ticked and counted)").await);
        click(&c, "#audience button[value=review]").await;
        wait_for_text(&c, "#recipient-count", "tagged “news”").await;
        found.extend(check(&driver, &axe, &c, "send page (audience reviewed)").await);
        screenshot(&c, "axe-send-page").await;
        c.execute(
            "document.querySelector('#audience input[name=tags][value=events]').checked = true",
            vec![],
        )
        .await
        .unwrap();
        click(&c, "#send-button").await;
        wait_for_element(&c, "#audience-changed").await;
        found.extend(check(&driver, &axe, &c, "send page (audience changed)").await);

        // A real send to the SMTP sink, then its report at desktop width and on a phone.
        click(&c, "#send-button").await;
        wait_for_element(&c, ".progress-done:not([hidden])").await;
        open(&c, &base, &issue_path, "#report").await;
        found.extend(check(&driver, &axe, &c, "send report").await);
        c.set_window_size(390, 844).await.unwrap();
        c.execute("document.getElementById('report').scrollIntoView()", vec![])
            .await
            .unwrap();
        screenshot(&c, "axe-send-report-phone").await;
        c.set_window_size(1280, 900).await.unwrap();
        open(&c, &base, &format!("{n}/stats"), "main h1").await;
        found.extend(check(&driver, &axe, &c, "stats").await);
        c.close().await.unwrap();
        found
    });
    assert!(
        found.is_empty(),
        "axe-core found {} violation(s):\n{}",
        found.len(),
        found.join("\n")
    );
    for (email, _) in &readers[..2] {
        app.smtp.wait_for_message_to(email, 1);
    }
}
