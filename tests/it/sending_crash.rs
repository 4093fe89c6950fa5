//! `kill -9` twice in the middle of a send of a few thousand messages, each time followed by
//! a restart: nobody gets a second copy, nobody is skipped, and the only messages not counted
//! `sent` are the ones whose end went out just before a kill (`unconfirmed`, at most one per
//! connection per kill).

use std::time::Duration;

use crate::support::send::{
    addresses, approved_issue, send_now, subscribe_all, tally, unsubscribe_all, wait_status,
};
use crate::support::*;

const RECIPIENTS: usize = 2000;
const CONNECTIONS: usize = 8;

#[test]
fn sending_survives_kill_9_midway_with_exactly_one_copy_each() {
    let sink = SmtpSink::start_with(Rules {
        delay: Duration::from_millis(2),
        ..Rules::default()
    });
    let mut app = spawn_app_on(sink, &["--rate-limit-bulk", "100"]);
    let owner = onboard_paid(&app, "Crash Course");
    listen(&app, &owner, &["issue.sent"]);
    let emails = addresses("crash", RECIPIENTS);
    subscribe_all(&owner, &emails);
    // A few who must get nothing.
    let skipped: Vec<String> = emails.iter().step_by(250).cloned().collect();
    unsubscribe_all(&app, &owner, &skipped);
    let active: Vec<String> = emails
        .iter()
        .filter(|e| !skipped.contains(e))
        .cloned()
        .collect();

    let id = approved_issue(&owner, "Crash test");
    assert_eq!(send_now(&owner, id), active.len() as i64);

    // Kill once a quarter has arrived, restart, kill again past half way, restart.
    let to_readers = |app: &App| {
        app.smtp
            .counts()
            .iter()
            .filter(|(to, _)| to.starts_with("crash"))
            .map(|(_, n)| n)
            .sum::<usize>()
    };
    for share in [4, 2] {
        let goal = active.len() / share;
        wait_for("enough messages", Duration::from_secs(60), || {
            (to_readers(&app) >= goal).then_some(())
        });
        app.kill();
        assert!(
            to_readers(&app) < active.len(),
            "the send finished before the kill; make the sink slower"
        );
        app.restart();
    }
    wait_status(&owner, id, "sent", Duration::from_secs(120));

    let result = tally(&app, id, &active);
    result.assert_promise_kept();
    for email in &skipped {
        assert!(
            app.smtp.messages_to(email).is_empty(),
            "{email} unsubscribed"
        );
    }
    assert_eq!(result.sent + result.unconfirmed, active.len(), "{result:?}");
    assert!(
        result.unconfirmed <= 2 * CONNECTIONS,
        "more unconfirmed than connections at the kills: {result:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'issue.sent'"),
        1
    );
}
