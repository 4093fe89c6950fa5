//! "Send a test" in the dashboard: the form on the issue page, its preview, under the issue
//! editor and on the send confirmation, and its own page (`.../send_test`), where bad input comes back with its
//! messages. The rules are `domain::issues::test_send`'s.

use maud::{Markup, html};
use poem::web::{Data, Path};
use poem::{Body, Request, handler, http::StatusCode};

use super::{Posted, issue_url, posted, problems, render, viewed};
use crate::domain::FieldErrors;
use crate::domain::issues::Issue;
use crate::domain::issues::test_send::{self, MAX_RECIPIENTS};
use crate::domain::newsletters::Newsletter;
use crate::web::layout::{Section, csrf_field, errors, newsletter_page};
use crate::web::{Ctx, FormData, State, WebResult, see_other};

/// The pages a test can be asked from, where the answer goes back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskedFrom {
    Editor,
    SendPage,
    TestPage,
    IssuePage,
    PreviewPage,
}

impl AskedFrom {
    fn as_str(self) -> &'static str {
        match self {
            AskedFrom::Editor => "edit",
            AskedFrom::SendPage => "send",
            AskedFrom::TestPage => "send_test",
            AskedFrom::IssuePage => "issue",
            AskedFrom::PreviewPage => "preview",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "edit" => AskedFrom::Editor,
            "send" => AskedFrom::SendPage,
            "issue" => AskedFrom::IssuePage,
            "preview" => AskedFrom::PreviewPage,
            _ => AskedFrom::TestPage,
        }
    }
}

/// The form: `emails` prefilled with `typed`, or with the owner's address when empty.
pub fn form(ctx: &Ctx, n: &Newsletter, issue: &Issue, typed: &str, from: AskedFrom) -> Markup {
    let owner = ctx.user.as_ref().map(|u| u.email.as_str()).unwrap_or("");
    let value = if typed.trim().is_empty() {
        owner
    } else {
        typed
    };
    html! {
        section.test-send aria-labelledby="test-send-title" {
            h2 #test-send-title { "Send a test" }
            form.stack method="post" action={ (issue_url(n.id, issue.id)) "/send_test" } {
                (csrf_field(ctx))
                input type="hidden" name="from" value=(from.as_str());
                label {
                    "Send the saved issue, marked “[Test]”, to"
                    textarea name="emails" rows="2" autocomplete="email" spellcheck="false" { (value) }
                }
                p.muted {
                    "Up to " (MAX_RECIPIENTS) " addresses, separated by commas or lines. "
                    "Its links work but are not counted; subscribers get nothing."
                }
                div.buttons { button.secondary type="submit" { "Send a test" } }
            }
        }
    }
}

/// The test form's own page, with the messages of a refused request.
fn page(ctx: &Ctx, n: &Newsletter, issue: &Issue, typed: &str, found: &FieldErrors) -> Markup {
    let base = issue_url(n.id, issue.id);
    newsletter_page(
        ctx,
        n,
        Section::Issues,
        "Send a test",
        html! {
            p { a href=(base) { "← " (issue.subject) } }
            h1 { "Send a test of “" (issue.subject) "”" }
            (errors(found))
            (form(ctx, n, issue, typed, AskedFrom::TestPage))
        },
    )
}

/// `GET .../send_test`: the form alone.
#[handler]
pub async fn test_form(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    Data(state): Data<&State>,
) -> WebResult {
    let (ctx, n, issue) = viewed(req, state, &id, &issue_id).await?;
    render(
        StatusCode::OK,
        page(&ctx, &n, &issue, "", &FieldErrors::new()),
    )
}

/// `POST .../send_test` with `emails`: queues the test and goes back to the page it was
/// asked from with a notice; bad input shows the form again with its messages (422).
#[handler]
pub async fn send_test(
    req: &Request,
    Path((id, issue_id)): Path<(String, String)>,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let Posted {
        ctx,
        n,
        issue,
        form,
    } = posted(req, state, &id, &issue_id, FormData::read(body).await?).await?;
    let typed = form.get("emails").to_string();
    let back = match AskedFrom::parse(form.get("from")) {
        AskedFrom::Editor => format!("{}/edit", issue_url(n.id, issue.id)),
        AskedFrom::SendPage => format!("{}/send", issue_url(n.id, issue.id)),
        AskedFrom::TestPage | AskedFrom::IssuePage => issue_url(n.id, issue.id),
        AskedFrom::PreviewPage => format!("{}/preview", issue_url(n.id, issue.id)),
    };
    let (nid, iid, addresses) = (n.id, issue.id, test_send::split_addresses(&typed));
    let queued = state
        .db
        .run_after(
            move || test_send::check_recipients(&addresses),
            move |conn, recipients| test_send::queue(conn, nid, iid, recipients),
        )
        .await;
    match queued {
        Ok(queued) => {
            let emails: Vec<&str> = queued.recipients.iter().map(|e| e.as_str()).collect();
            ctx.notice_next(
                req,
                &format!(
                    "Test of “{}” on its way to {}.",
                    queued.issue.subject,
                    emails.join(", ")
                ),
            );
            see_other(&back)
        }
        Err(e) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            page(&ctx, &n, &issue, &typed, &problems(e)?),
        ),
    }
}
