//! Newsletter creation (with a preview of the subdomain it will get), the onboarding steps
//! (numbered while the newsletter is not live yet), the list of the owner's newsletters with
//! their state, and the newsletter's home with its next steps.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::layout::{Section, csrf_field, errors, field, newsletter_page, page};
use super::{Ctx, FormData, State, WebError, WebResult, invalid_fields, render, see_other};
use crate::domain::FieldErrors;
use crate::domain::newsletters::{
    self, ContentTone, Frequency, NewNewsletter, Newsletter, NewsletterLength, Preferences,
};
use crate::domain::reports::overview::{self, NextStep, Summary};
use crate::http::plural::count;

/// Path ids that are not numbers are simply not found.
pub fn parse_id(raw: &str) -> Result<i64, WebError> {
    raw.parse().map_err(|_| WebError::NotFound)
}

/// The signed-in user's newsletter `raw_id`, or 404.
pub async fn owned(ctx: &Ctx, state: &State, raw_id: &str) -> Result<Newsletter, WebError> {
    let (owner, id) = (ctx.user()?.id, parse_id(raw_id)?);
    let n = state
        .db
        .run(move |conn| newsletters::get_owned(conn, owner, id))
        .await?;
    ctx.on_newsletter(&n);
    Ok(n)
}

/// A form posted to one of the signed-in user's newsletters: the form, with its CSRF token
/// checked before anything else, the context, and the newsletter (404 for anyone else's).
pub async fn owned_post(
    req: &Request,
    state: &State,
    raw_id: &str,
    body: Body,
) -> Result<(FormData, Ctx, Newsletter), WebError> {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let n = owned(&ctx, state, raw_id).await?;
    Ok((form, ctx, n))
}

#[handler]
pub async fn index(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let owner = ctx.user()?.id;
    let list = state
        .db
        .run(move |conn| {
            newsletters::list_owned(conn, owner)?
                .into_iter()
                .map(|n| Ok((overview::summary(conn, n.id)?, n)))
                .collect::<Result<Vec<_>, crate::domain::DomainError>>()
        })
        .await?;
    render(
        StatusCode::OK,
        page(
            &ctx,
            "Your newsletters",
            false,
            html! {
                h1 { "Your newsletters" }
                @if list.is_empty() {
                    p { "You have no newsletter yet. Create the first one: it takes a minute." }
                } @else {
                    ul.cards {
                        @for (summary, n) in &list {
                            li.newsletter {
                                a href={ "/newsletters/" (n.id) } { strong { (n.name) } }
                                br;
                                span.muted { (n.links(&state.urls).home) }
                                p.state {
                                    span class={ "status status-" (n.status) } { (n.status) }
                                    " " span.status { (n.tier) " tier" }
                                    @if n.live_at.is_none() { " " span.status { "setup not finished" } }
                                }
                                p.figures { (summary_line(summary)) }
                            }
                        }
                    }
                }
                p { a.button href="/newsletters/new" { "New newsletter" } }
            },
        ),
    )
}

/// "3 subscribers · 1 draft · 2 sent": a newsletter's figures in a line.
fn summary_line(s: &Summary) -> String {
    let mut parts = vec![count(s.subscribers, "subscriber", "subscribers")];
    if s.issues() == 0 {
        parts.push("no issues yet".to_string());
    }
    for (n, one, many) in [
        (s.unsent, "draft", "drafts"),
        (s.scheduled, "scheduled", "scheduled"),
        (s.sent, "sent", "sent"),
    ] {
        if n > 0 {
            parts.push(count(n, one, many));
        }
    }
    parts.join(" · ")
}

/// The three onboarding steps, `current` (1-based) marked, the earlier ones done.
fn steps(current: usize) -> Markup {
    const STEPS: [&str; 3] = ["Name and sender", "How often", "Audience and voice"];
    html! {
        nav.steps aria-label="Setup" {
            p.muted { "Step " (current) " of " (STEPS.len()) }
            ol {
                @for (i, step) in STEPS.iter().enumerate() {
                    li aria-current=[(i + 1 == current).then_some("step")] class=[(i + 1 < current).then_some("done")] { (step) }
                }
            }
        }
    }
}

/// `preview`: the site's address for the name typed, when there is one.
fn new_page(
    ctx: &Ctx,
    form: &NewNewsletter,
    preview: Option<&str>,
    problems: &FieldErrors,
) -> Markup {
    page(
        ctx,
        "New newsletter",
        true,
        html! {
            (steps(1))
            h1 { "New newsletter" }
            (errors(problems))
            form.stack method="post" action="/newsletters" {
                (csrf_field(ctx))
                (field("Name", "text", "newsletter[name]", &form.name, "off", true))
                p.muted #subdomain-preview data-subdomain-url="/newsletters/subdomain" {
                    span data-subdomain-shown hidden[preview.is_none()] {
                        "Its site will be at " strong data-subdomain { (preview.unwrap_or_default()) } ". "
                    }
                    "The address is made from the name: lowercase letters, digits and hyphens, with a number added if it is taken."
                }
                (field("Tagline", "text", "newsletter[tagline]", &form.tagline, "off", false))
                (field("Keywords (comma-separated)", "text", "newsletter[keywords]", &form.keywords, "off", false))
                (field("From name", "text", "newsletter[from_name]", &form.from_name, "name", false))
                (field("From e-mail address", "email", "newsletter[from_email]", &form.from_email, "email", false))
                button type="submit" { "Create newsletter" }
            }
            script src="/assets/widgets.js" defer {}
        },
    )
}

/// `GET /newsletters/subdomain?name=…`: the subdomain and site address a newsletter of that
/// name would get now, as JSON for the create form's live preview.
#[handler]
pub async fn subdomain_preview(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    ctx.user()?;
    let name = url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "name")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let subdomain = state
        .db
        .run(move |conn| newsletters::subdomain_for(conn, &name))
        .await?;
    let body = serde_json::json!({
        "subdomain": subdomain,
        "url": state.urls.subdomain_origin(&subdomain),
    });
    Ok(poem::Response::builder()
        .content_type("application/json")
        .header("Cache-Control", "no-store")
        .body(body.to_string()))
}

#[handler]
pub async fn new_form(req: &Request, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    ctx.user()?;
    render(
        StatusCode::OK,
        new_page(&ctx, &NewNewsletter::default(), None, &FieldErrors::new()),
    )
}

#[handler]
pub async fn create(req: &Request, body: Body, Data(state): Data<&State>) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let owner = ctx.user()?.id;
    let input = NewNewsletter {
        name: form.get("newsletter[name]").to_string(),
        tagline: form.get("newsletter[tagline]").to_string(),
        keywords: form.get("newsletter[keywords]").to_string(),
        from_name: form.get("newsletter[from_name]").to_string(),
        from_email: form.get("newsletter[from_email]").to_string(),
    };
    let (attempt, tier) = (input.clone(), state.default_tier);
    match state
        .db
        .run(move |conn| newsletters::create(conn, owner, &attempt, tier))
        .await
    {
        Ok(n) => see_other(&format!("/newsletters/{}/setup_frequency", n.id)),
        Err(e) => {
            let problems = invalid_fields(e)?;
            let name = input.name.clone();
            let preview = match name.trim() {
                "" => None,
                _ => Some(
                    state
                        .db
                        .run(move |conn| newsletters::subdomain_for(conn, &name))
                        .await?,
                ),
            };
            let preview = preview.map(|s| state.urls.subdomain_origin(&s));
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                new_page(&ctx, &input, preview.as_deref(), &problems),
            )
        }
    }
}

fn frequency_page(ctx: &Ctx, n: &Newsletter, problems: &FieldErrors) -> Markup {
    page(
        ctx,
        "How often will you publish?",
        true,
        html! {
            @if n.live_at.is_none() { (steps(2)) }
            h1 { "How often will you publish?" }
            p.muted { "Scheduled issues default to the next slot, at 09:00 in the newsletter's time zone (" (n.time_zone) "). You can change both later in the settings." }
            (errors(problems))
            form.stack method="post" action={ "/newsletters/" (n.id) "/apply_frequency" } {
                (csrf_field(ctx))
                fieldset {
                    legend { "Frequency" }
                    @for f in Frequency::ALL {
                        label.check {
                            input type="radio" name="frequency" value=(f.as_str()) checked[n.frequency == Some(*f)] required;
                            (f.describe())
                        }
                    }
                }
                button type="submit" { "Continue" }
            }
        },
    )
}

#[handler]
pub async fn frequency_form(
    req: &Request,
    Path(id): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    render(
        StatusCode::OK,
        frequency_page(&ctx, &n, &FieldErrors::new()),
    )
}

#[handler]
pub async fn apply_frequency(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let (owner, nid, choice) = (n.owner_id, n.id, form.get("frequency").to_string());
    match state
        .db
        .run(move |conn| newsletters::apply_frequency(conn, owner, nid, &choice))
        .await
    {
        Ok(n) => see_other(&format!("/newsletters/{}/preference/edit", n.id)),
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            frequency_page(&ctx, &n, &invalid_fields(e)?),
        ),
    }
}

pub(super) fn select(label: &str, name: &str, options: &[&str], chosen: &str) -> Markup {
    html! {
        label {
            (label)
            select name=(name) required {
                option value="" { "Choose…" }
                @for o in options {
                    option value=(o) selected[*o == chosen] { (o) }
                }
            }
        }
    }
}

fn preference_page(
    ctx: &Ctx,
    n: &Newsletter,
    form: &Preferences,
    problems: &FieldErrors,
) -> Markup {
    let tones: Vec<&str> = ContentTone::ALL.iter().map(|t| t.as_str()).collect();
    let lengths: Vec<&str> = NewsletterLength::ALL.iter().map(|l| l.as_str()).collect();
    page(
        ctx,
        "Your audience and voice",
        true,
        html! {
            @if n.live_at.is_none() { (steps(3)) }
            h1 { "Your audience and voice" }
            (errors(problems))
            form.stack method="post" action={ "/newsletters/" (n.id) "/preference" } {
                (csrf_field(ctx))
                input type="hidden" name="_method" value="patch";
                label {
                    "Who is it for? (up to 500 characters)"
                    textarea name="newsletter_preference[target_audience]" rows="3" maxlength="500" { (form.target_audience) }
                }
                (select("Tone", "newsletter_preference[content_tone]", &tones, &form.content_tone))
                (select("Length of an issue", "newsletter_preference[newsletter_length]", &lengths, &form.newsletter_length))
                button type="submit" { "Finish and go live" }
            }
        },
    )
}

pub(super) fn current_preferences(n: &Newsletter) -> Preferences {
    Preferences {
        target_audience: n.target_audience.clone().unwrap_or_default(),
        content_tone: n
            .content_tone
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        newsletter_length: n
            .newsletter_length
            .map(|l| l.as_str().to_string())
            .unwrap_or_default(),
    }
}

#[handler]
pub async fn preference_form(
    req: &Request,
    Path(id): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    render(
        StatusCode::OK,
        preference_page(&ctx, &n, &current_preferences(&n), &FieldErrors::new()),
    )
}

#[handler]
pub async fn update_preference(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let input = Preferences {
        target_audience: form
            .get("newsletter_preference[target_audience]")
            .to_string(),
        content_tone: form.get("newsletter_preference[content_tone]").to_string(),
        newsletter_length: form
            .get("newsletter_preference[newsletter_length]")
            .to_string(),
    };
    let (owner, nid, attempt) = (n.owner_id, n.id, input.clone());
    match state
        .db
        .run(move |conn| newsletters::update_preferences(conn, owner, nid, &attempt))
        .await
    {
        Ok(n) => {
            ctx.notice_next(req, "Your newsletter is live.");
            see_other(&format!("/newsletters/{}", n.id))
        }
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            preference_page(&ctx, &n, &input, &invalid_fields(e)?),
        ),
    }
}

#[handler]
pub async fn show(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let links = n.links(&state.urls);
    let nid = n.id;
    let summary = state
        .db
        .run(move |conn| overview::summary(conn, nid))
        .await?;
    let base = format!("/newsletters/{nid}");
    render(
        StatusCode::OK,
        newsletter_page(
            &ctx,
            &n,
            Section::Overview,
            "Overview",
            html! {
                h1 { (n.name) }
                @if !n.tagline.is_empty() { p.muted { (n.tagline) } }
                div.panel {
                    p { "Public site: " @if n.live_at.is_some() { a href=(links.home) { (links.home) } } @else { (links.home) " (live once the " a href={ "/newsletters/" (n.id) "/preference/edit" } { "preferences" } " are set)" } }
                    p { "Subdomain: " code { (n.subdomain) } " · Status: " strong { (n.status) } " · Tier: " strong { (n.tier) } }
                    p { "Frequency: " (n.frequency.map(|f| f.describe()).unwrap_or("not set")) " · " a href={ "/newsletters/" (n.id) "/setup_frequency" } { "change" } }
                    p #figures { (summary_line(&summary)) }
                }
                section.panel #next-steps {
                    h2 { "Next steps" }
                    ol.next-steps {
                        @for step in NextStep::ALL {
                            @let done = step.done(&summary);
                            li.done[done] data-step=(format!("{step:?}")) {
                                @match step {
                                    NextStep::WriteFirstIssue => { a href={ (base) "/issues/new" } { "Write the first issue" } }
                                    NextStep::ShareSite => { a href=(links.home) { "Share your site" } " so readers can subscribe" }
                                    NextStep::CreateApiKey => { a href={ (base) "/api_keys/new" } { "Create an API key" } " for your scripts" }
                                }
                                @if done { " " span.tick { "✓ done" } }
                            }
                        }
                    }
                }
            },
        ),
    )
}
