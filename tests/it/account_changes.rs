//! The account page changes the account: the password (other sessions end), the e-mail
//! address (confirmed at the new address, the old one told), deleting the account and its
//! newsletters (after typing its address; the data export offered first), and one time zone
//! shown: the newsletter's unless the account picks its own.

use std::time::Duration;

use crate::support::*;

/// Signs in `email` with `password` on a fresh client; the answer as given.
fn sign_in(app: &App, email: &str, password: &str) -> (Client, Resp) {
    let client = app.client();
    let resp = client.submit(
        "/session/new",
        "/session",
        &[("email_address", email), ("password", password)],
    );
    (client, resp)
}

#[test]
fn changing_the_password_needs_the_current_one_and_signs_out_the_other_sessions() {
    let app = spawn_app();
    let owner = onboard(&app, "Password Weekly");
    let (other, signed_in) = sign_in(&app, &owner.email, PASSWORD);
    assert_eq!(signed_in.redirect(), "/newsletters");

    // A wrong current password, or a new one too short: the form again, nothing changes.
    for (fields, message) in [
        (
            [
                ("current_password", "not it"),
                ("password", "a new secret 1"),
                ("password_confirmation", "a new secret 1"),
            ],
            "Current password is not the password of this account",
        ),
        (
            [
                ("current_password", PASSWORD),
                ("password", "short"),
                ("password_confirmation", "short"),
            ],
            "Password is too short",
        ),
    ] {
        let refused = owner
            .client
            .submit("/account", "/account/password", &fields);
        refused.expect(422);
        assert!(
            refused.body.contains(message),
            "{message}: {}",
            refused.body
        );
    }
    other.get("/newsletters").expect(200);

    let changed = owner.client.submit(
        "/account",
        "/account/password",
        &[
            ("current_password", PASSWORD),
            ("password", "a new secret 1"),
            ("password_confirmation", "a new secret 1"),
        ],
    );
    assert_eq!(changed.redirect(), "/account");
    let page = owner.client.get("/account");
    assert!(
        page.body
            .contains("Your password is changed. 1 other session is signed out."),
        "{}",
        page.body
    );
    // The other session is over; this one goes on; the new password signs in, the old not.
    assert_eq!(other.get("/newsletters").redirect(), "/session/new");
    owner.client.get("/newsletters").expect(200);
    sign_in(&app, &owner.email, PASSWORD).1.expect(422);
    assert_eq!(
        sign_in(&app, &owner.email, "a new secret 1").1.redirect(),
        "/newsletters"
    );
}

#[test]
fn changing_the_address_waits_for_the_new_one_and_tells_the_old_one() {
    let app = spawn_app();
    let owner = onboard(&app, "Moving Letters");
    let other = onboard(&app, "Staying Letters");

    // Refused: a bad or taken address, a wrong password; nothing is mailed.
    for (email, password, message) in [
        ("nowhere", PASSWORD, "Email is invalid"),
        (
            other.email.as_str(),
            PASSWORD,
            "Email has already been taken",
        ),
        (
            "new@example.net",
            "wrong",
            "Current password is not the password",
        ),
    ] {
        let refused = owner.client.submit(
            "/account",
            "/account/email",
            &[("email", email), ("current_password", password)],
        );
        refused.expect(422);
        assert!(
            refused.body.contains(message),
            "{message}: {}",
            refused.body
        );
    }

    let new_email = unique_email("moved");
    let asked = owner.client.submit(
        "/account",
        "/account/email",
        &[
            ("email", new_email.as_str()),
            ("current_password", PASSWORD),
        ],
    );
    assert_eq!(asked.redirect(), "/account");
    let mail = app.smtp.wait_for_message_to(&new_email, 1);
    let link = link_containing(&mail.text(), "/account/email/").expect("a change link");
    // Until the link is followed (a GET only asks), the account keeps its address.
    let path = path_of(&link);
    let ask = owner.client.get(&path);
    ask.expect(200);
    assert!(ask.body.contains(&new_email));
    assert!(owner.client.get("/account").body.contains(&owner.email));

    let done = owner.client.submit(&path, &path, &[]);
    assert_eq!(done.redirect(), "/account");
    let page = owner.client.get("/account");
    assert!(
        page.body
            .contains(&format!("id=\"account-email\">{new_email}<")),
        "{}",
        page.body
    );
    // The old address is told; the link is spent; sign-in takes the new address only.
    let told = app.smtp.wait_for_message_to(&owner.email, 2);
    assert!(
        told.text()
            .contains(&format!("now uses the address {new_email}")),
        "{}",
        told.text()
    );
    assert_eq!(owner.client.get(&path).redirect(), "/account");
    assert!(
        owner
            .client
            .get("/account")
            .body
            .contains("expired or was already used")
    );
    assert_eq!(
        sign_in(&app, &new_email, PASSWORD).1.redirect(),
        "/newsletters"
    );
    sign_in(&app, &owner.email, PASSWORD).1.expect(422);
}

#[test]
fn deleting_the_account_takes_its_newsletters_and_frees_the_address() {
    let app = spawn_app();
    let owner = onboard(&app, "Short Lived");
    let kept = onboard(&app, "Long Lived");
    for (who, n) in [(&owner, 30), (&kept, 3)] {
        let body = json!({"subscribers": (0..n).map(|i| json!({"email": format!("r{i}@example.net")})).collect::<Vec<_>>()});
        who.post("/subscribers/bulk_create", &body).expect(200);
        who.post(
            "/issues",
            &json!({"issue": {"subject": "Hello", "content_markdown": "Hi"}}),
        )
        .expect(201);
    }

    // The page offers each newsletter's export first.
    let page = owner.client.get("/account/delete");
    page.expect(200);
    assert!(page.body.contains(&format!(
        "/newsletters/{}/subscribers/export.csv",
        owner.newsletter_id
    )));
    // The wrong address typed, or the wrong password: the page again, nothing deleted.
    for (typed, password, message) in [
        (
            "someone@else.example",
            PASSWORD,
            "Confirmation must be the e-mail address",
        ),
        (
            owner.email.as_str(),
            "wrong",
            "Current password is not the password",
        ),
    ] {
        let refused = owner.client.submit(
            "/account/delete",
            "/account/delete",
            &[("confirmation", typed), ("current_password", password)],
        );
        refused.expect(422);
        assert!(
            refused.body.contains(message),
            "{message}: {}",
            refused.body
        );
    }
    owner.get("/newsletter").expect(200);

    let deleted = owner.client.submit(
        "/account/delete",
        "/account/delete",
        &[
            ("confirmation", &owner.email.to_uppercase()),
            ("current_password", PASSWORD),
        ],
    );
    assert_eq!(deleted.redirect(), "/");
    // At once: signed out, the API key gone, the address free for a new account.
    assert_eq!(owner.client.get("/newsletters").redirect(), "/session/new");
    owner.get("/newsletter").expect(401);
    sign_in(&app, &owner.email, PASSWORD).1.expect(422);
    // The purge job removes the newsletter and what was in it; the other account keeps all.
    wait_for("the purge", Duration::from_secs(20), || {
        (app.count(&format!(
            "SELECT count(*) FROM newsletters WHERE id = {}",
            owner.newsletter_id
        )) == 0)
            .then_some(())
    });
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM subscribers WHERE newsletter_id = {}",
            owner.newsletter_id
        )),
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM users WHERE email LIKE 'deleted-%'"),
        0
    );
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM subscribers WHERE newsletter_id = {}",
            kept.newsletter_id
        )),
        3,
        "the other account keeps its own"
    );
    app.site_client(&owner.subdomain).get("/").expect(404);
    let again = app.client();
    submit_sign_up(&again, &owner.email);
}

#[test]
fn times_show_in_the_newsletters_zone_unless_the_account_picks_its_own() {
    let app = spawn_app();
    let owner = onboard(&app, "Berlin Times");
    owner
        .patch("/newsletter", &json!({"time_zone": "Europe/Berlin"}))
        .expect(200);
    let issues = format!("/newsletters/{}/issues/new", owner.newsletter_id);
    let page = owner.client.get(&issues);
    page.expect(200);
    assert!(
        page.body.contains("Send time (Europe/Berlin)"),
        "{}",
        page.body
    );
    let account = owner.client.get("/account");
    assert!(
        account
            .body
            .contains("<option value=\"\" selected>Each newsletter's own zone"),
        "{}",
        account.body
    );

    // The account picks Tokyo: every page shows it; back to following the newsletter.
    let picked = owner.client.submit(
        "/account",
        "/account/time_zone",
        &[("time_zone", "Asia/Tokyo")],
    );
    assert_eq!(picked.redirect(), "/account");
    assert!(
        owner
            .client
            .get(&issues)
            .body
            .contains("Send time (Asia/Tokyo)")
    );
    let followed = owner
        .client
        .submit("/account", "/account/time_zone", &[("time_zone", "")]);
    assert_eq!(followed.redirect(), "/account");
    assert!(
        owner
            .client
            .get(&issues)
            .body
            .contains("Send time (Europe/Berlin)")
    );
}
