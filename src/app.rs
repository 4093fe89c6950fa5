//! `broadsheet serve`: opens the store, starts the job runner and serves the base host (account
//! flows, dashboard, REST API) until Ctrl-C or SIGTERM.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use poem::web::Data;
use poem::web::Json;
use poem::{EndpointExt, IntoResponse, Response, Route, handler, http::StatusCode};

use crate::config::ServeArgs;
use crate::domain::accounts::SessionLifetimes;
use crate::domain::content::render_budget;
use crate::domain::delivery::relays;
use crate::domain::delivery::sending::OutagePolicy;
use crate::domain::delivery::verp::{self, ReturnPaths};
use crate::domain::newsletters::Tier;
use crate::domain::newsletters::custom_domains::Dns;
use crate::domain::newsletters::dkim::OperatorKey;
use crate::domain::values::credentials::{self, CredentialKey, KeySource};
use crate::domain::values::secrets::ServerSecret;
use crate::domain::values::urls::SiteUrls;
use crate::http::compression::CompressText;
use crate::http::csrf::CookieBeforeBody;
use crate::http::headers::{Policy, SecurityHeaders};
use crate::http::routing::{get, post};
use crate::http::server::{ConnectionCaps, ReadLimits};
use crate::jobs::send_issue::SendSettings;
use crate::jobs::{JobContext, OwnRelays, Runner, Stop};
use crate::mail::bounce_listener::{self, ListenerSettings};
use crate::mail::dkim::Signer;
use crate::mail::{MailRoute, Relay, RelaySet, SmtpSettings, TlsTrust, Transport};
use crate::state::{AppState, RateLimits};
use crate::store::{self, DataDirLock, Db, StoreError};

pub mod listening;

fn invalid(message: String) -> StoreError {
    StoreError::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        message,
    ))
}

/// The flags about mail, checked before the data directory is touched: a bad one creates
/// nothing.
struct MailFlags {
    /// One trust for every relay: the server's and the newsletters' own.
    trust: TlsTrust,
    relays: Vec<SmtpSettings>,
    dns: Dns,
    mail_from: (String, String),
}

impl MailFlags {
    fn read(args: &ServeArgs) -> Result<Self, StoreError> {
        let trust = TlsTrust::load(args.smtp_ca.as_deref()).map_err(invalid)?;
        let relays = args
            .smtp_url
            .iter()
            .map(|url| {
                Ok(SmtpSettings {
                    timeout: Duration::from_millis(args.smtp_timeout_ms),
                    allow_plaintext_auth: args.smtp_allow_plaintext_auth,
                    ..SmtpSettings::parse(url, trust.clone())?
                })
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(invalid)?;
        let dns = Dns::parse(args.dns_server.as_deref()).map_err(invalid)?;
        let address = match &args.mail_from {
            Some(from) => from.clone(),
            None => format!("no-reply@{}", mail_domain(&args.base_url)),
        };
        Ok(Self {
            trust,
            relays,
            dns,
            mail_from: ("Broadsheet".to_string(), address),
        })
    }
}

/// The domain of the default sender address: the base URL's, when it is a domain name with a
/// dot. An IP address or a bare host name makes an address that relays refuse (Postfix: "501
/// Bad sender address syntax").
fn mail_domain(base_url: &str) -> String {
    url::Url::parse(base_url)
        .ok()
        .and_then(|u| match u.host() {
            Some(url::Host::Domain(name)) if name.contains('.') => Some(name.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| "localhost.localdomain".to_string())
}

/// What the database gives the server at its start: migrated, with the server's secret, the
/// credential key and the operator's DKIM key.
struct Opened {
    secret: ServerSecret,
    credentials: CredentialKey,
    dkim: Option<Arc<Signer>>,
}

fn open_store(data_dir: &Path, args: &ServeArgs) -> Result<Opened, StoreError> {
    let mut conn = store::open(&store::database_path(data_dir))?;
    for name in store::migrate(&mut conn)? {
        eprintln!("store: applied migration {name}");
    }
    let dkim = match &args.dkim_domain {
        Some(domain) => {
            let key = OperatorKey::load_or_create(&conn, domain, &args.dkim_selector)?;
            eprintln!(
                "mail: signing with DKIM as {} (selector {}); `broadsheet dkim` prints its DNS record",
                key.domain, key.selector
            );
            Some(Arc::new(Signer::new(&key).map_err(invalid)?))
        }
        None => None,
    };
    Ok(Opened {
        secret: ServerSecret::load_or_create(&conn)?,
        credentials: load_credential_key(data_dir, &conn)?,
        dkim,
    })
}

/// Where mail goes: the relays of `--smtp-url` in order, each with its state (reachable, pace,
/// counts) for as long as the process lives; or, without any, files in `<data-dir>/outbox`.
fn mail_route(
    data_dir: &Path,
    relays: Vec<SmtpSettings>,
    pool: &store::Pool,
    args: &ServeArgs,
) -> MailRoute {
    if relays.is_empty() {
        return MailRoute::Outbox(data_dir.join("outbox"));
    }
    let first_retry = Duration::from_millis(args.send_outage_retry_ms);
    MailRoute::Relays(RelaySet::new(
        relays
            .into_iter()
            .map(|settings| Arc::new(Relay::new(settings, Some(pool.clone()), first_retry)))
            .collect(),
    ))
}

/// Everything the job runner's workers share.
struct Machines<'a> {
    pool: &'a store::Pool,
    transport: &'a Transport,
    mail: &'a MailFlags,
    urls: &'a SiteUrls,
    opened: &'a Opened,
    return_paths: &'a ReturnPaths,
    stop: &'a Stop,
}

impl Machines<'_> {
    fn job_context(&self, args: &ServeArgs) -> JobContext {
        JobContext {
            pool: self.pool.clone(),
            transport: self.transport.clone(),
            mail_from: self.mail.mail_from.clone(),
            urls: self.urls.clone(),
            secret: self.opened.secret.clone(),
            return_paths: self.return_paths.clone(),
            send: SendSettings {
                concurrency: args.send_concurrency as usize,
                rate: args.send_rate,
                retry_base: jiff::SignedDuration::from_millis(args.send_retry_base_ms as i64),
                outage: OutagePolicy {
                    retry_base: jiff::SignedDuration::from_millis(args.send_outage_retry_ms as i64),
                    give_up_after: jiff::SignedDuration::from_millis(
                        args.send_outage_limit_ms as i64,
                    ),
                },
            },
            webhooks: crate::webhooks::Settings {
                retry_base: jiff::SignedDuration::from_millis(args.webhook_retry_base_ms as i64),
                timeout: Duration::from_millis(args.webhook_timeout_ms.max(1)),
                allow_private: args.allow_private_webhooks,
                dns: self.mail.dns.clone(),
            },
            stop: self.stop.clone(),
            credentials: self.opened.credentials.clone(),
            own_relays: OwnRelays {
                trust: self.mail.trust.clone(),
                allow_private: args.allow_private_relays,
                timeout: Duration::from_millis(args.smtp_timeout_ms),
                first_retry: Duration::from_millis(args.send_outage_retry_ms),
                in_use: Default::default(),
            },
        }
    }
}

/// What every door's handler is given.
fn app_state(
    args: &ServeArgs,
    pool: store::Pool,
    urls: SiteUrls,
    opened: &Opened,
    mail: &MailFlags,
    bounce_domain: &str,
) -> AppState {
    AppState {
        db: Db::new(pool),
        urls,
        secret: opened.secret.clone(),
        default_tier: Tier::from(args.default_tier),
        rate_limits: RateLimits {
            get: args.rate_limit_get,
            write: args.rate_limit_write,
            bulk: args.rate_limit_bulk,
        },
        allow_private_webhooks: args.allow_private_webhooks,
        dns: mail.dns.clone(),
        trusted_proxies: args
            .trusted_proxy
            .iter()
            .map(|ip| ip.to_canonical())
            .collect(),
        sessions: SessionLifetimes {
            idle: jiff::SignedDuration::from_mins(args.session_idle_minutes.into()),
            absolute: jiff::SignedDuration::from_mins(args.session_absolute_minutes.into()),
        },
        bounce_domain: bounce_domain.to_string(),
        credentials: opened.credentials.clone(),
        allow_private_relays: args.allow_private_relays,
        stripe_api: args.stripe_api_url.trim_end_matches('/').to_string(),
        // Once per process: the policy depends only on the Stripe API's address.
        account_policy: Box::leak(Box::new(Policy::site_account(
            &crate::payments::hosted_page_origins(&args.stripe_api_url),
        ))),
    }
}

/// Every door, by host: the public sites on theirs, the rest on the base host.
fn app(state: Arc<AppState>, trust: TlsTrust) -> impl poem::Endpoint<Output = Response> {
    let https = state.urls.base_url.starts_with("https://");
    let base = Route::new()
        .at("/up", get(up))
        .at(
            "/bounces/:token",
            post(crate::api::bounces::report_with_token),
        )
        .nest("/api/v1", crate::api::routes())
        .nest("/api", crate::api::other_versions())
        // The forms' tokens are in their bodies; the cookie they are bound to comes first.
        .nest(
            "/",
            crate::web::routes().with(CookieBeforeBody {
                refusal: || crate::web::WebError::BadCsrfToken.into(),
            }),
        )
        .map_to_response()
        .boxed();
    HostRouter {
        base,
        site: crate::site::routes().boxed(),
    }
    .with(SecurityHeaders { https })
    .with(CompressText)
    .data(state)
    // The dashboard's "Test connection" checks a relay's certificate as sends do.
    .data(trust)
    .map_to_response()
}

/// The connection limits of `--header-read-timeout-ms`, the body flags and the caps.
fn connection_limits(args: &ServeArgs, state: &AppState) -> (ReadLimits, ConnectionCaps) {
    let limits = ReadLimits {
        head: Duration::from_millis(args.header_read_timeout_ms),
        body_window: Duration::from_millis(args.body_read_timeout_ms),
        body_min_rate: args.body_min_rate,
        body_total: Duration::from_millis(args.body_total_timeout_ms),
    };
    let caps = ConnectionCaps {
        per_client: args.max_connections_per_client as usize,
        total: args.max_connections as usize,
        exempt: state.trusted_proxies.clone(),
    };
    (limits, caps)
}

/// Says where mail goes, one line per relay.
fn describe_route(route: &MailRoute) {
    match route {
        MailRoute::Outbox(dir) => {
            eprintln!("mail: no --smtp-url, writing messages to {}", dir.display())
        }
        MailRoute::Relays(set) => {
            for (n, relay) in set.relays.iter().enumerate() {
                let s = &relay.settings;
                eprintln!(
                    "mail: {} {}; its TLS certificate is checked against {}{}{}",
                    if n == 0 {
                        "sending through".to_string()
                    } else {
                        format!("relay {} when the ones before are unreachable:", n + 1)
                    },
                    relay.name,
                    s.trust.described,
                    if s.allow_plaintext_auth && s.credentials.is_some() {
                        "; credentials may go in the clear (--smtp-allow-plaintext-auth)"
                    } else {
                        ""
                    },
                    describe_limits(&s.limits),
                )
            }
        }
    }
}

/// Starts the SMTP bounce listener of `--bounce-listen`, if asked; the address it took.
async fn start_bounce_listener(
    args: &ServeArgs,
    return_paths: &ReturnPaths,
    pool: &store::Pool,
) -> std::io::Result<Option<std::net::SocketAddr>> {
    let Some(address) = &args.bounce_listen else {
        return Ok(None);
    };
    let settings = ListenerSettings {
        return_paths: return_paths.clone(),
        command_timeout: Duration::from_millis(args.bounce_command_timeout_ms),
        session_timeout: Duration::from_millis(args.bounce_session_timeout_ms),
    };
    let bounces = tokio::net::TcpListener::bind(address).await?;
    let address = bounces.local_addr()?;
    eprintln!(
        "bounces: SMTP listener on {address}, taking mail for {}",
        settings.return_paths.pattern()
    );
    tokio::spawn(bounce_listener::run(
        bounces,
        settings,
        Db::new(pool.clone()),
    ));
    Ok(Some(address))
}

/// Runs the server until a shutdown signal: reads the flags, opens the store, starts the job
/// runner and the bounce listener, and serves every door.
pub fn serve(data_dir: &Path, args: ServeArgs) -> Result<(), StoreError> {
    let mail = MailFlags::read(&args)?;

    let _lock = DataDirLock::acquire(data_dir)?;
    listening::forget(data_dir)?;
    // Bound before anything else starts: with `--listen ...:0` the base URL and the public
    // host may name the port it took (as port 0).
    let http = bind(&args.listen)?;
    let http_address = http.local_addr()?;
    let urls = SiteUrls::new(
        &listening::base_url_on(&args.base_url, http_address.port()),
        &listening::public_host_on(&args.public_host, http_address.port()),
    );
    if args.test_clock {
        crate::clock::follow_test_clock(data_dir)?;
    }

    let opened = open_store(data_dir, &args)?;
    let pool = store::open_pool(&store::database_path(data_dir), 16)?;
    let route = mail_route(data_dir, mail.relays.clone(), &pool, &args);
    let transport = Transport {
        route,
        dkim: opened.dkim.clone(),
    };
    let return_paths = ReturnPaths::new(
        &opened.secret,
        &verp::bounce_domain(
            args.bounce_domain.as_deref(),
            args.dkim_domain.as_deref(),
            urls.public_host_name(),
        ),
    );
    eprintln!(
        "mail: issues go out with return paths {}",
        return_paths.pattern()
    );
    // Issues render in child processes of this binary, which are killed when they overrun.
    render_budget::use_child_processes(render_budget::own_binary()?);

    let stop = Stop::default();
    let machines = Machines {
        pool: &pool,
        transport: &transport,
        mail: &mail,
        urls: &urls,
        opened: &opened,
        return_paths: &return_paths,
        stop: &stop,
    };
    let runner = Runner::start(
        Arc::new(machines.job_context(&args)),
        args.job_workers,
        args.webhook_workers as usize,
        Duration::from_millis(args.job_poll_ms.max(10)),
    )?;
    let state = Arc::new(app_state(
        &args,
        pool.clone(),
        urls,
        &opened,
        &mail,
        return_paths.domain(),
    ));
    let (limits, caps) = connection_limits(&args, &state);
    crate::http::server::fit_open_files(caps.total);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let bounces = start_bounce_listener(&args, &return_paths, &pool).await?;
        crate::http::server::widen_backlog(&http, caps.total)?;
        let listener = tokio::net::TcpListener::from_std(http)?;
        describe_route(&transport.route);
        eprintln!(
            "broadsheet listening on http://{http_address} (base URL {})",
            state.urls.base_url
        );
        listening::Listening {
            http: http_address,
            bounces,
            base_url: state.urls.base_url.clone(),
            bounce_domain: state.bounce_domain.clone(),
        }
        .write(data_dir)?;
        let app = app(state, mail.trust.clone());
        crate::http::server::serve(
            listener,
            app,
            limits,
            caps,
            shutdown_signal(stop),
            Duration::from_secs(10),
        )
        .await
    });
    runner.shutdown();
    result.map_err(StoreError::Io)
}

/// Binds `--listen` (an address or a host name, and a port; 0 for any free one), ready for
/// tokio.
fn bind(listen: &str) -> Result<std::net::TcpListener, StoreError> {
    let listener = std::net::TcpListener::bind(listen)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}")))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The key of `<data-dir>/credentials.key`, made at the first start. A key that opens none of
/// the stored relay passwords (the database came without its key file) does not stop the
/// server: one line says so, and those relays fail with the reason until their owners enter
/// the passwords again.
fn load_credential_key(
    data_dir: &Path,
    conn: &rusqlite::Connection,
) -> Result<CredentialKey, StoreError> {
    let path = credentials::key_file(data_dir);
    let (key, source) = CredentialKey::load_or_create(&path).map_err(invalid)?;
    if let Some(warning) = credentials::loose_mode(&path) {
        eprintln!("credentials: {warning}");
    }
    let unreadable = relays::sealed_with_other_keys(conn, Some(&key)).map_err(|e| match e {
        crate::domain::DomainError::Store(e) => e,
        other => invalid(other.to_string()),
    })?;
    let made = match source {
        KeySource::Created => " (there was no key file, so a new one was made)",
        KeySource::Existing => "",
    };
    if unreadable > 0 {
        eprintln!(
            "credentials: {unreadable} relay password(s) in the database were sealed with another \
             key than {}{made}; they cannot be read, and those newsletters' relays fail until \
             their owners enter the passwords again (or stop the server and put the original key \
             file back)",
            path.display()
        );
    } else if source == KeySource::Created {
        eprintln!(
            "credentials: made the key file {}, which seals the passwords of newsletters' own \
             relays; keep a copy of it apart from the backups (docs/operations.md)",
            path.display()
        );
    }
    Ok(key)
}

/// Sends each request to a newsletter's public site or to the base host, by its Host header.
/// The site's answers are marked for its own Content-Security-Policy.
struct HostRouter {
    base: poem::endpoint::BoxEndpoint<'static, Response>,
    site: poem::endpoint::BoxEndpoint<'static, Response>,
}

impl poem::Endpoint for HostRouter {
    type Output = Response;

    async fn call(&self, mut req: poem::Request) -> poem::Result<Response> {
        let state = req
            .data::<Arc<AppState>>()
            .expect("app state is installed")
            .clone();
        let mut site_answer = match crate::site::resolve(&req, &state).await {
            Ok(None) => return self.base.call(req).await,
            Ok(Some(site)) => {
                req.extensions_mut().insert(site);
                self.site.call(req).await?
            }
            Err(response) => response,
        };
        if site_answer.data::<Policy>().is_none() {
            site_answer.set_data(Policy::Site);
        }
        Ok(site_answer)
    }
}

/// Waits for Ctrl-C or SIGTERM, then asks the jobs to wind down at once (a send finishes the
/// messages in flight and leaves the rest queued) while the web server drains its requests.
async fn shutdown_signal(stop: Stop) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    eprintln!("broadsheet: shutting down");
    stop.request();
}

/// `GET /up`: 200 `{"status":"ok"}` when the database answers, 503 otherwise.
#[handler]
async fn up(Data(state): Data<&Arc<AppState>>) -> Response {
    let check = state
        .db
        .run(|conn| {
            conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
                .map_err(StoreError::from)
        })
        .await;
    match check {
        Ok(_) => Json(serde_json::json!({"status": "ok"})).into_response(),
        Err(e) => {
            eprintln!("up: database check failed: {e}");
            Json(serde_json::json!({"status": "error"}))
                .with_status(StatusCode::SERVICE_UNAVAILABLE)
                .into_response()
        }
    }
}

/// "; at most 14 a second, 50000 a day", for the start-up log.
fn describe_limits(limits: &crate::domain::delivery::relays::RelayLimits) -> String {
    let parts: Vec<String> = [
        (limits.per_second, "a second"),
        (limits.per_hour, "an hour"),
        (limits.per_day, "a day"),
    ]
    .iter()
    .filter_map(|(n, per)| n.map(|n| format!("{n} {per}")))
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("; at most {}", parts.join(", "))
    }
}
