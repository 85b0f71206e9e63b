//! The three traits every dialect adapter implements.
//!
//! A decoder maps SSE [`Frame`]s (the shared framer cuts the bytes) to core
//! [`Event`]s; an encoder maps core events to the client's bytes; a request
//! translator moves run requests between the dialect's body and [`RunRequest`].
//! Adapters know this crate, never each other.

use crate::dialect::Dialect;
use crate::event::Event;
use crate::ids::{Clock, IdGen};
use crate::intent::{AgentAbout, Intent, Refusal, RequestFault};
use crate::request::{Continued, RunRequest};
use crate::sink::{Framing, Sink};
use crate::sse::Frame;

/// Upstream bytes (already framed) to core events.
pub trait Decoder: Send {
    fn dialect(&self) -> Dialect;

    /// Maps one frame; may emit zero or more events (shorthand dialects emit
    /// the starts they imply). An unknown event type is not an error: it
    /// becomes `EventKind::Unknown`. Malformed JSON or a missing required
    /// field is.
    fn decode(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError>;

    /// Maps one message of the dialect's binary transport (`Policy::binary`:
    /// one event per length-delimited message, see [`crate::length`]) as
    /// [`decode`](Self::decode) maps a frame. Only dialects with a binary
    /// form override it.
    fn decode_binary(&mut self, message: &[u8], out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let _ = (message, out);
        Err(DecodeError::new("this dialect has no binary form"))
    }

    /// The input ended. Emit what the dialect implies at its end (an AG-Kit
    /// `[DONE]` ends the run), never error for a mere early end: the encoder's
    /// `finish` closes what is open.
    fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let _ = out;
        Ok(())
    }
}

/// Core events to client bytes.
pub trait Encoder: Send {
    fn dialect(&self) -> Dialect;

    /// Writes the client's events for one event into `sink` (possibly none,
    /// possibly several, e.g. synthesized starts): each one's body only
    /// ([`Sink::event`], [`Sink::json`]...: JSON text, or the protobuf
    /// message in the binary form), which the sink frames in its
    /// transport's framing and records as one span.
    fn encode_to(&mut self, event: &Event, sink: &mut Sink);

    /// Closes whatever is still open (a text message, a tool call, the run)
    /// and writes the dialect's end marker, so the output is well formed even
    /// when the input ended early. Idempotent.
    fn finish_to(&mut self, sink: &mut Sink);

    /// Reports a failure after the response has started, in the dialect's own
    /// words (AG-UI `RUN_ERROR`, Vercel `error` chunk...), then finishes.
    fn fail_to(&mut self, message: &str, code: Option<&str>, sink: &mut Sink) {
        let ev = Event::new(crate::event::EventKind::RunError {
            message: message.to_string(),
            code: code.map(str::to_string),
        });
        self.encode_to(&ev, sink);
        self.finish_to(sink);
    }

    /// [`encode_to`](Self::encode_to), appending to a plain buffer (benches,
    /// fuzz, the CLI), framed as a byte stream of its form
    /// (length-delimited in the binary form, else SSE). An override must
    /// write the same bytes.
    fn encode(&mut self, event: &Event, out: &mut Vec<u8>) {
        Sink::appending(out, Framing::stream(self.writes_binary()), |sink| {
            self.encode_to(event, sink)
        });
    }

    /// [`finish_to`](Self::finish_to), appending to a plain buffer.
    fn finish(&mut self, out: &mut Vec<u8>) {
        Sink::appending(out, Framing::stream(self.writes_binary()), |sink| {
            self.finish_to(sink)
        });
    }

    /// [`fail_to`](Self::fail_to), appending to a plain buffer.
    fn fail(&mut self, message: &str, code: Option<&str>, out: &mut Vec<u8>) {
        Sink::appending(out, Framing::stream(self.writes_binary()), |sink| {
            self.fail_to(message, code, sink)
        });
    }

    /// On a same-dialect route (see `Translator::same_dialect`), whether
    /// the frame `event` was read from may be written as received in place
    /// of this encoder's mapping of it, asked before the event is encoded
    /// (and only when the shape stage passes it unchanged). An encoder says
    /// no where its dialect's real client reads the frame otherwise than the
    /// encoder's own state says (an `ai` client fails on an unknown chunk
    /// type that the encoder wraps); the frame is then written as mapped.
    fn verbatim(&self, event: &Event) -> bool {
        let _ = event;
        true
    }

    /// Events this encoder dropped because its client's dialect has no frame
    /// for them (and no fallback is enabled), for metrics.
    fn dropped(&self) -> u64 {
        0
    }

    /// Whether it writes the dialect's binary form
    /// (`EncodeContext::binary`): a same-dialect route writes an upstream
    /// frame as received only when it came in the form the encoder writes.
    fn writes_binary(&self) -> bool {
        false
    }

    /// Events this encoder dropped because the binary form
    /// (`EncodeContext::binary`) has no message for them, for metrics.
    fn unframed(&self) -> u64 {
        0
    }

    /// Whether the stream ended in a failure that this dialect's clients see
    /// only when the body breaks off (the legacy AG-Kit client ignores error
    /// frames): the caller then ends the body with a transport error rather
    /// than cleanly, and `translate` exits non-zero.
    fn aborts(&self) -> bool {
        false
    }

    /// Response headers besides `content-type: text/event-stream` that the
    /// dialect's clients expect.
    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The run as this encoder has told its client so far (the events it
    /// was given), as the JSON body of one answer to a request about it
    /// ([`crate::intent::RunAsk::Get`], `Stop`). `None`: the dialect has no
    /// such answer.
    fn state_answer(&self) -> Option<serde_json::Value> {
        None
    }

    /// The time (ms since the epoch) to stamp what follows with, where an
    /// event has none, until set again: a stream replayed from its record
    /// (the gateway's run log) is stamped with the times it had live.
    /// Only encoders that stamp from their clock (`Policy::clock_timestamps`)
    /// need it.
    fn set_now(&mut self, _ms: i64) {}
}

/// Moves run requests between a dialect's body and the neutral form.
pub trait RequestTranslator: Send + Sync {
    fn dialect(&self) -> Dialect;

    /// Parses a client request body of this dialect.
    fn parse_request(&self, body: &[u8]) -> Result<RunRequest, RequestError>;

    /// What a client request body asks for: a run, or (dialects whose
    /// clients address runs by id) something about a run.
    fn classify(&self, body: &[u8]) -> Result<Intent, RequestError> {
        self.parse_request(body).map(|r| Intent::Run(Box::new(r)))
    }

    /// The dialect's own answer to a request refused before any stream
    /// (status and JSON body), in place of the gateway's JSON error; `None`:
    /// the gateway's.
    fn refusal(&self, refusal: &Refusal<'_>) -> Option<(u16, serde_json::Value)> {
        let _ = refusal;
        None
    }

    /// The document that describes the agent to this dialect's clients;
    /// `None`: the dialect has none.
    fn describe(&self, about: &AgentAbout) -> Option<serde_json::Value> {
        let _ = about;
        None
    }

    /// Where below a route the description ([`Self::describe`]) is asked
    /// for (`GET {path}{suffix}`).
    fn description_path(&self) -> Option<&'static str> {
        None
    }

    /// Builds the JSON body an upstream of this dialect expects.
    fn build_request(&self, request: &RunRequest) -> Result<serde_json::Value, RequestError>;

    /// How an upstream of this dialect is asked to stop a run it is
    /// running, for dialects where leaving the stream does not stop it: a
    /// function from the id the upstream's stream named the run by
    /// ([`Translator::upstream_run_id`](crate::Translator::upstream_run_id))
    /// to the JSON body posted to the route's upstream URL, with the
    /// run's request headers. `None`: closing the stream stops the run.
    fn stop_request(&self) -> Option<fn(&str) -> serde_json::Value> {
        None
    }

    /// Request headers an upstream of this dialect requires besides the
    /// body's content type (a protocol version, say), sent after the
    /// route's own.
    fn upstream_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
}

/// What an encoder may need beyond the events: ids and time it must
/// synthesize, and what the request already fixed.
#[derive(Debug, Clone, Default)]
pub struct EncodeContext {
    pub ids: IdGen,
    pub clock: Clock,
    /// The thread and run the gateway is serving (AG-UI `RUN_STARTED` needs
    /// them even when the upstream dialect has none).
    pub thread_id: Option<String>,
    pub run_id: Option<String>,
    /// The assistant message being continued (Vercel after a front-end tool),
    /// which the client expects in `start.messageId`.
    pub message_id: Option<String>,
    /// What that message holds already (see [`Continued`]).
    pub continued: Continued,
    /// What the client's request asked its answers to carry back
    /// ([`RunRequest::reply_to`]).
    pub reply_to: Option<serde_json::Value>,
    /// Write the dialect's binary form (`Policy::binary`): each event's body
    /// an AG-UI protobuf message instead of JSON text (the sink frames it).
    pub binary: bool,
    /// Write extension frames for what the client's dialect has no frame for
    /// (AG-Kit: reasoning, steps, state...), where the dialect has them;
    /// off, such events are dropped and counted (`Encoder::dropped`).
    pub extension_frames: bool,
    /// Leave out `Raw` events (an upstream's own events, which AG-UI servers
    /// such as ag-ui-langgraph send by default, often many times the size of
    /// the content), on every route.
    pub drop_raw: bool,
}

impl EncodeContext {
    /// Deterministic ids and a fixed clock, for tests and golden files.
    pub fn deterministic() -> Self {
        EncodeContext {
            ids: IdGen::sequential(),
            clock: Clock::Fixed(1_700_000_000_000),
            ..Default::default()
        }
    }
}

/// A frame the decoder could not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct DecodeError {
    pub message: String,
    /// Where the frame started in the input (filled in by the translator).
    pub line: u64,
}

impl DecodeError {
    pub fn new(message: impl Into<String>) -> Self {
        DecodeError {
            message: message.into(),
            line: 0,
        }
    }

    /// Invalid JSON in a frame.
    pub fn json(err: &serde_json::Error) -> Self {
        DecodeError::new(format!("invalid JSON: {err}"))
    }

    /// A required field is missing or has the wrong type.
    pub fn field(event_type: &str, field: &str) -> Self {
        DecodeError::new(format!("{event_type}: missing or invalid field `{field}`"))
    }
}

/// A client request that cannot be served (a 400 before any stream starts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    /// The JSON path of the offending field, when one is to blame.
    pub field: Option<String>,
    pub message: String,
    /// What kind of fault, for dialects whose errors tell them apart.
    pub fault: RequestFault,
    /// What the request asked answers to carry, when it was read that far
    /// (the refusal carries it too: [`Refusal::reply_to`]); boxed, so that
    /// the error stays small beside what a parse returns.
    pub reply_to: Option<Box<serde_json::Value>>,
}

impl RequestError {
    pub fn new(message: impl Into<String>) -> Self {
        RequestError {
            field: None,
            message: message.into(),
            fault: RequestFault::default(),
            reply_to: None,
        }
    }

    pub fn field(path: impl Into<String>, message: impl Into<String>) -> Self {
        let path = path.into();
        RequestError {
            message: format!("`{path}`: {}", message.into()),
            field: Some(path),
            fault: RequestFault::default(),
            reply_to: None,
        }
    }

    pub fn with_fault(mut self, fault: RequestFault) -> Self {
        self.fault = fault;
        self
    }

    pub fn replying_to(mut self, reply_to: Option<serde_json::Value>) -> Self {
        self.reply_to = reply_to.map(Box::new);
        self
    }
}
