//! Raw TCP for the tests of connection limits: connecting from another loopback address
//! (Linux answers all of 127.0.0.0/8), and room for many sockets in the test process; and
//! the little HTTP servers the tests run on loopback (webhook receivers, fakes, forwarders).

use std::net::{IpAddr, SocketAddr, TcpStream};

/// Makes connections from chosen loopback addresses.
pub struct Dialer {
    runtime: tokio::runtime::Runtime,
}

impl Dialer {
    pub fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("a runtime to connect with");
        Dialer { runtime }
    }

    /// Connects to `127.0.0.1:port` from `from` (e.g. `127.0.0.2`), so the server sees
    /// another client address. A blocking std stream, as `TcpStream::connect` gives.
    pub fn connect_from(&self, from: IpAddr, port: u16) -> std::io::Result<TcpStream> {
        let stream = self.runtime.block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::new(from, 0))?;
            socket
                .connect(SocketAddr::from(([127, 0, 0, 1], port)))
                .await
        })?;
        let stream = stream.into_std()?;
        stream.set_nonblocking(false)?;
        Ok(stream)
    }
}

/// Raises this process's soft limit on open files to `wanted` (or as far as the hard limit
/// allows), for a test that holds many sockets; servers it starts inherit the limit.
/// Returns the limit in force.
pub fn raise_open_files(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct on this stack.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < wanted {
            let raised = libc::rlimit {
                rlim_cur: wanted.min(limit.rlim_max),
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

/// Serves `app` on `listener`, on a thread of its own, until `stop` completes (a request in
/// flight gets two seconds); the thread, to join after `stop`.
pub fn serve_until<E, S>(
    listener: std::net::TcpListener,
    app: E,
    stop: S,
) -> std::thread::JoinHandle<()>
where
    E: poem::Endpoint + 'static,
    S: std::future::Future<Output = ()> + Send + 'static,
{
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            listener.set_nonblocking(true).unwrap();
            let acceptor = poem::listener::TcpAcceptor::from_std(listener).unwrap();
            let _ = poem::Server::new_with_acceptor(acceptor)
                .run_with_graceful_shutdown(app, stop, Some(std::time::Duration::from_secs(2)))
                .await;
        });
    })
}

/// Serves `app` on a free loopback port for the rest of the test process; the port.
pub fn serve<E: poem::Endpoint + 'static>(app: E) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().unwrap().port();
    serve_until(listener, app, std::future::pending());
    port
}
