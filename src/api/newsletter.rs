//! `GET /newsletter`: the newsletter the API key belongs to.

use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, Tags};

use super::fields::{
    Email, Field, HexColor, LogoUrl, NewsletterName, SenderName, Tagline, TimeZone, WelcomeBody,
    WelcomeSubject,
};
use super::statuses::{BODY, GUARD, Refusal, WRITES};
use super::{ApiKeyAuth, Principal, State};
use crate::domain::DomainResult;
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::sender_domains::{self, SenderDomain};
use crate::domain::site_theme::{AccentColor, ThemeChanges};
use crate::domain::stats;
use crate::domain::urls::SiteUrls;
use crate::domain::welcome::WelcomeChanges;

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
    pub created_at: String,
    pub updated_at: String,
    pub urls: NewsletterUrls,
    /// The sending domain and its DKIM record; null without a sender address. Verified in
    /// the dashboard (Settings, "Your sending domain").
    #[oai(nullable)]
    pub sender_domain: Option<SenderDomainObject>,
}

impl NewsletterObject {
    pub fn new(
        n: &Newsletter,
        counts: (i64, i64),
        sender_domain: Option<SenderDomain>,
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
            subscriber_count: counts.0,
            issue_count: counts.1,
            welcome_enabled: n.welcome.enabled,
            welcome_subject: n.welcome.subject_or_default(&n.name),
            welcome_body: n.welcome.body_or_default(&n.name),
            publish_on_send: n.publish_on_send,
            time_zone: n.time_zone.to_string(),
            accent_color: n.theme.accent_color.map(AccentColor::hex),
            logo_url: n.theme.logo_url.clone(),
            created_at: n.created_at.to_string(),
            updated_at: n.updated_at.to_string(),
            urls: NewsletterUrls {
                home: links.home,
                subscribe: links.subscribe,
                archive: links.archive,
            },
            sender_domain: sender_domain.map(SenderDomainObject::from),
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
    /// An IANA time zone name (`America/New_York`), as the bundled database lists it (any
    /// letter case is read as that name); anything else is a 422. Null leaves it.
    #[oai(nullable)]
    pub time_zone: Option<Field<TimeZone>>,
    /// `#rrggbb`; buttons get black or white text, whichever stays readable. `""` goes back
    /// to the default.
    #[oai(nullable)]
    pub accent_color: Option<Field<HexColor>>,
    /// An `https://` image URL, at most 500 characters; `""` removes the logo.
    #[oai(nullable)]
    pub logo_url: Option<Field<LogoUrl>>,
}

#[derive(Debug, Object)]
pub struct SubscriberStats {
    pub total: i64,
    pub active: i64,
    pub unsubscribed: i64,
    pub bounced: i64,
    /// New subscribers minus unsubscribes in the last 30 days.
    pub growth_last_30_days: i64,
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

/// The newsletter with its counts and sending domain, as every newsletter answer shows it.
struct Loaded {
    newsletter: Newsletter,
    counts: (i64, i64),
    sender_domain: Option<SenderDomain>,
}

/// Runs on the database's blocking thread: the sending domain's key may be made here.
fn load(conn: &rusqlite::Connection, id: i64) -> DomainResult<Loaded> {
    let newsletter = newsletters::get(conn, id)?;
    Ok(Loaded {
        counts: newsletters::counts(conn, id)?,
        sender_domain: sender_domains::for_newsletter(conn, &newsletter)?,
        newsletter,
    })
}

fn envelope(state: &State, loaded: Loaded) -> NewsletterResponse {
    NewsletterResponse::Ok(Json(NewsletterEnvelope {
        data: NewsletterObject::new(
            &loaded.newsletter,
            loaded.counts,
            loaded.sender_domain,
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
        let id = p.newsletter_id;
        Ok(envelope(
            state,
            state.db.run(move |conn| load(conn, id)).await?,
        ))
    }

    /// Changes the newsletter's settings.
    ///
    /// Changes the name, tagline, sender, welcome e-mail, publishing on send, time zone or the
    /// site's accent colour and logo; absent fields stay as they are. Answers like `GET
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
        let id = p.newsletter_id;
        let Json(patch) = body;
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
        };
        // The welcome body renders before a connection is taken.
        let loaded = state
            .db
            .run_after(
                move || newsletters::check_details(&changes),
                move |conn, checked| {
                    newsletters::apply_details(conn, id, &checked)?;
                    load(conn, id)
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
