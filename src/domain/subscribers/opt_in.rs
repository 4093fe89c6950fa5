//! Double opt-in for a newsletter's public subscribe form: the address becomes a subscriber
//! (firing `subscriber.created`) only when the e-mailed link is followed. Asking again is
//! harmless: one open request per address, the newest link wins, an address that is
//! already subscribed gets no mail at all, and one that had its few mails this hour gets no
//! more (its last link keeps working).

use jiff::SignedDuration;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension};

use crate::clock::{self, Timestamp};
use crate::domain::accounts::rate_limit::{self, Bucket};
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::origin::{Came, Origin, Source, Utm};
use crate::domain::subscribers::signup_forms::SignupForm;
use crate::domain::subscribers::{self, NewSubscriber, Status, Subscriber};
use crate::domain::subscribers::{custom_fields, form_guard};
use crate::domain::values::secrets::{ServerSecret, random_hex, sha256_hex};
use crate::domain::values::urls::{SiteUrls, host_of};
use crate::domain::{DomainError, DomainResult, events};
use crate::store::jobs::{AccountMail, AccountMailKind, queue_account_mail};
use crate::store::write_tx;

/// How long a confirmation link works.
const LINK_LIFETIME: SignedDuration = clock::days(7);
/// Subscribe requests one client address may make per hour, across all newsletters.
const PER_CLIENT_PER_HOUR: u32 = 20;
/// Confirmation mails one e-mail address gets per hour, across all newsletters, so the form
/// cannot be used to flood an inbox.
pub const MAILS_PER_ADDRESS_PER_HOUR: u32 = 5;

/// What a subscribe request did; the page says the same either way, so it leaks nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// A confirmation link was mailed.
    LinkSent,
    /// The address is already an active subscriber: nothing to do.
    AlreadySubscribed,
    /// The address had [`MAILS_PER_ADDRESS_PER_HOUR`] mails this hour: nothing sent, and
    /// the link mailed last still works.
    MailCapped,
}

/// Validates the form, throttles per client, records the request and mails the link.
pub fn request(
    conn: &mut Connection,
    urls: &SiteUrls,
    newsletter: &Newsletter,
    email: &str,
    name: &str,
    client: &str,
    came: &Came,
) -> DomainResult<Requested> {
    newsletter.ensure_writable()?;
    let valid = valid_request(email, name, Vec::new())?;
    let signup = Signup {
        valid: &valid,
        origin: &Origin::of_signup(came),
        form_id: None,
        values: &[],
    };
    write_tx(conn, |tx| {
        rate_limit::hit(tx, &Bucket::Subscribe { client }, 3600, PER_CLIENT_PER_HOUR)?;
        mail_link(tx, urls, newsletter, &signup, |_| Ok(()))
    })
}

/// A signup form's post, as `site::forms` read it.
#[derive(Debug, Clone, Default)]
pub struct FormPost {
    pub email: String,
    pub name: String,
    /// The custom fields' values as posted, by field name (`SignupForm::values` reads them).
    pub fields: Vec<(String, String)>,
    /// The honeypot's value: people leave it empty.
    pub honeypot: String,
    /// The signed time the site showed the form, when it did (`form_guard::started_token`).
    pub started: String,
    /// The solved proof-of-work, when the page's script solved it.
    pub solution: String,
    pub client: String,
    /// The page it was posted from and its campaign tags, as the browser told.
    pub came: Came,
}

/// What became of a form's post. A bot's post is answered as if it worked, so a script
/// learns nothing from the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormOutcome {
    Requested(Requested),
    /// The honeypot was filled or the form came back too fast: nothing done.
    Dropped,
}

/// Confirmation mails one form sends per hour without a solved proof-of-work (a post from
/// a page without JavaScript), and with one (docs/growth.md, "The limits").
pub const FORM_MAILS_UNPROVEN_PER_HOUR: u32 = 30;
pub const FORM_MAILS_PROVEN_PER_HOUR: u32 = 300;
/// Confirmation mails a newsletter sends per hour to the addresses of one e-mail domain:
/// enough for a newsletter's busiest hour at one big provider (a post that is shared widely
/// brings many Gmail readers at once), few enough that a flood cannot bury one domain.
pub const MAILS_PER_DOMAIN_PER_HOUR: u32 = 100;
/// At most one confirmation mail per address and newsletter within this long; asking
/// again meanwhile sends nothing (the link mailed first still works).
pub const ONE_PENDING_MAIL_PER: SignedDuration = clock::days(1);

/// A post of the signup form `form`: the bot checks (`form_guard`), the throttles (per
/// client, per e-mail domain, per form and whether its proof-of-work was solved, one
/// pending mail per address a day), then the request and its mail, as [`request`].
pub fn request_from_form(
    conn: &mut Connection,
    (urls, secret): (&SiteUrls, &ServerSecret),
    newsletter: &Newsletter,
    form: &SignupForm,
    post: &FormPost,
) -> DomainResult<FormOutcome> {
    newsletter.ensure_writable()?;
    if !post.honeypot.trim().is_empty()
        || form_guard::too_fast(secret, &form.public_id, &post.started)
    {
        return Ok(FormOutcome::Dropped);
    }
    let name = if form.ask_name {
        post.name.as_str()
    } else {
        ""
    };
    let valid = valid_request(&post.email, name, form.tags.clone())?;
    let values = form.values(&post.fields)?;
    let signup = Signup {
        valid: &valid,
        origin: &Origin::of_signup(&post.came),
        form_id: Some(form.id),
        values: &values,
    };
    write_tx(conn, |tx| {
        let client = post.client.as_str();
        rate_limit::hit(tx, &Bucket::Subscribe { client }, 3600, PER_CLIENT_PER_HOUR)?;
        let proven = !post.solution.trim().is_empty();
        if proven {
            form_guard::use_solution(tx, secret, form, &post.solution)?;
        }
        let requested = mail_link(tx, urls, newsletter, &signup, |tx| {
            let limit = match proven {
                true => FORM_MAILS_PROVEN_PER_HOUR,
                false => FORM_MAILS_UNPROVEN_PER_HOUR,
            };
            let bucket = Bucket::FormMail {
                form_id: form.id,
                proven,
            };
            rate_limit::hit(tx, &bucket, 3600, limit).map(|_| ())
        })?;
        Ok(FormOutcome::Requested(requested))
    })
}

/// The request's address, name and tags, checked as a create is.
fn valid_request(email: &str, name: &str, tags: Vec<String>) -> DomainResult<subscribers::Valid> {
    let name = Some(name.trim().to_string()).filter(|n| !n.is_empty());
    subscribers::validate(&NewSubscriber {
        email: email.to_string(),
        name,
        tags,
        subscribed_at: None,
    })
}

/// One signup to record: the address, name and tags, where it came from, by which form, and
/// the custom field values it gave (checked).
struct Signup<'a> {
    valid: &'a subscribers::Valid,
    origin: &'a Origin,
    form_id: Option<i64>,
    values: &'a [(i64, SqlValue)],
}

/// Values as `subscription_requests.field_values` keeps them: `[[field id, value], ...]`.
fn values_json(values: &[(i64, SqlValue)]) -> String {
    let pairs: Vec<serde_json::Value> = values
        .iter()
        .map(|(id, value)| serde_json::json!([id, custom_fields::json_of(None, value)]))
        .collect();
    serde_json::Value::Array(pairs).to_string()
}

/// [`values_json`] read back; what cannot be read is left out.
fn values_of(json: &str) -> Vec<(i64, SqlValue)> {
    let pairs: Vec<(i64, serde_json::Value)> = serde_json::from_str(json).unwrap_or_default();
    pairs
        .into_iter()
        .filter_map(|(id, value)| Some((id, custom_fields::sql_of(&value)?)))
        .collect()
}

/// Records the request of `signup` and mails its link, inside the caller's transaction:
/// nothing for an active subscriber, nor within a day of the last link to the address (nor
/// past the address's hourly mails across newsletters); else the e-mail domain's throttle,
/// `throttle` (the form's), and the mail.
fn mail_link(
    tx: &Connection,
    urls: &SiteUrls,
    newsletter: &Newsletter,
    signup: &Signup<'_>,
    throttle: impl FnOnce(&Connection) -> DomainResult<()>,
) -> DomainResult<Requested> {
    let valid = signup.valid;
    const EXISTING: &str = "SELECT status FROM subscribers WHERE newsletter_id = ?1 AND email = ?2";
    let status: Option<Status> = tx
        .query_row(EXISTING, (newsletter.id, valid.email.as_str()), |r| {
            r.get(0)
        })
        .optional()?;
    if status == Some(Status::Active) {
        return Ok(Requested::AlreadySubscribed);
    }
    let now = clock::now();
    const PENDING: &str = "SELECT 1 FROM subscription_requests
         WHERE newsletter_id = ?1 AND email = ?2 AND created_at > ?3";
    let pending = tx
        .query_row(
            PENDING,
            (
                newsletter.id,
                valid.email.as_str(),
                Timestamp::from(now - ONE_PENDING_MAIL_PER),
            ),
            |_| Ok(()),
        )
        .optional()?;
    if pending.is_some() {
        return Ok(Requested::MailCapped);
    }
    if !rate_limit::allow(
        tx,
        &Bucket::SubscribeMail {
            email: valid.email.as_str(),
        },
        3600,
        MAILS_PER_ADDRESS_PER_HOUR,
    )? {
        return Ok(Requested::MailCapped);
    }
    let domain = valid.email.domain();
    rate_limit::hit(
        tx,
        &Bucket::SubscribeDomain {
            newsletter_id: newsletter.id,
            domain,
        },
        3600,
        MAILS_PER_DOMAIN_PER_HOUR,
    )?;
    throttle(tx)?;
    let token = random_hex(32);
    const UPSERT: &str = "INSERT INTO subscription_requests (newsletter_id, email, name, token_hash, expires_at, created_at, tags, form_id,
             referrer, utm_source, utm_medium, utm_campaign, field_values)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         ON CONFLICT (newsletter_id, email) DO UPDATE SET name = excluded.name,
             token_hash = excluded.token_hash, expires_at = excluded.expires_at,
             created_at = excluded.created_at, tags = excluded.tags, form_id = excluded.form_id,
             referrer = excluded.referrer, utm_source = excluded.utm_source,
             utm_medium = excluded.utm_medium, utm_campaign = excluded.utm_campaign,
             field_values = excluded.field_values";
    let origin = signup.origin;
    tx.execute(
        UPSERT,
        rusqlite::params![
            newsletter.id,
            valid.email.as_str(),
            valid.name.as_deref(),
            sha256_hex(&token),
            Timestamp::from(now + LINK_LIFETIME),
            Timestamp::from(now),
            serde_json::to_string(valid.tags()).expect("strings serialise"),
            signup.form_id,
            origin.referrer,
            origin.utm.source,
            origin.utm.medium,
            origin.utm.campaign,
            values_json(signup.values),
        ],
    )?;
    let origin = newsletter.site_origin(urls);
    let link = format!("{origin}/subscribe/confirm/{token}");
    queue_account_mail(
        tx,
        &AccountMail {
            to: valid.email.as_str().to_string(),
            link,
            kind: AccountMailKind::SubscriptionConfirmation {
                newsletter_name: newsletter.name.clone(),
                sender: Some(newsletter.sender(&host_of(&origin))),
                newsletter_id: Some(newsletter.id),
            },
        },
    )?;
    Ok(Requested::LinkSent)
}

/// Follows a confirmation link of `newsletter_id`'s site: the address becomes an active
/// subscriber (a former subscriber who had left is active again), and its welcome e-mail is
/// queued when the newsletter sends one and the subscriber never had it (`welcome`). Works
/// once; a link followed after the newsletter was cancelled is refused.
pub fn confirm(conn: &mut Connection, newsletter_id: i64, token: &str) -> DomainResult<Subscriber> {
    write_tx(conn, |tx| {
        let newsletter = crate::domain::newsletters::get(tx, newsletter_id)?;
        newsletter.ensure_writable()?;
        let subscriber = activate(tx, newsletter_id, token)?;
        if newsletter.welcome.enabled && subscriber.status == Status::Active {
            subscribers::queue_welcome(tx, subscriber.id)?;
        }
        crate::store::sequence_entries::enter_on_confirmation(
            tx,
            newsletter_id,
            subscriber.id,
            &Timestamp::now(),
        )?;
        Ok(subscriber)
    })
}

/// The confirmation itself, inside [`confirm`]'s transaction.
fn activate(tx: &Connection, newsletter_id: i64, token: &str) -> DomainResult<Subscriber> {
    const FIND: &str =
        "SELECT id, email, name, tags, referrer, utm_source, utm_medium, utm_campaign, field_values
         FROM subscription_requests
         WHERE newsletter_id = ?1 AND token_hash = ?2 AND expires_at > ?3";
    type Request = (i64, String, Option<String>, String, Origin, String);
    let (request_id, email, name, tags, origin, values): Request = tx
        .query_row(
            FIND,
            (newsletter_id, sha256_hex(token), Timestamp::now()),
            |r| {
                let origin = Origin {
                    source: Some(Source::Form),
                    referrer: r.get(4)?,
                    utm: Utm {
                        source: r.get(5)?,
                        medium: r.get(6)?,
                        campaign: r.get(7)?,
                    },
                };
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    origin,
                    r.get(8)?,
                ))
            },
        )
        .optional()?
        .ok_or(DomainError::NotFound("subscription request"))?;
    let tags: Vec<String> = serde_json::from_str(&tags).unwrap_or_default();
    tx.execute(
        "DELETE FROM subscription_requests WHERE id = ?1",
        [request_id],
    )?;
    let valid = subscribers::validate(&NewSubscriber {
        email,
        name,
        tags,
        subscribed_at: None,
    })?;
    let (subscriber, _created) = subscribers::insert(tx, newsletter_id, &valid, &origin)?;
    // What the reader gave on the form is theirs now, over what an earlier stay left.
    custom_fields::put_values(tx, subscriber.id, &values_of(&values))?;
    let subscriber = subscribers::get(tx, newsletter_id, subscriber.id)?;
    if subscriber.status != Status::Unsubscribed {
        return Ok(subscriber);
    }
    const RESUBSCRIBE: &str = "UPDATE subscribers SET status = 'active', unsubscribed_at = NULL,
         resubscribed_at = ?2, changed_at = ?2 WHERE id = ?1";
    tx.execute(RESUBSCRIBE, (subscriber.id, Timestamp::now()))?;
    let subscriber = subscribers::get(tx, newsletter_id, subscriber.id)?;
    events::record(
        tx,
        newsletter_id,
        "subscriber.updated",
        subscriber.event_data(),
    )?;
    Ok(subscriber)
}
