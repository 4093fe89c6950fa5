//! Paid memberships through the real binary, without Stripe (docs/memberships.md): the
//! membership API and its refusals, comped members, reader sign-in by a mailed one-time link
//! (15 minutes, once, throttled), paid issues on the site (excerpt and paywall), in the
//! archive, the feed and the meta tags, and by mail (the whole issue to paid members, the
//! excerpt and an upgrade link to free ones, nothing to them when sent to paid members only),
//! a comped membership ending on its date (the test clock moved, never slept), and what
//! goes wrong with payments: bad prices, Stripe unreachable, webhooks without Stripe.

use std::time::Duration;

use crate::segments::{pairs, send_form_fields};
use crate::stripe_memberships::{connect, press_upgrade};
use crate::support::send::{send_now, wait_status};
use crate::support::*;

/// The sentence only the issue's text holds, far after its excerpt.
const SECRET: &str = "SECRET-PAID-SENTENCE";

fn paid_markdown() -> String {
    format!(
        "The tide tables for members open this issue.\n\n{}\n\nThen {SECRET} is deep inside.",
        "Filler paragraph about boats and weather. ".repeat(20)
    )
}

fn add(owner: &Owner, email: &str) -> i64 {
    let created = owner.post("/subscribers", &json!({"email": email}));
    created.expect(201);
    created.json()["id"].as_i64().unwrap()
}

fn set_membership(owner: &Owner, id: i64, body: Value) -> Resp {
    owner.api(
        "PUT",
        &format!("/subscribers/{id}/membership"),
        Some(&json!({ "membership": body })),
    )
}

/// Signs `email` in on `site` through the mailed link; returns the link used.
pub(crate) fn sign_in(app: &App, site: &Client, email: &str) -> String {
    let page = site.get("/signin");
    page.expect(200);
    let before = app.smtp.messages_to(email).len();
    site.post_form(
        "/signin",
        &[("authenticity_token", &page.csrf_token()), ("email", email)],
    )
    .expect(200);
    let mail = app.smtp.wait_for_message_to(email, before + 1);
    let link = link_containing(&mail.text(), "/signin/").expect("a sign-in link");
    let confirm = site.get(&path_of(&link));
    confirm.expect(200);
    let signed = site.post_form(
        &path_of(&link),
        &[("authenticity_token", &confirm.csrf_token())],
    );
    assert_eq!(signed.redirect(), "/account");
    link
}

#[test]
fn memberships_through_the_api_and_comped_readers_on_the_site() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Harbour Members");
    set_sender(&owner);
    listen(
        &app,
        &owner,
        &["member.upgraded", "member.downgraded", "subscriber.updated"],
    );
    let (free, paid) = (unique_email("free"), unique_email("paid"));
    let (free_id, paid_id) = (add(&owner, &free), add(&owner, &paid));

    // Every subscriber carries a membership; a new one is free.
    let shown = owner.get(&format!("/subscribers/{free_id}")).json();
    assert_eq!(shown["membership"]["status"], "free");
    assert_eq!(shown["membership"]["plan"], "free");
    assert_eq!(shown["membership"]["since"], Value::Null);

    // Refusals name the field and change nothing.
    let past = "2001-01-01T00:00:00Z";
    for (body, field) in [
        (json!({"status": "trialing"}), "status"),
        (json!({"status": "paid", "until": past}), "until"),
        (
            json!({"status": "free", "until": "2099-01-01T00:00:00Z"}),
            "until",
        ),
        (json!({"status": "paid", "until": "next tuesday"}), "until"),
    ] {
        let refused = set_membership(&owner, paid_id, body.clone());
        assert_eq!(refused.status, 422, "{body}: {}", refused.body);
        assert!(refused.body.contains(field), "{field}: {}", refused.body);
    }
    set_membership(&owner, 999_999, json!({"status": "paid"})).expect(404);
    assert_eq!(
        owner.get(&format!("/subscribers/{paid_id}")).json()["membership"]["status"],
        "free"
    );

    // Comped for ten days: paid access, and member.upgraded for the owner's webhooks.
    let until = app.clock_now() + jiff::SignedDuration::from_hours(240);
    let comped = set_membership(
        &owner,
        paid_id,
        json!({"status": "comped", "until": until.to_string()}),
    );
    comped.expect(200);
    let m = &comped.json()["membership"];
    assert_eq!(
        (m["status"].as_str(), m["plan"].as_str()),
        (Some("comped"), Some("paid"))
    );
    assert!(m["since"].is_string(), "{m}");
    assert_eq!(last_event(&app, "member.upgraded")["email"], paid);

    // A paid issue, published, sent to everyone.
    let created = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Members' tide tables", "content_markdown": paid_markdown(),
            "status": "approved", "visibility": "paid"}}),
    );
    created.expect(201);
    assert_eq!(created.json()["visibility"], "paid");
    assert_eq!(created.json()["paid_members_only"], false);
    let id = created.json()["id"].as_i64().unwrap();
    let bad = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"visibility": "secret"}}),
    );
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert_eq!(send_now(&owner, id), 2);
    wait_status(&owner, id, "sent", Duration::from_secs(30));
    let published = owner.post(&format!("/issues/{id}/publish"), &json!({}));
    published.expect(200);
    let path = path_of(published.json()["web_url"].as_str().unwrap());

    // By mail: the whole issue to the comped member, the excerpt and an upgrade link to
    // the free one.
    let to_paid = app.smtp.wait_for_message_to(&paid, 1);
    assert!(to_paid.text().contains(SECRET), "{}", to_paid.text());
    let to_free = app.smtp.wait_for_message_to(&free, 1);
    for part in [to_free.text(), to_free.html()] {
        assert!(!part.contains(SECRET), "{part}");
        assert!(part.contains("This issue is for paid members"), "{part}");
        assert!(part.contains("tide tables for members"), "{part}");
    }
    // The upgrade link is the reader's account page on the newsletter's site.
    let upgrade = link_containing(&to_free.text(), "/account").expect("an upgrade link");
    assert_eq!(path_of(&upgrade), "/account", "{upgrade}");
    assert!(upgrade.contains(&owner.subdomain), "{upgrade}");

    // On the site, to anyone: the excerpt and the paywall, kept from caches; the text
    // reaches no public surface.
    let site = app.site_client(&owner.subdomain);
    let page = site.get(&path);
    page.expect(200);
    assert!(
        page.body.contains("This issue is for paid members"),
        "{}",
        page.body
    );
    assert!(page.body.contains("tide tables for members"));
    assert_eq!(page.header("cache-control"), Some("private, no-store"));
    for surface in ["/", "/archive", "/feed.xml", &path] {
        let shown = site.get(surface);
        assert!(
            !shown.body.contains(SECRET),
            "{surface} shows the paid text"
        );
    }
    assert!(site.get("/archive").body.contains("Paid"));
    let view = site.get(&path_of(
        &link_containing(&to_free.text(), "/view/").expect("the view-in-browser link"),
    ));
    assert!(
        !view.body.contains(SECRET),
        "the mail's web link shows the paid text"
    );
    let anonymous = app.client().get(&format!("/api/v1/issues/{id}"));
    assert_eq!(anonymous.status, 401);

    // The comped reader signs in by the mailed link and reads it; the link works once.
    let reader = app.site_client(&owner.subdomain);
    let link = sign_in(&app, &reader, &paid);
    let read = reader.get(&path);
    assert!(read.body.contains(SECRET), "a paid reader sees the text");
    let account = reader.get("/account");
    account.expect(200);
    assert!(
        account.body.contains("a gift of Harbour Members"),
        "{}",
        account.body
    );
    let again = reader.get(&path_of(&link));
    let used = reader.post_form(
        &path_of(&link),
        &[("authenticity_token", &again.csrf_token())],
    );
    assert_eq!(used.status, 404, "a used link: {}", used.body);

    // A free reader signed in: still the paywall.
    let free_reader = app.site_client(&owner.subdomain);
    sign_in(&app, &free_reader, &free);
    let walled = free_reader.get(&path);
    assert!(!walled.body.contains(SECRET));
    assert!(
        walled.body.contains("Upgrade to read it"),
        "{}",
        walled.body
    );

    // Asking for a link for an address that is no subscriber answers the same, mails nothing.
    let stranger = unique_email("stranger");
    let form = site.get("/signin");
    site.post_form(
        "/signin",
        &[
            ("authenticity_token", &form.csrf_token()),
            ("email", &stranger),
        ],
    )
    .expect(200);
    assert_eq!(queued_mails(&app, &stranger, ""), 0);
    let invalid = site.post_form(
        "/signin",
        &[
            ("authenticity_token", &form.csrf_token()),
            ("email", "not an address"),
        ],
    );
    assert_eq!(invalid.status, 422);

    // A link is good for 15 minutes.
    let late = app.site_client(&owner.subdomain);
    let page = late.get("/signin");
    let before = app.smtp.messages_to(&free).len();
    late.post_form(
        "/signin",
        &[("authenticity_token", &page.csrf_token()), ("email", &free)],
    )
    .expect(200);
    let mail = app.smtp.wait_for_message_to(&free, before + 1);
    let link = link_containing(&mail.text(), "/signin/").unwrap();
    app.advance_clock(Duration::from_secs(16 * 60));
    let confirm = late.get(&path_of(&link));
    let expired = late.post_form(
        &path_of(&link),
        &[("authenticity_token", &confirm.csrf_token())],
    );
    assert_eq!(expired.status, 404, "{}", expired.body);

    // A paid issue for paid members only goes to the comped member alone.
    let only = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Only for members", "content_markdown": paid_markdown(),
            "status": "approved", "visibility": "paid", "paid_members_only": true}}),
    );
    only.expect(201);
    let only_id = only.json()["id"].as_i64().unwrap();
    assert_eq!(send_now(&owner, only_id), 1);
    wait_status(&owner, only_id, "sent", Duration::from_secs(30));
    wait_for("the paid members' issue", Duration::from_secs(20), || {
        app.smtp
            .messages_to(&paid)
            .iter()
            .any(|m| m.parsed().subject() == Some("Only for members"))
            .then_some(())
    });
    assert!(
        app.smtp
            .messages_to(&free)
            .iter()
            .all(|m| m.parsed().subject() != Some("Only for members"))
    );

    // Ten days later the comp has ended: free, and the paywall again.
    let downgrades = || -> i64 {
        app.db()
            .query_row(
                "SELECT count(*) FROM events WHERE kind = 'member.downgraded'
                 AND payload ->> '$.data.subscription_id' = ?1",
                [paid_id],
                |r| r.get(0),
            )
            .unwrap()
    };
    let told_before = downgrades();
    app.advance_clock(Duration::from_secs(241 * 3600));
    let after = owner.get(&format!("/subscribers/{paid_id}")).json();
    assert_eq!(after["membership"]["status"], "free", "{after}");
    // The end is told to the owner's webhooks once, by the periodic job; its runs after that
    // tell nothing more.
    wait_for("member.downgraded", Duration::from_secs(20), || {
        (downgrades() == told_before + 1).then_some(())
    });
    assert_eq!(
        last_event(&app, "member.downgraded")["membership"]["status"],
        "free"
    );
    let runs = || app.count("SELECT attempts FROM jobs WHERE kind = 'tell_membership_lapses'");
    let ran = runs();
    app.advance_clock(Duration::from_secs(11 * 60));
    wait_for(
        "the lapse job to run again",
        Duration::from_secs(20),
        || (runs() > ran).then_some(()),
    );
    assert_eq!(downgrades(), told_before + 1, "told once");
    let ended = reader.get(&path);
    assert!(!ended.body.contains(SECRET), "an ended comp still reads");
    let stats = owner.get("/newsletter/stats").json();
    assert_eq!(stats["data"]["memberships"]["comped_members"], 0, "{stats}");
}

#[test]
fn a_reader_changes_their_address_and_leaves_from_the_account_page() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Quay Readers");
    set_sender(&owner);
    let email = unique_email("mover");
    let id = add(&owner, &email);
    let site = app.site_client(&owner.subdomain);
    // Not signed in: the account page sends to sign in.
    assert_eq!(site.get("/account").redirect(), "/signin");
    sign_in(&app, &site, &email);

    let account = site.get("/account");
    let moved = unique_email("moved");
    site.post_form(
        "/account/email",
        &[
            ("authenticity_token", &account.csrf_token()),
            ("email", &moved),
        ],
    )
    .expect(200);
    // Nothing changes until the new address confirms.
    assert_eq!(
        owner.get(&format!("/subscribers/{id}")).json()["email"],
        email
    );
    let mail = app.smtp.wait_for_message_to(&moved, 1);
    let link = link_containing(&mail.text(), "/account/email/").expect("a confirm link");
    let confirm = site.get(&path_of(&link));
    site.post_form(
        &path_of(&link),
        &[("authenticity_token", &confirm.csrf_token())],
    )
    .expect(200);
    assert_eq!(
        owner.get(&format!("/subscribers/{id}")).json()["email"],
        moved
    );

    let account = site.get("/account");
    site.post_form(
        "/account/unsubscribe",
        &[("authenticity_token", &account.csrf_token())],
    )
    .expect(200);
    assert_eq!(
        owner.get(&format!("/subscribers/{id}")).json()["status"],
        "unsubscribed"
    );
    // A form without its token changes nothing.
    let forged = site.post_form("/account/email", &[("email", "x@example.com")]);
    assert_eq!(forged.status, 403);

    let account = site.get("/account");
    assert_eq!(
        site.post_form("/signout", &[("authenticity_token", &account.csrf_token())])
            .redirect(),
        "/"
    );
    assert_eq!(site.get("/account").redirect(), "/signin");
}

#[test]
fn bad_prices_an_unreachable_stripe_and_webhooks_without_stripe_change_nothing() {
    // Stripe's API is a port nothing listens on.
    let closed = crate::support::app::free_port();
    let app = spawn_app_with(&["--stripe-api-url", &format!("http://127.0.0.1:{closed}")]);
    let owner = onboard_paid(&app, "Shoal Payments");
    let site = app.site_client(&owner.subdomain);

    // Before Stripe is connected, its webhook endpoint takes nothing.
    let event = json!({"id": "evt_1", "type": "customer.subscription.updated", "created": 1});
    let refused = site.request(
        "POST",
        "/stripe/webhook",
        &[("Stripe-Signature", "t=1,v1=00")],
        Some(("application/json", event.to_string().into_bytes())),
    );
    let refused = refused.expect("an answer");
    assert_eq!(refused.status, 400, "{}", refused.body);

    // A price that is not money is refused with the form again, and nothing is saved.
    let base = format!("/newsletters/{}/memberships", owner.newsletter_id);
    let page = owner.client.get(&base);
    let bad = owner.client.post_form(
        &format!("{base}/plan"),
        &[
            ("authenticity_token", &page.csrf_token()),
            ("plan[currency]", "eur"),
            ("plan[monthly]", "five"),
            ("plan[yearly]", "-3"),
            ("plan[trial_days]", "0"),
            ("plan[description]", ""),
        ],
    );
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(
        bad.body.contains("value=\"five\""),
        "the form keeps what was typed"
    );
    let plans: i64 = app
        .db()
        .query_row("SELECT count(*) FROM membership_plans", [], |r| r.get(0))
        .unwrap();
    assert_eq!(plans, 0);
    // Without a plan the subscribe page offers none.
    assert!(!site.get("/subscribe").body.contains("Paid membership"));

    // Connected, but Stripe cannot be reached when a reader upgrades: the account page
    // says so, and the reader stays free.
    connect(&owner, "5", "", "0");
    let email = unique_email("stranded");
    let id = add(&owner, &email);
    sign_in(&app, &site, &email);
    let account = site.get("/account");
    assert!(
        account.body.contains("Upgrade monthly (5.00 EUR)"),
        "{}",
        account.body
    );
    let upgrade = press_upgrade(&site, "month", "500");
    assert_eq!(upgrade.status, 422, "{}", upgrade.body);
    assert!(
        upgrade
            .body
            .contains("The payment page could not be opened"),
        "{}",
        upgrade.body
    );
    // A billing period the plan does not offer is refused too.
    let yearly = press_upgrade(&site, "year", "500");
    assert_eq!(yearly.status, 422, "{}", yearly.body);
    assert_eq!(
        owner.get(&format!("/subscribers/{id}")).json()["membership"]["status"],
        "free"
    );
    // Connected, a webhook without Stripe's signature is refused; nothing is recorded.
    let unsigned = site
        .request(
            "POST",
            "/stripe/webhook",
            &[],
            Some(("application/json", event.to_string().into_bytes())),
        )
        .expect("an answer");
    assert_eq!(unsigned.status, 400, "{}", unsigned.body);
    let recorded: i64 = app
        .db()
        .query_row("SELECT count(*) FROM stripe_events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(recorded, 0);
}

#[test]
fn the_send_page_chooses_who_gets_a_paid_issue_and_sends_what_it_counted() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Reef Choices");
    set_sender(&owner);
    let (free, paid) = (unique_email("reef-free"), unique_email("reef-paid"));
    add(&owner, &free);
    let paid_id = add(&owner, &paid);
    set_membership(&owner, paid_id, json!({"status": "comped", "until": null})).expect(200);
    let created = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Reef ledger", "content_markdown": paid_markdown(),
            "status": "approved", "visibility": "paid"}}),
    );
    let id = created.json()["id"].as_i64().unwrap();
    let send = format!("/newsletters/{}/issues/{id}/send", owner.newsletter_id);

    // The page offers the choice, everyone ticked (the issue's choice), and counts both.
    let page = owner.client.get(&send);
    page.expect(200);
    assert!(
        page.body.contains("Who gets this paid issue by e-mail"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(r#"value="everyone" checked"#),
        "{}",
        page.body
    );
    assert!(page.body.contains("Send to 2 subscribers"), "{}", page.body);
    let count = format!(
        "/newsletters/{}/issues/{id}/audience_count?mailed_to=paid",
        owner.newsletter_id
    );
    let counted = owner.client.get(&count).json();
    assert_eq!(
        (
            counted["recipients"].as_i64(),
            counted["mailed_to"].as_str()
        ),
        (Some(1), Some("paid")),
        "{counted}"
    );

    // "Paid members only" ticked after the count of everyone: back with the new count,
    // nothing queued.
    let fields: Vec<(String, String)> = send_form_fields(&page.body)
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "mailed_to" => (k, "paid".to_string()),
            _ => (k, v),
        })
        .collect();
    let changed = owner.client.submit(&send, &send, &pairs(&fields));
    changed.expect(409);
    assert!(
        changed.body.contains("it now goes to 1 subscriber"),
        "{}",
        changed.body
    );
    assert!(
        changed.body.contains(r#"value="paid" checked"#),
        "{}",
        changed.body
    );
    assert_eq!(
        owner.get(&format!("/issues/{id}")).json()["status"],
        "approved"
    );

    // Sent as the page now counts: the paid member only; the choice is the issue's.
    let sent = owner
        .client
        .submit(&send, &send, &pairs(&send_form_fields(&changed.body)));
    sent.redirect();
    wait_status(&owner, id, "sent", Duration::from_secs(30));
    let issue = owner.get(&format!("/issues/{id}")).json();
    assert_eq!(issue["recipients"], 1, "{issue}");
    assert_eq!(issue["paid_members_only"], true, "{issue}");
    assert!(
        app.smtp
            .wait_for_message_to(&paid, 1)
            .text()
            .contains(SECRET)
    );
    assert!(
        app.smtp.messages_to(&free).is_empty(),
        "the free member got nothing"
    );
}
