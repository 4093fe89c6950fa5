//! The dashboard's Topics page (docs/growth.md, "The preference centre"): the tags readers
//! may add or remove themselves on their account page. Ticking a tag offers it; a new topic
//! may be a tag no subscriber has yet.

use maud::{Markup, html};
use poem::http::StatusCode;
use poem::web::{Data, Path};
use poem::{Body, Request, handler};

use super::layout::{Section, csrf_field, errors, newsletter_page};
use super::newsletters::{owned, owned_post};
use super::{Ctx, State, WebResult, invalid_fields, render, see_other};
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::{self, preferences};
use crate::domain::{DomainError, FieldErrors};

fn url(n: &Newsletter) -> String {
    format!("/newsletters/{}/topics", n.id)
}

/// What the page offers: every tag with subscribers, and the topics (some may have none).
struct Offer {
    tags: Vec<String>,
    topics: Vec<String>,
}

async fn offer_of(state: &State, n: &Newsletter) -> Result<Offer, super::WebError> {
    let nid = n.id;
    Ok(state
        .db
        .run(move |conn| {
            let topics = preferences::topics(conn, nid)?;
            let mut tags: Vec<String> = subscribers::tag_counts(conn, nid)?
                .into_iter()
                .map(|(tag, _)| tag)
                .collect();
            for topic in &topics {
                if !tags.contains(topic) {
                    tags.push(topic.clone());
                }
            }
            tags.sort();
            Ok::<_, DomainError>(Offer { tags, topics })
        })
        .await?)
}

fn page(ctx: &Ctx, n: &Newsletter, offer: &Offer, added: &str, problems: &FieldErrors) -> Markup {
    newsletter_page(
        ctx,
        n,
        Section::Subscribers,
        "Topics",
        html! {
            p { a href={ "/newsletters/" (n.id) "/subscribers" } { "← Subscribers" } }
            h1 { "Topics" }
            p.muted { "Topics are tags your readers choose themselves on their account page (the link at the foot of every issue leads there). Send an issue to a topic by its tag on the send page." }
            (errors(problems))
            form.stack method="post" action=(url(n)) {
                (csrf_field(ctx))
                @if offer.tags.is_empty() {
                    p.empty { "No tags yet: add a topic below." }
                } @else {
                    fieldset.tags {
                        legend { "Tags readers may choose" }
                        @for tag in &offer.tags {
                            // The tags the page showed: only they change.
                            input type="hidden" name="shown" value=(tag);
                            label.check { input type="checkbox" name="topic" value=(tag) checked[offer.topics.contains(tag)]; " " (tag) }
                        }
                    }
                }
                label { "New topics (separated by commas)" input type="text" name="new_topics" value=(added) autocomplete="off"; }
                button type="submit" { "Save the topics" }
            }
        },
    )
}

/// `GET /newsletters/:id/topics`.
#[handler]
pub async fn show(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let offer = offer_of(state, &n).await?;
    render(
        StatusCode::OK,
        page(&ctx, &n, &offer, "", &FieldErrors::new()),
    )
}

/// `POST /newsletters/:id/topics`: the ticked tags among those shown, and the new ones.
#[handler]
pub async fn save(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let (shown, mut chosen) = (form.all("shown"), form.all("topic"));
    let added = form.get("new_topics").to_string();
    chosen.extend(added.split(',').map(str::to_string));
    let nid = n.id;
    match state
        .db
        .run(move |conn| preferences::set_topics(conn, nid, &shown, &chosen))
        .await
    {
        Ok(_) => {
            ctx.notice_next(req, "The topics are saved.");
            see_other(&url(&n))
        }
        Err(e) => {
            let problems = invalid_fields(e)?;
            let offer = offer_of(state, &n).await?;
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                page(&ctx, &n, &offer, &added, &problems),
            )
        }
    }
}
