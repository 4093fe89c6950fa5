//! The dashboard's Memberships page (docs/memberships.md): the paid plan (prices, trial, what
//! paid members get), the owner's Stripe account (a restricted key and the webhook signing
//! secret, stored sealed; the endpoint to register and its events), and the figures (paid
//! members, monthly recurring revenue, new and canceled in 30 days).

use maud::{Markup, html};
use poem::http::StatusCode;
use poem::web::{Data, Path};
use poem::{Body, Request, handler};

use super::layout::{Section, copyable, csrf_field, errors, newsletter_page};
use super::newsletters::{owned, owned_post};
use super::{Ctx, State, WebResult, invalid_fields, render, see_other};
use crate::domain::newsletters::Newsletter;
use crate::domain::newsletters::paid_plans::{
    self, CURRENCIES, Connected, DESCRIPTION_MAX, Plan, PlanInput, money,
};
use crate::domain::subscribers::memberships::{self, Figures};
use crate::domain::subscribers::stripe_events;
use crate::domain::{DomainError, FieldErrors};
use crate::payments::API_VERSION;

fn base(n: &Newsletter) -> String {
    format!("/newsletters/{}/memberships", n.id)
}

/// What the page shows, as stored.
struct Stored {
    plan: Option<Plan>,
    connected: Option<Connected>,
    figures: Figures,
}

async fn stored(state: &State, n: &Newsletter) -> Result<Stored, super::WebError> {
    let nid = n.id;
    Ok(state
        .db
        .run(move |conn| {
            Ok::<_, DomainError>(Stored {
                plan: paid_plans::plan(conn, nid)?,
                connected: paid_plans::connection(conn, nid)?,
                figures: memberships::figures(conn, nid)?,
            })
        })
        .await?)
}

/// A stored price as the form shows it (`5.00`), blank for none.
fn price_typed(amount: Option<i64>, currency: &str) -> String {
    amount.map_or_else(String::new, |a| paid_plans::major_units(a, currency))
}

/// The page again with `e`'s problems (422), the plan fields as `typed` or, without them,
/// as stored.
async fn refused(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    typed: Option<&PlanInput>,
    e: DomainError,
) -> WebResult {
    let problems = invalid_fields(e)?;
    let stored = stored(state, n).await?;
    let typed = typed
        .cloned()
        .unwrap_or_else(|| plan_input(stored.plan.as_ref()));
    render(
        StatusCode::UNPROCESSABLE_ENTITY,
        page(ctx, state, n, &stored, &typed, &problems),
    )
}

fn plan_input(plan: Option<&Plan>) -> PlanInput {
    match plan {
        None => PlanInput {
            currency: "usd".into(),
            ..PlanInput::default()
        },
        Some(p) => PlanInput {
            currency: p.currency.clone(),
            monthly: price_typed(p.monthly_amount, &p.currency),
            yearly: price_typed(p.yearly_amount, &p.currency),
            trial_days: p.trial_days.to_string(),
            description: p.description.clone(),
        },
    }
}

fn page(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    stored: &Stored,
    typed: &PlanInput,
    problems: &FieldErrors,
) -> Markup {
    let endpoint = format!("{}/stripe/webhook", n.site_origin(&state.urls));
    let f = &stored.figures;
    let currency = f.currency.clone().unwrap_or_else(|| "usd".into());
    newsletter_page(
        ctx,
        n,
        Section::Memberships,
        "Memberships",
        html! {
            h1 { "Memberships" }
            p.muted { "Readers pay you directly through your own Stripe account; Broadsheet takes no share. Issues marked " em { "Paid members only" } " show their excerpt and an upgrade box to everyone else." }
            (errors(problems))
            section.panel #figures aria-labelledby="figures-h" {
                h2 #figures-h { "Members" }
                dl.figures {
                    div { dt { "Paid members" } dd #paid-members { (f.paid_members) } }
                    div { dt { "In a free trial" } dd { (f.trialing_members) } }
                    div { dt { "Comped" } dd { (f.comped_members) } }
                    div { dt { "Monthly recurring revenue" } dd #mrr { (money(f.monthly_recurring_revenue, &currency)) } }
                    div { dt { "New paid, last 30 days" } dd { (f.new_paid_last_30_days) } }
                    div { dt { "Canceled, last 30 days" } dd { (f.canceled_last_30_days) } }
                }
            }
            section.panel #plan aria-labelledby="plan-h" {
                h2 #plan-h { "Paid plan" }
                p.muted { "Free membership is always there. Give a monthly price, a yearly one, or both. A changed price applies to new members; those who pay keep their price in Stripe." }
                form.stack method="post" action={ (base(n)) "/plan" } {
                    (csrf_field(ctx))
                    label { "Currency"
                        select name="plan[currency]" {
                            @for (code, _) in CURRENCIES {
                                option value=(code) selected[typed.currency == *code] { (code.to_uppercase()) }
                            }
                        }
                    }
                    label { "Monthly price (blank: none)" input type="text" inputmode="decimal" name="plan[monthly]" value=(typed.monthly) placeholder="5.00" autocomplete="off"; }
                    label { "Yearly price (blank: none)" input type="text" inputmode="decimal" name="plan[yearly]" value=(typed.yearly) placeholder="50.00" autocomplete="off"; }
                    label { "Free trial, in days (0: none)" input type="number" min="0" max=(paid_plans::TRIAL_MAX_DAYS) name="plan[trial_days]" value=(typed.trial_days) autocomplete="off"; }
                    label { "What paid members get" textarea name="plan[description]" rows="3" maxlength=(DESCRIPTION_MAX) { (typed.description) } }
                    button type="submit" { "Save the plan" }
                }
            }
            section.panel #stripe aria-labelledby="stripe-h" {
                h2 #stripe-h { "Stripe" }
                @match &stored.connected {
                    Some(c) => p #stripe-state { "Connected with the key ending in " code { (c.key_hint) } ", since " (c.connected_at.human()) ". Paste new keys below to replace them." },
                    None => p #stripe-state { "Not connected: readers cannot pay yet." },
                }
                ol {
                    li { "In Stripe, under Developers → Webhooks, add an endpoint with this URL, API version " code { (API_VERSION) } ", and these events:"
                        (copyable("stripe-endpoint", "the endpoint URL", &endpoint))
                        ul { @for event in stripe_events::EVENTS { li { code { (event) } } } }
                    }
                    li { "Under Developers → API keys, create a restricted key with write access to Checkout Sessions, Customer portal, Products, Prices and Plans, and read access to Customers and Subscriptions." }
                    li { "Paste the key and the endpoint's signing secret here. Both are stored encrypted and never shown again." }
                }
                form.stack method="post" action={ (base(n)) "/stripe" } {
                    (csrf_field(ctx))
                    label { "Restricted key (rk_…)" input type="password" name="stripe[secret_key]" autocomplete="off" required; }
                    label { "Webhook signing secret (whsec_…)" input type="password" name="stripe[webhook_secret]" autocomplete="off" required; }
                    button type="submit" { "Connect Stripe" }
                }
                @if stored.connected.is_some() {
                    form method="post" action={ (base(n)) "/stripe/disconnect" } {
                        (csrf_field(ctx))
                        button.secondary type="submit" { "Disconnect Stripe" }
                    }
                }
            }
        },
    )
}

#[handler]
pub async fn show(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let stored = stored(state, &n).await?;
    let typed = plan_input(stored.plan.as_ref());
    render(
        StatusCode::OK,
        page(&ctx, state, &n, &stored, &typed, &FieldErrors::new()),
    )
}

#[handler]
pub async fn save_plan(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let typed = PlanInput {
        currency: form.get("plan[currency]").to_string(),
        monthly: form.get("plan[monthly]").to_string(),
        yearly: form.get("plan[yearly]").to_string(),
        trial_days: form.get("plan[trial_days]").to_string(),
        description: form.get("plan[description]").to_string(),
    };
    let (nid, input) = (n.id, typed.clone());
    let saved = state
        .db
        .run(move |conn| {
            let plan = paid_plans::check_plan(&input)?;
            paid_plans::save_plan(conn, nid, &plan)
        })
        .await;
    match saved {
        Ok(()) => {
            ctx.notice_next(req, "The paid plan is saved.");
            see_other(&format!("{}#plan", base(&n)))
        }
        Err(e) => refused(&ctx, state, &n, Some(&typed), e).await,
    }
}

#[handler]
pub async fn connect_stripe(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let (secret, webhook) = (
        form.get("stripe[secret_key]").to_string(),
        form.get("stripe[webhook_secret]").to_string(),
    );
    let (nid, key) = (n.id, state.credentials.clone());
    let connected = state
        .db
        .run(move |conn| {
            let keys = paid_plans::check_keys(&secret, &webhook)?;
            paid_plans::connect(conn, &key, nid, &keys)
        })
        .await;
    match connected {
        Ok(()) => {
            ctx.notice_next(req, "Stripe is connected.");
            see_other(&format!("{}#stripe", base(&n)))
        }
        Err(e) => refused(&ctx, state, &n, None, e).await,
    }
}

#[handler]
pub async fn disconnect_stripe(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, ctx, n) = owned_post(req, state, &id, body).await?;
    let nid = n.id;
    state
        .db
        .run(move |conn| paid_plans::disconnect(conn, nid))
        .await?;
    ctx.notice_next(
        req,
        "Stripe is disconnected: readers cannot pay until it is connected again.",
    );
    see_other(&format!("{}#stripe", base(&n)))
}
