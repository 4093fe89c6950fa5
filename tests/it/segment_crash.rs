//! `kill -9` twice in the middle of a send to a segment, as
//! `sending_crash.rs` does for a send to everyone: after the restarts every member of the
//! audience got the issue once (or is counted `unconfirmed`, its message cut off by a kill),
//! nobody outside the audience got anything, and the issue's recipients, delivery counts and
//! the newsletter's stats are the audience.

use std::collections::HashMap;
use std::time::Duration;

use crate::support::send::{addresses, approved_issue, tally, unsubscribe_all, wait_status};
use crate::support::*;

const SUBSCRIBERS: usize = 3000;
const CONNECTIONS: usize = 8;

/// The tags of subscriber `n`: even ones `news` (the audience), `n % 4 == 1` also `vip`
/// (excluded), `n % 4 == 3` only `events` (not asked for).
fn tags_of(n: usize) -> Vec<&'static str> {
    match n % 4 {
        1 => vec!["news", "vip"],
        3 => vec!["events"],
        _ => vec!["news"],
    }
}

/// Subscribes `emails` with their tags through `bulk_create` (1,000 a request).
fn subscribe_tagged(owner: &Owner, emails: &[String]) {
    for (chunk_no, chunk) in emails.chunks(1000).enumerate() {
        let subscribers: Vec<Value> = chunk
            .iter()
            .enumerate()
            .map(|(i, e)| json!({"email": e, "tags": tags_of(chunk_no * 1000 + i)}))
            .collect();
        let resp = owner.post(
            "/subscribers/bulk_create",
            &json!({ "subscribers": subscribers }),
        );
        resp.expect(200);
        assert_eq!(resp.json()["created"], chunk.len(), "{}", resp.body);
    }
}

#[test]
fn segment_crash_kill_9_midway_reaches_the_audience_once_and_nobody_else() {
    let sink = SmtpSink::start_with(Rules {
        delay: Duration::from_millis(2),
        ..Rules::default()
    });
    let mut app = spawn_app_on(sink, &["--rate-limit-bulk", "100"]);
    let owner = onboard_paid(&app, "Segment Crash");
    let emails = addresses("segcrash", SUBSCRIBERS);
    subscribe_tagged(&owner, &emails);
    // A few tagged `news` who unsubscribed: outside the audience too.
    let gone: Vec<String> = emails.iter().step_by(200).cloned().collect();
    unsubscribe_all(&app, &owner, &gone);
    let (mut audience, mut outside) = (Vec::new(), Vec::new());
    for (n, email) in emails.iter().enumerate() {
        if tags_of(n) == ["news"] && !gone.contains(email) {
            audience.push(email.clone());
        } else {
            outside.push(email.clone());
        }
    }
    assert!(audience.len() > 1000 && outside.len() > 1000);

    let id = approved_issue(&owner, "Segment crash");
    let resp = owner.post(
        &format!("/issues/{id}/send_now"),
        &json!({"tags": ["news"], "exclude_tags": ["vip"]}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], audience.len(), "{}", resp.body);

    // Kill once a quarter of the audience has its message, restart, kill again past half
    // way, restart: the moments `sending_crash.rs` kills at.
    let received = |app: &App| -> HashMap<String, usize> {
        app.smtp
            .counts()
            .into_iter()
            .filter(|(to, _)| to.starts_with("segcrash"))
            .collect()
    };
    for share in [4, 2] {
        let goal = audience.len() / share;
        wait_for("enough messages", Duration::from_secs(60), || {
            (received(&app).values().sum::<usize>() >= goal).then_some(())
        });
        app.kill();
        assert!(
            received(&app).values().sum::<usize>() < audience.len(),
            "the send finished before the kill; make the sink slower"
        );
        app.restart();
    }
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(120));

    // Every member once: no second copy, and the only ones without a message are those
    // whose message a kill cut off after its claim (`unconfirmed`, never sent again).
    let result = tally(&app, id, &audience);
    result.assert_promise_kept();
    assert_eq!(
        result.sent + result.unconfirmed,
        audience.len(),
        "{result:?}"
    );
    assert!(
        result.unconfirmed <= 2 * CONNECTIONS,
        "more unconfirmed than connections at the kills: {result:?}"
    );
    let got = received(&app);
    let missing = audience.iter().filter(|e| !got.contains_key(*e)).count();
    assert_eq!(
        missing,
        result.unconfirmed - result.unconfirmed_arrived,
        "{result:?}"
    );
    // Nobody outside the audience: excluded, not tagged, unsubscribed.
    let strays: Vec<&String> = outside.iter().filter(|e| got.contains_key(*e)).collect();
    assert!(strays.is_empty(), "outside the audience: {strays:?}");

    // The issue's recipients, its delivery counts and the stats are the audience.
    let n = audience.len() as i64;
    assert_eq!(
        sent["audience"],
        json!({"tags": ["news"], "exclude_tags": ["vip"], "field": null})
    );
    assert_eq!(sent["recipients"], n);
    assert_eq!(sent["delivery"]["recipients"], n, "{}", sent["delivery"]);
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id}"
        )),
        n,
        "one delivery per member"
    );
    let stats = owner.get("/newsletter/stats").json()["data"].clone();
    let last_30_days = &stats["engagement"]["last_30_days"];
    assert_eq!(
        last_30_days["emails_sent"].as_i64().unwrap()
            + last_30_days["emails_unconfirmed"].as_i64().unwrap(),
        n,
        "{stats}"
    );
    assert_eq!(last_30_days["emails_sent"], result.sent, "{stats}");
}
