//! Importing the exports creators bring from Mailchimp and Substack (tests/fixtures/imports):
//! through `broadsheet import` and the dashboard's upload, with names, every tag and the
//! original subscription dates; the columns the preview and the summary say were understood;
//! bad dates refused row by row.

use std::time::Duration;

use crate::support::*;

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/imports/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Every subscriber through the API, by address.
fn subscribers(owner: &Owner) -> Vec<Value> {
    let list = owner.get("/subscribers?per_page=100").json();
    let mut all = list["subscribers"].as_array().unwrap().clone();
    all.sort_by_key(|s| s["email"].as_str().unwrap().to_string());
    all
}

/// `broadsheet import` of a fixture, which must succeed with a summary holding each of `says`.
#[track_caller]
fn import_fixture(app: &App, owner: &Owner, name: &str, says: &[&str]) {
    let (code, out, err) = app.cli(&["import", &owner.subdomain, &fixture(name)]);
    assert_eq!(code, 0, "{out}{err}");
    let missing: Vec<&&str> = says.iter().filter(|text| !out.contains(*text)).collect();
    assert!(missing.is_empty(), "the summary lacks {missing:?}:\n{out}");
}

fn find<'a>(all: &'a [Value], email: &str) -> &'a Value {
    all.iter()
        .find(|s| s["email"] == email)
        .unwrap_or_else(|| panic!("{email} was imported: {all:?}"))
}

#[test]
fn mailchimp_and_substack_exports_import_with_names_tags_and_dates() {
    let app = spawn_app();
    let owner = onboard(&app, "Moved Over");

    import_fixture(
        &app,
        &owner,
        "mailchimp-subscribed.csv",
        &[
            "  read as   Mailchimp audience export: Email Address -> e-mail address, \
             First Name -> name (first and last name joined), \
             Last Name -> name (first and last name joined), \
             OPTIN_TIME -> subscribed at, CONFIRM_TIME -> subscribed at, when OPTIN_TIME is empty, \
             TAGS -> tags (Mailchimp: a quoted list separated by commas); \
             ignored: Address, Phone Number, Birthday, MEMBER_RATING, OPTIN_IP",
            "  created   3\n",
        ],
    );
    // The unsubscribed export of the same audience: nobody who left comes back.
    import_fixture(
        &app,
        &owner,
        "mailchimp-unsubscribed.csv",
        &[
            "UNSUB_TIME -> left: rows with a date here are skipped",
            "  created   0\n",
            "  skipped   1 ",
        ],
    );

    let all = subscribers(&owner);
    assert_eq!(all.len(), 3);
    let ada = find(&all, "ada@example.com");
    assert_eq!(ada["name"], "Ada Lovelace");
    assert_eq!(ada["tags"], json!(["Early readers", "vip"]));
    assert_eq!(ada["subscribed_at"], "2024-01-05T10:11:12.000Z");
    assert_eq!(ada["created_at"], "2024-01-05T10:11:12.000Z");
    let grace = find(&all, "grace@example.com");
    assert_eq!(grace["tags"], json!([]));
    assert_eq!(
        grace["subscribed_at"], "2015-03-16T14:40:47.000Z",
        "without OPTIN_TIME the confirmation counts"
    );
    let zoe = find(&all, "zoe@example.com");
    assert_eq!(zoe["name"], "Zoë Núñez");
    assert_eq!(zoe["tags"], json!(["Conference, 2023", "speakers", "vip"]));
    assert_eq!(zoe["subscribed_at"], "2023-06-30T23:59:59.000Z");
    // The counters count each reader on the day they subscribed.
    assert_eq!(
        owner.get("/newsletter").json()["data"]["subscriber_count"],
        3
    );
    assert_eq!(
        app.count("SELECT count(*) FROM newsletter_days WHERE day IN ('2024-01-05', '2015-03-16', '2023-06-30') AND created = 1"),
        3
    );

    // Substack: e-mail turned off is skipped, the address is lowercased, the dates kept.
    import_fixture(
        &app,
        &owner,
        "substack-email-list.csv",
        &[
            "  read as   Substack subscriber export: email -> e-mail address, \
             active_subscription -> membership: paid (and comped) members keep paid access, \
             until the paid period ends, expiry -> end of the paid period, \
             email_disabled -> e-mail turned off: rows with true are skipped, \
             created_at -> subscribed at; ignored: plan, first_payment_at",
            "  created   3\n",
            "  skipped   1 ",
        ],
    );
    let all = subscribers(&owner);
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|s| s["email"] != "quiet@example.com"));
    assert_eq!(
        find(&all, "paid.reader@example.com")["subscribed_at"],
        "2020-05-23T18:28:09.834Z"
    );
    // The paid subscription comes as paid access until it expires; the others are free.
    let paid = &find(&all, "paid.reader@example.com")["membership"];
    assert_eq!(
        (&paid["status"], &paid["until"]),
        (&json!("paid"), &json!("2999-01-01T00:00:00.000Z"))
    );
    assert_eq!(
        find(&all, "reader.one@example.com")["membership"]["status"],
        "free"
    );
    assert_eq!(
        find(&all, "mixed.case@example.com")["subscribed_at"],
        "2022-11-30T23:59:59.999Z"
    );
}

#[test]
fn bad_and_future_dates_refuse_their_row_only() {
    let app = spawn_app();
    let owner = onboard(&app, "Dated Rows");
    let csv = "email,created_at,active_subscription\n\
               good@example.com,2021-03-04T05:06:07.890Z,false\n\
               bad@example.com,last tuesday,false\n\
               later@example.com,2999-01-01T00:00:00Z,false\n\
               undated@example.com,,false\n";
    let (code, out, err) = app.cli_with_input(&["import", &owner.subdomain, "-"], csv.as_bytes());
    assert_eq!(code, 5, "{out}{err}");
    assert!(out.contains("  created   2\n"), "{out}");
    assert!(
        out.contains(
            "  line 3: \"bad@example.com\": created_at is not a date: \"last tuesday\" \
             (expected e.g. 2024-01-05 10:11:12 or 2024-01-05T10:11:12Z)"
        ),
        "{out}"
    );
    assert!(
        out.contains("  line 4: \"later@example.com\": Subscribed at is in the future"),
        "{out}"
    );
    let all = subscribers(&owner);
    assert_eq!(all.len(), 2);
    assert_eq!(
        find(&all, "good@example.com")["subscribed_at"],
        "2021-03-04T05:06:07.890Z"
    );
    // No date: subscribed now, as before.
    assert_eq!(
        find(&all, "undated@example.com")["subscribed_at"],
        find(&all, "undated@example.com")["created_at"]
    );
}

#[test]
fn the_dashboard_preview_says_which_columns_were_understood() {
    let app = spawn_app();
    let owner = onboard(&app, "Previewed Move");
    let csv = std::fs::read(fixture("mailchimp-subscribed.csv")).unwrap();
    let import_page = upload(&owner, "subscribed_members_export_1a2b3c.csv", &csv).redirect();
    let preview = owner.client.get(&import_page);
    preview.expect(200);
    let understood = [
        "Read as: Mailchimp audience export.",
        "<code>Email Address</code> → e-mail address",
        "<code>TAGS</code> → tags (Mailchimp: a quoted list separated by commas)",
        "<code>OPTIN_TIME</code> → subscribed at",
        "<code>CONFIRM_TIME</code> → subscribed at, when OPTIN_TIME is empty",
        "<code>MEMBER_RATING</code> → ignored",
        "<td>Ada Lovelace</td>",
        "Conference, 2023; speakers; vip",
        "2024-01-05 10:11:12 UTC",
    ];
    let missing: Vec<&str> = understood
        .into_iter()
        .filter(|text| !preview.body.contains(text))
        .collect();
    assert!(
        missing.is_empty(),
        "preview lacks {missing:?}:\n{}",
        preview.body
    );
    let started = owner
        .client
        .submit(&import_page, &format!("{import_page}/start"), &[]);
    assert_eq!(started.redirect(), import_page);
    wait_for("the import to finish", Duration::from_secs(60), || {
        let page = owner.client.get(&import_page);
        page.body.contains("Import finished").then_some(page)
    });
    let all = subscribers(&owner);
    assert_eq!(all.len(), 3);
    assert_eq!(
        find(&all, "ada@example.com")["tags"],
        json!(["Early readers", "vip"])
    );
}
