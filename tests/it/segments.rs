//! Segments: a send goes to the active subscribers having any of some
//! tags and none of others, through `send_now`'s body, a scheduled issue's recorded
//! audience, and the dashboard's review step; the messages the SMTP sink receives are
//! exactly the audience, and the issue's recipients and stats count only them. The
//! dashboard's send page sends the audience ticked in the form it posts, and only when the
//! Send button was labelled for it: here without JavaScript, over HTTP;
//! `send_audience.rs` presses the buttons in Chromium.

use std::time::Duration;

use crate::support::http::unescape;
use crate::support::send::{issue, wait_status};
use crate::support::*;

/// Adds a subscriber with `tags` through the API; returns its id.
pub(crate) fn add(owner: &Owner, email: &str, tags: &[&str]) -> i64 {
    let resp = owner.post("/subscribers", &json!({ "email": email, "tags": tags }));
    resp.expect(201);
    resp.json()["id"].as_i64().expect("subscriber id")
}

/// An approved issue with content; returns its id.
pub(crate) fn approved(owner: &Owner, subject: &str) -> i64 {
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "status": "approved", "content_markdown": "Hello."}}),
    );
    resp.expect(201);
    resp.json()["id"].as_i64().expect("issue id")
}

/// A newsletter with five subscribers: news, news+vip, events, untagged, and an
/// unsubscribed one tagged news.
pub(crate) struct Readers {
    pub news: String,
    pub news_vip: String,
    pub events: String,
    pub untagged: String,
    pub gone: String,
}

pub(crate) fn readers(owner: &Owner) -> Readers {
    let r = Readers {
        news: unique_email("news"),
        news_vip: unique_email("vip"),
        events: unique_email("events"),
        untagged: unique_email("untagged"),
        gone: unique_email("gone"),
    };
    add(owner, &r.news, &["news"]);
    add(owner, &r.news_vip, &["news", "vip"]);
    add(owner, &r.events, &["events"]);
    add(owner, &r.untagged, &[]);
    let gone = add(owner, &r.gone, &["news", "old"]);
    owner
        .patch(
            &format!("/subscribers/{gone}"),
            &json!({"subscriber": {"status": "unsubscribed"}}),
        )
        .expect(200);
    r
}

impl Readers {
    /// Every reader, the unsubscribed one too.
    pub(crate) fn all(&self) -> [&String; 5] {
        [
            &self.news,
            &self.news_vip,
            &self.events,
            &self.untagged,
            &self.gone,
        ]
    }

    /// Waits for issue `id` to be sent and asserts that exactly `want` got `subject` at the
    /// sink, among every reader, and that the issue's deliveries are theirs.
    #[track_caller]
    pub(crate) fn assert_sent_to(
        &self,
        (app, owner): (&App, &Owner),
        (id, subject): (i64, &str),
        want: &[&String],
    ) {
        let sent = wait_status(owner, id, "sent", Duration::from_secs(30));
        let want: Vec<String> = self
            .all()
            .into_iter()
            .filter(|e| want.contains(e))
            .cloned()
            .collect();
        assert_eq!(received(app, &self.all(), subject), want, "{subject}");
        assert_eq!(sent["recipients"], want.len(), "{subject}: {sent}");
        assert_eq!(
            app.count(&format!(
                "SELECT count(*) FROM deliveries WHERE issue_id = {id}"
            )),
            want.len() as i64,
            "{subject}: one delivery per subscriber of the audience"
        );
    }
}

/// Who the sink received issue `subject` for, among `emails`.
pub(crate) fn received(app: &App, emails: &[&String], subject: &str) -> Vec<String> {
    emails
        .iter()
        .filter(|e| {
            app.smtp
                .messages_to(e)
                .iter()
                .any(|m| m.header("Subject").is_some_and(|s| s.contains(subject)))
        })
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn segments_send_now_reaches_any_of_the_tags_and_none_of_the_excluded() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Segmented");
    let r = readers(&owner);
    let all = [&r.news, &r.news_vip, &r.events, &r.untagged, &r.gone];

    let id = approved(&owner, "Tagged only");
    let resp = owner.post(
        &format!("/issues/{id}/send_now"),
        &json!({"tags": ["news", "events"], "exclude_tags": ["vip"]}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], 2, "{}", resp.body);
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert_eq!(
        sent["audience"],
        json!({"tags": ["events", "news"], "exclude_tags": ["vip"], "field": null})
    );
    assert_eq!(sent["recipients"], 2);
    assert_eq!(sent["delivery"]["recipients"], 2);
    assert_eq!(sent["delivery"]["sent"], 2);
    let mut got = received(&app, &all, "Tagged only");
    got.sort();
    let mut want = vec![r.news.clone(), r.events.clone()];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id}"
        )),
        2,
        "one delivery per subscriber of the audience"
    );

    // Only exclusions: everyone active but them.
    let id = approved(&owner, "Not the VIPs");
    let resp = owner.post(
        &format!("/issues/{id}/send_now"),
        &json!({"exclude_tags": ["vip"]}),
    );
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], 3);
    wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert_eq!(received(&app, &all, "Not the VIPs").len(), 3);
    assert!(received(&app, &[&r.news_vip], "Not the VIPs").is_empty());

    // No body keeps today's behaviour: every active subscriber.
    let id = approved(&owner, "Everyone");
    let resp = owner.client.api_raw(
        "POST",
        &format!("/issues/{id}/send_now"),
        &owner.key,
        "application/json",
        Vec::new(),
    );
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], 4);
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(20));
    assert_eq!(
        sent["audience"],
        json!({"tags": [], "exclude_tags": [], "field": null})
    );
    assert_eq!(sent["recipients"], 4);
    assert_eq!(received(&app, &all, "Everyone").len(), 4);

    // A tag only an unsubscribed subscriber has: known, but nobody to send to.
    let id = approved(&owner, "Old friends");
    let resp = owner.post(&format!("/issues/{id}/send_now"), &json!({"tags": ["old"]}));
    assert_eq!(resp.error_code(422), "no_active_subscribers");
    assert_eq!(issue(&owner, id)["status"], "approved");
}

#[test]
fn segments_bad_audiences_are_refused_and_change_nothing() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Careful Sender");
    readers(&owner);
    let id = approved(&owner, "Careful");
    let path = format!("/issues/{id}/send_now");
    let jobs = || app.count("SELECT count(*) FROM jobs WHERE kind = 'send_issue'");
    let jobs_before = jobs();

    let resp = owner.post(&path, &json!({"tags": ["news", "nwes"]}));
    assert_eq!(resp.error_code(422), "validation_error");
    let body = resp.json();
    let message = body["error"]["details"]["tags"][0].as_str().unwrap();
    assert!(
        message.contains("nwes") && message.contains("no subscriber"),
        "{body}"
    );

    let resp = owner.post(&path, &json!({"exclude_tags": ["typo"]}));
    assert_eq!(resp.error_code(422), "validation_error");
    assert!(resp.json()["error"]["details"]["exclude_tags"].is_array());

    let resp = owner.post(&path, &json!({"tags": ["news"], "exclude_tags": ["news"]}));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.post(&path, &json!({"tags": [""]}));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.post(&path, &json!({"tags": "news"}));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.post(&path, &json!({"tags": [7]}));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.post(&path, &json!(["news"]));
    assert_eq!(resp.error_code(422), "validation_error");
    let resp = owner.client.api_raw(
        "POST",
        &path,
        &owner.key,
        "application/json",
        b"{\"tags\": [".to_vec(),
    );
    assert_eq!(resp.error_code(400), "invalid_json");

    // Another owner's issue is not found, with or without an audience.
    let other = onboard_paid(&app, "Someone Else");
    add(&other, &unique_email("theirs"), &["news"]);
    let resp = other.post(&path, &json!({"tags": ["news"]}));
    assert_eq!(resp.error_code(404), "not_found");

    let shown = issue(&owner, id);
    assert_eq!(shown["status"], "approved");
    assert_eq!(
        shown["audience"],
        json!({"tags": [], "exclude_tags": [], "field": null})
    );
    assert_eq!(shown["recipients"], Value::Null);
    assert_eq!(jobs(), jobs_before, "no send was queued");
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id}"
        )),
        0,
        "nothing was sent"
    );

    // The issue's own fields refuse the same way, naming the audience's lists.
    let resp = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"audience": {"tags": ["nwes"]}}}),
    );
    assert_eq!(resp.error_code(422), "validation_error");
    assert!(resp.json()["error"]["details"]["audience.tags"].is_array());
    assert_eq!(
        issue(&owner, id)["audience"],
        json!({"tags": [], "exclude_tags": [], "field": null})
    );
}

#[test]
fn segments_scheduled_issue_sends_to_its_recorded_audience() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Timed Segments");
    let r = readers(&owner);
    let all = [&r.news, &r.news_vip, &r.events, &r.untagged, &r.gone];
    let at = (app.clock_now() + jiff::SignedDuration::from_hours(1)).to_string();
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": "VIP preview", "content_markdown": "Soon.",
            "status": "scheduled", "scheduled_for": at,
            "audience": {"tags": ["vip", "events"]}}}),
    );
    resp.expect(201);
    let created = resp.json();
    let id = created["id"].as_i64().unwrap();
    assert_eq!(
        created["audience"],
        json!({"tags": ["events", "vip"], "exclude_tags": [], "field": null})
    );
    assert_eq!(created["recipients"], Value::Null);
    // Narrowed while it waits: recorded for the scheduled send.
    owner
        .patch(
            &format!("/issues/{id}"),
            &json!({"issue": {"audience": {"tags": ["vip"]}}}),
        )
        .expect(200);

    app.advance_clock(Duration::from_secs(3600));
    let sent = wait_status(&owner, id, "sent", Duration::from_secs(30));
    assert_eq!(sent["recipients"], 1);
    assert_eq!(
        received(&app, &all, "VIP preview"),
        vec![r.news_vip.clone()]
    );

    // null clears the audience: every active subscriber again.
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": "All again", "status": "approved", "content_markdown": "x",
            "audience": {"tags": ["vip"]}}}),
    );
    resp.expect(201);
    let id = resp.json()["id"].as_i64().unwrap();
    let cleared = owner.patch(
        &format!("/issues/{id}"),
        &json!({"issue": {"audience": null}}),
    );
    cleared.expect(200);
    assert_eq!(
        cleared.json()["audience"],
        json!({"tags": [], "exclude_tags": [], "field": null})
    );
    // An empty body sends to the recorded audience (everyone now).
    let resp = owner.post(&format!("/issues/{id}/send_now"), &json!({}));
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], 4);
}

/// What the send page's form posts when its Send button is pressed, without JavaScript: its
/// hidden fields and checked boxes (not the CSRF token, which `submit` adds) and
/// `intent=send`.
pub(crate) fn send_form_fields(page: &str) -> Vec<(String, String)> {
    let start = page
        .find("<form id=\"send-form\"")
        .unwrap_or_else(|| panic!("no send form on the page:\n{page}"));
    let form = &page[start..start + page[start..].find("</form>").unwrap()];
    let mut fields: Vec<(String, String)> = form
        .split("<input ")
        .skip(1)
        .filter_map(|rest| {
            let tag = format!(" {}", &rest[..rest.find('>').unwrap()]);
            let attr = |name: &str| {
                let from = tag.find(&format!(" {name}=\""))? + name.len() + 3;
                Some(unescape(&tag[from..from + tag[from..].find('"')?]))
            };
            let (kind, name) = (attr("type")?, attr("name")?);
            let ticked = kind == "checkbox" || kind == "radio";
            let sent = kind == "hidden" || (ticked && tag.contains(" checked"));
            (sent && name != "authenticity_token")
                .then(|| (name, attr("value").unwrap_or_default()))
        })
        .collect();
    fields.push(("intent".into(), "send".into()));
    fields
}

/// Asserts that `page` contains `needle`, showing the page when it does not.
#[track_caller]
fn shows(page: &str, needle: &str) {
    assert!(page.contains(needle), "{needle:?} not in:\n{page}");
}

/// `fields` as `submit` takes them.
pub(crate) fn pairs(fields: &[(String, String)]) -> Vec<(&str, &str)> {
    fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[test]
fn segments_dashboard_reviews_the_exact_count_then_sends_to_the_chosen_tags() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Dashboard Segments");
    let r = readers(&owner);
    let id = approved(&owner, "Chosen in the dashboard");
    let url = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);
    let send = format!("{url}/send");

    // First visit: every tag to choose from, and everyone counted.
    let page = owner.client.get(&send);
    page.expect(200);
    for tag in ["news", "vip", "events", "old"] {
        assert!(
            page.body
                .contains(&format!("name=\"tags\" value=\"{tag}\"")),
            "{tag}: {}",
            page.body
        );
    }
    shows(&page.body, "data-recipients=\"4\"");
    shows(&page.body, ">Send to 4 subscribers<");

    // Review by the page's address: the exact count of the checked audience.
    let review = format!("{send}?audience=chosen&tags=news&tags=events&exclude_tags=vip");
    let page = owner.client.get(&review);
    page.expect(200);
    shows(&page.body, "data-recipients=\"2\"");
    shows(&page.body, "except those tagged “vip”");
    shows(&page.body, "name=\"exclude_tags\" value=\"vip\" checked");
    assert_eq!(
        issue(&owner, id)["status"],
        "approved",
        "a review sends nothing"
    );

    // A tag nobody has (typed into the address): said on the page, no send button.
    let page = owner
        .client
        .get(&format!("{send}?audience=chosen&tags=nwes"));
    page.expect(200);
    shows(&page.body, "Tags include “nwes”, a tag no subscriber has");
    assert!(!page.body.contains("data-recipients"), "{}", page.body);
    assert!(
        !page.body.contains("name=\"intent\" value=\"send\""),
        "{}",
        page.body
    );

    // Send, as the reviewed page's form posts it.
    let page = owner.client.get(&review);
    let resp = owner
        .client
        .submit(&review, &send, &pairs(&send_form_fields(&page.body)));
    assert_eq!(resp.redirect(), url);
    r.assert_sent_to(
        (&app, &owner),
        (id, "Chosen in the dashboard"),
        &[&r.news, &r.events],
    );

    // The issue page states the audience and the recipients.
    let page = owner.client.get(&url);
    shows(
        &page.body,
        "active subscribers tagged “events” or “news”, except those tagged “vip” · 2 recipients",
    );
    shows(&page.body, "id=\"report-recipients\">2<");
}

#[test]
fn segments_dashboard_send_takes_the_ticks_it_was_labelled_for_or_reviews() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Ticked Segments");
    let r = readers(&owner);
    let jobs = || app.count("SELECT count(*) FROM jobs WHERE kind = 'send_issue'");
    let deliveries = |id: i64| {
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id}"
        ))
    };

    // The trial on main: "vip" ticked under "Send to", Send pressed at once. The button was
    // labelled for everyone, so the page comes back with the new count and nothing is queued.
    let id = approved(&owner, "Only the VIPs");
    let send = format!("/newsletters/{}/issues/{id}/send", owner.newsletter_id);
    let page = owner.client.get(&send);
    let mut fields = send_form_fields(&page.body);
    assert!(
        !fields.iter().any(|(k, _)| k.starts_with("named_")),
        "everyone is named by no tags: {fields:?}"
    );
    fields.push(("tags".into(), "vip".into()));
    let resp = owner.client.submit(&send, &send, &pairs(&fields));
    resp.expect(409);
    shows(
        &resp.body,
        "You changed the audience: it now goes to 1 subscriber. Nothing was sent yet. Press “Send to 1 subscriber” to confirm.",
    );
    shows(&resp.body, "data-recipients=\"1\"");
    shows(&resp.body, "name=\"tags\" value=\"vip\" checked");
    assert_eq!(jobs(), 0, "nothing queued");
    assert_eq!(deliveries(id), 0);
    assert_eq!(issue(&owner, id)["status"], "approved");
    assert_eq!(
        issue(&owner, id)["audience"],
        json!({"tags": [], "exclude_tags": [], "field": null}),
        "nothing recorded either"
    );

    // A post of ticks without the form's other fields is read for its ticks all the same.
    let resp = owner
        .client
        .submit(&send, &send, &[("tags", "vip"), ("intent", "send")]);
    resp.expect(409);
    assert_eq!(jobs(), 0, "nothing queued");

    // The page that came back names the ticked audience; a tick changed again after it
    // (news instead of vip) comes back again.
    let named = send_form_fields(&resp.body);
    assert!(
        named.contains(&("named_tags".into(), "vip".into())),
        "{named:?}"
    );
    let moved: Vec<(String, String)> = named
        .iter()
        .map(|(k, v)| match (k.as_str(), v.as_str()) {
            ("tags", "vip") => (k.clone(), "news".to_string()),
            _ => (k.clone(), v.clone()),
        })
        .collect();
    let resp = owner.client.submit(&send, &send, &pairs(&moved));
    resp.expect(409);
    shows(&resp.body, "it now goes to 2 subscribers");
    assert_eq!(jobs(), 0, "nothing queued");

    // Review (the other button) counts and sends nothing, whatever it names.
    let mut reviewed = named.clone();
    reviewed.retain(|(k, _)| k != "intent");
    reviewed.push(("intent".into(), "review".into()));
    let resp = owner.client.submit(&send, &send, &pairs(&reviewed));
    resp.expect(200);
    shows(&resp.body, "data-recipients=\"1\"");
    assert!(!resp.body.contains("audience-changed"), "{}", resp.body);
    assert_eq!(jobs(), 0, "nothing queued");

    // Send on the page that named vip: exactly vip.
    let resp = owner.client.submit(&send, &send, &pairs(&named));
    assert_eq!(
        resp.redirect(),
        format!("/newsletters/{}/issues/{id}", owner.newsletter_id)
    );
    r.assert_sent_to((&app, &owner), (id, "Only the VIPs"), &[&r.news_vip]);
    assert_eq!(jobs(), 1);

    // The same under "Leave out": everyone but vip, after a page that came back.
    let id = approved(&owner, "All but the VIPs");
    let send = format!("/newsletters/{}/issues/{id}/send", owner.newsletter_id);
    let mut fields = send_form_fields(&owner.client.get(&send).body);
    fields.push(("exclude_tags".into(), "vip".into()));
    let resp = owner.client.submit(&send, &send, &pairs(&fields));
    resp.expect(409);
    shows(&resp.body, "it now goes to 3 subscribers");
    shows(&resp.body, "name=\"exclude_tags\" value=\"vip\" checked");
    assert_eq!(jobs(), 1, "nothing more queued");
    assert_eq!(deliveries(id), 0);
    let resp = owner
        .client
        .submit(&send, &send, &pairs(&send_form_fields(&resp.body)));
    resp.redirect();
    r.assert_sent_to(
        (&app, &owner),
        (id, "All but the VIPs"),
        &[&r.news, &r.events, &r.untagged],
    );

    // An audience that cannot be sent comes back with why, and no send button.
    let id = approved(&owner, "Old friends");
    let send = format!("/newsletters/{}/issues/{id}/send", owner.newsletter_id);
    let mut fields = send_form_fields(&owner.client.get(&send).body);
    fields.push(("tags".into(), "old".into()));
    let resp = owner.client.submit(&send, &send, &pairs(&fields));
    resp.expect(409);
    assert!(
        resp.body
            .contains("You changed the audience, and nothing was sent")
            && resp
                .body
                .contains("No active subscriber is in this audience"),
        "{}",
        resp.body
    );
    assert!(
        !resp.body.contains("name=\"intent\" value=\"send\""),
        "{}",
        resp.body
    );
    assert_eq!(jobs(), 2, "nothing more queued");
}

#[test]
fn segments_dashboard_counts_ticks_as_json() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Counted Segments");
    readers(&owner);
    let id = approved(&owner, "Counted");
    let count = format!(
        "/newsletters/{}/issues/{id}/audience_count",
        owner.newsletter_id
    );

    let resp = owner
        .client
        .get(&format!("{count}?tags=vip&tags=news&exclude_tags=vip"));
    assert_eq!(resp.status, 422, "{}", resp.body);
    let resp = owner.client.get(&format!(
        "{count}?tags=news&tags=%20events&exclude_tags=vip"
    ));
    resp.expect(200);
    assert_eq!(resp.header("Cache-Control"), Some("no-store"));
    assert!(
        resp.header("Content-Type")
            .is_some_and(|t| t.starts_with("application/json"))
    );
    assert_eq!(
        resp.header("Content-Security-Policy"),
        Some("default-src 'none'; frame-ancestors 'none'"),
        "not HTML: nothing in it may load or run"
    );
    let answer = resp.json();
    assert_eq!(answer["recipients"], 2, "{answer}");
    assert_eq!(answer["button"], "Send to 2 subscribers");
    assert_eq!(answer["tags"], json!(["events", "news"]), "cleaned");
    assert_eq!(answer["exclude_tags"], json!(["vip"]));
    assert_eq!(
        format!(
            "{}{}{}",
            answer["before"].as_str().unwrap(),
            answer["recipients"],
            answer["after"].as_str().unwrap()
        ),
        "It goes out at once to 2 active subscribers (active subscribers tagged “events” or “news”, except those tagged “vip”). This cannot be undone."
    );
    let answer = owner.client.get(&count).json();
    assert_eq!(answer["recipients"], 4, "nothing ticked: everyone");

    // Why not, in words.
    let resp = owner.client.get(&format!("{count}?tags=nwes"));
    assert_eq!(resp.status, 422);
    let problem = resp.json()["problem"].as_str().unwrap().to_string();
    assert!(
        problem.contains("Tags include “nwes”, a tag no subscriber has"),
        "{problem}"
    );
    let resp = owner.client.get(&format!("{count}?tags=old"));
    assert_eq!(resp.status, 422);
    assert!(
        resp.json()["problem"]
            .as_str()
            .unwrap()
            .contains("No active subscriber is in this audience"),
        "{}",
        resp.body
    );
    // For the schedule form: the audience's size now, however small.
    let answer = owner
        .client
        .get(&format!("{count}?tags=old&for=schedule"))
        .json();
    assert_eq!(answer["recipients"], 0, "{answer}");

    // The script that asks, served like the dashboard's others.
    let script = owner.client.get("/assets/audience.js");
    script.expect(200);
    assert!(
        script
            .header("Content-Type")
            .is_some_and(|t| t.starts_with("text/javascript")),
        "{:?}",
        script.headers
    );
    assert!(
        script.body.contains("named_tags"),
        "it keeps the named audience"
    );

    // Counting sends nothing; another owner's issue is not found.
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE kind = 'send_issue'"),
        0
    );
    assert_eq!(issue(&owner, id)["status"], "approved");
    let other = onboard_paid(&app, "Someone Else");
    assert_eq!(other.client.get(&format!("{count}?tags=vip")).status, 404);
}

#[test]
fn segments_dashboard_schedules_with_an_audience() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Scheduled Segments");
    let r = readers(&owner);
    let id = approved(&owner, "Later, for some");
    let url = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);
    let page = owner.client.get(&url);
    assert!(
        page.body.contains("name=\"exclude_tags\" value=\"vip\""),
        "the schedule form offers the tags: {}",
        page.body
    );
    assert!(
        page.body.contains("id=\"schedule-count\"") && page.body.contains("data-recipients=\"4\""),
        "the count of the recorded audience (everyone): {}",
        page.body
    );
    let at = (app.clock_now() + jiff::SignedDuration::from_hours(2))
        .strftime("%Y-%m-%dT%H:%M")
        .to_string();
    let resp = owner.client.submit(
        &url,
        &format!("{url}/schedule"),
        &[
            ("scheduled_for", &at),
            ("audience", "chosen"),
            ("tags", "news"),
            ("exclude_tags", "vip"),
        ],
    );
    assert_eq!(resp.redirect(), url);
    let shown = issue(&owner, id);
    assert_eq!(shown["status"], "scheduled");
    assert_eq!(
        shown["audience"],
        json!({"tags": ["news"], "exclude_tags": ["vip"], "field": null})
    );
    let page = owner.client.get(&url);
    assert!(
        page.body
            .contains(", to active subscribers tagged “news”, except those tagged “vip”."),
        "the notice names the audience: {}",
        page.body
    );
    assert!(
        page.body.contains("data-recipients=\"1\""),
        "the count line counts it: {}",
        page.body
    );

    // When its time comes, the send goes to exactly the ticked audience.
    app.advance_clock(Duration::from_secs(2 * 3600));
    r.assert_sent_to((&app, &owner), (id, "Later, for some"), &[&r.news]);
}
