//! What a client's request asks of the gateway besides a run, for dialects
//! whose clients address runs the gateway began (get one, follow it again,
//! stop it) through the route they run on, and whose clients read a
//! description of the agent. The request translator classifies a body
//! ([`crate::RequestTranslator::classify`]); the gateway maps the intent onto
//! its run log, resume and stop; the encoder writes the answers
//! ([`crate::Encoder::state_answer`]) and the translator the refusals
//! ([`crate::RequestTranslator::refusal`]) in the dialect's words.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::request::RunRequest;

/// What one client request asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Intent {
    /// A run (the only intent of most dialects); boxed, as it is many
    /// times the other's size.
    Run(Box<RunRequest>),
    /// A run whose client takes its outcome as one answer, not a stream
    /// (a JSON-RPC method that is not a stream): once the run ends, the encoder's
    /// [`crate::Encoder::state_answer`] of it.
    Answer(Box<RunRequest>),
    /// Something about a run the gateway began, named by the run id its
    /// stream carried ([`crate::EncodeContext::run_id`]).
    About {
        run_id: String,
        ask: RunAsk,
        /// What the answer carries back, as [`RunRequest::reply_to`].
        reply_to: Option<Value>,
    },
}

/// What is asked about a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAsk {
    /// Its state as its client was told it so far, in one answer.
    Get,
    /// Its stream again from its start, then live (only while it runs).
    Follow,
    /// Stop it (only while it runs), then its state.
    Stop,
}

/// What is wrong with a refused request, where a dialect's own errors tell
/// these apart (JSON-RPC: parse error, invalid request, method not found,
/// invalid params). The gateway's status and code are the same for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestFault {
    /// Not JSON at all.
    Unreadable,
    /// JSON, but not a request of the dialect.
    #[default]
    Malformed,
    /// A request for something the dialect (or the gateway) does not do.
    UnknownOperation,
    /// A known operation with arguments it cannot take.
    InvalidParams,
    /// An operation of the dialect that the gateway does not offer, named
    /// as the dialect tells such refusals apart (a capability the agent
    /// does not declare, say).
    Unsupported(&'static str),
}

/// A request the gateway refuses before any stream, for the client's dialect
/// to word ([`crate::RequestTranslator::refusal`]).
#[derive(Debug, Clone, Copy)]
pub struct Refusal<'a> {
    /// The gateway's HTTP status for it.
    pub status: u16,
    /// The gateway's code (`invalid_request`, `no_such_run`, ...).
    pub code: &'a str,
    pub message: &'a str,
    /// What the client asked answers to carry (when its request was read
    /// that far).
    pub reply_to: Option<&'a Value>,
    /// Set when the request itself was at fault.
    pub fault: Option<RequestFault>,
}

/// What a route says about the agent behind it, for dialects whose clients
/// read a description before they talk ([`crate::RequestTranslator::describe`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentAbout {
    pub name: String,
    pub description: String,
    pub skills: Vec<Skill>,
    /// The route as its client reaches it (scheme, host, path).
    pub url: String,
    /// The gateway's version.
    pub version: String,
}

/// One thing the agent can do, as configured on the route.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub examples: Vec<String>,
}
