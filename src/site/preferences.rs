//! The preference centre's forms on a newsletter's site (docs/growth.md, "The preference
//! centre"): on the account page a reader changes their name, chooses topics, pauses their
//! mail for 30 days or resumes it; the unsubscribe page of every mail's footer link opens
//! the account page for the reader it names. The rules are `domain::subscribers::preferences`.

use maud::{Markup, html};
use poem::web::Data;
use poem::{Body, Request, Response, handler};

use super::pages::csrf_token;
use super::readers::{personal, reader_post, see_other, start_session};
use super::{Site, SiteError, SiteResult};
use crate::domain::subscribers::preferences::{self, PAUSE};
use crate::domain::subscribers::readers::{self, Reader};
use crate::domain::subscribers::{self, Changes, Status};
use crate::http::csrf;
use crate::http::public_page::day;
use crate::state::AppState;

type State = std::sync::Arc<AppState>;

/// Where a saved change lands: the account page, saying so.
const SAVED: &str = "/account?saved=1";

/// The account page's preference sections for `reader`: name, topics (when the newsletter
/// offers some), pause.
pub(super) fn sections(
    req: &Request,
    state: &State,
    site: &Site,
    reader: &Reader,
    topics: &[String],
) -> Markup {
    let token = csrf_token(req, state);
    let s = &reader.subscriber;
    html! {
        h2 { "Your name" }
        form.stack method="post" action="/account/name" {
            input type="hidden" name=(csrf::FIELD) value=(token);
            label { "Name" input type="text" name="name" value=(s.name.as_deref().unwrap_or_default()) autocomplete="name" maxlength="100"; }
            button.secondary type="submit" { "Save my name" }
        }
        @if !topics.is_empty() {
            h2 { "Topics" }
            form.stack method="post" action="/account/topics" {
                input type="hidden" name=(csrf::FIELD) value=(token);
                fieldset {
                    legend { "What you would like to receive" }
                    @for topic in topics {
                        // The topics the page showed: only they change.
                        input type="hidden" name="shown" value=(topic);
                        label.check { input type="checkbox" name="topic" value=(topic) checked[s.tags.contains(topic)]; " " (topic) }
                    }
                }
                button.secondary type="submit" { "Save my topics" }
            }
        }
        @if s.status == Status::Active {
            h2 { "Pause" }
            @match s.paused_until {
                Some(until) => {
                    p { "Your mail is paused until " (day(Some(until), &site.0.time_zone)) "; it starts again by itself." }
                    form method="post" action="/account/resume" {
                        input type="hidden" name=(csrf::FIELD) value=(token);
                        button.secondary type="submit" { "Resume my mail now" }
                    }
                }
                None => {
                    p { "Need a break? Nothing is sent to you for " (PAUSE.as_hours() / 24) " days, then it starts again by itself." }
                    form method="post" action="/account/pause" {
                        input type="hidden" name=(csrf::FIELD) value=(token);
                        button.secondary type="submit" { "Pause for " (PAUSE.as_hours() / 24) " days" }
                    }
                }
            }
        }
    }
}

/// What a form of the account page changes, by the last part of its address.
#[derive(Debug, Clone, Copy)]
enum Change {
    Name,
    Topics,
    Pause,
    Resume,
}

/// `POST /account/name`, `/account/topics` (the topics ticked among those the page
/// showed), `/account/pause` and `/account/resume`: the change for the reader who posted the
/// form, then back to the account page.
#[handler]
pub async fn save(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
    Data(site): Data<&Site>,
) -> SiteResult {
    let change = match req.uri().path().rsplit('/').next() {
        Some("name") => Change::Name,
        Some("topics") => Change::Topics,
        Some("pause") => Change::Pause,
        Some("resume") => Change::Resume,
        _ => return Err(SiteError::NotFound),
    };
    let (reader, form) = match reader_post(req, state, site, body).await {
        Ok(posted) => posted,
        Err(response) => return Ok(response),
    };
    let (nid, sid) = (site.0.id, reader.subscriber.id);
    state
        .db
        .run(move |conn| match change {
            Change::Name => {
                let name = form.get("name").trim().to_string();
                let changes = Changes {
                    name: Some(Some(name).filter(|n| !n.is_empty())),
                    ..Changes::default()
                };
                subscribers::update(conn, nid, sid, &changes)
            }
            Change::Topics => {
                preferences::choose_topics(conn, nid, sid, &form.all("shown"), &form.all("topic"))
            }
            Change::Pause => preferences::pause(conn, nid, sid),
            Change::Resume => preferences::resume(conn, nid, sid),
        })
        .await
        .map_err(|e| SiteError::domain(e, site, "saving a reader's preferences"))?;
    Ok(see_other(SAVED))
}

/// The unsubscribe page's offer: the preferences instead of leaving, by the same signed link.
pub(super) fn offer(req: &Request, state: &State, site: &Site, link: &str) -> Markup {
    html! {
        h2 { "Rather not leave?" }
        p { "Pause " (site.0.name) " for " (PAUSE.as_hours() / 24) " days, choose the topics you get, or change your name or address." }
        form method="post" action={ (link) "/preferences" } {
            input type="hidden" name=(csrf::FIELD) value=(csrf_token(req, state));
            button.secondary type="submit" { "Open my preferences" }
        }
    }
}

/// Signs in the reader `subscriber_id` that a mail's signed link named, and opens their
/// account page.
pub(super) async fn open_for(
    req: &Request,
    state: &State,
    site: &Site,
    subscriber_id: i64,
) -> Result<Response, SiteError> {
    let nid = site.0.id;
    let session = state
        .db
        .run(move |conn| readers::open_session(conn, nid, subscriber_id))
        .await
        .map_err(|e| SiteError::domain(e, site, "opening a reader's preferences"))?;
    start_session(req, state, &session);
    Ok(personal(see_other("/account")))
}
