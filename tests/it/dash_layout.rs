//! The dashboard's layout (issue 29, "every layout dent fixed"): every page at desktop width
//! and at 390 px, light and dark, without sideways scroll and dark when the system is (one
//! Chromium walk, with screenshots); the styled 404 and 500 pages; the refused rows of an
//! import as CSV, with the file's own line numbers; a webhook delivery's payload; the API
//! reference made for a phone and linked from the dashboard; copy buttons on DNS records.

use std::time::Duration;

use crate::support::browser::{
    Driver, click, fill, runtime, screenshot, sign_in, wait_for_element,
};
use crate::support::http::unescape;
use crate::support::send::{approved_issue, send_now, wait_status};
use crate::support::*;

/// The dashboard's frame, which every page (the error pages too) has: the top bar, the main
/// part and the footer with the API reference.
#[track_caller]
fn assert_framed(what: &str, resp: &Resp) {
    assert!(
        resp.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "{what}: {:?}",
        resp.header("content-type")
    );
    for part in [
        "<!DOCTYPE html>",
        "<header class=\"top\">",
        "<nav aria-label=\"Main\">",
        "<main",
        "<footer class=\"bottom\">",
        "href=\"/api/v1/docs\"",
        "rel=\"stylesheet\" href=\"/assets/app-",
    ] {
        assert!(
            resp.body.contains(part),
            "{what} lacks {part:?}:\n{}",
            resp.body
        );
    }
}

/// The server's database, to change under it.
fn writable_db(app: &App) -> rusqlite::Connection {
    rusqlite::Connection::open(app.data_dir().join("broadsheet.db")).unwrap()
}

#[test]
fn unknown_dashboard_addresses_get_the_styled_not_found_page() {
    let app = spawn_app();
    let owner = onboard(&app, "Lost And Found");
    let other = onboard(&app, "Somebody Else");
    let nid = owner.newsletter_id;
    for (who, client, path) in [
        ("signed in", &owner.client, "/nope".to_string()),
        (
            "signed in",
            &owner.client,
            "/newsletters/999999".to_string(),
        ),
        (
            "signed in",
            &owner.client,
            format!("/newsletters/{nid}/nope"),
        ),
        (
            "signed in",
            &owner.client,
            format!("/newsletters/{nid}/issues/999999"),
        ),
        (
            "signed in",
            &owner.client,
            format!("/newsletters/{nid}/subscribers/imports/999999/refused.csv"),
        ),
        (
            "another owner",
            &other.client,
            format!("/newsletters/{nid}"),
        ),
        (
            "another owner",
            &other.client,
            format!("/newsletters/{nid}/settings"),
        ),
        ("signed out", &app.client(), "/nope".to_string()),
        ("signed out", &app.client(), "/assets/nope.css".to_string()),
    ] {
        let resp = client.get(&path);
        let what = format!("{path} ({who})");
        assert_eq!(resp.status, 404, "{what}: {}", resp.body);
        assert_framed(&what, &resp);
        assert!(
            resp.body.contains("<h1>Not found</h1>"),
            "{what}: {}",
            resp.body
        );
        assert!(resp.body.contains("<main class=\"narrow\" id=\"error\">"));
    }
    // The API keeps its JSON errors, known version or not.
    for (path, resp) in [
        ("/api/v1/nope", owner.get("/nope")),
        ("/api/nope", owner.client.get("/api/nope")),
        ("/api/v2/newsletter", owner.client.get("/api/v2/newsletter")),
    ] {
        assert_eq!(resp.status, 404, "{path}: {}", resp.body);
        assert!(
            resp.header("content-type")
                .is_some_and(|t| t.starts_with("application/json")),
            "{path}: {:?}",
            resp.header("content-type")
        );
        assert_eq!(resp.json()["error"]["code"], "not_found", "{path}");
    }
    // A path the dashboard knows, asked with a method it does not take, still says which.
    let wrong = owner
        .client
        .request("PUT", &format!("/newsletters/{nid}/settings"), &[], None)
        .unwrap();
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.header("allow"), Some("GET, HEAD"));
}

#[test]
fn a_failure_gets_the_styled_error_page_without_its_details() {
    let app = spawn_app();
    let owner = onboard(&app, "Broken Pipe");
    let domains = format!("/newsletters/{}/custom_domains", owner.newsletter_id);
    owner.client.get(&domains).expect(200);
    // The page's table is gone from under the server: its query fails.
    writable_db(&app)
        .execute_batch("ALTER TABLE custom_domains RENAME TO custom_domains_elsewhere")
        .unwrap();
    let failed = owner.client.get(&domains);
    assert_eq!(failed.status, 500, "{}", failed.body);
    assert_framed("the 500 page", &failed);
    assert!(
        failed.body.contains("<h1>Something went wrong</h1>"),
        "{}",
        failed.body
    );
    assert!(
        !failed.body.contains("custom_domains"),
        "no detail leaks: {}",
        failed.body
    );
    assert!(
        app.log().contains("web: internal error"),
        "the log has the detail"
    );
}

/// The rows of a CSV download, without its header.
fn csv_rows(body: &str) -> Vec<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(body.as_bytes());
    assert_eq!(
        reader.headers().unwrap().iter().collect::<Vec<_>>(),
        ["line", "email", "reason"]
    );
    reader
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

/// `<td>` cells as they follow each other in a table row.
fn cells(cells: &[&str]) -> String {
    cells.iter().map(|c| format!("<td>{c}</td>")).collect()
}

#[test]
fn refused_rows_download_as_csv_with_the_files_own_line_numbers() {
    let app = spawn_app();
    let owner = onboard(&app, "Counted Lines");
    let nid = owner.newsletter_id;
    // A spreadsheet's export: CRLF line ends, a blank line, a cell over two lines.
    let mut csv = String::from("email,name\r\n"); // line 1
    csv.push_str("ann@example.com,Ann\r\n"); // 2
    csv.push_str("not-an-email,Bad\r\n"); // 3, refused
    csv.push_str("\r\n"); // 4, blank
    csv.push_str("bob@example.com,Bob\r\n"); // 5
    csv.push_str("=evil,Formula\r\n"); // 6, refused
    csv.push_str("\"two\r\nlines\",Quoted\r\n"); // 7 and 8, refused
    csv.push_str("carol@example.com,\r\n"); // 9
    for i in 0..150 {
        csv.push_str(&format!("bad{i},\r\n")); // 10 to 159, refused
    }
    let resp = upload(&owner, "export.csv", csv.as_bytes());
    let import_page = resp.redirect();
    let preview = owner.client.get(&import_page);
    preview.expect(200);
    for row in [
        cells(&["2", "ann@example.com"]),
        cells(&["3", "not-an-email"]),
        cells(&["5", "bob@example.com"]),
        cells(&["6", "=evil"]),
        cells(&["9", "carol@example.com"]),
    ] {
        assert!(
            preview.body.contains(&row),
            "preview lacks {row}:\n{}",
            preview.body
        );
    }
    owner
        .client
        .submit(&import_page, &format!("{import_page}/start"), &[])
        .redirect();
    let done = wait_for("the import to finish", Duration::from_secs(60), || {
        let page = owner.client.get(&import_page);
        page.body.contains("Import finished").then_some(page)
    });
    // The page lists the first 100 and offers them all.
    assert!(
        done.body
            .contains(&cells(&["3", "not-an-email", "Email is invalid"])),
        "{}",
        done.body
    );
    assert!(
        done.body
            .contains(&cells(&["6", "=evil", "Email is invalid"]))
    );
    assert!(
        done.body
            .contains(&cells(&["10", "bad0", "Email is invalid"]))
    );
    assert!(
        done.body.contains("<td>106</td>"),
        "the 100th refused row is listed"
    );
    assert!(!done.body.contains("<td>107</td>"), "the 101st is not");
    assert!(
        done.body.contains("And 53 more refused rows"),
        "{}",
        done.body
    );
    let download = format!("{import_page}/refused.csv");
    assert!(
        done.body
            .contains(&format!("id=\"refused-download\" href=\"{download}\""))
    );

    let file = owner.client.get(&download);
    file.expect(200);
    assert_eq!(file.header("content-type"), Some("text/csv; charset=utf-8"));
    let iid = import_page.rsplit('/').next().unwrap();
    assert_eq!(
        file.header("content-disposition").unwrap(),
        format!(
            "attachment; filename=\"{}-import-{iid}-refused.csv\"",
            owner.subdomain
        )
    );
    let rows = csv_rows(&file.body);
    assert_eq!(rows.len(), 153, "every refused row");
    assert_eq!(rows[0], ["3", "not-an-email", "Email is invalid"]);
    // A cell a spreadsheet would run as a formula is written as text.
    assert_eq!(rows[1], ["6", "'=evil", "Email is invalid"]);
    assert_eq!(
        (rows[2][0].as_str(), rows[2][1].as_str()),
        ("7", "two\r\nlines")
    );
    let lines: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    assert_eq!(lines[3..], (10..160).collect::<Vec<_>>()[..]);
    assert!(
        rows.iter().all(|r| !r[2].is_empty()),
        "each with its reason"
    );

    // Only the owner's, and only under the newsletter it belongs to.
    let other = onboard(&app, "Not Yours");
    assert_eq!(other.client.get(&download).status, 404);
    let elsewhere = format!(
        "/newsletters/{}/subscribers/imports/{iid}/refused.csv",
        other.newsletter_id
    );
    let other_import = other.client.get(&elsewhere);
    assert_eq!(other_import.status, 404);
    assert_framed("another owner's import", &other_import);
    let second = owner.client.get(&format!(
        "/newsletters/{nid}/subscribers/imports/{iid}x/refused.csv"
    ));
    assert_eq!(second.status, 404);
    assert_eq!(app.client().get(&download).redirect(), "/session/new");
}

#[test]
fn a_deliverys_payload_is_shown_pretty_and_bounded() {
    let app = spawn_app();
    let owner = onboard(&app, "Hooked Payloads");
    let nid = owner.newsletter_id;
    listen(&app, &owner, &["subscriber.created"]);
    owner
        .post(
            "/subscribers",
            &json!({"email": "payload@example.com", "name": "Pay Load"}),
        )
        .expect(201);
    let delivery = app.count("SELECT max(id) FROM webhook_deliveries");
    let page_path = format!("/newsletters/{nid}/webhooks/deliveries/{delivery}");
    let list = owner.client.get(&format!("/newsletters/{nid}/webhooks"));
    assert!(
        list.body.contains(&format!("href=\"{page_path}\"")),
        "{}",
        list.body
    );
    assert!(list.body.contains("<th class=\"time\">Time</th>"));

    let page = owner.client.get(&page_path);
    page.expect(200);
    assert_framed("the delivery page", &page);
    let shown = unescape(&page.body);
    let start = shown.find("<pre id=\"payload\">").expect("the payload") + 18;
    let payload = &shown[start..start + shown[start..].find("</pre>").unwrap()];
    let parsed: Value = serde_json::from_str(payload).expect("the payload is the JSON sent");
    let stored: String = app
        .db()
        .query_row(
            "SELECT body FROM webhook_deliveries WHERE id = ?1",
            [delivery],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(parsed, serde_json::from_str::<Value>(&stored).unwrap());
    assert_eq!(
        payload,
        serde_json::to_string_pretty(&parsed).unwrap(),
        "indented"
    );
    assert!(payload.contains("\n  \""), "one field a line: {payload}");
    assert!(payload.contains("payload@example.com"));
    assert!(
        shown.contains("role=\"region\" aria-label=\"Payload\""),
        "a box that scrolls"
    );

    // Another owner's, or one that does not exist: 404.
    let other = onboard(&app, "Other Hooks");
    assert_eq!(other.client.get(&page_path).status, 404);
    let theirs = format!(
        "/newsletters/{}/webhooks/deliveries/{delivery}",
        other.newsletter_id
    );
    assert_eq!(other.client.get(&theirs).status, 404);
    assert_eq!(
        owner
            .client
            .get(&format!("/newsletters/{nid}/webhooks/deliveries/999999"))
            .status,
        404
    );
    assert_eq!(
        owner
            .client
            .get(&format!("/newsletters/{nid}/webhooks/deliveries/x"))
            .status,
        404
    );

    // A huge payload is cut, not pretty-printed, and says so.
    let huge = format!("{{\"filler\": \"{}\"}}", "x".repeat(200_000));
    let db = writable_db(&app);
    db.execute(
        "INSERT INTO webhook_deliveries (subscription_id, uid, event, body, state, created_at, updated_at)
         SELECT subscription_id, 'huge-delivery', event, ?1, 'failed', created_at, updated_at
         FROM webhook_deliveries WHERE id = ?2",
        (&huge, delivery),
    )
    .unwrap();
    let huge_id = db.last_insert_rowid();
    let page = owner
        .client
        .get(&format!("/newsletters/{nid}/webhooks/deliveries/{huge_id}"));
    page.expect(200);
    let cut = format!("The first 65536 of {} characters.", huge.len());
    assert!(page.body.contains(&cut), "{}", &page.body[..2000]);
    assert!(
        page.body.len() < 100_000,
        "bounded: {} bytes",
        page.body.len()
    );
}

#[test]
fn the_api_reference_reads_on_a_phone_and_the_dashboard_links_it() {
    let app = spawn_app();
    let owner = onboard(&app, "Documented");
    let docs = app.client().get("/api/v1/docs");
    docs.expect(200);
    let head = docs.body.trim_start();
    assert!(
        head.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"),
        "{}",
        &head[..200]
    );
    for part in [
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        "<title>API reference · Broadsheet</title>",
        "<a href=\"/newsletters\">← Back to the dashboard</a>",
        "<main id=\"ui\"></main>",
        "prefers-color-scheme: dark",
    ] {
        assert!(docs.body.contains(part), "the reference lacks {part:?}");
    }
    // Its own styles are allowed by their hash like Swagger UI's.
    let policy = docs.header("content-security-policy").unwrap();
    let styles = policy
        .split(';')
        .find(|d| d.trim().starts_with("style-src"))
        .unwrap();
    assert!(styles.matches("'sha256-").count() >= 2, "{policy}");

    let keys = owner
        .client
        .get(&format!("/newsletters/{}/api_keys", owner.newsletter_id));
    assert!(
        keys.body.contains(
            "<p id=\"api-reference\"><a href=\"/api/v1/docs\">Read the API reference</a>"
        ),
        "{}",
        keys.body
    );
    for path in ["/newsletters", "/account", "/session/new"] {
        let page = if path == "/session/new" {
            app.client().get(path)
        } else {
            owner.client.get(path)
        };
        assert_framed(path, &page);
    }
}

#[test]
fn dns_records_wrap_in_their_own_boxes_with_copy_buttons() {
    let app = spawn_app();
    let owner = onboard(&app, "Copied Records");
    set_sender(&owner);
    let nid = owner.newsletter_id;
    let settings = owner.client.get(&format!("/newsletters/{nid}/settings"));
    settings.expect(200);
    for id in [
        "dkim-record-name",
        "dkim-record-value",
        "dkim-record",
        "spf-hint",
        "dmarc-hint",
    ] {
        assert!(
            settings.body.contains(&format!(
                "<div class=\"record\"><code class=\"value\" id=\"{id}\">"
            )),
            "{id}:\n{}",
            settings.body
        );
        assert!(
            settings
                .body
                .contains(&format!("data-copy=\"#{id}\" hidden")),
            "{id}"
        );
    }
    assert_eq!(
        settings.body.matches("src=\"/assets/widgets.js\"").count(),
        1
    );
    let value = attribute_text(&settings.body, "id=\"dkim-record-value\"");
    assert!(
        value.starts_with("v=DKIM1; k=rsa; p=") && value.len() > 300,
        "{value}"
    );

    let domains = format!("/newsletters/{nid}/custom_domains");
    let added = owner.client.submit(
        &format!("{domains}/choose_method"),
        &domains,
        &[
            ("custom_domain[method]", "subdomain"),
            ("custom_domain[domain]", "www.example.com"),
        ],
    );
    let shown = owner.client.get(&added.redirect());
    shown.expect(200);
    for i in 0..2 {
        for part in ["name", "value"] {
            assert!(
                shown
                    .body
                    .contains(&format!("data-copy=\"#record-{i}-{part}\" hidden")),
                "record {i} {part}:\n{}",
                shown.body
            );
        }
    }
    assert_eq!(
        attribute_text(&shown.body, "id=\"record-1-name\""),
        "_broadsheet-verify.www.example.com"
    );
    assert!(shown.body.contains("src=\"/assets/widgets.js\""));
    let css = owner.client.get("/assets/app.css").body;
    assert!(
        css.contains(".record pre, .record code.value"),
        "the boxes wrap anywhere"
    );
}

/// The text of the element whose start tag holds `marker`.
fn attribute_text(html: &str, marker: &str) -> String {
    let at = html.find(marker).unwrap_or_else(|| panic!("no {marker}"));
    let open = at + html[at..].find('>').unwrap() + 1;
    unescape(&html[open..open + html[open..].find('<').unwrap()])
}

/// How a page of the walk is reached: opened, or a form on a page filled in and sent.
enum Visit {
    Open(String),
    Submit {
        form: String,
        fields: Vec<(&'static str, String)>,
        ticks: Vec<&'static str>,
    },
}

/// One page of the walk: its name (for messages and screenshots), how to reach it, and an
/// element only the finished page has.
struct Stop {
    name: &'static str,
    visit: Visit,
    ready: &'static str,
}

fn open(name: &'static str, path: impl Into<String>, ready: &'static str) -> Stop {
    Stop {
        name,
        visit: Visit::Open(path.into()),
        ready,
    }
}

/// `rgb(r, g, b)` as its three channels.
fn channels(css: &str) -> [u32; 3] {
    let inner = css
        .trim_start_matches("rgba(")
        .trim_start_matches("rgb(")
        .trim_end_matches(')');
    let v: Vec<u32> = inner
        .split(',')
        .take(3)
        .map(|c| c.trim().parse().unwrap_or_else(|_| panic!("{css}")))
        .collect();
    [v[0], v[1], v[2]]
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn every_dashboard_page_fits_light_and_dark_at_desktop_and_phone_width() {
    let Some(driver) = Driver::start("the dashboard's layout") else {
        return;
    };
    let app = spawn_app_with(&["--allow-private-webhooks"]);
    // The first account is the operator: /operator is one of its pages.
    let owner = onboard_paid(&app, "Layout Ledger");
    set_sender(&owner);
    let waiting = onboard(&app, "Waiting Weekly");
    request_upgrade(&waiting);
    let nid = owner.newsletter_id;
    let n = format!("/newsletters/{nid}");
    let mut subscriber = 0;
    for (i, tags) in [&["news"][..], &["news", "vip"], &["events"]]
        .iter()
        .enumerate()
    {
        let resp = owner.post(
            "/subscribers",
            &json!({"email": format!("layout-reader{i}@example.com"), "tags": tags}),
        );
        resp.expect(201);
        subscriber = resp.json()["id"].as_i64().unwrap();
    }
    listen(&app, &owner, &["subscriber.created", "issue.sent"]);
    owner
        .post("/subscribers", &json!({"email": "hooked@example.com"}))
        .expect(201);
    let delivery = app.count("SELECT max(id) FROM webhook_deliveries");
    let hook = app.count("SELECT max(id) FROM webhook_subscriptions");
    // A sent issue with its report, an approved one, and a draft.
    let sent = approved_issue(&owner, "Sent and reported");
    send_now(&owner, sent);
    wait_status(&owner, sent, "sent", Duration::from_secs(60));
    let approved = approved_issue(
        &owner,
        "An approved issue with a subject long enough to wrap on a phone",
    );
    let draft = owner
        .post(
            "/issues",
            &json!({"issue": {"subject": "A draft", "content_markdown": "Hi"}}),
        )
        .json()["id"]
        .as_i64()
        .unwrap();
    // An import done with refused rows (the long cells of a real file), and one waiting.
    let long = format!("{}@example.com", "a-very-long-local-part-".repeat(4));
    let csv = format!(
        "email,name,tags\nok@example.com,Ok,\nnot-an-email,Bad,\n{long}x,,\n,,{}\n",
        "t".repeat(80)
    );
    let done_import = upload(&owner, "refused.csv", csv.as_bytes()).redirect();
    owner
        .client
        .submit(&done_import, &format!("{done_import}/start"), &[])
        .redirect();
    wait_for("the import", Duration::from_secs(60), || {
        owner
            .client
            .get(&done_import)
            .body
            .contains("Import finished")
            .then_some(())
    });
    let waiting_import = upload(
        &owner,
        "waiting.csv",
        b"email,name,tags,shoe size\nann@example.com,Ann,vip;early,41\nnope,,,\n",
    )
    .redirect();
    // A custom domain with its records, an API key.
    let domains = format!("{n}/custom_domains");
    let domain = owner
        .client
        .submit(
            &format!("{domains}/choose_method"),
            &domains,
            &[
                ("custom_domain[method]", "subdomain"),
                ("custom_domain[domain]", "newsletter.example.com"),
            ],
        )
        .redirect();
    let key = app.count(&format!(
        "SELECT max(id) FROM api_keys WHERE newsletter_id = {nid}"
    ));

    let stops = vec![
        open("sign-in", "/session/new", "main h1"),
        open("sign-up", "/signup", "main h1"),
        open("password-reset", "/passwords/new", "main h1"),
        open("not-found-signed-out", "/nope", "#error"),
        open("newsletters", "/newsletters", "main h1"),
        open("new-newsletter", "/newsletters/new", "main h1"),
        open("overview", n.clone(), "main h1"),
        open("setup-frequency", format!("{n}/setup_frequency"), "main h1"),
        open("preference", format!("{n}/preference/edit"), "main h1"),
        open("issues", format!("{n}/issues"), "#issues"),
        open("issue-editor", format!("{n}/issues/new"), "textarea"),
        open(
            "issue-approved",
            format!("{n}/issues/{approved}"),
            "#issue-status",
        ),
        open(
            "issue-edit",
            format!("{n}/issues/{approved}/edit"),
            "textarea",
        ),
        open(
            "issue-preview",
            format!("{n}/issues/{approved}/preview"),
            "#email-preview",
        ),
        open("send", format!("{n}/issues/{approved}/send"), "#audience"),
        open(
            "send-test",
            format!("{n}/issues/{approved}/send_test"),
            "main h1",
        ),
        open(
            "draft-delete",
            format!("{n}/issues/{draft}/delete"),
            "main h1",
        ),
        open("issue-sent", format!("{n}/issues/{sent}"), "#report"),
        open(
            "issue-report",
            format!("{n}/issues/{sent}/report"),
            "main h1",
        ),
        open("media", format!("{n}/media"), "main h1"),
        open("subscribers", format!("{n}/subscribers"), "main table"),
        open(
            "subscriber",
            format!("{n}/subscribers/{subscriber}"),
            "main h1",
        ),
        open(
            "subscriber-delete",
            format!("{n}/subscribers/{subscriber}/delete"),
            "main h1",
        ),
        open("import-form", format!("{n}/subscribers/import"), "main h1"),
        open("import-preview", waiting_import.clone(), "table.preview"),
        open("import-report", done_import.clone(), "#refused-download"),
        open("stats", format!("{n}/stats"), "main h1"),
        open("webhooks", format!("{n}/webhooks"), "[id^=webhook-] table"),
        open("webhook-new", format!("{n}/webhooks/new"), "main h1"),
        open(
            "webhook-edit",
            format!("{n}/webhooks/{hook}/edit"),
            "main h1",
        ),
        open(
            "webhook-payload",
            format!("{n}/webhooks/deliveries/{delivery}"),
            "#payload",
        ),
        Stop {
            name: "webhook-created",
            visit: Visit::Submit {
                form: format!("{n}/webhooks/new"),
                fields: vec![("url", "http://127.0.0.1:9/hooks".to_string())],
                ticks: vec!["input[name=\"events[]\"][value=\"issue.sent\"]"],
            },
            ready: "#webhook-secret",
        },
        open("api-keys", format!("{n}/api_keys"), "#api-reference"),
        open("api-key-new", format!("{n}/api_keys/new"), "main h1"),
        Stop {
            name: "api-key-created",
            visit: Visit::Submit {
                form: format!("{n}/api_keys/new"),
                fields: vec![("api_key[name]", "a script with a long name".to_string())],
                ticks: vec!["input[name=\"api_key[permissions][]\"][value=\"read\"]"],
            },
            ready: "#try-it",
        },
        open(
            "api-key-revoke",
            format!("{n}/api_keys/{key}/revoke"),
            "main h1",
        ),
        open("custom-domains", domains.clone(), "main table"),
        open(
            "custom-domain-choose",
            format!("{domains}/choose_method"),
            "main h1",
        ),
        open("custom-domain", domain.clone(), "table.records"),
        open(
            "custom-domain-remove",
            format!("{domain}/remove"),
            "main h1",
        ),
        open("settings", format!("{n}/settings"), "#dkim-record-value"),
        open(
            "settings-status",
            format!("{n}/settings/status?to=paused"),
            "main h1",
        ),
        open("account", "/account", "main h1"),
        open("account-delete", "/account/delete", "main h1"),
        open("operator", "/operator", "#pending table"),
        open("not-found", "/nope", "#error"),
        open("not-found-newsletter", "/newsletters/999999", "#error"),
        open("api-reference", "/api/v1/docs", ".swagger-ui .opblock"),
    ];
    // The walk signs in once the signed-out pages are seen.
    let signed_out = stops.iter().take_while(|s| s.name != "newsletters").count();
    let base = app.base_url.clone();
    let problems = runtime().block_on(async {
        let c = driver.session().await;
        let mut problems = Vec::new();
        for (scheme, dark) in [("light", false), ("dark", true)] {
            let media = json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]});
            driver.cdp(&c, "Emulation.setEmulatedMedia", media).await;
            for (width, height, mobile) in [(1280, 900, false), (390, 844, true)] {
                let metrics = json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile});
                driver.cdp(&c, "Emulation.setDeviceMetricsOverride", metrics).await;
                c.delete_all_cookies().await.unwrap();
                for (i, stop) in stops.iter().enumerate() {
                    if i == signed_out {
                        sign_in(&c, &base, &owner.email).await;
                    }
                    match &stop.visit {
                        Visit::Open(path) => c.goto(&format!("{base}{path}")).await.unwrap(),
                        Visit::Submit { form, fields, ticks } => {
                            c.goto(&format!("{base}{form}")).await.unwrap();
                            for (name, value) in fields {
                                fill(&c, name, value).await;
                            }
                            for tick in ticks {
                                wait_for_element(&c, tick).await;
                                let script = format!("document.querySelector('{tick}').checked = true");
                                c.execute(&script, vec![]).await.unwrap();
                            }
                            click(&c, "main form button[type=submit]").await;
                        }
                    }
                    wait_for_element(&c, stop.ready).await;
                    let seen = c
                        .execute(
                            "return [document.documentElement.scrollWidth, window.innerWidth,
                                     getComputedStyle(document.body).backgroundColor,
                                     getComputedStyle(document.body).color]",
                            vec![],
                        )
                        .await
                        .unwrap();
                    let (scroll, inner) = (seen[0].as_u64().unwrap(), seen[1].as_u64().unwrap());
                    let at = format!("{} ({scheme}, {width} px)", stop.name);
                    if scroll > inner {
                        problems.push(format!("{at}: {scroll} px wide in a {inner} px window"));
                    }
                    if inner != width {
                        problems.push(format!("{at}: laid out {inner} px wide (a viewport meta?)"));
                    }
                    let background = channels(seen[2].as_str().unwrap());
                    let is_dark = background.iter().all(|&c| c < 60);
                    let is_light = background.iter().all(|&c| c > 200);
                    if (dark && !is_dark) || (!dark && !is_light) {
                        problems.push(format!("{at}: body background {}", seen[2]));
                    }
                    if stop.name == "settings" && !dark && !mobile {
                        // The copy buttons are shown by their script, and select what they copy.
                        click(&c, "button[data-copy=\"#dkim-record-value\"]").await;
                        let copied = c
                            .execute(
                                "return [window.getSelection().toString(),
                                         document.getElementById('dkim-record-value').textContent]",
                                vec![],
                            )
                            .await
                            .unwrap();
                        if copied[0] != copied[1] || !copied[1].as_str().unwrap().starts_with("v=DKIM1") {
                            problems.push(format!("{at}: the copy button selected {}", copied[0]));
                        }
                    }
                    // The screenshot shows the part the page is about (the DKIM record, the
                    // refused rows, the payload).
                    c.execute(
                        "document.querySelector(arguments[0]).scrollIntoView({block: 'center'})",
                        vec![json!(stop.ready)],
                    )
                    .await
                    .unwrap();
                    screenshot(&c, &format!("dash-{}-{scheme}-{width}", stop.name)).await;
                    let errors: Vec<String> = driver
                        .console_errors(&c)
                        .await
                        .into_iter()
                        .filter(|e| !(stop.ready == "#error" && e.contains("404 (Not Found)")))
                        .collect();
                    if !errors.is_empty() {
                        problems.push(format!("{at}: console {errors:?}"));
                    }
                }
            }
        }
        c.close().await.unwrap();
        problems
    });
    assert!(
        problems.is_empty(),
        "{} layout problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
