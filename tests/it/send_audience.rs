//! The send page sends exactly the audience it names, in Chromium: a tag
//! ticked under "Send to" or "Leave out" and Send pressed at once, after the script's count,
//! before the script saw the tick, or with the count never arriving. Either exactly that
//! audience gets the issue at the SMTP sink, or the page comes back with the new count,
//! nothing queued, and its Send button then sends exactly that audience. The schedule form's
//! ticks are what the scheduled send goes to when the test clock reaches its time.

use std::time::{Duration, Instant};

use fantoccini::Client;

use crate::segments::{Readers, approved, readers};
use crate::support::browser::{
    Driver, click, runtime, screenshot, sign_in, wait_for_element, wait_for_text,
};
use crate::support::send::issue;
use crate::support::*;

/// When Send is pressed after the tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Press {
    /// At once, as in the trial: whatever the script has done by then.
    AtOnce,
    /// Once the script's count has relabelled the button.
    AfterTheCount,
    /// Before the script saw the tick (the box checked without a change event, as when the
    /// script has not loaded yet or JavaScript is off): the server compares.
    BeforeTheScript,
    /// With the count never arriving (every fetch hangs).
    CountNeverCame,
}

const PRESSES: [Press; 4] = [
    Press::AtOnce,
    Press::AfterTheCount,
    Press::BeforeTheScript,
    Press::CountNeverCame,
];

/// Clicks `css`, which leaves the page, and waits for the next page to have loaded.
async fn press(c: &Client, css: &str) {
    c.execute("window.__leaving = true", vec![]).await.unwrap();
    click(c, css).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let arrived = "return window.__leaving !== true && document.readyState === 'complete'";
    // While the page changes, the script may fail (no document): look again.
    while c.execute(arrived, vec![]).await.ok() != Some(Value::Bool(true)) {
        assert!(Instant::now() < deadline, "the page after {css} never came");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Where the browser is.
async fn path(c: &Client) -> String {
    c.current_url().await.unwrap().path().to_string()
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn send_audience_in_chromium_goes_to_the_ticked_tags_or_comes_back_to_review() {
    let Some(driver) = Driver::start("send audience") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard_paid(&app, "Ticked in Chromium");
    let r = readers(&owner);
    let jobs = || app.count("SELECT count(*) FROM jobs WHERE kind = 'send_issue'");
    let base = app.base_url.clone();
    let n = format!("/newsletters/{}", owner.newsletter_id);

    let mut outcomes = Vec::new();
    runtime().block_on(async {
        let c = driver.session().await;
        sign_in(&c, &base, &owner.email).await;
        for (list, want) in [
            ("tags", vec![&r.news_vip]),
            ("exclude_tags", vec![&r.news, &r.events, &r.untagged]),
        ] {
            let label = if want.len() == 1 {
                "Send to 1 subscriber".to_string()
            } else {
                format!("Send to {} subscribers", want.len())
            };
            for how in PRESSES {
                let subject = format!("{list} vip, {how:?}");
                let id = approved(&owner, &subject);
                let (page, send) = (format!("{n}/issues/{id}"), format!("{n}/issues/{id}/send"));
                c.goto(&format!("{base}{send}")).await.unwrap();
                wait_for_text(&c, "#send-button", "Send to 4 subscribers").await;
                let tick = format!("#audience input[name={list}][value=vip]");
                match how {
                    Press::BeforeTheScript => {
                        c.execute(
                            "document.querySelector(arguments[0]).checked = true",
                            vec![json!(tick)],
                        )
                        .await
                        .unwrap();
                    }
                    Press::CountNeverCame => {
                        c.execute("window.fetch = () => new Promise(() => {})", vec![])
                            .await
                            .unwrap();
                        click(&c, &tick).await;
                        // The button says what pressing it now does.
                        wait_for_text(&c, "#send-button", "Review the new audience").await;
                    }
                    Press::AfterTheCount => {
                        click(&c, &tick).await;
                        wait_for_text(&c, "#send-button", &label).await;
                        let line = wait_for_text(&c, "#recipient-count", "This cannot").await;
                        assert!(
                            line.contains(&format!("to {} active subscriber", want.len())),
                            "{line}"
                        );
                    }
                    Press::AtOnce => click(&c, &tick).await,
                }
                let queued = jobs();
                press(&c, "#send-button").await;
                let reviewed = path(&c).await == send;
                outcomes.push((how, reviewed));
                match how {
                    Press::AfterTheCount => assert!(!reviewed, "{subject}: sent at once"),
                    Press::BeforeTheScript | Press::CountNeverCame => {
                        assert!(reviewed, "{subject}: came back")
                    }
                    Press::AtOnce => {}
                }
                if reviewed {
                    // Nothing queued, nothing recorded; the page states the new count.
                    assert_eq!(jobs(), queued, "{subject}: nothing queued");
                    assert_eq!(issue(&owner, id)["status"], "approved", "{subject}");
                    let changed = c
                        .find(fantoccini::Locator::Css("#audience-changed"))
                        .await
                        .is_ok();
                    assert_eq!(
                        changed,
                        how == Press::BeforeTheScript,
                        "{subject}: the server saw the change only where the script did not"
                    );
                    if how == Press::BeforeTheScript {
                        screenshot(&c, "send-audience-changed").await;
                        c.set_window_size(390, 844).await.unwrap();
                        c.execute(
                            "document.getElementById('recipient-count').scrollIntoView()",
                            vec![],
                        )
                        .await
                        .unwrap();
                        screenshot(&c, "send-audience-changed-phone").await;
                        c.set_window_size(1280, 900).await.unwrap();
                    }
                    let button = wait_for_element(&c, "#send-button").await;
                    assert_eq!(button.text().await.unwrap(), label, "{subject}");
                    let ticked = c
                        .find(fantoccini::Locator::Css(&tick))
                        .await
                        .unwrap()
                        .is_selected()
                        .await
                        .unwrap();
                    assert!(ticked, "{subject}: the review keeps the tick");
                    press(&c, "#send-button").await;
                }
                assert_eq!(path(&c).await, page, "{subject}: on the issue page");
                r.assert_sent_to((&app, &owner), (id, &subject), &want);
            }
        }
        // Chromium logs the 409 of each page that came back from the server's comparison;
        // the script itself logs nothing.
        let errors: Vec<String> = driver
            .console_errors(&c)
            .await
            .into_iter()
            .filter(|e| !(e.contains("/send - ") && e.contains("status of 409 (Conflict)")))
            .collect();
        assert!(errors.is_empty(), "browser console: {errors:?}");
        c.close().await.unwrap();
    });
    eprintln!("pressed at once / came back to review: {outcomes:?}");
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn send_audience_in_chromium_schedules_the_ticked_tags() {
    let Some(driver) = Driver::start("schedule audience") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard_paid(&app, "Scheduled in Chromium");
    let r: Readers = readers(&owner);
    let base = app.base_url.clone();
    let id = approved(&owner, "Scheduled for the news");
    let page = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);
    // On the account's clocks (UTC for a new account), two hours on.
    let at = (app.clock_now() + jiff::SignedDuration::from_hours(2))
        .strftime("%Y-%m-%dT%H:%M")
        .to_string();

    runtime().block_on(async {
        let c = driver.session().await;
        sign_in(&c, &base, &owner.email).await;
        c.goto(&format!("{base}{page}")).await.unwrap();
        let line = wait_for_text(&c, "#schedule-count", "4 active subscribers").await;
        assert!(line.contains("settled when the send starts"), "{line}");
        c.execute(
            "document.querySelector('[name=scheduled_for]').value = arguments[0]",
            vec![json!(at)],
        )
        .await
        .unwrap();
        // The count line follows the ticks...
        click(&c, "form.schedule input[name=tags][value=news]").await;
        let line = wait_for_text(&c, "#schedule-count", "2 active subscribers").await;
        assert!(line.contains("tagged “news”"), "{line}");
        // ...and a tick the line has not counted yet is scheduled all the same.
        click(&c, "form.schedule input[name=exclude_tags][value=vip]").await;
        press(&c, "form.schedule button[type=submit]").await;
        let notice = wait_for_text(&c, "main", "Scheduled for").await;
        assert!(
            notice.contains("to active subscribers tagged “news”, except those tagged “vip”."),
            "{notice}"
        );
        wait_for_text(&c, "#schedule-count", "1 active subscriber ").await;
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "browser console: {errors:?}");
        c.close().await.unwrap();
    });
    let shown = issue(&owner, id);
    assert_eq!(shown["status"], "scheduled");
    assert_eq!(
        shown["audience"],
        json!({"tags": ["news"], "exclude_tags": ["vip"], "field": null})
    );
    app.advance_clock(Duration::from_secs(2 * 3600));
    r.assert_sent_to((&app, &owner), (id, "Scheduled for the news"), &[&r.news]);
}
