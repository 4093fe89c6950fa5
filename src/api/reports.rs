//! One issue's report: the clicks of each link and the opens and clicks of its first seven
//! days (`GET /issues/{id}/stats`), from the counters the tracking routes keep.

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, Tags};

use super::common::parse_id;
use super::fields::{Field, Id};
use super::statuses::{BY_ID, GUARD, Refusal};
use super::{ApiKeyAuth, Principal, State};
use crate::domain::reports::issue_report::{self, IssueReport};

#[derive(Tags)]
enum ApiTags {
    /// Write, approve, schedule, send and publish issues.
    Issues,
}

/// The clicks of one link of the issue.
#[derive(Debug, Object)]
pub struct LinkStats {
    /// The link's target, as written in the issue.
    pub url: String,
    /// Recipients who clicked it at least once.
    pub unique_clicks: i64,
    /// Every click of it, a recipient's repeats included.
    pub total_clicks: i64,
}

/// One of the first seven days after the send: 24 hours counted from when each recipient's
/// message went out (day 1 is the first 24 hours).
#[derive(Debug, Object)]
pub struct DayStats {
    /// 1 to 7.
    pub day: i64,
    /// Recipients who opened for the first time in this day (a click counts as an open).
    pub opens: i64,
    /// Recipients who clicked a link for the first time in this day.
    pub unique_clicks: i64,
    /// Every click of a tracked link in this day.
    pub total_clicks: i64,
}

/// An issue's opens and clicks: totals, each clicked link, and the first seven days.
#[derive(Debug, Object)]
pub struct IssueStatsObject {
    pub issue_id: i64,
    pub subject: String,
    /// When the send finished; null while it is sending or before it was sent.
    #[oai(nullable)]
    pub sent_at: Option<String>,
    /// Messages the mail relay took: the base of the rates.
    pub delivered: i64,
    /// Delivered messages opened at least once.
    pub opens: i64,
    /// Delivered messages with at least one click.
    pub clicks: i64,
    /// Of `opens`, the messages whose opens were all automatic: Apple Mail Privacy
    /// Protection's prefetch (Apple's network) or a scanner opening within 10 seconds of
    /// delivery. A resend to those who did not open goes to these too.
    pub automatic_opens: i64,
    /// Percentage (0-100, one decimal) of delivered messages opened.
    pub open_rate: f64,
    /// Percentage (0-100, one decimal) of delivered messages clicked.
    pub click_rate: f64,
    /// The clicked links, most clicks first (at most 100).
    pub links: Vec<LinkStats>,
    /// How many different links were clicked (more than `links` holds when it is cut).
    pub links_clicked: i64,
    /// Days 1 to 7 after the send, every day present (zeros included). Opens and clicks after
    /// the seventh day count in the totals and the links only.
    pub days: Vec<DayStats>,
}

impl From<IssueReport> for IssueStatsObject {
    fn from(r: IssueReport) -> Self {
        IssueStatsObject {
            issue_id: r.issue_id,
            subject: r.subject,
            sent_at: r.sent_at.map(|at| at.to_string()),
            delivered: r.delivered,
            opens: r.opened,
            clicks: r.clicked,
            automatic_opens: r.automatic_opens,
            open_rate: r.open_rate,
            click_rate: r.click_rate,
            links: r
                .links
                .into_iter()
                .map(|l| LinkStats {
                    url: l.url,
                    unique_clicks: l.clickers,
                    total_clicks: l.clicks,
                })
                .collect(),
            links_clicked: r.links_clicked,
            days: r
                .days
                .into_iter()
                .map(|d| DayStats {
                    day: d.day,
                    opens: d.opened,
                    unique_clicks: d.clicked,
                    total_clicks: d.clicks,
                })
                .collect(),
        }
    }
}

/// `{"data": IssueStats}`.
#[derive(Debug, Object)]
#[oai(example)]
pub struct IssueStatsEnvelope {
    pub data: IssueStatsObject,
}

#[derive(ApiResponse)]
pub enum IssueStatsResponse {
    #[oai(status = 200)]
    Ok(Json<IssueStatsEnvelope>),
}

pub struct ReportsApi;

rate_limited_api! {
    "ApiTags::Issues",
impl ReportsApi {
    /// One issue's opens and clicks.
    ///
    /// The issue's delivered messages, opens and clicks with their rates, the clicks of each
    /// link (recipients who clicked it and all its clicks), and the first seven days after the
    /// send. Counted as each open and click is recorded, so it reads a few rows whatever the
    /// size of the send. An issue not sent yet answers zeros. Another newsletter's issue is 404.
    #[oai(path = "/issues/:id/stats", method = "get", operation_id = "getIssueStats")]
    async fn issue_stats(
        &self,
        _auth: ApiKeyAuth,
        id: Path<Field<Id>>,
        Data(p): Data<&Principal>,
        Data(state): Data<&State>,
    ) -> Result<IssueStatsResponse, Refusal<{ GUARD | BY_ID }>> {
        let (nid, id) = (p.newsletter_id, parse_id(&id.0)?);
        let report = state
            .db
            .run(move |conn| issue_report::for_issue(conn, nid, id))
            .await?;
        Ok(IssueStatsResponse::Ok(Json(IssueStatsEnvelope {
            data: report.into(),
        })))
    }
}
}
