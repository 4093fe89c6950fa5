//! Fetching a newsletter's feed (docs/automations.md, "Following a feed"): one GET with the
//! last answer's validators (`If-None-Match`, `If-Modified-Since`), through the webhook SSRF
//! guard on the address actually connected to, every redirect (at most [`MAX_REDIRECTS`])
//! checked the same way, bounded by a timeout and [`MAX_BYTES`], then parsed by `feed-rs`
//! (RSS 0.9-2.0, Atom). What it found goes to `domain::issues::feed::record`.

use std::io::Read;

use crate::domain::issues::feed::{Feed, Item, Polled};
use crate::webhooks::{self, ssrf};

/// The largest feed read.
pub const MAX_BYTES: u64 = 2 * 1024 * 1024;
/// Redirects followed, each to an address the guard allows.
pub const MAX_REDIRECTS: usize = 3;

/// Polls `feed` once; `rt` runs the DNS lookups.
pub fn fetch(feed: &Feed, settings: &webhooks::Settings, rt: &tokio::runtime::Runtime) -> Polled {
    let mut url = feed.url.clone();
    for _ in 0..=MAX_REDIRECTS {
        let addresses =
            match rt.block_on(ssrf::resolve(&url, settings.allow_private, &settings.dns)) {
                Ok(addresses) => addresses,
                Err(reason) => {
                    return Polled::Failed(format!("refused to fetch {url}: the address {reason}"));
                }
            };
        let agent = webhooks::guarded_agent(addresses, settings.timeout, "Broadsheet-Feeds/1");
        let mut request = agent.get(&url);
        if url == feed.url {
            if let Some(etag) = &feed.etag {
                request = request.header("If-None-Match", etag);
            }
            if let Some(modified) = &feed.last_modified {
                request = request.header("If-Modified-Since", modified);
            }
        }
        let mut response = match request.call() {
            Ok(response) => response,
            Err(e) => return Polled::Failed(format!("the feed could not be fetched: {e}")),
        };
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        match status {
            304 => return Polled::NotModified,
            301 | 302 | 303 | 307 | 308 => {
                let Some(next) =
                    header("location").and_then(|to| url::Url::parse(&url).ok()?.join(&to).ok())
                else {
                    return Polled::Failed(format!(
                        "the feed answered HTTP {status} without a place to go"
                    ));
                };
                url = next.to_string();
                continue;
            }
            200..=299 => {}
            _ => return Polled::Failed(format!("the feed answered HTTP {status}")),
        }
        let (etag, last_modified) = (header("etag"), header("last-modified"));
        let mut body = Vec::new();
        let read = response
            .body_mut()
            .as_reader()
            .take(MAX_BYTES + 1)
            .read_to_end(&mut body);
        if let Err(e) = read {
            return Polled::Failed(format!("the feed could not be read: {e}"));
        }
        if body.len() as u64 > MAX_BYTES {
            return Polled::Failed(format!(
                "the feed is larger than {} MiB",
                MAX_BYTES / 1024 / 1024
            ));
        }
        return match feed_rs::parser::parse(body.as_slice()) {
            Ok(parsed) => Polled::Items {
                etag,
                last_modified,
                items: items_of(parsed),
            },
            Err(e) => Polled::Failed(format!("the feed is not RSS or Atom: {e}")),
        };
    }
    Polled::Failed(format!(
        "the feed redirected more than {MAX_REDIRECTS} times"
    ))
}

/// The feed's items, oldest first (feeds list the newest first), each keyed by its id.
fn items_of(feed: feed_rs::model::Feed) -> Vec<Item> {
    let mut items: Vec<Item> = feed
        .entries
        .into_iter()
        .map(|entry| {
            let link = entry.links.first().map(|l| l.href.clone());
            let summary_html = entry
                .summary
                .map(|s| s.content)
                .or_else(|| entry.content.and_then(|c| c.body))
                .unwrap_or_default();
            Item {
                key: entry.id,
                title: entry.title.map(|t| t.content).unwrap_or_default(),
                link,
                summary_html,
            }
        })
        .collect();
    items.reverse();
    items
}
