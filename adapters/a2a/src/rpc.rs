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

/// `reply_to` in its object form, with `key` set to `value`: what else the
/// answers need to know of the request (`historyLength`; `send`: the
/// answer is `SendMessage`'s).
pub fn with(reply_to: Value, key: &str, value: Value) -> Value {
    let mut o = match reply_to {
        Value::Object(o) => o,
        id => {
            let mut o = serde_json::Map::new();
            o.insert("id".into(), id);
            o.insert("version".into(), json!("1.0"));
            o
        }
    };
    o.insert(key.into(), value);
    Value::Object(o)
}

/// Whether `reply_to` is a `SendMessage`'s (see [`with`]), whose v1.0
/// answer is `{"task": ...}`.
pub fn is_send(reply_to: Option<&Value>) -> bool {
    reply_to.and_then(|r| r.get("send")) == Some(&Value::Bool(true))
}

/// The id and version a `reply_to` holds (`None`: no request, as in
/// `translate`).
pub fn reply_of(reply_to: Option<&Value>) -> (Option<Value>, Version) {
    match reply_to {
        Some(Value::Object(o)) if o.contains_key("version") => {
            let version = match o.get("version").and_then(Value::as_str) {
                Some("0.3") => Version::V03,
                _ => Version::V1,
            };
            (o.get("id").cloned(), version)
        }
        Some(v) => (Some(v.clone()), Version::V1),
        None => (None, Version::V1),
    }
}

/// The history length a `reply_to` holds (see [`with`]).
pub fn history_length(reply_to: Option<&Value>) -> Option<u64> {
    reply_to?.get("historyLength")?.as_u64()
}

/// A request's `historyLength` (at `at`, its JSON path): absent or null is
/// none, else a non-negative integer.
pub fn read_history_length(v: Option<&Value>, at: &str) -> Result<Option<u64>, RequestError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| RequestError::field(at, "must be a non-negative integer")),
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
pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
/// What [`RequestFault::Unsupported`] names for the push notification
/// methods (the card declares no push notifications).
pub const NO_PUSH: &str = "push_notifications";

/// The JSON-RPC error a refusal is, and the HTTP status it goes with: 200
/// for what JSON-RPC has a code for (the SDK servers' status, and the only
/// one at which the Python SDK client reads the code rather than the
/// status), the gateway's own status for the client's faults it has no
/// code for (auth, limits), with an error object all the same; the
/// gateway's and the upstream's failures are JSON-RPC internal errors at
/// 200, as the SDK servers answer theirs (a client raises the error, not
/// an HTTP failure).
pub fn refusal(r: &Refusal<'_>) -> (u16, Value) {
    let code = match (r.fault, r.code) {
        (Some(RequestFault::Unreadable), _) => Some(PARSE_ERROR),
        (Some(RequestFault::Malformed), _) => Some(INVALID_REQUEST),
        (Some(RequestFault::UnknownOperation), _) => Some(METHOD_NOT_FOUND),
        (Some(RequestFault::InvalidParams), _) => Some(INVALID_PARAMS),
        (Some(RequestFault::Unsupported(NO_PUSH)), _) => Some(PUSH_NOTIFICATION_NOT_SUPPORTED),
        (Some(RequestFault::Unsupported(_)), _) => Some(UNSUPPORTED_OPERATION),
        (None, "no_such_run") => Some(TASK_NOT_FOUND),
        (None, "run_not_stoppable") => Some(TASK_NOT_CANCELABLE),
        (None, "run_ended" | "resume_disabled") => Some(UNSUPPORTED_OPERATION),
        _ => None,
    };
    let (status, code) = match code {
        Some(c) => (200, c),
        None if r.status < 500 => (r.status, INVALID_REQUEST),
        None => (200, INTERNAL_ERROR),
    };
    let (id, _) = reply_of(r.reply_to);
    let body = json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": code, "message": r.message},
    });
    (status, body)
}
