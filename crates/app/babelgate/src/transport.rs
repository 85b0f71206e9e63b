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
//! included, and a resumed run's, made again from its record in the
//! resuming client's transport (`resume.rs`). No byte of one transport is
//! converted into the other.

use babelgate_core::{Framing, Policy};
use bytes::Bytes;

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

/// One read of an upstream, in its transport's framing: the translator's
/// framer cuts a byte stream's events; a message transport's messages are
/// events whole (one frame each, no framer).
#[derive(Debug, Clone)]
pub enum Read {
    /// Bytes of SSE or of the length-delimited binary transport.
    Bytes(Bytes),
    /// Messages of a WebSocket, text or binary as the subprotocol says.
    Messages(Vec<Bytes>),
}

impl Read {
    /// Bytes read.
    pub fn len(&self) -> usize {
        match self {
            Read::Bytes(b) => b.len(),
            Read::Messages(m) => m.iter().map(Bytes::len).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands the read to the translator, which stops at the first error.
    pub fn push_to(
        &self,
        t: &mut babelgate_core::Translator,
        out: &mut babelgate_core::Sink,
    ) -> Result<(), babelgate_core::TranslateError> {
        match self {
            Read::Bytes(b) => t.push_to(b, out),
            Read::Messages(m) => m.iter().try_for_each(|m| t.push_message_to(m, out)),
        }
    }

    /// The read as its byte stream would carry it (SSE events, or messages
    /// behind length prefixes when `binary`): what a capture keeps, for a
    /// replay (`babelgate translate`) to read with the framers.
    pub fn to_stream(&self, binary: bool) -> std::borrow::Cow<'_, [u8]> {
        match self {
            Read::Bytes(b) => std::borrow::Cow::Borrowed(b),
            Read::Messages(m) => {
                let mut out = Vec::new();
                for m in m {
                    Framing::stream(binary).write(&mut out, m);
                }
                std::borrow::Cow::Owned(out)
            }
        }
    }
}

/// A translator from an upstream speaking `from` over `upstream` to a client
/// of `to` over `client`: it reads the one and writes the other itself
/// (each event a message of its own when `client_messages`: a WebSocket
/// session).
pub fn translator(
    from: babelgate_core::Dialect,
    to: babelgate_core::Dialect,
    mut ctx: babelgate_core::EncodeContext,
    max_event_bytes: usize,
    upstream: Transport,
    (client, client_messages): (Transport, bool),
) -> babelgate_core::Translator {
    ctx.binary = matches!(client, Transport::Proto(_));
    // For the run log: a follower builds its encoder as this one was, and
    // knows how the logged events were framed.
    let mut setup = babelgate_core::journal::Setup::of(&ctx);
    setup.messages = client_messages;
    let mut t = crate::registry::translator(from, to, ctx, max_event_bytes);
    t.note_setup(setup);
    if matches!(upstream, Transport::Proto(_)) {
        t = t.with_binary_input(max_event_bytes);
    }
    t
}

/// Runs one translator step. A panic in it (a decoder or encoder bug)
/// must not kill the task, which would cut the client's stream without an
/// error and leave the run log open: it is caught, what the step half
/// wrote is dropped, and the stream is closed with the dialect's error,
/// code `internal`. `None` after a panic; the translator is then not used
/// again but for that error. The live stream and a replay of its record
/// (`resume.rs`) both step through here, so they end alike.
pub fn guarded<T>(
    translator: &mut babelgate_core::Translator,
    out: &mut babelgate_core::Sink,
    step: impl FnOnce(&mut babelgate_core::Translator, &mut babelgate_core::Sink) -> T,
) -> Option<T> {
    let before = out.bytes().len();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| step(translator, out))) {
        Ok(r) => Some(r),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            // Bounded: the message may quote a whole upstream frame.
            let what: String = what.chars().take(256).collect();
            tracing::error!(panic = %what, "the stream's translation panicked");
            out.truncate(before);
            let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                translator.fail_to(INTERNAL.0, Some(INTERNAL.1), out)
            }));
            if failed.is_err() {
                // The encoder itself is broken: end without an event
                // rather than with half of one.
                out.truncate(before);
            }
            None
        }
    }
}

/// The error a stream whose translation panicked ends with.
pub const INTERNAL: (&str, &str) = ("the gateway failed to translate the stream", "internal");

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
}
