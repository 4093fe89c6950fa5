//! Sequences (docs/automations.md, "Sequences"): a newsletter's ordered e-mails that follow a
//! reader, each step a Markdown mail (merge tags work) sent a delay after the previous one
//! (after entering, for the first), perhaps then at an hour of a weekday on the newsletter's
//! clocks. A reader enters when the sequence's trigger happens (a confirmed subscription, a
//! tag added, paid access, or the owner adding them) and leaves when they leave the list, when
//! a tag is added or removed as the sequence says, or when the owner stops them.
//!
//! This module holds the definitions and the owner's changes; [`readers`] the entering and
//! leaving, [`schedule`] when a step is due, [`round`] the periodic queueing of due steps and
//! [`sends`] each step's send to one reader, at most once.

pub mod readers;
pub mod round;
pub mod schedule;
pub mod sends;

use rusqlite::{Connection, OptionalExtension};

use crate::clock::Timestamp;
use crate::domain::content::{self, merge_tags};
use crate::domain::subscribers::{self, custom_fields};
use crate::domain::{DomainError, DomainResult, ErrorCode, FieldErrors, clean_line, clean_text};
use crate::store::write_tx;
pub use schedule::{DelayUnit, Weekday};

/// The most sequences a newsletter has, and steps a sequence has.
pub const SEQUENCES_MAX: i64 = 50;
pub const STEPS_MAX: usize = 30;
/// The longest name and subject, in characters.
pub const NAME_MAX: usize = 100;
pub const SUBJECT_MAX: usize = 200;
/// The longest step body, in characters.
pub const BODY_MAX: usize = 50_000;

crate::string_enum!(
    /// What makes a reader enter a sequence.
    pub Trigger {
        /// Their subscription is confirmed on the site (or a signup form).
        Confirmed => "confirmed",
        /// The sequence's tag is added to them, however it is added.
        TagAdded => "tag_added",
        /// They get paid access.
        BecamePaid => "became_paid",
        /// Only the owner adds readers.
        Manual => "manual"
    }
);

crate::string_enum!(
    /// Whether a sequence runs.
    pub Status {
        Live => "live",
        /// Nobody enters and no step goes; readers wait where they are.
        Paused => "paused"
    }
);

/// One step as stored, with its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub id: i64,
    pub position: i64,
    pub subject: String,
    pub body_markdown: String,
    pub body_html: String,
    pub wait: schedule::Wait,
    pub counts: StepCounts,
}

/// Where a step's readers are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepCounts {
    /// Readers whose next step this is.
    pub waiting: i64,
    /// Handed to the relay and taken.
    pub sent: i64,
    /// Handed over, the answer lost (may have arrived; never sent again).
    pub unconfirmed: i64,
    /// Refused for good by the relay.
    pub failed: i64,
    /// Readers who left while this was their next step.
    pub left: i64,
    /// Sends a person opened (opens by mail privacy proxies and scanners set aside).
    pub opened: i64,
    /// Sends a person clicked a link in.
    pub clicked: i64,
}

/// A sequence as stored, with its steps in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    pub id: i64,
    pub newsletter_id: i64,
    pub name: String,
    pub status: Status,
    pub trigger: Trigger,
    pub trigger_tag: Option<String>,
    pub exit_tag_added: Option<String>,
    pub exit_tag_removed: Option<String>,
    /// The newsletter's welcome sequence: the welcome e-mail (the newsletter's `welcome_*`
    /// settings, sent at confirmation) goes first, then `steps`. It starts on confirmation
    /// and cannot be deleted.
    pub welcome: bool,
    pub steps: Vec<Step>,
    /// Readers who got every step.
    pub completed: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A step as the owner gives it; `id` keeps an existing step (its sends and counts).
#[derive(Debug, Clone, Default)]
pub struct StepInput {
    pub id: Option<i64>,
    pub subject: String,
    pub body_markdown: String,
    pub delay_amount: String,
    pub delay_unit: String,
    /// Empty: any time.
    pub at_hour: String,
    /// Empty: any day.
    pub on_weekday: String,
}

/// A sequence as the owner gives it; `None` leaves a field as it is (an update). `steps`
/// replaces the list: each step is given in its order, with its `id` to keep it.
#[derive(Debug, Clone, Default)]
pub struct SequenceInput {
    pub name: Option<String>,
    pub status: Option<String>,
    pub trigger: Option<String>,
    pub trigger_tag: Option<Option<String>>,
    pub exit_tag_added: Option<Option<String>>,
    pub exit_tag_removed: Option<Option<String>>,
    pub steps: Option<Vec<StepInput>>,
}

/// A step checked, its body rendered.
#[derive(Debug, Clone)]
struct CheckedStep {
    id: Option<i64>,
    subject: String,
    body_markdown: String,
    body_html: String,
    wait: schedule::Wait,
}

/// A [`SequenceInput`] checked and its bodies rendered: what [`create`] and [`update`] save.
/// Checking renders Markdown within the render budget: call it on a blocking thread before
/// taking a database connection.
#[derive(Debug, Clone)]
pub struct Checked {
    name: Option<String>,
    status: Option<Status>,
    trigger: Option<Trigger>,
    trigger_tag: Option<Option<String>>,
    exit_tag_added: Option<Option<String>>,
    exit_tag_removed: Option<Option<String>>,
    steps: Option<Vec<CheckedStep>>,
}

/// Checks a new sequence: a name, a trigger and at least one step are required.
pub fn check_new(input: &SequenceInput) -> DomainResult<Checked> {
    check(input, true)
}

/// Checks the fields an update changes.
pub fn check_changes(input: &SequenceInput) -> DomainResult<Checked> {
    check(input, false)
}

fn check(input: &SequenceInput, creating: bool) -> DomainResult<Checked> {
    let mut errors = FieldErrors::new();
    let name = match &input.name {
        Some(name) => Some(clean_line(&mut errors, "name", name, true, NAME_MAX)),
        None if creating => {
            errors.add("name", "can't be blank");
            None
        }
        None => None,
    };
    let status = input.status.as_deref().and_then(|text| {
        let status = Status::parse(text.trim());
        if status.is_none() {
            errors.add("status", "must be live or paused");
        }
        status
    });
    let trigger = match input.trigger.as_deref() {
        Some(text) => {
            let trigger = Trigger::parse(text.trim());
            if trigger.is_none() {
                errors.add(
                    "trigger",
                    "must be confirmed, tag_added, became_paid or manual",
                );
            }
            trigger
        }
        None if creating => {
            errors.add("trigger", "can't be blank");
            None
        }
        None => None,
    };
    let mut tag = |field: &str, value: &Option<Option<String>>| -> Option<Option<String>> {
        // Blank is no tag; the length counts what was sent, as `clean_tag`'s does.
        value.as_ref().map(|given| {
            given.as_deref().and_then(|raw| {
                if raw.trim().is_empty() && raw.chars().count() <= subscribers::TAG_MAX {
                    return None;
                }
                match subscribers::clean_tag(raw) {
                    Ok(tag) => Some(tag),
                    Err(message) => {
                        errors.add(field, message);
                        None
                    }
                }
            })
        })
    };
    let trigger_tag = tag("trigger_tag", &input.trigger_tag);
    let exit_tag_added = tag("exit_tag_added", &input.exit_tag_added);
    let exit_tag_removed = tag("exit_tag_removed", &input.exit_tag_removed);
    let steps = match &input.steps {
        Some(steps) if steps.is_empty() && creating => {
            errors.add("steps", format!("must have from 1 to {STEPS_MAX} steps"));
            None
        }
        Some(steps) => Some(check_steps(&mut errors, steps)),
        None if creating => {
            errors.add("steps", "must have at least one step");
            None
        }
        None => None,
    };
    errors.into_result()?;
    Ok(Checked {
        name,
        status,
        trigger,
        trigger_tag,
        exit_tag_added,
        exit_tag_removed,
        steps,
    })
}

/// Checks the steps given; how few a sequence may have is [`save`]'s (the welcome
/// sequence's own step is the welcome e-mail).
fn check_steps(errors: &mut FieldErrors, steps: &[StepInput]) -> Vec<CheckedStep> {
    if steps.len() > STEPS_MAX {
        errors.add("steps", format!("must have from 1 to {STEPS_MAX} steps"));
    }
    let mut checked = Vec::with_capacity(steps.len());
    for (n, step) in steps.iter().enumerate().take(STEPS_MAX) {
        let field = |name: &str| format!("steps[{n}].{name}");
        let subject = clean_line(errors, &field("subject"), &step.subject, true, SUBJECT_MAX);
        let body_markdown = clean_text(
            errors,
            &field("body_markdown"),
            &step.body_markdown,
            true,
            BODY_MAX,
        );
        let wait = schedule::Wait::check(errors, &field(""), step);
        let body_html = if body_markdown.is_empty() {
            String::new()
        } else {
            match content::render_as(&body_markdown, &field("body_markdown")) {
                Ok(html) => html,
                Err(DomainError::Invalid(_, problems)) => {
                    errors.append(problems);
                    String::new()
                }
                Err(_) => {
                    errors.add(&field("body_markdown"), "could not be rendered now");
                    String::new()
                }
            }
        };
        checked.push(CheckedStep {
            id: step.id,
            subject,
            body_markdown,
            body_html,
            wait,
        });
    }
    checked
}

macro_rules! select_sequence {
    ($tail:literal) => {
        concat!(
            "SELECT id, newsletter_id, name, status, trigger, trigger_tag, exit_tag_added,
                    exit_tag_removed, created_at, updated_at,
                    welcome, coalesce((SELECT readers FROM sequence_counts c WHERE c.sequence_id = q.id AND c.state = 'completed'), 0)
             FROM sequences q ",
            $tail
        )
    };
}

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Sequence> {
    Ok(Sequence {
        id: r.get(0)?,
        newsletter_id: r.get(1)?,
        name: r.get(2)?,
        status: r.get(3)?,
        trigger: r.get(4)?,
        trigger_tag: r.get(5)?,
        exit_tag_added: r.get(6)?,
        exit_tag_removed: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
        welcome: r.get(10)?,
        completed: r.get(11)?,
        steps: Vec::new(),
    })
}

/// The steps of sequence `id` in order, with their counts (a few rows of the counters each,
/// whatever the number of readers).
pub fn steps(conn: &Connection, id: i64) -> DomainResult<Vec<Step>> {
    const SQL: &str = "SELECT p.id, p.position, p.subject, p.body_markdown, p.body_html,
                p.delay_amount, p.delay_unit, p.at_hour, p.on_weekday,
                coalesce((SELECT sum(readers) FROM sequence_counts c WHERE c.sequence_id = p.sequence_id
                          AND c.reached = p.position - 1 AND c.state IN ('active', 'queued')), 0),
                coalesce(k.sent, 0), coalesce(k.unconfirmed, 0), coalesce(k.failed, 0),
                coalesce((SELECT readers FROM sequence_counts c WHERE c.sequence_id = p.sequence_id
                          AND c.reached = p.position - 1 AND c.state = 'left'), 0),
                coalesce(k.opened, 0), coalesce(k.clicked, 0)
         FROM sequence_steps p LEFT JOIN sequence_step_counts k ON k.step_id = p.id
         WHERE p.sequence_id = ?1 ORDER BY p.position";
    let steps = conn
        .prepare_cached(SQL)?
        .query_map([id], |r| {
            Ok(Step {
                id: r.get(0)?,
                position: r.get(1)?,
                subject: r.get(2)?,
                body_markdown: r.get(3)?,
                body_html: r.get(4)?,
                wait: schedule::Wait {
                    amount: r.get(5)?,
                    unit: r.get(6)?,
                    at_hour: r.get(7)?,
                    on_weekday: r.get(8)?,
                },
                counts: StepCounts {
                    waiting: r.get(9)?,
                    sent: r.get(10)?,
                    unconfirmed: r.get(11)?,
                    failed: r.get(12)?,
                    left: r.get(13)?,
                    opened: r.get(14)?,
                    clicked: r.get(15)?,
                },
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(steps)
}

/// Sequence `id` of the newsletter, with its steps.
pub fn get(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<Sequence> {
    const SQL: &str = select_sequence!("WHERE newsletter_id = ?1 AND id = ?2");
    let mut sequence = conn
        .query_row(SQL, (newsletter_id, id), from_row)
        .optional()?
        .ok_or(DomainError::NotFound("sequence"))?;
    sequence.steps = steps(conn, id)?;
    Ok(sequence)
}

/// The newsletter's sequences (at most [`SEQUENCES_MAX`]), the welcome sequence first, then
/// oldest first, with their steps.
pub fn list(conn: &Connection, newsletter_id: i64) -> DomainResult<Vec<Sequence>> {
    const SQL: &str =
        select_sequence!("WHERE newsletter_id = ?1 ORDER BY welcome DESC, id LIMIT ?2");
    let mut found: Vec<Sequence> = conn
        .prepare_cached(SQL)?
        .query_map((newsletter_id, SEQUENCES_MAX), from_row)?
        .collect::<Result<_, _>>()?;
    for sequence in &mut found {
        sequence.steps = steps(conn, sequence.id)?;
    }
    Ok(found)
}

/// Creates a sequence from fields checked by [`check_new`].
pub fn create(
    conn: &mut Connection,
    newsletter_id: i64,
    checked: &Checked,
) -> DomainResult<Sequence> {
    write_tx(conn, |tx| {
        crate::domain::newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        const COUNT: &str = "SELECT count(*) FROM sequences WHERE newsletter_id = ?1";
        let count: i64 = tx.query_row(COUNT, [newsletter_id], |r| r.get(0))?;
        if count >= SEQUENCES_MAX {
            return Err(DomainError::rejected(
                ErrorCode::LimitReached,
                format!("A newsletter has at most {SEQUENCES_MAX} sequences; delete one first"),
            ));
        }
        // Recorded as manual until `save` sets the trigger with its tag.
        let trigger = Trigger::Manual;
        let now = Timestamp::now();
        const INSERT: &str =
            "INSERT INTO sequences (newsletter_id, name, status, trigger, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)";
        tx.execute(
            INSERT,
            (
                newsletter_id,
                checked.name.as_deref().unwrap_or_default(),
                checked.status.unwrap_or(Status::Live),
                trigger,
                &now,
            ),
        )?;
        let id = tx.last_insert_rowid();
        save(tx, newsletter_id, id, checked)
    })
}

/// Changes sequence `id` with fields checked by [`check_changes`]. A change of the steps
/// applies to every reader who has not reached the step: a reader who got n steps gets the
/// step now at n + 1 next, and never a step they already got.
pub fn update(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    checked: &Checked,
) -> DomainResult<Sequence> {
    write_tx(conn, |tx| {
        crate::domain::newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        get(tx, newsletter_id, id)?;
        save(tx, newsletter_id, id, checked)
    })
}

/// Writes the checked fields of sequence `id` inside the caller's transaction.
fn save(tx: &Connection, newsletter_id: i64, id: i64, checked: &Checked) -> DomainResult<Sequence> {
    let before = get(tx, newsletter_id, id)?;
    let trigger = checked.trigger.unwrap_or(before.trigger);
    if before.welcome && trigger != Trigger::Confirmed {
        return Err(DomainError::invalid(
            "trigger",
            "of the welcome sequence is a confirmed subscription: it follows the welcome e-mail",
        ));
    }
    if let Some(steps) = &checked.steps {
        // The welcome sequence's first step is the welcome e-mail.
        let (least, most) = if before.welcome {
            (0, STEPS_MAX - 1)
        } else {
            (1, STEPS_MAX)
        };
        if steps.len() < least || steps.len() > most {
            let message = match before.welcome {
                true => format!("must have at most {most} steps after the welcome e-mail"),
                false => format!("must have from 1 to {STEPS_MAX} steps"),
            };
            return Err(DomainError::invalid("steps", message));
        }
    }
    let trigger_tag = match &checked.trigger_tag {
        Some(tag) => tag.clone(),
        None => before.trigger_tag.clone(),
    };
    let trigger_tag = trigger_tag.filter(|_| trigger == Trigger::TagAdded);
    if trigger == Trigger::TagAdded && trigger_tag.is_none() {
        return Err(DomainError::invalid(
            "trigger_tag",
            "is required when the sequence starts with a tag",
        ));
    }
    let exit_added = checked
        .exit_tag_added
        .clone()
        .unwrap_or(before.exit_tag_added.clone());
    let exit_removed = checked
        .exit_tag_removed
        .clone()
        .unwrap_or(before.exit_tag_removed.clone());
    if let Some(steps) = &checked.steps {
        check_merge_tags(tx, newsletter_id, steps)?;
        replace_steps(tx, id, &before.steps, steps)?;
    }
    const UPDATE: &str =
        "UPDATE sequences SET name = ?2, status = ?3, trigger = ?4, trigger_tag = ?5,
             exit_tag_added = ?6, exit_tag_removed = ?7, updated_at = ?8 WHERE id = ?1";
    tx.execute(
        UPDATE,
        rusqlite::params![
            id,
            checked.name.as_deref().unwrap_or(&before.name),
            checked.status.unwrap_or(before.status),
            trigger,
            trigger_tag,
            exit_added,
            exit_removed,
            Timestamp::now(),
        ],
    )?;
    get(tx, newsletter_id, id)
}

/// Refuses a step whose merge tags name no field of the newsletter, as a send would.
fn check_merge_tags(
    tx: &Connection,
    newsletter_id: i64,
    steps: &[CheckedStep],
) -> DomainResult<()> {
    let fields = custom_fields::list(tx, newsletter_id)?;
    let mut errors = FieldErrors::new();
    for (n, step) in steps.iter().enumerate() {
        let text = format!("{}\n{}", step.subject, step.body_markdown);
        let unknown = merge_tags::unknown(&text, |name| fields.iter().any(|f| f.name == name));
        if !unknown.is_empty() {
            let named: Vec<String> = unknown.iter().map(|t| format!("{{{{ {t} }}}}")).collect();
            errors.add(
                &format!("steps[{n}].body_markdown"),
                format!("has merge tags that name no field: {}", named.join(", ")),
            );
        }
    }
    errors.into_result()
}

/// Replaces the steps of sequence `id` with `steps`, in their order: a step given with the id
/// of one of `current` keeps its row (and its sends), the others are new, and the steps not
/// given are deleted.
fn replace_steps(
    tx: &Connection,
    id: i64,
    current: &[Step],
    steps: &[CheckedStep],
) -> DomainResult<()> {
    let mut errors = FieldErrors::new();
    for (n, step) in steps.iter().enumerate() {
        if let Some(given) = step.id
            && !current.iter().any(|s| s.id == given)
        {
            errors.add(&format!("steps[{n}].id"), "is no step of this sequence");
        }
        if step.id.is_some() && steps[..n].iter().any(|s| s.id == step.id) {
            errors.add(&format!("steps[{n}].id"), "is given twice");
        }
    }
    errors.into_result()?;
    const DELETE: &str = "DELETE FROM sequence_steps WHERE id = ?1";
    for gone in current
        .iter()
        .filter(|s| !steps.iter().any(|g| g.id == Some(s.id)))
    {
        tx.execute(DELETE, [gone.id])?;
    }
    // Out of the way of the positions given, which are unique per sequence.
    const SHIFT: &str =
        "UPDATE sequence_steps SET position = position + 100000 WHERE sequence_id = ?1";
    tx.execute(SHIFT, [id])?;
    const KEEP: &str = "UPDATE sequence_steps SET position = ?2, subject = ?3, body_markdown = ?4,
             body_html = ?5, delay_amount = ?6, delay_unit = ?7, at_hour = ?8, on_weekday = ?9,
             updated_at = ?10 WHERE id = ?1";
    const ADD: &str = "INSERT INTO sequence_steps (sequence_id, position, subject, body_markdown,
             body_html, delay_amount, delay_unit, at_hour, on_weekday, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)";
    let now = Timestamp::now();
    for (position, step) in (1i64..).zip(steps) {
        let w = &step.wait;
        let target = step.id.unwrap_or(id);
        let sql = if step.id.is_some() { KEEP } else { ADD };
        tx.execute(
            sql,
            rusqlite::params![
                target,
                position,
                step.subject,
                step.body_markdown,
                step.body_html,
                w.amount,
                w.unit,
                w.at_hour,
                w.on_weekday,
                now,
            ],
        )?;
    }
    Ok(())
}

/// Deletes sequence `id`: its readers stop where they are; the mail they got stays sent.
/// The welcome sequence stays (its steps can be removed, the welcome switched off).
pub fn delete(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<()> {
    write_tx(conn, |tx| {
        if get(tx, newsletter_id, id)?.welcome {
            return Err(DomainError::rejected(
                ErrorCode::InvalidState,
                "The welcome sequence cannot be deleted: remove its steps, or switch the welcome e-mail off in the settings",
            ));
        }
        tx.execute("DELETE FROM sequences WHERE id = ?1", [id])?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::readers::{LeftReason, State};
    use super::sends::{self, Next, SendStatus};
    use super::*;
    use crate::clock::testing::{at, fixed};

    fn step(subject: &str, amount: &str, unit: &str) -> StepInput {
        StepInput {
            subject: subject.into(),
            body_markdown: format!("Hello {{{{ name | default: \"friend\" }}}}: {subject}"),
            delay_amount: amount.into(),
            delay_unit: unit.into(),
            ..StepInput::default()
        }
    }

    fn subscriber(conn: &Connection, email: &str) -> i64 {
        conn.execute(
            "INSERT INTO subscribers (newsletter_id, email, created_at) VALUES (1, ?1, '2026-01-01T00:00:00.000Z')",
            [email],
        )
        .unwrap();
        conn.last_insert_rowid()
    }

    fn enrollment_of(conn: &Connection, sequence: i64, subscriber: i64) -> readers::Enrollment {
        readers::enrollment(conn, sequence, subscriber)
            .unwrap()
            .unwrap()
    }

    fn queued_jobs(conn: &Connection) -> i64 {
        conn.query_row(
            "SELECT count(*) FROM jobs WHERE kind = 'send_sequence_step'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    }

    #[test]
    fn a_tag_enters_a_reader_who_gets_each_step_once_in_its_time_and_removing_it_leaves() {
        let clock = fixed(at("2026-12-07T10:00:00Z"));
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let input = SequenceInput {
            name: Some("Trial".into()),
            trigger: Some("tag_added".into()),
            trigger_tag: Some(Some("trial".into())),
            exit_tag_removed: Some(Some("trial".into())),
            steps: Some(vec![
                step("Day one", "0", "minutes"),
                step("Day two", "1", "days"),
            ]),
            ..SequenceInput::default()
        };
        let sequence = create(&mut conn, 1, &check_new(&input).unwrap()).unwrap();
        assert_eq!(sequence.steps.len(), 2);
        let ann = subscriber(&conn, "ann@x.co");
        let bo = subscriber(&conn, "bo@x.co");
        subscribers::add_tag(&mut conn, 1, ann, "trial").unwrap();
        subscribers::add_tag(&mut conn, 1, bo, "trial").unwrap();
        assert_eq!(enrollment_of(&conn, sequence.id, ann).waiting_since, None);
        // Bo's tag is removed before the round: Bo leaves, waiting for step 1.
        subscribers::remove_tag(&mut conn, 1, bo, "trial").unwrap();
        let left = enrollment_of(&conn, sequence.id, bo);
        assert_eq!(
            (left.state, left.left_reason),
            (State::Left, Some(LeftReason::TagRemoved))
        );
        assert_eq!(round::stamp(&mut conn).unwrap(), 1);
        assert_eq!(round::queue_due(&mut conn).unwrap(), 1);
        assert_eq!(round::queue_due(&mut conn).unwrap(), 0, "queued once");
        assert_eq!(queued_jobs(&conn), 1);
        let id = enrollment_of(&conn, sequence.id, ann).id;
        let Next::Send(due) = sends::next(&mut conn, id).unwrap() else {
            panic!("step 1 is due");
        };
        assert_eq!((due.position, due.subject.as_str()), (1, "Day one"));
        assert!(sends::mark(&mut conn, &due).unwrap());
        assert!(!sends::mark(&mut conn, &due).unwrap(), "marked once");
        sends::record(&mut conn, &due, SendStatus::Sent).unwrap();
        let after_one = enrollment_of(&conn, sequence.id, ann);
        assert_eq!((after_one.reached, after_one.state), (1, State::Active));
        let counts = get(&conn, 1, sequence.id).unwrap().steps;
        assert_eq!((counts[0].counts.sent, counts[0].counts.left), (1, 1));
        assert_eq!(counts[1].counts.waiting, 1);
        // Step 2 waits a calendar day.
        clock.advance(jiff::SignedDuration::from_hours(23));
        assert_eq!(round::queue_due(&mut conn).unwrap(), 0);
        clock.advance(jiff::SignedDuration::from_hours(1));
        assert_eq!(round::queue_due(&mut conn).unwrap(), 1);
        let Next::Send(due) = sends::next(&mut conn, id).unwrap() else {
            panic!("step 2 is due");
        };
        assert_eq!(due.position, 2);
        // Marked, then the process dies: the next run records it unconfirmed, sends nothing.
        assert!(sends::mark(&mut conn, &due).unwrap());
        assert!(matches!(sends::next(&mut conn, id).unwrap(), Next::Nothing));
        let done = get(&conn, 1, sequence.id).unwrap();
        assert_eq!(done.steps[1].counts.unconfirmed, 1);
        assert_eq!(done.completed, 1);
        assert_eq!(
            enrollment_of(&conn, sequence.id, ann).state,
            State::Completed
        );
        // A reader goes through a sequence once.
        assert!(readers::add(&mut conn, 1, sequence.id, ann).is_err());
    }

    #[test]
    fn bad_sequences_are_refused_by_field_and_unsubscribing_leaves() {
        let _clock = fixed(at("2026-12-07T10:00:00Z"));
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let refused = check_new(&SequenceInput::default())
            .unwrap_err()
            .to_string();
        for problem in [
            "Name can't be blank",
            "Trigger can't be blank",
            "at least one step",
        ] {
            assert!(refused.contains(problem), "{problem}: {refused}");
        }
        let mut bad = step("", "-1", "weeks");
        bad.at_hour = "25".into();
        bad.on_weekday = "someday".into();
        let input = SequenceInput {
            name: Some("x".into()),
            trigger: Some("manual".into()),
            steps: Some(vec![bad]),
            ..SequenceInput::default()
        };
        let refused = check_new(&input).unwrap_err().to_string();
        for field in [
            "subject",
            "delay unit",
            "delay amount",
            "at hour",
            "on weekday",
        ] {
            assert!(refused.contains(field), "{field}: {refused}");
        }
        let mut tagged = step("Hi", "0", "minutes");
        tagged.body_markdown = "Hi {{ shoe_size }}".into();
        let input = SequenceInput {
            name: Some("x".into()),
            trigger: Some("tag_added".into()),
            steps: Some(vec![tagged]),
            ..SequenceInput::default()
        };
        let refused = create(&mut conn, 1, &check_new(&input).unwrap()).unwrap_err();
        assert!(
            refused.to_string().contains("trigger_tag")
                || refused.to_string().contains("Trigger tag"),
            "{refused}"
        );
        let input = SequenceInput {
            trigger: Some("manual".into()),
            ..input
        };
        let refused = create(&mut conn, 1, &check_new(&input).unwrap()).unwrap_err();
        assert!(refused.to_string().contains("shoe_size"), "{refused}");
        let made = list(&conn, 1).unwrap();
        assert!(
            made.len() == 1 && made[0].welcome,
            "nothing was made beside the welcome sequence"
        );
        // The owner adds a reader; unsubscribing leaves.
        let input = SequenceInput {
            steps: Some(vec![step("Hi", "0", "minutes")]),
            ..input
        };
        let sequence = create(&mut conn, 1, &check_new(&input).unwrap()).unwrap();
        let ann = subscriber(&conn, "ann@x.co");
        readers::add(&mut conn, 1, sequence.id, ann).unwrap();
        conn.execute(
            "UPDATE subscribers SET status = 'unsubscribed', changed_at = '2026-12-07T10:00:00.000Z' WHERE id = ?1",
            [ann],
        )
        .unwrap();
        let left = readers::enrollment(&conn, sequence.id, ann)
            .unwrap()
            .unwrap();
        assert_eq!(left.left_reason, Some(LeftReason::Unsubscribed));
        assert_eq!(round::queue_due(&mut conn).unwrap(), 0);
    }

    /// A manual sequence of `steps` with reader ann@x.co in it, queued for step 1.
    fn queued_reader(conn: &mut Connection, steps: Vec<StepInput>) -> (Sequence, i64, i64) {
        let input = SequenceInput {
            name: Some("Course".into()),
            trigger: Some("manual".into()),
            steps: Some(steps),
            ..SequenceInput::default()
        };
        let sequence = create(conn, 1, &check_new(&input).unwrap()).unwrap();
        let ann = subscriber(conn, "ann@x.co");
        let id = readers::add(conn, 1, sequence.id, ann).unwrap().id;
        assert_eq!(round::queue_due(conn).unwrap(), 1);
        (sequence, ann, id)
    }

    fn due_now(conn: &mut Connection, id: i64) -> Box<sends::DueStep> {
        match sends::next(conn, id).unwrap() {
            Next::Send(due) => due,
            Next::Nothing => panic!("a step is due"),
        }
    }

    #[test]
    fn a_refused_step_is_sent_again_and_one_refused_for_good_takes_the_reader_out() {
        let _clock = fixed(at("2026-12-07T10:00:00Z"));
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let (sequence, ann, id) = queued_reader(&mut conn, vec![step("One", "0", "minutes")]);
        let due = due_now(&mut conn, id);
        assert!(sends::mark(&mut conn, &due).unwrap());
        // The relay refused it for now: the mark is taken back and the retry sends it.
        sends::unmark(&mut conn, &due).unwrap();
        let again = due_now(&mut conn, id);
        assert!(sends::mark(&mut conn, &again).unwrap());
        // Refused for good: the reader leaves, the step counts one failure.
        sends::record(&mut conn, &again, SendStatus::Failed).unwrap();
        let left = enrollment_of(&conn, sequence.id, ann);
        assert_eq!(left.left_reason, Some(LeftReason::Failed));
        assert_eq!(
            get(&conn, 1, sequence.id).unwrap().steps[0].counts.failed,
            1
        );
        assert!(matches!(sends::next(&mut conn, id).unwrap(), Next::Nothing));
    }

    #[test]
    fn a_stopped_reader_gets_nothing_more_even_with_a_send_queued() {
        let _clock = fixed(at("2026-12-07T10:00:00Z"));
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let (sequence, ann, id) = queued_reader(&mut conn, vec![step("One", "0", "minutes")]);
        let due = due_now(&mut conn, id);
        let stopped = readers::stop(&mut conn, 1, sequence.id, ann).unwrap();
        assert_eq!(stopped.left_reason, Some(LeftReason::Stopped));
        // The job queued before the stop finds nothing to send, and cannot mark.
        assert!(matches!(sends::next(&mut conn, id).unwrap(), Next::Nothing));
        assert!(!sends::mark(&mut conn, &due).unwrap());
        assert_eq!(round::queue_due(&mut conn).unwrap(), 0);
    }

    #[test]
    fn an_edit_reaches_readers_who_have_not_reached_the_step_and_never_repeats_one() {
        let _clock = fixed(at("2026-12-07T10:00:00Z"));
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let (sequence, ann, id) = queued_reader(&mut conn, vec![step("One", "0", "minutes")]);
        let due = due_now(&mut conn, id);
        assert!(sends::mark(&mut conn, &due).unwrap());
        sends::record(&mut conn, &due, SendStatus::Sent).unwrap();
        assert_eq!(
            enrollment_of(&conn, sequence.id, ann).state,
            State::Completed
        );
        // A reader still at the start, then the owner puts a step before "One" and one after.
        let bo = subscriber(&conn, "bo@x.co");
        let bo_id = readers::add(&mut conn, 1, sequence.id, bo).unwrap().id;
        let mut kept = step("One, edited", "0", "minutes");
        kept.id = Some(sequence.steps[0].id);
        let changes = SequenceInput {
            steps: Some(vec![
                step("Intro", "0", "minutes"),
                kept,
                step("Two", "0", "minutes"),
            ]),
            ..SequenceInput::default()
        };
        let edited = update(&mut conn, 1, sequence.id, &check_changes(&changes).unwrap()).unwrap();
        let subjects: Vec<&str> = edited.steps.iter().map(|s| s.subject.as_str()).collect();
        assert_eq!(subjects, ["Intro", "One, edited", "Two"]);
        assert_eq!(
            edited.steps[1].counts.sent, 1,
            "the kept step keeps its sends"
        );
        // Bo starts with the new first step; a completed reader gets nothing more.
        assert_eq!(round::queue_due(&mut conn).unwrap(), 1);
        assert_eq!(due_now(&mut conn, bo_id).subject, "Intro");
        // A reader who got "One" at position 1 and reaches position 2 skips it: never twice.
        let cy = subscriber(&conn, "cy@x.co");
        let cy_id = readers::add(&mut conn, 1, sequence.id, cy).unwrap().id;
        conn.execute(
            "UPDATE sequence_enrollments SET reached = 1 WHERE id = ?1",
            [cy_id],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO sequence_sends (step_id, subscriber_id, status, sent_at) VALUES (?1, ?2, 'sent', '2026-12-07T10:00:00.000Z')",
            (edited.steps[1].id, cy),
        )
        .unwrap();
        assert_eq!(round::queue_due(&mut conn).unwrap(), 1);
        assert!(matches!(
            sends::next(&mut conn, cy_id).unwrap(),
            Next::Nothing
        ));
        assert_eq!(enrollment_of(&conn, sequence.id, cy).reached, 2);
        // Bad changes change nothing.
        let bad = SequenceInput {
            steps: Some(vec![StepInput {
                id: Some(9999),
                ..step("X", "0", "minutes")
            }]),
            ..SequenceInput::default()
        };
        assert!(update(&mut conn, 1, sequence.id, &check_changes(&bad).unwrap()).is_err());
        assert_eq!(get(&conn, 1, sequence.id).unwrap().steps.len(), 3);
    }

    #[test]
    fn the_welcome_sequence_is_entered_only_with_steps_keeps_its_trigger_and_stays() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let welcome = list(&conn, 1).unwrap().remove(0);
        assert!(welcome.welcome && welcome.steps.is_empty());
        assert_eq!(welcome.trigger, Trigger::Confirmed);
        let now = Timestamp::now();
        // No steps of its own: a confirmation enters nobody.
        let first = subscriber(&conn, "first@example.com");
        crate::store::sequence_entries::enter_on_confirmation(&conn, 1, first, &now).unwrap();
        assert!(
            readers::enrollment(&conn, welcome.id, first)
                .unwrap()
                .is_none()
        );
        // A step after the welcome: the next confirmation enters.
        let with_step = SequenceInput {
            steps: Some(vec![step("After", "1", "days")]),
            ..SequenceInput::default()
        };
        update(
            &mut conn,
            1,
            welcome.id,
            &check_changes(&with_step).unwrap(),
        )
        .unwrap();
        let second = subscriber(&conn, "second@example.com");
        crate::store::sequence_entries::enter_on_confirmation(&conn, 1, second, &now).unwrap();
        assert!(
            readers::enrollment(&conn, welcome.id, second)
                .unwrap()
                .is_some()
        );
        // Its trigger stays; its steps may all go; it is not deleted.
        let moved = SequenceInput {
            trigger: Some("manual".into()),
            ..SequenceInput::default()
        };
        assert!(update(&mut conn, 1, welcome.id, &check_changes(&moved).unwrap()).is_err());
        let emptied = SequenceInput {
            steps: Some(Vec::new()),
            ..SequenceInput::default()
        };
        let kept = update(&mut conn, 1, welcome.id, &check_changes(&emptied).unwrap()).unwrap();
        assert!(kept.steps.is_empty() && kept.trigger == Trigger::Confirmed);
        assert!(delete(&mut conn, 1, welcome.id).is_err());
        assert_eq!(list(&conn, 1).unwrap().len(), 1);
    }
}
