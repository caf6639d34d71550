//! The accept loop and connection limits of the server (issue 49): at most
//! [`crate::Config::max_connections`] connections are served at once, a connection waiting for a
//! request is closed after [`crate::Config::idle_timeout`], one that has begun a request's headers
//! must finish them within [`crate::Config::header_timeout`] (request bodies have
//! [`crate::Config::body_timeout`], enforced where handlers read them: 408).
//!
//! At the limit, a new connection takes the place of the connection that has waited longest for
//! its next request (an idle keep-alive socket, or one still sending headers): idle sockets cannot
//! keep anyone out, so `/api/v1/health` answers however many idle or slow clients are open. Only
//! when every admitted connection has a request in flight is a new one refused, with a short
//! `503` (written by a task of its own, at most [`MAX_REFUSING`] at a time, each bounded by a
//! second; past that the socket is closed unanswered).
//!
//! Each connection's watchdog wakes a few times per timeout and looks at two counters kept by the
//! connection: requests in flight (kept by the service wrapper) and bytes read (kept by the socket
//! wrapper). No request in flight and no byte since the last answer: idle. Bytes since the last
//! answer but no request yet: headers in progress. hyper's own header timeout stays on as a
//! backstop (it counts from the last answer, so it is set to the sum of both timeouts).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, mpsc, watch};

/// At most this many refused connections are being answered `503` at once.
pub(crate) const MAX_REFUSING: usize = 64;

/// The connection limits of a server (from its [`crate::Config`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_connections: usize,
    pub(crate) header_timeout: Duration,
    pub(crate) idle_timeout: Duration,
}

/// One admitted connection, as its watchdog and the tracker see it.
struct Conn {
    /// Requests being answered.
    in_flight: AtomicUsize,
    /// Bytes read from the socket so far.
    bytes_read: AtomicU64,
    /// `bytes_read` when the last answer ended (or at accept).
    bytes_at_idle: AtomicU64,
    /// Milliseconds since the tracker's start when the connection last became idle.
    idle_since_ms: AtomicU64,
    /// Told when the tracker gives this connection's place to a new one.
    evict: Notify,
}

/// The admitted connections.
struct Tracker {
    limits: Limits,
    started: Instant,
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    refusing: Arc<Semaphore>,
    refused: AtomicU64,
}

impl Tracker {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A place for a new connection: a free one, or the place of the connection idle longest;
    /// `None` when every admitted connection has a request in flight.
    fn admit(&self) -> Option<(u64, Arc<Conn>)> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if open.len() >= self.limits.max_connections.max(1) {
            let oldest_idle = open
                .iter()
                .filter(|(_, conn)| conn.in_flight.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, conn)| conn.idle_since_ms.load(Ordering::Acquire))
                .map(|(id, _)| *id)?;
            if let Some(evicted) = open.remove(&oldest_idle) {
                evicted.evict.notify_one();
                tracing::debug!(
                    connection = oldest_idle,
                    "connection limit reached: closing the connection idle longest"
                );
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            in_flight: AtomicUsize::new(0),
            bytes_read: AtomicU64::new(0),
            bytes_at_idle: AtomicU64::new(0),
            idle_since_ms: AtomicU64::new(self.now_ms()),
            evict: Notify::new(),
        });
        open.insert(id, Arc::clone(&conn));
        Some((id, conn))
    }

    fn remove(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
    }
}

/// A request in flight on a connection; dropped when its answer is ready (or the request is
/// abandoned), which makes the connection idle again when it was the last.
struct Busy {
    conn: Arc<Conn>,
    tracker: Arc<Tracker>,
}

impl Busy {
    fn start(conn: &Arc<Conn>, tracker: &Arc<Tracker>) -> Busy {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy {
            conn: Arc::clone(conn),
            tracker: Arc::clone(tracker),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let conn = &self.conn;
        conn.bytes_at_idle
            .store(conn.bytes_read.load(Ordering::Acquire), Ordering::Release);
        conn.idle_since_ms
            .store(self.tracker.now_ms(), Ordering::Release);
        conn.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The socket, counting the bytes read.
struct Counted {
    stream: TcpStream,
    conn: Arc<Conn>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        if read > 0 {
            self.conn
                .bytes_read
                .fetch_add(read as u64, Ordering::AcqRel);
        }
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting and waits for
/// the connections to finish the requests in flight.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let tracker = Arc::new(Tracker {
        limits,
        started: Instant::now(),
        next_id: AtomicU64::new(0),
        open: Mutex::new(HashMap::new()),
        refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
        refused: AtomicU64::new(0),
    });
    let (stop_sender, stop) = watch::channel(false);
    // Every connection task holds a clone; `recv` answers `None` once all have ended.
    let (alive, mut all_ended) = mpsc::channel::<()>(1);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors (EMFILE) and the like: wait a moment instead of spinning.
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match tracker.admit() {
            Some((id, conn)) => {
                let task = Connection {
                    id,
                    conn,
                    tracker: Arc::clone(&tracker),
                    router: router.clone(),
                    stop: stop.clone(),
                    _alive: alive.clone(),
                };
                tokio::spawn(task.serve(stream));
            }
            None => refuse(&tracker, stream),
        }
    }
    drop(listener);
    let _ = stop_sender.send(true);
    drop(alive);
    let _ = all_ended.recv().await;
    Ok(())
}

/// Answers a connection past the limit with a short 503 and closes it.
fn refuse(tracker: &Tracker, mut stream: TcpStream) {
    let refused = tracker.refused.fetch_add(1, Ordering::Relaxed);
    let limit = tracker.limits.max_connections;
    if refused.is_power_of_two() || refused == 0 {
        tracing::warn!(
            limit,
            refused = refused + 1,
            "connection refused: every admitted connection has a request in flight"
        );
    }
    let Ok(permit) = Arc::clone(&tracker.refusing).try_acquire_owned() else {
        return; // Too many refusals under way: close without an answer.
    };
    tokio::spawn(async move {
        let body = format!(
            "{{\"error\":\"the server is answering {limit} connections, its limit (easeml serve --max-connections); try again in a moment\"}}"
        );
        let response = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            stream.write_all(response.as_bytes()).await?;
            stream.shutdown().await?;
            // Read what the client sent (up to 64 KiB) so that closing does not reset the
            // connection before the client has read the answer.
            let mut sink = [0u8; 4096];
            let mut left = 64usize << 10;
            while left > 0 {
                let read = stream.read(&mut sink).await?;
                if read == 0 {
                    break;
                }
                left = left.saturating_sub(read);
            }
            std::io::Result::Ok(())
        })
        .await;
        drop(permit);
    });
}

/// One admitted connection's task.
struct Connection {
    id: u64,
    conn: Arc<Conn>,
    tracker: Arc<Tracker>,
    router: Router,
    stop: watch::Receiver<bool>,
    _alive: mpsc::Sender<()>,
}

impl Connection {
    async fn serve(mut self, stream: TcpStream) {
        let limits = self.tracker.limits;
        let io = TokioIo::new(Counted {
            stream,
            conn: Arc::clone(&self.conn),
        });
        let (conn, tracker, router) = (
            Arc::clone(&self.conn),
            Arc::clone(&self.tracker),
            self.router.clone(),
        );
        let service =
            hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let busy = Busy::start(&conn, &tracker);
                let router = router.clone();
                async move {
                    let response =
                        tower::ServiceExt::oneshot(router, request.map(axum::body::Body::new))
                            .await;
                    drop(busy);
                    response
                }
            });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout + limits.idle_timeout)
            .keep_alive(true)
            .serve_connection(io, service);
        let mut connection = std::pin::pin!(connection);
        let tick = (limits.header_timeout.min(limits.idle_timeout) / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut stopping = false;
        let mut headers_since: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = connection.as_mut() => break,
                () = self.conn.evict.notified() => {
                    if self.conn.in_flight.load(Ordering::Acquire) == 0 {
                        break;
                    }
                    // A request began just as the place was given away: let it finish.
                    stopping = true;
                    connection.as_mut().graceful_shutdown();
                }
                changed = self.stop.changed(), if !stopping => {
                    let _ = changed;
                    stopping = true;
                    connection.as_mut().graceful_shutdown();
                }
                () = tokio::time::sleep(tick) => {
                    if self.conn.in_flight.load(Ordering::Acquire) > 0 {
                        headers_since = None;
                        continue;
                    }
                    let idle_bytes = self.conn.bytes_at_idle.load(Ordering::Acquire);
                    if self.conn.bytes_read.load(Ordering::Acquire) > idle_bytes {
                        let since = *headers_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= limits.header_timeout {
                            tracing::debug!(connection = self.id, "header timeout: connection closed");
                            break;
                        }
                    } else {
                        headers_since = None;
                        let idle_ms = self
                            .tracker
                            .now_ms()
                            .saturating_sub(self.conn.idle_since_ms.load(Ordering::Acquire));
                        if Duration::from_millis(idle_ms) >= limits.idle_timeout {
                            tracing::debug!(connection = self.id, "idle timeout: connection closed");
                            break;
                        }
                    }
                }
            }
        }
        self.tracker.remove(self.id);
    }
}
