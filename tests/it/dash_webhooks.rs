//! The dashboard's webhooks page: subscriptions are created and edited
//! there through the same rules and SSRF guard as the API, bad input comes back as the form
//! with its reasons, another owner's ids are 404, and the page fits a phone.

use crate::support::browser::{
    Driver, click, fill, runtime, screenshot, sign_in, wait_for_element,
};
use crate::support::receiver::Receiver;
use crate::support::*;

fn list(owner: &Owner) -> String {
    format!("/newsletters/{}/webhooks", owner.newsletter_id)
}

/// The owner's subscriptions as the API lists them.
fn subscriptions(owner: &Owner) -> Vec<Value> {
    let resp = owner.get("/webhook_subscriptions");
    resp.expect(200);
    resp.json()["webhook_subscriptions"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn subscriptions_are_created_and_edited_in_the_dashboard() {
    // Without --allow-private-webhooks: the SSRF guard refuses private addresses. A public
    // address written as an IP is accepted without a lookup (nothing is delivered here).
    let app = spawn_app();
    let owner = onboard(&app, "Hook Forms");
    let list = list(&owner);
    let page = owner.client.get(&list);
    page.expect(200);
    assert!(page.body.contains("No webhook subscriptions yet."));
    assert!(page.body.contains(&format!("href=\"{list}/new\"")));
    let new = format!("{list}/new");

    // Bad input: the form again (422) with the reasons in words and what was typed.
    let private = owner.client.submit(
        &new,
        &list,
        &[
            ("url", "http://127.0.0.1:9/hook"),
            ("events[]", "issue.sent"),
        ],
    );
    private.expect(422);
    assert!(
        private
            .body
            .contains("resolves to 127.0.0.1, a private or special-purpose address"),
        "{}",
        private.body
    );
    assert!(private.body.contains("value=\"http://127.0.0.1:9/hook\""));
    let bad = owner.client.submit(&new, &list, &[("url", "not a url")]);
    bad.expect(422);
    assert!(bad.body.contains("must be an absolute http or https URL"));
    assert!(bad.body.contains("must name at least one event"));
    assert!(subscriptions(&owner).is_empty());

    // Without the CSRF token nothing is saved.
    owner
        .client
        .post_form(
            &list,
            &[
                ("url", "https://93.184.216.34/a"),
                ("events[]", "issue.sent"),
            ],
        )
        .expect(403);

    // Created: the secret is shown once and the API sees the subscription.
    let created = owner.client.submit(
        &new,
        &list,
        &[
            ("url", "https://93.184.216.34/hooks/broadsheet"),
            ("events[]", "issue.sent"),
            ("events[]", "subscriber.created"),
        ],
    );
    created.expect(200);
    assert!(created.body.contains("whsec_"), "{}", created.body);
    let all = subscriptions(&owner);
    assert_eq!(all.len(), 1);
    let id = all[0]["id"].as_i64().unwrap();
    assert_eq!(all[0]["url"], "https://93.184.216.34/hooks/broadsheet");
    assert_eq!(
        all[0]["events"],
        json!(["issue.sent", "subscriber.created"])
    );
    assert_eq!(all[0]["enabled"], true);
    let page = owner.client.get(&list);
    assert!(page.body.contains(&format!("href=\"{list}/{id}/edit\"")));

    // Edited: new URL, one event, disabled.
    let edit = format!("{list}/{id}/edit");
    let form = owner.client.get(&edit);
    form.expect(200);
    assert!(
        form.body
            .contains("value=\"https://93.184.216.34/hooks/broadsheet\"")
    );
    let saved = owner.client.submit(
        &edit,
        &format!("{list}/{id}"),
        &[
            ("_method", "patch"),
            ("url", "https://93.184.216.34/other"),
            ("events[]", "email.bounced"),
        ],
    );
    assert_eq!(saved.redirect(), list);
    let all = subscriptions(&owner);
    assert_eq!(all[0]["url"], "https://93.184.216.34/other");
    assert_eq!(all[0]["events"], json!(["email.bounced"]));
    assert_eq!(all[0]["enabled"], false);
    assert!(owner.client.get(&list).body.contains("Disabled"));

    // A refused edit changes nothing and says why.
    let refused = owner.client.submit(
        &edit,
        &format!("{list}/{id}"),
        &[
            ("url", "http://10.0.0.1/x"),
            ("events[]", "nothing.happened"),
            ("enabled", "1"),
        ],
    );
    refused.expect(422);
    assert!(
        refused
            .body
            .contains("a private or special-purpose address")
    );
    assert!(refused.body.contains("is not an event; choose from"));
    assert_eq!(
        subscriptions(&owner)[0]["url"],
        "https://93.184.216.34/other"
    );

    // Enabled again from the form.
    owner
        .client
        .submit(
            &edit,
            &format!("{list}/{id}"),
            &[
                ("url", "https://93.184.216.34/other"),
                ("events[]", "email.bounced"),
                ("enabled", "1"),
            ],
        )
        .redirect();
    assert_eq!(subscriptions(&owner)[0]["enabled"], true);

    // Another owner: neither the subscription nor the newsletter is theirs to see or change.
    let other = onboard(&app, "Other Hooks");
    let theirs = format!("/newsletters/{}/webhooks", other.newsletter_id);
    other.client.get(&edit).expect(404);
    other.client.get(&format!("{theirs}/{id}/edit")).expect(404);
    let token = other.client.get(&format!("{theirs}/new")).csrf_token();
    for path in [format!("{list}/{id}"), format!("{theirs}/{id}")] {
        other
            .client
            .post_form(
                &path,
                &[
                    ("authenticity_token", &token),
                    ("url", "https://93.184.216.34/stolen"),
                    ("events[]", "issue.sent"),
                ],
            )
            .expect(404);
    }
    other.client.get(&format!("{theirs}/abc/edit")).expect(404);
    assert_eq!(
        subscriptions(&owner)[0]["url"],
        "https://93.184.216.34/other"
    );
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn the_webhooks_page_fits_a_phone_and_its_card_fits_a_desktop() {
    let Some(driver) = Driver::start("webhooks page") else {
        return;
    };
    let app = spawn_app_with(&["--allow-private-webhooks"]);
    let owner = onboard(&app, "Hooks On A Phone");
    let receiver = Receiver::start();
    // A long URL without a place to break (the receiver answers on one path only).
    let long_url = format!("{}?token={}", receiver.url, "0123456789abcdef".repeat(10));
    let base = app.base_url.clone();
    let list = list(&owner);
    runtime().block_on(async {
        let c = driver.session().await;
        sign_in(&c, &base, &owner.email).await;

        // Created in the browser, then a test event so the delivery log has a row.
        c.goto(&format!("{base}{list}/new")).await.unwrap();
        fill(&c, "url", &long_url).await;
        click(&c, "input[name=\"events[]\"][value=\"issue.sent\"]").await;
        click(&c, "main form button[type=submit]").await;
        wait_for_element(&c, "#webhook-secret").await;
        c.goto(&format!("{base}{list}")).await.unwrap();
        click(&c, "form[action$=\"/webhooks/test\"] button[type=submit]").await;
        wait_for_element(&c, "p.notice").await;
        receiver.wait_for("subscriber.created", 1); // the form's first event
        c.goto(&format!("{base}{list}")).await.unwrap();
        wait_for_element(&c, "[id^=webhook-] table").await;

        let fits = |css: &'static str| {
            let c = c.clone();
            async move {
                let script = format!(
                    "const e = document.querySelector('{css}'); return [e.scrollWidth, e.clientWidth, window.innerWidth];"
                );
                let sizes = c.execute(&script, vec![]).await.unwrap();
                let sizes: Vec<f64> = sizes
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect();
                (sizes[0], sizes[1], sizes[2])
            }
        };
        // Desktop: each card holds its content (the delivery table scrolls inside its own box).
        let (scroll, client, _) = fits("[id^=webhook-]").await;
        assert!(scroll <= client + 1.0, "card {scroll} > {client}");
        screenshot(&c, "dash-webhooks").await;
        // A phone: the page does not scroll sideways.
        c.set_window_size(390, 1400).await.unwrap();
        c.goto(&format!("{base}{list}")).await.unwrap();
        wait_for_element(&c, "[id^=webhook-] table").await;
        let (scroll, _, inner) = fits("html").await;
        assert!(scroll <= inner, "page {scroll} wider than {inner}");
        screenshot(&c, "dash-webhooks-phone").await;
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console errors: {errors:?}");
        c.close().await.unwrap();
    });
}
