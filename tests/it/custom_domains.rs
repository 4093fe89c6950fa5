//! Custom domains against a DNS server the test runs and changes as it goes:
//! pending with missing or wrong records and the reason shown, then active; the JSON poll;
//! the site, its links, the API's URLs and mail on the custom Host; `/tls/allowed`; removal;
//! refused input, other users' ids and posts without the CSRF token.

use std::net::IpAddr;

use crate::support::dns::{DnsServer, Rec};
use crate::support::*;

fn spawn_with_dns() -> (App, DnsServer) {
    let dns = DnsServer::start();
    let app = spawn_app_with(&["--dns-server", &dns.address()]);
    (app, dns)
}

fn domains_page(owner: &Owner) -> String {
    format!("/newsletters/{}/custom_domains", owner.newsletter_id)
}

/// Submits the choose-method form with `domain` and `method` (none when empty).
fn submit_domain(owner: &Owner, domain: &str, method: &str) -> Resp {
    let base = domains_page(owner);
    let mut fields = vec![("custom_domain[domain]", domain)];
    if !method.is_empty() {
        fields.push(("custom_domain[method]", method));
    }
    owner
        .client
        .submit(&format!("{base}/choose_method"), &base, &fields)
}

/// Adds `domain` through the choose-method form; returns the domain page's path.
fn add_domain(owner: &Owner, domain: &str, method: &str) -> String {
    let page = submit_domain(owner, domain, method).redirect();
    assert!(
        page.starts_with(&format!("{}/", domains_page(owner))),
        "{page}"
    );
    page
}

fn poll(client: &Client, page: &str) -> Value {
    let resp = client.get_with(page, &[("Accept", "application/json")]);
    resp.expect(200);
    assert!(
        resp.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    resp.json()
}

/// Presses "Verify" on the domain page and returns the poll answer after it.
fn verify(owner: &Owner, page: &str) -> Value {
    let resp = owner.client.submit(page, &format!("{page}/verify"), &[]);
    assert_eq!(resp.redirect(), page);
    poll(&owner.client, page)
}

fn token_of(domain: &Value) -> String {
    domain["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == "TXT")
        .expect("a TXT record")["value"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_subdomain_goes_from_pending_to_active_and_serves_the_site() {
    let (app, dns) = spawn_with_dns();
    let owner = onboard_paid(&app, "Domain Weekly");
    // The reader's second message must be the issue (the welcome mail has its tests in
    // welcome.rs).
    owner
        .patch("/newsletter", &json!({"welcome_enabled": false}))
        .expect(200);
    let target = format!("{}.localhost", owner.subdomain);
    let custom_host = format!("www.example.com:{}", app.port);
    let custom_origin = format!("http://{custom_host}");
    let custom = Client::with_host(&app.base_url, &custom_host);
    let tls = |domain: &str| {
        app.client()
            .get(&format!("/tls/allowed?domain={domain}"))
            .status
    };

    // Nothing yet: the page offers to add one; the Host is not served.
    let index = owner.client.get(&domains_page(&owner));
    index.expect(200);
    assert!(index.body.contains("No custom domain yet"));
    assert!(index.body.contains("/custom_domains/choose_method"));
    assert!(index.body.contains("aria-current=\"page\">Custom domains"));
    let choose = owner
        .client
        .get(&format!("{}/choose_method", domains_page(&owner)));
    choose.expect(200);
    for text in [
        "value=\"subdomain\"",
        "value=\"apex\"",
        "custom_domain[domain]",
    ] {
        assert!(choose.body.contains(text), "{text} on choose_method");
    }
    custom.get("/").expect(404);

    // Added: pending, with the CNAME and TXT records to add.
    let page = add_domain(&owner, " WWW.Example.com ", "subdomain");
    let html = owner.client.get(&page);
    html.expect(200);
    assert!(html.body.contains("www.example.com is added"), "notice");
    assert!(html.body.contains("pending"));
    assert!(html.body.contains(&format!("{target}.")));
    assert!(html.body.contains("_broadsheet-verify.www.example.com"));
    assert!(html.body.contains("Not checked yet"));
    let first = poll(&owner.client, &page);
    assert_eq!(first["domain"], "www.example.com");
    assert_eq!(first["method"], "subdomain");
    assert_eq!(first["status"], "pending");
    assert_eq!(first["reason"], Value::Null);
    assert_eq!(first["verified_at"], Value::Null);
    let records = first["records"].as_array().unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["type"], "CNAME");
    assert_eq!(records[0]["name"], "www.example.com");
    assert_eq!(records[0]["value"], format!("{target}."));
    assert_eq!(records[1]["type"], "TXT");
    assert_eq!(records[1]["name"], "_broadsheet-verify.www.example.com");
    let token = token_of(&first);
    assert!(token.len() > 20, "{token}");
    assert!(
        owner
            .client
            .get(&domains_page(&owner))
            .body
            .contains("www.example.com")
    );
    custom.get("/").expect(404);
    assert_eq!(tls("www.example.com"), 404, "pending: no certificate");

    // No records at all: stays pending, and says why (on the page and in the JSON).
    let asked = dns.queries();
    let checked = verify(&owner, &page);
    assert!(dns.queries() > asked, "the lookups go to --dns-server");
    assert_eq!(checked["status"], "pending");
    let reason = checked["reason"].as_str().unwrap();
    assert!(
        reason.contains("CNAME record www.example.com not found"),
        "{reason}"
    );
    assert!(
        reason.contains("TXT record _broadsheet-verify.www.example.com not found"),
        "{reason}"
    );
    assert!(checked["checked_at"].as_str().is_some());
    let shown = owner.client.get(&page);
    assert!(shown.body.contains("Not verified yet"));
    assert!(
        shown
            .body
            .contains("TXT record _broadsheet-verify.www.example.com not found")
    );

    // A wrong CNAME and a wrong TXT.
    dns.set(
        "www.example.com",
        &[Rec::Cname("elsewhere.example.net".into())],
    );
    dns.set(
        "_broadsheet-verify.www.example.com",
        &[Rec::Txt("someone-else".into())],
    );
    let checked = verify(&owner, &page);
    assert_eq!(checked["status"], "pending");
    let reason = checked["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "CNAME www.example.com points to elsewhere.example.net, expected {target}"
        )),
        "{reason}"
    );
    assert!(reason.contains("holds \"someone-else\""), "{reason}");

    // The CNAME right, the TXT missing.
    dns.set("www.example.com", &[Rec::Cname(target.clone())]);
    dns.set("_broadsheet-verify.www.example.com", &[]);
    let checked = verify(&owner, &page);
    assert_eq!(checked["status"], "pending");
    let reason = checked["reason"].as_str().unwrap();
    assert!(!reason.contains("CNAME"), "{reason}");
    assert!(reason.contains("TXT record _broadsheet-verify.www.example.com not found"));
    custom.get("/").expect(404);

    // Both right: active.
    dns.set(
        "_broadsheet-verify.www.example.com",
        &[Rec::Txt("v=spf1 -all".into()), Rec::Txt(token.clone())],
    );
    let active = verify(&owner, &page);
    assert_eq!(active["status"], "active", "{active}");
    assert_eq!(active["reason"], Value::Null);
    assert!(
        active["verified_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(active["url"], format!("{custom_origin}/"));
    let shown = owner.client.get(&page);
    assert!(shown.body.contains(&format!(
        "Your site answers at <a href=\"{custom_origin}/\""
    )));
    assert!(
        !shown.body.contains("Verify DNS records"),
        "nothing left to verify"
    );

    // The site answers on the custom Host exactly as on the subdomain, and its links use it.
    let home = custom.get("/");
    home.expect(200);
    assert!(home.body.contains("<h1>Domain Weekly</h1>"));
    assert!(
        home.body
            .contains(&format!("rel=\"canonical\" href=\"{custom_origin}/\"")),
        "{}",
        home.body
    );
    let on_subdomain = app.site_client(&owner.subdomain).get("/");
    on_subdomain.expect(200);
    assert!(
        on_subdomain
            .body
            .contains(&format!("rel=\"canonical\" href=\"{custom_origin}/\"")),
        "the subdomain points search engines at the custom domain"
    );
    let issue = owner.post(
        "/issues",
        &json!({"issue": {"subject": "On our own domain", "content_markdown": "Hello.", "status": "approved"}}),
    );
    issue.expect(201);
    let issue_id = issue.json()["id"].as_i64().unwrap();
    let published = owner.post(&format!("/issues/{issue_id}/publish"), &json!({}));
    published.expect(200);
    let web_url = published.json()["web_url"].as_str().unwrap().to_string();
    assert!(
        web_url.starts_with(&format!("{custom_origin}/p/")),
        "{web_url}"
    );
    assert_eq!(
        owner.get(&format!("/issues/{issue_id}")).json()["web_url"],
        web_url.as_str()
    );
    let issue_page = custom.get(&path_of(&web_url));
    issue_page.expect(200);
    assert!(issue_page.body.contains(&format!("href=\"{web_url}\"")));
    assert!(custom.get("/archive").body.contains("On our own domain"));
    custom.get("/subscribe").expect(200);
    custom.get("/favicon.ico").expect(204);
    let feed = custom.get("/feed.xml");
    feed.expect(200);
    let doc = roxmltree::Document::parse(&feed.body).expect("the feed is XML");
    let root = doc.root_element();
    let id_of = |node: roxmltree::Node<'_, '_>| {
        node.children()
            .find(|c| c.tag_name().name() == "id")
            .and_then(|c| c.text())
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(id_of(root), format!("{custom_origin}/"));
    let entry = root
        .children()
        .find(|c| c.tag_name().name() == "entry")
        .expect("an entry");
    assert_eq!(id_of(entry), web_url);

    // The API's URLs use it.
    let me = owner.get("/newsletter").json();
    assert_eq!(me["data"]["urls"]["home"], format!("{custom_origin}/"));
    assert_eq!(
        me["data"]["urls"]["subscribe"],
        format!("{custom_origin}/subscribe")
    );
    assert_eq!(
        me["data"]["urls"]["archive"],
        format!("{custom_origin}/archive")
    );

    // Double opt-in on the custom Host: the mailed link leads back to it.
    let reader = unique_email("reader");
    custom
        .submit("/subscribe", "/subscribe", &[("email", &reader)])
        .expect(200);
    let mail = app.smtp.wait_for_message_to(&reader, 1);
    let link = link_containing(&mail.text(), "/subscribe/confirm/").expect("a link");
    assert!(link.starts_with(&format!("{custom_origin}/")), "{link}");
    let confirm = path_of(&link);
    let done = custom.submit(&confirm, &confirm, &[]);
    done.expect(200);
    assert!(done.body.contains("You are subscribed"));

    // A sent issue's links (view online, unsubscribe, tracking) point at the custom domain,
    // and they work there.
    let sent = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Mailed from our domain", "content_markdown": "Read [this](https://example.org/a).", "status": "approved"}}),
    );
    sent.expect(201);
    let sent_id = sent.json()["id"].as_i64().unwrap();
    owner
        .post(&format!("/issues/{sent_id}/send_now"), &json!({}))
        .expect(200);
    let issue_mail = app.smtp.wait_for_message_to(&reader, 2);
    let unsubscribe = issue_mail
        .header("List-Unsubscribe")
        .expect("List-Unsubscribe");
    assert!(
        unsubscribe.contains(&format!("<{custom_origin}/u/")),
        "{unsubscribe}"
    );
    let click = link_containing(&issue_mail.html(), "/c/").expect("a tracked link");
    assert!(click.starts_with(&format!("{custom_origin}/c/")), "{click}");
    let redirect = custom.get(&path_of(&click));
    assert_eq!(redirect.header("location"), Some("https://example.org/a"));
    let unsubscribe_page = custom.get(&path_of(
        unsubscribe
            .trim_start_matches('<')
            .split('>')
            .next()
            .unwrap(),
    ));
    unsubscribe_page.expect(200);

    // Certificates on demand: the active domain and live subdomains, nothing else.
    assert_eq!(tls("www.example.com"), 200);
    assert_eq!(tls("WWW.EXAMPLE.COM."), 200);
    assert_eq!(tls(&target), 200);
    assert_eq!(tls("no-such-newsletter.localhost"), 404);
    assert_eq!(tls("example.com"), 404);
    assert_eq!(tls(""), 404);
    assert_eq!(tls("%00%ff%fe"), 404);
    assert_eq!(tls(&"a".repeat(5000)), 404);
    assert_eq!(app.client().get("/tls/allowed").status, 404);
    assert_eq!(app.client().get("/tls/allowed?domain").status, 404);
    assert_eq!(
        app.client()
            .get("/tls/allowed?other=www.example.com")
            .status,
        404
    );
    // Asked on a site's Host it is just a page that is not there.
    custom
        .get("/tls/allowed?domain=www.example.com")
        .expect(404);

    // An unknown domain pointed at the server gets the 404 page, not the dashboard.
    Client::with_host(&app.base_url, "stray.example.org")
        .get("/")
        .expect(404);

    // Removing it: the Host is a 404 again and every link is back on the subdomain.
    let index = owner.client.get(&domains_page(&owner));
    assert!(index.body.contains("www.example.com"));
    assert!(index.body.contains("active"));
    // Removing asks first: the domain's page links to a confirmation page whose form removes.
    let confirm = format!("{page}/remove");
    assert!(owner.client.get(&page).body.contains(&confirm));
    let asked = owner.client.get(&confirm);
    asked.expect(200);
    assert!(asked.body.contains("moves back to"), "{}", asked.body);
    custom.get("/").expect(200);
    let removed = owner
        .client
        .submit(&confirm, &page, &[("_method", "delete")]);
    assert_eq!(removed.redirect(), domains_page(&owner));
    let index = owner.client.get(&domains_page(&owner));
    assert!(index.body.contains("www.example.com is removed"));
    assert!(index.body.contains("No custom domain yet"));
    custom.get("/").expect(404);
    custom.get(&path_of(&web_url)).expect(404);
    assert_eq!(tls("www.example.com"), 404);
    owner.client.get(&page).expect(404);
    let subdomain_origin = format!("http://{}.{}", owner.subdomain, app.public_host);
    assert_eq!(
        owner.get("/newsletter").json()["data"]["urls"]["home"],
        format!("{subdomain_origin}/")
    );
    assert!(
        owner.get(&format!("/issues/{issue_id}")).json()["web_url"]
            .as_str()
            .unwrap()
            .starts_with(&subdomain_origin)
    );
    assert_eq!(app.count("SELECT count(*) FROM custom_domains"), 0);
}

#[test]
fn an_apex_domain_uses_the_addresses_of_the_subdomain() {
    let (app, dns) = spawn_with_dns();
    let owner = onboard(&app, "Apex Gazette");
    let page = add_domain(&owner, "example.org", "apex");
    let pending = poll(&owner.client, &page);
    assert_eq!(pending["method"], "apex");
    // *.localhost resolves to the loopback addresses, so those are the records to add.
    let records = pending["records"].as_array().unwrap();
    let address_records: Vec<(String, String)> = records
        .iter()
        .filter(|r| r["type"] == "A" || r["type"] == "AAAA")
        .map(|r| {
            assert_eq!(r["name"], "example.org");
            (
                r["type"].as_str().unwrap().to_string(),
                r["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        address_records.contains(&("A".to_string(), "127.0.0.1".to_string())),
        "{pending}"
    );
    assert!(!records.iter().any(|r| r["type"] == "CNAME"));
    let token = token_of(&pending);
    let html = owner.client.get(&page).body;
    assert!(html.contains("127.0.0.1"));

    let checked = verify(&owner, &page);
    let reason = checked["reason"].as_str().unwrap();
    assert!(
        reason.contains("A/AAAA records for example.org not found"),
        "{reason}"
    );

    dns.set("example.org", &[Rec::Addr("192.0.2.44".parse().unwrap())]);
    dns.set("_broadsheet-verify.example.org", &[Rec::Txt(token.clone())]);
    let checked = verify(&owner, &page);
    assert_eq!(checked["status"], "pending");
    let reason = checked["reason"].as_str().unwrap();
    assert!(
        reason.contains("example.org has address 192.0.2.44"),
        "{reason}"
    );
    assert!(!reason.contains("TXT"), "{reason}");

    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    dns.set("example.org", &[Rec::Addr(loopback)]);
    let active = verify(&owner, &page);
    assert_eq!(active["status"], "active", "{active}");
    let site = Client::with_host(&app.base_url, &format!("example.org:{}", app.port));
    let home = site.get("/");
    home.expect(200);
    assert!(home.body.contains("Apex Gazette"));
    assert_eq!(
        owner.get("/newsletter").json()["data"]["urls"]["home"],
        format!("http://example.org:{}/", app.port)
    );

    // Verifying an active domain again changes nothing, even if DNS has moved meanwhile.
    dns.set("example.org", &[]);
    let again = owner.client.submit(&page, &format!("{page}/verify"), &[]);
    again.redirect();
    assert_eq!(poll(&owner.client, &page)["status"], "active");
}

#[test]
fn bad_domains_are_refused_and_nothing_is_stored() {
    let (app, dns) = spawn_with_dns();
    let owner = onboard(&app, "Careful Courier");
    let other = onboard(&app, "Other Owner");
    let count = || app.count("SELECT count(*) FROM custom_domains");
    let own_subdomain = format!("{}.localhost", owner.subdomain);
    let long = format!("{}.example.com", vec!["a".repeat(60); 5].join("."));
    for (domain, method, why) in [
        ("", "subdomain", "be blank"),
        ("192.0.2.1", "apex", "not an IP address"),
        ("[2001:db8::1]", "apex", "not an IP address"),
        ("localhost", "apex", "at least two labels"),
        (own_subdomain.as_str(), "subdomain", "not a public name"),
        (app.public_host.as_str(), "subdomain", "bare domain"),
        ("not a domain!", "subdomain", "bare domain"),
        ("<script>alert(1)</script>.com", "subdomain", "bare domain"),
        ("under_score.example.com", "subdomain", "letters, digits"),
        ("-x.example.com", "subdomain", "hyphen"),
        (long.as_str(), "subdomain", "too long"),
        ("example.com", "subdomain", "choose the apex method"),
        ("www.example.com", "mx", "Method must be subdomain or apex"),
    ] {
        let resp = submit_domain(&owner, domain, method);
        assert_eq!(resp.status, 422, "{domain:?}: {}", resp.body);
        assert!(resp.body.contains("class=\"errors\""), "{domain:?}");
        assert!(resp.body.contains(why), "{domain:?} should say {why:?}");
        assert!(!resp.body.contains("<script>alert"), "input is escaped");
        assert_eq!(count(), 0, "{domain:?} stored nothing");
    }

    // Taken: by another newsletter, and a second one for the same newsletter.
    let page = add_domain(&other, "news.example.com", "subdomain");
    assert_eq!(count(), 1);
    let resp = submit_domain(&owner, "NEWS.example.com", "subdomain");
    resp.expect(422);
    assert!(resp.body.contains("already used by another newsletter"));
    assert!(
        resp.body.contains("value=\"NEWS.example.com\""),
        "the form keeps what was typed"
    );
    add_domain(&owner, "letters.example.com", "");
    let resp = submit_domain(&owner, "second.example.com", "");
    resp.expect(422);
    assert!(resp.body.contains("already uses letters.example.com"));
    assert_eq!(count(), 2);
    assert_eq!(
        app.count("SELECT count(*) FROM custom_domains WHERE domain = 'letters.example.com' AND method = 'subdomain'"),
        1,
        "the method is guessed when not given"
    );

    // Even once the other newsletter's domain is active, it cannot be taken.
    let token = token_of(&poll(&other.client, &page));
    dns.set(
        "news.example.com",
        &[Rec::Cname(format!("{}.localhost", other.subdomain))],
    );
    dns.set("_broadsheet-verify.news.example.com", &[Rec::Txt(token)]);
    assert_eq!(verify(&other, &page)["status"], "active");
    let resp = submit_domain(&owner, "news.example.com", "");
    resp.expect(422);
    assert_eq!(count(), 2);
}

#[test]
fn other_users_ids_are_not_found_and_forms_need_the_csrf_token() {
    let (app, dns) = spawn_with_dns();
    let owner = onboard(&app, "Private Press");
    let intruder = onboard(&app, "Nosy Neighbour");
    let page = add_domain(&owner, "www.private.example", "subdomain");
    let token = token_of(&poll(&owner.client, &page));
    let domain_id = page.rsplit('/').next().unwrap().to_string();
    let theirs = domains_page(&owner);
    let mine = domains_page(&intruder);

    // Someone else's newsletter, and their domain id under one's own newsletter: 404.
    for path in [
        theirs.clone(),
        format!("{theirs}/choose_method"),
        page.clone(),
        format!("{page}/remove"),
        format!("{mine}/{domain_id}"),
        format!("{mine}/{domain_id}/remove"),
        format!("{mine}/999999"),
        format!("{mine}/not-a-number"),
    ] {
        intruder.client.get(&path).expect(404);
        let json = intruder
            .client
            .get_with(&path, &[("Accept", "application/json")]);
        json.expect(404);
    }
    let form_token = intruder.client.get(&mine).csrf_token();
    for (path, fields) in [
        (
            theirs.clone(),
            vec![("custom_domain[domain]", "x.example.com")],
        ),
        (format!("{page}/verify"), vec![]),
        (format!("{mine}/{domain_id}/verify"), vec![]),
        (page.clone(), vec![("_method", "delete")]),
        (format!("{mine}/{domain_id}"), vec![("_method", "delete")]),
    ] {
        let mut all = vec![("authenticity_token", form_token.as_str())];
        all.extend(fields);
        intruder.client.post_form(&path, &all).expect(404);
    }
    let delete = intruder
        .client
        .request(
            "DELETE",
            &page,
            &[],
            Some((
                "application/x-www-form-urlencoded",
                format!("authenticity_token={form_token}").into_bytes(),
            )),
        )
        .unwrap();
    assert_eq!(delete.status, 404);

    // Signed out: to the sign-in form.
    assert_eq!(app.client().get(&page).redirect(), "/session/new");

    // The owner's own forms without the token: refused, nothing changed.
    dns.set(
        "www.private.example",
        &[Rec::Cname(format!("{}.localhost", owner.subdomain))],
    );
    dns.set("_broadsheet-verify.www.private.example", &[Rec::Txt(token)]);
    owner
        .client
        .post_form(&format!("{page}/verify"), &[])
        .expect(403);
    owner
        .client
        .post_form(&page, &[("_method", "delete")])
        .expect(403);
    owner
        .client
        .post_form(&theirs, &[("custom_domain[domain]", "www.other.example")])
        .expect(403);
    let unchanged = poll(&owner.client, &page);
    assert_eq!(unchanged["status"], "pending");
    assert_eq!(unchanged["checked_at"], Value::Null);
    assert_eq!(app.count("SELECT count(*) FROM custom_domains"), 1);
    // A POST to the domain without `_method=delete` is not a removal.
    let form_token = owner.client.get(&page).csrf_token();
    owner
        .client
        .post_form(&page, &[("authenticity_token", &form_token)])
        .expect(400);
    assert_eq!(app.count("SELECT count(*) FROM custom_domains"), 1);

    // With the token it works, and the intruder still cannot see it.
    assert_eq!(verify(&owner, &page)["status"], "active");
    intruder.client.get(&page).expect(404);
}
