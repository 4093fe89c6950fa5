//! An HTTP client that behaves like a browser without JavaScript (a cookie jar, no automatic
//! redirects so each 303 can be checked) and like an API script (bearer key, JSON bodies).

use serde_json::Value;

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The redirect target's path (absolute URLs on the same origin are cut to their path).
    pub fn location(&self) -> String {
        let raw = self
            .header("location")
            .unwrap_or_else(|| panic!("no Location on {} {}", self.status, self.body));
        match raw.find("://") {
            Some(i) => {
                let rest = &raw[i + 3..];
                rest.find('/')
                    .map(|j| rest[j..].to_string())
                    .unwrap_or("/".into())
            }
            None => raw.to_string(),
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    /// The `authenticity_token` of the first form on the page.
    pub fn csrf_token(&self) -> String {
        attribute_after(&self.body, "name=\"authenticity_token\"", "value")
            .unwrap_or_else(|| panic!("no CSRF token on the page:\n{}", self.body))
    }

    /// Asserts the status, showing the body when it differs.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Self {
        assert_eq!(
            self.status, status,
            "expected {status}, got {}: {}",
            self.status, self.body
        );
        self
    }

    /// Asserts a 303 (or 302) and returns where it points.
    #[track_caller]
    pub fn redirect(&self) -> String {
        assert!(
            self.status == 303 || self.status == 302,
            "expected a redirect, got {}: {}",
            self.status,
            self.body
        );
        self.location()
    }

    /// Asserts the JSON error body of the contract and returns its code.
    #[track_caller]
    pub fn error_code(&self, status: u16) -> String {
        self.expect(status);
        let body = self.json();
        let error = &body["error"];
        assert!(
            error["message"].is_string(),
            "error without message: {body}"
        );
        assert!(
            error["details"].is_object(),
            "error without details: {body}"
        );
        error["code"]
            .as_str()
            .unwrap_or_else(|| panic!("error without code: {body}"))
            .to_string()
    }
}

/// The value of `attr` in the tag that contains `marker` (e.g. a hidden input's value).
pub fn attribute_after(html: &str, marker: &str, attr: &str) -> Option<String> {
    let at = html.find(marker)?;
    let tag_start = html[..at].rfind('<')?;
    let tag_end = at + html[at..].find('>')?;
    let tag = &html[tag_start..tag_end];
    let key = format!("{attr}=\"");
    let start = tag.find(&key)? + key.len();
    let end = start + tag[start..].find('"')?;
    Some(unescape(&tag[start..end]))
}

/// Undoes maud's HTML escaping.
pub fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A client with its own cookie jar.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    host: Option<String>,
}

impl Client {
    pub fn new(base: &str) -> Self {
        let config = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(60)))
            .build();
        Client {
            agent: config.into(),
            base: base.trim_end_matches('/').to_string(),
            host: None,
        }
    }

    /// Connects to `base` but sends `Host: host` (a newsletter's site).
    pub fn with_host(base: &str, host: &str) -> Self {
        let mut client = Self::new(base);
        client.host = Some(host.to_string());
        client
    }

    fn url(&self, path: &str) -> String {
        if path.starts_with("http://") || path.starts_with("https://") {
            path.to_string()
        } else {
            format!("{}{}", self.base, path)
        }
    }

    /// Sends a request; `body` is (content type, bytes).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<(&str, Vec<u8>)>,
    ) -> Result<Resp, ureq::Error> {
        let mut builder = ureq::http::Request::builder()
            .method(method)
            .uri(self.url(path));
        if let Some(host) = &self.host {
            builder = builder.header("Host", host.as_str());
        }
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let response = match body {
            Some((content_type, bytes)) => {
                let request = builder
                    .header("Content-Type", content_type)
                    .body(bytes)
                    .expect("a valid request");
                self.agent.run(request)?
            }
            None => self.agent.run(builder.body(()).expect("a valid request"))?,
        };
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let mut response = response;
        let body = response
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_vec()?;
        Ok(Resp {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    pub fn try_get(&self, path: &str) -> Result<Resp, ureq::Error> {
        self.request("GET", path, &[], None)
    }

    pub fn get(&self, path: &str) -> Resp {
        self.try_get(path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        self.request("GET", path, headers, None)
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// Posts a URL-encoded form as given (no CSRF token added).
    pub fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> Resp {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        self.request(
            "POST",
            path,
            &[],
            Some(("application/x-www-form-urlencoded", body.into_bytes())),
        )
        .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    /// Loads `form_page`, takes its CSRF token, and posts `fields` with it to `action`.
    pub fn submit(&self, form_page: &str, action: &str, fields: &[(&str, &str)]) -> Resp {
        let page = self.get(form_page);
        assert_eq!(page.status, 200, "GET {form_page}: {}", page.body);
        let token = page.csrf_token();
        let mut all: Vec<(&str, &str)> = vec![("authenticity_token", token.as_str())];
        all.extend_from_slice(fields);
        self.post_form(action, &all)
    }

    /// An API call with `Authorization: Bearer <key>` and an optional JSON body.
    pub fn api(&self, method: &str, path: &str, key: &str, body: Option<&Value>) -> Resp {
        let auth = format!("Bearer {key}");
        let body = body.map(|b| ("application/json", serde_json::to_vec(b).unwrap()));
        self.request(
            method,
            &format!("/api/v1{path}"),
            &[("Authorization", &auth)],
            body,
        )
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// An API call with a raw body, for malformed input.
    pub fn api_raw(
        &self,
        method: &str,
        path: &str,
        key: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Resp {
        let auth = format!("Bearer {key}");
        self.request(
            method,
            &format!("/api/v1{path}"),
            &[("Authorization", &auth)],
            Some((content_type, body)),
        )
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }
}
