//! A site a creator is proud of, through the real binary: the about page and the author
//! (API, dashboard, site, feed), the archive's excerpts and human dates in the newsletter's
//! time zone, no doubled title, og:image per issue, and the answer pages (subscribe, confirm,
//! unsubscribe, subscribe again, errors) inside the site's frame with a way back. The browser
//! test walks every page of a site at 1280 and 390 px, light and dark: no sideways scroll, axe
//! clean, screenshots kept.

use image::ImageFormat;

use crate::media::{encoded, picture, uploaded_url};
use crate::support::axe::Axe;
use crate::support::browser::{Driver, assert_fits, click, runtime, screenshot, wait_for_element};
use crate::support::*;

/// Publishes an issue with `subject` and `markdown`; its id and page path.
fn publish(owner: &Owner, subject: &str, markdown: &str) -> (i64, String) {
    let created = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "content_markdown": markdown, "status": "approved"}}),
    );
    created.expect(201);
    let id = created.json()["id"].as_i64().unwrap();
    let published = owner.post(&format!("/issues/{id}/publish"), &json!({}));
    published.expect(200);
    let url = published.json()["web_url"].as_str().unwrap().to_string();
    (id, path_of(&url))
}

/// How often `needle` occurs in `haystack`.
fn occurrences(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// The site's frame: its header with the newsletter's name linking home, and the footer.
fn assert_framed(page: &Resp, name: &str) {
    assert!(
        page.body.contains("<header class=\"site\">"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(&format!("<a href=\"/\">{name}</a>")),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<footer class=\"site\">"),
        "{}",
        page.body
    );
}

/// The "← Back to" link answer pages end with.
fn assert_way_back(page: &Resp, name: &str) {
    assert!(
        page.body
            .contains(&format!("<a href=\"/\">← Back to {name}</a>")),
        "{}",
        page.body
    );
}

#[test]
fn the_about_page_and_the_author_through_the_api_the_dashboard_and_the_site() {
    let app = spawn_app();
    let owner = onboard(&app, "Quay Letters");
    let site = app.site_client(&owner.subdomain);
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);

    // No about text and no author: no about page, and no link to one.
    site.get("/about").expect(404);
    assert!(!site.get("/").body.contains("href=\"/about\""));
    let fresh = owner.get("/newsletter").json();
    for field in ["about_markdown", "author_name", "author_image_url"] {
        assert_eq!(fresh["data"][field], Value::Null, "{field}");
    }

    // A picture uploaded to the Media page, named by its path.
    let image_url = uploaded_url(&owner, &encoded(&picture(400, 400), ImageFormat::Png));
    let image_path = path_of(&image_url);
    assert!(image_path.starts_with("/media/"), "{image_path}");
    let saved = owner.patch(
        "/newsletter",
        &json!({"about_markdown": "We write about the harbour.\n\n## Why\n\nBecause *boats*.",
            "author_name": "Morgan Quay", "author_image_url": image_path}),
    );
    saved.expect(200);
    let data = &saved.json()["data"];
    assert_eq!(
        data["about_markdown"],
        "We write about the harbour.\n\n## Why\n\nBecause *boats*."
    );
    assert_eq!(data["author_name"], "Morgan Quay");
    assert_eq!(data["author_image_url"], format!("{origin}{image_path}"));

    // Refused values name their fields and change nothing.
    for (body, field) in [
        (
            json!({"author_image_url": "http://cdn.example.com/me.png"}),
            "author_image_url",
        ),
        (
            json!({"author_image_url": "/media/not-a-hash.png"}),
            "author_image_url",
        ),
        (json!({"author_name": "two\nlines"}), "author_name"),
        (
            json!({"about_markdown": "x".repeat(20_001)}),
            "about_markdown",
        ),
        // Beyond the content limits (quotes nested past 16 deep): refused like an issue's.
        (
            json!({"about_markdown": format!("{} too deep", ">".repeat(40))}),
            "about_markdown",
        ),
    ] {
        let refused = owner.patch("/newsletter", &body);
        assert_eq!(refused.error_code(422), "validation_error", "{body}");
        assert!(refused.body.contains(field), "{field}: {}", refused.body);
    }
    let unchanged = owner.get("/newsletter").json();
    assert_eq!(unchanged["data"]["author_name"], "Morgan Quay");
    assert_eq!(
        unchanged["data"]["author_image_url"],
        format!("{origin}{image_path}")
    );

    // The about page: the author's picture and name, the text as rendered when saved.
    let about = site.get("/about");
    about.expect(200);
    assert_framed(&about, "Quay Letters");
    for text in [
        "<h1>About Quay Letters</h1>",
        "<strong>Morgan Quay</strong>",
        &format!("src=\"{origin}{image_path}\""),
        "<em>boats</em>",
        "<h2>Why</h2>",
        "content=\"We write about the harbour. Why Because boats.\"",
    ] {
        assert!(about.body.contains(text), "{text:?}:\n{}", about.body);
    }
    assert!(site.get("/").body.contains("<a href=\"/about\">About</a>"));
    // The picture is the site's own image, served to readers.
    site.get(&image_path).expect(200);

    // The author beside every issue, and in the feed.
    let (_, path) = publish(&owner, "Low water", "The tide went out.");
    let page = site.get(&path);
    assert!(
        page.body
            .contains("<span class=\"author\">By Morgan Quay</span>"),
        "{}",
        page.body
    );
    let feed = site.get("/feed.xml");
    assert!(
        feed.body
            .contains("<author><name>Morgan Quay</name></author>"),
        "{}",
        feed.body
    );

    // The dashboard's settings: the section shows what is stored and saves through the same
    // rules; a refusal shows the form again with what was typed.
    let settings_path = format!("/newsletters/{}/settings", owner.newsletter_id);
    let settings = owner.client.get(&settings_path);
    settings.expect(200);
    assert!(settings.body.contains("We write about the harbour."));
    assert!(settings.body.contains("value=\"Morgan Quay\""));
    let action = format!("{settings_path}/about");
    let refused = owner.client.submit(
        &settings_path,
        &action,
        &[
            ("pages[about_markdown]", "Kept as typed"),
            ("pages[author_name]", "Morgan Quay"),
            ("pages[author_image_url]", "ftp://example.com/me.png"),
        ],
    );
    refused.expect(422);
    assert!(refused.body.contains("Kept as typed"), "{}", refused.body);
    assert!(refused.body.contains("https:// address of an image"));
    assert_eq!(
        owner.get("/newsletter").json()["data"]["author_name"],
        "Morgan Quay"
    );
    let cleared = owner.client.submit(
        &settings_path,
        &action,
        &[
            ("pages[about_markdown]", ""),
            ("pages[author_name]", ""),
            ("pages[author_image_url]", ""),
        ],
    );
    cleared.redirect();
    site.get("/about").expect(404);
    assert!(!site.get(&path).body.contains("By Morgan Quay"));
    let data = owner.get("/newsletter").json();
    for field in ["about_markdown", "author_name", "author_image_url"] {
        assert_eq!(data["data"][field], Value::Null, "{field}");
    }
}

#[test]
fn the_archive_shows_excerpts_and_dates_in_the_newsletters_zone_and_no_title_twice() {
    let app = spawn_app();
    let owner = onboard(&app, "Antipodes");
    owner
        .patch("/newsletter", &json!({"time_zone": "Pacific/Auckland"}))
        .expect(200);
    let site = app.site_client(&owner.subdomain);
    // 12:30 UTC on 27 November is 01:30 on the 28th in Auckland (UTC+13 in summer).
    app.set_clock(instant("2026-11-27T12:30:00Z"));
    let (id, path) = publish(
        &owner,
        "Same Subject",
        "# Same   subject\n\nThe first words of the issue, which the archive shows.",
    );
    let (_, other) = publish(
        &owner,
        "Another one",
        "## Three things\n\nOne, two and three.\n\n![A gull](https://cdn.example.com/gull.png)",
    );

    let archive = site.get("/archive");
    archive.expect(200);
    for text in [
        "28 November 2026",
        "<p class=\"excerpt\">The first words of the issue, which the archive shows.</p>",
        "<p class=\"excerpt\">One, two and three.</p>",
    ] {
        assert!(archive.body.contains(text), "{text:?}:\n{}", archive.body);
    }
    assert!(
        !archive.body.contains(">2026-11-2"),
        "no ISO dates for people"
    );
    let api = owner.get(&format!("/issues/{id}")).json();
    assert_eq!(
        api["excerpt"],
        "The first words of the issue, which the archive shows."
    );

    // The content's opening heading is the subject again: printed once.
    let page = site.get(&path);
    assert_eq!(
        occurrences(&page.body, "Same Subject</h1>"),
        1,
        "{}",
        page.body
    );
    assert!(!page.body.contains("Same   subject"), "{}", page.body);
    assert!(page.body.contains(">28 November 2026</time>"));
    // A different opening heading stays.
    let page = site.get(&other);
    assert!(page.body.contains("<h2>Three things</h2>"), "{}", page.body);

    // og:image: the first image of the content, large in previews; then one chosen.
    assert!(
        page.body
            .contains("<meta property=\"og:image\" content=\"https://cdn.example.com/gull.png\">"),
        "{}",
        page.body
    );
    assert!(page.body.contains("content=\"summary_large_image\""));
    let no_image = site.get(&path);
    assert!(!no_image.body.contains("og:image"), "{}", no_image.body);
    assert!(no_image.body.contains("content=\"summary\""));
    let chosen = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"social_image_url": "https://cdn.example.com/cover.jpg"}}),
    );
    chosen.expect(200);
    assert_eq!(
        chosen.json()["social_image_url"],
        "https://cdn.example.com/cover.jpg"
    );
    assert!(
        site.get(&path)
            .body
            .contains("<meta property=\"og:image\" content=\"https://cdn.example.com/cover.jpg\">")
    );
    let refused = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"social_image_url": "javascript:alert(1)"}}),
    );
    assert_eq!(refused.error_code(422), "validation_error");
    assert!(
        refused.body.contains("social_image_url"),
        "{}",
        refused.body
    );
    assert_eq!(
        owner.get(&format!("/issues/{id}")).json()["social_image_url"],
        "https://cdn.example.com/cover.jpg"
    );
    // Blank goes back to the content's first image (none here).
    owner
        .patch(
            &format!("/issues/{id}"),
            &json!({"issue": {"social_image_url": ""}}),
        )
        .expect(200);
    assert!(!site.get(&path).body.contains("og:image"));
}

#[test]
fn issues_saved_before_excerpts_get_theirs_from_the_render_job() {
    let app = spawn_app();
    let owner = onboard(&app, "Old Stock");
    let (id, _) = publish(&owner, "From before", "Words from an older version.");
    // As an upgrade finds it: no excerpt, and the job that migration 0032 queues.
    let writer = rusqlite::Connection::open(app.data_dir().join("broadsheet.db")).unwrap();
    writer
        .busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    writer
        .execute("UPDATE issues SET excerpt = NULL WHERE id = ?1", [id])
        .unwrap();
    let site = app.site_client(&owner.subdomain);
    assert!(!site.get("/archive").body.contains("class=\"excerpt\""));
    writer
        .execute(
            "INSERT INTO jobs (kind, payload, run_at, created_at, updated_at)
             VALUES ('render_content', '{}', '2000-01-01T00:00:00.000Z', '2000-01-01T00:00:00.000Z', '2000-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
    wait_for("the excerpt", std::time::Duration::from_secs(20), || {
        let excerpt: Option<String> = app
            .db()
            .query_row("SELECT excerpt FROM issues WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .unwrap();
        excerpt
    });
    assert!(
        site.get("/archive")
            .body
            .contains("<p class=\"excerpt\">Words from an older version.</p>")
    );
}

#[test]
fn answer_pages_are_inside_the_site_with_a_way_back_and_leaving_can_be_undone() {
    let app = spawn_app();
    let owner = onboard(&app, "Harbour Notes");
    let site = app.site_client(&owner.subdomain);
    let reader = unique_email("back-again");

    // Subscribing: the "check your inbox" page, then the confirm page and its answer.
    let asked = site.submit("/subscribe", "/subscribe", &[("email", &reader)]);
    asked.expect(200);
    assert_framed(&asked, "Harbour Notes");
    assert_way_back(&asked, "Harbour Notes");
    assert!(asked.body.contains("<h1>Check your inbox</h1>"));
    let mail = app.smtp.wait_for_message_to(&reader, 1);
    let link = link_containing(&mail.text(), "/subscribe/confirm/").expect("a confirmation link");
    let confirm = path_of(&link);
    let page = site.get(&confirm);
    page.expect(200);
    assert_framed(&page, "Harbour Notes");
    let done = site.submit(&confirm, &confirm, &[]);
    done.expect(200);
    assert_framed(&done, "Harbour Notes");
    assert_way_back(&done, "Harbour Notes");
    assert!(done.body.contains("<h1>You are subscribed</h1>"));
    // The link again: used up, said inside the frame.
    let again = site.submit(&confirm, &confirm, &[]);
    again.expect(404);
    assert_framed(&again, "Harbour Notes");
    assert!(again.body.contains("This link has expired"));

    // The welcome mail's unsubscribe link: the page, the answer and a way to come back.
    let welcome = app.smtp.wait_for_message_to(&reader, 2);
    let unsubscribe = welcome
        .header("List-Unsubscribe")
        .expect("List-Unsubscribe");
    let leave = path_of(unsubscribe.trim_start_matches('<').trim_end_matches('>'));
    let page = site.get(&leave);
    page.expect(200);
    assert_framed(&page, "Harbour Notes");
    assert_way_back(&page, "Harbour Notes");
    let left = site.post_form(&leave, &[]);
    left.expect(200);
    assert_framed(&left, "Harbour Notes");
    assert!(left.body.contains("<h1>You are unsubscribed</h1>"));
    let status = |app: &App| -> String {
        app.db()
            .query_row(
                "SELECT status FROM subscribers WHERE email = ?1",
                [&reader],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(status(&app), "unsubscribed");
    let resubscribe = format!("{leave}/resubscribe");
    assert!(
        left.body.contains(&format!("action=\"{resubscribe}\"")),
        "{}",
        left.body
    );

    // Without the site's token (a form on another site, or no cookie): refused, nothing changes.
    let stranger = app.site_client(&owner.subdomain);
    let forged = stranger.post_form(&resubscribe, &[("authenticity_token", "forged")]);
    forged.expect(403);
    assert_framed(&forged, "Harbour Notes");
    assert_eq!(status(&app), "unsubscribed");
    // With a forged signature: not found.
    let token = left.csrf_token();
    let other = if leave.ends_with('0') { '1' } else { '0' };
    let bad = format!("{}{other}/resubscribe", &leave[..leave.len() - 1]);
    site.post_form(&bad, &[("authenticity_token", &token)])
        .expect(404);
    assert_eq!(status(&app), "unsubscribed");

    let back = site.post_form(&resubscribe, &[("authenticity_token", &token)]);
    back.expect(200);
    assert!(
        back.body.contains("<h1>You are subscribed again</h1>"),
        "{}",
        back.body
    );
    assert_framed(&back, "Harbour Notes");
    assert_eq!(status(&app), "active");
    let list = owner.get("/subscribers?status=active").json();
    assert_eq!(list["subscribers"][0]["email"], reader.as_str());
    // Pressed twice: still subscribed, nothing else changes.
    site.post_form(&resubscribe, &[("authenticity_token", &token)])
        .expect(200);
    assert_eq!(status(&app), "active");

    // A bounced address stays out, and the page says why.
    let writer = rusqlite::Connection::open(app.data_dir().join("broadsheet.db")).unwrap();
    writer
        .busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    writer
        .execute(
            "UPDATE subscribers SET status = 'bounced' WHERE email = ?1",
            [&reader],
        )
        .unwrap();
    let bounced = site.post_form(&resubscribe, &[("authenticity_token", &token)]);
    bounced.expect(200);
    assert!(
        bounced.body.contains("cannot be subscribed again"),
        "{}",
        bounced.body
    );
    assert_eq!(status(&app), "bounced");

    // A cancelled newsletter takes no one back: refused inside its frame, nothing changes.
    writer
        .execute(
            "UPDATE subscribers SET status = 'unsubscribed' WHERE email = ?1",
            [&reader],
        )
        .unwrap();
    let (code, out, err) = app.cli(&["status", &owner.subdomain, "cancelled"]);
    assert_eq!(code, 0, "{out}{err}");
    let cancelled = site.post_form(&resubscribe, &[("authenticity_token", &token)]);
    cancelled.expect(403);
    assert_framed(&cancelled, "Harbour Notes");
    assert!(
        cancelled.body.contains("no longer takes new subscribers"),
        "{}",
        cancelled.body
    );
    assert_eq!(status(&app), "unsubscribed");

    // Any other refusal of the site is a page of the site too.
    let missing = site.get("/no-such-page");
    missing.expect(404);
    assert_framed(&missing, "Harbour Notes");
    assert_way_back(&missing, "Harbour Notes");
    assert!(missing.body.contains("<h1>Not found</h1>"));
    // A host that is no newsletter's site has no frame to give.
    let nowhere = app.site_client("no-such-newsletter").get("/");
    nowhere.expect(404);
    assert!(!nowhere.body.contains("<header class=\"site\">"));
}

/// Every page of a site at desktop and phone width, light and dark: the scheme applied, no
/// sideways scroll, no axe violation, a screenshot each.
#[test]
#[cfg_attr(
    not(all(has_chromium, has_axe)),
    ignore = "needs chromium, chromedriver and axe-core (apt-get install chromium chromium-driver; npm install --prefix target/npm axe-core@4)"
)]
fn every_site_page_fits_phones_and_desktops_light_and_dark_and_passes_axe() {
    let Some(driver) = Driver::start("site pages") else {
        return;
    };
    let Some(axe) = Axe::load("site pages") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard(&app, "Evening Ledger");
    let image_url = uploaded_url(&owner, &encoded(&picture(640, 360), ImageFormat::Png));
    owner
        .patch(
            "/newsletter",
            &json!({"accent_color": "#b45309", "author_name": "Ada Whitlock-Featherstonehaugh",
                "author_image_url": path_of(&image_url),
                "about_markdown": "The Evening Ledger is a letter about **the day's accounts**, written \
                    after dark.\n\n> A quotation stands apart.\n\n| Month | Letters |\n|---|---|\n| May | 4 |"}),
        )
        .expect(200);
    let (_, issue) = publish(
        &owner,
        "What we learned this week",
        &format!(
            "# What we learned this week\n\nA long paragraph that wraps on a phone, with a \
             verylongwordthatshouldwrapratherthanpushthepagesidewaysonanarrowscreen and \
             [a link](https://example.com/).\n\n![The harbour]({image_url})\n\n## Next\n\n- one\n- two"
        ),
    );
    publish(&owner, "The second issue", "Short and sweet.");
    // A reader with a welcome mail, for the unsubscribe link.
    let site = app.site_client(&owner.subdomain);
    let reader = unique_email("browser-reader");
    site.submit("/subscribe", "/subscribe", &[("email", &reader)])
        .expect(200);
    let mail = app.smtp.wait_for_message_to(&reader, 1);
    let confirm = path_of(&link_containing(&mail.text(), "/subscribe/confirm/").unwrap());
    site.submit(&confirm, &confirm, &[]).expect(200);
    let welcome = app.smtp.wait_for_message_to(&reader, 2);
    let leave = path_of(
        welcome
            .header("List-Unsubscribe")
            .unwrap()
            .trim_start_matches('<')
            .trim_end_matches('>'),
    );
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);

    let found = runtime().block_on(async {
        let c = driver.session().await;
        let mut found = Vec::new();
        for (scheme, background) in [("light", "rgb(251, 250, 247)"), ("dark", "rgb(18, 20, 25)")] {
            let media = json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]});
            driver.cdp(&c, "Emulation.setEmulatedMedia", media).await;
            for (width, height, mobile) in [(1280, 900, false), (390, 844, true)] {
                let metrics = json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile});
                driver.cdp(&c, "Emulation.setDeviceMetricsOverride", metrics).await;
                let mut pages: Vec<(String, String)> = [
                    ("home", "/"),
                    ("issue", issue.as_str()),
                    ("archive", "/archive"),
                    ("about", "/about"),
                    ("subscribe", "/subscribe"),
                    ("confirm", "/subscribe/confirm/some-token"),
                    ("unsubscribe", leave.as_str()),
                    ("not-found", "/no-such-page"),
                ]
                .iter()
                .map(|(name, path)| (name.to_string(), format!("{origin}{path}")))
                .collect();
                // The answers of forms: reached by pressing their buttons.
                pages.push(("unsubscribed".into(), String::new()));
                pages.push(("subscribed-again".into(), String::new()));
                for (name, url) in pages {
                    match name.as_str() {
                        "unsubscribed" => {
                            c.goto(&format!("{origin}{leave}")).await.unwrap();
                            click(&c, "section.answer form button[type=submit]").await;
                            wait_for_element(&c, "form[action$=\"/resubscribe\"]").await;
                        }
                        "subscribed-again" => {
                            click(&c, "form[action$=\"/resubscribe\"] button").await;
                            wait_for_element(&c, "section.answer p strong").await;
                        }
                        _ => {
                            c.goto(&url).await.unwrap();
                            wait_for_element(&c, "footer.site").await;
                        }
                    }
                    let label = format!("{name} ({scheme}, {width} px)");
                    let seen = c
                        .execute("return getComputedStyle(document.body).backgroundColor", vec![])
                        .await
                        .unwrap();
                    assert_eq!(seen, json!(background), "{label}");
                    assert_fits(&c, width, &label).await;
                    // Headings are one family: the serif of the type scale.
                    let families = c
                        .execute(
                            "return [...new Set([...document.querySelectorAll('main h1, main h2, main h3')]\
                             .map(h => getComputedStyle(h).fontFamily))]",
                            vec![],
                        )
                        .await
                        .unwrap();
                    assert!(
                        families.as_array().unwrap().len() <= 1,
                        "{label}: headings in {families}"
                    );
                    found.extend(axe.violations(&c, &label).await);
                    screenshot(&c, &format!("site-page-{name}-{scheme}-{width}")).await;
                }
            }
        }
        let errors = driver.console_errors(&c).await;
        // The not-found page is answered with a 404, which Chromium logs as a failed load.
        let unexpected: Vec<&String> = errors
            .iter()
            .filter(|e| !e.contains("404"))
            .collect();
        assert!(unexpected.is_empty(), "console: {errors:?}");
        c.close().await.unwrap();
        found
    });
    assert!(found.is_empty(), "axe found:\n{}", found.join("\n"));
}
