//! Turns an issue into e-mail: its HTML (rendered from Markdown when the content was saved,
//! GFM, raw HTML escaped) wrapped once per send, then per recipient only the personal parts:
//! signed click links, the open pixel, the unsubscribe link.

use maud::{DOCTYPE, PreEscaped, html};

use super::OutgoingMail;
use crate::domain::issues::Issue;
use crate::domain::newsletters::Newsletter;
use crate::domain::tracking::Links;

/// Markdown to HTML as everywhere in Broadsheet: GitHub-flavoured, raw HTML escaped,
/// dangerous link schemes emptied.
pub fn markdown_to_html(source: &str) -> String {
    markdown::to_html_with_options(source, &markdown::Options::gfm())
        .unwrap_or_else(|_| markdown::to_html(source))
}

/// Text as HTML paragraphs (split at blank lines), escaped, without rendering any Markdown:
/// the body of an issue whose HTML is not stored (docs/security.md). Linear in the text.
pub fn plain_paragraphs(text: &str) -> String {
    let paragraphs = text.split("\n\n").map(str::trim).filter(|p| !p.is_empty());
    html! { @for paragraph in paragraphs { p { (paragraph) } } }.into_string()
}

/// A piece of the rendered body: fixed text, or a link target to personalise.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Link(String),
    /// A tracked link: its query part, the same for every recipient, escaped for the
    /// attribute.
    Tracked(String),
}

/// Splits rendered HTML at every `href="…"` value. The Markdown renderer escapes all other
/// HTML, so these are exactly the reader's links.
fn split_links(html: &str) -> Vec<Piece> {
    const MARK: &str = "href=\"";
    let mut pieces = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(MARK) {
        let (before, after) = rest.split_at(start + MARK.len());
        let Some(end) = after.find('"') else { break };
        pieces.push(Piece::Text(before.to_string()));
        pieces.push(Piece::Link(unescape_attr(&after[..end])));
        rest = &after[end..];
    }
    pieces.push(Piece::Text(rest.to_string()));
    pieces
}

fn unescape_attr(value: &str) -> String {
    value
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn escape_attr(value: &str) -> String {
    if !value.contains(['&', '"', '<', '>']) {
        return value.to_string();
    }
    value
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Where the open pixel goes. Raw HTML, so no text of the issue can produce it: the Markdown
/// renderer and the template escape every `<` of the author's content.
const PIXEL_MARK: &str = "<!--broadsheet:pixel-->";

/// An issue ready to personalise, built once per send.
pub struct IssueEmail {
    pieces: Vec<Piece>,
    text: String,
    subject: String,
    from_name: String,
    from_email: String,
    list_id: String,
    message_domain: String,
    links: Links,
}

impl IssueEmail {
    pub fn new(issue: &Issue, newsletter: &Newsletter, links: Links) -> Self {
        let body_html = issue.body_html();
        let html = html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (issue.subject) }
                    style { (PreEscaped(EMAIL_CSS)) }
                }
                body {
                    div.wrap {
                        p.masthead { (newsletter.name) }
                        h1 { (issue.subject) }
                        div.content { (PreEscaped(&*body_html)) }
                        @if !issue.articles.is_empty() {
                            div.articles {
                                @for article in &issue.articles {
                                    div.article {
                                        h2 { a href=(article.url) { (article.title) } }
                                        @if !article.summarized_article.is_empty() { p { (article.summarized_article) } }
                                    }
                                }
                            }
                        }
                        p.footer {
                            "You receive " (newsletter.name) " because you subscribed. "
                            a href="{{unsubscribe}}" { "Unsubscribe" }
                        }
                    }
                    (PreEscaped(PIXEL_MARK))
                }
            }
        }
        .into_string();
        let mut text = format!(
            "{}\n{}\n\n{}\n",
            issue.subject,
            "=".repeat(issue.subject.chars().count().min(72)),
            issue.content_markdown.trim()
        );
        for article in &issue.articles {
            text.push_str(&format!("\n## {}\n{}\n", article.title, article.url));
            if !article.summarized_article.is_empty() {
                text.push_str(&format!("{}\n", article.summarized_article));
            }
        }
        let message_domain = newsletter
            .sender_email
            .rsplit_once('@')
            .map(|(_, d)| d.to_string())
            .unwrap_or_else(|| links.host());
        // The parts of tracked links that do not depend on the recipient, computed once.
        let pieces = split_links(&html)
            .into_iter()
            .map(|piece| match piece {
                Piece::Link(target) if target != "{{unsubscribe}}" => {
                    match links.click_query(&target) {
                        Some(query) => Piece::Tracked(escape_attr(&query)),
                        None => Piece::Text(escape_attr(&target)),
                    }
                }
                other => other,
            })
            .collect();
        IssueEmail {
            pieces,
            text,
            subject: issue.subject.clone(),
            from_name: newsletter.sender_name.clone(),
            from_email: if newsletter.sender_email.is_empty() {
                format!("newsletter@{}", links.host())
            } else {
                newsletter.sender_email.clone()
            },
            // A raw header: control characters go too, for names stored before they were
            // refused (docs/security.md, "Names that go into mail headers").
            list_id: format!(
                "{} <{}.{}>",
                newsletter
                    .name
                    .replace(|c: char| c.is_control() || matches!(c, '<' | '>' | '"'), ""),
                newsletter.subdomain,
                links.host()
            ),
            message_domain,
            links,
        }
    }

    /// The message for one recipient of delivery `delivery_id`.
    pub fn personalise(&self, delivery_id: i64, to: &str) -> OutgoingMail {
        let unsubscribe = self.links.unsubscribe(delivery_id);
        let click_prefix = escape_attr(&self.links.click_prefix(delivery_id));
        let mut html = String::with_capacity(
            self.pieces
                .iter()
                .map(|p| match p {
                    Piece::Text(t) => t.len(),
                    Piece::Link(l) => l.len() + 80,
                    Piece::Tracked(query) => query.len() + 80,
                })
                .sum(),
        );
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) if text.contains(PIXEL_MARK) => {
                    let pixel = match self.links.open_pixel(delivery_id) {
                        Some(url) => format!(
                            "<img src=\"{}\" width=\"1\" height=\"1\" alt=\"\" style=\"display:block;border:0\">",
                            escape_attr(&url)
                        ),
                        None => String::new(),
                    };
                    html.push_str(&text.replace(PIXEL_MARK, &pixel));
                }
                Piece::Text(text) => html.push_str(text),
                Piece::Link(target) if target == "{{unsubscribe}}" => {
                    html.push_str(&escape_attr(&unsubscribe))
                }
                Piece::Link(target) => {
                    html.push_str(&escape_attr(&self.links.click(delivery_id, target)))
                }
                Piece::Tracked(query) => {
                    html.push_str(&click_prefix);
                    html.push_str(query);
                }
            }
        }
        let text = format!("{}\n-- \nUnsubscribe: {unsubscribe}\n", self.text);
        OutgoingMail {
            from_name: self.from_name.clone(),
            from_email: self.from_email.clone(),
            to: to.to_string(),
            subject: self.subject.clone(),
            text,
            html,
            headers: vec![
                ("List-Id".into(), self.list_id.clone()),
                ("List-Unsubscribe".into(), format!("<{unsubscribe}>")),
                (
                    "List-Unsubscribe-Post".into(),
                    "List-Unsubscribe=One-Click".into(),
                ),
                ("Precedence".into(), "bulk".into()),
            ],
            message_id: Some(format!(
                "issue-d{delivery_id}.{}@{}",
                crate::domain::secrets::random_hex(6),
                self.message_domain
            )),
            primary_link: None,
        }
    }
}

const EMAIL_CSS: &str = "body{margin:0;padding:0;background:#f4f5f7;color:#1d2330;font:16px/1.6 -apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif}\
.wrap{max-width:600px;margin:0 auto;padding:24px 20px;background:#fff}\
.masthead{font-size:13px;letter-spacing:.08em;text-transform:uppercase;color:#5b6474;margin:0 0 8px}\
h1{font-size:26px;line-height:1.25;margin:0 0 16px}h2{font-size:19px;margin:20px 0 4px}\
a{color:#1d4ed8}img{max-width:100%;height:auto}pre{overflow-x:auto;background:#f4f5f7;padding:12px}\
.article{border-top:1px solid #e3e6eb;padding-top:8px}.footer{margin-top:32px;font-size:13px;color:#5b6474}\
@media (max-width:480px){.wrap{padding:16px 12px}h1{font-size:22px}}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_escapes_raw_html_and_dangerous_links() {
        let html = markdown_to_html("<script>alert(1)</script>\n\n[x](javascript:alert(1)) **b**");
        assert!(!html.contains("<script>"));
        assert!(!html.contains("javascript:"));
        assert!(html.contains("<strong>b</strong>"));
    }

    #[test]
    fn placeholder_lookalikes_in_content_stay_text() {
        let html = markdown_to_html("a {{pixel}} b <!--broadsheet:pixel--> c");
        assert!(!html.contains(PIXEL_MARK), "{html}");
    }

    #[test]
    fn plain_paragraphs_escape_and_render_nothing() {
        assert_eq!(
            plain_paragraphs("**a** <b>\n\n\n# c\n"),
            "<p>**a** &lt;b&gt;</p><p># c</p>"
        );
    }

    #[test]
    fn a_stored_name_with_line_breaks_cannot_add_a_header() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute_batch(
            "UPDATE newsletters SET name = 'News\r\nBcc: all@example.com';
             INSERT INTO issues (newsletter_id, subject, content_markdown, content_html, path, created_at, updated_at)
               VALUES (1, 'S', 'x', '<p>x</p>', 's', 'n', 'n');",
        )
        .unwrap();
        let newsletter = crate::domain::newsletters::get(&conn, 1).unwrap();
        let issue = crate::domain::issues::get(&conn, 1, 1).unwrap();
        let secret = crate::domain::secrets::ServerSecret::load_or_create(&conn).unwrap();
        let links = Links::new("http://n.localhost", 1, secret, false);
        let mail = IssueEmail::new(&issue, &newsletter, links).personalise(1, "r@x.co");
        let (_, list_id) = mail.headers.iter().find(|(h, _)| h == "List-Id").unwrap();
        assert_eq!(list_id, "NewsBcc: all@example.com <n.n.localhost>");
    }

    #[test]
    fn splits_links_and_unescapes_targets() {
        let pieces = split_links("<p><a href=\"https://x.com/?a=1&amp;b=2\">x</a> y</p>");
        assert_eq!(pieces[1], Piece::Link("https://x.com/?a=1&b=2".into()));
        assert_eq!(pieces.len(), 3);
    }
}
