//! `GET /newsletter`: the newsletter the API key belongs to.

use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::types::MaybeUndefined;
use poem_openapi::{ApiResponse, Object, Tags};

use super::fields::{
    AboutMarkdown, AuthorImageUrl, AuthorName, Email, Field, FirstDayCap, GrowthFactor, HexColor,
    LogoUrl, NewsletterName, Number, Port, PostalAddress, RelayHost, RelayLimit, RelayPassword,
    RelayTlsMode, RelayUsername, ReplyTo, SenderName, Tagline, TimeZone, WelcomeBody,
    WelcomeSubject,
};
use super::statuses::{BODY, GUARD, Refusal, WRITES};
use super::{ApiKeyAuth, Principal, State};
use crate::domain::delivery::relays::{
    self, NewsletterRelay, PasswordChange, RelayChange, RelayInput, SendingChanges, SendingSetup,
    WarmUp, WarmUpChange, WarmUpInput,
};
use crate::domain::newsletters::mail_details::MailDetailsChanges;
use crate::domain::newsletters::sender_domains::{self, SenderDomain};
use crate::domain::newsletters::site_pages::{self, SitePagesChanges};
use crate::domain::newsletters::site_theme::{AccentColor, ThemeChanges};
use crate::domain::newsletters::welcome::RenderedBody;
use crate::domain::newsletters::welcome::WelcomeChanges;
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::reports::overview::{self, Summary};
use crate::domain::reports::stats;
use crate::domain::values::credentials::CredentialKey;
use crate::domain::values::urls::SiteUrls;
use crate::domain::{DomainError, DomainResult, FieldErrors};

#[derive(Tags)]
enum ApiTags {
    /// The newsletter the key belongs to.
    Newsletter,
}

/// Absolute addresses on the newsletter's public site.
#[derive(Debug, Object)]
pub struct NewsletterUrls {
    pub home: String,
    pub subscribe: String,
    pub archive: String,
}

/// The domain of the sender address and the DKIM record that lets mail be signed as it.
#[derive(Debug, Object)]
pub struct SenderDomainObject {
    /// The domain part of `sender_email`.
    pub domain: String,
    /// `pending` (not checked yet), `verified` (mail is signed with `d=` this domain) or
    /// `failed` (the last check found no record or another key).
    pub status: String,
    /// The TXT record to publish: `<selector>._domainkey.<domain> TXT "v=DKIM1; k=rsa; p=..."`.
    pub dkim_record: String,
    /// Why the last check failed, if it did.
    #[oai(nullable)]
    pub reason: Option<String>,
}

impl From<SenderDomain> for SenderDomainObject {
    fn from(d: SenderDomain) -> Self {
        SenderDomainObject {
            dkim_record: d.dkim_record(),
            domain: d.domain,
            status: d.status.as_str().to_string(),
            reason: d.reason,
        }
    }
}

/// What a relay takes at most; null: no limit of that kind.
#[derive(Debug, Object)]
pub struct RelayLimitsObject {
    /// Messages per second.
    #[oai(nullable)]
    pub per_second: Option<u32>,
    /// Messages per rolling hour.
    #[oai(nullable)]
    pub per_hour: Option<u32>,
    /// Messages per rolling day.
    #[oai(nullable)]
    pub per_day: Option<u32>,
}

/// The newsletter's own mail relay (its owner's account at an e-mail service). The password
/// is never shown.
#[derive(Debug, Object)]
pub struct RelayObject {
    /// A DNS name or an IP address.
    pub host: String,
    pub port: u16,
    /// `tls`: TLS from the first byte (usually port 465); `starttls`: STARTTLS, required
    /// (usually port 587). Never plain text.
    pub tls_mode: String,
    /// Null: the relay takes mail without signing in.
    #[oai(nullable)]
    pub username: Option<String>,
    /// Whether a password is stored. It is write-only: no answer ever contains it.
    pub password_set: bool,
    /// Why the relay cannot sign in as it is set, in words for its owner: the stored password
    /// cannot be read with this server's key file (the database was moved without it), or
    /// there is a user name without a password or the reverse; null when it can. A send
    /// through the relay fails with this reason.
    #[oai(nullable)]
    pub password_problem: Option<String>,
    pub limits: RelayLimitsObject,
}

impl From<NewsletterRelay> for RelayObject {
    fn from(r: NewsletterRelay) -> Self {
        RelayObject {
            password_set: r.password.is_set(),
            password_problem: r.problem().map(String::from),
            host: r.host,
            port: r.port,
            tls_mode: r.tls_mode.as_str().to_string(),
            username: r.username,
            limits: RelayLimitsObject {
                per_second: r.limits.per_second,
                per_hour: r.limits.per_hour,
                per_day: r.limits.per_day,
            },
        }
    }
}

/// The warm-up plan of a new sending domain: at most `today_cap` messages go out on a UTC day.
#[derive(Debug, Object)]
pub struct WarmUpObject {
    /// The cap of the plan's first day.
    pub first_day_cap: u32,
    /// How much the cap grows each day (2: it doubles).
    pub factor: f64,
    /// The plan's first day (UTC), `YYYY-MM-DD`: the day it was turned on.
    pub started_on: String,
    /// Today's cap (UTC): `first_day_cap × factor^(days since started_on)`, rounded down.
    pub today_cap: u64,
}

impl From<WarmUp> for WarmUpObject {
    fn from(w: WarmUp) -> Self {
        WarmUpObject {
            first_day_cap: w.first_day_cap,
            factor: w.factor,
            started_on: w.started_on.to_string(),
            today_cap: w.daily_cap(relays::today()),
        }
    }
}

/// A newsletter as the API shows it.
#[derive(Debug, Object)]
pub struct NewsletterObject {
    pub id: i64,
    pub name: String,
    pub tagline: String,
    /// The From name of issues.
    pub sender_name: String,
    /// The From address of issues.
    pub sender_email: String,
    /// Not changeable through the API.
    pub subdomain: String,
    /// `active`, `paused` or `cancelled`.
    pub status: String,
    /// `free`, `pending` or `paid`; not changeable through the API.
    pub tier: String,
    /// Active subscribers.
    pub subscriber_count: i64,
    /// All issues.
    pub issue_count: i64,
    /// Whether readers who confirm on the public site get the welcome e-mail.
    pub welcome_enabled: bool,
    /// The welcome e-mail's subject as sent (the default until one is set).
    pub welcome_subject: String,
    /// The welcome e-mail's Markdown body as sent (the default until one is set).
    pub welcome_body: String,
    /// Whether an issue is published on the web (its `web_url` goes live) when its send
    /// completes; on for newsletters created since this setting exists.
    pub publish_on_send: bool,
    /// The IANA time zone (`Europe/Berlin`) the publishing frequency's 09:00 slots are in;
    /// times in the API stay RFC 3339 UTC.
    pub time_zone: String,
    /// The public site's accent colour, `#rrggbb`; null for the default blue.
    #[oai(nullable)]
    pub accent_color: Option<String>,
    /// The public site's logo, an `https://` image URL; null for none.
    #[oai(nullable)]
    pub logo_url: Option<String>,
    /// Where replies to its mail go (a `Reply-To` header); null: to the sender address.
    #[oai(nullable)]
    pub reply_to: Option<String>,
    /// The postal address printed in the footer of every issue, its lines kept; null: none.
    #[oai(nullable)]
    pub postal_address: Option<String>,
    /// The Markdown of the site's about page (`/about`); null: none.
    #[oai(nullable)]
    pub about_markdown: Option<String>,
    /// The author's name, on the about page, beside every issue and in the feed; null: none.
    #[oai(nullable)]
    pub author_name: Option<String>,
    /// The author's picture (an own image as its address on the site now); null: none.
    #[oai(nullable)]
    pub author_image_url: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub urls: NewsletterUrls,
    /// The sending domain and its DKIM record; null without a sender address. Verified in
    /// the dashboard (Settings, "Your sending domain").
    #[oai(nullable)]
    pub sender_domain: Option<SenderDomainObject>,
    /// The newsletter's own mail relay; null: its mail goes out through the server's relay.
    #[oai(nullable)]
    pub relay: Option<RelayObject>,
    /// The warm-up plan of a new sending domain; null: off (the default), no daily cap.
    #[oai(nullable)]
    pub warmup: Option<WarmUpObject>,
}

impl NewsletterObject {
    pub fn new(
        n: &Newsletter,
        about: Option<RenderedBody>,
        counts: Summary,
        sender_domain: Option<SenderDomain>,
        sending: SendingSetup,
        urls: &SiteUrls,
    ) -> Self {
        let links = n.links(urls);
        NewsletterObject {
            id: n.id,
            name: n.name.clone(),
            tagline: n.tagline.clone(),
            sender_name: n.sender_name.clone(),
            sender_email: n.sender_email.clone(),
            subdomain: n.subdomain.clone(),
            status: n.status.as_str().to_string(),
            tier: n.tier.as_str().to_string(),
            subscriber_count: counts.subscribers,
            issue_count: counts.issues(),
            welcome_enabled: n.welcome.enabled,
            welcome_subject: n.welcome.subject_or_default(&n.name),
            welcome_body: n.welcome.body_or_default(&n.name),
            publish_on_send: n.publish_on_send,
            time_zone: n.time_zone.to_string(),
            accent_color: n.theme.accent_color.map(AccentColor::hex),
            logo_url: n.theme.logo_url.clone(),
            reply_to: n.mail.reply_to.clone(),
            postal_address: n.mail.postal_address.clone(),
            about_markdown: about.map(|about| about.markdown),
            author_name: n.pages.author_name.clone(),
            author_image_url: n.pages.author_image_url(&n.site_origin(urls)),
            created_at: n.created_at.to_string(),
            updated_at: n.updated_at.to_string(),
            urls: NewsletterUrls {
                home: links.home,
                subscribe: links.subscribe,
                archive: links.archive,
            },
            sender_domain: sender_domain.map(SenderDomainObject::from),
            relay: sending.relay.map(RelayObject::from),
            warmup: sending.warm_up.map(WarmUpObject::from),
        }
    }
}

/// `{"data": Newsletter}`.
#[derive(Debug, Object)]
#[oai(example)]
pub struct NewsletterEnvelope {
    pub data: NewsletterObject,
}

#[derive(ApiResponse)]
pub enum NewsletterResponse {
    #[oai(status = 200)]
    Ok(Json<NewsletterEnvelope>),
}

/// A relay's limits as sent; an absent or null limit is none.
#[derive(Debug, Object)]
pub struct RelayLimitsPatch {
    #[oai(nullable)]
    pub per_second: Option<Number<RelayLimit>>,
    #[oai(nullable)]
    pub per_hour: Option<Number<RelayLimit>>,
    #[oai(nullable)]
    pub per_day: Option<Number<RelayLimit>>,
}

/// The newsletter's own relay, as a whole: every field but `password` replaces the stored one.
#[derive(Debug, Object)]
pub struct RelayPatch {
    pub host: Field<RelayHost>,
    pub port: Number<Port>,
    /// `tls` (TLS from the first byte, usually port 465) or `starttls` (STARTTLS required,
    /// usually port 587).
    pub tls_mode: Field<RelayTlsMode>,
    /// Absent, null or `""`: the relay takes mail without signing in. The relay signs in with
    /// a user name and a password, or neither: one without the other is saved and shown in
    /// `password_problem`.
    #[oai(nullable)]
    pub username: Option<Field<RelayUsername>>,
    /// Write-only: stored encrypted and never shown again (answers have `password_set`).
    /// Absent keeps the stored password; null removes it.
    #[oai(nullable)]
    pub password: MaybeUndefined<Field<RelayPassword>>,
    /// Absent or null: no limits.
    #[oai(nullable)]
    pub limits: Option<RelayLimitsPatch>,
}

impl From<RelayPatch> for RelayInput {
    fn from(p: RelayPatch) -> Self {
        let limit = |n: Option<&Number<RelayLimit>>| n.map(Number::text).unwrap_or_default();
        let limits = p.limits.as_ref();
        RelayInput {
            host: p.host.into(),
            port: p.port.text(),
            tls_mode: p.tls_mode.into(),
            username: p.username.map(String::from).unwrap_or_default(),
            password: match p.password {
                MaybeUndefined::Undefined => PasswordChange::Keep,
                MaybeUndefined::Null => PasswordChange::Remove,
                MaybeUndefined::Value(password) => PasswordChange::Set(password.into()),
            },
            per_second: limit(limits.and_then(|l| l.per_second.as_ref())),
            per_hour: limit(limits.and_then(|l| l.per_hour.as_ref())),
            per_day: limit(limits.and_then(|l| l.per_day.as_ref())),
        }
    }
}

/// The warm-up plan to turn on (or to change, keeping its first day).
#[derive(Debug, Object)]
pub struct WarmUpPatch {
    /// The cap of the first day; absent or null: 50.
    #[oai(nullable)]
    pub first_day_cap: Option<Number<FirstDayCap>>,
    /// The daily growth, from 1.1 to 10; absent or null: 2 (the cap doubles each day).
    #[oai(nullable)]
    pub factor: Option<Number<GrowthFactor>>,
}

/// Fields `PATCH /newsletter` may change; absent fields stay as they are.
#[derive(Debug, Object)]
#[oai(example)]
pub struct NewsletterPatch {
    #[oai(nullable)]
    pub name: Option<Field<NewsletterName>>,
    #[oai(nullable)]
    pub tagline: Option<Field<Tagline>>,
    /// No quotes or angle brackets.
    #[oai(nullable)]
    pub sender_name: Option<Field<SenderName>>,
    #[oai(nullable)]
    pub sender_email: Option<Field<Email>>,
    #[oai(nullable)]
    pub welcome_enabled: Option<bool>,
    /// At most 200 characters, one line; `""` goes back to the default.
    #[oai(nullable)]
    pub welcome_subject: Option<Field<WelcomeSubject>>,
    /// Markdown, at most 10,000 characters; `""` goes back to the default.
    #[oai(nullable)]
    pub welcome_body: Option<Field<WelcomeBody>>,
    /// Publish issues on the web when their send completes.
    #[oai(nullable)]
    pub publish_on_send: Option<bool>,
    /// A name of the IANA time zone database (the tz database, <https://www.iana.org/time-zones>):
    /// `Europe/Berlin`, `America/New_York`, `UTC`; any letter case is read as that name, and it
    /// is stored as the database spells it. A name the server's bundled copy of the database
    /// lacks is 422 `validation_error`. Null leaves it.
    #[oai(nullable)]
    pub time_zone: Option<Field<TimeZone>>,
    /// `#rrggbb`; buttons get black or white text, whichever stays readable. `""` goes back
    /// to the default.
    #[oai(nullable)]
    pub accent_color: Option<Field<HexColor>>,
    /// An `https://` image URL, at most 500 characters; `""` removes the logo.
    #[oai(nullable)]
    pub logo_url: Option<Field<LogoUrl>>,
    /// An e-mail address replies go to; `""` goes back to the sender address.
    #[oai(nullable)]
    pub reply_to: Option<Field<ReplyTo>>,
    /// At most 300 characters; line breaks are kept. `""` removes it.
    #[oai(nullable)]
    pub postal_address: Option<Field<PostalAddress>>,
    /// Markdown, at most 20,000 characters, rendered when saved; `""` removes the about page.
    #[oai(nullable)]
    pub about_markdown: Option<Field<AboutMarkdown>>,
    /// One line, at most 100 characters; `""` removes it.
    #[oai(nullable)]
    pub author_name: Option<Field<AuthorName>>,
    /// An `https://` image URL, or `/media/<file>` of an image uploaded to this newsletter, at
    /// most 500 characters; `""` removes it.
    #[oai(nullable)]
    pub author_image_url: Option<Field<AuthorImageUrl>>,
    /// The newsletter's own mail relay, replacing the stored one (`password` aside); null
    /// goes back to the server's relay and deletes the stored one. The host is looked up, and
    /// refused if private, each time a connection is made, not here.
    #[oai(nullable)]
    pub relay: MaybeUndefined<RelayPatch>,
    /// Turns the warm-up plan on (it starts today, UTC) or changes it (its first day stays);
    /// null turns it off.
    #[oai(nullable)]
    pub warmup: MaybeUndefined<WarmUpPatch>,
}

impl NewsletterPatch {
    /// The relay and warm-up changes of the patch.
    fn sending_changes(&mut self) -> SendingChanges {
        SendingChanges {
            relay: match std::mem::take(&mut self.relay) {
                MaybeUndefined::Undefined => RelayChange::Keep,
                MaybeUndefined::Null => RelayChange::Remove,
                MaybeUndefined::Value(relay) => RelayChange::Save(relay.into()),
            },
            warm_up: match std::mem::take(&mut self.warmup) {
                MaybeUndefined::Undefined => WarmUpChange::Keep,
                MaybeUndefined::Null => WarmUpChange::Off,
                MaybeUndefined::Value(plan) => WarmUpChange::On(WarmUpInput {
                    first_day_cap: plan.first_day_cap.map(|n| n.text()).unwrap_or_default(),
                    factor: plan.factor.map(|n| n.text()).unwrap_or_default(),
                }),
            },
        }
    }
}

#[derive(Debug, Object)]
pub struct SubscriberStats {
    pub total: i64,
    pub active: i64,
    pub unsubscribed: i64,
    pub bounced: i64,
    /// New subscribers minus unsubscribes in the last 30 days.
    pub growth_last_30_days: i64,
    /// New subscribers of the last 30 days (today and the 29 days before, UTC) by how they
    /// were added (docs/growth.md). Subscribers added before sources were recorded are in
    /// none.
    pub new_by_source_last_30_days: NewBySource,
}

/// New subscribers by source.
#[derive(Debug, Object)]
pub struct NewBySource {
    /// Confirmed through a signup form or the site's subscribe page.
    pub form: i64,
    /// From CSV imports.
    pub import: i64,
    /// Created through the API.
    pub api: i64,
    /// Added by hand in the dashboard.
    pub dashboard: i64,
}

#[derive(Debug, Object)]
pub struct IssueStats {
    pub total: i64,
    pub sent_last_30_days: i64,
}

#[derive(Debug, Object)]
pub struct Last30Days {
    /// Messages the mail relay took.
    pub emails_sent: i64,
    /// Messages whose end went out but whose relay answer never came (a crash, a timeout):
    /// they may have arrived and are never sent again; not counted in `emails_sent`.
    pub emails_unconfirmed: i64,
    pub opens: i64,
    pub clicks: i64,
}

#[derive(Debug, Object)]
pub struct Engagement {
    /// Percentage (0-100, one decimal) of delivered e-mails opened.
    pub average_open_rate: f64,
    /// Percentage (0-100, one decimal) of delivered e-mails with at least one click.
    pub average_click_rate: f64,
    pub last_30_days: Last30Days,
}

#[derive(Debug, Object)]
pub struct TopIssue {
    pub id: i64,
    pub subject: String,
    pub open_rate: f64,
    pub click_rate: f64,
}

#[derive(Debug, Object)]
pub struct StatsObject {
    pub subscribers: SubscriberStats,
    pub issues: IssueStats,
    pub engagement: Engagement,
    /// Up to 5 sent issues by open rate.
    pub top_issues: Vec<TopIssue>,
    /// Paid memberships (docs/memberships.md).
    pub memberships: MembershipStats,
}

/// Paid members and what they pay.
#[derive(Debug, Object)]
pub struct MembershipStats {
    /// Members with paid access who pay (`paid`, `past_due`, `canceled` until their period
    /// ends).
    pub paid_members: i64,
    /// Members in a free trial.
    pub trialing_members: i64,
    /// Members given paid access free.
    pub comped_members: i64,
    /// Monthly recurring revenue, in the plan currency's minor unit (cents): monthly prices,
    /// and a twelfth of yearly ones, of members who pay and renew.
    pub monthly_recurring_revenue: i64,
    /// The plan's currency (ISO 4217, lowercase); null without a plan.
    #[oai(nullable)]
    pub currency: Option<String>,
    /// Members whose paid access (or trial) began in the last 30 days.
    pub new_paid_last_30_days: i64,
    /// Memberships canceled in the last 30 days.
    pub canceled_last_30_days: i64,
}

impl From<stats::Stats> for StatsObject {
    fn from(s: stats::Stats) -> Self {
        StatsObject {
            subscribers: SubscriberStats {
                total: s.subscribers.total,
                active: s.subscribers.active,
                unsubscribed: s.subscribers.unsubscribed,
                bounced: s.subscribers.bounced,
                growth_last_30_days: s.subscribers.growth_last_30_days,
                new_by_source_last_30_days: NewBySource {
                    form: s.subscribers.new_by_source.form,
                    import: s.subscribers.new_by_source.import,
                    api: s.subscribers.new_by_source.api,
                    dashboard: s.subscribers.new_by_source.dashboard,
                },
            },
            issues: IssueStats {
                total: s.issues.total,
                sent_last_30_days: s.issues.sent_last_30_days,
            },
            engagement: Engagement {
                average_open_rate: s.engagement.average_open_rate,
                average_click_rate: s.engagement.average_click_rate,
                last_30_days: Last30Days {
                    emails_sent: s.engagement.last_30_days.emails_sent,
                    emails_unconfirmed: s.engagement.last_30_days.emails_unconfirmed,
                    opens: s.engagement.last_30_days.opens,
                    clicks: s.engagement.last_30_days.clicks,
                },
            },
            top_issues: s
                .top_issues
                .into_iter()
                .map(|t| TopIssue {
                    id: t.id,
                    subject: t.subject,
                    open_rate: t.open_rate,
                    click_rate: t.click_rate,
                })
                .collect(),
            memberships: MembershipStats {
                paid_members: s.memberships.paid_members,
                trialing_members: s.memberships.trialing_members,
                comped_members: s.memberships.comped_members,
                monthly_recurring_revenue: s.memberships.monthly_recurring_revenue,
                currency: s.memberships.currency,
                new_paid_last_30_days: s.memberships.new_paid_last_30_days,
                canceled_last_30_days: s.memberships.canceled_last_30_days,
            },
        }
    }
}

/// `{"data": Stats}`.
#[derive(Debug, Object)]
#[oai(example)]
pub struct StatsEnvelope {
    pub data: StatsObject,
}

#[derive(ApiResponse)]
pub enum StatsResponse {
    #[oai(status = 200)]
    Ok(Json<StatsEnvelope>),
}

/// The newsletter with its counts, sending domain, relay and warm-up plan, as every
/// newsletter answer shows it.
struct Loaded {
    newsletter: Newsletter,
    about: Option<RenderedBody>,
    counts: Summary,
    sender_domain: Option<SenderDomain>,
    sending: SendingSetup,
}

/// Runs on the database's blocking thread: the sending domain's key may be made here.
fn load(conn: &rusqlite::Connection, key: &CredentialKey, id: i64) -> DomainResult<Loaded> {
    let newsletter = newsletters::get(conn, id)?;
    Ok(Loaded {
        about: site_pages::about(conn, id)?,
        counts: overview::summary(conn, id)?,
        sender_domain: sender_domains::for_newsletter(conn, &newsletter)?,
        sending: relays::setup(conn, key, id)?,
        newsletter,
    })
}

fn envelope(state: &State, loaded: Loaded) -> NewsletterResponse {
    NewsletterResponse::Ok(Json(NewsletterEnvelope {
        data: NewsletterObject::new(
            &loaded.newsletter,
            loaded.about,
            loaded.counts,
            loaded.sender_domain,
            loaded.sending,
            &state.urls,
        ),
    }))
}

pub struct NewsletterApi;

rate_limited_api! {
    "ApiTags::Newsletter",
impl NewsletterApi {
    /// The newsletter this API key belongs to.
    ///
    /// Answers `{"data": Newsletter}`: its settings, counts, public URLs and sending domain. The
    /// first read after a sender address is set creates that domain's DKIM key, which is why it can
    /// answer 507.
    #[oai(path = "/newsletter", method = "get", operation_id = "getNewsletter")]
    async fn get_newsletter(
        &self,
        _auth: ApiKeyAuth,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<NewsletterResponse, Refusal<{ GUARD | WRITES }>> {
        let (id, key) = (p.newsletter_id, state.credentials.clone());
        Ok(envelope(
            state,
            state.db.run(move |conn| load(conn, &key, id)).await?,
        ))
    }

    /// Changes the newsletter's settings.
    ///
    /// Changes the name, tagline, sender, welcome e-mail, publishing on send, time zone, the
    /// site's accent colour and logo, its about page and author, the newsletter's own mail
    /// relay or its warm-up plan;
    /// absent fields stay as they are. Nothing changes when any value is refused (422). The
    /// relay's `password` is write-only: answers show `password_set` instead. Answers like `GET
    /// /newsletter`. A cancelled newsletter is read-only (403).
    #[oai(
        path = "/newsletter",
        method = "patch",
        operation_id = "updateNewsletter"
    )]
    async fn update_newsletter(
        &self,
        _auth: ApiKeyAuth,
        body: Json<NewsletterPatch>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<NewsletterResponse, Refusal<{ GUARD | BODY | WRITES }>> {
        let (id, key) = (p.newsletter_id, state.credentials.clone());
        let Json(mut patch) = body;
        let sending = patch.sending_changes();
        let changes = newsletters::Details {
            name: patch.name.map(String::from),
            tagline: patch.tagline.map(String::from),
            sender_name: patch.sender_name.map(String::from),
            sender_email: patch.sender_email.map(String::from),
            welcome: WelcomeChanges {
                enabled: patch.welcome_enabled,
                subject: patch.welcome_subject.map(String::from),
                body: patch.welcome_body.map(String::from),
            },
            publish_on_send: patch.publish_on_send,
            time_zone: patch.time_zone.map(String::from),
            theme: ThemeChanges {
                accent_color: patch.accent_color.map(String::from),
                logo_url: patch.logo_url.map(String::from),
            },
            mail: MailDetailsChanges {
                reply_to: patch.reply_to.map(String::from),
                postal_address: patch.postal_address.map(String::from),
            },
            pages: SitePagesChanges {
                about_markdown: patch.about_markdown.map(String::from),
                author_name: patch.author_name.map(String::from),
                author_image: patch.author_image_url.map(String::from),
            },
        };
        // The welcome body renders before a connection is taken; every field is checked
        // before anything is written, and all of it is written in one transaction.
        let loaded = state
            .db
            .run_after(
                move || {
                    let details = newsletters::check_details(&changes);
                    let mut errors = FieldErrors::new();
                    let sending = relays::check_changes_into(&sending, &mut errors);
                    match details {
                        Err(DomainError::Invalid(code, mut fields)) => {
                            fields.append(errors);
                            Err(DomainError::Invalid(code, fields))
                        }
                        Err(other) => Err(other),
                        Ok(details) => errors.into_result().map(|()| (details, sending)),
                    }
                },
                move |conn, (details, sending)| {
                    crate::store::write_tx(conn, |tx| {
                        newsletters::apply_details_in(tx, id, &details)?;
                        relays::apply_changes(tx, &key, id, &sending)
                    })?;
                    load(conn, &key, id)
                },
            )
            .await?;
        Ok(envelope(state, loaded))
    }

    /// Subscriber, issue and engagement figures.
    ///
    /// Figures from real deliveries: subscribers by status and their growth, issues sent, open and
    /// click rates over the last 30 days, and the five best-opened issues.
    #[oai(
        path = "/newsletter/stats",
        method = "get",
        operation_id = "getNewsletterStats"
    )]
    async fn get_stats(
        &self,
        _auth: ApiKeyAuth,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<StatsResponse, Refusal<{ GUARD }>> {
        let id = p.newsletter_id;
        let stats = state
            .db
            .run(move |conn| stats::for_newsletter(conn, id))
            .await?;
        Ok(StatsResponse::Ok(Json(StatsEnvelope {
            data: stats.into(),
        })))
    }
}
}
