//! One subscriber's data for a data request: `GET /api/v1/subscribers/{id}/export` and the
//! dashboard's download give the same JSON (the record, tags, deliveries, history, the
//! stored webhook events naming the subscriber); another owner's ids are 404 on both.

use std::time::Duration;

use crate::support::*;

#[test]
fn a_subscribers_data_exports_through_the_api_and_the_dashboard() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Data Requests");
    let created = owner.post(
        "/subscribers",
        &json!({"email": "reader@example.com", "name": "Rea Der", "tags": ["vip", "early"]}),
    );
    created.expect(201);
    let sid = created.json()["id"].as_i64().unwrap();
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Field notes", "status": "approved", "content_markdown": "Hello."}}),
    );
    issue.expect(201);
    let iid = issue.json()["id"].as_i64().unwrap();
    owner
        .post(&format!("/issues/{iid}/send_now"), &json!({}))
        .expect(200);
    wait_for("the issue to be sent", Duration::from_secs(30), || {
        (owner.get(&format!("/issues/{iid}")).json()["status"] == "sent").then_some(())
    });

    let resp = owner.get(&format!("/subscribers/{sid}/export"));
    resp.expect(200);
    let api = resp.json();
    assert_eq!(api["subscriber"]["email"], "reader@example.com");
    assert_eq!(api["subscriber"]["name"], "Rea Der");
    assert_eq!(api["subscriber"]["tags"], json!(["early", "vip"]));
    assert_eq!(api["deliveries_total"], 1);
    assert_eq!(api["note"], Value::Null);
    let delivery = &api["deliveries"][0];
    assert_eq!(
        (
            delivery["issue_id"].as_i64(),
            delivery["issue_subject"].as_str(),
            delivery["status"].as_str()
        ),
        (Some(iid), Some("Field notes"), Some("sent"))
    );
    let events: Vec<&str> = api["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, vec!["subscriber.created", "email.sent"]);
    assert!(api["exported_at"].as_str().unwrap().ends_with('Z'));

    // The dashboard's download is the same document.
    let page = format!("/newsletters/{}/subscribers/{sid}", owner.newsletter_id);
    assert!(
        owner
            .client
            .get(&page)
            .body
            .contains(&format!("href=\"{page}/export.json\" download")),
        "the subscriber page links the download"
    );
    let download = owner.client.get(&format!("{page}/export.json"));
    download.expect(200);
    assert_eq!(
        download.header("content-disposition"),
        Some(
            format!(
                "attachment; filename=\"{}-subscriber-{sid}.json\"",
                owner.subdomain
            )
            .as_str()
        )
    );
    let mut dashboard: Value = serde_json::from_str(&download.body).unwrap();
    let mut from_api = api.clone();
    for doc in [&mut dashboard, &mut from_api] {
        doc.as_object_mut().unwrap().remove("exported_at");
    }
    assert_eq!(dashboard, from_api);

    // Another owner, and ids that are no subscriber's: 404 on both doors.
    let other = onboard(&app, "Someone Else");
    other.get(&format!("/subscribers/{sid}/export")).expect(404);
    other.client.get(&format!("{page}/export.json")).expect(404);
    owner
        .client
        .get(&format!(
            "/newsletters/{}/subscribers/{sid}/export.json",
            other.newsletter_id
        ))
        .expect(404);
    for bad in ["999999", "abc"] {
        owner.get(&format!("/subscribers/{bad}/export")).expect(404);
        owner
            .client
            .get(&format!(
                "/newsletters/{}/subscribers/{bad}/export.json",
                owner.newsletter_id
            ))
            .expect(404);
    }
    // The OpenAPI document lists it.
    let openapi = app.client().get("/api/v1/openapi.json").json();
    assert_eq!(
        openapi["paths"]["/subscribers/{id}/export"]["get"]["operationId"],
        "exportSubscriber"
    );
}

#[test]
fn a_subscribers_export_lists_the_stored_webhook_events_naming_them_and_no_one_elses() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Event Requests");
    listen(
        &app,
        &owner,
        &[
            "subscriber.created",
            "subscriber.updated",
            "email.unsubscribed",
            "issue.sent",
        ],
    );
    let add = |email: &str| {
        let resp = owner.post("/subscribers", &json!({ "email": email }));
        resp.expect(201);
        resp.json()["id"].as_i64().unwrap()
    };
    let (ann, bob) = (add("ann@example.com"), add("bob@example.com"));
    for (sid, name) in [(ann, "Ann Reader"), (bob, "Bob Reader")] {
        owner
            .patch(
                &format!("/subscribers/{sid}"),
                &json!({"subscriber": {"name": name}}),
            )
            .expect(200);
    }
    // Ann leaves through the unsubscribe link of an issue: `email.unsubscribed`.
    crate::dash_stats::send_issue(&owner, "Leaving");
    let mail = app.smtp.wait_for_message_to("ann@example.com", 1);
    let unsubscribe = link_containing(&mail.text(), "/u/").expect("an unsubscribe link");
    let path = format!("/{}", unsubscribe.splitn(4, '/').nth(3).unwrap());
    app.site_client(&owner.subdomain)
        .post_form(&path, &[("List-Unsubscribe", "One-Click")]);
    wait_for("Ann unsubscribed", Duration::from_secs(10), || {
        (owner.get(&format!("/subscribers/{ann}")).json()["status"] == "unsubscribed").then_some(())
    });

    let export = owner.get(&format!("/subscribers/{ann}/export"));
    export.expect(200);
    let export = export.json();
    let listed: Vec<(&str, &Value)> = export["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["event"].as_str().unwrap(), &e["data"]))
        .collect();
    let kinds: Vec<&str> = listed.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(
        kinds,
        vec![
            "email.unsubscribed",
            "subscriber.updated",
            "subscriber.created"
        ],
        "newest first: {export}"
    );
    for (kind, data) in &listed {
        assert_eq!(data["email"], "ann@example.com", "{kind}: {data}");
    }
    assert_eq!(listed[1].1["name"], "Ann Reader");
    assert_eq!(listed[2].1["subscription_id"], ann);
    assert_eq!(export["webhook_events_note"], Value::Null);
    for event in export["webhook_events"].as_array().unwrap() {
        assert!(event["at"].as_str().unwrap().ends_with('Z'), "{event}");
        assert!(event["id"].is_i64(), "{event}");
    }

    // Bob's export has his own two, none of Ann's, and no issue event.
    let bobs = owner.get(&format!("/subscribers/{bob}/export")).json();
    let kinds: Vec<(&str, &str)> = bobs["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap(),
                e["data"]["email"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("subscriber.updated", "bob@example.com"),
            ("subscriber.created", "bob@example.com")
        ]
    );
    // The dashboard's download lists them too.
    let download = owner.client.get(&format!(
        "/newsletters/{}/subscribers/{ann}/export.json",
        owner.newsletter_id
    ));
    download.expect(200);
    let dashboard: Value = serde_json::from_str(&download.body).unwrap();
    assert_eq!(dashboard["webhook_events"], export["webhook_events"]);
}
