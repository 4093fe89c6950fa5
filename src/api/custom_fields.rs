//! Custom fields: list, create, update, delete (docs/growth.md, "Custom fields").

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, Tags};

use super::common::parse_id;
use super::fields::{ChoiceOption, CustomFieldName, CustomFieldType, Field, Id};
use super::statuses::{BODY, BY_ID, GUARD, RULE, Refusal, WRITES};
use super::{ApiKeyAuth, Principal, State};
use crate::domain::subscribers::custom_fields::{self, CustomField, FieldInput};

#[derive(Tags)]
enum ApiTags {
    /// The newsletter's own details of each subscriber, for forms, segments and merge tags.
    Fields,
}

/// A custom field.
#[derive(Debug, Object)]
#[oai(example)]
pub struct FieldObject {
    pub id: i64,
    /// The name merge tags (`{{ first_name }}`), CSV columns and the subscriber's `fields`
    /// use.
    pub name: String,
    /// `text`, `number`, `date`, `boolean` or `choice`.
    #[oai(rename = "type")]
    pub field_type: String,
    /// The options of a `choice`; empty for the other types.
    pub options: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<CustomField> for FieldObject {
    fn from(f: CustomField) -> Self {
        FieldObject {
            id: f.id,
            name: f.name,
            field_type: f.field_type.as_str().to_string(),
            options: f.options,
            created_at: f.created_at.to_string(),
            updated_at: f.updated_at.to_string(),
        }
    }
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct FieldList {
    pub fields: Vec<FieldObject>,
}

/// A new field.
#[derive(Debug, Object)]
pub struct NewFieldFields {
    /// A lowercase letter, then lowercase letters, digits and underscores, at most 40
    /// characters; not a subscriber's own detail (`email`, `name`, `tags`, ...).
    pub name: Field<CustomFieldName>,
    /// `text`, `number`, `date`, `boolean` or `choice`; it cannot change later.
    #[oai(rename = "type")]
    pub field_type: Field<CustomFieldType>,
    /// For a `choice`: 1-50 options of 1-100 characters (ignored for the other types).
    #[oai(nullable)]
    pub options: Option<Vec<Field<ChoiceOption>>>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct NewFieldBody {
    pub field: NewFieldFields,
}

impl From<NewFieldBody> for FieldInput {
    fn from(body: NewFieldBody) -> Self {
        FieldInput {
            name: Some(body.field.name.into()),
            field_type: Some(body.field.field_type.into()),
            options: options(body.field.options),
        }
    }
}

/// A field's changes: the name, or a choice's options; absent parts stay as they are.
#[derive(Debug, Object)]
pub struct FieldChanges {
    /// As on create.
    #[oai(nullable)]
    pub name: Option<Field<CustomFieldName>>,
    /// A choice's options, as on create. A value no longer listed stays on the subscribers
    /// who have it until changed.
    #[oai(nullable)]
    pub options: Option<Vec<Field<ChoiceOption>>>,
}

#[derive(Debug, Object)]
#[oai(example)]
pub struct FieldChangesBody {
    pub field: FieldChanges,
}

impl From<FieldChangesBody> for FieldInput {
    fn from(body: FieldChangesBody) -> Self {
        FieldInput {
            name: body.field.name.map(String::from),
            field_type: None,
            options: options(body.field.options),
        }
    }
}

fn options(given: Option<Vec<Field<ChoiceOption>>>) -> Option<Vec<String>> {
    given.map(|options| options.into_iter().map(String::from).collect())
}

#[derive(ApiResponse)]
pub enum ListResponse {
    #[oai(status = 200)]
    Ok(Json<FieldList>),
}

#[derive(ApiResponse)]
pub enum CreatedResponse {
    #[oai(status = 201)]
    Created(Json<FieldObject>),
}

#[derive(ApiResponse)]
pub enum UpdatedResponse {
    #[oai(status = 200)]
    Ok(Json<FieldObject>),
}

#[derive(ApiResponse)]
pub enum DeletedResponse {
    #[oai(status = 204)]
    NoContent,
}

pub struct FieldsApi;

rate_limited_api! {
    "ApiTags::Fields",
impl FieldsApi {
    /// The newsletter's custom fields.
    ///
    /// Oldest first; a newsletter has at most 30.
    #[oai(path = "/fields", method = "get", operation_id = "listFields")]
    async fn list(
        &self,
        _auth: ApiKeyAuth,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<ListResponse, Refusal<{ GUARD }>> {
        let nid = p.newsletter_id;
        let rows = state
            .db
            .run(move |conn| custom_fields::list(conn, nid))
            .await?;
        Ok(ListResponse::Ok(Json(FieldList {
            fields: rows.into_iter().map(Into::into).collect(),
        })))
    }

    /// Defines a custom field.
    ///
    /// `{"field": {"name": "first_name", "type": "text"}}`; a `choice` lists its `options`.
    /// A name already used, or past 30 fields, is 422.
    #[oai(path = "/fields", method = "post", operation_id = "createField")]
    async fn create(
        &self,
        _auth: ApiKeyAuth,
        body: Json<NewFieldBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<CreatedResponse, Refusal<{ GUARD | BODY | WRITES }>> {
        let (nid, input) = (p.newsletter_id, FieldInput::from(body.0));
        let field = state
            .db
            .run(move |conn| custom_fields::create(conn, nid, &input))
            .await?;
        Ok(CreatedResponse::Created(Json(field.into())))
    }

    /// Renames a custom field or changes a choice's options.
    ///
    /// Merge tags and CSV columns use the new name from then on. The type cannot change:
    /// delete the field and make a new one.
    #[oai(path = "/fields/:id", method = "patch", operation_id = "updateField")]
    async fn update(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        body: Json<FieldChangesBody>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<UpdatedResponse, Refusal<{ GUARD | BODY | BY_ID | WRITES }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let input = FieldInput::from(body.0);
        let field = state
            .db
            .run(move |conn| custom_fields::update(conn, nid, id, &input))
            .await?;
        Ok(UpdatedResponse::Ok(Json(field.into())))
    }

    /// Deletes a custom field.
    ///
    /// Every subscriber's value of it goes too (the field is gone at once; its values are
    /// deleted in the background). A merge tag naming it then names no field: an issue with
    /// one is refused at send, as a misspelt tag is, until the tag is changed. A field the
    /// audience of an issue not yet sent names is refused (422 `invalid_state`).
    #[oai(path = "/fields/:id", method = "delete", operation_id = "deleteField")]
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
            .run(move |conn| custom_fields::delete(conn, nid, id))
            .await?;
        Ok(DeletedResponse::NoContent)
    }
}
}
