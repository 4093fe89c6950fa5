//! The operator's commands: the clap definitions and the dispatch here, one file per command.
//! Each parses its arguments, calls the store or the domain layer, prints a clear result and
//! exits with a code scripts can use (docs/decisions.md §1).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::app::listening::Listening;
use crate::config::{DEFAULT_PUBLIC_HOST, ServeArgs, TierValue};
use crate::domain::DomainError;
use crate::domain::newsletters::{self as newsletter, Newsletter};
use crate::store::{self, StoreError};

mod backup;
mod bounce;
mod bounce_token;
mod dkim;
mod export;
mod import;
mod migrate;
mod newsletters;
mod openapi;
mod operator;
mod render_markdown;
mod restore;
mod serve;
mod status;
mod tier;
mod tracking;

#[derive(Debug, Parser)]
#[command(
    name = "broadsheet",
    version,
    // Set by hand: for an unknown flag clap would otherwise show the usage with the flag it
    // suggests in it (`broadsheet --version <COMMAND>` for `--verbose`), a command line that
    // does not work.
    override_usage = "broadsheet [OPTIONS] <COMMAND>",
    about = "Self-hostable newsletter publishing: dashboard, public sites, REST API and webhooks in one binary",
    long_about = "Broadsheet runs a newsletter service from one binary and one SQLite file.\n\n\
                  Start it with `broadsheet serve`; everything else here is for the operator: \
                  migrations, backups, tiers, imports. Every flag can also be set with an \
                  environment variable BROADSHEET_<FLAG>, e.g. BROADSHEET_DATA_DIR.\n\n\
                  Exit codes: 0 success, 1 failure, 2 bad usage, 3 not found, 4 the data \
                  directory is held by a running server, 5 an import finished but refused \
                  some rows, 6 the message given to `bounce` is not a bounce or complaint \
                  report."
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
    // Boxed: the serve flags outweigh every other command's arguments many times over.
    Serve(Box<ServeArgs>),
    /// Apply pending database migrations and exit (serve also applies them at start).
    Migrate,
    /// Write a consistent copy of the database to FILE, even while serve runs.
    Backup {
        /// Where to write the backup (a single SQLite file).
        file: PathBuf,
    },
    /// Replace the database with a backup made by `backup` (refuses while a server runs); the
    /// database it replaces is kept beside it.
    #[command(
        long_about = "Replace the database with a backup made by `backup`. Refused while a \
        server holds the data directory (exit 4).\n\n\
        The database it replaces is copied first to broadsheet.db.before-restore-<UTC time> in \
        the data directory, and the command says where; delete it once the restored database \
        is the one you want. A backup that is not a healthy database is refused and changes \
        nothing.\n\n\
        Exit codes: 0 restored, 3 no such backup file, 4 a server is running, 1 any other \
        failure."
    )]
    Restore {
        /// The backup file to restore.
        file: PathBuf,
    },
    /// List every newsletter: subdomain, owner, tier, status and active subscribers.
    #[command(
        long_about = "List every newsletter of the installation, newest first, one a line, \
        tab-separated under a header line: subdomain, owner (the account's e-mail address), \
        tier, status and active subscribers (from the counters the database keeps, as the \
        dashboard's operator page shows them). `| column -t -s $'\\t'` aligns them. The count \
        goes to stderr. Works while `serve` runs.\n\n\
        Exit codes: 0 listed (also none), 3 no database in the data directory, 1 any other \
        failure."
    )]
    Newsletters,
    /// Set a newsletter's tier: free (no sending), pending (payment pending) or paid.
    Tier {
        /// The newsletter's subdomain.
        subdomain: String,
        /// The new tier.
        #[arg(value_enum)]
        tier: TierValue,
    },
    /// Make an account an operator of this installation (grant) or not (revoke).
    #[command(
        long_about = "Make an account an operator of this installation (grant) or not \
        (revoke). The first account created on a fresh install is an operator already. \
        Operators get the dashboard's operator page (/operator: every newsletter, its tier and \
        status, the upgrade requests) and are mailed each upgrade request. Works while `serve` \
        runs.\n\n\
        Exit codes: 0 done (or nothing to change), 3 no account has the address, 1 any other \
        failure."
    )]
    Operator {
        #[command(subcommand)]
        action: operator::OperatorAction,
    },
    /// Set a newsletter's status: active, paused (sending held) or cancelled (read-only).
    Status {
        /// The newsletter's subdomain.
        subdomain: String,
        /// The new status.
        #[arg(value_enum)]
        status: status::StatusValue,
    },
    /// Turn open and click tracking in sent issues on or off (on by default).
    Tracking {
        /// The newsletter's subdomain.
        subdomain: String,
        /// Whether sent issues carry the open pixel and tracked links.
        #[arg(value_enum)]
        setting: tracking::TrackingValue,
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
        Mailchimp's audience export and Substack's subscriber export are read as they come: \
        names, every tag and the original subscription dates (docs/subscribers.md, \"Import \
        formats\"); the summary says which columns were used and which were ignored.\n\n\
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
        Columns: email,name,tags,status,subscribed_at,unsubscribed_at,created_at,membership,membership_until (tags \
        separated by ;), then one column per custom field, named as the field (not read by import yet). The file can be given to `broadsheet import` as it is; unsubscribed \
        and bounced rows are skipped there. Cells that a spreadsheet would run as a formula \
        (starting with =, +, - or @) get a leading ', which import removes again.\n\n\
        Exit codes: 0 written, 3 no such newsletter, 1 any other failure."
    )]
    Export {
        /// The newsletter's subdomain.
        subdomain: String,
    },
    /// Print the DNS TXT record that publishes the DKIM key `serve --dkim-domain` signs with.
    #[command(
        long_about = "Print the DNS TXT record that publishes the operator's DKIM key, \
        one line: <selector>._domainkey.<domain> TXT \"v=DKIM1; k=rsa; p=<base64>\".\n\n\
        The key is generated the first time `serve` starts with --dkim-domain and kept in the \
        database; the domain and selector are the ones serve was last started with, unless \
        given here.\n\n\
        Exit codes: 0 printed, 3 no key yet (serve has not run with --dkim-domain), 1 any \
        other failure."
    )]
    Dkim {
        /// The signing domain to print the record for (default: serve's).
        #[arg(long, env = "BROADSHEET_DKIM_DOMAIN")]
        dkim_domain: Option<String>,
        /// The selector to print the record for (default: serve's).
        #[arg(long, env = "BROADSHEET_DKIM_SELECTOR")]
        dkim_selector: Option<String>,
    },
    /// Apply one bounce (DSN) or complaint (ARF) message read on standard input.
    #[command(
        long_about = "Apply one bounce or complaint report, read on standard input, to a \
        newsletter: for an MTA's pipe transport (docs/deliverability.md, \"Bounces and \
        complaints\"). A DSN's permanent failures (5.x.x) mark the subscriber and its newest \
        delivery bounced; soft bounces (4.x.x, delayed) are counted, and 3 in a row bounce \
        the subscriber; a complaint (ARF) unsubscribes them. With --return-path instead of \
        a subdomain, the report is about the delivery that return path (VERP) names, for a \
        pipe transport that takes the whole bounce domain. Works while `serve` runs.\n\n\
        Exit codes: 0 applied (addresses that are not subscribers are listed and skipped), 6 \
        not a bounce or complaint report (or larger than 1 MiB): nothing was changed, 3 no \
        such newsletter, or not a valid return path, 1 any other failure."
    )]
    Bounce {
        /// The newsletter's subdomain.
        #[arg(required_unless_present = "return_path")]
        subdomain: Option<String>,
        /// The address the report was mailed to, `bounce+<token>@<bounce domain>` (Postfix's
        /// `${recipient}`), instead of a subdomain.
        #[arg(long, conflicts_with = "subdomain")]
        return_path: Option<String>,
        #[command(flatten)]
        domain: BounceDomainArgs,
    },
    /// Print where a newsletter's bounces come back: its bounce token, the URL an MTA or
    /// provider posts reports to, the return paths of its issues and the pipe command.
    #[command(
        name = "bounce-token",
        long_about = "Print where a newsletter's bounces come back, as the dashboard's settings \
        page shows it: its bounce token, the URL an MTA or provider posts reports to, the \
        return paths of its issues and the pipe command.\n\n\
        The URL starts with the base URL, and the return paths end with the bounce domain, of \
        the server last started on this data directory (it writes them to <data-dir>/listening \
        at start), unless --base-url or the bounce domain's flags are given. Before any server \
        has started, serve's defaults are used and stderr says so.\n\n\
        Exit codes: 0 printed, 3 no such newsletter, 1 any other failure."
    )]
    BounceToken {
        /// The newsletter's subdomain.
        subdomain: String,
        /// The service origin, as `serve --base-url` (the URL printed starts with it)
        /// [default: the running or last server's, else http://localhost:8080].
        #[arg(long, env = "BROADSHEET_BASE_URL")]
        base_url: Option<String>,
        #[command(flatten)]
        domain: BounceDomainArgs,
    },
    /// Print the OpenAPI document of the REST API.
    Openapi,
    /// Internal: Markdown on standard input to HTML (or plain text) on standard output. `serve`
    /// renders each issue in such a child process, so a render that overruns its budget can be
    /// killed.
    #[command(name = "render-markdown", hide = true)]
    RenderMarkdown {
        /// Write the plain text of the mail's text part instead of HTML.
        #[arg(long)]
        text: bool,
    },
}

/// Entry point of the binary. A malformed argument never gets here: clap prints the usage
/// and exits 2 first, before anything touches the data directory.
pub fn main() -> ExitCode {
    // mail-send and ureq must agree on one rustls crypto provider (two providers in one process panic at start).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        end_quietly_on_closed_pipe();
    }
    let data_dir = cli.data_dir.as_path();
    let result = match cli.command {
        Command::Serve(args) => serve::run(data_dir, *args),
        Command::Migrate => migrate::run(data_dir),
        Command::Backup { file } => backup::run(data_dir, &file),
        Command::Restore { file } => restore::run(data_dir, &file),
        Command::Newsletters => newsletters::run(data_dir),
        Command::Tier { subdomain, tier } => tier::run(data_dir, &subdomain, tier),
        Command::Operator { action } => operator::run(data_dir, action),
        Command::Status { subdomain, status } => status::run(data_dir, &subdomain, status),
        Command::Tracking { subdomain, setting } => tracking::run(data_dir, &subdomain, setting),
        Command::Import { subdomain, csv } => import::run(data_dir, &subdomain, &csv),
        Command::Export { subdomain } => export::run(data_dir, &subdomain),
        Command::Dkim {
            dkim_domain,
            dkim_selector,
        } => dkim::run(data_dir, dkim_domain, dkim_selector),
        Command::Bounce {
            subdomain,
            return_path,
            domain,
        } => match (subdomain, return_path) {
            (_, Some(address)) => bounce::run(
                data_dir,
                bounce::About::ReturnPath(&address, &domain.bounce_domain(data_dir)),
            ),
            (Some(subdomain), None) => bounce::run(data_dir, bounce::About::Newsletter(&subdomain)),
            (None, None) => unreachable!("clap requires one of them"),
        },
        Command::BounceToken {
            subdomain,
            base_url,
            domain,
        } => bounce_token::run(data_dir, &subdomain, base_url.as_deref(), &domain),
        Command::Openapi => openapi::run(),
        Command::RenderMarkdown { text } => render_markdown::run(text),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("broadsheet: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Lets a command writing to a closed pipe (`broadsheet openapi | head`, `export | head`) end
/// quietly by SIGPIPE, as Unix tools do. Rust ignores SIGPIPE, which turns every later print
/// into a panic; the server keeps ignoring it (a closed socket is an error it handles).
fn end_quietly_on_closed_pipe() {
    // SAFETY: called at start on the only thread, before anything writes to a pipe; SIG_DFL is
    // a valid action for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The flags `serve` takes the bounce domain from, for the commands that need it. Without any
/// of them, the bounce domain of the server last started on the data directory.
#[derive(Debug, clap::Args)]
pub struct BounceDomainArgs {
    /// As `serve --bounce-domain`: the domain of the return paths [default: the running or
    /// last server's].
    #[arg(long, env = "BROADSHEET_BOUNCE_DOMAIN")]
    bounce_domain: Option<String>,
    /// As `serve --dkim-domain` (the bounce domain's default).
    #[arg(long, env = "BROADSHEET_DKIM_DOMAIN")]
    dkim_domain: Option<String>,
    /// As `serve --public-host` (the bounce domain's default without a DKIM domain)
    /// [default: localhost:8080].
    #[arg(long, env = "BROADSHEET_PUBLIC_HOST")]
    public_host: Option<String>,
}

impl BounceDomainArgs {
    /// What the flags say, else what the last server recorded, else serve's default.
    fn bounce_domain(&self, data_dir: &Path) -> String {
        self.given_by_flags()
            .or_else(|| Listening::read(data_dir).map(|served| served.bounce_domain))
            .unwrap_or_else(|| self.with_defaults())
    }

    /// The bounce domain when any of the flags is given.
    fn given_by_flags(&self) -> Option<String> {
        let given = self.bounce_domain.is_some()
            || self.dkim_domain.is_some()
            || self.public_host.is_some();
        given.then(|| self.with_defaults())
    }

    fn with_defaults(&self) -> String {
        crate::domain::delivery::verp::bounce_domain(
            self.bounce_domain.as_deref(),
            self.dkim_domain.as_deref(),
            crate::domain::values::urls::split_port(
                self.public_host.as_deref().unwrap_or(DEFAULT_PUBLIC_HOST),
            )
            .0,
        )
    }
}

/// Exit codes: 0 ok, 1 failure, 2 usage (clap), 3 not found, 4 data directory busy, 5 an
/// import finished but refused some rows, 6 `bounce` was given something not a report.
const EXIT_FAILURE: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_NOT_FOUND: u8 = 3;
const EXIT_LOCKED: u8 = 4;
const EXIT_ROWS_REFUSED: u8 = 5;
const EXIT_NOT_A_REPORT: u8 = 6;

/// A command's failure with the exit code it maps to.
struct Failure {
    code: u8,
    message: String,
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        let code = if matches!(e, StoreError::Locked(_)) {
            EXIT_LOCKED
        } else {
            EXIT_FAILURE
        };
        Failure {
            code,
            message: explained(&e),
        }
    }
}

impl From<DomainError> for Failure {
    fn from(e: DomainError) -> Self {
        let code = match &e {
            DomainError::NotFound(_) => EXIT_NOT_FOUND,
            DomainError::Invalid(..) => EXIT_USAGE,
            _ => EXIT_FAILURE,
        };
        let message = match &e {
            DomainError::Store(store) => explained(store),
            _ => e.to_string(),
        };
        Failure { code, message }
    }
}

/// A store failure in words, with what to do when the disk is full.
fn explained(e: &StoreError) -> String {
    if e.is_disk_full() {
        format!("{e}\nthe disk is full: free some space and run the command again")
    } else {
        e.to_string()
    }
}

fn usage(message: String) -> Failure {
    Failure {
        code: EXIT_USAGE,
        message,
    }
}

/// Opens the database of `data_dir`, applying pending migrations.
/// The database of `data_dir`, migrated; "no database in DIR" (exit 3) when there is none, so
/// a mistyped `--data-dir` is reported instead of answered from a new, empty database. Only
/// `serve`, `migrate` and `restore` create one.
fn open_migrated(data_dir: &Path) -> Result<rusqlite::Connection, Failure> {
    let mut conn = store::open(&existing_database(data_dir)?)?;
    store::migrate(&mut conn)?;
    Ok(conn)
}

/// The path of `data_dir`'s database if it exists: the check every command that reads an
/// existing database makes before touching the directory.
fn existing_database(data_dir: &Path) -> Result<PathBuf, Failure> {
    let db = store::database_path(data_dir);
    if db.is_file() {
        Ok(db)
    } else {
        Err(Failure {
            code: EXIT_NOT_FOUND,
            message: format!("no database in {}", data_dir.display()),
        })
    }
}

/// The newsletter with `subdomain`, or a not-found failure that names it.
fn by_subdomain(conn: &rusqlite::Connection, subdomain: &str) -> Result<Newsletter, Failure> {
    newsletter::get_by_subdomain(conn, subdomain).map_err(about_subdomain(subdomain))
}

/// The failure of a command given `subdomain`: a newsletter not found is named by it, in the
/// same words for every command.
fn about_subdomain(subdomain: &str) -> impl FnOnce(DomainError) -> Failure + '_ {
    move |e| match e {
        DomainError::NotFound(_) => Failure {
            code: EXIT_NOT_FOUND,
            message: format!("no newsletter has the subdomain {subdomain:?}"),
        },
        other => other.into(),
    }
}

/// The progress of a whole-database copy (`backup`, `restore`) on stderr, in pages.
struct PageProgress(ProgressBar);

impl PageProgress {
    fn new(what: &str) -> Self {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} pages ({percent}%)")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        PageProgress(bar)
    }

    fn update(&self, p: rusqlite::backup::Progress) {
        self.0.set_length(p.pagecount.max(0) as u64);
        self.0
            .set_position((p.pagecount - p.remaining).max(0) as u64);
    }

    fn finish(self) {
        self.0.finish();
    }
}
