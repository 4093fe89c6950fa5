//! Command-line flags and their `BROADSHEET_*` environment variables (decisions.md §1).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "broadsheet",
    version,
    about = "Self-hostable newsletter publishing: dashboard, public sites, REST API and webhooks in one binary",
    long_about = "Broadsheet runs a newsletter service from one binary and one SQLite file.\n\n\
                  Start it with `broadsheet serve`; everything else here is for the operator: \
                  migrations, backups, tiers, imports. Every flag can also be set with an \
                  environment variable BROADSHEET_<FLAG>, e.g. BROADSHEET_DATA_DIR.\n\n\
                  Exit codes: 0 success, 1 failure, 2 bad usage, 3 not found, 4 the data \
                  directory is held by a running server, 5 an import finished but refused \
                  some rows."
)]
pub struct Cli {
    /// Directory holding broadsheet.db and the outbox/.
    #[arg(
        long,
        global = true,
        env = "BROADSHEET_DATA_DIR",
        default_value = "./data"
    )]
    pub data_dir: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the web server, the public sites and the job runner in one process.
    Serve(ServeArgs),
    /// Apply pending database migrations and exit (serve also applies them at start).
    Migrate,
    /// Write a consistent copy of the database to FILE, even while serve runs.
    Backup {
        /// Where to write the backup (a single SQLite file).
        file: PathBuf,
    },
    /// Replace the database with a backup made by `backup` (refuses while a server runs).
    Restore {
        /// The backup file to restore.
        file: PathBuf,
    },
    /// Set a newsletter's tier: free (no sending), pending (payment pending) or paid.
    Tier {
        /// The newsletter's subdomain.
        subdomain: String,
        /// free, pending or paid.
        tier: String,
    },
    /// Set a newsletter's status: active, paused (sending held) or cancelled (read-only).
    Status {
        /// The newsletter's subdomain.
        subdomain: String,
        /// active, paused or cancelled.
        status: String,
    },
    /// Turn open and click tracking in sent issues on or off (on by default).
    Tracking {
        /// The newsletter's subdomain.
        subdomain: String,
        /// on or off.
        setting: String,
    },
    /// Import subscribers from a CSV file (columns email, name, tags), even while serve runs.
    #[command(
        long_about = "Import subscribers from a CSV file into a newsletter, even while \
        `serve` runs.\n\n\
        The first line must be a header. Columns are found by name, in any order: email \
        (required), name, tags (several tags separated by ;), status (rows marked unsubscribed \
        or bounced are skipped, so an export imported elsewhere never resubscribes anyone); \
        other columns are ignored. Rows are checked like the API's bulk_create and committed \
        1,000 at a time. Addresses already subscribed are counted as existing and left \
        unchanged, so running an interrupted import again is safe: it creates no duplicates.\n\n\
        Progress goes to stderr (a bar on a terminal, a line per 10% otherwise); the summary \
        (created, existing, skipped, refused rows with their line numbers) goes to stdout.\n\n\
        Exit codes: 0 every row imported or already there, 5 done but some rows were refused \
        (listed), 2 the header is not usable, 3 no such newsletter or file, 1 any other \
        failure."
    )]
    Import {
        /// The newsletter's subdomain.
        subdomain: String,
        /// The CSV file, or - to read standard input.
        csv: PathBuf,
    },
    /// Write a newsletter's subscribers as CSV to standard output.
    #[command(
        long_about = "Write a newsletter's subscribers as CSV to standard output, oldest \
        first, streamed row by row.\n\n\
        Columns: email,name,tags,status,subscribed_at,unsubscribed_at,created_at (tags \
        separated by ;). The file can be given to `broadsheet import` as it is; unsubscribed \
        and bounced rows are skipped there. Cells that a spreadsheet would run as a formula \
        (starting with =, +, - or @) get a leading ', which import removes again.\n\n\
        Exit codes: 0 written, 3 no such newsletter, 1 any other failure."
    )]
    Export {
        /// The newsletter's subdomain.
        subdomain: String,
    },
    /// Print the OpenAPI document of the REST API.
    Openapi,
    /// Internal: Markdown on standard input to HTML on standard output. `serve` renders each
    /// issue in such a child process, so a render that overruns its budget can be killed.
    #[command(name = "render-markdown", hide = true)]
    RenderMarkdown,
}

/// Flags of `serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address and port to listen on.
    #[arg(long, env = "BROADSHEET_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// The service origin as users reach it; the API is at {base_url}/api/v1.
    #[arg(
        long,
        env = "BROADSHEET_BASE_URL",
        default_value = "http://localhost:8080"
    )]
    pub base_url: String,
    /// Newsletter sites answer at <subdomain>.<public-host>, with the scheme of --base-url.
    #[arg(long, env = "BROADSHEET_PUBLIC_HOST", default_value = "localhost:8080")]
    pub public_host: String,
    /// smtp://[user:pass@]host:port (STARTTLS when offered) or smtps://... (TLS). Without it
    /// mail is written to <data-dir>/outbox/*.eml and logged.
    #[arg(long, env = "BROADSHEET_SMTP_URL")]
    pub smtp_url: Option<String>,
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
    /// Tier of new newsletters: free, pending or paid.
    #[arg(long, env = "BROADSHEET_DEFAULT_TIER", default_value = "free")]
    pub default_tier: String,
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
    /// A request body gets this long to arrive (milliseconds), plus one second for every
    /// --body-min-rate bytes received: a slow but steady upload goes through, a trickle is
    /// answered 408 and the connection closed.
    #[arg(long, env = "BROADSHEET_BODY_READ_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub body_read_timeout_ms: u64,
    /// The average rate, in bytes per second, a request body must keep up (see
    /// --body-read-timeout-ms).
    #[arg(long, env = "BROADSHEET_BODY_MIN_RATE", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_min_rate: u64,
    /// For the integration tests only: the clock follows `<data-dir>/test-clock` (see
    /// `clock::follow_test_clock`). Hidden, and with no environment variable, so that a
    /// production server cannot have its time moved by accident.
    #[arg(long, hide = true)]
    pub test_clock: bool,
}
