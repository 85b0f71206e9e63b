//! What the benchmarks share: the mixed benchmark stream and the adapters by
//! dialect.
//!
//! [`mixed_agui`] writes the same shape as `crates/tools/bench/make_stream.py` (which uses
//! the AG-UI Python SDK for the whole-process comparison): per turn a text
//! message of 40 small deltas, a tool call with 6 argument deltas and its
//! result, and 2 state deltas; about three quarters of all events are text
//! deltas. [`mixed_stream`] gives it in any dialect, made by babelgate's own
//! AG-UI decoder and that dialect's encoder.
#![forbid(unsafe_code)]

use std::fmt::Write as _;

use babelgate_core::{Dialect, EncodeContext, Encoder, Event, Frame, SseFramer, Translator};

const WORDS: [&str; 28] = [
    "The ",
    "weather ",
    "in ",
    "Paris ",
    "is ",
    "mild",
    ", ",
    "around ",
    "18",
    "°C",
    " with ",
    "light ",
    "rain",
    ". ",
    "Bring ",
    "an ",
    "umbrella",
    "! ",
    "\"quoted\" ",
    "北京",
    "今天",
    "晴",
    " 🌤️ ",
    "and ",
    "tomorrow ",
    "looks ",
    "better",
    ".\n",
];
const TEXT_DELTAS: usize = 40;
const ARG_DELTAS: [&str; 6] = [
    "{\"city\":",
    " \"Par",
    "is\", \"u",
    "nits\": \"m",
    "etric\", \"days\"",
    ": 3}",
];

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// The mixed AG-UI stream of `events` events, as the Python SDK writes it.
pub fn mixed_agui(events: usize) -> Vec<u8> {
    let mut frames: Vec<String> = vec![
        r#"{"type":"RUN_STARTED","threadId":"thread-bench","runId":"run-bench"}"#.into(),
        r#"{"type":"STATE_SNAPSHOT","snapshot":{"turn":0,"status":"idle","city":"Paris"}}"#.into(),
    ];
    let mut n = 0usize;
    'outer: while frames.len() < events.saturating_sub(1) {
        let msg = format!("msg-{n}");
        let call = format!("call-{n}");
        let mut cycle = vec![format!(
            r#"{{"type":"TEXT_MESSAGE_START","messageId":"{msg}","role":"assistant"}}"#
        )];
        for i in 0..TEXT_DELTAS {
            cycle.push(format!(
                r#"{{"type":"TEXT_MESSAGE_CONTENT","messageId":"{msg}","delta":{}}}"#,
                json_str(WORDS[(n + i) % WORDS.len()])
            ));
        }
        cycle.push(format!(
            r#"{{"type":"TEXT_MESSAGE_END","messageId":"{msg}"}}"#
        ));
        cycle.push(format!(
            r#"{{"type":"TOOL_CALL_START","toolCallId":"{call}","toolCallName":"get_weather","parentMessageId":"{msg}"}}"#
        ));
        for d in ARG_DELTAS {
            cycle.push(format!(
                r#"{{"type":"TOOL_CALL_ARGS","toolCallId":"{call}","delta":{}}}"#,
                json_str(d)
            ));
        }
        cycle.push(format!(
            r#"{{"type":"TOOL_CALL_END","toolCallId":"{call}"}}"#
        ));
        cycle.push(format!(
            r#"{{"type":"TOOL_CALL_RESULT","messageId":"tool-{n}","toolCallId":"{call}","content":"{{\"temperature\":18,\"condition\":\"rain\"}}","role":"tool"}}"#
        ));
        cycle.push(format!(
            r#"{{"type":"STATE_DELTA","delta":[{{"op":"replace","path":"/turn","value":{n}}}]}}"#
        ));
        cycle.push(format!(
            r#"{{"type":"STATE_DELTA","delta":[{{"op":"replace","path":"/status","value":"step {n}"}}]}}"#
        ));
        for f in cycle {
            if frames.len() == events.saturating_sub(1) {
                break 'outer;
            }
            frames.push(f);
        }
        n += 1;
    }
    frames.push(r#"{"type":"RUN_FINISHED","threadId":"thread-bench","runId":"run-bench"}"#.into());
    let mut out = String::new();
    for f in frames {
        let _ = write!(out, "data: {f}\n\n");
    }
    out.into_bytes()
}

pub use babelgate_registry::decoder;

/// A dialect's encoder with sequential ids and a fixed clock.
pub fn encoder(dialect: Dialect) -> Box<dyn Encoder> {
    babelgate_registry::encoder(dialect, EncodeContext::deterministic())
}

pub fn translator(from: Dialect, to: Dialect) -> Translator {
    Translator::new(SseFramer::default(), decoder(from), encoder(to))
}

/// Frames `input` as the gateway reads it (64 KiB at a time), handing each
/// read's frames to `sink`.
pub fn frame_all(input: &[u8], mut sink: impl FnMut(&[Frame])) {
    let mut f = SseFramer::default();
    let mut out = Vec::with_capacity(256);
    for chunk in input.chunks(64 * 1024) {
        f.push(chunk, &mut out)
            .expect("the benchmark stream frames");
        sink(&out);
        out.clear();
    }
    f.finish(&mut out).expect("the benchmark stream ends well");
    sink(&out);
}

/// Translates a whole stream the way the gateway does: 64 KiB reads, one
/// reused output buffer handed to `sink` after each read. Never inlined, so a
/// profiler can count it alone (`--toggle-collect='*babelgate_bench::translate*'`;
/// a stream of another dialect than AG-UI is itself made by translating, so
/// count two iterations less one).
#[inline(never)]
pub fn translate(
    tr: &mut Translator,
    input: &[u8],
    out: &mut Vec<u8>,
    mut sink: impl FnMut(&[u8]),
) {
    for chunk in input.chunks(64 * 1024) {
        tr.push(chunk, out)
            .expect("the benchmark stream translates");
        sink(out);
        out.clear();
    }
    tr.finish(out).expect("the benchmark stream ends well");
    sink(out);
    out.clear();
}

/// The mixed stream in `dialect`: the AG-UI stream translated by babelgate.
pub fn mixed_stream(dialect: Dialect, events: usize) -> Vec<u8> {
    let agui = mixed_agui(events);
    if dialect == Dialect::AgUi {
        return agui;
    }
    let mut tr = translator(Dialect::AgUi, dialect);
    let mut all = Vec::new();
    translate(&mut tr, &agui, &mut Vec::new(), |b| {
        all.extend_from_slice(b)
    });
    all
}

/// The SSE frames of a stream.
pub fn frames(input: &[u8]) -> Vec<Frame> {
    let mut framer = SseFramer::default();
    let mut out = Vec::new();
    framer.push(input, &mut out).expect("frames");
    framer.finish(&mut out).expect("frames");
    out
}

/// The core events a stream decodes to.
pub fn events(dialect: Dialect, input: &[u8]) -> Vec<Event> {
    let mut d = decoder(dialect);
    let mut out = Vec::new();
    for f in frames(input) {
        d.decode(&f, &mut out).expect("decodes");
    }
    d.finish(&mut out).expect("decodes");
    out
}

/// A stream of `dialect` (AG-UI or HAI: the dialects with a binary form) in
/// both transports, with the same events: the SSE of the events the binary
/// form can carry, and their length-prefixed protobuf messages (the
/// general codec's conversion, which the reference corpus holds to
/// @ag-ui/proto).
pub fn both_transports(dialect: Dialect, events: usize) -> (Vec<u8>, Vec<u8>) {
    let prefix = babelgate_registry::policy(dialect).binary_custom_prefix;
    let mut sse = Vec::new();
    let mut binary = Vec::new();
    for f in frames(&mixed_stream(dialect, events)) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&f.data) else {
            continue;
        };
        let Ok(m) = babelgate_proto::encode_event_as(&v, prefix) else {
            continue;
        };
        babelgate_core::Framing::Sse.write(&mut sse, f.data.as_bytes());
        babelgate_proto::write_frame(&mut binary, &m).expect("frames");
    }
    (sse, binary)
}

/// An encoder of `dialect` writing the binary transport.
pub fn binary_encoder(dialect: Dialect) -> Box<dyn Encoder> {
    let ctx = EncodeContext {
        binary: true,
        ..EncodeContext::deterministic()
    };
    babelgate_registry::encoder(dialect, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mixed_stream_has_the_asked_size_and_translates_everywhere() {
        let s = mixed_agui(1000);
        assert_eq!(frames(&s).len(), 1000);
        for to in Dialect::ALL {
            let out = mixed_stream(to, 1000);
            assert!(!events(to, &out).is_empty(), "{to}");
        }
    }
}
