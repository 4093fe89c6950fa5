//! Mail a reader trusts: a reply-to address and a postal address per newsletter (API and
//! dashboard), carried by every issue and welcome mail; a "view in your browser" link that
//! works whether or not the site shows the issue; quotes and tables styled inline for mail
//! clients that drop `<style>`; opt-in mail signed with the newsletter's own name.

use std::time::Duration;

use crate::support::send::{approved_issue, send_now, wait_status};
use crate::support::*;

const POSTAL: &str = "Harbour Press\n1 Quay Street\nPortsmouth PO1 2AB";

fn api_newsletter(owner: &Owner) -> Value {
    let resp = owner.get("/newsletter");
    resp.expect(200);
    resp.json()["data"].clone()
}

#[test]
fn mail_details_are_set_through_the_api_and_bad_values_change_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Quay Notes");
    let fresh = api_newsletter(&owner);
    assert_eq!(
        (&fresh["reply_to"], &fresh["postal_address"]),
        (&json!(null), &json!(null))
    );

    let set = owner.patch(
        "/newsletter",
        &json!({"reply_to": " Letters@Quay.Example ", "postal_address": format!("  {POSTAL}\r\n")}),
    );
    set.expect(200);
    let n = api_newsletter(&owner);
    assert_eq!(n["reply_to"], "letters@quay.example");
    assert_eq!(n["postal_address"], POSTAL);

    // A bad value of either is 422 naming it, and neither changes.
    for (field, value) in [
        ("reply_to", json!("not an address")),
        ("postal_address", json!("a\u{7}b")),
        ("postal_address", json!("x".repeat(301))),
    ] {
        let refused = owner.patch("/newsletter", &json!({ field: value }));
        refused.expect(422);
        assert!(
            refused.json()["error"]["details"][field].is_array(),
            "{field}: {}",
            refused.body
        );
        let after = api_newsletter(&owner);
        assert_eq!(
            (&after["reply_to"], &after["postal_address"]),
            (&json!("letters@quay.example"), &json!(POSTAL))
        );
    }

    // Blank removes both.
    owner
        .patch(
            "/newsletter",
            &json!({"reply_to": "", "postal_address": "  "}),
        )
        .expect(200);
    let n = api_newsletter(&owner);
    assert_eq!(
        (&n["reply_to"], &n["postal_address"]),
        (&json!(null), &json!(null))
    );
}

#[test]
fn mail_details_are_set_in_the_dashboard_and_the_send_page_hints_while_there_is_no_address() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Desk Letters");
    let settings = format!("/newsletters/{}/settings", owner.newsletter_id);
    let id = approved_issue(&owner, "Hinted");
    let send_page = format!("/newsletters/{}/issues/{id}/send", owner.newsletter_id);
    let page = owner.client.get(&send_page);
    page.expect(200);
    assert!(
        page.body.contains("id=\"postal-address-hint\""),
        "{}",
        page.body
    );

    let details = |reply_to: &str, postal: &str| {
        owner.client.submit(
            &settings,
            &format!("{settings}/details"),
            &[
                ("_method", "patch"),
                ("newsletter[name]", "Desk Letters"),
                ("newsletter[tagline]", ""),
                ("newsletter[sender_name]", "Desk Letters"),
                ("newsletter[sender_email]", "desk@letters.example"),
                ("newsletter[reply_to]", reply_to),
                ("newsletter[postal_address]", postal),
            ],
        )
    };
    // A bad reply-to: the form again with the message and what was typed; nothing changes.
    let refused = details("nobody at all", "1 Desk Lane");
    refused.expect(422);
    assert!(refused.body.contains("Reply to"), "{}", refused.body);
    assert!(refused.body.contains("nobody at all"));
    assert_eq!(api_newsletter(&owner)["postal_address"], json!(null));

    let saved = details("answers@letters.example", "1 Desk Lane\r\nLetterton");
    assert_eq!(saved.redirect(), format!("{settings}#details"));
    let n = api_newsletter(&owner);
    assert_eq!(n["reply_to"], "answers@letters.example");
    assert_eq!(n["postal_address"], "1 Desk Lane\nLetterton");
    let page = owner.client.get(&settings);
    assert!(
        page.body.contains("1 Desk Lane\nLetterton</textarea>"),
        "{}",
        page.body
    );
    assert!(
        !owner
            .client
            .get(&send_page)
            .body
            .contains("postal-address-hint")
    );
}

#[test]
fn every_issue_carries_reply_to_postal_address_styles_and_a_view_link_that_works() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Harbour Weekly");
    owner
        .patch(
            "/newsletter",
            &json!({"reply_to": "letters@harbour.example", "postal_address": POSTAL, "publish_on_send": false}),
        )
        .expect(200);
    let reader = "reader@example.net";
    owner
        .post("/subscribers", &json!({"email": reader}))
        .expect(201);
    let created = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Tides and tables", "status": "approved",
            "content_markdown": "> Quoted wisdom\n\n| Port | High tide |\n|:--|--:|\n| Quay | 06:40 |\n"}}),
    );
    created.expect(201);
    let id = created.json()["id"].as_i64().unwrap();
    send_now(&owner, id);
    wait_status(&owner, id, "sent", Duration::from_secs(20));
    let mail = app.smtp.wait_for_message_to(reader, 1);

    // Replies go to the reply-to address; the footer has the postal address, in both parts.
    let parsed = mail.parsed();
    let reply_to = parsed.reply_to().and_then(|r| r.first()).expect("Reply-To");
    assert_eq!(reply_to.address(), Some("letters@harbour.example"));
    let (html, text) = (mail.html(), mail.text());
    for line in POSTAL.lines() {
        assert!(html.contains(line), "{line} in the HTML: {html}");
        assert!(text.contains(line), "{line} in the text: {text}");
    }
    // Quotes and tables are styled inline, for clients that drop the style block.
    assert!(
        html.contains("<blockquote style=\"") && html.contains("border-left:4px solid"),
        "{html}"
    );
    assert!(html.contains("<table role=\"table\"") && html.contains("border-collapse:collapse"));
    assert!(html.contains("<td style=\"border:1px solid"), "{html}");
    // The masthead and the footer link the site.
    let home = format!("{}/", owner_site_origin(&owner));
    assert!(html.contains(&format!("href=\"{home}\"")), "{html}");

    // "View in your browser": in both parts; the issue is not on the site (publishing on
    // send is off), yet the link shows it, kept out of search engines.
    let view = link_containing(&text, "/view/").expect("a view link in the text part");
    assert!(html.contains("View in your browser"));
    let site = app.site_client(&owner.subdomain);
    let shown = site.get(&path_of(&view));
    shown.expect(200);
    assert!(shown.body.contains("Tides and tables") && shown.body.contains("Quoted wisdom"));
    assert_eq!(shown.header("x-robots-tag"), Some("noindex"));
    // A forged or altered signature, or another issue's number, finds nothing.
    let path = path_of(&view);
    let (head, sig) = path.rsplit_once('/').unwrap();
    let forged = format!("{head}/{}", "0".repeat(sig.len()));
    site.get(&forged).expect(404);
    site.get(&path.replacen(&format!("/view/{id}/"), &format!("/view/{}/", id + 1), 1))
        .expect(404);
    // Another newsletter's site does not show it either.
    let other = onboard(&app, "Other Harbour");
    app.site_client(&other.subdomain).get(&path).expect(404);

    // Once published, the link leads to the issue's page.
    owner
        .post(&format!("/issues/{id}/publish"), &json!({}))
        .expect(200);
    let moved = site.get(&path);
    moved.expect(303);
    let web_url = owner.get(&format!("/issues/{id}")).json()["web_url"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(moved.location(), path_of(&web_url));
}

/// The origin of the owner's site, as the API's `urls.home` names it (without its slash).
fn owner_site_origin(owner: &Owner) -> String {
    api_newsletter(owner)["urls"]["home"]
        .as_str()
        .unwrap()
        .trim_end_matches('/')
        .to_string()
}

#[test]
fn opt_in_mail_is_signed_by_the_newsletter_and_the_welcome_links_the_site() {
    let app = spawn_app();
    let owner = onboard(&app, "Lantern Letters");
    owner
        .patch(
            "/newsletter",
            &json!({"reply_to": "keeper@lantern.example", "postal_address": POSTAL}),
        )
        .expect(200);
    let site = app.site_client(&owner.subdomain);
    let reader = unique_email("lantern");
    site.submit("/subscribe", "/subscribe", &[("email", reader.as_str())])
        .expect(200);
    let opt_in = app.smtp.wait_for_message_to(&reader, 1);
    let text = opt_in.text();
    assert!(
        text.replace("\r\n", "\n").contains("-- \nLantern Letters"),
        "{text}"
    );
    assert!(!text.contains("Broadsheet"), "{text}");
    assert!(opt_in.html().contains("Lantern Letters"));

    let link = link_containing(&text, "/subscribe/confirm/").unwrap();
    let path = path_of(&link);
    site.submit(&path, &path, &[]).expect(200);
    let welcome = app.smtp.wait_for_message_to(&reader, 2);
    let home = format!("{}/", owner_site_origin(&owner));
    assert!(
        welcome
            .text()
            .contains(&format!("Past issues are on the site: {home}"))
    );
    assert!(welcome.html().contains(&format!("href=\"{home}\"")));
    let parsed = welcome.parsed();
    let reply_to = parsed.reply_to().and_then(|r| r.first()).expect("Reply-To");
    assert_eq!(reply_to.address(), Some("keeper@lantern.example"));
    for line in POSTAL.lines() {
        assert!(welcome.text().contains(line), "{}", welcome.text());
    }
}
