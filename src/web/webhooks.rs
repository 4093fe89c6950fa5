//! The webhooks page of the dashboard: subscriptions with their state and failure count, each
//! one's recent deliveries (with redelivery), a form that sends a test event, and the forms
//! that create and edit a subscription (URL, events, enabled) through the same domain
//! functions and SSRF guard as the API.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::issues::problems;
use super::layout::{Section, csrf_field, errors, newsletter_page, table_wrap};
use super::newsletters::{owned, owned_post, parse_id};
use super::time_zones::shown;
use super::{Ctx, State, WebResult, render, see_other};
use crate::domain::events::webhooks::{Changes, NewSubscription, Subscription};
use crate::domain::newsletters::Newsletter;
use crate::domain::{FieldErrors, events, events::webhooks};

/// Deliveries shown per subscription.
const RECENT: i64 = 20;

fn list_url(newsletter_id: i64) -> String {
    format!("/newsletters/{newsletter_id}/webhooks")
}

/// The page of one delivery, with its payload.
fn delivery_url(newsletter_id: i64, delivery_id: i64) -> String {
    format!("/newsletters/{newsletter_id}/webhooks/deliveries/{delivery_id}")
}

/// The payload as its page shows it: the JSON indented, or the text as stored when it is not
/// JSON or was cut at [`webhooks::PAYLOAD_SHOWN`] characters.
fn pretty_payload(detail: &webhooks::DeliveryDetail) -> String {
    let whole = detail.payload_chars <= webhooks::PAYLOAD_SHOWN;
    match serde_json::from_str::<serde_json::Value>(&detail.payload) {
        Ok(value) if whole => {
            serde_json::to_string_pretty(&value).unwrap_or_else(|_| detail.payload.clone())
        }
        _ => detail.payload.clone(),
    }
}

/// `GET /newsletters/:id/webhooks/deliveries/:delivery_id`: one delivery of the log, its
/// attempts and answer, and the payload it carries (pretty-printed, at most
/// [`webhooks::PAYLOAD_SHOWN`] characters, in a box that scrolls). Another newsletter's
/// delivery is a 404.
#[handler]
pub async fn show_delivery(
    req: &Request,
    Path((id, delivery)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let (nid, did) = (n.id, parse_id(&delivery)?);
    let detail = state
        .db
        .run(move |conn| webhooks::delivery_detail(conn, nid, did))
        .await?;
    let d = &detail.log;
    let title = format!("Delivery {}", d.uid);
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
            Section::Webhooks,
            &title,
            html! {
                p { a href={ (list_url(nid)) "#webhook-" (detail.subscription_id) } { "← Webhooks" } }
                h1.url { (d.event) " delivery" }
                dl.facts #delivery {
                    dt { "Delivery id" } dd { code { (d.uid) } }
                    dt { "Subscription" } dd.url { "#" (detail.subscription_id) " " code { (detail.url) } }
                    dt { "State" } dd #delivery-state { (d.state) }
                    dt { "Attempts" } dd { (d.attempts) }
                    dt { "Response" } dd { @if let Some(code) = d.response_status { (code) } @else { "—" } }
                    @if let Some(answer) = d.response_excerpt.as_deref().or(d.last_error.as_deref()).filter(|a| !a.is_empty()) {
                        dt { "Answer" } dd { (answer) }
                    }
                    dt { "Queued" } dd { (shown(detail.created_at, &ctx.zone())) }
                    dt { "Last change" } dd { (shown(d.updated_at, &ctx.zone())) }
                }
                @if d.state != webhooks::DeliveryState::Pending {
                    form.inline method="post" action={ (delivery_url(nid, d.id)) "/redeliver" } {
                        (csrf_field(&ctx))
                        button.secondary type="submit" { "Redeliver" }
                    }
                }
                h2 { "Payload" }
                p.muted { "The JSON body of each attempt, signed with the subscription's secret." }
                div.payload tabindex="0" role="region" aria-label="Payload" {
                    pre #payload { (pretty_payload(&detail)) }
                }
                @if detail.payload_chars > webhooks::PAYLOAD_SHOWN {
                    p.muted #payload-cut { "The first " (webhooks::PAYLOAD_SHOWN) " of " (detail.payload_chars) " characters." }
                }
            },
        ),
    )
}

#[handler]
pub async fn index(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let nid = n.id;
    let subscriptions = state
        .db
        .run(move |conn| {
            webhooks::list(conn, nid)?
                .into_iter()
                .map(|s| {
                    let log = webhooks::recent_deliveries(conn, nid, s.id, RECENT)?;
                    Ok((s, log))
                })
                .collect::<Result<Vec<_>, crate::domain::DomainError>>()
        })
        .await?;
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
            Section::Webhooks,
            "Webhooks",
            html! {
                h1 { "Webhooks" }
                p.muted { "Each delivery is signed with the subscription's secret; see the docs for checking signatures. Subscriptions can also be managed with the API (" code { "/api/v1/webhook_subscriptions" } ")." }
                p { a.button href={ (list_url(nid)) "/new" } { "New subscription" } }
                @if subscriptions.is_empty() {
                    p { "No webhook subscriptions yet." }
                } @else {
                    section.panel {
                        h2 { "Send a test event" }
                        form.row method="post" action={ "/newsletters/" (nid) "/webhooks/test" } {
                            (csrf_field(&ctx))
                            label { "Subscription"
                                select name="subscription_id" {
                                    @for (s, _) in &subscriptions { option value=(s.id) { "#" (s.id) " " (s.url) } }
                                }
                            }
                            label { "Event"
                                select name="event" {
                                    @for kind in events::KINDS { option value=(kind) { (kind) } }
                                }
                            }
                            button type="submit" { "Send test event" }
                        }
                    }
                    @for (s, log) in &subscriptions {
                        section.panel id={ "webhook-" (s.id) } {
                            h2.url { "#" (s.id) " " code { (s.url) } }
                            p {
                                @if s.enabled { strong.ok { "Enabled" } } @else { strong.bad { "Disabled" } @if let Some(reason) = &s.disabled_reason { " — " (reason) } }
                                " · Failed deliveries in a row: " (s.consecutive_failures)
                                " · Events: " (s.events.join(", "))
                                " · " a href={ (list_url(nid)) "/" (s.id) "/edit" } { "Edit" }
                            }
                            @if log.is_empty() {
                                p.muted { "No deliveries yet." }
                            } @else {
                                (table_wrap("Deliveries", html! { table {
                                    thead { tr { th { "Event" } th { "State" } th { "Attempts" } th { "Response" } th.time { "Time" } th { "Answer" } th { span.visually-hidden { "Actions" } } } }
                                    tbody {
                                        @for d in log {
                                            tr {
                                                td { a href=(delivery_url(nid, d.id)) { (d.event) } br; small.muted { (d.uid) } }
                                                td { (d.state) }
                                                td { (d.attempts) }
                                                td { @if let Some(code) = d.response_status { (code) } @else { "—" } }
                                                td.time { (shown(d.updated_at, &ctx.zone())) }
                                                td { small { (d.response_excerpt.as_deref().or(d.last_error.as_deref()).unwrap_or("")) } }
                                                td {
                                                    a href=(delivery_url(nid, d.id)) { "Payload" }
                                                    @if d.state != webhooks::DeliveryState::Pending {
                                                        " · "
                                                        form.inline method="post" action={ "/newsletters/" (nid) "/webhooks/deliveries/" (d.id) "/redeliver" } {
                                                            (csrf_field(&ctx))
                                                            button.link type="submit" { "Redeliver" }
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                } }))
                            }
                        }
                    }
                }
            },
        ),
    )
}

#[handler]
pub async fn send_test(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let (nid, subscription, kind) = (
        n.id,
        parse_id(form.get("subscription_id"))?,
        form.get("event").to_string(),
    );
    let message = format!("A test {kind} event is on its way to subscription #{subscription}.");
    state
        .db
        .run(move |conn| webhooks::send_test_event(conn, nid, subscription, &kind))
        .await?;
    ctx.notice_next(req, &message);
    see_other(&list_url(nid))
}

#[handler]
pub async fn redeliver(
    req: &Request,
    Path((id, delivery)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, ctx, n) = owned_post(req, state, &id, body).await?;
    let (nid, delivery) = (n.id, parse_id(&delivery)?);
    state
        .db
        .run(move |conn| webhooks::redeliver(conn, nid, delivery))
        .await?;
    ctx.notice_next(req, "The delivery is queued again.");
    see_other(&list_url(nid))
}

/// What the subscription form holds: what was typed, to show it again with the messages.
struct Draft {
    url: String,
    events: Vec<String>,
    enabled: bool,
}

/// The form that creates a subscription (`existing` is `None`) or edits one.
fn form_page(
    ctx: &Ctx,
    n: &Newsletter,
    existing: Option<&Subscription>,
    draft: &Draft,
    problems: &FieldErrors,
) -> Markup {
    let list = list_url(n.id);
    let (title, action) = match existing {
        Some(s) => (
            format!("Edit subscription #{}", s.id),
            format!("{list}/{}", s.id),
        ),
        None => ("New subscription".to_string(), list.clone()),
    };
    newsletter_page(
        ctx,
        n,
        Section::Webhooks,
        &title,
        html! {
            p { a href=(list) { "← Webhooks" } }
            h1 { (title) }
            (errors(problems))
            form.stack method="post" action=(action) {
                (csrf_field(ctx))
                @if existing.is_some() { input type="hidden" name="_method" value="patch"; }
                label {
                    "Receiver URL (http or https, on a public address)"
                    input type="url" name="url" value=(draft.url) required placeholder="https://example.com/hooks/broadsheet";
                }
                fieldset {
                    legend { "Events" }
                    @for kind in events::KINDS {
                        label.check {
                            input type="checkbox" name="events[]" value=(kind) checked[draft.events.iter().any(|e| e == kind)];
                            (kind)
                        }
                    }
                }
                @if let Some(s) = existing {
                    label.check {
                        input type="checkbox" name="enabled" value="1" checked[draft.enabled];
                        "Enabled"
                        @if !s.enabled { " (enabling it again clears its count of failed deliveries)" }
                    }
                }
                div.buttons {
                    button type="submit" { @if existing.is_some() { "Save" } @else { "Create subscription" } }
                    a href=(list) { "Cancel" }
                }
            }
        },
    )
}

/// The form's fields as typed.
fn draft_of(form: &crate::http::form::FormData) -> Draft {
    Draft {
        url: form.get("url").to_string(),
        events: form.all("events[]"),
        enabled: form.get("enabled") == "1",
    }
}

/// `GET /newsletters/:id/webhooks/new`.
#[handler]
pub async fn new_form(
    req: &Request,
    Path(id): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let draft = Draft {
        url: String::new(),
        events: Vec::new(),
        enabled: true,
    };
    render(
        StatusCode::OK,
        form_page(&ctx, &n, None, &draft, &FieldErrors::new()),
    )
}

/// `POST /newsletters/:id/webhooks`: creates the subscription and shows its signing secret,
/// the only time it is shown; bad input shows the form again with the reasons (422).
#[handler]
pub async fn create(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let draft = draft_of(&form);
    let input = NewSubscription {
        url: draft.url.clone(),
        events: draft.events.clone(),
    };
    let (nid, policy) = (
        n.id,
        crate::webhooks::url_policy(state.allow_private_webhooks, state.dns.clone()),
    );
    match state
        .db
        .run(move |conn| webhooks::create(conn, nid, &input, &policy))
        .await
    {
        Ok((subscription, secret)) => render(
            StatusCode::OK,
            newsletter_page(
                &ctx,
                &n,
                Section::Webhooks,
                "New subscription",
                html! {
                    h1 { "Subscription #" (subscription.id) " created" }
                    p { strong { "Copy the signing secret now: " } "this is the only time it is shown. Receivers check each delivery's signature with it." }
                    code.key id="webhook-secret" { (secret) }
                    p.muted.url { "URL: " (subscription.url) " · Events: " (subscription.events.join(", ")) }
                    p { a.button href=(list_url(nid)) { "Done" } }
                },
            ),
        ),
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            form_page(&ctx, &n, None, &draft, &problems(e)?),
        ),
    }
}

/// The subscription `raw_id` of newsletter `n`; another newsletter's is a 404.
async fn subscription_of(
    state: &State,
    n: &Newsletter,
    raw_id: &str,
) -> Result<Subscription, super::WebError> {
    let (nid, id) = (n.id, parse_id(raw_id)?);
    Ok(state
        .db
        .run(move |conn| webhooks::get(conn, nid, id))
        .await?)
}

/// `GET /newsletters/:id/webhooks/:subscription_id/edit`.
#[handler]
pub async fn edit_form(
    req: &Request,
    Path((id, subscription)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let s = subscription_of(state, &n, &subscription).await?;
    let draft = Draft {
        url: s.url.clone(),
        events: s.events.clone(),
        enabled: s.enabled,
    };
    render(
        StatusCode::OK,
        form_page(&ctx, &n, Some(&s), &draft, &FieldErrors::new()),
    )
}

/// `POST` (or `PATCH`) `/newsletters/:id/webhooks/:subscription_id`: saves URL, events and
/// enabled; bad input shows the form again with the reasons (422).
#[handler]
pub async fn update(
    req: &Request,
    Path((id, subscription)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let current = subscription_of(state, &n, &subscription).await?;
    let (nid, sid) = (n.id, current.id);
    let draft = draft_of(&form);
    let changes = Changes {
        url: Some(draft.url.clone()),
        events: Some(draft.events.clone()),
        enabled: Some(draft.enabled),
    };
    let policy = crate::webhooks::url_policy(state.allow_private_webhooks, state.dns.clone());
    match state
        .db
        .run(move |conn| webhooks::update(conn, nid, sid, &changes, &policy))
        .await
    {
        Ok(saved) => {
            ctx.notice_next(req, &format!("Subscription #{} is saved.", saved.id));
            see_other(&list_url(nid))
        }
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            form_page(&ctx, &n, Some(&current), &draft, &problems(e)?),
        ),
    }
}
