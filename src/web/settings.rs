//! The settings page of the dashboard: details (as the API's `PATCH /newsletter`), the sending
//! relay and the warm-up plan (`relay_settings.rs`), publishing rhythm and the time zone of
//! its 09:00 slots, audience and voice, tracking, publishing on send, the welcome e-mail, the
//! public site's look, the plan with an upgrade request, pause / resume / cancel behind a
//! confirmation page, and where bounces come back (read-only). Each
//! form posts to its own URL; bad input shows the page again (422) with the messages beside
//! that form and changes nothing. A cancelled newsletter is read-only: the page shows the
//! values without forms and every post is refused (403).

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::layout::{Section, csrf_field, errors, field, newsletter_page};
use super::newsletters::{current_preferences, owned, owned_post, select};
use super::relay_settings::{self, RelayForm, WarmUpForm};
use super::sender_domain;
use super::time_zones::{shown, zone_select};
use super::{Ctx, FormData, State, WebError, WebResult, invalid_fields, render, see_other};
use crate::clock::Timestamp;
use crate::domain::delivery::relays::{self, SendingChanges, SendingSetup};
use crate::domain::delivery::verp::{self, BounceSetup};
use crate::domain::newsletters::mail_details::{self, MailDetailsChanges};
use crate::domain::newsletters::operators;
use crate::domain::newsletters::sender_domains::SenderDomain;
use crate::domain::newsletters::site_pages::{self, SitePagesChanges};
use crate::domain::newsletters::site_theme::{self, ThemeChanges};
use crate::domain::newsletters::welcome::{self, WelcomeChanges};
use crate::domain::newsletters::{
    self, ContentTone, Details, Frequency, Newsletter, NewsletterLength, Preferences, Status, Tier,
};
use crate::domain::{DomainResult, FieldErrors};
use crate::mail::TlsTrust;

/// The forms of the page; each is a section with this anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Details,
    Relay,
    WarmUp,
    Frequency,
    TimeZone,
    Preferences,
    Tracking,
    Publishing,
    Welcome,
    Theme,
    Pages,
    Plan,
    Status,
}

impl Part {
    fn anchor(self) -> &'static str {
        match self {
            Part::Details => "details",
            Part::Relay => relay_settings::RELAY_ANCHOR,
            Part::WarmUp => relay_settings::WARM_UP_ANCHOR,
            Part::Frequency => "frequency",
            Part::TimeZone => "time-zone",
            Part::Preferences => "preferences",
            Part::Tracking => "tracking",
            Part::Publishing => "publishing",
            Part::Welcome => "welcome",
            Part::Theme => "theme",
            Part::Pages => "about",
            Part::Plan => "plan",
            Part::Status => "status",
        }
    }
}

/// The details form's fields as typed.
#[derive(Debug, Clone, Default)]
struct DetailsForm {
    name: String,
    tagline: String,
    sender_name: String,
    sender_email: String,
    reply_to: String,
    postal_address: String,
}

impl DetailsForm {
    fn read(form: &FormData) -> Self {
        DetailsForm {
            name: form.get("newsletter[name]").to_string(),
            tagline: form.get("newsletter[tagline]").to_string(),
            sender_name: form.get("newsletter[sender_name]").to_string(),
            sender_email: form.get("newsletter[sender_email]").to_string(),
            reply_to: form.get("newsletter[reply_to]").to_string(),
            postal_address: form.get("newsletter[postal_address]").to_string(),
        }
    }

    fn stored(n: &Newsletter) -> Self {
        DetailsForm {
            name: n.name.clone(),
            tagline: n.tagline.clone(),
            sender_name: n.sender_name.clone(),
            sender_email: n.sender_email.clone(),
            reply_to: n.mail.reply_to.clone().unwrap_or_default(),
            postal_address: n.mail.postal_address.clone().unwrap_or_default(),
        }
    }

    /// Only the fields that differ from `n`, as the API's PATCH would send them: the same
    /// validation applies to each, and an untouched empty sender address is not refused.
    fn changes_from(&self, n: &Newsletter) -> Details {
        let changed =
            |typed: &str, current: &str| (typed.trim() != current).then(|| typed.to_string());
        Details {
            name: changed(&self.name, &n.name),
            tagline: changed(&self.tagline, &n.tagline),
            sender_name: changed(&self.sender_name, &n.sender_name),
            sender_email: changed(&self.sender_email, &n.sender_email),
            welcome: WelcomeChanges::default(),
            publish_on_send: None,
            time_zone: None,
            theme: ThemeChanges::default(),
            mail: MailDetailsChanges {
                reply_to: changed(&self.reply_to, n.mail.reply_to.as_deref().unwrap_or("")),
                postal_address: changed(
                    &self.postal_address.replace("\r\n", "\n"),
                    n.mail.postal_address.as_deref().unwrap_or(""),
                ),
            },
            pages: SitePagesChanges::default(),
        }
    }
}

/// The about page and author as typed: an empty field removes its value.
#[derive(Debug, Clone, Default)]
struct PagesForm {
    about: String,
    author_name: String,
    author_image: String,
}

impl PagesForm {
    fn read(form: &FormData) -> Self {
        PagesForm {
            about: form.get("pages[about_markdown]").to_string(),
            author_name: form.get("pages[author_name]").to_string(),
            author_image: form.get("pages[author_image_url]").to_string(),
        }
    }

    /// The stored values; `about` is the about page's Markdown, read apart from the
    /// newsletter (`site_pages::about`).
    fn stored(n: &Newsletter, about: &str) -> Self {
        PagesForm {
            about: about.to_string(),
            author_name: n.pages.author_name.clone().unwrap_or_default(),
            author_image: n.pages.author_image.clone().unwrap_or_default(),
        }
    }

    fn changes(&self) -> Details {
        Details {
            pages: SitePagesChanges {
                about_markdown: Some(self.about.clone()),
                author_name: Some(self.author_name.clone()),
                author_image: Some(self.author_image.clone()),
            },
            ..Details::default()
        }
    }
}

/// The public site's look as typed: an empty field is the default.
#[derive(Debug, Clone, Default)]
struct ThemeForm {
    accent_color: String,
    logo_url: String,
}

impl ThemeForm {
    fn read(form: &FormData) -> Self {
        ThemeForm {
            accent_color: form.get("theme[accent_color]").to_string(),
            logo_url: form.get("theme[logo_url]").to_string(),
        }
    }

    fn stored(n: &Newsletter) -> Self {
        ThemeForm {
            accent_color: n.theme.accent_color.map(|c| c.hex()).unwrap_or_default(),
            logo_url: n.theme.logo_url.clone().unwrap_or_default(),
        }
    }

    fn changes(&self) -> Details {
        Details {
            theme: ThemeChanges {
                accent_color: Some(self.accent_color.clone()),
                logo_url: Some(self.logo_url.clone()),
            },
            ..Details::default()
        }
    }
}

/// The welcome form's fields as typed; an empty subject or body is the default.
#[derive(Debug, Clone, Default)]
struct WelcomeForm {
    enabled: bool,
    subject: String,
    body: String,
}

impl WelcomeForm {
    fn read(form: &FormData) -> Self {
        WelcomeForm {
            enabled: form.get("welcome[enabled]") == "on",
            subject: form.get("welcome[subject]").to_string(),
            body: form.get("welcome[body]").to_string(),
        }
    }

    fn stored(n: &Newsletter) -> Self {
        WelcomeForm {
            enabled: n.welcome.enabled,
            subject: n.welcome.subject.clone().unwrap_or_default(),
            body: n.welcome.body.clone().unwrap_or_default(),
        }
    }

    fn changes(&self) -> Details {
        Details {
            welcome: WelcomeChanges {
                enabled: Some(self.enabled),
                subject: Some(self.subject.clone()),
                body: Some(self.body.clone()),
            },
            ..Details::default()
        }
    }
}

/// What the forms show: the stored values, except in the form that just failed, which keeps
/// what was typed.
struct Entered {
    details: DetailsForm,
    frequency: String,
    preferences: Preferences,
    tracking: String,
    publish_on_send: String,
    welcome: WelcomeForm,
    theme: ThemeForm,
    pages: PagesForm,
    relay: RelayForm,
    warm_up: WarmUpForm,
    /// The stored relay and warm-up plan, which their sections describe.
    sending: SendingSetup,
}

impl Entered {
    fn stored(n: &Newsletter, sending: &SendingSetup, about: &str) -> Self {
        Entered {
            details: DetailsForm::stored(n),
            frequency: n
                .frequency
                .map(|f| f.as_str().to_string())
                .unwrap_or_default(),
            preferences: current_preferences(n),
            tracking: if n.tracking_enabled { "on" } else { "off" }.to_string(),
            publish_on_send: if n.publish_on_send { "on" } else { "off" }.to_string(),
            welcome: WelcomeForm::stored(n),
            theme: ThemeForm::stored(n),
            pages: PagesForm::stored(n, about),
            relay: RelayForm::stored(sending),
            warm_up: WarmUpForm::stored(sending),
            sending: sending.clone(),
        }
    }
}

fn settings_url(n: &Newsletter) -> String {
    format!("/newsletters/{}/settings", n.id)
}

/// A settings form, or on a read-only newsletter the same fields disabled and no form at all.
fn settings_form(ctx: &Ctx, writable: bool, action: &str, submit: &str, fields: Markup) -> Markup {
    let button = html! { button type="submit" { (submit) } };
    settings_form_with(ctx, writable, action, button, fields)
}

/// [`settings_form`] with buttons of its own.
fn settings_form_with(
    ctx: &Ctx,
    writable: bool,
    action: &str,
    buttons: Markup,
    fields: Markup,
) -> Markup {
    html! {
        @if writable {
            form.stack method="post" action=(action) {
                (csrf_field(ctx))
                (fields)
                div { (buttons) }
            }
        } @else {
            div.stack.readonly { fieldset.plain disabled { (fields) } }
        }
    }
}

fn settings_page(
    ctx: &Ctx,
    state: &State,
    n: &Newsletter,
    bounces: &BounceSetup,
    entered: &Entered,
    sender: Option<&SenderDomain>,
    failed: Option<(Part, &FieldErrors)>,
) -> Markup {
    let writable = n.ensure_writable().is_ok();
    let base = settings_url(n);
    let v = Sections {
        ctx,
        state,
        n,
        base: base.clone(),
        writable,
        entered,
        failed,
    };
    newsletter_page(
        ctx,
        n,
        Section::Settings,
        "Settings",
        html! {
            h1 { "Settings" }
            @if !writable {
                p.notice.warning role="status" #read-only {
                    "This newsletter is cancelled: everything is read-only, here and through the API. "
                    "Only the operator of this Broadsheet installation can reactivate it ("
                    code { "broadsheet status " (n.subdomain) " active" } ")."
                }
            }
            (sender_domain::warning(n, sender))
            (v.details())
            (sender_domain::panel(ctx, n, sender, writable))
            (relay_settings::relay_section(&entered.sending, &entered.relay, v.problems(Part::Relay), |fields| {
                let test = format!("{base}/relay/test");
                let buttons = html! {
                    button type="submit" { "Save relay" }
                    " "
                    button type="submit" formaction=(test) { "Test connection" }
                };
                settings_form_with(ctx, writable, &format!("{base}/relay"), buttons, fields)
            }))
            (relay_settings::warm_up_section(&entered.sending, &entered.warm_up, v.problems(Part::WarmUp), |fields| {
                v.form("/warmup", "Save warm-up", fields)
            }))
            (v.frequency())
            (v.time_zone())
            (v.preferences())
            (v.tracking())
            (v.publishing())
            (v.welcome())
            (v.theme())
            (v.pages())
            (v.plan())
            (v.status())
            (bounce_section(bounces))
        },
    )
}

/// The sections of the settings page, each a panel with its form; what they share.
struct Sections<'a> {
    ctx: &'a Ctx,
    state: &'a State,
    n: &'a Newsletter,
    /// The settings page's URL, which each form's action extends.
    base: String,
    writable: bool,
    entered: &'a Entered,
    /// The section whose form was refused, and why.
    failed: Option<(Part, &'a FieldErrors)>,
}

impl Sections<'_> {
    /// The refusal's messages, in the section that was refused.
    fn problems(&self, part: Part) -> Markup {
        match self.failed {
            Some((p, e)) if p == part => errors(e),
            _ => html! {},
        }
    }

    /// The section's form, posting to the settings page's URL and `path`.
    fn form(&self, path: &str, submit: &str, fields: Markup) -> Markup {
        settings_form(
            self.ctx,
            self.writable,
            &format!("{}{path}", self.base),
            submit,
            fields,
        )
    }

    /// Name, tagline and sender.
    fn details(&self) -> Markup {
        let details = &self.entered.details;
        let home = self.n.links(&self.state.urls).home;
        html! {
            section.panel #details {
                h2 { "Details" }
                p.muted { "Subdomain " code { (self.n.subdomain) } " (fixed) · public site " a href=(home) { (home) } }
                (self.problems(Part::Details))
                (self.form("/details", "Save details", html! {
                    input type="hidden" name="_method" value="patch";
                    (field("Name", "text", "newsletter[name]", &details.name, "off", true))
                    (field("Tagline", "text", "newsletter[tagline]", &details.tagline, "off", false))
                    (field("Sender name (the From name of issues)", "text", "newsletter[sender_name]", &details.sender_name, "off", true))
                    (field("Sender e-mail address", "email", "newsletter[sender_email]", &details.sender_email, "off", true))
                    (field("Reply-to address (replies go to the sender address when empty)", "email", "newsletter[reply_to]", &details.reply_to, "off", false))
                    label {
                        "Postal address, printed in the footer of every issue (anti-spam laws such as CAN-SPAM ask for one)"
                        textarea name="newsletter[postal_address]" rows="3" maxlength=(mail_details::POSTAL_ADDRESS_MAX) autocomplete="street-address" { (details.postal_address) }
                    }
                }))
            }
        }
    }

    /// The publishing rhythm.
    fn frequency(&self) -> Markup {
        html! {
            section.panel #frequency {
                h2 { "Publishing rhythm" }
                p.muted { "Scheduling an issue without a time takes the next slot, at 09:00 on the clocks of the newsletter's time zone (" (self.n.time_zone) ", below)." }
                (self.problems(Part::Frequency))
                (self.form("/frequency", "Save rhythm", html! {
                    fieldset {
                        legend { "Frequency" }
                        @for f in Frequency::ALL {
                            label.check {
                                input type="radio" name="frequency" value=(f.as_str()) checked[self.entered.frequency == f.as_str()] required;
                                (f.describe())
                            }
                        }
                    }
                }))
            }
        }
    }

    /// The newsletter's time zone.
    fn time_zone(&self) -> Markup {
        html! {
            section.panel #time-zone {
                h2 { "Time zone" }
                p.muted { "The publishing rhythm's 09:00 slots, and their weekdays, are on this zone's clocks: it is now " (shown(Timestamp::now(), &self.n.time_zone)) " there. Issues already scheduled keep their time." }
                (self.problems(Part::TimeZone))
                (self.form("/time_zone", "Save time zone", html! {
                    label for="newsletter-time-zone" { "Time zone of the newsletter" }
                    (zone_select("time_zone", "newsletter-time-zone", &self.n.time_zone))
                }))
            }
        }
    }

    /// Audience, tone and length.
    fn preferences(&self) -> Markup {
        let prefs = &self.entered.preferences;
        let tones: Vec<&str> = ContentTone::ALL.iter().map(|t| t.as_str()).collect();
        let lengths: Vec<&str> = NewsletterLength::ALL.iter().map(|l| l.as_str()).collect();
        html! {
            section.panel #preferences {
                h2 { "Audience and voice" }
                (self.problems(Part::Preferences))
                (self.form("/preference", "Save audience and voice", html! {
                    input type="hidden" name="_method" value="patch";
                    label {
                        "Who is it for? (up to 500 characters)"
                        textarea name="newsletter_preference[target_audience]" rows="3" maxlength="500" { (prefs.target_audience) }
                    }
                    (select("Tone", "newsletter_preference[content_tone]", &tones, &prefs.content_tone))
                    (select("Length of an issue", "newsletter_preference[newsletter_length]", &lengths, &prefs.newsletter_length))
                }))
            }
        }
    }

    /// Open and click tracking.
    fn tracking(&self) -> Markup {
        html! {
            section.panel #tracking {
                h2 { "Open and click tracking" }
                p.muted { "When tracking is on, sent issues carry a 1×1 image and links that pass through this server, so the stats count opens and clicks. Off: plain links and no image. The choice applies to issues sent from then on." }
                (self.problems(Part::Tracking))
                (self.form("/tracking", "Save tracking", html! {
                    fieldset {
                        legend { "Tracking" }
                        label.check { input type="radio" name="tracking" value="on" checked[self.entered.tracking == "on"] required; "On: count opens and clicks" }
                        label.check { input type="radio" name="tracking" value="off" checked[self.entered.tracking == "off"] required; "Off: no pixel, plain links" }
                    }
                }))
            }
        }
    }

    /// Publishing sent issues on the web.
    fn publishing(&self) -> Markup {
        html! {
            section.panel #publishing {
                h2 { "Publishing on the web" }
                p.muted { "On: when the send of an issue completes, the issue also appears on your site, as the Publish button does. Off: it stays off the site until you press Publish." }
                (self.problems(Part::Publishing))
                (self.form("/publishing", "Save publishing", html! {
                    fieldset {
                        legend { "Publish issues on the web when they are sent" }
                        label.check { input type="radio" name="publish_on_send" value="on" checked[self.entered.publish_on_send == "on"] required; "On: sent issues appear on the site" }
                        label.check { input type="radio" name="publish_on_send" value="off" checked[self.entered.publish_on_send == "off"] required; "Off: publish each issue yourself" }
                    }
                }))
            }
        }
    }

    /// The welcome e-mail.
    fn welcome(&self) -> Markup {
        html! {
            section.panel #welcome {
                h2 { "Welcome e-mail" }
                p.muted { "Sent once to each reader who confirms a subscription on the public site, from the sender above, with an unsubscribe link. Subscribers added through the API get it only when the request asks (" code { "\"send_welcome\": true" } "); imports never. Leave the subject or the text empty for the default shown in grey." }
                (self.problems(Part::Welcome))
                (self.form("/welcome", "Save welcome e-mail", html! {
                    label.check {
                        input type="checkbox" name="welcome[enabled]" value="on" checked[self.entered.welcome.enabled];
                        "Send the welcome e-mail"
                    }
                    label {
                        "Subject (up to " (welcome::SUBJECT_MAX) " characters)"
                        input type="text" name="welcome[subject]" value=(self.entered.welcome.subject) maxlength=(welcome::SUBJECT_MAX) placeholder=(welcome::default_subject(&self.n.name)) autocomplete="off";
                    }
                    label {
                        "Text, in Markdown (up to " (welcome::BODY_MAX) " characters)"
                        textarea name="welcome[body]" rows="8" maxlength=(welcome::BODY_MAX) placeholder=(welcome::default_body(&self.n.name)) { (self.entered.welcome.body) }
                    }
                }))
            }
        }
    }

    /// The public site's accent and logo.
    fn theme(&self) -> Markup {
        html! {
            section.panel #theme {
                h2 { "Look of the public site" }
                p.muted { "The accent colours the site's buttons and, where it is readable on the page, its links; button text turns black or white to stay readable. The logo shows beside the name and in link previews. Leave a field empty for the default." }
                (self.problems(Part::Theme))
                (self.form("/theme", "Save the look", html! {
                    label {
                        "Accent colour (#rrggbb)"
                        input type="text" name="theme[accent_color]" value=(self.entered.theme.accent_color) placeholder="#1d4ed8" pattern="#[0-9a-fA-F]{6}" maxlength="7" autocomplete="off";
                    }
                    label {
                        "Logo URL (https://, up to " (site_theme::LOGO_URL_MAX) " characters)"
                        input type="url" name="theme[logo_url]" value=(self.entered.theme.logo_url) placeholder="https://example.com/logo.png" maxlength=(site_theme::LOGO_URL_MAX) autocomplete="off";
                    }
                }))
            }
        }
    }

    /// The site's about page and its author.
    fn pages(&self) -> Markup {
        let pages = &self.entered.pages;
        let about_url = format!("{}/about", self.n.site_origin(&self.state.urls));
        html! {
            section.panel #about {
                h2 { "About page and author" }
                p.muted {
                    "The about page is at " a href=(about_url) { (about_url) } " once it has a text or an author, linked from every page of the site. "
                    "The author's name and picture show there and beside every issue. Leave a field empty to remove it."
                }
                (self.problems(Part::Pages))
                (self.form("/about", "Save the about page", html! {
                    label {
                        "About (Markdown, up to " (crate::http::plural::count(site_pages::ABOUT_MAX as i64, "character", "characters")) ")"
                        textarea name="pages[about_markdown]" rows="8" maxlength=(site_pages::ABOUT_MAX) { (pages.about) }
                    }
                    label {
                        "Author's name"
                        input type="text" name="pages[author_name]" value=(pages.author_name) maxlength=(site_pages::AUTHOR_NAME_MAX) autocomplete="name";
                    }
                    label {
                        "Author's picture: an https:// image address, or /media/… of an image on your Media page"
                        input type="text" name="pages[author_image_url]" value=(pages.author_image) placeholder="https://example.com/me.jpg" maxlength=(site_pages::AUTHOR_IMAGE_MAX) autocomplete="off" inputmode="url";
                    }
                }))
            }
        }
    }

    /// The tier, and asking for an upgrade.
    fn plan(&self) -> Markup {
        html! {
            section.panel #plan {
                h2 { "Plan" }
                p { "Tier: " strong #tier data-tier=(self.n.tier) { (self.n.tier) } }
                (self.problems(Part::Plan))
                @match self.n.tier {
                    Tier::Free => {
                        p.muted { "The free tier lets you write, preview and publish issues on the public site; sending e-mail needs the paid tier." }
                        @if self.writable {
                            form.inline method="post" action={ (self.base) "/upgrade" } {
                                (csrf_field(self.ctx))
                                button type="submit" { "Request an upgrade to paid" }
                            }
                            p.muted { "An upgrade request sets the tier to " em { "pending" } " and tells the operator of this Broadsheet installation by e-mail. There is no payment here: the operator confirms it on the operator page or with "
                                code { "broadsheet tier " (self.n.subdomain) " paid" } "." }
                        }
                    }
                    Tier::Pending => {
                        p { "Your upgrade request is waiting for the operator of this Broadsheet installation, who has been told by e-mail and confirms it on the operator page or with "
                            code { "broadsheet tier " (self.n.subdomain) " paid" } ". Sending e-mail works once the tier is paid." }
                    }
                    Tier::Paid => { p.muted { "All features, including sending e-mail." } }
                }
            }
        }
    }

    /// Pausing, resuming, cancelling.
    fn status(&self) -> Markup {
        html! {
            section.panel #status {
                h2 { "Status" }
                p { "Status: " strong #newsletter-status data-status=(self.n.status) { (self.n.status) } }
                (self.problems(Part::Status))
                @match self.n.status {
                    Status::Active => {
                        p.muted { "Active: issues are sent now or at their scheduled time." }
                        p.actions {
                            a.button href={ (self.base) "/status?to=paused" } { "Pause sending…" }
                            " "
                            a.button.danger href={ (self.base) "/status?to=cancelled" } { "Cancel the newsletter…" }
                        }
                    }
                    Status::Paused => {
                        p.muted { "Paused: scheduled issues wait and “send now” is refused until you resume." }
                        p.actions {
                            a.button href={ (self.base) "/status?to=active" } { "Resume sending…" }
                            " "
                            a.button.danger href={ (self.base) "/status?to=cancelled" } { "Cancel the newsletter…" }
                        }
                    }
                    Status::Cancelled => { p.muted { "Cancelled: read-only." } }
                }
            }
        }
    }
}

/// Where bounces and complaints come back (`broadsheet bounce-token` prints the same), for
/// the operator of the mail server to configure: read-only.
fn bounce_section(setup: &BounceSetup) -> Markup {
    html! {
        section.panel #bounces {
            h2 { "Bounces and complaints" }
            p.muted { "Mail that cannot be delivered, and spam complaints, come back to this server and stop mail to the address. Each issue message goes out with its own return path, on the bounce domain; the server's operator points that domain's MX at the bounce listener, or has a mail server hand the messages over one of the other two ways." }
            dl.bounce-setup {
                dt { "Return path of each issue message" }
                dd { code #bounce-return-paths { (setup.return_paths) } }
                dt { "Report URL (POST a DSN or ARF message, or JSON)" }
                dd { code #bounce-url { (setup.url) } }
                dt { "Pipe command (the message on standard input)" }
                dd { code #bounce-pipe { (setup.pipe_command) } }
            }
            p.muted { "The URL holds this newsletter's bounce token: keep it private." }
        }
    }
}

/// The bounce setup of `n`, for its section of the page.
async fn bounce_setup(state: &State, n: &Newsletter) -> Result<BounceSetup, WebError> {
    let (n, base_url, domain) = (
        n.clone(),
        state.urls.base_url.clone(),
        state.bounce_domain.clone(),
    );
    Ok(state
        .db
        .run(move |conn| verp::setup(conn, &n, &base_url, &domain))
        .await?)
}

#[handler]
pub async fn show(req: &Request, Path(id): Path<String>, Data(state): Data<&State>) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    let bounces = bounce_setup(state, &n).await?;
    let sender = sender_domain::load(state, &n).await?;
    let sending = sending_setup(state, &n).await?;
    let about = about_text(state, &n).await?;
    render(
        StatusCode::OK,
        settings_page(
            &ctx,
            state,
            &n,
            &bounces,
            &Entered::stored(&n, &sending, &about),
            sender.as_ref(),
            None,
        ),
    )
}

/// The Markdown of the newsletter's about page; empty when it has none.
async fn about_text(state: &State, n: &Newsletter) -> Result<String, WebError> {
    let nid = n.id;
    let about = state
        .db
        .run(move |conn| site_pages::about(conn, nid))
        .await?;
    Ok(about.map(|about| about.markdown).unwrap_or_default())
}

/// The newsletter's relay (its password opened with the server's key) and warm-up plan.
async fn sending_setup(state: &State, n: &Newsletter) -> Result<SendingSetup, WebError> {
    let (nid, key) = (n.id, state.credentials.clone());
    Ok(state
        .db
        .run(move |conn| relays::setup(conn, &key, nid))
        .await?)
}

/// A settings form post, loaded: the CSRF token checked, the owner's newsletter (404 for
/// anyone else's), and a cancelled newsletter refused (403) before the form is used.
struct Post<'a> {
    req: &'a Request,
    state: &'a State,
    form: FormData,
    ctx: Ctx,
    n: Newsletter,
    bounces: BounceSetup,
    sending: SendingSetup,
    /// The about page's Markdown as stored, for the page shown again.
    about: String,
}

impl<'a> Post<'a> {
    async fn load(
        req: &'a Request,
        state: &'a State,
        id: &str,
        body: Body,
    ) -> Result<Post<'a>, WebError> {
        let (form, ctx, n) = owned_post(req, state, id, body).await?;
        n.ensure_writable()?;
        let bounces = bounce_setup(state, &n).await?;
        let sending = sending_setup(state, &n).await?;
        let about = about_text(state, &n).await?;
        Ok(Post {
            req,
            state,
            form,
            ctx,
            n,
            bounces,
            sending,
            about,
        })
    }

    /// Saves `changes` as `PATCH /newsletter` does; the notice is made from what was saved.
    /// They are checked, and Markdown among them (the welcome text, the about page) rendered,
    /// before a connection is taken.
    async fn save_details(
        &self,
        changes: Details,
        part: Part,
        keep_typed: impl FnOnce(&mut Entered),
        notice: impl FnOnce(&Newsletter) -> String,
    ) -> WebResult {
        let nid = self.n.id;
        let result = self
            .state
            .db
            .run_after(
                move || newsletters::check_details(&changes),
                move |conn, checked| newsletters::apply_details(conn, nid, &checked),
            )
            .await;
        let notice = result.as_ref().map(notice).unwrap_or_default();
        self.answer(result, part, keep_typed, &notice).await
    }

    /// Runs `write` and answers for `part`, the notice made from what was saved.
    async fn save<T: Send + 'static>(
        &self,
        write: impl FnOnce(&mut rusqlite::Connection) -> DomainResult<T> + Send + 'static,
        part: Part,
        keep_typed: impl FnOnce(&mut Entered),
        notice: impl FnOnce(&T) -> String,
    ) -> WebResult {
        let result = self.state.db.run(write).await;
        let notice = result.as_ref().map(notice).unwrap_or_default();
        self.answer(result, part, keep_typed, &notice).await
    }

    /// Saves `changes` to the relay or the warm-up plan (`relays::update`) and answers for
    /// `part`.
    async fn save_sending(
        &self,
        changes: SendingChanges,
        part: Part,
        keep_typed: impl FnOnce(&mut Entered),
        notice: fn(&SendingSetup) -> String,
    ) -> WebResult {
        let (nid, key) = (self.n.id, self.state.credentials.clone());
        let write =
            move |conn: &mut rusqlite::Connection| relays::update(conn, &key, nid, &changes);
        self.save(write, part, keep_typed, notice).await
    }

    /// Back to the section with a notice, or the page again (422) with the messages beside
    /// the form that failed and what was typed in it.
    async fn answer<T>(
        &self,
        result: DomainResult<T>,
        part: Part,
        keep_typed: impl FnOnce(&mut Entered),
        notice: &str,
    ) -> WebResult {
        match result {
            Ok(_) => {
                self.ctx.notice_next(self.req, notice);
                see_other(&format!("{}#{}", settings_url(&self.n), part.anchor()))
            }
            Err(e) => {
                let problems = invalid_fields(e)?;
                let status = StatusCode::UNPROCESSABLE_ENTITY;
                self.page(status, keep_typed, Some((part, &problems))).await
            }
        }
    }

    /// The settings page again, with what was typed in one form and its messages.
    async fn page(
        &self,
        status: StatusCode,
        keep_typed: impl FnOnce(&mut Entered),
        failed: Option<(Part, &FieldErrors)>,
    ) -> WebResult {
        let mut entered = Entered::stored(&self.n, &self.sending, &self.about);
        keep_typed(&mut entered);
        let sender = sender_domain::load(self.state, &self.n).await?;
        render(
            status,
            settings_page(
                &self.ctx,
                self.state,
                &self.n,
                &self.bounces,
                &entered,
                sender.as_ref(),
                failed,
            ),
        )
    }
}

#[handler]
pub async fn update_details(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let typed = DetailsForm::read(&post.form);
    let changes = typed.changes_from(&post.n);
    let keep = |e: &mut Entered| e.details = typed;
    post.save_details(changes, Part::Details, keep, |_| {
        "The details are saved.".into()
    })
    .await
}

#[handler]
pub async fn update_frequency(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let typed = post.form.get("frequency").to_string();
    let (owner, nid, choice) = (post.n.owner_id, post.n.id, typed.clone());
    let result = state
        .db
        .run(move |conn| newsletters::apply_frequency(conn, owner, nid, &choice))
        .await;
    post.answer(
        result,
        Part::Frequency,
        |e| e.frequency = typed,
        "The publishing rhythm is saved.",
    )
    .await
}

/// `POST .../settings/time_zone` with `time_zone` an IANA name: the newsletter's zone, as
/// `PATCH /newsletter`'s `time_zone` (the same function and rules).
#[handler]
pub async fn update_time_zone(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let changes = Details {
        time_zone: Some(post.form.get("time_zone").to_string()),
        ..Details::default()
    };
    post.save_details(
        changes,
        Part::TimeZone,
        |_| {},
        |saved| {
            format!(
                "The time zone is saved: the 09:00 slots are now on {}'s clocks.",
                saved.time_zone
            )
        },
    )
    .await
}

#[handler]
pub async fn update_preferences(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let field = |name: &str| post.form.get(name).to_string();
    let typed = Preferences {
        target_audience: field("newsletter_preference[target_audience]"),
        content_tone: field("newsletter_preference[content_tone]"),
        newsletter_length: field("newsletter_preference[newsletter_length]"),
    };
    let (owner, nid, attempt) = (post.n.owner_id, post.n.id, typed.clone());
    let result = state
        .db
        .run(move |conn| newsletters::update_preferences(conn, owner, nid, &attempt))
        .await;
    post.answer(
        result,
        Part::Preferences,
        |e| e.preferences = typed,
        "The audience and voice are saved.",
    )
    .await
}

#[handler]
pub async fn update_tracking(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let typed = post.form.get("tracking").to_string();
    let (owner, nid, setting) = (post.n.owner_id, post.n.id, typed.clone());
    let result = state
        .db
        .run(move |conn| newsletters::change_tracking(conn, owner, nid, &setting))
        .await;
    let notice = match result.as_ref().map(|saved| saved.tracking_enabled) {
        Ok(false) => {
            "Tracking is off: issues sent from now on carry no open pixel and plain links."
        }
        _ => "Tracking is on: issues sent from now on count opens and clicks.",
    };
    post.answer(result, Part::Tracking, |e| e.tracking = typed, notice)
        .await
}

/// `POST .../settings/publishing` with `publish_on_send` `on` or `off`.
#[handler]
pub async fn update_publishing(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let typed = post.form.get("publish_on_send").to_string();
    let keep = |e: &mut Entered| e.publish_on_send = typed.clone();
    let on = match newsletters::on_or_off("publish_on_send", &typed) {
        Ok(on) => on,
        Err(e) => {
            return post
                .answer(Err::<(), _>(e), Part::Publishing, keep, "")
                .await;
        }
    };
    let changes = Details {
        publish_on_send: Some(on),
        ..Details::default()
    };
    post.save_details(changes, Part::Publishing, keep, |saved| {
        if saved.publish_on_send {
            "Issues will appear on your site when their send completes."
        } else {
            "Issues stay off your site until you publish them."
        }
        .into()
    })
    .await
}

#[handler]
pub async fn update_welcome(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let typed = WelcomeForm::read(&post.form);
    let changes = typed.changes();
    post.save_details(
        changes,
        Part::Welcome,
        |e| e.welcome = typed,
        |saved| {
            match saved.welcome.enabled {
                false => "The welcome e-mail is saved, and off: readers who confirm get none.",
                true => "The welcome e-mail is saved.",
            }
            .into()
        },
    )
    .await
}

#[handler]
pub async fn update_theme(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let typed = ThemeForm::read(&post.form);
    let changes = typed.changes();
    let keep = |e: &mut Entered| e.theme = typed;
    post.save_details(changes, Part::Theme, keep, |_| {
        "The look of the public site is saved.".into()
    })
    .await
}

#[handler]
pub async fn update_pages(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let typed = PagesForm::read(&post.form);
    let changes = typed.changes();
    post.save_details(
        changes,
        Part::Pages,
        |e| e.pages = typed,
        |saved| {
            match saved.pages.has_about_page() {
                true => "The about page is saved.",
                false => "Saved: the site has no about page now.",
            }
            .into()
        },
    )
    .await
}

#[handler]
pub async fn request_upgrade(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let (owner, nid, urls) = (post.n.owner_id, post.n.id, state.urls.clone());
    let result = state
        .db
        .run(move |conn| operators::request_upgrade(conn, &urls, owner, nid))
        .await;
    if result.is_ok() {
        // The operators are mailed (in the request's transaction); the log says it too, for
        // an installation whose operators have no confirmed address.
        let subdomain = &post.n.subdomain;
        eprintln!(
            "settings: {subdomain} asks for the paid tier; confirm with: broadsheet tier {subdomain} paid"
        );
    }
    post.answer(
        result,
        Part::Plan,
        |_| {},
        "Upgrade requested: the tier is pending until the operator confirms it.",
    )
    .await
}

fn relay_notice(saved: &SendingSetup) -> String {
    match &saved.relay {
        None => "This newsletter's mail goes out through the server's relay.".into(),
        Some(relay) => format!(
            "The relay is saved: this newsletter's mail goes out through {}.",
            relay.name()
        ),
    }
}

fn warm_up_notice(saved: &SendingSetup) -> String {
    match &saved.warm_up {
        None => "The warm-up is off: no daily cap.".into(),
        Some(plan) => format!(
            "The warm-up is on: at most {} messages go out today.",
            plan.daily_cap(relays::today())
        ),
    }
}

/// `POST .../settings/relay`: `relay[use]` `server` (the server's relay; a stored relay is
/// deleted) or `own` with `relay[host]`, `relay[port]`, `relay[tls_mode]` (`tls` or
/// `starttls`), `relay[username]`, `relay[password]` (empty keeps the stored one),
/// `relay[forget_password]`, `relay[per_second]`, `relay[per_hour]`, `relay[per_day]`.
#[handler]
pub async fn update_relay(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let (typed, password) = RelayForm::read(&post.form);
    let changes = SendingChanges {
        relay: typed.change(password),
        ..SendingChanges::default()
    };
    post.save_sending(changes, Part::Relay, |e| e.relay = typed, relay_notice)
        .await
}

/// `POST .../settings/relay/test` (the relay form's "Test connection"): tries the relay as
/// typed, the stored password standing in for an empty field, and shows the page with what
/// happened; nothing is saved.
#[handler]
pub async fn test_relay(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
    Data(trust): Data<&TlsTrust>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let (mut typed, password) = RelayForm::read(&post.form);
    let input = match typed.change(password) {
        relays::RelayChange::Save(input) => input,
        _ => {
            typed.outcome = Some(Err(
                "Choose “Use my own relay” and fill in its settings to test it.".into(),
            ));
            return post.page(StatusCode::OK, |e| e.relay = typed, None).await;
        }
    };
    let (nid, key) = (post.n.id, state.credentials.clone());
    let candidate = state
        .db
        .run(move |conn| {
            let checked = relays::check(&input)?;
            relays::candidate(conn, &key, nid, &checked)
        })
        .await;
    let relay = match candidate {
        Ok(relay) => relay,
        Err(e) => {
            return post
                .answer(Err::<(), _>(e), Part::Relay, |e| e.relay = typed, "")
                .await;
        }
    };
    typed.outcome = Some(relay_settings::try_relay(state, trust, &relay).await);
    post.page(StatusCode::OK, |e| e.relay = typed, None).await
}

/// `POST .../settings/warmup`: `warmup[enabled]` `on` (absent: off), `warmup[first_day_cap]`,
/// `warmup[factor]` (empty: the defaults).
#[handler]
pub async fn update_warm_up(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let typed = WarmUpForm::read(&post.form);
    let changes = SendingChanges {
        warm_up: typed.change(),
        ..SendingChanges::default()
    };
    post.save_sending(changes, Part::WarmUp, |e| e.warm_up = typed, warm_up_notice)
        .await
}

/// What the confirmation page says about moving to a status, and its button.
fn consequences(to: Status, n: &Newsletter) -> (&'static str, Markup, &'static str) {
    match to {
        Status::Paused => (
            "Pause sending?",
            html! {
                p { "While the newsletter is paused, scheduled issues wait (they go out when you resume, even if their time has passed) and “send now” is refused. An issue already being sent finishes." }
                p { "Everything else keeps working: writing issues, the public site, subscriptions and the API." }
            },
            "Pause the newsletter",
        ),
        Status::Active => (
            "Resume sending?",
            html! { p { "Scheduled issues whose time has passed go out at once; the others at their time." } },
            "Resume sending",
        ),
        Status::Cancelled => (
            "Cancel the newsletter?",
            html! {
                p { "A cancelled newsletter is read-only: no new send starts (scheduled issues will not go out; one already being sent finishes), and its issues, subscribers and settings can no longer be changed, here or through the API (which answers 403 " code { "newsletter_cancelled" } " to every change). Reading keeps working." }
                p { strong { "You cannot undo this yourself." } " Only the operator of this Broadsheet installation can reactivate it, with "
                    code { "broadsheet status " (n.subdomain) " active" } "." }
            },
            "Cancel the newsletter",
        ),
    }
}

fn status_page(ctx: &Ctx, n: &Newsletter, to: Status, problems: &FieldErrors) -> Markup {
    let (title, explanation, button) = consequences(to, n);
    newsletter_page(
        ctx,
        n,
        Section::Settings,
        title,
        html! {
            h1 { (title) }
            (errors(problems))
            div.panel { (explanation) }
            form.stack method="post" action={ (settings_url(n)) "/status" } {
                (csrf_field(ctx))
                input type="hidden" name="status" value=(to.as_str());
                @if to == Status::Cancelled {
                    (field(&format!("Type the subdomain, {}, to confirm", n.subdomain), "text", "confirmation", "", "off", true))
                }
                div {
                    button.danger[to == Status::Cancelled] type="submit" { (button) }
                    " "
                    a href={ (settings_url(n)) "#status" } { "Keep it as it is" }
                }
            }
        },
    )
}

/// `GET /newsletters/:id/settings/status?to=paused|active|cancelled`: the confirmation step.
#[handler]
pub async fn confirm_status(
    req: &Request,
    Path(id): Path<String>,
    Data(state): Data<&State>,
) -> WebResult {
    let ctx = Ctx::load(req, state).await?;
    let n = owned(&ctx, state, &id).await?;
    n.ensure_writable()?;
    let query = FormData::parse(req.uri().query().unwrap_or("").as_bytes());
    let to = Status::parse(query.get("to")).ok_or(WebError::NotFound)?;
    render(
        StatusCode::OK,
        status_page(&ctx, &n, to, &FieldErrors::new()),
    )
}

#[handler]
pub async fn change_status(
    req: &Request,
    Path(id): Path<String>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let post = Post::load(req, state, &id, body).await?;
    let (owner, nid) = (post.n.owner_id, post.n.id);
    let to = post.form.get("status").to_string();
    let (attempt, confirmation) = (to.clone(), post.form.get("confirmation").to_string());
    let result = state
        .db
        .run(move |conn| newsletters::change_status(conn, owner, nid, &attempt, &confirmation))
        .await;
    let notice = match result.as_ref().map(|saved| saved.status) {
        Ok(Status::Active) => "The newsletter is active: sending is on.",
        Ok(Status::Paused) => "The newsletter is paused: nothing is sent until you resume.",
        _ => "The newsletter is cancelled and read-only.",
    };
    // A refused confirmation shows its page again; an unknown status has none, so the
    // settings page shows the message, as for every other form.
    match (result, Status::parse(to.trim())) {
        (Err(e), Some(to)) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            status_page(&post.ctx, &post.n, to, &invalid_fields(e)?),
        ),
        (result, _) => post.answer(result, Part::Status, |_| {}, notice).await,
    }
}
