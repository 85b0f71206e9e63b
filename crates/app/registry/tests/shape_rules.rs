//! The shape stage's rules hold on every pair, the same-dialect ones
//! included (they used to pass the upstream's frames through and repair
//! only what each real client refused). One test per rule: an upstream that
//! breaks it, in each dialect that can say so, through every client
//! dialect; the client's bytes are read back by the client dialect's own
//! decoder and the rule is checked on what it reads.

use babelgate_core::testing::text_of;
use babelgate_core::SseFramer;
use babelgate_core::{Dialect, EncodeContext, Event, EventKind};
use babelgate_registry::{decoder, translator};

/// How an upstream of a dialect says each thing the tests need (the
/// dialects whose wire can say a stream out of shape: AG-UI, HAI, Vercel).
#[derive(Clone, Copy)]
enum Say {
    RunStart,
    TextStart,
    Text(&'static str),
    TextEnd,
    /// A call `c` to `f` with these arguments.
    ToolStart,
    ToolArgs(&'static str),
    ToolResult(&'static str),
    ToolEnd,
    /// An end of something named `never`, never opened.
    StrayEnd,
    Finish,
    Error(&'static str),
}

const UPSTREAMS: [Dialect; 3] = [Dialect::AgUi, Dialect::Hai, Dialect::Vercel];

/// `says` in `d`'s wire, as an SSE stream (text on message `m`).
fn sse(d: Dialect, says: &[Say]) -> String {
    use serde_json::json;
    let frame = |say: &Say| -> Option<serde_json::Value> {
        Some(match (d, *say) {
            (Dialect::AgUi, Say::RunStart) => {
                json!({"type":"RUN_STARTED","threadId":"t","runId":"r"})
            }
            (Dialect::Hai, Say::RunStart) => {
                json!({"type":"RUN_STARTED","messageId":"m","role":"assistant"})
            }
            (Dialect::Vercel, Say::RunStart) => json!({"type":"start"}),
            (Dialect::AgUi, Say::TextStart) => {
                json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"})
            }
            (Dialect::Hai, Say::TextStart) => {
                json!({"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"})
            }
            (Dialect::Vercel, Say::TextStart) => json!({"type":"text-start","id":"m"}),
            (Dialect::AgUi, Say::Text(t)) => {
                json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":t})
            }
            (Dialect::Hai, Say::Text(t)) => {
                json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":t})
            }
            (Dialect::Vercel, Say::Text(t)) => json!({"type":"text-delta","id":"m","delta":t}),
            (Dialect::AgUi, Say::TextEnd) => json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
            (Dialect::Hai, Say::TextEnd) => {
                json!({"type":"BUSINESS_DATA_END","messageId":"m","role":"assistant"})
            }
            (Dialect::Vercel, Say::TextEnd) => json!({"type":"text-end","id":"m"}),
            (Dialect::AgUi | Dialect::Hai, Say::ToolStart) => {
                json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"})
            }
            (Dialect::AgUi | Dialect::Hai, Say::ToolArgs(a)) => {
                json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":a})
            }
            (Dialect::AgUi | Dialect::Hai, Say::ToolResult(r)) => {
                json!({"type":"TOOL_CALL_RESULT","toolCallId":"c","messageId":"x","content":r})
            }
            (Dialect::AgUi | Dialect::Hai, Say::ToolEnd) => {
                json!({"type":"TOOL_CALL_END","toolCallId":"c"})
            }
            (Dialect::AgUi, Say::StrayEnd) => {
                json!({"type":"TEXT_MESSAGE_END","messageId":"never"})
            }
            (Dialect::Hai, Say::StrayEnd) => {
                json!({"type":"BUSINESS_DATA_END","messageId":"never","role":"assistant"})
            }
            (Dialect::Vercel, Say::StrayEnd) => json!({"type":"text-end","id":"never"}),
            (Dialect::AgUi, Say::Finish) => {
                json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"})
            }
            (Dialect::Hai, Say::Finish) => {
                json!({"type":"RUN_FINISHED","messageId":"m","role":"assistant"})
            }
            (Dialect::Vercel, Say::Finish) => json!({"type":"finish"}),
            (Dialect::AgUi | Dialect::Hai, Say::Error(m)) => {
                json!({"type":"RUN_ERROR","message":m})
            }
            (Dialect::Vercel, Say::Error(m)) => json!({"type":"error","errorText":m}),
            _ => return None,
        })
    };
    let mut out = String::new();
    for say in says {
        if d == Dialect::Vercel && matches!(say, Say::Finish) {
            out.push_str("data: {\"type\":\"finish-step\"}\n\n");
        }
        let f = frame(say).unwrap_or_else(|| panic!("{d} cannot say this"));
        out.push_str(&format!("data: {f}\n\n"));
        if d == Dialect::Vercel && matches!(say, Say::RunStart) {
            out.push_str("data: {\"type\":\"start-step\"}\n\n");
        }
    }
    if d == Dialect::Vercel {
        out.push_str("data: [DONE]\n\n");
    }
    out
}

/// `says` in each of `dialects`, as the upstream inputs of a rule.
fn inputs(dialects: &[Dialect], says: &[Say]) -> Vec<(Dialect, String)> {
    dialects.iter().map(|d| (*d, sse(*d, says))).collect()
}

/// The client's bytes for `input` from a `from` upstream, read back as
/// core events by the client dialect's decoder (which must read them).
fn through(from: Dialect, to: Dialect, input: &str) -> (Vec<Event>, String) {
    let mut t = translator(from, to, EncodeContext::deterministic(), 1 << 20);
    let mut out = Vec::new();
    let _ = t.push(input.as_bytes(), &mut out);
    let _ = t.finish(&mut out);
    let text = String::from_utf8(out).expect("utf-8 output");
    let mut framer = SseFramer::new(1 << 20);
    let mut frames = Vec::new();
    framer.push(text.as_bytes(), &mut frames).unwrap();
    framer.finish(&mut frames).unwrap();
    let mut d = decoder(to);
    let mut events = Vec::new();
    for f in &frames {
        d.decode(f, &mut events).unwrap_or_else(|e| {
            panic!("{from}->{to}: the client's decoder refused {f:?}: {e}\n{text}")
        });
    }
    d.finish(&mut events).unwrap();
    (events, text)
}

fn count(events: &[Event], pred: impl Fn(&EventKind) -> bool) -> usize {
    events.iter().filter(|e| pred(&e.kind)).count()
}

/// Runs `check` on every client dialect for each upstream input.
fn every_pair(inputs: &[(Dialect, String)], check: impl Fn(Dialect, Dialect, &[Event], &str)) {
    let mut pairs = 0;
    for (from, input) in inputs {
        for to in Dialect::ALL {
            let (events, text) = through(*from, to, input);
            check(*from, to, &events, &text);
            pairs += 1;
        }
    }
    assert_eq!(pairs, inputs.len() * Dialect::ALL.len());
}

/// Whether the client's dialect says a run's start on the wire (AG-Kit
/// and A2A clients are told of none).
fn has_run_start(d: Dialect) -> bool {
    matches!(d, Dialect::AgUi | Dialect::Hai | Dialect::Vercel)
}

#[test]
fn the_run_comes_first() {
    use Say::*;
    let inputs = inputs(
        &[Dialect::AgUi, Dialect::Hai],
        &[TextStart, Text("hello"), TextEnd, Finish],
    );
    every_pair(&inputs, |from, to, events, text| {
        assert_eq!(text_of(events), "hello", "{from}->{to}\n{text}");
        if has_run_start(to) {
            assert!(
                matches!(events[0].kind, EventKind::RunStarted { .. }),
                "{from}->{to}: the run first\n{text}"
            );
        }
    });
}

#[test]
fn a_second_start_is_dropped() {
    use Say::*;
    let inputs = inputs(
        &UPSTREAMS,
        &[
            RunStart,
            RunStart,
            TextStart,
            Text("hello"),
            TextStart,
            TextEnd,
            Finish,
        ],
    );
    every_pair(&inputs, |from, to, events, text| {
        assert_eq!(text_of(events), "hello", "{from}->{to}\n{text}");
        if has_run_start(to) {
            let starts = count(events, |k| matches!(k, EventKind::RunStarted { .. }));
            assert_eq!(starts, 1, "{from}->{to}\n{text}");
        }
        let text_starts = count(events, |k| matches!(k, EventKind::TextStart { .. }));
        assert!(
            text_starts <= 1,
            "{from}->{to}: {text_starts} starts\n{text}"
        );
    });
}

#[test]
fn what_is_open_is_closed_before_the_run_finishes() {
    use Say::*;
    let inputs = inputs(&UPSTREAMS, &[RunStart, TextStart, Text("hello"), Finish]);
    every_pair(&inputs, |from, to, events, text| {
        assert_eq!(text_of(events), "hello", "{from}->{to}\n{text}");
        let at = |pred: fn(&EventKind) -> bool| events.iter().position(|e| pred(&e.kind));
        let start = at(|k| matches!(k, EventKind::TextStart { .. }));
        let end = at(|k| matches!(k, EventKind::TextEnd { .. }));
        let finished = at(|k| matches!(k, EventKind::RunFinished { .. }));
        if let (Some(start), Some(finished)) = (start, finished) {
            assert!(
                end.is_some_and(|end| start < end && end < finished),
                "{from}->{to}: the text closed before the end\n{text}"
            );
        }
    });
}

#[test]
fn a_result_ends_its_call() {
    use Say::*;
    let inputs = inputs(
        &[Dialect::AgUi, Dialect::Hai],
        &[
            RunStart,
            ToolStart,
            ToolArgs("{\"a\":1}"),
            ToolResult("done"),
            ToolEnd,
            Finish,
        ],
    );
    every_pair(&inputs, |from, to, events, text| {
        let at = |pred: fn(&EventKind) -> bool| events.iter().position(|e| pred(&e.kind));
        let ends = count(events, |k| matches!(k, EventKind::ToolCallEnd { .. }));
        assert!(
            ends <= 1,
            "{from}->{to}: the call ended {ends} times\n{text}"
        );
        let end = at(|k| matches!(k, EventKind::ToolCallEnd { .. }));
        let result = at(|k| matches!(k, EventKind::ToolCallResult { .. }));
        if let (Some(end), Some(result)) = (end, result) {
            assert!(
                end < result,
                "{from}->{to}: the result before the end\n{text}"
            );
        }
        if to != Dialect::AgKit {
            // (an AG-Kit client hears a server tool's result only as its
            // frame says; the argument text is what it runs)
            assert!(
                text.contains("done"),
                "{from}->{to}: the result lost\n{text}"
            );
        }
        assert!(
            text.contains(r#"\"a\":1"#) || text.contains(r#""a":1"#),
            "{from}->{to}: the arguments lost\n{text}"
        );
    });
}

#[test]
fn nothing_follows_an_error() {
    use Say::*;
    let inputs = inputs(
        &UPSTREAMS,
        &[
            RunStart,
            TextStart,
            Text("hello"),
            Error("boom"),
            Text("late"),
            Finish,
        ],
    );
    every_pair(&inputs, |from, to, events, text| {
        assert_eq!(text_of(events), "hello", "{from}->{to}\n{text}");
        assert!(!text.contains("late"), "{from}->{to}\n{text}");
        let finished = count(events, |k| matches!(k, EventKind::RunFinished { .. }));
        assert_eq!(
            finished, 0,
            "{from}->{to}: a failed run reported finished\n{text}"
        );
        if to != Dialect::AgKit {
            // (the legacy AG-Kit client hears an error by the body breaking
            // off: `Encoder::aborts`)
            assert!(
                text.contains("boom"),
                "{from}->{to}: the error lost\n{text}"
            );
        }
    });
}

#[test]
fn ends_of_what_never_opened_are_dropped() {
    use Say::*;
    let inputs = inputs(
        &UPSTREAMS,
        &[
            RunStart,
            StrayEnd,
            TextStart,
            Text("hello"),
            TextEnd,
            Finish,
        ],
    );
    every_pair(&inputs, |from, to, events, text| {
        assert_eq!(text_of(events), "hello", "{from}->{to}\n{text}");
        assert!(!text.contains("never"), "{from}->{to}\n{text}");
    });
}

#[test]
fn content_without_a_start_gets_one() {
    use Say::*;
    let inputs = inputs(&UPSTREAMS, &[RunStart, Text("hello"), TextEnd, Finish]);
    every_pair(&inputs, |from, to, events, text| {
        assert_eq!(text_of(events), "hello", "{from}->{to}\n{text}");
        let first_text = events.iter().position(|e| {
            matches!(
                e.kind,
                EventKind::TextStart { .. } | EventKind::TextDelta { .. }
            )
        });
        assert!(
            first_text.is_some_and(|i| matches!(events[i].kind, EventKind::TextStart { .. })),
            "{from}->{to}: a start before the content\n{text}"
        );
    });
}
