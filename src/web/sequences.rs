//! The dashboard's Sequences pages (docs/automations.md, "Sequences"): the newsletter's
//! sequences with their readers, a sequence's steps with where its readers are (waiting,
//! sent, opened, clicked, left), its editor (steps added and removed without JavaScript: the
//! "Add a step" button shows the form again with a blank step, saving nothing), adding and
//! stopping a reader by address, pausing and deleting. The rules are `domain::sequences`.

use maud::{Markup, html};
use poem::http::StatusCode;
use poem::web::{Data, Path};
use poem::{Body, Request, handler};

use super::layout::{Section, csrf_field, errors, newsletter_page, table_wrap};
use super::newsletters::{owned, owned_post, parse_id};
use super::{Ctx, State, WebError, WebResult, invalid_fields, render, see_other};
use crate::domain::FieldErrors;
use crate::domain::newsletters::Newsletter;
use crate::domain::sequences::schedule::Wait;
use crate::domain::sequences::{
    self, BODY_MAX, DelayUnit, NAME_MAX, SUBJECT_MAX, Sequence, SequenceInput, Status, StepInput,
    Trigger, Weekday, readers,
};
use crate::domain::subscribers::TAG_MAX;
use crate::http::form::FormData;

const STEP_ID: &str = "sequence[steps][][id]";
const STEP_POSITION: &str = "sequence[steps][][position]";
const STEP_SUBJECT: &str = "sequence[steps][][subject]";
const STEP_BODY: &str = "sequence[steps][][body_markdown]";
const STEP_AMOUNT: &str = "sequence[steps][][delay_amount]";
const STEP_UNIT: &str = "sequence[steps][][delay_unit]";
const STEP_HOUR: &str = "sequence[steps][][at_hour]";
const STEP_WEEKDAY: &str = "sequence[steps][][on_weekday]";
const STEP_REMOVE: &str = "sequence[steps][][remove]";
/// The button that adds a blank step and shows the form again, saving nothing.
const ADD_STEP: &str = "add_step";

fn list_url(n: &Newsletter) -> String {
    format!("/newsletters/{}/sequences", n.id)
}

fn sequence_url(n: &Newsletter, id: i64) -> String {
    format!("/newsletters/{}/sequences/{id}", n.id)
}

fn trigger_label(trigger: Trigger) -> &'static str {
    match trigger {
        Trigger::Confirmed => "A subscription is confirmed",
        Trigger::TagAdded => "A tag is added",
        Trigger::BecamePaid => "A member gets paid access",
        Trigger::Manual => "Only when you add a reader",
    }
}

fn unit_label(unit: DelayUnit, amount: i64) -> &'static str {
    match (unit, amount == 1) {
        (DelayUnit::Minutes, true) => "minute",
        (DelayUnit::Minutes, false) => "minutes",
        (DelayUnit::Hours, true) => "hour",
        (DelayUnit::Hours, false) => "hours",
        (DelayUnit::Days, true) => "day",
        (DelayUnit::Days, false) => "days",
    }
}

fn weekday_label(day: Weekday) -> &'static str {
    match day {
        Weekday::Monday => "Monday",
        Weekday::Tuesday => "Tuesday",
        Weekday::Wednesday => "Wednesday",
        Weekday::Thursday => "Thursday",
        Weekday::Friday => "Friday",
        Weekday::Saturday => "Saturday",
        Weekday::Sunday => "Sunday",
    }
}

/// "1 day after the previous step, then at 09:00 on a Monday".
fn describe_wait(wait: &Wait, first: bool) -> String {
    let after = if first {
        "entering"
    } else {
        "the previous step"
    };
    let mut text = if wait.amount == 0 && first {
        "On entering".to_string()
    } else if wait.amount == 0 {
        "Right after the previous step".to_string()
    } else {
        format!(
            "{} {} after {after}",
            wait.amount,
            unit_label(wait.unit, wait.amount)
        )
    };
    if let Some(hour) = wait.at_hour {
        text.push_str(&format!(", then at {hour:02}:00"));
        if let Some(day) = wait.on_weekday {
            text.push_str(&format!(" on a {}", weekday_label(day)));
        }
    }
    text
}

/// One step of the editor as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct StepRow {
    id: String,
    position: String,
    subject: String,
    body_markdown: String,
    delay_amount: String,
    delay_unit: String,
    at_hour: String,
    on_weekday: String,
}

impl StepRow {
    fn blank() -> Self {
        StepRow {
            delay_amount: "1".into(),
            delay_unit: DelayUnit::Days.as_str().into(),
            ..StepRow::default()
        }
    }

    /// A new step nobody typed into: dropped on save.
    fn is_blank(&self) -> bool {
        self.id.is_empty() && self.subject.trim().is_empty() && self.body_markdown.trim().is_empty()
    }
}

/// The editor as typed.
#[derive(Debug, Clone, Default)]
struct SequenceForm {
    name: String,
    status: String,
    trigger: String,
    trigger_tag: String,
    exit_tag_added: String,
    exit_tag_removed: String,
    steps: Vec<StepRow>,
}

impl SequenceForm {
    fn new_sequence() -> Self {
        SequenceForm {
            status: Status::Live.as_str().into(),
            trigger: Trigger::Confirmed.as_str().into(),
            steps: vec![StepRow {
                delay_amount: "0".into(),
                ..StepRow::blank()
            }],
            ..SequenceForm::default()
        }
    }

    fn of(q: &Sequence) -> Self {
        SequenceForm {
            name: q.name.clone(),
            status: q.status.as_str().into(),
            trigger: q.trigger.as_str().into(),
            trigger_tag: q.trigger_tag.clone().unwrap_or_default(),
            exit_tag_added: q.exit_tag_added.clone().unwrap_or_default(),
            exit_tag_removed: q.exit_tag_removed.clone().unwrap_or_default(),
            steps: q
                .steps
                .iter()
                .map(|s| StepRow {
                    id: s.id.to_string(),
                    position: s.position.to_string(),
                    subject: s.subject.clone(),
                    body_markdown: s.body_markdown.clone(),
                    delay_amount: s.wait.amount.to_string(),
                    delay_unit: s.wait.unit.as_str().into(),
                    at_hour: s.wait.at_hour.map(|h| h.to_string()).unwrap_or_default(),
                    on_weekday: s
                        .wait
                        .on_weekday
                        .map(|d| d.as_str().to_string())
                        .unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// Reads a posted editor: removed and blank steps dropped, the others in the order of
    /// their position numbers (one without goes last), numbered 1, 2, ... as they will be
    /// stored, so the domain's "step 2" is the second one shown again.
    fn read(form: &FormData) -> (Self, FieldErrors) {
        let names = [
            STEP_ID,
            STEP_POSITION,
            STEP_SUBJECT,
            STEP_BODY,
            STEP_AMOUNT,
            STEP_UNIT,
            STEP_HOUR,
            STEP_WEEKDAY,
        ];
        let columns = names.map(|name| form.all(name));
        let removed: Vec<String> = form.all(STEP_REMOVE);
        let cell = |c: usize, row: usize| columns[c].get(row).cloned().unwrap_or_default();
        let rows = columns.iter().map(Vec::len).max().unwrap_or(0);
        let mut problems = FieldErrors::new();
        let mut kept = Vec::new();
        for i in 0..rows {
            let row = StepRow {
                id: cell(0, i).trim().to_string(),
                position: cell(1, i).trim().to_string(),
                subject: cell(2, i),
                body_markdown: cell(3, i),
                delay_amount: cell(4, i),
                delay_unit: cell(5, i),
                at_hour: cell(6, i),
                on_weekday: cell(7, i),
            };
            if removed.contains(&i.to_string()) || row.is_blank() {
                continue;
            }
            let order = match row.position.as_str() {
                "" => i64::MAX,
                text => text.parse::<i64>().unwrap_or_else(|_| {
                    let n = kept.len() + 1;
                    problems.add("base", format!("Step {n} position must be a whole number"));
                    i64::MAX
                }),
            };
            kept.push((order, i, row));
        }
        if problems.is_empty() {
            kept.sort_by_key(|(order, i, _)| (*order, *i));
        }
        let mut steps: Vec<StepRow> = kept.into_iter().map(|(_, _, row)| row).collect();
        for (n, row) in steps.iter_mut().enumerate() {
            row.position = (n + 1).to_string();
        }
        let read = SequenceForm {
            name: form.get("sequence[name]").to_string(),
            status: form.get("sequence[status]").trim().to_string(),
            trigger: form.get("sequence[trigger]").trim().to_string(),
            trigger_tag: form.get("sequence[trigger_tag]").to_string(),
            exit_tag_added: form.get("sequence[exit_tag_added]").to_string(),
            exit_tag_removed: form.get("sequence[exit_tag_removed]").to_string(),
            steps,
        };
        (read, problems)
    }

    fn input(&self) -> SequenceInput {
        let tag = |t: &str| Some(Some(t.to_string()).filter(|t| !t.trim().is_empty()));
        SequenceInput {
            name: Some(self.name.clone()),
            status: Some(self.status.clone()),
            trigger: Some(self.trigger.clone()),
            trigger_tag: tag(&self.trigger_tag),
            exit_tag_added: tag(&self.exit_tag_added),
            exit_tag_removed: tag(&self.exit_tag_removed),
            steps: Some(
                self.steps
                    .iter()
                    .map(|row| StepInput {
                        id: row.id.parse().ok(),
                        subject: row.subject.clone(),
                        body_markdown: row.body_markdown.clone(),
                        delay_amount: row.delay_amount.clone(),
                        delay_unit: row.delay_unit.clone(),
                        at_hour: row.at_hour.clone(),
                        on_weekday: row.on_weekday.clone(),
                    })
                    .collect(),
            ),
        }
    }
}

/// The domain names a step's fields by index (`steps[1].subject`); the page says "Step 2
/// subject", as the steps are shown again (numbered from 2 in the welcome sequence, whose
/// step 1 is the welcome e-mail: `first` is the number of the first stored step).
fn for_people(found: FieldErrors, first: usize) -> FieldErrors {
    let mut out = FieldErrors::new();
    for (field, messages) in found.by_field() {
        let step = field.strip_prefix("steps[").and_then(|rest| {
            let (index, part) = rest.split_once("].")?;
            let n = index.parse::<usize>().ok()? + first;
            Some(format!("Step {n} {}", part.replace('_', " ")))
        });
        for message in messages {
            match &step {
                Some(label) => out.add("base", format!("{label} {message}")),
                None => out.add(&field, message),
            }
        }
    }
    out
}

/// Step `n` of the editor, the `index`th row of the form.
fn step_row(index: usize, n: usize, row: &StepRow) -> Markup {
    html! {
        fieldset.step-row {
            legend { "Step " (n) }
            input type="hidden" name=(STEP_ID) value=(row.id);
            label.position { "Position" input type="number" name=(STEP_POSITION) min="1" value=(row.position) inputmode="numeric"; }
            label { "Subject" input type="text" name=(STEP_SUBJECT) value=(row.subject) maxlength=(SUBJECT_MAX) autocomplete="off"; }
            label { "Body (Markdown; merge tags work)" textarea name=(STEP_BODY) rows="6" maxlength=(BODY_MAX) { (row.body_markdown) } }
            div.wait-row {
                label { "Wait" input type="number" name=(STEP_AMOUNT) min="0" value=(row.delay_amount) inputmode="numeric" required; }
                label { "Unit"
                    select name=(STEP_UNIT) {
                        @for unit in DelayUnit::ALL {
                            option value=(unit.as_str()) selected[row.delay_unit == unit.as_str()] { (unit_label(*unit, 2)) }
                        }
                    }
                }
                label { "Then at"
                    select name=(STEP_HOUR) {
                        option value="" selected[row.at_hour.is_empty()] { "any time" }
                        @for hour in 0..24 {
                            option value=(hour) selected[row.at_hour.trim() == hour.to_string()] { (format!("{hour:02}:00")) }
                        }
                    }
                }
                label { "On"
                    select name=(STEP_WEEKDAY) {
                        option value="" selected[row.on_weekday.is_empty()] { "any day" }
                        @for day in Weekday::ALL {
                            option value=(day.as_str()) selected[row.on_weekday == day.as_str()] { (weekday_label(*day)) }
                        }
                    }
                }
            }
            @if !row.is_blank() || n > 1 {
                label.check { input type="checkbox" name=(STEP_REMOVE) value=(index); "Remove this step" }
            }
        }
    }
}

/// The number of the first stored step: 2 in the welcome sequence, after the welcome e-mail.
fn first_step(welcome: bool) -> usize {
    if welcome { 2 } else { 1 }
}

/// The editor; `action` is where it posts. The welcome sequence's starts on confirmation
/// and its first step is the welcome e-mail, edited in the settings.
fn editor(
    ctx: &Ctx,
    n: &Newsletter,
    action: &str,
    welcome: bool,
    typed: &SequenceForm,
    problems: &FieldErrors,
) -> Markup {
    let first = first_step(welcome);
    html! {
        (errors(problems))
        form.stack.sequence-form method="post" action=(action) {
            (csrf_field(ctx))
            label { "Name" input type="text" name="sequence[name]" value=(typed.name) required maxlength=(NAME_MAX) autocomplete="off"; }
            @if welcome {
                input type="hidden" name="sequence[trigger]" value=(Trigger::Confirmed.as_str());
                p { "Starts when a subscription is confirmed. Step 1 is the welcome e-mail: " a href={ "/newsletters/" (n.id) "/settings#welcome" } { "edit it in the settings" } "." }
            } @else {
                label { "Starts when"
                    select name="sequence[trigger]" {
                        @for trigger in Trigger::ALL {
                            option value=(trigger.as_str()) selected[typed.trigger == trigger.as_str()] { (trigger_label(*trigger)) }
                        }
                    }
                }
                label { "The tag that starts it (when a tag is added)" input type="text" name="sequence[trigger_tag]" value=(typed.trigger_tag) maxlength=(TAG_MAX) autocomplete="off"; }
            }
            label { "A reader leaves when this tag is added (optional)" input type="text" name="sequence[exit_tag_added]" value=(typed.exit_tag_added) maxlength=(TAG_MAX) autocomplete="off"; }
            label { "A reader leaves when this tag is removed (optional)" input type="text" name="sequence[exit_tag_removed]" value=(typed.exit_tag_removed) maxlength=(TAG_MAX) autocomplete="off"; }
            fieldset {
                legend { "Status" }
                @for status in Status::ALL {
                    label.check {
                        input type="radio" name="sequence[status]" value=(status.as_str()) checked[typed.status == status.as_str()];
                        @match status { Status::Live => "Live: readers enter and steps go", Status::Paused => "Paused: nobody enters, no step goes; readers wait where they are" }
                    }
                }
            }
            p.muted { "A reader also leaves when they unsubscribe. Waits in days are calendar days on the newsletter's clocks; an hour and a day are the newsletter's time zone's. A change applies to readers who have not reached the step: nobody gets a step twice." }
            @for (index, row) in typed.steps.iter().enumerate() {
                (step_row(index, index + first, row))
            }
            div.actions {
                button.secondary type="submit" name="action" value=(ADD_STEP) formnovalidate { "Add a step" }
                button type="submit" name="action" value="save" { "Save the sequence" }
            }
        }
    }
}

fn list_page(ctx: &Ctx, n: &Newsletter, found: &[Sequence]) -> Markup {
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        "Sequences",
        html! {
            p { a href={ "/newsletters/" (n.id) "/issues" } { "← Issues" } }
            div.heading {
                h1 { "Sequences" }
                a.button href={ (list_url(n)) "/new" } { "New sequence" }
            }
            p.muted { "E-mails that follow each reader from a moment on: a welcome series after they confirm, a course after a tag, a thank-you series for paid members. Each step goes to each reader once, a wait after the one before." }
            @if found.is_empty() {
                p.empty { "No sequences yet." }
            } @else {
                (table_wrap("Sequences", html! {
                    table #sequences {
                        thead { tr {
                            th scope="col" { "Name" } th scope="col" { "Starts when" } th scope="col" { "Steps" }
                            th scope="col" { "In it now" } th scope="col" { "Completed" } th scope="col" { "Status" }
                        } }
                        tbody {
                            @for q in found {
                                tr {
                                    td { a href=(sequence_url(n, q.id)) { (q.name) } }
                                    td {
                                        (trigger_label(q.trigger))
                                        @if let Some(tag) = &q.trigger_tag { ": " code { (tag) } }
                                    }
                                    td.num { (q.steps.len()) }
                                    td.num { (q.steps.iter().map(|s| s.counts.waiting).sum::<i64>()) }
                                    td.num { (q.completed) }
                                    td { (q.status.as_str()) }
                                }
                            }
                        }
                    }
                }))
            }
        },
    )
}

fn new_page(ctx: &Ctx, n: &Newsletter, typed: &SequenceForm, problems: &FieldErrors) -> Markup {
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        "New sequence",
        html! {
            p { a href=(list_url(n)) { "← Sequences" } }
            h1 { "New sequence" }
            (editor(ctx, n, &list_url(n), false, typed, problems))
        },
    )
}

/// What a sequence page's reader forms show again after a refusal.
#[derive(Default)]
struct ReaderTyped {
    add_email: String,
    stop_email: String,
}

fn sequence_page(
    ctx: &Ctx,
    n: &Newsletter,
    q: &Sequence,
    typed: &SequenceForm,
    problems: &FieldErrors,
    reader: (&ReaderTyped, &FieldErrors),
) -> Markup {
    let url = sequence_url(n, q.id);
    let (reader_typed, reader_problems) = reader;
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        &q.name,
        html! {
            p { a href=(list_url(n)) { "← Sequences" } }
            h1 { (q.name) }
            p {
                (trigger_label(q.trigger))
                @if let Some(tag) = &q.trigger_tag { ": " code { (tag) } }
                ". " (q.status.as_str()) "; " (q.completed) " completed."
            }
            (table_wrap("Steps", html! {
                table #steps {
                    thead { tr {
                        th scope="col" { "Step" } th scope="col" { "Subject" } th scope="col" { "When" }
                        th scope="col" { "Waiting" } th scope="col" { "Sent" } th scope="col" { "Opened" }
                        th scope="col" { "Clicked" } th scope="col" { "Left" }
                    } }
                    tbody {
                        @if q.welcome {
                            tr #welcome-step {
                                td.num { "1" }
                                td { (n.welcome.subject_or_default(&n.name)) }
                                td {
                                    "On confirming: the welcome e-mail"
                                    @if !n.welcome.enabled { " (switched off)" }
                                    ". " a href={ "/newsletters/" (n.id) "/settings#welcome" } { "Edit it" }
                                }
                                td.num { "–" } td.num { "–" } td.num { "–" } td.num { "–" } td.num { "–" }
                            }
                        }
                        @for s in &q.steps {
                            tr {
                                td.num { (s.position as usize + first_step(q.welcome) - 1) }
                                td { (s.subject) }
                                td { (describe_wait(&s.wait, s.position == 1 && !q.welcome)) }
                                td.num { (s.counts.waiting) }
                                td.num {
                                    (s.counts.sent)
                                    @if s.counts.unconfirmed > 0 { " (+" (s.counts.unconfirmed) " unconfirmed)" }
                                    @if s.counts.failed > 0 { " (" (s.counts.failed) " refused)" }
                                }
                                td.num { (s.counts.opened) }
                                td.num { (s.counts.clicked) }
                                td.num { (s.counts.left) }
                            }
                        }
                    }
                }
            }))
            p.muted { "Waiting: readers whose next step this is. Left: readers who left while it was their next step (unsubscribed, a tag, or stopped). Opens by mail privacy proxies and scanners are set aside." }
            section.panel #readers aria-labelledby="readers-h" {
                h2 #readers-h { "Readers" }
                (errors(reader_problems))
                form.inline-form method="post" action={ (url) "/readers" } {
                    (csrf_field(ctx))
                    label { "Add a subscriber by address" input type="email" name="reader[email]" value=(reader_typed.add_email) required autocomplete="off"; }
                    button type="submit" { "Add to the sequence" }
                }
                form.inline-form method="post" action={ (url) "/readers/stop" } {
                    (csrf_field(ctx))
                    label { "Stop a reader by address" input type="email" name="reader[email]" value=(reader_typed.stop_email) required autocomplete="off"; }
                    button.secondary type="submit" { "Stop them" }
                }
                p.muted { "A reader goes through a sequence once. Stopping sends them no further step." }
            }
            section.panel #edit aria-labelledby="edit-h" {
                h2 #edit-h { "Edit" }
                (editor(ctx, n, &url, q.welcome, typed, problems))
            }
            @if !q.welcome {
                section.panel #delete aria-labelledby="delete-h" {
                    h2 #delete-h { "Delete" }
                    p.muted { "Its readers stop where they are; the mail they got stays sent." }
                    form method="post" action={ (url) "/delete" } {
                        (csrf_field(ctx))
                        button.danger type="submit" { "Delete this sequence" }
                    }
                }
            }
        },
    )
}

async fn load(state: &State, n: &Newsletter, raw: &str) -> Result<Sequence, WebError> {
    let (nid, id) = (n.id, parse_id(raw)?);
    Ok(state
        .db
        .run(move |conn| sequences::get(conn, nid, id))
        .await?)
}

/// `GET /newsletters/:id/sequences`.
#[handler]
pub async fn list(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let nid = n.id;
    let found = state.db.run(move |conn| sequences::list(conn, nid)).await?;
    render(StatusCode::OK, list_page(&ctx, &n, &found))
}

/// `GET /newsletters/:id/sequences/new`.
#[handler]
pub async fn new(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    render(
        StatusCode::OK,
        new_page(&ctx, &n, &SequenceForm::new_sequence(), &FieldErrors::new()),
    )
}

/// What a posted editor asks for.
enum Posted {
    /// Save it.
    Save(SequenceForm),
    /// Show it again: with "Add a step", with a blank step more; or with the position
    /// problems.
    Again(SequenceForm, FieldErrors),
}

fn posted(form: &FormData) -> Posted {
    let (mut typed, problems) = SequenceForm::read(form);
    if form.get("action") == ADD_STEP {
        typed.steps.push(StepRow {
            position: (typed.steps.len() + 1).to_string(),
            ..StepRow::blank()
        });
        return Posted::Again(typed, problems);
    }
    if !problems.is_empty() {
        return Posted::Again(typed, problems);
    }
    Posted::Save(typed)
}

/// The status of a page shown again: 200 after "Add a step", 422 after a refusal.
fn again_status(problems: &FieldErrors) -> StatusCode {
    if problems.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    }
}

/// `POST /newsletters/:id/sequences`: creates the sequence.
#[handler]
pub async fn create(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let typed = match posted(&form) {
        Posted::Save(typed) => typed,
        Posted::Again(typed, problems) => {
            return render(
                again_status(&problems),
                new_page(&ctx, &n, &typed, &problems),
            );
        }
    };
    let (nid, input) = (n.id, typed.input());
    let saved = state
        .db
        .run_after(
            move || sequences::check_new(&input),
            move |conn, checked| sequences::create(conn, nid, &checked),
        )
        .await;
    match saved {
        Ok(q) => {
            ctx.notice_next(req, "The sequence is saved.");
            see_other(&sequence_url(&n, q.id))
        }
        Err(e) => {
            let problems = for_people(invalid_fields(e)?, first_step(false));
            render(
                StatusCode::UNPROCESSABLE_ENTITY,
                new_page(&ctx, &n, &typed, &problems),
            )
        }
    }
}

/// `GET /newsletters/:id/sequences/:sid`.
#[handler]
pub async fn show(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let q = load(state, &n, &sid).await?;
    let typed = SequenceForm::of(&q);
    let none = FieldErrors::new();
    render(
        StatusCode::OK,
        sequence_page(
            &ctx,
            &n,
            &q,
            &typed,
            &none,
            (&ReaderTyped::default(), &none),
        ),
    )
}

/// `POST /newsletters/:id/sequences/:sid`: saves the editor.
#[handler]
pub async fn update(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, &id, body).await?;
    let q = load(state, &n, &sid).await?;
    let none = FieldErrors::new();
    let typed = match posted(&form) {
        Posted::Save(typed) => typed,
        Posted::Again(typed, problems) => {
            let page = sequence_page(
                &ctx,
                &n,
                &q,
                &typed,
                &problems,
                (&ReaderTyped::default(), &none),
            );
            return render(again_status(&problems), page);
        }
    };
    let (nid, qid, input) = (n.id, q.id, typed.input());
    let saved = state
        .db
        .run_after(
            move || sequences::check_changes(&input),
            move |conn, checked| sequences::update(conn, nid, qid, &checked),
        )
        .await;
    match saved {
        Ok(_) => {
            ctx.notice_next(req, "The sequence is saved.");
            see_other(&sequence_url(&n, q.id))
        }
        Err(e) => {
            let problems = for_people(invalid_fields(e)?, first_step(q.welcome));
            let page = sequence_page(
                &ctx,
                &n,
                &q,
                &typed,
                &problems,
                (&ReaderTyped::default(), &none),
            );
            render(StatusCode::UNPROCESSABLE_ENTITY, page)
        }
    }
}

/// Adding (`stop` false) or stopping a reader by address.
async fn reader_action(
    req: &Request,
    id: &str,
    sid: &str,
    body: Body,
    state: &State,
    stop: bool,
) -> WebResult {
    let (form, ctx, n) = owned_post(req, state, id, body).await?;
    let q = load(state, &n, sid).await?;
    let email = form.get("reader[email]").to_string();
    let (nid, qid, typed_email) = (n.id, q.id, email.clone());
    let done = state
        .db
        .run(move |conn| {
            if stop {
                readers::stop_by_email(conn, nid, qid, &typed_email)
            } else {
                readers::add_by_email(conn, nid, qid, &typed_email)
            }
        })
        .await;
    match done {
        Ok(_) => {
            let notice = if stop {
                format!("{} is stopped: no further step goes to them.", email.trim())
            } else {
                format!(
                    "{} is in the sequence: the first step's wait starts now.",
                    email.trim()
                )
            };
            ctx.notice_next(req, &notice);
            see_other(&sequence_url(&n, q.id))
        }
        Err(e) => {
            let problems = super::problems(e)?;
            let typed = if stop {
                ReaderTyped {
                    stop_email: email,
                    ..ReaderTyped::default()
                }
            } else {
                ReaderTyped {
                    add_email: email,
                    ..ReaderTyped::default()
                }
            };
            let form = SequenceForm::of(&q);
            let page = sequence_page(
                &ctx,
                &n,
                &q,
                &form,
                &FieldErrors::new(),
                (&typed, &problems),
            );
            render(StatusCode::UNPROCESSABLE_ENTITY, page)
        }
    }
}

/// `POST /newsletters/:id/sequences/:sid/readers`: adds a subscriber by address.
#[handler]
pub async fn add_reader(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    reader_action(req, &id, &sid, body, state, false).await
}

/// `POST /newsletters/:id/sequences/:sid/readers/stop`: stops a reader by address.
#[handler]
pub async fn stop_reader(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    reader_action(req, &id, &sid, body, state, true).await
}

/// `POST /newsletters/:id/sequences/:sid/delete`.
#[handler]
pub async fn delete(
    req: &Request,
    Path((id, sid)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, ctx, n) = owned_post(req, state, &id, body).await?;
    let q = load(state, &n, &sid).await?;
    let (nid, qid) = (n.id, q.id);
    state
        .db
        .run(move |conn| sequences::delete(conn, nid, qid))
        .await?;
    ctx.notice_next(req, "The sequence is deleted; the mail it sent stays sent.");
    see_other(&list_url(&n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> FormData {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        FormData::parse(body.as_bytes())
    }

    fn row<'a>(id: &'a str, position: &'a str, subject: &'a str) -> Vec<(&'static str, &'a str)> {
        vec![
            (STEP_ID, id),
            (STEP_POSITION, position),
            (STEP_SUBJECT, subject),
            (STEP_BODY, "Body"),
            (STEP_AMOUNT, "1"),
            (STEP_UNIT, "days"),
            (STEP_HOUR, ""),
            (STEP_WEEKDAY, ""),
        ]
    }

    #[test]
    fn steps_are_ordered_removed_and_blank_ones_dropped() {
        let mut pairs = vec![("sequence[name]", "Course")];
        pairs.extend(row("7", "2", "kept second"));
        pairs.extend(row("", "1", "new first"));
        pairs.extend(row("8", "3", "removed"));
        let mut blank = row("", "", "");
        blank[3] = (STEP_BODY, "");
        pairs.extend(blank);
        pairs.push((STEP_REMOVE, "2"));
        let (read, problems) = SequenceForm::read(&form(&pairs));
        assert!(problems.is_empty());
        let subjects: Vec<&str> = read.steps.iter().map(|s| s.subject.as_str()).collect();
        assert_eq!(subjects, ["new first", "kept second"]);
        let input = read.input();
        let steps = input.steps.unwrap();
        assert_eq!(steps[0].id, None);
        assert_eq!(steps[1].id, Some(7));
    }

    #[test]
    fn add_a_step_shows_the_form_again_with_a_blank_step_and_saves_nothing() {
        let mut pairs = vec![("sequence[name]", "Course"), ("action", ADD_STEP)];
        pairs.extend(row("", "1", "first"));
        let Posted::Again(typed, problems) = posted(&form(&pairs)) else {
            panic!("adding a step saves nothing");
        };
        assert!(problems.is_empty());
        assert_eq!(typed.steps.len(), 2);
        assert!(typed.steps[1].is_blank());
        assert_eq!(typed.steps[1].position, "2");
    }

    #[test]
    fn waits_read_as_sentences() {
        let wait = Wait {
            amount: 2,
            unit: DelayUnit::Days,
            at_hour: Some(9),
            on_weekday: Some(Weekday::Monday),
        };
        assert_eq!(
            describe_wait(&wait, false),
            "2 days after the previous step, then at 09:00 on a Monday"
        );
        let at_once = Wait {
            amount: 0,
            unit: DelayUnit::Minutes,
            at_hour: None,
            on_weekday: None,
        };
        assert_eq!(describe_wait(&at_once, true), "On entering");
    }
}
