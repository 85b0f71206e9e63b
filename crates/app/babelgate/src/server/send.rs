//! Send the upstream request and check its head: within the route's
//! `response_timeout`, a 2xx, in a content type its dialect streams in.
//! The upstream's failures are told to the client without its internals;
//! its address and the detail go to the log.

use std::time::Duration;

use futures_util::future::Either;
use futures_util::StreamExt;
use http::{header, HeaderValue, StatusCode};

use super::proxy::RunCtx;
use super::pump::UpstreamStop;
use super::upstream_request::UpstreamRequest;
use super::Gateway;
use crate::config::{Route, UpstreamTransport};
use crate::error::{GatewayError, UpstreamFault};
use crate::registry;
use crate::transport::{self, Read, Transport};
use crate::upstream;

/// The upstream's answer as the pump reads it: a WebSocket's messages, or
/// an HTTP response's body. The WebSocket boxed: the pump's future keeps
/// room for the larger side for the stream's whole life, and a WebSocket
/// stream held inline made every HTTP stream 2.6 KiB larger.
pub(super) type Reads = Either<
    std::pin::Pin<Box<crate::ws::UpstreamWs>>,
    futures_util::stream::Map<
        upstream::ResponseBody,
        fn(Result<bytes::Bytes, String>) -> Result<Read, UpstreamFault>,
    >,
>;

/// What a sent request gave: its answer, the binary transport it comes in
/// (none: SSE), and how to stop the upstream's run, for a dialect that has
/// a stop.
pub(super) struct Sent {
    pub reads: Reads,
    pub upstream_binary: Option<Transport>,
    pub stop: Option<Box<UpstreamStop>>,
}

impl Gateway {
    pub(super) async fn send(
        &self,
        ctx: &RunCtx<'_>,
        up: UpstreamRequest,
    ) -> Result<Sent, GatewayError> {
        let route = ctx.route;
        if crate::ws::is_ws_url(&route.upstream) {
            let ws = crate::ws::open_upstream(route, up.headers, up.body)
                .await
                .inspect_err(|g| self.metrics.upstream_error(g.code))?;
            // `ag-ui.proto` accepted: each message is a protobuf event, read
            // as a binary HTTP body is (the route's transport allows it:
            // only `proto` and `auto` offer it).
            let upstream_binary = if ws.is_binary() {
                Transport::proto_for(&registry::policy(route.upstream_protocol))
            } else {
                None
            };
            return Ok(Sent {
                reads: Either::Left(Box::pin(ws)),
                upstream_binary,
                stop: None,
            });
        }
        // What a stop of the upstream's run needs, for a dialect that has
        // one: the run's own request headers, asking for a JSON answer.
        let stop = registry::requests(route.upstream_protocol)
            .stop_request()
            .map(|build| {
                let mut headers = up.headers.clone();
                headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
                Box::new(UpstreamStop {
                    build,
                    client: ctx.client.clone(),
                    url: route.upstream.clone(),
                    headers,
                })
            });
        let send = ctx.client.post(&route.upstream, up.headers, up.body);
        let asked = tokio::time::Instant::now();
        let resp = match tokio::time::timeout(route.response_timeout, send).await {
            Ok(r) => r.map_err(|e| {
                let g = upstream_send_error(route, e);
                self.metrics.upstream_error(g.code);
                g
            })?,
            Err(_) => {
                self.metrics.upstream_error("upstream_timeout");
                return Err(GatewayError::upstream(
                    StatusCode::GATEWAY_TIMEOUT,
                    "upstream_timeout",
                    format!(
                        "the upstream sent no response head within {} ms",
                        route.response_timeout.as_millis()
                    ),
                ));
            }
        };
        let status = resp.status;
        ctx.trace.upstream_status(status.as_u16());
        if !status.is_success() {
            self.metrics.upstream_error("upstream_status");
            // The body may tell internals: a bounded excerpt, read within
            // the rest of the response time (at most 5 s), goes to the log;
            // only the status to the client. The rest is never read.
            let left = route
                .response_timeout
                .saturating_sub(asked.elapsed())
                .min(ERROR_BODY_TIME);
            let excerpt = error_excerpt(resp.body, left).await;
            tracing::warn!(upstream = %loggable_url(&route.upstream), %status, body = %excerpt, "upstream refused the request");
            return Err(GatewayError::upstream(
                StatusCode::BAD_GATEWAY,
                "upstream_status",
                format!("the upstream answered {status}"),
            ));
        }
        let ctype = resp
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        // An upstream that cannot speak the binary transport answers SSE
        // (AG-UI 1.1's rule), whatever was asked.
        let upstream_binary =
            if route.upstream_transport != UpstreamTransport::Sse && transport::is_proto(ctype) {
                Transport::proto_for(&registry::policy(route.upstream_protocol))
            } else {
                None
            };
        if upstream_binary.is_none() && !ctype.starts_with("text/event-stream") {
            self.metrics.upstream_error("upstream_content_type");
            return Err(GatewayError::upstream(
                StatusCode::BAD_GATEWAY,
                "upstream_content_type",
                format!(
                    "upstream answered with content-type `{ctype}`, not {}",
                    transport::upstream_accept(route.upstream_transport)
                ),
            ));
        }
        let read: fn(Result<bytes::Bytes, String>) -> Result<Read, UpstreamFault> =
            |r| r.map(Read::Bytes).map_err(UpstreamFault::Connection);
        Ok(Sent {
            reads: Either::Right(resp.body.map(read)),
            upstream_binary,
            stop,
        })
    }
}

/// The client learns only what went wrong; the upstream's address and the
/// error's detail go to the log.
fn upstream_send_error(route: &Route, e: upstream::SendError) -> GatewayError {
    let timeout = e.is_timeout();
    tracing::warn!(upstream = %loggable_url(&route.upstream), error = %upstream::error_chain(&e), "upstream request failed");
    if timeout {
        GatewayError::upstream(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            "the upstream did not answer in time",
        )
    } else {
        GatewayError::upstream(
            StatusCode::BAD_GATEWAY,
            "upstream_unreachable",
            "cannot reach the upstream",
        )
    }
}

/// An upstream URL fit for a log line: no userinfo, no query, no fragment.
pub fn loggable_url(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

/// How much of a non-2xx upstream body is read (for the log), and for how
/// long at most.
const ERROR_BODY_BYTES: usize = 512;
const ERROR_BODY_TIME: Duration = Duration::from_secs(5);

/// The start of an upstream's error body for the log: at most
/// [`ERROR_BODY_BYTES`], whatever arrived within `within`, control
/// characters replaced; the rest is never read.
async fn error_excerpt(mut body: upstream::ResponseBody, within: Duration) -> String {
    let mut got = Vec::new();
    let read = async {
        while got.len() < ERROR_BODY_BYTES {
            match body.next().await {
                Some(Ok(c)) => {
                    let room = ERROR_BODY_BYTES - got.len();
                    got.extend_from_slice(c.get(..room.min(c.len())).unwrap_or(&c));
                }
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(within, read).await;
    String::from_utf8_lossy(&got)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}
