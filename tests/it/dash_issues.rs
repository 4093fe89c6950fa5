//! The dashboard's issue pages over HTTP, as a browser without JavaScript uses them: the editor with articles, previews, approve, schedule, send with its confirmation,
//! live progress and report, publish, delete; bad input, refusals, other users' ids and CSRF.
//! The Chromium test at the end writes, previews and sends an issue by clicking.

use std::time::Duration;

use fantoccini::Locator;

use crate::support::browser::{
    Driver, click, fill, runtime, screenshot, sign_in, wait_for_element,
};
use crate::support::http::attribute_after;
use crate::support::*;

const TITLE: &str = "issue[articles][][title]";
const URL: &str = "issue[articles][][url]";
const SUMMARY: &str = "issue[articles][][summarized_article]";
const POSITION: &str = "issue[articles][][position]";
const REMOVE: &str = "issue[articles_remove][]";

fn issues_url(owner: &Owner) -> String {
    format!("/newsletters/{}/issues", owner.newsletter_id)
}

fn issue_url(owner: &Owner, id: i64) -> String {
    format!("{}/{id}", issues_url(owner))
}

/// The editor's fields: subject, Markdown, status, send time and article rows
/// `(position, title, url, summary)`, then `commit`.
fn editor_fields<'a>(
    subject: &'a str,
    markdown: &'a str,
    status: &'a str,
    articles: &'a [(&'a str, &'a str, &'a str, &'a str)],
    commit: &'a str,
) -> Vec<(&'a str, &'a str)> {
    let mut fields = vec![
        ("issue[subject]", subject),
        ("issue[content_markdown]", markdown),
        ("issue[status]", status),
        ("issue[scheduled_for]", ""),
    ];
    for (position, title, url, summary) in articles {
        fields.extend([
            (POSITION, *position),
            (TITLE, *title),
            (URL, *url),
            (SUMMARY, *summary),
        ]);
    }
    // The empty row every editor offers.
    fields.extend([(POSITION, ""), (TITLE, ""), (URL, ""), (SUMMARY, "")]);
    fields.push(("commit", commit));
    fields
}

/// Creates an issue through the dashboard's editor; returns its id.
fn create_in_dashboard(
    owner: &Owner,
    subject: &str,
    markdown: &str,
    status: &str,
    articles: &[(&str, &str, &str, &str)],
) -> i64 {
    let resp = owner.client.submit(
        &format!("{}/new", issues_url(owner)),
        &issues_url(owner),
        &editor_fields(subject, markdown, status, articles, "save"),
    );
    let to = resp.redirect();
    let id: i64 = to
        .rsplit('/')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("unexpected redirect {to}"));
    assert_eq!(to, issue_url(owner, id));
    id
}

/// The issue as the API sees it.
fn api_issue(owner: &Owner, id: i64) -> Value {
    let resp = owner.get(&format!("/issues/{id}"));
    resp.expect(200);
    resp.json()
}

fn article_titles(issue: &Value) -> Vec<String> {
    issue["articles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["title"].as_str().unwrap().to_string())
        .collect()
}

/// Posts `fields` (with a CSRF token from the issue list) to `action`.
fn post(owner: &Owner, action: &str, fields: &[(&str, &str)]) -> Resp {
    owner.client.submit(&issues_url(owner), action, fields)
}

fn add_subscriber(owner: &Owner, email: &str) {
    owner
        .post("/subscribers", &json!({ "email": email }))
        .expect(201);
}

/// The value of the `srcdoc` attribute of the iframe with `id`, unescaped once: the document
/// the frame shows.
fn srcdoc(page: &str, id: &str) -> String {
    let at = page
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} on the page:\n{page}"));
    let tag_start = page[..at].rfind('<').unwrap();
    let tag = &page[tag_start..];
    let start = tag.find("srcdoc=\"").expect("a srcdoc") + 8;
    let end = start + tag[start..].find('"').unwrap();
    crate::support::http::unescape(&tag[start..end])
}

/// The next Tuesday 09:00 UTC after now (the `weekly` slot), as a datetime-local value.
fn next_weekly_slot() -> String {
    next_tuesday_nine(jiff::Timestamp::now())
        .strftime("%Y-%m-%dT%H:%M")
        .to_string()
}

#[test]
fn dash_issues_editor_creates_edits_and_orders_articles() {
    let app = spawn_app();
    let owner = onboard(&app, "Editor Desk");
    let list = owner.client.get(&issues_url(&owner));
    list.expect(200);
    assert!(list.body.contains("No issues here yet"));
    for tab in ["all", "draft", "approved", "scheduled", "sending", "sent"] {
        assert!(list.body.contains(&format!(">{tab}</a>")), "tab {tab}");
    }

    let id = create_in_dashboard(
        &owner,
        "Monday notes",
        "Hello **readers**.",
        "draft",
        &[
            ("1", "Alpha", "https://example.com/alpha", "First."),
            ("2", "Beta", "https://example.com/beta", "Second."),
        ],
    );
    let issue = api_issue(&owner, id);
    assert_eq!(issue["status"], "draft");
    assert_eq!(issue["content_markdown"], "Hello **readers**.");
    assert_eq!(article_titles(&issue), ["Alpha", "Beta"]);
    let page = owner.client.get(&issue_url(&owner, id));
    page.expect(200);
    assert!(page.body.contains("Issue created."), "the notice");
    assert!(page.body.contains("<h1>Monday notes</h1>"));

    // The editor shows the stored rows (numbered) and one empty row.
    let edit = owner.client.get(&format!("{}/edit", issue_url(&owner, id)));
    edit.expect(200);
    assert_eq!(edit.body.matches(&format!("name=\"{TITLE}\"")).count(), 3);
    assert!(edit.body.contains("value=\"Alpha\"") && edit.body.contains("value=\"Beta\""));

    // "Add another article row" shows the form again with one more empty row; nothing saved.
    let more = post(
        &owner,
        &issue_url(&owner, id),
        &[
            vec![("_method", "patch")],
            editor_fields(
                "Monday notes",
                "Hello **readers**.",
                "draft",
                &[("1", "Alpha", "https://example.com/alpha", "First.")],
                "add_article",
            ),
        ]
        .concat(),
    );
    more.expect(200);
    assert_eq!(more.body.matches(&format!("name=\"{TITLE}\"")).count(), 3);
    assert_eq!(article_titles(&api_issue(&owner, id)), ["Alpha", "Beta"]);

    // Reorder (Beta first), remove Alpha (row 0), add Gamma in the empty row; edit the text.
    let mut fields = vec![("_method", "patch")];
    fields.extend(editor_fields(
        "Monday notes, revised",
        "Hello again.",
        "draft",
        &[
            ("2", "Alpha", "https://example.com/alpha", "First."),
            ("1", "Beta", "https://example.com/beta", "Second."),
            ("3", "Gamma", "https://example.com/gamma", "Third."),
        ],
        "save",
    ));
    fields.push((REMOVE, "0"));
    let saved = post(&owner, &issue_url(&owner, id), &fields);
    assert_eq!(saved.redirect(), issue_url(&owner, id));
    let issue = api_issue(&owner, id);
    assert_eq!(issue["subject"], "Monday notes, revised");
    assert_eq!(issue["content_markdown"], "Hello again.");
    assert_eq!(article_titles(&issue), ["Beta", "Gamma"]);
    assert_eq!(issue["articles"][1]["position"], 2);

    // Swap by numbers only.
    let mut fields = vec![("_method", "patch")];
    fields.extend(editor_fields(
        "Monday notes, revised",
        "Hello again.",
        "draft",
        &[
            ("2", "Beta", "https://example.com/beta", "Second."),
            ("1", "Gamma", "https://example.com/gamma", "Third."),
        ],
        "save",
    ));
    post(&owner, &issue_url(&owner, id), &fields).redirect();
    assert_eq!(article_titles(&api_issue(&owner, id)), ["Gamma", "Beta"]);

    // The list, by status tab and paged.
    let drafts = owner
        .client
        .get(&format!("{}?status=draft", issues_url(&owner)));
    drafts.expect(200);
    assert!(drafts.body.contains("Monday notes, revised"));
    assert!(
        drafts
            .body
            .contains(&format!("href=\"{}\"", issue_url(&owner, id)))
    );
    let sent = owner
        .client
        .get(&format!("{}?status=sent", issues_url(&owner)));
    sent.expect(200);
    assert!(!sent.body.contains("Monday notes"));
    owner
        .client
        .get(&format!("{}?status=bogus", issues_url(&owner)))
        .expect(422);
    owner
        .client
        .get(&format!("{}?page=0", issues_url(&owner)))
        .expect(422);
    for n in 0..26 {
        owner
            .post(
                "/issues",
                &json!({"issue": {"subject": format!("Filler {n}")}}),
            )
            .expect(201);
    }
    let first = owner.client.get(&issues_url(&owner));
    assert!(first.body.contains("rel=\"next\"") && !first.body.contains("Monday notes"));
    let second = owner.client.get(&format!("{}?page=2", issues_url(&owner)));
    assert!(second.body.contains("Monday notes") && second.body.contains("rel=\"prev\""));
}

#[test]
fn dash_issues_bad_input_is_422_and_changes_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Strict Desk");
    let count = || app.count("SELECT count(*) FROM issues");

    let resp = post(
        &owner,
        &issues_url(&owner),
        &editor_fields("   ", "text", "draft", &[], "save"),
    );
    resp.expect(422);
    assert!(
        resp.body.contains("Subject can&#39;t be blank")
            || resp.body.contains("Subject can't be blank"),
        "{}",
        resp.body
    );
    assert_eq!(count(), 0);

    let id = create_in_dashboard(
        &owner,
        "Kept",
        "Original",
        "draft",
        &[("1", "Keep", "https://example.com/keep", "")],
    );
    let before = api_issue(&owner, id);
    let url = issue_url(&owner, id);
    let attempts: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            editor_fields(
                "Changed",
                "Changed",
                "draft",
                &[("1", "Bad", "javascript:alert(1)", "")],
                "save",
            ),
            "Article 1 URL must be an absolute http(s) URL",
        ),
        (
            editor_fields(
                "Changed",
                "Changed",
                "draft",
                &[("first", "Keep", "https://example.com/keep", "")],
                "save",
            ),
            "Article row 1 position must be a whole number",
        ),
        (
            editor_fields("Changed", "Changed", "sent", &[], "save"),
            "Status must be one of draft, scheduled or approved",
        ),
        (
            editor_fields(
                "Changed",
                "Changed",
                "draft",
                &[("1", "", "https://example.com/x", "s")],
                "save",
            ),
            "Article 1 title can",
        ),
    ];
    for (fields, message) in attempts {
        let mut all = vec![("_method", "patch")];
        all.extend(fields);
        let resp = post(&owner, &url, &all);
        resp.expect(422);
        assert!(
            resp.body.contains(message),
            "{message:?} in:\n{}",
            resp.body
        );
        // The typed values are kept.
        assert!(resp.body.contains("value=\"Changed\""));
        assert_eq!(api_issue(&owner, id), before, "nothing changed");
    }
    // A send time in the past, in the editor and in the schedule form.
    let mut all = vec![("_method", "patch")];
    let mut fields = editor_fields("Changed", "Changed", "scheduled", &[], "save");
    fields[3] = ("issue[scheduled_for]", "2020-01-01T09:00");
    all.extend(fields);
    let resp = post(&owner, &url, &all);
    resp.expect(422);
    assert!(
        resp.body.contains("Send time must be in the future"),
        "{}",
        resp.body
    );
    let resp = post(
        &owner,
        &format!("{url}/schedule"),
        &[("scheduled_for", "2020-01-01T09:00")],
    );
    resp.expect(422);
    assert!(
        resp.body.contains("Send time must be in the future"),
        "{}",
        resp.body
    );
    let resp = post(
        &owner,
        &format!("{url}/schedule"),
        &[("scheduled_for", "next week")],
    );
    resp.expect(422);
    assert!(resp.body.contains("ISO 8601"), "{}", resp.body);
    assert_eq!(api_issue(&owner, id), before, "nothing changed");
    // A preview with bad input is refused the same way.
    let resp = post(
        &owner,
        &issues_url(&owner),
        &editor_fields("", "x", "draft", &[], "preview"),
    );
    resp.expect(422);
    assert!(!resp.body.contains("id=\"email-preview\""));
    assert_eq!(count(), 1);
}

#[test]
fn dash_issues_preview_renders_markdown_with_raw_html_escaped() {
    let app = spawn_app();
    let owner = onboard(&app, "Preview Desk");
    let markdown = "Some **bold** words.\n\n<script>alert(1)</script>\n\n- one\n- two";
    let resp = post(
        &owner,
        &issues_url(&owner),
        &editor_fields(
            "Preview me",
            markdown,
            "draft",
            &[(
                "1",
                "Linked piece",
                "https://example.com/piece",
                "Why it matters.",
            )],
            "preview",
        ),
    );
    resp.expect(200);
    assert_eq!(
        app.count("SELECT count(*) FROM issues"),
        0,
        "a preview saves nothing"
    );
    assert!(
        !resp.body.contains("<script>alert"),
        "never raw on the page"
    );
    let policy = resp.header("content-security-policy").unwrap_or_default();
    assert!(policy.contains("script-src 'self'"), "{policy}");
    for id in ["email-preview", "web-preview"] {
        let doc = srcdoc(&resp.body, id);
        assert!(doc.contains("<strong>bold</strong>"), "{id}: {doc}");
        assert!(
            doc.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{id}: {doc}"
        );
        assert!(!doc.contains("<script"), "{id}: {doc}");
        assert!(doc.contains("<li>one</li>"), "{id}");
        assert!(doc.contains("Linked piece") && doc.contains("https://example.com/piece"));
    }
    // The e-mail is the sender's own rendering: its unsubscribe footer; the web page is the
    // public site's: its subscribe call.
    assert!(srcdoc(&resp.body, "email-preview").contains("Unsubscribe"));
    assert!(srcdoc(&resp.body, "web-preview").contains("Get the next issue by e-mail"));
    // The typed values stay in the form.
    assert!(resp.body.contains("value=\"Preview me\""));

    // The saved issue's preview page.
    let id = create_in_dashboard(&owner, "Saved preview", markdown, "draft", &[]);
    let page = owner
        .client
        .get(&format!("{}/preview", issue_url(&owner, id)));
    page.expect(200);
    let email = srcdoc(&page.body, "email-preview");
    assert!(email.contains("<strong>bold</strong>") && email.contains("&lt;script&gt;"));
    assert!(srcdoc(&page.body, "web-preview").contains("<h1>Saved preview</h1>"));
}

#[test]
fn dash_issues_approve_schedule_publish_and_delete() {
    let app = spawn_app();
    let owner = onboard(&app, "Action Desk");
    let id = create_in_dashboard(&owner, "Act on me", "Content here.", "draft", &[]);
    let url = issue_url(&owner, id);

    // Publishing a draft is refused with the domain's message.
    let resp = post(&owner, &format!("{url}/publish"), &[]);
    resp.expect(422);
    assert!(resp.body.contains("Approve the issue before publishing it"));

    let resp = post(&owner, &format!("{url}/approve"), &[]);
    assert_eq!(resp.redirect(), url);
    assert_eq!(api_issue(&owner, id)["status"], "approved");

    // The schedule form defaults to the next weekly slot (Tuesday 09:00 UTC) and says UTC.
    let page = owner.client.get(&url);
    page.expect(200);
    let default = attribute_after(&page.body, "name=\"scheduled_for\"", "value").unwrap();
    assert_eq!(default, next_weekly_slot());
    assert!(page.body.contains("Send at (UTC)") && page.body.contains("Times are in UTC"));
    let resp = post(
        &owner,
        &format!("{url}/schedule"),
        &[("scheduled_for", &default)],
    );
    assert_eq!(resp.redirect(), url);
    let scheduled = api_issue(&owner, id);
    assert_eq!(scheduled["status"], "scheduled");
    assert_eq!(scheduled["scheduled_for"], format!("{default}:00.000Z"));
    // Unschedule keeps it approved.
    post(&owner, &format!("{url}/approve"), &[]).redirect();
    assert_eq!(api_issue(&owner, id)["status"], "approved");

    // Delete is for drafts only: refused here, with the domain's message.
    let resp = post(&owner, &url, &[("_method", "delete")]);
    resp.expect(422);
    assert!(resp.body.contains("Only draft issues can be deleted"));
    api_issue(&owner, id);

    // Publish: the page goes live on the site.
    let path = api_issue(&owner, id)["path"].as_str().unwrap().to_string();
    let site = app.site_client(&owner.subdomain);
    site.get(&format!("/p/{path}")).expect(404);
    let resp = post(&owner, &format!("{url}/publish"), &[]);
    assert_eq!(resp.redirect(), url);
    let live = site.get(&format!("/p/{path}"));
    live.expect(200);
    assert!(live.body.contains("Act on me") && live.body.contains("Content here."));
    let page = owner.client.get(&url);
    assert!(page.body.contains("Published at http://"), "the notice");
    assert!(page.body.contains(&format!("/p/{path}</a>")));

    // A draft is deleted after its confirmation page.
    let draft = create_in_dashboard(&owner, "Throwaway", "", "draft", &[]);
    let draft_url = issue_url(&owner, draft);
    let confirm = owner.client.get(&format!("{draft_url}/delete"));
    confirm.expect(200);
    assert!(confirm.body.contains(&format!("action=\"{draft_url}\"")));
    let resp = owner.client.submit(
        &format!("{draft_url}/delete"),
        &draft_url,
        &[("_method", "delete")],
    );
    assert_eq!(resp.redirect(), issues_url(&owner));
    owner.get(&format!("/issues/{draft}")).expect(404);
    owner.client.get(&draft_url).expect(404);
}

#[test]
fn dash_issues_send_progress_and_report() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Report Desk");
    let (reader, leaver, bouncer, gone) = (
        unique_email("reader"),
        unique_email("leaver"),
        unique_email("bouncer"),
        unique_email("gone"),
    );
    for email in [&reader, &leaver, &bouncer, &gone] {
        add_subscriber(&owner, email);
    }
    let gone_id = owner.get("/subscribers?per_page=100").json()["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["email"] == gone.as_str())
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    owner
        .patch(
            &format!("/subscribers/{gone_id}"),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    app.smtp.set_rules(Rules {
        permanent: vec![bouncer.clone()],
        ..Rules::default()
    });
    let id = create_in_dashboard(
        &owner,
        "Measured issue",
        "Read the [guide](https://example.org/guide).",
        "approved",
        &[("1", "Piece", "https://example.com/piece", "")],
    );
    let url = issue_url(&owner, id);

    // The confirmation states the recipients: the three active subscribers.
    let confirm = owner.client.get(&format!("{url}/send"));
    confirm.expect(200);
    assert!(
        confirm.body.contains("data-recipients=\"3\""),
        "{}",
        confirm.body
    );
    assert!(confirm.body.contains("</strong> active subscribers"));
    let resp = owner
        .client
        .submit(&format!("{url}/send"), &format!("{url}/send"), &[]);
    assert_eq!(resp.redirect(), url);

    let mail = app.smtp.wait_for_message_to(&reader, 1);
    assert_eq!(mail.header("Subject").as_deref(), Some("Measured issue"));
    app.smtp.wait_for_message_to(&leaver, 1);
    let progress = wait_for(
        "the progress to reach the total",
        Duration::from_secs(30),
        || {
            let p = owner.client.get(&format!("{url}/progress")).json();
            (p["status"] == "sent").then_some(p)
        },
    );
    assert_eq!(
        (
            &progress["total"],
            &progress["sent"],
            &progress["bounced"],
            &progress["done"],
            &progress["percent"]
        ),
        (&json!(3), &json!(2), &json!(1), &json!(3), &json!(100))
    );

    // The reader opens and clicks; the leaver unsubscribes through the mail's link.
    let site = app.site_client(&owner.subdomain);
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);
    let html = mail.html();
    let local = |u: &str| u.strip_prefix(&origin).unwrap().to_string();
    let values = |attr: &str| -> Vec<String> {
        html.split(&format!("{attr}=\""))
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .map(crate::support::http::unescape)
            .collect()
    };
    let pixel = values("src")
        .into_iter()
        .find(|s| s.contains("/o/"))
        .unwrap();
    site.get(&local(&pixel)).expect(200);
    let click = values("href")
        .into_iter()
        .find(|h| h.contains("/c/") && h.contains("guide"))
        .unwrap();
    assert_eq!(site.get(&local(&click)).status, 302);
    let leave = app.smtp.messages_to(&leaver)[0]
        .header("List-Unsubscribe")
        .unwrap();
    let leave = leave.trim_start_matches('<').trim_end_matches('>');
    site.post_form(&local(leave), &[("List-Unsubscribe", "One-Click")])
        .expect(200);

    let page = owner.client.get(&url);
    page.expect(200);
    for (cell, value) in [
        ("report-recipients", 3),
        ("report-delivered", 2),
        ("report-opens", 1),
        ("report-clicks", 1),
        ("report-bounces", 1),
        ("report-unsubscribes", 1),
    ] {
        assert!(
            page.body.contains(&format!("id=\"{cell}\">{value}<")),
            "{cell} = {value} in:\n{}",
            page.body
        );
    }
    assert!(page.body.contains("50%"), "open rate of delivered");
    // Every column of the report's table has a name (axe: empty-table-header).
    assert!(
        !page.body.contains("<th></th>"),
        "an unnamed column in the report"
    );

    // A sent issue's web copy can be edited (tests/it/after_send.rs), not its subject or
    // status: a full editor posted anyway is refused by name and changes nothing.
    assert!(page.body.contains(&format!("href=\"{url}/edit\"")));
    owner.client.get(&format!("{url}/edit")).expect(200);
    let before = api_issue(&owner, id);
    let mut fields = vec![("_method", "patch")];
    fields.extend(editor_fields("Rewritten", "x", "draft", &[], "save"));
    let resp = post(&owner, &url, &fields);
    resp.expect(422);
    assert!(
        resp.body
            .contains("Subject can&#39;t be changed once the issue is sent")
            || resp
                .body
                .contains("Subject can't be changed once the issue is sent"),
        "{}",
        resp.body
    );
    assert_eq!(api_issue(&owner, id), before);
    let resp = owner
        .client
        .submit(&format!("{url}/send"), &format!("{url}/send"), &[]);
    resp.expect(422);
    assert!(
        resp.body
            .contains("Only approved or scheduled issues can be sent")
    );
    assert_eq!(app.smtp.messages_to(&reader).len(), 1, "no second copy");
}

#[test]
fn dash_issues_refused_sends_show_the_domain_message() {
    let app = spawn_app();
    let owner = onboard(&app, "Refusal Desk");
    let id = create_in_dashboard(&owner, "Empty", "", "approved", &[]);
    let url = issue_url(&owner, id);
    let check = |message: &str| {
        let page = owner.client.get(&format!("{url}/send"));
        page.expect(200);
        assert!(
            page.body.contains(message),
            "{message:?} in:\n{}",
            page.body
        );
        assert!(page.body.contains("Nothing was sent"));
        assert!(!page.body.contains(&format!("action=\"{url}/send\"")));
        let resp = post(&owner, &format!("{url}/send"), &[]);
        resp.expect(422);
        assert!(
            resp.body.contains(message),
            "{message:?} in:\n{}",
            resp.body
        );
        assert_eq!(api_issue(&owner, id)["status"], "approved");
    };
    check("The newsletter has no active subscribers");
    add_subscriber(&owner, &unique_email("only"));
    check("Sending e-mail needs the paid tier");
    assert_eq!(app.cli(&["tier", &owner.subdomain, "paid"]).0, 0);
    check("The issue has no content and no articles");
    assert_eq!(app.cli(&["status", &owner.subdomain, "paused"]).0, 0);
    check("The newsletter is paused; resume it to send");
    assert_eq!(app.cli(&["status", &owner.subdomain, "cancelled"]).0, 0);
    check("This newsletter is cancelled and read-only");
    // Other actions on a cancelled newsletter show the same message on the page.
    let resp = post(&owner, &format!("{url}/publish"), &[]);
    resp.expect(422);
    assert!(resp.body.contains("cancelled and read-only"));
    assert!(
        app.smtp
            .messages()
            .iter()
            .all(|m| m.header("Subject").as_deref() != Some("Empty"))
    );
}

#[test]
fn dash_issues_other_users_get_404_for_every_url() {
    let app = spawn_app();
    let alice = onboard(&app, "Alice Post");
    let bob = onboard(&app, "Bob Post");
    let a_issue = create_in_dashboard(&alice, "Alice only", "Private.", "draft", &[]);
    let b_issue = create_in_dashboard(&bob, "Bob's", "Bob.", "draft", &[]);
    let before = api_issue(&alice, a_issue);
    let (a, b) = (alice.newsletter_id, bob.newsletter_id);
    // Alice's newsletter with Alice's issue, and Bob's newsletter with Alice's issue.
    let foreign = [
        format!("/newsletters/{a}/issues/{a_issue}"),
        format!("/newsletters/{b}/issues/{a_issue}"),
    ];
    for path in [
        format!("/newsletters/{a}/issues"),
        format!("/newsletters/{a}/issues/new"),
    ] {
        let resp = bob.client.get(&path);
        assert_eq!(resp.status, 404, "GET {path}");
    }
    for base in &foreign {
        for suffix in ["", "/edit", "/preview", "/send", "/delete", "/progress"] {
            let path = format!("{base}{suffix}");
            assert_eq!(bob.client.get(&path).status, 404, "GET {path}");
        }
    }
    let bob_page = format!("/newsletters/{b}/issues");
    let editor = editor_fields("Hijacked", "x", "draft", &[], "save");
    let create = bob
        .client
        .submit(&bob_page, &format!("/newsletters/{a}/issues"), &editor);
    assert_eq!(create.status, 404, "POST create");
    for base in &foreign {
        let mut patch = vec![("_method", "patch")];
        patch.extend(editor.iter().copied());
        let posts: Vec<(String, Vec<(&str, &str)>)> = vec![
            (base.clone(), patch),
            (base.clone(), vec![("_method", "delete")]),
            (format!("{base}/approve"), vec![]),
            (format!("{base}/schedule"), vec![("scheduled_for", "")]),
            (format!("{base}/send"), vec![]),
            (format!("{base}/publish"), vec![]),
        ];
        for (action, fields) in posts {
            let resp = bob.client.submit(&bob_page, &action, &fields);
            assert_eq!(resp.status, 404, "POST {action} {fields:?}");
        }
    }
    assert_eq!(
        api_issue(&alice, a_issue),
        before,
        "Alice's issue is unchanged"
    );
    assert_eq!(
        alice.get("/issues").json()["issues"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Bob's own issue still answers him.
    bob.client
        .get(&format!("/newsletters/{b}/issues/{b_issue}"))
        .expect(200);
}

#[test]
fn dash_issues_posts_without_csrf_token_are_refused() {
    let app = spawn_app();
    let owner = onboard(&app, "Guarded Desk");
    let id = create_in_dashboard(&owner, "Guarded", "Text.", "draft", &[]);
    let before = api_issue(&owner, id);
    let url = issue_url(&owner, id);
    let editor = editor_fields("Forged", "x", "draft", &[], "save");
    let mut patch = vec![("_method", "patch")];
    patch.extend(editor.iter().copied());
    for (action, fields) in [
        (issues_url(&owner), editor.clone()),
        (url.clone(), patch),
        (url.clone(), vec![("_method", "delete")]),
        (format!("{url}/approve"), vec![]),
        (format!("{url}/schedule"), vec![("scheduled_for", "")]),
        (format!("{url}/send"), vec![]),
        (format!("{url}/publish"), vec![]),
    ] {
        let resp = owner.client.post_form(&action, &fields);
        assert_eq!(resp.status, 403, "POST {action} without a token");
        let mut forged = vec![("authenticity_token", "0123456789abcdef")];
        forged.extend(fields.iter().copied());
        let resp = owner.client.post_form(&action, &forged);
        assert_eq!(resp.status, 403, "POST {action} with a wrong token");
    }
    assert_eq!(api_issue(&owner, id), before);
    assert_eq!(app.count("SELECT count(*) FROM issues"), 1);
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn dash_issues_written_previewed_and_sent_in_chromium() {
    let Some(driver) = Driver::start("dashboard issues") else {
        return;
    };
    let app = spawn_app_with(&["--send-concurrency", "1"]);
    let owner = onboard_paid(&app, "Chromium Dispatch");
    let readers: Vec<String> = (0..5).map(|_| unique_email("chromium-reader")).collect();
    for email in &readers {
        add_subscriber(&owner, email);
    }
    // Each message takes a moment, so the page sees the send in progress.
    app.smtp.set_rules(Rules {
        delay: Duration::from_millis(500),
        ..Rules::default()
    });
    let base = app.base_url.clone();
    let list = issues_url(&owner);
    let (observed, final_text) = runtime().block_on(async {
        let c = driver.session().await;
        sign_in(&c, &base, &owner.email).await;

        c.goto(&format!("{base}{list}")).await.unwrap();
        click(&c, &format!("a[href=\"{list}/new\"]")).await;
        wait_for_element(&c, "textarea[name=\"issue[content_markdown]\"]").await;
        fill(&c, "issue[subject]", "Clicked together").await;
        fill(
            &c,
            "issue[content_markdown]",
            "Written in **Chromium**.\n\n<script>alert(1)</script>",
        )
        .await;
        let fill_row = |row: usize, title: &'static str, url: &'static str| {
            let c = c.clone();
            async move {
                for (name, text) in [(TITLE, title), (URL, url), (SUMMARY, "Worth a read.")] {
                    let fields = c
                        .find_all(Locator::Css(&format!("[name=\"{name}\"]")))
                        .await
                        .unwrap();
                    fields[row].send_keys(text).await.unwrap();
                }
            }
        };
        fill_row(0, "First article", "https://example.com/first").await;
        click(&c, "button[value=add_article]").await;
        wait_for_element(&c, "input[name=\"issue[articles_remove][]\"]").await;
        fill_row(1, "Second article", "https://example.com/second").await;
        screenshot(&c, "dash-issue-editor").await;
        c.set_window_size(390, 844).await.unwrap();
        screenshot(&c, "dash-issue-editor-phone").await;
        c.set_window_size(1280, 900).await.unwrap();
        click(&c, "button[value=preview]").await;
        let frame = wait_for_element(&c, "#email-preview").await;
        let email = frame.attr("srcdoc").await.unwrap().unwrap_or_default();
        assert!(email.contains("<strong>Chromium</strong>"), "{email}");
        assert!(email.contains("First article") && email.contains("Second article"));
        assert!(email.contains("&lt;script&gt;"), "{email}");
        let web = c
            .find(Locator::Css("#web-preview"))
            .await
            .unwrap()
            .attr("srcdoc")
            .await
            .unwrap()
            .unwrap_or_default();
        assert!(web.contains("<h1>Clicked together</h1>"));
        c.execute(
            "document.getElementById('preview').scrollIntoView()",
            vec![],
        )
        .await
        .unwrap();
        screenshot(&c, "dash-issue-preview").await;

        click(&c, "button[value=save]").await;
        wait_for_element(&c, "#issue-status").await;
        screenshot(&c, "dash-issue-draft").await;
        click(&c, "form[action$=\"/approve\"] button").await;
        wait_for_element(&c, "a[href$=\"/send\"]").await;
        click(&c, "a[href$=\"/send\"]").await;
        let count = wait_for_element(&c, "#recipient-count").await;
        assert!(count.text().await.unwrap().contains("5 active subscribers"));
        screenshot(&c, "dash-issue-send-confirm").await;
        click(&c, "form[action$=\"/send\"] button").await;

        wait_for_element(&c, "#send-progress").await;
        c.execute("window.__notReloaded = true", vec![])
            .await
            .unwrap();
        let read = "const p = document.getElementById('send-progress'); \
                    return [p.value, p.max, window.__notReloaded === true, \
                    document.querySelector('[data-progress=percent]').textContent];";
        let mut observed = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let state = c.execute(read, vec![]).await.unwrap();
            let (value, max) = (state[0].as_f64().unwrap(), state[1].as_f64().unwrap());
            assert_eq!(state[2], true, "the page was reloaded");
            observed.push(value);
            if max == 5.0 && value == 5.0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "progress stuck at {observed:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let done = wait_for_element(&c, ".progress-done:not([hidden])").await;
        let badge = c.find(Locator::Css("#issue-status .status")).await.unwrap();
        assert_eq!(badge.text().await.unwrap(), "sent");
        let percent = c
            .find(Locator::Css("[data-progress=percent]"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        screenshot(&c, "dash-issue-sent-progress").await;
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console errors: {errors:?}");
        done.find(Locator::Css("a"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        wait_for_element(&c, "#report").await;
        screenshot(&c, "dash-issue-report").await;
        c.close().await.unwrap();
        (observed, percent)
    });
    assert_eq!(final_text, "100");
    assert!(
        observed.first().is_some_and(|v| *v < 5.0),
        "the bar moved while the page stayed: {observed:?}"
    );
    for email in &readers {
        let mail = app.smtp.wait_for_message_to(email, 1);
        assert_eq!(mail.header("Subject").as_deref(), Some("Clicked together"));
        assert!(mail.html().contains("Second article"));
    }
}
