//! The JSON-RPC 2.0 envelope of a client's request, the answers' `id`, and
//! the error objects a refused request gets, as the SDK servers write them
//! (`a2a-sdk`'s JSON-RPC app: standard codes, A2A's own from -32001, HTTP
//! 200 whatever the error, which is where both SDK clients read the code).

use babelgate_core::{Refusal, RequestError, RequestFault};
use serde_json::{json, Value};

/// Which spelling of A2A a request used: its answers come in the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V03,
}

/// A JSON-RPC request, read as far as it goes.
pub struct Envelope<'a> {
    pub id: Option<&'a Value>,
    pub method: &'a str,
    pub params: Option<&'a Value>,
}

/// Reads the envelope of `v`; the errors carry the request's id when it
/// could be read, and the fault JSON-RPC names.
pub fn envelope(v: &Value) -> Result<Envelope<'_>, RequestError> {
    let malformed = |e: RequestError, id: Option<&Value>| {
        e.with_fault(RequestFault::Malformed)
            .replying_to(id.map(|id| reply_to(id, Version::V1)))
    };
    let Some(obj) = v.as_object() else {
        return Err(malformed(
            RequestError::new("a JSON-RPC request must be an object (batches are not taken)"),
            None,
        ));
    };
    // An id that is no string, number or null cannot be answered with.
    let id = obj
        .get("id")
        .filter(|id| id.is_string() || id.is_number() || id.is_null());
    if obj.get("id").is_some() && id.is_none() {
        return Err(malformed(
            RequestError::field("id", "must be a string, a number or null"),
            None,
        ));
    }
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(malformed(
            RequestError::field("jsonrpc", "must be \"2.0\""),
            id,
        ));
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        return Err(malformed(
            RequestError::field("method", "missing, or not a string"),
            id,
        ));
    };
    Ok(Envelope {
        id,
        method,
        params: obj.get("params"),
    })
}

/// What the answers to a request carry back: its id; for a v0.3 request,
/// the id with the version (JSON-RPC ids are never objects, so the two
/// cannot be mistaken).
pub fn reply_to(id: &Value, version: Version) -> Value {
    match version {
        Version::V1 => id.clone(),
        Version::V03 => json!({"id": id, "version": "0.3"}),
    }
}

/// The id and version a `reply_to` holds (`None`: no request, as in
/// `translate`).
pub fn reply_of(reply_to: Option<&Value>) -> (Option<Value>, Version) {
    match reply_to {
        Some(Value::Object(o)) if o.contains_key("version") => (o.get("id").cloned(), Version::V03),
        Some(v) => (Some(v.clone()), Version::V1),
        None => (None, Version::V1),
    }
}

/// JSON-RPC's and A2A's error codes, as the SDKs define them.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const TASK_NOT_FOUND: i64 = -32001;
pub const TASK_NOT_CANCELABLE: i64 = -32002;
pub const UNSUPPORTED_OPERATION: i64 = -32004;

/// The JSON-RPC error a refusal is, and the HTTP status it goes with: 200
/// for what JSON-RPC has a code for (the SDK servers' status, and the only
/// one at which the Python SDK client reads the code rather than the
/// status), the gateway's own status for the rest (auth, limits, the
/// upstream's failures), with an error object all the same.
pub fn refusal(r: &Refusal<'_>) -> (u16, Value) {
    let code = match (r.fault, r.code) {
        (Some(RequestFault::Unreadable), _) => Some(PARSE_ERROR),
        (Some(RequestFault::Malformed), _) => Some(INVALID_REQUEST),
        (Some(RequestFault::UnknownOperation), _) => Some(METHOD_NOT_FOUND),
        (Some(RequestFault::InvalidParams), _) => Some(INVALID_PARAMS),
        (None, "no_such_run") => Some(TASK_NOT_FOUND),
        (None, "run_not_stoppable") => Some(TASK_NOT_CANCELABLE),
        (None, "run_ended" | "resume_disabled") => Some(UNSUPPORTED_OPERATION),
        _ => None,
    };
    let (status, code) = match code {
        Some(c) => (200, c),
        None if r.status < 500 => (r.status, INVALID_REQUEST),
        None => (r.status, INTERNAL_ERROR),
    };
    let (id, _) = reply_of(r.reply_to);
    let body = json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": code, "message": r.message},
    });
    (status, body)
}
