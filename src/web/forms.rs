//! The dashboard's Forms page (docs/growth.md): a newsletter's signup forms to put on any
//! site, each with its fields (name, whether it asks for a name, the tags it gives, button,
//! success message or redirect, the origins that may read its answers, the cost of its
//! proof-of-work), the HTML snippet to paste, and a preview of it.

use maud::{Markup, html};
use poem::http::StatusCode;
use poem::web::{Data, Path};
use poem::{Body, Request, handler};

use super::layout::{Section, csrf_field, errors, newsletter_page};
use super::newsletters::{owned, owned_post, parse_id};
use super::{Ctx, FormData, State, WebResult, invalid_fields, render, see_other};
use crate::domain::FieldErrors;
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::custom_fields::{self, CustomField};
use crate::domain::subscribers::signup_forms::{
    self, BUTTON_MAX, FieldUse, FormInput, MESSAGE_MAX, NAME_MAX, POW_COST_MAX, POW_COST_MIN,
    SignupForm,
};
use crate::http::signup_form::{form_markup, snippet};

fn list_url(n: &Newsletter) -> String {
    format!("/newsletters/{}/forms", n.id)
}

fn form_url(n: &Newsletter, form: &SignupForm) -> String {
    format!("{}/{}", list_url(n), form.id)
}

/// The fields of a form as posted.
fn typed(form: &FormData) -> FormInput {
    FormInput {
        name: form.get("form[name]").to_string(),
        ask_name: form.get("form[ask_name]") == "yes",
        tags: form.get("form[tags]").to_string(),
        button_text: form.get("form[button_text]").to_string(),
        success_message: form.get("form[success_message]").to_string(),
        redirect_url: form.get("form[redirect_url]").to_string(),
        allowed_origins: form.get("form[allowed_origins]").to_string(),
        pow_cost: form.get("form[pow_cost]").to_string(),
        // `form[fields][<id>]`: only the fields the page showed.
        fields: form
            .pairs()
            .filter_map(|(key, value)| {
                let id = key.strip_prefix("form[fields][")?.strip_suffix(']')?;
                Some((id.parse().ok()?, value.to_string()))
            })
            .collect(),
    }
}

/// The form's fields, filled with `typed`, posting to `action`; one choice per custom field
/// of the newsletter (`available`).
fn fields(
    ctx: &Ctx,
    action: &str,
    (typed, available): (&FormInput, &[CustomField]),
    button: &str,
) -> Markup {
    html! {
        form.stack method="post" action=(action) {
            (csrf_field(ctx))
            label { "Name (only you see it)" input type="text" name="form[name]" value=(typed.name) required maxlength=(NAME_MAX); }
            label.check { input type="checkbox" name="form[ask_name]" value="yes" checked[typed.ask_name]; "Ask for a name (optional to fill)" }
            label { "Tags given to those who subscribe (separated by commas)" input type="text" name="form[tags]" value=(typed.tags) autocomplete="off"; }
            @if !available.is_empty() {
                fieldset.form-fields {
                    legend { "Custom fields on the form" }
                    @for field in available {
                        @let usage = typed.use_of(field.id);
                        label {
                            (field.name) " (" (field.field_type.as_str()) ")"
                            select name={ "form[fields][" (field.id) "]" } {
                                @for each in FieldUse::ALL {
                                    option value=(each.as_str()) selected[each.as_str() == usage] {
                                        @match each {
                                            FieldUse::Off => "Not asked",
                                            FieldUse::Optional => "Asked, optional",
                                            FieldUse::Required => "Asked, required",
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            label { "Button" input type="text" name="form[button_text]" value=(typed.button_text) required maxlength=(BUTTON_MAX); }
            label { "Success message" textarea name="form[success_message]" rows="2" maxlength=(MESSAGE_MAX) required { (typed.success_message) } }
            label { "Or send people to this page after they subscribe (optional; forms without JavaScript)" input type="url" name="form[redirect_url]" value=(typed.redirect_url) placeholder="https://example.com/thanks" autocomplete="off"; }
            label { "Sites whose pages show the answer in place (one origin a line, e.g. https://example.com)" textarea name="form[allowed_origins]" rows="2" { (typed.allowed_origins) } }
            label { "Anti-bot work (" (POW_COST_MIN) " to " (POW_COST_MAX) "; higher costs bots more, and slow phones a moment)" input type="number" name="form[pow_cost]" value=(typed.pow_cost) min=(POW_COST_MIN) max=(POW_COST_MAX) required; }
            button type="submit" { (button) }
        }
    }
}

fn list_page(
    ctx: &Ctx,
    n: &Newsletter,
    (forms, available): (&[SignupForm], &[CustomField]),
    typed: &FormInput,
    problems: &FieldErrors,
) -> Markup {
    newsletter_page(
        ctx,
        n,
        Section::Forms,
        "Forms",
        html! {
            h1 { "Signup forms" }
            p.muted { "Put a form on any website: paste its snippet into the page. It works without JavaScript; double opt-in stays on, and bots are kept out without a captcha (docs: growth)." }
            @if forms.is_empty() {
                p.empty { "No forms yet. Your site's own subscribe page works without one." }
            } @else {
                ul.forms {
                    @for form in forms {
                        li { a href=(form_url(n, form)) { (form.name) } @if !form.tags.is_empty() { " " span.muted { "(tags: " (form.tags.join(", ")) ")" } } }
                    }
                }
            }
            section.panel #new-form aria-labelledby="new-form-h" {
                h2 #new-form-h { "New form" }
                (errors(problems))
                (fields(ctx, &list_url(n), (typed, available), "Create the form"))
            }
        },
    )
}

fn form_page(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    (form, available): (&SignupForm, &[CustomField]),
    typed: &FormInput,
    problems: &FieldErrors,
) -> Markup {
    let origin = n.site_origin(&state.urls);
    let code = snippet(form, &origin);
    let action = format!("{origin}/f/{}", form.public_id);
    newsletter_page(
        ctx,
        n,
        Section::Forms,
        &form.name,
        html! {
            p { a href=(list_url(n)) { "← Forms" } }
            h1 { (form.name) }
            section.panel #snippet aria-labelledby="snippet-h" {
                h2 #snippet-h { "Snippet" }
                p.muted { "Paste it into any page. The script line is optional: with it, the anti-bot check runs in the background and the answer shows in place (on the sites listed below)." }
                label { "HTML" textarea #snippet-code readonly rows="8" { (code) } }
                p { "The form also has its own page: " a href=(action) { (action) } }
            }
            section.panel #preview aria-labelledby="preview-h" {
                h2 #preview-h { "Preview" }
                // Shown as readers see it, its fields disabled: nothing to post here.
                fieldset.form-preview disabled { legend.visually-hidden { "Preview of the form" } (form_markup(form, "#", None, None)) }
            }
            section.panel #edit aria-labelledby="edit-h" {
                h2 #edit-h { "Settings" }
                (errors(problems))
                (fields(ctx, &form_url(n, form), (typed, available), "Save the form"))
            }
            form method="post" action={ (form_url(n, form)) "/delete" } {
                (csrf_field(ctx))
                button.secondary type="submit" { "Delete this form" }
                " " span.muted { "Its snippet stops working." }
            }
        },
    )
}

/// The newsletter's forms and custom fields.
async fn forms_of(
    state: &State,
    n: &Newsletter,
) -> Result<(Vec<SignupForm>, Vec<CustomField>), super::WebError> {
    let nid = n.id;
    Ok(state
        .db
        .run(move |conn| {
            let forms = signup_forms::list(conn, nid)?;
            Ok::<_, crate::domain::DomainError>((forms, custom_fields::list(conn, nid)?))
        })
        .await?)
}

/// One form of the newsletter and the newsletter's custom fields.
async fn form_of(
    state: &State,
    n: &Newsletter,
    fid: &str,
) -> Result<(SignupForm, Vec<CustomField>), super::WebError> {
    let (nid, fid) = (n.id, parse_id(fid)?);
    Ok(state
        .db
        .run(move |conn| {
            let form = signup_forms::get(conn, nid, fid)?;
            Ok::<_, crate::domain::DomainError>((form, custom_fields::list(conn, nid)?))
        })
        .await?)
}

/// `GET /newsletters/:id/forms`.
#[handler]
pub async fn list(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let (forms, available) = forms_of(state, &n).await?;
    render(
        StatusCode::OK,
        list_page(
            &ctx,
            &n,
            (&forms, &available),
            &FormInput::new_form(),
            &FieldErrors::new(),
        ),
    )
}

/// `POST /newsletters/:id/forms`: a new form; its page opens.
#[handler]
pub async fn create(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let (nid, input) = (n.id, typed(&form));
    let given = input.clone();
    match state
        .db
        .run(move |conn| signup_forms::create(conn, nid, &given))
        .await
    {
        Ok(created) => {
            ctx.notice_next(
                req,
                "The form is created: paste its snippet into your page.",
            );
            see_other(&form_url(&n, &created))
        }
        Err(e) => {
            let problems = invalid_fields(e)?;
            let (forms, available) = forms_of(state, &n).await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                list_page(&ctx, &n, (&forms, &available), &input, &problems),
            )
        }
    }
}

/// `GET /newsletters/:id/forms/:fid`.
#[handler]
pub async fn show(
    req: &Request,
    Path((id, fid)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let (form, available) = form_of(state, &n, &fid).await?;
    let typed = FormInput::of(&form);
    render(
        StatusCode::OK,
        form_page(
            &ctx,
            state,
            &n,
            (&form, &available),
            &typed,
            &FieldErrors::new(),
        ),
    )
}

/// `POST /newsletters/:id/forms/:fid`: saves the form's settings.
#[handler]
pub async fn update(
    req: &Request,
    Path((id, fid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (posted, ctx, n) = owned_post(req, state, &id, body).await?;
    let (form, available) = form_of(state, &n, &fid).await?;
    let (nid, form_id, input) = (n.id, form.id, typed(&posted));
    let given = input.clone();
    match state
        .db
        .run(move |conn| signup_forms::update(conn, nid, form_id, &given))
        .await
    {
        Ok(saved) => {
            ctx.notice_next(req, "The form is saved.");
            see_other(&form_url(&n, &saved))
        }
        Err(e) => {
            let problems = invalid_fields(e)?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                form_page(&ctx, state, &n, (&form, &available), &input, &problems),
            )
        }
    }
}

/// `POST /newsletters/:id/forms/:fid/delete`.
#[handler]
pub async fn delete(
    req: &Request,
    Path((id, fid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, ctx, n) = owned_post(req, state, &id, body).await?;
    let (form, _) = form_of(state, &n, &fid).await?;
    let (nid, form_id) = (n.id, form.id);
    state
        .db
        .run(move |conn| signup_forms::delete(conn, nid, form_id))
        .await?;
    ctx.notice_next(req, &format!("“{}” is deleted.", form.name));
    see_other(&list_url(&n))
}
