//! One subscriber's data for a data request: `GET /api/v1/subscribers/{id}/export` and the
//! dashboard's download give the same JSON (the record, tags, deliveries, history); another
//! owner's ids are 404 on both.

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
