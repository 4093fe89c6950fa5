//! Time zones: the account's zone from sign-up and the account page, every
//! dashboard time in one friendly format in it, send times typed in it (daylight-saving gaps
//! refused), and the newsletter's zone on the API object and under its 09:00 slots.

use std::time::Duration;

use crate::support::send::{approved_issue, send_now, wait_status};
use crate::support::*;

/// Every `YYYY-MM-DDTHH:MM:SS` of `html` that is not the `datetime` of a `<time>`: a time
/// printed for machines where people read.
fn raw_timestamps(html: &str) -> Vec<String> {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd";
    let bytes = html.as_bytes();
    (0..bytes.len().saturating_sub(SHAPE.len()))
        .filter(|&i| {
            SHAPE.iter().zip(&bytes[i..]).all(|(&s, &c)| match s {
                b'd' => c.is_ascii_digit(),
                other => other == c,
            }) && !html[..i].ends_with("datetime=\"")
        })
        .map(|i| html[i..(i + 30).min(html.len())].to_string())
        .collect()
}

/// Sets the signed-in account's zone through the account page.
fn set_account_zone(client: &Client, zone: &str) {
    let resp = client.submit("/account", "/account/time_zone", &[("time_zone", zone)]);
    assert_eq!(resp.redirect(), "/account");
}

/// Signs up through the form with `fields` added, confirms, and returns the account page.
fn sign_up_with(app: &App, fields: &[(&str, &str)]) -> String {
    let client = app.client();
    let email = unique_email("zoned");
    let mut all = vec![
        ("user[email_address]", email.as_str()),
        ("user[password]", PASSWORD),
        ("user[password_confirmation]", PASSWORD),
    ];
    all.extend_from_slice(fields);
    let resp = client.submit("/signup", "/signup", &all);
    assert_eq!(resp.redirect(), "/email_confirmation_pending");
    let mail = app.smtp.wait_for_message_to(&email, 1);
    let link = link_containing(&mail.text(), "/email_confirmations/").unwrap();
    assert_eq!(client.get(&link).redirect(), "/newsletters");
    let page = client.get("/account");
    page.expect(200);
    page.body
}

fn selected_zone(account_page: &str) -> String {
    let start = account_page
        .find("name=\"time_zone\"")
        .expect("the zone field");
    let rest = &account_page[start..];
    let chosen = rest.find(" selected").expect("a chosen zone");
    let value = rest[..chosen].rfind("value=\"").unwrap() + 7;
    match rest[value..].split('"').next().unwrap() {
        // Following each newsletter's zone: the account's own is the one its other pages use.
        "" => {
            let own = account_page
                .find("no newsletter's use ")
                .expect("the account's zone")
                + "no newsletter's use ".len();
            account_page[own..].split(' ').next().unwrap().to_string()
        }
        zone => zone.to_string(),
    }
}

#[test]
fn sign_up_takes_the_browsers_zone_and_the_account_page_changes_it() {
    let app = spawn_app();
    // The sign-up page carries the field its script fills, UTC until it runs.
    let page = app.client().get("/signup");
    page.expect(200);
    assert!(page.body.contains(
        "<input type=\"hidden\" name=\"user[time_zone]\" value=\"UTC\" data-browser-time-zone>"
    ));
    assert!(
        page.body
            .contains("<script src=\"/assets/time-zone.js\" defer>")
    );
    let script = app.client().get("/assets/time-zone.js");
    script.expect(200);
    assert!(
        script
            .header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(script.body.contains("resolvedOptions().timeZone"));

    assert_eq!(
        selected_zone(&sign_up_with(&app, &[("user[time_zone]", "Europe/Berlin")])),
        "Europe/Berlin"
    );
    // No script, or a zone the database does not know: UTC, changeable later.
    assert_eq!(selected_zone(&sign_up_with(&app, &[])), "UTC");
    assert_eq!(
        selected_zone(&sign_up_with(&app, &[("user[time_zone]", "Mars/Olympus")])),
        "UTC"
    );

    let owner = onboard(&app, "Zoned Notes");
    set_account_zone(&owner.client, "asia/tokyo");
    let page = owner.client.get("/account");
    assert_eq!(
        selected_zone(&page.body),
        "Asia/Tokyo",
        "the database's spelling"
    );
    assert!(
        page.body
            .contains("Times are now shown in Asia/Tokyo on every page.")
    );
    assert!(page.body.contains(" JST</time>"), "{}", page.body);

    // A name that is no zone changes nothing; nor does a post without the form's token.
    let resp = owner
        .client
        .submit("/account", "/account/time_zone", &[("time_zone", "+09:00")]);
    resp.expect(400);
    let resp = owner
        .client
        .post_form("/account/time_zone", &[("time_zone", "UTC")]);
    assert_ne!(resp.status, 303);
    assert_eq!(
        selected_zone(&owner.client.get("/account").body),
        "Asia/Tokyo"
    );
    // Signed out, the form is not there to post to.
    let resp = app
        .client()
        .post_form("/account/time_zone", &[("time_zone", "UTC")]);
    assert_ne!(resp.status, 303, "{}", resp.body);
}

#[test]
fn no_dashboard_page_prints_a_raw_timestamp() {
    let found = raw_timestamps(
        "<td>2026-11-26T08:00:00.000Z</td><time datetime=\"2026-11-26T08:00:00.000Z\">",
    );
    assert!(
        found.len() == 1 && found[0].starts_with("2026-11-26T08:00:00.000Z</td>"),
        "the check finds what it looks for, and only that: {found:?}"
    );
    let app = spawn_app_with(&["--allow-private-webhooks"]);
    // 26 November 2026, 08:00 UTC: 09:00 in Berlin (CET).
    app.set_clock(instant("2026-11-26T08:00:00Z"));
    let owner = onboard(&app, "Friendly Times");
    set_account_zone(&owner.client, "Europe/Berlin");
    let nid = owner.newsletter_id;
    let base = format!("/newsletters/{nid}");

    // Something with a time on every page: subscribers, issues (sent, scheduled), an
    // import, a webhook delivery, a custom domain, API key use.
    let subscriber = owner
        .post("/subscribers", &json!({"email": "reader@example.com"}))
        .json()["id"]
        .as_i64()
        .unwrap();
    let receiver = crate::support::receiver::Receiver::start();
    owner
        .post(
            "/webhook_subscriptions",
            &json!({"url": receiver.url, "events": ["issue.sent"]}),
        )
        .expect(201);
    let (code, _, err) = app.cli(&["tier", &owner.subdomain, "paid"]);
    assert_eq!(code, 0, "{err}");
    let sent = approved_issue(&owner, "Sent one");
    send_now(&owner, sent);
    wait_status(&owner, sent, "sent", Duration::from_secs(20));
    receiver.wait_for("issue.sent", 1);
    wait_for("the webhook delivery", Duration::from_secs(10), || {
        (app.count("SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'") == 1)
            .then_some(())
    });
    let scheduled = owner
        .post(
            "/issues",
            &json!({"issue": {"subject": "Later", "status": "scheduled",
                "scheduled_for": "2026-12-01T08:00:00Z"}}),
        )
        .json()["id"]
        .as_i64()
        .unwrap();
    let upload = upload_as(
        &owner.client,
        nid,
        nid,
        "list.csv",
        b"email\nnew@example.com\n",
    );
    let upload_page = upload.redirect();
    let domain = owner.client.submit(
        &format!("{base}/custom_domains/choose_method"),
        &format!("{base}/custom_domains"),
        &[
            ("custom_domain[domain]", "news.example.com"),
            ("custom_domain[method]", "subdomain"),
        ],
    );
    let domain_page = domain.redirect();

    let pages = [
        "/newsletters".to_string(),
        base.clone(),
        format!("{base}/issues"),
        format!("{base}/issues/{sent}"),
        format!("{base}/issues/{scheduled}"),
        format!("{base}/issues/{scheduled}/edit"),
        format!("{base}/issues/new"),
        format!("{base}/subscribers"),
        format!("{base}/subscribers/{subscriber}"),
        format!("{base}/subscribers/import"),
        upload_page,
        format!("{base}/api_keys"),
        format!("{base}/stats"),
        format!("{base}/settings"),
        format!("{base}/webhooks"),
        format!("{base}/custom_domains"),
        domain_page,
        "/account".to_string(),
    ];
    for path in &pages {
        let page = owner.client.get(path);
        page.expect(200);
        let raw = raw_timestamps(&page.body);
        assert!(raw.is_empty(), "{path} prints {raw:?}");
    }

    // The friendly form, on Berlin's clocks, with the instant for machines.
    let issue = owner.client.get(&format!("{base}/issues/{scheduled}")).body;
    assert!(
        issue.contains("<time datetime=\"2026-12-01T08:00:00.000Z\">1 Dec 2026, 09:00 CET</time>"),
        "{issue}"
    );
    let account = owner.client.get("/account").body;
    assert!(
        account.contains("26 Nov 2026, 09:0"),
        "the session started at 09:00 in Berlin:\n{account}"
    );
    let keys = owner.client.get(&format!("{base}/api_keys")).body;
    assert!(keys.contains("26 Nov 2026, 09:0"), "{keys}");
}

#[test]
fn send_times_are_typed_on_the_accounts_clocks() {
    let app = spawn_app();
    app.set_clock(instant("2026-11-26T08:00:00Z"));
    let owner = onboard(&app, "Berlin Desk");
    set_account_zone(&owner.client, "Europe/Berlin");
    let id = approved_issue(&owner, "Typed times");
    let url = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);

    // The page says which clocks, and its default is the next weekly slot (Tuesday 1
    // December, 09:00 UTC: the newsletter is still on UTC) shown on Berlin's, 10:00.
    let page = owner.client.get(&url);
    page.expect(200);
    assert!(
        page.body.contains("Send at (Europe/Berlin)"),
        "{}",
        page.body
    );
    assert!(page.body.contains("Times are in Europe/Berlin"));
    assert_eq!(
        http::attribute_after(&page.body, "name=\"scheduled_for\"", "value").unwrap(),
        "2026-12-01T10:00"
    );

    // Winter: 09:00 in Berlin is 08:00 UTC; summer: 07:00 UTC.
    let resp = owner.client.submit(
        &url,
        &format!("{url}/schedule"),
        &[("scheduled_for", "2027-01-05T09:00")],
    );
    assert_eq!(resp.redirect(), url);
    let issue = owner.get(&format!("/issues/{id}")).json();
    assert_eq!(issue["scheduled_for"], "2027-01-05T08:00:00.000Z");
    assert!(
        owner
            .client
            .get(&url)
            .body
            .contains("Scheduled for 5 Jan 2027, 09:00 CET.")
    );
    let edit = owner.client.get(&format!("{url}/edit"));
    edit.expect(200);
    assert!(edit.body.contains("Send time (Europe/Berlin)"));
    assert_eq!(
        http::attribute_after(&edit.body, "name=\"issue[scheduled_for]\"", "value").unwrap(),
        "2027-01-05T09:00",
        "the editor shows it on the same clocks"
    );
    owner.client.submit(
        &url,
        &format!("{url}/schedule"),
        &[("scheduled_for", "2027-07-06T09:00")],
    );
    assert_eq!(
        owner.get(&format!("/issues/{id}")).json()["scheduled_for"],
        "2027-07-06T07:00:00.000Z"
    );

    // 28 March 2027, 02:30 does not exist in Berlin: refused with a sentence, from the
    // schedule form and from the editor, and nothing changes.
    let skipped = "Send time does not exist in Europe/Berlin: on 28 Mar 2027 the clocks go forward from 02:00 to 03:00; choose a time outside that gap";
    let resp = owner.client.submit(
        &url,
        &format!("{url}/schedule"),
        &[("scheduled_for", "2027-03-28T02:30")],
    );
    resp.expect(422);
    assert!(resp.body.contains(skipped), "{}", resp.body);
    let resp = owner.client.submit(
        &format!("{url}/edit"),
        &url,
        &[
            ("_method", "patch"),
            ("issue[subject]", "Typed times"),
            ("issue[content_markdown]", "Body"),
            ("issue[status]", "scheduled"),
            ("issue[scheduled_for]", "2027-03-28T02:30"),
            ("commit", "save"),
        ],
    );
    resp.expect(422);
    assert!(resp.body.contains(skipped), "{}", resp.body);
    assert_eq!(
        owner.get(&format!("/issues/{id}")).json()["scheduled_for"],
        "2027-07-06T07:00:00.000Z"
    );
    // 31 October 2027, 02:30 comes twice: the first, still summer time.
    owner.client.submit(
        &url,
        &format!("{url}/schedule"),
        &[("scheduled_for", "2027-10-31T02:30")],
    );
    assert_eq!(
        owner.get(&format!("/issues/{id}")).json()["scheduled_for"],
        "2027-10-31T00:30:00.000Z"
    );
}

#[test]
fn the_newsletters_zone_is_on_the_api_and_places_its_slots_across_daylight_saving_time() {
    let app = spawn_app();
    // Tuesday 20 October 2026, 08:00 in New York (EDT, UTC-4).
    app.set_clock(instant("2026-10-20T12:00:00Z"));
    let owner = onboard(&app, "Eastern Weekly");
    let me = owner.get("/newsletter").json();
    assert_eq!(
        me["data"]["time_zone"], "UTC",
        "the owner's zone when created"
    );

    // PATCH takes IANA names only.
    for bad in [json!("Eastern"), json!("-05:00"), json!(""), json!(5)] {
        let resp = owner.patch("/newsletter", &json!({ "time_zone": bad }));
        assert_eq!(resp.status, 422, "{bad}: {}", resp.body);
    }
    let resp = owner.patch("/newsletter", &json!({"time_zone": "Mars/Olympus"}));
    resp.expect(422);
    assert!(resp.body.contains("time_zone"), "{}", resp.body);
    let resp = owner.patch("/newsletter", &json!({"time_zone": "america/new_york"}));
    resp.expect(200);
    assert_eq!(resp.json()["data"]["time_zone"], "America/New_York");
    assert_eq!(
        owner.get("/newsletter").json()["data"]["time_zone"],
        "America/New_York"
    );

    // Weekly slots are Tuesdays at 09:00 New York time: 13:00 UTC in summer time...
    let slot = |subject: &str| {
        let resp = owner.post(
            "/issues",
            &json!({"issue": {"subject": subject, "status": "scheduled"}}),
        );
        resp.expect(201);
        resp.json()["scheduled_for"].as_str().unwrap().to_string()
    };
    assert_eq!(slot("Summer"), "2026-10-20T13:00:00.000Z");
    // ... and 14:00 UTC once the clocks went back (Sunday 1 November).
    app.set_clock(instant("2026-10-27T14:00:00Z"));
    assert_eq!(slot("Winter"), "2026-11-03T14:00:00.000Z");

    // A new newsletter of an owner in Tokyo starts on Tokyo's clocks.
    set_account_zone(&owner.client, "Asia/Tokyo");
    let second = create_newsletter(&owner.client, "Tokyo Weekly");
    let key = create_api_key(&owner.client, second, &["read"]);
    let me = owner.client.api("GET", "/newsletter", &key, None).json();
    assert_eq!(me["data"]["time_zone"], "Asia/Tokyo");
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn chromium_signs_up_in_its_own_zone() {
    let Some(driver) = crate::support::browser::Driver::start("time zone at sign-up") else {
        return;
    };
    let app = spawn_app();
    let email = unique_email("chromium-zone");
    let (browser_zone, field, errors) = crate::support::browser::runtime().block_on(async {
        use crate::support::browser::{click, fill, wait_for_path};
        let c = driver.session().await;
        c.goto(&format!("{}/signup", app.base_url)).await.unwrap();
        let zones = c
            .execute(
                "return [Intl.DateTimeFormat().resolvedOptions().timeZone, \
                 document.querySelector('[data-browser-time-zone]').value];",
                vec![],
            )
            .await
            .unwrap();
        fill(&c, "user[email_address]", &email).await;
        fill(&c, "user[password]", PASSWORD).await;
        fill(&c, "user[password_confirmation]", PASSWORD).await;
        click(&c, "form[action=\"/signup\"] button[type=submit]").await;
        wait_for_path(&c, "/email_confirmation_pending").await;
        let errors = driver.console_errors(&c).await;
        c.close().await.unwrap();
        (
            zones[0].as_str().unwrap().to_string(),
            zones[1].as_str().unwrap().to_string(),
            errors,
        )
    });
    assert_eq!(field, browser_zone, "the script ran under the page's CSP");
    assert!(errors.is_empty(), "{errors:?}");
    let client = app.client();
    let mail = app.smtp.wait_for_message_to(&email, 1);
    let link = link_containing(&mail.text(), "/email_confirmations/").unwrap();
    assert_eq!(client.get(&link).redirect(), "/newsletters");
    let account = client.get("/account").body;
    assert_eq!(
        selected_zone(&account).to_ascii_lowercase(),
        browser_zone.to_ascii_lowercase()
    );
}
