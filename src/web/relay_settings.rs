//! The settings page's "Sending relay" and "Warm-up" sections: the forms as typed, their
//! sections, and "Test connection", which opens one connection to the relay in the form (the
//! stored password when the field is left empty) and says what happened. The handlers are in
//! `settings.rs`, beside the page's other forms.

use maud::{Markup, html};

use super::State;
use super::layout::field;
use crate::domain::delivery::relays::{
    self, NewsletterRelay, PasswordChange, RelayChange, RelayInput, SendingSetup, TlsMode,
    WarmUpChange, WarmUpInput,
};
use crate::mail::TlsTrust;
use crate::mail::relay_settings::{self, TEST_TIMEOUT};
use crate::webhooks;

/// The anchors of the two sections.
pub const RELAY_ANCHOR: &str = "relay";
pub const WARM_UP_ANCHOR: &str = "warm-up";

/// The relay form as typed. The password is never kept: a page shown again has the field
/// empty, like every page.
#[derive(Debug, Clone, Default)]
pub struct RelayForm {
    /// "Use my own relay" is chosen.
    own: bool,
    host: String,
    port: String,
    tls_mode: String,
    username: String,
    per_second: String,
    per_hour: String,
    per_day: String,
    /// What "Test connection" found: what worked, or what went wrong.
    pub outcome: Option<Result<String, String>>,
}

impl RelayForm {
    pub fn read(form: &super::FormData) -> (Self, PasswordChange) {
        let typed = RelayForm {
            own: form.get("relay[use]") == "own",
            host: form.get("relay[host]").to_string(),
            port: form.get("relay[port]").to_string(),
            tls_mode: form.get("relay[tls_mode]").to_string(),
            username: form.get("relay[username]").to_string(),
            per_second: form.get("relay[per_second]").to_string(),
            per_hour: form.get("relay[per_hour]").to_string(),
            per_day: form.get("relay[per_day]").to_string(),
            outcome: None,
        };
        // An empty field keeps the stored password; the box forgets it.
        let password = match form.get("relay[password]") {
            "" if form.get("relay[forget_password]") == "on" => PasswordChange::Remove,
            "" => PasswordChange::Keep,
            typed => PasswordChange::Set(typed.to_string()),
        };
        (typed, password)
    }

    pub fn stored(setup: &SendingSetup) -> Self {
        let number = |n: Option<u32>| n.map(|n| n.to_string()).unwrap_or_default();
        match &setup.relay {
            None => RelayForm {
                tls_mode: TlsMode::StartTls.as_str().into(),
                ..RelayForm::default()
            },
            Some(r) => RelayForm {
                own: true,
                host: r.host.clone(),
                port: r.port.to_string(),
                tls_mode: r.tls_mode.as_str().into(),
                username: r.username.clone().unwrap_or_default(),
                per_second: number(r.limits.per_second),
                per_hour: number(r.limits.per_hour),
                per_day: number(r.limits.per_day),
                outcome: None,
            },
        }
    }

    /// What the form asks of the relay.
    pub fn change(&self, password: PasswordChange) -> RelayChange {
        if !self.own {
            return RelayChange::Remove;
        }
        RelayChange::Save(RelayInput {
            host: self.host.clone(),
            port: self.port.clone(),
            tls_mode: self.tls_mode.clone(),
            username: self.username.clone(),
            password,
            per_second: self.per_second.clone(),
            per_hour: self.per_hour.clone(),
            per_day: self.per_day.clone(),
        })
    }
}

/// The warm-up form as typed.
#[derive(Debug, Clone, Default)]
pub struct WarmUpForm {
    enabled: bool,
    first_day_cap: String,
    factor: String,
}

impl WarmUpForm {
    pub fn read(form: &super::FormData) -> Self {
        WarmUpForm {
            enabled: form.get("warmup[enabled]") == "on",
            first_day_cap: form.get("warmup[first_day_cap]").to_string(),
            factor: form.get("warmup[factor]").to_string(),
        }
    }

    pub fn stored(setup: &SendingSetup) -> Self {
        match &setup.warm_up {
            None => WarmUpForm::default(),
            Some(plan) => WarmUpForm {
                enabled: true,
                first_day_cap: plan.first_day_cap.to_string(),
                factor: plan.factor.to_string(),
            },
        }
    }

    pub fn change(&self) -> WarmUpChange {
        if self.enabled {
            WarmUpChange::On(WarmUpInput {
                first_day_cap: self.first_day_cap.clone(),
                factor: self.factor.clone(),
            })
        } else {
            WarmUpChange::Off
        }
    }
}

/// What "Test connection" says about `relay`: its address is looked up and checked as a send's
/// would be, then one connection is opened and closed.
pub async fn try_relay(
    state: &State,
    trust: &TlsTrust,
    relay: &NewsletterRelay,
) -> Result<String, String> {
    let name = relay.name();
    let pinned = webhooks::resolve_host(
        &relay.host,
        relay.port,
        state.allow_private_relays,
        &state.dns,
    )
    .await
    .map_err(|e| format!("Could not connect to {name}: {e}."))?;
    let settings = relay_settings::newsletter_relay_settings(relay, trust, TEST_TIMEOUT, pinned)
        .map_err(|e| format!("Could not sign in to {name}: {e}."))?;
    relay_settings::test_connection(&settings).await
}

/// The relay's state in a sentence, above the form.
fn relay_summary(setup: &SendingSetup) -> Markup {
    match &setup.relay {
        None => html! {
            p #relay-summary data-relay="server" { "This newsletter's mail goes out through the server's relay." }
        },
        Some(r) => html! {
            p #relay-summary data-relay="own" {
                "This newsletter's mail goes out through your relay " code { (r.name()) } ", "
                @match r.tls_mode {
                    TlsMode::Tls => "over TLS from the start",
                    TlsMode::StartTls => "over STARTTLS (required)",
                }
                @match &r.username {
                    Some(user) => { ", signed in as " code { (user) } "." }
                    None => { ", without signing in." }
                }
            }
            @if let Some(problem) = r.problem() {
                p.notice.warning #relay-password-problem role="status" {
                    "This relay cannot sign in: " (problem) "."
                }
            }
        },
    }
}

/// The "Sending relay" section; `fields` of `form` go through the page's `settings_form`.
pub fn relay_section(
    setup: &SendingSetup,
    typed: &RelayForm,
    problems: Markup,
    form: impl FnOnce(Markup) -> Markup,
) -> Markup {
    let password_set = setup.relay.as_ref().is_some_and(|r| r.password.is_set());
    html! {
        section.panel #(RELAY_ANCHOR) {
            h2 { "Sending relay" }
            p.muted { "By default the mail of every newsletter on this server goes out through the server's relay. You can send this newsletter's mail through an account of your own at an e-mail service instead: the connection always uses TLS and its certificate is checked, so the password never goes in the clear. The password is stored encrypted and never shown again." }
            (relay_summary(setup))
            @if let Some(outcome) = &typed.outcome {
                @match outcome {
                    Ok(said) => { p.notice #relay-test role="status" data-outcome="ok" { (said) } }
                    Err(said) => { p.notice.warning #relay-test role="status" data-outcome="failed" { (said) } }
                }
                p.muted { "The test tried the values in the form below; nothing was saved." }
            }
            (problems)
            (form(html! {
                fieldset {
                    legend { "Which relay sends this newsletter's mail" }
                    label.check { input type="radio" name="relay[use]" value="server" checked[!typed.own] required; "Use the server's relay" }
                    label.check { input type="radio" name="relay[use]" value="own" checked[typed.own] required; "Use my own relay" }
                }
                fieldset {
                    legend { "Your relay" }
                    (field("Host (e.g. smtp.example.com)", "text", "relay[host]", &typed.host, "off", false))
                    label {
                        "Port"
                        input type="text" name="relay[port]" value=(typed.port) inputmode="numeric" pattern="[0-9]*" maxlength="5" placeholder="587" autocomplete="off";
                    }
                    fieldset {
                        legend { "TLS" }
                        @for mode in TlsMode::ALL {
                            label.check {
                                input type="radio" name="relay[tls_mode]" value=(mode.as_str()) checked[typed.tls_mode == mode.as_str()];
                                (mode.describe())
                            }
                        }
                    }
                    label {
                        "User name (empty if the relay takes mail without signing in)"
                        input type="text" name="relay[username]" value=(typed.username) maxlength=(relays::USERNAME_MAX) autocomplete="off";
                    }
                    label {
                        "Password"
                        input #relay-password type="password" name="relay[password]" value="" maxlength=(relays::PASSWORD_MAX) autocomplete="new-password" aria-describedby="relay-password-note";
                    }
                    p.muted #relay-password-note {
                        @if password_set {
                            "A password is stored (it is never shown). Leave the field empty to keep it."
                        } @else {
                            "No password is stored."
                        }
                    }
                    @if password_set {
                        label.check { input type="checkbox" name="relay[forget_password]" value="on"; "Forget the stored password" }
                    }
                    fieldset {
                        legend { "Limits of your relay (optional, empty for none)" }
                        (limit_field("Messages per second", "relay[per_second]", &typed.per_second))
                        (limit_field("Messages per hour", "relay[per_hour]", &typed.per_hour))
                        (limit_field("Messages per day", "relay[per_day]", &typed.per_day))
                    }
                }
            }))
        }
    }
}

fn limit_field(label: &str, name: &str, value: &str) -> Markup {
    html! {
        label {
            (label)
            input type="text" name=(name) value=(value) inputmode="numeric" pattern="[0-9]*" autocomplete="off";
        }
    }
}

/// "Today 50, tomorrow 100, then 200, 400, 800 …".
fn caps_in_words(caps: &[u64]) -> String {
    let mut words = String::new();
    for (day, cap) in caps.iter().enumerate() {
        let lead = match day {
            0 => "Today ",
            1 => ", tomorrow ",
            2 => ", then ",
            _ => ", ",
        };
        words.push_str(&format!("{lead}{cap}"));
    }
    words.push_str(" …");
    words
}

/// The "Warm-up" section.
pub fn warm_up_section(
    setup: &SendingSetup,
    typed: &WarmUpForm,
    problems: Markup,
    form: impl FnOnce(Markup) -> Markup,
) -> Markup {
    let today = relays::today();
    html! {
        section.panel #(WARM_UP_ANCHOR) {
            h2 { "Warm-up of a new sending domain" }
            p.muted { "Mail services trust a new sending domain slowly. While the warm-up is on, this newsletter sends at most a daily cap of messages each day (UTC), a cap that grows by a factor each day; what is left of a send waits for the next day. Off by default." }
            @match &setup.warm_up {
                None => { p #warm-up-state data-state="off" { "The warm-up is off: no daily cap." } }
                Some(plan) => {
                    p #warm-up-state data-state="on" {
                        "The warm-up is on since " (plan.started_on) " (UTC). "
                        strong #warm-up-today data-cap=(plan.daily_cap(today)) { (caps_in_words(&plan.caps_from(today, 5))) }
                    }
                }
            }
            (problems)
            (form(html! {
                label.check {
                    input type="checkbox" name="warmup[enabled]" value="on" checked[typed.enabled];
                    "Cap the messages sent each day"
                }
                label {
                    "Cap of the first day (messages, default " (relays::WARM_UP_FIRST_DAY_DEFAULT) ")"
                    input type="text" name="warmup[first_day_cap]" value=(typed.first_day_cap) inputmode="numeric" pattern="[0-9]*" placeholder=(relays::WARM_UP_FIRST_DAY_DEFAULT) autocomplete="off";
                }
                label {
                    "Growth each day (a factor from " (relays::WARM_UP_FACTOR_MIN) " to " (relays::WARM_UP_FACTOR_MAX) ", default " (relays::WARM_UP_FACTOR_DEFAULT) ": the cap doubles)"
                    input type="text" name="warmup[factor]" value=(typed.factor) inputmode="decimal" placeholder=(relays::WARM_UP_FACTOR_DEFAULT) autocomplete="off";
                }
            }))
        }
    }
}
