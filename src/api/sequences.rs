//! Sequences: list, create, read, update, delete, and adding or stopping a reader
//! (docs/automations.md, "Sequences").

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::types::MaybeUndefined;
use poem_openapi::{ApiResponse, Object, Tags};

use super::common::parse_id;
use super::fields::{
    AtHour, DelayAmount, DelayUnitName, Field, Id, Items, Number, SequenceName, SequenceStatus,
    SequenceTrigger, StepBody, StepSubject, TagOrBlank, WeekdayName,
};
use super::statuses::{BODY, BY_ID, GUARD, RULE, Refusal, WRITES};
use super::{ApiError, ApiKeyAuth, Principal, State};
use crate::domain::FieldErrors;
use crate::domain::sequences::readers::{self, Enrollment};
use crate::domain::sequences::{self, Sequence, SequenceInput, Step, StepInput};

#[derive(Tags)]
enum ApiTags {
    /// E-mails that follow a reader: steps sent a delay apart from a trigger on.
    Sequences,
}

/// One step of a sequence, with where its readers are.
#[derive(Debug, Object)]
pub struct StepObject {
    /// Give it back on update to keep the step (its sends and counts).
    pub id: i64,
    /// 1 for the first step.
    pub position: i64,
    /// Merge tags work.
    pub subject: String,
    pub body_markdown: String,
    /// Waited after the previous step (after entering, for the first).
    pub delay_amount: i64,
    /// `minutes`, `hours` or `days` (calendar days on the newsletter's clocks).
    pub delay_unit: String,
    /// After the delay, the step waits for this hour (0-23, the newsletter's time zone).
    #[oai(nullable)]
    pub at_hour: Option<i64>,
    /// ... of this weekday (`monday` to `sunday`).
    #[oai(nullable)]
    pub on_weekday: Option<String>,
    /// Readers whose next step this is.
    pub waiting: i64,
    /// Handed to the relay and accepted.
    pub sent: i64,
    /// Handed over but the answer was lost (it may have arrived; it is never sent again).
    pub unconfirmed: i64,
    /// Refused for good by the relay.
    pub failed: i64,
    /// Readers who left while this was their next step.
    pub left: i64,
    /// Sends a person opened (opens by mail privacy proxies and scanners within seconds of
    /// delivery set aside); 0 while the newsletter does not track opens.
    pub opened: i64,
    /// Sends in which a person clicked a link.
    pub clicked: i64,
}

impl From<Step> for StepObject {
    fn from(s: Step) -> Self {
        StepObject {
            id: s.id,
            position: s.position,
            subject: s.subject,
            body_markdown: s.body_markdown,
            delay_amount: s.wait.amount,
            delay_unit: s.wait.unit.as_str().to_string(),
            at_hour: s.wait.at_hour,
            on_weekday: s.wait.on_weekday.map(|d| d.as_str().to_string()),
            waiting: s.counts.waiting,
            sent: s.counts.sent,
            unconfirmed: s.counts.unconfirmed,
            failed: s.counts.failed,
            left: s.counts.left,
            opened: s.counts.opened,
            clicked: s.counts.clicked,
        }
    }
}

/// A sequence.
#[derive(Debug, Object)]
#[oai(example)]
pub struct SequenceObject {
    pub id: i64,
    pub name: String,
    /// `live`, or `paused` (nobody enters, no step goes; readers wait where they are).
    pub status: String,
    /// What enters a reader: `confirmed` (a subscription confirmed), `tag_added`,
    /// `became_paid` (paid access begins) or `manual` (only `POST .../subscribers`).
    pub trigger: String,
    /// The tag of a `tag_added` trigger.
    #[oai(nullable)]
    pub trigger_tag: Option<String>,
    /// A reader leaves when this tag is added to them.
    #[oai(nullable)]
    pub exit_tag_added: Option<String>,
    /// A reader leaves when this tag is removed from them.
    #[oai(nullable)]
    pub exit_tag_removed: Option<String>,
    /// The newsletter's welcome sequence (one each, never deleted): its first step is the
    /// welcome e-mail (the newsletter's `welcome_subject` and `welcome_body`, sent at
    /// confirmation while `welcome_enabled`); `steps` follow it, their waits counted from
    /// the confirmation. Its trigger stays `confirmed`.
    pub welcome: bool,
    pub steps: Vec<StepObject>,
    /// Readers who got every step.
    pub completed: i64,
    pub created_at: String,
    pub updated_at: String,
}

impl From<Sequence> for SequenceObject {
    fn from(q: Sequence) -> Self {
        SequenceObject {
            id: q.id,
            name: q.name,
            status: q.status.as_str().to_string(),
            trigger: q.trigger.as_str().to_string(),
            trigger_tag: q.trigger_tag,
            exit_tag_added: q.exit_tag_added,
            exit_tag_removed: q.exit_tag_removed,
            welcome: q.welcome,
            steps: q.steps.into_iter().map(Into::into).collect(),
            completed: q.completed,
            created_at: q.created_at.to_string(),
            updated_at: q.updated_at.to_string(),
        }
    }
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct SequenceList {
    pub sequences: Vec<SequenceObject>,
}

/// A step as given on create and update.
#[derive(Debug, Object)]
pub struct StepFields {
    /// An existing step's id keeps it (its sends and counts); absent: a new step.
    #[oai(nullable)]
    pub id: Option<i64>,
    pub subject: Field<StepSubject>,
    /// Markdown; merge tags work (`{{ name | default: "friend" }}`, custom fields).
    pub body_markdown: Field<StepBody>,
    /// 0 to a year in the unit.
    pub delay_amount: Number<DelayAmount>,
    pub delay_unit: Field<DelayUnitName>,
    /// Null or absent: any time.
    #[oai(nullable)]
    pub at_hour: Option<Number<AtHour>>,
    /// Null or absent: any day (a weekday needs `at_hour`).
    #[oai(nullable)]
    pub on_weekday: Option<Field<WeekdayName>>,
}

impl From<StepFields> for StepInput {
    fn from(s: StepFields) -> Self {
        StepInput {
            id: s.id,
            subject: s.subject.into(),
            body_markdown: s.body_markdown.into(),
            delay_amount: s.delay_amount.text(),
            delay_unit: s.delay_unit.into(),
            at_hour: s.at_hour.map(|h| h.text()).unwrap_or_default(),
            on_weekday: s.on_weekday.map(String::from).unwrap_or_default(),
        }
    }
}

/// A sequence's fields; on update, absent ones stay as they are and `steps` replaces the
/// list (give each kept step its `id`).
#[derive(Debug, Object)]
pub struct SequenceFields {
    /// Required on create; absent on update leaves it. `null` is a blank name: 422.
    pub name: MaybeUndefined<Field<SequenceName>>,
    /// `live` (the default) or `paused`.
    #[oai(nullable)]
    pub status: Option<Field<SequenceStatus>>,
    /// Required on create; absent on update leaves it (`null`: 422).
    pub trigger: MaybeUndefined<Field<SequenceTrigger>>,
    /// Required with `tag_added`.
    #[oai(nullable)]
    pub trigger_tag: Option<Field<TagOrBlank>>,
    /// Blank clears it (no exit by an added tag); null or absent leaves it.
    #[oai(nullable)]
    pub exit_tag_added: Option<Field<TagOrBlank>>,
    /// Blank clears it (no exit by a removed tag); null or absent leaves it.
    #[oai(nullable)]
    pub exit_tag_removed: Option<Field<TagOrBlank>>,
    /// 1 to 30 steps, in order; required on create; absent on update leaves them (`null`:
    /// 422). The welcome sequence takes an empty list (its first step is the welcome e-mail).
    pub steps: MaybeUndefined<Items<StepFields, 1, { sequences::STEPS_MAX }>>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct NewSequenceBody {
    pub sequence: SequenceFields,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct SequenceChangesBody {
    pub sequence: SequenceFields,
}

/// Absent or null leaves a tag as it is; blank clears it (the domain reads blank as none).
fn tag(given: Option<Field<TagOrBlank>>) -> Option<Option<String>> {
    given.map(|t| Some(String::from(t)))
}

/// A given text field: `null` is the blank value, refused by the domain in its words.
fn given(field: MaybeUndefined<impl Into<String>>) -> Option<String> {
    match field {
        MaybeUndefined::Value(v) => Some(v.into()),
        MaybeUndefined::Null => Some(String::new()),
        MaybeUndefined::Undefined => None,
    }
}

/// The domain's input from a body; `steps: null` is refused here (an empty list would
/// clear the welcome sequence's steps).
fn input(f: SequenceFields) -> Result<SequenceInput, ApiError> {
    let steps = match f.steps {
        MaybeUndefined::Value(steps) => Some(steps.into_iter().map(Into::into).collect()),
        MaybeUndefined::Null => {
            let errors = FieldErrors::single("steps", "must be a list of steps, not null");
            return Err(ApiError::validation(&errors));
        }
        MaybeUndefined::Undefined => None,
    };
    Ok(SequenceInput {
        name: given(f.name),
        status: f.status.map(String::from),
        trigger: given(f.trigger),
        trigger_tag: tag(f.trigger_tag),
        exit_tag_added: tag(f.exit_tag_added),
        exit_tag_removed: tag(f.exit_tag_removed),
        steps,
    })
}

/// Whom to add.
#[derive(Debug, Object)]
#[oai(example)]
pub struct AddReaderBody {
    /// An active subscriber of the newsletter who has not been through this sequence.
    pub subscriber_id: i64,
}

/// A reader's place in a sequence.
#[derive(Debug, Object)]
#[oai(example)]
pub struct ReaderObject {
    pub sequence_id: i64,
    pub subscriber_id: i64,
    /// How many steps they have been sent (or passed).
    pub reached: i64,
    /// `active` (waiting for the next step), `queued` (its send is queued), `completed` or
    /// `left`.
    pub state: String,
    /// When the wait for the next step began; null while it has not begun.
    #[oai(nullable)]
    pub waiting_since: Option<String>,
    /// Why they left: `unsubscribed`, `tag_added`, `tag_removed`, `stopped` or `failed`.
    #[oai(nullable)]
    pub left_reason: Option<String>,
}

impl From<Enrollment> for ReaderObject {
    fn from(e: Enrollment) -> Self {
        ReaderObject {
            sequence_id: e.sequence_id,
            subscriber_id: e.subscriber_id,
            reached: e.reached,
            state: e.state.as_str().to_string(),
            waiting_since: e.waiting_since.map(|t| t.to_string()),
            left_reason: e.left_reason.map(|r| r.as_str().to_string()),
        }
    }
}

#[derive(ApiResponse)]
pub enum ListResponse {
    #[oai(status = 200)]
    Ok(Json<SequenceList>),
}

#[derive(ApiResponse)]
pub enum CreatedResponse {
    #[oai(status = 201)]
    Created(Json<SequenceObject>),
}

#[derive(ApiResponse)]
pub enum SequenceResponse {
    #[oai(status = 200)]
    Ok(Json<SequenceObject>),
}

#[derive(ApiResponse)]
pub enum DeletedResponse {
    #[oai(status = 204)]
    NoContent,
}

#[derive(ApiResponse)]
pub enum AddedResponse {
    #[oai(status = 201)]
    Created(Json<ReaderObject>),
}

#[derive(ApiResponse)]
pub enum ReaderResponse {
    #[oai(status = 200)]
    Ok(Json<ReaderObject>),
}

pub struct SequencesApi;

rate_limited_api! {
    "ApiTags::Sequences",
impl SequencesApi {
    /// The newsletter's sequences.
    ///
    /// The welcome sequence first (every newsletter has one), then oldest first, each with
    /// its steps and their counts; a newsletter has at most 50.
    #[oai(path = "/sequences", method = "get", operation_id = "listSequences")]
    async fn list(
        &self,
        _auth: ApiKeyAuth,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<ListResponse, Refusal<{ GUARD }>> {
        let nid = p.newsletter_id;
        let found = state
            .db
            .run(move |conn| sequences::list(conn, nid))
            .await?;
        Ok(ListResponse::Ok(Json(SequenceList {
            sequences: found.into_iter().map(Into::into).collect(),
        })))
    }

    /// Creates a sequence.
    ///
    /// `name`, `trigger` and 1-30 `steps` are required. Readers enter from then on (not those
    /// who confirmed or were tagged before). Rules between fields and of the newsletter's
    /// state answer 422 `validation_error`: a `tag_added` trigger without `trigger_tag`, an
    /// `on_weekday` without `at_hour`, a delay longer than a year in its unit, a step `id`
    /// (on create, any), a merge tag that names no field of the newsletter; past 50
    /// sequences is 422 `limit_reached`.
    #[oai(path = "/sequences", method = "post", operation_id = "createSequence")]
    async fn create(
        &self,
        _auth: ApiKeyAuth,
        body: Json<NewSequenceBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<CreatedResponse, Refusal<{ GUARD | BODY | WRITES }>> {
        let (nid, input) = (p.newsletter_id, input(body.0.sequence)?);
        let sequence = state
            .db
            .run_after(
                move || sequences::check_new(&input),
                move |conn, checked| sequences::create(conn, nid, &checked),
            )
            .await?;
        Ok(CreatedResponse::Created(Json(sequence.into())))
    }

    /// A sequence, with its steps and their counts.
    ///
    /// Each step says how many readers wait for it, were sent it, opened it, clicked in it
    /// and left while it was next.
    #[oai(path = "/sequences/:id", method = "get", operation_id = "getSequence")]
    async fn get(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SequenceResponse, Refusal<{ GUARD | BY_ID }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let sequence = state
            .db
            .run(move |conn| sequences::get(conn, nid, id))
            .await?;
        Ok(SequenceResponse::Ok(Json(sequence.into())))
    }

    /// Changes a sequence.
    ///
    /// Absent fields stay; `steps` replaces the list, each kept step given with its `id`. A
    /// change applies to readers who have not reached the step: a reader who got n steps gets
    /// the step now at n + 1 next, and never one they already got. `paused` holds every
    /// reader where they are. The rules of create answer 422 `validation_error` here too, and
    /// so do a step `id` that is no step of this sequence and, for the welcome sequence, a
    /// trigger other than `confirmed` (its `steps` may be empty: the welcome e-mail is its
    /// first step).
    #[oai(path = "/sequences/:id", method = "patch", operation_id = "updateSequence")]
    async fn update(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<SequenceChangesBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<SequenceResponse, Refusal<{ GUARD | BODY | BY_ID | WRITES }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let input = input(body.0.sequence)?;
        let sequence = state
            .db
            .run_after(
                move || sequences::check_changes(&input),
                move |conn, checked| sequences::update(conn, nid, id, &checked),
            )
            .await?;
        Ok(SequenceResponse::Ok(Json(sequence.into())))
    }

    /// Deletes a sequence.
    ///
    /// Its readers stop where they are; the mail they got stays sent. The welcome sequence
    /// cannot be deleted (422 `invalid_state`): remove its steps, or switch the welcome
    /// e-mail off with the newsletter's `welcome_enabled`.
    #[oai(path = "/sequences/:id", method = "delete", operation_id = "deleteSequence")]
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
            .run(move |conn| sequences::delete(conn, nid, id))
            .await?;
        Ok(DeletedResponse::NoContent)
    }

    /// Adds a subscriber to a sequence.
    ///
    /// Whatever its trigger; the first step's wait starts now. A subscriber who is not
    /// active, or who has been in the sequence before (a reader goes through a sequence
    /// once), is 422 `invalid_state`; an id that is no subscriber of the newsletter is 422
    /// `validation_error`.
    #[oai(
        path = "/sequences/:id/subscribers",
        method = "post",
        operation_id = "addSequenceSubscriber"
    )]
    async fn add_reader(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<AddReaderBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<AddedResponse, Refusal<{ GUARD | BODY | BY_ID | RULE | WRITES }>> {
        // An id that names no subscriber of the newsletter (0, another's) is the domain's
        // refusal, under `subscriber_id`.
        let (nid, id, subscriber) = (p.newsletter_id, parse_id(&id.0)?, body.0.subscriber_id);
        let reader = state
            .db
            .run(move |conn| readers::add(conn, nid, id, subscriber))
            .await?;
        Ok(AddedResponse::Created(Json(reader.into())))
    }

    /// Stops a subscriber in a sequence.
    ///
    /// No further step goes to them (a step already handed to the relay is not called
    /// back); one who completed or left stays as they were. A subscriber never in the
    /// sequence is 404.
    #[oai(
        path = "/sequences/:id/subscribers/:subscriber_id",
        method = "delete",
        operation_id = "stopSequenceSubscriber"
    )]
    async fn stop_reader(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        subscriber_id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<ReaderResponse, Refusal<{ GUARD | BY_ID | WRITES }>> {
        let (nid, id, subscriber) = (
            p.newsletter_id,
            parse_id(&id.0)?,
            parse_id(&subscriber_id.0)?,
        );
        let reader = state
            .db
            .run(move |conn| readers::stop(conn, nid, id, subscriber))
            .await?;
        Ok(ReaderResponse::Ok(Json(reader.into())))
    }
}
}
