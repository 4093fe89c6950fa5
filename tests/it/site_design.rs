//! The public site's design over HTTP: the frame of every page (header,
//! footer, the versioned stylesheet cached for a year), descriptions and Open Graph tags from
//! the rendered text, the feed's entries with the page's articles, each newsletter's accent
//! colour and logo (API and dashboard), and compressed text answers.

use crate::support::*;

fn publish(owner: &Owner, subject: &str, markdown: &str) -> String {
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "content_markdown": markdown, "status": "approved",
            "articles": [{"title": "Card title", "url": "https://example.com/card", "summarized_article": "Card summary."}]}}),
    );
    issue.expect(201);
    let id = issue.json()["id"].as_i64().unwrap();
    let published = owner.post(&format!("/issues/{id}/publish"), &json!({}));
    published.expect(200);
    let url = published.json()["web_url"].as_str().unwrap().to_string();
    format!("/{}", url.splitn(4, '/').nth(3).unwrap())
}

/// The value of the `content` attribute of the first `<meta>` whose `key` is `name`.
fn meta(body: &str, key: &str, name: &str) -> String {
    let at = body
        .find(&format!("{key}=\"{name}\" content=\""))
        .unwrap_or_else(|| panic!("no meta {name}:\n{body}"));
    let rest = &body[at + key.len() + name.len() + 13..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// The path of the first stylesheet link whose address starts with `prefix`.
fn stylesheet(body: &str, prefix: &str) -> String {
    let at = body
        .find(&format!("href=\"{prefix}"))
        .unwrap_or_else(|| panic!("no stylesheet {prefix}:\n{body}"));
    let rest = &body[at + 6..];
    rest[..rest.find('"').unwrap()].to_string()
}

#[test]
fn site_pages_share_a_frame_a_cached_stylesheet_and_descriptions_from_the_text() {
    let app = spawn_app();
    let owner = onboard(&app, "Framed Gazette");
    let site = app.site_client(&owner.subdomain);
    let path = publish(
        &owner,
        "Big news",
        "## The *headline*\n\nHello **readers** & [friends](https://friends.example). \
         ![a chart](https://img.example/chart.png)",
    );

    for page in ["/", "/archive", "/subscribe", path.as_str()] {
        let resp = site.get(page);
        resp.expect(200);
        for text in [
            "<header class=\"site\">",
            "<footer class=\"site\">",
            "href=\"/subscribe\"",
            "href=\"/archive\"",
            "href=\"/feed.xml\"",
            "name=\"description\"",
            "property=\"og:description\"",
        ] {
            assert!(resp.body.contains(text), "{text} on {page}:\n{}", resp.body);
        }
        assert!(!resp.body.contains("<style"), "no inline styles on {page}");
        let policy = resp.header("content-security-policy").unwrap();
        assert!(policy.contains("style-src 'self';"), "{policy}");
    }

    // The issue's description is its text as a reader sees it, not its Markdown.
    let issue = site.get(&path);
    let description = meta(&issue.body, "name", "description");
    assert_eq!(description, "The headline Hello readers &amp; friends.");
    assert_eq!(meta(&issue.body, "property", "og:description"), description);
    assert!(
        issue.body.contains("<div class=\"card\">"),
        "articles as cards"
    );

    // A long issue: a bounded description, cut at a word.
    let long = publish(&owner, "Long one", &"Plenty of words here. ".repeat(400));
    let description = meta(&site.get(&long).body, "name", "description");
    assert!(description.ends_with('…'), "{description}");
    assert!(description.chars().count() <= 160, "{description}");

    // The stylesheet: versioned, immutable, light and dark; other names are 404.
    let css_path = stylesheet(&issue.body, "/assets/site-");
    let css = site.get(&css_path);
    css.expect(200);
    assert!(css.header("content-type").unwrap().starts_with("text/css"));
    assert_eq!(
        css.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    assert!(css.body.contains("prefers-color-scheme: dark"));
    assert!(css.body.contains("max-width: 100%; height: auto"));
    site.get("/assets/site-000000000000.css").expect(404);
    site.get("/assets/theme-red.css").expect(404);
    site.get("/assets/theme-FFFFFF.css").expect(404);

    // Crawlers get a robots.txt, not the 404 page.
    let robots = site.get("/robots.txt");
    robots.expect(200);
    assert!(robots.body.starts_with("User-agent: *"), "{}", robots.body);

    // The dashboard's stylesheet is versioned too, and its pages have a description.
    let signup = app.client().get("/signup");
    assert!(signup.body.contains("name=\"description\""));
    let app_css = app.client().get(&stylesheet(&signup.body, "/assets/app-"));
    app_css.expect(200);
    assert_eq!(
        app_css.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );

    // The feed carries the articles the page shows.
    let feed = site.get("/feed.xml");
    let doc = roxmltree::Document::parse(&feed.body).expect("the feed is XML");
    let content = doc
        .descendants()
        .find(|n| n.tag_name().name() == "content")
        .and_then(|n| n.text())
        .unwrap()
        .to_string();
    assert!(content.contains("Card title"), "{content}");
    assert!(
        content.contains("href=\"https://example.com/card\""),
        "{content}"
    );
    assert!(content.contains("Card summary."), "{content}");
}

#[test]
fn accent_colour_and_logo_through_the_api_and_the_settings_page() {
    let app = spawn_app();
    let owner = onboard(&app, "Accented Post");
    let site = app.site_client(&owner.subdomain);
    let me = owner.get("/newsletter").json();
    assert_eq!(me["data"]["accent_color"], Value::Null);
    assert_eq!(me["data"]["logo_url"], Value::Null);
    assert!(!site.get("/").body.contains("/assets/theme-"));

    let logo = "https://cdn.example.com/logo.png";
    let patched = owner.patch(
        "/newsletter",
        &json!({"accent_color": "#FFE14D", "logo_url": logo}),
    );
    patched.expect(200);
    assert_eq!(patched.json()["data"]["accent_color"], "#ffe14d");
    assert_eq!(patched.json()["data"]["logo_url"], logo);

    let home = site.get("/");
    assert!(
        home.body
            .contains(&format!("<img class=\"logo\" src=\"{logo}\""))
    );
    assert_eq!(meta(&home.body, "property", "og:image"), logo);
    let theme = site.get(&stylesheet(&home.body, "/assets/theme-"));
    theme.expect(200);
    assert_eq!(
        theme.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    // A light yellow: black text on buttons, and links keep the default colour on the light
    // page (too pale there) but take the accent on the dark one.
    assert!(
        theme.body.contains("--accent:#ffe14d;--on-accent:#000000"),
        "{}",
        theme.body
    );
    assert!(
        !theme.body.contains("light){:root{--link"),
        "{}",
        theme.body
    );
    assert!(
        theme.body.contains("dark){:root{--link:#ffe14d"),
        "{}",
        theme.body
    );

    // Bad values: 422 naming the field, nothing changed.
    for (body, field) in [
        (json!({"accent_color": "yellow"}), "accent_color"),
        (json!({"accent_color": "#fff"}), "accent_color"),
        (
            json!({"logo_url": "http://cdn.example.com/logo.png"}),
            "logo_url",
        ),
        (json!({"logo_url": "javascript:alert(1)"}), "logo_url"),
        (
            json!({"logo_url": format!("https://example.com/{}", "a".repeat(600))}),
            "logo_url",
        ),
    ] {
        let resp = owner.patch("/newsletter", &body);
        resp.expect(422);
        assert!(
            resp.json()["error"]["details"][field].is_array(),
            "{body}: {}",
            resp.body
        );
    }
    assert_eq!(
        owner.get("/newsletter").json()["data"]["accent_color"],
        "#ffe14d"
    );

    // The dashboard's form: a bad colour shows the page again with the message.
    let url = format!("/newsletters/{}/settings", owner.newsletter_id);
    let resp = owner.client.submit(
        &url,
        &format!("{url}/theme"),
        &[("theme[accent_color]", "blue"), ("theme[logo_url]", "")],
    );
    resp.expect(422);
    assert!(resp.body.contains("#rrggbb"), "{}", resp.body);
    assert!(resp.body.contains("value=\"blue\""), "keeps what was typed");
    let resp = owner.client.submit(
        &url,
        &format!("{url}/theme"),
        &[("theme[accent_color]", "#14532d"), ("theme[logo_url]", "")],
    );
    assert_eq!(resp.redirect(), format!("{url}#theme"));
    let me = owner.get("/newsletter").json();
    assert_eq!(me["data"]["accent_color"], "#14532d");
    assert_eq!(
        me["data"]["logo_url"],
        Value::Null,
        "empty removes the logo"
    );
    let home = site.get("/");
    assert!(home.body.contains("/assets/theme-14532d.css"));
    assert!(!home.body.contains("class=\"logo\""));
    let theme = site.get("/assets/theme-14532d.css");
    assert!(theme.body.contains("--on-accent:#ffffff"), "{}", theme.body);
    assert!(
        theme.body.contains("light){:root{--link:#14532d"),
        "{}",
        theme.body
    );
    let settings = owner.client.get(&url);
    assert!(settings.body.contains("value=\"#14532d\""));
}

/// The head of the answer to `GET path` on `host` with `Accept-Encoding: accept`, and
/// whether the body reads as text, over a raw connection: the test client decodes gzip by
/// itself and drops the header.
fn raw_get(app: &App, host: &str, path: &str, accept: &str) -> (String, bool) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", app.port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: {accept}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&answer[..split]).to_lowercase();
    let body = String::from_utf8_lossy(&answer[split..]).to_string();
    (head, body.contains("Squeezed") || body.contains("font"))
}

#[test]
fn text_answers_are_compressed_when_the_client_accepts_it() {
    let app = spawn_app();
    let owner = onboard(&app, "Squeezed Daily");
    let site = app.site_client(&owner.subdomain);
    let css_path = stylesheet(&site.get("/").body, "/assets/site-");
    let host = format!("{}.{}", owner.subdomain, app.public_host);

    for path in ["/", "/archive", "/feed.xml", css_path.as_str()] {
        let (head, text) = raw_get(&app, &host, path, "identity");
        assert!(head.starts_with("http/1.1 200"), "{path}: {head}");
        assert!(!head.contains("content-encoding"), "{path}: {head}");
        assert!(head.contains("vary: accept-encoding"), "{path}: {head}");
        assert!(text, "{path} as sent");

        let (head, text) = raw_get(&app, &host, path, "gzip, deflate, br");
        assert!(head.contains("content-encoding: br"), "{path}: {head}");
        assert!(!text, "{path} is compressed");
        let (head, text) = raw_get(&app, &host, path, "gzip;q=1, br;q=0");
        assert!(head.contains("content-encoding: gzip"), "{path}: {head}");
        assert!(!text, "{path} is compressed");
    }
    // The test client takes gzip and reads the page as usual.
    assert!(site.get("/").body.contains("Squeezed Daily"));
    // The service's own pages and stylesheet too.
    let base_host = app.base_url.trim_start_matches("http://").to_string();
    let (head, _) = raw_get(&app, &base_host, "/signup", "br");
    assert!(head.contains("content-encoding: br"), "{head}");
    let (head, _) = raw_get(&app, &base_host, "/assets/app.css", "gzip");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    // Not text: left alone.
    let (head, _) = raw_get(&app, &host, "/favicon.ico", "br");
    assert!(!head.contains("content-encoding"), "{head}");
}

/// Screenshots of home, an issue and the archive, light and dark, at desktop width and at
/// 390 px (test artifacts), with the stylesheets applied under the site's policy and no
/// console errors.
#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver)"
)]
fn site_screenshots_light_and_dark_at_desktop_and_phone_width() {
    use crate::support::browser::{Driver, assert_fits, runtime, screenshot};

    let Some(driver) = Driver::start("site screenshots") else {
        return;
    };
    let app = spawn_app();
    let owner = onboard(&app, "Evening Ledger");
    owner
        .patch("/newsletter", &json!({"accent_color": "#b45309"}))
        .expect(200);
    let issue = publish(
        &owner,
        "What we learned this week",
        "## Three things\n\nA long paragraph that wraps on a phone and reads comfortably on a \
         desktop, with **bold** words and [a link](https://example.com/).\n\n\
         > A quotation stands apart.\n\n- one\n- two\n- three",
    );
    publish(&owner, "The second issue", "Short and sweet.");
    let origin = format!("http://{}.{}", owner.subdomain, app.public_host);
    runtime().block_on(async {
        let c = driver.session().await;
        for (scheme, background) in [("light", "rgb(251, 250, 247)"), ("dark", "rgb(18, 20, 25)")] {
            let media = json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]});
            driver.cdp(&c, "Emulation.setEmulatedMedia", media).await;
            for (width, height, mobile) in [(1280, 900, false), (390, 844, true)] {
                let metrics = json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile});
                driver.cdp(&c, "Emulation.setDeviceMetricsOverride", metrics).await;
                for (name, path) in [("home", "/"), ("issue", issue.as_str()), ("archive", "/archive")] {
                    c.goto(&format!("{origin}{path}")).await.unwrap();
                    let seen = c
                        .execute("return getComputedStyle(document.body).backgroundColor", vec![])
                        .await
                        .unwrap();
                    assert_eq!(seen, json!(background), "{name} {scheme} {width}");
                    assert_fits(&c, width, &format!("{name} ({scheme})")).await;
                    screenshot(&c, &format!("site-{name}-{scheme}-{width}")).await;
                }
            }
        }
        c.goto(&format!("{origin}/")).await.unwrap();
        let button = c
            .execute(
                "return getComputedStyle(document.querySelector('form.subscribe button')).backgroundColor",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(button, json!("rgb(180, 83, 9)"), "the accent fills the button");
        let errors = driver.console_errors(&c).await;
        assert!(errors.is_empty(), "console: {errors:?}");
        c.close().await.unwrap();
    });
}
