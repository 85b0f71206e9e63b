//! Errors that end a request before its stream starts, each saying whose
//! fault it is. They are turned into an HTTP status with a JSON body in one
//! place ([`GatewayError::into_response`]); after the stream has started the
//! client dialect's own error event is used instead (see `server/pump.rs`).

use babelgate_core::{Refusal, RequestError, RequestFault, RequestTranslator};
use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use serde_json::json;

pub type Body = BoxBody<Bytes, std::io::Error>;

/// Who is to blame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Client,
    Upstream,
    Internal,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Client => "client",
            Fault::Upstream => "upstream",
            Fault::Internal => "internal",
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct GatewayError {
    pub status: StatusCode,
    pub fault: Fault,
    /// A stable machine-readable code, e.g. `invalid_request`.
    pub code: &'static str,
    pub message: String,
    /// The offending request field, when one is to blame.
    pub field: Option<String>,
    /// Seconds for a `retry-after` header, when waiting helps.
    pub retry_after: Option<u64>,
    /// What the request asked its answers to carry, when it was read that
    /// far (a dialect's own refusal carries it: JSON-RPC's `id`); boxed,
    /// to keep the error small.
    pub reply_to: Option<Box<serde_json::Value>>,
    /// What was wrong with the request itself, when it was at fault.
    pub request_fault: Option<RequestFault>,
}

impl GatewayError {
    /// Whose fault, what status and code; the rest set by the callers that need it.
    fn new(status: StatusCode, fault: Fault, code: &'static str, message: String) -> Self {
        GatewayError {
            status,
            fault,
            code,
            message,
            field: None,
            retry_after: None,
            reply_to: None,
            request_fault: None,
        }
    }

    pub fn client(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self::new(status, Fault::Client, code, message.into())
    }

    pub fn upstream(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self::new(status, Fault::Upstream, code, message.into())
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            Fault::Internal,
            "internal",
            message.into(),
        )
    }

    /// A store request failed: 503 `store_unavailable` when the store did
    /// not answer (worth a retry), else 500. The detail may name the store's
    /// host: the caller logs it, the client never sees it.
    pub fn store(e: &babelgate_store::StoreError) -> Self {
        let mut g = GatewayError::internal("the store failed");
        if e.is_unavailable() {
            g.status = StatusCode::SERVICE_UNAVAILABLE;
            g.code = "store_unavailable";
        }
        g
    }

    /// 400 `invalid_request`: a body the client dialect's parser refused.
    pub fn request(e: RequestError) -> Self {
        let mut g = GatewayError::client(StatusCode::BAD_REQUEST, "invalid_request", e.message);
        g.field = e.field;
        g.request_fault = Some(e.fault);
        g.reply_to = e.reply_to;
        g
    }

    /// The answer to carry `reply_to` (the request's, read before it was
    /// refused).
    pub fn replying_to(mut self, reply_to: Option<serde_json::Value>) -> Self {
        self.reply_to = reply_to.map(Box::new);
        self
    }

    /// The response in the client dialect's own words where it has them
    /// (`RequestTranslator::refusal`), else the gateway's JSON error.
    pub fn into_response_for(self, dialect: Option<&dyn RequestTranslator>) -> Response<Body> {
        let refusal = Refusal {
            status: self.status.as_u16(),
            code: self.code,
            message: &self.message,
            reply_to: self.reply_to.as_deref(),
            fault: self.request_fault,
        };
        let Some((status, body)) = dialect.and_then(|d| d.refusal(&refusal)) else {
            return self.into_response();
        };
        let status = StatusCode::from_u16(status).unwrap_or(self.status);
        // The gateway's headers (retry-after, www-authenticate) stay.
        let mut resp = self.into_response();
        *resp.status_mut() = status;
        *resp.body_mut() = full(body.to_string());
        resp
    }

    pub fn into_response(self) -> Response<Body> {
        let mut error = json!({
            "type": self.fault.as_str(),
            "code": self.code,
            "message": self.message,
        });
        if let (Some(f), Some(obj)) = (&self.field, error.as_object_mut()) {
            obj.insert("field".into(), json!(f));
        }
        let mut resp = json_response(self.status, &json!({ "error": error }));
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 6750: say which scheme the route wants.
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

pub fn json_response(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut resp = Response::new(full(value.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

/// Why an upstream's stream failed once it had begun (the response is
/// under way: the client gets its dialect's error event with
/// [`code`](Self::code), not a status). Each transport says which it was;
/// nothing is told apart by its wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamFault {
    /// The connection broke: reset, closed before its end, a WebSocket
    /// closed with a code other than normal. The detail is for the log.
    Connection(String),
    /// The upstream broke its transport's rules: a message of the kind its
    /// subprotocol excludes. The detail is the upstream's, told the client.
    Malformed(String),
}

impl UpstreamFault {
    pub fn code(&self) -> &'static str {
        match self {
            UpstreamFault::Connection(_) => "upstream_disconnected",
            UpstreamFault::Malformed(_) => "upstream_malformed",
        }
    }

    /// What the client's error event says.
    pub fn client_message(&self) -> String {
        match self {
            UpstreamFault::Connection(_) => "the upstream connection failed".to_string(),
            UpstreamFault::Malformed(why) => format!("the upstream's stream is malformed: {why}"),
        }
    }
}
