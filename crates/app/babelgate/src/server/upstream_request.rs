//! Build the upstream request: the client's body read into a run (ids,
//! the kept history, the route's tools), then the run as the upstream's
//! dialect asks it, with its headers (forwarded, configured, the dialect's,
//! the request id, the trace's).

use std::borrow::Cow;

use babelgate_core::request::{Message, RunRequest};
use babelgate_core::{Dialect, IdGen, Intent, Role};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};

use super::follow::store_error;
use super::proxy::RunCtx;
use super::send::loggable_url;
use super::Gateway;
use crate::config::Route;
use crate::error::{Body, GatewayError};
use crate::inspector::Exchange;
use crate::registry;
use crate::transport;
use babelgate_store::run_key;

/// A client's request, read.
pub(super) enum Prepared {
    /// A request about a run already begun (`Intent::About`), answered.
    Answered(Response<Body>),
    Run(Box<ReadRun>),
}

/// A run to proxy, as the client asked it.
pub(super) struct ReadRun {
    pub run: RunRequest,
    /// The client takes the run's outcome as one answer (`Intent::Answer`).
    pub answer_once: bool,
    /// The gateway minted the run's id: the run log takes it as its own.
    pub minted: bool,
    /// Where this caller's run and history of this thread are kept.
    pub conversation: String,
    pub keeps_history: bool,
    /// What the client said this turn, for dialects that send only that.
    pub new_from_client: Vec<Message>,
}

/// What goes to the upstream.
pub(super) struct UpstreamRequest {
    pub headers: HeaderMap,
    pub body: String,
}

impl Gateway {
    /// Reads the client's body into a run: refused whole when its parse
    /// would cost more than its size allows (the core's rule), answered at
    /// once when it asks about a run already begun.
    pub(super) async fn read_run(
        &self,
        ctx: &RunCtx<'_>,
        body: Bytes,
    ) -> Result<Prepared, GatewayError> {
        let route = ctx.route;
        babelgate_core::cost::check(&body).map_err(|e| {
            GatewayError::client(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_costly",
                e.to_string(),
            )
        })?;
        let (mut run, answer_once) = match registry::requests(route.client)
            .classify(&body)
            .map_err(GatewayError::request)?
        {
            Intent::Run(run) => (*run, false),
            Intent::Answer(run) => (*run, true),
            Intent::About {
                run_id,
                ask,
                reply_to,
            } => {
                let about = super::runs::About {
                    route,
                    caller: ctx.caller,
                    run_id: &run_id,
                    ask,
                    reply_to: reply_to.clone(),
                };
                let answer = self
                    .about_run(about, ctx.transport, ctx.trace.clone())
                    .await
                    .map_err(|e| e.replying_to(reply_to))?;
                if let Some(c) = &ctx.capture {
                    // No run of its own: the capture ends with the answer.
                    c.end("completed", None, false);
                }
                return Ok(Prepared::Answered(answer));
            }
        };
        if let Some(r) = &run.reply_to {
            let _ = ctx.reply_to.set(r.clone());
        }
        let mut ids = IdGen::default();
        if run.thread_id.is_empty() {
            run.thread_id = ids.next("thread");
        }
        let conversation = ctx.caller.scoped(&run.thread_id);
        // A run id the gateway mints is the run log's own, so that a
        // client can name the run later (get, follow, stop by id).
        let minted = run.run_id.is_empty();
        if minted {
            run.run_id = babelgate_store::run_id(&run_key(&route.path, &conversation));
        }
        for m in &mut run.messages {
            if m.id.is_empty() {
                m.id = ids.next("msg");
            }
        }
        ctx.trace.run(&run.thread_id, &run.run_id);
        if let Some(c) = &ctx.capture {
            c.run_ids(&run.thread_id, &run.run_id);
        }
        let new_from_client = run.messages.clone();
        let keeps_history = registry::policy(route.client).gateway_keeps_history;
        if keeps_history {
            let mut history = self
                .stores
                .conversations
                .history(&conversation)
                .await
                .map_err(store_error)?;
            history.append(&mut run.messages);
            run.messages = history;
        }
        for tool in &route.client_tools {
            if !run.tools.iter().any(|t| t.name == tool.name) {
                run.tools.push(tool.clone());
            }
        }
        Ok(Prepared::Run(Box::new(ReadRun {
            run,
            answer_once,
            minted,
            conversation,
            keeps_history,
            new_from_client,
        })))
    }
}

/// The upstream's request for `run`, its headers after `forwarded`: later
/// entries replace what earlier ones set for their names, so the request id
/// goes upstream once, whatever was forwarded or configured, and the trace
/// is ours to carry.
pub(super) fn build_upstream(
    ctx: &RunCtx<'_>,
    run: &RunRequest,
    forwarded: HeaderMap,
) -> Result<UpstreamRequest, GatewayError> {
    let route = ctx.route;
    let requests = registry::requests(route.upstream_protocol);
    let body = requests
        .build_request(&upstream_view(route.upstream_protocol, run))
        .map_err(|e| GatewayError::internal(format!("building the upstream request: {e}")))?
        .to_string();
    let mut headers = forwarded;
    headers.extend(configured_headers(route));
    for (k, v) in requests.upstream_headers() {
        headers.insert(*k, HeaderValue::from_static(v));
    }
    if let Ok(v) = HeaderValue::from_str(ctx.request_id) {
        headers.insert("x-request-id", v);
    }
    if !crate::ws::is_ws_url(&route.upstream) {
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static(transport::upstream_accept(route.upstream_transport)),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if let Some(c) = &ctx.capture {
        let mut sent = Exchange::new("POST", &headers, &secret_headers(route), body.as_bytes());
        sent.url = Some(loggable_url(&route.upstream));
        c.upstream_request(sent);
    }
    headers.extend(ctx.trace.upstream(route));
    Ok(UpstreamRequest { headers, body })
}

/// The request an upstream of `dialect` gets: one that keeps its own history
/// (AG-Kit servers) receives only what is new since its last turn, i.e. the
/// messages after the last one it wrote.
fn upstream_view(dialect: Dialect, run: &RunRequest) -> Cow<'_, RunRequest> {
    if !registry::policy(dialect).upstream_keeps_history {
        return Cow::Borrowed(run);
    }
    let start = run
        .messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |i| i + 1);
    let mut up = run.clone();
    up.messages = run.messages.get(start..).unwrap_or_default().to_vec();
    Cow::Owned(up)
}

/// Headers whose values the inspector never shows: the route's configured
/// upstream headers and the ones it forwards.
pub(super) fn secret_headers(route: &Route) -> Vec<&str> {
    route
        .upstream_headers
        .0
        .iter()
        .map(|(k, _)| k.as_str())
        .chain(route.forward_headers.iter().map(String::as_str))
        .collect()
}

fn configured_headers(route: &Route) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in route.upstream_headers.iter() {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            map.insert(k, v);
        }
    }
    map
}
