//! A route's run, phase by phase, over one [`RunCtx`]: the client's request
//! read into a run and built for the upstream (`upstream_request.rs`), sent
//! and its head checked (`send.rs`), the stream started (`stream.rs`, then
//! `pump.rs` until it ends). The inspector's capture of the request is begun
//! and, when the run is refused before it streams, ended here.

use std::sync::OnceLock;

use bytes::Bytes;
use http::{Request, Response};

use super::upstream_request::{build_upstream, secret_headers, Prepared};
use super::Gateway;
use crate::access::Caller;
use crate::config::Route;
use crate::error::{Body, GatewayError};
use crate::inspector::{CaptureHandle, Exchange, Requests};
use crate::telemetry::{Trace, ViaWebSocket};
use crate::transport::Transport;
use crate::upstream;

/// What every phase of one run reads: the route, who asked and how.
pub(super) struct RunCtx<'a> {
    pub route: &'a Route,
    pub client: &'a upstream::Client,
    pub caller: &'a Caller,
    pub request_id: &'a str,
    pub started: tokio::time::Instant,
    pub trace: Trace,
    /// The client's transport.
    pub transport: Transport,
    /// The client takes each event as a message (a WebSocket session).
    pub messages: bool,
    pub capture: Option<CaptureHandle>,
    /// What the run's request asked its answers to carry back: a refusal
    /// after the request was read carries it too (a JSON-RPC error names
    /// the request it answers).
    pub reply_to: OnceLock<serde_json::Value>,
}

impl Gateway {
    /// Proxies one run of `route`: its request read (limits and body are
    /// the route stack's), translated, sent, its answer streamed back.
    pub(super) async fn proxy(
        &self,
        route: &Route,
        client: &upstream::Client,
        req: Request<Bytes>,
        request_id: &str,
        started: tokio::time::Instant,
        caller: &Caller,
    ) -> Result<Response<Body>, GatewayError> {
        let ctx = RunCtx {
            route,
            client,
            caller,
            request_id,
            started,
            trace: super::route::trace_of(&req),
            transport: super::route::client_transport(route.client, req.headers()),
            messages: req.extensions().get::<ViaWebSocket>().is_some(),
            capture: self.begin_capture(route, &req, started),
            reply_to: OnceLock::new(),
        };
        let mut r = self.run_phases(&ctx, req).await;
        if let (Err(e), Some(reply)) = (&mut r, ctx.reply_to.get()) {
            if e.reply_to.is_none() {
                e.reply_to = Some(Box::new(reply.clone()));
            }
        }
        if let (true, Some(c)) = (ctx.messages, &ctx.capture) {
            c.client_over_websocket();
        }
        if let (Err(e), Some(c)) = (&r, &ctx.capture) {
            // Refused before any stream: the list shows why.
            c.failed(&e.message, e.code);
            c.end("failed", Some(e.code), false);
        }
        r
    }

    async fn run_phases(
        &self,
        ctx: &RunCtx<'_>,
        req: Request<Bytes>,
    ) -> Result<Response<Body>, GatewayError> {
        let forwarded = crate::access::forwarded(ctx.route, req.headers());
        let read = match self.read_run(ctx, req.into_body()).await? {
            Prepared::Answered(answer) => return Ok(answer),
            Prepared::Run(read) => read,
        };
        let up = build_upstream(ctx, &read.run, forwarded)?;
        let sent = self.send(ctx, up).await?;
        self.start_pump(ctx, *read, sent).await
    }

    /// The inspector's record of this request, when it watches.
    fn begin_capture(
        &self,
        route: &Route,
        req: &Request<Bytes>,
        started: tokio::time::Instant,
    ) -> Option<CaptureHandle> {
        let ins = self.inspector.as_ref()?;
        let mut received = Exchange::new(
            req.method().as_str(),
            req.headers(),
            &secret_headers(route),
            req.body(),
        );
        received.path = Some(req.uri().path().to_string());
        ins.begin(
            &route.path,
            Requests {
                received,
                upstream: None,
            },
            started.into_std(),
        )
    }
}
