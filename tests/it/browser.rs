//! Flows driven in headless Chromium: real pages, clicks and typing.

use fantoccini::Locator;

use crate::support::browser::{
    Driver, click, fill, runtime, screenshot, wait_for_element, wait_for_path,
    wait_for_path_ending, wait_for_text,
};
use crate::support::*;

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn onboarding_in_chromium_ends_with_a_working_key() {
    let Some(driver) = Driver::start("onboarding") else {
        return;
    };
    let app = spawn_app();
    let email = unique_email("chromium");
    let key = runtime().block_on(async {
        let c = driver.session().await;
        let base = &app.base_url;

        c.goto(&format!("{base}/")).await.unwrap();
        click(&c, "a[href=\"/signup\"]").await;
        wait_for_path(&c, "/signup").await;
        fill(&c, "user[email_address]", &email).await;
        fill(&c, "user[password]", PASSWORD).await;
        fill(&c, "user[password_confirmation]", "not the same").await;
        click(&c, "form[action=\"/signup\"] button[type=submit]").await;
        let errors = wait_for_element(&c, "ul.errors").await;
        assert!(errors.text().await.unwrap().contains("match"));
        fill(&c, "user[password]", PASSWORD).await;
        fill(&c, "user[password_confirmation]", PASSWORD).await;
        click(&c, "form[action=\"/signup\"] button[type=submit]").await;
        wait_for_path(&c, "/email_confirmation_pending").await;

        let mail = app.smtp.wait_for_message_to(&email, 1);
        let link = link_containing(&mail.text(), "/email_confirmations/").unwrap();
        c.goto(&link).await.unwrap();
        wait_for_path(&c, "/newsletters").await;

        c.goto(&format!("{base}/newsletters/new")).await.unwrap();
        fill(&c, "newsletter[name]", "Browser Bulletin").await;
        fill(&c, "newsletter[tagline]", "Clicked into being").await;
        fill(&c, "newsletter[from_name]", "Bulletin Desk").await;
        fill(&c, "newsletter[from_email]", "desk@example.com").await;
        click(&c, "form[action=\"/newsletters\"] button[type=submit]").await;
        // The click navigates: the next page comes once the newsletter is created.
        let url = wait_for_path_ending(&c, "/setup_frequency").await;
        let id: i64 = url.path().split('/').nth(2).unwrap().parse().unwrap();

        click(&c, "input[name=frequency][value=three_times]").await;
        click(&c, "main form button[type=submit]").await;
        wait_for_path(&c, &format!("/newsletters/{id}/preference/edit")).await;
        fill(
            &c,
            "newsletter_preference[target_audience]",
            "People who like clicking",
        )
        .await;
        c.find(Locator::Css(
            "select[name=\"newsletter_preference[content_tone]\"]",
        ))
        .await
        .unwrap()
        .select_by_value("casual")
        .await
        .unwrap();
        c.find(Locator::Css(
            "select[name=\"newsletter_preference[newsletter_length]\"]",
        ))
        .await
        .unwrap()
        .select_by_value("medium")
        .await
        .unwrap();
        click(&c, "main form button[type=submit]").await;
        wait_for_path(&c, &format!("/newsletters/{id}")).await;
        screenshot(&c, "onboarding-newsletter-home").await;

        click(&c, &format!("a[href=\"/newsletters/{id}/api_keys\"]")).await;
        click(&c, &format!("a[href=\"/newsletters/{id}/api_keys/new\"]")).await;
        fill(&c, "api_key[name]", "chromium").await;
        // A read-only key: read ticked, write and delete not, whatever the defaults are.
        for (permission, wanted) in [("read", true), ("write", false), ("delete", false)] {
            let css = format!("input[name=\"api_key[permissions][]\"][value={permission}]");
            let checkbox = wait_for_element(&c, &css).await;
            if checkbox.is_selected().await.unwrap() != wanted {
                checkbox.click().await.unwrap();
            }
        }
        click(&c, "main form button[type=submit]").await;
        let key = wait_for_element(&c, "#api-key").await.text().await.unwrap();
        screenshot(&c, "onboarding-api-key").await;
        c.close().await.unwrap();
        key.trim().to_string()
    });

    assert_eq!(key.len(), 72);
    let resp = app.client().api("GET", "/newsletter", &key, None);
    resp.expect(200);
    let data = resp.json()["data"].clone();
    assert_eq!(data["name"], "Browser Bulletin");
    assert_eq!(data["subdomain"], "browser-bulletin");
    let frequency: String = app
        .db()
        .query_row(
            "SELECT frequency FROM newsletters WHERE subdomain = 'browser-bulletin'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(frequency, "three_times");
    // Read-only: writing is refused.
    let resp = app
        .client()
        .api("PATCH", "/newsletter", &key, Some(&json!({"name": "x"})));
    assert_eq!(resp.error_code(403), "forbidden");
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn public_site_in_chromium_has_no_console_errors_and_subscribes() {
    let Some(driver) = Driver::start("public site") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard(&app, "Chromium Chronicle");
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Seen in a browser", "status": "approved",
            "content_markdown": "# Hello\n\nA paragraph with a [link](https://example.com/).\n\n- one\n- two",
            "articles": [{"title": "An article", "url": "https://example.com/a", "summarized_article": "Why it matters."}]}}),
    );
    let id = issue.json()["id"].as_i64().unwrap();
    let web_url = owner
        .post(&format!("/issues/{id}/publish"), &json!({}))
        .json()["web_url"]
        .as_str()
        .unwrap()
        .to_string();
    // Chromium resolves *.localhost to this machine, so the site is reached by its own name.
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);
    let email = unique_email("browser-reader");
    runtime().block_on(async {
        let c = driver.session().await;
        for (path, shot) in [
            ("/", "site-home"),
            ("/archive", "site-archive"),
            ("/feed.xml", ""),
        ] {
            c.goto(&format!("{origin}{path}")).await.unwrap();
            if !shot.is_empty() {
                screenshot(&c, shot).await;
            }
        }
        c.goto(&web_url).await.unwrap();
        let title = c.title().await.unwrap();
        assert!(title.contains("Seen in a browser"), "{title}");
        screenshot(&c, "site-issue").await;
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console errors: {errors:?}");

        c.goto(&format!("{origin}/")).await.unwrap();
        fill(&c, "email", &email).await;
        click(&c, "form.subscribe button[type=submit]").await;
        wait_for_text(&c, "main", "Check your inbox").await;
        let mail = app.smtp.wait_for_message_to(&email, 1);
        let link = link_containing(&mail.text(), "/subscribe/confirm/").unwrap();
        c.goto(&link).await.unwrap();
        click(&c, "main form button[type=submit]").await;
        wait_for_text(&c, "main", "You are subscribed").await;
        assert!(driver.console_errors(&c).await.is_empty());
        c.close().await.unwrap();
    });
    let subscribers = owner.get("/subscribers?status=active").json();
    assert_eq!(subscribers["subscribers"][0]["email"], email.as_str());
}

/// The operator page in Chromium: reached from the top bar, a pending
/// request answered with one click; the page is saved as a screenshot.
#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn operator_page_in_chromium_answers_an_upgrade_request() {
    let Some(driver) = Driver::start("operator") else {
        return;
    };
    let app = spawn_app();
    let operator = onboard(&app, "Operator Gazette");
    let owner = onboard(&app, "Waiting For Paid");
    request_upgrade(&owner);
    runtime().block_on(async {
        let c = driver.session().await;
        c.goto(&format!("{}/session/new", app.base_url))
            .await
            .unwrap();
        fill(&c, "email_address", &operator.email).await;
        fill(&c, "password", PASSWORD).await;
        click(&c, "form[action=\"/session\"] button[type=submit]").await;
        wait_for_path(&c, "/newsletters").await;
        click(&c, "header.top a[href=\"/operator\"]").await;
        wait_for_path(&c, "/operator").await;
        wait_for_text(&c, "#pending", "Waiting For Paid").await;
        screenshot(&c, "operator-page").await;
        click(
            &c,
            &format!(
                "#pending tr[data-subdomain=\"{}\"] input[value=paid] ~ button",
                owner.subdomain
            ),
        )
        .await;
        wait_for_text(&c, "p.notice", &format!("{}: tier paid", owner.subdomain)).await;
        c.close().await.unwrap();
    });
    let tier = owner.get("/newsletter").json()["data"]["tier"].clone();
    assert_eq!(tier, "paid");
}
