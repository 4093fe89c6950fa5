//! Custom domains in the dashboard: choose the method, submit a domain, see the DNS records
//! to add, verify (the page also answers JSON for polling), remove. Also `/tls/allowed`, which
//! a reverse proxy asks before getting a certificate on demand.

use maud::{Markup, html};
use poem::http::{Method as HttpMethod, StatusCode};
use poem::web::{Data, Json, Path};
use poem::{Body, IntoResponse, Request, Response, handler};
use serde_json::json;

use super::layout::{
    Confirmation, Section, confirmation_page, copy_script, copyable, csrf_field, errors,
    newsletter_page, table_wrap,
};
use super::newsletters::{owned, owned_post, parse_id};
use super::time_zones::shown;
use super::{Ctx, FormData, State, WebError, WebResult, invalid_fields, render, see_other};
use crate::domain::FieldErrors;
use crate::domain::newsletters::Newsletter;
use crate::domain::newsletters::custom_domains::{self, CustomDomain, DnsRecord, Method, Status};

fn base(n: &Newsletter) -> String {
    format!("/newsletters/{}/custom_domains", n.id)
}

/// The first value of `name` in the query string.
fn query_param(req: &Request, name: &str) -> Option<String> {
    url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

fn status_badge(domain: &CustomDomain) -> Markup {
    html! {
        @match domain.status {
            Status::Active => strong.ok { "active" },
            Status::Pending => strong.bad { "pending" },
        }
    }
}

#[handler]
pub async fn index(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let nid = n.id;
    let current = state
        .db
        .run(move |conn| custom_domains::current(conn, nid))
        .await?;
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
            Section::Domains,
            "Custom domains",
            html! {
                h1 { "Custom domains" }
                p.muted { "Serve the public site on your own domain instead of " code { (custom_domains::target_host(&state.urls, &n)) } ". One domain per newsletter." }
                @match &current {
                    Some(d) => {
                        (table_wrap("Custom domains", html! { table {
                            thead { tr { th { "Domain" } th { "Status" } th { "Added" } th { span.visually-hidden { "Actions" } } } }
                            tbody { tr {
                                td { a href={ (base(&n)) "/" (d.id) } { (d.domain) } }
                                td { (status_badge(d)) }
                                td { (shown(d.created_at, &ctx.zone())) }
                                td { (remove_link(&n, d)) }
                            } }
                        } }))
                        @if d.status == Status::Pending {
                            p { a href={ (base(&n)) "/" (d.id) } { "See the DNS records to add and verify them →" } }
                        }
                    }
                    None => {
                        p { "No custom domain yet." }
                        p { a.button href={ (base(&n)) "/choose_method" } { "Add a custom domain" } }
                    }
                }
            },
        ),
    )
}

/// Removing asks first ([`confirm_remove`]): the site moves back to its subdomain at once.
fn remove_link(n: &Newsletter, d: &CustomDomain) -> Markup {
    html! { a.button.danger href={ (base(n)) "/" (d.id) "/remove" } { "Remove…" } }
}

fn choose_page(
    ctx: &Ctx,
    n: &Newsletter,
    state: &State,
    domain: &str,
    method: &str,
    problems: &FieldErrors,
) -> Markup {
    let target = custom_domains::target_host(&state.urls, n);
    newsletter_page(
        ctx,
        n,
        Section::Domains,
        "Add a custom domain",
        html! {
            p { a href=(base(n)) { "← Custom domains" } }
            h1 { "Add a custom domain" }
            (errors(problems))
            form.stack method="post" action=(base(n)) {
                (csrf_field(ctx))
                fieldset {
                    legend { "What kind of domain?" }
                    @for m in Method::ALL {
                        label.check {
                            input type="radio" name="custom_domain[method]" value=(m.as_str()) checked[method == m.as_str()] required;
                            (m.describe())
                        }
                    }
                }
                label {
                    "Domain"
                    input type="text" name="custom_domain[domain]" value=(domain) placeholder="www.example.com" autocomplete="off" autocapitalize="none" spellcheck="false" maxlength="253" required;
                }
                p.muted {
                    "A subdomain gets a CNAME record pointing to " code { (target) } "; an apex domain gets A/AAAA records with its addresses. "
                    "Both get a TXT record that proves the domain is yours."
                }
                button type="submit" { "Add domain" }
            }
        },
    )
}

#[handler]
pub async fn choose_method(
    req: &Request,
    Path(id): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let method = query_param(req, "method")
        .filter(|m| Method::parse(m).is_some())
        .unwrap_or_else(|| Method::Subdomain.as_str().to_string());
    render(
        StatusCode::OK,
        choose_page(&ctx, &n, state, "", &method, &FieldErrors::new()),
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
    let domain = form.get("custom_domain[domain]").to_string();
    let method = form.get("custom_domain[method]").to_string();
    let (nid, urls, d, m) = (n.id, state.urls.clone(), domain.clone(), method.clone());
    match state
        .db
        .run(move |conn| custom_domains::create(conn, &urls, nid, &d, &m))
        .await
    {
        Ok(created) => {
            ctx.notice_next(
                req,
                &format!(
                    "{} is added. Add the DNS records below, then verify.",
                    created.domain
                ),
            );
            see_other(&format!("{}/{}", base(&n), created.id))
        }
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            choose_page(&ctx, &n, state, &domain, &method, &invalid_fields(e)?),
        ),
    }
}

async fn load(
    ctx: &Ctx,
    state: &State,
    id: &str,
    domain_id: &str,
) -> Result<(Newsletter, CustomDomain), WebError> {
    let n = owned(ctx, state, id).await?;
    let (nid, did) = (n.id, parse_id(domain_id)?);
    let domain = state
        .db
        .run(move |conn| custom_domains::get(conn, nid, did))
        .await?;
    Ok((n, domain))
}

fn wants_json(req: &Request) -> bool {
    req.header("Accept")
        .is_some_and(|accept| accept.contains("application/json"))
}

/// The poll answer: `{"id","domain","method","status","records":[{"type","name","value"}],
/// "reason","checked_at","verified_at","url"}`.
fn domain_json(
    n: &Newsletter,
    state: &State,
    d: &CustomDomain,
    records: &[DnsRecord],
) -> serde_json::Value {
    json!({
        "id": d.id,
        "domain": d.domain,
        "method": d.method.as_str(),
        "status": d.status.as_str(),
        "records": records.iter().map(|r| json!({"type": r.kind, "name": r.name, "value": r.value})).collect::<Vec<_>>(),
        "reason": d.reason,
        "checked_at": d.checked_at,
        "verified_at": d.verified_at,
        "url": (d.status == Status::Active).then(|| format!("{}/", n.site_origin(&state.urls))),
    })
}

#[handler]
pub async fn show(
    req: &Request,
    Path((id, domain_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let (n, d) = load(&ctx, state, &id, &domain_id).await?;
    let records = custom_domains::records_to_add(&state.dns, &state.urls, &n, &d).await;
    if wants_json(req) {
        return Ok(Json(domain_json(&n, state, &d, &records)).into_response());
    }
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
            Section::Domains,
            &d.domain,
            html! {
                p { a href=(base(&n)) { "← Custom domains" } }
                h1 { (d.domain) }
                div.panel {
                    p { "Status: " span id="domain-status" { (status_badge(&d)) } }
                    @if d.status == Status::Active {
                        @let url = format!("{}/", n.site_origin(&state.urls));
                        p { "Verified " @if let Some(at) = d.verified_at { (shown(at, &ctx.zone())) } ". Your site answers at " a href=(url) { (url) } "; the archive, the feed, the API's URLs and new e-mails use it." }
                    } @else {
                        @if let Some(reason) = &d.reason {
                            p.reason role="status" { strong { "Not verified yet: " } (reason) }
                            p.muted { "Last checked " @if let Some(at) = d.checked_at { (shown(at, &ctx.zone())) } "." }
                        } @else {
                            p { "Not checked yet. Add the records below, then verify." }
                        }
                    }
                }
                h2 { "DNS records" }
                p.muted { "Add these at your DNS provider. Changes can take up to 24 hours to reach everyone; the certificate for HTTPS is issued automatically once the domain is verified." }
                (table_wrap("DNS records", html! { table.records {
                    thead { tr { th { "Type" } th { "Name" } th { "Value" } } }
                    tbody {
                        @for (i, r) in records.iter().enumerate() {
                            tr {
                                td { (r.kind) }
                                td { (copyable(&format!("record-{i}-name"), "the name", &r.name)) }
                                td { (copyable(&format!("record-{i}-value"), "the value", &r.value)) }
                            }
                        }
                    }
                } }))
                (copy_script())
                p.actions {
                    @if d.status == Status::Pending {
                        form.inline method="post" action={ (base(&n)) "/" (d.id) "/verify" } {
                            (csrf_field(&ctx))
                            button type="submit" { "Verify DNS records" }
                        }
                        " "
                    }
                    (remove_link(&n, &d))
                }
            },
        ),
    )
}

/// `GET /newsletters/:id/custom_domains/:domain_id/remove`: what removing does, and the form
/// that removes.
#[handler]
pub async fn confirm_remove(
    req: &Request,
    Path((id, domain_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let (n, d) = load(&ctx, state, &id, &domain_id).await?;
    let page = format!("{}/{}", base(&n), d.id);
    render(
        StatusCode::OK,
        confirmation_page(
            &ctx,
            &n,
            Confirmation {
                section: Section::Domains,
                title: "Remove custom domain",
                question: format!("Remove {}?", d.domain),
                consequences: html! {
                    "The site moves back to " strong { (custom_domains::target_host(&state.urls, &n)) } " at once: links to " (d.domain) " stop working, and new e-mails, the feed and the API's URLs use the subdomain. The domain can be added again later, and must then be verified again."
                },
                action: &page,
                button: "Remove the domain",
                back: &page,
            },
        ),
    )
}

#[handler]
pub async fn verify(
    req: &Request,
    Path((id, domain_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let (n, d) = load(&ctx, state, &id, &domain_id).await?;
    let checked = custom_domains::verify(&state.db, &state.dns, &state.urls, &n, d.id).await?;
    let notice = match (&checked.status, &checked.reason) {
        (Status::Active, _) => format!("{} is verified and active.", checked.domain),
        (Status::Pending, Some(reason)) => format!("Not verified yet: {reason}"),
        (Status::Pending, None) => "Not verified yet.".to_string(),
    };
    ctx.notice_next(req, &notice);
    see_other(&format!("{}/{}", base(&n), checked.id))
}

/// `DELETE`, or `POST` with `_method=delete` from the page's form.
#[handler]
pub async fn remove(
    req: &Request,
    Path((id, domain_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    if req.method() != HttpMethod::DELETE && !form.get("_method").eq_ignore_ascii_case("delete") {
        return Err(WebError::BadForm(
            "This address only removes a domain (_method=delete).".into(),
        ));
    }
    let (n, d) = load(&ctx, state, &id, &domain_id).await?;
    let (nid, did) = (n.id, d.id);
    let removed = state
        .db
        .run(move |conn| custom_domains::remove(conn, nid, did))
        .await?;
    ctx.notice_next(
        req,
        &format!(
            "{} is removed; the site is back on {}.",
            removed.domain,
            custom_domains::target_host(&state.urls, &n)
        ),
    );
    see_other(&base(&n))
}

/// `GET /tls/allowed?domain=D` for a reverse proxy's on-demand certificates (Caddy's `ask`):
/// 200 for an active custom domain or a live newsletter's `<subdomain>.<public-host>`,
/// 404 for anything else.
#[handler]
pub async fn tls_allowed(req: &Request, Data(state): Data<&State>) -> Response {
    let domain = query_param(req, "domain");
    let allowed = match domain {
        Some(domain) => {
            let urls = state.urls.clone();
            state
                .db
                .run(move |conn| custom_domains::tls_allowed(conn, &urls, &domain))
                .await
                .unwrap_or_else(|e| {
                    eprintln!("tls/allowed: {e}");
                    false
                })
        }
        None => false,
    };
    let (status, text) = if allowed {
        (StatusCode::OK, "allowed\n")
    } else {
        (StatusCode::NOT_FOUND, "not a domain Broadsheet serves\n")
    };
    Response::builder()
        .status(status)
        .content_type("text/plain; charset=utf-8")
        .header("Cache-Control", "no-store")
        .body(text)
}
