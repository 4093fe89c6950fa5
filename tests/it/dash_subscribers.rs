//! The subscribers section of the dashboard over HTTP: list with search, filters and paging,
//! add, edit, tags, delete, CSV export and the CSV import (upload, preview, job, result),
//! CSRF, other users' ids, a cancelled newsletter; and the import in headless Chromium.

use std::time::Duration;

use crate::support::browser::{
    Driver, click, fill, runtime, screenshot, wait_for_element, wait_for_path,
};
use crate::support::*;

fn subscribers_url(nid: i64) -> String {
    format!("/newsletters/{nid}/subscribers")
}

/// Rows of the subscriber table on a list page.
fn listed(body: &str, nid: i64) -> usize {
    body.matches(&format!("<td><a href=\"/newsletters/{nid}/subscribers/"))
        .count()
}

fn api_count(owner: &Owner) -> usize {
    let mut total = 0;
    for page in 1.. {
        let list = owner
            .get(&format!("/subscribers?per_page=100&page={page}"))
            .json();
        total += list["subscribers"].as_array().unwrap().len();
        if list["meta"]["has_more"] != true {
            break;
        }
    }
    total
}

/// The number in `<dd id="{id}">` of an import's summary.
fn summary(body: &str, id: &str) -> u64 {
    let marker = format!("<dd id=\"{id}\">");
    let start = body
        .find(&marker)
        .unwrap_or_else(|| panic!("no {id} in the summary:\n{body}"))
        + marker.len();
    body[start..body[start..].find('<').unwrap() + start]
        .parse()
        .unwrap()
}

fn files_waiting(app: &App) -> usize {
    std::fs::read_dir(app.data_dir().join("imports"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

#[test]
fn list_searches_filters_and_pages() {
    let app = spawn_app();
    let owner = onboard(&app, "Paged Post");
    let nid = owner.newsletter_id;
    let entries: Vec<Value> = (0..60)
        .map(|i| {
            let tags = if i % 3 == 0 { vec!["vip"] } else { vec![] };
            json!({"email": format!("reader{i:02}@example.com"), "tags": tags})
        })
        .collect();
    let created = owner.post("/subscribers/bulk_create", &json!({"subscribers": entries}));
    assert_eq!(created.json()["created"], 60);
    let gone = api_subscriber(&owner, "reader07@example.com").unwrap();
    owner
        .patch(
            &format!("/subscribers/{}", gone["id"]),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);

    let first = owner.client.get(&subscribers_url(nid));
    first.expect(200);
    assert_eq!(listed(&first.body, nid), 50, "50 to a page");
    assert!(first.body.contains("59 active"), "active count shown");
    assert!(first.body.contains("reader59@example.com"), "newest first");
    assert!(first.body.contains("rel=\"next\""));
    let second = owner
        .client
        .get(&format!("{}?page=2", subscribers_url(nid)));
    assert_eq!(listed(&second.body, nid), 10);
    assert!(second.body.contains("reader00@example.com"));
    assert!(!second.body.contains("rel=\"next\""));
    assert!(second.body.contains("rel=\"prev\""));

    let search = owner
        .client
        .get(&format!("{}?q=READER1", subscribers_url(nid)));
    assert_eq!(
        listed(&search.body, nid),
        10,
        "reader10..19, case-insensitive"
    );
    let vip = owner
        .client
        .get(&format!("{}?tag=vip", subscribers_url(nid)));
    assert_eq!(listed(&vip.body, nid), 20);
    assert!(
        vip.body.contains("vip (20 active)"),
        "the tag filter offers counts of active subscribers"
    );
    let unsubscribed = owner
        .client
        .get(&format!("{}?status=unsubscribed", subscribers_url(nid)));
    assert_eq!(listed(&unsubscribed.body, nid), 1);
    assert!(unsubscribed.body.contains("reader07@example.com"));
    let both = owner.client.get(&format!(
        "{}?tag=vip&q=reader0&status=active",
        subscribers_url(nid)
    ));
    assert_eq!(listed(&both.body, nid), 4, "00, 03, 06, 09");
    // Paging keeps the filters.
    assert!(
        first
            .body
            .contains(&format!("href=\"{}?page=2\"", subscribers_url(nid)))
    );

    let bad = owner
        .client
        .get(&format!("{}?status=gone", subscribers_url(nid)));
    bad.expect(422);
    assert!(bad.body.contains("Status must be one of"), "{}", bad.body);
    let bad = owner
        .client
        .get(&format!("{}?page=0", subscribers_url(nid)));
    bad.expect(422);
    assert!(bad.body.contains("Page must be a positive integer"));
}

#[test]
fn add_edit_tag_and_delete() {
    let app = spawn_app();
    let owner = onboard(&app, "Edited Edition");
    listen(
        &app,
        &owner,
        &[
            "subscriber.created",
            "subscriber.updated",
            "subscriber.deleted",
        ],
    );
    let url = subscribers_url(owner.newsletter_id);

    let added = owner.client.submit(
        &url,
        &url,
        &[
            ("subscriber[email]", " New@Example.com "),
            ("subscriber[name]", "New Reader"),
            ("subscriber[tags]", "vip, early ,vip"),
        ],
    );
    assert_eq!(added.redirect(), url);
    let notice = owner.client.get(&url);
    assert!(notice.body.contains("new@example.com is subscribed."));
    let s = api_subscriber(&owner, "new@example.com").expect("created");
    assert_eq!(s["name"], "New Reader");
    assert_eq!(s["tags"], json!(["early", "vip"]));
    let sid = s["id"].as_i64().unwrap();
    let page = format!("{url}/{sid}");

    // The same address again changes nothing and leads to the subscriber.
    let again = owner
        .client
        .submit(&url, &url, &[("subscriber[email]", "new@example.com")]);
    assert_eq!(again.redirect(), page);
    assert!(
        owner
            .client
            .get(&page)
            .body
            .contains("already a subscriber")
    );

    // Bad input: 422 with the message, the form keeps what was typed, nothing created.
    let bad = owner.client.submit(
        &url,
        &url,
        &[
            ("subscriber[email]", "not-an-address"),
            ("subscriber[name]", "Kept"),
        ],
    );
    bad.expect(422);
    assert!(bad.body.contains("Email is invalid"));
    assert!(bad.body.contains("value=\"Kept\""));
    let long_tag = "t".repeat(51);
    let bad = owner.client.submit(
        &url,
        &url,
        &[
            ("subscriber[email]", "tagged@example.com"),
            ("subscriber[tags]", &long_tag),
        ],
    );
    bad.expect(422);
    assert!(bad.body.contains("Tags is too long"), "{}", bad.body);
    assert_eq!(api_count(&owner), 1);

    // Edit name and status.
    let saved = owner.client.submit(
        &page,
        &page,
        &[
            ("_method", "patch"),
            ("subscriber[name]", "Renamed"),
            ("subscriber[status]", "unsubscribed"),
        ],
    );
    assert_eq!(saved.redirect(), page);
    let s = api_subscriber(&owner, "new@example.com").unwrap();
    assert_eq!(
        (s["name"].as_str(), s["status"].as_str()),
        (Some("Renamed"), Some("unsubscribed"))
    );
    assert!(s["unsubscribed_at"].is_string());
    let bad = owner.client.submit(
        &page,
        &page,
        &[
            ("_method", "patch"),
            ("subscriber[name]", "Other"),
            ("subscriber[status]", "bounced"),
        ],
    );
    bad.expect(422);
    assert!(bad.body.contains("Status must be active or unsubscribed"));
    let bad = owner.client.submit(
        &page,
        &page,
        &[
            ("_method", "patch"),
            ("subscriber[name]", &"n".repeat(101)),
            ("subscriber[status]", "active"),
        ],
    );
    bad.expect(422);
    let s = api_subscriber(&owner, "new@example.com").unwrap();
    assert_eq!(
        (s["name"].as_str(), s["status"].as_str()),
        (Some("Renamed"), Some("unsubscribed")),
        "nothing changed"
    );
    // An empty name clears it.
    owner
        .client
        .submit(
            &page,
            &page,
            &[
                ("_method", "patch"),
                ("subscriber[name]", ""),
                ("subscriber[status]", "active"),
            ],
        )
        .redirect();
    let s = api_subscriber(&owner, "new@example.com").unwrap();
    assert_eq!(
        (s["name"].clone(), s["status"].as_str()),
        (Value::Null, Some("active"))
    );

    // Tags: add, refuse a bad one, remove.
    let tags = format!("{page}/tags");
    assert_eq!(
        owner
            .client
            .submit(&page, &tags, &[("tag", " paid ")])
            .redirect(),
        page
    );
    let bad = owner.client.submit(&page, &tags, &[("tag", "   ")]);
    bad.expect(422);
    assert!(
        bad.body.contains("Tag can&#39;t be blank") || bad.body.contains("Tag can't be blank"),
        "{}",
        bad.body
    );
    assert_eq!(
        owner
            .client
            .submit(&page, &tags, &[("_method", "delete"), ("tag", "early")])
            .redirect(),
        page
    );
    let s = api_subscriber(&owner, "new@example.com").unwrap();
    assert_eq!(s["tags"], json!(["paid", "vip"]));
    let shown = owner.client.get(&page);
    assert!(shown.body.contains("Remove tag paid"));

    // Delete: a confirmation page, then gone for good.
    let confirm = owner.client.get(&format!("{page}/delete"));
    confirm.expect(200);
    assert!(confirm.body.contains("Delete for good"));
    let deleted = owner
        .client
        .submit(&format!("{page}/delete"), &page, &[("_method", "delete")]);
    assert_eq!(deleted.redirect(), url);
    owner.get(&format!("/subscribers/{sid}")).expect(404);
    owner.client.get(&page).expect(404);
    let kinds: Vec<String> = app
        .db()
        .prepare("SELECT kind FROM events ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("subscriber.created")
    );
    assert_eq!(kinds.last().map(String::as_str), Some("subscriber.deleted"));
}

#[test]
fn every_action_needs_the_csrf_token() {
    let app = spawn_app();
    let owner = onboard(&app, "Forged Forms");
    let url = subscribers_url(owner.newsletter_id);
    let s = owner.post(
        "/subscribers",
        &json!({"email": "kept@example.com", "tags": ["a"]}),
    );
    let sid = s.json()["id"].as_i64().unwrap();
    let page = format!("{url}/{sid}");
    for (action, fields) in [
        (
            url.clone(),
            vec![("subscriber[email]", "forged@example.com")],
        ),
        (
            page.clone(),
            vec![
                ("_method", "patch"),
                ("subscriber[name]", "Forged"),
                ("subscriber[status]", "active"),
            ],
        ),
        (page.clone(), vec![("_method", "delete")]),
        (format!("{page}/tags"), vec![("tag", "forged")]),
        (
            format!("{page}/tags"),
            vec![("_method", "delete"), ("tag", "a")],
        ),
    ] {
        let resp = owner.client.post_form(&action, &fields);
        assert_eq!(resp.status, 403, "{action}: {}", resp.body);
        let resp = owner.client.post_form(
            &action,
            &[&[("authenticity_token", "wrong")][..], &fields[..]].concat(),
        );
        assert_eq!(resp.status, 403, "{action} with a wrong token");
    }
    let (content_type, body) = multipart("wrong", "list.csv", b"email\nforged@example.com\n");
    let resp = owner
        .client
        .request(
            "POST",
            &format!("{url}/import"),
            &[],
            Some((&content_type, body)),
        )
        .unwrap();
    assert_eq!(resp.status, 403);
    assert_eq!(files_waiting(&app), 0, "a refused upload leaves no file");
    let s = api_subscriber(&owner, "kept@example.com").unwrap();
    assert_eq!(
        (s["name"].clone(), s["tags"].clone()),
        (Value::Null, json!(["a"]))
    );
    assert_eq!(api_count(&owner), 1);
    assert_eq!(app.count("SELECT count(*) FROM subscriber_imports"), 0);
}

#[test]
fn another_users_ids_are_not_found() {
    let app = spawn_app();
    let alice = onboard(&app, "Alice Annals");
    let bob = onboard(&app, "Bob Bulletin");
    let a_sid = alice
        .post("/subscribers", &json!({"email": "a-reader@example.com"}))
        .json()["id"]
        .as_i64()
        .unwrap();
    let a_upload = upload(&alice, "a.csv", b"email\nx@example.com\n");
    let a_import = a_upload.redirect();
    let a_iid: i64 = a_import.rsplit('/').next().unwrap().parse().unwrap();
    let (a, b) = (alice.newsletter_id, bob.newsletter_id);
    let bob_form = subscribers_url(b);

    // Alice's newsletter in Bob's browser, and Alice's subscriber and import under Bob's.
    for path in [
        subscribers_url(a),
        format!("{}/{a_sid}", subscribers_url(a)),
        format!("{}/{a_sid}/delete", subscribers_url(a)),
        format!("{}/export.csv", subscribers_url(a)),
        format!("{}/import", subscribers_url(a)),
        format!("{}/imports/{a_iid}", subscribers_url(a)),
        format!("{}/{a_sid}", subscribers_url(b)),
        format!("{}/{a_sid}/delete", subscribers_url(b)),
        format!("{}/imports/{a_iid}", subscribers_url(b)),
        format!("{}/not-a-number", subscribers_url(b)),
    ] {
        assert_eq!(bob.client.get(&path).status, 404, "GET {path}");
    }
    for (action, fields) in [
        (
            subscribers_url(a),
            vec![("subscriber[email]", "bob-was-here@example.com")],
        ),
        (
            format!("{}/{a_sid}", subscribers_url(a)),
            vec![
                ("_method", "patch"),
                ("subscriber[name]", "Bob"),
                ("subscriber[status]", "unsubscribed"),
            ],
        ),
        (
            format!("{}/{a_sid}", subscribers_url(b)),
            vec![
                ("_method", "patch"),
                ("subscriber[name]", "Bob"),
                ("subscriber[status]", "unsubscribed"),
            ],
        ),
        (
            format!("{}/{a_sid}", subscribers_url(b)),
            vec![("_method", "delete")],
        ),
        (
            format!("{}/{a_sid}/tags", subscribers_url(b)),
            vec![("tag", "bob")],
        ),
        (
            format!("{}/{a_sid}/tags", subscribers_url(a)),
            vec![("tag", "bob")],
        ),
        (
            format!("{}/imports/{a_iid}/start", subscribers_url(a)),
            vec![],
        ),
        (
            format!("{}/imports/{a_iid}/start", subscribers_url(b)),
            vec![],
        ),
        (
            format!("{}/imports/{a_iid}", subscribers_url(b)),
            vec![("_method", "delete")],
        ),
    ] {
        let resp = bob.client.submit(&bob_form, &action, &fields);
        assert_eq!(resp.status, 404, "POST {action}: {}", resp.body);
    }
    assert_eq!(
        upload_as(&bob.client, b, a, "b.csv", b"email\nbob@example.com\n").status,
        404
    );

    let s = api_subscriber(&alice, "a-reader@example.com").unwrap();
    assert_eq!(
        (s["name"].clone(), s["status"].as_str(), s["tags"].clone()),
        (Value::Null, Some("active"), json!([]))
    );
    assert_eq!(api_count(&alice), 1);
    assert_eq!(api_count(&bob), 0);
    let state: String = app
        .db()
        .query_row(
            "SELECT state FROM subscriber_imports WHERE id = ?1",
            [a_iid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(state, "uploaded", "Bob could not start Alice's import");
    assert_eq!(app.count("SELECT count(*) FROM subscriber_imports"), 1);
    // Signed out: the sign-in form.
    assert_eq!(
        app.client().get(&subscribers_url(a)).redirect(),
        "/session/new"
    );
}

#[test]
fn export_downloads_every_subscriber_as_csv() {
    let app = spawn_app();
    let owner = onboard(&app, "Exported Echo");
    let entries: Vec<Value> = (0..120)
        .map(|i| json!({"email": format!("e{i}@example.com"), "name": format!("Reader, No. {i}"), "tags": ["x", "y"]}))
        .collect();
    owner
        .post("/subscribers/bulk_create", &json!({"subscribers": entries}))
        .expect(200);
    owner.post(
        "/subscribers",
        &json!({"email": "formula@example.com", "name": "=HYPERLINK(\"x\")"}),
    );
    let resp = owner.client.get(&format!(
        "{}/export.csv",
        subscribers_url(owner.newsletter_id)
    ));
    resp.expect(200);
    assert!(resp.header("content-type").unwrap().starts_with("text/csv"));
    let disposition = resp.header("content-disposition").unwrap();
    assert!(
        disposition.starts_with(&format!(
            "attachment; filename=\"{}-subscribers-",
            owner.subdomain
        )),
        "{disposition}"
    );
    let lines: Vec<&str> = resp.body.lines().collect();
    assert_eq!(
        lines[0],
        "email,name,tags,status,subscribed_at,unsubscribed_at,created_at,membership,membership_until"
    );
    assert_eq!(lines.len(), 1 + 121);
    assert!(
        lines[1].starts_with("e0@example.com,\"Reader, No. 0\",x;y,active,20"),
        "{}",
        lines[1]
    );
    assert!(
        lines[121].starts_with("formula@example.com,\"'=HYPERLINK(\"\"x\"\")\","),
        "a formula is defused: {}",
        lines[121]
    );
    let exported: std::collections::BTreeSet<&str> = lines[1..]
        .iter()
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(exported.len(), api_count(&owner));
}

#[test]
fn csv_upload_previews_imports_and_reports_refused_rows() {
    let app = spawn_app();
    let owner = onboard(&app, "Imported Ink");
    listen(&app, &owner, &["subscriber.created"]);
    let url = subscribers_url(owner.newsletter_id);
    owner.post("/subscribers", &json!({"email": "already@example.com"}));
    let mut csv = String::from("Name,Email,Tags,Shoe size\n");
    csv.push_str("Ann Lee,ann@example.com,vip;early,41\n");
    csv.push_str("No Address,not-an-email,,40\n");
    csv.push_str("Old Friend,already@example.com,,39\n");
    for i in 0..1200 {
        csv.push_str(&format!(",bulk{i}@example.com,bulk,\n"));
    }
    csv.push_str(&format!(",tagged@example.com,{},\n", "t".repeat(60)));

    let resp = upload(&owner, "my list.csv", csv.as_bytes());
    let import_page = resp.redirect();
    assert!(
        import_page.starts_with(&format!("{url}/imports/")),
        "{import_page}"
    );
    assert_eq!(files_waiting(&app), 1, "the file waits under the data dir");
    let preview = owner.client.get(&import_page);
    preview.expect(200);
    for expected in [
        "my list.csv",
        "<code>Email</code> → e-mail address",
        "<code>Tags</code> → tags, separated by ;",
        "<code>Shoe size</code> → ignored",
        "ann@example.com",
        "vip; early",
        "Email is invalid",
        "Start import",
    ] {
        assert!(
            preview.body.contains(expected),
            "preview lacks {expected:?}:\n{}",
            preview.body
        );
    }
    assert_eq!(api_count(&owner), 1, "nothing is imported before the start");

    let started = owner
        .client
        .submit(&import_page, &format!("{import_page}/start"), &[]);
    assert_eq!(started.redirect(), import_page);
    let done = wait_for("the import to finish", Duration::from_secs(60), || {
        let page = owner.client.get(&import_page);
        page.body.contains("Import finished").then_some(page)
    });
    assert_eq!(summary(&done.body, "created"), 1201);
    assert_eq!(summary(&done.body, "existing"), 1);
    assert_eq!(summary(&done.body, "refused"), 2);
    assert!(
        done.body
            .contains("<td>3</td><td>not-an-email</td><td>Email is invalid</td>"),
        "{}",
        done.body
    );
    assert!(
        done.body
            .contains("<td>1205</td><td>tagged@example.com</td><td>Tags is too long"),
        "{}",
        done.body
    );
    assert!(
        done.header("refresh").is_none(),
        "a finished import stops refreshing"
    );
    assert_eq!(files_waiting(&app), 0, "the file is removed once imported");

    assert_eq!(api_count(&owner), 1202);
    let ann = api_subscriber(&owner, "ann@example.com").unwrap();
    assert_eq!(
        (ann["name"].as_str(), ann["tags"].clone()),
        (Some("Ann Lee"), json!(["early", "vip"]))
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'subscriber.created'"),
        1 + 1201
    );

    // Starting it again is refused with the reason.
    let again = owner
        .client
        .submit(&import_page, &format!("{import_page}/start"), &[]);
    again.expect(422);
    assert!(again.body.contains("This import is done already"));
    // The import page lists it.
    let imports = owner.client.get(&format!("{url}/import"));
    assert!(imports.body.contains("my list.csv"));
}

#[test]
fn bad_uploads_are_refused_and_discarded_ones_leave_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Refused Reader");
    let url = subscribers_url(owner.newsletter_id);
    for (name, content, message) in [
        (
            "people.csv",
            &b"mail,name\nx@example.com,X\n"[..],
            "The header has no email column (found: mail, name)",
        ),
        (
            "people.csv",
            &b"ann@example.com,Ann\n"[..],
            "holds an address",
        ),
        (
            "semi.csv",
            &b"email;name\nx@example.com;X\n"[..],
            "separated by commas",
        ),
        ("empty.csv", &b""[..], "The file is empty"),
    ] {
        let resp = upload(&owner, name, content);
        resp.expect(422);
        assert!(resp.body.contains(message), "{name}: {}", resp.body);
    }
    // No file chosen.
    let page = owner.client.get(&format!("{url}/import"));
    let (content_type, body) = multipart(&page.csrf_token(), "", b"");
    let resp = owner
        .client
        .request(
            "POST",
            &format!("{url}/import"),
            &[],
            Some((&content_type, body)),
        )
        .unwrap();
    resp.expect(422);
    assert!(resp.body.contains("Choose a CSV file"));
    // Over the limit.
    let mut big = b"email\n".to_vec();
    big.resize(50 * 1024 * 1024 + 1, b'a');
    let resp = upload(&owner, "big.csv", &big);
    resp.expect(422);
    assert!(resp.body.contains("larger than 50 MiB"));
    assert_eq!(files_waiting(&app), 0);
    assert_eq!(app.count("SELECT count(*) FROM subscriber_imports"), 0);

    // Discarding an upload removes it and its file; nothing is imported.
    let import_page = upload(&owner, "later.csv", b"email\nlater@example.com\n").redirect();
    assert_eq!(files_waiting(&app), 1);
    let discarded = owner
        .client
        .submit(&import_page, &import_page, &[("_method", "delete")]);
    assert_eq!(discarded.redirect(), format!("{url}/import"));
    owner.client.get(&import_page).expect(404);
    assert_eq!(files_waiting(&app), 0);
    assert_eq!(api_count(&owner), 0);
}

#[test]
fn an_owner_keeps_at_most_three_uploads_and_100_mib_waiting() {
    // In memory: about 100 MiB of uploads are written and removed.
    let app = spawn_app_in_memory(&[]);
    let owner = onboard(&app, "Capped Courier");
    let nid = owner.newsletter_id;
    let second = create_newsletter(&owner.client, "Capped Second");
    let small = b"email\nann@example.com\n";
    let recorded = || app.count("SELECT count(*) FROM subscriber_imports");

    // Three uploads wait across the owner's two newsletters; the fourth is refused and
    // nothing of it is kept.
    let first = upload(&owner, "one.csv", small).redirect();
    let second_page = upload_as(&owner.client, second, second, "two.csv", small).redirect();
    let third = upload(&owner, "three.csv", small).redirect();
    let refused = upload_as(&owner.client, second, second, "four.csv", small);
    refused.expect(422);
    assert!(
        refused
            .body
            .contains("You already have 3 uploads waiting or being imported"),
        "{}",
        refused.body
    );
    assert_eq!((files_waiting(&app), recorded()), (3, 3));
    // Another owner has room of their own.
    let other = onboard(&app, "Other Owner");
    upload(&other, "theirs.csv", small).redirect();
    assert_eq!(files_waiting(&app), 4);

    // Discarding makes room again; the bytes held count too.
    for page in [&first, &second_page, &third] {
        owner
            .client
            .submit(page, page, &[("_method", "delete")])
            .redirect();
    }
    assert_eq!(files_waiting(&app), 1);
    let file_of = |mib: usize| {
        let mut csv = b"email\n".to_vec();
        csv.resize(mib * 1024 * 1024, b'a');
        csv
    };
    upload(&owner, "fifty.csv", &file_of(50)).redirect();
    upload(&owner, "forty-five.csv", &file_of(45)).redirect();
    let refused = upload(&owner, "six.csv", &file_of(6));
    refused.expect(422);
    assert!(
        refused.body.contains("already hold 95 MiB") && refused.body.contains("at most 100 MiB"),
        "{}",
        refused.body
    );
    assert_eq!(files_waiting(&app), 3, "the refused file is not kept");
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM subscriber_imports WHERE newsletter_id = {nid}"
        )),
        2
    );
    // What is left still fits.
    upload(&owner, "four.csv", &file_of(4)).redirect();
    assert_eq!(files_waiting(&app), 4);
}

#[test]
fn long_cells_are_cut_on_the_import_pages() {
    let app = spawn_app();
    let owner = onboard(&app, "Long Lines");
    let long_email = format!("{}@example.com", "x".repeat(10_000));
    let long_name = "y".repeat(10_000);
    let csv = format!("email,name\n{long_email},Long Address\nfine@example.com,{long_name}\n");
    let import_page = upload(&owner, "long.csv", csv.as_bytes()).redirect();
    let cut = |c: &str| format!("{}…", c.repeat(200));
    let preview = owner.client.get(&import_page);
    preview.expect(200);
    for c in ["x", "y"] {
        assert!(preview.body.contains(&cut(c)), "{c} cut in the preview");
        assert!(!preview.body.contains(&c.repeat(201)), "{c} whole");
    }

    owner
        .client
        .submit(&import_page, &format!("{import_page}/start"), &[])
        .redirect();
    let done = wait_for("the import to finish", Duration::from_secs(60), || {
        let page = owner.client.get(&import_page);
        page.body.contains("Import finished").then_some(page)
    });
    assert_eq!(summary(&done.body, "refused"), 2);
    assert!(
        done.body
            .contains(&format!("<td>2</td><td>{}</td>", cut("x"))),
        "{}",
        done.body
    );
    assert!(!done.body.contains(&"x".repeat(201)));
}

#[test]
fn a_cancelled_newsletter_is_read_only() {
    let app = spawn_app();
    let owner = onboard(&app, "Closed Chronicle");
    let url = subscribers_url(owner.newsletter_id);
    let sid = owner
        .post("/subscribers", &json!({"email": "stays@example.com"}))
        .json()["id"]
        .as_i64()
        .unwrap();
    let import_page = upload(&owner, "list.csv", b"email\nnew@example.com\n").redirect();
    let page = format!("{url}/{sid}");
    let form = owner.client.get(&page);
    let (code, _, err) = app.cli(&["status", &owner.subdomain, "cancelled"]);
    assert_eq!(code, 0, "{err}");

    let list = owner.client.get(&url);
    list.expect(200);
    assert!(list.body.contains("is cancelled"));
    assert!(!list.body.contains("Add subscriber"));
    let token = form.csrf_token();
    for (action, fields) in [
        (url.clone(), vec![("subscriber[email]", "new@example.com")]),
        (
            page.clone(),
            vec![
                ("_method", "patch"),
                ("subscriber[name]", "X"),
                ("subscriber[status]", "unsubscribed"),
            ],
        ),
        (page.clone(), vec![("_method", "delete")]),
        (format!("{page}/tags"), vec![("tag", "x")]),
        (format!("{import_page}/start"), vec![]),
    ] {
        let resp = owner.client.post_form(
            &action,
            &[&[("authenticity_token", token.as_str())][..], &fields[..]].concat(),
        );
        assert_eq!(resp.status, 403, "{action}: {}", resp.body);
    }
    assert_eq!(
        upload(&owner, "more.csv", b"email\nmore@example.com\n").status,
        403
    );
    let s = api_subscriber(&owner, "stays@example.com").unwrap();
    assert_eq!(
        (s["status"].as_str(), s["tags"].clone()),
        (Some("active"), json!([]))
    );
    assert_eq!(api_count(&owner), 1);
    // Reading and exporting still work.
    owner.client.get(&format!("{url}/export.csv")).expect(200);
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn csv_import_in_chromium_shows_the_summary() {
    let Some(driver) = Driver::start("subscriber import") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard(&app, "Browser Batch");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("readers.csv");
    std::fs::write(
        &file,
        "email,name,tags\nann@example.com,Ann,vip;early\nbroken-address,,\nbob@example.com,Bob,\n",
    )
    .unwrap();
    let url = subscribers_url(owner.newsletter_id);
    runtime().block_on(async {
        let c = driver.session().await;
        let base = &app.base_url;
        // The browser signs in with the owner's password.
        c.goto(&format!("{base}/session/new")).await.unwrap();
        fill(&c, "email_address", &owner.email).await;
        fill(&c, "password", PASSWORD).await;
        click(&c, "form[action=\"/session\"] button[type=submit]").await;
        wait_for_path(&c, "/newsletters").await;

        c.goto(&format!("{base}{url}")).await.unwrap();
        click(&c, &format!("a[href=\"{url}/import\"]")).await;
        let input = wait_for_element(&c, "input[type=file][name=file]").await;
        input.send_keys(file.to_str().unwrap()).await.unwrap();
        click(
            &c,
            "form[enctype=\"multipart/form-data\"] button[type=submit]",
        )
        .await;
        let start = wait_for_element(&c, "form[action$=\"/start\"] button[type=submit]").await;
        let preview = c.source().await.unwrap();
        assert!(preview.contains("broken-address") && preview.contains("Email is invalid"));
        screenshot(&c, "subscribers-import-preview").await;
        start.click().await.unwrap();
        let result = wait_for_element(&c, "#import-result").await;
        assert!(
            result
                .text()
                .await
                .unwrap()
                .contains("Import finished: 3 rows read")
        );
        let page = c.source().await.unwrap();
        assert!(page.contains("<dd id=\"created\">2</dd>"), "{page}");
        assert!(page.contains("<dd id=\"refused\">1</dd>"));
        assert!(page.contains("broken-address"));
        screenshot(&c, "subscribers-import-result").await;

        c.goto(&format!("{base}{url}")).await.unwrap();
        wait_for_element(&c, "table.subscribers").await;
        screenshot(&c, "subscribers-list").await;
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console errors: {errors:?}");
        c.close().await.unwrap();
    });
    let ann = api_subscriber(&owner, "ann@example.com").unwrap();
    assert_eq!(ann["tags"], json!(["early", "vip"]));
    assert_eq!(api_count(&owner), 2);
}

#[test]
fn csv_import_stopped_by_sigterm_resumes_after_the_restart() {
    let mut app = spawn_app();
    let owner = onboard(&app, "Stopped Import");
    let mut csv = String::from("email\n");
    for i in 0..80_000 {
        csv.push_str(&format!("stopped{i}@example.com\n"));
    }
    let import_page = upload(&owner, "long.csv", csv.as_bytes()).redirect();
    owner
        .client
        .submit(&import_page, &format!("{import_page}/start"), &[])
        .redirect();
    wait_for("the first batch", Duration::from_secs(60), || {
        (app.count("SELECT rows_done FROM subscriber_imports") > 0).then_some(())
    });

    // SIGTERM stops it after the batch under way instead of waiting for the whole file.
    let took = app
        .stop_within(Duration::from_secs(30))
        .expect("the server exits by itself after SIGTERM");
    assert!(took < Duration::from_secs(5), "SIGTERM took {took:?}");
    let done_at_stop = app.count("SELECT rows_done FROM subscriber_imports");
    assert!(done_at_stop < 80_000, "the import finished before the stop");
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers WHERE email LIKE 'stopped%'"),
        done_at_stop
    );

    // The next start goes on from there: every row once.
    app.restart();
    let done = wait_for("the import to finish", Duration::from_secs(120), || {
        let page = owner.client.get(&import_page);
        page.body.contains("Import finished").then_some(page)
    });
    assert_eq!(summary(&done.body, "created"), 80_000);
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers WHERE email LIKE 'stopped%'"),
        80_000
    );
}
