//! RSS-to-email through the real binary (docs/automations.md, "Following a feed"): a local
//! feed server (RSS with ETag, then Atom), the poller driven by the test clock, never slept:
//! the first read records what is there, new items become drafts once (a restart of the
//! poll, an edited item and a reordered feed make none twice), a 304 changes nothing, and a
//! feed too large, malformed, slow or on a private address is reported on the Feed page and
//! changes nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use poem::{EndpointExt, handler, http::StatusCode, web::Data};

use crate::support::*;

/// What the feed server answers: the body, its ETag, a delay.
#[derive(Default)]
struct Served {
    body: String,
    etag: String,
    delay_ms: u64,
    /// Requests answered, and those that came with the current ETag.
    requests: usize,
    conditional: usize,
}

type Shared = Arc<Mutex<Served>>;

#[handler]
async fn feed_xml(req: &poem::Request, Data(served): Data<&Shared>) -> poem::Response {
    let (body, etag, delay, matched) = {
        let mut s = served.lock().unwrap();
        s.requests += 1;
        let matched = req.header("If-None-Match") == Some(s.etag.as_str());
        if matched {
            s.conditional += 1;
        }
        (s.body.clone(), s.etag.clone(), s.delay_ms, matched)
    };
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    if matched {
        return poem::Response::builder()
            .status(StatusCode::NOT_MODIFIED)
            .finish();
    }
    poem::Response::builder()
        .content_type("application/rss+xml")
        .header("ETag", etag)
        .body(body)
}

/// `text` as XML text.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn rss(items: &[(&str, &str, &str)]) -> String {
    let items: String = items
        .iter()
        .map(|(guid, title, summary)| {
            let (title, summary) = (xml(title), xml(summary));
            format!(
                "<item><guid>{guid}</guid><title>{title}</title><link>https://blog.example/{guid}</link><description>{summary}</description></item>"
            )
        })
        .collect();
    format!(
        "<?xml version=\"1.0\"?><rss version=\"2.0\"><channel><title>Blog</title><link>https://blog.example/</link><description>d</description>{items}</channel></rss>"
    )
}

/// Draft issues' subjects, oldest first.
fn drafts(owner: &Owner) -> Vec<String> {
    issues_in(owner, "draft")
        .into_iter()
        .map(|(_, s)| s)
        .collect()
}

/// Moves the clock past the next poll and waits until the poller has read the feed again.
fn next_poll(app: &App, owner: &Owner) {
    let polled = || {
        app.db()
            .query_row(
                "SELECT last_polled_at FROM newsletter_feeds WHERE newsletter_id = ?1",
                [owner.newsletter_id],
                |r| r.get::<_, Option<String>>(0),
            )
            .unwrap()
    };
    let before = polled();
    app.advance_clock(Duration::from_secs(16 * 60));
    wait_for("the feed to be read again", Duration::from_secs(30), || {
        (polled() != before).then_some(())
    });
}

#[test]
fn a_followed_feed_turns_each_new_item_into_one_draft_and_reports_a_broken_one() {
    let served: Shared = Arc::new(Mutex::new(Served {
        body: rss(&[("p2", "Second post", "Two."), ("p1", "First post", "One.")]),
        etag: "\"v1\"".into(),
        ..Served::default()
    }));
    let port = crate::support::net::serve(
        poem::Route::new()
            .at("/feed.xml", poem::get(feed_xml))
            .at(
                "/elsewhere",
                poem::get(poem::endpoint::make_sync(|_| {
                    poem::Response::builder()
                        .status(StatusCode::FOUND)
                        .header("Location", "/feed.xml")
                        .finish()
                })),
            )
            .data(served.clone()),
    );
    let app = spawn_app_with(&["--allow-private-webhooks", "--webhook-timeout-ms", "1500"]);
    let owner = onboard(&app, "Blog Letter");
    let feed_url = format!("http://127.0.0.1:{port}/feed.xml");
    let page_url = format!("/newsletters/{}/feed", owner.newsletter_id);

    // Bad settings: the form again, nothing followed.
    let bad = owner.client.submit(
        &page_url,
        &page_url,
        &[
            ("feed[url]", "ftp://x.example/feed"),
            ("feed[every_minutes]", "5"),
            ("feed[mode]", "sometimes"),
        ],
    );
    bad.expect(422);
    assert!(bad.body.contains("must be an http"), "{}", bad.body);
    assert!(bad.body.contains("from 15 to"), "{}", bad.body);
    assert!(
        bad.body.contains("must be draft, send or digest"),
        "{}",
        bad.body
    );
    assert_eq!(app.count("SELECT count(*) FROM newsletter_feeds"), 0);

    let saved = owner.client.submit(
        &page_url,
        &page_url,
        &[
            ("feed[url]", feed_url.as_str()),
            ("feed[every_minutes]", "15"),
            ("feed[mode]", "draft"),
        ],
    );
    assert_eq!(saved.redirect(), page_url);
    // The first read (at the poller's next round) records what is there and makes no draft.
    app.advance_clock(Duration::from_secs(120));
    wait_for("the first read", Duration::from_secs(30), || {
        (app.count("SELECT count(*) FROM feed_items") == 2).then_some(())
    });
    assert!(drafts(&owner).is_empty());

    // Nothing new: a conditional GET answered 304 changes nothing.
    next_poll(&app, &owner);
    assert_eq!(served.lock().unwrap().conditional, 1);
    assert!(drafts(&owner).is_empty());

    // A new post, an edited one, reordered: one draft, for the new one only.
    {
        let mut s = served.lock().unwrap();
        s.body = rss(&[
            ("p1", "First post (edited)", "One, again."),
            (
                "p3",
                "Third <post> & more",
                "<p>Three <b>bold</b> [words]</p>",
            ),
            ("p2", "Second post", "Two."),
        ]);
        s.etag = "\"v2\"".into();
    }
    next_poll(&app, &owner);
    let state: (Option<String>, i64, i64) = app
        .db()
        .query_row(
            "SELECT last_error, primed, (SELECT count(*) FROM feed_items) FROM newsletter_feeds",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(state, (None, 1, 3), "the feed after the new post");
    assert_eq!(drafts(&owner), ["Third <post> & more"]);
    let draft = owner.get("/issues?status=draft").json()["issues"][0]["id"].clone();
    let content = owner.get(&format!("/issues/{draft}")).json()["content_markdown"].clone();
    let content = content.as_str().unwrap();
    assert!(content.contains("Three bold \\[words\\]"), "{content}");
    assert!(
        content.contains("[Read it on the site](https://blog.example/p3)"),
        "{content}"
    );
    // Read again (the same ETag now answers 304) and again with a new ETag: no second draft.
    next_poll(&app, &owner);
    served.lock().unwrap().etag = "\"v3\"".into();
    next_poll(&app, &owner);
    assert_eq!(drafts(&owner), ["Third <post> & more"]);
    let shown = owner.client.get(&page_url);
    assert!(
        shown.body.contains("1 issue made from it"),
        "{}",
        shown.body
    );

    // Broken feeds: each reported on the page, nothing else changes.
    for (body, delay, problem) in [
        ("this is not a feed".to_string(), 0, "is not RSS or Atom"),
        ("x".repeat(3 * 1024 * 1024), 0, "larger than 2 MiB"),
        (
            rss(&[("p9", "Slow post", "s")]),
            3000,
            "could not be fetched",
        ),
    ] {
        {
            let mut s = served.lock().unwrap();
            s.body = body;
            s.delay_ms = delay;
            s.etag = format!("\"{problem}\"");
        }
        next_poll(&app, &owner);
        let shown = owner.client.get(&page_url);
        assert!(shown.body.contains(problem), "{problem}: {}", shown.body);
        assert_eq!(drafts(&owner), ["Third <post> & more"], "{problem}");
    }
    // A redirect is followed (checked like the address itself) and the feed works again.
    {
        let mut s = served.lock().unwrap();
        s.body = rss(&[("p4", "Fourth post", "Four.")]);
        s.delay_ms = 0;
        s.etag = "\"v4\"".into();
    }
    let moved = format!("http://127.0.0.1:{port}/elsewhere");
    owner
        .client
        .submit(
            &page_url,
            &page_url,
            &[
                ("feed[url]", moved.as_str()),
                ("feed[every_minutes]", "15"),
                ("feed[mode]", "draft"),
            ],
        )
        .expect(303);
    // A new address starts afresh: its first read records what is there.
    next_poll(&app, &owner);
    let shown = owner.client.get(&page_url);
    assert!(!shown.body.contains("feed-error"), "{}", shown.body);
    assert_eq!(drafts(&owner), ["Third <post> & more"]);
}

/// Saves the Feed page's form: `url`, read every 15 minutes, in `mode`.
fn follow(owner: &Owner, url: &str, mode: &str) -> Resp {
    let page_url = format!("/newsletters/{}/feed", owner.newsletter_id);
    owner.client.submit(
        &page_url,
        &page_url,
        &[
            ("feed[url]", url),
            ("feed[every_minutes]", "15"),
            ("feed[mode]", mode),
        ],
    )
}

/// The issues with `status` (any, when empty), oldest first: (id, subject).
fn issues_in(owner: &Owner, status: &str) -> Vec<(i64, String)> {
    let mut found: Vec<(i64, String)> = owner
        .get(&format!("/issues?status={status}&per_page=100"))
        .json()["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["id"].as_i64().unwrap(),
                i["subject"].as_str().unwrap().into(),
            )
        })
        .collect();
    found.sort();
    found
}

/// The mails `email` received whose subject contains `subject`.
fn mails_about(app: &App, email: &str, subject: &str) -> Vec<crate::support::smtp::Received> {
    app.smtp
        .messages_to(email)
        .into_iter()
        .filter(|m| m.header("Subject").is_some_and(|s| s.contains(subject)))
        .collect()
}

#[test]
fn a_feed_sends_each_new_post_at_once_or_gathers_them_into_a_digest_at_the_next_slot() {
    let served: Shared = Arc::new(Mutex::new(Served {
        body: rss(&[("p1", "Old post", "Old.")]),
        etag: "\"v1\"".into(),
        ..Served::default()
    }));
    let port = crate::support::net::serve(
        poem::Route::new()
            .at("/feed.xml", poem::get(feed_xml))
            .data(served.clone()),
    );
    let serve = |items: &[(&str, &str, &str)], etag: &str| {
        let mut s = served.lock().unwrap();
        s.body = rss(items);
        s.etag = etag.into();
    };
    let app = spawn_app_with(&["--allow-private-webhooks"]);
    let owner = onboard_paid(&app, "Post Office");
    set_sender(&owner);
    let readers = [unique_email("ann"), unique_email("bo")];
    crate::support::send::subscribe_all(&owner, &readers);
    let feed_url = format!("http://127.0.0.1:{port}/feed.xml");
    let settings = format!("/newsletters/{}/settings", owner.newsletter_id);

    // A digest needs a slot: without a publishing frequency it is refused, by the form.
    let skip = |frequency: &str| {
        owner
            .client
            .submit(
                &settings,
                &format!("{settings}/frequency"),
                &[("frequency", frequency)],
            )
            .expect(303);
    };
    skip("skip");
    let refused = follow(&owner, &feed_url, "digest");
    refused.expect(422);
    assert!(
        refused.body.contains("no publishing frequency"),
        "{}",
        refused.body
    );
    assert_eq!(app.count("SELECT count(*) FROM newsletter_feeds"), 0);
    skip("weekly");

    // Sent at once: the first read records the old post; a new one reaches every reader once.
    follow(&owner, &feed_url, "send").expect(303);
    app.advance_clock(Duration::from_secs(120));
    wait_for("the first read", Duration::from_secs(30), || {
        (app.count("SELECT count(*) FROM feed_items") == 1).then_some(())
    });
    serve(
        &[
            ("p2", "Fresh post", "<p>Just out.</p>"),
            ("p1", "Old post", "Old."),
        ],
        "\"v2\"",
    );
    next_poll(&app, &owner);
    let made = issues_in(&owner, "");
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].1, "Fresh post");
    crate::support::send::wait_status(&owner, made[0].0, "sent", Duration::from_secs(30));
    for reader in &readers {
        let mails = mails_about(&app, reader, "Fresh post");
        assert_eq!(mails.len(), 1, "{reader}");
        assert!(mails[0].text().contains("Just out."), "{}", mails[0].text());
        assert!(mails[0].header("List-Unsubscribe-Post").is_some());
    }
    // Read again with a new ETag: the same post makes no second issue.
    served.lock().unwrap().etag = "\"v3\"".into();
    next_poll(&app, &owner);
    assert_eq!(issues_in(&owner, ""), made);

    // Gathered into a digest: two reads' posts join one issue scheduled at the next slot.
    follow(&owner, &feed_url, "digest").expect(303);
    serve(
        &[
            ("p3", "Third post", "Three."),
            ("p2", "Fresh post", "x"),
            ("p1", "Old post", "Old."),
        ],
        "\"v4\"",
    );
    next_poll(&app, &owner);
    let scheduled = issues_in(&owner, "scheduled");
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    let (digest, ref subject) = scheduled[0];
    assert_eq!(subject, "New posts on Post Office");
    serve(
        &[
            ("p4", "Fourth [post]", "Four."),
            ("p3", "Third post", "Three."),
        ],
        "\"v5\"",
    );
    next_poll(&app, &owner);
    assert_eq!(
        issues_in(&owner, "scheduled"),
        scheduled,
        "still one digest"
    );
    let shown = crate::support::send::issue(&owner, digest);
    let content = shown["content_markdown"].as_str().unwrap();
    assert!(
        content.contains("## [Third post](https://blog.example/p3)"),
        "{content}"
    );
    assert!(
        content.contains("## [Fourth \\[post\\]](https://blog.example/p4)"),
        "{content}"
    );
    let slot: jiff::Timestamp = shown["scheduled_for"].as_str().unwrap().parse().unwrap();
    assert!(slot > app.clock_now(), "the next slot is ahead: {slot}");
    let page = owner
        .client
        .get(&format!("/newsletters/{}/feed", owner.newsletter_id));
    assert!(page.body.contains("2 issues made from it"), "{}", page.body);

    // At the slot the digest goes out: one mail a reader, with both posts.
    app.set_clock(slot + jiff::SignedDuration::from_mins(1));
    crate::support::send::wait_status(&owner, digest, "sent", Duration::from_secs(30));
    for reader in &readers {
        let mails = mails_about(&app, reader, "New posts on Post Office");
        assert_eq!(mails.len(), 1, "{reader}");
        let text = mails[0].text();
        assert!(
            text.contains("Third post") && text.contains("Fourth [post]"),
            "{text}"
        );
    }
    // A post after the digest went out opens the next one.
    serve(&[("p5", "Fifth post", "Five.")], "\"v6\"");
    next_poll(&app, &owner);
    let next = issues_in(&owner, "scheduled");
    assert_eq!(next.len(), 1, "{next:?}");
    assert_ne!(next[0].0, digest);
    let later: jiff::Timestamp = crate::support::send::issue(&owner, next[0].0)["scheduled_for"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(later > slot, "the slot after: {later}");
}

#[test]
fn a_feed_on_a_private_address_is_refused_by_the_ssrf_guard() {
    let port = crate::support::net::serve(poem::Route::new().at(
        "/feed.xml",
        poem::get(poem::endpoint::make_sync(|_| rss(&[("a", "A", "a")]))),
    ));
    // Without --allow-private-webhooks: loopback is no feed to fetch.
    let app = spawn_app();
    let owner = onboard(&app, "Guarded Feed");
    let page_url = format!("/newsletters/{}/feed", owner.newsletter_id);
    let feed_url = format!("http://127.0.0.1:{port}/feed.xml");
    owner
        .client
        .submit(
            &page_url,
            &page_url,
            &[
                ("feed[url]", feed_url.as_str()),
                ("feed[every_minutes]", "15"),
                ("feed[mode]", "draft"),
            ],
        )
        .expect(303);
    app.advance_clock(Duration::from_secs(120));
    wait_for("the refused read", Duration::from_secs(30), || {
        owner
            .client
            .get(&page_url)
            .body
            .contains("refused to fetch")
            .then_some(())
    });
    assert_eq!(app.count("SELECT count(*) FROM feed_items"), 0);
}
