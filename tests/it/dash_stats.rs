//! The dashboard's stats page: the API's figures from real sends, opens and clicks, the SVG
//! charts' marks matching the data, empty states, other users' 404, and a look in Chromium.

use std::time::Duration;

use crate::support::browser::{Driver, runtime, screenshot, sign_in, wait_for_element};
use crate::support::http::{attribute_after, unescape};
use crate::support::*;

/// Adds a subscriber through the API; returns its id.
pub(crate) fn add_subscriber(owner: &Owner, email: &str) -> i64 {
    let resp = owner.post("/subscribers", &json!({ "email": email }));
    resp.expect(201);
    resp.json()["id"].as_i64().expect("subscriber id")
}

/// Creates an approved issue with a link, sends it and waits until it is sent.
pub(crate) fn send_issue(owner: &Owner, subject: &str) -> i64 {
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "status": "approved",
            "content_markdown": "Read the [guide](https://example.org/guide)."}}),
    );
    resp.expect(201);
    let id = resp.json()["id"].as_i64().unwrap();
    owner
        .post(&format!("/issues/{id}/send_now"), &json!({}))
        .expect(200);
    wait_for(&format!("issue {id} sent"), Duration::from_secs(30), || {
        (owner.get(&format!("/issues/{id}")).json()["status"] == "sent").then_some(())
    });
    id
}

/// Every `attr="..."` value in `html`, unescaped.
fn attribute_values(html: &str, attr: &str) -> Vec<String> {
    let mark = format!("{attr}=\"");
    html.match_indices(&mark)
        .filter_map(|(at, _)| {
            let rest = &html[at + mark.len()..];
            rest.find('"').map(|end| unescape(&rest[..end]))
        })
        .collect()
}

/// Opens the pixel and/or follows the guide link of the issue `subject` mailed to `email`.
fn engage(app: &App, owner: &Owner, email: &str, subject: &str, open: bool, follow: bool) {
    let mail = app
        .smtp
        .messages_to(email)
        .into_iter()
        .find(|m| m.parsed().subject() == Some(subject))
        .unwrap_or_else(|| panic!("no {subject:?} for {email}"));
    let html = mail.html();
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);
    let site = app.site_client(&owner.subdomain);
    if open {
        let pixel = attribute_values(&html, "src")
            .into_iter()
            .find(|s| s.starts_with(&format!("{origin}/o/")))
            .expect("open pixel");
        site.get(pixel.strip_prefix(&origin).unwrap()).expect(200);
    }
    if follow {
        let link = attribute_values(&html, "href")
            .into_iter()
            .find(|h| h.starts_with(&format!("{origin}/c/")) && h.contains("guide"))
            .expect("tracked link");
        assert_eq!(site.get(link.strip_prefix(&origin).unwrap()).status, 302);
    }
}

/// A paid newsletter with 5 subscribers (3 active, 1 unsubscribed, 1 bounced) and two sent
/// issues: the first opened by two of three and clicked by one, the second untouched.
fn measured_newsletter(app: &App) -> (Owner, i64, i64) {
    let owner = onboard_paid(app, "Measured Weekly");
    let emails: Vec<String> = (0..5).map(|_| unique_email("measured")).collect();
    let ids: Vec<i64> = emails.iter().map(|e| add_subscriber(&owner, e)).collect();
    owner
        .patch(
            &format!("/subscribers/{}", ids[3]),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    owner
        .post(
            "/bounces",
            &json!({"email": emails[4], "reason": "550 gone"}),
        )
        .expect(200);
    let first = send_issue(&owner, "First measured issue");
    engage(app, &owner, &emails[0], "First measured issue", true, true);
    engage(app, &owner, &emails[1], "First measured issue", true, false);
    let second = send_issue(&owner, "Second measured issue");
    (owner, first, second)
}

/// The `data-value` of the figure named `path` on the page.
fn page_figure(html: &str, path: &str) -> f64 {
    attribute_after(html, &format!("data-stat=\"{path}\""), "data-value")
        .unwrap_or_else(|| panic!("no figure {path} on the page"))
        .parse()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The element whose start tag contains `marker`, up to its closing `end`.
fn element<'a>(html: &'a str, marker: &str, end: &str) -> &'a str {
    let at = html
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in the page"));
    let start = if marker.starts_with('<') {
        at
    } else {
        html[..at].rfind('<').expect("a start tag")
    };
    let stop = start + html[start..].find(end).expect("closing tag") + end.len();
    &html[start..stop]
}

/// `(data-label, data-value)` of every circle in `svg`.
fn points(svg: &str) -> Vec<(String, String)> {
    svg.match_indices("<circle ")
        .map(|(at, _)| {
            let tag = &svg[at..=at + svg[at..].find('>').unwrap()];
            (
                attribute_after(tag, " cx=", "data-label").unwrap(),
                attribute_after(tag, " cx=", "data-value").unwrap(),
            )
        })
        .collect()
}

/// The `data-value` of the bar of `series` in the group of issue `id`.
fn bar(html: &str, id: i64, series: &str) -> String {
    let group = element(html, &format!("data-key=\"{id}\""), "</g>");
    attribute_after(group, &format!("data-series=\"{series}\""), "data-value")
        .unwrap_or_else(|| panic!("no {series} bar for issue {id}"))
}

#[test]
fn dash_stats_page_shows_the_api_figures_and_charts_of_the_data() {
    let app = spawn_app();
    let (owner, first, second) = measured_newsletter(&app);
    let api = owner.get("/newsletter/stats");
    api.expect(200);
    let api = api.json()["data"].clone();
    // The data is what the setup made, so the comparison below is not between two zeros.
    assert_eq!(api["subscribers"]["active"], 3);
    assert_eq!(api["engagement"]["average_open_rate"], 33.3);

    let page = owner
        .client
        .get(&format!("/newsletters/{}/stats", owner.newsletter_id));
    page.expect(200);
    let html = &page.body;
    assert!(
        html.contains("aria-current=\"page\">Stats<"),
        "the Stats section is current"
    );
    for path in [
        "subscribers.total",
        "subscribers.active",
        "subscribers.unsubscribed",
        "subscribers.bounced",
        "subscribers.growth_last_30_days",
        "issues.total",
        "issues.sent_last_30_days",
        "engagement.average_open_rate",
        "engagement.average_click_rate",
        "engagement.last_30_days.emails_sent",
        "engagement.last_30_days.opens",
        "engagement.last_30_days.clicks",
    ] {
        let expected = path
            .split('.')
            .fold(&api, |v, key| &v[key])
            .as_f64()
            .unwrap_or_else(|| panic!("API has no number at {path}"));
        assert_eq!(page_figure(html, path), expected, "{path}");
    }
    // Top issues: the API's list, in its order.
    let top_ids: Vec<i64> = api["top_issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    let table = element(html, "id=\"top-issues\"", "</table>");
    let shown: Vec<i64> = attribute_values(table, "data-issue")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(shown, top_ids);

    // Growth: 90 daily points, the last one today's active count; everyone joined today.
    let growth = element(html, "data-chart=\"line\"", "</svg>");
    assert!(
        growth.contains("role=\"img\"") && growth.contains("<title id=\"growth-chart-title\">")
    );
    assert!(growth.contains("<desc id=\"growth-chart-desc\">"));
    let series = points(growth);
    assert_eq!(series.len(), 90);
    assert_eq!(series.last().unwrap().1, "3");
    assert!(series[..89].iter().all(|(_, v)| v == "0"), "{series:?}");
    let figures = element(html, "id=\"growth-figures\"", "</table>");
    let newest = attribute_after(figures, "data-day=", "data-day").unwrap();
    assert_eq!(
        newest,
        series.last().unwrap().0,
        "the table starts with today"
    );
    assert!(figures.contains(&format!("<td>{newest}</td><td>3</td>")));

    // Opens and clicks per issue: bars with the API's rates, newest issue first.
    let bars = element(html, "data-chart=\"bars\"", "</svg>");
    assert!(bars.contains("role=\"img\"") && bars.contains("<desc id=\"engagement-chart-desc\">"));
    assert!(
        bars.find(&format!("data-key=\"{second}\"")) < bars.find(&format!("data-key=\"{first}\""))
    );
    for t in api["top_issues"].as_array().unwrap() {
        let id = t["id"].as_i64().unwrap();
        let rate = |key: &str| format!("{:.1}%", t[key].as_f64().unwrap());
        assert_eq!(bar(bars, id, "Opens"), rate("open_rate"), "issue {id}");
        assert_eq!(bar(bars, id, "Clicks"), rate("click_rate"), "issue {id}");
    }
    assert_eq!(bar(bars, first, "Opens"), "66.7%");
    assert_eq!(bar(bars, first, "Clicks"), "33.3%");
    assert_eq!(bar(bars, second, "Opens"), "0.0%");
    let row = element(html, &format!("<tr data-issue=\"{first}\">"), "</tr>");
    assert!(
        row.contains("<td>3</td><td>2</td>"),
        "3 delivered, 2 opened: {row}"
    );
    assert!(!html.contains("No sent issues yet"));
}

#[test]
fn dash_stats_empty_newsletter_shows_empty_states_and_stays_private() {
    let app = spawn_app();
    let owner = onboard(&app, "Quiet Quarterly");
    let url = format!("/newsletters/{}/stats", owner.newsletter_id);
    let page = owner.client.get(&url);
    page.expect(200);
    assert!(page.body.contains("No sent issues yet"));
    assert!(page.body.contains("No subscribers yet"));
    assert!(!page.body.contains("data-chart="), "no chart without data");
    for path in [
        "subscribers.total",
        "issues.total",
        "engagement.average_open_rate",
    ] {
        assert_eq!(page_figure(&page.body, path), 0.0, "{path}");
    }
    // A draft issue is not a sent one.
    owner
        .post("/issues", &json!({"issue": {"subject": "Draft only"}}))
        .expect(201);
    let page = owner.client.get(&url);
    assert_eq!(page_figure(&page.body, "issues.total"), 1.0);
    assert!(page.body.contains("No sent issues yet"));

    // Someone else, or nobody, sees nothing.
    let other = onboard(&app, "Nosy News");
    other.client.get(&url).expect(404);
    other.client.get("/newsletters/999999/stats").expect(404);
    other.client.get("/newsletters/abc/stats").expect(404);
    assert_eq!(app.client().get(&url).redirect(), "/session/new");
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn dash_stats_in_chromium_draws_both_charts_without_console_errors() {
    let Some(driver) = Driver::start("dashboard stats") else {
        return;
    };
    let app = spawn_app();
    let (owner, first, _) = measured_newsletter(&app);
    let base = app.base_url.clone();
    runtime().block_on(async {
        let c = driver.session().await;
        sign_in(&c, &base, &owner.email).await;

        // Tall enough for the whole page in the screenshot.
        c.set_window_size(1280, 2000).await.unwrap();
        c.goto(&format!("{base}/newsletters/{}/stats", owner.newsletter_id))
            .await
            .unwrap();
        let line = wait_for_element(&c, "svg[data-chart=line]").await;
        let rect = line.rectangle().await.unwrap();
        assert!(rect.2 > 300.0, "the chart fills its container: {rect:?}");
        let bar = wait_for_element(
            &c,
            &format!("svg[data-chart=bars] g[data-key=\"{first}\"] rect[data-series=Opens]"),
        )
        .await;
        let (_, _, width, height) = bar.rectangle().await.unwrap();
        assert!(
            width > 1.0 && height > 1.0,
            "the bar is drawn: {width}x{height}"
        );
        screenshot(&c, "dashboard-stats").await;
        // A phone: the charts shrink with the page and no horizontal scrolling is needed.
        c.set_window_size(390, 2000).await.unwrap();
        c.goto(&format!("{base}/newsletters/{}/stats", owner.newsletter_id))
            .await
            .unwrap();
        let line = wait_for_element(&c, "svg[data-chart=line]").await;
        let (_, _, width, _) = line.rectangle().await.unwrap();
        let viewport = c
            .execute("return document.documentElement.clientWidth", vec![])
            .await
            .unwrap();
        assert!(
            width <= viewport.as_f64().unwrap(),
            "{width} wider than the phone"
        );
        let scroll = c
            .execute("return document.documentElement.scrollWidth", vec![])
            .await
            .unwrap();
        assert!(scroll.as_f64().unwrap() <= viewport.as_f64().unwrap() + 1.0);
        screenshot(&c, "dashboard-stats-phone").await;
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console errors: {errors:?}");
        c.close().await.unwrap();
    });
}
