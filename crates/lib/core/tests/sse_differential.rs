//! The core's SSE framer held to `eventsource-stream`, the crate the Rust
//! ecosystem reads server-sent events with (docs/design.md, "Why the core
//! frames SSE itself", says why the gateway does not use it).
//!
//! Every committed `.sse` fixture and a set of edge cases are framed whole
//! and cut in two (the edge cases at every byte offset, the fixtures at
//! each offset where a cut can matter), by both: the frames must be the same
//! event for event (type, data, id, retry), whatever the cut. Where the two
//! differ by design, the difference is written down here and checked by
//! `the_documented_differences_hold`, so that it cannot widen unseen:
//!
//! - an event left without its blank line when the input ends: the core
//!   delivers it (an upstream that closes after its last `data:` line still
//!   said it); `eventsource-stream` drops it, as a browser does;
//! - the same at the end of an input whose last line ends in a lone CR
//!   (`data: b\r\r`): `eventsource-stream` waits for an LF that may follow
//!   and, the input ended, never dispatches the event; the core does;
//! - a stream that opens with a byte order mark (which WHATWG skips):
//!   `eventsource-stream` 0.2.3 panics (it slices a `str` inside U+FEFF);
//!   the core skips it;
//! - `id:`: the core reports the id field of the event that carried it;
//!   `eventsource-stream` keeps the last id seen (the WHATWG "last event ID")
//!   on every later event. Compared on the events that carry an id.

use babelgate_core::sse::{Frame, SseFramer};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use std::path::Path;

/// (event type, data, id field of this event, retry) of one frame.
type Seen = (String, String, Option<String>, Option<u64>);

fn core_frames(chunks: &[&[u8]]) -> Vec<Seen> {
    let mut framer = SseFramer::default();
    let mut out: Vec<Frame> = Vec::new();
    for c in chunks {
        framer.push(c, &mut out).unwrap();
    }
    framer.finish(&mut out).unwrap();
    out.into_iter()
        .map(|f| {
            (
                f.event.unwrap_or_else(|| "message".into()),
                f.data,
                f.id,
                f.retry,
            )
        })
        .collect()
}

/// eventsource-stream's events; its `id` is the last event id so far.
fn crate_frames(chunks: &[&[u8]]) -> Vec<(String, String, String, Option<u64>)> {
    let owned: Vec<Result<bytes::Bytes, std::convert::Infallible>> = chunks
        .iter()
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    futures_executor::block_on(
        futures_util::stream::iter(owned)
            .eventsource()
            .map(|e| {
                let e = e.expect("eventsource-stream refused the input");
                let retry = e.retry.map(|d| d.as_millis() as u64);
                (e.event, e.data, e.id, retry)
            })
            .collect(),
    )
}

/// The two agree on `input` cut as `chunks`, apart from the documented
/// differences.
fn agree(input: &[u8], chunks: &[&[u8]]) {
    let ours = core_frames(chunks);
    let theirs = crate_frames(chunks);
    // An event the input ends in the middle of (or with a lone CR): only the
    // core delivers it.
    let ours = match ours.len().checked_sub(theirs.len()) {
        Some(1) if !ends_an_event(input) || input.ends_with(b"\r") => &ours[..theirs.len()],
        _ => &ours[..],
    };
    let cut: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
    let shown = String::from_utf8_lossy(input);
    assert_eq!(ours.len(), theirs.len(), "frames of {shown:?} cut {cut:?}");
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(
            (&a.0, &a.1, a.3),
            (&b.0, &b.1, b.3),
            "frame {i} of {shown:?} cut {cut:?}"
        );
        if let Some(id) = &a.2 {
            assert_eq!(id, &b.2, "frame {i}'s id, {shown:?} cut {cut:?}");
        }
    }
}

/// Whether the input's last line is a blank line (its last event is
/// dispatched by the input itself, not by its end).
fn ends_an_event(input: &[u8]) -> bool {
    [
        &b"\n\n"[..],
        b"\r\r",
        b"\r\n\r\n",
        b"\n\r\n",
        b"\r\n\n",
        b"\n\r",
    ]
    .iter()
    .any(|end| input.ends_with(end))
}

/// Whole, and cut in two at every offset.
fn agree_at_every_cut(input: &[u8]) {
    agree_at_cuts(input, 0..=input.len());
}

/// Where a cut can change what a framer decides: next to a line end, a
/// field's colon or a byte of a multi-byte character, and every 16th byte
/// besides (a fixture cut at every offset by both parsers took 40 s of the
/// suite's time on the 2-core machine, this a fifth of it).
fn telling_cuts(input: &[u8]) -> impl Iterator<Item = usize> + '_ {
    (0..=input.len()).filter(move |&at| {
        at % 16 == 0
            || input[at.saturating_sub(2)..(at + 2).min(input.len())]
                .iter()
                .any(|&b| b == b'\n' || b == b'\r' || b == b':' || b >= 0x80)
    })
}

fn agree_at_cuts(input: &[u8], cuts: impl Iterator<Item = usize>) {
    let whole = core_frames(&[input]);
    agree(input, &[input]);
    for at in cuts {
        let (a, b) = input.split_at(at);
        agree(input, &[a, b]);
        assert_eq!(core_frames(&[a, b]), whole, "the core, cut at {at}");
    }
}

#[test]
fn every_fixture_frames_as_eventsource_stream_frames_it_at_each_telling_cut() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "sse") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 50, "fixtures found: {}", files.len());
    for f in files {
        let input = std::fs::read(&f).unwrap();
        agree_at_cuts(&input, telling_cuts(&input));
    }
}

#[test]
fn edge_cases_frame_as_eventsource_stream_frames_them_at_every_cut() {
    let cases: &[&[u8]] = &[
        b"data: a\n\n",
        b"data: a\r\n\r\n",
        b"data: a\r\rdata: b\r\r",
        b"data: a\r\ndata: b\n\r\n",
        b"data:no space\n\n",
        b"data:  two spaces\n\n",
        b"data: one\ndata: two\ndata\n\n",
        b": a comment\ndata: x\n\n",
        b"event: custom\ndata: {\"a\":1}\n\n",
        b"id: 7\ndata: x\n\ndata: y\n\n",
        b"retry: 1500\ndata: x\n\n",
        b"retry: soon\ndata: x\n\n",
        b"unknown: field\ndata: x\n\n",
        b"data: x\n\n\n\n\ndata: y\n\n",
        b"event: only-type\n\ndata: z\n\n",
        "data: {\"t\":\"a\u{2028}b\u{2029}c\u{85}\"}\n\n".as_bytes(),
        "data: multi-byte \u{1F600} \u{2713}\n\n".as_bytes(),
        b"data: the end without its blank line\n",
        b"data: the end without a line end",
    ];
    for c in cases {
        agree_at_every_cut(c);
    }
}

/// The differences the module names are real: were one gone, this fails and
/// the notes above are out of date.
#[test]
fn the_documented_differences_hold() {
    let tail: &[u8] = b"data: a\n\ndata: last";
    assert_eq!(core_frames(&[tail]).len(), 2);
    assert_eq!(crate_frames(&[tail]).len(), 1);
    let cr: &[u8] = b"data: a\r\rdata: b\r\r";
    assert_eq!(core_frames(&[cr]).len(), 2);
    assert_eq!(crate_frames(&[cr]).len(), 1);
    let bom = "\u{feff}data: after a BOM\n\n".as_bytes();
    assert_eq!(core_frames(&[bom])[0].1, "after a BOM");
    for at in 0..=bom.len() {
        let (a, b) = bom.split_at(at);
        assert_eq!(core_frames(&[a, b]), core_frames(&[bom]), "cut at {at}");
    }
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let panicked = std::panic::catch_unwind(|| crate_frames(&[bom])).is_err();
    std::panic::set_hook(quiet);
    assert!(
        panicked,
        "eventsource-stream now reads a BOM: compare it above"
    );
    let ids: &[u8] = b"id: 1\ndata: a\n\ndata: b\n\n";
    assert_eq!(core_frames(&[ids])[1].2, None);
    assert_eq!(crate_frames(&[ids])[1].2, "1");
}
