//! The headers every answer carries (Content-Security-Policy, nosniff, Referrer-Policy, HSTS
//! behind an https base URL) on the dashboard, the account pages, a public site, error pages
//! and the API; `Allow` on a 405; the API reference running under its policy in Chromium.

use crate::support::browser::{Driver, runtime, wait_for_text};
use crate::support::*;

/// The value of one directive of a policy (`script-src 'self'` → `'self'`), if present.
fn directive<'a>(policy: &'a str, name: &str) -> Option<&'a str> {
    policy
        .split(';')
        .map(str::trim)
        .find_map(|d| d.strip_prefix(name)?.strip_prefix(' '))
}

/// Asserts the headers every answer has, and returns its Content-Security-Policy.
#[track_caller]
fn common_headers(what: &str, resp: &Resp) -> String {
    assert_eq!(
        resp.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        resp.header("referrer-policy"),
        Some("strict-origin-when-cross-origin"),
        "{what}"
    );
    assert_eq!(
        resp.header("strict-transport-security"),
        None,
        "{what}: no HSTS behind an http base URL"
    );
    resp.header("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"))
        .to_string()
}

/// An HTML page's policy: no inline or eval'd script anywhere, never framed.
#[track_caller]
fn page_policy(what: &str, resp: &Resp) -> String {
    assert!(
        resp.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "{what}"
    );
    let policy = common_headers(what, resp);
    assert_eq!(directive(&policy, "default-src"), Some("'none'"), "{what}");
    assert_eq!(
        directive(&policy, "frame-ancestors"),
        Some("'none'"),
        "{what}"
    );
    if let Some(scripts) = directive(&policy, "script-src") {
        assert!(!scripts.contains("unsafe-"), "{what}: {policy}");
    }
    policy
}

#[test]
fn every_answer_carries_the_security_headers() {
    let app = spawn_app();
    let owner = onboard(&app, "Headed Herald");
    let nid = owner.newsletter_id;

    // The dashboard: the service's own script and stylesheet only.
    let dashboard = owner.client.get(&format!("/newsletters/{nid}"));
    dashboard.expect(200);
    let policy = page_policy("dashboard", &dashboard);
    assert_eq!(directive(&policy, "script-src"), Some("'self'"));
    assert_eq!(directive(&policy, "style-src"), Some("'self'"));
    assert!(
        !dashboard.body.contains(" style=") && !dashboard.body.contains("<style"),
        "no inline styles for the policy to refuse"
    );
    // An account page, signed out.
    let sign_in = app.client().get("/session/new");
    sign_in.expect(200);
    assert_eq!(page_policy("sign-in page", &sign_in), policy);
    // Error pages: the dashboard's 404 and a 403 (form without its token).
    let missing = owner.client.get("/newsletters/999999");
    missing.expect(404);
    assert_eq!(page_policy("404 page", &missing), policy);
    let refused = app
        .client()
        .post_form("/signup", &[("user[email_address]", "x")]);
    refused.expect(403);
    assert_eq!(page_policy("403 page", &refused), policy);

    // The issue pages preview owner content: inline styles and images, still no script.
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Framed", "status": "approved",
            "content_markdown": "Hello ![x](https://example.com/x.png)"}}),
    );
    let iid = issue.json()["id"].as_i64().unwrap();
    let preview = owner
        .client
        .get(&format!("/newsletters/{nid}/issues/{iid}/preview"));
    preview.expect(200);
    let preview_policy = page_policy("issue preview", &preview);
    assert_eq!(directive(&preview_policy, "script-src"), Some("'self'"));
    assert!(directive(&preview_policy, "img-src").is_some_and(|i| i.contains('*')));

    // A public site: no script at all, styles from its own files only, https images.
    owner
        .post(&format!("/issues/{iid}/publish"), &json!({}))
        .expect(200);
    let site = app.site_client(&owner.subdomain);
    let home = site.get("/");
    home.expect(200);
    let site_policy = page_policy("site home", &home);
    assert_eq!(directive(&site_policy, "script-src"), None, "{site_policy}");
    assert_eq!(directive(&site_policy, "style-src"), Some("'self'"));
    assert!(!home.body.contains("<style") && !home.body.contains(" style="));
    assert_eq!(
        directive(&site_policy, "img-src"),
        Some("'self' https: data:")
    );
    let archive = site.get("/archive");
    assert_eq!(page_policy("site archive", &archive), site_policy);
    // The site's own 404, and the one for a subdomain nobody has.
    let gone = site.get("/p/no-such-issue");
    gone.expect(404);
    assert_eq!(page_policy("site 404", &gone), site_policy);
    let nobody = app.site_client("nobody-here").get("/");
    nobody.expect(404);
    assert_eq!(page_policy("unknown site", &nobody), site_policy);

    // Answers that are not HTML: nosniff, and a policy that lets nothing load or run.
    let not_html = "default-src 'none'; frame-ancestors 'none'";
    for (what, resp) in [
        ("API answer", owner.get("/newsletter")),
        (
            "API error",
            app.client().api("GET", "/newsletter", "bad", None),
        ),
        ("feed", site.get("/feed.xml")),
        ("script", app.client().get("/assets/dashboard.js")),
        (
            "CSV export",
            owner
                .client
                .get(&format!("/newsletters/{nid}/subscribers/export.csv")),
        ),
    ] {
        assert!(resp.status < 500, "{what}: {}", resp.status);
        assert_eq!(common_headers(what, &resp), not_html, "{what}");
    }

    // The API reference inlines Swagger UI: allowed by hash, not by 'unsafe-inline'.
    let reference = app.client().get("/api/v1/docs");
    reference.expect(200);
    let docs_policy = page_policy("API reference", &reference);
    let scripts = directive(&docs_policy, "script-src").unwrap();
    assert!(scripts.starts_with("'sha256-"), "{docs_policy}");
    assert!(
        !directive(&docs_policy, "style-src")
            .unwrap()
            .contains("unsafe-")
    );
}

#[test]
fn hsts_is_sent_when_the_base_url_is_https() {
    let app = spawn_app_with(&["--base-url", "https://news.example.test"]);
    for (what, resp) in [
        ("sign-in page", app.client().get("/session/new")),
        (
            "API error",
            app.client().api("GET", "/newsletter", "bad", None),
        ),
        ("health check", app.client().get("/up")),
    ] {
        assert_eq!(
            resp.header("strict-transport-security"),
            Some("max-age=31536000"),
            "{what}"
        );
        assert_eq!(resp.header("x-content-type-options"), Some("nosniff"));
    }
}

#[test]
fn a_405_names_the_methods_the_path_accepts() {
    let app = spawn_app();
    let owner = onboard(&app, "Allowed Almanac");
    for (method, path, allow) in [
        ("DELETE", "/newsletter", "GET, HEAD, PATCH"),
        ("PUT", "/issues", "GET, HEAD, POST"),
        ("GET", "/issues/1/send_now", "POST"),
        ("GET", "/subscribers/bulk_create", "POST"),
        ("PUT", "/subscribers/7", "GET, HEAD, PATCH, DELETE"),
    ] {
        let resp = owner.api(method, path, None);
        assert_eq!(
            resp.error_code(405),
            "method_not_allowed",
            "{method} {path}"
        );
        assert_eq!(resp.header("allow"), Some(allow), "{method} {path}");
    }
    // Pages: an account form, a dashboard page, and a public site's page.
    let nid = owner.newsletter_id;
    for (client, method, path, allow) in [
        (
            app.client(),
            "DELETE",
            "/signup".to_string(),
            "GET, HEAD, POST",
        ),
        (
            app.client(),
            "PUT",
            format!("/newsletters/{nid}/issues/1"),
            "GET, HEAD, POST, PATCH, DELETE",
        ),
        (app.client(), "POST", "/up".to_string(), "GET, HEAD"),
        (
            app.site_client(&owner.subdomain),
            "POST",
            "/archive".to_string(),
            "GET, HEAD",
        ),
    ] {
        let resp = client.request(method, &path, &[], None).unwrap();
        resp.expect(405);
        assert_eq!(resp.header("allow"), Some(allow), "{method} {path}");
        assert_eq!(resp.header("x-content-type-options"), Some("nosniff"));
    }
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn the_api_reference_runs_in_chromium_under_its_policy() {
    let Some(driver) = Driver::start("API reference") else {
        return;
    };
    let app = spawn_app();
    runtime().block_on(async {
        let c = driver.session().await;
        c.goto(&format!("{}/api/v1/docs", app.base_url))
            .await
            .unwrap();
        // Swagger UI lists the operations once its script has run.
        wait_for_text(&c, ".swagger-ui", "/subscribers/bulk_create").await;
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console errors: {errors:?}");
        c.close().await.unwrap();
    });
}
