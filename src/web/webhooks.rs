//! The webhooks page of the dashboard: subscriptions with their state and failure count, each
//! one's recent deliveries (with redelivery), and a form that sends a test event.
//! Subscriptions themselves are created over the API.

use maud::html;
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::layout::{Section, csrf_field, newsletter_page};
use super::newsletters::{owned, owned_post, parse_id};
use super::time_zones::shown;
use super::{Ctx, State, WebResult, render, see_other};
use crate::domain::{events, webhooks};

/// Deliveries shown per subscription.
const RECENT: i64 = 20;

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
                p.muted { "Subscriptions are created with the API (" code { "POST /api/v1/webhook_subscriptions" } "). Each delivery is signed; see the docs for checking signatures." }
                @if subscriptions.is_empty() {
                    p { "No webhook subscriptions yet." }
                } @else {
                    section.panel {
                        h2 { "Send a test event" }
                        form.inline method="post" action={ "/newsletters/" (nid) "/webhooks/test" } {
                            (csrf_field(&ctx))
                            label { "Subscription "
                                select name="subscription_id" {
                                    @for (s, _) in &subscriptions { option value=(s.id) { "#" (s.id) " " (s.url) } }
                                }
                            }
                            label { " Event "
                                select name="event" {
                                    @for kind in events::KINDS { option value=(kind) { (kind) } }
                                }
                            }
                            " "
                            button type="submit" { "Send test event" }
                        }
                    }
                    @for (s, log) in &subscriptions {
                        section.panel id={ "webhook-" (s.id) } {
                            h2 { "#" (s.id) " " code { (s.url) } }
                            p {
                                @if s.enabled { strong.ok { "Enabled" } } @else { strong.bad { "Disabled" } @if let Some(reason) = &s.disabled_reason { " — " (reason) } }
                                " · Failed deliveries in a row: " (s.consecutive_failures)
                                " · Events: " (s.events.join(", "))
                            }
                            @if log.is_empty() {
                                p.muted { "No deliveries yet." }
                            } @else {
                                table {
                                    thead { tr { th { "Event" } th { "State" } th { "Attempts" } th { "Response" } th { "Time" } th { "Answer" } th {} } }
                                    tbody {
                                        @for d in log {
                                            tr {
                                                td { (d.event) br; small.muted { (d.uid) } }
                                                td { (d.state) }
                                                td { (d.attempts) }
                                                td { @if let Some(code) = d.response_status { (code) } @else { "—" } }
                                                td { (shown(d.updated_at, &ctx.zone())) }
                                                td { small { (d.response_excerpt.as_deref().or(d.last_error.as_deref()).unwrap_or("")) } }
                                                td {
                                                    @if d.state != webhooks::DeliveryState::Pending {
                                                        form.inline method="post" action={ "/newsletters/" (nid) "/webhooks/deliveries/" (d.id) "/redeliver" } {
                                                            (csrf_field(&ctx))
                                                            button.link type="submit" { "Redeliver" }
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
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
    see_other(&format!("/newsletters/{nid}/webhooks"))
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
    see_other(&format!("/newsletters/{nid}/webhooks"))
}
