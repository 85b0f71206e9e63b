//! The HTTP side: accept client requests on the configured routes, translate
//! them for the upstream, and re-stream the upstream's answer live in the
//! client's dialect.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use babelgate_core::assemble::MessageAssembler;
use babelgate_core::request::{Message, RunRequest};
use babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES;
use babelgate_core::{Dialect, EncodeContext, IdGen, Role, Translator};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::config::{Config, Route};
use crate::error::{json_response, Body, GatewayError};
use crate::registry;
use crate::store::{ConversationStore, MemoryStore};

/// Client bytes buffered per stream before the upstream is paused: a slow
/// client applies backpressure instead of growing memory.
const STREAM_BUFFER_CHUNKS: usize = 16;

/// Shared state of a running gateway.
pub struct Gateway {
    config: Config,
    store: Arc<dyn ConversationStore>,
    /// One client per route: timeouts are per route.
    clients: HashMap<String, reqwest::Client>,
}

impl Gateway {
    pub fn new(config: Config) -> Result<Gateway, GatewayError> {
        Gateway::with_store(config, Arc::new(MemoryStore::default()))
    }

    pub fn with_store(
        config: Config,
        store: Arc<dyn ConversationStore>,
    ) -> Result<Gateway, GatewayError> {
        let mut clients = HashMap::new();
        for r in &config.routes {
            let client = reqwest::Client::builder()
                .connect_timeout(r.connect_timeout)
                .tcp_nodelay(true)
                // Never ask for compression: SSE must arrive event by event.
                .no_gzip()
                .build()
                .map_err(|e| GatewayError::internal(format!("HTTP client: {e}")))?;
            clients.insert(r.path.clone(), client);
        }
        Ok(Gateway {
            config,
            store,
            clients,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Serves on `listener` until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let gw = self.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let gw = gw.clone();
                    async move { Ok::<_, Infallible>(gw.handle(req, peer).await) }
                });
                if let Err(e) = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await
                {
                    tracing::debug!(error = %e, %peer, "connection ended with an error");
                }
            });
        }
    }

    pub async fn handle(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let resp = match self.route_request(req).await {
            Ok(resp) => resp,
            Err(e) => {
                tracing::info!(%method, %path, %peer, status = e.status.as_u16(), fault = e.fault.as_str(), error = %e.message, "request refused");
                e.into_response()
            }
        };
        tracing::debug!(%method, %path, status = resp.status().as_u16(), "response started");
        resp
    }

    async fn route_request(&self, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
        let path = req.uri().path().to_string();
        if path == "/healthz" || path == "/readyz" {
            return Ok(json_response(StatusCode::OK, &json!({"status": "ok"})));
        }
        if let Some(route) = self.config.route(&path) {
            if req.method() != Method::POST {
                return Err(GatewayError::client(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method_not_allowed",
                    format!("{} {path}: this route takes POST", req.method()),
                ));
            }
            return self.proxy(route, req).await;
        }
        // `useChat({resume: true})` asks `GET {api}/{chatId}/stream` on load;
        // 204 says nothing is running for that chat.
        if req.method() == Method::GET {
            if let Some(route) = self.resume_route(&path) {
                let _ = route;
                let mut resp = Response::new(crate::error::full(Bytes::new()));
                *resp.status_mut() = StatusCode::NO_CONTENT;
                return Ok(resp);
            }
        }
        Err(GatewayError::client(
            StatusCode::NOT_FOUND,
            "no_route",
            format!("no route for {path}"),
        ))
    }

    fn resume_route(&self, path: &str) -> Option<&Route> {
        let rest = path.strip_suffix("/stream")?;
        let (base, chat) = rest.rsplit_once('/')?;
        if chat.is_empty() {
            return None;
        }
        self.config.route(base)
    }

    async fn proxy(
        &self,
        route: &Route,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, GatewayError> {
        let body = read_body(req.into_body(), route.max_body_bytes).await?;
        let mut ids = IdGen::default();
        let mut run = registry::requests(route.client)
            .parse_request(&body)
            .map_err(|e| {
                let mut g =
                    GatewayError::client(StatusCode::BAD_REQUEST, "invalid_request", e.message);
                g.field = e.field;
                g
            })?;
        if run.run_id.is_empty() {
            run.run_id = ids.next("run");
        }
        if run.thread_id.is_empty() {
            run.thread_id = ids.next("thread");
        }
        for m in &mut run.messages {
            if m.id.is_empty() {
                m.id = ids.next("msg");
            }
        }
        // What the client said this turn, kept for dialects that send only that.
        let new_from_client = run.messages.clone();
        if route.client == Dialect::AgKit {
            let mut history = self.store.history(&run.thread_id);
            history.append(&mut run.messages);
            run.messages = history;
        }
        for tool in &route.client_tools {
            if !run.tools.iter().any(|t| t.name == tool.name) {
                run.tools.push(tool.clone());
            }
        }
        let upstream_view = upstream_request(route.upstream_protocol, &run);
        let upstream_body = registry::requests(route.upstream_protocol)
            .build_request(&upstream_view)
            .map_err(|e| GatewayError::internal(format!("building the upstream request: {e}")))?;

        let client = self.clients.get(&route.path).expect("a client per route");
        let resp = client
            .post(route.upstream.clone())
            .header(header::ACCEPT, "text/event-stream")
            .header(header::CONTENT_TYPE, "application/json")
            .headers(upstream_headers(route))
            .body(upstream_body.to_string())
            .send()
            .await
            .map_err(upstream_send_error)?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let text: String = text.chars().take(2048).collect();
            return Err(GatewayError::upstream(
                StatusCode::BAD_GATEWAY,
                "upstream_status",
                format!("upstream answered {status}: {text}"),
            ));
        }
        let ctype = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !ctype.starts_with("text/event-stream") {
            return Err(GatewayError::upstream(
                StatusCode::BAD_GATEWAY,
                "upstream_content_type",
                format!("upstream answered with content-type `{ctype}`, not text/event-stream"),
            ));
        }

        let ctx = EncodeContext {
            ids: IdGen::default(),
            thread_id: Some(run.thread_id.clone()),
            run_id: Some(run.run_id.clone()),
            message_id: run.continue_message_id.clone(),
            ..Default::default()
        };
        let translator = registry::translator(
            route.upstream_protocol,
            route.client,
            ctx,
            DEFAULT_MAX_EVENT_BYTES,
        )
        .with_assembler(MessageAssembler::new(run.continue_message_id.clone()));
        let headers = translator.encoder().headers();

        let (tx, rx) = mpsc::channel::<Bytes>(STREAM_BUFFER_CHUNKS);
        let pump = Pump {
            translator,
            tx,
            idle: route.idle_timeout,
            heartbeat: route.heartbeat,
            store: (route.client == Dialect::AgKit).then(|| self.store.clone()),
            thread_id: run.thread_id.clone(),
            new_from_client,
        };
        let upstream = resp.bytes_stream().map(|r| r.map_err(|e| error_chain(&e)));
        tokio::spawn(pump.run(upstream));

        Ok(sse_response(rx, headers))
    }
}

/// A streaming `text/event-stream` response fed by `rx`, one body frame per
/// chunk so that each event is flushed as it comes.
pub(crate) fn sse_response(
    rx: mpsc::Receiver<Bytes>,
    dialect_headers: &'static [(&'static str, &'static str)],
) -> Response<Body> {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::io::Error>(Frame::data(b)), rx))
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    for (k, v) in dialect_headers {
        // `connection` is hop-by-hop (and illegal in HTTP/2); cache-control is set above.
        if !k.eq_ignore_ascii_case("connection") && !k.eq_ignore_ascii_case("cache-control") {
            h.insert(*k, HeaderValue::from_static(v));
        }
    }
    response
}

/// The request an upstream of `dialect` gets: AG-Kit servers keep their own
/// history, so they receive only what is new since their last turn, i.e. the
/// messages after the last one they wrote.
fn upstream_request(dialect: Dialect, run: &RunRequest) -> RunRequest {
    let mut up = run.clone();
    if dialect == Dialect::AgKit {
        let start = run
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .map_or(0, |i| i + 1);
        up.messages = run.messages[start..].to_vec();
    }
    up
}

fn upstream_headers(route: &Route) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (k, v) in &route.upstream_headers {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            map.insert(k, v);
        }
    }
    map
}

fn upstream_send_error(e: reqwest::Error) -> GatewayError {
    if e.is_timeout() {
        GatewayError::upstream(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            format!("upstream did not answer in time: {e}"),
        )
    } else {
        GatewayError::upstream(
            StatusCode::BAD_GATEWAY,
            "upstream_unreachable",
            format!("cannot reach the upstream: {}", error_chain(&e)),
        )
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// Reads a request body, refusing it as soon as it passes `limit`.
async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, GatewayError> {
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(GatewayError::client(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("request body is larger than {limit} bytes"),
            ))
        }
        Err(e) => Err(GatewayError::client(
            StatusCode::BAD_REQUEST,
            "body_read_failed",
            format!("reading the request body failed: {e}"),
        )),
    }
}

/// Moves one upstream response to one client, translating as it goes.
struct Pump {
    translator: Translator,
    tx: mpsc::Sender<Bytes>,
    idle: Duration,
    heartbeat: Option<Duration>,
    /// Set when the client dialect needs the gateway to keep history.
    store: Option<Arc<dyn ConversationStore>>,
    thread_id: String,
    new_from_client: Vec<Message>,
}

impl Pump {
    async fn run<S>(mut self, mut upstream: S)
    where
        S: futures_util::Stream<Item = Result<Bytes, String>> + Unpin,
    {
        let mut out = Vec::with_capacity(4096);
        let idle = tokio::time::sleep(self.idle);
        tokio::pin!(idle);
        // Far in the future when heartbeats are off: one code path either way.
        let beat_every = self
            .heartbeat
            .unwrap_or(Duration::from_secs(365 * 24 * 3600));
        let beat = tokio::time::sleep(beat_every);
        tokio::pin!(beat);
        let complete = loop {
            let next = tokio::select! {
                next = upstream.next() => next,
                () = &mut idle => {
                    let msg = format!("the upstream sent nothing for {:?}", self.idle);
                    self.translator.fail(&msg, Some("upstream_idle"), &mut out);
                    self.remember();
                    send(&self.tx, &mut out).await;
                    break false;
                }
                () = &mut beat => {
                    beat.as_mut().reset(tokio::time::Instant::now() + beat_every);
                    babelgate_core::sse::write_comment(&mut out, "ping");
                    if !send(&self.tx, &mut out).await {
                        break false;
                    }
                    continue;
                }
                // The client went away: dropping `upstream` cancels the request.
                _ = self.tx.closed() => break false,
            };
            let ok = match next {
                None => self.translator.finish_live(&mut out).unwrap_or(false),
                Some(Err(e)) => {
                    let msg = format!("the upstream connection failed: {e}");
                    self.translator
                        .fail(&msg, Some("upstream_disconnected"), &mut out);
                    false
                }
                Some(Ok(bytes)) => {
                    idle.as_mut().reset(tokio::time::Instant::now() + self.idle);
                    let r = self.translator.push(&bytes, &mut out);
                    if r.is_ok() {
                        if !out.is_empty() {
                            beat.as_mut()
                                .reset(tokio::time::Instant::now() + beat_every);
                        }
                        if !send(&self.tx, &mut out).await {
                            break false;
                        }
                        continue;
                    }
                    false
                }
            };
            // History first: the client may post its next turn the moment it
            // reads the end of this one.
            self.remember();
            send(&self.tx, &mut out).await;
            break ok;
        };
        tracing::debug!(
            complete,
            events = self.translator.events_translated,
            "stream ended"
        );
    }

    fn remember(&mut self) {
        if let Some(store) = &self.store {
            let mut turn = std::mem::take(&mut self.new_from_client);
            turn.extend(self.translator.take_messages());
            store.append(&self.thread_id, turn);
        }
    }
}

/// Sends what is buffered; false when the client is gone.
async fn send(tx: &mpsc::Sender<Bytes>, out: &mut Vec<u8>) -> bool {
    if out.is_empty() {
        return true;
    }
    let chunk = Bytes::copy_from_slice(out);
    out.clear();
    tx.send(chunk).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STARTED: &str = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";

    fn pump(idle: Duration, heartbeat: Option<Duration>) -> (Pump, mpsc::Receiver<Bytes>) {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER_CHUNKS);
        let translator = registry::translator(
            Dialect::AgUi,
            Dialect::AgUi,
            EncodeContext::deterministic(),
            DEFAULT_MAX_EVENT_BYTES,
        );
        let p = Pump {
            translator,
            tx,
            idle,
            heartbeat,
            store: None,
            thread_id: "t".into(),
            new_from_client: Vec::new(),
        };
        (p, rx)
    }

    type Upstream =
        std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Bytes, String>> + Send>>;

    fn upstream() -> (mpsc::Sender<Result<Bytes, String>>, Upstream) {
        let (tx, rx) = mpsc::channel(4);
        let s =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|x| (x, rx)) },
            );
        (tx, Box::pin(s))
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_keep_an_idle_stream_alive_until_the_idle_timeout() {
        let (p, mut rx) = pump(Duration::from_secs(50), Some(Duration::from_secs(15)));
        let (up, s) = upstream();
        tokio::spawn(p.run(s));
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut chunks = Vec::new();
        while let Some(c) = rx.recv().await {
            chunks.push((
                started.elapsed().as_secs(),
                String::from_utf8(c.to_vec()).unwrap(),
            ));
        }
        assert!(chunks[0].1.contains("RUN_STARTED"));
        let pings: Vec<u64> = chunks
            .iter()
            .filter(|(_, c)| c == ": ping\n\n")
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(pings, [15, 30, 45], "{chunks:?}");
        let (t, last) = chunks.last().unwrap();
        assert_eq!(*t, 50);
        assert!(
            last.contains("RUN_ERROR") && last.contains("upstream_idle"),
            "{last}"
        );
        drop(up);
    }

    #[tokio::test(start_paused = true)]
    async fn output_postpones_the_heartbeat() {
        let (p, mut rx) = pump(Duration::from_secs(100), Some(Duration::from_secs(15)));
        let (up, s) = upstream();
        tokio::spawn(p.run(s));
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        rx.recv().await.unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        up.send(Ok(Bytes::from(
            "data: {\"type\":\"STEP_STARTED\",\"stepName\":\"s\"}\n\n",
        )))
        .await
        .unwrap();
        let t0 = tokio::time::Instant::now();
        assert!(String::from_utf8(rx.recv().await.unwrap().to_vec())
            .unwrap()
            .contains("STEP_STARTED"));
        assert_eq!(rx.recv().await.unwrap(), Bytes::from(": ping\n\n"));
        assert_eq!(
            t0.elapsed().as_secs(),
            15,
            "15 s after the last output, not after the first"
        );
    }

    #[tokio::test]
    async fn a_client_that_goes_away_cancels_the_upstream() {
        let (p, rx) = pump(Duration::from_secs(100), None);
        let (up, s) = upstream();
        let task = tokio::spawn(p.run(s));
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        drop(rx);
        // The pump drops the upstream stream, which closes our sender's side.
        tokio::time::timeout(Duration::from_secs(20), up.closed())
            .await
            .expect("upstream released");
        task.await.unwrap();
    }
}
