//! The sending domain in the dashboard: the settings page's section with the DKIM record to
//! publish, SPF and DMARC hints and a Verify button, and the warning the settings and send
//! pages show while the domain is not verified (docs/deliverability.md, "Your sending domain").

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler};

use super::layout::{copy_script, copyable, csrf_field};
use super::newsletters::owned_post;
use super::{Ctx, State, WebError, WebResult, see_other};
use crate::domain::newsletters::Newsletter;
use crate::domain::newsletters::sender_domains::{self, SenderDomain, Status};

/// The anchor of the settings page's section.
pub const ANCHOR: &str = "sending-domain";

/// The newsletter's sending domain (its key is made on the first visit, on the database's
/// blocking thread); `None` without a sender address.
pub async fn load(state: &State, n: &Newsletter) -> Result<Option<SenderDomain>, WebError> {
    let newsletter = n.clone();
    Ok(state
        .db
        .run(move |conn| sender_domains::for_newsletter(conn, &newsletter))
        .await?)
}

fn settings_anchor(n: &Newsletter) -> String {
    format!("/newsletters/{}/settings#{ANCHOR}", n.id)
}

/// While the domain is not verified: mail goes out, but receivers that check DMARC may
/// refuse it. Nothing when it is verified or there is no sender address.
pub fn warning(n: &Newsletter, domain: Option<&SenderDomain>) -> Markup {
    match domain {
        Some(d) if !d.is_verified() => html! {
            p.notice.warning role="status" #sender-domain-warning {
                "Your sending domain " code { (d.domain) } " is not verified: mail from an unverified domain may be rejected. "
                a href=(settings_anchor(n)) { "Publish its DKIM record and verify it" } "."
            }
        },
        _ => html! {},
    }
}

/// The settings page's section: the status, the records to publish and the Verify button.
pub fn panel(ctx: &Ctx, n: &Newsletter, domain: Option<&SenderDomain>, writable: bool) -> Markup {
    html! {
        section.panel #(ANCHOR) {
            h2 { "Your sending domain" }
            @match domain {
                None => {
                    p.muted { "Set a sender e-mail address at your own domain above; this section then shows the DNS records that let receivers trust mail from it." }
                }
                Some(d) => {
                    p {
                        "Domain " code { (d.domain) } " · status "
                        strong #sender-domain-status data-status=(d.status) class=(if d.is_verified() { "ok" } else { "bad" }) { (d.status) }
                    }
                    @if d.is_verified() {
                        p.muted { "Issues, confirmation and welcome mail are signed with d=" (d.domain) "." }
                    } @else {
                        (warning(n, Some(d)))
                    }
                    @if let Some(reason) = &d.reason {
                        p #sender-domain-reason { "Last check: " (reason) }
                    }
                    p { "Publish this DKIM record at your DNS provider (a TXT record):" }
                    dl.records {
                        dt { "Name" } dd { (copyable("dkim-record-name", "the name", &d.record_name())) }
                        dt { "Value" } dd { (copyable("dkim-record-value", "the value", &d.record_value())) }
                        dt { "As one line of a zone file" } dd { (copyable("dkim-record", "the zone file line", &d.dkim_record())) }
                    }
                    p { "Also recommended:" }
                    ul {
                        li { "SPF, so receivers know which servers send for the domain (or " code { "include:" } " your mail relay's SPF): " (copyable("spf-hint", "the SPF record", &d.spf_hint())) }
                        li { "DMARC, starting with reports only: " (copyable("dmarc-hint", "the DMARC record", &d.dmarc_hint())) }
                        li { "A reverse DNS (PTR) name for the mail server's address that resolves back to it." }
                    }
                    (copy_script())
                    @if writable {
                        form.inline method="post" action={ "/newsletters/" (n.id) "/settings/sending_domain/verify" } {
                            (csrf_field(ctx))
                            button type="submit" { @if d.is_verified() { "Check again" } @else { "Verify" } }
                        }
                    }
                    @match d.status {
                        Status::Verified => {},
                        _ => { p.muted { "Until it is verified, mail is signed with the service's own domain, when the operator has set one." } }
                    }
                }
            }
        }
    }
}

/// `POST .../settings/sending_domain/verify`: looks the DKIM record up and says what it found.
#[handler]
pub async fn verify(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let (_, ctx, n) = owned_post(req, state, &id, body).await?;
    n.ensure_writable()?;
    let checked = sender_domains::verify(&state.db, &state.dns, &n).await?;
    let notice = match (checked.status, &checked.reason) {
        (Status::Verified, None) => format!(
            "{} is verified: mail is now signed with this domain.",
            checked.domain
        ),
        (Status::Verified, Some(reason)) => format!(
            "{} stays verified; the check got no answer: {reason}",
            checked.domain
        ),
        (_, Some(reason)) => format!("{} is not verified: {reason}", checked.domain),
        (_, None) => format!("{} is not verified yet.", checked.domain),
    };
    ctx.notice_next(req, &notice);
    see_other(&settings_anchor(&n))
}
