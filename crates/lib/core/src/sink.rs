//! Where an encoder writes: the client's events, each framed by the
//! transport as it is written, and each one's byte range and whether it is
//! a comment (a heartbeat, never logged). The gateway's run log and resume
//! read the spans instead of re-scanning the bytes for blank lines, and a
//! message transport sends each span as it is.
//!
//! Encoders write only an event's body (the JSON text, the protobuf
//! message) through [`Sink::event`] or its helpers ([`Sink::json`],
//! [`Sink::data`], [`Sink::done`]); the sink was made with its transport's
//! [`Framing`] and frames each body as it is written: the framing rules are
//! here (with the readers of [`crate::sse`] and [`crate::length`]), in no
//! encoder. No span is ever found by scanning the bytes.

use std::ops::Range;

use serde::Serialize;

use crate::{length, sse};

/// How a transport frames each event's body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Framing {
    /// An SSE event: `data: <body>\n\n`, one `data:` line per line of a
    /// body of several; comments (heartbeats) are sent.
    #[default]
    Sse,
    /// The binary transport's: the body behind its 4-byte big-endian
    /// length ([`crate::length`]).
    Length,
    /// The body alone, each event a message of its own (a WebSocket):
    /// no comment is sent.
    Message,
}

impl Framing {
    /// The framing of a byte stream of events: the binary transport's
    /// when `binary`, else SSE.
    pub fn stream(binary: bool) -> Framing {
        if binary {
            Framing::Length
        } else {
            Framing::Sse
        }
    }

    /// Appends `body` as one event of this framing (what a sink writes for
    /// [`Sink::data`]).
    pub fn write(self, out: &mut Vec<u8>, body: &[u8]) {
        Sink::appending(out, self, |sink| sink.data(body));
    }
}

/// What a span holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// An event the client acts on: logged, given an `id:` on resumable
    /// SSE routes.
    Event,
    /// A comment (`: ping`): sent, never logged.
    Comment,
}

/// One event's place in [`Sink::bytes`], its framing included (a message
/// transport's has none: the span is the message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub range: Range<usize>,
    pub kind: SpanKind,
}

/// The output buffer and the spans of the events written into it.
#[derive(Debug, Default, Clone)]
pub struct Sink {
    buf: Vec<u8>,
    spans: Vec<Span>,
    framing: Framing,
    /// Spans are not kept (the `&mut Vec<u8>` wrappers: bytes only).
    untracked: bool,
    /// Events (not comments) written so far, and where the last one is:
    /// kept untracked too, for [`replace_last_event`](Self::replace_last_event).
    written: u64,
    last: Option<Range<usize>>,
}

/// The most room [`Sink::take`] leaves for the next read: a stream idle
/// between reads keeps this much at most, not its largest read's.
pub const KEEP_ROOM: usize = 16 * 1024;

impl Sink {
    pub fn new(framing: Framing) -> Self {
        Sink {
            framing,
            ..Sink::default()
        }
    }

    /// A sink that only appends to `buf` and keeps no spans, for the
    /// `&mut Vec<u8>` APIs (benches, fuzz, the CLI): no cost beyond them.
    #[inline]
    pub fn untracked(framing: Framing, buf: Vec<u8>) -> Self {
        Sink {
            buf,
            framing,
            untracked: true,
            ..Sink::default()
        }
    }

    /// Runs `write` on an untracked sink over `out`'s allocation (no copy),
    /// appending to it: the `&mut Vec<u8>` APIs over the `Sink` ones.
    #[inline]
    pub fn appending<T>(
        out: &mut Vec<u8>,
        framing: Framing,
        write: impl FnOnce(&mut Sink) -> T,
    ) -> T {
        let mut sink = Sink::untracked(framing, std::mem::take(out));
        let r = write(&mut sink);
        *out = sink.into_bytes();
        r
    }

    pub fn framing(&self) -> Framing {
        self.framing
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
        if self.last.as_ref().is_some_and(|l| l.end > len) {
            self.last = None;
        }
    }

    #[inline]
    fn wrote(&mut self, range: Range<usize>, kind: SpanKind) {
        if kind == SpanKind::Event {
            self.written += 1;
            self.last = Some(range.clone());
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
        let Some(last) = self.last.take_if(|l| l.end == self.buf.len()) else {
            return false;
        };
        self.buf.truncate(last.start);
        if !self.untracked {
            self.spans.pop();
        }
        self.written -= 1;
        write(self);
        true
    }

    /// Appends one event whose body `write` appends, framed, and records
    /// its span: the encoders' one way in, as cheap as writing the framing
    /// by hand (no copy of the body). In SSE the body must be one line, as
    /// JSON is (serde escapes CR and LF in strings); text that may hold a
    /// line break goes through [`data`](Self::data).
    #[inline]
    pub fn event(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        self.try_event(|out| {
            write(out);
            true
        });
    }

    /// [`event`](Self::event) for a writer that may find it cannot write
    /// the event: `false` from `write` takes back what it wrote (nothing is
    /// sent). Whether the event was written.
    #[inline]
    pub fn try_event(&mut self, write: impl FnOnce(&mut Vec<u8>) -> bool) -> bool {
        let start = self.buf.len();
        match self.framing {
            Framing::Sse => self.buf.extend_from_slice(sse::DATA),
            Framing::Length => {
                length::begin_frame(&mut self.buf);
            }
            Framing::Message => {}
        }
        let body = self.buf.len();
        if !write(&mut self.buf) {
            self.buf.truncate(start);
            return false;
        }
        match self.framing {
            Framing::Sse => {
                debug_assert!(
                    !self.buf.get(body..).unwrap_or_default().contains(&b'\n'),
                    "an SSE event body of one line"
                );
                self.buf.extend_from_slice(sse::END);
            }
            Framing::Length => {
                if length::end_frame(&mut self.buf, start).is_err() {
                    return false;
                }
            }
            Framing::Message => {}
        }
        self.wrote(start..self.buf.len(), SpanKind::Event);
        true
    }

    /// A body that is not JSON (text as received, a message as received):
    /// in SSE, one `data:` line per line of it. Only here is a body looked
    /// at for line breaks.
    pub fn data(&mut self, body: impl AsRef<[u8]>) {
        let body = body.as_ref();
        if self.framing == Framing::Sse && memchr::memchr2(b'\n', b'\r', body).is_some() {
            let start = self.buf.len();
            sse::write_data(&mut self.buf, body);
            self.wrote(start..self.buf.len(), SpanKind::Event);
        } else {
            self.event(|out| out.extend_from_slice(body));
        }
    }

    /// One JSON value as one event. One serde_json cannot write (a map with
    /// keys that are not strings, which no encoder builds) is not written.
    #[inline]
    pub fn json<T: Serialize + ?Sized>(&mut self, value: &T) {
        self.try_event(|out| serde_json::to_writer(out, value).is_ok());
    }

    /// `[DONE]` as one event (Vercel's and AG-Kit's end marker).
    #[inline]
    pub fn done(&mut self) {
        self.event(|out| out.extend_from_slice(b"[DONE]"));
    }

    /// A comment (`: <text>`), sent but never logged; SSE only (a message
    /// or binary transport has no comments).
    pub fn comment(&mut self, text: &str) {
        if self.framing == Framing::Sse {
            let start = self.buf.len();
            sse::write_comment(&mut self.buf, text);
            self.wrote(start..self.buf.len(), SpanKind::Comment);
        }
    }

    /// Everything written so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The spans of the events written so far, in order.
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
        if self.buf.is_empty() {
            self.buf = Vec::new();
            self.spans = Vec::new();
        }
    }

    /// Empties the sink (keeping its allocations) for the next push.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
        self.last = None;
    }

    /// The bytes and spans, leaving the sink empty with room for as much
    /// again (up to [`KEEP_ROOM`] bytes): the next upstream read is most
    /// likely as large, and an empty buffer grew by doubling, a realloc and
    /// a copy each time, on every read of a stream that hands its bytes on.
    pub fn take(&mut self) -> (Vec<u8>, Vec<Span>) {
        self.last = None;
        // Spans bounded alike: an event is rarely under 64 bytes.
        let room = (
            self.buf.len().min(KEEP_ROOM),
            self.spans.len().min(KEEP_ROOM / 64),
        );
        let buf = std::mem::replace(&mut self.buf, Vec::with_capacity(room.0));
        let spans = std::mem::replace(&mut self.spans, Vec::with_capacity(room.1));
        (buf, spans)
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

    /// The bodies every framing is tested with: JSON, text of several
    /// lines (each kind of line end), an empty one, `[DONE]`, and bytes
    /// that are no text.
    fn write_all(sink: &mut Sink) {
        sink.json(&json!({"type": "a", "t": "x\ny\u{2028}"}));
        sink.data("x\r\ny\rz\n");
        sink.comment("ping");
        sink.data("");
        sink.done();
        sink.event(|out| out.extend_from_slice(b"{\"fast\":1}"));
        assert!(!sink.try_event(|out| {
            out.extend_from_slice(b"half");
            false
        }));
        if sink.framing() != Framing::Sse {
            sink.data([0xff, 0, 10]);
        }
    }

    /// What a reader of the framing gets back from `write_all`.
    fn bodies(framing: Framing) -> Vec<Vec<u8>> {
        let mut want: Vec<Vec<u8>> = vec![
            serde_json::to_vec(&json!({"type": "a", "t": "x\ny\u{2028}"})).unwrap(),
            b"x\ny\nz\n".to_vec(),
            b"".to_vec(),
            b"[DONE]".to_vec(),
            b"{\"fast\":1}".to_vec(),
        ];
        if framing == Framing::Sse {
            return want;
        }
        want[1] = b"x\r\ny\rz\n".to_vec();
        want.push(vec![0xff, 0, 10]);
        want
    }

    /// The spans tile the buffer: every byte written is in one.
    fn assert_tiles(sink: &Sink) {
        let mut at = 0;
        for s in sink.spans() {
            assert_eq!(s.range.start, at);
            at = s.range.end;
        }
        assert_eq!(at, sink.bytes().len());
    }

    /// SSE: the framer reads back each body (a body of several lines as
    /// they were, line ends made LF), at every split of the bytes; the
    /// comment is a span of its own.
    #[test]
    fn sse_framing_reads_back_at_every_split() {
        let mut sink = Sink::new(Framing::Sse);
        write_all(&mut sink);
        assert_tiles(&sink);
        let bytes = sink.bytes();
        assert_eq!(
            texts(&sink)[1..],
            [
                "data: x\ndata: y\ndata: z\ndata: \n\n",
                "data: \n\n",
                "data: [DONE]\n\n",
                "data: {\"fast\":1}\n\n"
            ]
        );
        assert_eq!(sink.spans()[2].kind, SpanKind::Comment);
        assert_eq!(&bytes[sink.spans()[2].range.clone()], b": ping\n\n");
        let want = bodies(Framing::Sse);
        for cut in 0..=bytes.len() {
            let mut framer = sse::SseFramer::default();
            let mut frames = Vec::new();
            framer.push(&bytes[..cut], &mut frames).unwrap();
            framer.push(&bytes[cut..], &mut frames).unwrap();
            framer.finish(&mut frames).unwrap();
            let got: Vec<&[u8]> = frames.iter().map(|f| f.data.as_bytes()).collect();
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    /// Length-delimited: the framer reads back each body as written, at
    /// every split; no comment is written.
    #[test]
    fn length_framing_reads_back_at_every_split() {
        let mut sink = Sink::new(Framing::Length);
        write_all(&mut sink);
        assert_tiles(&sink);
        assert!(sink.spans().iter().all(|s| s.kind == SpanKind::Event));
        let bytes = sink.bytes();
        let want = bodies(Framing::Length);
        for cut in 0..=bytes.len() {
            let mut framer = length::LengthFramer::default();
            let mut messages = Vec::new();
            framer.push(&bytes[..cut], &mut messages).unwrap();
            framer.push(&bytes[cut..], &mut messages).unwrap();
            framer.finish().unwrap();
            assert_eq!(messages, want, "cut at {cut}");
        }
        // Each span is one whole frame.
        for (span, body) in sink.spans().iter().zip(&want) {
            let mut one = Vec::new();
            length::write_frame(&mut one, body).unwrap();
            assert_eq!(&bytes[span.range.clone()], &one[..]);
        }
    }

    /// Messages: each span is one body exactly, however it was written
    /// (no framing to cut away), and no comment is written.
    #[test]
    fn message_framing_spans_are_the_bodies() {
        let mut sink = Sink::new(Framing::Message);
        write_all(&mut sink);
        assert_tiles(&sink);
        let got: Vec<&[u8]> = sink.events().collect();
        assert_eq!(got, bodies(Framing::Message));
        assert_eq!(sink.spans().len(), got.len());
    }

    /// The last event gives way to a frame as received only while nothing
    /// follows it; tracked or not, the count of events stays right.
    #[test]
    fn the_last_event_is_replaced_only_when_it_ends_the_buffer() {
        for mut sink in [
            Sink::new(Framing::Sse),
            Sink::untracked(Framing::Sse, Vec::new()),
        ] {
            sink.data("a");
            sink.data("mapped");
            assert!(sink.replace_last_event(|s| s.data("raw")));
            assert_eq!(sink.bytes(), b"data: a\n\ndata: raw\n\n");
            assert_eq!(sink.events_written(), 2);
            sink.comment("stray");
            assert!(!sink.replace_last_event(|s| s.data("again")));
            assert_eq!(sink.bytes(), b"data: a\n\ndata: raw\n\n: stray\n\n");
            sink.clear();
            assert!(!sink.replace_last_event(|s| s.data("none")));
            assert!(sink.bytes().is_empty());
        }
        // An empty message is an event like any other.
        let mut sink = Sink::new(Framing::Message);
        sink.data("");
        assert!(sink.replace_last_event(|s| s.data("raw")));
        assert_eq!(texts(&sink), ["raw"]);
    }

    #[test]
    fn take_leaves_the_sink_empty() {
        let mut sink = Sink::new(Framing::Sse);
        sink.json(&json!(1));
        sink.json(&json!(2));
        let (bytes, spans) = sink.take();
        assert_eq!(bytes, b"data: 1\n\ndata: 2\n\n");
        assert_eq!(spans.len(), 2);
        assert!(sink.is_empty() && sink.spans().is_empty());
    }

    #[test]
    fn take_leaves_room_for_as_much_again_up_to_a_bound() {
        let mut sink = Sink::new(Framing::Sse);
        sink.data("0123456789");
        let (bytes, spans) = sink.take();
        assert_eq!((bytes.len(), spans.len()), (18, 1));
        assert!(sink.is_empty() && sink.spans().is_empty());
        assert!(sink.buf.capacity() >= 18, "{}", sink.buf.capacity());
        // a huge chunk does not make an idle stream keep its size
        sink.data("x".repeat(4 * KEEP_ROOM));
        let _ = sink.take();
        assert!(sink.buf.capacity() <= KEEP_ROOM, "{}", sink.buf.capacity());
        assert!(sink.buf.capacity() >= KEEP_ROOM / 2);
    }

    #[test]
    fn untracked_keeps_bytes_only_and_truncate_drops_spans() {
        let mut sink = Sink::untracked(Framing::Sse, b"x".to_vec());
        sink.json(&json!(1));
        sink.event(|out| out.push(b'2'));
        assert!(sink.spans().is_empty());
        assert_eq!(sink.into_bytes(), b"xdata: 1\n\ndata: 2\n\n");
        let mut out = b"x".to_vec();
        let n = Sink::appending(&mut out, Framing::Length, |sink| {
            sink.json(&json!(1));
            sink.spans().len()
        });
        assert_eq!((out, n), (b"x\0\0\0\x011".to_vec(), 0));
        let mut sink = Sink::new(Framing::Sse);
        sink.json(&json!(1));
        let len = sink.bytes().len();
        sink.json(&json!(2));
        sink.truncate(len);
        assert_eq!(texts(&sink), ["data: 1\n\n"]);
    }
}
