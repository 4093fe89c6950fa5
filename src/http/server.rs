//! Accepts connections and serves the app with hyper's HTTP/1.1 connection directly.
//! poem's `Server` builds its hyper connection itself and gives it no timer, so a client
//! could take as long as it liked over its request head and trickle a body forever. Here
//! (docs/security.md, "Slow clients, refusals and connection caps"):
//!
//! - the head has a deadline (hyper's `header_read_timeout`);
//! - a body must keep a minimum rate over a sliding window, so a burst buys no silence, and
//!   must be complete within a total deadline whatever it has brought;
//! - a refusal (401, 403, 413, 429), and any answer given before its body was read, goes out
//!   at once with `Connection: close`: the rest of the body is never read;
//! - connections are capped per client address and in total, at accept time.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body as _, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use poem::http::uri::Scheme;
use poem::http::{HeaderValue, StatusCode, header};
use poem::web::{LocalAddr, RemoteAddr};
use poem::{Addr, Body, Endpoint, Request, Response};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

pub use crate::net::ConnectionCaps;
use crate::net::{Over, Place, Places};

/// How long a client may take to send what it sends.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimits {
    /// For a request's whole head (request line and headers), counted from the connection's
    /// start or the end of the previous answer, so it also ends idle kept-alive connections.
    pub head: Duration,
    /// The sliding window over which a body must average `body_min_rate`; the first window
    /// starts when the request is handed to the app.
    pub body_window: Duration,
    /// Bytes per second a body must average over every `body_window`.
    pub body_min_rate: u64,
    /// Whatever it has brought so far, a body must be complete within this.
    pub body_total: Duration,
}

/// Statuses that refuse a request: answered at once, the connection then closed, the body
/// never read.
const REFUSALS: [StatusCode; 4] = [
    StatusCode::UNAUTHORIZED,
    StatusCode::FORBIDDEN,
    StatusCode::PAYLOAD_TOO_LARGE,
    StatusCode::TOO_MANY_REQUESTS,
];

/// After the last answer of a connection the server shuts its side and, for at most this
/// long, throws away what the client still sends before closing (a "lingering close"): a
/// client still writing the body of a refused request then reads the answer instead of a
/// reset. Nothing is read before the answer; this bounds what comes after it.
pub const LINGER: Duration = Duration::from_secs(2);

/// Descriptors the process needs besides its HTTP connections: the database pool and its
/// files, the listeners, SMTP and webhook connections, render children's pipes, the bounce
/// listener's sessions.
const OTHER_FILES: u64 = 1024;

/// Serves `app` on `listener` until `shutdown` resolves, then lets the requests under way
/// finish for at most `grace`.
pub async fn serve<E>(
    listener: TcpListener,
    app: E,
    limits: ReadLimits,
    caps: ConnectionCaps,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> io::Result<()>
where
    E: Endpoint<Output = Response> + 'static,
{
    let app = Arc::new(app);
    let local = listener.local_addr()?;
    let places = Places::new(caps);
    let mut refusals = Refusals::default();
    // Each connection holds a receiver: `stopping` says when to wind down, and the sender
    // sees all of them dropped once every connection has ended.
    let (stop, stopping) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match places.take(peer.ip()) {
                    Ok(place) => {
                        let connection = Connection { local, peer, limits, place };
                        tokio::spawn(connection.serve(stream, app.clone(), stopping.clone()));
                    }
                    Err(over) => {
                        refusals.note(places.caps(), peer.ip(), over);
                        turn_away(stream);
                    }
                },
                Err(e) => {
                    // Out of file descriptors, most likely: wait for some to be freed
                    // rather than spin.
                    eprintln!("http: accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    drop(listener);
    drop(stopping);
    let _ = stop.send(true);
    let _ = tokio::time::timeout(grace, stop.closed()).await;
    Ok(())
}

/// Widens the listen backlog of the bound `listener` to `max_connections` (at least 1,024;
/// the kernel caps it at `net.core.somaxconn`) from the standard library's 128: a burst of
/// connections past the backlog waits a second or more for its handshake to be sent again.
/// `listen(2)` on a listening socket changes only its backlog.
pub fn widen_backlog(listener: &std::net::TcpListener, max_connections: usize) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let backlog = max_connections.clamp(1024, i32::MAX as usize) as i32;
        // SAFETY: the descriptor belongs to `listener`, alive for the whole call.
        if unsafe { libc::listen(listener.as_raw_fd(), backlog) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Raises the soft limit on open files (`RLIMIT_NOFILE`) to what `max_connections` need, as
/// far as the hard limit allows (systemd's default soft limit is 1,024), and says so when
/// the hard limit is too low.
pub fn fit_open_files(max_connections: usize) {
    #[cfg(unix)]
    {
        let wanted = max_connections as u64 + OTHER_FILES;
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given, which lives on this stack.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0
            || limit.rlim_cur >= wanted
        {
            return;
        }
        let raised = libc::rlimit {
            rlim_cur: wanted.min(limit.rlim_max),
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct, which lives on this stack.
        let have = match unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } {
            0 => raised.rlim_cur,
            _ => limit.rlim_cur,
        };
        if have < wanted {
            eprintln!(
                "http: this process may open only {have} files (RLIMIT_NOFILE) and \
                 --max-connections {max_connections} needs about {wanted}: raise LimitNOFILE \
                 in the systemd unit (install.sh writes 65536) or lower --max-connections"
            );
        }
    }
}

/// One accepted connection and what it needs to be served.
struct Connection {
    local: SocketAddr,
    peer: SocketAddr,
    limits: ReadLimits,
    /// Freed when the connection ends (dropped with it).
    place: Place,
}

impl Connection {
    async fn serve<E>(self, stream: TcpStream, app: Arc<E>, mut stopping: watch::Receiver<bool>)
    where
        E: Endpoint<Output = Response> + 'static,
    {
        let Connection {
            local,
            peer,
            limits,
            place,
        } = self;
        // A body cut for its slowness ends the connection without lingering: that client is
        // not still writing at any pace worth waiting for.
        let cut = Arc::new(AtomicBool::new(false));
        let cut_in_service = cut.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let (app, cut) = (app.clone(), cut_in_service.clone());
            // Boxed, so the connection can be polled without shutting the socket down.
            Box::pin(async move {
                let response = answer(&*app, req, local, peer, limits, &cut).await;
                Ok::<_, std::convert::Infallible>(hyper::Response::from(response))
            })
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.head);
        let mut conn = builder.serve_connection(TokioIo::new(stream), service);
        let ended = tokio::select! {
            ended = poll_fn(|cx| conn.poll_without_shutdown(cx)) => ended,
            _ = async { stopping.wait_for(|stop| *stop).await.map(|_| ()) } => {
                Pin::new(&mut conn).graceful_shutdown();
                poll_fn(|cx| conn.poll_without_shutdown(cx)).await
            }
        };
        // An error is the client's doing (a head too slow, a reset): the socket is closed as
        // it is. Otherwise the answers are out and the connection is done.
        if ended.is_ok() && !cut.load(Ordering::Relaxed) {
            linger(conn.into_parts().io.into_inner()).await;
        }
        drop(place);
    }
}

/// The app's answer to one request, its body behind [`ReadLimits`]; `cut` turns true when
/// the body was too slow.
async fn answer<E>(
    app: &E,
    req: hyper::Request<Incoming>,
    local: SocketAddr,
    peer: SocketAddr,
    limits: ReadLimits,
    cut: &AtomicBool,
) -> Response
where
    E: Endpoint<Output = Response>,
{
    let has_body = !req.body().is_end_stream();
    let mut req = Request::from((
        req,
        LocalAddr(Addr::SocketAddr(local)),
        RemoteAddr(Addr::SocketAddr(peer)),
        Scheme::HTTP,
    ));
    let body = has_body.then(|| pace_body(&mut req, limits));
    let mut response = app.get_response(req).await;
    let unread = match &body {
        Some(outcome) if outcome.too_slow.load(Ordering::Relaxed) => {
            cut.store(true, Ordering::Relaxed);
            response = Response::builder()
                .status(StatusCode::REQUEST_TIMEOUT)
                .content_type("text/plain; charset=utf-8")
                .body("The request body arrived too slowly.");
            true
        }
        Some(outcome) => !outcome.finished.load(Ordering::Relaxed),
        None => false,
    };
    // hyper never reads a body the app left unread (it stops reading and closes the
    // connection after the answer); saying so lets the client know not to send more.
    if unread || REFUSALS.contains(&response.status()) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Shuts the server's side of a finished connection, then throws away what the client still
/// sends until it closes or [`LINGER`] has passed.
async fn linger(mut stream: TcpStream) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = vec![0u8; 16 * 1024];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(read) = stream.read(&mut sink).await
            && read > 0
        {}
    })
    .await;
}

/// What a connection over a cap is told, if its socket takes it at once.
const TOO_MANY: &str = "Too many connections from your address or in all; try again in a moment.\n";

/// Answers a connection over a cap (503, `Connection: close`) and closes it, never waiting
/// on the client: what already arrived is read first, so closing sends the answer and a FIN
/// rather than a reset.
fn turn_away(stream: TcpStream) {
    let mut arrived = [0u8; 4096];
    let _ = stream.try_read(&mut arrived);
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\
         Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n\
         Retry-After: 5\r\nContent-Length: {}\r\n\r\n{TOO_MANY}",
        TOO_MANY.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// Connections turned away, logged at most once a [`REFUSAL_LOG_EVERY`] with their count.
#[derive(Default)]
struct Refusals {
    /// Since the last log line, and when that was.
    since_logged: u64,
    logged_at: Option<Instant>,
}

/// Turned-away connections are logged at most this often (with their count).
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(60);

impl Refusals {
    /// Logs a turned-away connection: the first at once, then a count at most once a minute.
    fn note(&mut self, caps: &ConnectionCaps, peer: IpAddr, over: Over) {
        self.since_logged += 1;
        if self
            .logged_at
            .is_some_and(|at| at.elapsed() < REFUSAL_LOG_EVERY)
        {
            return;
        }
        let why = match over {
            Over::Client => format!(
                "{} from {} (--max-connections-per-client)",
                caps.per_client,
                crate::net::network(peer)
            ),
            Over::Total => format!("{} in all (--max-connections)", caps.total),
        };
        eprintln!(
            "http: turned away {} connection(s) since the last report; the latest from {peer}, \
             with {why} open already",
            self.since_logged
        );
        self.since_logged = 0;
        self.logged_at = Some(Instant::now());
    }
}

/// What became of a request body: read to its end, or cut for its slowness (the handler
/// then saw a read error, and the answer becomes a 408).
#[derive(Default)]
struct BodyOutcome {
    finished: AtomicBool,
    too_slow: AtomicBool,
}

/// Puts the request's body behind [`ReadLimits`]' body rules.
fn pace_body(req: &mut Request, limits: ReadLimits) -> Arc<BodyOutcome> {
    let outcome = Arc::new(BodyOutcome::default());
    let pace = Pace::new(Instant::now(), limits);
    let body = PacedRead {
        inner: Box::pin(req.take_body().into_async_read()),
        sleep: Box::pin(tokio::time::sleep_until(pace.deadline())),
        pace,
        outcome: outcome.clone(),
    };
    req.set_body(Body::from_async_read(body));
    outcome
}

/// What a body brought lately, for its rate over the sliding window.
struct Pace {
    start: Instant,
    window: Duration,
    /// Bytes each window must bring: the minimum rate times the window, at least one.
    quota: u64,
    total: Duration,
    /// The reads of the last window, oldest first: when, and how many bytes. Reads within
    /// 1/16 of a window of an entry's time are added to it, so the list stays short; they
    /// then count from that earlier time, which only ever ends a window sooner.
    recent: VecDeque<(Instant, u64)>,
}

impl Pace {
    fn new(start: Instant, limits: ReadLimits) -> Self {
        let quota = (limits.body_min_rate as f64 * limits.body_window.as_secs_f64()).ceil();
        Pace {
            start,
            window: limits.body_window,
            quota: (quota as u64).max(1),
            total: limits.body_total,
            recent: VecDeque::new(),
        }
    }

    fn record(&mut self, now: Instant, bytes: u64) {
        match self.recent.back_mut() {
            Some((at, sum)) if now.duration_since(*at) < self.window / 16 => *sum += bytes,
            _ => self.recent.push_back((now, bytes)),
        }
        while self
            .recent
            .front()
            .is_some_and(|(at, _)| *at + self.window <= now)
        {
            self.recent.pop_front();
        }
    }

    /// When the body is too slow unless more arrives first: the first moment, once a whole
    /// window has passed, at which the reads of the last window fall short of the quota; or
    /// the total deadline, whichever comes first.
    fn deadline(&self) -> Instant {
        let total = self.start + self.total;
        let first_window = self.start + self.window;
        let mut left: u64 = self.recent.iter().map(|(_, bytes)| bytes).sum();
        let mut short_at = first_window;
        for (at, bytes) in &self.recent {
            if left < self.quota {
                break;
            }
            left -= bytes;
            short_at = (*at + self.window).max(first_window);
        }
        short_at.min(total)
    }
}

struct PacedRead {
    inner: Pin<Box<dyn AsyncRead + Send>>,
    pace: Pace,
    sleep: Pin<Box<Sleep>>,
    outcome: Arc<BodyOutcome>,
}

impl AsyncRead for PacedRead {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let (before, room) = (buf.filled().len(), buf.remaining());
        match self.inner.as_mut().poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = (buf.filled().len() - before) as u64;
                if read == 0 && room > 0 {
                    self.outcome.finished.store(true, Ordering::Relaxed);
                    return Poll::Ready(Ok(()));
                }
                self.pace.record(Instant::now(), read);
                let deadline = self.pace.deadline();
                self.sleep.as_mut().reset(deadline);
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.outcome.too_slow.store(true, Ordering::Relaxed);
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the request body arrived too slowly",
                    )))
                }
                Poll::Pending => Poll::Pending,
            },
            error => error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(window_ms: u64, rate: u64, total_ms: u64) -> ReadLimits {
        ReadLimits {
            head: Duration::from_secs(10),
            body_window: Duration::from_millis(window_ms),
            body_min_rate: rate,
            body_total: Duration::from_millis(total_ms),
        }
    }

    #[test]
    fn a_burst_buys_one_window_of_silence_not_more() {
        let start = Instant::now();
        let mut pace = Pace::new(start, limits(30_000, 1024, 600_000));
        // Nothing yet: the first window.
        assert_eq!(pace.deadline(), start + Duration::from_secs(30));
        // 2 MiB at once, then nothing: it falls short one window after the burst, however
        // much it brought (the old rule gave it 30 s plus 2,048 s).
        let burst = start + Duration::from_secs(1);
        pace.record(burst, 2 * 1024 * 1024);
        assert_eq!(pace.deadline(), burst + Duration::from_secs(30));
    }

    #[test]
    fn a_steady_body_keeps_going_until_the_total_deadline() {
        let start = Instant::now();
        let mut pace = Pace::new(start, limits(1_000, 100, 5_000));
        // 50 bytes every 250 ms: 200 a second against the 100 asked for.
        let mut now = start;
        for _ in 0..12 {
            now += Duration::from_millis(250);
            pace.record(now, 50);
            assert!(pace.deadline() > now, "cut at {:?}", now - start);
        }
        // Within a window the quota falls short once the older reads leave it.
        assert!(pace.deadline() <= now + Duration::from_secs(1));
        for _ in 0..20 {
            now += Duration::from_millis(250);
            pace.record(now, 50);
        }
        assert_eq!(pace.deadline(), start + Duration::from_secs(5));
    }

    #[test]
    fn a_window_short_of_its_quota_is_due_at_once() {
        let start = Instant::now();
        let mut pace = Pace::new(start, limits(1_000, 100, 60_000));
        let late = start + Duration::from_secs(3);
        pace.record(late, 10);
        assert!(pace.deadline() <= late, "{:?}", pace.deadline() - start);
    }
}
