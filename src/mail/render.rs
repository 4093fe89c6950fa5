//! Turns an issue, and a newsletter's welcome e-mail, into e-mail: its HTML (rendered from
//! Markdown when the content was saved, GFM, raw HTML escaped) wrapped once per send, with the
//! text part the domain renders from the same Markdown (`domain::content::markdown_text`), then per
//! recipient only the personal parts: signed click links, the open
//! pixel, the unsubscribe link. The MIME message itself is encoded once per send too
//! (quoted-printable in pieces, see `qp`): a recipient's copy encodes only its personal
//! strings and copies everything else.

use std::ops::Range;

use mail_send::mail_builder::headers::Header;
use mail_send::mail_builder::headers::address::Address;
use mail_send::mail_builder::headers::date::Date;
use mail_send::mail_builder::headers::raw::Raw;
use mail_send::mail_builder::headers::text::Text;
use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::smtp::dot_free;
use super::{Mime, OutgoingMail, qp, seven_bit};
use crate::domain::content::merge_tags::{self, Part, Reader, Tag};
use crate::domain::delivery::tracking::Links;
use crate::domain::issues::Issue;
use crate::domain::newsletters::Newsletter;

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

/// A personal part of one recipient's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// The `To`, `Date`, `Message-ID` and `List-Unsubscribe` headers.
    Headers,
    /// The delivery's part of a tracked link, in the HTML part.
    ClickPrefix,
    /// The open pixel, in the HTML part.
    Pixel,
    /// The unsubscribe address in the HTML part.
    UnsubscribeHtml,
    /// The unsubscribe address in the text part.
    UnsubscribeText,
    /// The reader's value of merge tag N (of `IssueEmail::tags`), escaped, in the HTML part.
    MergeHtml(usize),
    /// The same in the text part.
    MergeText(usize),
}

/// One part of a MIME body before it is encoded: text every recipient gets, or a slot.
enum BodyPiece {
    Fixed(String),
    Slot(Slot),
}

/// The message every recipient of a send gets, encoded once: fixed bytes and, between them,
/// the slots each copy fills in.
struct Template {
    bytes: Vec<u8>,
    segments: Vec<Segment>,
    /// The HTML part is 7bit (see `seven_bit`), not quoted-printable.
    html_7bit: bool,
}

impl Template {
    /// No fixed segment has a line that starts with a dot (each segment's start counted as
    /// the start of a line).
    fn dot_free(&self) -> bool {
        self.segments.iter().all(|segment| match segment {
            Segment::Fixed(range) => dot_free(&self.bytes[range.clone()]),
            Segment::Slot(_) => true,
        })
    }
}

#[derive(PartialEq)]
enum Segment {
    Fixed(Range<usize>),
    Slot(Slot),
}

impl Template {
    fn has(&self, slot: Slot) -> bool {
        self.segments.contains(&Segment::Slot(slot))
    }

    fn fixed(&mut self, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        match self.segments.last_mut() {
            Some(Segment::Fixed(range)) if range.end == start => range.end = self.bytes.len(),
            _ => self.segments.push(Segment::Fixed(start..self.bytes.len())),
        }
    }

    /// A body part in quoted-printable: adjacent fixed text is encoded as one piece, and
    /// every piece but the last ends with a soft line break, so each slot starts a line.
    fn body(&mut self, pieces: Vec<BodyPiece>) {
        let mut merged: Vec<BodyPiece> = Vec::with_capacity(pieces.len());
        for piece in pieces {
            match (merged.last_mut(), piece) {
                (Some(BodyPiece::Fixed(text)), BodyPiece::Fixed(more)) => text.push_str(&more),
                (_, piece) => merged.push(piece),
            }
        }
        let last = merged.len().saturating_sub(1);
        for (n, piece) in merged.into_iter().enumerate() {
            match piece {
                BodyPiece::Fixed(text) => {
                    let mut encoded = Vec::new();
                    qp::encode_piece(&mut encoded, text.as_bytes(), n < last);
                    self.fixed(&encoded);
                }
                BodyPiece::Slot(slot) => self.segments.push(Segment::Slot(slot)),
            }
        }
    }
}

/// A MIME boundary: `=_` never occurs in quoted-printable, so no body line can match it.
fn boundary() -> String {
    format!("bs=_{}", crate::domain::values::secrets::random_hex(16))
}

/// Writes one header with mail-builder's encoding and folding.
fn header(out: &mut Vec<u8>, name: &str, value: &impl Header) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    value.write_header(out, name.len() + 2);
}

/// An issue ready to personalise, built once per send.
pub struct IssueEmail {
    pieces: Vec<Piece>,
    /// The content's merge tags, each once (`domain::content::merge_tags`).
    tags: Vec<Tag>,
    template: Template,
    /// See [`Template::dot_free`].
    template_dot_free: bool,
    text: String,
    subject: String,
    /// The subject has merge tags (each recipient's `Subject` header is their own).
    subject_personal: bool,
    from_name: String,
    from_email: String,
    /// The newsletter's reply-to address, when it has one.
    reply_to: Option<String>,
    list_id: String,
    /// Gmail's feedback loop groups complaints by this (docs/deliverability.md).
    feedback_id: String,
    message_domain: String,
    links: Links,
}

impl IssueEmail {
    /// `public_host` is the host the newsletters' subdomains hang off (`--public-host`,
    /// without its port): List-Id and Feedback-ID name the newsletter under it, whichever
    /// domain its links use. `body_text` is the issue's content as plain text
    /// (`domain::content::plain_text`, rendered within the render budget).
    pub fn new(
        issue: &Issue,
        newsletter: &Newsletter,
        public_host: &str,
        links: Links,
        body_text: &str,
    ) -> Self {
        let body_html = inline_styles(&issue.body_html());
        let view = links.view(issue.id);
        let html = frame(
            newsletter,
            &links.site_home(),
            &issue.subject,
            html! {
                p.view { a href=(view) { "View in your browser" } }
            },
            html! {
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
            },
            "{{unsubscribe}}",
            PreEscaped(PIXEL_MARK),
        );
        // The text part: the address of the web copy, the subject, the content as text,
        // the articles, then the footer's postal address.
        let mut text = format!(
            "View in your browser: {view}\n\n{}",
            text_part(&issue.subject, body_text)
        );
        for article in &issue.articles {
            text.push_str(&format!(
                "\n{}\n{}\n{}\n",
                article.title,
                "-".repeat(article.title.chars().count().min(72)),
                article.url
            ));
            if !article.summarized_article.is_empty() {
                text.push_str(&format!("{}\n", article.summarized_article));
            }
        }
        text.push_str(&postal_text(newsletter));
        let message_domain = newsletter
            .sender_email
            .rsplit_once('@')
            .map(|(_, d)| d.to_string())
            .unwrap_or_else(|| links.host());
        // The parts of tracked links that do not depend on the recipient, computed once. The
        // mail's own links (the web copy, the site's home) are not the content's: untracked.
        let home = links.site_home();
        let pieces: Vec<Piece> = split_links(&html)
            .into_iter()
            .map(|piece| match piece {
                Piece::Link(target) if target == view || target == home => {
                    Piece::Text(escape_attr(&target))
                }
                Piece::Link(target) if target != "{{unsubscribe}}" => {
                    match links.click_query(&target) {
                        Some(query) => Piece::Tracked(escape_attr(&query)),
                        None => Piece::Text(escape_attr(&target)),
                    }
                }
                other => other,
            })
            .collect();
        let sender = newsletter.sender(&links.host());
        let mut tags: Vec<Tag> = Vec::new();
        let html_texts = pieces.iter().filter_map(|p| match p {
            Piece::Text(t) => Some((t.as_str(), true)),
            _ => None,
        });
        for (text, html) in html_texts.chain([(text.as_str(), false)]) {
            for part in merge_tags::split(text, html) {
                if let Part::Tag(tag) = part
                    && !tags.contains(&tag)
                {
                    tags.push(tag);
                }
            }
        }
        let mut email = IssueEmail {
            template_dot_free: false,
            pieces,
            tags,
            template: Template {
                bytes: Vec::new(),
                segments: Vec::new(),
                html_7bit: false,
            },
            text,
            subject_personal: merge_tags::split(&issue.subject, false)
                .iter()
                .any(|part| matches!(part, Part::Tag(_))),
            subject: issue.subject.clone(),
            from_name: sender.name,
            from_email: sender.email,
            reply_to: newsletter.mail.reply_to.clone(),
            list_id: list_id(newsletter, public_host),
            feedback_id: feedback_id(issue.id, newsletter.id, public_host),
            message_domain,
            links,
        };
        email.template = email.template();
        email.template_dot_free = email.template.dot_free();
        email
    }

    /// The same message under another `Subject` header (a test send's "[Test] " mark); the
    /// body keeps the issue's own subject as its title.
    pub fn with_subject(mut self, subject: String) -> Self {
        self.subject = subject;
        self.template = self.template();
        self.template_dot_free = self.template.dot_free();
        self
    }

    /// The MIME message with a slot for each personal part, as [`IssueEmail::personalise`]
    /// and [`OutgoingMail::to_mime`] would make it.
    fn template(&self) -> Template {
        let mut template = Template {
            bytes: Vec::new(),
            segments: Vec::new(),
            html_7bit: false,
        };
        let mut head = Vec::new();
        header(
            &mut head,
            "From",
            &Address::from((self.from_name.as_str(), self.from_email.as_str())),
        );
        // A subject with merge tags is each reader's own: in the personal headers.
        if !self.subject_personal {
            header(&mut head, "Subject", &Text::new(self.subject.as_str()));
        }
        if let Some(reply_to) = &self.reply_to {
            header(
                &mut head,
                "Reply-To",
                &Address::new_address(None::<&str>, reply_to.as_str()),
            );
        }
        template.fixed(&head);
        template.segments.push(Segment::Slot(Slot::Headers));
        let boundary = boundary();
        let mut head = Vec::new();
        header(&mut head, "List-Id", &Raw::new(self.list_id.as_str()));
        header(
            &mut head,
            "Feedback-ID",
            &Raw::new(self.feedback_id.as_str()),
        );
        head.extend_from_slice(
            format!(
                "List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n\
                 Precedence: bulk\r\n\
                 MIME-Version: 1.0\r\n\
                 Content-Type: multipart/alternative;\r\n boundary=\"{boundary}\"\r\n\r\n"
            )
            .as_bytes(),
        );
        template.fixed(&head);
        let part_head = |kind: &str, encoding: &str| {
            format!(
                "--{boundary}\r\nContent-Type: text/{kind}; charset=\"utf-8\"\r\n\
                 Content-Transfer-Encoding: {encoding}\r\n\r\n"
            )
        };
        template.fixed(part_head("plain", "quoted-printable").as_bytes());
        let mut text = self.merged(&self.text, false, Slot::MergeText);
        text.extend([
            BodyPiece::Fixed(format!("\n-- \n{FOOTER_LINK}: ")),
            BodyPiece::Slot(Slot::UnsubscribeText),
            BodyPiece::Fixed("\n".into()),
        ]);
        template.body(text);
        let mut html = Vec::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => match text.split_once(PIXEL_MARK) {
                    Some((before, after)) => {
                        html.extend(self.merged(before, true, Slot::MergeHtml));
                        if self.links.open_pixel(0).is_some() {
                            html.push(BodyPiece::Slot(Slot::Pixel));
                        }
                        html.extend(self.merged(after, true, Slot::MergeHtml));
                    }
                    None => html.extend(self.merged(text, true, Slot::MergeHtml)),
                },
                Piece::Link(target) if target == "{{unsubscribe}}" => {
                    html.push(BodyPiece::Slot(Slot::UnsubscribeHtml))
                }
                Piece::Link(target) => html.push(BodyPiece::Fixed(escape_attr(target))),
                Piece::Tracked(query) => {
                    html.push(BodyPiece::Slot(Slot::ClickPrefix));
                    html.push(BodyPiece::Fixed(query.clone()));
                }
            }
        }
        // The HTML as 7bit lines where it can be laid out so (the personal strings go in as
        // they are), quoted-printable where not.
        let widest = |slot: Slot| match slot {
            Slot::ClickPrefix => escape_attr(&self.links.click_prefix(i64::MAX)),
            Slot::Pixel => self
                .links
                .open_pixel(i64::MAX)
                .map(|url| pixel_html(&url))
                .unwrap_or_default(),
            Slot::UnsubscribeHtml => escape_attr(&self.links.unsubscribe(i64::MAX)),
            Slot::Headers | Slot::UnsubscribeText | Slot::MergeHtml(_) | Slot::MergeText(_) => {
                String::new()
            }
        };
        // Readers' values have no known width or alphabet: quoted-printable.
        let mut personal_ascii = self.tags.is_empty();
        let pieces: Vec<seven_bit::Piece<Slot>> = html
            .iter()
            .map(|piece| match piece {
                BodyPiece::Fixed(text) => seven_bit::Piece::Fixed(text.clone()),
                BodyPiece::Slot(slot) => {
                    let widest = widest(*slot);
                    personal_ascii &= widest.is_ascii();
                    seven_bit::Piece::Slot(*slot, widest.len())
                }
            })
            .collect();
        match seven_bit::lay_out(&pieces).filter(|_| personal_ascii) {
            Some(laid) => {
                template.html_7bit = true;
                template.fixed(format!("\r\n{}", part_head("html", "7bit")).as_bytes());
                for part in laid {
                    match part {
                        seven_bit::Laid::Fixed(bytes) => template.fixed(&bytes),
                        seven_bit::Laid::Slot(slot) => template.segments.push(Segment::Slot(slot)),
                    }
                }
            }
            None => {
                template.fixed(format!("\r\n{}", part_head("html", "quoted-printable")).as_bytes());
                template.body(html);
            }
        }
        template.fixed(format!("\r\n--{boundary}--\r\n").as_bytes());
        template
    }

    /// The MIME message for one recipient of delivery `delivery_id`:
    /// [`IssueEmail::personalise`]'s message, encoded from the send's template. Known to be
    /// dot-free (no SMTP dot-stuffing needed) when the template and the personal parts are,
    /// which the encodings make sure of, so SMTP need not look through every message.
    pub fn message(&self, delivery_id: i64, to: &str, reader: &Reader) -> Mime {
        let unsubscribe = self.links.unsubscribe(delivery_id);
        let encoded = |text: &str| {
            let mut out = Vec::with_capacity(text.len() + 16);
            qp::encode_piece(&mut out, text.as_bytes(), true);
            out
        };
        let mut headers = Vec::with_capacity(256);
        if self.subject_personal {
            let subject = subject_of(&self.subject, reader);
            header(&mut headers, "Subject", &Text::new(subject.as_str()));
        }
        header(&mut headers, "To", &Address::new_address(None::<&str>, to));
        header(
            &mut headers,
            "Date",
            &Date::new(crate::clock::now().as_second()),
        );
        headers.extend_from_slice(
            format!(
                "Message-ID: <issue-d{delivery_id}.{}@{}>\r\n",
                crate::domain::values::secrets::random_hex(6),
                self.message_domain
            )
            .as_bytes(),
        );
        header(
            &mut headers,
            "List-Unsubscribe",
            &Raw::new(format!("<{unsubscribe}>")),
        );
        // The HTML part's personal strings go in as they are into 7bit lines.
        let html_encoded = |text: String| {
            if self.template.html_7bit {
                text.into_bytes()
            } else {
                encoded(&text)
            }
        };
        let unsubscribe_html = html_encoded(escape_attr(&unsubscribe));
        let unsubscribe_text = encoded(&unsubscribe);
        let click_prefix = if self.template.has(Slot::ClickPrefix) {
            html_encoded(escape_attr(&self.links.click_prefix(delivery_id)))
        } else {
            Vec::new()
        };
        let pixel = self
            .links
            .open_pixel(delivery_id)
            .map(|url| html_encoded(pixel_html(&url)))
            .unwrap_or_default();
        let values: Vec<String> = self.tags.iter().map(|tag| reader.value(tag)).collect();
        let merge_html: Vec<Vec<u8>> = values
            .iter()
            .map(|v| html_encoded(escape_attr(v)))
            .collect();
        let merge_text: Vec<Vec<u8>> = values.iter().map(|v| encoded(v)).collect();
        let personal = [
            &headers,
            &click_prefix,
            &pixel,
            &unsubscribe_html,
            &unsubscribe_text,
        ];
        let mut out = Vec::with_capacity(self.template.bytes.len() + 4096);
        for segment in &self.template.segments {
            let bytes: &[u8] = match segment {
                Segment::Fixed(range) => &self.template.bytes[range.clone()],
                Segment::Slot(Slot::Headers) => personal[0],
                Segment::Slot(Slot::ClickPrefix) => personal[1],
                Segment::Slot(Slot::Pixel) => personal[2],
                Segment::Slot(Slot::UnsubscribeHtml) => personal[3],
                Segment::Slot(Slot::UnsubscribeText) => personal[4],
                Segment::Slot(Slot::MergeHtml(n)) => &merge_html[*n],
                Segment::Slot(Slot::MergeText(n)) => &merge_text[*n],
            };
            out.extend_from_slice(bytes);
        }
        Mime {
            bytes: out,
            dot_free: self.template_dot_free
                && personal.iter().all(|part| dot_free(part))
                && merge_html.iter().chain(&merge_text).all(|v| dot_free(v)),
        }
    }

    /// The message for one recipient of delivery `delivery_id`.
    pub fn personalise(&self, delivery_id: i64, to: &str, reader: &Reader) -> OutgoingMail {
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
                    let pixel = self
                        .links
                        .open_pixel(delivery_id)
                        .map(|url| pixel_html(&url))
                        .unwrap_or_default();
                    let (before, after) = text.split_once(PIXEL_MARK).expect("contains it");
                    html.push_str(&filled(before, true, reader));
                    html.push_str(&pixel);
                    html.push_str(&filled(after, true, reader));
                }
                Piece::Text(text) => html.push_str(&filled(text, true, reader)),
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
        let text = format!(
            "{}\n-- \n{FOOTER_LINK}: {unsubscribe}\n",
            filled(&self.text, false, reader)
        );
        OutgoingMail {
            from_name: self.from_name.clone(),
            from_email: self.from_email.clone(),
            to: to.to_string(),
            subject: subject_of(&self.subject, reader),
            text,
            html,
            headers: reply_to_header(self.reply_to.as_deref())
                .into_iter()
                .chain([
                    ("List-Id".into(), self.list_id.clone()),
                    ("Feedback-ID".into(), self.feedback_id.clone()),
                    ("List-Unsubscribe".into(), format!("<{unsubscribe}>")),
                    (
                        "List-Unsubscribe-Post".into(),
                        "List-Unsubscribe=One-Click".into(),
                    ),
                    ("Precedence".into(), "bulk".into()),
                ])
                .collect(),
            message_id: Some(format!(
                "issue-d{delivery_id}.{}@{}",
                crate::domain::values::secrets::random_hex(6),
                self.message_domain
            )),
            primary_link: None,
        }
    }
}

impl IssueEmail {
    /// `text` as body pieces, each merge tag a slot made by `slot` (its index in `tags`).
    fn merged(&self, text: &str, html: bool, slot: fn(usize) -> Slot) -> Vec<BodyPiece> {
        if self.tags.is_empty() {
            return vec![BodyPiece::Fixed(text.to_string())];
        }
        merge_tags::split(text, html)
            .into_iter()
            .map(|part| match part {
                Part::Text(t) => BodyPiece::Fixed(t.to_string()),
                Part::Tag(tag) => {
                    let n = self.tags.iter().position(|t| *t == tag).expect("collected");
                    BodyPiece::Slot(slot(n))
                }
            })
            .collect()
    }

    /// Whether the content has merge tags, so its send reads each reader's values.
    pub fn has_merge_tags(&self) -> bool {
        !self.tags.is_empty()
    }
}

/// The subject `subject` for `reader`, its merge tags filled: one line whatever a value holds
/// (a line break in a value would start a header of its own).
fn subject_of(subject: &str, reader: &Reader) -> String {
    filled(subject, false, reader)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `text` with each merge tag replaced by `reader`'s value (escaped when `html`).
fn filled(text: &str, html: bool, reader: &Reader) -> String {
    merge_tags::split(text, html)
        .into_iter()
        .map(|part| match part {
            Part::Text(t) => t.to_string(),
            Part::Tag(tag) if html => escape_attr(&reader.value(&tag)),
            Part::Tag(tag) => reader.value(&tag),
        })
        .collect()
}

/// The words of the footer's link in every mail: it leads to the page where a reader
/// unsubscribes, or opens their preferences instead (docs/growth.md, "The preference centre").
const FOOTER_LINK: &str = "Unsubscribe or change your preferences";

/// The HTML of a newsletter's e-mail: `top` (the issue's "view in your browser" link), its
/// name as masthead linking its site at `home`, `subject` as title, `content`, the footer
/// with the postal address and the unsubscribe link `unsubscribe`, then `tail`.
fn frame(
    newsletter: &Newsletter,
    home: &str,
    subject: &str,
    top: Markup,
    content: Markup,
    unsubscribe: &str,
    tail: PreEscaped<&str>,
) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (subject) }
                style { (PreEscaped(EMAIL_CSS)) }
            }
            body {
                div.wrap {
                    (top)
                    p.masthead { a href=(home) { (newsletter.name) } }
                    h1 { (subject) }
                    (content)
                    p.footer {
                        "You receive " a href=(home) { (newsletter.name) } " because you subscribed. "
                        a href=(unsubscribe) { (FOOTER_LINK) }
                        @for line in newsletter.mail.postal_lines() {
                            br; (line)
                        }
                    }
                }
                (tail)
            }
        }
    }
    .into_string()
}

/// The postal address of the newsletter's footer in a text part, after a blank line; empty
/// without one.
fn postal_text(newsletter: &Newsletter) -> String {
    let lines = newsletter.mail.postal_lines();
    if lines.is_empty() {
        return String::new();
    }
    format!("\n{}\n", lines.join("\n"))
}

/// The `Reply-To` header of a newsletter's mail, when it has a reply-to address.
fn reply_to_header(reply_to: Option<&str>) -> Option<(String, String)> {
    reply_to.map(|address| ("Reply-To".into(), format!("<{address}>")))
}

/// Inline styles for what the `<style>` block cannot reach in every mail client (Gmail drops
/// it in some views, Outlook ignores much of it): a bar beside quotes, borders and padding on
/// tables. The content's HTML comes from Markdown with raw HTML escaped, so these tags are
/// exactly the renderer's.
fn inline_styles(body_html: &str) -> String {
    const CELL: &str = "border:1px solid #c9ced6;padding:6px 10px;vertical-align:top";
    body_html
        .replace(
            "<blockquote>",
            "<blockquote style=\"margin:16px 0;padding:4px 0 4px 16px;border-left:4px solid #c9ced6;color:#3d4555\">",
        )
        .replace(
            "<table>",
            "<table role=\"table\" cellpadding=\"6\" cellspacing=\"0\" border=\"1\" style=\"border-collapse:collapse;border:1px solid #c9ced6;margin:16px 0\">",
        )
        .replace("<th>", &format!("<th style=\"{CELL};background:#f4f5f7;text-align:left\">"))
        .replace("<td>", &format!("<td style=\"{CELL};text-align:left\">"))
        .replace("<th align=\"", &format!("<th style=\"{CELL};background:#f4f5f7\" align=\""))
        .replace("<td align=\"", &format!("<td style=\"{CELL}\" align=\""))
}

/// The text part of a newsletter's e-mail: `subject` underlined, then `body_text` (the
/// content as plain text, `domain::content::plain_text`).
fn text_part(subject: &str, body_text: &str) -> String {
    format!(
        "{subject}\n{}\n\n{body_text}\n",
        "=".repeat(subject.chars().count().min(72)),
    )
}

/// `List-Id`: the newsletter's name as a phrase, then `<subdomain>.<public host>`, written
/// the way mail-builder writes a display name: quoted when the name is plain ASCII (line
/// breaks dropped, `"` and `\` escaped), else as RFC 2047 encoded words. So no character of
/// the name reaches the header raw, whatever it holds: U+2028 and U+2029 (not control
/// characters, so one-line names may hold them), NEL and other controls of names stored
/// before they were refused, any other non-ASCII text (docs/security.md, "Names that go into
/// mail headers"). Unfolded: `Raw` folds it where it is written.
fn list_id(newsletter: &Newsletter, public_host: &str) -> String {
    let list = format!("{}.{public_host}", newsletter.subdomain);
    let mut value = Vec::new();
    Address::new_address(Some(newsletter.name.as_str()), list)
        .write_header(&mut value, "List-Id: ".len());
    String::from_utf8_lossy(&value)
        .trim_end()
        .replace("\r\n", "")
}

/// The welcome e-mail of subscriber `subscriber_id` (see `domain::subscribers::welcome_mail`): the issue's frame
/// and text part around the owner's text (`body_html`, and `body_text` as for
/// [`IssueEmail::new`]), from the newsletter's sender, with the reader's own unsubscribe link
/// (one-click too) and the newsletter's `List-Id`. `public_host` as for [`IssueEmail::new`].
pub struct Welcome<'a> {
    pub newsletter: &'a Newsletter,
    pub public_host: &'a str,
    pub links: &'a Links,
    pub subscriber_id: i64,
    pub to: &'a str,
    pub subject: &'a str,
    pub body_html: &'a str,
    pub body_text: &'a str,
    /// What the mail is, in its `Feedback-ID`: `welcome`, or `sequence-<id>` for a step.
    pub feedback: &'a str,
    /// The reader's values, when the text has merge tags (a sequence step's).
    pub reader: Option<&'a Reader>,
    /// A sequence step's id: its content's links and an open pixel note opens and clicks
    /// (when `links` track).
    pub tracked_step: Option<i64>,
}

/// The message of a [`Welcome`] (and of a sequence step, built the same way).
pub fn welcome(welcome: &Welcome<'_>) -> OutgoingMail {
    let Welcome {
        newsletter,
        public_host,
        links,
        subscriber_id,
        to,
        subject,
        body_html,
        body_text,
        feedback,
        reader,
        tracked_step,
    } = *welcome;
    let (subject, body_html, body_text) = match reader {
        Some(reader) => (
            subject_of(subject, reader),
            filled(body_html, true, reader),
            filled(body_text, false, reader),
        ),
        None => (
            subject.to_string(),
            body_html.to_string(),
            body_text.to_string(),
        ),
    };
    let (subject, body_html, body_text) =
        (subject.as_str(), body_html.as_str(), body_text.as_str());
    let unsubscribe = links.unsubscribe_subscriber(subscriber_id);
    let home = links.site_home();
    let (body_html, pixel) = match tracked_step {
        Some(step) => tracked_body(links, step, subscriber_id, body_html, &home),
        None => (body_html.to_string(), String::new()),
    };
    let html = frame(
        newsletter,
        &home,
        subject,
        html! {},
        html! {
            div.content { (PreEscaped(&inline_styles(&body_html))) }
            p { "Past issues are on the site: " a href=(home) { (home) } }
            (PreEscaped(pixel))
        },
        &unsubscribe,
        PreEscaped(""),
    );
    let text = format!(
        "{}\nPast issues are on the site: {home}\n{}\n-- \n{FOOTER_LINK}: {unsubscribe}\n",
        text_part(subject, body_text),
        postal_text(newsletter),
    );
    let sender = newsletter.sender(&links.host());
    OutgoingMail {
        from_name: sender.name,
        from_email: sender.email,
        to: to.to_string(),
        subject: subject.to_string(),
        text,
        html,
        headers: reply_to_header(newsletter.mail.reply_to.as_deref())
            .into_iter()
            .chain([
                ("List-Id".into(), list_id(newsletter, public_host)),
                (
                    "Feedback-ID".into(),
                    format!("{feedback}:{}:broadsheet:{public_host}", newsletter.id),
                ),
                ("List-Unsubscribe".into(), format!("<{unsubscribe}>")),
                (
                    "List-Unsubscribe-Post".into(),
                    "List-Unsubscribe=One-Click".into(),
                ),
                ("Auto-Submitted".into(), "auto-generated".into()),
            ])
            .collect(),
        message_id: None,
        primary_link: Some(unsubscribe),
    }
}

/// A sequence step's HTML with its links tracked for `subscriber_id` (the site's home left as
/// it is), and its open pixel; both as they were when `links` do not track.
fn tracked_body(
    links: &Links,
    step: i64,
    subscriber_id: i64,
    body_html: &str,
    home: &str,
) -> (String, String) {
    let Some(pixel) = links.step_open_pixel(step, subscriber_id) else {
        return (body_html.to_string(), String::new());
    };
    let html: String = split_links(body_html)
        .into_iter()
        .map(|piece| match piece {
            Piece::Link(target) if target != home => {
                escape_attr(&links.step_click(step, subscriber_id, &target))
            }
            Piece::Link(target) => escape_attr(&target),
            Piece::Text(html) | Piece::Tracked(html) => html,
        })
        .collect();
    (html, pixel_html(&pixel))
}

/// Gmail's `Feedback-ID` (`a:b:c:SenderId`): the issue, the newsletter, the product, and the
/// public host as the sender, so complaint rates can be told apart per issue and newsletter.
fn feedback_id(issue_id: i64, newsletter_id: i64, public_host: &str) -> String {
    format!("{issue_id}:{newsletter_id}:broadsheet:{public_host}")
}

/// The open pixel's tag.
fn pixel_html(url: &str) -> String {
    format!(
        "<img src=\"{}\" width=\"1\" height=\"1\" alt=\"\" style=\"display:block;border:0\">",
        escape_attr(url)
    )
}

/// The mail's style block, a rule group per line: `seven_bit` may not break lines inside
/// `<style>`, and one line of it all would outgrow the 990 characters a line may have. Each
/// line starts with a space: a line starting with a dot would need SMTP's dot-stuffing.
const EMAIL_CSS: &str = "body{margin:0;padding:0;background:#f4f5f7;color:#1d2330;font:16px/1.6 -apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif}\n \
.wrap{max-width:600px;margin:0 auto;padding:24px 20px;background:#fff}\n \
.masthead{font-size:13px;letter-spacing:.08em;text-transform:uppercase;color:#5b6474;margin:0 0 8px}\n \
h1{font-size:26px;line-height:1.25;margin:0 0 16px}h2{font-size:19px;margin:20px 0 4px}\n \
a{color:#1d4ed8}img{max-width:100%;height:auto}pre{overflow-x:auto;background:#f4f5f7;padding:12px}\n \
.article{border-top:1px solid #e3e6eb;padding-top:8px}.footer{margin-top:32px;font-size:13px;color:#5b6474}\n \
.masthead a{color:#5b6474;text-decoration:none}.view{margin:0 0 12px;font-size:12px;text-align:right}.view a{color:#5b6474}\n \
blockquote{margin:16px 0;padding:4px 0 4px 16px;border-left:4px solid #c9ced6;color:#3d4555}\n \
table{border-collapse:collapse;margin:16px 0}th,td{border:1px solid #c9ced6;padding:6px 10px}th{background:#f4f5f7}\n \
@media (max-width:480px){.wrap{padding:16px 12px}h1{font-size:22px}}";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::content::markdown_html::markdown_to_html;

    #[test]
    fn placeholder_lookalikes_in_content_stay_text() {
        let html = markdown_to_html("a {{pixel}} b <!--broadsheet:pixel--> c");
        assert!(!html.contains(PIXEL_MARK), "{html}");
    }

    #[test]
    fn a_stored_name_with_line_breaks_cannot_add_a_header() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute_batch(
            "UPDATE newsletters SET name = 'News\r\nBcc: all@example.com';
             INSERT INTO issues (newsletter_id, subject, content_markdown, content_html, path, created_at, updated_at)
               VALUES (1, 'S', 'x', '<p>x</p>', 's', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        let newsletter = crate::domain::newsletters::get(&conn, 1).unwrap();
        let issue = crate::domain::issues::get(&conn, 1, 1).unwrap();
        let secret = crate::domain::values::secrets::ServerSecret::load_or_create(&conn).unwrap();
        let links = Links::new("http://n.localhost", 1, secret, false);
        let email = IssueEmail::new(&issue, &newsletter, "localhost", links, "x");
        let mail = email.personalise(1, "r@x.co", &Reader::default());
        let (_, list_id) = mail.headers.iter().find(|(h, _)| h == "List-Id").unwrap();
        assert_eq!(list_id, "\"NewsBcc: all@example.com\" <n.localhost>");
        let sent = String::from_utf8(email.message(1, "r@x.co", &Reader::default()).bytes).unwrap();
        let (head, _) = sent.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("\r\nList-Id: \"NewsBcc: all@example.com\" <n.localhost>\r\n"));
        assert!(head.contains("\r\nFeedback-ID: 1:1:broadsheet:localhost\r\n"));
        assert!(!head.contains("\nBcc"), "{head}");
    }

    #[test]
    fn line_separators_in_names_are_encoded_in_every_header() {
        use mail_parser::MessageParser;
        // U+2028 and U+2029 are not control characters, so a one-line name may hold them; a
        // stored NEL (U+0085) and a raw "Bcc:" must not make a header either.
        let name = "News\u{2028}Bcc: all@example.com\u{2029}Weekly\u{85}x";
        let sender = "Ann\u{2028}Bcc: b@example.com";
        let subject = "Issue\u{2028}Bcc: c@example.com";
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute(
            "UPDATE newsletters SET name = ?1, sender_name = ?2, sender_email = 'ann@example.org'",
            [name, sender],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO issues (newsletter_id, subject, content_markdown, content_html, path, created_at, updated_at)
             VALUES (1, ?1, 'x', '<p>x</p>', 's', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
            [subject],
        )
        .unwrap();
        let newsletter = crate::domain::newsletters::get(&conn, 1).unwrap();
        let issue = crate::domain::issues::get(&conn, 1, 1).unwrap();
        let secret = crate::domain::values::secrets::ServerSecret::load_or_create(&conn).unwrap();
        let links = Links::new("http://n.localhost", 1, secret, false);
        let welcome_mail = welcome(&Welcome {
            newsletter: &newsletter,
            public_host: "localhost",
            links: &links,
            subscriber_id: 3,
            to: "r@x.co",
            subject,
            body_html: "<p>hi</p>",
            body_text: "hi",
            feedback: "welcome",
            reader: None,
            tracked_step: None,
        });
        let email = IssueEmail::new(&issue, &newsletter, "localhost", links, "x");
        let confirmation = super::super::account::subscription_confirmation(name, "https://l");
        let confirmation_mail = OutgoingMail {
            from_name: "Broadsheet".into(),
            from_email: "no-reply@example.org".into(),
            to: "r@x.co".into(),
            subject: confirmation.subject.clone(),
            text: confirmation.text,
            html: confirmation.html,
            headers: Vec::new(),
            message_id: None,
            primary_link: None,
        };
        let messages = [
            (
                email.message(1, "r@x.co", &Reader::default()).bytes,
                subject.to_string(),
            ),
            (
                email.personalise(1, "r@x.co", &Reader::default()).to_mime(),
                subject.to_string(),
            ),
            (welcome_mail.to_mime(), subject.to_string()),
            (confirmation_mail.to_mime(), confirmation.subject),
        ];
        for (n, (bytes, subject)) in messages.iter().enumerate() {
            let text = String::from_utf8(bytes.clone()).unwrap();
            let (head, _) = text.split_once("\r\n\r\n").unwrap();
            // Every character of the head is ASCII: nothing was written raw.
            assert!(head.is_ascii(), "message {n}: {head}");
            assert!(!head.contains("\nBcc"), "message {n}: {head}");
            let parsed = MessageParser::default().parse(bytes.as_slice()).unwrap();
            assert_eq!(parsed.subject(), Some(subject.as_str()), "message {n}");
            if n < 3 {
                let list = parsed.list_id().as_address().unwrap().first().unwrap();
                assert_eq!(
                    (list.name(), list.address()),
                    (Some(name), Some("n.localhost")),
                    "message {n}"
                );
                let from = parsed.from().unwrap().first().unwrap();
                assert_eq!(from.name(), Some(sender), "message {n}");
            }
        }
    }

    #[test]
    fn splits_links_and_unescapes_targets() {
        let pieces = split_links("<p><a href=\"https://x.com/?a=1&amp;b=2\">x</a> y</p>");
        assert_eq!(pieces[1], Piece::Link("https://x.com/?a=1&b=2".into()));
        assert_eq!(pieces.len(), 3);
    }

    #[test]
    fn the_sent_message_is_the_personalised_mail_encoded_once() {
        use mail_parser::MimeHeaders;
        let long_paragraph = "words and more words, ".repeat(80);
        // Content that lays out as 7bit lines, and content that needs quoted-printable (a dot
        // that would start a line of a `<pre>`).
        let contents = [
            (
                format!(
                    "<p>.x {long_paragraph} <a href=\"https://example.org/a?b=1&amp;c=2\">x</a> é</p>\n.<p>y</p><a href=\"mailto:a@b.c\">m</a>"
                ),
                "7bit",
            ),
            (
                "<p>.x <a href=\"https://example.org/a\">x</a> é</p>\n<pre>a  \n.b</pre>"
                    .to_string(),
                "quoted-printable",
            ),
        ];
        for (content_html, encoding) in contents {
            let conn = crate::domain::testing::db_with_newsletter("paid");
            conn.execute(
                "UPDATE newsletters SET name = 'Ünïcode News', sender_name = 'Zoë Writer', sender_email = 'zoe@example.org'",
                [],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO issues (newsletter_id, subject, content_markdown, content_html, path, created_at, updated_at)
                 VALUES (1, 'Sübject long enough to be folded: and on and on and on and on past 78 characters',
                         '.x\n\n# Héllo =_ \nsome text ', ?1, 's', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
                [&content_html],
            )
            .unwrap();
            let newsletter = crate::domain::newsletters::get(&conn, 1).unwrap();
            let issue = crate::domain::issues::get(&conn, 1, 1).unwrap();
            let secret =
                crate::domain::values::secrets::ServerSecret::load_or_create(&conn).unwrap();
            for tracking in [true, false] {
                let links = Links::new("http://n.localhost", 1, secret.clone(), tracking);
                let email = IssueEmail::new(&issue, &newsletter, "localhost", links, "x");
                let mail = email.personalise(7, "r@x.co", &Reader::default());
                let message = email.message(7, "r@x.co", &Reader::default());
                assert!(message.dot_free);
                let bytes = message.bytes;
                let text = String::from_utf8(bytes.clone()).unwrap();
                for line in text.split("\r\n") {
                    assert!(line.len() <= 998 && !line.starts_with('.'), "{line:?}");
                    assert!(!line.contains(['\r', '\n']), "a bare line break: {line:?}");
                }
                let parsed = mail_parser::MessageParser::default().parse(&bytes).unwrap();
                let html_part = parsed.html_part(0).unwrap();
                assert_eq!(html_part.content_transfer_encoding(), Some(encoding));
                let normal = |s: &str| s.replace("\r\n", "\n");
                let html = normal(&parsed.body_html(0).unwrap());
                if encoding == "7bit" {
                    assert!(html.is_ascii());
                    // The same document once an HTML reader has read it: the characters
                    // referenced, the line breaks where whitespace was or inside tags.
                    let read = |s: &str| {
                        s.replace("&#xE9;", "é")
                            .replace("&#xDC;", "Ü")
                            .replace("&#xEF;", "ï")
                            .replace("&#xFC;", "ü")
                            .split_whitespace()
                            .collect::<Vec<_>>()
                            .join(" ")
                            .replace(" >", ">")
                    };
                    assert_eq!(read(&html), read(&mail.html));
                } else {
                    assert_eq!(html, mail.html);
                }
                assert_eq!(normal(&parsed.body_text(0).unwrap()), mail.text);
                assert_eq!(parsed.subject(), Some(issue.subject.as_str()));
                let from = parsed.from().unwrap().first().unwrap();
                assert_eq!(
                    (from.name(), from.address()),
                    (Some("Zoë Writer"), Some("zoe@example.org"))
                );
                let to = parsed.to().unwrap().first().unwrap();
                assert_eq!(to.address(), Some("r@x.co"));
                assert!(parsed.message_id().unwrap().starts_with("issue-d7."));
                assert!(parsed.date().is_some());
                for (name, value) in &mail.headers {
                    let got = parsed.header_raw(name.as_str()).unwrap_or_default();
                    assert_eq!(got.trim(), value, "{name}");
                }
                assert_eq!(html_part.content_type().unwrap().subtype(), Some("html"));
                assert_eq!(html.contains("/o/7/"), tracking);
                assert_eq!(html.contains("/c/7/"), tracking);
                assert!(html.contains("/u/7/"));
            }
        }
    }

    #[test]
    fn merge_tags_fill_each_copy_with_the_readers_values_escaped() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute(
            "INSERT INTO issues (newsletter_id, subject, content_markdown, content_html, path, created_at, updated_at)
             VALUES (1, 'Hello {{ city | default: \"you\" }}', 'x',
                     '<p>Hi {{ name | default: &quot;friend&quot; }}, {{ city | default: &quot;a &amp; b&quot; }}.</p>',
                     's', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
        let newsletter = crate::domain::newsletters::get(&conn, 1).unwrap();
        let issue = crate::domain::issues::get(&conn, 1, 1).unwrap();
        let secret = crate::domain::values::secrets::ServerSecret::load_or_create(&conn).unwrap();
        let links = Links::new("http://n.localhost", 1, secret, true);
        let text = "Hi {{ name | default: \"friend\" }}, {{ city | default: \"a & b\" }}.";
        let email = IssueEmail::new(&issue, &newsletter, "localhost", links, text);
        assert!(email.has_merge_tags());
        let hostile = Reader {
            name: Some("<script>alert(1)</script>".into()),
            email: "r@x.co".into(),
            fields: [("city".to_string(), serde_json::json!(".\r\n.Düsseldorf"))]
                .into_iter()
                .collect(),
        };
        for (reader, html_shows, text_shows, subject) in [
            (
                &hostile,
                "Hi &lt;script&gt;alert(1)&lt;/script&gt;, .\r\n.Düsseldorf.",
                "Hi <script>alert(1)</script>, .\r\n.Düsseldorf.",
                "Hello .  .Düsseldorf",
            ),
            (
                &Reader::default(),
                "Hi friend, a &amp; b.",
                "Hi friend, a & b.",
                "Hello you",
            ),
        ] {
            let mail = email.personalise(7, "r@x.co", reader);
            let message = email.message(7, "r@x.co", reader);
            let bytes = message.bytes;
            let wire = String::from_utf8(bytes.clone()).unwrap();
            for line in wire.split("\r\n") {
                assert!(!line.starts_with('.') || !message.dot_free, "{line:?}");
            }
            let parsed = mail_parser::MessageParser::default().parse(&bytes).unwrap();
            // The subject is the reader's, on one line: a line break in a value is a space.
            assert_eq!(parsed.subject(), Some(subject));
            assert_eq!(mail.subject, subject);
            assert_eq!(wire.matches("\r\nSubject: ").count(), 1, "{wire}");
            let html = parsed.body_html(0).unwrap().replace("\r\n", "\n");
            assert_eq!(html, mail.html.replace("\r\n", "\n"));
            assert!(mail.html.contains(html_shows), "{}", mail.html);
            assert!(!mail.html.contains("<script>"));
            let body = parsed.body_text(0).unwrap().replace("\r\n", "\n");
            assert!(body.contains(&text_shows.replace("\r\n", "\n")), "{body}");
        }
    }
}
