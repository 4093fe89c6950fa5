//! Accepts connections and serves the app with hyper's HTTP/1.1 connection directly.
//! poem's `Server` builds its hyper connection itself and gives it no timer, so a client
//! could take as long as it liked over its request head (one header line every few seconds
//! kept a connection for minutes) and trickle a body forever. Here the head has a deadline
//! (hyper's `header_read_timeout`) and a body a minimum rate (docs/security.md, "Slow
//! clients and uploads").

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body as _, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use poem::http::StatusCode;
use poem::http::uri::Scheme;
use poem::web::{LocalAddr, RemoteAddr};
use poem::{Addr, Body, Endpoint, Request, Response};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

/// How long a client may take to send what it sends.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimits {
    /// For a request's whole head (request line and headers), counted from the connection's
    /// start or the end of the previous answer, so it also ends idle kept-alive connections.
    pub head: Duration,
    /// A request body must have arrived within this, plus one second for every
    /// `body_min_rate` bytes received so far: pauses are fine while the average holds.
    pub body: Duration,
    /// Bytes per second a body must average once `body` is spent.
    pub body_min_rate: u64,
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets the requests under way
/// finish for at most `grace`.
pub async fn serve<E>(
    listener: TcpListener,
    app: E,
    limits: ReadLimits,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> io::Result<()>
where
    E: Endpoint<Output = Response> + 'static,
{
    let app = Arc::new(app);
    let local = listener.local_addr()?;
    // Each connection holds a receiver: `stopping` says when to wind down, and the sender
    // sees all of them dropped once every connection has ended.
    let (stop, stopping) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tokio::spawn(connection(stream, local, peer, app.clone(), limits, stopping.clone()));
                }
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

async fn connection<E>(
    stream: TcpStream,
    local: SocketAddr,
    peer: SocketAddr,
    app: Arc<E>,
    limits: ReadLimits,
    mut stopping: watch::Receiver<bool>,
) where
    E: Endpoint<Output = Response> + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let app = app.clone();
        async move {
            let has_body = !req.body().is_end_stream();
            let mut req = Request::from((
                req,
                LocalAddr(Addr::SocketAddr(local)),
                RemoteAddr(Addr::SocketAddr(peer)),
                Scheme::HTTP,
            ));
            let too_slow = has_body.then(|| body_deadline(&mut req, limits));
            let mut response = app.get_response(req).await;
            if too_slow.is_some_and(|flag| flag.load(Ordering::Relaxed)) {
                response = Response::builder()
                    .status(StatusCode::REQUEST_TIMEOUT)
                    .header("Connection", "close")
                    .content_type("text/plain; charset=utf-8")
                    .body("The request body arrived too slowly.");
            }
            Ok::<_, Infallible>(hyper::Response::from(response))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        // Errors here are the client's doing (a head too slow, a reset): nothing to log.
        _ = conn.as_mut() => {}
        _ = async { stopping.wait_for(|stop| *stop).await.map(|_| ()) } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Puts the request's body behind [`ReadLimits`]' body deadline; the flag turns true when
/// the deadline passed (the handler then saw a read error, and the answer becomes a 408).
fn body_deadline(req: &mut Request, limits: ReadLimits) -> Arc<AtomicBool> {
    let too_slow = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let body = DeadlineRead {
        inner: Box::pin(req.take_body().into_async_read()),
        start,
        received: 0,
        limits,
        sleep: Box::pin(tokio::time::sleep_until(start + limits.body)),
        too_slow: too_slow.clone(),
    };
    req.set_body(Body::from_async_read(body));
    too_slow
}

struct DeadlineRead {
    inner: Pin<Box<dyn AsyncRead + Send>>,
    start: Instant,
    received: u64,
    limits: ReadLimits,
    sleep: Pin<Box<Sleep>>,
    too_slow: Arc<AtomicBool>,
}

impl AsyncRead for DeadlineRead {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match self.inner.as_mut().poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                self.received += (buf.filled().len() - before) as u64;
                let earned = Duration::from_secs_f64(
                    self.received as f64 / self.limits.body_min_rate as f64,
                );
                let deadline = self.start + self.limits.body + earned;
                self.sleep.as_mut().reset(deadline);
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.too_slow.store(true, Ordering::Relaxed);
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
