//! Choosing a send's audience in the dashboard: the tag checkboxes of the send page and of
//! the schedule form, the count line under them, the check that a send button named the
//! audience that was ticked, and the JSON `assets/audience.js` asks for as boxes are ticked.
//! Every count is the domain's (`audience::check`, then `issues::sendable` or
//! `audience::count`); nothing here reads the list.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Request, Response, handler, http::StatusCode};
use rusqlite::Connection;
use serde_json::{Value, json};

use super::{json_answer, problems, viewed};
use crate::domain::issues::{self, Issue, Visibility};
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers;
use crate::domain::subscribers::audience::{
    self, Audience, AudienceInput, FieldCondition, FieldConditionInput, FieldOp,
};
use crate::domain::subscribers::custom_fields::{self, CustomField};
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

/// The audience a form names by its checkboxes (`tags`, `exclude_tags`) and its field
/// condition (`field_name`, `field_op`, `field_value`). `audience=chosen` marks a form that
/// offers them, where none checked is everyone; a form with neither the marker nor a choice
/// (a script's post) names none: `None`, the issue's recorded audience.
pub(super) fn chosen_audience(form: &FormData) -> Option<AudienceInput> {
    let input = form_audience(form, "");
    let chosen = form.get("audience") == "chosen"
        || !input.tags.is_empty()
        || !input.exclude_tags.is_empty()
        || input.field.is_some();
    chosen.then_some(input)
}

/// The audience of the fields named `{prefix}tags`, `{prefix}exclude_tags` and
/// `{prefix}field_*` (a condition only when a field is named).
fn form_audience(form: &FormData, prefix: &str) -> AudienceInput {
    let name = form.get(&format!("{prefix}field_name")).trim().to_string();
    AudienceInput {
        tags: form.all(&format!("{prefix}tags")),
        exclude_tags: form.all(&format!("{prefix}exclude_tags")),
        field: (!name.is_empty()).then(|| FieldConditionInput {
            name,
            op: form.get(&format!("{prefix}field_op")).to_string(),
            value: Value::String(form.get(&format!("{prefix}field_value")).to_string()),
        }),
    }
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
    let named = form_audience(form, "named_");
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
        (hidden_condition("named_", chosen.field.as_ref()))
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

/// What an audience can be chosen from: the newsletter's tags (with how many active
/// subscribers carry each) and its custom fields.
#[derive(Debug, Clone, Default)]
pub(super) struct Choosable {
    pub tags: Vec<(String, i64)>,
    pub fields: Vec<CustomField>,
}

impl Choosable {
    pub fn read(conn: &Connection, newsletter_id: i64) -> DomainResult<Choosable> {
        Ok(Choosable {
            tags: subscribers::tag_counts(conn, newsletter_id)?,
            fields: custom_fields::list(conn, newsletter_id)?,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.tags.is_empty() && self.fields.is_empty()
    }
}

/// The tag checkboxes of both lists (`tags`, `exclude_tags`) and the field condition,
/// `chosen` checked, after the marker that the form chooses an audience.
pub(super) fn audience_boxes(choosable: &Choosable, chosen: &Audience) -> Markup {
    html! {
        input type="hidden" name="audience" value="chosen";
        @if !choosable.tags.is_empty() {
            (tag_boxes("tags", "Send to", &choosable.tags, &chosen.tags))
            (tag_boxes("exclude_tags", "Leave out", &choosable.tags, &chosen.exclude_tags))
        }
        @if !choosable.fields.is_empty() {
            (field_condition(&choosable.fields, chosen.field.as_ref()))
        }
    }
}

/// The field condition's three inputs (`field_name`, `field_op`, `field_value`); no field
/// chosen: no condition.
fn field_condition(fields: &[CustomField], chosen: Option<&FieldCondition>) -> Markup {
    let name = chosen.map_or("", |c| c.name.as_str());
    let op = chosen.map_or(FieldOp::Equals, |c| c.op);
    html! {
        fieldset.tags.field-condition {
            legend { "Only subscribers whose field" }
            label {
                "Field"
                select name="field_name" {
                    option value="" selected[name.is_empty()] { "(no condition)" }
                    @for field in fields {
                        option value=(field.name) selected[field.name == name] {
                            (field.name) " (" (field.field_type.as_str()) ")"
                        }
                    }
                }
            }
            label {
                "Comparison"
                select name="field_op" {
                    @for each in FieldOp::ALL {
                        option value=(each.as_str()) selected[*each == op] { (each.label()) }
                    }
                }
            }
            label {
                "Value"
                input type="text" name="field_value" maxlength="500"
                    value=(chosen.map(FieldCondition::input_value).unwrap_or_default())
                    placeholder="weekly, 30, 2026-01-31, yes";
            }
            p.muted { "Subscribers without a value of the field are left out. Before and after compare numbers and dates." }
        }
    }
}

/// The hidden `{prefix}field_name`, `_op` and `_value` of `condition` (none: nothing).
fn hidden_condition(prefix: &str, condition: Option<&FieldCondition>) -> Markup {
    html! {
        @if let Some(condition) = condition {
            input type="hidden" name={ (prefix) "field_name" } value=(condition.name);
            input type="hidden" name={ (prefix) "field_op" } value=(condition.op.as_str());
            input type="hidden" name={ (prefix) "field_value" } value=(condition.input_value());
        }
    }
}

/// The hidden fields carrying `chosen` through a form that offers no choice.
pub(super) fn hidden_audience(chosen: &Audience) -> Markup {
    html! {
        input type="hidden" name="audience" value="chosen";
        @for tag in &chosen.tags { input type="hidden" name="tags" value=(tag); }
        @for tag in &chosen.exclude_tags { input type="hidden" name="exclude_tags" value=(tag); }
        (hidden_condition("", chosen.field.as_ref()))
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
    let given = form_audience(&query, "");
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
                    "field": chosen.field.as_ref().map(|c| json!({
                        "name": c.name, "op": c.op.as_str(), "value": c.input_value(),
                    })),
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
            ..Default::default()
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
