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

    /// The origin of a newsletter's site on its subdomain. Links should come from
    /// `Newsletter::site_origin`, which prefers an active custom domain.
    pub fn subdomain_origin(&self, subdomain: &str) -> String {
        format!("{}://{}.{}", self.scheme, subdomain, self.public_host)
    }

    /// The origin of a site on a custom domain: the scheme of the base URL, and the port of
    /// the public host when it has one (a development setup without a proxy in front).
    pub fn custom_domain_origin(&self, domain: &str) -> String {
        match self.public_host_port() {
            Some(port) => format!("{}://{domain}:{port}", self.scheme),
            None => format!("{}://{domain}", self.scheme),
        }
    }

    /// The public host without its port, as DNS names it (`localhost`, `news.example.com`).
    pub fn public_host_name(&self) -> &str {
        split_port(&self.public_host).0
    }

    fn public_host_port(&self) -> Option<&str> {
        split_port(&self.public_host).1
    }

    /// The base URL's host without its port, to tell the service's own requests apart.
    pub fn base_host_name(&self) -> String {
        url::Url::parse(&self.base_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_lowercase))
            .unwrap_or_default()
    }

    pub fn is_https(&self) -> bool {
        self.scheme == "https"
    }
}

/// The host of an origin (`http://n.example.com:8080` → `n.example.com`), `localhost` when
/// it has none.
pub fn host_of(origin: &str) -> String {
    url::Url::parse(origin)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| "localhost".into())
}

/// Which newsletter a Host names: `<subdomain>.<public-host>`. `None` for the public host
/// itself and anything else.
pub fn subdomain_of<'a>(host: &'a str, public_host: &str) -> Option<&'a str> {
    let host = host.trim_end_matches('.');
    let prefix = host.strip_suffix(public_host)?.strip_suffix('.')?;
    (!prefix.is_empty() && !prefix.contains('.')).then_some(prefix)
}

/// `host:port` into the host and the port (IPv6 literals in brackets keep their colons).
pub fn split_port(host: &str) -> (&str, Option<&str>) {
    if let Some(i) = host.rfind(':') {
        let (name, port) = (&host[..i], &host[i + 1..]);
        let one_colon = name.ends_with(']') || !name.contains(':');
        if one_colon && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
            return (name, Some(port));
        }
    }
    (host, None)
}

#[cfg(test)]
mod tests {
    use super::{SiteUrls, split_port, subdomain_of};

    #[test]
    fn builds_service_and_site_urls() {
        let urls = SiteUrls::new("https://news.example.com/", "News.Example.com");
        assert_eq!(urls.service("/up"), "https://news.example.com/up");
        assert_eq!(
            urls.subdomain_origin("weekly"),
            "https://weekly.news.example.com"
        );
        assert_eq!(
            urls.custom_domain_origin("www.example.org"),
            "https://www.example.org"
        );
        assert_eq!(urls.public_host_name(), "news.example.com");
        assert_eq!(urls.base_host_name(), "news.example.com");
        assert!(urls.is_https());
    }

    #[test]
    fn custom_domains_keep_the_public_hosts_port() {
        let urls = SiteUrls::new("http://127.0.0.1:8080", "localhost:8080");
        assert_eq!(
            urls.custom_domain_origin("www.example.org"),
            "http://www.example.org:8080"
        );
        assert_eq!(urls.public_host_name(), "localhost");
        assert_eq!(urls.base_host_name(), "127.0.0.1");
    }

    #[test]
    fn splits_ports() {
        assert_eq!(
            split_port("example.com:8080"),
            ("example.com", Some("8080"))
        );
        assert_eq!(split_port("example.com"), ("example.com", None));
        assert_eq!(split_port("[::1]:8080"), ("[::1]", Some("8080")));
        assert_eq!(split_port("[::1]"), ("[::1]", None));
        assert_eq!(split_port("example.com:"), ("example.com:", None));
    }

    #[test]
    fn finds_the_subdomain_of_a_host() {
        assert_eq!(
            subdomain_of("weekly.localhost:8080", "localhost:8080"),
            Some("weekly")
        );
        assert_eq!(
            subdomain_of("weekly.news.example.com", "news.example.com"),
            Some("weekly")
        );
        assert_eq!(subdomain_of("news.example.com", "news.example.com"), None);
        assert_eq!(
            subdomain_of("a.b.news.example.com", "news.example.com"),
            None
        );
        assert_eq!(
            subdomain_of("evilnews.example.com", "news.example.com"),
            None
        );
        assert_eq!(subdomain_of("localhost:8080", "localhost:8080"), None);
    }
}
