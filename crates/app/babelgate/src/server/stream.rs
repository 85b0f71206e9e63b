//! Stream: the pump that moves an upstream's answer to its client started,
//! with the run log begun; the streaming response and its headers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use babelgate_core::request::RunRequest;
use babelgate_core::{EncodeContext, IdGen};
use bytes::Bytes;
use http::{header, HeaderValue, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::accept::CountedAtEnd;
use super::follow::store_error;
use super::observe::{LogLine, Observers, StreamMetrics, Traced};
use super::proxy::RunCtx;
use super::pump::{stream_translator, Pump, PumpBody, Slot};
use super::send::Sent;
use super::upstream_request::ReadRun;
use super::Gateway;
use crate::config::{OnDisconnect, Route};
use crate::error::{Body, GatewayError};
use crate::inspector::capture::transport_name;
use crate::inspector::{ReplaySetup, Side};
use crate::registry;
use crate::resume::{Begin, Recorder};
use crate::transport::Transport;
use babelgate_store::{run_key, RunWriter};

impl Gateway {
    /// Starts the pump that moves the upstream's answer to the client and
    /// returns the streaming response it feeds.
    pub(super) async fn start_pump(
        &self,
        ctx: &RunCtx<'_>,
        read: ReadRun,
        sent: Sent,
    ) -> Result<Response<Body>, GatewayError> {
        let (route, run, transport) = (ctx.route, &read.run, ctx.transport);
        let upstream_binary = sent.upstream_binary;
        // A route without resume has no run log: no writer, no lease kept
        // for the run, no record, no `id:` lines (see `Pump::prepare`).
        let writer = if route.resume {
            let own_id = read.minted.then_some(run.run_id.as_str());
            self.begin_log(route, run, &read.conversation, own_id)
                .await?
        } else {
            None
        };

        let encode = EncodeContext {
            ids: IdGen::default(),
            thread_id: Some(run.thread_id.clone()),
            run_id: Some(run.run_id.clone()),
            message_id: run.continue_message_id.clone(),
            continued: run.continued.clone(),
            extension_frames: route.extension_frames,
            drop_raw: route.drop_raw,
            reply_to: run.reply_to.clone(),
            ..Default::default()
        };
        let setup = babelgate_core::journal::Setup::of(&encode);
        let translator = stream_translator(
            route.upstream_protocol,
            route.client,
            encode,
            run.continue_message_id.clone(),
            (
                upstream_binary.unwrap_or(Transport::Sse),
                (transport, ctx.messages),
            ),
        );
        // The record begins with how the translator was built.
        let mut recorder = writer.map(|w| {
            let begin = Begin::new(
                route.upstream_protocol,
                route.client,
                upstream_binary.is_some(),
                setup.clone(),
            );
            Recorder::new(w, route.retention, &begin)
        });
        if let Some(c) = &ctx.capture {
            plan_capture(c, route, upstream_binary, transport, setup);
        }
        let headers = translator.encoder().headers();
        if matches!(transport, Transport::Proto(_)) {
            // The encoder writes binary messages: no place for ids.
            if let Some(r) = recorder.as_mut() {
                r.binary();
            }
        }
        // A binary stream or messages have no comment to send: no
        // heartbeats (a WebSocket session pings instead).
        let heartbeat = match transport {
            Transport::Sse if !ctx.messages && !read.answer_once => route.heartbeat,
            Transport::Sse | Transport::Proto(_) => None,
        };

        // The body runs the pump (no task of its own), tracked so that a
        // shutdown waits for it as for any stream.
        let slot = Arc::new(Slot::default());
        let abort = Arc::new(AtomicBool::new(false));
        let pump = Pump {
            translator,
            tx: Some(slot.clone()),
            idle: route.idle_timeout,
            heartbeat,
            recorder,
            on_disconnect: route.on_disconnect,
            store: read
                .keeps_history
                .then(|| self.stores.conversations.clone()),
            thread_id: read.conversation,
            new_from_client: read.new_from_client,
            shutdown: self.shutdown.clone(),
            observers: observers(self, ctx, upstream_binary.is_some()),
            inflight: Some(self.inflight.clone()),
            abort: abort.clone(),
            messages: ctx.messages,
            stop_upstream: sent.stop,
            answer_once: read.answer_once,
        };
        let span = tracing::Span::current();
        let run = Box::new(pump).run(sent.reads).instrument(span);
        let body = PumpBody::new(self.pumps.track_future(run), slot, abort);
        let mut resp = stream_response(BodyExt::boxed(body), headers, transport);
        if read.answer_once {
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        resp.extensions_mut().insert(CountedAtEnd);
        Ok(resp)
    }

    /// Starts the log of a run about to be proxied. Without a store the
    /// stream still goes (it just cannot be resumed), unless the route
    /// promises that (`on_disconnect = "keep"`): then 503.
    async fn begin_log(
        &self,
        route: &Route,
        run: &RunRequest,
        conversation: &str,
        own_id: Option<&str>,
    ) -> Result<Option<RunWriter>, GatewayError> {
        let lease = self.routes.load().config.store.lease;
        let key = run_key(&route.path, conversation);
        // Tagged by the conversation: one Redis Cluster slot for its runs
        // (a minted id is made so too).
        let run_id = own_id.map_or_else(|| babelgate_store::run_id(&key), str::to_string);
        match RunWriter::begin(&self.leases, &key, &run_id, &self.owner, lease).await {
            Ok((writer, _previous)) => {
                if registry::policy(route.client).keeps_input() {
                    // What a snapshot on reconnect starts with; kept with
                    // the run (its life and retention), capped in bytes.
                    if let Err(e) = self.stores.runs.keep_input(&run_id, &run.messages).await {
                        tracing::warn!(error = %e, "could not keep the run's input for snapshots");
                    }
                }
                Ok(Some(writer))
            }
            Err(e) if route.on_disconnect == OnDisconnect::Keep => Err(store_error(e)),
            Err(e) => {
                tracing::warn!(error = %e, "run log unavailable: this stream cannot be resumed");
                Ok(None)
            }
        }
    }
}

/// What watches a proxied stream (see `observe.rs`): its metrics, its
/// trace, its log line and, when the inspector keeps one, its capture.
fn observers(gw: &Gateway, ctx: &RunCtx<'_>, upstream_binary: bool) -> Observers {
    let route = ctx.route;
    ctx.trace.streaming(upstream_binary);
    let pair = (route.upstream_protocol, route.client);
    let observers = Observers::default()
        .with(StreamMetrics::new(
            gw.metrics.clone(),
            &route.path,
            pair,
            ctx.started,
        ))
        .with(Traced::new(ctx.trace.clone(), ctx.started))
        .with(LogLine);
    match &ctx.capture {
        Some(c) => observers.with(c.clone()),
        None => observers,
    }
}

/// A streaming response fed by `rx` (already in `transport`'s form), one
/// body frame per chunk so that each event is flushed as it comes.
pub(crate) fn sse_response(
    rx: mpsc::Receiver<Bytes>,
    dialect_headers: &'static [(&'static str, &'static str)],
    transport: Transport,
) -> Response<Body> {
    sse_body(rx, None, dialect_headers, transport)
}

/// A response of `transport` with what arrives on `rx` (already in that
/// form: the demo agent's and a resumed stream's follower's); once `rx`
/// ends, a set `abort` ends the body with an error instead of cleanly
/// (hyper then breaks off the connection, or resets the HTTP/2 stream).
pub(super) fn sse_body(
    rx: mpsc::Receiver<Bytes>,
    abort: Option<Arc<AtomicBool>>,
    dialect_headers: &'static [(&'static str, &'static str)],
    transport: Transport,
) -> Response<Body> {
    let stream = futures_util::stream::unfold(Some((rx, abort)), |state| async move {
        let (mut rx, abort) = state?;
        match rx.recv().await {
            Some(b) => Some((Ok(Frame::data(b)), Some((rx, abort)))),
            None if abort.is_some_and(|a| a.load(Ordering::Acquire)) => {
                // Pending once first: hyper flushes what it holds (the error
                // frame) before the error closes the connection.
                tokio::task::yield_now().await;
                Some((Err(std::io::Error::other("the run failed")), None))
            }
            None => None,
        }
    });
    stream_response(
        BodyExt::boxed(StreamBody::new(stream)),
        dialect_headers,
        transport,
    )
}

/// A streaming response of `transport` with `body`: its content type and
/// the headers that keep proxies from buffering or caching it.
fn stream_response(
    body: Body,
    dialect_headers: &'static [(&'static str, &'static str)],
    transport: Transport,
) -> Response<Body> {
    let mut response = Response::new(body);
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(transport.content_type()),
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

/// What the inspector's capture of a run needs to replay it: both sides'
/// dialects and transports, and the encoder's setup.
fn plan_capture(
    c: &crate::inspector::CaptureHandle,
    route: &Route,
    upstream_binary: Option<Transport>,
    transport: Transport,
    setup: babelgate_core::journal::Setup,
) {
    let read = upstream_binary.unwrap_or(Transport::Sse);
    let written = transport;
    let ws = crate::ws::is_ws_url(&route.upstream);
    let up_name = match (ws, upstream_binary.is_some()) {
        (true, true) => "ws-proto",
        (true, false) => "ws",
        (false, true) => "proto",
        (false, false) => "sse",
    };
    c.plan(
        Side {
            dialect: route.upstream_protocol.to_string(),
            transport: up_name.into(),
        },
        Side {
            dialect: route.client.to_string(),
            transport: transport_name(transport).into(),
        },
        ReplaySetup {
            from: route.upstream_protocol,
            to: route.client,
            from_transport: transport_name(read).into(),
            to_transport: transport_name(written).into(),
            setup,
            ending: Default::default(),
            clock: Vec::new(),
        },
    );
}
