//! After sending, and a shorter way to send: the web copy of a sent issue is edited through
//! the API and the dashboard (the site shows the new text and "Updated"; the mail that went
//! out, a send again to the unconfirmed and a test send stay the original); a subject change
//! is refused; unpublish and publish again; a send to a segment is published only when the
//! owner says so; duplicate; the one-step send of a draft; the test form on the issue page;
//! the editor's live preview (its endpoint, and in Chromium at 1280 and 390 px).

use std::time::Duration;

use crate::support::send::wait_status;
use crate::support::*;

const SENT: Duration = Duration::from_secs(20);

/// An issue with `markdown`, approved; returns its id and path.
fn approved(owner: &Owner, subject: &str, markdown: &str) -> (i64, String) {
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "status": "approved", "content_markdown": markdown}}),
    );
    resp.expect(201);
    let body = resp.json();
    (
        body["id"].as_i64().unwrap(),
        body["path"].as_str().unwrap().to_string(),
    )
}

fn subscribe(owner: &Owner, email: &str, tags: &[&str]) {
    owner
        .post("/subscribers", &json!({"email": email, "tags": tags}))
        .expect(201);
}

fn issue_page(owner: &Owner, id: i64) -> String {
    format!("/newsletters/{}/issues/{id}", owner.newsletter_id)
}

/// Whether the site lists the issue: its page, the archive and the feed.
fn on_site(site: &Client, path: &str, subject: &str) -> (u16, bool, bool) {
    let page = site.get(&format!("/p/{path}")).status;
    let archive = site.get("/archive");
    archive.expect(200);
    let feed = site.get("/feed.xml");
    feed.expect(200);
    (
        page,
        archive.body.contains(subject),
        feed.body.contains(subject),
    )
}

#[test]
fn a_sent_issues_web_copy_changes_and_its_mail_stays_as_it_went_out() {
    let app = spawn_app_on(SmtpSink::start(), &[]);
    let owner = onboard_paid(&app, "Edited Echo");
    subscribe(&owner, "reader@example.net", &[]);
    // The connection to this one drops after the message: its delivery is `unconfirmed`.
    app.smtp
        .add_faults("cut@example.net", &[Fault::DropAfterData]);
    subscribe(&owner, "cut@example.net", &[]);
    let (id, path) = approved(&owner, "Tide tables", "The *original* tide text.");
    // A PATCH before sending changes the subject as ever; after sending it cannot.
    owner.post(&format!("/issues/{id}/send_now"), &json!({}));
    let sent = wait_status(&owner, id, "sent", SENT);
    assert!(sent["edited_at"].is_null(), "{sent}");
    let mail = app.smtp.wait_for_message_to("reader@example.net", 1);
    assert!(
        mail.html().contains("<em>original</em> tide text"),
        "{}",
        mail.html()
    );

    // The API: the subject is refused by name and nothing changes.
    let refused = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"subject": "New subject", "content_markdown": "Sneaked in"}}),
    );
    assert_eq!(refused.error_code(422), "validation_error");
    assert!(refused.body.contains("subject"), "{}", refused.body);
    let unchanged = owner.get(&format!("/issues/{id}")).json();
    assert_eq!(unchanged["subject"], "Tide tables");
    assert_eq!(unchanged["content_markdown"], "The *original* tide text.");
    assert!(unchanged["edited_at"].is_null());

    // The content is edited: the site shows it with "Updated".
    let edited = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"content_markdown": "The **revised** tide text."}}),
    );
    edited.expect(200);
    let edited = edited.json();
    assert_eq!(edited["content_markdown"], "The **revised** tide text.");
    assert_eq!(edited["status"], "sent");
    assert!(edited["edited_at"].is_string(), "{edited}");
    let site = app.site_client(&owner.subdomain);
    let page = site.get(&format!("/p/{path}"));
    page.expect(200);
    assert!(
        page.body.contains("<strong>revised</strong> tide text"),
        "{}",
        page.body
    );
    assert!(page.body.contains("Updated "), "{}", page.body);
    assert!(!page.body.contains("original tide text"));
    assert!(
        site.get("/feed.xml")
            .body
            .contains("&lt;strong&gt;revised&lt;/strong&gt;")
    );

    // The dashboard: the editor of a sent issue holds the content only.
    let edit = format!("{}/edit", issue_page(&owner, id));
    let form = owner.client.get(&edit);
    form.expect(200);
    assert!(form.body.contains("Edit the web copy of"), "{}", form.body);
    assert!(!form.body.contains("name=\"issue[subject]\""));
    let saved = owner.client.submit(
        &edit,
        &issue_page(&owner, id),
        &[
            ("_method", "patch"),
            ("issue[content_markdown]", "Typed in the *dashboard*."),
            ("commit", "save"),
        ],
    );
    assert_eq!(saved.redirect(), issue_page(&owner, id));
    let page = site.get(&format!("/p/{path}"));
    assert!(
        page.body.contains("Typed in the <em>dashboard</em>."),
        "{}",
        page.body
    );
    assert!(
        owner
            .client
            .get(&issue_page(&owner, id))
            .body
            .contains("The web copy was edited")
    );

    // The mail is history: one message, the original; a send again to the unconfirmed and a
    // test send go out with the original too.
    assert_eq!(app.smtp.messages_to("reader@example.net").len(), 1);
    let cut_before = app.smtp.messages_to("cut@example.net").len();
    let resent = owner.post(&format!("/issues/{id}/resend_unconfirmed"), &json!({}));
    resent.expect(200);
    assert_eq!(resent.json()["resent"], 1);
    let again = app
        .smtp
        .wait_for_message_to("cut@example.net", cut_before + 1);
    assert!(
        again.html().contains("<em>original</em> tide text"),
        "{}",
        again.html()
    );
    assert!(!again.html().contains("dashboard"));
    owner
        .post(
            &format!("/issues/{id}/send_test"),
            &json!({"emails": ["checker@example.net"]}),
        )
        .expect(202);
    let test = app.smtp.wait_for_message_to("checker@example.net", 1);
    assert!(
        test.html().contains("<em>original</em> tide text"),
        "{}",
        test.html()
    );
    assert_eq!(
        app.smtp.messages_to("reader@example.net").len(),
        1,
        "no second copy to whoever got it"
    );
    let after = owner.get(&format!("/issues/{id}")).json();
    assert_eq!(after["content_markdown"], "Typed in the *dashboard*.");
    assert_eq!(after["subject"], "Tide tables");
}

#[test]
fn a_sent_issue_is_unpublished_and_published_again() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Hidden Herald");
    listen(&app, &owner, &["issue.published"]);
    subscribe(&owner, "reader@example.net", &[]);
    let (id, path) = approved(&owner, "Now you see it", "Some text.");
    owner.post(&format!("/issues/{id}/send_now"), &json!({}));
    let sent = wait_status(&owner, id, "sent", SENT);
    let first_published = sent["published_at"].clone();
    assert!(first_published.is_string(), "{sent}");
    let site = app.site_client(&owner.subdomain);
    assert_eq!(on_site(&site, &path, "Now you see it"), (200, true, true));

    // The API unpublishes; the page, the archive and the feed lose it.
    let off = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"published": false}}),
    );
    off.expect(200);
    assert!(off.json()["published_at"].is_null());
    assert!(off.json()["web_url"].is_null());
    assert_eq!(on_site(&site, &path, "Now you see it"), (404, false, false));

    // The dashboard publishes it again, in its old place and without a second event.
    let page = issue_page(&owner, id);
    assert!(owner.client.get(&page).body.contains("Publish to the web"));
    let on = owner.client.submit(&page, &format!("{page}/publish"), &[]);
    assert_eq!(on.redirect(), page);
    assert_eq!(on_site(&site, &path, "Now you see it"), (200, true, true));
    assert_eq!(
        owner.get(&format!("/issues/{id}")).json()["published_at"],
        first_published
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'issue.published'"),
        1
    );

    // The dashboard's Unpublish, then the API's `published: true`.
    let shown = owner.client.get(&page);
    assert!(shown.body.contains("Unpublish"), "{}", shown.body);
    let off = owner
        .client
        .submit(&page, &format!("{page}/unpublish"), &[]);
    assert_eq!(off.redirect(), page);
    assert_eq!(on_site(&site, &path, "Now you see it"), (404, false, false));
    // Without the CSRF token nothing changes.
    assert_eq!(
        owner
            .client
            .post_form(&format!("{page}/publish"), &[])
            .status,
        403
    );
    assert_eq!(on_site(&site, &path, "Now you see it").0, 404);
    owner
        .patch(
            &format!("/issues/{id}"),
            &json!({"issue": {"published": true}}),
        )
        .expect(200);
    assert_eq!(on_site(&site, &path, "Now you see it"), (200, true, true));
}

#[test]
fn a_send_to_a_segment_is_published_only_when_the_owner_says_so() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Segment Sentinel");
    subscribe(&owner, "news@example.net", &["news"]);
    subscribe(&owner, "other@example.net", &[]);

    // The send page: ticked for everyone (the newsletter publishes on send), unticked for
    // a segment.
    let (everyone, _) = approved(&owner, "For everyone", "All of you.");
    let send = format!("{}/send", issue_page(&owner, everyone));
    let page = owner.client.get(&send);
    page.expect(200);
    assert!(
        page.body
            .contains("name=\"publish\" value=\"on\" checked aria-describedby"),
        "{}",
        page.body
    );
    let segment_page = owner
        .client
        .get(&format!("{send}?audience=chosen&tags=news"));
    assert!(
        segment_page
            .body
            .contains("name=\"publish\" value=\"on\" aria-describedby"),
        "{}",
        segment_page.body
    );
    assert!(
        segment_page
            .body
            .contains("A send to some of your subscribers is not published")
    );

    // The API: a segment send without `publish` stays off the site; with it, it is on.
    let (quiet, _) = approved(&owner, "News only", "For the news readers.");
    owner
        .post(
            &format!("/issues/{quiet}/send_now"),
            &json!({"tags": ["news"]}),
        )
        .expect(200);
    let sent = wait_status(&owner, quiet, "sent", SENT);
    assert!(sent["published_at"].is_null(), "{sent}");
    let (loud, _) = approved(&owner, "News, public", "For the news readers and the site.");
    owner
        .post(
            &format!("/issues/{loud}/send_now"),
            &json!({"tags": ["news"], "publish": true}),
        )
        .expect(200);
    let sent = wait_status(&owner, loud, "sent", SENT);
    assert!(sent["published_at"].is_string(), "{sent}");

    // The dashboard: the box ticked on a segment send publishes it.
    let (ticked, ticked_path) = approved(&owner, "News, ticked", "Ticked for the site.");
    let send = format!("{}/send", issue_page(&owner, ticked));
    let done = owner.client.submit(
        &format!("{send}?audience=chosen&tags=news"),
        &send,
        &[
            ("audience", "chosen"),
            ("tags", "news"),
            ("named_tags", "news"),
            ("publish_offered", "yes"),
            ("publish", "on"),
            ("intent", "send"),
        ],
    );
    assert_eq!(done.redirect(), issue_page(&owner, ticked));
    let sent = wait_status(&owner, ticked, "sent", SENT);
    assert!(sent["published_at"].is_string(), "{sent}");
    assert_eq!(sent["audience"]["tags"], json!(["news"]));
    app.site_client(&owner.subdomain)
        .get(&format!("/p/{ticked_path}"))
        .expect(200);
    // Everyone else got none of the three.
    assert_eq!(app.smtp.messages_to("news@example.net").len(), 3);
    assert!(app.smtp.messages_to("other@example.net").is_empty());
}

#[test]
fn a_draft_is_duplicated_sent_in_one_step_and_tested_from_its_page() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Quick Quarterly");
    subscribe(&owner, "ann@example.net", &[]);
    subscribe(&owner, "bob@example.net", &["vip"]);
    let draft = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Spring", "content_markdown": "Buds *everywhere*.",
            "articles": [{"title": "Blossom", "url": "https://example.org/blossom"}],
            "audience": {"tags": ["vip"]}}}),
    );
    draft.expect(201);
    let id = draft.json()["id"].as_i64().unwrap();
    let page = issue_page(&owner, id);

    // Duplicate from the page: a new draft, content and articles copied, not the audience.
    let copied = owner
        .client
        .submit(&page, &format!("{page}/duplicate"), &[]);
    let edit = copied.redirect();
    let copy_id: i64 = edit
        .trim_end_matches("/edit")
        .rsplit('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(copy_id, id);
    owner.client.get(&edit).expect(200);
    let copy = owner.get(&format!("/issues/{copy_id}")).json();
    assert_eq!(copy["subject"], "Copy of Spring");
    assert_eq!(copy["status"], "draft");
    assert_eq!(copy["content_markdown"], "Buds *everywhere*.");
    assert_eq!(copy["articles"][0]["title"], "Blossom");
    assert_eq!(copy["audience"]["tags"], json!([]));
    let by_api = owner.post(&format!("/issues/{id}/duplicate"), &json!({}));
    by_api.expect(201);
    assert_eq!(by_api.json()["subject"], "Copy of Spring");
    assert_eq!(
        owner
            .post("/issues/999999/duplicate", &json!({}))
            .error_code(404),
        "not_found"
    );

    // The API's states stay: a draft is not sent by send_now.
    assert_eq!(
        owner
            .post(&format!("/issues/{copy_id}/send_now"), &json!({}))
            .error_code(422),
        "invalid_state"
    );

    // A test from the issue page reaches the test address and goes back to the page.
    let shown = owner.client.get(&format!(
        "/newsletters/{}/issues/{copy_id}",
        owner.newsletter_id
    ));
    assert!(shown.body.contains("Send a test"), "{}", shown.body);
    assert!(shown.body.contains("Send now…"));
    let copy_page = issue_page(&owner, copy_id);
    let tested = owner.client.submit(
        &copy_page,
        &format!("{copy_page}/send_test"),
        &[("from", "issue"), ("emails", "proof@example.net")],
    );
    assert_eq!(tested.redirect(), copy_page);
    let proof = app.smtp.wait_for_message_to("proof@example.net", 1);
    assert_eq!(
        proof.header("Subject").as_deref(),
        Some("[Test] Copy of Spring")
    );
    let preview = owner.client.get(&format!("{copy_page}/preview"));
    assert!(
        preview.body.contains("name=\"from\" value=\"preview\""),
        "{}",
        preview.body
    );

    // One step: the draft's send page, then everyone once.
    let send = format!("{copy_page}/send");
    let confirm = owner.client.get(&send);
    confirm.expect(200);
    assert!(
        confirm.body.contains("Send to 2 subscribers"),
        "{}",
        confirm.body
    );
    let done = owner.client.submit(
        &send,
        &send,
        &[
            ("audience", "chosen"),
            ("publish_offered", "yes"),
            ("intent", "send"),
        ],
    );
    assert_eq!(done.redirect(), copy_page);
    let sent = wait_status(&owner, copy_id, "sent", SENT);
    assert_eq!(sent["recipients"], 2);
    assert!(sent["published_at"].is_null(), "unticked: {sent}");
    for email in ["ann@example.net", "bob@example.net"] {
        let got = settled_mail(&app, email);
        let from_send: Vec<_> = app
            .smtp
            .messages_to(email)
            .into_iter()
            .filter(|m| m.header("Subject").as_deref() == Some("Copy of Spring"))
            .collect();
        assert_eq!(from_send.len(), 1, "{email}: {got:?}");
    }
    // A draft is scheduled straight from its page too, without approving it first.
    let later = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Later", "content_markdown": "Soon."}}),
    );
    let later_id = later.json()["id"].as_i64().unwrap();
    let later_page = issue_page(&owner, later_id);
    let scheduled = owner.client.submit(
        &later_page,
        &format!("{later_page}/schedule"),
        &[("scheduled_for", "2099-01-05T09:00")],
    );
    assert_eq!(scheduled.redirect(), later_page);
    let shown = owner.get(&format!("/issues/{later_id}")).json();
    assert_eq!(shown["status"], "scheduled");
    assert_eq!(shown["scheduled_for"], "2099-01-05T09:00:00.000Z");

    // Sending twice sends nothing more.
    let twice = owner
        .client
        .submit(&send, &send, &[("audience", "chosen"), ("intent", "send")]);
    assert_eq!(twice.status, 422);
    assert_eq!(
        app.count("SELECT count(*) FROM deliveries"),
        2,
        "one delivery each"
    );
}

#[test]
fn the_live_preview_renders_and_refuses_a_missing_token_or_too_much() {
    let app = spawn_app();
    let owner = onboard(&app, "Preview Post");
    let url = format!("/newsletters/{}/issues/live_preview", owner.newsletter_id);
    let editor = format!("/newsletters/{}/issues/new", owner.newsletter_id);
    let form = owner.client.get(&editor);
    assert!(form.body.contains("id=\"live-preview\""), "{}", form.body);
    assert!(form.body.contains("/assets/live-preview.js"));
    let token = form.csrf_token();

    let shown = owner.client.post_form(
        &url,
        &[
            ("authenticity_token", &token),
            ("subject", "Draft in progress"),
            ("content_markdown", "Hello **bold** <script>x</script>"),
        ],
    );
    shown.expect(200);
    let body = shown.json();
    for part in ["web", "email"] {
        let html = body[part].as_str().unwrap();
        assert!(html.contains("<strong>bold</strong>"), "{part}: {html}");
        assert!(!html.contains("<script>x"), "{part}: {html}");
    }
    assert!(body["web"].as_str().unwrap().contains("Draft in progress"));
    assert_eq!(body["subject"], "Draft in progress");
    assert_eq!(
        app.count("SELECT count(*) FROM issues"),
        0,
        "nothing is saved"
    );

    // No token: refused.
    let forged = owner
        .client
        .post_form(&url, &[("subject", "x"), ("content_markdown", "Hello")]);
    assert_eq!(forged.status, 403);
    // Beyond the content limit: its message, no render.
    let long = "word ".repeat(50_000);
    let too_long = owner.client.post_form(
        &url,
        &[("authenticity_token", &token), ("content_markdown", &long)],
    );
    assert_eq!(too_long.status, 422);
    assert!(
        too_long.json()["problem"]
            .as_str()
            .unwrap()
            .contains("200,000"),
        "{}",
        too_long.body
    );
    // Beyond the form limit: refused before anything is read.
    let huge = "x".repeat(1_100_000);
    let refused = owner.client.post_form(
        &url,
        &[("authenticity_token", &token), ("content_markdown", &huge)],
    );
    assert!((400..500).contains(&refused.status), "{}", refused.status);
    // Another owner's newsletter: 404.
    let other = onboard(&app, "Other Outlet");
    let theirs = format!("/newsletters/{}/issues/live_preview", other.newsletter_id);
    let foreign = owner.client.post_form(
        &theirs,
        &[("authenticity_token", &token), ("content_markdown", "x")],
    );
    assert_eq!(foreign.status, 404);
    // An issue's articles show in its preview.
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "With links",
            "articles": [{"title": "Linked piece", "url": "https://example.org/piece"}]}}),
    );
    let iid = issue.json()["id"].as_i64().unwrap().to_string();
    let with_articles = owner.client.post_form(
        &url,
        &[
            ("authenticity_token", &token),
            ("issue_id", &iid),
            ("subject", "With links"),
            ("content_markdown", "Intro"),
        ],
    );
    with_articles.expect(200);
    assert!(with_articles.body.contains("Linked piece"));
}

mod in_chromium {
    use fantoccini::Client;

    use crate::support::axe::Axe;
    use crate::support::browser::{
        Driver, fill, runtime, sign_in, wait_for_element, wait_for_text,
    };
    use crate::support::*;

    /// The page's width beyond the window's, in CSS pixels (0: no sideways scroll).
    async fn overflow(c: &Client) -> i64 {
        c.execute(
            "return document.documentElement.scrollWidth - window.innerWidth",
            vec![],
        )
        .await
        .unwrap()
        .as_i64()
        .unwrap()
    }

    /// Where an element's box is: left and top, in CSS pixels.
    async fn corner(c: &Client, css: &str) -> (f64, f64) {
        let at = c
            .execute(
                "const r = document.querySelector(arguments[0]).getBoundingClientRect(); return [r.left, r.top];",
                vec![serde_json::json!(css)],
            )
            .await
            .unwrap();
        (at[0].as_f64().unwrap(), at[1].as_f64().unwrap())
    }

    /// The document shown in the live frame `id` (sandboxed without the page's origin, so
    /// the test reads what the script gave it).
    async fn frame_text(c: &Client, id: &str) -> String {
        c.execute(
            "return document.getElementById(arguments[0]).srcdoc;",
            vec![serde_json::json!(id)],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    #[test]
    #[cfg_attr(
        not(all(has_chromium, has_axe)),
        ignore = "needs chromium, chromedriver and axe-core (apt-get install chromium chromium-driver; npm install --prefix target/npm axe-core@4)"
    )]
    fn the_editor_previews_as_you_type_beside_the_text_and_below_it_on_a_phone_light_and_dark() {
        let Some(driver) = Driver::start("live preview") else {
            return;
        };
        let Some(axe) = Axe::load("live preview") else {
            return;
        };
        let app = spawn_app();
        let owner = onboard(&app, "Live Ledger");
        let base = app.base_url.clone();
        let editor = format!("{base}/newsletters/{}/issues/new", owner.newsletter_id);
        let (found, wide, narrow) = runtime().block_on(async {
            let c = driver.session().await;
            c.set_window_size(1280, 900).await.unwrap();
            sign_in(&c, &base, &owner.email).await;
            c.goto(&editor).await.unwrap();
            wait_for_element(&c, "#live-preview:not([hidden])").await;
            fill(&c, "issue[subject]", "Typed live").await;
            fill(&c, "issue[content_markdown]", "Hello *live* world").await;
            wait_for_text(&c, "#live-preview-status", "up to date").await;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while !frame_text(&c, "live-web")
                .await
                .contains("Hello <em>live</em> world")
            {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the web frame never showed the text"
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            c.find(fantoccini::Locator::Css(
                "input[name=live_preview_view][value=email]",
            ))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
            wait_for_element(&c, "#live-email:not([hidden])").await;
            assert!(
                frame_text(&c, "live-email")
                    .await
                    .contains("Hello <em>live</em> world")
            );
            let mut found = Vec::new();
            for scheme in ["dark", "light"] {
                let media = serde_json::json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]});
                driver.cdp(&c, "Emulation.setEmulatedMedia", media).await;
                found.extend(axe.violations(&c, &format!("editor with live preview, {scheme}")).await);
            }
            let text = corner(&c, "textarea[name=\"issue[content_markdown]\"]").await;
            let shown = corner(&c, "#live-preview").await;
            let wide = (overflow(&c).await, text, shown);

            c.set_window_size(390, 844).await.unwrap();
            for scheme in ["dark", "light"] {
                let media = serde_json::json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]});
                driver.cdp(&c, "Emulation.setEmulatedMedia", media).await;
                found.extend(
                    axe.violations(&c, &format!("editor with live preview at 390 px, {scheme}"))
                        .await,
                );
            }
            let text = corner(&c, "textarea[name=\"issue[content_markdown]\"]").await;
            let shown = corner(&c, "#live-preview").await;
            let narrow = (overflow(&c).await, text, shown);
            c.close().await.unwrap();
            (found, wide, narrow)
        });
        assert!(found.is_empty(), "axe: {}", found.join("\n"));
        let (width, text, shown) = wide;
        assert!(width <= 0, "sideways scroll at 1280 px: {width}");
        assert!(
            shown.0 > text.0,
            "beside the text at 1280 px: {text:?} {shown:?}"
        );
        let (width, text, shown) = narrow;
        assert!(width <= 0, "sideways scroll at 390 px: {width}");
        assert!(
            shown.1 > text.1,
            "below the text at 390 px: {text:?} {shown:?}"
        );
    }
}
