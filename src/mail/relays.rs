//! The relays mail goes through, in order of preference, and what each has shown lately:
//! whether it can be reached, how fast it lets us send (its `per_second` limit, slowed down
//! whenever it answers that we go too fast and sped up again slowly), and how much of its
//! hourly and daily limits is left (`domain::delivery::send_limits`). One [`Relay`] lives as long as
//! the process, shared by every send, so two sends through it together keep to its limits.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::SmtpSettings;
use crate::clock;
use crate::domain::delivery::send_limits::{HeldBy, Room, Usage};
use crate::store::Pool;

/// The slowest pace a throttling relay is slowed to, in messages a second; a relay that
/// still throttles at this pace rests a while instead ([`FIRST_REST`]).
const SLOWEST: f64 = 0.2;

/// Throttling answers within this long of a slow-down count as one (the connections of a send
/// hear the same complaint together).
const REACTION: Duration = Duration::from_secs(1);

/// How long without a throttling answer before the pace goes up a step (a quarter, at least
/// one message a second): from one message a second back to thousands in about a minute.
const SPEED_UP_EVERY: Duration = Duration::from_secs(2);

/// A learnt pace above this is no pace at all.
const UNLIMITED: f64 = 10_000.0;

/// The first rest of a relay that throttles at the slowest pace, or answers that its quota
/// is used up without a daily limit to tell when it comes back; each further one doubles,
/// up to [`LONGEST_REST`].
const FIRST_REST: jiff::SignedDuration = jiff::SignedDuration::from_mins(1);
const LONGEST_REST: jiff::SignedDuration = jiff::SignedDuration::from_hours(1);

/// The first wait before an unreachable relay is tried again; doubles up to [`LONGEST_DOWN`].
const LONGEST_DOWN: Duration = Duration::from_secs(600);

/// One relay and what it has shown.
pub struct Relay {
    pub settings: SmtpSettings,
    /// Its name in messages (host and port).
    pub name: String,
    /// The key of its counts in `send_usage`: its name, or for a newsletter's own relay
    /// that newsletter's (two newsletters' accounts at one ESP have limits each).
    pub usage_key: String,
    /// Where its counts are written when mail goes out one message at a time (account mail);
    /// a bulk send writes them with its own commits instead.
    pool: Option<Pool>,
    first_retry: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    down: Option<Down>,
    pace: Pace,
    /// Messages counted per minute over the last day; read from the database at first use.
    usage: Option<Usage>,
    /// Resting, on the relay's own word, until then.
    rest: Option<(jiff::Timestamp, HeldBy)>,
    next_rest: Option<jiff::SignedDuration>,
    /// Its last throttling answer, for the owner.
    last_answer: Option<String>,
}

struct Down {
    since: jiff::Timestamp,
    retry_at: Instant,
    wait: Duration,
    reason: String,
}

#[derive(Default)]
struct Pace {
    /// Messages a second learnt from throttling answers; `None` while none came lately.
    learnt: Option<f64>,
    last_change: Option<Instant>,
    /// When the next message may go.
    next_slot: Option<Instant>,
    /// Messages taken in the current second (since when) and the previous one, to know the
    /// pace to halve when no limit was known.
    second: Option<(Instant, u32, u32)>,
    /// Messages asked for in the current second and the previous one: the pace to halve when
    /// none was taken lately (right after a start, the relay may refuse the first ones).
    asked: Option<(Instant, u32, u32)>,
}

/// What a relay says to the next message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permit {
    /// Go after this wait (the relay's pace); the message is counted.
    After(Duration),
    /// Not before `until`: a limit is reached.
    Held { until: jiff::Timestamp, by: HeldBy },
}

impl Relay {
    pub fn new(settings: SmtpSettings, pool: Option<Pool>, first_retry: Duration) -> Self {
        Relay {
            name: settings.name(),
            usage_key: settings.name(),
            settings,
            pool,
            first_retry,
            state: Mutex::new(State::default()),
        }
    }

    /// The same relay, its counts kept under `key`.
    pub fn counted_as(mut self, key: String) -> Self {
        self.usage_key = key;
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether its hourly or daily counts matter (a limit of either kind is set).
    pub fn counts_usage(&self) -> bool {
        self.settings.limits.per_hour.is_some() || self.settings.limits.per_day.is_some()
    }

    /// Reads its counts of the last day from the database, the first time they are needed.
    fn ensure_usage(&self, state: &mut State) {
        if state.usage.is_some() || !self.counts_usage() {
            return;
        }
        let loaded = self.pool.as_ref().and_then(|pool| {
            let conn = pool.get().ok()?;
            Usage::load(&conn, &self.usage_key).ok()
        });
        state.usage = Some(loaded.unwrap_or_default());
    }

    /// Loads its counts through `conn` if not yet loaded (a send does this once, off the
    /// async threads, before its first message).
    pub fn load_usage(&self, conn: &rusqlite::Connection) {
        let mut state = self.state();
        if state.usage.is_none() && self.counts_usage() {
            state.usage = Some(Usage::load(conn, &self.usage_key).unwrap_or_default());
        }
    }

    /// Whether a limit or a rest holds it now, and until when.
    pub fn held(&self) -> Option<(jiff::Timestamp, HeldBy)> {
        let now = clock::now();
        let mut state = self.state();
        self.held_in(&mut state, now)
    }

    fn held_in(
        &self,
        state: &mut State,
        now: jiff::Timestamp,
    ) -> Option<(jiff::Timestamp, HeldBy)> {
        if let Some((until, by)) = &state.rest {
            if *until > now {
                return Some((*until, by.clone()));
            }
            state.rest = None;
        }
        self.ensure_usage(state);
        match state.usage.as_ref()?.room(&self.settings.limits, now) {
            Room::Free => None,
            Room::Held { until, by } => Some((until, by)),
        }
    }

    /// Asks to send one message: when it may go (the pace), or that a limit holds. A message
    /// let through is counted at once, so connections asking together never overshoot.
    pub fn permit(&self) -> Permit {
        let now = clock::now();
        let mut state = self.state();
        if let Some((until, by)) = self.held_in(&mut state, now) {
            return Permit::Held { until, by };
        }
        if let Some(usage) = state.usage.as_mut() {
            usage.add(now, 1);
        }
        let instant = Instant::now();
        let pace = self.pace_of(&state.pace);
        let pace_state = &mut state.pace;
        pace_state.asked = Some(count_in_second(pace_state.asked, instant));
        let Some(rate) = pace else {
            return Permit::After(Duration::ZERO);
        };
        let slot = pace_state.next_slot.unwrap_or(instant).max(instant);
        pace_state.next_slot = Some(slot + Duration::from_secs_f64(1.0 / rate));
        Permit::After(slot - instant)
    }

    /// The pace now: the lower of its limit and what it taught us.
    fn pace_of(&self, pace: &Pace) -> Option<f64> {
        let configured = self.settings.limits.per_second.map(f64::from);
        match (configured, pace.learnt) {
            (Some(c), Some(l)) => Some(c.min(l)),
            (c, l) => c.or(l),
        }
    }

    /// A message went through: after a quiet while the pace goes up a step (a quarter, at
    /// least one message a second), back to the limit, or to none.
    pub fn went_through(&self) {
        let mut state = self.state();
        state.next_rest = None;
        let configured = self.settings.limits.per_second.map(f64::from);
        let pace = &mut state.pace;
        pace.second = Some(count_in_second(pace.second, Instant::now()));
        let (Some(learnt), Some(changed)) = (pace.learnt, pace.last_change) else {
            return;
        };
        if changed.elapsed() < SPEED_UP_EVERY {
            return;
        }
        let faster = learnt + (learnt * 0.25).max(1.0);
        pace.last_change = Some(Instant::now());
        pace.learnt = match configured {
            Some(limit) if faster >= limit => None,
            _ if faster >= UNLIMITED => None,
            _ => Some(faster),
        };
        if pace.learnt.is_none() {
            eprintln!("mail: {}: back to its full pace", self.name);
        }
    }

    /// The relay answered that we send too fast: the pace is halved (one halving per
    /// [`REACTION`], however many connections heard it); at the slowest pace it rests a
    /// while instead.
    pub fn throttled(&self, answer: &str) {
        let mut state = self.state();
        let now = Instant::now();
        state.last_answer = Some(answer.to_string());
        if state
            .pace
            .last_change
            .is_some_and(|at| now.duration_since(at) < REACTION && state.pace.learnt.is_some())
        {
            return;
        }
        let current = self.pace_of(&state.pace).unwrap_or_else(|| {
            // No pace known: the pace the relay took lately is the one that was too fast;
            // when it took none yet, the pace we asked at.
            let lately = |counts: Option<(Instant, u32, u32)>| match counts {
                Some((start, this, last)) if now.duration_since(start) < 2 * REACTION => {
                    this.max(last)
                }
                _ => 0,
            };
            let taken = lately(state.pace.second);
            let asked = if taken > 1 {
                taken
            } else {
                lately(state.pace.asked)
            };
            f64::from(asked).max(2.0)
        });
        if current <= SLOWEST {
            let rest: jiff::SignedDuration = state.next_rest.unwrap_or(FIRST_REST);
            state.next_rest = Some((rest * 2_i32).min(LONGEST_REST));
            let until = clock::now() + rest;
            state.rest = Some((until, HeldBy::RelayThrottling(answer.to_string())));
            eprintln!(
                "mail: {}: still asks to slow down at the slowest pace ({answer}); resting until {}",
                self.name,
                clock::human(until)
            );
            return;
        }
        state.pace.learnt = Some((current / 2.0).max(SLOWEST));
        state.pace.last_change = Some(now);
        eprintln!(
            "mail: {}: asked to send more slowly ({answer}); now {:.1} messages a second",
            self.name,
            state.pace.learnt.unwrap_or(SLOWEST)
        );
    }

    /// While it is slowed down by its throttling answers: a sentence for the owner saying so
    /// and at what pace.
    pub fn pace_note(&self) -> Option<String> {
        let state = self.state();
        let learnt = state.pace.learnt?;
        let answer = state.last_answer.as_deref().unwrap_or("");
        Some(format!(
            "Slowed down: the relay {} asked to send more slowly ({answer}); now about {learnt:.1} \
             messages a second, speeding up again while it lets us.",
            self.name,
        ))
    }

    /// The relay answered that its quota is used up: it rests until its daily limit lets it
    /// send again, or, without one, for a while (an hour at most) before it is asked again.
    pub fn quota_reached(&self, answer: &str) -> (jiff::Timestamp, HeldBy) {
        let now = clock::now();
        let mut state = self.state();
        let by = HeldBy::RelayQuota(answer.to_string());
        let until = match self.held_in(&mut state, now) {
            Some((until, _)) => until,
            None => {
                let rest = state.next_rest.unwrap_or(FIRST_REST * 60).min(LONGEST_REST);
                state.next_rest = Some(LONGEST_REST);
                now + rest
            }
        };
        state.rest = Some((until, by.clone()));
        eprintln!(
            "mail: {}: its sending quota is used up ({answer}); resting until {}",
            self.name,
            clock::human(until)
        );
        (until, by)
    }

    /// It could not be reached: not tried again for a while (doubling), unless nothing else
    /// can be.
    pub fn mark_down(&self, reason: &str) {
        let mut state = self.state();
        let wait = match &state.down {
            Some(down) => (down.wait * 2).min(LONGEST_DOWN),
            None => self.first_retry,
        };
        let since = state.down.as_ref().map_or_else(clock::now, |d| d.since);
        state.down = Some(Down {
            since,
            retry_at: Instant::now() + wait,
            wait,
            reason: reason.to_string(),
        });
    }

    /// It was reached.
    pub fn mark_up(&self) {
        let mut state = self.state();
        if state.down.take().is_some() {
            eprintln!("mail: {} can be reached again", self.name);
        }
    }

    /// Unreachable lately, and not yet due to be tried again.
    pub fn resting_down(&self) -> bool {
        self.state()
            .down
            .as_ref()
            .is_some_and(|d| Instant::now() < d.retry_at)
    }

    /// Unreachable since when, and why; `None` when it was reached last time.
    pub fn down_since(&self) -> Option<(jiff::Timestamp, String)> {
        self.state()
            .down
            .as_ref()
            .map(|d| (d.since, d.reason.clone()))
    }

    /// Writes the count of one message sent alone (account mail) where the relay's limits
    /// read it after a restart.
    pub fn record_one(&self) {
        if !self.counts_usage() {
            return;
        }
        if let Some(pool) = &self.pool
            && let Ok(conn) = pool.get()
            && let Err(e) = crate::domain::delivery::send_limits::record(
                &conn,
                &self.usage_key,
                clock::now(),
                1,
            )
        {
            eprintln!(
                "mail: {}: cannot record a message in its counts: {e}",
                self.name
            );
        }
    }
}

/// A count per second, (since when, this second, the one before), with one more at `now`.
fn count_in_second(counts: Option<(Instant, u32, u32)>, now: Instant) -> (Instant, u32, u32) {
    match counts {
        Some((start, this, _)) if now.duration_since(start) >= Duration::from_secs(1) => {
            (now, 1, this)
        }
        Some((start, this, last)) => (start, this + 1, last),
        None => (now, 1, 0),
    }
}

/// The relays of a route, most preferred first.
#[derive(Clone)]
pub struct RelaySet {
    pub relays: Vec<Arc<Relay>>,
}

impl RelaySet {
    pub fn new(relays: Vec<Arc<Relay>>) -> Self {
        RelaySet { relays }
    }

    /// The relays to try, in order: those not known to be down (or due to be tried again)
    /// and not held by a limit; when that leaves none, every relay not held (an outage is
    /// then the round's to wait out).
    pub fn to_try(&self) -> Vec<(usize, Arc<Relay>)> {
        let open: Vec<_> = self
            .relays
            .iter()
            .enumerate()
            .filter(|(_, r)| r.held().is_none())
            .map(|(i, r)| (i, r.clone()))
            .collect();
        let up: Vec<_> = open
            .iter()
            .filter(|(_, r)| !r.resting_down())
            .cloned()
            .collect();
        if up.is_empty() { open } else { up }
    }

    /// When every relay is held by a limit: the soonest one opens again, and why it is held.
    pub fn all_held(&self) -> Option<(jiff::Timestamp, HeldBy, String)> {
        let mut soonest: Option<(jiff::Timestamp, HeldBy, String)> = None;
        for relay in &self.relays {
            let (until, by) = relay.held()?;
            if soonest.as_ref().is_none_or(|(at, _, _)| until < *at) {
                soonest = Some((until, by, relay.name.clone()));
            }
        }
        soonest
    }

    /// Whether a relay preferred to the one at `index` is due to be tried again.
    pub fn better_than(&self, index: usize) -> bool {
        self.relays[..index]
            .iter()
            .any(|r| !r.resting_down() && r.held().is_none())
    }
}
