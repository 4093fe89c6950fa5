//! The flags of `serve` and their `BROADSHEET_*` environment variables (docs/decisions.md §1),
//! checked by clap as they are parsed: a malformed value is a usage error (exit 2) before
//! anything touches the data directory. The commands themselves are in `cli`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::domain::newsletters::Tier;

/// `serve --base-url`'s default; the operator's commands fall back to it too.
pub const DEFAULT_BASE_URL: &str = "http://localhost:8080";
/// `serve --public-host`'s default.
pub const DEFAULT_PUBLIC_HOST: &str = "localhost:8080";

/// Flags of `serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address and port to listen on (an IP address or a host name, then :PORT).
    #[arg(long, env = "BROADSHEET_LISTEN", default_value = "127.0.0.1:8080", value_parser = listen_address)]
    pub listen: String,
    /// The service origin as users reach it (http:// or https://); the API is at
    /// {base_url}/api/v1.
    #[arg(
        long,
        env = "BROADSHEET_BASE_URL",
        default_value = DEFAULT_BASE_URL,
        value_parser = service_origin
    )]
    pub base_url: String,
    /// Newsletter sites answer at <subdomain>.<public-host>, with the scheme of --base-url
    /// (a host name, optionally with :PORT).
    #[arg(long, env = "BROADSHEET_PUBLIC_HOST", default_value = DEFAULT_PUBLIC_HOST, value_parser = public_host)]
    pub public_host: String,
    /// smtp://[user:pass@]host:port (STARTTLS when offered) or smtps://... (TLS), with
    /// optional limits: ?per_second=N&per_hour=N&per_day=N. Give it more than once (or
    /// several URLs separated by spaces in the variable) for relays that take over, in
    /// order, while the ones before are unreachable. Without it mail is written to
    /// <data-dir>/outbox/*.eml and logged.
    #[arg(long, env = "BROADSHEET_SMTP_URL", value_delimiter = ' ')]
    pub smtp_url: Vec<String>,
    /// PEM file with a private CA the relay's certificate may chain to, besides the system's
    /// root certificates (the certificate is always verified; there is no switch to skip it).
    #[arg(long, env = "BROADSHEET_SMTP_CA")]
    pub smtp_ca: Option<PathBuf>,
    /// Send the --smtp-url user and password even when the relay offers no STARTTLS, that is
    /// in the clear. Only for a relay on this machine; without it such a relay is refused.
    #[arg(long, env = "BROADSHEET_SMTP_ALLOW_PLAINTEXT_AUTH")]
    pub smtp_allow_plaintext_auth: bool,
    /// From address of the service's own mail (confirmations, password resets).
    #[arg(long, env = "BROADSHEET_MAIL_FROM")]
    pub mail_from: Option<String>,
    /// Sign every message with DKIM as this domain (d=). The key pair is generated at the
    /// first start and kept in the database; `broadsheet dkim` prints the DNS record to publish.
    #[arg(long, env = "BROADSHEET_DKIM_DOMAIN")]
    pub dkim_domain: Option<String>,
    /// The DKIM selector (s=): the record goes at <selector>._domainkey.<domain>.
    #[arg(long, env = "BROADSHEET_DKIM_SELECTOR", default_value = crate::domain::newsletters::dkim::DEFAULT_SELECTOR)]
    pub dkim_selector: String,
    /// The domain of the envelope senders (return paths) of sent issues,
    /// `bounce+<token>@<domain>`: bounces come back there, so its MX should be the bounce
    /// listener (--bounce-listen) or an MTA piping to `broadsheet bounce` [default: the
    /// --dkim-domain, else the host of --public-host].
    #[arg(long, env = "BROADSHEET_BOUNCE_DOMAIN", value_parser = domain_name)]
    pub bounce_domain: Option<String>,
    /// Address and port of the bounce listener, an SMTP server in this process that takes
    /// the bounces and complaints mailed back to the return paths of sent issues (the bounce
    /// domain's MX points at it); off by default.
    #[arg(long, env = "BROADSHEET_BOUNCE_LISTEN", value_parser = listen_address)]
    pub bounce_listen: Option<String>,
    /// For the tests: how long the bounce listener waits for one command or one line of a
    /// message, in milliseconds.
    #[arg(long, hide = true, default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub bounce_command_timeout_ms: u64,
    /// For the tests: how long one bounce listener session may last, in milliseconds.
    #[arg(long, hide = true, default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub bounce_session_timeout_ms: u64,
    /// Tier of new newsletters.
    #[arg(long, env = "BROADSHEET_DEFAULT_TIER", value_enum, default_value_t = TierValue::Free)]
    pub default_tier: TierValue,
    /// How often the job runner looks for due work, in milliseconds.
    #[arg(long, env = "BROADSHEET_JOB_POLL_MS", default_value_t = 1000)]
    pub job_poll_ms: u64,
    /// Job worker threads.
    #[arg(long, env = "BROADSHEET_JOB_WORKERS", default_value_t = 4)]
    pub job_workers: usize,
    /// Worker threads that deliver webhooks (apart from the job workers, so a slow receiver
    /// never holds up sending).
    #[arg(long, env = "BROADSHEET_WEBHOOK_WORKERS", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub webhook_workers: u32,
    /// Webhook retry n (1..3) waits base * n^4 milliseconds.
    #[arg(
        long,
        env = "BROADSHEET_WEBHOOK_RETRY_BASE_MS",
        default_value_t = 30_000
    )]
    pub webhook_retry_base_ms: u64,
    /// Timeout of one webhook delivery attempt, in milliseconds.
    #[arg(long, env = "BROADSHEET_WEBHOOK_TIMEOUT_MS", default_value_t = 10_000)]
    pub webhook_timeout_ms: u64,
    /// Permit webhook URLs that resolve to loopback, private, link-local, unique-local or other
    /// special-purpose addresses (IANA's registries), e.g. a receiver on your own network.
    #[arg(long, env = "BROADSHEET_ALLOW_PRIVATE_WEBHOOKS")]
    pub allow_private_webhooks: bool,
    /// API GET requests per key per hour.
    #[arg(long, env = "BROADSHEET_RATE_LIMIT_GET", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_get: u32,
    /// API POST/PATCH/DELETE requests per key per hour.
    #[arg(long, env = "BROADSHEET_RATE_LIMIT_WRITE", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_write: u32,
    /// API bulk requests per key per hour.
    #[arg(long, env = "BROADSHEET_RATE_LIMIT_BULK", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_bulk: u32,
    /// DNS resolver (ip:port) used to verify custom domains and to find webhook receivers; the
    /// system resolver by default.
    #[arg(long, env = "BROADSHEET_DNS_SERVER")]
    pub dns_server: Option<String>,
    /// SMTP connections used in parallel when sending an issue.
    #[arg(long, env = "BROADSHEET_SEND_CONCURRENCY", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub send_concurrency: u32,
    /// Wait before retrying a message the SMTP server refused temporarily (4xx); later retries
    /// wait 4, 16, 64 times as long, and the fifth failure is final.
    #[arg(long, env = "BROADSHEET_SEND_RETRY_BASE_MS", default_value_t = 60_000)]
    pub send_retry_base_ms: u64,
    /// Messages per second when sending an issue; 0 = unlimited.
    #[arg(long, env = "BROADSHEET_SEND_RATE", default_value_t = 0)]
    pub send_rate: u32,
    /// How long to wait for each answer of the SMTP server, in milliseconds (also bounds how
    /// long a stop waits for a message in flight).
    #[arg(long, env = "BROADSHEET_SMTP_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub smtp_timeout_ms: u64,
    /// First wait before a send tries an unreachable SMTP server again, in milliseconds; each
    /// later wait lasts as long as the server has been down so far, at most 10 minutes.
    #[arg(long, env = "BROADSHEET_SEND_OUTAGE_RETRY_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub send_outage_retry_ms: u64,
    /// A send whose SMTP server stays unreachable this long (milliseconds) stops as `failed`
    /// until the owner resumes it [default: 12 hours].
    #[arg(long, env = "BROADSHEET_SEND_OUTAGE_LIMIT_MS", default_value_t = 43_200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub send_outage_limit_ms: u64,
    /// Address of a reverse proxy in front of the server (repeatable or comma-separated):
    /// only from these peers is X-Forwarded-For believed, and the client is then the
    /// right-most address in it that is not one of them. Without it the header is ignored.
    #[arg(long, env = "BROADSHEET_TRUSTED_PROXY", value_delimiter = ',')]
    pub trusted_proxy: Vec<std::net::IpAddr>,
    /// A session not used for this many minutes ends [default: 30 days].
    #[arg(long, env = "BROADSHEET_SESSION_IDLE_MINUTES", default_value_t = 43_200, value_parser = clap::value_parser!(u32).range(1..))]
    pub session_idle_minutes: u32,
    /// A session ends this many minutes after sign-in, however busy [default: 90 days].
    #[arg(long, env = "BROADSHEET_SESSION_ABSOLUTE_MINUTES", default_value_t = 129_600, value_parser = clap::value_parser!(u32).range(1..))]
    pub session_absolute_minutes: u32,
    /// How long a client may take to send a request's head (request line and headers), in
    /// milliseconds; a kept-alive connection left idle is closed after as long.
    #[arg(long, env = "BROADSHEET_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub header_read_timeout_ms: u64,
    /// A request body must bring --body-min-rate bytes a second on average over every window
    /// of this many milliseconds, the first included (pauses are fine while each window's
    /// average holds; a burst buys no more than one window of silence); a slower one is
    /// answered 408 and the connection closed. See also --body-total-timeout-ms.
    #[arg(long, env = "BROADSHEET_BODY_READ_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub body_read_timeout_ms: u64,
    /// The average rate, in bytes per second, a request body must keep up over each window
    /// of --body-read-timeout-ms.
    #[arg(long, env = "BROADSHEET_BODY_MIN_RATE", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_min_rate: u64,
    /// For the integration tests only: the clock follows `<data-dir>/test-clock` (see
    /// `clock::follow_test_clock`). Hidden, and with no environment variable, so that a
    /// production server cannot have its time moved by accident.
    #[arg(long, hide = true)]
    pub test_clock: bool,
    /// Permit newsletters' own mail relays on loopback, private, link-local or other
    /// special-purpose addresses (IANA's registries), e.g. a relay on your own network.
    #[arg(long, env = "BROADSHEET_ALLOW_PRIVATE_RELAYS")]
    pub allow_private_relays: bool,
    /// Whatever its pace, a request body must have arrived within this many milliseconds of
    /// the request's start [default: 10 minutes: a 50 MiB CSV upload needs about 0.7 Mbit/s,
    /// a 2 MiB API body 28 kbit/s].
    #[arg(long, env = "BROADSHEET_BODY_TOTAL_TIMEOUT_MS", default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    pub body_total_timeout_ms: u64,
    /// HTTP connections served at once; more are answered 503 and closed. Each takes a file
    /// descriptor: the server raises its soft RLIMIT_NOFILE to this plus 1,024 when the hard
    /// limit allows (install.sh's unit sets LimitNOFILE=65536).
    #[arg(long, env = "BROADSHEET_MAX_CONNECTIONS", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// HTTP connections served at once from one client address (an IPv4 address, or an IPv6
    /// /64), as the TCP peer: behind a reverse proxy that is the proxy, so the
    /// --trusted-proxy addresses are held only to --max-connections.
    #[arg(long, env = "BROADSHEET_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections_per_client: u64,
    /// Where Stripe's API is (docs/memberships.md); the tests point it at a fake Stripe.
    /// Must be https except on loopback.
    #[arg(long, hide = true, default_value = "https://api.stripe.com")]
    pub stripe_api_url: String,
}

/// A newsletter's tier as the operator names it: `--default-tier` and the `tier` command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TierValue {
    /// Preview only: no sending.
    Free,
    /// Payment pending: no sending yet.
    Pending,
    /// Full features, sending included.
    Paid,
}

impl From<TierValue> for Tier {
    fn from(value: TierValue) -> Self {
        match value {
            TierValue::Free => Tier::Free,
            TierValue::Pending => Tier::Pending,
            TierValue::Paid => Tier::Paid,
        }
    }
}

/// `--listen`: `IP:PORT` (`[::1]:8080` for IPv6) or `HOST:PORT`. The host name is resolved
/// when the server binds, as before; here only its form is checked.
fn listen_address(value: &str) -> Result<String, String> {
    if value.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(value.to_string());
    }
    let well_formed = value
        .rsplit_once(':')
        .is_some_and(|(host, port)| is_host_name(host) && port.parse::<u16>().is_ok());
    if well_formed {
        Ok(value.to_string())
    } else {
        Err("expected ADDRESS:PORT, e.g. 127.0.0.1:8080, [::]:8080 or localhost:8080".into())
    }
}

/// `--base-url`: an absolute http(s) URL with a host, and no user, query or fragment (links
/// are made by appending paths to it).
fn service_origin(value: &str) -> Result<String, String> {
    let expected = "expected an http:// or https:// URL such as https://news.example.com";
    let url = url::Url::parse(value).map_err(|e| format!("{e}; {expected}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(expected.into());
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(format!(
            "{expected}, without a user name, query or fragment"
        ));
    }
    Ok(value.to_string())
}

/// `--public-host`: a host name, optionally with `:PORT`, without a scheme or a path.
fn public_host(value: &str) -> Result<String, String> {
    let (host, port) = match value.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (value, None),
    };
    if is_host_name(host) && port.is_none_or(|p| p.parse::<u16>().is_ok()) {
        Ok(value.to_string())
    } else {
        Err("expected a host name, optionally with :PORT, e.g. news.example.com or localhost:8080 (no scheme, no path)".into())
    }
}

/// `--bounce-domain`: a host name without a port.
fn domain_name(value: &str) -> Result<String, String> {
    if is_host_name(value) {
        Ok(value.to_string())
    } else {
        Err("expected a domain name such as bounces.example.com".into())
    }
}

/// Dot-separated labels of letters, digits and hyphens (an IPv4 address is one too).
fn is_host_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_addresses_and_host_names_with_a_port() {
        for good in ["127.0.0.1:8080", "[::]:8080", "0.0.0.0:0", "localhost:8080"] {
            assert_eq!(listen_address(good).as_deref(), Ok(good));
        }
        for bad in [
            "",
            "8080",
            "localhost",
            "127.0.0.1:",
            "127.0.0.1:99999",
            "::1:8080",
            "a b:80",
        ] {
            assert!(listen_address(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn base_url_is_an_http_origin() {
        for good in [
            "http://localhost:8080",
            "https://news.example.com",
            "https://news.example.com/",
            "http://127.0.0.1:3000",
        ] {
            assert_eq!(service_origin(good).as_deref(), Ok(good));
        }
        for bad in [
            "",
            "localhost:8080",
            "news.example.com",
            "ftp://news.example.com",
            "https://",
            "https://user:pw@news.example.com",
            "https://news.example.com/?a=1",
            "https://news.example.com/#top",
        ] {
            assert!(service_origin(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn public_host_is_a_host_with_an_optional_port() {
        for good in [
            "localhost:8080",
            "news.example.com",
            "News.Example.com.",
            "127.0.0.1:80",
        ] {
            assert_eq!(public_host(good).as_deref(), Ok(good));
        }
        for bad in [
            "",
            "https://news.example.com",
            "news.example.com/",
            "news.example.com:http",
            "news..example.com",
            "-news.example.com",
            "news example.com",
            "localhost:",
        ] {
            assert!(public_host(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bounce_domain_is_a_domain_without_a_port() {
        assert!(domain_name("bounces.example.com").is_ok());
        for bad in [
            "",
            "bounces.example.com:25",
            "bounce@example.com",
            "a b.example",
        ] {
            assert!(domain_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_tier_value_names_its_domain_tier() {
        for value in TierValue::value_variants() {
            let name = value.to_possible_value().unwrap();
            assert_eq!(Tier::from(*value).to_string(), name.get_name());
        }
    }
}
