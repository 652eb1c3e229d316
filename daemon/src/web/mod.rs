//! The web viewer and CodexMem's worker API (`/api/*`) on a TCP listener, off until asked for.
//!
//! `nmem ui` asks for it (`POST /v1/ui` on the Unix socket); `[http] enabled = true` starts it
//! with the daemon. The security rules (see ARCHITECTURE.md's invariants):
//!
//! * **Loopback only**: `[http] bind` must be a loopback address unless `allow_remote = true`
//!   (then a warning is logged and returned). A taken port falls back to a free one.
//! * **Token**: 64 hex characters from the system's random source, created on first use in
//!   `STATE/ui.token` (0600, never a symlink, replaced when others can read it), valid until
//!   `nmem ui --rotate`. The page's URL carries it once: `GET /?token=T` answers with an
//!   HttpOnly, SameSite=Strict cookie and a redirect that drops it from the address bar.
//!   Every `/api/*` request needs the cookie or `Authorization: Bearer T`, except
//!   `/api/health` and `/api/readiness`.
//! * **Host** is checked on every request (DNS rebinding): only the loopback names (and the
//!   configured address) with the listener's port. **Origin** is checked on every request that
//!   changes state: a foreign one is refused; none at all is allowed only with a bearer token
//!   (scripts), never on the cookie alone.
//! * No CORS headers at all; a strict Content-Security-Policy (`'self'` only, no inline script).
//!
//! The Unix socket serves the same `/api/*` routes without a token (it is the owner's alone).

pub mod api;
mod assets;
pub mod feed;
pub mod ops;

use crate::app::App;
use crate::config::HttpConfig;
use crate::server::ApiError;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use nmem_proto::wire::{self, code, UiReply, UiRequest};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The cookie the page's token is exchanged for.
pub const COOKIE: &str = "nmem_ui";
/// Connections the TCP listener serves at once (a page holds two or three).
const MAX_CONNECTIONS: usize = 64;
/// A token shorter than this (or with other characters than URL-safe ones) is replaced.
pub const MIN_TOKEN: usize = 32;

struct Running {
    addr: SocketAddr,
    warnings: Vec<String>,
    stop: tokio::sync::watch::Sender<bool>,
    /// The accept loop: done once the listener is closed.
    task: tokio::task::JoinHandle<()>,
}

/// The listener's state, in [`App::web`].
pub struct Web {
    config: HttpConfig,
    token_path: PathBuf,
    token: Mutex<Option<String>>,
    running: tokio::sync::Mutex<Option<Running>>,
    /// What `nmemctl status` shows, readable without the async lock.
    shown: Mutex<Option<UiReply>>,
    limits: OnceLock<Arc<crate::conn::Limits>>,
    /// Set once start-up is done (`/api/readiness`).
    pub ready: AtomicBool,
    /// Set at shutdown: open event streams end.
    pub closing: tokio::sync::watch::Sender<bool>,
}

impl Web {
    pub fn new(config: HttpConfig, state: &Path) -> Web {
        Web {
            config,
            token_path: state.join("ui.token"),
            token: Mutex::new(None),
            running: Default::default(),
            shown: Mutex::new(None),
            limits: OnceLock::new(),
            ready: AtomicBool::new(false),
            closing: tokio::sync::watch::channel(false).0,
        }
    }

    /// The request bounds the socket uses, for the TCP listener too (set once at start).
    pub fn set_limits(&self, limits: Arc<crate::conn::Limits>) {
        let _ = self.limits.set(limits);
    }

    /// Whether it listens, and where (for `nmemctl status`).
    pub fn shown(&self) -> Option<UiReply> {
        self.shown.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The token, read from its file or created there.
    pub fn token(&self) -> std::io::Result<String> {
        let mut t = self.token.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = &*t {
            return Ok(t.clone());
        }
        let got = match read_token(&self.token_path)? {
            Some(existing) => existing,
            None => {
                let new = new_token()?;
                write_token(&self.token_path, &new)?;
                new
            }
        };
        *t = Some(got.clone());
        Ok(got)
    }

    fn rotate_token(&self) -> std::io::Result<String> {
        let new = new_token()?;
        write_token(&self.token_path, &new)?;
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = Some(new.clone());
        Ok(new)
    }

    /// Whether `given` is the token (in constant time).
    fn accepts(&self, given: &str) -> bool {
        match self.token() {
            Ok(t) => same(t.as_bytes(), given.as_bytes()),
            Err(_) => false,
        }
    }

    /// Stop listening (at shutdown, or `nmem ui --stop`): when it returns the port is closed
    /// (the accept loop has dropped the listener), so `nmem ui --stop` is done when it says so.
    pub async fn stop(&self) -> bool {
        let was = self.running.lock().await.take();
        *self.shown.lock().unwrap_or_else(|e| e.into_inner()) = None;
        match was {
            Some(r) => {
                let _ = r.stop.send(true);
                // The loop ends at its next turn; a bound so a wedged one cannot hold the stop.
                let _ = tokio::time::timeout(Duration::from_secs(5), r.task).await;
                tracing::info!("web viewer stopped listening on {}", r.addr);
                true
            }
            None => false,
        }
    }
}

/// Constant-time comparison: the time taken does not say how much of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn valid_token(t: &str) -> bool {
    t.len() >= MIN_TOKEN
        && t.len() <= 256
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// 32 bytes of the system's random source, as 64 hex characters.
fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// The stored token; `None` when there is none, or it is not a token, or others could read it
/// (then it is replaced: it may have leaked).
fn read_token(path: &Path) -> std::io::Result<Option<String>> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    nmem_proto::paths::check_own_file(path)?;
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if f.metadata()?.mode() & 0o077 != 0 {
        tracing::warn!(
            "{} was readable by others: replacing the viewer's token",
            path.display()
        );
        return Ok(None);
    }
    let mut s = String::new();
    f.take(1024).read_to_string(&mut s)?;
    let t = s.trim();
    Ok(valid_token(t).then(|| t.to_string()))
}

/// Write the token owner-only (a new file renamed over the old: never half written).
fn write_token(path: &Path, token: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("token.new");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(token.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn url_host(addr: &SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V6(ip) => format!("[{ip}]:{}", addr.port()),
        IpAddr::V4(ip) => format!("{ip}:{}", addr.port()),
    }
}

fn reply(r: &Running, token: Option<&str>) -> UiReply {
    UiReply {
        listening: true,
        address: Some(r.addr.to_string()),
        url: token.map(|t| format!("http://{}/?token={t}", url_host(&r.addr))),
        warnings: r.warnings.clone(),
    }
}

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code::BAD_REQUEST, m)
}

/// `POST /v1/ui`.
pub async fn control(State(app): State<Arc<App>>, b: Bytes) -> Result<Json<UiReply>, ApiError> {
    let req: UiRequest = crate::server::body(&b)?;
    let token_err = |e: std::io::Error| ApiError::internal("reading the viewer's token", e);
    match req {
        UiRequest::Start => {
            let token = app.web.token().map_err(token_err)?;
            start(&app).await?;
            let running = app.web.running.lock().await;
            Ok(Json(
                running
                    .as_ref()
                    .map(|r| reply(r, Some(&token)))
                    .unwrap_or_default(),
            ))
        }
        UiRequest::Stop => {
            app.web.stop().await;
            Ok(Json(UiReply::default()))
        }
        UiRequest::Rotate => {
            let token = app.web.rotate_token().map_err(token_err)?;
            let running = app.web.running.lock().await;
            Ok(Json(match running.as_ref() {
                Some(r) => reply(r, Some(&token)),
                None => UiReply::default(),
            }))
        }
        UiRequest::Status => Ok(Json(app.web.shown().unwrap_or_default())),
    }
}

/// Listen (if not already): `[http]`'s address and port, or a free port when that one is taken.
pub async fn start(app: &Arc<App>) -> Result<(), ApiError> {
    let web = &app.web;
    let mut running = web.running.lock().await;
    if running.is_some() {
        return Ok(());
    }
    let c = &web.config;
    let ip: IpAddr = c
        .bind
        .trim()
        .trim_matches(['[', ']'])
        .parse()
        .map_err(|_| {
            bad(format!(
                "[http] bind = {:?} is not an IP address: use 127.0.0.1 (or ::1)",
                c.bind
            ))
        })?;
    let mut warnings = Vec::new();
    if !ip.is_loopback() {
        if !c.allow_remote {
            return Err(bad(format!(
                "[http] bind = {ip} is not a loopback address: the viewer listens on 127.0.0.1 \
                 only, unless config.toml also says [http] allow_remote = true"
            )));
        }
        let w = format!(
            "the viewer listens on {ip}, beyond this machine ([http] allow_remote = true): \
             anyone who can reach it with the token reads the whole memory"
        );
        tracing::warn!("{w}");
        warnings.push(w);
    }
    let listener = match tokio::net::TcpListener::bind((ip, c.port)).await {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let l = tokio::net::TcpListener::bind((ip, 0))
                .await
                .map_err(|e| ApiError::internal("listening for the viewer", e))?;
            let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
            warnings.push(format!(
                "port {} is in use; the viewer listens on {port} instead ([http] port)",
                c.port
            ));
            l
        }
        Err(e) => return Err(ApiError::internal("listening for the viewer", e)),
    };
    let addr = listener
        .local_addr()
        .map_err(|e| ApiError::internal("listening for the viewer", e))?;
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let router = tcp_router(app.clone(), addr);
    let task = tokio::spawn(serve(listener, router, stop_rx));
    tracing::info!("web viewer listening on http://{}/", url_host(&addr));
    let r = Running {
        addr,
        warnings,
        stop,
        task,
    };
    *web.shown.lock().unwrap_or_else(|e| e.into_inner()) = Some(reply(&r, None));
    *running = Some(r);
    Ok(())
}

/// The `Host` values this listener answers to.
fn allowed_hosts(addr: SocketAddr) -> Vec<String> {
    let p = addr.port();
    let mut v = vec![
        format!("127.0.0.1:{p}"),
        format!("localhost:{p}"),
        format!("[::1]:{p}"),
    ];
    if !addr.ip().is_loopback() {
        v.push(url_host(&addr));
    }
    v
}

#[derive(Clone)]
struct Guard {
    app: Arc<App>,
    hosts: Arc<Vec<String>>,
}

fn tcp_router(app: Arc<App>, addr: SocketAddr) -> Router {
    let guard = Guard {
        app: app.clone(),
        hosts: Arc::new(allowed_hosts(addr)),
    };
    let mut r = Router::new()
        .route("/", get(page))
        .route("/viewer", get(page))
        .route("/assets/{file}", get(assets::serve))
        .merge(api::routes())
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                code::NOT_FOUND,
                "no such page or route",
            )
        });
    if let Some(limits) = app.web.limits.get() {
        r = r
            .layer(axum::extract::DefaultBodyLimit::max(limits.max_body))
            .layer(axum::middleware::from_fn_with_state(
                limits.clone(),
                crate::conn::bound_body,
            ));
    }
    r.layer(axum::middleware::from_fn_with_state(guard, guard_layer))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(app)
}

async fn security_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    let set = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(
        h,
        "content-security-policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    );
    set(h, "x-content-type-options", "nosniff");
    set(h, "x-frame-options", "DENY");
    set(h, "referrer-policy", "no-referrer");
    if !h.contains_key(header::CACHE_CONTROL) {
        set(h, "cache-control", "no-store");
    }
    res
}

fn refuse(status: StatusCode, code: &'static str, m: impl Into<String>) -> Response {
    ApiError::new(status, code, m).into_response()
}

fn cookie<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn bearer(h: &HeaderMap) -> Option<&str> {
    h.get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// Host on every request, the token on `/api/*` (but health and readiness), Origin on
/// state-changing ones: see the module doc.
async fn guard_layer(State(g): State<Guard>, req: Request, next: Next) -> Response {
    let h = req.headers();
    let host = h
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !g.hosts.contains(&host) {
        return refuse(
            StatusCode::FORBIDDEN,
            code::FORBIDDEN,
            format!(
                "Host `{}` is not this viewer's address: open http://{}/ (the URL `nmem ui` prints)",
                host.escape_debug(),
                g.hosts[0]
            ),
        );
    }
    let path = req.uri().path();
    let open = matches!(path, "/api/health" | "/api/readiness") || !path.starts_with("/api/");
    let by_bearer = bearer(h).is_some_and(|t| g.app.web.accepts(t));
    let by_cookie = cookie(h, COOKIE).is_some_and(|t| g.app.web.accepts(t));
    if !open && !by_bearer && !by_cookie {
        return refuse(
            StatusCode::UNAUTHORIZED,
            code::UNAUTHORIZED,
            "this needs the viewer's token: open the URL `nmem ui` prints, or send \
             `Authorization: Bearer <token>` (the token is in the state folder's ui.token)",
        );
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe {
        match h.get(header::ORIGIN).map(|v| v.to_str().unwrap_or("")) {
            Some(origin) => {
                let ok = origin
                    .strip_prefix("http://")
                    .is_some_and(|o| g.hosts.iter().any(|h| h == &o.to_ascii_lowercase()));
                if !ok {
                    return refuse(
                        StatusCode::FORBIDDEN,
                        code::FORBIDDEN,
                        format!(
                            "cross-origin request refused (Origin `{}`): only the viewer's own page may change anything",
                            origin.escape_debug()
                        ),
                    );
                }
            }
            None if !by_bearer && !open => {
                return refuse(
                    StatusCode::FORBIDDEN,
                    code::FORBIDDEN,
                    "a request that changes something needs an Origin header (browsers send \
                     it) or `Authorization: Bearer <token>` (scripts)",
                );
            }
            None => {}
        }
    }
    next.run(req).await
}

/// `GET /`: with `?token=T`, the cookie and a redirect without the token; with the cookie, the
/// page; else how to open it.
async fn page(State(app): State<Arc<App>>, req: Request) -> Response {
    let given = req.uri().query().and_then(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "token")
            .map(|(_, v)| v.to_string())
    });
    if let Some(t) = given {
        if !app.web.accepts(&t) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "This token is not (or no longer) valid: run `nmem ui` for the current URL.\n",
            )
                .into_response();
        }
        let c = format!("{COOKIE}={t}; HttpOnly; SameSite=Strict; Path=/");
        return Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header(header::LOCATION, "/")
            .header(header::SET_COOKIE, c)
            .body(Body::empty())
            .unwrap_or_default();
    }
    if !cookie(req.headers(), COOKIE).is_some_and(|t| app.web.accepts(t)) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "Open the URL `nmem ui` prints: it carries the token this page needs.\n",
        )
            .into_response();
    }
    assets::index()
}

/// Serve `router` on `listener` until `stop` says so; then every connection is closed (open
/// event streams end).
async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut tasks = tokio::task::JoinSet::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .keep_alive(true);
    let builder = Arc::new(builder);
    loop {
        let stream = tokio::select! {
            _ = stop.changed() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!("viewer accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Past the cap, a new connection is closed: a page needs only a few.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let (router, builder) = (router.clone(), builder.clone());
        tasks.spawn(async move {
            let _slot = slot;
            let svc =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let mut router = router.clone();
                    async move {
                        use tower_service::Service;
                        router.call(req.map(Body::new)).await
                    }
                });
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), svc).await {
                tracing::debug!("viewer connection ended: {e}");
            }
        });
    }
    drop(listener);
    tasks.abort_all();
}

/// The listener's address for `wire::Status` (the URL is never in status: it holds the token).
pub fn status(app: &App) -> Option<wire::UiReply> {
    app.web.shown()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_and_url_safe() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert!(valid_token(&a), "{a}");
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }

    #[test]
    fn comparison_needs_the_whole_token() {
        assert!(same(b"abcd", b"abcd"));
        assert!(!same(b"abcd", b"abce"));
        assert!(!same(b"abcd", b"abc"));
        assert!(!same(b"", b"a"));
    }

    #[test]
    fn the_token_file_is_owner_only_and_replaced_when_not() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let web = Web::new(HttpConfig::default(), dir.path());
        let t = web.token().unwrap();
        let path = dir.path().join("ui.token");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Read back by a new daemon: the same token.
        assert_eq!(
            Web::new(HttpConfig::default(), dir.path()).token().unwrap(),
            t
        );
        // Readable by others: it may have leaked, so a new one.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_ne!(
            Web::new(HttpConfig::default(), dir.path()).token().unwrap(),
            t
        );
    }

    #[test]
    fn a_symlinked_token_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("ui.token")).unwrap();
        assert!(Web::new(HttpConfig::default(), dir.path()).token().is_err());
    }

    #[test]
    fn cookies_and_bearer_are_found_by_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; nmem_ui=tok; b=2"),
        );
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer xyz"),
        );
        assert_eq!(cookie(&h, COOKIE), Some("tok"));
        assert_eq!(cookie(&h, "nmem"), None);
        assert_eq!(bearer(&h), Some("xyz"));
    }
}
