//! The dashboard's Feed page (docs/automations.md, "Following a feed"): the feed a
//! newsletter follows (its address, how often it is polled, and what a new post becomes), how
//! the last poll went, and the issues it made. The rules are `domain::issues::feed`.

use maud::{Markup, html};
use poem::http::StatusCode;
use poem::web::{Data, Path};
use poem::{Body, Request, handler};

use super::layout::{Section, csrf_field, errors, newsletter_page};
use super::newsletters::{owned, owned_post};
use super::time_zones::shown;
use super::{Ctx, State, WebResult, invalid_fields, render, see_other};
use crate::domain::FieldErrors;
use crate::domain::issues::feed::{self, EVERY_MAX, EVERY_MIN, Feed, FeedInput, Mode, URL_MAX};
use crate::domain::newsletters::Newsletter;

fn url(n: &Newsletter) -> String {
    format!("/newsletters/{}/feed", n.id)
}

fn page(
    ctx: &Ctx,
    n: &Newsletter,
    followed: Option<&Feed>,
    typed: &FeedInput,
    problems: &FieldErrors,
) -> Markup {
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        "Feed",
        html! {
            p { a href={ "/newsletters/" (n.id) "/issues" } { "← Issues" } }
            h1 { "Follow a feed" }
            p.muted { "Already blogging? Give the address of your blog's RSS or Atom feed: each new post becomes an issue (its title, its summary and a link to it): a draft to edit and send, sent at once, or gathered with the others into one issue at the newsletter's next slot. Posts already in the feed when you add it are left out." }
            @if let Some(f) = followed {
                section.panel #feed-status aria-labelledby="feed-status-h" {
                    h2 #feed-status-h { "Now" }
                    p { "Following " code { (f.url) } ", every " (f.every_minutes) " minutes: " (f.mode.label().to_lowercase()) "." }
                    p {
                        @match f.last_polled_at {
                            Some(at) => { "Last read " (shown(at, &ctx.zone())) "; next at " (shown(f.next_poll_at, &ctx.zone())) "." }
                            None => { "Not read yet: first at " (shown(f.next_poll_at, &ctx.zone())) "." }
                        }
                        " " (f.issues_made) @if f.issues_made == 1 { " issue" } @else { " issues" } " made from it."
                    }
                    @if let Some(error) = &f.last_error {
                        p.notice.warning #feed-error role="status" { "The last read failed, and changed nothing: " (error) }
                    }
                    form method="post" action={ (url(n)) "/delete" } {
                        (csrf_field(ctx))
                        button.secondary type="submit" { "Stop following it" }
                    }
                }
            }
            section.panel #feed-form aria-labelledby="feed-form-h" {
                h2 #feed-form-h { @if followed.is_some() { "Change it" } @else { "The feed" } }
                (errors(problems))
                form.stack method="post" action=(url(n)) {
                    (csrf_field(ctx))
                    label { "Feed address" input type="url" name="feed[url]" value=(typed.url) required maxlength=(URL_MAX) placeholder="https://example.com/feed.xml" autocomplete="off"; }
                    label { "Read it every (minutes, " (EVERY_MIN) " to " (EVERY_MAX) ")" input type="number" name="feed[every_minutes]" value=(typed.every_minutes) min=(EVERY_MIN) max=(EVERY_MAX) required; }
                    fieldset {
                        legend { "Each new post" }
                        @for mode in Mode::ALL {
                            label.check {
                                input type="radio" name="feed[mode]" value=(mode.as_str()) checked[typed.mode == mode.as_str()] required;
                                (mode.label())
                            }
                        }
                        p.muted { "A post that cannot be sent as asked (the newsletter paused, no subscribers yet, no frequency for a slot) is kept as a draft saying why." }
                    }
                    button type="submit" { "Save" }
                }
            }
        },
    )
}

async fn followed(state: &State, n: &Newsletter) -> Result<Option<Feed>, super::WebError> {
    let nid = n.id;
    Ok(state.db.run(move |conn| feed::get(conn, nid)).await?)
}

/// `GET /newsletters/:id/feed`.
#[handler]
pub async fn show(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let f = followed(state, &n).await?;
    let typed = match &f {
        Some(f) => FeedInput {
            url: f.url.clone(),
            every_minutes: f.every_minutes.to_string(),
            mode: f.mode.as_str().to_string(),
        },
        None => FeedInput {
            url: String::new(),
            every_minutes: "60".to_string(),
            mode: Mode::Draft.as_str().to_string(),
        },
    };
    render(
        StatusCode::OK,
        page(&ctx, &n, f.as_ref(), &typed, &FieldErrors::new()),
    )
}

/// `POST /newsletters/:id/feed`: follows the feed (or changes it).
#[handler]
pub async fn save(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let typed = FeedInput {
        url: form.get("feed[url]").to_string(),
        every_minutes: form.get("feed[every_minutes]").to_string(),
        mode: form.get("feed[mode]").to_string(),
    };
    let (nid, given) = (n.id, typed.clone());
    match state
        .db
        .run(move |conn| feed::follow(conn, nid, &given))
        .await
    {
        Ok(_) => {
            ctx.notice_next(req, "The feed is saved: it is read at the next minute.");
            see_other(&url(&n))
        }
        Err(e) => {
            let problems = invalid_fields(e)?;
            let f = followed(state, &n).await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                page(&ctx, &n, f.as_ref(), &typed, &problems),
            )
        }
    }
}

/// `POST /newsletters/:id/feed/delete`: stops following it (its issues stay).
#[handler]
pub async fn stop(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, ctx, n) = owned_post(req, state, &id, body).await?;
    let nid = n.id;
    state.db.run(move |conn| feed::unfollow(conn, nid)).await?;
    ctx.notice_next(req, "The feed is no longer followed; its issues stay.");
    see_other(&url(&n))
}
