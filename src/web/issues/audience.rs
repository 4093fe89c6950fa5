//! Choosing a send's audience in the dashboard: the tag checkboxes of the send page and of
//! the schedule form, the count line under them, the check that a send button named the
//! audience that was ticked, and the JSON `assets/audience.js` asks for as boxes are ticked.
//! Every count is the domain's (`audience::check`, then `issues::sendable` or
//! `audience::count`); nothing here reads the list.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Request, Response, handler, http::StatusCode};
use rusqlite::Connection;
use serde_json::json;

use super::{json_answer, problems, viewed};
use crate::domain::issues::{self, Issue, Visibility};
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::audience::{self, Audience, AudienceInput};
use crate::domain::{DomainResult, FieldErrors};
use crate::http::plural::{count, noun};
use crate::http::public_page::{FOR_AN_HOUR, JAVASCRIPT, asset};
use crate::web::{FormData, State, WebResult};

/// What a count is for. The send page states what its send would do now (every check of
/// `issues::sendable_in_one_step`: a draft is approved and sent in one step); the schedule form only how many the ticked audience has now, since
/// the send counts again when it starts and a draft can be scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    SendNow,
    Schedule,
}

/// What the count line says while the script waits for a count.
pub(super) const COUNTING: &str = "Counting the ticked audience…";
/// What the send page's count line says when the script could not get a count.
pub(super) const SEND_COUNT_FAILED: &str =
    "The count could not be updated. Press Review to count the ticked audience.";
/// What the schedule form's count line says when the script could not get a count.
pub(super) const SCHEDULE_COUNT_FAILED: &str =
    "The count could not be updated. Schedule records the ticked tags all the same.";
/// The send button's label between a tick and its count: pressed then, it reviews.
pub(super) const REVIEW_LABEL: &str = "Review the new audience";

/// The audience a form names by its checkboxes (`tags`, `exclude_tags`). `audience=chosen`
/// marks a form that offers them, where none checked is everyone; a form with neither the
/// marker nor a tag (a script's post) names none: `None`, the issue's recorded audience.
pub(super) fn chosen_audience(form: &FormData) -> Option<AudienceInput> {
    let input = AudienceInput {
        tags: form.all("tags"),
        exclude_tags: form.all("exclude_tags"),
    };
    let chosen = form.get("audience") == "chosen"
        || !input.tags.is_empty()
        || !input.exclude_tags.is_empty();
    chosen.then_some(input)
}

/// The send page's choice for a paid issue (`mailed_to`: `paid` or `everyone`) as
/// `paid_members_only`; `None` when the form offers none.
pub(super) fn chosen_mailing(form: &FormData) -> Option<bool> {
    mailing(form.get("mailed_to"))
}

fn mailing(value: &str) -> Option<bool> {
    match value {
        "paid" => Some(true),
        "everyone" => Some(false),
        _ => None,
    }
}

/// `paid_members_only` as the `mailed_to` field gives it.
fn mailed_to(paid_only: bool) -> &'static str {
    if paid_only { "paid" } else { "everyone" }
}

/// Whether the send button of `form` was labelled for another audience than `ticked`: its
/// hidden `named_tags`, `named_exclude_tags` and `named_mailed_to` name the audience its
/// count was made for. Tags are compared as the domain cleans them (trimmed, without
/// repeats, in order).
pub(super) fn names_another_audience(form: &FormData, ticked: &AudienceInput) -> bool {
    let named = AudienceInput {
        tags: form.all("named_tags"),
        exclude_tags: form.all("named_exclude_tags"),
    };
    let mut ignored = FieldErrors::new();
    audience::check_shape(&named, "", &mut ignored)
        != audience::check_shape(ticked, "", &mut ignored)
        || mailing(form.get("named_mailed_to")) != chosen_mailing(form)
}

/// The hidden fields naming the audience a send button's count was made for (with, for a
/// paid issue, who gets it by mail).
pub(super) fn named_fields(issue: &Issue, chosen: &Audience) -> Markup {
    html! {
        @for tag in &chosen.tags { input type="hidden" name="named_tags" value=(tag); }
        @for tag in &chosen.exclude_tags { input type="hidden" name="named_exclude_tags" value=(tag); }
        @if issue.visibility == Visibility::Paid {
            input type="hidden" name="named_mailed_to" value=(mailed_to(chosen.paid_only));
        }
    }
}

/// For a paid issue, the send page's choice of who gets it by mail (`mailed_to`), `chosen`
/// checked; nothing for another issue.
pub(super) fn mailing_choice(issue: &Issue, chosen: &Audience) -> Markup {
    html! {
        @if issue.visibility == Visibility::Paid {
            fieldset.tags #mailing {
                legend { "Who gets this paid issue by e-mail" }
                label.check {
                    input type="radio" name="mailed_to" value="everyone" checked[!chosen.paid_only];
                    "Everyone: paid members get it whole, free members the excerpt and an upgrade link"
                }
                label.check {
                    input type="radio" name="mailed_to" value="paid" checked[chosen.paid_only];
                    "Paid members only"
                }
            }
        }
    }
}

/// The tag checkboxes of both lists (`tags`, `exclude_tags`), `chosen` checked, after the
/// marker that the form chooses an audience.
pub(super) fn audience_boxes(tags: &[(String, i64)], chosen: &Audience) -> Markup {
    html! {
        input type="hidden" name="audience" value="chosen";
        (tag_boxes("tags", "Send to", tags, &chosen.tags))
        (tag_boxes("exclude_tags", "Leave out", tags, &chosen.exclude_tags))
    }
}

/// The tag checkboxes of one list (`tags` or `exclude_tags`).
fn tag_boxes(name: &str, legend: &str, tags: &[(String, i64)], chosen: &[String]) -> Markup {
    html! {
        fieldset.tags {
            legend { (legend) }
            @for (tag, count) in tags {
                label.check {
                    input type="checkbox" name=(name) value=(tag) checked[chosen.contains(tag)];
                    (tag) " " span.muted { "(" (count) " active)" }
                }
            }
        }
    }
}

/// The issue's audience `given` (its recorded one when `None`), mailed to paid members only
/// or not as `paid_only` says (the issue's choice when `None`), checked and counted for
/// `purpose`: the audience as cleaned (as ticked when it is refused) and its recipients, or
/// why it cannot be counted or sent.
pub(super) fn counted(
    conn: &Connection,
    n: &Newsletter,
    mut issue: Issue,
    (given, paid_only): (Option<&AudienceInput>, Option<bool>),
    purpose: Purpose,
) -> (Audience, DomainResult<i64>) {
    if let Some(only) = paid_only {
        issue.mail_paid_members_only(only);
    }
    let checked = match given {
        Some(input) => audience::check(conn, n.id, input, ""),
        None => Ok(issue.audience.clone()),
    };
    match checked {
        Ok(chosen) => {
            issue.choose_audience(chosen);
            let chosen = issue.audience.clone();
            let recipients = match purpose {
                Purpose::SendNow => issues::sendable_in_one_step(conn, n, &issue),
                Purpose::Schedule => audience::count(conn, n.id, &chosen),
            };
            (chosen, recipients)
        }
        Err(e) => {
            let shown = match given {
                Some(input) => Audience {
                    paid_only: issue.audience.paid_only,
                    ..audience::check_shape(input, "", &mut FieldErrors::new())
                },
                None => issue.audience,
            };
            (shown, Err(e))
        }
    }
}

/// The sentence stating a count, as the text before the number and the text after it.
fn count_sentence(purpose: Purpose, recipients: i64, chosen: &Audience) -> (&'static str, String) {
    let whom = noun(recipients, "active subscriber", "active subscribers");
    let which = if chosen.is_everyone() {
        String::new()
    } else {
        format!(" ({})", chosen.describe())
    };
    match purpose {
        Purpose::SendNow => (
            "It goes out at once to ",
            format!(" {whom}{which}. This cannot be undone."),
        ),
        Purpose::Schedule => (
            "Sent now, it would go to ",
            format!(" {whom}{which}. Who gets it is settled when the send starts."),
        ),
    }
}

/// The send button's label for `recipients`.
pub(super) fn send_label(recipients: i64) -> String {
    format!("Send to {}", count(recipients, "subscriber", "subscribers"))
}

/// Why an audience has no count, in one sentence.
fn problem_sentence(purpose: Purpose, found: &FieldErrors) -> String {
    let what = match purpose {
        Purpose::SendNow => "This audience cannot be sent now",
        Purpose::Schedule => "This audience cannot be scheduled",
    };
    format!("{what}: {}.", found.sentences().join("; "))
}

/// The count line with id `id`: the recipients of `chosen`, or why there are none. A
/// status region, so a screen reader hears the new count as boxes are ticked.
pub(super) fn count_line(
    id: &str,
    purpose: Purpose,
    chosen: &Audience,
    recipients: &Result<i64, FieldErrors>,
) -> Markup {
    html! {
        p id=(id) role="status" {
            @match recipients {
                Ok(recipients) => {
                    @let (before, after) = count_sentence(purpose, *recipients, chosen);
                    (before) strong data-recipients=(recipients) { (recipients) } (after)
                }
                Err(found) => (problem_sentence(purpose, found)),
            }
        }
    }
}

/// `GET .../audience_count?tags=&exclude_tags=[&mailed_to=][&for=schedule]`: the count of
/// the ticked audience as JSON, for `assets/audience.js`. 200 `{recipients, before, after,
/// button, tags, exclude_tags, mailed_to}` (the sentence around the number, the send
/// button's label, the audience as cleaned); 422 `{problem}` when it cannot be counted or
/// sent.
#[handler]
pub async fn audience_count(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, n, issue) = viewed(req, state, &id, &issue_id).await?;
    let query = FormData::parse(req.uri().query().unwrap_or_default().as_bytes());
    let purpose = match query.get("for") {
        "schedule" => Purpose::Schedule,
        _ => Purpose::SendNow,
    };
    let given = AudienceInput {
        tags: query.all("tags"),
        exclude_tags: query.all("exclude_tags"),
    };
    let (chosen, recipients) = state
        .db
        .run(move |conn| {
            let paid_only = mailing(query.get("mailed_to"));
            Ok::<_, crate::domain::DomainError>(counted(
                conn,
                &n,
                issue,
                (Some(&given), paid_only),
                purpose,
            ))
        })
        .await?;
    Ok(match recipients {
        Ok(recipients) => {
            let (before, after) = count_sentence(purpose, recipients, &chosen);
            json_answer(
                StatusCode::OK,
                json!({
                    "recipients": recipients,
                    "before": before,
                    "after": after,
                    "button": send_label(recipients),
                    "tags": chosen.tags,
                    "exclude_tags": chosen.exclude_tags,
                    "mailed_to": mailed_to(chosen.paid_only),
                }),
            )
        }
        Err(e) => json_answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({ "problem": problem_sentence(purpose, &problems(e)?) }),
        ),
    })
}

/// `GET /assets/audience.js`: keeps the count lines, and the send button's label and named
/// audience, up to date as boxes are ticked; the pages work without it.
#[handler]
pub fn audience_script() -> Response {
    asset(
        JAVASCRIPT,
        FOR_AN_HOUR,
        include_str!("../../../assets/audience.js"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> FormData {
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        FormData::parse(body.as_bytes())
    }

    #[test]
    fn a_send_names_another_audience_unless_the_cleaned_lists_match() {
        let ticked = |pairs: &[(&str, &str)]| chosen_audience(&form(pairs)).unwrap();
        let sent = form(&[
            ("audience", "chosen"),
            ("tags", "vip"),
            ("tags", " news"),
            ("named_tags", "news"),
            ("named_tags", "vip"),
        ]);
        let as_named = chosen_audience(&sent).unwrap();
        assert!(
            !names_another_audience(&sent, &as_named),
            "order and spaces"
        );
        assert!(names_another_audience(
            &sent,
            &ticked(&[("audience", "chosen"), ("tags", "vip")])
        ));
        // The same tag moved from "Send to" to "Leave out" is another audience.
        let moved = form(&[("audience", "chosen"), ("named_tags", "vip")]);
        assert!(names_another_audience(
            &moved,
            &ticked(&[("audience", "chosen"), ("exclude_tags", "vip")])
        ));
        // Nothing named and nothing ticked: everyone, as the button said.
        let everyone = form(&[("audience", "chosen")]);
        assert!(!names_another_audience(
            &everyone,
            &chosen_audience(&everyone).unwrap()
        ));
        // Ticks without the marker are still ticks; no marker and no tick: none named.
        assert!(names_another_audience(
            &form(&[]),
            &chosen_audience(&form(&[("tags", "vip")])).unwrap()
        ));
        assert!(chosen_audience(&form(&[("intent", "send")])).is_none());
    }

    #[test]
    fn count_sentences_name_the_audience() {
        let vip = Audience {
            tags: vec!["vip".into()],
            exclude_tags: vec![],
            paid_only: false,
        };
        let (before, after) = count_sentence(Purpose::SendNow, 1, &vip);
        assert_eq!(
            format!("{before}1{after}"),
            "It goes out at once to 1 active subscriber (active subscribers tagged “vip”). This cannot be undone."
        );
        let (_, after) = count_sentence(Purpose::Schedule, 3, &Audience::default());
        assert_eq!(
            after,
            " active subscribers. Who gets it is settled when the send starts."
        );
        assert_eq!(send_label(2), "Send to 2 subscribers");
    }
}
