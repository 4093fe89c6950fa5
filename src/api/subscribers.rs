//! Subscribers: list, show, create, update, delete, tags, bulk create, and one subscriber's
//! data as a JSON document (`export`, for a data request).

use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::MaybeUndefined;
use poem_openapi::types::{ToJSON, Type};
use poem_openapi::{ApiResponse, Object, Tags};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;

use super::common::parse_id;
use super::fields::{
    AnyOf, DateTime, Email, Field, Id, Items, ListCursor, MembershipStatus, OneRequired,
    PageNumber, PerPage, Required, SubscriberName, SubscriberStatus, SubscriberStatusFilter, Tag,
};
use super::statuses::{BODY, BY_ID, GUARD, RULE, Refusal, WRITES};
use super::{ApiKeyAuth, Principal, State};
use crate::domain::DomainError;
use crate::domain::subscribers::memberships::{self, Membership};
use crate::domain::subscribers::origin::{Origin, Source};
use crate::domain::subscribers::personal_data;
use crate::domain::subscribers::{self, Changes, Filter, GivenFields, NewSubscriber, Subscriber};
use crate::domain::values::pagination::{Cursor, Page};

#[derive(Tags)]
enum ApiTags {
    /// The people an issue goes to.
    Subscribers,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct SubscriberObject {
    pub id: i64,
    pub email: String,
    #[oai(nullable)]
    pub name: Option<String>,
    /// `active`, `unsubscribed` or `bounced`.
    pub status: String,
    pub tags: Vec<String>,
    pub subscribed_at: String,
    #[oai(nullable)]
    pub unsubscribed_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Free, or paid access and how (docs/memberships.md).
    pub membership: MembershipObject,
    /// How the subscriber was added and where from (docs/growth.md).
    pub origin: OriginObject,
    /// Values of the newsletter's custom fields by name (a field without a value is left
    /// out): strings, numbers and `true`/`false` as the fields' types say.
    pub fields: BTreeMap<String, Value>,
    /// Until when the reader paused their mail from their preferences (sends leave them out
    /// until then); null when no pause runs.
    #[oai(nullable)]
    pub paused_until: Option<String>,
}

/// Where a subscriber came from.
#[derive(Debug, Object)]
pub struct OriginObject {
    /// `form` (a signup form or the site's subscribe page, once confirmed), `import`, `api` or
    /// `dashboard`; null for subscribers added before sources were recorded.
    #[oai(nullable)]
    pub source: Option<String>,
    /// The page the reader subscribed from, when their browser told.
    #[oai(nullable)]
    pub referrer: Option<String>,
    /// The `utm_source` of the address the reader came by.
    #[oai(nullable)]
    pub utm_source: Option<String>,
    #[oai(nullable)]
    pub utm_medium: Option<String>,
    #[oai(nullable)]
    pub utm_campaign: Option<String>,
}

impl From<Origin> for OriginObject {
    fn from(o: Origin) -> Self {
        OriginObject {
            source: o.source.map(|s| s.as_str().to_string()),
            referrer: o.referrer,
            utm_source: o.utm.source,
            utm_medium: o.utm.medium,
            utm_campaign: o.utm.campaign,
        }
    }
}

/// A subscriber's membership of the newsletter.
#[derive(Debug, Object)]
pub struct MembershipObject {
    /// `free`, `paid`, `trialing`, `past_due` (a payment failed; access lasts until the
    /// period ends), `canceled` (paid access until the period ends) or `comped` (access given
    /// free by the owner). Once paid access ends it is `free`.
    pub status: String,
    /// `paid` while the member has paid access, else `free`.
    pub plan: String,
    /// `month` or `year` for a member who pays; null otherwise.
    #[oai(nullable)]
    pub interval: Option<String>,
    /// When paid access ends (or ended); null: not by a date.
    #[oai(nullable)]
    pub until: Option<String>,
    /// Since when the member has (or last had) paid access; null for one who never had it.
    #[oai(nullable)]
    pub since: Option<String>,
}

impl From<Membership> for MembershipObject {
    fn from(m: Membership) -> Self {
        MembershipObject {
            status: m.status.as_str().to_string(),
            plan: m.plan.to_string(),
            interval: m.interval.map(|i| i.as_str().to_string()),
            until: m.until.map(|at| at.to_string()),
            since: m.since.map(|at| at.to_string()),
        }
    }
}

/// What a script or the owner sets: `paid` or `comped` until a date (or for good), or `free`.
#[derive(Debug, Object)]
pub struct MembershipFields {
    /// `paid`, `comped` or `free`.
    pub status: Field<MembershipStatus>,
    /// When paid access ends, an RFC 3339 date-time in the future; null or absent: not by a
    /// date. Must be null for `free`.
    #[oai(nullable)]
    pub until: Option<Field<DateTime>>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct MembershipBody {
    pub membership: MembershipFields,
}

impl From<Subscriber> for SubscriberObject {
    fn from(s: Subscriber) -> Self {
        SubscriberObject {
            id: s.id,
            email: s.email,
            name: s.name,
            status: s.status.as_str().to_string(),
            tags: s.tags,
            subscribed_at: s.subscribed_at.to_string(),
            unsubscribed_at: s.unsubscribed_at.map(|at| at.to_string()),
            created_at: s.created_at.to_string(),
            updated_at: s.updated_at.to_string(),
            membership: s.membership.into(),
            origin: s.origin.into(),
            fields: s.fields,
            paused_until: s.paused_until.map(|at| at.to_string()),
        }
    }
}

/// A new subscriber.
#[derive(Debug, Object)]
pub struct SubscriberFields {
    /// Trimmed and lowercased. Missing is 422 `invalid_email`.
    pub email: Required<Field<Email>>,
    #[oai(nullable)]
    pub name: Option<Field<SubscriberName>>,
    /// Tags of 1-50 characters; a tag given twice counts once; at most 100 different ones.
    #[oai(nullable)]
    pub tags: Option<Vec<Field<Tag>>>,
    /// Values of the newsletter's custom fields by name, as in a create's top-level `fields`
    /// (which a wrapper's `fields` replaces). Set only on a subscriber this request adds.
    #[oai(nullable)]
    pub fields: Option<BTreeMap<String, Value>>,
}

/// `{email, name?, tags?}`, or the same inside `{"subscriber": {...}}`; `send_welcome` beside
/// either.
#[derive(Debug, Object)]
#[oai(example)]
pub struct CreateBody {
    /// Required unless `subscriber` is given; trimmed and lowercased. Missing is 422
    /// `invalid_email`.
    pub email: MaybeUndefined<Field<Email>>,
    #[oai(nullable)]
    pub name: Option<Field<SubscriberName>>,
    /// Tags of 1-50 characters; a tag given twice counts once; at most 100 different ones.
    #[oai(nullable)]
    pub tags: Option<Vec<Field<Tag>>>,
    /// The same fields, wrapped: then the subscriber is the wrapper's, and top-level fields
    /// beside it are checked but not used. `null` is 422.
    pub subscriber: MaybeUndefined<SubscriberFields>,
    /// `true` mails the newsletter's welcome e-mail to a subscriber this request adds (not
    /// to one already present). Default `false`: subscribers added through the API get no mail.
    #[oai(nullable)]
    pub send_welcome: Option<bool>,
    /// Values of the newsletter's custom fields (`GET /fields`) by name, in either form of
    /// the request: a string for `text`, `date` (`YYYY-MM-DD`) and `choice` (one of its
    /// options), a number for `number`, `true`/`false` for `boolean`. A name that is no field,
    /// or a value its type cannot hold, is 422 and adds nothing. Not set on an address
    /// already present.
    #[oai(nullable)]
    pub fields: Option<BTreeMap<String, Value>>,
}

/// A create names the address at the top or inside the wrapper.
pub struct EmailOrWrapper;

impl AnyOf for EmailOrWrapper {
    const FIELDS: &'static [&'static str] = &["email", "subscriber"];
}

impl From<SubscriberFields> for GivenFields {
    fn from(f: SubscriberFields) -> Self {
        GivenFields {
            // `null` is an address given as nothing: refused, not taken from the other form.
            email: match f.email.0 {
                MaybeUndefined::Value(email) => Some(email.into()),
                MaybeUndefined::Null => Some(String::new()),
                MaybeUndefined::Undefined => None,
            },
            name: f.name.map(String::from),
            tags: f
                .tags
                .map(|tags| tags.into_iter().map(String::from).collect()),
        }
    }
}

impl From<SubscriberFields> for NewSubscriber {
    fn from(f: SubscriberFields) -> Self {
        let given = GivenFields::from(f);
        NewSubscriber {
            email: given.email.unwrap_or_default(),
            name: given.name,
            tags: given.tags.unwrap_or_default(),
            subscribed_at: None,
        }
    }
}

#[derive(Debug, Object)]
pub struct UpdateFields {
    /// `active` or `unsubscribed`; null (or absent) leaves the status as it is.
    #[oai(nullable)]
    pub status: Option<Field<SubscriberStatus>>,
    /// null (or `""`) clears the name.
    #[oai(nullable)]
    pub name: MaybeUndefined<Field<SubscriberName>>,
    /// Custom field values to set, by name, as on create; `null` removes a value. Fields not
    /// named keep theirs.
    #[oai(nullable)]
    pub fields: Option<BTreeMap<String, Value>>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct UpdateBody {
    pub subscriber: UpdateFields,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct TagBody {
    pub tag: Field<Tag>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct BulkBody {
    /// At most 1000 entries; more is refused whole.
    pub subscribers: Items<SubscriberFields, 0, { subscribers::BULK_LIMIT }>,
}

#[derive(Debug, Object)]
pub struct BulkErrorObject {
    /// Position of the entry in the request, from 0.
    pub index: u64,
    pub email: String,
    pub code: String,
    pub message: String,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct BulkResult {
    pub created: u64,
    /// Already present, or repeated within the request.
    pub existing: u64,
    pub errors: Vec<BulkErrorObject>,
}

/// `meta` of the subscriber list: the common fields and where the next page starts.
#[derive(Debug, Object)]
pub struct SubscriberListMeta {
    /// The page's number: the `page` asked for, or the one the cursor leads to.
    pub page: u32,
    pub per_page: u32,
    /// Whether a next page exists.
    pub has_more: bool,
    /// Pass as `cursor` for the next page: it continues after this page's
    /// last subscriber, so rows added or deleted meanwhile neither repeat nor skip any.
    /// Null on the last page. Opaque.
    #[oai(nullable)]
    pub next_cursor: Option<String>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct SubscriberList {
    pub subscribers: Vec<SubscriberObject>,
    pub meta: SubscriberListMeta,
}

#[derive(ApiResponse)]
pub enum ListResponse {
    #[oai(status = 200)]
    Ok(Json<SubscriberList>),
}

#[derive(ApiResponse)]
pub enum SubscriberResponse {
    #[oai(status = 200)]
    Ok(Json<SubscriberObject>),
}

#[derive(ApiResponse)]
pub enum CreateResponse {
    /// A new subscriber.
    #[oai(status = 201)]
    Created(Json<SubscriberObject>),
    /// The address was already subscribed: the existing record, unchanged.
    #[oai(status = 200)]
    Existing(Json<SubscriberObject>),
}

#[derive(ApiResponse)]
pub enum DeletedResponse {
    #[oai(status = 204)]
    NoContent,
}

#[derive(ApiResponse)]
pub enum ExportResponse {
    /// The subscriber's data (`domain::subscribers::personal_data::SubscriberExport`).
    #[oai(status = 200)]
    Ok(Json<ExportDocument>),
}

/// One subscriber's data as `domain::subscribers::personal_data` serialises it: a JSON object whose
/// shape the document shows by its example (the export is the domain's, not an API type).
pub struct ExportDocument(serde_json::Value);

impl Type for ExportDocument {
    const IS_REQUIRED: bool = true;
    type RawValueType = serde_json::Value;
    type RawElementValueType = serde_json::Value;

    fn name() -> Cow<'static, str> {
        "object".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            example: Some(super::examples::export()),
            ..MetaSchema::new("object")
        }))
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        Some(&self.0)
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        Box::new(std::iter::once(&self.0))
    }
}

impl ToJSON for ExportDocument {
    fn to_json(&self) -> Option<serde_json::Value> {
        Some(self.0.clone())
    }
}

#[derive(ApiResponse)]
pub enum BulkResponse {
    #[oai(status = 200)]
    Ok(Json<BulkResult>),
}

pub struct SubscribersApi;

rate_limited_api! {
    "ApiTags::Subscribers",
impl SubscribersApi {
    /// Subscribers, newest first.
    ///
    /// One page of subscribers, optionally of one status or tag. Follow `meta.next_cursor` (as
    /// `cursor`) to walk a list that changes meanwhile: a cursor says where its page starts, so
    /// `page` beside it is checked but does not move it; a cursor the list did not give is 422.
    #[oai(
        path = "/subscribers",
        method = "get",
        operation_id = "listSubscribers"
    )]
    #[allow(clippy::too_many_arguments)]
    async fn list(
        &self,
        _auth: ApiKeyAuth,
        /// Page number, from 1.
        page: Query<Option<Field<PageNumber>>>,
        /// Items per page (default 25, at most 100: a larger number counts as 100).
        per_page: Query<Option<Field<PerPage>>>,
        /// Only subscribers of this status: active, unsubscribed or bounced (empty: all).
        status: Query<Option<Field<SubscriberStatusFilter>>>,
        /// Only subscribers with this tag.
        tag: Query<Option<String>>,
        /// `meta.next_cursor` of the previous page: the next rows after it, however the list
        /// changed meanwhile (a `page` beside it does not move it).
        cursor: Query<Option<Field<ListCursor>>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<ListResponse, Refusal<{ GUARD | RULE }>> {
        let cursor = Cursor::from_query(cursor.0.as_deref())?;
        let page = Page::parse(page.0.as_deref(), per_page.0.as_deref())?;
        let (nid, filter) = (
            p.newsletter_id,
            Filter {
                status: status.0.map(String::from),
                tag: tag.0,
                search: None,
            },
        );
        let listed = state
            .db
            .run(move |conn| subscribers::list(conn, nid, page, cursor, &filter))
            .await?;
        Ok(ListResponse::Ok(Json(SubscriberList {
            subscribers: listed.rows.into_iter().map(Into::into).collect(),
            meta: SubscriberListMeta {
                page: listed.page,
                per_page: page.per_page,
                has_more: listed.has_more,
                next_cursor: listed.next_cursor.map(|c| c.encode()),
            },
        })))
    }

    /// One subscriber.
    ///
    /// The subscriber with its tags; another newsletter's subscriber is 404.
    #[oai(
        path = "/subscribers/:id",
        method = "get",
        operation_id = "getSubscriber"
    )]
    async fn show(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SubscriberResponse, Refusal<{ GUARD | BY_ID }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let s = state
            .db
            .run(move |conn| subscribers::get(conn, nid, id))
            .await?;
        Ok(SubscriberResponse::Ok(Json(s.into())))
    }

    /// Adds a subscriber.
    ///
    /// Accepts `{email, name?, tags?}` or the same inside `{"subscriber": {...}}`. An address
    /// already present answers 200 with the existing record, unchanged. No mail is sent unless
    /// `send_welcome` is true.
    #[oai(
        path = "/subscribers",
        method = "post",
        operation_id = "createSubscriber"
    )]
    async fn create(
        &self,
        _auth: ApiKeyAuth,
        body: Json<OneRequired<CreateBody, EmailOrWrapper>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<CreateResponse, Refusal<{ GUARD | BODY | WRITES }>> {
        let Json(OneRequired(body, ..)) = body;
        let send_welcome = body.send_welcome.unwrap_or(false);
        let mut values = body.fields.unwrap_or_default();
        let top = SubscriberFields {
            email: Required(body.email),
            name: body.name,
            tags: body.tags,
            fields: None,
        };
        let input = match body.subscriber {
            MaybeUndefined::Undefined => NewSubscriber::from(top),
            MaybeUndefined::Null => {
                return Err(DomainError::invalid(
                    "subscriber",
                    "must be an object (or left out, with the fields at the top level)",
                )
                .into());
            }
            MaybeUndefined::Value(mut inner) => {
                if let Some(wrapped) = inner.fields.take() {
                    values = wrapped;
                }
                NewSubscriber::from_both_forms(top.into(), inner.into())?
            }
        };
        let nid = p.newsletter_id;
        let (s, created) = state
            .db
            .run(move |conn| {
                subscribers::create_and_welcome(
                    conn,
                    nid,
                    &input,
                    Source::Api,
                    &values,
                    send_welcome,
                )
            })
            .await?;
        Ok(if created {
            CreateResponse::Created(Json(s.into()))
        } else {
            CreateResponse::Existing(Json(s.into()))
        })
    }

    /// Changes a subscriber's status or name.
    ///
    /// `status` may be `active` or `unsubscribed` (anything else is 422); `name: null` clears the
    /// name; absent fields stay as they are.
    #[oai(
        path = "/subscribers/:id",
        method = "patch",
        operation_id = "updateSubscriber"
    )]
    async fn update(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<UpdateBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SubscriberResponse, Refusal<{ GUARD | BODY | BY_ID | WRITES }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let fields = body.0.subscriber;
        let changes = Changes {
            status: fields.status.map(String::from),
            name: match fields.name {
                MaybeUndefined::Undefined => None,
                MaybeUndefined::Null => Some(None),
                MaybeUndefined::Value(v) => Some(Some(v.0)),
            },
            fields: fields.fields.unwrap_or_default(),
        };
        let s = state
            .db
            .run(move |conn| subscribers::update(conn, nid, id, &changes))
            .await?;
        Ok(SubscriberResponse::Ok(Json(s.into())))
    }

    /// Sets a subscriber's membership.
    ///
    /// Grants paid access from another payment platform (`paid`), gives it free (`comped`),
    /// until a date or for good, or ends it (`free`). A membership Stripe keeps is replaced
    /// (cancel it in Stripe too). Fires `member.upgraded` or `member.downgraded` when paid
    /// access comes or goes. Answers the subscriber.
    #[oai(
        path = "/subscribers/:id/membership",
        method = "put",
        operation_id = "setSubscriberMembership"
    )]
    async fn set_membership(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<MembershipBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SubscriberResponse, Refusal<{ GUARD | BODY | BY_ID | WRITES }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let fields = body.0.membership;
        let status = String::from(fields.status);
        let until = fields.until.map(String::from);
        let s = state
            .db
            .run(move |conn| {
                memberships::set_by_owner(conn, nid, id, &status, until.as_deref())?;
                subscribers::get(conn, nid, id)
            })
            .await?;
        Ok(SubscriberResponse::Ok(Json(s.into())))
    }

    /// Deletes a subscriber.
    ///
    /// Removes the subscriber and its tags for good; past deliveries keep their counts but no
    /// longer name the address.
    #[oai(
        path = "/subscribers/:id",
        method = "delete",
        operation_id = "deleteSubscriber"
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
            .run(move |conn| subscribers::delete(conn, nid, id))
            .await?;
        Ok(DeletedResponse::NoContent)
    }

    /// Adds a tag to a subscriber.
    ///
    /// A tag of 1-50 characters; adding one the subscriber already has answers 200 and changes
    /// nothing.
    #[oai(
        path = "/subscribers/:id/add_tag",
        method = "post",
        operation_id = "addSubscriberTag"
    )]
    async fn add_tag(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<TagBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SubscriberResponse, Refusal<{ GUARD | BODY | BY_ID | WRITES }>> {
        let (nid, id, tag) = (p.newsletter_id, parse_id(&id.0)?, body.0.tag.0);
        let s = state
            .db
            .run(move |conn| subscribers::add_tag(conn, nid, id, &tag))
            .await?;
        Ok(SubscriberResponse::Ok(Json(s.into())))
    }

    /// Removes a tag from a subscriber.
    ///
    /// The tag is the `tag` query parameter (required: without it, 422). Removing a tag the
    /// subscriber does not have answers 200 and changes nothing.
    #[oai(
        path = "/subscribers/:id/remove_tag",
        method = "delete",
        operation_id = "removeSubscriberTag"
    )]
    async fn remove_tag(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        /// The tag to remove.
        tag: Query<Field<Tag>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SubscriberResponse, Refusal<{ GUARD | BY_ID | RULE | WRITES }>> {
        let (nid, id, tag) = (p.newsletter_id, parse_id(&id.0)?, tag.0.0);
        let s = state
            .db
            .run(move |conn| subscribers::remove_tag(conn, nid, id, &tag))
            .await?;
        Ok(SubscriberResponse::Ok(Json(s.into())))
    }

    /// Adds up to 1000 subscribers at once.
    ///
    /// Each entry is checked on its own: the answer counts those created and those already present,
    /// and lists the refused entries by position, so a request with entries that break the schema
    /// still answers 200 and creates the valid ones. An entry's `fields` are set on a subscriber
    /// it adds; a value that does not fit its field, or a name that is no field, refuses that
    /// entry. More than 1000 entries are refused whole (422).
    /// Counts in the bulk rate-limit bucket; sends no mail.
    #[oai(
        path = "/subscribers/bulk_create",
        method = "post",
        operation_id = "bulkCreateSubscribers"
    )]
    async fn bulk_create(
        &self,
        _auth: ApiKeyAuth,
        body: Json<BulkBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<BulkResponse, Refusal<{ GUARD | BODY | WRITES }>> {
        let nid = p.newsletter_id;
        let entries: Vec<_> = body
            .0
            .subscribers
            .into_iter()
            .map(|mut entry| {
                let values = entry.fields.take().unwrap_or_default();
                (NewSubscriber::from(entry), values)
            })
            .collect();
        let outcome = state
            .db
            .run(move |conn| subscribers::bulk_create(conn, nid, &entries))
            .await?;
        Ok(BulkResponse::Ok(Json(BulkResult {
            created: outcome.created as u64,
            existing: outcome.existing as u64,
            errors: outcome
                .errors
                .into_iter()
                .map(|e| BulkErrorObject {
                    index: e.index as u64,
                    email: e.email,
                    code: e.code.to_string(),
                    message: e.message,
                })
                .collect(),
        })))
    }

    /// Everything kept about one subscriber, for a data request.
    ///
    /// `subscriber` (the record, with its tags), `deliveries` (every issue sent to them, newest
    /// first; at most 10,000, `deliveries_total` counts them all and `note` says when some were
    /// left out), `events` (their history, oldest first: `subscriber.created`, `email.sent`,
    /// `email.opened`, `email.clicked`, `email.bounced`, `email.unsubscribed`), `webhook_events`
    /// (the stored webhook events naming them, newest first; at most 10,000, and
    /// `webhook_events_note` says when more were left out) and `exported_at`.
    #[oai(
        path = "/subscribers/:id/export",
        method = "get",
        operation_id = "exportSubscriber"
    )]
    async fn export(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<ExportResponse, Refusal<{ GUARD | BY_ID }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let export = state
            .db
            .run(move |conn| personal_data::export(conn, nid, id))
            .await?;
        let document = serde_json::to_value(&export).expect("an export serialises");
        Ok(ExportResponse::Ok(Json(ExportDocument(document))))
    }
}
}
