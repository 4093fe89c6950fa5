//! Sending again to the unconfirmed: real `unconfirmed` deliveries made by
//! the SMTP listener's faults (the whole message taken, then no answer or a hang-up), then
//! the owner's choice through the API and the dashboard. Checked at the listener: exactly one
//! more copy to each unconfirmed recipient and none to anyone else, never a third, also when
//! the second copy is cut off again or the server is killed while it is in flight.

use std::time::Duration;

use crate::support::browser::{Driver, click, runtime, screenshot, sign_in, wait_for_text};
use crate::support::send::{addresses, approved_issue, issue, send_now, subscribe_all};
use crate::support::*;

/// Sends an issue to `emails` (after the listener was told which faults to play on whom)
/// and waits until it is `sent`; returns its id.
fn sent_issue(owner: &Owner, emails: &[String], subject: &str) -> i64 {
    let id = approved_issue(owner, subject);
    assert_eq!(send_now(owner, id), emails.len() as i64);
    settled(owner, id);
    id
}

/// Waits until the issue is `sent` with nothing pending (a resend done); returns it.
fn settled(owner: &Owner, id: i64) -> Value {
    wait_for(
        &format!("issue {id} sent with nothing pending, its resend over"),
        Duration::from_secs(60),
        || {
            let shown = issue(owner, id);
            // The last message's outcome is written before the send's round ends and says
            // the resend is over (its note gone).
            let resending = shown["last_error"]
                .as_str()
                .is_some_and(|e| e.starts_with("Sending again to the unconfirmed"));
            (shown["status"] == "sent" && shown["delivery"]["pending"] == 0 && !resending)
                .then_some(shown)
        },
    )
}

fn resend(owner: &Owner, id: i64) -> Resp {
    owner.api("POST", &format!("/issues/{id}/resend_unconfirmed"), None)
}

/// Copies the listener took for each of `emails`, in order.
fn copies(app: &App, emails: &[String]) -> Vec<usize> {
    let counts = app.smtp.counts();
    emails
        .iter()
        .map(|e| counts.get(e).copied().unwrap_or(0))
        .collect()
}

/// The dashboard page at `path` answers `status` and shows each of `needles`; its HTML.
fn says(owner: &Owner, path: &str, status: u16, needles: &[&str]) -> String {
    let page = owner.client.get(path);
    page.expect(status);
    for needle in needles {
        assert!(
            page.body.contains(needle),
            "{path}: no {needle:?} in\n{}",
            page.body
        );
    }
    page.body
}

fn delivery(app: &App, email: &str) -> (String, bool) {
    app.db()
        .query_row(
            "SELECT status, resent_at IS NOT NULL FROM deliveries WHERE email = ?1",
            [email],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap_or_else(|e| panic!("no delivery to {email}: {e}"))
}

/// Nothing left that could send: once no send job is queued or running (the last one may
/// be closing its round), no delivery of the issue is pending or in flight.
fn nothing_left_to_send(app: &App, id: i64) {
    wait_for("the send jobs to end", Duration::from_secs(30), || {
        let live = app.count(
            "SELECT count(*) FROM jobs WHERE kind = 'send_issue' AND state IN ('queued', 'running')",
        );
        (live == 0).then_some(())
    });
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id} AND status IN ('pending', 'sending')"
        )),
        0
    );
}

#[test]
fn resend_unconfirmed_through_the_api_sends_each_unconfirmed_message_once_more() {
    let app = spawn_app_on(SmtpSink::start(), &["--smtp-timeout-ms", "1500"]);
    let owner = onboard_paid(&app, "Second Copies");
    listen(&app, &owner, &["issue.sent", "issue.published"]);
    let emails = addresses("again", 10);
    subscribe_all(&owner, &emails);
    // Taken whole, then a hang-up or silence: unconfirmed. The rest arrive.
    app.smtp.add_faults(&emails[1], &[Fault::DropAfterData]);
    app.smtp.add_faults(&emails[4], &[Fault::NoReply]);
    app.smtp.add_faults(&emails[7], &[Fault::DropAfterData]);
    let id = sent_issue(&owner, &emails, "Once more, with feeling");
    let shown = issue(&owner, id);
    assert_eq!(shown["delivery"]["unconfirmed"], 3, "{shown}");
    assert!(
        shown["last_error"]
            .as_str()
            .unwrap()
            .contains("3 unconfirmed")
    );
    assert_eq!(copies(&app, &emails), vec![1; 10]);

    // Refusals change nothing: another issue's status, an unknown id, a read-only key.
    let draft = owner.post("/issues", &json!({"issue": {"subject": "Draft"}}));
    let draft = draft.json()["id"].as_i64().unwrap();
    let approved = approved_issue(&owner, "Not sent yet");
    for other in [draft, approved] {
        assert_eq!(resend(&owner, other).error_code(422), "invalid_state");
    }
    assert_eq!(resend(&owner, 987_654).error_code(404), "not_found");
    let reader = create_api_key(&owner.client, owner.newsletter_id, &["read"]);
    let refused = owner.client.api(
        "POST",
        &format!("/issues/{id}/resend_unconfirmed"),
        &reader,
        None,
    );
    refused.error_code(403);
    assert_eq!(issue(&owner, id)["delivery"]["unconfirmed"], 3);

    // The owner's choice: each unconfirmed message goes out once more.
    let answer = resend(&owner, id);
    answer.expect(200);
    let body = answer.json();
    assert_eq!(body["resent"], 3, "{body}");
    assert_eq!(body["issue"]["status"], "sent");
    let counts = &body["issue"]["delivery"];
    assert_eq!(counts["unconfirmed"], 0, "{body}");
    assert_eq!(
        counts["sent"].as_i64().unwrap() + counts["pending"].as_i64().unwrap(),
        10,
        "{body}"
    );
    let done = settled(&owner, id);
    let mut expected = vec![1; 10];
    for n in [1, 4, 7] {
        expected[n] = 2;
        assert_eq!(delivery(&app, &emails[n]), ("sent".into(), true));
    }
    assert_eq!(
        copies(&app, &emails),
        expected,
        "one more copy each, none to others"
    );
    assert_eq!(done["delivery"]["sent"], 10);
    assert!(done["last_error"].is_null(), "{done}");
    assert!(done["delivery"]["relay_unreachable_since"].is_null());
    assert_eq!(done["sent_at"], shown["sent_at"], "the issue was sent once");

    // Asking again sends nothing.
    let again = resend(&owner, id);
    again.expect(200);
    assert_eq!(again.json()["resent"], 0);
    nothing_left_to_send(&app, id);
    assert_eq!(copies(&app, &emails), expected);
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'issue.sent'"),
        1,
        "no second issue.sent"
    );
    let stats = owner.get("/newsletter/stats").json()["data"]["engagement"]["last_30_days"].clone();
    assert_eq!(
        (
            stats["emails_sent"].as_i64(),
            stats["emails_unconfirmed"].as_i64()
        ),
        (Some(10), Some(0))
    );
}

#[test]
fn resend_unconfirmed_cut_off_again_or_killed_in_flight_is_never_sent_a_third_time() {
    let mut app = spawn_app_on(SmtpSink::start(), &[]);
    let owner = onboard_paid(&app, "Third Time Never");
    let emails = addresses("third", 5);
    subscribe_all(&owner, &emails);
    // emails[1]: both copies taken, then a hang-up. emails[2]: the second copy is taken and
    // left unanswered while the server is killed.
    app.smtp
        .add_faults(&emails[1], &[Fault::DropAfterData, Fault::DropAfterData]);
    app.smtp
        .add_faults(&emails[2], &[Fault::DropAfterData, Fault::NoReply]);
    let id = sent_issue(&owner, &emails, "Never thrice");
    assert_eq!(issue(&owner, id)["delivery"]["unconfirmed"], 2);

    assert_eq!(resend(&owner, id).json()["resent"], 2);
    // Observable: the second copy to emails[1] ended unconfirmed, the one to emails[2] is
    // in flight (recorded `sending` before its end mark; the listener has taken it).
    wait_for(
        "one resent copy unconfirmed, the other in flight",
        Duration::from_secs(30),
        || {
            (delivery(&app, &emails[1]) == ("unconfirmed".into(), true)
                && delivery(&app, &emails[2]) == ("sending".into(), true)
                && app.smtp.messages_to(&emails[2]).len() == 2)
                .then_some(())
        },
    );
    app.kill();
    app.restart();
    let done = settled(&owner, id);

    // Both stay unconfirmed, each with exactly one more copy, and neither is offered again.
    for email in &emails[1..3] {
        assert_eq!(delivery(&app, email), ("unconfirmed".into(), true));
    }
    assert_eq!(copies(&app, &emails), vec![1, 2, 2, 1, 1]);
    assert_eq!(done["delivery"]["unconfirmed"], 2);
    assert_eq!(done["delivery"]["sent"], 3);
    let summary = done["last_error"].as_str().unwrap();
    assert!(summary.starts_with("Delivered 3 of 5"), "{summary}");
    let again = resend(&owner, id);
    again.expect(200);
    assert_eq!(again.json()["resent"], 0);
    nothing_left_to_send(&app, id);
    assert_eq!(copies(&app, &emails), vec![1, 2, 2, 1, 1]);
    let page = says(
        &owner,
        &format!("/newsletters/{}/issues/{id}", owner.newsletter_id),
        200,
        &["Delivered 3 of 5"],
    );
    assert!(!page.contains("resend-offer"), "no offer left: {page}");
}

#[test]
fn resend_unconfirmed_a_relay_down_past_the_limit_leaves_them_to_ask_again() {
    let app = spawn_app_on(
        SmtpSink::start(),
        &[
            "--send-outage-retry-ms",
            "50",
            "--send-outage-limit-ms",
            "300",
        ],
    );
    let owner = onboard_paid(&app, "Down Again");
    let emails = addresses("down", 3);
    subscribe_all(&owner, &emails);
    app.smtp.add_faults(&emails[0], &[Fault::DropAfterData]);
    let id = sent_issue(&owner, &emails, "Through the outage");

    app.smtp.go_down();
    assert_eq!(resend(&owner, id).json()["resent"], 1);
    let stopped = wait_for("the resend to stop", Duration::from_secs(30), || {
        let shown = issue(&owner, id);
        shown["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("Sending again stopped"))
            .then_some(shown)
    });
    assert_eq!(stopped["status"], "sent");
    assert_eq!(stopped["delivery"]["unconfirmed"], 1);
    assert_eq!(stopped["delivery"]["pending"], 0);
    assert_eq!(delivery(&app, &emails[0]), ("unconfirmed".into(), false));
    nothing_left_to_send(&app, id);

    // None went out a second time, so the owner may ask again once the relay works.
    app.smtp.go_up();
    assert_eq!(resend(&owner, id).json()["resent"], 1);
    app.smtp.wait_for_message_to(&emails[0], 2);
    let done = settled(&owner, id);
    assert_eq!(done["delivery"]["sent"], 3);
    assert!(done["last_error"].is_null(), "{done}");
    assert_eq!(copies(&app, &emails), vec![2, 1, 1]);
}

#[test]
fn resend_unconfirmed_from_the_dashboard_asks_first_then_sends() {
    let app = spawn_app_on(SmtpSink::start(), &[]);
    let owner = onboard_paid(&app, "Dashboard Again");
    let emails = addresses("dash", 6);
    subscribe_all(&owner, &emails);
    app.smtp.add_faults(&emails[0], &[Fault::DropAfterData]);
    app.smtp.add_faults(&emails[3], &[Fault::DropAfterData]);
    let id = sent_issue(&owner, &emails, "Dashboard resend");
    let page_url = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);
    let confirm_url = format!("{page_url}/resend_unconfirmed");

    // The report offers it, with the right count and what it risks.
    let page = says(&owner, &page_url, 200, &["Send again to the 2 unconfirmed"]);
    assert!(page.contains("gets a second one"));
    assert!(page.contains(&format!("href=\"{confirm_url}\"")));

    // The confirmation says how many and what it risks; nothing is sent yet.
    let confirm = says(&owner, &confirm_url, 200, &["data-resendable=\"2\""]);
    assert!(confirm.contains("Send again to 2 recipients"));
    assert_eq!(copies(&app, &emails), vec![1; 6]);

    // A POST without its CSRF token is refused and changes nothing.
    let forged = owner.client.post_form(&confirm_url, &[]);
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert_eq!(issue(&owner, id)["delivery"]["unconfirmed"], 2);

    let sent = owner.client.submit(&confirm_url, &confirm_url, &[]);
    assert_eq!(sent.redirect(), page_url);
    says(
        &owner,
        &page_url,
        200,
        &["Sending again to 2 unconfirmed recipients."],
    );
    settled(&owner, id);
    assert_eq!(copies(&app, &emails), vec![2, 1, 1, 2, 1, 1]);
    let page = says(&owner, &page_url, 200, &[]);
    assert!(!page.contains("resend-offer"), "{page}");

    // Asked again: nothing to send, said plainly.
    let again = owner.client.submit(&confirm_url, &confirm_url, &[]);
    assert_eq!(again.redirect(), page_url);
    says(&owner, &page_url, 200, &["Nothing was sent again"]);
    says(
        &owner,
        &confirm_url,
        200,
        &["No unconfirmed message is left to send again"],
    );
    nothing_left_to_send(&app, id);
    assert_eq!(copies(&app, &emails), vec![2, 1, 1, 2, 1, 1]);

    // An issue that was not sent: the page says why, the POST is refused with the reason.
    let approved = approved_issue(&owner, "Not sent");
    let other = format!(
        "/newsletters/{}/issues/{approved}/resend_unconfirmed",
        owner.newsletter_id
    );
    says(&owner, &other, 200, &["this issue is approved"]);
    let refused = owner.client.submit(&other, &other, &[]);
    refused.expect(422);
    assert!(
        refused.body.contains("Only a sent issue"),
        "{}",
        refused.body
    );
    assert_eq!(issue(&owner, approved)["status"], "approved");
}

/// The report with the offer and the confirmation in Chromium: axe finds nothing, light and
/// dark, at desktop width and at 390 px with no sideways scroll; the button does it.
#[test]
#[cfg_attr(
    not(all(has_chromium, has_axe)),
    ignore = "needs chromium, chromedriver and axe-core (apt-get install chromium chromium-driver; npm install --prefix target/npm axe-core@4)"
)]
fn resend_unconfirmed_pages_pass_axe_light_and_dark_and_the_button_sends() {
    use crate::support::axe::Axe;
    let Some(driver) = Driver::start("resend pages") else {
        return;
    };
    let Some(axe) = Axe::load("resend pages") else {
        return;
    };
    let app = spawn_app_on(SmtpSink::start(), &[]);
    let owner = onboard_paid(&app, "Seen Twice");
    let emails = addresses("seen", 3);
    subscribe_all(&owner, &emails);
    app.smtp.add_faults(&emails[2], &[Fault::DropAfterData]);
    let id = sent_issue(&owner, &emails, "Looked at by axe");
    let page_url = format!(
        "{}/newsletters/{}/issues/{id}",
        app.base_url, owner.newsletter_id
    );
    let found = runtime().block_on(async {
        let c = driver.session().await;
        sign_in(&c, &app.base_url, &owner.email).await;
        let mut found = Vec::new();
        for (path, name, shown) in [
            ("", "report", "#resend-offer"),
            ("/resend_unconfirmed", "confirmation", "#resend-count"),
        ] {
            for scheme in ["light", "dark"] {
                let media =
                    json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]});
                driver.cdp(&c, "Emulation.setEmulatedMedia", media).await;
                for width in [1280, 390] {
                    c.set_window_size(width, 900).await.unwrap();
                    c.goto(&format!("{page_url}{path}")).await.unwrap();
                    wait_for_text(&c, "main", "Send again to").await;
                    found.extend(
                        axe.violations(&c, &format!("{name} {scheme} {width}"))
                            .await,
                    );
                    let overflow = c
                        .execute(
                            "return document.documentElement.scrollWidth > window.innerWidth",
                            vec![],
                        )
                        .await
                        .unwrap();
                    assert_eq!(
                        overflow,
                        json!(false),
                        "{name} scrolls sideways at {width}px"
                    );
                    let scroll = format!("document.querySelector('{shown}').scrollIntoView()");
                    c.execute(&scroll, vec![]).await.unwrap();
                    screenshot(&c, &format!("resend-{name}-{scheme}-{width}")).await;
                }
            }
        }
        c.set_window_size(1280, 900).await.unwrap();
        c.goto(&page_url).await.unwrap();
        click(&c, "#resend-offer a.button").await;
        click(
            &c,
            "form[action$=\"/resend_unconfirmed\"] button[type=submit]",
        )
        .await;
        wait_for_text(&c, "main", "Sending again to 1 unconfirmed recipient.").await;
        c.close().await.unwrap();
        found
    });
    assert!(
        found.is_empty(),
        "axe-core found {} violation(s):\n{}",
        found.len(),
        found.join("\n")
    );
    app.smtp.wait_for_message_to(&emails[2], 2);
    settled(&owner, id);
    assert_eq!(copies(&app, &emails), vec![1, 1, 2]);
}
