//! The dashboard's custom fields page (docs/growth.md, "Custom fields"): the newsletter's
//! fields with their types, a form for a new one, and deleting one. Subscribers' values are
//! set on each subscriber's page, through the API and by CSV columns.

use maud::{Markup, html};
use poem::http::StatusCode;
use poem::web::{Data, Path};
use poem::{Body, Request, handler};

use super::layout::{Section, csrf_field, errors, newsletter_page, table_wrap};
use super::newsletters::{owned, owned_post, parse_id};
use super::{Ctx, State, WebResult, invalid_fields, problems, render, see_other};
use crate::domain::FieldErrors;
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::custom_fields::{
    self, CustomField, FieldInput, FieldType, NAME_MAX,
};

fn list_url(n: &Newsletter) -> String {
    format!("/newsletters/{}/fields", n.id)
}

/// What a type is called on the page.
fn type_label(field_type: FieldType) -> &'static str {
    match field_type {
        FieldType::Text => "Text",
        FieldType::Number => "Number",
        FieldType::Date => "Date",
        FieldType::Boolean => "Yes / no",
        FieldType::Choice => "One of a list",
    }
}

/// The new field's form as typed.
#[derive(Default)]
struct Typed {
    name: String,
    field_type: String,
    options: String,
}

fn page(
    ctx: &Ctx,
    n: &Newsletter,
    fields: &[CustomField],
    typed: &Typed,
    problems: &FieldErrors,
) -> Markup {
    newsletter_page(
        ctx,
        n,
        Section::Subscribers,
        "Custom fields",
        html! {
            p { a href={ "/newsletters/" (n.id) "/subscribers" } { "← Subscribers" } }
            h1 { "Custom fields" }
            p.muted { "Details of your own for each subscriber: set them on a subscriber's page, through the API or by CSV columns of the same name, and put them in issues as merge tags, e.g. " code { "{{ first_name | default: \"friend\" }}" } "." }
            @if fields.is_empty() {
                p.empty { "No fields yet. Every subscriber already has " code { "name" } " and " code { "email" } "." }
            } @else {
                (table_wrap("Custom fields", html! {
                    table #fields {
                        thead { tr { th scope="col" { "Name" } th scope="col" { "Type" } th scope="col" { "Merge tag" } th scope="col" { span.visually-hidden { "Actions" } } } }
                        tbody {
                            @for field in fields {
                                tr {
                                    td { code { (field.name) } }
                                    td {
                                        (type_label(field.field_type))
                                        @if !field.options.is_empty() { ": " (field.options.join(", ")) }
                                    }
                                    td { code { "{{ " (field.name) " }}" } }
                                    td {
                                        form method="post" action={ (list_url(n)) "/" (field.id) "/delete" } {
                                            (csrf_field(ctx))
                                            button.secondary type="submit" aria-label={ "Delete " (field.name) } { "Delete" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }))
                p.muted { "Deleting a field removes every subscriber's value of it." }
            }
            section.panel #new-field aria-labelledby="new-field-h" {
                h2 #new-field-h { "New field" }
                (errors(problems))
                form.stack method="post" action=(list_url(n)) {
                    (csrf_field(ctx))
                    label { "Name (lowercase letters, digits and underscores, e.g. first_name)" input type="text" name="field[name]" value=(typed.name) required maxlength=(NAME_MAX) pattern="[a-z][a-z0-9_]*" autocomplete="off"; }
                    label { "Type"
                        select name="field[type]" {
                            @for kind in FieldType::ALL {
                                option value=(kind.as_str()) selected[typed.field_type == kind.as_str()] { (type_label(*kind)) }
                            }
                        }
                    }
                    label { "Options, for one of a list (one a line)" textarea name="field[options]" rows="3" { (typed.options) } }
                    button type="submit" { "Add the field" }
                }
            }
        },
    )
}

/// The newsletter's custom fields (for this page and each subscriber's).
pub(super) async fn fields_of(
    state: &State,
    n: &Newsletter,
) -> Result<Vec<CustomField>, super::WebError> {
    let nid = n.id;
    Ok(state
        .db
        .run(move |conn| custom_fields::list(conn, nid))
        .await?)
}

/// `GET /newsletters/:id/fields`.
#[handler]
pub async fn list(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let fields = fields_of(state, &n).await?;
    render(
        StatusCode::OK,
        page(&ctx, &n, &fields, &Typed::default(), &FieldErrors::new()),
    )
}

/// `POST /newsletters/:id/fields`: a new field.
#[handler]
pub async fn create(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let typed = Typed {
        name: form.get("field[name]").to_string(),
        field_type: form.get("field[type]").to_string(),
        options: form.get("field[options]").to_string(),
    };
    let input = FieldInput {
        name: Some(typed.name.clone()),
        field_type: Some(typed.field_type.clone()),
        options: Some(
            typed
                .options
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect(),
        ),
    };
    let nid = n.id;
    match state
        .db
        .run(move |conn| custom_fields::create(conn, nid, &input))
        .await
    {
        Ok(field) => {
            ctx.notice_next(req, &format!("The field {} is added.", field.name));
            see_other(&list_url(&n))
        }
        Err(e) => {
            let problems = invalid_fields(e)?;
            let fields = fields_of(state, &n).await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                page(&ctx, &n, &fields, &typed, &problems),
            )
        }
    }
}

/// `POST /newsletters/:id/fields/:fid/delete`.
#[handler]
pub async fn delete(
    req: &Request,
    Path((id, fid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, ctx, n) = owned_post(req, state, &id, body).await?;
    let (nid, fid) = (n.id, parse_id(&fid)?);
    match state
        .db
        .run(move |conn| custom_fields::delete(conn, nid, fid))
        .await
    {
        Ok(field) => {
            ctx.notice_next(req, &format!("The field {} is deleted.", field.name));
            see_other(&list_url(&n))
        }
        // Named by an unsent issue's audience: the page again, saying which.
        Err(e) => {
            let problems = problems(e)?;
            let fields = fields_of(state, &n).await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                page(&ctx, &n, &fields, &Typed::default(), &problems),
            )
        }
    }
}
