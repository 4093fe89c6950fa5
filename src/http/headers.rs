//! The headers every answer carries, added in one place around the whole app (`app::serve`),
//! error answers included: `X-Content-Type-Options: nosniff` and `Referrer-Policy` on all of
//! them, `Strict-Transport-Security` when the service is reached over https, and a
//! `Content-Security-Policy` chosen by what answered. The policies are all here, so they can
//! be read side by side (docs/security.md, "Response headers").

use base64::Engine;
use poem::http::HeaderValue;
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};
use sha2::{Digest, Sha256};

/// Which Content-Security-Policy an HTML answer gets. The site router and the pages that
/// need another policy put one in the response (`Response::set_data`); an answer without
/// one (the dashboard, the account pages, every error page of the base host) gets
/// [`Policy::Dashboard`], the strictest of those that let the dashboard work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Dashboard and account pages: script and styles only from the service's own files
    /// (`/assets/dashboard.js`, `/assets/app.css`), never framed.
    Dashboard,
    /// A newsletter's public site: no script at all, its own stylesheets only, and images
    /// from any https address, since published issues (and logos) show remote images.
    /// Never framed: its forms (subscribe, confirm, unsubscribe) are one click each.
    Site,
    /// A site's page of a signup form: the site's policy with the site's own script
    /// (`/forms.js`, which fetches the form's proof-of-work from the site).
    SiteScripted,
    /// A site's account page: the site's policy, its forms allowed on to the payment
    /// provider's hosted pages (Stripe Checkout, the Billing Portal), since `form-action`
    /// also governs where a form's answer redirects. Made once at start-up
    /// ([`Policy::site_account`]).
    SiteAccount(&'static HeaderValue),
    /// Dashboard pages that preview owner-written content in sandboxed `srcdoc` frames.
    /// Those frames inherit this policy, so it allows what the e-mail and the public page
    /// need (inline styles, images from anywhere) and still no script but the dashboard's.
    Preview,
    /// The API reference (Swagger UI), whose page inlines its script and stylesheet:
    /// allowed by their hashes, nothing else inline. The API makes the value once from its
    /// page ([`Policy::api_docs`]), so this module needs nothing from the API.
    ApiDocs(&'static HeaderValue),
}

/// Answers that are not HTML (JSON, CSV, the feed, scripts): nothing in them may load or
/// run anything, should a browser ever render one as a document.
const NOT_HTML: &str = "default-src 'none'; frame-ancestors 'none'";

const DASHBOARD: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";

/// No `base-uri`: the previews set `<base href>` to the newsletter's site.
const PREVIEW: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src * data:; connect-src 'self'; frame-src 'self'; form-action 'self'; \
     frame-ancestors 'none'";

/// Styles only from the site's own files (`/assets/site-<hash>.css` and the accent's sheet).
/// `connect-src 'self'`: the pages run no script, but auditors (Lighthouse) read the site's
/// `/robots.txt` from within the page.
const SITE: &str = "default-src 'none'; style-src 'self'; img-src 'self' https: data:; \
     connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// [`SITE`] with the site's own script.
const SITE_SCRIPTED: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' https: data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";

/// `Referrer-Policy`: other sites learn the origin a visitor came from, never the path
/// (which may hold a token: a confirmation or an unsubscribe link).
const REFERRER_POLICY: &str = "strict-origin-when-cross-origin";

/// One year; no `includeSubDomains`, so other names under the operator's domain are left
/// alone (every site host sends its own header).
const HSTS: &str = "max-age=31536000";

fn header(value: &str) -> HeaderValue {
    HeaderValue::from_str(value).expect("a policy is plain ASCII")
}

impl Policy {
    fn value(self) -> HeaderValue {
        match self {
            Policy::Dashboard => HeaderValue::from_static(DASHBOARD),
            Policy::Preview => HeaderValue::from_static(PREVIEW),
            Policy::Site => HeaderValue::from_static(SITE),
            Policy::SiteScripted => HeaderValue::from_static(SITE_SCRIPTED),
            Policy::ApiDocs(value) | Policy::SiteAccount(value) => value.clone(),
        }
    }

    /// The value of [`Policy::SiteAccount`]: [`SITE`] with `payment_pages` (origins) added
    /// to its `form-action`.
    pub fn site_account(payment_pages: &[String]) -> HeaderValue {
        let allowed = std::iter::once("'self'")
            .chain(payment_pages.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        header(&SITE.replace("form-action 'self'", &format!("form-action {allowed}")))
    }

    /// The value of [`Policy::ApiDocs`] for the reference `page`: its inline scripts and
    /// styles allowed by their hashes. The caller keeps it (the page never changes while the
    /// server runs: the OpenAPI document is built into the binary).
    pub fn api_docs(page: &str) -> HeaderValue {
        let hashes = |tag| {
            inline_blocks(page, tag)
                .into_iter()
                .map(source_hash)
                .collect::<Vec<_>>()
                .join(" ")
        };
        header(&format!(
            "default-src 'none'; script-src {}; style-src {}; img-src 'self' data:; \
             connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
            hashes("script"),
            hashes("style"),
        ))
    }
}

/// A CSP hash source (`'sha256-…'`) for an inline `<script>` or `<style>` whose text is
/// exactly `text`.
pub fn source_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The texts of the inline `<tag>` elements of `html` (those without a `src`).
fn inline_blocks<'a>(html: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
    let mut blocks = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start..];
        let (Some(head_end), Some(end)) = (after.find('>'), after.find(&close)) else {
            break;
        };
        if !after[..head_end].contains("src=") {
            blocks.push(&after[head_end + 1..end]);
        }
        rest = &after[end + close.len()..];
    }
    blocks
}

/// Adds the headers to every answer of the endpoint it wraps; errors become their answers
/// first, so error pages get them too.
pub struct SecurityHeaders {
    /// `--base-url` is https: browsers are told to keep to https.
    pub https: bool,
}

impl<E: Endpoint> Middleware<E> for SecurityHeaders {
    type Output = SecurityHeadersEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        SecurityHeadersEndpoint {
            inner,
            https: self.https,
        }
    }
}

pub struct SecurityHeadersEndpoint<E> {
    inner: E,
    https: bool,
}

impl<E: Endpoint> Endpoint for SecurityHeadersEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        let mut response = match self.inner.call(req).await {
            Ok(answer) => answer.into_response(),
            Err(e) => e.into_response(),
        };
        let html = response
            .content_type()
            .is_some_and(|t| t.starts_with("text/html"));
        let policy = match html {
            true => response
                .data::<Policy>()
                .copied()
                .unwrap_or(Policy::Dashboard)
                .value(),
            false => HeaderValue::from_static(NOT_HTML),
        };
        let headers = response.headers_mut();
        headers.insert("Content-Security-Policy", policy);
        headers.insert(
            "X-Content-Type-Options",
            HeaderValue::from_static("nosniff"),
        );
        headers.insert("Referrer-Policy", HeaderValue::from_static(REFERRER_POLICY));
        if self.https {
            headers.insert("Strict-Transport-Security", HeaderValue::from_static(HSTS));
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_account_policy_is_the_sites_with_the_payment_pages_as_form_targets() {
        let origins = ["https://checkout.stripe.com".to_string()];
        let policy = Policy::site_account(&origins);
        assert_eq!(
            policy.to_str().unwrap(),
            SITE.replace(
                "form-action 'self'",
                "form-action 'self' https://checkout.stripe.com"
            )
        );
    }

    #[test]
    fn hashes_are_the_browsers_sha256_sources() {
        // The example of CSP Level 3, section 8.3: `alert('Hello, world.');`.
        assert_eq!(
            source_hash("alert('Hello, world.');"),
            "'sha256-qznLcsROx4GACP2dm0UCKCzCG+HiZ1guq6ZZDob/Tng='"
        );
    }

    #[test]
    fn inline_blocks_skip_external_scripts() {
        let html = "<head><style>a{}</style><script src=\"/x.js\"></script>\
                    <script charset=\"UTF-8\">go()</script></head>";
        assert_eq!(inline_blocks(html, "script"), vec!["go()"]);
        assert_eq!(inline_blocks(html, "style"), vec!["a{}"]);
    }
}
