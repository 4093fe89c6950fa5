//! Webhook subscriptions: list, create, update (also re-enable), rotate the secret, delete.

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, Tags};

use super::common::parse_id;
use super::fields::{Event, Field, Id, Items, WebhookUrl};
use super::statuses::{BODY, BY_ID, GUARD, Refusal, WRITES};
use super::{ApiKeyAuth, Principal, State};
use crate::domain::events::webhooks::{self, Changes, NewSubscription, Subscription};

#[derive(Tags)]
enum ApiTags {
    /// Signed HTTP callbacks when subscribers, issues and e-mails change.
    WebhookSubscriptions,
}

/// A subscription, without its secret.
#[derive(Debug, Object)]
#[oai(example)]
pub struct WebhookObject {
    pub id: i64,
    pub url: String,
    /// Event names, e.g. `subscriber.created`.
    pub events: Vec<String>,
    /// False after 10 failed deliveries in a row or a 410 answer; PATCH `enabled: true` to resume.
    pub enabled: bool,
    pub created_at: String,
}

/// A subscription with its signing secret: only in the answers of create and rotate_secret.
#[derive(Debug, Object)]
#[oai(example)]
pub struct WebhookWithSecret {
    pub id: i64,
    pub url: String,
    pub events: Vec<String>,
    pub enabled: bool,
    /// Keys `X-Webhook-Signature` and `webhook-signature`; shown only now.
    pub secret: String,
    pub created_at: String,
}

impl From<Subscription> for WebhookObject {
    fn from(s: Subscription) -> Self {
        WebhookObject {
            id: s.id,
            url: s.url,
            events: s.events,
            enabled: s.enabled,
            created_at: s.created_at.to_string(),
        }
    }
}

fn with_secret((s, secret): (Subscription, String)) -> WebhookWithSecret {
    WebhookWithSecret {
        id: s.id,
        url: s.url,
        events: s.events,
        enabled: s.enabled,
        secret,
        created_at: s.created_at.to_string(),
    }
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct WebhookList {
    pub webhook_subscriptions: Vec<WebhookObject>,
}

/// A new subscription.
#[derive(Debug, Object)]
#[oai(example)]
pub struct WebhookCreateBody {
    /// Absolute http(s) URL on a public address.
    pub url: Field<WebhookUrl>,
    /// At least one event name; a name given twice counts once.
    pub events: Items<Field<Event>, 1, 0>,
}

/// Changes; absent fields stay as they are.
#[derive(Debug, Object)]
#[oai(example)]
pub struct WebhookUpdateBody {
    #[oai(nullable)]
    pub url: Option<Field<WebhookUrl>>,
    /// At least one event name; a name given twice counts once.
    #[oai(nullable)]
    pub events: Option<Items<Field<Event>, 1, 0>>,
    /// `true` re-enables a disabled subscription and clears its failure count.
    #[oai(nullable)]
    pub enabled: Option<bool>,
}

#[derive(ApiResponse)]
pub enum ListResponse {
    #[oai(status = 200)]
    Ok(Json<WebhookList>),
}

#[derive(ApiResponse)]
pub enum CreatedResponse {
    #[oai(status = 201)]
    Created(Json<WebhookWithSecret>),
}

#[derive(ApiResponse)]
pub enum SecretResponse {
    #[oai(status = 200)]
    Ok(Json<WebhookWithSecret>),
}

#[derive(ApiResponse)]
pub enum UpdatedResponse {
    #[oai(status = 200)]
    Ok(Json<WebhookObject>),
}

#[derive(ApiResponse)]
pub enum DeletedResponse {
    #[oai(status = 204)]
    NoContent,
}

pub struct WebhooksApi;

/// The SSRF guard as the domain's URL policy (`crate::webhooks::url_policy`).
fn url_policy(state: &State) -> impl Fn(&str) -> Result<(), String> + Send + 'static {
    crate::webhooks::url_policy(state.allow_private_webhooks, state.dns.clone())
}

rate_limited_api! {
    "ApiTags::WebhookSubscriptions",
impl WebhooksApi {
    /// The newsletter's webhook subscriptions.
    ///
    /// Every subscription with its URL, events and whether it is enabled; secrets are never listed.
    #[oai(
        path = "/webhook_subscriptions",
        method = "get",
        operation_id = "listWebhookSubscriptions"
    )]
    async fn list(
        &self,
        _auth: ApiKeyAuth,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<ListResponse, Refusal<{ GUARD }>> {
        let nid = p.newsletter_id;
        let rows = state.db.run(move |conn| webhooks::list(conn, nid)).await?;
        Ok(ListResponse::Ok(Json(WebhookList {
            webhook_subscriptions: rows.into_iter().map(Into::into).collect(),
        })))
    }

    /// Subscribes a URL to events.
    ///
    /// The URL must be absolute http(s) on a public address, with at least one known event name.
    /// The answer carries the signing secret, shown only this once. A newsletter has at most 16
    /// subscriptions: past that, 422 `limit_reached`.
    #[oai(
        path = "/webhook_subscriptions",
        method = "post",
        operation_id = "createWebhookSubscription"
    )]
    async fn create(
        &self,
        _auth: ApiKeyAuth,
        body: Json<WebhookCreateBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<CreatedResponse, Refusal<{ GUARD | BODY | WRITES }>> {
        let nid = p.newsletter_id;
        let input = NewSubscription {
            url: body.0.url.into(),
            events: body.0.events.into_iter().map(Into::into).collect(),
        };
        let policy = url_policy(state);
        let created = state
            .db
            .run(move |conn| webhooks::create(conn, nid, &input, &policy))
            .await?;
        Ok(CreatedResponse::Created(Json(with_secret(created))))
    }

    /// Changes a webhook subscription.
    ///
    /// Changes the URL or the events, or re-enables a disabled subscription with `enabled: true`
    /// (which also clears its failure count); absent fields stay as they are.
    #[oai(
        path = "/webhook_subscriptions/:id",
        method = "patch",
        operation_id = "updateWebhookSubscription"
    )]
    async fn update(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<WebhookUpdateBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<UpdatedResponse, Refusal<{ GUARD | BODY | BY_ID | WRITES }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let changes = Changes {
            url: body.0.url.map(Into::into),
            events: body
                .0
                .events
                .map(|e| e.into_iter().map(Into::into).collect()),
            enabled: body.0.enabled,
        };
        let policy = url_policy(state);
        let updated = state
            .db
            .run(move |conn| webhooks::update(conn, nid, id, &changes, &policy))
            .await?;
        Ok(UpdatedResponse::Ok(Json(updated.into())))
    }

    /// Issues a new signing secret.
    ///
    /// The answer carries the new secret, shown only this once; the old one stops verifying at
    /// once.
    #[oai(
        path = "/webhook_subscriptions/:id/rotate_secret",
        method = "post",
        operation_id = "rotateWebhookSecret"
    )]
    async fn rotate_secret(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SecretResponse, Refusal<{ GUARD | BY_ID | WRITES }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let rotated = state
            .db
            .run(move |conn| webhooks::rotate_secret(conn, nid, id))
            .await?;
        Ok(SecretResponse::Ok(Json(with_secret(rotated))))
    }

    /// Deletes a webhook subscription.
    ///
    /// Removes the subscription and its delivery log.
    #[oai(
        path = "/webhook_subscriptions/:id",
        method = "delete",
        operation_id = "deleteWebhookSubscription"
    )]
    async fn delete(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<DeletedResponse, Refusal<{ GUARD | BY_ID | WRITES }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        state
            .db
            .run(move |conn| webhooks::delete(conn, nid, id))
            .await?;
        Ok(DeletedResponse::NoContent)
    }
}
}
