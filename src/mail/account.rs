//! The mail an account receives from the service itself: e-mail confirmation, password
//! reset, and for operators the owners' upgrade requests. Short, plain, with the link in both parts.

use maud::{DOCTYPE, html};

/// Subject, text and HTML of one account message.
pub struct AccountMessage {
    pub subject: String,
    pub text: String,
    pub html: String,
    pub link: String,
}

/// Who signs the service's own mail.
const SERVICE: &str = "Broadsheet";

/// One message, signed `signature`: the service, or the newsletter the reader asked for.
fn message(
    subject: &str,
    intro: &str,
    action: &str,
    link: &str,
    outro: &str,
    signature: &str,
) -> AccountMessage {
    let text = format!("{intro}\n\n{action}:\n{link}\n\n{outro}\n\n-- \n{signature}\n");
    let html = html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { (subject) } }
            body style="font-family: system-ui, sans-serif; color: #1d2330; max-width: 36rem; margin: 0 auto; padding: 1.5rem;" {
                p { (intro) }
                p { a href=(link) style="display:inline-block;background:#1d4ed8;color:#fff;padding:.6rem 1rem;border-radius:6px;text-decoration:none;" { (action) } }
                p style="font-size: .9em; color: #555;" { "Or paste this address into your browser: " br; (link) }
                p style="font-size: .9em; color: #555;" { (outro) }
                p style="font-size: .9em; color: #555;" { "— " (signature) }
            }
        }
    };
    AccountMessage {
        subject: subject.to_string(),
        text,
        html: html.into_string(),
        link: link.to_string(),
    }
}

pub fn confirmation(link: &str) -> AccountMessage {
    message(
        "Confirm your Broadsheet account",
        "Welcome to Broadsheet! Please confirm your e-mail address to finish creating your account.",
        "Confirm my e-mail address",
        link,
        "The link works once and expires in 24 hours. If you did not sign up, ignore this message.",
        SERVICE,
    )
}

pub fn password_reset(link: &str) -> AccountMessage {
    message(
        "Reset your Broadsheet password",
        "Someone (hopefully you) asked to reset the password of your Broadsheet account.",
        "Choose a new password",
        link,
        "The link works once and expires in 1 hour. If you did not ask for this, ignore this message: your password stays as it is.",
        SERVICE,
    )
}

/// Asks the new address of an account to confirm that the account moves to it.
pub fn email_change(old_email: &str, link: &str) -> AccountMessage {
    message(
        "Confirm your new Broadsheet address",
        &format!("The Broadsheet account of {old_email} asked to use this address from now on."),
        "Use this address",
        link,
        "The link works once and expires in 24 hours. Until it is followed the account keeps its old address. If you did not ask for this, ignore this message.",
        SERVICE,
    )
}

/// Tells the old address of an account that the account now uses `new_email`.
pub fn email_changed(new_email: &str, link: &str) -> AccountMessage {
    message(
        "Your Broadsheet account has a new address",
        &format!(
            "Your Broadsheet account now uses the address {new_email}, and mail about it goes there. It signs in with that address."
        ),
        "Sign in",
        link,
        "If you did not make this change, write to the operator of this Broadsheet installation at once.",
        SERVICE,
    )
}

/// The double opt-in mail of a newsletter's subscribe form.
pub fn subscription_confirmation(newsletter_name: &str, link: &str) -> AccountMessage {
    message(
        &format!("Confirm your subscription to {newsletter_name}"),
        &format!("Someone (hopefully you) asked to subscribe this address to {newsletter_name}."),
        "Yes, subscribe me",
        link,
        "The link works once and expires in 7 days. If you did not ask for this, ignore this message: you will not be subscribed.",
        newsletter_name,
    )
}

/// A reader's one-time sign-in link to a newsletter's site.
pub fn reader_sign_in(newsletter_name: &str, link: &str) -> AccountMessage {
    message(
        &format!("Sign in to {newsletter_name}"),
        &format!(
            "Someone (hopefully you) asked to sign in to {newsletter_name} with this address."
        ),
        "Sign in",
        link,
        "The link works once and expires in 15 minutes. If you did not ask for it, ignore this message: nobody signs in without it.",
        newsletter_name,
    )
}

/// Confirms the new address of a newsletter's reader.
pub fn reader_email_change(newsletter_name: &str, link: &str) -> AccountMessage {
    message(
        &format!("Confirm your new address for {newsletter_name}"),
        &format!("A reader of {newsletter_name} asked to receive it at this address from now on."),
        "Use this address",
        link,
        "The link works once and expires in 15 minutes. Until it is followed, mail keeps going to the old address. If you did not ask for this, ignore this message.",
        newsletter_name,
    )
}

/// Tells an operator that an owner asks for the paid tier; the link is the operator page.
pub fn upgrade_request(
    newsletter_name: &str,
    subdomain: &str,
    owner_email: &str,
    link: &str,
) -> AccountMessage {
    message(
        &format!("{newsletter_name} asks for the paid tier"),
        &format!(
            "{owner_email}, the owner of the newsletter {newsletter_name} ({subdomain}), asks for the paid tier, which sending e-mail needs. Its tier is pending until you answer."
        ),
        "Open the operator page",
        link,
        &format!(
            "You get this message as an operator of this Broadsheet installation. The tier can also be set with: broadsheet tier {subdomain} paid"
        ),
        SERVICE,
    )
}
