//! Where things live: the service origin and the newsletters' public hosts. Built once from
//! the configuration and handed to the rules that put links in mail and API answers.

/// The service origin (`--base-url`) and the public host (`--public-host`).
#[derive(Debug, Clone)]
pub struct SiteUrls {
    /// Without a trailing slash, e.g. `http://localhost:8080`.
    pub base_url: String,
    /// `http` or `https`, taken from the base URL.
    pub scheme: String,
    /// e.g. `localhost:8080`; sites answer at `<subdomain>.<public_host>`.
    pub public_host: String,
}

impl SiteUrls {
    pub fn new(base_url: &str, public_host: &str) -> Self {
        let base_url = base_url.trim_end_matches('/').to_string();
        let scheme = if base_url.starts_with("https://") {
            "https"
        } else {
            "http"
        }
        .to_string();
        SiteUrls {
            base_url,
            scheme,
            public_host: public_host.trim().trim_end_matches('/').to_lowercase(),
        }
    }

    /// An absolute URL on the service origin; `path` starts with `/`.
    pub fn service(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// The origin of a newsletter's public site on its subdomain.
    pub fn site_origin(&self, subdomain: &str) -> String {
        format!("{}://{}.{}", self.scheme, subdomain, self.public_host)
    }

    pub fn is_https(&self) -> bool {
        self.scheme == "https"
    }
}

#[cfg(test)]
mod tests {
    use super::SiteUrls;

    #[test]
    fn builds_service_and_site_urls() {
        let urls = SiteUrls::new("https://news.example.com/", "News.Example.com");
        assert_eq!(urls.service("/up"), "https://news.example.com/up");
        assert_eq!(
            urls.site_origin("weekly"),
            "https://weekly.news.example.com"
        );
        assert!(urls.is_https());
    }
}
