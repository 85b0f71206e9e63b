//! The spans every encoder reports tile its output: for the 16 pairs over
//! every fixture, on the finished, failed and cut paths, each span is one
//! whole SSE event (one blank line, at its end), in order, with no byte
//! outside a span. The run log and resume read these spans instead of
//! scanning the bytes, so an encoder that writes an event without saying
//! where it is would put it in no log entry, or two events in one.

mod common;

use common::fixtures;

use babelgate_core::{Dialect, EncodeContext, Framing, Sink, SpanKind, Translator};
use babelgate_registry::translator;

/// Where each line of `bytes` ends (after its terminator: `\n`, `\r\n` or
/// a lone `\r`, as the SSE grammar has them).
fn line_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            b'\n' => ends.push(i),
            b'\r' => {
                if bytes.get(i) == Some(&b'\n') {
                    i += 1;
                }
                ends.push(i);
            }
            _ => {}
        }
    }
    ends
}

/// Checks that the sink's spans tile its bytes, one whole event each.
fn assert_tiles(sink: &Sink, what: &str) {
    let bytes = sink.bytes();
    let mut at = 0;
    for span in sink.spans() {
        let r = span.range.clone();
        assert_eq!(r.start, at, "{what}: a gap or an overlap before {r:?}");
        assert!(r.end > r.start, "{what}: an empty span at {at}");
        let event = &bytes[r.clone()];
        let text = String::from_utf8_lossy(event);
        // A blank line is a line that ends where the line before it ended:
        // exactly one, the span's last.
        let ends = line_ends(event);
        let mut starts = vec![0];
        starts.extend(&ends);
        let blank: Vec<usize> = ends
            .iter()
            .zip(&starts)
            .filter(|(end, start)| {
                let line = &event[**start..**end];
                line.iter().all(|b| matches!(b, b'\r' | b'\n'))
            })
            .map(|(end, _)| *end)
            .collect();
        assert_eq!(
            blank,
            vec![event.len()],
            "{what}: span {r:?} is not one whole event: {text:?}"
        );
        let comment = event.first() == Some(&b':');
        assert_eq!(
            span.kind == SpanKind::Comment,
            comment,
            "{what}: kind of {text:?}"
        );
        at = r.end;
    }
    assert_eq!(
        at,
        bytes.len(),
        "{what}: bytes after the last span: {:?}",
        String::from_utf8_lossy(&bytes[at..])
    );
}

fn tr(from: Dialect, to: Dialect) -> Translator {
    translator(from, to, EncodeContext::deterministic(), 1 << 20)
}

/// What a finished translation gives through the `&mut Vec<u8>` API.
fn plain(from: Dialect, to: Dialect, input: &[u8]) -> Vec<u8> {
    let mut t = tr(from, to);
    let mut out = Vec::new();
    if t.push(input, &mut out).is_ok() {
        let _ = t.finish(&mut out);
    }
    out
}

/// The events in the sink, comments left out, as one byte string.
fn events_only(sink: &Sink) -> Vec<u8> {
    sink.events().flat_map(|e| e.iter().copied()).collect()
}

#[test]
fn every_encoder_marks_each_event_it_writes_on_every_path() {
    let mut saw_done = false;
    let mut saw_agkit_error = false;
    let mut saw_vercel_error = false;
    for (from, name, input) in fixtures() {
        for to in Dialect::ALL {
            let pair = format!("{name} {from}->{to}");

            // The whole stream in small reads, a heartbeat now and then: the
            // same bytes as the plain API, the heartbeats as comments.
            let mut t = tr(from, to);
            let mut sink = Sink::new(Framing::Sse);
            let mut failed = false;
            for (i, piece) in input.chunks(7).enumerate() {
                if t.push_to(piece, &mut sink).is_err() {
                    failed = true;
                    break;
                }
                if i % 5 == 4 {
                    sink.comment("ping");
                }
            }
            if !failed {
                let _ = t.finish_to(&mut sink);
            }
            let what = format!("{pair} (whole)");
            assert_tiles(&sink, &what);
            assert_eq!(
                String::from_utf8_lossy(&events_only(&sink)),
                String::from_utf8_lossy(&plain(from, to, &input)),
                "{what}"
            );
            let comments = sink
                .spans()
                .iter()
                .filter(|s| s.kind == SpanKind::Comment)
                .map(|s| &sink.bytes()[s.range.clone()]);
            assert!(comments.clone().count() > 0, "{what}");
            assert!(comments.into_iter().all(|c| c == b": ping\n\n"), "{what}");
            for e in sink.events() {
                saw_done |= to == Dialect::Vercel && e == b"data: [DONE]\n\n";
                saw_vercel_error |=
                    to == Dialect::Vercel && e.starts_with(b"data: {\"type\":\"error\"");
                saw_agkit_error |=
                    to == Dialect::AgKit && e.starts_with(b"data: {\"type\":\"error\"");
            }

            // Stopped part way (`Translator::fail_to`: idle, shutdown,
            // stop), then finished again (nothing more).
            for cut in [0, input.len() / 3, input.len() / 2] {
                let mut t = tr(from, to);
                let mut sink = Sink::new(Framing::Sse);
                let _ = t.push_to(&input[..cut], &mut sink);
                t.fail_to("the run was stopped", Some("stopped"), &mut sink);
                let _ = t.finish_to(&mut sink);
                assert_tiles(&sink, &format!("{pair} (failed at {cut})"));

                // Cut: the input ends there (a failure in every dialect,
                // AG-Kit's an error frame and an aborted body).
                let mut t = tr(from, to);
                let mut sink = Sink::new(Framing::Sse);
                if t.push_to(&input[..cut], &mut sink).is_ok() {
                    let _ = t.finish_to(&mut sink);
                }
                let what = format!("{pair} (cut at {cut})");
                assert_tiles(&sink, &what);
                assert!(!sink.spans().is_empty(), "{what}: says nothing");
            }
        }
    }
    assert!(saw_done, "no fixture reached Vercel's [DONE]");
    assert!(saw_vercel_error, "no fixture reached a Vercel error chunk");
    assert!(saw_agkit_error, "no fixture reached AG-Kit's error frame");
}

/// The encoders on their own, without a translator: each `encode_to`,
/// `fail_to` and `finish_to` marks what it wrote.
#[test]
fn encoders_mark_their_events_when_driven_directly() {
    use babelgate_core::{Event, EventKind, Outcome};
    let text = |id: &str| {
        vec![
            EventKind::text_start(id),
            EventKind::text_delta(id, "a\u{2028}b\nc"),
        ]
    };
    let mut kinds = vec![EventKind::run_started()];
    kinds.extend(text("m1"));
    kinds.push(EventKind::ToolCallStart {
        tool_call_id: "c1".into(),
        tool_name: "f".into(),
        parent_message_id: None,
    });
    kinds.push(EventKind::ToolCallArgs {
        tool_call_id: "c1".into(),
        delta: "{\"a\":".into(),
    });
    let events: Vec<Event> = kinds.into_iter().map(Event::new).collect();
    let finished = Event::new(EventKind::run_finished(Outcome::Cancelled { reason: None }));
    for to in Dialect::ALL {
        for end in ["fail", "finish", "cancelled"] {
            let mut enc = babelgate_registry::encoder(to, EncodeContext::deterministic());
            let mut sink = Sink::new(Framing::Sse);
            for ev in &events {
                enc.encode_to(ev, &mut sink);
            }
            match end {
                "fail" => enc.fail_to("boom", Some("x"), &mut sink),
                "cancelled" => {
                    enc.encode_to(&finished, &mut sink);
                    enc.finish_to(&mut sink);
                }
                _ => enc.finish_to(&mut sink),
            }
            // Idempotent ends write nothing more.
            enc.finish_to(&mut sink);
            enc.fail_to("again", None, &mut sink);
            assert_tiles(&sink, &format!("{to} ({end})"));
            assert!(sink.spans().len() >= 3, "{to} ({end})");
        }
    }
}
