//! Each newsletter's public site over HTTP with its Host header: pages, 404s,
//! publishing into the archive and the feed, and double opt-in from the form to a subscriber.

use crate::support::*;
use std::time::Duration;

fn publish_issue(owner: &Owner, subject: &str, markdown: &str) -> Value {
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "content_markdown": markdown, "status": "approved",
            "articles": [{"title": "Read this", "url": "https://example.com/read", "summarized_article": "A summary."}]}}),
    );
    issue.expect(201);
    let id = issue.json()["id"].as_i64().unwrap();
    let published = owner.post(&format!("/issues/{id}/publish"), &json!({}));
    published.expect(200);
    published.json()
}

#[test]
fn home_archive_issue_pages_and_feed() {
    let app = spawn_app();
    let owner = onboard(&app, "Public Ledger");
    let site = app.site_client(&owner.subdomain);
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);

    let home = site.get("/");
    home.expect(200);
    for text in [
        "<h1>Public Ledger</h1>",
        "Notes from the field",
        "action=\"/subscribe\"",
        "name=\"authenticity_token\"",
        "No issues published yet",
        "property=\"og:title\"",
        &format!("rel=\"canonical\" href=\"{origin}/\""),
        "application/atom+xml",
    ] {
        assert!(
            home.body.contains(text),
            "{text:?} on the home page:\n{}",
            home.body
        );
    }
    assert!(!home.body.contains("<script"), "no scripts");

    // Unknown hosts, newsletters not yet live and unknown paths: 404 pages.
    app.site_client("no-such-newsletter").get("/").expect(404);
    let client = &owner.client;
    let resp = client.submit(
        "/newsletters/new",
        "/newsletters",
        &[
            ("newsletter[name]", "Not Yet Live"),
            ("newsletter[from_email]", "x@example.com"),
        ],
    );
    resp.redirect();
    let unfinished = app.site_client("not-yet-live").get("/");
    unfinished.expect(404);
    assert!(unfinished.body.contains("Not found"));
    site.get("/p/no-such-issue").expect(404);

    // A draft is not public; publishing makes its page appear in the archive and the feed.
    let draft = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Secret draft", "content_markdown": "hidden"}}),
    );
    let draft_path = draft.json()["path"].as_str().unwrap().to_string();
    site.get(&format!("/p/{draft_path}")).expect(404);
    let published = publish_issue(
        &owner,
        "First <Light>",
        "Hello **readers**.\n\n<script>alert(1)</script>",
    );
    let web_url = published["web_url"].as_str().unwrap().to_string();
    assert!(web_url.starts_with(&format!("{origin}/p/")), "{web_url}");
    let page = site.get(&path_of(&web_url));
    page.expect(200);
    assert!(page.body.contains("First &lt;Light&gt;"));
    assert!(page.body.contains("<strong>readers</strong>"));
    assert!(
        !page.body.contains("<script>alert"),
        "raw HTML is not passed through"
    );
    assert!(page.body.contains("href=\"https://example.com/read\""));
    assert!(page.body.contains("A summary."));
    assert!(
        page.body
            .contains("property=\"og:type\" content=\"article\"")
    );
    assert!(site.get("/").body.contains(&path_of(&web_url)));
    assert!(site.get("/archive").body.contains("First &lt;Light&gt;"));
    assert!(!site.get("/archive").body.contains("Secret draft"));

    // The feed is Atom.
    let feed = site.get("/feed.xml");
    feed.expect(200);
    assert!(
        feed.header("content-type")
            .unwrap()
            .starts_with("application/atom+xml")
    );
    let doc = roxmltree::Document::parse(&feed.body).expect("the feed is XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "feed");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2005/Atom")
    );
    let child = |node: roxmltree::Node<'_, '_>, name: &str| {
        node.children()
            .find(|c| c.tag_name().name() == name)
            .map(|c| c.text().unwrap_or("").to_string())
    };
    assert_eq!(child(root, "title").as_deref(), Some("Public Ledger"));
    assert!(child(root, "id").is_some() && child(root, "updated").is_some());
    let entries: Vec<_> = root
        .children()
        .filter(|c| c.tag_name().name() == "entry")
        .collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(child(entries[0], "title").as_deref(), Some("First <Light>"));
    assert_eq!(child(entries[0], "id").as_deref(), Some(web_url.as_str()));
    let link = entries[0]
        .children()
        .find(|c| c.tag_name().name() == "link")
        .unwrap();
    assert_eq!(link.attribute("href"), Some(web_url.as_str()));
    assert!(
        child(entries[0], "content")
            .unwrap()
            .contains("<strong>readers</strong>")
    );

    // The archive pages by 20, newest first.
    for n in 2..=21 {
        publish_issue(&owner, &format!("Issue number {n}"), "More.");
    }
    let first = site.get("/archive");
    assert!(first.body.contains("Issue number 21"));
    assert!(!first.body.contains("First &lt;Light&gt;"));
    assert!(first.body.contains("href=\"/archive?page=2\""));
    let second = site.get("/archive?page=2");
    second.expect(200);
    assert!(second.body.contains("First &lt;Light&gt;"));
    site.get("/archive?page=3").expect(404);
    site.get("/archive?page=junk").expect(404);
}

fn subscribe(site: &Client, email: &str, name: &str) -> Resp {
    site.submit(
        "/subscribe",
        "/subscribe",
        &[("email", email), ("name", name)],
    )
}

fn confirm(app: &App, site: &Client, email: &str, n: usize) -> Resp {
    let mail = app.smtp.wait_for_message_to(email, n);
    let link = link_containing(&mail.text(), "/subscribe/confirm/").expect("a confirmation link");
    let path = path_of(&link);
    site.submit(&path, &path, &[])
}

/// The opt-in mail comes from the newsletter's sender, as its issues do, not from the
/// service's own address.
#[test]
fn the_opt_in_mail_comes_from_the_newsletters_sender() {
    let app = spawn_app();
    let owner = onboard(&app, "Sender Times");
    set_sender(&owner);
    let site = app.site_client(&owner.subdomain);
    let email = unique_email("opt-in");
    subscribe(&site, &email, "").expect(200);
    let mail = app.smtp.wait_for_message_to(&email, 1);
    assert_from_sender(&mail);
    assert!(mail.text().contains("/subscribe/confirm/"));
}

#[test]
fn double_opt_in_from_form_to_subscriber() {
    let app = spawn_app();
    let owner = onboard(&app, "Opt In Times");
    // Only the opt-in mail is counted here; the welcome mail has its tests in welcome.rs.
    owner
        .patch("/newsletter", &json!({"welcome_enabled": false}))
        .expect(200);
    listen(&app, &owner, &["subscriber.created"]);
    let site = app.site_client(&owner.subdomain);
    let events = || app.count("SELECT count(*) FROM events WHERE kind = 'subscriber.created'");

    let resp = subscribe(&site, "  Reader@Example.com ", "Rita Reader");
    resp.expect(200);
    assert!(resp.body.contains("Check your inbox"));
    assert_eq!(
        owner.get("/subscribers").json()["subscribers"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(events(), 0, "nothing happens before the link is followed");

    // Asking again within a day mails nothing (one pending confirmation per address a day);
    // a day later it mails a new link, and the newest link is the one that works. (Wait for
    // the first mail before asking again: mail jobs run on parallel workers, so arrival
    // order is not request order.)
    let stale = app.smtp.wait_for_message_to("reader@example.com", 1);
    let again = subscribe(&site, "reader@example.com", "Rita Reader");
    again.expect(200);
    assert!(again.body.contains("Check your inbox"));
    assert_eq!(
        queued_mails(&app, "reader@example.com", "/subscribe/confirm/"),
        1
    );
    app.advance_clock(Duration::from_secs(24 * 3600 + 60));
    subscribe(&site, "reader@example.com", "Rita Reader").expect(200);
    assert_eq!(
        queued_mails(&app, "reader@example.com", "/subscribe/confirm/"),
        2
    );
    let stale_path = path_of(&link_containing(&stale.text(), "/subscribe/confirm/").unwrap());
    // A body the server cannot read (over the form limit) is a bad request that confirms
    // nothing, not a refused form (403) that would tell the reader the link is stale.
    let fresh = app.smtp.wait_for_message_to("reader@example.com", 2);
    let fresh_path = path_of(&link_containing(&fresh.text(), "/subscribe/confirm/").unwrap());
    let unreadable = site.post_form(&fresh_path, &[("filler", &"x".repeat(1024 * 1024))]);
    unreadable.expect(400);
    assert!(unreadable.body.contains("<html"), "{}", unreadable.body);
    assert_eq!(owner.get("/subscribers").json()["subscribers"], json!([]));
    let done = confirm(&app, &site, "reader@example.com", 2);
    done.expect(200);
    assert!(done.body.contains("You are subscribed"));
    site.submit(&stale_path, &stale_path, &[]).expect(404);
    let list = owner.get("/subscribers").json();
    let subscribers = list["subscribers"].as_array().unwrap();
    assert_eq!(subscribers.len(), 1);
    assert_eq!(subscribers[0]["email"], "reader@example.com");
    assert_eq!(subscribers[0]["name"], "Rita Reader");
    assert_eq!(subscribers[0]["status"], "active");
    assert_eq!(events(), 1);

    // Used once; subscribing again when already subscribed sends nothing.
    let again = confirm(&app, &site, "reader@example.com", 2);
    again.expect(404);
    subscribe(&site, "reader@example.com", "").expect(200);
    assert_eq!(queued_mails(&app, "reader@example.com", ""), 2);
    assert_eq!(settled_mail(&app, "reader@example.com").len(), 2);

    // Someone who left can come back through the form.
    let id = subscribers[0]["id"].as_i64().unwrap();
    owner
        .patch(
            &format!("/subscribers/{id}"),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    subscribe(&site, "reader@example.com", "").expect(200);
    confirm(&app, &site, "reader@example.com", 3).expect(200);
    assert_eq!(
        owner.get(&format!("/subscribers/{id}")).json()["status"],
        "active"
    );
    assert_eq!(events(), 1, "a comeback is an update, not a new subscriber");
}

#[test]
fn a_cancelled_newsletter_keeps_its_archive_but_takes_no_subscribers() {
    let app = spawn_app();
    let owner = onboard(&app, "Closing Down");
    let site = app.site_client(&owner.subdomain);
    // A link asked for before the newsletter closed, followed after.
    subscribe(&site, "early@example.com", "").expect(200);
    let mail = app.smtp.wait_for_message_to("early@example.com", 1);
    let early = path_of(&link_containing(&mail.text(), "/subscribe/confirm/").unwrap());

    let (code, _, err) = app.cli(&["status", &owner.subdomain, "cancelled"]);
    assert_eq!(code, 0, "{err}");

    let refused = subscribe(&site, "late@example.com", "");
    refused.expect(403);
    assert!(refused.body.contains("no longer takes new subscribers"));
    site.submit(&early, &early, &[]).expect(403);
    assert_eq!(app.count("SELECT count(*) FROM subscribers"), 0);
    assert_eq!(
        app.count("SELECT count(*) FROM subscription_requests WHERE email = 'late@example.com'"),
        0
    );
    assert_eq!(queued_mails(&app, "late@example.com", ""), 0);
    assert!(app.smtp.messages_to("late@example.com").is_empty());
    site.get("/").expect(200);
    site.get("/archive").expect(200);
}

#[test]
fn subscribe_form_refuses_junk_and_stores_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Junk Filter");
    let site = app.site_client(&owner.subdomain);
    let huge = "a".repeat(100_000);
    let junk: Vec<(String, String)> = vec![
        (String::new(), String::new()),
        ("not-an-email".into(), String::new()),
        ("a@".into(), String::new()),
        (format!("{huge}@example.com"), String::new()),
        (
            "x@example.com\r\nBcc: victim@example.com".into(),
            String::new(),
        ),
        ("<script>@example.com".into(), String::new()),
        ("ok@example.com".into(), "\u{0}\u{1b}[31m".into()),
        ("ok@example.com".into(), huge.clone()),
        ("ünï@exämple".into(), String::new()),
    ];
    for (email, name) in &junk {
        let resp = subscribe(&site, email, name);
        assert_eq!(
            resp.status,
            422,
            "{:?}: {}",
            &email.chars().take(40).collect::<String>(),
            resp.body.chars().take(300).collect::<String>()
        );
        assert!(resp.body.contains("class=\"errors\""));
        assert!(!resp.body.contains("<script>@"), "input is escaped");
    }
    // Without the form's token: refused.
    site.post_form("/subscribe", &[("email", "csrf@example.com")])
        .expect(403);
    site.post_form("/subscribe/confirm/whatever", &[])
        .expect(403);
    assert_eq!(app.count("SELECT count(*) FROM subscription_requests"), 0);
    assert_eq!(app.count("SELECT count(*) FROM subscribers"), 0);

    // A flood from one address is cut off.
    let mut statuses = Vec::new();
    for n in 0..22 {
        statuses.push(subscribe(&site, &format!("flood{n}@example.com"), "").status);
    }
    assert!(statuses[..20].iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(statuses[21], 429);
    assert_eq!(app.count("SELECT count(*) FROM subscription_requests"), 20);
}
