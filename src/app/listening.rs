//! `<data-dir>/listening`: where `serve` took its ports and what it calls itself, written
//! once the ports are bound. With `--listen 127.0.0.1:0` (any free port) it is the only way to
//! learn the address; the operator's commands read the base URL and bounce domain the server
//! uses from it, so what they print matches the dashboard. One `name value` line each:
//!
//! ```text
//! http 127.0.0.1:43123
//! bounces 127.0.0.1:2525
//! base-url http://127.0.0.1:43123
//! bounce-domain localhost
//! ```
//!
//! `bounces` only with `--bounce-listen`. The file is removed when the next server starts (so
//! a reader waiting for it never sees the last run's ports) and kept when a server stops.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// What a started server wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listening {
    pub http: SocketAddr,
    pub bounces: Option<SocketAddr>,
    pub base_url: String,
    pub bounce_domain: String,
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("listening")
}

/// Removes the file a previous server wrote; none is fine.
pub fn forget(data_dir: &Path) -> io::Result<()> {
    match std::fs::remove_file(path(data_dir)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

impl Listening {
    /// Writes the file whole (a new file renamed into place), so a reader sees all or nothing.
    pub fn write(&self, data_dir: &Path) -> io::Result<()> {
        let mut text = format!("http {}\n", self.http);
        if let Some(bounces) = self.bounces {
            text.push_str(&format!("bounces {bounces}\n"));
        }
        text.push_str(&format!(
            "base-url {}\nbounce-domain {}\n",
            self.base_url, self.bounce_domain
        ));
        let partial = data_dir.join("listening.partial");
        std::fs::write(&partial, text)?;
        std::fs::rename(&partial, path(data_dir))
    }

    /// What the last server started on `data_dir` wrote; `None` without a readable file.
    pub fn read(data_dir: &Path) -> Option<Listening> {
        Self::parse(&std::fs::read_to_string(path(data_dir)).ok()?)
    }

    fn parse(text: &str) -> Option<Listening> {
        let value = |name: &str| {
            text.lines()
                .filter_map(|line| line.split_once(' '))
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.trim().to_string())
        };
        Some(Listening {
            http: value("http")?.parse().ok()?,
            bounces: match value("bounces") {
                Some(address) => Some(address.parse().ok()?),
                None => None,
            },
            base_url: value("base-url")?,
            bounce_domain: value("bounce-domain")?,
        })
    }
}

/// A `--base-url` whose port is 0 with the port the server took instead: with `--listen
/// ...:0` that port is unknown until the server has bound it.
pub fn base_url_on(base_url: &str, port: u16) -> String {
    match url::Url::parse(base_url) {
        Ok(mut url) if url.port() == Some(0) => {
            let _ = url.set_port(Some(port));
            // Url writes an origin with a `/`; keep the value as it was given otherwise.
            let text = url.to_string();
            if base_url.ends_with('/') {
                text
            } else {
                text.trim_end_matches('/').to_string()
            }
        }
        _ => base_url.to_string(),
    }
}

/// A `--public-host` whose port is 0 with the port the server took instead.
pub fn public_host_on(public_host: &str, port: u16) -> String {
    match public_host.rsplit_once(':') {
        Some((host, "0")) => format!("{host}:{port}"),
        _ => public_host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_reads_back_what_was_written() {
        let temporary = tempfile::tempdir().unwrap();
        let dir = temporary.path();
        let written = Listening {
            http: "127.0.0.1:43123".parse().unwrap(),
            bounces: Some("127.0.0.1:2525".parse().unwrap()),
            base_url: "https://news.example.com".into(),
            bounce_domain: "bounces.example.com".into(),
        };
        written.write(dir).unwrap();
        assert_eq!(Listening::read(dir), Some(written.clone()));
        let without_bounces = Listening {
            bounces: None,
            ..written
        };
        without_bounces.write(dir).unwrap();
        assert_eq!(Listening::read(dir), Some(without_bounces));
        forget(dir).unwrap();
        forget(dir).unwrap();
        assert_eq!(Listening::read(dir), None);
    }

    #[test]
    fn a_port_0_stands_for_the_port_taken() {
        assert_eq!(
            base_url_on("http://127.0.0.1:0", 4100),
            "http://127.0.0.1:4100"
        );
        assert_eq!(
            base_url_on("http://127.0.0.1:0/", 4100),
            "http://127.0.0.1:4100/"
        );
        assert_eq!(
            base_url_on("https://news.example.com", 4100),
            "https://news.example.com"
        );
        assert_eq!(
            base_url_on("http://localhost:8080", 4100),
            "http://localhost:8080"
        );
        assert_eq!(public_host_on("localhost:0", 4100), "localhost:4100");
        assert_eq!(public_host_on("localhost:8080", 4100), "localhost:8080");
        assert_eq!(public_host_on("news.example.com", 4100), "news.example.com");
    }
}
