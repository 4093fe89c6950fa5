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
    let mut subjects: Vec<(i64, String)> =
        owner.get("/issues?status=draft&per_page=100").json()["issues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    i["id"].as_i64().unwrap(),
                    i["subject"].as_str().unwrap().to_string(),
                )
            })
            .collect();
    subjects.sort();
    subjects.into_iter().map(|(_, s)| s).collect()
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
        ],
    );
    bad.expect(422);
    assert!(bad.body.contains("must be an http"), "{}", bad.body);
    assert!(bad.body.contains("from 15 to"), "{}", bad.body);
    assert_eq!(app.count("SELECT count(*) FROM newsletter_feeds"), 0);

    let saved = owner.client.submit(
        &page_url,
        &page_url,
        &[
            ("feed[url]", feed_url.as_str()),
            ("feed[every_minutes]", "15"),
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
        shown.body.contains("1 draft made from it"),
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
            &[("feed[url]", moved.as_str()), ("feed[every_minutes]", "15")],
        )
        .expect(303);
    // A new address starts afresh: its first read records what is there.
    next_poll(&app, &owner);
    let shown = owner.client.get(&page_url);
    assert!(!shown.body.contains("feed-error"), "{}", shown.body);
    assert_eq!(drafts(&owner), ["Third <post> & more"]);
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
