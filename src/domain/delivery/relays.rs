//! Mail relays: the installation's (`--smtp-url`, one or more, in order of preference) and a
//! newsletter's own (its owner's ESP account). What a relay may take: its limits. A
//! newsletter's own relay is kept here with its password sealed (`domain/values/credentials.rs`),
//! and so is the warm-up plan of a new sending domain: a daily cap that grows each day.
//!
//! The relay's host is only checked for its form here; where it may connect (the SSRF
//! guard, `webhooks::ssrf::resolve_host`) is checked each time a connection is made, since
//! DNS can change between a save and a send.

use std::sync::LazyLock;

use regex::Regex;
use rusqlite::{Connection, OptionalExtension};

use crate::clock::{self, Timestamp};
use crate::domain::newsletters;
use crate::domain::values::credentials::{CredentialKey, Unreadable};
use crate::domain::values::text_pattern::{Refused, WHITESPACE};
use crate::domain::{DomainError, DomainResult, FieldErrors, clean_line};
use crate::store::write_tx;

/// How many messages a relay takes, at most: per second (spacing), and per rolling hour and
/// day. `None`: no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayLimits {
    pub per_second: Option<u32>,
    pub per_hour: Option<u32>,
    pub per_day: Option<u32>,
}

impl RelayLimits {
    /// The limits named in a relay URL's query (`?per_second=14&per_day=50000`); any other
    /// parameter, or a value that is not a whole number from 1 up, is an error naming it.
    pub fn from_query<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Result<Self, String> {
        let mut limits = RelayLimits::default();
        for (name, value) in pairs {
            let slot = match name {
                "per_second" => &mut limits.per_second,
                "per_hour" => &mut limits.per_hour,
                "per_day" => &mut limits.per_day,
                other => {
                    return Err(format!(
                        "unknown relay setting {other:?} (the limits are per_second, per_hour \
                         and per_day)"
                    ));
                }
            };
            match value.parse::<u32>() {
                Ok(n) if n >= 1 => *slot = Some(n),
                _ => {
                    return Err(format!(
                        "{name} must be a whole number of messages from 1 up, not {value:?}"
                    ));
                }
            }
        }
        Ok(limits)
    }

    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.per_second.is_some() || self.per_hour.is_some() || self.per_day.is_some()
    }

    /// Checks limits typed by an owner: each a whole number from 1 up when given.
    pub fn check(&self) -> DomainResult<()> {
        let mut errors = crate::domain::FieldErrors::new();
        for (field, value) in [
            ("per_second", self.per_second),
            ("per_hour", self.per_hour),
            ("per_day", self.per_day),
        ] {
            if value == Some(0) {
                errors.add(field, "must be at least 1 (leave it empty for no limit)");
            }
        }
        errors.into_result()
    }
}

/// Today's cap of `newsletter`'s warm-up plan, when the plan is on (messages a UTC day,
/// growing each day since it was turned on).
pub fn warm_up_cap_today(
    conn: &Connection,
    newsletter: &crate::domain::newsletters::Newsletter,
) -> DomainResult<Option<u64>> {
    Ok(warm_up_for(conn, newsletter.id)?.map(|plan| plan.daily_cap(today())))
}

/// The most characters of a relay's host, as sent (a DNS name's limit).
pub const HOST_MAX: usize = 253;
/// The most characters of a relay's user name.
pub const USERNAME_MAX: usize = 254;
/// The most characters of a relay's password.
pub const PASSWORD_MAX: usize = 1024;
/// The largest limit a relay may be given (per second, hour or day).
pub const LIMIT_MAX: u32 = u32::MAX;

/// What the settings show, and a send through the relay fails with, when the stored password
/// was sealed with another key than this server's (the database was moved without its key
/// file, `docs/operations.md`).
pub const UNREADABLE_PASSWORD: &str =
    "the stored password cannot be read with this server's key file; enter it again";

crate::string_enum!(
    /// How the connection to a newsletter's own relay is secured: never plain text.
    pub TlsMode {
        /// TLS from the first byte (usually port 465).
        Tls => "tls",
        /// STARTTLS, required: a relay that does not offer it is refused (usually port 587).
        StartTls => "starttls",
    }
);

impl TlsMode {
    /// The choice in the owner's words.
    pub fn describe(self) -> &'static str {
        match self {
            TlsMode::Tls => "TLS from the start (usually port 465)",
            TlsMode::StartTls => "STARTTLS, required (usually port 587)",
        }
    }

    /// The port relays usually take this on.
    pub fn usual_port(self) -> u16 {
        match self {
            TlsMode::Tls => 465,
            TlsMode::StartTls => 587,
        }
    }
}

/// A relay's stored password, as this server's key opens it. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub enum RelayPassword {
    None,
    Readable(String),
    /// Sealed with another key, or damaged: the owner has to enter it again.
    Unreadable(Unreadable),
}

impl std::fmt::Debug for RelayPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RelayPassword::None => f.write_str("None"),
            RelayPassword::Readable(_) => f.write_str("Readable(***)"),
            RelayPassword::Unreadable(why) => write!(f, "Unreadable({why:?})"),
        }
    }
}

impl RelayPassword {
    /// Whether a password is stored, readable or not.
    pub fn is_set(&self) -> bool {
        !matches!(self, RelayPassword::None)
    }
}

/// A relay with a user name and no password cannot sign in.
pub const NO_PASSWORD: &str = "a user name is set but no password; enter the password, or \
     empty the user name if the relay takes mail without signing in";
/// A relay with a password and no user name cannot sign in either.
pub const NO_USERNAME: &str =
    "a password is stored but no user name; enter the user name, or forget the password";

/// A newsletter's own relay, its password opened with this server's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewsletterRelay {
    pub newsletter_id: i64,
    /// A DNS name (lowercase) or an IP address (without brackets).
    pub host: String,
    pub port: u16,
    pub tls_mode: TlsMode,
    pub username: Option<String>,
    pub password: RelayPassword,
    pub limits: RelayLimits,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl NewsletterRelay {
    /// The user name and password to sign in with, `None` for a relay that takes mail without
    /// signing in; `Err` says, in words for the owner, why the relay cannot sign in as set
    /// ([`Self::problem`]).
    pub fn credentials(&self) -> Result<Option<(String, String)>, String> {
        match (&self.username, &self.password) {
            (Some(user), RelayPassword::Readable(password)) => {
                Ok(Some((user.clone(), password.clone())))
            }
            (None, RelayPassword::None) => Ok(None),
            _ => Err(self.problem().unwrap_or(UNREADABLE_PASSWORD).to_string()),
        }
    }

    /// Why the relay cannot sign in as it is set: its password cannot be read with this
    /// server's key, or it has a user name without a password or the reverse (a relay signs in
    /// with both or neither). Such a relay can be saved, as the owner may fill in the rest
    /// later; the settings and the API show this, and a send through it fails with it.
    pub fn problem(&self) -> Option<&'static str> {
        match (&self.username, &self.password) {
            (_, RelayPassword::Unreadable(_)) => Some(UNREADABLE_PASSWORD),
            (Some(_), RelayPassword::None) => Some(NO_PASSWORD),
            (None, RelayPassword::Readable(_)) => Some(NO_USERNAME),
            _ => None,
        }
    }

    /// `host:port` (`[v6]:port`), for messages: never the credentials.
    pub fn name(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// What a save does with the stored password. Its `Debug` never shows a new one.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum PasswordChange {
    /// Keep the stored one (an empty password field; a PATCH without `password`).
    #[default]
    Keep,
    Remove,
    Set(String),
}

impl std::fmt::Debug for PasswordChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PasswordChange::Keep => "Keep",
            PasswordChange::Remove => "Remove",
            PasswordChange::Set(_) => "Set(***)",
        })
    }
}

/// A relay as typed in the settings form or sent to the API: every value as text (numbers
/// too, so each door's way of writing them gets the same messages); an empty limit or user
/// name is none.
#[derive(Debug, Clone, Default)]
pub struct RelayInput {
    pub host: String,
    pub port: String,
    pub tls_mode: String,
    pub username: String,
    pub password: PasswordChange,
    pub per_second: String,
    pub per_hour: String,
    pub per_day: String,
}

/// A [`RelayInput`] whose values are each valid; what [`apply_changes`] writes.
#[derive(Debug, Clone)]
pub struct CheckedRelay {
    host: String,
    port: u16,
    tls_mode: TlsMode,
    username: Option<String>,
    password: PasswordChange,
    limits: RelayLimits,
}

/// One IPv4 octet, 0-255, without leading zeros.
const OCTET: &str = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
/// A DNS label: letters, digits and inner hyphens, 1 to 63 characters.
const LABEL: &str = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
/// The last label starts with a letter, as every top-level domain does: `10.0.0.1.2` or
/// `2130706433` is no name (some resolvers read such numbers as an IPv4 address).
const LAST_LABEL: &str = r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";

/// The hosts a relay may have, as the API's document states them: a DNS name (an optional
/// root dot) or a dotted IPv4 address, with whitespace around. An IPv6 address in brackets
/// (`[2001:db8::25]`) is taken too, beyond the expression, as the standard library reads it.
pub fn host_pattern() -> String {
    let spaces = format!("[{WHITESPACE}]*");
    format!(r"^{spaces}(?:(?:{LABEL}\.)*{LAST_LABEL}\.?|{OCTET}(?:\.{OCTET}){{3}}){spaces}$")
}

static HOST: LazyLock<Regex> = LazyLock::new(|| Regex::new(&host_pattern()).expect("a pattern"));

/// The host as stored: an IP address in its standard form, or a name in lowercase without
/// its root dot.
fn clean_host(raw: &str) -> Result<String, String> {
    if raw.chars().count() > HOST_MAX {
        return Err(format!("is too long (maximum is {HOST_MAX} characters)"));
    }
    let text = raw.trim();
    if text.is_empty() {
        return Err("can't be blank".into());
    }
    let bracketed = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'));
    match (bracketed, text.parse::<std::net::Ipv4Addr>()) {
        (None, Ok(ip)) => return Ok(ip.to_string()),
        (None, Err(_)) if HOST.is_match(raw) => {
            return Ok(text.trim_end_matches('.').to_ascii_lowercase());
        }
        (Some(inside), _) => {
            if let Ok(ip) = inside.parse::<std::net::Ipv6Addr>() {
                return Ok(ip.to_string());
            }
        }
        (None, Err(_)) if text.parse::<std::net::Ipv6Addr>().is_ok() => {
            return Err(
                "must be written in brackets when it is an IPv6 address, e.g. [2001:db8::25]"
                    .into(),
            );
        }
        _ => {}
    }
    Err("must be a host name such as smtp.example.com, or an IP address".into())
}

/// A whole number typed as text, from `min` to `max`.
fn whole(text: &str, min: u64, max: u64) -> Option<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
}

/// An optional limit: empty is none.
fn limit(errors: &mut FieldErrors, field: &str, text: &str) -> Option<u32> {
    if text.trim().is_empty() {
        return None;
    }
    let n = whole(text, 1, u64::from(LIMIT_MAX));
    if n.is_none() {
        errors.add(
            field,
            format!(
                "must be a whole number of messages from 1 to {LIMIT_MAX} (leave it empty for no limit)"
            ),
        );
    }
    n.map(|n| n as u32)
}

/// Checks each value of `input`, adding a message per bad one to `errors` under
/// `relay.<field>` (`relay.limits.<limit>` for the limits). The result is only meaningful
/// when nothing was added.
pub fn check_into(input: &RelayInput, errors: &mut FieldErrors) -> CheckedRelay {
    let host = clean_host(&input.host)
        .map_err(|m| errors.add("relay.host", m))
        .unwrap_or_default();
    let port = if input.port.trim().is_empty() {
        errors.add("relay.port", "can't be blank");
        0
    } else {
        whole(&input.port, 1, 65535).map_or_else(
            || {
                errors.add("relay.port", "must be a whole number from 1 to 65535");
                0
            },
            |p| p as u16,
        )
    };
    let tls_mode = TlsMode::parse(input.tls_mode.trim()).unwrap_or_else(|| {
        errors.add(
            "relay.tls_mode",
            "must be tls (TLS from the start) or starttls (STARTTLS, required)",
        );
        TlsMode::StartTls
    });
    let username = clean_line(
        errors,
        "relay.username",
        &input.username,
        false,
        USERNAME_MAX,
    );
    if let PasswordChange::Set(password) = &input.password {
        if password.is_empty() {
            errors.add("relay.password", "can't be blank");
        } else if password.chars().count() > PASSWORD_MAX {
            errors.add(
                "relay.password",
                format!("is too long (maximum is {PASSWORD_MAX} characters)"),
            );
        } else if password.chars().any(|c| Refused::Controls.refuses(c)) {
            errors.add("relay.password", "must not contain control characters");
        }
    }
    let limits = RelayLimits {
        per_second: limit(errors, "relay.limits.per_second", &input.per_second),
        per_hour: limit(errors, "relay.limits.per_hour", &input.per_hour),
        per_day: limit(errors, "relay.limits.per_day", &input.per_day),
    };
    CheckedRelay {
        host,
        port,
        tls_mode,
        username: (!username.is_empty()).then_some(username),
        password: input.password.clone(),
        limits,
    }
}

/// [`check_into`] alone: `Err` with every bad value's message.
pub fn check(input: &RelayInput) -> DomainResult<CheckedRelay> {
    let mut errors = FieldErrors::new();
    let checked = check_into(input, &mut errors);
    errors.into_result().map(|()| checked)
}

/// A relay row as stored, its password still sealed.
struct StoredRelay {
    host: String,
    port: u16,
    tls_mode: TlsMode,
    username: Option<String>,
    sealed: Option<Vec<u8>>,
    limits: RelayLimits,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl StoredRelay {
    fn opened(self, key: &CredentialKey, newsletter_id: i64) -> NewsletterRelay {
        let password = opened_password(key, self.sealed.as_deref());
        NewsletterRelay {
            newsletter_id,
            host: self.host,
            port: self.port,
            tls_mode: self.tls_mode,
            username: self.username,
            password,
            limits: self.limits,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A sealed password (or none) as `key` opens it.
fn opened_password(key: &CredentialKey, sealed: Option<&[u8]>) -> RelayPassword {
    match sealed.map(|sealed| key.open(sealed)) {
        None => RelayPassword::None,
        Some(Ok(password)) => RelayPassword::Readable(password),
        Some(Err(why)) => RelayPassword::Unreadable(why),
    }
}

fn stored(conn: &Connection, newsletter_id: i64) -> DomainResult<Option<StoredRelay>> {
    const SQL: &str = "SELECT host, port, security, username, password_sealed, per_second, per_hour, per_day, created_at, updated_at
         FROM newsletter_relays WHERE newsletter_id = ?1";
    Ok(conn
        .query_row(SQL, [newsletter_id], |r| {
            Ok(StoredRelay {
                host: r.get(0)?,
                port: r.get(1)?,
                tls_mode: r.get(2)?,
                username: r.get(3)?,
                sealed: r.get(4)?,
                limits: RelayLimits {
                    per_second: r.get(5)?,
                    per_hour: r.get(6)?,
                    per_day: r.get(7)?,
                },
                created_at: r.get(8)?,
                updated_at: r.get(9)?,
            })
        })
        .optional()?)
}

/// The newsletter's own relay, its password opened with `key`; `None` when it uses the
/// server's. A password `key` cannot open is [`RelayPassword::Unreadable`], never an error.
pub fn for_newsletter(
    conn: &Connection,
    key: &CredentialKey,
    newsletter_id: i64,
) -> DomainResult<Option<NewsletterRelay>> {
    Ok(stored(conn, newsletter_id)?.map(|s| s.opened(key, newsletter_id)))
}

/// The password the relay would have after `change`: a new one, none, or the stored one.
fn password_after(
    change: &PasswordChange,
    current: Option<&StoredRelay>,
    key: &CredentialKey,
) -> (Option<Vec<u8>>, RelayPassword) {
    match change {
        PasswordChange::Set(password) => (
            Some(key.seal(password)),
            RelayPassword::Readable(password.clone()),
        ),
        PasswordChange::Remove => (None, RelayPassword::None),
        PasswordChange::Keep => {
            let sealed = current.and_then(|c| c.sealed.clone());
            let opened = opened_password(key, sealed.as_deref());
            (sealed, opened)
        }
    }
}

/// The relay `checked` describes, with the stored password where it keeps it, without saving
/// anything: what "Test connection" tries.
pub fn candidate(
    conn: &Connection,
    key: &CredentialKey,
    newsletter_id: i64,
    checked: &CheckedRelay,
) -> DomainResult<NewsletterRelay> {
    let current = stored(conn, newsletter_id)?;
    let (_, password) = password_after(&checked.password, current.as_ref(), key);
    let now = Timestamp::now();
    Ok(NewsletterRelay {
        newsletter_id,
        host: checked.host.clone(),
        port: checked.port,
        tls_mode: checked.tls_mode,
        username: checked.username.clone(),
        password,
        limits: checked.limits,
        created_at: current.as_ref().map_or(now, |c| c.created_at),
        updated_at: now,
    })
}

/// Moves the newsletter's `updated_at`: its relay or warm-up changed, as any setting does.
fn touch(conn: &Connection, newsletter_id: i64) -> DomainResult<()> {
    conn.execute(
        "UPDATE newsletters SET updated_at = ?2 WHERE id = ?1",
        (newsletter_id, Timestamp::now()),
    )?;
    Ok(())
}

/// Saves the relay inside the caller's transaction; whether anything changed.
fn apply_relay(
    conn: &Connection,
    key: &CredentialKey,
    newsletter_id: i64,
    checked: &CheckedRelay,
) -> DomainResult<bool> {
    let current = stored(conn, newsletter_id)?;
    let (sealed, _) = password_after(&checked.password, current.as_ref(), key);
    let unchanged = current.as_ref().is_some_and(|c| {
        checked.password == PasswordChange::Keep
            && (&c.host, c.port, c.tls_mode, &c.username, c.limits)
                == (
                    &checked.host,
                    checked.port,
                    checked.tls_mode,
                    &checked.username,
                    checked.limits,
                )
    });
    if unchanged {
        return Ok(false);
    }
    const UPSERT: &str = "INSERT INTO newsletter_relays (newsletter_id, host, port, security, username, password_sealed, per_second, per_hour, per_day, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
         ON CONFLICT (newsletter_id) DO UPDATE SET host = ?2, port = ?3, security = ?4, username = ?5, password_sealed = ?6,
             per_second = ?7, per_hour = ?8, per_day = ?9, updated_at = ?10";
    let limits = checked.limits;
    conn.execute(
        UPSERT,
        rusqlite::params![
            newsletter_id,
            checked.host,
            checked.port,
            checked.tls_mode,
            checked.username,
            sealed,
            limits.per_second,
            limits.per_hour,
            limits.per_day,
            Timestamp::now(),
        ],
    )?;
    Ok(true)
}

/// How many stored relay passwords `key` cannot open because another key sealed them (all of
/// them without a key). Read at start and on restore: one row per newsletter with its own
/// relay, never a list that grows with subscribers or sends.
pub fn sealed_with_other_keys(conn: &Connection, key: Option<&CredentialKey>) -> DomainResult<i64> {
    const SQL: &str = "SELECT count(*) FROM newsletter_relays
         WHERE password_sealed IS NOT NULL AND (?1 IS NULL OR substr(password_sealed, 2, 8) <> ?1)";
    Ok(conn.query_row(SQL, [key.map(|k| k.id().to_vec())], |r| r.get(0))?)
}

/// The warm-up plan of a new sending domain: the newsletter sends at most `daily_cap` messages
/// on a UTC day, a cap that starts at `first_day_cap` on `started_on` and grows by `factor`
/// each day after.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarmUp {
    pub first_day_cap: u32,
    pub factor: f64,
    /// The UTC day the plan was turned on: its first day.
    pub started_on: jiff::civil::Date,
}

/// The first day's cap when the owner gives none.
pub const WARM_UP_FIRST_DAY_DEFAULT: u32 = 50;
/// The largest first day's cap.
pub const WARM_UP_FIRST_DAY_MAX: u32 = 1_000_000;
/// The growth factor when the owner gives none: the cap doubles each day.
pub const WARM_UP_FACTOR_DEFAULT: f64 = 2.0;
pub const WARM_UP_FACTOR_MIN: f64 = 1.1;
pub const WARM_UP_FACTOR_MAX: f64 = 10.0;
/// Where a daily cap stops growing (a trillion: no newsletter reaches it, and no arithmetic
/// on it overflows).
pub const DAILY_CAP_MAX: u64 = 1_000_000_000_000;

impl WarmUp {
    /// The most messages the newsletter may send on `today` (a UTC date):
    /// `first_day_cap × factor^(days since started_on)`, rounded down and at most
    /// [`DAILY_CAP_MAX`]; a day before the start counts as the first.
    pub fn daily_cap(&self, today: jiff::civil::Date) -> u64 {
        // Days apart (jiff's `Date - Date` counts in days by default).
        let days = (today - self.started_on).get_days().max(0);
        let cap = f64::from(self.first_day_cap) * self.factor.powi(days);
        if !cap.is_finite() || cap >= DAILY_CAP_MAX as f64 {
            DAILY_CAP_MAX
        } else {
            // 50 × 1.1 is 55.000000000000007 in floating point; 1e-6 keeps a product that
            // lands a hair under a whole number on it.
            (cap + 1e-6).floor() as u64
        }
    }

    /// The caps of `count` days from `today` on, today first.
    pub fn caps_from(&self, today: jiff::civil::Date, count: usize) -> Vec<u64> {
        std::iter::successors(Some(today), |d| d.tomorrow().ok())
            .take(count)
            .map(|d| self.daily_cap(d))
            .collect()
    }
}

/// Today's UTC date on the service's clock: the day a warm-up plan counts in.
pub fn today() -> jiff::civil::Date {
    clock::date_of(clock::now())
}

/// A warm-up plan as typed: text, empty for the default.
#[derive(Debug, Clone, Default)]
pub struct WarmUpInput {
    pub first_day_cap: String,
    pub factor: String,
}

/// A [`WarmUpInput`] whose values are valid.
#[derive(Debug, Clone, Copy)]
pub struct CheckedWarmUp {
    first_day_cap: u32,
    factor: f64,
}

/// Checks a warm-up plan, adding messages under `warmup.<field>`.
pub fn check_warm_up_into(input: &WarmUpInput, errors: &mut FieldErrors) -> CheckedWarmUp {
    let first_day_cap = if input.first_day_cap.trim().is_empty() {
        WARM_UP_FIRST_DAY_DEFAULT
    } else {
        match whole(&input.first_day_cap, 1, u64::from(WARM_UP_FIRST_DAY_MAX)) {
            Some(n) => n as u32,
            None => {
                errors.add(
                    "warmup.first_day_cap",
                    format!("must be a whole number of messages from 1 to {WARM_UP_FIRST_DAY_MAX}"),
                );
                WARM_UP_FIRST_DAY_DEFAULT
            }
        }
    };
    let factor = if input.factor.trim().is_empty() {
        WARM_UP_FACTOR_DEFAULT
    } else {
        match input.factor.trim().parse::<f64>() {
            Ok(f) if (WARM_UP_FACTOR_MIN..=WARM_UP_FACTOR_MAX).contains(&f) => f,
            _ => {
                errors.add(
                    "warmup.factor",
                    format!(
                        "must be a number from {WARM_UP_FACTOR_MIN} to {WARM_UP_FACTOR_MAX} (2 doubles the cap each day)"
                    ),
                );
                WARM_UP_FACTOR_DEFAULT
            }
        }
    };
    CheckedWarmUp {
        first_day_cap,
        factor,
    }
}

/// The newsletter's warm-up plan; `None` while it is off (the default).
pub fn warm_up_for(conn: &Connection, newsletter_id: i64) -> DomainResult<Option<WarmUp>> {
    const SQL: &str = "SELECT warmup_first_day_cap, warmup_factor, warmup_started_on FROM newsletters WHERE id = ?1";
    let (cap, factor, started): (Option<u32>, Option<f64>, Option<String>) = conn
        .query_row(SQL, [newsletter_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?
        .ok_or(DomainError::NotFound("newsletter"))?;
    Ok(match (cap, factor, started) {
        (Some(first_day_cap), Some(factor), Some(started)) => {
            clock::parse_day(&started).map(|started_on| WarmUp {
                first_day_cap,
                factor,
                started_on,
            })
        }
        _ => None,
    })
}

/// Writes the plan inside the caller's transaction (`None` turns it off); a plan turned on
/// starts today, one already on keeps its first day. Whether anything changed.
fn apply_warm_up(
    conn: &Connection,
    newsletter_id: i64,
    plan: Option<&CheckedWarmUp>,
) -> DomainResult<bool> {
    let current = warm_up_for(conn, newsletter_id)?;
    let next = plan.map(|p| WarmUp {
        first_day_cap: p.first_day_cap,
        factor: p.factor,
        started_on: current.map_or_else(today, |c| c.started_on),
    });
    if next == current {
        return Ok(false);
    }
    const UPDATE: &str = "UPDATE newsletters SET warmup_first_day_cap = ?2, warmup_factor = ?3, warmup_started_on = ?4 WHERE id = ?1";
    let started = next.map(|w| clock::format_day(w.started_on));
    conn.execute(
        UPDATE,
        (
            newsletter_id,
            next.map(|w| w.first_day_cap),
            next.map(|w| w.factor),
            started,
        ),
    )?;
    Ok(true)
}

/// A change to the relay: none, back to the server's, or this one.
#[derive(Debug, Clone, Default)]
pub enum RelayChange {
    #[default]
    Keep,
    /// Use the server's relay again: the stored relay and its password are deleted.
    Remove,
    Save(RelayInput),
}

/// A change to the warm-up plan.
#[derive(Debug, Clone, Default)]
pub enum WarmUpChange {
    #[default]
    Keep,
    Off,
    On(WarmUpInput),
}

/// How a newsletter's mail leaves that its owner may change (dashboard and `PATCH
/// /newsletter`).
#[derive(Debug, Clone, Default)]
pub struct SendingChanges {
    pub relay: RelayChange,
    pub warm_up: WarmUpChange,
}

/// [`SendingChanges`] with each value checked.
#[derive(Debug, Clone)]
pub struct CheckedSendingChanges {
    relay: Option<Option<CheckedRelay>>,
    warm_up: Option<Option<CheckedWarmUp>>,
}

/// Checks `changes`, adding a message per bad value to `errors` (so a caller can check other
/// fields beside them); only meaningful when nothing was added.
pub fn check_changes_into(
    changes: &SendingChanges,
    errors: &mut FieldErrors,
) -> CheckedSendingChanges {
    CheckedSendingChanges {
        relay: match &changes.relay {
            RelayChange::Keep => None,
            RelayChange::Remove => Some(None),
            RelayChange::Save(input) => Some(Some(check_into(input, errors))),
        },
        warm_up: match &changes.warm_up {
            WarmUpChange::Keep => None,
            WarmUpChange::Off => Some(None),
            WarmUpChange::On(input) => Some(Some(check_warm_up_into(input, errors))),
        },
    }
}

/// Writes checked changes inside the caller's transaction: a cancelled newsletter is refused,
/// and the newsletter's `updated_at` moves when something changed.
pub fn apply_changes(
    conn: &Connection,
    key: &CredentialKey,
    newsletter_id: i64,
    checked: &CheckedSendingChanges,
) -> DomainResult<()> {
    if checked.relay.is_none() && checked.warm_up.is_none() {
        return Ok(());
    }
    newsletters::get(conn, newsletter_id)?.ensure_writable()?;
    let relay_changed = match &checked.relay {
        None => false,
        Some(None) => {
            conn.execute(
                "DELETE FROM newsletter_relays WHERE newsletter_id = ?1",
                [newsletter_id],
            )? > 0
        }
        Some(Some(relay)) => apply_relay(conn, key, newsletter_id, relay)?,
    };
    let warm_up_changed = match &checked.warm_up {
        None => false,
        Some(plan) => apply_warm_up(conn, newsletter_id, plan.as_ref())?,
    };
    if relay_changed || warm_up_changed {
        touch(conn, newsletter_id)?;
    }
    Ok(())
}

/// The relay and the warm-up plan of a newsletter, as the settings and the API show them.
#[derive(Debug, Clone, PartialEq)]
pub struct SendingSetup {
    pub relay: Option<NewsletterRelay>,
    pub warm_up: Option<WarmUp>,
}

/// The newsletter's relay (its password opened with `key`) and warm-up plan.
pub fn setup(
    conn: &Connection,
    key: &CredentialKey,
    newsletter_id: i64,
) -> DomainResult<SendingSetup> {
    Ok(SendingSetup {
        relay: for_newsletter(conn, key, newsletter_id)?,
        warm_up: warm_up_for(conn, newsletter_id)?,
    })
}

/// Checks and writes `changes` in one transaction; nothing changes when anything is refused.
pub fn update(
    conn: &mut Connection,
    key: &CredentialKey,
    newsletter_id: i64,
    changes: &SendingChanges,
) -> DomainResult<SendingSetup> {
    let mut errors = FieldErrors::new();
    let checked = check_changes_into(changes, &mut errors);
    errors.into_result()?;
    write_tx(conn, |tx| {
        apply_changes(tx, key, newsletter_id, &checked)?;
        setup(tx, key, newsletter_id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_come_from_the_url_query() {
        let limits =
            RelayLimits::from_query([("per_second", "14"), ("per_day", "50000")].into_iter())
                .unwrap();
        assert_eq!(
            limits,
            RelayLimits {
                per_second: Some(14),
                per_hour: None,
                per_day: Some(50000)
            }
        );
        assert!(RelayLimits::from_query([("per_minute", "3")].into_iter()).is_err());
        assert!(RelayLimits::from_query([("per_day", "0")].into_iter()).is_err());
        assert!(RelayLimits::from_query([("per_day", "x")].into_iter()).is_err());
        assert!(
            RelayLimits {
                per_hour: Some(0),
                ..RelayLimits::default()
            }
            .check()
            .is_err()
        );
    }

    fn input(host: &str, port: &str, mode: &str) -> RelayInput {
        RelayInput {
            host: host.into(),
            port: port.into(),
            tls_mode: mode.into(),
            ..RelayInput::default()
        }
    }

    fn fields(result: DomainResult<CheckedRelay>) -> Vec<String> {
        match result {
            Err(DomainError::Invalid(_, errors)) => errors.by_field().into_keys().collect(),
            other => panic!("expected field errors, got {other:?}"),
        }
    }

    #[test]
    fn hosts_are_names_or_ip_addresses() {
        for (typed, stored) in [
            ("smtp.example.com", "smtp.example.com"),
            (" SMTP.Example.COM. ", "smtp.example.com"),
            ("localhost", "localhost"),
            ("mail-1.x9.example", "mail-1.x9.example"),
            ("192.0.2.25", "192.0.2.25"),
            ("[2001:DB8::25]", "2001:db8::25"),
            ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1"),
        ] {
            assert_eq!(clean_host(typed).as_deref(), Ok(stored), "{typed:?}");
        }
        for refused in [
            "",
            "  ",
            "smtp.example.com:587",
            "smtp://smtp.example.com",
            "user@smtp.example.com",
            "-smtp.example.com",
            "smtp-.example.com",
            "smtp..example.com",
            "smtp_relay.example.com",
            "2130706433",
            "0x7f.1",
            "10.0.0.1.2",
            "01.2.3.4",
            "256.1.1.1",
            "[192.0.2.25]",
            "[2001:db8::25",
            "2001:db8::25",
            "::",
            "[x]",
            "münchen.de",
            &format!("{}.com", "a".repeat(64)),
            &format!("{}com", "a.".repeat(126)),
        ] {
            assert!(clean_host(refused).is_err(), "{refused:?} is refused");
        }
        // The pattern the API states takes what the check takes, IPv6 aside.
        let pattern = Regex::new(&host_pattern()).unwrap();
        for host in ["smtp.example.com", " a.b ", "x", "192.0.2.25", "a.b."] {
            assert!(
                pattern.is_match(host) && clean_host(host).is_ok(),
                "{host:?}"
            );
        }
        for host in ["1.2.3", "a..b", "-a", "a b", "2001:db8::1"] {
            assert!(!pattern.is_match(host), "{host:?}");
        }
    }

    #[test]
    fn every_bad_value_gets_its_field() {
        assert!(check(&input("smtp.example.com", "587", "starttls")).is_ok());
        assert!(check(&input("smtp.example.com", " 465 ", "tls")).is_ok());
        assert_eq!(
            fields(check(&input("", "0", "plain"))),
            ["relay.host", "relay.port", "relay.tls_mode"]
        );
        for port in ["", "65536", "-1", "5.5", "x"] {
            assert_eq!(
                fields(check(&input("a.example", port, "tls"))),
                ["relay.port"],
                "{port:?}"
            );
        }
        let bad = RelayInput {
            username: "u".repeat(USERNAME_MAX + 1),
            password: PasswordChange::Set("p".repeat(PASSWORD_MAX + 1)),
            per_second: "0".into(),
            per_hour: "1.5".into(),
            per_day: "4294967296".into(),
            ..input("a.example", "587", "starttls")
        };
        assert_eq!(
            fields(check(&bad)),
            [
                "relay.limits.per_day",
                "relay.limits.per_hour",
                "relay.limits.per_second",
                "relay.password",
                "relay.username"
            ]
        );
        for password in ["", "new\nline", "nul\0"] {
            let bad = RelayInput {
                username: "me".into(),
                password: PasswordChange::Set(password.into()),
                ..input("a.example", "587", "starttls")
            };
            assert_eq!(fields(check(&bad)), ["relay.password"], "{password:?}");
        }
        let good = RelayInput {
            username: " me@example.com ".into(),
            password: PasswordChange::Set(" spaces count ".into()),
            per_second: "14".into(),
            per_day: "50000".into(),
            ..input("a.example", "587", "starttls")
        };
        let checked = check(&good).unwrap();
        assert_eq!(checked.username.as_deref(), Some("me@example.com"));
        assert_eq!(
            checked.password,
            PasswordChange::Set(" spaces count ".into())
        );
        assert_eq!(
            checked.limits,
            RelayLimits {
                per_second: Some(14),
                per_hour: None,
                per_day: Some(50000)
            }
        );
        assert!(
            !format!("{checked:?}").contains("spaces count"),
            "Debug hides it"
        );
    }

    #[test]
    fn a_relay_is_saved_sealed_kept_and_removed() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let key = CredentialKey::generate().unwrap();
        let save = |conn: &mut Connection, relay: RelayInput| {
            update(
                conn,
                &key,
                1,
                &SendingChanges {
                    relay: RelayChange::Save(relay),
                    ..SendingChanges::default()
                },
            )
        };
        assert_eq!(for_newsletter(&conn, &key, 1).unwrap(), None);
        let first = RelayInput {
            username: "me".into(),
            password: PasswordChange::Set("s3cret-pass".into()),
            ..input("smtp.example.com", "587", "starttls")
        };
        let saved = save(&mut conn, first).unwrap().relay.unwrap();
        assert_eq!(
            saved.credentials().unwrap(),
            Some(("me".into(), "s3cret-pass".into()))
        );
        let sealed: Vec<u8> = conn
            .query_row("SELECT password_sealed FROM newsletter_relays", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert!(!sealed.windows(11).any(|w| w == b"s3cret-pass"));
        let touched: String = conn
            .query_row("SELECT updated_at FROM newsletters WHERE id = 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_ne!(
            touched, "2026-01-01T00:00:00.000Z",
            "recorded as a settings change"
        );

        // No password on an update keeps the stored one.
        let moved = RelayInput {
            username: "me".into(),
            ..input("smtp.example.com", "465", "tls")
        };
        let kept = save(&mut conn, moved).unwrap().relay.unwrap();
        assert_eq!((kept.port, kept.tls_mode), (465, TlsMode::Tls));
        assert_eq!(kept.password, RelayPassword::Readable("s3cret-pass".into()));

        // Bad values change nothing.
        assert!(save(&mut conn, input("bad host", "587", "starttls")).is_err());
        assert_eq!(for_newsletter(&conn, &key, 1).unwrap().unwrap(), kept);

        // A user name and a password go together: either alone is saved, and said.
        let no_user = input("smtp.example.com", "465", "tls");
        let half = save(&mut conn, no_user).unwrap().relay.unwrap();
        assert_eq!(half.problem(), Some(NO_USERNAME));
        assert_eq!(half.credentials().unwrap_err(), NO_USERNAME);
        let no_password = RelayInput {
            username: "me".into(),
            password: PasswordChange::Remove,
            ..input("smtp.example.com", "465", "tls")
        };
        let half = save(&mut conn, no_password).unwrap().relay.unwrap();
        assert_eq!(half.problem(), Some(NO_PASSWORD));
        let whole = RelayInput {
            username: "me".into(),
            password: PasswordChange::Set("s3cret-pass".into()),
            ..input("smtp.example.com", "465", "tls")
        };
        assert_eq!(
            save(&mut conn, whole).unwrap().relay.unwrap().problem(),
            None
        );

        // Another key (the database moved without its key file) reads the relay, not the password.
        let other = CredentialKey::generate().unwrap();
        assert_eq!(sealed_with_other_keys(&conn, Some(&key)).unwrap(), 0);
        assert_eq!(sealed_with_other_keys(&conn, Some(&other)).unwrap(), 1);
        assert_eq!(sealed_with_other_keys(&conn, None).unwrap(), 1);
        let seen = for_newsletter(&conn, &other, 1).unwrap().unwrap();
        assert_eq!(seen.problem(), Some(UNREADABLE_PASSWORD));
        assert_eq!(seen.credentials().unwrap_err(), UNREADABLE_PASSWORD);

        let removed = update(
            &mut conn,
            &key,
            1,
            &SendingChanges {
                relay: RelayChange::Remove,
                ..SendingChanges::default()
            },
        )
        .unwrap();
        assert_eq!(removed.relay, None);
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM newsletter_relays", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0);
    }

    #[test]
    fn a_relay_without_credentials_signs_in_with_none() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let key = CredentialKey::generate().unwrap();
        let changes = SendingChanges {
            relay: RelayChange::Save(input("relay.example", "465", "tls")),
            ..SendingChanges::default()
        };
        let relay = update(&mut conn, &key, 1, &changes).unwrap().relay.unwrap();
        assert_eq!(relay.credentials().unwrap(), None);
        assert_eq!(relay.name(), "relay.example:465");
        conn.execute("UPDATE newsletters SET status = 'cancelled'", [])
            .unwrap();
        assert!(matches!(
            update(&mut conn, &key, 1, &changes),
            Err(DomainError::Rejected(..))
        ));
    }

    fn date(text: &str) -> jiff::civil::Date {
        clock::parse_day(text).unwrap()
    }

    #[test]
    fn the_warm_up_cap_grows_by_its_factor_each_day() {
        let plan = WarmUp {
            first_day_cap: 50,
            factor: 2.0,
            started_on: date("2026-03-01"),
        };
        assert_eq!(
            plan.caps_from(date("2026-03-01"), 5),
            [50, 100, 200, 400, 800]
        );
        assert_eq!(plan.daily_cap(date("2026-02-20")), 50, "before the start");
        assert_eq!(plan.daily_cap(date("2026-03-31")), 50 << 30);
        assert_eq!(plan.daily_cap(date("2027-03-01")), DAILY_CAP_MAX);
        assert_eq!(plan.daily_cap(jiff::civil::Date::MAX), DAILY_CAP_MAX);
        let slow = WarmUp {
            first_day_cap: 50,
            factor: 1.1,
            ..plan
        };
        assert_eq!(slow.caps_from(date("2026-03-01"), 3), [50, 55, 60]);
        let huge = WarmUp {
            first_day_cap: WARM_UP_FIRST_DAY_MAX,
            factor: WARM_UP_FACTOR_MAX,
            ..plan
        };
        assert_eq!(huge.daily_cap(date("2026-03-10")), DAILY_CAP_MAX);
    }

    #[test]
    fn the_warm_up_plan_is_checked_and_keeps_its_first_day() {
        let mut errors = FieldErrors::new();
        let defaults = check_warm_up_into(&WarmUpInput::default(), &mut errors);
        assert!(errors.is_empty());
        assert_eq!(
            (defaults.first_day_cap, defaults.factor),
            (WARM_UP_FIRST_DAY_DEFAULT, WARM_UP_FACTOR_DEFAULT)
        );
        for (cap, factor, bad) in [
            ("0", "2", "warmup.first_day_cap"),
            ("1000001", "2", "warmup.first_day_cap"),
            ("x", "2", "warmup.first_day_cap"),
            ("50", "1.09", "warmup.factor"),
            ("50", "10.5", "warmup.factor"),
            ("50", "NaN", "warmup.factor"),
            ("50", "inf", "warmup.factor"),
        ] {
            let mut errors = FieldErrors::new();
            let typed = WarmUpInput {
                first_day_cap: cap.into(),
                factor: factor.into(),
            };
            check_warm_up_into(&typed, &mut errors);
            assert_eq!(
                errors.by_field().into_keys().collect::<Vec<_>>(),
                [bad],
                "{cap} {factor}"
            );
        }

        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let key = CredentialKey::generate().unwrap();
        assert_eq!(warm_up_for(&conn, 1).unwrap(), None, "off by default");
        let on = |cap: &str| SendingChanges {
            warm_up: WarmUpChange::On(WarmUpInput {
                first_day_cap: cap.into(),
                factor: "1.5".into(),
            }),
            ..SendingChanges::default()
        };
        let plan = update(&mut conn, &key, 1, &on("100"))
            .unwrap()
            .warm_up
            .unwrap();
        assert_eq!(
            (plan.first_day_cap, plan.factor, plan.started_on),
            (100, 1.5, today())
        );
        conn.execute(
            "UPDATE newsletters SET warmup_started_on = '2026-01-01'",
            [],
        )
        .unwrap();
        let changed = update(&mut conn, &key, 1, &on("80"))
            .unwrap()
            .warm_up
            .unwrap();
        assert_eq!(changed.first_day_cap, 80);
        assert_eq!(
            changed.started_on,
            date("2026-01-01"),
            "still on: same first day"
        );
        let off = SendingChanges {
            warm_up: WarmUpChange::Off,
            ..SendingChanges::default()
        };
        assert_eq!(update(&mut conn, &key, 1, &off).unwrap().warm_up, None);
        let again = update(&mut conn, &key, 1, &on("80"))
            .unwrap()
            .warm_up
            .unwrap();
        assert_eq!(again.started_on, today(), "on again: starts over");
    }
}
