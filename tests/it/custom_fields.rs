//! Custom fields through the real binary (docs/growth.md, "Custom fields"): defined through
//! the API, set on subscribers by type (an unknown field or a value its type cannot hold is
//! 422 and changes nothing), shown on the subscriber object, renamed and deleted.

use std::time::Duration;

use crate::support::*;

fn define(owner: &Owner, field: Value) -> Value {
    let resp = owner.post("/fields", &json!({ "field": field }));
    resp.expect(201);
    resp.json()
}

#[test]
fn fields_are_defined_set_by_type_and_refused_when_unknown_or_unfit() {
    let app = spawn_app();
    let owner = onboard(&app, "Fielded Letter");
    let first = define(&owner, json!({"name": "first_name", "type": "text"}));
    assert_eq!(first["name"], "first_name");
    assert_eq!(first["type"], "text");
    define(&owner, json!({"name": "age", "type": "number"}));
    define(&owner, json!({"name": "renews_on", "type": "date"}));
    define(&owner, json!({"name": "vip", "type": "boolean"}));
    let plan = define(
        &owner,
        json!({"name": "plan", "type": "choice", "options": ["weekly", "monthly"]}),
    );

    // Definitions that cannot be: each a 422 naming its part, nothing added.
    for (bad, part) in [
        (json!({"name": "First Name", "type": "text"}), "field.name"),
        (json!({"name": "email", "type": "text"}), "field.name"),
        (json!({"name": "first_name", "type": "text"}), "field.name"),
        (json!({"name": "colour", "type": "colour"}), "field.type"),
        (json!({"name": "size", "type": "choice"}), "field.options"),
    ] {
        let resp = owner.post("/fields", &json!({ "field": bad }));
        resp.expect(422);
        assert!(resp.body.contains(part), "{bad}: {}", resp.body);
    }
    assert_eq!(
        owner.get("/fields").json()["fields"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    // Options are a choice's alone: another type keeps none.
    let plain = define(
        &owner,
        json!({"name": "size", "type": "text", "options": ["a"]}),
    );
    assert_eq!(plain["options"], json!([]));
    owner
        .delete(&format!("/fields/{}", plain["id"]))
        .expect(204);

    // A subscriber with values of each type, given as JSON of the type or as text.
    let created = owner.post(
        "/subscribers",
        &json!({"email": "ann@example.com", "fields": {
            "first_name": "  Ann  ", "age": "41", "renews_on": "2027-01-31", "vip": true,
            "plan": "weekly"}}),
    );
    created.expect(201);
    let ann = created.json();
    assert_eq!(
        ann["fields"],
        json!({"first_name": "Ann", "age": 41, "renews_on": "2027-01-31", "vip": true,
               "plan": "weekly"})
    );
    let id = ann["id"].as_i64().unwrap();
    // Creating an address already there answers the record unchanged: its values too.
    let again = owner.post(
        "/subscribers",
        &json!({"email": "ann@example.com", "fields": {"first_name": "Other"}}),
    );
    again.expect(200);
    assert_eq!(again.json()["fields"], ann["fields"]);
    assert_eq!(
        owner.get(&format!("/subscribers/{id}")).json()["fields"],
        ann["fields"]
    );

    // Unknown fields and unfit values: 422 naming them, and nothing changes.
    for (bad, part) in [
        (json!({"nickname": "A"}), "fields.nickname"),
        (json!({"age": "forty"}), "fields.age"),
        (json!({"renews_on": "2027-02-30"}), "fields.renews_on"),
        (json!({"vip": "perhaps"}), "fields.vip"),
        (json!({"plan": "daily"}), "fields.plan"),
        (json!({"first_name": 7}), "fields.first_name"),
    ] {
        let resp = owner.patch(
            &format!("/subscribers/{id}"),
            &json!({"subscriber": {"name": "Changed", "fields": bad}}),
        );
        resp.expect(422);
        assert!(resp.body.contains(part), "{bad}: {}", resp.body);
        let now = owner.get(&format!("/subscribers/{id}")).json();
        assert_eq!(now["fields"], ann["fields"]);
        assert_eq!(now["name"], Value::Null, "nothing else changed either");
    }
    let refused = owner.post(
        "/subscribers",
        &json!({"email": "ben@example.com", "fields": {"nickname": "B"}}),
    );
    refused.expect(422);
    assert!(refused.body.contains("fields.nickname"), "{}", refused.body);
    let listed = owner.get("/subscribers").json();
    let emails: Vec<&Value> = listed["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["email"])
        .collect();
    assert_eq!(emails, [&json!("ann@example.com")], "nothing added");

    // A change sets what it names, null removes, the rest stays; a renamed field keeps its
    // values under the new name; a deleted one takes them away.
    let changed = owner.patch(
        &format!("/subscribers/{id}"),
        &json!({"subscriber": {"fields": {"age": 42.5, "vip": null}}}),
    );
    changed.expect(200);
    assert_eq!(changed.json()["fields"]["age"], 42.5);
    assert!(changed.json()["fields"].get("vip").is_none());
    let renamed = owner.patch(
        &format!("/fields/{}", first["id"]),
        &json!({"field": {"name": "given_name"}}),
    );
    renamed.expect(200);
    assert_eq!(
        owner.get(&format!("/subscribers/{id}")).json()["fields"]["given_name"],
        "Ann"
    );
    let retype = owner.patch(
        &format!("/fields/{}", first["id"]),
        &json!({"field": {"type": "number"}}),
    );
    retype.expect(422);
    owner.delete(&format!("/fields/{}", plan["id"])).expect(204);
    assert!(
        owner.get(&format!("/subscribers/{id}")).json()["fields"]
            .get("plan")
            .is_none()
    );
    owner.delete(&format!("/fields/{}", plan["id"])).expect(404);

    // Another newsletter's fields are not this one's.
    let other = onboard(&app, "Other Letter");
    other
        .patch(
            &format!("/fields/{}", first["id"]),
            &json!({"field": {"name": "x"}}),
        )
        .expect(404);
    assert_eq!(other.get("/fields").json()["fields"], json!([]));
}

/// An approved issue of `markdown`; its id.
fn approved(owner: &Owner, subject: &str, markdown: &str) -> i64 {
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "content_markdown": markdown,
                          "status": "approved"}}),
    );
    issue.expect(201);
    issue.json()["id"].as_i64().unwrap()
}

#[test]
fn merge_tags_give_each_reader_their_own_values_safely_and_unknown_tags_stop_the_send() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Merged Monthly");
    define(&owner, json!({"name": "first_name", "type": "text"}));
    define(&owner, json!({"name": "vip", "type": "boolean"}));
    for (email, fields) in [
        ("ann@example.net", json!({"first_name": "Ann", "vip": true})),
        (
            "eve@example.net",
            json!({"first_name": "<img src=x onerror=alert(1)> {{ vip }}", "vip": false}),
        ),
        ("nobody@example.net", json!({})),
    ] {
        owner
            .post("/subscribers", &json!({"email": email, "fields": fields}))
            .expect(201);
    }
    let markdown = "Hi {{ first_name | default: \"friend\" }}! VIP: {{ vip | default: \"no\" }}. You are {{ email }}.";
    let id = approved(
        &owner,
        "Personal for {{ first_name | default: \"you\" }}",
        markdown,
    );

    // The preview and the web copy show the fallbacks.
    let preview = owner.client.get(&format!(
        "/newsletters/{}/issues/{id}/preview",
        owner.newsletter_id
    ));
    preview.expect(200);
    assert!(preview.body.contains("Hi friend!"), "{}", preview.body);

    // A test send to a subscriber's address shows theirs.
    owner
        .post(
            &format!("/issues/{id}/send_test"),
            &json!({"emails": ["ann@example.net"]}),
        )
        .expect(202);
    let test = app.smtp.wait_for_message_to("ann@example.net", 1);
    assert!(test.html().contains("Hi Ann!"), "{}", test.html());

    // The send: each reader's copy has their values, escaped and never read as tags again.
    crate::support::send::send_now(&owner, id);
    crate::support::send::wait_status(&owner, id, "sent", std::time::Duration::from_secs(30));
    let ann = app.smtp.wait_for_message_to("ann@example.net", 2);
    assert!(
        ann.html()
            .contains("Hi Ann! VIP: yes. You are ann@example.net."),
        "{}",
        ann.html()
    );
    assert!(
        ann.text()
            .contains("Hi Ann! VIP: yes. You are ann@example.net."),
        "{}",
        ann.text()
    );
    let eve = app.smtp.wait_for_message_to("eve@example.net", 1);
    assert!(
        eve.html()
            .contains("Hi &lt;img src=x onerror=alert(1)&gt; {{ vip }}! VIP: no."),
        "{}",
        eve.html()
    );
    assert!(!eve.html().contains("<img src=x"));
    assert!(
        eve.text()
            .contains("Hi <img src=x onerror=alert(1)> {{ vip }}! VIP: no.")
    );
    // The subject is each reader's too, on one line whatever their value holds.
    assert_eq!(ann.header("Subject").as_deref(), Some("Personal for Ann"));
    assert_eq!(
        eve.header("Subject").as_deref(),
        Some("Personal for <img src=x onerror=alert(1)> {{ vip }}")
    );
    let nobody = app.smtp.wait_for_message_to("nobody@example.net", 1);
    assert_eq!(
        nobody.header("Subject").as_deref(),
        Some("Personal for you")
    );
    assert!(
        nobody.html().contains("Hi friend! VIP: no."),
        "{}",
        nobody.html()
    );

    owner
        .post(&format!("/issues/{id}/publish"), &json!({}))
        .expect(200);
    let page = app.site_client(&owner.subdomain).get(&format!(
        "/p/{}",
        owner.get(&format!("/issues/{id}")).json()["path"]
            .as_str()
            .unwrap()
    ));
    page.expect(200);
    assert!(
        page.body.contains("Hi friend! VIP: no. You are ."),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<h1>Personal for you</h1>"),
        "{}",
        page.body
    );
    // The archive's excerpt too.
    let archive = app.site_client(&owner.subdomain).get("/archive");
    assert!(archive.body.contains("Hi friend!"), "{}", archive.body);
    assert!(
        archive.body.contains(">Personal for you</a>"),
        "{}",
        archive.body
    );
    assert!(!archive.body.contains("{{"), "{}", archive.body);

    // A tag that names no field, in the content or the subject: the editor says so, and a
    // send is refused, sending nothing.
    let subject_typo = approved(&owner, "For {{ fist_name }}", "Hello.");
    let refused = owner.post(&format!("/issues/{subject_typo}/send_now"), &json!({}));
    refused.expect(422);
    assert!(refused.body.contains("fist_name"), "{}", refused.body);
    let bad_id = approved(&owner, "Typo", "Hi {{ frist_name | default: \"friend\" }}");
    let editor = owner.client.get(&format!(
        "/newsletters/{}/issues/{bad_id}/edit",
        owner.newsletter_id
    ));
    editor.expect(200);
    assert!(editor.body.contains("{{ frist_name }}"), "{}", editor.body);
    let refused = owner.post(&format!("/issues/{bad_id}/send_now"), &json!({}));
    refused.expect(422);
    assert!(refused.body.contains("frist_name"), "{}", refused.body);
    let deliveries: i64 = app
        .db()
        .query_row(
            "SELECT count(*) FROM deliveries WHERE issue_id = ?1",
            [bad_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(deliveries, 0, "nothing sent");
}

#[test]
fn the_dashboard_defines_fields_and_sets_a_subscribers_values() {
    let app = spawn_app();
    let owner = onboard(&app, "Dashboard Fields");
    let fields_url = format!("/newsletters/{}/fields", owner.newsletter_id);

    // A bad name: the form again with the message, nothing added.
    let bad = owner.client.submit(
        &fields_url,
        &fields_url,
        &[("field[name]", "First Name"), ("field[type]", "text")],
    );
    bad.expect(422);
    assert!(
        bad.body.contains("must start with a lowercase letter"),
        "{}",
        bad.body
    );
    assert!(
        bad.body.contains("value=\"First Name\""),
        "what was typed stays"
    );
    assert_eq!(owner.get("/fields").json()["fields"], json!([]));

    for (name, kind, options) in [
        ("first_name", "text", ""),
        ("age", "number", ""),
        ("plan", "choice", "weekly\nmonthly\n"),
    ] {
        let added = owner.client.submit(
            &fields_url,
            &fields_url,
            &[
                ("field[name]", name),
                ("field[type]", kind),
                ("field[options]", options),
            ],
        );
        assert_eq!(added.redirect(), fields_url);
    }
    let page = owner.client.get(&fields_url);
    page.expect(200);
    assert!(page.body.contains("{{ first_name }}"));
    assert!(page.body.contains("One of a list: weekly, monthly"));

    // The subscriber's page: one input per field; a value its type cannot hold is the form
    // again with the message, and nothing changes.
    let created = owner.post("/subscribers", &json!({"email": "ann@example.com"}));
    let sid = created.json()["id"].as_i64().unwrap();
    let url = format!("/newsletters/{}/subscribers/{sid}", owner.newsletter_id);
    let shown = owner.client.get(&url);
    assert!(
        shown.body.contains("name=\"fields[age]\""),
        "{}",
        shown.body
    );
    let refused = owner.client.submit(
        &url,
        &url,
        &[
            ("_method", "patch"),
            ("subscriber[name]", "Ann"),
            ("subscriber[status]", "active"),
            ("fields[first_name]", "Ann"),
            ("fields[age]", "old"),
            ("fields[plan]", "weekly"),
        ],
    );
    refused.expect(422);
    assert!(
        refused.body.contains("must be a number"),
        "{}",
        refused.body
    );
    assert_eq!(
        owner.get(&format!("/subscribers/{sid}")).json()["fields"],
        json!({})
    );
    let saved = owner.client.submit(
        &url,
        &url,
        &[
            ("_method", "patch"),
            ("subscriber[name]", "Ann"),
            ("subscriber[status]", "active"),
            ("fields[first_name]", "Ann"),
            ("fields[age]", "41"),
            ("fields[plan]", "weekly"),
        ],
    );
    assert_eq!(saved.redirect(), url);

    // A page shown before a field was added posts only the fields it showed: the new
    // field's value stays. One shown before a field was deleted is refused by name.
    let stale = owner.client.get(&url);
    let token = stale.csrf_token();
    let city = define(&owner, json!({"name": "city", "type": "text"}));
    owner
        .patch(
            &format!("/subscribers/{sid}"),
            &json!({"subscriber": {"fields": {"city": "Oslo"}}}),
        )
        .expect(200);
    let resaved = owner.client.post_form(
        &url,
        &[
            ("authenticity_token", token.as_str()),
            ("_method", "patch"),
            ("subscriber[name]", "Ann"),
            ("subscriber[status]", "active"),
            ("fields[first_name]", "Ann"),
            ("fields[age]", "41"),
            ("fields[plan]", "weekly"),
        ],
    );
    assert_eq!(resaved.redirect(), url);
    assert_eq!(
        owner.get(&format!("/subscribers/{sid}")).json()["fields"]["city"],
        "Oslo"
    );
    let gone = owner.client.submit(
        &url,
        &url,
        &[
            ("_method", "patch"),
            ("subscriber[name]", "Ann"),
            ("subscriber[status]", "active"),
            ("fields[shoe_size]", "42"),
        ],
    );
    gone.expect(422);
    assert!(
        gone.body.contains("is not a field of this newsletter"),
        "{}",
        gone.body
    );
    owner.delete(&format!("/fields/{}", city["id"])).expect(204);
    assert_eq!(
        owner.get(&format!("/subscribers/{sid}")).json()["fields"],
        json!({"first_name": "Ann", "age": 41, "plan": "weekly"})
    );

    // The CSV export has a column per field, named as the field.
    let csv = owner.client.get(&format!(
        "/newsletters/{}/subscribers/export.csv",
        owner.newsletter_id
    ));
    csv.expect(200);
    let mut lines = csv.body.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .ends_with(",membership_until,first_name,age,plan"),
        "{}",
        csv.body
    );
    assert!(
        lines.next().unwrap().ends_with(",free,,Ann,41,weekly"),
        "{}",
        csv.body
    );

    // Deleting a field takes its values.
    let plan = owner.get("/fields").json()["fields"][2]["id"].clone();
    let deleted = owner
        .client
        .submit(&fields_url, &format!("{fields_url}/{plan}/delete"), &[]);
    assert_eq!(deleted.redirect(), fields_url);
    assert_eq!(
        owner.get(&format!("/subscribers/{sid}")).json()["fields"],
        json!({"first_name": "Ann", "age": 41})
    );
}

/// The page `import_page` once its import has finished.
fn finished_import(owner: &Owner, import_page: &str) -> Resp {
    owner
        .client
        .submit(import_page, &format!("{import_page}/start"), &[])
        .expect(303);
    wait_for("the import to finish", Duration::from_secs(60), || {
        let page = owner.client.get(import_page);
        page.body.contains("Import finished").then_some(page)
    })
}

#[test]
fn field_values_come_in_through_bulk_create_and_csv_import_checked_by_type() {
    let app = spawn_app();
    let owner = onboard(&app, "Imported Fields");
    define(&owner, json!({"name": "first_name", "type": "text"}));
    define(&owner, json!({"name": "age", "type": "number"}));
    define(&owner, json!({"name": "vip", "type": "boolean"}));
    define(
        &owner,
        json!({"name": "plan", "type": "choice", "options": ["weekly", "monthly"]}),
    );
    owner
        .post(
            "/subscribers",
            &json!({"email": "kept@example.com", "fields": {"first_name": "Kept"}}),
        )
        .expect(201);

    // Bulk create: each entry's values are checked on their own.
    let bulk = owner.post(
        "/subscribers/bulk_create",
        &json!({"subscribers": [
            {"email": "ann@example.com", "fields": {"first_name": "Ann", "age": 41, "vip": true}},
            {"email": "bad@example.com", "fields": {"age": "many"}},
            {"email": "odd@example.com", "fields": {"shoe_size": 42}},
            {"email": "kept@example.com", "fields": {"first_name": "Changed"}},
        ]}),
    );
    bulk.expect(200);
    let outcome = bulk.json();
    assert_eq!(
        (outcome["created"].clone(), outcome["existing"].clone()),
        (json!(1), json!(1))
    );
    let refused: Vec<(i64, String)> = outcome["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["index"].as_i64().unwrap(),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(refused.len(), 2, "{outcome}");
    assert_eq!(refused[0].0, 1);
    assert!(refused[0].1.contains("must be a number"), "{refused:?}");
    assert_eq!(refused[1].0, 2);
    assert!(refused[1].1.contains("is not a field"), "{refused:?}");
    assert!(api_subscriber(&owner, "bad@example.com").is_none());
    assert_eq!(
        api_subscriber(&owner, "ann@example.com").unwrap()["fields"],
        json!({"first_name": "Ann", "age": 41, "vip": true})
    );
    assert_eq!(
        api_subscriber(&owner, "kept@example.com").unwrap()["fields"],
        json!({"first_name": "Kept"}),
        "an address already there keeps its values"
    );

    // A header naming a field twice is refused before anything waits.
    let twice = upload(
        &owner,
        "twice.csv",
        b"email,first_name,First_Name\na@example.com,A,B\n",
    );
    twice.expect(422);
    assert!(
        twice.body.contains("two columns for the field first_name"),
        "{}",
        twice.body
    );

    // A CSV file: columns named as fields fill them, by type, hostile text kept as text.
    let csv = "email,First_Name,age,vip,plan,Shoe size\n\
               cara@example.com,\"<b>Cara</b>\",29,yes,monthly,40\n\
               dan@example.com,Dan,forty,no,weekly,41\n\
               eve@example.com,Eve,33,maybe,weekly,42\n\
               fay@example.com,Fay,,,daily,43\n\
               kept@example.com,Imported,50,yes,weekly,44\n\
               gus@example.com,,,,,45\n";
    let import_page = upload(&owner, "fields.csv", csv.as_bytes()).redirect();
    let preview = owner.client.get(&import_page);
    preview.expect(200);
    for expected in [
        "<code>First_Name</code> → the custom field first_name (text), for new subscribers",
        "<code>age</code> → the custom field age (number), for new subscribers",
        "<code>Shoe size</code> → ignored",
        "age must be a number",
    ] {
        assert!(
            preview.body.contains(expected),
            "preview lacks {expected:?}:\n{}",
            preview.body
        );
    }
    let done = finished_import(&owner, &import_page);
    for expected in [
        "<td>3</td><td>dan@example.com</td><td>age must be a number</td>",
        "<td>4</td><td>eve@example.com</td><td>vip must be true or false</td>",
        "<td>5</td><td>fay@example.com</td><td>plan must be one of weekly, monthly</td>",
    ] {
        assert!(
            done.body.contains(expected),
            "result lacks {expected:?}:\n{}",
            done.body
        );
    }
    assert_eq!(
        api_subscriber(&owner, "cara@example.com").unwrap()["fields"],
        json!({"first_name": "<b>Cara</b>", "age": 29, "vip": true, "plan": "monthly"})
    );
    assert_eq!(
        api_subscriber(&owner, "gus@example.com").unwrap()["fields"],
        json!({})
    );
    assert!(api_subscriber(&owner, "dan@example.com").is_none());
    assert_eq!(
        api_subscriber(&owner, "kept@example.com").unwrap()["fields"],
        json!({"first_name": "Kept"}),
        "an import adds values to the subscribers it brings only"
    );

    // What the export writes, another newsletter with the same fields reads back.
    let exported = owner.client.get(&format!(
        "/newsletters/{}/subscribers/export.csv",
        owner.newsletter_id
    ));
    exported.expect(200);
    let other = onboard(&app, "Second Fields");
    define(&other, json!({"name": "first_name", "type": "text"}));
    define(&other, json!({"name": "age", "type": "number"}));
    define(&other, json!({"name": "vip", "type": "boolean"}));
    define(
        &other,
        json!({"name": "plan", "type": "choice", "options": ["weekly", "monthly"]}),
    );
    let page = upload(&other, "export.csv", exported.body.as_bytes()).redirect();
    finished_import(&other, &page);
    for email in [
        "ann@example.com",
        "cara@example.com",
        "kept@example.com",
        "gus@example.com",
    ] {
        assert_eq!(
            api_subscriber(&other, email).unwrap()["fields"],
            api_subscriber(&owner, email).unwrap()["fields"],
            "{email}"
        );
    }
}
