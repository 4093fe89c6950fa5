//! Sends when things fail, through the real binary and a relay that fails on
//! command: refusals at RCPT and after the message, connections cut mid-message or left
//! unanswered, a relay that is down (at the start, midway, past the outage limit), a
//! refusal recorded before a kill, and SIGTERM in the middle of a send. Each ends with the
//! promise checked recipient by recipient: one copy each, or accounted as `unconfirmed`,
//! `bounced` or `failed`, and nothing counted `sent` that did not arrive.

use std::time::Duration;

use crate::support::send::{
    addresses, approved_issue, issue, send_now, subscribe_all, tally, wait_status,
};
use crate::support::tls::TestCa;
use crate::support::*;

fn delivery(app: &App, email: &str) -> (String, i64, String) {
    app.db()
        .query_row(
            "SELECT status, attempts, coalesce(last_error, '') FROM deliveries WHERE email = ?1",
            [email],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap_or_else(|e| panic!("no delivery to {email}: {e}"))
}

fn issue_page(owner: &Owner, id: i64) -> String {
    format!("/newsletters/{}/issues/{id}", owner.newsletter_id)
}

/// Messages the sink took for recipients whose address starts with `stem`.
fn readers_reached(app: &App, stem: &str) -> usize {
    app.smtp
        .counts()
        .iter()
        .filter(|(to, _)| to.starts_with(stem))
        .map(|(_, n)| n)
        .sum()
}

/// Waits until the sink has taken `n` messages.
fn wait_received(app: &App, n: usize) {
    app.smtp.wait_for_count(n, Duration::from_secs(60));
}

#[test]
fn faults_each_refusal_and_cut_off_ends_where_it_belongs() {
    // Every answer is a little slow, within the timeout.
    let sink = SmtpSink::start_with(Rules {
        delay: Duration::from_millis(20),
        ..Rules::default()
    });
    let app = spawn_app_on(
        sink,
        &["--send-retry-base-ms", "50", "--smtp-timeout-ms", "1500"],
    );
    let owner = onboard_paid(&app, "Fault Lines");
    let emails = addresses("fault", 40);
    subscribe_all(&owner, &emails);
    let plays = [
        Fault::AtRcpt(421),
        Fault::AtRcpt(451),
        Fault::AtRcpt(550),
        Fault::AfterData(451),
        Fault::AfterData(550),
        Fault::DropAtData,
        Fault::DropAfterData,
        Fault::NoReply,
    ];
    for (email, fault) in emails.iter().zip(plays) {
        app.smtp.add_faults(email, &[fault]);
    }
    let id = approved_issue(&owner, "Fault lines");
    assert_eq!(send_now(&owner, id), 40);
    let shown = wait_status(&owner, id, "sent", Duration::from_secs(60));

    let result = tally(&app, id, &emails);
    result.assert_promise_kept();
    // Refused for now: tried again, arrived once.
    for n in [1, 3] {
        let (status, attempts, _) = delivery(&app, &emails[n]);
        assert_eq!((status.as_str(), attempts), ("sent", 2), "{}", emails[n]);
    }
    // The connection closed before the end of the message (a 421 at RCPT hangs up, and a
    // hang-up at DATA): the relay's failure, so tried again at no cost to the recipient, and
    // arrived once.
    for n in [0, 5] {
        let (status, attempts, _) = delivery(&app, &emails[n]);
        assert_eq!((status.as_str(), attempts), ("sent", 1), "{}", emails[n]);
    }
    // Refused for good, at RCPT or after the message: bounced, never received.
    for n in [2, 4] {
        assert_eq!(delivery(&app, &emails[n]).0, "bounced", "{}", emails[n]);
    }
    // The end of the message went out and no answer came: unconfirmed, never sent again.
    for n in [6, 7] {
        let (status, attempts, error) = delivery(&app, &emails[n]);
        assert_eq!(
            (status.as_str(), attempts),
            ("unconfirmed", 1),
            "{}",
            emails[n]
        );
        assert!(error.contains("not sent again"), "{error}");
        assert_eq!(app.smtp.messages_to(&emails[n]).len(), 1);
    }
    assert_eq!(
        (result.sent, result.unconfirmed, result.bounced),
        (36, 2, 2)
    );

    // The report counts by outcome, everywhere it is shown.
    let counts = &shown["delivery"];
    assert_eq!(counts["recipients"], 40);
    assert_eq!(counts["sent"], 36);
    assert_eq!(counts["unconfirmed"], 2);
    assert_eq!(counts["bounced"], 2);
    assert_eq!(
        (counts["failed"].as_i64(), counts["pending"].as_i64()),
        (Some(0), Some(0))
    );
    let summary = shown["last_error"]
        .as_str()
        .expect("a sent issue with a shortfall says so");
    assert!(
        summary.contains("2 bounced") && summary.contains("2 unconfirmed"),
        "{summary}"
    );
    let stats = owner.get("/newsletter/stats").json()["data"]["engagement"]["last_30_days"].clone();
    assert_eq!(
        (
            stats["emails_sent"].as_i64(),
            stats["emails_unconfirmed"].as_i64()
        ),
        (Some(36), Some(2))
    );
    let page = owner.client.get(&issue_page(&owner, id));
    page.expect(200);
    assert!(
        page.body.contains("id=\"report-unconfirmed\">2<"),
        "{}",
        page.body
    );
    assert!(page.body.contains("2 unconfirmed"));
}

#[test]
fn faults_a_relay_down_at_the_start_and_midway_delays_the_send_but_loses_nobody() {
    // Slow enough that the send is still going when the relay goes down midway.
    let sink = SmtpSink::start_with(Rules {
        delay: Duration::from_millis(6),
        ..Rules::default()
    });
    let app = spawn_app_on(
        sink,
        &["--rate-limit-bulk", "100", "--send-outage-retry-ms", "100"],
    );
    let owner = onboard_paid(&app, "Outage Notes");
    let emails = addresses("outage", 1500);
    subscribe_all(&owner, &emails);
    let id = approved_issue(&owner, "Through the outage");
    app.smtp.go_down();
    assert_eq!(send_now(&owner, id), 1500);

    // While the relay is down the API and the dashboard say why the send waits, and no
    // recipient is charged an attempt for it.
    let waiting = wait_for("the outage to be reported", Duration::from_secs(30), || {
        let shown = issue(&owner, id);
        shown["delivery"]["relay_unreachable_since"]
            .is_string()
            .then_some(shown)
    });
    assert_eq!(waiting["status"], "sending");
    assert!(waiting["delivery"]["next_attempt_at"].is_string());
    let reason = waiting["last_error"].as_str().unwrap().to_string();
    assert!(
        reason.contains("unreachable since") && reason.contains("next try"),
        "{reason}"
    );
    let page = owner.client.get(&issue_page(&owner, id)).body;
    assert!(page.contains("unreachable since"), "{page}");
    let progress = owner
        .client
        .get(&format!("{}/progress", issue_page(&owner, id)))
        .json();
    assert!(
        progress["waiting"]
            .as_str()
            .unwrap_or("")
            .contains("unreachable")
    );
    assert_eq!(
        app.count(&format!(
            "SELECT coalesce(max(attempts), 0) FROM deliveries WHERE issue_id = {id}"
        )),
        0
    );

    // A relay that answers but turns every connection away is just as unreachable.
    app.smtp.change_rules(|r| r.greeting = Some(421));
    app.smtp.go_up();
    wait_for(
        "the 421 greeting to be reported",
        Duration::from_secs(30),
        || {
            let shown = issue(&owner, id);
            shown["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("421"))
                .then_some(())
        },
    );
    assert_eq!(readers_reached(&app, "outage"), 0);

    // Back, then down again midway, then back.
    app.smtp.change_rules(|r| r.greeting = None);
    wait_received(&app, 150);
    app.smtp.go_down();
    wait_for(
        "the second outage to be reported",
        Duration::from_secs(30),
        || {
            issue(&owner, id)["delivery"]["relay_unreachable_since"]
                .is_string()
                .then_some(())
        },
    );
    app.smtp.go_up();
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(120));

    let result = tally(&app, id, &emails);
    result.assert_promise_kept();
    assert_eq!(result.failed, 0, "an outage fails nobody");
    assert_eq!(result.sent + result.unconfirmed, 1500);
    // Cut while their answer was on its way: at most one per connection.
    assert!(result.unconfirmed <= 8, "{result:?}");
    assert!(sent["delivery"]["relay_unreachable_since"].is_null());
    assert!(sent["delivery"]["next_attempt_at"].is_null());
    if result.unconfirmed == 0 {
        assert!(sent["last_error"].is_null(), "{sent}");
    }
}

#[test]
fn faults_connections_reset_mid_message_are_sent_again_and_never_unconfirmed() {
    // One message in 20 (5%) is cut off after about 1 KB: the relay closes with the rest of
    // the message unread, so its system resets the connection. Whenever the sender notices
    // (while writing the body or its end mark, or waiting for the answer), the relay cannot
    // have taken the message: it goes out again, and nobody is left `unconfirmed`. Over plain
    // SMTP (where the database writer writes the end marks) and over STARTTLS.
    reset_mid_message(None);
    let ca = TestCa::new();
    reset_mid_message(Some(&ca));
}

fn reset_mid_message(tls: Option<&TestCa>) {
    let sink = SmtpSink::start_with(Rules {
        reset_every: 20,
        tls: tls.map(|ca| ca.sink_tls(false)),
        ..Rules::default()
    });
    let url = format!("smtp://127.0.0.1:{}", sink.port);
    let mut args = vec!["--send-retry-base-ms", "50", "--smtp-url", &url];
    if let Some(ca) = tls {
        args.extend(["--smtp-ca", ca.ca_path()]);
    }
    let app = spawn_app_on(sink, &args);
    let owner = onboard_paid(&app, "Cut Short");
    let emails = addresses("cut", 1000);
    subscribe_all(&owner, &emails);
    let id = approved_issue(&owner, "Cut short");
    send_now(&owner, id);
    let shown = wait_status(&owner, id, "sent", Duration::from_secs(180));

    let cut = app.smtp.cut();
    assert!(cut.len() >= 45, "the sink cut {} messages", cut.len());
    let result = tally(&app, id, &emails);
    result.assert_promise_kept();
    assert_eq!(
        (result.sent, result.unconfirmed, result.failed),
        (1000, 0, 0),
        "every reader once, none unconfirmed (TLS: {}): {result:?}",
        tls.is_some()
    );
    let received = app.smtp.counts();
    for (email, _) in &cut {
        assert_eq!(received[email], 1, "{email} got one copy");
        let (status, attempts, _) = delivery(&app, email);
        assert_eq!(
            (status.as_str(), attempts),
            ("sent", 1),
            "a reset costs {email} no attempt"
        );
    }
    if tls.is_some() {
        assert!(app.smtp.messages().iter().all(|m| m.tls), "all over TLS");
    }
    let cut_offs = app.count("SELECT coalesce(sum(cut_offs), 0) FROM deliveries");
    assert_eq!(cut_offs as usize, cut.len(), "each reset counted once");
    assert!(shown["last_error"].is_null(), "{shown}");
}

#[test]
fn faults_a_reset_after_the_end_mark_is_sent_again_a_clean_close_is_unconfirmed() {
    // The relay reads each of these messages whole, end mark included, then: resets the
    // connection without answering (it did not take the message: sent again), or closes it
    // cleanly without answering (it may have: `unconfirmed`, never sent twice).
    let app = spawn_app();
    let owner = onboard_paid(&app, "After The End");
    let emails = addresses("end", 6);
    subscribe_all(&owner, &emails);
    for email in &emails[..3] {
        app.smtp.add_faults(email, &[Fault::ResetAfterData]);
    }
    for email in &emails[3..5] {
        app.smtp.add_faults(email, &[Fault::DropAfterData]);
    }
    let id = approved_issue(&owner, "After the end");
    send_now(&owner, id);
    wait_status(&owner, id, "sent", Duration::from_secs(60));

    let result = tally(&app, id, &emails);
    result.assert_promise_kept();
    assert_eq!((result.sent, result.unconfirmed), (4, 2), "{result:?}");
    let counts = app.smtp.counts();
    for email in &emails[..3] {
        assert_eq!(counts[email], 1, "{email}: taken on the second try only");
        let (status, attempts, _) = delivery(&app, email);
        assert_eq!((status.as_str(), attempts), ("sent", 1), "{email}");
    }
    for email in &emails[3..5] {
        assert_eq!(counts[email], 1, "{email}: never sent twice");
        let (status, _, error) = delivery(&app, email);
        assert_eq!(status, "unconfirmed", "{email}");
        assert!(error.contains("closed the connection"), "{error}");
    }
}

#[test]
fn faults_a_refusal_after_the_end_is_recorded_before_the_connection_goes_on() {
    let sink = SmtpSink::start();
    let mut app = spawn_app_on(
        sink,
        &["--send-concurrency", "1", "--send-retry-base-ms", "50"],
    );
    let owner = onboard_paid(&app, "Deferred Notes");
    let emails = addresses("deferred", 5);
    subscribe_all(&owner, &emails);
    app.smtp.change_rules(|r| r.hold_after_refusal = true);
    app.smtp.add_faults(&emails[2], &[Fault::AfterData(451)]);
    let id = approved_issue(&owner, "Deferred");
    send_now(&owner, id);

    // The connection's next command after the 451 shows the sender went on: kill it there.
    wait_for(
        "a command after the refusal",
        Duration::from_secs(30),
        || app.smtp.held_after_refusal().then_some(()),
    );
    app.kill();
    let (status, attempts, error) = delivery(&app, &emails[2]);
    assert_eq!((status.as_str(), attempts), ("pending", 1));
    assert!(error.contains("451"), "{error}");

    app.smtp.change_rules(|r| r.hold_after_refusal = false);
    app.restart();
    wait_status(&owner, id, "sent", Duration::from_secs(60));
    let result = tally(&app, id, &emails);
    result.assert_promise_kept();
    assert_eq!((result.sent, result.unconfirmed), (5, 0));
}

#[test]
fn faults_a_relay_down_past_the_limit_stops_the_send_as_failed_until_resumed() {
    let sink = SmtpSink::start_with(Rules {
        delay: Duration::from_millis(5),
        ..Rules::default()
    });
    let app = spawn_app_on(
        sink,
        &[
            "--rate-limit-bulk",
            "100",
            "--send-outage-retry-ms",
            "100",
            "--send-outage-limit-ms",
            "1500",
        ],
    );
    let owner = onboard_paid(&app, "Long Outage");
    let emails = addresses("long", 1000);
    subscribe_all(&owner, &emails);
    let id = approved_issue(&owner, "Long outage");
    send_now(&owner, id);
    wait_received(&app, 60);
    app.smtp.go_down();

    let failed = wait_status(&owner, id, "failed", Duration::from_secs(60));
    let reason = failed["last_error"].as_str().unwrap().to_string();
    assert!(
        reason.contains("Sending stopped") && reason.contains("unreachable since"),
        "{reason}"
    );
    assert_eq!(
        failed["delivery"]["failed"], 0,
        "the outage fails no recipient"
    );
    assert!(failed["delivery"]["pending"].as_i64().unwrap() > 0);
    let listed = owner.get("/issues?status=failed").json();
    assert_eq!(listed["issues"][0]["id"], id);

    // Resumed through the API while the relay is still down: it waits, then stops again.
    let resp = owner.post(&format!("/issues/{id}/resume"), &json!({}));
    resp.expect(200);
    assert_eq!(resp.json()["issue"]["status"], "failed");
    assert!(resp.json()["remaining"].as_i64().unwrap() > 0);
    wait_status(&owner, id, "sending", Duration::from_secs(10));
    wait_status(&owner, id, "failed", Duration::from_secs(60));

    // Back up, resumed from the dashboard: it finishes, nobody twice.
    app.smtp.go_up();
    let page = owner.client.get(&issue_page(&owner, id));
    assert!(page.body.contains("Resume sending"), "{}", page.body);
    let resp = owner.client.submit(
        &issue_page(&owner, id),
        &format!("{}/resume", issue_page(&owner, id)),
        &[],
    );
    assert_eq!(resp.redirect(), issue_page(&owner, id));
    wait_status(&owner, id, "sent", Duration::from_secs(60));
    let result = tally(&app, id, &emails);
    result.assert_promise_kept();
    assert_eq!(result.sent + result.unconfirmed, 1000);
    assert!(result.unconfirmed <= 8, "{result:?}");

    // Only a stopped send resumes.
    let resp = owner.post(&format!("/issues/{id}/resume"), &json!({}));
    assert_eq!(resp.error_code(422), "invalid_state");
}

#[test]
fn faults_sigterm_finishes_the_messages_in_flight_and_exits_promptly() {
    let sink = SmtpSink::start_with(Rules {
        delay: Duration::from_millis(10),
        ..Rules::default()
    });
    let mut app = spawn_app_on(sink, &["--rate-limit-bulk", "100"]);
    let owner = onboard_paid(&app, "Clean Stop");
    let emails = addresses("stop", 3000);
    subscribe_all(&owner, &emails);
    let id = approved_issue(&owner, "Clean stop");
    send_now(&owner, id);
    wait_received(&app, 300);

    let took = app
        .stop_within(Duration::from_secs(20))
        .expect("the server exits by itself after SIGTERM");
    assert!(took < Duration::from_secs(5), "SIGTERM took {took:?}");
    assert!(app.log().contains("shutting down"));
    // The messages in flight finished and were recorded; the rest wait.
    let at_stop = readers_reached(&app, "stop");
    assert!(at_stop < 3000, "the send finished before the stop");
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id} AND status IN ('sending', 'unconfirmed')"
        )),
        0
    );
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id} AND status = 'sent'"
        )),
        at_stop as i64
    );

    app.restart();
    wait_status(&owner, id, "sent", Duration::from_secs(120));
    let result = tally(&app, id, &emails);
    result.assert_promise_kept();
    assert_eq!((result.sent, result.unconfirmed), (3000, 0));
}
