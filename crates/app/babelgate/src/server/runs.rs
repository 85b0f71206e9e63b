//! Requests about a run the gateway began, named by its id, which the
//! client dialect's request translator tells from a run
//! (`Intent::About`): its state so far (from the run log), its stream again
//! (resume), or a stop (across instances, as `POST {path}/{id}/stop`), each
//! answered in the dialect's words (`Encoder::state_answer`, and the
//! translator's refusals); and the description of the agent that a
//! dialect's clients read at `GET {path}{description_path}`.

use std::time::Duration;

use babelgate_core::{AgentAbout, RunAsk};
use babelgate_store::{run_key, RunInfo};
use http::{Method, Response, StatusCode};

use super::follow::store_error;
use super::Gateway;
use crate::access::Caller;
use crate::config::{Config, Route};
use crate::error::{json_response, Body, GatewayError};
use crate::registry;
use crate::resume::{self, Mode, Upto};
use crate::telemetry::Trace;
use crate::transport::Transport;

/// A request about run `run_id` of `route`.
pub(super) struct About<'a> {
    pub route: &'a Route,
    pub caller: &'a Caller,
    pub run_id: &'a str,
    pub ask: RunAsk,
    pub reply_to: Option<serde_json::Value>,
}

/// How long a stop waits for the run to end before it answers with the run
/// as it stands (the run's owner may be another instance).
const STOP_WAIT: Duration = Duration::from_secs(10);
/// How long a state answer may read the log.
const READ_WAIT: Duration = Duration::from_secs(10);

impl Gateway {
    pub(super) async fn about_run(
        &self,
        about: About<'_>,
        transport: Transport,
        trace: Trace,
    ) -> Result<Response<Body>, GatewayError> {
        let route = about.route;
        if !route.resume {
            return Err(GatewayError::client(
                StatusCode::NOT_FOUND,
                "resume_disabled",
                format!(
                    "the route {} keeps no run log (resume = false): its runs cannot be looked up",
                    route.path
                ),
            ));
        }
        let info = self.run_named(route, about.caller, about.run_id).await?;
        let runs = &self.stores.runs;
        let upto = match about.ask {
            RunAsk::Follow => {
                if !info.is_running() {
                    return Err(GatewayError::client(
                        StatusCode::CONFLICT,
                        "run_ended",
                        format!(
                            "run {} has ended: there is no stream to follow",
                            about.run_id
                        ),
                    ));
                }
                return self
                    .follow_run(
                        route,
                        info,
                        Mode::After(None),
                        about.reply_to,
                        transport,
                        trace,
                    )
                    .await;
            }
            RunAsk::Get if info.is_running() => {
                Upto::Entry(runs.last_id(&info.run_id).await.map_err(store_error)?)
            }
            RunAsk::Get => Upto::End,
            RunAsk::Stop => {
                let stopped = info.is_running()
                    && runs.request_stop(&info.run_id).await.map_err(store_error)?;
                if !stopped {
                    return Err(GatewayError::client(
                        StatusCode::CONFLICT,
                        "run_not_stoppable",
                        format!("run {} has ended: it cannot be stopped", about.run_id),
                    ));
                }
                Upto::End
            }
        };
        let within = if about.ask == RunAsk::Stop {
            STOP_WAIT
        } else {
            READ_WAIT
        };
        let answer = resume::state_answer(
            runs,
            &info.run_id,
            route.client,
            about.reply_to,
            upto,
            within,
        )
        .await
        .map_err(store_error)?;
        match answer {
            Some(body) => Ok(json_response(StatusCode::OK, &body)),
            None => Err(GatewayError::internal(
                "the client dialect has no answer about a run",
            )),
        }
    }

    /// The run `id` names, when it is one of this caller's on this route;
    /// else 404 `no_such_run`, as for an id that never was (another
    /// caller's run is not told apart from none).
    async fn run_named(
        &self,
        route: &Route,
        caller: &Caller,
        id: &str,
    ) -> Result<RunInfo, GatewayError> {
        let not_found = || {
            GatewayError::client(
                StatusCode::NOT_FOUND,
                "no_such_run",
                format!("no run {id} of yours is kept on this route"),
            )
        };
        // Only an id the store could have minted is looked up.
        let minted_form = id.len() <= 64
            && !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'.');
        if !minted_form {
            return Err(not_found());
        }
        let info = self
            .stores
            .runs
            .info(id)
            .await
            .map_err(store_error)?
            .ok_or_else(not_found)?;
        // The run's key is the route's and this caller's (see `Caller::scoped`).
        let mine = run_key(&route.path, &caller.scoped(""));
        if !info.key.starts_with(&mine) {
            return Err(not_found());
        }
        Ok(info)
    }
}

/// The route whose description `path` asks for, when its client dialect
/// has one.
pub(super) fn described<'a>(config: &'a Config, path: &str) -> Option<&'a Route> {
    config.routes.iter().find(|r| {
        registry::requests(r.client)
            .description_path()
            .and_then(|suffix| path.strip_suffix(suffix))
            // A route at `/` has its description at the root's.
            .is_some_and(|base| base == r.path.trim_end_matches('/'))
    })
}

/// `GET {path}{description_path}`: the agent as the route describes it,
/// with the route's URL as its client reaches it (`origin`: see
/// `host::origin`). Public, as the clients read it before they talk.
pub(super) fn describe(
    route: &Route,
    method: &Method,
    origin: Option<String>,
) -> Result<Response<Body>, GatewayError> {
    if method != Method::GET && method != Method::HEAD {
        return Err(GatewayError::client(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("{method}: the agent's description takes GET"),
        ));
    }
    let Some(origin) = origin else {
        return Err(GatewayError::client(
            StatusCode::BAD_REQUEST,
            "invalid_host",
            "the request names no host to describe the route at",
        ));
    };
    let about = AgentAbout {
        url: format!("{origin}{}", route.path),
        version: env!("CARGO_PKG_VERSION").to_string(),
        ..route.agent.clone()
    };
    match registry::requests(route.client).describe(&about) {
        Some(card) => Ok(json_response(StatusCode::OK, &card)),
        None => Err(GatewayError::internal(
            "the client dialect has no description",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_is_below_its_route_a_root_route_s_at_the_root() {
        let route = |path: &str| {
            format!("[[routes]]\npath = \"{path}\"\nclient = \"a2a\"\nupstream = \"http://127.0.0.1:9/\"\nupstream_protocol = \"ag-ui\"\n")
        };
        let config = Config::parse(&(route("/") + &route("/a2a"))).unwrap();
        let card = "/.well-known/agent-card.json";
        let found = |p: &str| described(&config, p).map(|r| r.path.as_str());
        assert_eq!(found(card), Some("/"));
        assert_eq!(found(&format!("/a2a{card}")), Some("/a2a"));
        assert_eq!(found(&format!("/b{card}")), None);
    }
}
