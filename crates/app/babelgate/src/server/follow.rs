//! A kept run named by its id: followed again (`{path}/{id}/stream`,
//! resume) or stopped (`{path}/{id}/stop`), on any instance.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use babelgate_core::{EncodeContext, Resume};
use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::accept::CountedAtEnd;
use super::route::client_transport;
use super::stream::sse_body;
use super::{Gateway, STREAM_BUFFER_CHUNKS};
use crate::config::Route;
use crate::error::{json_response, Body, GatewayError};
use crate::metrics::CountAtEnd;
use crate::registry;
use crate::resume::{self, ClientId, Mode};
use crate::telemetry::Trace;
use crate::transport::Transport;
use babelgate_store::{run_key, StoreError};

impl Gateway {
    /// `GET {path}/{id}/stream`: the client comes back to a run.
    pub(super) async fn resume(
        &self,
        route: &Route,
        id: &str,
        headers_in: &http::HeaderMap,
        trace: Trace,
    ) -> Result<Response<Body>, GatewayError> {
        let headers = headers_in;
        let runs = self.stores.runs.clone();
        let key = run_key(&route.path, id);
        let Some(info) = runs.latest(&key).await.map_err(store_error)? else {
            return Ok(no_content());
        };
        let last_event_id = match headers.get("last-event-id").map(|v| v.to_str()) {
            None => None,
            Some(Ok(v)) => Some(v.parse::<ClientId>().map_err(|e| {
                let mut g =
                    GatewayError::client(StatusCode::BAD_REQUEST, "invalid_request", e.to_string());
                g.field = Some("last-event-id".into());
                g
            })?),
            Some(Err(_)) => None,
        };
        let running = info.is_running();
        let mode = match (registry::policy(route.client).resume, last_event_id) {
            // useChat asks on every page load: only a running answer is resumed.
            (Resume::RunningFromStart, _) if !running => return Ok(no_content()),
            (Resume::RunningFromStart, _) => Mode::After(None),
            (_, Some(after)) => Mode::After(Some(after)),
            (_, None) if !running => return Ok(no_content()),
            (Resume::AfterOrFromStart, None) => Mode::After(None),
            (Resume::AfterOrSnapshot, None) => Mode::Snapshot,
        };
        let transport = client_transport(route.client, headers_in);
        self.follow_run(route, info, mode, None, transport, trace)
            .await
    }

    /// Streams a kept run to a client that came back to it: `mode` says
    /// from where; a `reply_to` of the resuming request's own has the run
    /// re-encoded for it (its answers carry that, not the first request's).
    pub(super) async fn follow_run(
        &self,
        route: &Route,
        info: babelgate_store::RunInfo,
        mode: Mode,
        reply_to: Option<serde_json::Value>,
        transport: Transport,
        trace: Trace,
    ) -> Result<Response<Body>, GatewayError> {
        let runs = self.stores.runs.clone();
        let store = &self.routes.load().config.store;
        let (max_followers, max_snapshot_bytes) = (store.max_followers, store.max_snapshot_bytes);
        let Some(slot) = self.followers.enter(max_followers) else {
            self.metrics.rejected("too_many_followers");
            self.metrics
                .stream_refused(&route.path, "too_many_followers");
            return Ok(too_many_followers(max_followers));
        };
        let (last, input) = if mode == Mode::Snapshot {
            let last = runs.last_id(&info.run_id).await.map_err(store_error)?;
            let input = runs.input(&info.run_id).await.map_err(store_error)?;
            (last, input)
        } else {
            (None, Vec::new())
        };
        let mode_name = match mode {
            Mode::After(Some(_)) => "after_id",
            Mode::After(None) => "from_start",
            Mode::Snapshot => "snapshot",
        };
        let replayed = self.metrics.resumed(&route.path, mode_name);
        tracing::info!(run = %info.run_id, ?mode, "resuming");
        trace.resumed(mode_name);
        let (tx, rx) = mpsc::channel::<Bytes>(STREAM_BUFFER_CHUNKS);
        let abort = Arc::new(AtomicBool::new(false));
        let follow = resume::Follow {
            runs,
            run_id: info.run_id,
            dialect: route.client,
            mode,
            last,
            input,
            max_snapshot_bytes,
            slot,
            abort: abort.clone(),
            transport,
            replayed,
            counted: CountAtEnd::new(self.metrics.clone(), &route.path),
            reply_to,
        }
        .run(tx, self.shutdown.clone());
        self.pumps.spawn(
            async move {
                follow.await;
                trace.end_stream(None, 200, 0, 0);
            }
            .instrument(tracing::Span::current()),
        );
        let headers = registry::encoder(route.client, EncodeContext::default()).headers();
        // The follower writes the client's transport itself.
        let mut resp = sse_body(rx, Some(abort), headers, transport);
        resp.extensions_mut().insert(CountedAtEnd);
        Ok(resp)
    }

    /// `POST {path}/{id}/stop`: ends a kept run, wherever it runs.
    /// `conversation` is the caller's scoped id, `id` the one it named.
    pub(super) async fn stop(
        &self,
        route: &Route,
        conversation: &str,
        id: &str,
    ) -> Result<Response<Body>, GatewayError> {
        let runs = &self.stores.runs;
        let info = runs
            .latest(&run_key(&route.path, conversation))
            .await
            .map_err(store_error)?;
        let stopped = match &info {
            Some(i) if i.is_running() => runs.request_stop(&i.run_id).await.map_err(store_error)?,
            _ => false,
        };
        if !stopped {
            return Err(GatewayError::client(
                StatusCode::NOT_FOUND,
                "no_active_run",
                format!("nothing is running for {id}"),
            ));
        }
        Ok(json_response(
            StatusCode::ACCEPTED,
            &json!({"status": "stopping"}),
        ))
    }
}

/// The store could not be reached: our side, and worth a retry.
pub(super) fn store_error(e: StoreError) -> GatewayError {
    // The detail may name the store's host: for the log only.
    tracing::warn!(error = %e, "store request failed");
    GatewayError::store(&e)
}

/// 503 `too_many_followers`: this instance follows as many resumed streams
/// as it may; the client should come back shortly.
fn too_many_followers(max: usize) -> Response<Body> {
    let mut g = GatewayError::internal(format!(
        "this instance already follows {max} resumed streams; retry shortly"
    ));
    g.status = StatusCode::SERVICE_UNAVAILABLE;
    g.code = "too_many_followers";
    let mut resp = g.into_response();
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

fn no_content() -> Response<Body> {
    let mut resp = Response::new(crate::error::full(Bytes::new()));
    *resp.status_mut() = StatusCode::NO_CONTENT;
    resp
}
