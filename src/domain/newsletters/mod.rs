//! Newsletters: creation with a subdomain made from the name, the onboarding steps
//! (frequency, preferences), ownership checks, and the operator's tier and status changes.

pub mod custom_domains;
pub mod dkim;
pub mod mail_details;
pub mod operators;
pub mod paid_plans;
pub mod sender_domains;
pub mod site_pages;
pub mod site_theme;
pub mod welcome;

use rusqlite::{Connection, OptionalExtension, Row};

use crate::clock::Timestamp;
use crate::domain::newsletters::mail_details::{
    CheckedMailDetails, MailDetails, MailDetailsChanges,
};
use crate::domain::newsletters::site_pages::{CheckedSitePages, SitePages, SitePagesChanges};
use crate::domain::newsletters::site_theme::{AccentColor, CheckedTheme, SiteTheme, ThemeChanges};
use crate::domain::newsletters::welcome::{CheckedWelcome, Welcome, WelcomeChanges};
use crate::domain::values::email::EmailAddress;
use crate::domain::values::time_zones::{self, TimeZoneName};
use crate::domain::values::urls::SiteUrls;
use crate::domain::{DomainError, DomainResult, FieldErrors, clean_line, clean_text};
use crate::store::jobs::MailSender;
use crate::store::write_tx;

/// Subdomains a newsletter may not take: they belong to the service or mislead readers.
pub const RESERVED_SUBDOMAINS: &[&str] = &[
    "www",
    "api",
    "app",
    "admin",
    "mail",
    "smtp",
    "imap",
    "pop",
    "ftp",
    "ns1",
    "ns2",
    "dashboard",
    "static",
    "assets",
    "cdn",
    "status",
    "help",
    "support",
    "docs",
    "blog",
    "billing",
    "login",
    "signup",
    "account",
    "accounts",
    "broadsheet",
    "root",
    "postmaster",
    "webmaster",
    "hostmaster",
    "abuse",
    "security",
    "test",
    "localhost",
];
const SUBDOMAIN_MAX: usize = 63;

crate::string_enum!(
    /// `active` can send, `paused` holds sending, `cancelled` is read-only.
    pub Status { Active => "active", Paused => "paused", Cancelled => "cancelled" }
);
crate::string_enum!(
    /// Only `paid` may send e-mail.
    pub Tier { Free => "free", Pending => "pending", Paid => "paid" }
);
crate::string_enum!(
    /// Publishing rhythm; slots are at 09:00 in the newsletter's time zone.
    pub Frequency { Daily => "daily", ThreeTimes => "three_times", Weekly => "weekly", Skip => "skip" }
);
crate::string_enum!(pub ContentTone {
    Professional => "professional", Casual => "casual", Friendly => "friendly", Formal => "formal", Humorous => "humorous"
});
crate::string_enum!(pub NewsletterLength { Short => "short", Medium => "medium", Long => "long" });

impl Frequency {
    /// What the setup page says about each choice.
    pub fn describe(self) -> &'static str {
        match self {
            Frequency::Daily => "Daily, Monday to Friday",
            Frequency::ThreeTimes => "Three times a week: Monday, Wednesday and Friday",
            Frequency::Weekly => "Weekly, on Tuesdays",
            Frequency::Skip => "Skip for now, configure later",
        }
    }
}

/// A newsletter as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Newsletter {
    pub id: i64,
    pub owner_id: i64,
    pub name: String,
    pub tagline: String,
    pub keywords: String,
    pub sender_name: String,
    pub sender_email: String,
    pub subdomain: String,
    pub status: Status,
    pub tier: Tier,
    pub frequency: Option<Frequency>,
    pub target_audience: Option<String>,
    pub content_tone: Option<ContentTone>,
    pub newsletter_length: Option<NewsletterLength>,
    /// When the public site went live (the preferences step); `None` before.
    pub live_at: Option<Timestamp>,
    pub tracking_enabled: bool,
    /// The verified custom domain (`www.example.com`), once it is active: the site's address.
    pub custom_domain: Option<String>,
    /// The welcome e-mail readers get after confirming (`domain/newsletters/welcome.rs`).
    pub welcome: Welcome,
    /// Issues are published on the web when their send completes (`sending::mark_sent`).
    pub publish_on_send: bool,
    /// Where the frequency's 09:00 slots are (`domain/values/time_zones.rs`).
    pub time_zone: TimeZoneName,
    /// Accent colour and logo of the public site (`domain/newsletters/site_theme.rs`).
    pub theme: SiteTheme,
    /// Reply-to and postal address of its mail (`domain/newsletters/mail_details.rs`).
    pub mail: MailDetails,
    /// Its site's about page and author (`domain/newsletters/site_pages.rs`).
    pub pages: SitePages,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Absolute addresses of a newsletter's public site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteLinks {
    pub home: String,
    pub subscribe: String,
    pub archive: String,
}

impl Newsletter {
    /// The origin of the public site, the one rule for every link to it (API `urls`,
    /// `web_url`, mail, canonical links, the feed): the active custom domain when there is
    /// one, else `<subdomain>.<public-host>`.
    pub fn site_origin(&self, urls: &SiteUrls) -> String {
        match &self.custom_domain {
            Some(domain) => urls.custom_domain_origin(domain),
            None => urls.subdomain_origin(&self.subdomain),
        }
    }

    /// Who the newsletter's mail comes from: its sender name and address, or, when it has
    /// no address, `newsletter@` the host of its site.
    pub fn sender(&self, site_host: &str) -> MailSender {
        MailSender {
            name: self.sender_name.clone(),
            email: if self.sender_email.is_empty() {
                format!("newsletter@{site_host}")
            } else {
                self.sender_email.clone()
            },
        }
    }

    pub fn links(&self, urls: &SiteUrls) -> SiteLinks {
        let origin = self.site_origin(urls);
        SiteLinks {
            home: format!("{origin}/"),
            subscribe: format!("{origin}/subscribe"),
            archive: format!("{origin}/archive"),
        }
    }

    /// Refuses changes to a cancelled newsletter, which is read-only.
    pub fn ensure_writable(&self) -> DomainResult<()> {
        match self.status {
            Status::Cancelled => Err(DomainError::rejected(
                crate::domain::ErrorCode::NewsletterCancelled,
                "This newsletter is cancelled and read-only",
            )),
            _ => Ok(()),
        }
    }
}

/// The columns `from_row` reads, spliced into each SELECT at compile time.
macro_rules! select_newsletter {
    ($($tail:literal)+) => {
        concat!(
            "SELECT id, owner_id, name, tagline, keywords, sender_name, sender_email, subdomain, status, tier, ",
            "frequency, target_audience, content_tone, newsletter_length, live_at, tracking_enabled, created_at, updated_at, ",
            "(SELECT domain FROM custom_domains WHERE custom_domains.newsletter_id = newsletters.id AND custom_domains.status = 'active'), ",
            "welcome_enabled, welcome_subject, welcome_body, publish_on_send, ",
            "time_zone, accent_color, logo_url, reply_to, postal_address, ",
            "about_html IS NOT NULL, author_name, author_image ",
            "FROM newsletters ", $($tail),+
        )
    };
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<Newsletter> {
    Ok(Newsletter {
        id: row.get(0)?,
        owner_id: row.get(1)?,
        name: row.get(2)?,
        tagline: row.get(3)?,
        keywords: row.get(4)?,
        sender_name: row.get(5)?,
        sender_email: row.get(6)?,
        subdomain: row.get(7)?,
        status: row.get(8)?,
        tier: row.get(9)?,
        frequency: row.get(10)?,
        target_audience: row.get(11)?,
        content_tone: row.get(12)?,
        newsletter_length: row.get(13)?,
        live_at: row.get(14)?,
        tracking_enabled: row.get(15)?,
        created_at: row.get(16)?,
        updated_at: row.get(17)?,
        custom_domain: row.get(18)?,
        welcome: Welcome {
            enabled: row.get(19)?,
            subject: row.get(20)?,
            body: row.get(21)?,
        },
        publish_on_send: row.get(22)?,
        time_zone: row.get(23)?,
        theme: SiteTheme {
            accent_color: row
                .get::<_, Option<String>>(24)?
                .as_deref()
                .and_then(AccentColor::parse),
            logo_url: row.get(25)?,
        },
        mail: MailDetails {
            reply_to: row.get(26)?,
            postal_address: row.get(27)?,
        },
        pages: SitePages {
            has_about: row.get(28)?,
            author_name: row.get(29)?,
            author_image: row.get(30)?,
        },
    })
}

/// Any newsletter by id (for the API, whose key already names it).
pub fn get(conn: &Connection, id: i64) -> DomainResult<Newsletter> {
    const SQL: &str = select_newsletter!("WHERE id = ?1");
    conn.query_row(SQL, [id], from_row)
        .optional()?
        .ok_or(DomainError::NotFound("newsletter"))
}

/// A newsletter of `owner_id`; someone else's is `NotFound`, so ids reveal nothing.
pub fn get_owned(conn: &Connection, owner_id: i64, id: i64) -> DomainResult<Newsletter> {
    const SQL: &str = select_newsletter!("WHERE id = ?1 AND owner_id = ?2");
    conn.query_row(SQL, (id, owner_id), from_row)
        .optional()?
        .ok_or(DomainError::NotFound("newsletter"))
}

pub fn get_by_subdomain(conn: &Connection, subdomain: &str) -> DomainResult<Newsletter> {
    const SQL: &str = select_newsletter!("WHERE subdomain = ?1");
    conn.query_row(SQL, [subdomain.to_lowercase()], from_row)
        .optional()?
        .ok_or(DomainError::NotFound("newsletter"))
}

/// The newsletter a bounce token belongs to.
pub fn get_by_bounce_token(conn: &Connection, token: &str) -> DomainResult<Newsletter> {
    const SQL: &str = select_newsletter!("WHERE bounce_token = ?1");
    conn.query_row(SQL, [token], from_row)
        .optional()?
        .ok_or(DomainError::NotFound("newsletter"))
}

/// The token of `POST /bounces/<token>`, for the operator to configure in an MTA.
pub fn bounce_token(conn: &Connection, newsletter_id: i64) -> DomainResult<String> {
    const SQL: &str = "SELECT bounce_token FROM newsletters WHERE id = ?1";
    conn.query_row(SQL, [newsletter_id], |r| r.get(0))
        .optional()?
        .ok_or(DomainError::NotFound("newsletter"))
}

pub fn list_owned(conn: &Connection, owner_id: i64) -> DomainResult<Vec<Newsletter>> {
    const SQL: &str = select_newsletter!("WHERE owner_id = ?1 ORDER BY id DESC");
    let mut stmt = conn.prepare(SQL)?;
    let rows = stmt.query_map([owner_id], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The creation form's fields.
#[derive(Debug, Clone, Default)]
pub struct NewNewsletter {
    pub name: String,
    pub tagline: String,
    pub keywords: String,
    pub from_name: String,
    pub from_email: String,
}

/// Creates a newsletter owned by `owner_id`, with a subdomain made from its name and its
/// owner's time zone.
pub fn create(
    conn: &mut Connection,
    owner_id: i64,
    form: &NewNewsletter,
    tier: Tier,
) -> DomainResult<Newsletter> {
    let mut errors = FieldErrors::new();
    let name = clean_name(&mut errors, "name", &form.name);
    let tagline = clean_tagline(&mut errors, "tagline", &form.tagline);
    let keywords = clean_text(&mut errors, "keywords", &form.keywords, false, 500);
    let from_name = clean_sender_name(&mut errors, "from_name", &form.from_name, false);
    let from_email = match form.from_email.trim() {
        "" => String::new(),
        raw => EmailAddress::parse(raw)
            .map(EmailAddress::into_string)
            .unwrap_or_else(|message| {
                errors.add("from_email", message);
                String::new()
            }),
    };
    errors.into_result()?;
    let base = subdomain_base(&name);
    write_tx(conn, |tx| {
        let subdomain = free_subdomain(tx, &base)?;
        const INSERT: &str = "INSERT INTO newsletters
             (owner_id, name, tagline, keywords, sender_name, sender_email, subdomain, tier, bounce_token, created_at, updated_at,
              publish_on_send, time_zone)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, 1, (SELECT time_zone FROM users WHERE id = ?1))";
        let sender_name = if from_name.is_empty() {
            name.clone()
        } else {
            from_name.clone()
        };
        tx.execute(
            INSERT,
            (
                owner_id,
                &name,
                &tagline,
                &keywords,
                &sender_name,
                &from_email,
                &subdomain,
                tier,
                crate::domain::values::secrets::random_hex(16),
                Timestamp::now(),
            ),
        )?;
        get(tx, tx.last_insert_rowid())
    })
}

// One line each: the name goes into the List-Id header of issues and the Subject of
// subscription confirmations, the sender name into From, and the tagline beside them on the
// site and in the feed. These three rules serve creation and every update, through every door.

/// A newsletter's name, in characters once trimmed.
pub const NAME_MAX: usize = 100;
/// A tagline, in characters once trimmed.
pub const TAGLINE_MAX: usize = 200;
/// The From name of issues, in characters once trimmed.
pub const SENDER_NAME_MAX: usize = 100;
/// What a sender name refuses besides control characters: they would end the display name.
pub const SENDER_NAME_REFUSES: [char; 3] = ['"', '<', '>'];

fn clean_name(errors: &mut FieldErrors, field: &str, value: &str) -> String {
    clean_line(errors, field, value, true, NAME_MAX)
}

fn clean_tagline(errors: &mut FieldErrors, field: &str, value: &str) -> String {
    clean_line(errors, field, value, false, TAGLINE_MAX)
}

/// The From name of issues: one line, and no quotes or angle brackets, which would end the
/// display name inside the header.
fn clean_sender_name(errors: &mut FieldErrors, field: &str, value: &str, required: bool) -> String {
    let name = clean_line(errors, field, value, required, SENDER_NAME_MAX);
    if name.contains(SENDER_NAME_REFUSES) {
        errors.add(field, "must not contain quotes or angle brackets");
    }
    name
}

/// Lowercase a-z, 0-9 and single hyphens, at most 63 characters; never empty or reserved
/// (those get `newsletter` or a suffix).
pub fn subdomain_base(name: &str) -> String {
    let mut slug = String::new();
    for c in name.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let mut slug: String = slug
        .trim_end_matches('-')
        .chars()
        .take(SUBDOMAIN_MAX)
        .collect();
    slug = slug.trim_end_matches('-').to_string();
    if slug.is_empty() {
        "newsletter".to_string()
    } else {
        slug
    }
}

/// The subdomain a newsletter named `name` would get if created now (the create form's
/// preview): the same rule as [`create`].
pub fn subdomain_for(conn: &Connection, name: &str) -> DomainResult<String> {
    free_subdomain(conn, &subdomain_base(name))
}

fn free_subdomain(conn: &Connection, base: &str) -> DomainResult<String> {
    const TAKEN: &str = "SELECT EXISTS(SELECT 1 FROM newsletters WHERE subdomain = ?1)";
    let reserved = RESERVED_SUBDOMAINS.contains(&base);
    for n in 1.. {
        if n == 1 && reserved {
            continue;
        }
        let candidate = if n == 1 {
            base.to_string()
        } else {
            let suffix = format!("-{n}");
            let stem: String = base.chars().take(SUBDOMAIN_MAX - suffix.len()).collect();
            format!("{}{suffix}", stem.trim_end_matches('-'))
        };
        let taken: bool = conn.query_row(TAKEN, [&candidate], |r| r.get(0))?;
        if !taken {
            return Ok(candidate);
        }
    }
    unreachable!("the loop returns")
}

/// Onboarding step 2: the publishing rhythm.
pub fn apply_frequency(
    conn: &mut Connection,
    owner_id: i64,
    id: i64,
    frequency: &str,
) -> DomainResult<Newsletter> {
    let frequency = Frequency::parse(frequency.trim()).ok_or_else(|| {
        DomainError::invalid(
            "frequency",
            "must be one of daily, three_times, weekly or skip",
        )
    })?;
    write_tx(conn, |tx| {
        get_owned(tx, owner_id, id)?.ensure_writable()?;
        const UPDATE: &str = "UPDATE newsletters SET frequency = ?2, updated_at = ?3 WHERE id = ?1";
        tx.execute(UPDATE, (id, frequency, Timestamp::now()))?;
        get(tx, id)
    })
}

/// The preferences form's fields.
#[derive(Debug, Clone, Default)]
pub struct Preferences {
    pub target_audience: String,
    pub content_tone: String,
    pub newsletter_length: String,
}

/// Onboarding step 3: the audience and voice; the public site goes live with it.
pub fn update_preferences(
    conn: &mut Connection,
    owner_id: i64,
    id: i64,
    form: &Preferences,
) -> DomainResult<Newsletter> {
    let mut errors = FieldErrors::new();
    let audience = clean_text(
        &mut errors,
        "target_audience",
        &form.target_audience,
        false,
        500,
    );
    let tone = ContentTone::parse(form.content_tone.trim());
    if tone.is_none() {
        errors.add(
            "content_tone",
            "must be one of professional, casual, friendly, formal or humorous",
        );
    }
    let length = NewsletterLength::parse(form.newsletter_length.trim());
    if length.is_none() {
        errors.add("newsletter_length", "must be one of short, medium or long");
    }
    errors.into_result()?;
    write_tx(conn, |tx| {
        get_owned(tx, owner_id, id)?.ensure_writable()?;
        const UPDATE: &str = "UPDATE newsletters SET target_audience = ?2, content_tone = ?3, newsletter_length = ?4,
             live_at = coalesce(live_at, ?5), updated_at = ?5 WHERE id = ?1";
        let (tone, length) = (
            tone.map(ContentTone::as_str),
            length.map(NewsletterLength::as_str),
        );
        tx.execute(UPDATE, (id, &audience, tone, length, Timestamp::now()))?;
        get(tx, id)
    })
}

/// The details an owner may change (API `PATCH /newsletter`, dashboard settings); `None`
/// leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct Details {
    pub name: Option<String>,
    pub tagline: Option<String>,
    pub sender_name: Option<String>,
    pub sender_email: Option<String>,
    pub welcome: WelcomeChanges,
    /// Publish issues on the web when they are sent.
    pub publish_on_send: Option<bool>,
    /// An IANA name (`domain/values/time_zones.rs`).
    pub time_zone: Option<String>,
    pub theme: ThemeChanges,
    pub mail: MailDetailsChanges,
    pub pages: SitePagesChanges,
}

/// [`Details`] checked, the welcome body rendered: what [`apply_details`] writes.
#[derive(Debug, Clone)]
pub struct CheckedDetails {
    name: Option<String>,
    tagline: Option<String>,
    sender_name: Option<String>,
    sender_email: Option<String>,
    welcome: CheckedWelcome,
    publish_on_send: Option<bool>,
    time_zone: Option<TimeZoneName>,
    theme: CheckedTheme,
    mail: CheckedMailDetails,
    pages: CheckedSitePages,
}

/// Checks every field of `changes`, and renders the welcome body and the about page within the render budget:
/// call it before taking a database connection (`Db::run_after`).
pub fn check_details(changes: &Details) -> DomainResult<CheckedDetails> {
    let mut errors = FieldErrors::new();
    let name = changes
        .name
        .as_deref()
        .map(|v| clean_name(&mut errors, "name", v));
    let tagline = changes
        .tagline
        .as_deref()
        .map(|v| clean_tagline(&mut errors, "tagline", v));
    let sender_name = changes
        .sender_name
        .as_deref()
        .map(|v| clean_sender_name(&mut errors, "sender_name", v, true));
    let sender_email = match changes.sender_email.as_deref() {
        None => None,
        Some(raw) => match EmailAddress::parse(raw) {
            Ok(email) => Some(email.into_string()),
            Err(message) => {
                errors.add("sender_email", message);
                None
            }
        },
    };
    let welcome = welcome::check(&changes.welcome, &mut errors)?;
    let time_zone = changes.time_zone.as_deref().and_then(|v| {
        TimeZoneName::parse(v)
            .map_err(|m| errors.add("time_zone", m))
            .ok()
    });
    let theme = site_theme::check(&changes.theme, &mut errors);
    let mail = mail_details::check(&changes.mail, &mut errors);
    let pages = site_pages::check(&changes.pages, &mut errors)?;
    errors.into_result()?;
    Ok(CheckedDetails {
        name,
        tagline,
        sender_name,
        sender_email,
        welcome,
        publish_on_send: changes.publish_on_send,
        time_zone,
        theme,
        mail,
        pages,
    })
}

/// Writes checked changes; `updated_at` moves only when something changed.
pub fn apply_details(
    conn: &mut Connection,
    id: i64,
    checked: &CheckedDetails,
) -> DomainResult<Newsletter> {
    write_tx(conn, |tx| apply_details_in(tx, id, checked))
}

/// [`apply_details`] inside the caller's transaction, beside other changes of the same request.
pub fn apply_details_in(
    tx: &Connection,
    id: i64,
    checked: &CheckedDetails,
) -> DomainResult<Newsletter> {
    let CheckedDetails {
        name,
        tagline,
        sender_name,
        sender_email,
        welcome,
        publish_on_send,
        time_zone,
        theme,
        mail,
        pages,
    } = checked.clone();
    let current = get(tx, id)?;
    current.ensure_writable()?;
    let welcome_changed =
        welcome::apply(tx, id, &welcome)? | site_theme::apply(tx, id, &current.theme, &theme)?;
    let mail_changed = mail_details::apply(tx, id, &current.mail, &mail)?
        | site_pages::apply(tx, id, &current.pages, &pages)?;
    let zone_changed = time_zones::apply_newsletter_zone(tx, id, time_zone.as_ref())?;
    let next = (
        name.unwrap_or_else(|| current.name.clone()),
        tagline.unwrap_or_else(|| current.tagline.clone()),
        sender_name.unwrap_or_else(|| current.sender_name.clone()),
        sender_email.unwrap_or_else(|| current.sender_email.clone()),
        publish_on_send.unwrap_or(current.publish_on_send),
    );
    if !welcome_changed
        && !zone_changed
        && !mail_changed
        && next
            == (
                current.name.clone(),
                current.tagline.clone(),
                current.sender_name.clone(),
                current.sender_email.clone(),
                current.publish_on_send,
            )
    {
        // Nothing changes: `updated_at` stays as it is.
        return Ok(current);
    }
    const UPDATE: &str = "UPDATE newsletters SET name = ?2, tagline = ?3, sender_name = ?4, sender_email = ?5, updated_at = ?6,
         publish_on_send = ?7 WHERE id = ?1";
    tx.execute(
        UPDATE,
        (id, next.0, next.1, next.2, next.3, Timestamp::now(), next.4),
    )?;
    get(tx, id)
}

/// Operator command: set the tier (the API cannot), whatever it was.
pub fn set_tier(conn: &mut Connection, subdomain: &str, tier: Tier) -> DomainResult<Newsletter> {
    write_tx(conn, |tx| {
        let newsletter = get_by_subdomain(tx, subdomain)?;
        write_tier(tx, newsletter.id, tier)
    })
}

/// Sets the tier; any tier but `pending` answers a waiting upgrade request, so its time goes.
pub(in crate::domain) fn write_tier(
    conn: &Connection,
    id: i64,
    tier: Tier,
) -> DomainResult<Newsletter> {
    const UPDATE: &str = "UPDATE newsletters SET tier = ?2, updated_at = ?3,
         upgrade_requested_at = CASE WHEN ?2 = 'pending' THEN upgrade_requested_at END WHERE id = ?1";
    conn.execute(UPDATE, (id, tier, Timestamp::now()))?;
    get(conn, id)
}

/// Operator command: pause, resume or cancel, and the only way back from `cancelled`.
pub fn set_status(
    conn: &mut Connection,
    subdomain: &str,
    status: Status,
) -> DomainResult<Newsletter> {
    write_tx(conn, |tx| {
        let newsletter = get_by_subdomain(tx, subdomain)?;
        write_status(tx, newsletter.id, status)
    })
}

fn write_status(conn: &Connection, id: i64, status: Status) -> DomainResult<Newsletter> {
    const UPDATE: &str = "UPDATE newsletters SET status = ?2, updated_at = ?3 WHERE id = ?1";
    conn.execute(UPDATE, (id, status, Timestamp::now()))?;
    get(conn, id)
}

/// The owner's pause, resume and cancel (dashboard settings). Cancelling is final for the
/// owner (the newsletter becomes read-only, this function included), so it needs the
/// subdomain typed as `confirmation`; only the operator's `status` command undoes it.
/// Asking for the current status changes nothing.
pub fn change_status(
    conn: &mut Connection,
    owner_id: i64,
    id: i64,
    to: &str,
    confirmation: &str,
) -> DomainResult<Newsletter> {
    let to = Status::parse(to.trim())
        .ok_or_else(|| DomainError::invalid("status", "must be active, paused or cancelled"))?;
    write_tx(conn, |tx| {
        let newsletter = get_owned(tx, owner_id, id)?;
        newsletter.ensure_writable()?;
        if to == newsletter.status {
            return Ok(newsletter);
        }
        if to == Status::Cancelled && confirmation.trim() != newsletter.subdomain {
            return Err(DomainError::invalid(
                "confirmation",
                format!(
                    "must be the subdomain {} to cancel the newsletter",
                    newsletter.subdomain
                ),
            ));
        }
        write_status(tx, id, to)
    })
}

/// Operator command: turns open and click tracking of sent issues on or off.
pub fn set_tracking(
    conn: &mut Connection,
    subdomain: &str,
    enabled: bool,
) -> DomainResult<Newsletter> {
    write_tx(conn, |tx| {
        let newsletter = get_by_subdomain(tx, subdomain)?;
        write_tracking(tx, newsletter.id, enabled)
    })
}

fn write_tracking(conn: &Connection, id: i64, enabled: bool) -> DomainResult<Newsletter> {
    const UPDATE: &str =
        "UPDATE newsletters SET tracking_enabled = ?2, updated_at = ?3 WHERE id = ?1";
    conn.execute(UPDATE, (id, enabled, Timestamp::now()))?;
    get(conn, id)
}

/// A dashboard switch's value, `on` or `off` (surrounding spaces allowed), as a bool; anything
/// else is 422 on `field`.
pub fn on_or_off(field: &str, text: &str) -> DomainResult<bool> {
    match text.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(DomainError::invalid(field, "must be on or off")),
    }
}

/// The owner's tracking switch (dashboard settings): `setting` is `on` or `off`, and applies
/// to issues sent from then on.
pub fn change_tracking(
    conn: &mut Connection,
    owner_id: i64,
    id: i64,
    setting: &str,
) -> DomainResult<Newsletter> {
    let enabled = on_or_off("tracking", setting)?;
    write_tx(conn, |tx| {
        get_owned(tx, owner_id, id)?.ensure_writable()?;
        write_tracking(tx, id, enabled)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// New newsletters publish issues on send; rows from before the setting (migration 0017
    /// adds it off) keep publishing as a separate step.
    #[test]
    fn new_newsletters_publish_on_send_and_older_ones_do_not() {
        let mut conn = crate::domain::testing::db_with_newsletter("free");
        assert!(!get(&conn, 1).unwrap().publish_on_send);
        let form = NewNewsletter {
            name: "Fresh".into(),
            ..NewNewsletter::default()
        };
        assert!(
            create(&mut conn, 1, &form, Tier::Free)
                .unwrap()
                .publish_on_send
        );
    }

    #[test]
    fn subdomains_are_slugs_unique_and_not_reserved() {
        assert_eq!(subdomain_base("  The Weekly Byte! "), "the-weekly-byte");
        assert_eq!(subdomain_base("Ünïcode — only"), "n-code-only");
        assert_eq!(subdomain_base("!!!"), "newsletter");
        assert_eq!(subdomain_base(&"x".repeat(80)).len(), 63);

        let mut conn = crate::domain::testing::db();
        conn.execute("INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', 'now', 'now')", []).unwrap();
        let form = |name: &str| NewNewsletter {
            name: name.into(),
            ..Default::default()
        };
        let a = create(&mut conn, 1, &form("Weekly"), Tier::Free).unwrap();
        let b = create(&mut conn, 1, &form("weekly"), Tier::Free).unwrap();
        let c = create(&mut conn, 1, &form("WWW"), Tier::Paid).unwrap();
        assert_eq!(
            (
                a.subdomain.as_str(),
                b.subdomain.as_str(),
                c.subdomain.as_str()
            ),
            ("weekly", "weekly-2", "www-2")
        );
        assert_eq!(c.tier, Tier::Paid);
        assert!(matches!(
            create(&mut conn, 1, &form("  "), Tier::Free),
            Err(DomainError::Invalid(..))
        ));
        assert!(matches!(
            get_owned(&conn, 2, a.id),
            Err(DomainError::NotFound(_))
        ));
    }

    #[test]
    fn names_that_go_into_headers_are_one_line_at_creation_and_on_update() {
        let mut conn = crate::domain::testing::db_with_newsletter("free");
        let refused = |result: DomainResult<Newsletter>| match result {
            Err(DomainError::Invalid(_, fields)) => fields.by_field(),
            other => panic!("not refused: {other:?}"),
        };
        let one_line = "must be one line, without line breaks, tabs or other control characters";
        let created = refused(create(
            &mut conn,
            1,
            &NewNewsletter {
                name: "News\r\nBcc: all@example.com".into(),
                tagline: "one\ttwo".into(),
                from_name: "Ed\u{85}itor".into(),
                ..Default::default()
            },
            Tier::Free,
        ));
        for field in ["name", "tagline", "from_name"] {
            assert_eq!(created[field], [one_line], "{field}");
        }
        let quoted = NewNewsletter {
            name: "Fine".into(),
            from_name: "Ed \"<x@y.z>".into(),
            ..Default::default()
        };
        assert_eq!(
            refused(create(&mut conn, 1, &quoted, Tier::Free))["from_name"],
            ["must not contain quotes or angle brackets"]
        );
        let updated = refused(
            check_details(&Details {
                name: Some("A\nB".into()),
                tagline: Some("x\ry".into()),
                sender_name: Some("Ed\u{0}".into()),
                sender_email: None,
                welcome: WelcomeChanges::default(),
                publish_on_send: None,
                time_zone: None,
                theme: ThemeChanges::default(),
                mail: MailDetailsChanges::default(),
                pages: SitePagesChanges::default(),
            })
            .and_then(|checked| apply_details(&mut conn, 1, &checked)),
        );
        for field in ["name", "tagline", "sender_name"] {
            assert_eq!(updated[field], [one_line], "{field}");
        }
        assert_eq!(get(&conn, 1).unwrap().name, "N", "nothing changed");
    }

    fn urls() -> SiteUrls {
        SiteUrls::new("http://localhost:8080", "localhost:8080")
    }

    fn is_cancelled_refusal<T: std::fmt::Debug>(result: DomainResult<T>) -> bool {
        matches!(
            result,
            Err(DomainError::Rejected(
                crate::domain::ErrorCode::NewsletterCancelled,
                _
            ))
        )
    }

    #[test]
    fn owner_changes_follow_the_rules_and_cancelling_is_final_for_the_owner() {
        let mut conn = crate::domain::testing::db_with_newsletter("free");
        // Someone else's newsletter is not found.
        assert!(matches!(
            operators::request_upgrade(&mut conn, &urls(), 2, 1),
            Err(DomainError::NotFound(_))
        ));
        assert_eq!(
            operators::request_upgrade(&mut conn, &urls(), 1, 1)
                .unwrap()
                .tier,
            Tier::Pending
        );
        assert!(matches!(
            operators::request_upgrade(&mut conn, &urls(), 1, 1),
            Err(DomainError::Invalid(..))
        ));
        assert!(
            !change_tracking(&mut conn, 1, 1, "off")
                .unwrap()
                .tracking_enabled
        );
        assert!(matches!(
            change_tracking(&mut conn, 1, 1, "maybe"),
            Err(DomainError::Invalid(..))
        ));

        assert_eq!(
            change_status(&mut conn, 1, 1, "paused", "").unwrap().status,
            Status::Paused
        );
        assert_eq!(
            change_status(&mut conn, 1, 1, "active", "").unwrap().status,
            Status::Active
        );
        assert!(matches!(
            change_status(&mut conn, 1, 1, "gone", "n"),
            Err(DomainError::Invalid(..))
        ));
        // Cancelling needs the subdomain typed in.
        assert!(matches!(
            change_status(&mut conn, 1, 1, "cancelled", "not-n"),
            Err(DomainError::Invalid(..))
        ));
        assert_eq!(get(&conn, 1).unwrap().status, Status::Active);
        assert_eq!(
            change_status(&mut conn, 1, 1, "cancelled", " n ")
                .unwrap()
                .status,
            Status::Cancelled
        );
        // Read-only for the owner, whatever the change.
        assert!(is_cancelled_refusal(change_status(
            &mut conn, 1, 1, "active", ""
        )));
        assert!(is_cancelled_refusal(change_tracking(&mut conn, 1, 1, "on")));
        assert!(is_cancelled_refusal(apply_frequency(
            &mut conn, 1, 1, "weekly"
        )));
        // The operator can bring it back, and sets the tier.
        assert_eq!(
            set_status(&mut conn, "n", Status::Active).unwrap().status,
            Status::Active
        );
        assert_eq!(
            set_tier(&mut conn, "n", Tier::Paid).unwrap().tier,
            Tier::Paid
        );
        assert!(matches!(
            operators::request_upgrade(&mut conn, &urls(), 1, 1),
            Err(DomainError::Invalid(..))
        ));
    }
}
