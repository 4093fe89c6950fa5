//! The counters behind the stats and the subscriber lists stay exact: thousands of
//! random changes through every door (API, dashboard forms, the public site's subscribe and
//! unsubscribe, tracking links, bounce reports, CSV import, sends to a real SMTP listener),
//! then every figure the service shows is compared with a full recount in plain SQL over the
//! test's own database.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::support::*;

const TAGS: [&str; 4] = ["vip", "early", "group-1", "group-2"];

/// Every figure the API and the dashboard show, next to the recount.
struct World<'a> {
    app: &'a App,
    owner: &'a Owner,
    rng: StdRng,
    /// The dashboard's CSRF token for the owner's session.
    token: String,
    site: Client,
    bounce_token: String,
    next_email: usize,
    /// Public subscriptions made (the site limits them per client and hour).
    public_subscribes: usize,
}

impl World<'_> {
    fn email(&mut self) -> String {
        self.next_email += 1;
        format!("r{}@example.net", self.next_email)
    }

    fn tags(&mut self) -> Vec<&'static str> {
        TAGS.iter()
            .copied()
            .filter(|_| self.rng.random_bool(0.35))
            .collect()
    }

    /// A subscriber of the newsletter, chosen at random: (id, email, status).
    fn anyone(&mut self) -> Option<(i64, String, String)> {
        let db = self.app.db();
        let count: i64 = db
            .query_row("SELECT count(*) FROM subscribers", [], |r| r.get(0))
            .unwrap();
        if count == 0 {
            return None;
        }
        let skip = self.rng.random_range(0..count);
        db.query_row(
            "SELECT id, email, status FROM subscribers ORDER BY id LIMIT 1 OFFSET ?1",
            [skip],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .ok()
    }

    fn dashboard(&self, path: &str, fields: &[(&str, &str)]) -> Resp {
        let mut all = vec![("authenticity_token", self.token.as_str())];
        all.extend_from_slice(fields);
        self.owner.client.post_form(path, &all)
    }

    fn subscribers_url(&self) -> String {
        format!("/newsletters/{}/subscribers", self.owner.newsletter_id)
    }

    /// One random change through one of the doors.
    fn change(&mut self) {
        let owner = self.owner;
        match self.rng.random_range(0..100) {
            0..=14 => {
                let (email, tags) = (self.email(), self.tags());
                owner
                    .post("/subscribers", &json!({"email": email, "tags": tags}))
                    .expect(201);
            }
            15..=19 => {
                let entries: Vec<Value> = (0..self.rng.random_range(2..12))
                    .map(|_| json!({"email": self.email(), "tags": self.tags()}))
                    .collect();
                owner
                    .post("/subscribers/bulk_create", &json!({"subscribers": entries}))
                    .expect(200);
            }
            20..=29 => {
                if let Some((id, _, _)) = self.anyone() {
                    let status = ["active", "unsubscribed"][self.rng.random_range(0..2)];
                    owner
                        .patch(
                            &format!("/subscribers/{id}"),
                            &json!({"subscriber": {"status": status}}),
                        )
                        .expect(200);
                }
            }
            30..=33 => {
                if let Some((id, _, _)) = self.anyone() {
                    owner.delete(&format!("/subscribers/{id}")).expect(204);
                }
            }
            34..=41 => {
                if let Some((id, _, _)) = self.anyone() {
                    let tag = TAGS[self.rng.random_range(0..TAGS.len())];
                    if self.rng.random_bool(0.5) {
                        owner
                            .post(
                                &format!("/subscribers/{id}/add_tag"),
                                &json!({ "tag": tag }),
                            )
                            .expect(200);
                    } else {
                        owner
                            .delete(&format!("/subscribers/{id}/remove_tag?tag={tag}"))
                            .expect(200);
                    }
                }
            }
            42..=47 => {
                let (email, tags) = (self.email(), self.tags().join(", "));
                let url = self.subscribers_url();
                let resp = self.dashboard(
                    &url,
                    &[
                        ("subscriber[email]", &email),
                        ("subscriber[name]", "Form Reader"),
                        ("subscriber[tags]", &tags),
                    ],
                );
                assert_eq!(resp.status, 303, "{}", resp.body);
            }
            48..=53 => {
                if let Some((id, _, _)) = self.anyone() {
                    let url = format!("{}/{id}", self.subscribers_url());
                    let to = if self.rng.random_bool(0.5) {
                        "active"
                    } else {
                        "unsubscribed"
                    };
                    let resp = self.dashboard(
                        &url,
                        &[
                            ("_method", "patch"),
                            ("subscriber[name]", "Edited"),
                            ("subscriber[status]", to),
                        ],
                    );
                    assert_eq!(resp.status, 303, "{}", resp.body);
                }
            }
            54..=57 => {
                if let Some((id, _, _)) = self.anyone() {
                    let url = format!("{}/{id}/tags", self.subscribers_url());
                    let tag = TAGS[self.rng.random_range(0..TAGS.len())];
                    let resp = if self.rng.random_bool(0.5) {
                        self.dashboard(&url, &[("tag", tag)])
                    } else {
                        self.dashboard(&url, &[("_method", "delete"), ("tag", tag)])
                    };
                    assert_eq!(resp.status, 303, "{}", resp.body);
                }
            }
            58..=59 => {
                if let Some((id, _, _)) = self.anyone() {
                    let url = format!("{}/{id}", self.subscribers_url());
                    let resp = self.dashboard(&url, &[("_method", "delete")]);
                    assert_eq!(resp.status, 303, "{}", resp.body);
                }
            }
            60..=61 if self.public_subscribes < 8 => self.subscribe_publicly(),
            62..=79 => self.follow_a_tracked_link(),
            80..=89 => {
                if let Some((_, email, _)) = self.anyone() {
                    let resp = self
                        .app
                        .client()
                        .request(
                            "POST",
                            &format!("/bounces/{}", self.bounce_token),
                            &[],
                            Some((
                                "application/json",
                                serde_json::to_vec(
                                    &json!({"email": email, "reason": "550 5.1.1 unknown"}),
                                )
                                .unwrap(),
                            )),
                        )
                        .unwrap();
                    resp.expect(200);
                }
            }
            _ => {
                // Reading pages changes nothing, but a deep page must answer within its
                // limits while the list changes.
                let page = self.rng.random_range(1..20);
                owner
                    .get(&format!("/subscribers?per_page=7&page={page}"))
                    .expect(200);
            }
        }
    }

    /// The public site's form, then the mailed confirmation link: an address new or one
    /// that left comes (back) in.
    fn subscribe_publicly(&mut self) {
        self.public_subscribes += 1;
        let email = match self.anyone() {
            // (Not an address the SMTP listener refuses: its confirmation would never come.)
            Some((_, email, status))
                if status == "unsubscribed"
                    && email.starts_with('r')
                    && self.rng.random_bool(0.5) =>
            {
                email
            }
            _ => self.email(),
        };
        let before = self.app.smtp.messages_to(&email).len();
        self.site
            .submit(
                "/subscribe",
                "/subscribe",
                &[("email", &email), ("name", "Site Reader")],
            )
            .expect(200);
        let mail = self.app.smtp.wait_for_message_to(&email, before + 1);
        let link =
            link_containing(&mail.text(), "/subscribe/confirm/").expect("a confirmation link");
        let path = format!("/{}", link.splitn(4, '/').nth(3).unwrap());
        self.site.submit(&path, &path, &[]).expect(200);
    }

    /// An open pixel, a tracked click or an unsubscribe link of a message received.
    fn follow_a_tracked_link(&mut self) {
        let messages = self.app.smtp.messages();
        let issues: Vec<_> = messages
            .iter()
            .filter(|m| m.html().contains("/o/"))
            .collect();
        if issues.is_empty() {
            return;
        }
        let html = issues[self.rng.random_range(0..issues.len())].html();
        let origin = format!("http://{}.{}", self.owner.subdomain, self.app.public_host);
        let links: Vec<String> = html
            .split('"')
            .filter(|part| part.starts_with(&origin))
            .map(|part| crate::support::http::unescape(&part[origin.len()..]))
            .collect();
        let pick = |kind: &str| links.iter().find(|l| l.starts_with(kind)).cloned();
        match self.rng.random_range(0..10) {
            0..=4 => {
                self.site.get(&pick("/o/").expect("open pixel")).expect(200);
            }
            5..=8 => {
                let resp = self.site.get(&pick("/c/").expect("tracked link"));
                assert_eq!(resp.status, 302, "{}", resp.body);
            }
            _ => {
                let path = pick("/u/").expect("unsubscribe link");
                self.site
                    .post_form(&path, &[("List-Unsubscribe", "One-Click")])
                    .expect(200);
            }
        }
    }
}

fn rate(part: i64, whole: i64) -> f64 {
    broadsheet::domain::reports::stats::rate(part, whole)
}

/// One row of integers from the test's database.
fn ints(db: &rusqlite::Connection, sql: &str) -> Vec<i64> {
    let mut stmt = db.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let n = stmt.column_count();
    stmt.query_row([], |r| (0..n).map(|i| r.get(i)).collect())
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The ids a list filter holds, newest first, recounted.
fn listed_ids(db: &rusqlite::Connection, status: Option<&str>, tag: Option<&str>) -> Vec<i64> {
    db.prepare(
        "SELECT s.id FROM subscribers s WHERE (?1 IS NULL OR s.status = ?1)
         AND (?2 IS NULL OR EXISTS (SELECT 1 FROM subscriber_tags t WHERE t.subscriber_id = s.id AND t.tag = ?2))
         ORDER BY s.id DESC",
    )
    .unwrap()
    .query_map((status, tag), |r| r.get(0))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn today(db: &rusqlite::Connection) -> String {
    db.query_row("SELECT date('now')", [], |r| r.get(0))
        .unwrap()
}

fn ids(page: &Value) -> Vec<i64> {
    page["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_i64().unwrap())
        .collect()
}

/// Every figure of the stats, the newsletter, each issue and the subscriber lists against a
/// recount from the rows.
/// `first_day`: the UTC day the test began; when it still is, every earlier day of the growth
/// chart is 0.
fn assert_every_figure_matches_a_recount(
    app: &App,
    owner: &Owner,
    issue_ids: &[i64],
    first_day: &str,
) {
    let db = app.db();
    let since = "date('now', '-29 days')";
    let subscribers = ints(
        &db,
        &format!(
            "SELECT count(*), coalesce(sum(status = 'active'), 0), coalesce(sum(status = 'unsubscribed'), 0),
                    coalesce(sum(status = 'bounced'), 0),
                    coalesce(sum(created_at >= {since}), 0) - coalesce(sum(unsubscribed_at >= {since}), 0)
             FROM subscribers"
        ),
    );
    let by_source = ints(
        &db,
        "SELECT coalesce(sum(source = 'form'), 0), coalesce(sum(source = 'import'), 0),
                coalesce(sum(source = 'api'), 0), coalesce(sum(source = 'dashboard'), 0)
         FROM subscribers WHERE created_at >= date('now', '-29 days')",
    );
    let issues = ints(
        &db,
        &format!(
            "SELECT count(*), coalesce(sum(status = 'sent' AND sent_at >= {since}), 0) FROM issues"
        ),
    );
    let engagement = ints(
        &db,
        &format!(
            "SELECT coalesce(sum(status = 'sent'), 0), coalesce(sum(status = 'sent' AND opened_at IS NOT NULL), 0),
                    coalesce(sum(status = 'sent' AND clicked_at IS NOT NULL), 0),
                    coalesce(sum(sent_at >= {since} AND status != 'unconfirmed'), 0),
                    coalesce(sum(sent_at >= {since} AND status = 'unconfirmed'), 0),
                    coalesce(sum(opened_at >= {since}), 0), coalesce(sum(clicked_at >= {since}), 0)
             FROM deliveries"
        ),
    );
    let top: Vec<Value> = db
        .prepare(
            "SELECT i.id, sum(d.status = 'sent'), sum(d.status = 'sent' AND d.opened_at IS NOT NULL),
                    sum(d.status = 'sent' AND d.clicked_at IS NOT NULL)
             FROM issues i JOIN deliveries d ON d.issue_id = i.id WHERE i.status = 'sent'
             GROUP BY i.id HAVING sum(d.status = 'sent') > 0
             ORDER BY CAST(sum(d.status = 'sent' AND d.opened_at IS NOT NULL) AS REAL) / sum(d.status = 'sent') DESC, i.id DESC
             LIMIT 5",
        )
        .unwrap()
        .query_map([], |r| {
            let (id, sent, opened, clicked): (i64, i64, i64, i64) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            Ok(json!([id, rate(opened, sent), rate(clicked, sent)]))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let expected = json!({
        "subscribers": {
            "total": subscribers[0], "active": subscribers[1], "unsubscribed": subscribers[2],
            "bounced": subscribers[3], "growth_last_30_days": subscribers[4],
            "new_by_source_last_30_days": {"form": by_source[0], "import": by_source[1],
                                           "api": by_source[2], "dashboard": by_source[3]},
        },
        "issues": {"total": issues[0], "sent_last_30_days": issues[1]},
        "engagement": {
            "average_open_rate": rate(engagement[1], engagement[0]),
            "average_click_rate": rate(engagement[2], engagement[0]),
            "last_30_days": {
                "emails_sent": engagement[3], "emails_unconfirmed": engagement[4],
                "opens": engagement[5], "clicks": engagement[6],
            },
        },
        "top_issues": top,
        "memberships": memberships_recount(app, owner),
    });
    let mut shown = owner.get("/newsletter/stats").json()["data"].clone();
    shown["top_issues"] = shown["top_issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!([t["id"], t["open_rate"], t["click_rate"]]))
        .collect();
    assert_eq!(shown, expected, "GET /newsletter/stats against the recount");

    let newsletter = owner.get("/newsletter").json()["data"].clone();
    assert_eq!(
        (
            newsletter["subscriber_count"].clone(),
            newsletter["issue_count"].clone()
        ),
        (json!(subscribers[1]), json!(issues[0]))
    );

    // Each issue: its delivery counts in the API, the dashboard's progress and report.
    for id in issue_ids {
        let counts = ints(
            &db,
            &format!(
                "SELECT count(*), coalesce(sum(status = 'sent'), 0), coalesce(sum(status = 'unconfirmed'), 0),
                        coalesce(sum(status = 'bounced'), 0), coalesce(sum(status = 'failed'), 0),
                        coalesce(sum(status IN ('pending', 'sending')), 0),
                        coalesce(sum(status = 'sent' AND opened_at IS NOT NULL), 0),
                        coalesce(sum(status = 'sent' AND clicked_at IS NOT NULL), 0),
                        coalesce(sum(unsubscribed_at IS NOT NULL), 0)
                 FROM deliveries WHERE issue_id = {id}"
            ),
        );
        let delivery = owner.get(&format!("/issues/{id}")).json()["delivery"].clone();
        assert_eq!(
            delivery,
            json!({
                "recipients": counts[0], "sent": counts[1], "unconfirmed": counts[2],
                "bounced": counts[3], "failed": counts[4], "pending": counts[5],
                "relay_unreachable_since": null, "next_attempt_at": null,
            }),
            "issue {id}"
        );
        let base = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);
        let progress = owner.client.get(&format!("{base}/progress")).json();
        assert_eq!(
            [
                &progress["total"],
                &progress["sent"],
                &progress["bounced"],
                &progress["remaining"]
            ],
            [
                &json!(counts[0]),
                &json!(counts[1]),
                &json!(counts[3]),
                &json!(counts[5])
            ]
        );
        let page = owner.client.get(&base).body;
        for (cell, value) in [
            ("report-recipients", counts[0]),
            ("report-delivered", counts[1]),
            ("report-opens", counts[6]),
            ("report-clicks", counts[7]),
            ("report-bounces", counts[3]),
            ("report-unsubscribes", counts[8]),
        ] {
            assert!(
                page.contains(&format!("id=\"{cell}\">{value}<")),
                "issue {id}: {cell} should be {value}"
            );
        }
    }

    // The subscriber lists: every filter, page by page and cursor by cursor.
    for (status, tag) in [
        (None, None),
        (Some("active"), None),
        (Some("unsubscribed"), None),
        (Some("bounced"), None),
        (None, Some("vip")),
        (Some("active"), Some("early")),
    ] {
        let expected = listed_ids(&db, status, tag);
        let mut query = String::from("per_page=100");
        for (key, value) in [("status", status), ("tag", tag)] {
            if let Some(value) = value {
                query.push_str(&format!("&{key}={value}"));
            }
        }
        let (mut by_page, mut by_cursor) = (Vec::new(), Vec::new());
        let mut page = 1;
        loop {
            let resp = owner
                .get(&format!("/subscribers?{query}&page={page}"))
                .json();
            by_page.extend(ids(&resp));
            if resp["meta"]["has_more"] != true {
                break;
            }
            page += 1;
        }
        let mut next = owner.get(&format!("/subscribers?{query}")).json();
        loop {
            by_cursor.extend(ids(&next));
            match next["meta"]["next_cursor"].as_str() {
                Some(cursor) => {
                    next = owner
                        .get(&format!("/subscribers?{query}&cursor={cursor}"))
                        .json()
                }
                None => break,
            }
        }
        assert_eq!(by_page, expected, "pages of status {status:?} tag {tag:?}");
        assert_eq!(
            by_cursor, expected,
            "cursors of status {status:?} tag {tag:?}"
        );
    }

    // The dashboard: the active count and each tag's count on the subscribers page.
    let page = owner
        .client
        .get(&format!("/newsletters/{}/subscribers", owner.newsletter_id))
        .body;
    assert!(
        page.contains(&format!(">{} active · ", subscribers[1])),
        "the subscribers page shows {} active",
        subscribers[1]
    );
    let tags: BTreeMap<String, i64> = db
        .prepare(
            "SELECT t.tag, sum(s.status = 'active') FROM subscriber_tags t
             JOIN subscribers s ON s.id = t.subscriber_id GROUP BY t.tag",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (tag, count) in &tags {
        assert!(
            page.contains(&format!(">{tag} ({count} active)<")),
            "the tag menu shows {tag} ({count} active)"
        );
    }
    for tag in TAGS.iter().filter(|t| !tags.contains_key(**t)) {
        assert!(!page.contains(&format!(">{tag} (")), "{tag} has nobody");
    }

    // The dashboard's stats page: the same figures, and the growth chart ends on today's
    // active count (everything here happened today: earlier days are 0).
    let stats_page = owner
        .client
        .get(&format!("/newsletters/{}/stats", owner.newsletter_id))
        .body;
    assert!(stats_page.contains(&format!(
        "data-stat=\"subscribers.active\" data-value=\"{}\"",
        subscribers[1]
    )));
    let growth: Vec<i64> = stats_page
        .split("<tr data-day=\"")
        .skip(1)
        .map(|row| {
            let cells: Vec<&str> = row.split("<td>").collect();
            cells[2].split('<').next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(growth.len(), 90);
    assert_eq!(
        growth[0], subscribers[1],
        "the newest day, first in the table"
    );
    if today(&db) == first_day {
        assert!(growth[1..].iter().all(|n| *n == 0), "{growth:?}");
    }
}

#[test]
fn stats_every_figure_matches_a_recount_after_random_changes_through_every_door() {
    let started = Instant::now();
    let app = spawn_app_with(&[
        "--rate-limit-get",
        "1000000",
        "--rate-limit-write",
        "1000000",
        "--rate-limit-bulk",
        "1000000",
        "--send-retry-base-ms",
        "50",
    ]);
    let owner = onboard_paid(&app, "Recounted");
    // Each confirmation waits for its own opt-in mail; a welcome arriving late would be
    // taken for it (the welcome mail has its tests in welcome.rs).
    owner
        .patch("/newsletter", &json!({"welcome_enabled": false}))
        .expect(200);
    let first_day = today(&app.db());
    let token = owner
        .client
        .get(&format!("/newsletters/{}/subscribers", owner.newsletter_id))
        .csrf_token();
    let bounce_token: String = app
        .db()
        .query_row("SELECT bounce_token FROM newsletters", [], |r| r.get(0))
        .unwrap();
    let mut world = World {
        app: &app,
        owner: &owner,
        rng: StdRng::seed_from_u64(13),
        token,
        site: app.site_client(&owner.subdomain),
        bounce_token,
        next_email: 0,
        public_subscribes: 0,
    };

    // A first list: bulk (with addresses the SMTP listener refuses, answers late or never),
    // and a CSV import through the CLI (with a bad row and a repeat).
    let refused: Vec<String> = (1..=5).map(|n| format!("refused{n}@example.net")).collect();
    let (slow, lost) = ("slow@example.net", "lost@example.net");
    let entries: Vec<Value> = (0..300)
        .map(|_| json!({"email": world.email(), "tags": world.tags()}))
        .chain(
            refused
                .iter()
                .chain([&slow.to_string(), &lost.to_string()])
                .map(|e| json!({"email": e})),
        )
        .collect();
    owner
        .post("/subscribers/bulk_create", &json!({"subscribers": entries}))
        .expect(200);
    let mut csv = String::from("email,name,tags\n");
    for n in 0..300 {
        csv.push_str(&format!(
            "{},Imported {n},vip;group-{}\n",
            world.email(),
            n % 3
        ));
    }
    csv.push_str("not-an-address,Bad,\nr1@example.net,Repeat,\n");
    let file = app.data_dir().join("recount.csv");
    std::fs::write(&file, csv).unwrap();
    let (code, out, err) = app.cli(&["import", &owner.subdomain, file.to_str().unwrap()]);
    assert_eq!(code, 5, "one refused row: {out} {err}");

    // A send with refusals (bounced), a lost answer (unconfirmed) and a retry, while the list
    // keeps changing.
    app.smtp.change_rules(|rules| {
        rules.permanent = refused.clone();
        rules.temporary.insert(slow.into(), 1);
    });
    app.smtp.add_faults(lost, &[Fault::DropAfterData]);
    let first = send::approved_issue(&owner, "First");
    send::send_now(&owner, first);
    for _ in 0..150 {
        world.change();
    }
    send::wait_status(&owner, first, "sent", Duration::from_secs(60));
    for _ in 0..700 {
        world.change();
    }
    // The second goes out from the dashboard, again while the changes go on.
    let second = send::approved_issue(&owner, "Second");
    let base = format!("/newsletters/{}/issues/{second}", owner.newsletter_id);
    let resp = world.dashboard(&format!("{base}/send"), &[]);
    assert_eq!(resp.status, 303, "{}", resp.body);
    for _ in 0..150 {
        world.change();
    }
    send::wait_status(&owner, second, "sent", Duration::from_secs(60));
    for _ in 0..700 {
        world.change();
    }

    let db = app.db();
    let sizes = ints(
        &db,
        "SELECT (SELECT count(*) FROM subscribers), (SELECT count(*) FROM subscriber_tags),
                (SELECT count(*) FROM deliveries), (SELECT count(*) FROM deliveries WHERE opened_at IS NOT NULL),
                (SELECT count(*) FROM deliveries WHERE status = 'bounced'),
                (SELECT count(*) FROM deliveries WHERE unsubscribed_at IS NOT NULL),
                (SELECT count(*) FROM deliveries WHERE status = 'unconfirmed')",
    );
    assert!(
        sizes[0] > 600
            && sizes[1] > 400
            && sizes[2] > 1000
            && sizes[3] > 20
            && sizes[4] > 5
            && sizes[5] > 2,
        "every kind of change happened: {sizes:?}"
    );
    assert_every_figure_matches_a_recount(&app, &owner, &[first, second], &first_day);
    eprintln!(
        "recount test: {sizes:?} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The membership figures recounted from `memberships` and `membership_plans` in plain SQL,
/// the access rule written out again (status not free, `access_until` unset or later).
fn memberships_recount(app: &App, owner: &Owner) -> Value {
    const RECOUNT: &str = "SELECT
         (SELECT count(*) FROM memberships WHERE newsletter_id = ?1 AND status IN ('paid', 'past_due', 'canceled')
              AND (access_until IS NULL OR access_until > ?2)),
         (SELECT count(*) FROM memberships WHERE newsletter_id = ?1 AND status = 'trialing'
              AND (access_until IS NULL OR access_until > ?2)),
         (SELECT count(*) FROM memberships WHERE newsletter_id = ?1 AND status = 'comped'
              AND (access_until IS NULL OR access_until > ?2)),
         (SELECT coalesce(sum(CASE interval WHEN 'month' THEN amount ELSE amount / 12.0 END), 0)
              FROM memberships WHERE newsletter_id = ?1 AND status IN ('paid', 'past_due')
              AND (access_until IS NULL OR access_until > ?2)),
         (SELECT currency FROM membership_plans WHERE newsletter_id = ?1),
         (SELECT count(*) FROM memberships WHERE newsletter_id = ?1 AND status IN ('paid', 'trialing')
              AND (access_until IS NULL OR access_until > ?2) AND since > ?3),
         (SELECT count(*) FROM memberships WHERE newsletter_id = ?1 AND canceled_at > ?3)";
    let now = app.clock_now();
    let month_ago = now - jiff::SignedDuration::from_hours(24 * 30);
    app.db()
        .query_row(
            RECOUNT,
            (owner.newsletter_id, now.to_string(), month_ago.to_string()),
            |r| {
                Ok(json!({
                    "paid_members": r.get::<_, i64>(0)?,
                    "trialing_members": r.get::<_, i64>(1)?,
                    "comped_members": r.get::<_, i64>(2)?,
                    "monthly_recurring_revenue": r.get::<_, f64>(3)?.round() as i64,
                    "currency": r.get::<_, Option<String>>(4)?,
                    "new_paid_last_30_days": r.get::<_, i64>(5)?,
                    "canceled_last_30_days": r.get::<_, i64>(6)?,
                }))
            },
        )
        .unwrap()
}
