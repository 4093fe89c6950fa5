//! A newsletter's own sending domain: the dashboard and the API show the DKIM
//! record for the domain of its sender address, the test DNS server serves it, Verify finds
//! it, and from then on issues, opt-in and welcome mail are signed with `d=` that domain and verify
//! with dkimpy; before, they carry the operator's signature, and the settings and send pages
//! warn. A wrong record is not verified and says why; another owner cannot use the domain.

use std::time::Duration;

use crate::support::dkimpy::Dkimpy;
use crate::support::dns::{DnsServer, Rec};
use crate::support::http::unescape;
use crate::support::send::{approved_issue, send_now, wait_status};
use crate::support::*;

const DOMAIN: &str = "letters.example.com";
const WARNING: &str = "mail from an unverified domain may be rejected";

/// The tag `tag` (`d`, `s`) of a DKIM-Signature header.
fn tag(signature: &str, tag: &str) -> String {
    let flat: String = signature.split_whitespace().collect();
    flat.split(';')
        .find_map(|t| {
            t.trim()
                .strip_prefix(&format!("{tag}="))
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no {tag}= in {signature}"))
}

/// The name and the value of a record line `<name> TXT "<value>"`.
fn split_record(record: &str) -> (String, String) {
    let (name, value) = record.split_once(" TXT ").expect("<name> TXT \"<value>\"");
    (name.to_string(), value.trim().trim_matches('"').to_string())
}

fn sender_domain(owner: &Owner) -> Value {
    let resp = owner.get("/newsletter");
    resp.expect(200);
    resp.json()["data"]["sender_domain"].clone()
}

/// Presses Verify on the settings page; returns the settings page it leads back to.
fn press_verify(owner: &Owner) -> String {
    let settings = format!("/newsletters/{}/settings", owner.newsletter_id);
    let resp = owner
        .client
        .submit(&settings, &format!("{settings}/sending_domain/verify"), &[]);
    assert_eq!(resp.redirect(), format!("{settings}#sending-domain"));
    unescape(&owner.client.get(&settings).body)
}

/// Sends an issue to the newsletter's one subscriber `reader`; returns the message.
fn send_issue(app: &App, owner: &Owner, reader: &str, subject: &str, nth: usize) -> Received {
    let id = approved_issue(owner, subject);
    assert_eq!(send_now(owner, id), 1);
    wait_status(owner, id, "sent", Duration::from_secs(30));
    app.smtp.wait_for_message_to(reader, nth)
}

#[test]
#[cfg_attr(
    not(has_dkimpy),
    ignore = "needs dkimpy in target/py (python3 -m venv target/py && target/py/bin/pip install dkimpy)"
)]
fn sender_domain_verified_through_dns_signs_the_newsletters_mail() {
    let Some(dkimpy) = Dkimpy::find("sender_domain_verified") else {
        return;
    };
    let dns = DnsServer::start();
    let app = spawn_app_with(&[
        "--dkim-domain",
        "mail.example.org",
        "--dns-server",
        &dns.address(),
    ]);
    let owner = onboard_paid(&app, "Own Domain Notes");
    owner
        .patch(
            "/newsletter",
            &json!({"sender_email": format!("editor@{DOMAIN}")}),
        )
        .expect(200);
    let doc = app.client().get("/api/v1/openapi.json").json();
    let described = &doc["components"]["schemas"]["NewsletterObject"]["properties"];
    assert!(
        described["sender_domain"].is_object(),
        "sender_domain in the OpenAPI document: {described}"
    );
    let shown = sender_domain(&owner);
    assert_eq!(shown["domain"], DOMAIN);
    assert_eq!(shown["status"], "pending");
    let record = shown["dkim_record"].as_str().unwrap().to_string();
    let (name, value) = split_record(&record);
    assert!(
        name.starts_with("bs") && name.ends_with(&format!("._domainkey.{DOMAIN}")),
        "{record}"
    );
    assert!(value.starts_with("v=DKIM1; k=rsa; p=MIIB"), "{record}");

    // The dashboard shows the same record, the hints and the warnings.
    let settings = format!("/newsletters/{}/settings", owner.newsletter_id);
    let page = unescape(&owner.client.get(&settings).body);
    for needle in [
        record.as_str(),
        &format!("{DOMAIN} TXT \"v=spf1"),
        &format!("_dmarc.{DOMAIN} TXT \"v=DMARC1; p=none"),
        WARNING,
    ] {
        assert!(
            page.contains(needle),
            "{needle} on the settings page:\n{page}"
        );
    }
    let reader = unique_email("reader");
    owner
        .post("/subscribers", &json!({"email": reader}))
        .expect(201);
    let first = approved_issue(&owner, "Before the record");
    let send_page = format!("/newsletters/{}/issues/{first}/send", owner.newsletter_id);
    assert!(unescape(&owner.client.get(&send_page).body).contains(WARNING));

    // Until verified: the operator's signature.
    assert_eq!(send_now(&owner, first), 1);
    wait_status(&owner, first, "sent", Duration::from_secs(30));
    let before = app.smtp.wait_for_message_to(&reader, 1);
    let signature = before.header("DKIM-Signature").expect("signed");
    assert_eq!(tag(&signature, "d"), "mail.example.org");
    let (_, operator_record, _) = app.cli(&["dkim"]);
    assert!(dkimpy.verifies(&before.data, operator_record.trim()));

    // A wrong record: not verified, and the page says why.
    dns.set(
        &name,
        &[Rec::Txt(
            "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrong".into(),
        )],
    );
    let page = press_verify(&owner);
    assert!(
        page.contains(&format!(
            "{DOMAIN} is not verified: TXT record {name} publishes a different key"
        )),
        "{page}"
    );
    assert!(page.contains(WARNING));
    assert_eq!(sender_domain(&owner)["status"], "failed");
    dns.set(&name, &[]);
    assert!(press_verify(&owner).contains(&format!("TXT record {name} not found")));

    // The record as shown: verified, the warnings go.
    dns.set(&name, &[Rec::Txt(value.clone())]);
    let page = press_verify(&owner);
    assert!(page.contains(&format!("{DOMAIN} is verified")), "{page}");
    assert!(!page.contains(WARNING), "{page}");
    assert!(page.contains("data-status=\"verified\""), "{page}");
    let shown = sender_domain(&owner);
    assert_eq!(shown["status"], "verified");
    assert_eq!(shown["dkim_record"], record.as_str());
    let second = approved_issue(&owner, "After the record");
    let send_page = format!("/newsletters/{}/issues/{second}/send", owner.newsletter_id);
    assert!(!owner.client.get(&send_page).body.contains(WARNING));

    // Signed as the newsletter's own domain, and dkimpy agrees with the record served.
    assert_eq!(send_now(&owner, second), 1);
    wait_status(&owner, second, "sent", Duration::from_secs(30));
    let after = app.smtp.wait_for_message_to(&reader, 2);
    let signature = after.header("DKIM-Signature").expect("signed");
    assert_eq!(tag(&signature, "d"), DOMAIN);
    assert_eq!(
        format!("{}._domainkey.{DOMAIN}", tag(&signature, "s")),
        name
    );
    assert!(
        dkimpy.verifies(&after.data, &record),
        "dkimpy rejects:\n{}",
        String::from_utf8_lossy(&after.data)
    );
    assert!(!dkimpy.verifies(&after.data, operator_record.trim()));

    // The double opt-in of the public site is the newsletter's mail too.
    let site = app.site_client(&owner.subdomain);
    let newcomer = unique_email("newcomer");
    site.submit("/subscribe", "/subscribe", &[("email", &newcomer)]);
    let opt_in = app.smtp.wait_for_message_to(&newcomer, 1);
    let signature = opt_in.header("DKIM-Signature").expect("signed");
    assert_eq!(tag(&signature, "d"), DOMAIN);
    assert!(dkimpy.verifies(&opt_in.data, &record));
    // And so is the welcome e-mail that follows the confirmation.
    let link = link_containing(&opt_in.text(), "/subscribe/confirm/").expect("a link");
    let path = link[link.find("/subscribe/").unwrap()..].to_string();
    site.submit(&path, &path, &[]);
    let welcome = app.smtp.wait_for_message_to(&newcomer, 2);
    let signature = welcome.header("DKIM-Signature").expect("signed");
    assert_eq!(tag(&signature, "d"), DOMAIN);
    assert!(dkimpy.verifies(&welcome.data, &record));

    // Account mail stays the service's.
    let reset_to = owner.email.clone();
    let account = app.smtp.messages_to(&reset_to);
    let signature = account[0].header("DKIM-Signature").expect("signed");
    assert_eq!(tag(&signature, "d"), "mail.example.org");

    // Another owner who types the same domain gets a key and selector of their own, which
    // the published record does not match: their mail keeps the operator's signature.
    let stranger = onboard_paid(&app, "Copycat Notes");
    stranger
        .patch(
            "/newsletter",
            &json!({"sender_email": format!("ceo@{DOMAIN}")}),
        )
        .expect(200);
    let theirs = sender_domain(&stranger);
    assert_eq!(theirs["status"], "pending");
    assert_ne!(theirs["dkim_record"], record.as_str());
    assert!(press_verify(&stranger).contains(&format!("{DOMAIN} is not verified")));
    let victim = unique_email("victim");
    stranger
        .post("/subscribers", &json!({"email": victim}))
        .expect(201);
    let forged = send_issue(&app, &stranger, &victim, "Not mine to sign", 1);
    assert_eq!(
        tag(&forged.header("DKIM-Signature").unwrap(), "d"),
        "mail.example.org"
    );

    // A new sender address at another domain starts over there.
    owner
        .patch(
            "/newsletter",
            &json!({"sender_email": "editor@elsewhere.example.net"}),
        )
        .expect(200);
    let moved = sender_domain(&owner);
    assert_eq!(moved["domain"], "elsewhere.example.net");
    assert_eq!(moved["status"], "pending");
    assert!(owner.client.get(&settings).body.contains(WARNING));
}
