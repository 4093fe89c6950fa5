//! The operator page (`/operator`): every newsletter of the installation with its owner, tier,
//! status and subscriber count, the pending upgrade requests first, and forms that set a tier
//! or a status through the CLI's own domain functions. For anyone but an operator it does not
//! exist (404); signed out, it asks to sign in like every dashboard page. Also the send
//! page's way on when the tier refuses sending. docs/operator.md.

use maud::{Markup, html};
use poem::web::{Data, Query};
use poem::{Body, Request, handler, http::StatusCode};
use serde::Deserialize;

use super::layout::{csrf_field, errors, page, table_wrap};
use super::{Ctx, FormData, State, WebError, WebResult, invalid_fields, render, see_other};
use crate::clock::Timestamp;
use crate::domain::newsletters::operators::{self, Listed, Overview, PAGE_PATH};
use crate::domain::newsletters::{self, Newsletter, Status, Tier};
use crate::domain::values::pagination::Cursor;
use crate::domain::{DomainError, DomainResult, FieldErrors};

/// Where the tier form posts.
const TIER_PATH: &str = "/operator/tier";
/// Where the status form posts.
const STATUS_PATH: &str = "/operator/status";

#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    cursor: Option<String>,
}

/// `GET /operator`: the list, from its start or from `?cursor=`.
#[handler]
pub async fn show(
    req: &Request,
    Query(params): Query<ListParams>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let user_id = ctx.user()?.id;
    let overview = state
        .db
        .run(move |conn| {
            operators::require(conn, user_id)?;
            let cursor = match params.cursor.as_deref() {
                Some(text) if !text.trim().is_empty() => Some(Cursor::parse(text)?),
                _ => None,
            };
            operators::overview(conn, cursor)
        })
        .await?;
    render(
        StatusCode::OK,
        operator_page(&ctx, &overview, &FieldErrors::new()),
    )
}

/// `POST /operator/tier` (`subdomain`, `tier`, optional `return_to`): `broadsheet tier`.
#[handler]
pub async fn set_tier(req: &Request, body: Body, Data(state): Data<&State>) -> WebResult {
    change(req, body, state, "tier", |conn, subdomain, value| {
        let tier = Tier::parse(value.trim())
            .ok_or_else(|| DomainError::invalid("tier", "must be free, pending or paid"))?;
        let n = newsletters::set_tier(conn, subdomain, tier).map_err(unknown_subdomain)?;
        Ok(format!("{}: tier {}", n.subdomain, n.tier))
    })
    .await
}

/// `POST /operator/status` (`subdomain`, `status`): `broadsheet status`.
#[handler]
pub async fn set_status(req: &Request, body: Body, Data(state): Data<&State>) -> WebResult {
    change(req, body, state, "status", |conn, subdomain, value| {
        let status = Status::parse(value.trim())
            .ok_or_else(|| DomainError::invalid("status", "must be active, paused or cancelled"))?;
        let n = newsletters::set_status(conn, subdomain, status).map_err(unknown_subdomain)?;
        Ok(format!("{}: status {}", n.subdomain, n.status))
    })
    .await
}

/// A subdomain the form named that no newsletter has: a message on the page, not a 404 (the
/// operator page itself exists).
fn unknown_subdomain(e: DomainError) -> DomainError {
    match e {
        DomainError::NotFound(_) => DomainError::invalid("subdomain", "is no newsletter's"),
        other => other,
    }
}

/// A change posted by an operator: CSRF first, then the operator check (404 for anyone
/// else, before the form's values are looked at), then `apply` with the newsletter's
/// subdomain and the posted value of `field`. Bad values show the page again with the
/// message; nothing changed.
async fn change(
    req: &Request,
    body: Body,
    state: &State,
    field: &'static str,
    apply: impl FnOnce(&mut rusqlite::Connection, &str, &str) -> DomainResult<String> + Send + 'static,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let user_id = ctx.user()?.id;
    let (subdomain, value) = (
        form.get("subdomain").to_string(),
        form.get(field).to_string(),
    );
    let outcome = state
        .db
        .run(move |conn| {
            operators::require(conn, user_id)?;
            Ok::<_, DomainError>(apply(conn, &subdomain, &value))
        })
        .await?;
    match outcome {
        Ok(done) => {
            ctx.notice_next(req, &done);
            see_other(return_to(form.get("return_to")))
        }
        Err(e) => {
            let problems = invalid_fields(e)?;
            let overview = state
                .db
                .run(move |conn| operators::overview(conn, None))
                .await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                operator_page(&ctx, &overview, &problems),
            )
        }
    }
}

/// Where a change goes back to: a dashboard page of a newsletter (the send page's one-click
/// upgrade), else the operator page. Only a local path, never another site.
fn return_to(asked: &str) -> &str {
    let local = asked.starts_with("/newsletters/")
        && !asked.contains("//")
        && !asked.contains('\\')
        && asked.chars().all(|c| c.is_ascii_graphic());
    if local { asked } else { PAGE_PATH }
}

fn operator_page(ctx: &Ctx, overview: &Overview, problems: &FieldErrors) -> Markup {
    page(
        ctx,
        "Operator",
        false,
        html! {
            h1 { "Operator" }
            p.muted { "Every newsletter of this Broadsheet installation. Only operators see this page: the first account, and those made with " code { "broadsheet operator grant EMAIL" } ". A tier or status set here is what " code { "broadsheet tier" } " and " code { "broadsheet status" } " set; sending e-mail needs the paid tier." }
            (errors(problems))
            section #pending aria-labelledby="pending-title" {
                h2 #pending-title { "Upgrade requests (" (overview.pending_total) ")" }
                @if overview.pending.is_empty() {
                    p.empty { "No newsletter is waiting for the paid tier." }
                } @else {
                    (table_wrap("Upgrade requests", html! { table.pending {
                        thead { tr { th { "Newsletter" } th { "Owner" } th { "Requested" } th { "Subscribers" } th { "Answer" } } }
                        tbody {
                            @for n in &overview.pending {
                                tr data-subdomain=(n.subdomain) {
                                    td { (n.name) br; code { (n.subdomain) } }
                                    td { (n.owner_email) }
                                    td { (requested(n.upgrade_requested_at)) }
                                    td { (n.subscribers) }
                                    td {
                                        (tier_button(ctx, &n.subdomain, Tier::Paid, "Make paid", PAGE_PATH, false))
                                        " "
                                        (tier_button(ctx, &n.subdomain, Tier::Free, "Keep free", PAGE_PATH, true))
                                    }
                                }
                            }
                        }
                    } }))
                    @if overview.pending_total > overview.pending.len() as i64 {
                        p.muted { "The oldest " (overview.pending.len()) " are shown; answer them to see the others." }
                    }
                }
            }
            section #newsletters aria-labelledby="newsletters-title" {
                h2 #newsletters-title { "Newsletters" }
                @if overview.rows.is_empty() {
                    p.empty { "No newsletter yet." }
                } @else {
                    (table_wrap("All newsletters", html! { table.operator {
                        thead { tr { th { "Newsletter" } th { "Owner" } th { "Subscribers" } th { "Tier" } th { "Status" } } }
                        tbody {
                            @for n in &overview.rows { (row(ctx, n)) }
                        }
                    } }))
                }
                nav.pager aria-label="Pages" {
                    @if overview.page > 1 { a href=(PAGE_PATH) { "← First page" } }
                    span.muted { "Page " (overview.page) }
                    @if let Some(next) = overview.next_cursor {
                        a rel="next" href={ (PAGE_PATH) "?cursor=" (next.encode()) } { "Older →" }
                    }
                }
            }
        },
    )
}

/// One newsletter of the list, with its tier and status forms.
fn row(ctx: &Ctx, n: &Listed) -> Markup {
    html! {
        tr data-subdomain=(n.subdomain) data-tier=(n.tier) data-status=(n.status) {
            td { (n.name) br; code { (n.subdomain) } }
            td { (n.owner_email) }
            td data-subscribers=(n.subscribers) { (n.subscribers) }
            td {
                @if n.upgrade_pending() {
                    p.pending { strong { "Upgrade requested" } " " (requested(n.upgrade_requested_at)) }
                }
                (choice(ctx, TIER_PATH, "tier", &n.subdomain, &format!("Tier of {}", n.name), Tier::ALL.iter().map(|t| t.as_str()), n.tier.as_str()))
            }
            td {
                (choice(ctx, STATUS_PATH, "status", &n.subdomain, &format!("Status of {}", n.name), Status::ALL.iter().map(|s| s.as_str()), n.status.as_str()))
            }
        }
    }
}

/// A small form choosing one of `values` for `field`, `current` selected.
fn choice<'a>(
    ctx: &Ctx,
    action: &str,
    field: &str,
    subdomain: &str,
    label: &str,
    values: impl Iterator<Item = &'a str>,
    current: &str,
) -> Markup {
    html! {
        form.inline-form method="post" action=(action) {
            (csrf_field(ctx))
            input type="hidden" name="subdomain" value=(subdomain);
            select name=(field) aria-label=(label) {
                @for value in values {
                    option value=(value) selected[value == current] { (value) }
                }
            }
            button type="submit" { "Set" }
        }
    }
}

/// A one-click tier change of `subdomain`, back to `then` afterwards; `secondary` for the
/// lesser of two buttons.
fn tier_button(
    ctx: &Ctx,
    subdomain: &str,
    tier: Tier,
    label: &str,
    then: &str,
    secondary: bool,
) -> Markup {
    html! {
        form.inline method="post" action=(TIER_PATH) {
            (csrf_field(ctx))
            input type="hidden" name="subdomain" value=(subdomain);
            input type="hidden" name="tier" value=(tier);
            input type="hidden" name="return_to" value=(then);
            button.secondary[secondary] type="submit" { (label) }
        }
    }
}

fn requested(at: Option<Timestamp>) -> String {
    match at {
        Some(at) => format!("on {}", at.date()),
        None => "(set pending by the operator)".to_string(),
    }
}

/// The way on from a send refused for the tier: an operator makes the newsletter paid in
/// one click (back to `here`) or opens the operator page; an owner requests the upgrade, or
/// reads when it was requested. Nothing for a paid newsletter.
pub async fn tier_next_steps(
    state: &State,
    ctx: &Ctx,
    n: &Newsletter,
    here: &str,
) -> Result<Markup, WebError> {
    if n.tier == Tier::Paid {
        return Ok(html! {});
    }
    let id = n.id;
    let requested_at = state
        .db
        .run(move |conn| operators::upgrade_requested_at(conn, id))
        .await?;
    Ok(html! {
        @if n.tier != Tier::Paid {
            div.panel #tier-next-steps {
                @if ctx.operator {
                    p { "You are an operator of this installation: make this newsletter paid, then send." }
                    (tier_button(ctx, &n.subdomain, Tier::Paid, "Make this newsletter paid", here, false))
                    p.muted { "Or see every newsletter on the " a href=(PAGE_PATH) { "operator page" } "." }
                } @else if n.tier == Tier::Pending {
                    p #upgrade-requested {
                        @match requested_at {
                            Some(at) => { "Upgrade requested on " (at.date()) ": the operator has been told. " }
                            None => { "An upgrade is pending. " }
                        }
                        "Sending works once the operator sets the tier to paid."
                    }
                } @else {
                    p { "Sending needs the paid tier, which the operator of this Broadsheet installation grants. Ask for it:" }
                    form.inline method="post" action={ "/newsletters/" (n.id) "/settings/upgrade" } {
                        (csrf_field(ctx))
                        button type="submit" { "Request an upgrade" }
                    }
                    p.muted { "The operator is told by e-mail; you can write and publish on the site meanwhile." }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_returns_only_to_a_newsletter_page_of_this_dashboard() {
        assert_eq!(
            return_to("/newsletters/4/issues/9/send"),
            "/newsletters/4/issues/9/send"
        );
        for elsewhere in [
            "",
            "https://evil.example/newsletters/1",
            "//evil.example/newsletters/",
            "/newsletters//evil.example",
            "/newsletters/\\evil.example",
            "/newsletters/1 x",
            "/account",
        ] {
            assert_eq!(return_to(elsewhere), PAGE_PATH, "{elsewhere:?}");
        }
    }
}
