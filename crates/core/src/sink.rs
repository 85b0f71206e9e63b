//! Where an encoder writes: the client's bytes plus, for each SSE event
//! written, its byte range and whether it is a comment (a heartbeat, never
//! logged). The gateway's run log and resume read the spans instead of
//! re-scanning the bytes for blank lines.
//!
//! Encoders write each SSE event whole through [`Sink::event`] or the helpers
//! built on it ([`Sink::json`], [`Sink::data`], [`Sink::done`]), or wrap
//! hand-written bytes in [`Sink::begin_event`] / [`Sink::end_event`]; bytes
//! written through [`Sink::buf_mut`] outside an event belong to no span. No
//! span is ever found by scanning the bytes.

use std::borrow::Cow;
use std::ops::Range;

use serde::Serialize;

use crate::sse;

/// What a span holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// An SSE event the client acts on: logged, given an `id:` on resumable
    /// routes.
    Event,
    /// A comment (`: ping`): sent, never logged.
    Comment,
}

/// One SSE event's place in [`Sink::bytes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub range: Range<usize>,
    pub kind: SpanKind,
}

impl Span {
    /// What a message transport (a WebSocket) sends for this event of
    /// `bytes` (the sink's): the event without the framing its encoder
    /// wrote around it. A binary message without its length prefix; an SSE
    /// event's `data:` fields, as the SSE framer would join them (encoders
    /// write no other field). Only an event of several `data:` lines (text
    /// with line breaks) is copied.
    pub fn payload<'a>(&self, bytes: &'a [u8], binary: bool) -> Cow<'a, [u8]> {
        let event = bytes.get(self.range.clone()).unwrap_or_default();
        if binary {
            return Cow::Borrowed(event.get(4..).unwrap_or_default());
        }
        let mut data = event
            .split(|b| *b == b'\n')
            .filter_map(|line| line.strip_prefix(b"data:"))
            .map(|v| v.strip_prefix(b" ").unwrap_or(v));
        let first = data.next().unwrap_or_default();
        let Some(second) = data.next() else {
            return Cow::Borrowed(first);
        };
        let mut joined = [first, second].join(&b'\n');
        for more in data {
            joined.push(b'\n');
            joined.extend_from_slice(more);
        }
        Cow::Owned(joined)
    }
}

/// The output buffer and the spans of the events written into it.
#[derive(Debug, Default, Clone)]
pub struct Sink {
    buf: Vec<u8>,
    spans: Vec<Span>,
    /// Where the event being written started, between `begin_event` and
    /// `end_event`.
    open: Option<(usize, SpanKind)>,
    /// Spans are not kept (the `&mut Vec<u8>` wrappers: bytes only).
    untracked: bool,
    /// Events (not comments) written so far, and where the last one
    /// starts: kept untracked too, for [`replace_last_event`](Self::replace_last_event).
    written: u64,
    last: Range<usize>,
}

impl Sink {
    pub fn new() -> Self {
        Sink::default()
    }

    /// A sink that only appends to `buf` and keeps no spans, for the
    /// `&mut Vec<u8>` APIs (benches, fuzz, the CLI): no cost beyond them.
    #[inline]
    pub fn untracked(buf: Vec<u8>) -> Self {
        Sink {
            buf,
            spans: Vec::new(),
            open: None,
            untracked: true,
            written: 0,
            last: 0..0,
        }
    }

    /// Runs `write` on an untracked sink over `out`'s allocation (no copy),
    /// appending to it: the `&mut Vec<u8>` APIs over the `Sink` ones.
    #[inline]
    pub fn appending<T>(out: &mut Vec<u8>, write: impl FnOnce(&mut Sink) -> T) -> T {
        let mut sink = Sink::untracked(std::mem::take(out));
        let r = write(&mut sink);
        *out = sink.into_bytes();
        r
    }

    /// The bytes, the spans dropped.
    #[inline]
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Forgets what was written from `len` on (its spans with it).
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
        self.spans.retain(|s| s.range.end <= len);
        if matches!(self.open, Some((start, _)) if start > len) {
            self.open = None;
        }
        if self.last.end > len {
            self.last = 0..0;
        }
    }

    /// Starts an event at the current end of the buffer. A second `begin`
    /// without an `end` ends the first one there.
    pub fn begin_event(&mut self) {
        self.begin(SpanKind::Event);
    }

    /// Ends the event begun last; an event that wrote no byte leaves no span.
    pub fn end_event(&mut self) {
        if let Some((start, kind)) = self.open.take() {
            let end = self.buf.len();
            if end > start {
                self.wrote(start..end, kind);
            }
        }
    }

    fn begin(&mut self, kind: SpanKind) {
        self.end_event();
        self.open = Some((self.buf.len(), kind));
    }

    /// Records that `range` of the buffer (already written) is one event:
    /// for an encoder that writes through the `&mut Vec<u8>` API and notes
    /// where each of its events went (see `Encoder::encode_to`).
    pub fn mark_event(&mut self, range: Range<usize>) {
        self.end_event();
        if range.start < range.end && range.end <= self.buf.len() {
            self.wrote(range, SpanKind::Event);
        }
    }

    #[inline]
    fn wrote(&mut self, range: Range<usize>, kind: SpanKind) {
        if kind == SpanKind::Event {
            self.written += 1;
            self.last = range.clone();
        }
        if !self.untracked {
            self.spans.push(Span { range, kind });
        }
    }

    /// How many events (not comments) were written so far.
    pub fn events_written(&self) -> u64 {
        self.written
    }

    /// Writes `write`'s event in place of the last event written (a
    /// same-dialect frame as received instead of the encoder's mapping of
    /// it, see `Translator::same_dialect`), when that event is the last
    /// thing in the buffer; else writes nothing. Whether it replaced it.
    pub fn replace_last_event(&mut self, write: impl FnOnce(&mut Sink)) -> bool {
        self.end_event();
        if self.written == 0 || self.last.end != self.buf.len() || self.last.is_empty() {
            return false;
        }
        self.buf.truncate(self.last.start);
        if !self.untracked {
            self.spans.pop();
        }
        self.written -= 1;
        write(self);
        true
    }

    /// The buffer, for writers that do not know about spans (inside a
    /// `begin_event`/`end_event` pair, what they write is that event's).
    pub fn buf_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Appends one whole SSE event, which `write` must end with its blank
    /// line, and records its span: the encoders' one way in, as cheap as
    /// writing to the buffer (the start offset taken before, one push after).
    #[inline]
    pub fn event(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        self.framed(SpanKind::Event, write);
    }

    #[inline]
    fn framed(&mut self, kind: SpanKind, write: impl FnOnce(&mut Vec<u8>)) {
        if self.open.is_some() {
            self.end_event();
        }
        let start = self.buf.len();
        write(&mut self.buf);
        let end = self.buf.len();
        if end > start {
            self.wrote(start..end, kind);
        }
    }

    /// `data: <payload>\n\n` as one event (see [`sse::write_data`]).
    #[inline]
    pub fn data(&mut self, payload: &str) {
        self.event(|out| sse::write_data(out, payload));
    }

    /// One JSON value as one event (see [`sse::write_json`]).
    #[inline]
    pub fn json<T: Serialize + ?Sized>(&mut self, value: &T) {
        self.event(|out| sse::write_json(out, value));
    }

    /// `data: [DONE]\n\n` as one event.
    #[inline]
    pub fn done(&mut self) {
        self.event(sse::write_done);
    }

    /// A comment (`: <text>\n\n`), sent but never logged.
    pub fn comment(&mut self, text: &str) {
        self.framed(SpanKind::Comment, |out| sse::write_comment(out, text));
    }

    /// One already framed SSE event (a passthrough frame as received), which
    /// must end with its blank line.
    pub fn raw_event(&mut self, bytes: &[u8]) {
        self.event(|out| out.extend_from_slice(bytes));
    }

    /// One message of a binary transport, behind its length prefix, as one
    /// event (a passthrough message as received). One over `u32::MAX` bytes
    /// has no prefix to say so and is not written.
    pub fn message(&mut self, message: &[u8]) {
        self.event(|out| {
            let _ = crate::length::write_frame(out, message);
        });
    }

    /// Everything written so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The spans of the events ended so far, in order.
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// The bytes of each logged event (comments left out), in order.
    pub fn events(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.spans
            .iter()
            .filter(|s| s.kind == SpanKind::Event)
            .filter_map(|s| self.buf.get(s.range.clone()))
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Lets its room go if it holds nothing (a live stream between reads).
    pub fn release(&mut self) {
        if self.buf.is_empty() && self.open.is_none() {
            self.buf = Vec::new();
            self.spans = Vec::new();
        }
    }

    /// Empties the sink (keeping its allocations) for the next push.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
        self.open = None;
        self.last = 0..0;
    }

    /// The bytes and spans, leaving the sink empty.
    pub fn take(&mut self) -> (Vec<u8>, Vec<Span>) {
        self.end_event();
        self.last = 0..0;
        (
            std::mem::take(&mut self.buf),
            std::mem::take(&mut self.spans),
        )
    }

    /// Appends the bytes to `out` (the `&mut Vec<u8>` APIs' wrapper) and
    /// forgets them.
    pub fn drain_into(&mut self, out: &mut Vec<u8>) {
        self.end_event();
        out.append(&mut self.buf);
        self.spans.clear();
        self.last = 0..0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(sink: &Sink) -> Vec<String> {
        sink.events()
            .map(|e| String::from_utf8(e.to_vec()).unwrap())
            .collect()
    }

    /// The last event gives way to a frame as received only while nothing
    /// follows it; tracked or not, the count of events stays right.
    #[test]
    fn the_last_event_is_replaced_only_when_it_ends_the_buffer() {
        for mut sink in [Sink::new(), Sink::untracked(Vec::new())] {
            sink.data("a");
            sink.data("mapped");
            assert!(sink.replace_last_event(|s| s.data("raw")));
            assert_eq!(sink.bytes(), b"data: a\n\ndata: raw\n\n");
            assert_eq!(sink.events_written(), 2);
            sink.buf_mut().extend_from_slice(b": stray\n\n");
            assert!(!sink.replace_last_event(|s| s.data("again")));
            assert_eq!(sink.bytes(), b"data: a\n\ndata: raw\n\n: stray\n\n");
            sink.clear();
            assert!(!sink.replace_last_event(|s| s.data("none")));
            assert!(sink.bytes().is_empty());
        }
    }

    /// A message transport's payload of each event: the data as the SSE
    /// framer reads it back, or the message behind its length prefix.
    #[test]
    fn a_span_s_payload_is_its_event_without_the_framing() {
        let mut sink = Sink::new();
        sink.json(&json!({"type": "a"}));
        sink.data("x\r\ny\n");
        sink.data("");
        sink.done();
        let mut framer = crate::sse::SseFramer::default();
        let mut frames = Vec::new();
        framer.push(sink.bytes(), &mut frames).unwrap();
        let payloads: Vec<Cow<[u8]>> = sink
            .spans()
            .iter()
            .map(|s| s.payload(sink.bytes(), false))
            .collect();
        assert_eq!(payloads.len(), frames.len());
        for (p, f) in payloads.iter().zip(&frames) {
            assert_eq!(&p[..], f.data.as_bytes());
        }
        assert!(matches!(payloads[0], Cow::Borrowed(b"{\"type\":\"a\"}")));
        assert_eq!(&payloads[1][..], b"x\ny\n");

        let mut sink = Sink::new();
        sink.message(&[8, 1]);
        sink.message(&[]);
        let payloads: Vec<Cow<[u8]>> = sink
            .spans()
            .iter()
            .map(|s| s.payload(sink.bytes(), true))
            .collect();
        assert_eq!(payloads, [&[8u8, 1][..], &[][..]]);
    }

    #[test]
    fn helpers_record_one_span_per_event() {
        let mut sink = Sink::new();
        sink.json(&json!({"type": "a"}));
        sink.data("x\ny");
        sink.done();
        assert_eq!(
            sink.bytes(),
            b"data: {\"type\":\"a\"}\n\ndata: x\ndata: y\n\ndata: [DONE]\n\n"
        );
        assert_eq!(
            texts(&sink),
            [
                "data: {\"type\":\"a\"}\n\n",
                "data: x\ndata: y\n\n",
                "data: [DONE]\n\n"
            ]
        );
        // The spans tile the buffer.
        let mut at = 0;
        for s in sink.spans() {
            assert_eq!(s.range.start, at);
            at = s.range.end;
        }
        assert_eq!(at, sink.bytes().len());
    }

    #[test]
    fn comments_are_spans_but_not_logged() {
        let mut sink = Sink::new();
        sink.json(&json!(1));
        sink.comment("ping");
        sink.json(&json!(2));
        assert_eq!(sink.spans().len(), 3);
        assert_eq!(sink.spans()[1].kind, SpanKind::Comment);
        assert_eq!(&sink.bytes()[sink.spans()[1].range.clone()], b": ping\n\n");
        assert_eq!(texts(&sink), ["data: 1\n\n", "data: 2\n\n"]);
    }

    #[test]
    fn begin_end_around_hand_written_bytes() {
        let mut sink = Sink::new();
        sink.begin_event();
        sse::write_id(sink.buf_mut(), "7");
        sse::write_json(sink.buf_mut(), &json!({"a": 1}));
        sink.end_event();
        // An empty event leaves no span; a begin ends the event before it.
        sink.begin_event();
        sink.end_event();
        sink.begin_event();
        sink.buf_mut().extend_from_slice(b"data: 1\n\n");
        sink.begin_event();
        sink.buf_mut().extend_from_slice(b"data: 2\n\n");
        // A whole event written through `event` ends the one still open.
        sink.event(|out| out.extend_from_slice(b"data: 3\n\n"));
        sink.end_event();
        assert_eq!(
            texts(&sink),
            [
                "id: 7\ndata: {\"a\":1}\n\n",
                "data: 1\n\n",
                "data: 2\n\n",
                "data: 3\n\n"
            ]
        );
    }

    #[test]
    fn spans_are_the_same_whatever_the_split_of_the_writes() {
        let events: Vec<&[u8]> = vec![
            b"data: {\"a\":1}\n\n",
            b"event: x\ndata: 2\ndata: 3\n\n",
            b": ping\n\n",
            b"data: [DONE]\n\n",
        ];
        let whole: Vec<u8> = events.concat();
        let expected: Vec<Span> = {
            let mut at = 0;
            events
                .iter()
                .map(|e| {
                    let kind = if e.first() == Some(&b':') {
                        SpanKind::Comment
                    } else {
                        SpanKind::Event
                    };
                    at += e.len();
                    Span {
                        range: at - e.len()..at,
                        kind,
                    }
                })
                .collect()
        };
        for cut in 0..=whole.len() {
            // Each event written in two writes, the second starting at `cut`
            // when it falls inside the event.
            let mut sink = Sink::new();
            let mut at = 0;
            for (e, span) in events.iter().zip(&expected) {
                sink.begin(span.kind);
                let mid = cut.clamp(at, at + e.len()) - at;
                sink.buf_mut().extend_from_slice(&e[..mid]);
                sink.buf_mut().extend_from_slice(&e[mid..]);
                at += e.len();
                sink.end_event();
            }
            assert_eq!(sink.bytes(), &whole[..]);
            assert_eq!(sink.spans(), &expected[..], "cut at {cut}");
        }
    }

    #[test]
    fn take_and_drain_leave_the_sink_empty() {
        let mut sink = Sink::new();
        sink.json(&json!(1));
        sink.begin_event();
        sink.buf_mut().extend_from_slice(b"data: 2\n\n");
        let (bytes, spans) = sink.take();
        assert_eq!(bytes, b"data: 1\n\ndata: 2\n\n");
        assert_eq!(spans.len(), 2);
        assert!(sink.is_empty() && sink.spans().is_empty());
        sink.json(&json!(3));
        let mut out = b"x".to_vec();
        sink.drain_into(&mut out);
        assert_eq!(out, b"xdata: 3\n\n");
        assert!(sink.is_empty() && sink.spans().is_empty());
    }

    #[test]
    fn untracked_keeps_bytes_only_and_truncate_drops_spans() {
        let mut sink = Sink::untracked(b"x".to_vec());
        sink.json(&json!(1));
        sink.event(|out| out.extend_from_slice(b"data: 2\n\n"));
        assert!(sink.spans().is_empty());
        assert_eq!(sink.into_bytes(), b"xdata: 1\n\ndata: 2\n\n");
        let mut out = b"x".to_vec();
        let n = Sink::appending(&mut out, |sink| {
            sink.json(&json!(1));
            sink.spans().len()
        });
        assert_eq!((out, n), (b"xdata: 1\n\n".to_vec(), 0));
        let mut sink = Sink::new();
        sink.json(&json!(1));
        let len = sink.bytes().len();
        sink.json(&json!(2));
        sink.truncate(len);
        assert_eq!(texts(&sink), ["data: 1\n\n"]);
    }

    #[test]
    fn marked_events_become_spans() {
        let mut sink = Sink::new();
        sse::write_json(sink.buf_mut(), &json!(1));
        let at = sink.bytes().len();
        sse::write_json(sink.buf_mut(), &json!(2));
        sink.mark_event(0..at);
        sink.mark_event(at..sink.bytes().len());
        sink.mark_event(5..5);
        sink.mark_event(0..1000);
        assert_eq!(texts(&sink), ["data: 1\n\n", "data: 2\n\n"]);
    }
}
