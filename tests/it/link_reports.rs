//! Issue reports through the real binary and the real SMTP sink: an issue with several links
//! sent to a few subscribers, tracked links followed (some twice, from different people) and
//! open pixels fetched on different days of the moved clock, then `GET /issues/{id}/stats`
//! and the dashboard's report page must show exactly those figures; another account's issue
//! is 404; the subscriber page lists the issues received, opened and clicked; tag counts
//! count active subscribers only; and the stats and report pages in Chromium at 1280 and
//! 390 px (no sideways scroll, the axis name clear of the figures, axe clean).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::dash_stats::add_subscriber;
use crate::support::axe::Axe;
use crate::support::browser::{Driver, runtime, screenshot, sign_in, wait_for_element};
use crate::support::http::{attribute_after, unescape};
use crate::support::*;

const LINK_A: &str = "https://example.org/a";
const LINK_B: &str = "https://example.org/b";
const LINK_C: &str = "https://example.org/c";

/// Creates an approved issue linking to A, B and C (and `audience`, when given), sends it
/// and waits until it is sent; returns its id.
fn send_linked_issue(owner: &Owner, subject: &str) -> i64 {
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "status": "approved",
            "content_markdown": format!("Read [the first]({LINK_A}), [the second]({LINK_B}) and [the third]({LINK_C}).")}}),
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

/// What one reader does with the issue `subject` mailed to them: fetch its open pixel, or
/// follow its tracked link to a target.
struct Reader<'a> {
    app: &'a App,
    owner: &'a Owner,
    html: String,
}

impl<'a> Reader<'a> {
    fn of(app: &'a App, owner: &'a Owner, email: &str, subject: &str) -> Self {
        let mail = app
            .smtp
            .messages_to(email)
            .into_iter()
            .find(|m| m.parsed().subject() == Some(subject))
            .unwrap_or_else(|| panic!("no {subject:?} for {email}"));
        Reader {
            app,
            owner,
            html: mail.html(),
        }
    }

    fn origin(&self) -> String {
        format!("http://{}.{}", self.owner.subdomain, self.app.public_host)
    }

    fn open(&self) {
        let origin = self.origin();
        let pixel = attribute_values(&self.html, "src")
            .into_iter()
            .find(|s| s.starts_with(&format!("{origin}/o/")))
            .expect("open pixel");
        let site = self.app.site_client(&self.owner.subdomain);
        site.get(pixel.strip_prefix(&origin).unwrap()).expect(200);
    }

    fn follow(&self, target: &str) {
        let origin = self.origin();
        let encoded: String = url::form_urlencoded::byte_serialize(target.as_bytes()).collect();
        let link = attribute_values(&self.html, "href")
            .into_iter()
            .find(|h| {
                h.starts_with(&format!("{origin}/c/")) && h.contains(&format!("u={encoded}&"))
            })
            .unwrap_or_else(|| panic!("no tracked link to {target} in {}", self.html));
        let resp = self
            .app
            .site_client(&self.owner.subdomain)
            .get(link.strip_prefix(&origin).unwrap());
        assert_eq!(resp.status, 302);
        assert_eq!(resp.header("location"), Some(target));
    }
}

/// The rows of the table `#id` on a page, each as its `data-*` attributes.
fn rows(html: &str, id: &str) -> Vec<BTreeMap<String, String>> {
    let start = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} on the page"));
    let table = &html[start..start + html[start..].find("</table>").unwrap()];
    table
        .split("<tr ")
        .skip(1)
        .map(|row| {
            let tag = &row[..row.find('>').unwrap()];
            tag.split("\" ")
                .filter_map(|pair| pair.split_once("=\""))
                .map(|(k, v)| {
                    (
                        k.trim().trim_start_matches("data-").to_string(),
                        unescape(v.trim_end_matches('"')),
                    )
                })
                .collect()
        })
        .collect()
}

/// A paid newsletter with three readers and one sent issue linking to A, B and C, engaged on
/// days 1, 2 and 5 after the send and once after the week; returns the owner, the readers'
/// addresses and subscriber ids, and the issue.
fn engaged_issue(app: &App) -> (Owner, Vec<(String, i64)>, i64) {
    let owner = onboard_paid(app, "Linked Letter");
    let readers: Vec<(String, i64)> = (0..3)
        .map(|_| {
            let email = unique_email("linked");
            let id = add_subscriber(&owner, &email);
            (email, id)
        })
        .collect();
    let subject = "Three links";
    let issue = send_linked_issue(&owner, subject);
    let [r0, r1, r2] = [0, 1, 2].map(|i| Reader::of(app, &owner, &readers[i].0, subject));
    // Day 1: r0 opens and follows A twice; r1 follows A (a click without the pixel is an open).
    r0.open();
    r0.follow(LINK_A);
    r0.follow(LINK_A);
    r1.follow(LINK_A);
    // Day 2: r1 follows B (not a first click), r2 opens, r0 follows B.
    app.advance_clock(Duration::from_secs(25 * 3600));
    r1.follow(LINK_B);
    r2.open();
    r0.follow(LINK_B);
    // Day 5: r2 follows A, its first click.
    app.advance_clock(Duration::from_secs(3 * 24 * 3600));
    r2.follow(LINK_A);
    // After the week: r1 follows C, counted for the link only.
    app.advance_clock(Duration::from_secs(8 * 24 * 3600));
    r1.follow(LINK_C);
    (owner, readers, issue)
}

/// The figures `engaged_issue` made: (url, unique, total) per link, most clicked first, and
/// (day, opens, unique clicks, all clicks) per day.
const LINKS: [(&str, i64, i64); 3] = [(LINK_A, 3, 4), (LINK_B, 2, 2), (LINK_C, 1, 1)];
const DAYS: [(i64, i64, i64, i64); 7] = [
    (1, 2, 2, 3),
    (2, 1, 0, 2),
    (3, 0, 0, 0),
    (4, 0, 0, 0),
    (5, 0, 1, 1),
    (6, 0, 0, 0),
    (7, 0, 0, 0),
];

#[test]
fn link_reports_api_and_dashboard_show_each_link_and_day_exactly() {
    let app = spawn_app();
    let (owner, readers, issue) = engaged_issue(&app);

    let stats = owner.get(&format!("/issues/{issue}/stats"));
    stats.expect(200);
    let data = &stats.json()["data"];
    assert_eq!(data["issue_id"], issue);
    assert_eq!(data["subject"], "Three links");
    assert_eq!(
        (
            &data["delivered"],
            &data["opens"],
            &data["clicks"],
            &data["open_rate"],
            &data["click_rate"]
        ),
        (
            &json!(3),
            &json!(3),
            &json!(3),
            &json!(100.0),
            &json!(100.0)
        )
    );
    let links: Vec<(String, i64, i64)> = data["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["url"].as_str().unwrap().to_string(),
                l["unique_clicks"].as_i64().unwrap(),
                l["total_clicks"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected_links: Vec<(String, i64, i64)> = LINKS
        .iter()
        .map(|(u, a, b)| (u.to_string(), *a, *b))
        .collect();
    assert_eq!(links, expected_links);
    assert_eq!(data["links_clicked"], 3);
    let days: Vec<(i64, i64, i64, i64)> = data["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["day"].as_i64().unwrap(),
                d["opens"].as_i64().unwrap(),
                d["unique_clicks"].as_i64().unwrap(),
                d["total_clicks"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(days, DAYS);

    // The dashboard's report page shows the same figures, reached from the issue page.
    let nid = owner.newsletter_id;
    let issue_page = owner
        .client
        .get(&format!("/newsletters/{nid}/issues/{issue}"));
    issue_page.expect(200);
    let report_path = format!("/newsletters/{nid}/issues/{issue}/report");
    assert!(issue_page.body.contains(&format!("href=\"{report_path}\"")));
    let page = owner.client.get(&report_path);
    page.expect(200);
    let shown_links: Vec<(String, i64, i64)> = rows(&page.body, "link-figures")
        .iter()
        .map(|r| {
            (
                r["url"].clone(),
                r["unique-clicks"].parse().unwrap(),
                r["total-clicks"].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(shown_links, expected_links);
    let shown_days: Vec<(i64, i64, i64, i64)> = rows(&page.body, "week-figures")
        .iter()
        .map(|r| {
            (
                r["day"].parse().unwrap(),
                r["opens"].parse().unwrap(),
                r["unique-clicks"].parse().unwrap(),
                r["total-clicks"].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(shown_days, DAYS);
    for (path, value) in [("delivered", "3"), ("opens", "3"), ("clicks", "3")] {
        assert_eq!(
            attribute_after(&page.body, &format!("data-stat=\"{path}\""), "data-value").as_deref(),
            Some(value),
            "{path}"
        );
    }
    // The chart draws one bar per series and day, with the day's figures.
    assert!(page.body.contains("data-chart=\"bars\""));
    assert!(
        page.body
            .contains("data-series=\"First opens\" data-value=\"2\"")
    );

    // The counters equal a recount of what the test did, in the database itself.
    let db = app.db();
    let total_clicks: i64 = db
        .query_row(
            "SELECT sum(clicks) FROM issue_links WHERE issue_id = ?1",
            [issue],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(total_clicks, 7, "seven links followed");

    // Another account: the API and the dashboard answer 404 and show nothing.
    let other = onboard(&app, "Other Letter");
    assert_eq!(
        other.get(&format!("/issues/{issue}/stats")).error_code(404),
        "not_found"
    );
    assert_eq!(owner.get("/issues/abc/stats").status, 404);
    assert_eq!(owner.get("/issues/999999/stats").status, 404);
    let theirs = other.client.get(&report_path);
    assert_eq!(theirs.status, 404);
    assert!(!theirs.body.contains(LINK_A));
    let own_path = format!("/newsletters/{}/issues/{issue}/report", other.newsletter_id);
    assert_eq!(other.client.get(&own_path).status, 404);

    // The subscriber page: a second issue, unopened, lists first; the first opened and clicked.
    let second = send_linked_issue(&owner, "Unread second");
    let (email0, id0) = &readers[0];
    let page = owner
        .client
        .get(&format!("/newsletters/{nid}/subscribers/{id0}"));
    page.expect(200);
    let received = rows(&page.body, "received");
    let listed: Vec<(i64, &str, &str)> = received
        .iter()
        .map(|r| {
            (
                r["issue"].parse().unwrap(),
                r["opened"].as_str(),
                r["clicked"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [(second, "false", "false"), (issue, "true", "true")],
        "{email0}"
    );
    assert!(page.body.contains("Unread second") && page.body.contains("Three links"));
    // r2 opened on day 2 and clicked on day 5: both shown.
    let page = owner
        .client
        .get(&format!("/newsletters/{nid}/subscribers/{}", readers[2].1));
    let received = rows(&page.body, "received");
    assert_eq!(received[1]["opened"], "true");
    assert_eq!(received[1]["clicked"], "true");
    // A bad page cursor is 404, another account's subscriber too.
    assert_eq!(
        owner
            .client
            .get(&format!("/newsletters/{nid}/subscribers/{id0}?before=x"))
            .status,
        404
    );
    assert_eq!(
        other
            .client
            .get(&format!("/newsletters/{nid}/subscribers/{id0}"))
            .status,
        404
    );
}

#[test]
fn link_reports_subscriber_page_pages_received_issues_newest_first() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Paged Letter");
    let email = unique_email("paged");
    let sid = add_subscriber(&owner, &email);
    let nid = owner.newsletter_id;
    // 21 issues sent to them (a page holds 20).
    for n in 0..21 {
        let resp = owner.post(
            "/issues",
            &json!({"issue": {"subject": format!("Old issue {n}"), "status": "approved",
                "content_markdown": "Hello."}}),
        );
        resp.expect(201);
        let id = resp.json()["id"].as_i64().unwrap();
        owner
            .post(&format!("/issues/{id}/send_now"), &json!({}))
            .expect(200);
    }
    wait_for("21 issues sent", Duration::from_secs(60), || {
        (app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE subscriber_id = {sid} AND status = 'sent'"
        )) == 21)
            .then_some(())
    });
    let page = owner
        .client
        .get(&format!("/newsletters/{nid}/subscribers/{sid}"));
    page.expect(200);
    let first = rows(&page.body, "received");
    assert_eq!(first.len(), 20);
    assert!(page.body.contains(">Old issue 20<") && !page.body.contains(">Old issue 0<"));
    let older = attribute_after(&page.body, "rel=\"next\"", "href").expect("a link to older");
    let older = unescape(&older);
    let page = owner.client.get(older.split('#').next().unwrap());
    page.expect(200);
    let second = rows(&page.body, "received");
    assert_eq!(second.len(), 1);
    assert!(page.body.contains(">Old issue 0<") && !page.body.contains("rel=\"next\""));
}

#[test]
fn link_reports_tag_counts_count_active_subscribers_only() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Tagged Letter");
    let nid = owner.newsletter_id;
    let mut ids = Vec::new();
    for n in 0..5 {
        let resp = owner.post(
            "/subscribers",
            &json!({"email": format!("vip{n}-{}", unique_email("t")), "tags": ["vip"]}),
        );
        resp.expect(201);
        ids.push(resp.json()["id"].as_i64().unwrap());
    }
    owner
        .patch(
            &format!("/subscribers/{}", ids[3]),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    let bounced = owner.get(&format!("/subscribers/{}", ids[4])).json()["email"]
        .as_str()
        .unwrap()
        .to_string();
    owner
        .post("/bounces", &json!({"email": bounced, "reason": "550 gone"}))
        .expect(200);
    // Back again: an unsubscribed subscriber who returns counts again.
    owner
        .patch(
            &format!("/subscribers/{}", ids[2]),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    owner
        .patch(
            &format!("/subscribers/{}", ids[2]),
            &json!({"subscriber": {"status": "active"}}),
        )
        .expect(200);

    let list = owner.client.get(&format!("/newsletters/{nid}/subscribers"));
    list.expect(200);
    assert!(list.body.contains("vip (3 active)"), "{}", list.body);

    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": "For the few", "status": "approved",
            "content_markdown": "Hello.", "audience": {"tags": ["vip"]}}}),
    );
    resp.expect(201);
    let issue = resp.json()["id"].as_i64().unwrap();
    let send_page = owner
        .client
        .get(&format!("/newsletters/{nid}/issues/{issue}/send"));
    send_page.expect(200);
    assert!(send_page.body.contains("(3 active)"), "{}", send_page.body);
    assert_eq!(
        attribute_after(&send_page.body, "data-recipients=", "data-recipients").as_deref(),
        Some("3")
    );
    // What goes out is exactly that count.
    assert_eq!(send::send_now(&owner, issue), 3);
    wait_for("the tagged issue sent", Duration::from_secs(30), || {
        (owner.get(&format!("/issues/{issue}")).json()["status"] == "sent").then_some(())
    });
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {issue}"
        )),
        3
    );
}

/// Whether two client rectangles (x, y, width, height) overlap.
fn overlap(a: &[f64], b: &[f64]) -> bool {
    a[0] < b[0] + b[2] && b[0] < a[0] + a[2] && a[1] < b[1] + b[3] && b[1] < a[1] + a[3]
}

/// No sideways scroll, and no chart's axis name over any of its figures.
async fn assert_fits(c: &fantoccini::Client, page: &str) {
    let scroll = c
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth]",
            vec![],
        )
        .await
        .unwrap();
    let (scroll, inner) = (scroll[0].as_f64().unwrap(), scroll[1].as_f64().unwrap());
    assert!(scroll <= inner, "{page}: {scroll} wider than {inner}");
    let boxes = c
        .execute(
            "return [...document.querySelectorAll('svg.chart')].map(svg => {
                 const box = e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
                 return {
                     svg: box(svg),
                     labels: [...svg.querySelectorAll('.axis-label')].map(box),
                     ticks: [...svg.querySelectorAll('.tick, .figure')].map(box),
                 };
             })",
            vec![],
        )
        .await
        .unwrap();
    let charts = boxes.as_array().unwrap();
    assert!(!charts.is_empty(), "{page}: no chart");
    let nums = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    for chart in charts {
        let svg = nums(&chart["svg"]);
        assert!(
            svg[0] >= 0.0 && svg[0] + svg[2] <= inner,
            "{page}: chart {svg:?}"
        );
        for label in chart["labels"].as_array().unwrap() {
            let label = nums(label);
            for tick in chart["ticks"].as_array().unwrap() {
                let tick = nums(tick);
                assert!(
                    !overlap(&label, &tick),
                    "{page}: the axis name {label:?} overlaps a figure {tick:?}"
                );
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(all(has_chromium, has_axe)),
    ignore = "needs chromium, chromedriver and axe-core (apt-get install chromium chromium-driver; npm install --prefix target/npm axe-core@4)"
)]
fn link_reports_stats_report_and_subscriber_pages_fit_a_phone_and_pass_axe() {
    let Some(driver) = Driver::start("issue report pages") else {
        return;
    };
    let Some(axe) = Axe::load("issue report pages") else {
        return;
    };
    let app = spawn_app();
    let (owner, readers, issue) = engaged_issue(&app);
    let nid = owner.newsletter_id;
    let base = app.base_url.clone();
    let pages = [
        (
            "subscriber",
            format!("/newsletters/{nid}/subscribers/{}", readers[0].1),
            "#received",
        ),
        (
            "stats",
            format!("/newsletters/{nid}/stats"),
            "svg[data-chart=line]",
        ),
        (
            "issue report",
            format!("/newsletters/{nid}/issues/{issue}/report"),
            "svg[data-chart=bars]",
        ),
    ];
    let found = runtime().block_on(async {
        let c = driver.session().await;
        sign_in(&c, &base, &owner.email).await;
        let mut found = Vec::new();
        for scheme in ["light", "dark"] {
            let media = json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]});
            driver.cdp(&c, "Emulation.setEmulatedMedia", media).await;
            for (width, height) in [(1280, 900), (390, 844)] {
                c.set_window_size(width, height).await.unwrap();
                for (name, path, ready) in &pages {
                    c.goto(&format!("{base}{path}")).await.unwrap();
                    wait_for_element(&c, ready).await;
                    let page = format!("{name}, {scheme}, at {width} px");
                    if ready.starts_with("svg") {
                        assert_fits(&c, &page).await;
                    } else {
                        let overflow = c
                            .execute(
                                "return document.documentElement.scrollWidth > window.innerWidth",
                                vec![],
                            )
                            .await
                            .unwrap();
                        assert_eq!(overflow, json!(false), "{page} scrolls sideways");
                    }
                    found.extend(axe.violations(&c, &page).await);
                    let shot = format!("link-reports-{}-{scheme}-{width}", name.replace(' ', "-"));
                    let show = format!("document.querySelector('{ready}').scrollIntoView()");
                    c.execute(&show, vec![]).await.unwrap();
                    screenshot(&c, &shot).await;
                }
            }
        }
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console errors: {errors:?}");
        c.close().await.unwrap();
        found
    });
    assert!(found.is_empty(), "axe violations:\n{}", found.join("\n"));
}
