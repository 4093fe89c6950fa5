//! Issues: list, show, create, update, delete, send_now, send_test, resume,
//! resend_unconfirmed, publish.

use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::types::MaybeUndefined;
use poem_openapi::{ApiResponse, Object, Tags};
use serde_json::Value;

use super::common::{ListMeta, parse_id};
use super::fields::{
    ArticleSummary, ArticleTitle, ArticleUrl, DateTime, Email, Field, Id, IssueStatus,
    IssueStatusFilter, IssueVisibility, Items, Number, OrNull, PageNumber, PerPage,
    ResendAfterHours, SocialImageUrl, Subject, Tag, Text,
};
use super::statuses::{BODY, BY_ID, GUARD, PAID, RULE, Refusal, WRITES};
use super::{ApiKeyAuth, Principal, State};
use crate::domain::delivery::sending;
use crate::domain::issues::{self, ArticleInput, Issue, IssueInput, Status};
use crate::domain::issues::{resend_unopened, test_send};
use crate::domain::newsletters;
use crate::domain::subscribers::audience::{Audience, AudienceInput, FieldConditionInput};
use crate::domain::values::pagination::Page;
use crate::domain::{DomainError, DomainResult};

#[derive(Tags)]
enum ApiTags {
    /// Write, approve, schedule, send and publish issues.
    Issues,
}

#[derive(Debug, Object)]
pub struct ArticleObject {
    pub id: i64,
    pub title: String,
    pub url: String,
    /// 1-based order in the issue.
    pub position: i64,
    pub summarized_article: String,
}

/// An issue. `content_markdown` and `articles` appear in single-issue answers only.
#[derive(Debug, Object)]
#[oai(example)]
pub struct IssueObject {
    pub id: i64,
    pub newsletter_id: i64,
    pub subject: String,
    /// `draft`, `scheduled`, `approved`, `sending`, `sent`, or `failed` (the send stopped
    /// because the mail relay stayed unreachable; `POST /issues/{id}/resume` goes on).
    pub status: String,
    #[oai(nullable)]
    pub scheduled_for: Option<String>,
    #[oai(nullable)]
    pub sent_at: Option<String>,
    pub articles_count: i64,
    /// Slug of the public address `/p/<path>`; fixed once published.
    pub path: String,
    #[oai(nullable)]
    pub published_at: Option<String>,
    #[oai(nullable)]
    pub web_url: Option<String>,
    /// Why a scheduled send could not start; while sending, why the send waits (the mail
    /// relay unreachable since when, and the next try); once sent, what did not plainly
    /// arrive (bounced, failed, unconfirmed), or while its unconfirmed messages are sent
    /// again, that they are; when failed, why it stopped.
    #[oai(nullable)]
    pub last_error: Option<String>,
    #[oai(skip_serializing_if_is_none)]
    pub content_markdown: Option<String>,
    #[oai(skip_serializing_if_is_none)]
    pub articles: Option<Vec<ArticleObject>>,
    /// Who the send goes to: active subscribers having any of `tags` (none: every active
    /// subscriber) and none of `exclude_tags`.
    pub audience: AudienceObject,
    /// Messages the send created, one per subscriber of the audience when it started; null
    /// until the send records its recipients.
    #[oai(nullable)]
    pub recipients: Option<i64>,
    /// How the send went, message by message: in single-issue answers of an issue that is
    /// sending, sent or failed.
    #[oai(skip_serializing_if_is_none)]
    pub delivery: Option<DeliveryObject>,
    pub created_at: String,
    pub updated_at: String,
    /// When the web copy of the sent issue was last edited (its page says "Updated"); null if
    /// it never was. The mail that went out is not changed by an edit.
    #[oai(nullable)]
    pub edited_at: Option<String>,
    /// The opening words of its content (after a heading it opens with), as the site's
    /// archive shows them; null for an issue saved before excerpts were kept, until the
    /// server has made its excerpt.
    #[oai(nullable)]
    pub excerpt: Option<String>,
    /// The picture link previews show (`og:image`) when one was chosen; null: the first image
    /// of the content, if any.
    #[oai(nullable)]
    pub social_image_url: Option<String>,
    /// On a resend to those who did not open (`POST /issues/{id}/resend_unopened`): the
    /// issue it resends; null otherwise.
    #[oai(nullable)]
    pub resend_of: Option<i64>,
    /// On an issue resent to those who did not open it: the resend's id (an issue is resent
    /// once); null otherwise.
    #[oai(nullable)]
    pub resent_unopened_as: Option<i64>,
    /// Who may read it on the site: `public` (everyone), `members` (signed-in readers) or
    /// `paid` (members with paid access). Others see its excerpt and a paywall, in the
    /// archive and the feed too; its full text reaches nobody else.
    pub visibility: String,
    /// For a `paid` issue: `true` mails paid members only; `false` mails everyone, free
    /// members getting the excerpt and an upgrade link instead of the text.
    pub paid_members_only: bool,
}

/// An issue's audience (a segment of the subscribers, by tag and by a custom field).
#[derive(Debug, Object)]
pub struct AudienceObject {
    /// Subscribers having any of these tags; empty: every active subscriber.
    pub tags: Vec<String>,
    /// Subscribers having any of these tags are left out.
    pub exclude_tags: Vec<String>,
    /// Only subscribers whose custom field meets this condition; null: no condition.
    #[oai(nullable)]
    pub field: Option<FieldConditionObject>,
}

/// A segment's condition on a custom field (`GET /fields`): subscribers without a value of
/// the field are not in the segment.
#[derive(Debug, Object)]
#[oai(example)]
pub struct FieldConditionObject {
    /// The field's name.
    pub name: String,
    /// `equals`; `before` or `after` (less or more than) for `number` and `date` fields.
    pub op: String,
    /// A value of the field's type: a string for `text`, `date` (`YYYY-MM-DD`) and
    /// `choice`, a number for `number`, `true`/`false` for `boolean`.
    pub value: Value,
}

impl From<Audience> for AudienceObject {
    fn from(a: Audience) -> Self {
        AudienceObject {
            tags: a.tags,
            exclude_tags: a.exclude_tags,
            field: a.field.map(|c| FieldConditionObject {
                name: c.name,
                op: c.op.as_str().to_string(),
                value: c.value,
            }),
        }
    }
}

/// An audience as sent: either list may be left out (empty).
#[derive(Debug, Object)]
#[oai(example)]
pub struct AudienceBody {
    /// Send to active subscribers having any of these tags; empty or absent: all of them.
    /// A tag given twice counts once; at most 20 different ones.
    #[oai(nullable)]
    pub tags: Option<Vec<Field<Tag>>>,
    /// Leave out subscribers having any of these tags (at most 20 different ones).
    #[oai(nullable)]
    pub exclude_tags: Option<Vec<Field<Tag>>>,
    /// Only subscribers whose custom field meets this condition; null or absent: none. A
    /// name that is no field, a comparison the field's type has not, or a value it cannot
    /// hold is 422.
    #[oai(nullable)]
    pub field: Option<FieldConditionObject>,
}

impl AudienceBody {
    /// `None` when nothing was given.
    fn input(self) -> Option<AudienceInput> {
        let strings = |list: Option<Vec<Field<Tag>>>| {
            list.unwrap_or_default()
                .into_iter()
                .map(String::from)
                .collect()
        };
        let given = self.tags.is_some() || self.exclude_tags.is_some() || self.field.is_some();
        given.then(|| AudienceInput {
            tags: strings(self.tags),
            exclude_tags: strings(self.exclude_tags),
            field: self.field.map(|c| FieldConditionInput {
                name: c.name,
                op: c.op,
                value: c.value,
            }),
        })
    }
}

/// The choices of a send: its audience (either list may be left out) and whether the issue
/// goes on the site when the send completes.
#[derive(Debug, Object)]
#[oai(example)]
pub struct SendNowBody {
    /// Send to active subscribers having any of these tags; empty or absent: all of them.
    /// A tag given twice counts once; at most 20 different ones.
    #[oai(nullable)]
    pub tags: Option<Vec<Field<Tag>>>,
    /// Leave out subscribers having any of these tags (at most 20 different ones).
    #[oai(nullable)]
    pub exclude_tags: Option<Vec<Field<Tag>>>,
    /// Only subscribers whose custom field meets this condition (as in an issue's
    /// `audience.field`).
    #[oai(nullable)]
    pub field: Option<FieldConditionObject>,
    /// Publish the issue on the site when the send completes. Absent or null: a send to
    /// every active subscriber follows the newsletter's `publish_on_send`; a send to a
    /// segment (tags or exclude_tags) is not published.
    #[oai(nullable)]
    pub publish: Option<bool>,
}

/// The messages of a send by outcome; `sent + unconfirmed + bounced + failed + pending`
/// is `recipients`.
#[derive(Debug, Object)]
pub struct DeliveryObject {
    /// Messages of the send: one per active subscriber when it started.
    pub recipients: i64,
    /// Taken by the mail relay.
    pub sent: i64,
    /// The whole message went out but the relay's answer never came (the server stopped,
    /// the answer timed out, the connection dropped): it may have arrived, so it is never
    /// sent again unless the owner asks (`POST /issues/{id}/resend_unconfirmed`). At most
    /// one per connection at each such event.
    pub unconfirmed: i64,
    /// Refused for good by the receiving server; the subscriber is now `bounced`.
    pub bounced: i64,
    /// Refused for now or cut off five times: given up.
    pub failed: i64,
    /// Not sent yet: waiting for a retry, or in flight.
    pub pending: i64,
    /// While the mail relay cannot be reached: since when.
    #[oai(nullable)]
    pub relay_unreachable_since: Option<String>,
    /// While the send waits (for the relay, or for messages to retry): when it goes on.
    #[oai(nullable)]
    pub next_attempt_at: Option<String>,
}

impl DeliveryObject {
    fn new(p: sending::Progress, issue: &Issue) -> Self {
        DeliveryObject {
            recipients: p.total,
            sent: p.sent,
            unconfirmed: p.unconfirmed,
            bounced: p.bounced,
            failed: p.failed,
            pending: p.remaining,
            relay_unreachable_since: issue.relay_down_since.map(|at| at.to_string()),
            next_attempt_at: issue.send_resumes_at.map(|at| at.to_string()),
        }
    }
}

impl IssueObject {
    fn new(issue: Issue, web_url: Option<String>, full: bool) -> Self {
        let resend_of = issue.audience.resend_of;
        IssueObject {
            id: issue.id,
            newsletter_id: issue.newsletter_id,
            subject: issue.subject,
            status: issue.status.as_str().to_string(),
            scheduled_for: issue.scheduled_for.map(|at| at.to_string()),
            sent_at: issue.sent_at.map(|at| at.to_string()),
            articles_count: issue.articles_count,
            path: issue.path,
            published_at: issue.published_at.map(|at| at.to_string()),
            web_url,
            last_error: issue.last_error,
            content_markdown: full.then_some(issue.content_markdown),
            articles: full.then(|| {
                issue
                    .articles
                    .into_iter()
                    .map(|a| ArticleObject {
                        id: a.id,
                        title: a.title,
                        url: a.url,
                        position: a.position,
                        summarized_article: a.summarized_article,
                    })
                    .collect()
            }),
            audience: issue.audience.into(),
            recipients: issue.recipients,
            delivery: None,
            created_at: issue.created_at.to_string(),
            updated_at: issue.updated_at.to_string(),
            edited_at: issue.edited_at.map(|at| at.to_string()),
            excerpt: issue.excerpt,
            social_image_url: issue.social_image_url,
            visibility: issue.visibility.as_str().to_string(),
            paid_members_only: issue.paid_members_only,
            resend_of,
            resent_unopened_as: issue.resent_unopened_as,
        }
    }
}

/// A resend to those who did not open: its subject and how long after the send it goes.
#[derive(Debug, Object)]
#[oai(example)]
pub struct ResendUnopenedBody {
    /// The resend's subject (a new one gets more opens than the same again); merge tags work.
    pub subject: Field<Subject>,
    /// Hours after the original was sent, 1 to 720; a time already past sends at once.
    pub after_hours: Number<ResendAfterHours>,
}

/// An article as sent on create/update.
#[derive(Debug, Object)]
pub struct ArticleBody {
    pub title: Field<ArticleTitle>,
    pub url: Field<ArticleUrl>,
    /// Blank, `null` or absent: no summary.
    #[oai(default, nullable)]
    pub summarized_article: Field<ArticleSummary>,
}

/// Fields of an issue create or update.
#[derive(Debug, Object)]
pub struct IssueFields {
    /// Required on create; absent on update leaves it. `null` is a blank subject: 422.
    pub subject: MaybeUndefined<Field<Subject>>,
    /// Markdown of at most 200,000 bytes (UTF-8), lists and quotes nested at most 16 deep,
    /// tables of at most 64 columns and 5,000 cells.
    #[oai(nullable)]
    pub content_markdown: Option<Text>,
    /// ISO 8601 date-time; null (or `""`) clears it.
    #[oai(nullable)]
    pub scheduled_for: MaybeUndefined<Field<DateTime>>,
    /// `draft` (default), `scheduled` or `approved`; null leaves the status as it is.
    #[oai(nullable)]
    pub status: MaybeUndefined<Field<IssueStatus>>,
    /// Replaces the issue's articles; `position` follows the array order.
    #[oai(nullable)]
    pub articles: Option<Items<ArticleBody, 0, { issues::ARTICLES_MAX }>>,
    /// Who a send of the issue goes to (a scheduled send included); null: every active
    /// subscriber. Tags no subscriber has are refused.
    #[oai(nullable)]
    pub audience: MaybeUndefined<AudienceBody>,
    /// `true` puts the issue on the newsletter's site (as `POST /issues/{id}/publish`; a
    /// draft is refused), `false` takes it off (its page, the archive and the feed lose it);
    /// absent or null leaves it.
    #[oai(nullable)]
    pub published: Option<bool>,
    /// The picture of the issue's link previews (`og:image`), an absolute http(s) URL of at
    /// most 2,000 characters; `""` goes back to the content's first image. A sent issue takes
    /// it too (it is part of the web copy).
    #[oai(nullable)]
    pub social_image_url: Option<Field<SocialImageUrl>>,
    /// `public` (default), `members` or `paid`; absent or null leaves it. A sent issue takes
    /// it too (it is part of the web copy).
    #[oai(nullable)]
    pub visibility: Option<Field<IssueVisibility>>,
    /// For a `paid` issue: `true` mails paid members only, `false` (default) everyone, free
    /// members getting the excerpt and an upgrade link. Fixed once the send started.
    #[oai(nullable)]
    pub paid_members_only: Option<bool>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct IssueBody {
    pub issue: IssueFields,
}

impl From<IssueFields> for IssueInput {
    fn from(f: IssueFields) -> Self {
        IssueInput {
            subject: match f.subject {
                MaybeUndefined::Undefined => None,
                MaybeUndefined::Null => Some(String::new()),
                MaybeUndefined::Value(v) => Some(v.into()),
            },
            content_markdown: f.content_markdown.map(String::from),
            social_image_url: f.social_image_url.map(String::from),
            visibility: f.visibility.map(String::from),
            paid_members_only: f.paid_members_only,
            status: f.status.take().map(String::from),
            scheduled_for: match f.scheduled_for {
                MaybeUndefined::Undefined => None,
                MaybeUndefined::Null => Some(None),
                MaybeUndefined::Value(v) => Some(Some(v.into())),
            },
            articles: f.articles.map(|list| {
                list.into_iter()
                    .map(|a| ArticleInput {
                        title: a.title.into(),
                        url: a.url.into(),
                        summarized_article: a.summarized_article.into(),
                    })
                    .collect()
            }),
            audience: match f.audience {
                MaybeUndefined::Undefined => None,
                MaybeUndefined::Null => Some(AudienceInput::default()),
                MaybeUndefined::Value(v) => Some(v.input().unwrap_or_default()),
            },
            published: f.published,
        }
    }
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct IssueList {
    pub issues: Vec<IssueObject>,
    pub meta: ListMeta,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct SendNowResult {
    pub message: String,
    /// The issue as it was when queued (e.g. `approved`); it moves to `sending` next.
    pub issue: IssueObject,
    /// Recipients: the active subscribers of the issue's audience.
    pub subscribers: i64,
}

/// The addresses of a test send.
#[derive(Debug, Object)]
#[oai(example)]
pub struct SendTestBody {
    /// One to five addresses; the same address twice counts once. A newsletter that is not
    /// on the paid tier (or is paused) may send tests only to its owner's address.
    #[oai(validator(min_items = 1, max_items = 5))]
    pub emails: Vec<Field<Email>>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct SendTestResult {
    pub message: String,
    pub issue_id: i64,
    /// The subject the test messages carry: the issue's, marked `[Test] `.
    pub subject: String,
    /// Where the test goes: the addresses as checked (lowercased, each once).
    pub emails: Vec<String>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct ResumeResult {
    pub message: String,
    /// The issue as it was (`failed`); it moves to `sending` next.
    pub issue: IssueObject,
    /// Messages still to send.
    pub remaining: i64,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct ResendResult {
    pub message: String,
    /// The issue as it is now: still `sent`, with `delivery` counting the messages sent
    /// again as `pending` until they are done.
    pub issue: IssueObject,
    /// Unconfirmed messages sent again by this request (0 when none is left to send again).
    pub resent: i64,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct PublishResult {
    pub message: String,
    pub issue: IssueObject,
    pub web_url: String,
}

#[derive(ApiResponse)]
pub enum ListResponse {
    #[oai(status = 200)]
    Ok(Json<IssueList>),
}

#[derive(ApiResponse)]
pub enum IssueResponse {
    #[oai(status = 200)]
    Ok(Json<IssueObject>),
}

#[derive(ApiResponse)]
pub enum CreatedResponse {
    #[oai(status = 201)]
    Created(Json<IssueObject>),
}

#[derive(ApiResponse)]
pub enum DeletedResponse {
    #[oai(status = 204)]
    NoContent,
}

#[derive(ApiResponse)]
pub enum SendNowResponse {
    #[oai(status = 200)]
    Ok(Json<SendNowResult>),
}

#[derive(ApiResponse)]
pub enum SendTestResponse {
    /// Queued: the messages go out in a moment.
    #[oai(status = 202)]
    Accepted(Json<SendTestResult>),
}

#[derive(ApiResponse)]
pub enum ResumeResponse {
    #[oai(status = 200)]
    Ok(Json<ResumeResult>),
}

#[derive(ApiResponse)]
pub enum ResendResponse {
    #[oai(status = 200)]
    Ok(Json<ResendResult>),
}

#[derive(ApiResponse)]
pub enum PublishResponse {
    #[oai(status = 200)]
    Ok(Json<PublishResult>),
}

/// An issue with its web URL, read after `f` ran in the same connection.
fn with_url(
    conn: &rusqlite::Connection,
    state: &State,
    newsletter_id: i64,
    issue: Issue,
    full: bool,
) -> DomainResult<IssueObject> {
    let newsletter = newsletters::get(conn, newsletter_id)?;
    let web_url = issue.web_url(&newsletter, &state.urls);
    Ok(IssueObject::new(issue, web_url, full))
}

pub struct IssuesApi;

rate_limited_api! {
    "ApiTags::Issues",
impl IssuesApi {
    /// Issues, newest first.
    ///
    /// One page of the newsletter's issues in the list shape (without `content_markdown` and
    /// `articles`), optionally of one status. A `page` or `per_page` that is not a positive integer
    /// is 422.
    #[oai(path = "/issues", method = "get", operation_id = "listIssues")]
    async fn list(
        &self,
        _auth: ApiKeyAuth,
        /// Page number, from 1.
        page: Query<Option<Field<PageNumber>>>,
        /// Items per page (default 25, at most 100: a larger number counts as 100).
        per_page: Query<Option<Field<PerPage>>>,
        /// Only issues of this status: draft, approved, scheduled, sending, sent or failed
        /// (empty: all).
        status: Query<Option<Field<IssueStatusFilter>>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<ListResponse, Refusal<{ GUARD | RULE }>> {
        let page = Page::parse(page.0.as_deref(), per_page.0.as_deref())?;
        let (nid, state2) = (p.newsletter_id, state.clone());
        let (issues, has_more) = state
            .db
            .run(move |conn| {
                let (rows, has_more) = issues::list(conn, nid, page, status.0.as_deref())?;
                let rows = rows
                    .into_iter()
                    .map(|i| with_url(conn, &state2, nid, i, false))
                    .collect::<DomainResult<Vec<_>>>()?;
                Ok::<_, DomainError>((rows, has_more))
            })
            .await?;
        Ok(ListResponse::Ok(Json(IssueList {
            issues,
            meta: ListMeta::new(page, has_more),
        })))
    }

    /// One issue with its Markdown and articles.
    ///
    /// The whole issue; one that is sending, sent or failed also carries `delivery`, its messages
    /// by outcome. Another newsletter's issue is 404.
    #[oai(path = "/issues/:id", method = "get", operation_id = "getIssue")]
    async fn show(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<IssueResponse, Refusal<{ GUARD | BY_ID }>> {
        let (nid, id, state2) = (p.newsletter_id, parse_id(&id.0)?, state.clone());
        let issue = state
            .db
            .run(move |conn| {
                let issue = issues::get(conn, nid, id)?;
                let delivery = match issue.status {
                    Status::Sending | Status::Sent | Status::Failed => {
                        Some(DeliveryObject::new(sending::progress(conn, id)?, &issue))
                    }
                    _ => None,
                };
                let mut shown = with_url(conn, &state2, nid, issue, true)?;
                shown.delivery = delivery;
                Ok::<_, DomainError>(shown)
            })
            .await?;
        Ok(IssueResponse::Ok(Json(issue)))
    }

    /// Creates an issue.
    ///
    /// A draft unless `status` says `approved` or `scheduled`; `subject` is required. Scheduling
    /// without `scheduled_for` takes the next frequency slot. Rules that depend on the
    /// newsletter's state answer 422 `validation_error`: `scheduled` with a `scheduled_for` in
    /// the past, and an `audience` tag no subscriber has.
    #[oai(path = "/issues", method = "post", operation_id = "createIssue")]
    async fn create(
        &self,
        _auth: ApiKeyAuth,
        body: Json<IssueBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<CreatedResponse, Refusal<{ GUARD | BODY | WRITES }>> {
        let (nid, state2, input) = (
            p.newsletter_id,
            state.clone(),
            IssueInput::from(body.0.issue),
        );
        let issue = state
            .db
            .run_after(
                move || issues::check_new(&input),
                move |conn, checked| {
                    let issue = issues::create(conn, nid, &checked)?;
                    with_url(conn, &state2, nid, issue, true)
                },
            )
            .await?;
        Ok(CreatedResponse::Created(Json(issue)))
    }

    /// Updates an issue; a sent one's web copy.
    ///
    /// Absent fields stay as they are; `articles` replaces the whole list; `published` puts the
    /// issue on the site or takes it off. A sent issue takes `content_markdown` (its web copy:
    /// the page shows it with "Updated" and `edited_at` records when; the mail that went out
    /// stays as it was) and `published`; a change of its `subject`, `articles`, `status`,
    /// `scheduled_for` or `audience` answers 422 `validation_error` naming the field, and changes
    /// nothing. An issue that is sending or failed can not change (422 `invalid_state`);
    /// `scheduled` with a `scheduled_for` in the past, and an `audience` tag no subscriber has,
    /// answer 422 `validation_error`.
    #[oai(path = "/issues/:id", method = "patch", operation_id = "updateIssue")]
    async fn update(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<IssueBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<IssueResponse, Refusal<{ GUARD | BODY | BY_ID | WRITES }>> {
        let (nid, id, state2, input) = (
            p.newsletter_id,
            parse_id(&id.0)?,
            state.clone(),
            IssueInput::from(body.0.issue),
        );
        let issue = state
            .db
            .run_after(
                move || issues::check_changes(&input),
                move |conn, checked| {
                    let issue = issues::update(conn, nid, id, &checked)?;
                    with_url(conn, &state2, nid, issue, true)
                },
            )
            .await?;
        Ok(IssueResponse::Ok(Json(issue)))
    }

    /// Deletes a draft.
    ///
    /// Only drafts can be deleted: deleting an approved, scheduled, sending, sent or failed issue
    /// is refused with 422 `invalid_state`.
    #[oai(path = "/issues/:id", method = "delete", operation_id = "deleteIssue")]
    async fn delete(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<DeletedResponse, Refusal<{ GUARD | BY_ID | RULE | WRITES }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        state
            .db
            .run(move |conn| issues::delete(conn, nid, id))
            .await?;
        Ok(DeletedResponse::NoContent)
    }

    /// Queues an approved or scheduled issue for sending now.
    ///
    /// An optional body `{"tags": [...], "exclude_tags": [...], "publish": true}` chooses the
    /// audience (recorded on the issue): active subscribers having any of `tags` (empty: all) and
    /// none of `exclude_tags`; no body (or `null`), or neither list, sends to the audience already
    /// recorded (everyone by default). `publish` says whether the issue goes on the site when the
    /// send completes; without it, a send to everyone follows the newsletter's `publish_on_send`
    /// and a send to a segment is not published.
    ///
    /// An issue that is not approved or scheduled answers 422 `invalid_state`; an audience
    /// with no active subscriber 422 `no_active_subscribers`; an issue without content or
    /// articles 422 `no_content`; a tag no subscriber has 422 `validation_error`; a newsletter
    /// not on the paid tier 402.
    #[oai(
        path = "/issues/:id/send_now",
        method = "post",
        operation_id = "sendIssueNow"
    )]
    async fn send_now(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<OrNull<SendNowBody>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SendNowResponse, Refusal<{ GUARD | BODY | BY_ID | PAID | WRITES }>> {
        let (nid, id, state2) = (p.newsletter_id, parse_id(&id.0)?, state.clone());
        let choice = match body.0.0 {
            None => issues::SendChoice::default(),
            Some(body) => issues::SendChoice {
                publish: body.publish,
                audience: AudienceBody {
                    tags: body.tags,
                    exclude_tags: body.exclude_tags,
                    field: body.field,
                }
                .input(),
                approve_draft: false,
                paid_members_only: None,
            },
        };
        let (issue, recipients) = state
            .db
            .run(move |conn| {
                let queued = issues::send_with(conn, nid, id, &choice)?;
                Ok::<_, DomainError>((
                    with_url(conn, &state2, nid, queued.issue, false)?,
                    queued.recipients,
                ))
            })
            .await?;
        Ok(SendNowResponse::Ok(Json(SendNowResult {
            message: format!("Issue queued for sending to {recipients} subscriber(s)"),
            issue,
            subscribers: recipients,
        })))
    }

    /// Sends the issue to one to five addresses as a test.
    ///
    /// The real message, whatever the issue's status, with `[Test] ` before its subject; its links
    /// work but count nothing, and it makes no delivery, no stats and no event. A newsletter not on
    /// the paid tier (or paused) may send tests only to its owner's address (402 otherwise). An
    /// issue without content or articles answers 422 `no_content`.
    #[oai(
        path = "/issues/:id/send_test",
        method = "post",
        operation_id = "sendIssueTest"
    )]
    async fn send_test(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<SendTestBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SendTestResponse, Refusal<{ GUARD | BODY | BY_ID | PAID | WRITES }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let typed: Vec<String> = body.0.emails.into_iter().map(String::from).collect();
        let queued = state
            .db
            .run_after(
                move || test_send::check_recipients(&typed),
                move |conn, recipients| test_send::queue(conn, nid, id, recipients),
            )
            .await?;
        let emails: Vec<String> = queued
            .recipients
            .into_iter()
            .map(|email| email.into_string())
            .collect();
        Ok(SendTestResponse::Accepted(Json(SendTestResult {
            message: format!("Test queued to {}", emails.join(", ")),
            issue_id: queued.issue.id,
            subject: test_send::test_subject(&queued.issue.subject),
            emails,
        })))
    }

    /// Resumes a send that stopped.
    ///
    /// For a `failed` issue (its send stopped because the mail relay stayed unreachable): the
    /// messages not yet sent go out, and nobody gets a second copy. Any other status is 422
    /// `invalid_state`, a paused newsletter 422, a tier other than paid 402.
    #[oai(
        path = "/issues/:id/resume",
        method = "post",
        operation_id = "resumeIssueSend"
    )]
    async fn resume(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<ResumeResponse, Refusal<{ GUARD | BY_ID | RULE | PAID | WRITES }>> {
        let (nid, id, state2) = (p.newsletter_id, parse_id(&id.0)?, state.clone());
        let (issue, remaining) = state
            .db
            .run(move |conn| {
                let queued = sending::resume(conn, nid, id)?;
                Ok::<_, DomainError>((
                    with_url(conn, &state2, nid, queued.issue, false)?,
                    queued.recipients,
                ))
            })
            .await?;
        Ok(ResumeResponse::Ok(Json(ResumeResult {
            message: format!("Sending resumed: {remaining} message(s) to go"),
            issue,
            remaining,
        })))
    }

    /// Sends a sent issue's unconfirmed messages once more.
    ///
    /// The owner's choice, never the engine's: an `unconfirmed` message went out whole but the
    /// relay's answer never came, so it may have arrived, and whoever got it gets a second
    /// copy. Each unconfirmed message goes out once more at most, ever: not one that was
    /// opened or clicked (it arrived), nor to a subscriber who is no longer active. The issue
    /// stays `sent` (no second `issue.sent` event); `resent` counts the messages queued, and
    /// `issue.delivery` counts them as `pending` until they are done. Asking again sends
    /// nothing (`resent` 0). An issue that is not `sent` answers 422 `invalid_state`, a paused
    /// newsletter 422 `newsletter_paused`, a tier other than paid 402.
    #[oai(
        path = "/issues/:id/resend_unconfirmed",
        method = "post",
        operation_id = "resendIssueUnconfirmed"
    )]
    async fn resend_unconfirmed(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<ResendResponse, Refusal<{ GUARD | BY_ID | RULE | PAID | WRITES }>> {
        let (nid, id, state2) = (p.newsletter_id, parse_id(&id.0)?, state.clone());
        let (issue, resent) = state
            .db
            .run(move |conn| {
                let done = sending::resend_unconfirmed(conn, nid, id)?;
                let delivery = DeliveryObject::new(sending::progress(conn, id)?, &done.issue);
                let mut shown = with_url(conn, &state2, nid, done.issue, false)?;
                shown.delivery = Some(delivery);
                Ok::<_, DomainError>((shown, done.resent))
            })
            .await?;
        let message = if resent > 0 {
            format!("Sending again to {resent} unconfirmed recipient(s)")
        } else {
            "No unconfirmed message is left to send again".to_string()
        };
        Ok(ResendResponse::Ok(Json(ResendResult {
            message,
            issue,
            resent,
        })))
    }

    /// Resends a sent issue, with a new subject, to those who did not open it.
    ///
    /// Makes the resend, an issue of its own (the original's content and articles; never
    /// published on the site), scheduled `after_hours` after the original was sent (at once
    /// when that time has passed), and answers it (201). When its send starts it goes to the
    /// original's recipients whose message the relay took and that no person opened, still
    /// active and not paused: opens that are no person's (Apple Mail Privacy Protection's
    /// prefetch from Apple's network, scanners opening within 10 seconds of delivery) do not
    /// count, and the original's stats say how many were set aside (`automatic_opens`). An
    /// issue is resent once: again, a resend itself, or an issue that is not `sent` answers
    /// 422 `invalid_state`.
    #[oai(
        path = "/issues/:id/resend_unopened",
        method = "post",
        operation_id = "resendIssueUnopened"
    )]
    async fn resend_unopened(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<ResendUnopenedBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<CreatedResponse, Refusal<{ GUARD | BODY | BY_ID | RULE | WRITES }>> {
        let (nid, id, state2) = (p.newsletter_id, parse_id(&id.0)?, state.clone());
        let (subject, after_hours) = (String::from(body.0.subject), body.0.after_hours.text());
        let issue = state
            .db
            .run(move |conn| {
                let resend =
                    resend_unopened::resend_unopened(conn, nid, id, &subject, &after_hours)?;
                with_url(conn, &state2, nid, resend, true)
            })
            .await?;
        Ok(CreatedResponse::Created(Json(issue)))
    }

    /// Duplicates an issue as a new draft.
    ///
    /// The draft has the subject "Copy of" the issue's, its content (as it is now, the web copy
    /// of a sent issue) and its articles; not its audience, schedule or web page. Any issue may
    /// be duplicated; a cancelled newsletter answers 403.
    #[oai(
        path = "/issues/:id/duplicate",
        method = "post",
        operation_id = "duplicateIssue"
    )]
    async fn duplicate(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<CreatedResponse, Refusal<{ GUARD | BY_ID | WRITES }>> {
        let (nid, id, state2) = (p.newsletter_id, parse_id(&id.0)?, state.clone());
        let issue = state
            .db
            .run(move |conn| {
                let copy = issues::duplicate(conn, nid, id)?;
                with_url(conn, &state2, nid, copy, true)
            })
            .await?;
        Ok(CreatedResponse::Created(Json(issue)))
    }

    /// Publishes the issue to the newsletter's web archive.
    ///
    /// Allowed for approved, scheduled, sending and sent issues; a draft is refused with 422
    /// `invalid_state` and an issue without content with 422 `no_content`. Publishing twice answers
    /// 200 and changes nothing; the issue's `path` is fixed from then on.
    #[oai(
        path = "/issues/:id/publish",
        method = "post",
        operation_id = "publishIssue"
    )]
    async fn publish(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<PublishResponse, Refusal<{ GUARD | BY_ID | RULE | WRITES }>> {
        let (nid, id, state2) = (p.newsletter_id, parse_id(&id.0)?, state.clone());
        let (issue, web_url, first) = state
            .db
            .run(move |conn| {
                let published = issues::publish(conn, &state2.urls, nid, id)?;
                let web_url = published.web_url.clone();
                Ok::<_, DomainError>((
                    with_url(conn, &state2, nid, published.issue, false)?,
                    web_url,
                    published.first_time,
                ))
            })
            .await?;
        let message = if first {
            "Issue published"
        } else {
            "Issue was already published"
        }
        .to_string();
        Ok(PublishResponse::Ok(Json(PublishResult {
            message,
            issue,
            web_url,
        })))
    }
}
}
