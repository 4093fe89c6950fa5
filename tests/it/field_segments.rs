//! Segments by a custom field through the real binary (docs/growth.md, "Segments by a
//! field"): a send to the subscribers whose field equals a value, or is before or after it,
//! reaches exactly them at the SMTP sink, through the API and the dashboard's send page
//! (whose count, JSON count and Send agree); bad conditions are refused and change nothing;
//! a field an unsent audience names cannot be deleted, and a deleted field's values go in
//! the background.

use std::time::Duration;

use crate::segments::{pairs, received, send_form_fields};
use crate::support::send::{issue, wait_status};
use crate::support::*;

fn define(owner: &Owner, field: Value) -> i64 {
    let resp = owner.post("/fields", &json!({ "field": field }));
    resp.expect(201);
    resp.json()["id"].as_i64().unwrap()
}

fn approved(owner: &Owner, subject: &str) -> i64 {
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "status": "approved", "content_markdown": "Hello."}}),
    );
    resp.expect(201);
    resp.json()["id"].as_i64().unwrap()
}

#[test]
fn a_send_to_a_field_segment_reaches_exactly_the_readers_whose_value_meets_it() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Field Segments");
    define(&owner, json!({"name": "age", "type": "number"}));
    define(&owner, json!({"name": "renews_on", "type": "date"}));
    let plan = define(
        &owner,
        json!({"name": "plan", "type": "choice", "options": ["weekly", "monthly"]}),
    );
    let vip = define(&owner, json!({"name": "vip", "type": "boolean"}));
    let readers: Vec<String> = ["young", "middle", "older", "blank", "gone"]
        .iter()
        .map(|stem| unique_email(stem))
        .collect();
    let [young, middle, older, blank, gone] = [0, 1, 2, 3, 4].map(|i| &readers[i]);
    for (email, tags, fields) in [
        (
            young,
            json!([]),
            json!({"age": 25, "plan": "weekly", "renews_on": "2026-01-10", "vip": true}),
        ),
        (
            middle,
            json!([]),
            json!({"age": 35.5, "plan": "monthly", "renews_on": "2026-03-01"}),
        ),
        (
            older,
            json!(["news"]),
            json!({"age": 45, "plan": "weekly", "vip": false}),
        ),
        (blank, json!(["news"]), json!({})),
        (gone, json!([]), json!({"age": 50, "plan": "weekly"})),
    ] {
        owner
            .post(
                "/subscribers",
                &json!({"email": email, "tags": tags, "fields": fields}),
            )
            .expect(201);
    }
    let gone_id = owner.get("/subscribers?per_page=100").json()["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["email"] == gone.as_str())
        .unwrap()["id"]
        .clone();
    owner
        .patch(
            &format!("/subscribers/{gone_id}"),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    let all: Vec<&String> = readers.iter().collect();
    let sent_to = |subject: &str, body: Value, want: &[&String]| {
        let id = approved(&owner, subject);
        let resp = owner.post(&format!("/issues/{id}/send_now"), &body);
        resp.expect(200);
        assert_eq!(
            resp.json()["subscribers"],
            want.len(),
            "{subject}: {}",
            resp.body
        );
        let sent = wait_status(&owner, id, "sent", Duration::from_secs(30));
        let mut got = received(&app, &all, subject);
        got.sort();
        let mut want: Vec<String> = want.iter().map(|e| e.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "{subject}");
        assert_eq!(sent["recipients"], want.len());
        sent
    };

    // Numbers compare as numbers (35.5 is after 30; 9 would sort after 30 as text).
    let sent = sent_to(
        "Over thirty",
        json!({"field": {"name": "age", "op": "after", "value": 30}}),
        &[middle, older],
    );
    assert_eq!(
        sent["audience"]["field"],
        json!({"name": "age", "op": "after", "value": 30})
    );
    // A value given as text is read in the field's type.
    sent_to(
        "Under forty",
        json!({"field": {"name": "age", "op": "before", "value": "40"}}),
        &[young, middle],
    );
    sent_to(
        "Early renewals",
        json!({"field": {"name": "renews_on", "op": "before", "value": "2026-02-01"}}),
        &[young],
    );
    // With tags: both must hold.
    sent_to(
        "Weekly news",
        json!({"tags": ["news"], "field": {"name": "plan", "op": "equals", "value": "weekly"}}),
        &[older],
    );
    sent_to(
        "Not VIPs",
        json!({"field": {"name": "vip", "op": "equals", "value": false}}),
        &[older],
    );

    // Conditions that cannot be: 422 naming the part, nothing queued or recorded.
    let id = approved(&owner, "Refused");
    let jobs = || app.count("SELECT count(*) FROM jobs WHERE kind = 'send_issue'");
    let before = jobs();
    for (field, part, message) in [
        (
            json!({"name": "shoe", "op": "equals", "value": 1}),
            "field.name",
            "is not a field",
        ),
        (
            json!({"name": "plan", "op": "after", "value": "weekly"}),
            "field.op",
            "numbers and dates only",
        ),
        (
            json!({"name": "age", "op": "around", "value": 3}),
            "field.op",
            "must be equals, before or after",
        ),
        (
            json!({"name": "age", "op": "equals", "value": "old"}),
            "field.value",
            "must be a number",
        ),
        (
            json!({"name": "renews_on", "op": "before", "value": "soon"}),
            "field.value",
            "YYYY-MM-DD",
        ),
        (
            json!({"name": "plan", "op": "equals", "value": ""}),
            "field.value",
            "blank",
        ),
    ] {
        let resp = owner.post(
            &format!("/issues/{id}/send_now"),
            &json!({ "field": field }),
        );
        assert_eq!(resp.error_code(422), "validation_error", "{field}");
        assert!(
            resp.body.contains(part) && resp.body.contains(message),
            "{field}: {}",
            resp.body
        );
    }
    assert_eq!(jobs(), before);
    assert_eq!(issue(&owner, id)["audience"]["field"], Value::Null);

    // A field an unsent issue's audience names cannot be deleted.
    owner
        .patch(
            &format!("/issues/{id}"),
            &json!({"issue": {"audience": {"field": {"name": "plan", "op": "equals", "value": "monthly"}}}}),
        )
        .expect(200);
    assert_eq!(
        issue(&owner, id)["audience"]["field"],
        json!({"name": "plan", "op": "equals", "value": "monthly"})
    );
    let refused = owner.delete(&format!("/fields/{plan}"));
    assert_eq!(refused.error_code(422), "invalid_state");
    assert!(refused.body.contains("Refused"), "{}", refused.body);
    let fields_url = format!("/newsletters/{}/fields", owner.newsletter_id);
    let page = owner
        .client
        .submit(&fields_url, &format!("{fields_url}/{plan}/delete"), &[]);
    page.expect(422);
    assert!(
        page.body.contains("change that audience first"),
        "{}",
        page.body
    );
    assert_eq!(
        owner.get("/fields").json()["fields"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    // Once it is sent, the field may go: the report still names it.
    wait_status_sent_after(&owner, id);
    owner.delete(&format!("/fields/{plan}")).expect(204);
    assert_eq!(
        issue(&owner, id)["audience"]["field"],
        json!({"name": "plan", "op": "equals", "value": "monthly"})
    );
    // A deleted field is gone at once; its values go in the background.
    owner.delete(&format!("/fields/{vip}")).expect(204);
    let fields: Vec<Value> = owner.get("/fields").json()["fields"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        fields.iter().map(|f| f["name"].clone()).collect::<Vec<_>>(),
        [json!("age"), json!("renews_on")]
    );
    assert_eq!(
        api_subscriber(&owner, young).unwrap()["fields"],
        json!({"age": 25, "renews_on": "2026-01-10"})
    );
    wait_for(
        "the deleted fields' values to go",
        Duration::from_secs(20),
        || {
            (app.count(&format!(
                "SELECT count(*) FROM subscriber_field_values WHERE field_id IN ({plan}, {vip})"
            )) == 0
                && app.count(&format!(
                    "SELECT count(*) FROM custom_fields WHERE id IN ({plan}, {vip})"
                )) == 0)
                .then_some(())
        },
    );
    // The name is free again.
    define(&owner, json!({"name": "plan", "type": "text"}));
}

/// Sends issue `id` to its recorded audience and waits until it is sent.
fn wait_status_sent_after(owner: &Owner, id: i64) {
    owner
        .client
        .api_raw(
            "POST",
            &format!("/issues/{id}/send_now"),
            &owner.key,
            "application/json",
            Vec::new(),
        )
        .expect(200);
    wait_status(owner, id, "sent", Duration::from_secs(30));
}

#[test]
fn the_send_page_counts_and_sends_the_field_condition_it_shows() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Field Send Page");
    define(&owner, json!({"name": "age", "type": "number"}));
    let readers: Vec<String> = (0..4).map(|i| unique_email(&format!("age{i}"))).collect();
    for (i, email) in readers.iter().enumerate() {
        owner
            .post(
                "/subscribers",
                &json!({"email": email, "fields": {"age": 20 + 10 * i}}),
            )
            .expect(201);
    }
    let id = approved(&owner, "Page segment");
    let send = format!("/newsletters/{}/issues/{id}/send", owner.newsletter_id);
    let page = owner.client.get(&send);
    page.expect(200);
    assert!(page.body.contains("name=\"field_name\""), "{}", page.body);
    assert!(
        page.body
            .contains("<option value=\"age\">age (number)</option>"),
        "{}",
        page.body
    );

    // The JSON count the script asks for, and the audience it names.
    let counted = owner.client.get(&format!(
        "/newsletters/{}/issues/{id}/audience_count?field_name=age&field_op=after&field_value=35",
        owner.newsletter_id
    ));
    counted.expect(200);
    let answer = counted.json();
    assert_eq!(answer["recipients"], 2, "{answer}");
    assert_eq!(
        answer["field"],
        json!({"name": "age", "op": "after", "value": "35"})
    );
    assert!(
        answer["after"]
            .as_str()
            .unwrap()
            .contains("whose age is after 35"),
        "{answer}"
    );
    let bad = owner.client.get(&format!(
        "/newsletters/{}/issues/{id}/audience_count?field_name=age&field_op=after&field_value=many",
        owner.newsletter_id
    ));
    assert_eq!(bad.status, 422);
    assert!(bad.body.contains("must be a number"), "{}", bad.body);

    // Send pressed with a condition the button was not labelled for: the review, nothing sent.
    let condition = [
        ("field_name", "age"),
        ("field_op", "after"),
        ("field_value", "35"),
    ];
    let mut fields = send_form_fields(&page.body);
    fields.extend(
        condition
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let review = owner.client.submit(&send, &send, &pairs(&fields));
    review.expect(409);
    assert!(
        review.body.contains("it now goes to 2 subscribers"),
        "{}",
        review.body
    );
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE kind = 'send_issue'"),
        0
    );
    // The page that came back names the condition; its Send sends exactly it.
    let mut named = send_form_fields(&review.body);
    assert!(
        named.contains(&("named_field_value".into(), "35".into())),
        "{named:?}"
    );
    assert!(
        review.body.contains("<option value=\"age\" selected>"),
        "{}",
        review.body
    );
    named.extend(
        condition
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let sent = owner.client.submit(&send, &send, &pairs(&named));
    assert_eq!(
        sent.redirect(),
        format!("/newsletters/{}/issues/{id}", owner.newsletter_id)
    );
    wait_status(&owner, id, "sent", Duration::from_secs(30));
    let all: Vec<&String> = readers.iter().collect();
    assert_eq!(
        received(&app, &all, "Page segment"),
        [readers[2].clone(), readers[3].clone()]
    );
    let shown = owner
        .client
        .get(&format!("/newsletters/{}/issues/{id}", owner.newsletter_id));
    assert!(
        shown.body.contains("whose age is after 35"),
        "{}",
        shown.body
    );
}

#[test]
fn a_scheduled_issue_keeps_its_field_condition_and_sends_to_it_when_its_time_comes() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Scheduled Fields");
    define(
        &owner,
        json!({"name": "plan", "type": "choice", "options": ["weekly", "monthly"]}),
    );
    let weekly = unique_email("weekly");
    let monthly = unique_email("monthly");
    for (email, plan) in [(&weekly, "weekly"), (&monthly, "monthly")] {
        owner
            .post(
                "/subscribers",
                &json!({"email": email, "fields": {"plan": plan}}),
            )
            .expect(201);
    }
    let id = approved(&owner, "Weekly digest");
    let url = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);
    let page = owner.client.get(&url);
    assert!(page.body.contains("name=\"field_name\""), "{}", page.body);
    let at = (app.clock_now() + jiff::SignedDuration::from_hours(2))
        .strftime("%Y-%m-%dT%H:%M")
        .to_string();
    let resp = owner.client.submit(
        &url,
        &format!("{url}/schedule"),
        &[
            ("scheduled_for", &at),
            ("audience", "chosen"),
            ("field_name", "plan"),
            ("field_op", "equals"),
            ("field_value", "weekly"),
        ],
    );
    assert_eq!(resp.redirect(), url);
    let shown = issue(&owner, id);
    assert_eq!(shown["status"], "scheduled");
    assert_eq!(
        shown["audience"]["field"],
        json!({"name": "plan", "op": "equals", "value": "weekly"})
    );
    let page = owner.client.get(&url);
    assert!(
        page.body.contains("whose plan is “weekly”"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<option value=\"plan\" selected>"),
        "{}",
        page.body
    );
    app.advance_clock(std::time::Duration::from_secs(3 * 3600));
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(30));
    assert_eq!(sent["recipients"], 1, "{sent}");
    let got = received(&app, &[&weekly, &monthly], "Weekly digest");
    assert_eq!(got, vec![weekly.to_string()]);
}
