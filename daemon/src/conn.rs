//! Connections and request bodies under bounds: what any local process can make `nmemd` hold.
//!
//! * **Accepting** ([`serve`]): each connection is served by hyper's HTTP/1 server with a
//!   header read timeout, which is also the idle timeout (hyper starts it whenever it waits for
//!   a request head, after connecting or after a reply). At most [`Limits::max_connections`] are
//!   kept: a new one closes the connection idle the longest (no request in flight, its reply body
//!   finished), so a thousand idle clients cannot starve a hook; if every connection is busy, the
//!   new one is closed (its hook spools). An accept failing for lack of descriptors also sheds
//!   the oldest idle connection. The cap never exceeds the descriptor limit (raised to the hard
//!   limit at start, [`raise_nofile_limit`]) less a reserve for the database, spool and logs.
//! * **Bodies** ([`bound_body`]): every body is read here, before any handler, within
//!   [`Limits::body_timeout`] (a `content-length` larger than what is sent, or a chunked body
//!   without an end, gets 408 and the connection closes), up to [`Limits::max_body`], and only
//!   once the request has room in a semaphore of bytes shared by all requests, so many large
//!   bodies at once wait instead of adding up in memory.
//! * **The hook's request** (`POST /v1/events`, one per tool call) is answered without the
//!   router ([`record_direct`]): the same body bounds, handler, reply and version headers, less
//!   axum's routing, middleware and extractors per event. Everything else goes through the
//!   router.
//! * **Shutdown**: connections finish their request (graceful) within a grace period, then are
//!   dropped; the caller interrupts running queries first (`Readers::interrupt_all`).

use crate::server::ApiError;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use nmem_proto::wire::code;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore};

/// How many times its size a body of 1 MiB or more reserves of the in-flight budget.
pub const LARGE_BODY_WEIGHT: usize = 4;

/// Descriptors kept for the database, its WAL and readers, spool files, logs and the embedder
/// (64), and the transcripts the tailer keeps open (`reasoning::WATCHED`).
pub const FD_RESERVE: u64 = 64 + crate::ingest::reasoning::WATCHED as u64;

/// The bounds in force; built once from `[limits]`.
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_body: usize,
    in_flight: Arc<Semaphore>,
    in_flight_max: usize,
}

impl Limits {
    /// From the config, with the connection cap kept under `fd_limit` (the soft descriptor
    /// limit in force).
    pub fn new(c: &crate::config::LimitsConfig, fd_limit: u64) -> Limits {
        let mb = |n: u64| (n.max(1) as usize).saturating_mul(1024 * 1024);
        let max_body = mb(c.max_body_mb);
        // A body the daemon accepts must be able to get room at all.
        let in_flight_max = mb(c.max_bytes_in_flight_mb).max(max_body);
        let by_fds = fd_limit.saturating_sub(FD_RESERVE).max(8) as usize;
        Limits {
            max_connections: c.max_connections.clamp(1, by_fds),
            header_timeout: Duration::from_secs(c.header_timeout_secs.max(1)),
            body_timeout: Duration::from_secs(c.body_timeout_secs.max(1)),
            max_body,
            in_flight: Arc::new(Semaphore::new(in_flight_max)),
            in_flight_max,
        }
    }

    /// The share of the in-flight budget a body of `n` bytes holds while its request runs. A
    /// body is parsed, redacted and extracted in memory, which costs several times its size (a
    /// 63 MB event peaked at about 400 MB): bodies of 1 MiB and more reserve
    /// [`LARGE_BODY_WEIGHT`] times their size, at most the whole budget, so large bodies are
    /// worked on one or two at a time while small ones (every hook: the shim elides payloads
    /// over 1 MiB) pass at their size.
    pub fn reservation(&self, n: usize) -> u32 {
        let weighted = if n >= 1024 * 1024 {
            n.saturating_mul(LARGE_BODY_WEIGHT)
        } else {
            n
        };
        weighted.min(self.in_flight_max).min(u32::MAX as usize) as u32
    }

    /// Body bytes currently held by requests (weighted: see [`Limits::reservation`]).
    pub fn bytes_in_flight(&self) -> usize {
        self.in_flight_max - self.in_flight.available_permits()
    }
}

/// Raise the soft descriptor limit to the hard one (a common default is 1,024 soft, far more
/// hard) and return the soft limit now in force.
pub fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let mut want = lim;
            want.rlim_cur = lim.rlim_max;
            // macOS refuses more than OPEN_MAX for the soft limit.
            #[cfg(target_os = "macos")]
            {
                want.rlim_cur = want.rlim_cur.min(10240);
            }
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim = want;
            }
        }
    }
    lim.rlim_cur
}

struct Entry {
    /// Requests being answered (a reply body still streaming counts).
    busy: usize,
    idle_since: Instant,
    close: Arc<Notify>,
}

/// The open connections, for the cap and shedding.
#[derive(Default)]
struct Registry {
    conns: Mutex<HashMap<u64, Entry>>,
}

impl Registry {
    /// Make room for one more connection; false when every connection is busy.
    fn admit(&self, id: u64, cap: usize, close: Arc<Notify>) -> bool {
        let mut m = self.conns.lock().unwrap();
        while m.len() >= cap {
            if !shed_oldest_idle(&mut m) {
                return false;
            }
        }
        m.insert(
            id,
            Entry {
                busy: 0,
                idle_since: Instant::now(),
                close,
            },
        );
        true
    }

    fn shed_one(&self) -> bool {
        shed_oldest_idle(&mut self.conns.lock().unwrap())
    }

    fn remove(&self, id: u64) {
        self.conns.lock().unwrap().remove(&id);
    }

    fn len(&self) -> usize {
        self.conns.lock().unwrap().len()
    }
}

fn shed_oldest_idle(m: &mut HashMap<u64, Entry>) -> bool {
    let oldest = m
        .iter()
        .filter(|(_, e)| e.busy == 0)
        .min_by_key(|(_, e)| e.idle_since)
        .map(|(id, _)| *id);
    match oldest.and_then(|id| m.remove(&id)) {
        Some(e) => {
            // notify_one keeps the wake-up even if the task is not waiting yet.
            e.close.notify_one();
            true
        }
        None => false,
    }
}

/// Marks a connection busy from a request's arrival until its reply body is dropped (sent or
/// abandoned), so a streaming reply is never taken for idle.
struct Busy {
    reg: Arc<Registry>,
    id: u64,
}

impl Busy {
    fn new(reg: Arc<Registry>, id: u64) -> Busy {
        if let Some(e) = reg.conns.lock().unwrap().get_mut(&id) {
            e.busy += 1;
        }
        Busy { reg, id }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(e) = self.reg.conns.lock().unwrap().get_mut(&self.id) {
            e.busy = e.busy.saturating_sub(1);
            e.idle_since = Instant::now();
        }
    }
}

/// How long connections get to finish their request at shutdown before they are dropped.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serve `router` on `listener` until `shutdown` resolves; then let connections finish within
/// a grace period and drop the rest.
pub async fn serve(
    listener: tokio::net::UnixListener,
    app: Arc<crate::app::App>,
    router: axum::Router,
    limits: Arc<Limits>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let reg = Arc::new(Registry::default());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let builder = Arc::new(builder);
    let mut next_id: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    let out_of_fds = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                    if !(out_of_fds && reg.shed_one()) {
                        tracing::warn!("accept failed: {e}");
                        // Do not spin on a persistent failure.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
            },
        };
        let accepted = crate::trace::stamp();
        next_id += 1;
        let id = next_id;
        let close = Arc::new(Notify::new());
        if !reg.admit(id, limits.max_connections, close.clone()) {
            tracing::debug!("every connection is busy: closing a new one");
            continue;
        }
        let (reg2, router, builder, mut stop) = (
            reg.clone(),
            router.clone(),
            builder.clone(),
            stop_rx.clone(),
        );
        let (app, limits) = (app.clone(), limits.clone());
        tasks.spawn(async move {
            let svc_reg = reg2.clone();
            let svc = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    let busy = Busy::new(svc_reg.clone(), id);
                    if let Some(accepted) = accepted {
                        let request = crate::trace::now_us();
                        req.extensions_mut()
                            .insert(crate::trace::Arrival { accepted, request });
                    }
                    let mut router = router.clone();
                    let direct = is_record(&req).then(|| (app.clone(), limits.clone()));
                    async move {
                        use tower_service::Service;
                        let res = match direct {
                            Some((app, limits)) => record_direct(app, limits, req).await,
                            None => router.call(req.map(Body::new)).await?,
                        };
                        // The connection stays busy until the reply body is dropped.
                        Ok::<_, std::convert::Infallible>(res.map(move |b| {
                            Body::new(b.map_frame(move |f| {
                                let _ = &busy;
                                f
                            }))
                        }))
                    }
                },
            );
            let conn = builder.serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!("connection ended: {e}");
                    }
                }
                _ = close.notified() => tracing::debug!("idle connection shed for a new one"),
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn.as_mut()).await;
                }
            }
            reg2.remove(id);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let open = reg.len();
    if open > 0 {
        tracing::info!("waiting for {open} connection(s) to finish");
    }
    let _ = tokio::time::timeout(SHUTDOWN_GRACE + Duration::from_secs(1), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
}

fn too_large(max: usize) -> Response {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        code::BAD_REQUEST,
        format!(
            "the request body is over {} MiB (`[limits] max_body_mb`); send less",
            max / (1024 * 1024)
        ),
    )
    .into_response()
}

/// Read the whole body under the limits (see the module doc), then hand the request on.
pub async fn bound_body(State(lim): State<Arc<Limits>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let (bytes, held) = match read_body(&lim, &parts.headers, body).await {
        Ok(x) => x,
        Err(res) => return res,
    };
    let large = bytes.len() >= 4 * 1024 * 1024;
    let res = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    drop(held);
    if large {
        release_memory();
    }
    res
}

/// The body read under the limits, and its share of the in-flight budget (held until the
/// request is answered); or the error reply.
async fn read_body(
    lim: &Limits,
    headers: &axum::http::HeaderMap,
    body: Body,
) -> Result<(Bytes, Option<tokio::sync::OwnedSemaphorePermit>), Response> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > lim.max_body as u64) {
        return Err(too_large(lim.max_body));
    }
    let read = async {
        // Room first: a declared length is reserved whole; a chunked body chunk by chunk.
        let mut held = match declared {
            Some(n) if n > 0 => Some(
                lim.in_flight
                    .clone()
                    .acquire_many_owned(lim.reservation(n as usize))
                    .await
                    .map_err(|_| closing())?,
            ),
            _ => None,
        };
        let mut buf: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0) as usize);
        let mut body = body;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    code::BAD_REQUEST,
                    format!("the request body could not be read: {e}"),
                )
                .into_response()
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if buf.len() + data.len() > lim.max_body {
                return Err(too_large(lim.max_body));
            }
            if declared.is_none() {
                let more = lim
                    .in_flight
                    .clone()
                    .acquire_many_owned(data.len() as u32)
                    .await
                    .map_err(|_| closing())?;
                match &mut held {
                    Some(h) => h.merge(more),
                    None => held = Some(more),
                }
            }
            buf.extend_from_slice(&data);
        }
        if declared.is_none() && buf.len() >= 1024 * 1024 {
            // A chunked body was reserved at its size chunk by chunk; now its weight, taken
            // afresh (never while holding part of it, so two such bodies cannot wait on each
            // other).
            drop(held.take());
            held = Some(
                lim.in_flight
                    .clone()
                    .acquire_many_owned(lim.reservation(buf.len()))
                    .await
                    .map_err(|_| closing())?,
            );
        }
        Ok::<_, Response>((Bytes::from(buf), held))
    };
    match tokio::time::timeout(lim.body_timeout, read).await {
        Ok(r) => r,
        Err(_) => Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                code::BAD_REQUEST,
                format!(
                    "the request body did not arrive whole within {} s (`[limits] body_timeout_secs`): send the length you declare, and end a chunked body",
                    lim.body_timeout.as_secs()
                ),
            )
            .into_response()),
    }
}

/// `POST /v1/events` without the router: the hook's request, the one sent for every tool
/// call, skips axum's routing, middleware and extractors (the same body limits through
/// [`read_body`], the same handler, reply and headers as the routed endpoint).
async fn record_direct(
    app: Arc<crate::app::App>,
    lim: Arc<Limits>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Response {
    let (parts, body) = req.into_parts();
    let (bytes, held) = match read_body(&lim, &parts.headers, Body::new(body)).await {
        Ok(x) => x,
        Err(res) => return direct_reply(res).await,
    };
    let large = bytes.len() >= 4 * 1024 * 1024;
    let arrival = parts.extensions.get::<crate::trace::Arrival>().copied();
    let res = crate::server::record_request(&app, &parts.headers, bytes, arrival)
        .await
        .into_response();
    drop(held);
    if large {
        release_memory();
    }
    direct_reply(res).await
}

/// What the router adds to every reply: the version headers, and its length (so a reply is
/// not sent chunked).
async fn direct_reply(res: Response) -> Response {
    let mut res = crate::server::stamp_version(res).await;
    if let Some(n) = axum::body::HttpBody::size_hint(res.body()).exact() {
        res.headers_mut()
            .insert(header::CONTENT_LENGTH, header::HeaderValue::from(n));
    }
    res
}

/// Whether a request is the hook's `POST /v1/events`, answered by [`record_direct`].
fn is_record(req: &hyper::Request<hyper::body::Incoming>) -> bool {
    req.method() == axum::http::Method::POST && req.uri().path() == nmem_proto::wire::PATH_EVENTS
}

fn closing() -> Response {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        code::SHUTTING_DOWN,
        "nmemd is shutting down; retry once it is back",
    )
    .into_response()
}

/// Give the memory of a large body back to the system: glibc keeps freed memory in its arenas
/// otherwise, and the daemon's resident size would stay at its peak.
fn release_memory() {
    #[cfg(target_env = "gnu")]
    tokio::task::spawn_blocking(|| unsafe {
        libc::malloc_trim(0);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_idle_connection_is_shed_first_and_busy_ones_never() {
        let reg = Arc::new(Registry::default());
        let notes: Vec<Arc<Notify>> = (0..4).map(|_| Arc::new(Notify::new())).collect();
        assert!(reg.admit(1, 3, notes[1].clone()));
        assert!(reg.admit(2, 3, notes[2].clone()));
        assert!(reg.admit(3, 3, notes[3].clone()));
        let t0 = Instant::now();
        for (id, age) in [(1, 30), (2, 20), (3, 10)] {
            reg.conns.lock().unwrap().get_mut(&id).unwrap().idle_since =
                t0 - Duration::from_secs(age);
        }
        // 1 is busy (though idle the longest before), 2 idle the longest of the rest.
        let busy = Busy::new(reg.clone(), 1);
        assert!(reg.admit(4, 3, notes[0].clone()));
        let open: Vec<u64> = {
            let mut v: Vec<u64> = reg.conns.lock().unwrap().keys().copied().collect();
            v.sort();
            v
        };
        assert_eq!(open, [1, 3, 4]);
        drop(busy);
        // All busy: a new connection is refused.
        let _b = [1, 3, 4].map(|id| Busy::new(reg.clone(), id));
        assert!(!reg.admit(5, 3, Arc::new(Notify::new())));
    }

    #[test]
    fn large_bodies_reserve_more_than_their_size_and_never_more_than_the_budget() {
        let c = crate::config::LimitsConfig::default();
        let l = Limits::new(&c, 1_000_000);
        assert_eq!(l.reservation(3_000), 3_000, "a hook's body counts its size");
        let mb = 1024 * 1024;
        assert_eq!(l.reservation(2 * mb), (2 * mb * LARGE_BODY_WEIGHT) as u32);
        assert_eq!(
            l.reservation(l.max_body),
            l.in_flight_max as u32,
            "the largest body takes the whole budget, and can always get it"
        );
    }

    #[test]
    fn the_connection_cap_stays_under_the_descriptor_limit() {
        let c = crate::config::LimitsConfig::default();
        assert_eq!(
            Limits::new(&c, 1_000_000).max_connections,
            c.max_connections
        );
        assert_eq!(
            Limits::new(&c, 200).max_connections,
            200 - FD_RESERVE as usize
        );
        let l = Limits::new(&c, 1024);
        assert!(l.in_flight_max >= l.max_body);
    }
}
