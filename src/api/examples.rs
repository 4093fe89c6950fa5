//! The examples of the OpenAPI document: one request example for every request body and one
//! for every success answer, shown by the API reference and by generated clients. Each is
//! written as the JSON a client sends or receives and parsed into its type when the document
//! is made, so an example that no longer fits its schema fails every test that reads the
//! document; `tests/it/api_contract.rs` also sends each request example and expects it to
//! be accepted.

use poem_openapi::types::{Example, ParseFromJSON};
use serde_json::{Value, json};

use super::bounces::{BounceReport, BounceResult};
use super::custom_fields::{FieldChangesBody, FieldList, FieldObject, NewFieldBody};
use super::issues::{
    AudienceBody, FieldConditionObject, IssueBody, IssueList, IssueObject, PublishResult,
    ResendResult, ResendUnopenedBody, ResumeResult, SendNowBody, SendNowResult, SendTestBody,
    SendTestResult,
};
use super::newsletter::{NewsletterEnvelope, NewsletterPatch, StatsEnvelope};
use super::reports::IssueStatsEnvelope;
use super::sequences::{
    AddReaderBody, NewSequenceBody, ReaderObject, SequenceChangesBody, SequenceList, SequenceObject,
};
use super::subscribers::{
    BulkBody, BulkResult, CreateBody, MembershipBody, SubscriberList, SubscriberObject, TagBody,
    UpdateBody,
};
use super::webhooks::{
    WebhookCreateBody, WebhookList, WebhookObject, WebhookUpdateBody, WebhookWithSecret,
};

/// `value` as `T`; an example that does not parse is a mistake in this file.
fn parsed<T: ParseFromJSON>(value: Value) -> T {
    T::parse_from_json(Some(value.clone()))
        .unwrap_or_else(|e| panic!("the example {value} does not parse: {}", e.into_message()))
}

/// `impl Example` for each type, from its JSON.
macro_rules! examples {
    ($($ty:ty => $json:expr;)*) => {
        $(impl Example for $ty {
            fn example() -> Self {
                parsed($json)
            }
        })*
    };
}

const AT: &str = "2026-11-27T09:00:00.000Z";

fn newsletter() -> Value {
    json!({
        "id": 7,
        "name": "Tide Tables",
        "tagline": "Field notes from the coast",
        "sender_name": "Robin at Tide Tables",
        "sender_email": "robin@tides.example",
        "subdomain": "tides",
        "status": "active",
        "tier": "paid",
        "subscriber_count": 1250,
        "issue_count": 12,
        "welcome_enabled": true,
        "welcome_subject": "Welcome to Tide Tables",
        "welcome_body": "Thanks for subscribing to **Tide Tables**.",
        "publish_on_send": true,
        "time_zone": "Europe/Berlin",
        "accent_color": "#0b6e4f",
        "logo_url": null,
        "reply_to": "editor@tides.example",
        "postal_address": "Tide Tables, 1 Harbour Row\nPortsmouth PO1 2AB",
        "about_markdown": "Tide Tables is written by Robin, who has walked this coast for twenty years.",
        "author_name": "Robin Marsh",
        "author_image_url": "https://tides.broadsheet.example/media/3f5a0c2e9b8d7f6a5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f.webp",
        "created_at": AT,
        "updated_at": AT,
        "urls": {
            "home": "https://tides.broadsheet.example/",
            "subscribe": "https://tides.broadsheet.example/subscribe",
            "archive": "https://tides.broadsheet.example/archive"
        },
        "sender_domain": {
            "domain": "tides.example",
            "status": "verified",
            "dkim_record": "bs1._domainkey.tides.example TXT \"v=DKIM1; k=rsa; p=MIIBIjANBgkq...\"",
            "reason": null
        },
        "relay": {
            "host": "smtp.mailservice.example",
            "port": 587,
            "tls_mode": "starttls",
            "username": "robin@tides.example",
            "password_set": true,
            "password_problem": null,
            "limits": {"per_second": 10, "per_hour": null, "per_day": 50000}
        },
        "warmup": {
            "first_day_cap": 50,
            "factor": 2.0,
            "started_on": "2026-11-25",
            "today_cap": 200
        }
    })
}

/// An issue in the list shape (`full`: with its Markdown and articles).
fn issue(status: &str, full: bool) -> Value {
    let mut issue = json!({
        "id": 42,
        "newsletter_id": 7,
        "subject": "Issue 12: Spring tides",
        "status": status,
        "scheduled_for": null,
        "sent_at": null,
        "articles_count": 1,
        "path": "issue-12-spring-tides",
        "published_at": null,
        "web_url": null,
        "last_error": null,
        "audience": {"tags": ["weekly"], "exclude_tags": []},
        "recipients": null,
        "created_at": AT,
        "updated_at": AT,
        "edited_at": null,
        "excerpt": "The spring tides came early this year.",
        "social_image_url": null,
        "visibility": "public",
        "paid_members_only": false,
        "resend_of": null,
        "resent_unopened_as": null
    });
    if full {
        issue["content_markdown"] =
            json!("# Spring tides\n\nThe spring tides came early this year.");
        issue["articles"] = json!([{
            "id": 3,
            "title": "Why the tides come early",
            "url": "https://example.com/tides",
            "position": 1,
            "summarized_article": "A short primer on spring tides."
        }]);
    }
    issue
}

/// A sent issue right after `resend_unconfirmed`: its two unconfirmed messages pending again.
fn resending() -> Value {
    let mut issue = issue("sent", false);
    issue["sent_at"] = json!(AT);
    issue["recipients"] = json!(1250);
    issue["last_error"] =
        json!("Sending again to the unconfirmed, as you asked: 2 message(s) to go.");
    issue["delivery"] = json!({
        "recipients": 1250, "sent": 1240, "unconfirmed": 0, "bounced": 6, "failed": 2,
        "pending": 2, "relay_unreachable_since": null, "next_attempt_at": null
    });
    issue
}

fn subscriber() -> Value {
    json!({
        "id": 314,
        "email": "reader@example.com",
        "name": "Robin Reader",
        "status": "active",
        "tags": ["weekly"],
        "subscribed_at": AT,
        "unsubscribed_at": null,
        "created_at": AT,
        "updated_at": AT,
        "membership": {"status": "paid", "plan": "paid", "interval": "year",
                       "until": "2027-11-27T09:00:00.000Z", "since": AT},
        "origin": {"source": "form", "referrer": "https://blog.example.com/launch",
                   "utm_source": "blog", "utm_medium": null, "utm_campaign": "launch"},
        "fields": {"first_name": "Robin"},
        "paused_until": null
    })
}

fn sequence() -> Value {
    let step = |id: i64, position: i64, subject: &str, waiting: i64, sent: i64| {
        json!({
            "id": id, "position": position, "subject": subject,
            "body_markdown": "Hello {{ name | default: \"friend\" }}.",
            "delay_amount": 1, "delay_unit": "days", "at_hour": 9, "on_weekday": null,
            "waiting": waiting, "sent": sent, "unconfirmed": 0, "failed": 0, "left": 2,
            "opened": sent / 2, "clicked": sent / 5
        })
    };
    json!({
        "id": 3,
        "name": "Onboarding",
        "status": "live",
        "trigger": "confirmed",
        "trigger_tag": null,
        "exit_tag_added": "customer",
        "exit_tag_removed": null,
        "welcome": false,
        "steps": [step(11, 1, "Where to start", 14, 120), step(12, 2, "Our weekly tide table", 9, 97)],
        "completed": 97,
        "created_at": AT,
        "updated_at": AT
    })
}

fn field() -> Value {
    json!({"id": 3, "name": "first_name", "type": "text", "options": [], "created_at": AT,
           "updated_at": AT})
}

fn webhook() -> Value {
    json!({
        "id": 5,
        "url": "https://example.com/hooks/broadsheet",
        "events": ["subscriber.created", "issue.sent"],
        "enabled": true,
        "created_at": AT
    })
}

fn with_secret() -> Value {
    let mut hook = webhook();
    hook["secret"] = json!("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/hrtMj3c6Pc=");
    hook
}

/// The example of `GET /subscribers/{id}/export` (its type is the domain's, see
/// `subscribers::ExportDocument`).
pub fn export() -> Value {
    json!({
        "exported_at": AT,
        "subscriber": subscriber(),
        "deliveries": [{
            "id": 9001,
            "issue_id": 42,
            "issue_subject": "Issue 12: Spring tides",
            "email": "reader@example.com",
            "status": "sent",
            "sent_at": AT,
            "opened_at": "2026-11-27T10:12:00.000Z",
            "clicked_at": null,
            "bounced_at": null,
            "unsubscribed_at": null,
            "last_error": null
        }],
        "deliveries_total": 1,
        "note": null,
        "events": [
            {"event": "subscriber.created", "at": AT, "issue_id": null},
            {"event": "email.sent", "at": AT, "issue_id": 42},
            {"event": "email.opened", "at": "2026-11-27T10:12:00.000Z", "issue_id": 42}
        ]
    })
}

examples! {
    NewsletterPatch => json!({
        "tagline": "Field notes from the coast",
        "time_zone": "Europe/Berlin",
        "relay": {
            "host": "smtp.mailservice.example",
            "port": 587,
            "tls_mode": "starttls",
            "username": "robin@tides.example",
            "password": "app-password-from-the-service",
            "limits": {"per_second": 10, "per_day": 50000}
        },
        "warmup": {"first_day_cap": 50, "factor": 2.0}
    });
    NewsletterEnvelope => json!({"data": newsletter()});
    StatsEnvelope => json!({"data": {
        "subscribers": {"total": 1300, "active": 1250, "unsubscribed": 40, "bounced": 10,
                        "growth_last_30_days": 85,
                        "new_by_source_last_30_days": {"form": 97, "import": 0, "api": 3,
                                                       "dashboard": 1}},
        "issues": {"total": 12, "sent_last_30_days": 4},
        "engagement": {
            "average_open_rate": 48.2,
            "average_click_rate": 9.5,
            "last_30_days": {"emails_sent": 4980, "emails_unconfirmed": 2, "opens": 2410,
                             "clicks": 470}
        },
        "top_issues": [{"id": 42, "subject": "Issue 12: Spring tides", "open_rate": 55.1,
                        "click_rate": 12.3}],
        "memberships": {"paid_members": 84, "trialing_members": 6, "comped_members": 3,
                        "monthly_recurring_revenue": 39200, "currency": "eur",
                        "new_paid_last_30_days": 9, "canceled_last_30_days": 2}
    }});
    IssueStatsEnvelope => json!({"data": {
        "issue_id": 42,
        "subject": "Issue 12: Spring tides",
        "sent_at": AT,
        "delivered": 1248,
        "opens": 602,
        "clicks": 131,
        "automatic_opens": 87,
        "open_rate": 48.2,
        "click_rate": 10.5,
        "links": [
            {"url": "https://example.com/tides", "unique_clicks": 118, "total_clicks": 164},
            {"url": "https://example.com/moon", "unique_clicks": 20, "total_clicks": 22}
        ],
        "links_clicked": 2,
        "days": [
            {"day": 1, "opens": 455, "unique_clicks": 101, "total_clicks": 140},
            {"day": 2, "opens": 98, "unique_clicks": 21, "total_clicks": 30},
            {"day": 3, "opens": 25, "unique_clicks": 5, "total_clicks": 8},
            {"day": 4, "opens": 12, "unique_clicks": 2, "total_clicks": 4},
            {"day": 5, "opens": 6, "unique_clicks": 1, "total_clicks": 2},
            {"day": 6, "opens": 4, "unique_clicks": 1, "total_clicks": 1},
            {"day": 7, "opens": 2, "unique_clicks": 0, "total_clicks": 1}
        ]
    }});
    IssueBody => json!({"issue": {
        "subject": "Issue 12: Spring tides",
        "content_markdown": "# Spring tides\n\nThe spring tides came early this year.",
        "status": "approved",
        "articles": [{"title": "Why the tides come early", "url": "https://example.com/tides",
                      "summarized_article": "A short primer on spring tides."}],
        "audience": {"tags": ["weekly"]}
    }});
    IssueObject => issue("approved", true);
    IssueList => json!({"issues": [issue("draft", false)],
                        "meta": {"page": 1, "per_page": 25, "has_more": false}});
    AudienceBody => json!({"tags": ["weekly"], "exclude_tags": ["vip"], "field": {"name": "first_name", "op": "equals", "value": "Robin"}});
    FieldConditionObject => json!({"name": "age", "op": "after", "value": 30});
    ResendUnopenedBody => json!({"subject": "In case you missed it: Spring tides", "after_hours": 48});
    SendNowBody => json!({"tags": ["weekly"], "exclude_tags": ["vip"], "field": {"name": "first_name", "op": "equals", "value": "Ben"}, "publish": false});
    SendNowResult => json!({"message": "Issue queued for sending to 1250 subscriber(s)",
                            "issue": issue("approved", false), "subscribers": 1250});
    SendTestBody => json!({"emails": ["editor@example.com"]});
    SendTestResult => json!({"message": "Test queued to editor@example.com", "issue_id": 42,
                             "subject": "[Test] Issue 12: Spring tides",
                             "emails": ["editor@example.com"]});
    ResumeResult => json!({"message": "Sending resumed: 310 message(s) to go",
                           "issue": issue("failed", false), "remaining": 310});
    ResendResult => json!({"message": "Sending again to 2 unconfirmed recipient(s)",
                           "issue": resending(), "resent": 2});
    PublishResult => json!({
        "message": "Issue published",
        "issue": issue("sent", false),
        "web_url": "https://tides.broadsheet.example/p/issue-12-spring-tides"
    });
    CreateBody => json!({"email": "reader@example.com", "name": "Robin Reader",
                         "tags": ["weekly"], "fields": {"first_name": "Robin"}});
    SubscriberObject => subscriber();
    SubscriberList => json!({"subscribers": [subscriber()],
                             "meta": {"page": 1, "per_page": 25, "has_more": true,
                                      "next_cursor": "2.314"}});
    UpdateBody => json!({"subscriber": {"name": "Robin R.", "status": "active",
                                        "fields": {"first_name": "Robin"}}});
    TagBody => json!({"tag": "vip"});
    MembershipBody => json!({"membership": {"status": "comped",
                                            "until": "2027-06-30T00:00:00Z"}});
    BulkBody => json!({"subscribers": [
        {"email": "ana@example.com", "name": "Ana", "fields": {"first_name": "Ana"}},
        {"email": "ben@example.com", "tags": ["weekly"], "fields": {"first_name": "Ben"}}
    ]});
    BulkResult => json!({"created": 1, "existing": 1, "errors": [
        {"index": 2, "email": "not-an-address", "code": "invalid_email",
         "message": "Email is invalid"}
    ]});
    WebhookCreateBody => json!({"url": "https://example.com/hooks/broadsheet",
                                "events": ["subscriber.created", "issue.sent"]});
    WebhookUpdateBody => json!({"events": ["subscriber.created"], "enabled": true});
    FieldObject => field();
    FieldList => json!({"fields": [field()]});
    NewFieldBody => json!({"field": {"name": "first_name", "type": "text"}});
    FieldChangesBody => json!({"field": {"name": "first_name"}});
    SequenceObject => sequence();
    SequenceList => json!({"sequences": [sequence()]});
    NewSequenceBody => json!({"sequence": {
        "name": "Onboarding",
        "trigger": "confirmed",
        "exit_tag_added": "customer",
        "steps": [
            {"subject": "Where to start", "body_markdown": "Hello {{ name | default: \"friend\" }}, start with [the best of the archive](https://tides.example/archive).", "delay_amount": 1, "delay_unit": "days"},
            {"subject": "Our weekly tide table", "body_markdown": "Every Friday at nine: the week's tides.", "delay_amount": 2, "delay_unit": "days", "at_hour": 9, "on_weekday": "friday"}
        ]
    }});
    SequenceChangesBody => json!({"sequence": {"status": "paused"}});
    AddReaderBody => json!({"subscriber_id": 42});
    ReaderObject => json!({
        "sequence_id": 3,
        "subscriber_id": 42,
        "reached": 0,
        "state": "active",
        "waiting_since": AT,
        "left_reason": null
    });
    WebhookObject => webhook();
    WebhookWithSecret => with_secret();
    WebhookList => json!({"webhook_subscriptions": [webhook()]});
    BounceReport => json!({"email": "reader@example.com", "reason": "550 5.1.1 user unknown"});
    BounceResult => json!({"message": "Bounce recorded"});
}
