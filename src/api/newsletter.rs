//! `GET /newsletter`: the newsletter the API key belongs to.

use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi, Tags};

use super::{ApiError, ApiKeyAuth, Principal};
use crate::app::AppState;
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::urls::SiteUrls;

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
    pub created_at: String,
    pub updated_at: String,
    pub urls: NewsletterUrls,
}

impl NewsletterObject {
    pub fn new(n: &Newsletter, counts: (i64, i64), urls: &SiteUrls) -> Self {
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
            created_at: n.created_at.clone(),
            updated_at: n.updated_at.clone(),
            urls: NewsletterUrls {
                home: links.home,
                subscribe: links.subscribe,
                archive: links.archive,
            },
        }
    }
}

/// `{"data": Newsletter}`.
#[derive(Debug, Object)]
pub struct NewsletterEnvelope {
    pub data: NewsletterObject,
}

#[derive(ApiResponse)]
pub enum NewsletterResponse {
    #[oai(status = 200)]
    Ok(Json<NewsletterEnvelope>),
}

pub struct NewsletterApi;

#[OpenApi(tag = "ApiTags::Newsletter")]
impl NewsletterApi {
    /// The newsletter this API key belongs to.
    #[oai(path = "/newsletter", method = "get", operation_id = "getNewsletter")]
    async fn get_newsletter(
        &self,
        _auth: ApiKeyAuth,
        Data(principal): Data<&Principal>,
        Data(state): Data<&std::sync::Arc<AppState>>,
    ) -> Result<NewsletterResponse, ApiError> {
        let id = principal.newsletter_id;
        let (n, counts) = state
            .db
            .run(move |conn| {
                Ok::<_, crate::domain::DomainError>((
                    newsletters::get(conn, id)?,
                    newsletters::counts(conn, id)?,
                ))
            })
            .await?;
        Ok(NewsletterResponse::Ok(Json(NewsletterEnvelope {
            data: NewsletterObject::new(&n, counts, &state.urls),
        })))
    }
}
