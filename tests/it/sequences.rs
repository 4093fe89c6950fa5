//! Sequences through the real binary (docs/automations.md, "Sequences"): entering on each
//! trigger (a confirmation on the site, a tag, paid access, the owner's hand) and leaving on
//! each exit (a tag added or removed, unsubscribing, the owner stopping a reader), each step
//! once with one-click unsubscribe, webhooks signed; waits in calendar days across a
//! daylight-saving change; kill -9 in the middle of a step's send; editing a live sequence;
//! opens and clicks per step; the dashboard's pages. The clock is the server's test clock,
//! moved; each round is observed by the round's job rescheduling itself.

use std::time::Duration;

use crate::support::receiver::Receiver;
use crate::support::smtp::{Fault, Received};
use crate::support::*;

/// A step as the API takes it.
fn step(subject: &str, amount: i64, unit: &str) -> Value {
    json!({
        "subject": subject,
        "body_markdown": format!("Hello {{{{ name | default: \"friend\" }}}}: {subject}. [Read more](https://example.org/{amount})"),
        "delay_amount": amount,
        "delay_unit": unit,
    })
}

fn create(owner: &Owner, sequence: Value) -> Value {
    let created = owner.post("/sequences", &json!({ "sequence": sequence }));
    created.expect(201);
    created.json()
}

fn sequence(owner: &Owner, id: i64) -> Value {
    owner.get(&format!("/sequences/{id}")).json()
}

fn add_subscriber(owner: &Owner, email: &str, name: &str) -> i64 {
    let created = owner.post("/subscribers", &json!({"email": email, "name": name}));
    created.expect(201);
    created.json()["id"].as_i64().unwrap()
}

/// The round's next run, as its job row says.
fn next_round(app: &App) -> Option<jiff::Timestamp> {
    app.db()
        .query_row(
            "SELECT run_at FROM jobs WHERE kind = 'advance_sequences' AND state = 'queued'",
            [],
            |r| r.get::<_, String>(0),
        )
        .ok()
        .map(|t| t.parse().unwrap())
}

/// Sets the server's clock to `at` and waits until a round has run there (its job is due
/// again after `at`) and every step send it queued has finished.
fn round_at(app: &App, at: jiff::Timestamp) {
    app.set_clock(at);
    wait_for("a sequences round", Duration::from_secs(30), || {
        next_round(app).is_some_and(|next| next > at).then_some(())
    });
    wait_for("the step sends", Duration::from_secs(30), || {
        let pending = app.count(
            "SELECT count(*) FROM jobs WHERE kind = 'send_sequence_step' AND state <> 'done'",
        );
        (pending == 0).then_some(())
    });
}

/// [`round_at`] a minute and a second on.
fn next_minute(app: &App) {
    round_at(app, app.clock_now() + jiff::SignedDuration::from_secs(61));
}

fn subjects_to(app: &App, email: &str) -> Vec<String> {
    app.smtp
        .messages_to(email)
        .iter()
        .map(|m| m.parsed().subject().unwrap_or_default().to_string())
        .collect()
}

fn one_with_subject(app: &App, email: &str, subject: &str) -> Received {
    let found: Vec<Received> = app
        .smtp
        .messages_to(email)
        .into_iter()
        .filter(|m| m.parsed().subject() == Some(subject))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{email} got {subject:?} once: {:?}",
        subjects_to(app, email)
    );
    found.into_iter().next().unwrap()
}

/// Where subscriber `subscriber_id` is in sequence `sequence_id`: state and why they left.
fn reader(app: &App, sequence_id: i64, subscriber_id: i64) -> (String, Option<String>) {
    app.db()
        .query_row(
            "SELECT state, left_reason FROM sequence_enrollments WHERE sequence_id = ?1 AND subscriber_id = ?2",
            (sequence_id, subscriber_id),
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

fn subscriber_id(app: &App, email: &str) -> i64 {
    app.db()
        .query_row(
            "SELECT id FROM subscribers WHERE email = ?1",
            [email],
            |r| r.get(0),
        )
        .unwrap()
}

fn sequences_of(owner: &Owner) -> usize {
    owner.get("/sequences").json()["sequences"]
        .as_array()
        .unwrap()
        .len()
}

/// Subscribes `email` on the site and follows its confirmation link.
fn confirm_on_site(app: &App, site: &Client, email: &str) {
    site.submit("/subscribe", "/subscribe", &[("email", email)])
        .expect(200);
    let mail = app.smtp.wait_for_message_to(email, 1);
    let link = link_containing(&mail.text(), "/subscribe/confirm/").expect("a confirmation link");
    let path = path_of(&link);
    site.submit(&path, &path, &[]).expect(200);
}

#[test]
fn sequences_enter_on_each_trigger_send_each_step_once_and_readers_leave_on_each_exit() {
    let app = spawn_app_with(&["--allow-private-webhooks"]);
    let owner = onboard_paid(&app, "Tide Course");
    set_sender(&owner);
    let receiver = Receiver::start();
    let hook = owner.post(
        "/webhook_subscriptions",
        &json!({"url": receiver.url, "events": ["sequence.step_sent", "sequence.completed"]}),
    );
    hook.expect(201);
    let secret = hook.json()["secret"].as_str().unwrap().to_string();

    let welcome = create(
        &owner,
        json!({"name": "Welcome series", "trigger": "confirmed", "exit_tag_added": "customer",
               "steps": [step("W1", 0, "minutes"), step("W2", 1, "days")]}),
    );
    let course = create(
        &owner,
        json!({"name": "Course", "trigger": "tag_added", "trigger_tag": "course",
               "exit_tag_removed": "course",
               "steps": [step("C1", 0, "minutes"), step("C2", 1, "days")]}),
    );
    let members = create(
        &owner,
        json!({"name": "Members", "trigger": "became_paid",
               "steps": [step("M1", 0, "minutes"), step("M2", 1, "days")]}),
    );
    let manual = create(
        &owner,
        json!({"name": "By hand", "trigger": "manual",
               "steps": [step("H1", 0, "minutes"), step("H2", 1, "days")]}),
    );
    // The welcome sequence, first in the list: the welcome e-mail is its first step, and a
    // step added after it follows a day later. It stays confirmed, and cannot be deleted.
    let listed = owner.get("/sequences").json();
    let default = listed["sequences"][0].clone();
    assert_eq!(
        (default["welcome"].as_bool(), default["trigger"].as_str()),
        (Some(true), Some("confirmed"))
    );
    let default_id = default["id"].as_i64().unwrap();
    let path = format!("/sequences/{default_id}");
    owner
        .patch(
            &path,
            &json!({"sequence": {"steps": [step("After the welcome", 1, "days")]}}),
        )
        .expect(200);
    let moved = owner.patch(&path, &json!({"sequence": {"trigger": "manual"}}));
    moved.expect(422);
    assert!(moved.body.contains("welcome"), "{}", moved.body);
    let kept = owner.delete(&path);
    kept.expect(422);
    assert_eq!(kept.error_code(422), "invalid_state");
    let ids: Vec<i64> = [&welcome, &course, &members, &manual]
        .iter()
        .map(|q| q["id"].as_i64().unwrap())
        .collect();
    let (welcome_id, course_id, members_id, manual_id) = (ids[0], ids[1], ids[2], ids[3]);
    assert_eq!(welcome["steps"][1]["delay_unit"], "days");

    // Entering: a confirmation on the site, a tag, paid access, the owner's hand.
    let site = app.site_client(&owner.subdomain);
    let confirmed = unique_email("confirmed");
    confirm_on_site(&app, &site, &confirmed);
    let leaver = unique_email("leaver");
    confirm_on_site(&app, &site, &leaver);
    let tagged = unique_email("tagged");
    let tagged_id = add_subscriber(&owner, &tagged, "Tess");
    owner
        .post(
            &format!("/subscribers/{tagged_id}/add_tag"),
            &json!({"tag": "course"}),
        )
        .expect(200);
    let member = unique_email("member");
    let member_id = add_subscriber(&owner, &member, "Mo");
    owner
        .api(
            "PUT",
            &format!("/subscribers/{member_id}/membership"),
            Some(&json!({"membership": {"status": "comped"}})),
        )
        .expect(200);
    let picked = unique_email("picked");
    let picked_id = add_subscriber(&owner, &picked, "Pat");
    let added = owner.post(
        &format!("/sequences/{manual_id}/subscribers"),
        &json!({"subscriber_id": picked_id}),
    );
    added.expect(201);
    assert_eq!(added.json()["state"], "active");
    // A reader goes through a sequence once; a stranger's id is refused; nothing changes.
    let again = owner.post(
        &format!("/sequences/{manual_id}/subscribers"),
        &json!({"subscriber_id": picked_id}),
    );
    again.expect(422);
    assert_eq!(again.error_code(422), "invalid_state");
    owner
        .post(
            &format!("/sequences/{manual_id}/subscribers"),
            &json!({"subscriber_id": 999_999}),
        )
        .expect(422);

    next_minute(&app);
    let first = one_with_subject(&app, &confirmed, "W1");
    assert_from_sender(&first);
    assert!(
        first.text().contains("Hello friend: W1"),
        "{}",
        first.text()
    );
    assert_eq!(
        first.header("List-Unsubscribe-Post").as_deref(),
        Some("List-Unsubscribe=One-Click")
    );
    one_with_subject(&app, &leaver, "W1");
    one_with_subject(&app, &confirmed, "Welcome to Tide Course");
    assert!(
        one_with_subject(&app, &tagged, "C1")
            .text()
            .contains("Hello Tess: C1")
    );
    one_with_subject(&app, &member, "M1");
    one_with_subject(&app, &picked, "H1");
    // Only the sequences each reader's trigger starts.
    assert_eq!(subjects_to(&app, &tagged), ["C1"]);
    assert_eq!(subjects_to(&app, &picked), ["H1"]);

    // Leaving: a tag added, a tag removed, unsubscribing, the owner stopping them.
    let confirmed_id = subscriber_id(&app, &confirmed);
    owner
        .post(
            &format!("/subscribers/{confirmed_id}/add_tag"),
            &json!({"tag": "customer"}),
        )
        .expect(200);
    owner
        .delete(&format!("/subscribers/{tagged_id}/remove_tag?tag=course"))
        .expect(200);
    let unsubscribe = one_with_subject(&app, &leaver, "W1")
        .header("List-Unsubscribe")
        .unwrap();
    let url = unsubscribe.trim_start_matches('<').trim_end_matches('>');
    site.post_form(&path_of(url), &[("List-Unsubscribe", "One-Click")])
        .expect(200);
    let stopped = owner.delete(&format!("/sequences/{manual_id}/subscribers/{picked_id}"));
    stopped.expect(200);
    assert_eq!(stopped.json()["left_reason"], "stopped");
    let leaver_id = subscriber_id(&app, &leaver);
    assert_eq!(
        reader(&app, welcome_id, confirmed_id),
        ("left".into(), Some("tag_added".into()))
    );
    assert_eq!(
        reader(&app, course_id, tagged_id),
        ("left".into(), Some("tag_removed".into()))
    );
    assert_eq!(
        reader(&app, welcome_id, leaver_id),
        ("left".into(), Some("unsubscribed".into()))
    );

    // A day on: the member, who stayed, gets the second step, and completes; the confirmed
    // reader, who left the series but not the welcome sequence, gets its step after the
    // welcome; the one who unsubscribed gets nothing.
    round_at(
        &app,
        app.clock_now()
            + jiff::SignedDuration::from_hours(24)
            + jiff::SignedDuration::from_secs(61),
    );
    one_with_subject(&app, &member, "M2");
    one_with_subject(&app, &confirmed, "After the welcome");
    assert!(!subjects_to(&app, &confirmed).contains(&"W2".to_string()));
    // Those who left got nothing more (the round has run and its sends are done).
    for (email, last) in [(&leaver, "W1"), (&tagged, "C1"), (&picked, "H1")] {
        let got = subjects_to(&app, email);
        assert_eq!(
            got.last().map(String::as_str),
            Some(last),
            "{email} left: {got:?}"
        );
        assert!(!got.iter().any(|s| s.ends_with('2')), "{email}: {got:?}");
    }
    assert_eq!(
        reader(&app, members_id, member_id),
        ("completed".into(), None)
    );

    // The counts per step, read from the counters.
    let shown = sequence(&owner, welcome_id);
    assert_eq!(shown["steps"][0]["sent"], 2);
    assert_eq!(shown["steps"][1]["sent"], 0);
    assert_eq!(shown["steps"][1]["left"], 2, "{shown}");
    assert_eq!(shown["steps"][1]["waiting"], 0);
    let shown = sequence(&owner, members_id);
    assert_eq!(
        (
            shown["steps"][1]["sent"].as_i64(),
            shown["completed"].as_i64()
        ),
        (Some(1), Some(1))
    );

    // The webhooks: a step_sent per mail, a completed for the member and for the confirmed
    // reader's welcome sequence, each signed.
    let sent = receiver.wait_for("sequence.step_sent", 7);
    assert!(sent.iter().all(|h| h.verify(&secret)));
    let completed = receiver.wait_for("sequence.completed", 2);
    assert!(completed.iter().all(|h| h.verify(&secret)));
    let mut ended: Vec<(i64, String)> = completed
        .iter()
        .map(|h| {
            let data = h.json()["data"].clone();
            let email = data["subscriber"]["email"].as_str().unwrap().to_string();
            (data["sequence"]["id"].as_i64().unwrap(), email)
        })
        .collect();
    ended.sort();
    let mut expected = vec![
        (members_id, member.clone()),
        (default_id, confirmed.clone()),
    ];
    expected.sort();
    assert_eq!(ended, expected);
}

#[test]
fn sequences_count_days_on_the_newsletters_clocks_across_a_daylight_saving_change() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Spring Forward");
    owner
        .patch("/newsletter", &json!({"time_zone": "America/New_York"}))
        .expect(200);
    let q = create(
        &owner,
        json!({"name": "Clocks", "trigger": "manual",
               "steps": [step("A day later", 1, "days"),
                         {"subject": "Monday nine", "body_markdown": "Monday.", "delay_amount": 0,
                          "delay_unit": "hours", "at_hour": 9, "on_weekday": "monday"}]}),
    );
    let id = q["id"].as_i64().unwrap();
    // Saturday 13 March 2027, 10:00 EST; the clocks go forward on Sunday at 02:00.
    let at = |text: &str| text.parse::<jiff::Timestamp>().unwrap();
    round_at(&app, at("2027-03-13T15:00:00Z"));
    let email = unique_email("clocks");
    let sid = add_subscriber(&owner, &email, "Cleo");
    owner
        .post(
            &format!("/sequences/{id}/subscribers"),
            &json!({"subscriber_id": sid}),
        )
        .expect(201);

    // 23 hours later it is Sunday 10:00 EDT: a calendar day, not 24 hours.
    round_at(&app, at("2027-03-14T13:50:00Z"));
    assert!(subjects_to(&app, &email).is_empty(), "not before 10:00 EDT");
    round_at(&app, at("2027-03-14T14:00:30Z"));
    assert_eq!(subjects_to(&app, &email), ["A day later"]);
    // Then Monday at 09:00 EDT (13:00 UTC).
    round_at(&app, at("2027-03-15T12:59:00Z"));
    assert_eq!(subjects_to(&app, &email).len(), 1);
    round_at(&app, at("2027-03-15T13:00:30Z"));
    assert_eq!(subjects_to(&app, &email), ["A day later", "Monday nine"]);
    assert_eq!(sequence(&owner, id)["completed"], 1);
}

#[test]
fn sequences_a_step_cut_off_by_kill_9_is_never_sent_twice() {
    let mut app = spawn_app();
    let owner = onboard_paid(&app, "Crash Course");
    let q = create(
        &owner,
        json!({"name": "Crash", "trigger": "manual", "steps": [step("Once", 0, "minutes")]}),
    );
    let id = q["id"].as_i64().unwrap();
    let email = unique_email("crash");
    let sid = add_subscriber(&owner, &email, "Cy");
    // The relay takes the message and never answers: the send is in flight.
    app.smtp.add_faults(&email, &[Fault::NoReply]);
    owner
        .post(
            &format!("/sequences/{id}/subscribers"),
            &json!({"subscriber_id": sid}),
        )
        .expect(201);
    app.set_clock(app.clock_now() + jiff::SignedDuration::from_secs(61));
    let status = |app: &App| -> Option<String> {
        app.db()
            .query_row(
                "SELECT status FROM sequence_sends WHERE subscriber_id = ?1",
                [sid],
                |r| r.get(0),
            )
            .ok()
    };
    wait_for("the step in flight", Duration::from_secs(30), || {
        (status(&app).as_deref() == Some("sending") && app.smtp.messages_to(&email).len() == 1)
            .then_some(())
    });
    app.kill();
    app.restart();
    wait_for("the crash settled", Duration::from_secs(30), || {
        (status(&app).as_deref() == Some("unconfirmed")).then_some(())
    });
    next_minute(&app);
    assert_eq!(app.smtp.messages_to(&email).len(), 1, "never sent twice");
    let shown = sequence(&owner, id);
    assert_eq!(
        (
            shown["steps"][0]["sent"].as_i64(),
            shown["steps"][0]["unconfirmed"].as_i64()
        ),
        (Some(0), Some(1))
    );
    assert_eq!(shown["completed"], 1, "the reader went on: {shown}");
}

#[test]
fn sequences_an_edit_reaches_readers_who_have_not_reached_the_step_and_opens_and_clicks_count() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Edited Course");
    let q = create(
        &owner,
        json!({"name": "Edited", "trigger": "manual",
               "steps": [step("One", 0, "minutes"), step("Two", 1, "days")]}),
    );
    let id = q["id"].as_i64().unwrap();
    let (one, two) = (
        q["steps"][0]["id"].as_i64().unwrap(),
        q["steps"][1]["id"].as_i64().unwrap(),
    );
    let early = unique_email("early");
    let early_id = add_subscriber(&owner, &early, "Eve");
    owner
        .post(
            &format!("/sequences/{id}/subscribers"),
            &json!({"subscriber_id": early_id}),
        )
        .expect(201);
    next_minute(&app);
    let got = one_with_subject(&app, &early, "One");

    // Opened after a minute (an open within seconds of delivery is a scanner's) and clicked.
    next_minute(&app);
    let site = app.site_client(&owner.subdomain);
    let html = got.html();
    let pixel = html
        .split("src=\"")
        .filter_map(|s| s.split('"').next())
        .find(|src| src.contains("/o/q"))
        .expect("an open pixel")
        .to_string();
    site.get(&path_of(&pixel)).expect(200);
    let click = link_containing(&html.replace("&amp;", "&"), "/c/q").expect("a tracked link");
    let followed = site.get(&path_of(&click));
    followed.expect(302);
    // A forged one is refused.
    site.get(&path_of(&pixel).replace("/o/q", "/o/q9"))
        .expect(404);
    let shown = sequence(&owner, id);
    assert_eq!(
        (
            shown["steps"][0]["opened"].as_i64(),
            shown["steps"][0]["clicked"].as_i64()
        ),
        (Some(1), Some(1)),
        "{shown}"
    );

    // A step put first, "One" and "Two" kept by id: the early reader, who got "One", skips
    // it when it comes round again and gets "Two"; a new reader starts at the new step.
    let edited = owner.patch(
        &format!("/sequences/{id}"),
        &json!({"sequence": {"steps": [
            step("Zero", 0, "minutes"),
            {"id": one, "subject": "One", "body_markdown": "One again.", "delay_amount": 0, "delay_unit": "minutes"},
            {"id": two, "subject": "Two", "body_markdown": "Two.", "delay_amount": 0, "delay_unit": "minutes"},
        ]}}),
    );
    edited.expect(200);
    assert_eq!(
        edited.json()["steps"][1]["sent"],
        1,
        "the kept step keeps its counts"
    );
    // A bad edit is refused and changes nothing.
    let bad = owner.patch(
        &format!("/sequences/{id}"),
        &json!({"sequence": {"steps": [{"id": 999_999, "subject": "X", "body_markdown": "x",
                 "delay_amount": 0, "delay_unit": "minutes"}]}}),
    );
    bad.expect(422);
    assert_eq!(sequence(&owner, id)["steps"].as_array().unwrap().len(), 3);

    let late = unique_email("late");
    let late_id = add_subscriber(&owner, &late, "Lou");
    owner
        .post(
            &format!("/sequences/{id}/subscribers"),
            &json!({"subscriber_id": late_id}),
        )
        .expect(201);
    for _ in 0..3 {
        next_minute(&app);
    }
    assert_eq!(subjects_to(&app, &early), ["One", "Two"]);
    assert_eq!(subjects_to(&app, &late), ["Zero", "One", "Two"]);
    assert_eq!(sequence(&owner, id)["completed"], 2);
}

#[test]
fn sequences_dashboard_creates_edits_and_stops_readers_without_javascript() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Desk Sequences");
    let base = format!("/newsletters/{}/sequences", owner.newsletter_id);
    let list = owner.client.get(&base);
    list.expect(200);
    // The welcome sequence is there from the start, its first step the welcome e-mail.
    assert!(list.body.contains("Welcome"), "{}", list.body);
    let welcome_id = owner.get("/sequences").json()["sequences"][0]["id"]
        .as_i64()
        .unwrap();
    let welcome_page = owner.client.get(&format!("{base}/{welcome_id}"));
    welcome_page.expect(200);
    assert!(welcome_page.body.contains("the welcome e-mail"));
    assert!(!welcome_page.body.contains("Delete this sequence"));

    // "Add a step" shows the form again with one more step and saves nothing.
    let new = format!("{base}/new");
    let step_fields = |subject: &'static str, body: &'static str| {
        vec![
            ("sequence[steps][][id]", ""),
            ("sequence[steps][][position]", "1"),
            ("sequence[steps][][subject]", subject),
            ("sequence[steps][][body_markdown]", body),
            ("sequence[steps][][delay_amount]", "0"),
            ("sequence[steps][][delay_unit]", "minutes"),
            ("sequence[steps][][at_hour]", ""),
            ("sequence[steps][][on_weekday]", ""),
        ]
    };
    let mut fields = vec![
        ("sequence[name]", "Desk course"),
        ("sequence[trigger]", "manual"),
        ("sequence[status]", "live"),
        ("action", "add_step"),
    ];
    fields.extend(step_fields("First", "Hello."));
    let more = owner.client.submit(&new, &base, &fields);
    more.expect(200);
    assert_eq!(
        more.body.matches("Step 2").count(),
        1,
        "a second, blank step"
    );
    assert_eq!(sequences_of(&owner), 1, "only the welcome sequence");

    // A bad step shows the form again with the message, and saves nothing.
    fields[3] = ("action", "save");
    let mut bad = fields.clone();
    bad.extend(step_fields("Second", "Bad {{ nonsense }}"));
    let refused = owner.client.submit(&new, &base, &bad);
    refused.expect(422);
    assert!(
        refused.body.contains("Step 2 body markdown has merge tags"),
        "{}",
        refused.body
    );
    assert_eq!(sequences_of(&owner), 1, "only the welcome sequence");

    let saved = owner.client.submit(&new, &base, &fields);
    let page = saved.redirect();
    let shown = owner.client.get(&page);
    shown.expect(200);
    assert!(shown.body.contains("Desk course") && shown.body.contains("On entering"));

    // Readers by address: added, refused twice, stopped.
    let email = unique_email("desk");
    add_subscriber(&owner, &email, "Dee");
    owner
        .client
        .submit(
            &page,
            &format!("{page}/readers"),
            &[("reader[email]", &email)],
        )
        .redirect();
    let twice = owner.client.submit(
        &page,
        &format!("{page}/readers"),
        &[("reader[email]", &email)],
    );
    twice.expect(422);
    assert!(
        twice.body.contains("goes through a sequence once"),
        "{}",
        twice.body
    );
    owner
        .client
        .submit(
            &page,
            &format!("{page}/readers/stop"),
            &[("reader[email]", &email)],
        )
        .redirect();
    let nobody = owner.client.submit(
        &page,
        &format!("{page}/readers/stop"),
        &[("reader[email]", "nobody@example.com")],
    );
    nobody.expect(422);
    assert!(nobody.body.contains("is no subscriber of this newsletter"));
    let id: i64 = page.rsplit('/').next().unwrap().parse().unwrap();
    let api = sequence(&owner, id);
    assert_eq!(api["steps"][0]["left"], 1, "{api}");

    // Listed, then deleted.
    assert!(owner.client.get(&base).body.contains("Desk course"));
    owner
        .client
        .submit(&page, &format!("{page}/delete"), &[])
        .redirect();
    assert_eq!(sequences_of(&owner), 1, "only the welcome sequence");
}
