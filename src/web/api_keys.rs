//! API keys in the dashboard: list, create (the key is shown once), revoke.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::layout::{
    API_REFERENCE, Confirmation, Section, confirmation_page, csrf_field, errors, field,
    newsletter_page, page, table_wrap,
};
use super::newsletters::{owned, owned_post, parse_id};
use super::time_zones::shown;
use super::{Ctx, State, WebResult, invalid_fields, render, see_other};
use crate::domain::FieldErrors;
use crate::domain::accounts::api_keys::{self, Permission};
use crate::domain::newsletters::Newsletter;

#[handler]
pub async fn index(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let nid = n.id;
    let keys = state.db.run(move |conn| api_keys::list(conn, nid)).await?;
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
            Section::ApiKeys,
            "API keys",
            html! {
                h1 { "API keys" }
                p.muted { "Keys let scripts use the REST API at " code { (state.urls.service("/api/v1")) } ". Each key acts on this newsletter only." }
                p #api-reference { a href=(API_REFERENCE) { "Read the API reference" } ": every operation with its fields and answers, to try out with a key." }
                @if keys.is_empty() {
                    p { "No keys yet." }
                } @else {
                    (table_wrap("API keys", html! { table {
                        thead { tr { th { "Name" } th { "Prefix" } th { "Permissions" } th { "Created" } th { "Last used" } th { span.visually-hidden { "Actions" } } } }
                        tbody {
                            @for key in &keys {
                                tr {
                                    td { (key.name) }
                                    td { code { (key.prefix) } }
                                    td { (key.permissions.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")) }
                                    td { (shown(key.created_at, &ctx.zone())) }
                                    td { @if let Some(at) = key.last_used_at { (shown(at, &ctx.zone())) } @else { "never" } }
                                    td {
                                        a.button.danger href={ "/newsletters/" (n.id) "/api_keys/" (key.id) "/revoke" } { "Revoke…" }
                                    }
                                }
                            }
                        }
                    } }))
                }
                p { a.button href={ "/newsletters/" (n.id) "/api_keys/new" } { "New API key" } }
            },
        ),
    )
}

fn new_page(
    ctx: &Ctx,
    n: &Newsletter,
    name: &str,
    chosen: &[String],
    problems: &FieldErrors,
) -> Markup {
    page(
        ctx,
        "New API key",
        true,
        html! {
            p { a href={ "/newsletters/" (n.id) "/api_keys" } { "← API keys" } }
            h1 { "New API key" }
            (errors(problems))
            form.stack method="post" action={ "/newsletters/" (n.id) "/api_keys" } {
                (csrf_field(ctx))
                (field("Name", "text", "api_key[name]", name, "off", true))
                fieldset {
                    legend { "Permissions" }
                    @for p in Permission::ALL {
                        label.check {
                            input type="checkbox" name="api_key[permissions][]" value=(p.as_str()) checked[chosen.iter().any(|c| c == p.as_str())];
                            (p.as_str())
                        }
                    }
                }
                button type="submit" { "Create key" }
            }
        },
    )
}

#[handler]
pub async fn new_form(
    req: &Request,
    Path(id): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    render(
        StatusCode::OK,
        new_page(&ctx, &n, "", &["read".to_string()], &FieldErrors::new()),
    )
}

#[handler]
pub async fn create(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let (name, chosen) = (
        form.get("api_key[name]").to_string(),
        form.all("api_key[permissions][]"),
    );
    let (nid, key_name, permissions) = (n.id, name.clone(), chosen.clone());
    match state
        .db
        .run(move |conn| api_keys::create(conn, nid, &key_name, &permissions))
        .await
    {
        Ok((key, secret)) => render(
            StatusCode::OK,
            page(
                &ctx,
                "Your new API key",
                true,
                html! {
                    h1 { "Your new API key" }
                    p { strong { "Copy it now: " } "this is the only time the full key is shown. Broadsheet keeps only a hash of it." }
                    code.key id="api-key" { (secret) }
                    p { button.secondary type="button" data-copy="#api-key" hidden { "Copy the key" } }
                    p.muted { "Name: " (key.name) " · Permissions: " (key.permissions.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")) }
                    p { "Try it: " }
                    pre.panel.try-it #try-it { "curl -H \"Authorization: Bearer " (secret) "\" " (state.urls.service("/api/v1/newsletter")) }
                    p { button.secondary type="button" data-copy="#try-it" hidden { "Copy the command" } }
                    p { "What else it can do: " a href=(API_REFERENCE) { "the API reference" } "." }
                    p { a.button href={ "/newsletters/" (n.id) "/api_keys" } { "Done" } }
                    script src="/assets/widgets.js" defer {}
                },
            ),
        ),
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            new_page(&ctx, &n, &name, &chosen, &invalid_fields(e)?),
        ),
    }
}

/// `GET /newsletters/:id/api_keys/:key_id/revoke`: asks before revoking, as every other
/// destructive action does (scripts using the key stop working at once).
#[handler]
pub async fn confirm_revoke(
    req: &Request,
    Path((id, key_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let (nid, key_id) = (n.id, parse_id(&key_id)?);
    let key = state
        .db
        .run(move |conn| api_keys::get(conn, nid, key_id))
        .await?;
    let list = format!("/newsletters/{nid}/api_keys");
    render(
        StatusCode::OK,
        confirmation_page(
            &ctx,
            &n,
            Confirmation {
                section: Section::ApiKeys,
                title: "Revoke API key",
                question: format!("Revoke {}?", key.name),
                consequences: html! {
                    "The key starting " code { (key.prefix) } " stops working at once: every script or integration that uses it gets 401 from then on. This cannot be undone; a new key can be created at any time."
                },
                action: &format!("{list}/{}", key.id),
                button: "Revoke the key",
                back: &list,
            },
        ),
    )
}

#[handler]
pub async fn revoke(
    req: &Request,
    Path((id, key_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, ctx, n) = owned_post(req, state, &id, body).await?;
    let (nid, key_id) = (n.id, parse_id(&key_id)?);
    state
        .db
        .run(move |conn| api_keys::revoke(conn, nid, key_id))
        .await?;
    ctx.notice_next(req, "The key is revoked: it no longer works.");
    see_other(&format!("/newsletters/{nid}/api_keys"))
}
