//! Transports, independent of dialects as framing is of format: SSE, and
//! AG-UI's binary transport (`application/vnd.ag-ui.event+proto`, each event
//! an `ag_ui.Event` message behind a 4-byte big-endian length) for the
//! dialects whose policy allows it (`Policy::binary`).
//!
//! A translator reads the upstream's transport itself (its framer: SSE or
//! length-delimited; the decoder maps a frame or a message) and its encoder
//! writes the client's (`EncodeContext::binary`): events go between core
//! events and protobuf directly, never through JSON text. [`translator`]
//! decides that for every stream, live or offline, same-dialect routes
//! included. The converters here ([`SseToProto`], [`ProtoToSse`]) remain for
//! what has no event in between: a resumed run logged in the other
//! transport.

use babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES;
use babelgate_core::{Frame, Policy, SseFramer};
use babelgate_proto::{FramingError, ProtoFramer};

/// The binary transport's media type.
pub const PROTO: &str = babelgate_proto::MEDIA_TYPE;
const SSE: &str = "text/event-stream";

/// A stream's transport as a client or an upstream gets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Sse,
    /// AG-UI's protobuf events; the prefix of the dialect's own events
    /// (`Policy::binary_custom_prefix`).
    Proto(Option<&'static str>),
}

impl Transport {
    /// The binary transport for a dialect whose policy has it.
    pub fn proto_for(policy: &Policy) -> Option<Transport> {
        policy
            .binary
            .then_some(Transport::Proto(policy.binary_custom_prefix))
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Transport::Sse => SSE,
            Transport::Proto(_) => PROTO,
        }
    }
}

/// A translator from an upstream speaking `from` over `upstream` to a client
/// of `to` over `client`: it reads the one and writes the other itself.
pub fn translator(
    from: babelgate_core::Dialect,
    to: babelgate_core::Dialect,
    mut ctx: babelgate_core::EncodeContext,
    max_event_bytes: usize,
    upstream: Transport,
    client: Transport,
) -> babelgate_core::Translator {
    ctx.binary = matches!(client, Transport::Proto(_));
    // For the run log: a follower builds its encoder as this one was.
    let setup = babelgate_core::journal::Setup::of(&ctx);
    let mut t = crate::registry::translator(from, to, ctx, max_event_bytes);
    t.note_setup(setup);
    if matches!(upstream, Transport::Proto(_)) {
        t = t.with_binary_input(max_event_bytes);
    }
    if upstream != client {
        // An upstream frame is not in the client's form: all is mapped.
        t.map_all();
    }
    t
}

/// The transport a client asks for with `accept`: binary when its dialect
/// allows it and the client prefers it to SSE (a higher q-value, or the same
/// and listed first); SSE otherwise, also when nothing is said.
pub fn negotiate(accept: Option<&str>, policy: &Policy) -> Transport {
    let (Some(accept), Some(proto)) = (accept, Transport::proto_for(policy)) else {
        return Transport::Sse;
    };
    // (q, position) of each media type's first listing.
    let mut proto_q: Option<(f32, usize)> = None;
    let mut sse_q: Option<(f32, usize)> = None;
    for (pos, item) in accept.split(',').enumerate() {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim();
        let mut q = 1.0f32;
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    q = v
                        .trim()
                        .parse::<f32>()
                        .ok()
                        .filter(|q| q.is_finite())
                        .unwrap_or(0.0);
                }
            }
        }
        let slot = if media.eq_ignore_ascii_case(PROTO) {
            &mut proto_q
        } else if media.eq_ignore_ascii_case(SSE) {
            &mut sse_q
        } else {
            continue;
        };
        slot.get_or_insert((q, pos));
    }
    match (proto_q, sse_q) {
        (Some((pq, _)), None) if pq > 0.0 => proto,
        (Some((pq, ppos)), Some((sq, spos)))
            if pq > 0.0 && (pq > sq || (pq == sq && ppos < spos)) =>
        {
            proto
        }
        _ => Transport::Sse,
    }
}

/// The `Accept` an upstream is sent, by the route's `upstream_transport`.
pub fn upstream_accept(transport: crate::config::UpstreamTransport) -> &'static str {
    use crate::config::UpstreamTransport as U;
    match transport {
        U::Sse => SSE,
        U::Proto => "application/vnd.ag-ui.event+proto",
        U::Auto => "application/vnd.ag-ui.event+proto, text/event-stream;q=0.5",
    }
}

/// Whether a response's content type is the binary transport.
pub fn is_proto(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(PROTO))
}

/// A client's side: the SSE an encoder wrote (with the gateway's `id:`
/// lines and heartbeat comments) as length-prefixed protobuf events. Ids and
/// comments have no place in the binary form and are dropped; so is an
/// event the schema cannot carry (logged and counted: an upstream's value
/// the encoders pass on, such as a patch op JSON Patch lacks).
pub struct SseToProto {
    framer: SseFramer,
    frames: Vec<Frame>,
    prefix: Option<&'static str>,
    /// Events dropped for want of a binary form, for the metrics.
    dropped: u64,
}

impl SseToProto {
    pub fn new(prefix: Option<&'static str>) -> Self {
        SseToProto {
            // Encoders write events no larger than this (their own limit).
            framer: SseFramer::new(DEFAULT_MAX_EVENT_BYTES),
            frames: Vec::new(),
            prefix,
            dropped: 0,
        }
    }

    /// How many events so far had no binary form (dropped).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Appends the frames of the events completed by `sse` to `out`.
    pub fn push(&mut self, sse: &[u8], out: &mut Vec<u8>) {
        if let Err(e) = self.framer.push(sse, &mut self.frames) {
            tracing::error!(error = %e, "the gateway's own SSE did not frame");
        }
        for frame in self.frames.drain(..) {
            if frame.data.is_empty() || frame.is_done() {
                continue;
            }
            // Most of a stream (deltas, starts, ends) goes without a JSON
            // value in between; the same bytes as below.
            if babelgate_proto::write_flat_event_json(out, &frame.data) {
                continue;
            }
            let event = match serde_json::from_str(&frame.data) {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(error = %e, "an encoder wrote an event that is not JSON");
                    continue;
                }
            };
            match babelgate_proto::encode_event_as(&event, self.prefix) {
                Ok(message) => {
                    // Within u32: the framer caps events far below 4 GiB.
                    let _ = babelgate_proto::write_frame(out, &message);
                }
                Err(e) => {
                    self.dropped += 1;
                    tracing::warn!(error = %e, "an event with no binary form was dropped");
                }
            }
        }
    }
}

/// An upstream's side: length-prefixed protobuf events as SSE
/// (`data: <json>\n\n`) for the upstream dialect's decoder, so that the rest
/// of the pipeline does not know the transport.
pub struct ProtoToSse {
    framer: ProtoFramer,
    messages: Vec<Vec<u8>>,
    prefix: Option<&'static str>,
}

/// Why a binary stream could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error(transparent)]
    Framing(#[from] FramingError),
    #[error("a message that does not decode: {0}")]
    Event(babelgate_proto::Error),
}

impl ProtoToSse {
    pub fn new(prefix: Option<&'static str>) -> Self {
        ProtoToSse {
            framer: ProtoFramer::default(),
            messages: Vec::new(),
            prefix,
        }
    }

    pub fn with_limit(mut self, max_message_bytes: usize) -> Self {
        self.framer = ProtoFramer::new(max_message_bytes);
        self
    }

    /// Appends the SSE of the messages completed by `bytes` to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), ProtoError> {
        let r = self.framer.push(bytes, &mut self.messages);
        for message in self.messages.drain(..) {
            let event = babelgate_proto::decode_event_as(&message, self.prefix)
                .map_err(ProtoError::Event)?;
            babelgate_core::sse::write_json(out, &event);
        }
        Ok(r?)
    }

    /// The input ended: an error if it ended inside a message.
    pub fn finish(&mut self) -> Result<(), ProtoError> {
        Ok(self.framer.finish()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(binary: bool) -> Policy {
        Policy {
            gateway_keeps_history: false,
            upstream_keeps_history: false,
            resume: babelgate_core::Resume::AfterOrSnapshot,
            extension_frames: false,
            binary,
            binary_custom_prefix: None,
            clock_timestamps: false,
        }
    }

    #[test]
    fn negotiation() {
        let p = policy(true);
        let proto = Transport::Proto(None);
        for (accept, want) in [
            (None, Transport::Sse),
            (Some("text/event-stream"), Transport::Sse),
            (Some("*/*"), Transport::Sse),
            (Some("application/vnd.ag-ui.event+proto"), proto),
            (Some("Application/VND.ag-ui.event+proto; charset=x"), proto),
            (
                Some("application/vnd.ag-ui.event+proto, text/event-stream"),
                proto,
            ),
            (
                Some("text/event-stream, application/vnd.ag-ui.event+proto"),
                Transport::Sse,
            ),
            (
                Some("text/event-stream;q=0.5, application/vnd.ag-ui.event+proto"),
                proto,
            ),
            (
                Some("application/vnd.ag-ui.event+proto;q=0.4, text/event-stream"),
                Transport::Sse,
            ),
            (
                Some("application/vnd.ag-ui.event+proto;q=0"),
                Transport::Sse,
            ),
            (
                Some("application/vnd.ag-ui.event+proto;q=nan"),
                Transport::Sse,
            ),
        ] {
            assert_eq!(negotiate(accept, &p), want, "{accept:?}");
        }
        // A dialect without the binary transport always gets SSE.
        assert_eq!(
            negotiate(Some("application/vnd.ag-ui.event+proto"), &policy(false)),
            Transport::Sse
        );
    }

    #[test]
    fn sse_to_proto_exact_bytes() {
        let mut t = SseToProto::new(None);
        let mut out = Vec::new();
        // An id line, a heartbeat, an event cut in two pushes.
        t.push(b"id: 1-0\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n: ping\n\ndata: {\"type\":\"RUN_", &mut out);
        t.push(
            b"FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
            &mut out,
        );
        let mut want = Vec::new();
        // Per proto/events.proto: TEXT_MESSAGE_CONTENT is EventType 1 and
        // oneof arm 2 (base_event {type}, message_id, delta); RUN_FINISHED
        // is EventType 12, arm 13.
        let content = [
            0x12, 0x0b, 0x0a, 0x02, 0x08, 0x01, 0x12, 0x01, b'm', 0x1a, 0x02, b'h', b'i',
        ];
        want.extend_from_slice(&(content.len() as u32).to_be_bytes());
        want.extend_from_slice(&content);
        let finished = [
            0x6a, 0x0a, 0x0a, 0x02, 0x08, 0x0c, 0x12, 0x01, b't', 0x1a, 0x01, b'r',
        ];
        want.extend_from_slice(&(finished.len() as u32).to_be_bytes());
        want.extend_from_slice(&finished);
        assert_eq!(out, want);
        // And back.
        let mut back = Vec::new();
        let mut r = ProtoToSse::new(None);
        r.push(&out, &mut back).unwrap();
        r.finish().unwrap();
        assert_eq!(
            String::from_utf8(back).unwrap(),
            // Keys in the order the reference's decoder gives them.
            "data: {\"messageId\":\"m\",\"delta\":\"hi\",\"type\":\"TEXT_MESSAGE_CONTENT\"}\n\n\
             data: {\"threadId\":\"t\",\"runId\":\"r\",\"type\":\"RUN_FINISHED\"}\n\n"
        );
    }

    #[test]
    fn events_with_no_binary_form_are_dropped_and_counted() {
        let mut t = SseToProto::new(None);
        let mut out = Vec::new();
        // A JSON Patch op the schema has no value for, a type it lacks, and
        // between them one that converts.
        t.push(
            b"data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"frob\",\"path\":\"/a\"}]}\n\n\
              data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
              data: {\"type\":\"NOT_AN_AG_UI_EVENT\"}\n\n",
            &mut out,
        );
        assert_eq!(t.dropped(), 2);
        let mut back = Vec::new();
        ProtoToSse::new(None).push(&out, &mut back).unwrap();
        let back = String::from_utf8(back).unwrap();
        assert_eq!(back.matches("data: ").count(), 1, "{back}");
        assert!(back.contains("RUN_FINISHED"));
    }

    #[test]
    fn bad_binary_input_is_an_error() {
        let mut out = Vec::new();
        // A prefix over the limit.
        let mut r = ProtoToSse::new(None).with_limit(16);
        assert!(r.push(&[0, 0, 0, 17], &mut out).is_err());
        // A truncated message.
        let mut r = ProtoToSse::new(None);
        r.push(&[0, 0, 0, 5, 1, 2], &mut out).unwrap();
        assert!(r.finish().is_err());
        // A message that does not decode.
        let mut r = ProtoToSse::new(None);
        assert!(r.push(&[0, 0, 0, 2, 0xff, 0xff], &mut out).is_err());
        assert!(out.is_empty());
    }
}
