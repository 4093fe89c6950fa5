//! The subscriber page's list of the issues they were sent, newest first, a page at a time
//! (`?before=<delivery>`), with whether each was opened and clicked.

use maud::{Markup, html};

use super::super::layout::table_wrap;
use super::super::time_zones::shown;
use super::super::{State, WebError};
use crate::domain::newsletters::Newsletter;
use crate::domain::reports::received::{self, ReceivedPage};
use crate::domain::subscribers::Subscriber;
use crate::domain::values::time_zones::TimeZoneName;

/// One page of the issues `s` received, starting below delivery `before`.
pub(super) async fn load(
    state: &State,
    n: &Newsletter,
    s: &Subscriber,
    before: Option<i64>,
) -> Result<ReceivedPage, WebError> {
    let (nid, sid) = (n.id, s.id);
    Ok(state
        .db
        .run(move |conn| received::page(conn, nid, sid, before))
        .await?)
}

/// "Yes" with the time, or "No".
fn when(at: Option<crate::clock::Timestamp>, zone: &TimeZoneName) -> Markup {
    match at {
        Some(at) => html! { "Yes, " (shown(at, zone)) },
        None => html! { "No" },
    }
}

/// The section: a table of the page's issues and the link to older ones. `url` is the
/// subscriber page's.
pub(super) fn section(
    url: &str,
    page: &ReceivedPage,
    zone: &TimeZoneName,
    tracking: bool,
) -> Markup {
    html! {
        section aria-labelledby="received-heading" {
            h2 #received-heading { "Issues received" }
            @if page.rows.is_empty() {
                p.empty { "No issues sent to this subscriber yet." }
            } @else {
                (table_wrap("Issues received, opened and clicked", html! { table #received {
                    thead { tr { th { "Issue" } th { "Sent" } th { "Opened" } th { "Clicked" } } }
                    tbody {
                        @for r in &page.rows {
                            tr data-issue=(r.issue_id) data-opened=(r.opened_at.is_some()) data-clicked=(r.clicked_at.is_some()) {
                                td { (r.subject) }
                                td {
                                    @match r.sent_at {
                                        Some(at) => { (shown(at, zone)) }
                                        None => { (r.status) }
                                    }
                                }
                                td { (when(r.opened_at, zone)) }
                                td { (when(r.clicked_at, zone)) }
                            }
                        }
                    }
                } }))
                @if let Some(before) = page.next_before {
                    p { a rel="next" href={ (url) "?before=" (before) "#received-heading" } { "Older issues" } }
                }
                @if !tracking {
                    p.muted { "Tracking is off: issues sent meanwhile record no opens or clicks." }
                }
            }
        }
    }
}
