//! The shape stage's rules hold on every pair, the same-dialect ones
//! included (they used to pass the upstream's frames through and repair
//! only what each real client refused). One test per rule: an upstream that
//! breaks it, in each dialect that can say so, through every client
//! dialect; the client's bytes are read back by the client dialect's own
//! decoder and the rule is checked on what it reads.

use babelgate_core::SseFramer;
use babelgate_core::{Dialect, EncodeContext, Event, EventKind};
use babelgate_registry::{decoder, translator};

/// `frames` (one JSON text each) as an SSE stream.
fn sse(frames: &[&str]) -> String {
    frames.iter().map(|f| format!("data: {f}\n\n")).collect()
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

/// The text the client read, all messages joined.
fn text_of(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
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
    let inputs = [
        (
            Dialect::AgUi,
            sse(&[
                r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
                r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
            ]),
        ),
        (
            Dialect::Hai,
            sse(&[
                r#"{"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"BUSINESS_DATA_END","messageId":"m","role":"assistant"}"#,
                r#"{"type":"RUN_FINISHED","messageId":"m","role":"assistant"}"#,
            ]),
        ),
    ];
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
    let inputs = [
        (
            Dialect::AgUi,
            sse(&[
                r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
                r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
                r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
                r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
            ]),
        ),
        (
            Dialect::Hai,
            sse(&[
                r#"{"type":"RUN_STARTED","messageId":"m","role":"assistant"}"#,
                r#"{"type":"RUN_STARTED","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"BUSINESS_DATA_END","messageId":"m","role":"assistant"}"#,
                r#"{"type":"RUN_FINISHED","messageId":"m","role":"assistant"}"#,
            ]),
        ),
        (
            Dialect::Vercel,
            sse(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"m"}"#,
                r#"{"type":"text-delta","id":"m","delta":"hello"}"#,
                r#"{"type":"text-start","id":"m"}"#,
                r#"{"type":"text-end","id":"m"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish"}"#,
                "[DONE]",
            ]),
        ),
    ];
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
    let inputs = [
        (
            Dialect::AgUi,
            sse(&[
                r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
                r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
            ]),
        ),
        (
            Dialect::Hai,
            sse(&[
                r#"{"type":"RUN_STARTED","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"RUN_FINISHED","messageId":"m","role":"assistant"}"#,
            ]),
        ),
        (
            Dialect::Vercel,
            sse(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"m"}"#,
                r#"{"type":"text-delta","id":"m","delta":"hello"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish"}"#,
                "[DONE]",
            ]),
        ),
    ];
    every_pair(&inputs, |from, to, events, text| {
        assert_eq!(text_of(events), "hello", "{from}->{to}\n{text}");
        let end = events
            .iter()
            .position(|e| matches!(e.kind, EventKind::TextEnd { .. }));
        let finished = events
            .iter()
            .position(|e| matches!(e.kind, EventKind::RunFinished { .. }));
        if let (Some(start), Some(finished)) = (
            events
                .iter()
                .position(|e| matches!(e.kind, EventKind::TextStart { .. })),
            finished,
        ) {
            assert!(
                end.is_some_and(|end| start < end && end < finished),
                "{from}->{to}: the text closed before the end\n{text}"
            );
        }
    });
}

#[test]
fn a_result_ends_its_call() {
    let inputs = [
        (
            Dialect::AgUi,
            sse(&[
                r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
                r#"{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}"#,
                r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"a\":1}"}"#,
                r#"{"type":"TOOL_CALL_RESULT","toolCallId":"c","messageId":"x","content":"done"}"#,
                r#"{"type":"TOOL_CALL_END","toolCallId":"c"}"#,
                r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
            ]),
        ),
        (
            Dialect::Hai,
            sse(&[
                r#"{"type":"RUN_STARTED","messageId":"m","role":"assistant"}"#,
                r#"{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}"#,
                r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"a\":1}"}"#,
                r#"{"type":"TOOL_CALL_RESULT","toolCallId":"c","messageId":"x","content":"done"}"#,
                r#"{"type":"TOOL_CALL_END","toolCallId":"c"}"#,
                r#"{"type":"RUN_FINISHED","messageId":"m","role":"assistant"}"#,
            ]),
        ),
    ];
    every_pair(&inputs, |from, to, events, text| {
        let ends = count(events, |k| matches!(k, EventKind::ToolCallEnd { .. }));
        let results = events
            .iter()
            .position(|e| matches!(e.kind, EventKind::ToolCallResult { .. }));
        let end = events
            .iter()
            .position(|e| matches!(e.kind, EventKind::ToolCallEnd { .. }));
        assert!(
            ends <= 1,
            "{from}->{to}: the call ended {ends} times\n{text}"
        );
        if let (Some(end), Some(result)) = (end, results) {
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
    let inputs = [
        (
            Dialect::AgUi,
            sse(&[
                r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
                r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"RUN_ERROR","message":"boom"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"late"}"#,
                r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
            ]),
        ),
        (
            Dialect::Hai,
            sse(&[
                r#"{"type":"RUN_STARTED","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"RUN_ERROR","message":"boom"}"#,
                r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"late"}"#,
                r#"{"type":"RUN_FINISHED","messageId":"m","role":"assistant"}"#,
            ]),
        ),
        (
            Dialect::Vercel,
            sse(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"m"}"#,
                r#"{"type":"text-delta","id":"m","delta":"hello"}"#,
                r#"{"type":"error","errorText":"boom"}"#,
                r#"{"type":"text-delta","id":"m","delta":"late"}"#,
                r#"{"type":"finish"}"#,
                "[DONE]",
            ]),
        ),
    ];
    every_pair(&inputs, |from, to, events, text| {
        assert_eq!(text_of(events), "hello", "{from}->{to}\n{text}");
        assert!(!text.contains("late"), "{from}->{to}\n{text}");
        assert!(
            !events
                .iter()
                .any(|e| matches!(e.kind, EventKind::RunFinished { .. })),
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
    let inputs = [
        (
            Dialect::AgUi,
            sse(&[
                r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
                r#"{"type":"TEXT_MESSAGE_END","messageId":"never"}"#,
                r#"{"type":"TOOL_CALL_END","toolCallId":"never"}"#,
                r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
                r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
            ]),
        ),
        (
            Dialect::Hai,
            sse(&[
                r#"{"type":"RUN_STARTED","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_END","messageId":"never","role":"assistant"}"#,
                r#"{"type":"TOOL_CALL_END","toolCallId":"never"}"#,
                r#"{"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"BUSINESS_DATA_END","messageId":"m","role":"assistant"}"#,
                r#"{"type":"RUN_FINISHED","messageId":"m","role":"assistant"}"#,
            ]),
        ),
        (
            Dialect::Vercel,
            sse(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-end","id":"never"}"#,
                r#"{"type":"text-start","id":"m"}"#,
                r#"{"type":"text-delta","id":"m","delta":"hello"}"#,
                r#"{"type":"text-end","id":"m"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish"}"#,
                "[DONE]",
            ]),
        ),
    ];
    every_pair(&inputs, |from, to, events, text| {
        assert_eq!(text_of(events), "hello", "{from}->{to}\n{text}");
        assert!(!text.contains("never"), "{from}->{to}\n{text}");
    });
}

#[test]
fn content_without_a_start_gets_one() {
    let inputs = [
        (
            Dialect::AgUi,
            sse(&[
                r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
                r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
            ]),
        ),
        (
            Dialect::Hai,
            sse(&[
                r#"{"type":"RUN_STARTED","messageId":"m","role":"assistant"}"#,
                r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"hello"}"#,
                r#"{"type":"BUSINESS_DATA_END","messageId":"m","role":"assistant"}"#,
                r#"{"type":"RUN_FINISHED","messageId":"m","role":"assistant"}"#,
            ]),
        ),
        (
            Dialect::Vercel,
            sse(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-delta","id":"m","delta":"hello"}"#,
                r#"{"type":"text-end","id":"m"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish"}"#,
                "[DONE]",
            ]),
        ),
    ];
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
