//! One gateway: a listener on a loopback address serving a health endpoint.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use socket2::{Domain, Socket, Type};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// How a gateway answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// `200 OK` with body `ok: ready`.
    Healthy,
    /// This status code with body `unhealthy`.
    Status(u16),
    /// Listener closed: connections are refused.
    Refuse,
    /// Accepts, then never answers (the prober must cut it at its timeout).
    Hang,
    /// Accepts, then resets the connection at once.
    Reset,
}

struct Shared {
    behaviour: Mutex<Behaviour>,
    requests: Arc<AtomicU64>,
    tls: Option<TlsAcceptor>,
}

impl Shared {
    /// Reads the gateway's behaviour at the time of each request.
    fn current(self: &Arc<Self>) -> impl Fn() -> Behaviour + Send + 'static {
        let shared = self.clone();
        move || shared.behaviour.lock().expect("not poisoned").clone()
    }
}

/// A running gateway. Dropping it closes the listener.
pub struct Gateway {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Gateway {
    /// Starts an HTTP gateway on `addr` (port 0 picks a free port). Must run in a tokio runtime.
    pub fn start(addr: SocketAddr, behaviour: Behaviour) -> io::Result<Gateway> {
        Self::start_with(addr, behaviour, None)
    }

    /// Starts an HTTPS gateway presenting the certificate configured in `tls`.
    pub fn start_tls(
        addr: SocketAddr,
        behaviour: Behaviour,
        tls: TlsAcceptor,
    ) -> io::Result<Gateway> {
        Self::start_with(addr, behaviour, Some(tls))
    }

    fn start_with(
        addr: SocketAddr,
        behaviour: Behaviour,
        tls: Option<TlsAcceptor>,
    ) -> io::Result<Gateway> {
        let shared = Arc::new(Shared {
            behaviour: Mutex::new(Behaviour::Healthy),
            requests: Arc::new(AtomicU64::new(0)),
            tls,
        });
        let listener = bind(addr)?;
        let addr = listener.local_addr()?;
        let mut gateway = Gateway {
            addr,
            shared,
            accept: None,
        };
        gateway.accept = Some(tokio::spawn(accept_loop(listener, gateway.shared.clone())));
        if behaviour != Behaviour::Healthy {
            gateway.stop_listening_if(&behaviour);
            *gateway.shared.behaviour.lock().expect("not poisoned") = behaviour;
        }
        Ok(gateway)
    }

    /// The address it listens on (or listened on, while refusing).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// HTTP requests answered so far.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// Switches behaviour. `Refuse` aborts the accept task, which closes the listener as soon
    /// as the runtime drops the task (next turn of the runtime); leaving `Refuse` binds the
    /// same address again.
    pub fn set(&mut self, behaviour: Behaviour) -> io::Result<()> {
        self.stop_listening_if(&behaviour);
        if behaviour != Behaviour::Refuse && self.accept.is_none() {
            let listener = bind(self.addr)?;
            self.accept = Some(tokio::spawn(accept_loop(listener, self.shared.clone())));
        }
        *self.shared.behaviour.lock().expect("not poisoned") = behaviour;
        Ok(())
    }

    fn stop_listening_if(&mut self, behaviour: &Behaviour) {
        if *behaviour == Behaviour::Refuse {
            if let Some(task) = self.accept.take() {
                task.abort();
            }
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(task) = self.accept.take() {
            task.abort();
        }
    }
}

/// `[[endpoints]]` tables for `gateways`, each probed on its own port; `name(i)` names the
/// i-th. The demo, the tests and the load test all describe their farms this way.
pub fn endpoints_toml<'a>(
    gateways: impl IntoIterator<Item = &'a Gateway>,
    name: impl Fn(usize) -> String,
) -> String {
    endpoints_toml_at(gateways.into_iter().map(Gateway::addr), name)
}

/// [`endpoints_toml`] for gateway addresses.
pub fn endpoints_toml_at(
    addrs: impl IntoIterator<Item = SocketAddr>,
    name: impl Fn(usize) -> String,
) -> String {
    addrs
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            format!(
                "\n[[endpoints]]\nname = \"{}\"\naddress = \"{}\"\ncheck = {{ port = {} }}\n",
                name(i),
                a.ip(),
                a.port()
            )
        })
        .collect()
}

/// Binds with SO_REUSEADDR so a gateway can come back on its address at once, and
/// SO_REUSEPORT because the listener it replaces closes only when the runtime drops its
/// aborted accept task: a quick `Refuse` -> `Healthy` (a flapping fault) could otherwise
/// find the address still taken (EADDRINUSE ended whole load-test runs).
pub(crate) fn bind(addr: SocketAddr) -> io::Result<StdListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(StdListener(socket.into()))
}

/// A bound std listener, turned into a tokio one inside the task (which needs a runtime).
pub(crate) struct StdListener(pub(crate) std::net::TcpListener);

impl StdListener {
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

async fn accept_loop(listener: StdListener, shared: Arc<Shared>) {
    let Ok(listener) = TcpListener::from_std(listener.0) else {
        return;
    };
    // The task owns the listener, so aborting the task closes it.
    loop {
        let stream = crate::serve::accept(&listener).await;
        let shared = shared.clone();
        tokio::spawn(async move {
            let behaviour = shared.behaviour.lock().expect("not poisoned").clone();
            match (&shared.tls, behaviour) {
                (_, Behaviour::Reset) => {
                    let _ =
                        socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
                    drop(stream);
                }
                (Some(tls), behaviour) => {
                    if let Ok(stream) = tls.accept(stream).await {
                        serve(stream, behaviour, shared.current(), shared.requests.clone()).await;
                    }
                }
                (None, behaviour) => {
                    serve(stream, behaviour, shared.current(), shared.requests.clone()).await
                }
            }
        });
    }
}

/// Answers one connection: `behaviour` when it was accepted (`Reset` is handled by the
/// caller, which holds the TCP socket), then each request of a kept-alive connection as
/// `current()` says at that moment, as a real health endpoint reflects its server's state
/// now. A gateway that has since died (`Refuse`, `Reset`) closes the connection instead of
/// answering; one that hangs never answers. `requests` counts HTTP requests answered.
pub(crate) async fn serve<S>(
    mut stream: S,
    behaviour: Behaviour,
    current: impl Fn() -> Behaviour + Send + 'static,
    requests: Arc<AtomicU64>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    if behaviour == Behaviour::Hang {
        let mut sink = [0u8; 1024];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        return;
    }
    let service = hyper::service::service_fn(move |_req| {
        let now = current();
        let requests = requests.clone();
        async move {
            let (status, body) = match now {
                Behaviour::Healthy => (StatusCode::OK, "ok: ready\n"),
                Behaviour::Status(code) => (
                    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    "unhealthy\n",
                ),
                Behaviour::Hang => std::future::pending().await,
                Behaviour::Refuse | Behaviour::Reset => {
                    return Err(io::Error::other("gateway down"))
                }
            };
            requests.fetch_add(1, Ordering::Relaxed);
            let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
            *response.status_mut() = status;
            Ok(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}
