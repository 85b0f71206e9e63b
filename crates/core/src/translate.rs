//! Framer + decoder + encoder: one upstream stream in, one client stream out,
//! incrementally. Used by the CLI's `translate` and by the gateway.

use crate::assemble::MessageAssembler;
use crate::codec::{DecodeError, Decoder, Encoder};
use crate::event::{Event, EventKind};
use crate::journal::{Journal, Setup, Step};
use crate::length::{FramingError, LengthFramer};
use crate::shape::{Keep, Shaper};
use crate::sink::Sink;
use crate::sse::{Frame, FrameError, SseFramer};

/// Why a translation stopped early. The output written so far stays well
/// formed: the encoder has already reported the error in its dialect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// The binary transport's framing (see [`Translator::with_binary_input`]).
    #[error("{0}")]
    Framing(#[from] FramingError),
    /// The input ended before the run did (no terminal event): the run
    /// failed, and the output says so in its dialect (AG-UI 1.1: a
    /// consumer must not synthesize `RUN_FINISHED` for a truncated run).
    #[error("the input ended before the run finished")]
    Truncated,
    /// An event whose parsed form would pass [`crate::cost::limit`].
    #[error("line {line}: {cost}")]
    TooCostly {
        line: u64,
        cost: crate::cost::TooCostly,
    },
}

impl TranslateError {
    /// The input line the error is about.
    pub fn line(&self) -> u64 {
        match self {
            TranslateError::Frame(e) => e.line(),
            TranslateError::Decode(e) => e.line,
            TranslateError::TooCostly { line, .. } => *line,
            TranslateError::Framing(_) | TranslateError::Truncated => 0,
        }
    }
}

/// The `[DONE]` end marker as encoders write it.
const DONE: &[u8] = b"data: [DONE]\n\n";

/// Input is framed this many bytes at a time (see [`Translator::push`]).
const PIECE: usize = 4096;

/// A running translation. Feed upstream bytes with [`push`](Self::push);
/// each call appends the client bytes it could produce to `out`, so the caller
/// can flush per chunk.
pub struct Translator {
    framer: SseFramer,
    /// Set when the input is the dialect's binary transport: messages
    /// behind length prefixes instead of SSE.
    binary: Option<BinaryInput>,
    decoder: Box<dyn Decoder>,
    encoder: Box<dyn Encoder>,
    /// Owns the stream's shape between decoder and encoder; `None` when
    /// frames pass through as received.
    shaper: Option<Shaper>,
    /// Same dialect on both sides: each frame is written as it came and the
    /// encoder only observes its events (to close what is open on an error
    /// or at the end).
    passthrough: bool,
    /// What the encoder writes while only observing (discarded).
    scratch: Sink,
    /// Passthrough: the upstream's `[DONE]` went out, so the client reads
    /// nothing more; the encoder still sees the rest, its bytes dropped.
    sealed: bool,
    frames: Vec<Frame>,
    events: Vec<Event>,
    /// Events the shaper puts before the one it is given.
    shaped: Vec<Event>,
    /// Events that passed through, for metrics.
    pub events_translated: u64,
    /// Upstream events (SSE frames or binary messages) read so far.
    pub frames_read: u64,
    /// Builds the messages the run produced, when the caller keeps history.
    assembler: Option<MessageAssembler>,
    /// A `RunFinished`/`RunError` came through: the upstream ended the run.
    run_ended: bool,
    input_ended: bool,
    done: bool,
    /// What the encoder was given and where its bytes went, while a caller
    /// keeps it (see [`keep_journal`](Self::keep_journal)).
    journal: Option<Journal>,
    /// While the encoder only observes (its bytes go to `scratch`): the
    /// index of the next span of the caller's sink.
    observe_at: Option<usize>,
    /// The encoder's context as it was built, the journal's first step.
    setup: Option<Setup>,
    /// `Raw` events are left out (`EncodeContext::drop_raw`).
    drop_raw: bool,
}

impl Translator {
    pub fn new(framer: SseFramer, decoder: Box<dyn Decoder>, encoder: Box<dyn Encoder>) -> Self {
        Translator {
            framer,
            binary: None,
            decoder,
            encoder,
            shaper: Some(Shaper::new()),
            passthrough: false,
            scratch: Sink::untracked(Vec::new()),
            sealed: false,
            frames: Vec::new(),
            events: Vec::new(),
            shaped: Vec::new(),
            events_translated: 0,
            frames_read: 0,
            assembler: None,
            run_ended: false,
            input_ended: false,
            done: false,
            journal: None,
            observe_at: None,
            setup: None,
            drop_raw: false,
        }
    }

    /// Leaves `Raw` events out of a translated stream (a passthrough writes
    /// the upstream's frames as they came).
    pub fn drop_raw(&mut self) {
        self.drop_raw = true;
    }

    /// The context the encoder was built with (see [`Setup`]), for the
    /// journal to begin with.
    pub fn note_setup(&mut self, setup: Setup) {
        self.setup = Some(setup);
    }

    /// From now on, notes every call the encoder gets with the span of the
    /// output it belongs to (see [`Noted`]); the caller takes them with
    /// [`take_journal`](Self::take_journal) whenever it takes the output
    /// (span indices are the output sink's, from its last clear).
    pub fn keep_journal(&mut self) {
        if self.journal.is_none() {
            let mut journal = Journal::default();
            if let Some(setup) = self.setup.take() {
                journal.push(&Step::Begin(setup), 0);
            }
            self.journal = Some(journal);
        }
    }

    /// The steps noted since the last call.
    pub fn take_journal(&mut self) -> Journal {
        match &mut self.journal {
            Some(j) => std::mem::take(j),
            None => Journal::default(),
        }
    }

    /// Hands back a taken journal, emptied, so that its room serves the
    /// next chunk: a chunk of a thousand events would otherwise grow a new
    /// one by doubling, each time (a large reallocation, a copy and fresh
    /// pages, every upstream read at saturation).
    pub fn give_back_journal(&mut self, mut steps: Journal) {
        if let Some(j) = &mut self.journal {
            if j.is_empty() && j.capacity() < steps.capacity() {
                steps.clear();
                *j = steps;
            }
        }
    }

    /// Notes a step whose call began when `out` had `before` spans.
    fn note(&mut self, write: impl FnOnce(&mut Journal, usize), before: usize, out: &Sink) {
        let Some(journal) = &mut self.journal else {
            return;
        };
        let span = match self.observe_at {
            Some(at) => at,
            None => {
                let after = out.spans().len();
                if after > before {
                    after - 1
                } else {
                    after
                }
            }
        };
        write(journal, span);
    }

    /// A translator between an upstream and a client of the same dialect:
    /// the client gets the upstream's frames unchanged (unknown events and
    /// extra fields included; `id:`/`event:`/`retry:` lines aside, which no
    /// dialect here gives meaning to), except the `[DONE]` end marker, which
    /// the encoder writes at [`finish`](Self::finish) as on any route. The
    /// encoder sees every event, its output discarded, so that an error or a
    /// cut stream still closes exactly what is open.
    pub fn passthrough(
        framer: SseFramer,
        decoder: Box<dyn Decoder>,
        encoder: Box<dyn Encoder>,
    ) -> Self {
        let mut t = Translator::new(framer, decoder, encoder);
        t.shaper = None;
        t.passthrough = true;
        t
    }

    /// Reads the input as the dialect's binary transport: length-prefixed
    /// messages (at most `max_message_bytes` each), each mapped by the
    /// decoder's `decode_binary`. On a same-dialect route a message passes
    /// through as received, so the client must take the binary form too.
    pub fn with_binary_input(mut self, max_message_bytes: usize) -> Self {
        self.binary = Some(BinaryInput {
            framer: LengthFramer::new(max_message_bytes),
            messages: Vec::new(),
            index: 0,
        });
        self
    }

    /// Also assembles the messages the run produces (see [`take_messages`](Self::take_messages)).
    pub fn with_assembler(mut self, assembler: MessageAssembler) -> Self {
        self.assembler = Some(assembler);
        self
    }

    /// The messages assembled so far (empty without an assembler).
    pub fn take_messages(&mut self) -> Vec<crate::request::Message> {
        self.assembler
            .take()
            .map(MessageAssembler::finish)
            .unwrap_or_default()
    }

    /// Whether the upstream ended its run itself (finished or errored).
    pub fn run_ended(&self) -> bool {
        self.run_ended
    }

    /// [`finish`](Self::finish), with a truncated input as `Ok(false)`:
    /// whether the run ended properly.
    pub fn finish_live_to(&mut self, out: &mut Sink) -> Result<bool, TranslateError> {
        match self.finish_to(out) {
            Ok(()) => Ok(true),
            Err(TranslateError::Truncated) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// [`push_to`](Self::push_to), appending to a plain buffer.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), TranslateError> {
        with_buffer(out, |sink| self.push_to(bytes, sink))
    }

    /// [`finish_to`](Self::finish_to), appending to a plain buffer.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), TranslateError> {
        with_buffer(out, |sink| self.finish_to(sink))
    }

    /// [`finish_live_to`](Self::finish_live_to), appending to a plain buffer.
    pub fn finish_live(&mut self, out: &mut Vec<u8>) -> Result<bool, TranslateError> {
        with_buffer(out, |sink| self.finish_live_to(sink))
    }

    /// [`fail_to`](Self::fail_to), appending to a plain buffer.
    pub fn fail(&mut self, message: &str, code: Option<&str>, out: &mut Vec<u8>) {
        with_buffer(out, |sink| self.fail_to(message, code, sink))
    }

    pub fn encoder(&self) -> &dyn Encoder {
        self.encoder.as_ref()
    }

    /// Feeds upstream bytes. On error the client stream is closed with the
    /// dialect's error and the translator accepts nothing more.
    pub fn push_to(&mut self, bytes: &[u8], out: &mut Sink) -> Result<(), TranslateError> {
        if self.done {
            return Ok(());
        }
        // In pieces, so that the frames of one piece are decoded (and their
        // buffers handed back to the framer) before the next piece is cut:
        // a large read then reuses a few buffers instead of holding many.
        for piece in bytes.chunks(PIECE) {
            if let Some(b) = &mut self.binary {
                let framed = b.framer.push(piece, &mut b.messages);
                let decoded = self.drain_messages(out);
                self.on_error(decoded.and(framed.map_err(TranslateError::from)), out)?;
                continue;
            }
            let framed = self.framer.push(piece, &mut self.frames);
            let decoded = self.drain_frames(out);
            // Frames cut before a framing error are still delivered first.
            let r = decoded.and(framed.map_err(TranslateError::from));
            self.on_error(r, out)?;
        }
        Ok(())
    }

    /// Bytes of an upstream event not yet complete, held until it is.
    pub fn buffered_bytes(&self) -> usize {
        match &self.binary {
            Some(b) => b.framer.buffered_bytes(),
            None => self.framer.buffered_bytes(),
        }
    }

    /// Lets go of the room kept between reads (frames, events, the framer's
    /// spare buffers), which a read takes again. A live stream calls it when
    /// its upstream has nothing ready, so that a stream waiting for its
    /// upstream holds its state and no more.
    pub fn release_idle(&mut self) {
        fn release<T>(v: &mut Vec<T>) {
            if v.is_empty() {
                *v = Vec::new();
            }
        }
        release(&mut self.frames);
        release(&mut self.events);
        release(&mut self.shaped);
        if let Some(j) = &mut self.journal {
            j.release_if_empty();
        }
        self.framer.release_idle();
        if let Some(b) = &mut self.binary {
            release(&mut b.messages);
        }
    }

    /// The upstream ended: flush the last event, close what is open, write the
    /// dialect's end marker. Input that ends before the run did is a failure
    /// (live or offline, whatever the dialect): the output ends with the
    /// dialect's error, code `upstream_closed`, and this returns
    /// [`TranslateError::Truncated`]. A stream that simply stops is success to
    /// some clients (`@ag-ui/client`), so it is never left to them to guess.
    pub fn finish_to(&mut self, out: &mut Sink) -> Result<(), TranslateError> {
        if self.done {
            return Ok(());
        }
        self.end_input(out)?;
        if self.done {
            return Ok(());
        }
        if !self.run_ended {
            self.fail_to(
                "the upstream closed the stream before the run finished",
                Some("upstream_closed"),
                out,
            );
            return Err(TranslateError::Truncated);
        }
        if self.sealed {
            // Passthrough: the upstream's `[DONE]` is out, nothing follows it.
            let mut scratch = std::mem::take(&mut self.scratch);
            self.observe_at = Some(out.spans().len());
            self.encoder.finish_to(&mut scratch);
            self.note(|j, span| j.push(&Step::Finish, span), 0, &scratch);
            self.observe_at = None;
            self.scratch = scratch;
        } else {
            let before = out.spans().len();
            self.encoder.finish_to(out);
            self.note(|j, span| j.push(&Step::Finish, span), before, out);
        }
        self.done = true;
        Ok(())
    }

    /// Ends the client stream with an error that is not the upstream bytes'
    /// fault (a timeout, a dropped connection), in the client's dialect.
    pub fn fail_to(&mut self, message: &str, code: Option<&str>, out: &mut Sink) {
        if !self.done {
            if self.sealed {
                self.observe_pending(out.spans().len());
            } else {
                if self.passthrough {
                    // What the client has as received, the encoder sees
                    // before it writes the failure (not written again).
                    self.decoder.release_passed(&mut self.events);
                    self.observe_pending(out.spans().len());
                }
                self.encode_pending(out);
                let before = out.spans().len();
                self.encoder.fail_to(message, code, out);
                let step = |j: &mut Journal, span| {
                    let step = Step::Fail {
                        message: message.to_string(),
                        code: code.map(str::to_string),
                    };
                    j.push(&step, span);
                };
                self.note(step, before, out);
            }
            self.done = true;
        }
    }

    /// Flushes the framer and the decoder, once.
    fn end_input(&mut self, out: &mut Sink) -> Result<(), TranslateError> {
        if self.input_ended {
            return Ok(());
        }
        self.input_ended = true;
        let framed = match &mut self.binary {
            Some(b) => b.framer.finish().map_err(TranslateError::from),
            None => self
                .framer
                .finish(&mut self.frames)
                .map_err(TranslateError::from)
                .and_then(|_| self.drain_frames(out)),
        };
        let r = framed.and_then(|_| {
            self.decoder
                .finish(&mut self.events)
                .map_err(TranslateError::from)
        });
        if self.passthrough {
            // What the decoder held back came from frames already written,
            // unless it says otherwise (a Vercel approval request, held for
            // the run's end and not written where it came); and an end
            // marker the encoder writes for what the dialect implies at the
            // end (AG-Kit: a run waiting on an interrupt ends) is still the
            // client's.
            if self.sealed {
                self.observe_pending(out.spans().len());
            } else if !self.decoder.frame_passes() {
                self.encode_pending(out);
            } else {
                self.end_marker_from_observed(out);
            }
        } else {
            self.encode_pending(out);
        }
        self.on_error(r, out)
    }

    fn drain_frames(&mut self, out: &mut Sink) -> Result<(), TranslateError> {
        let mut result = Ok(());
        let mut frames = std::mem::take(&mut self.frames);
        for frame in frames.drain(..) {
            self.frames_read += 1;
            // Checked before any decoder parses it (the rule's one place for
            // text events; binary ones are held to it as they are read).
            if let Err(cost) = crate::cost::check(frame.data.as_bytes()) {
                let line = frame.line;
                result = Err(TranslateError::TooCostly { line, cost });
                break;
            }
            if let Err(mut e) = self.decoder.decode(&frame, &mut self.events) {
                e.line = frame.line;
                result = Err(e.into());
                break;
            }
            if self.passthrough {
                if self.sealed {
                    // Nothing is written after the end marker.
                    self.observe_pending(out.spans().len());
                } else if frame.is_done() {
                    // The end marker is the encoder's: written when the
                    // encoder ends the stream with one here (not after a
                    // failed AG-Kit run, whose client takes `[DONE]` for
                    // success; a Vercel encoder writes its own at `finish`).
                    self.end_marker_from_observed(out);
                } else if self.decoder.frame_passes()
                    && self.events.iter().all(|e| self.encoder.passes(e))
                {
                    // Observed, then written as received; unless the
                    // encoder ended the stream on it with its end marker
                    // (any AG-Kit frame after interrupts ends their run
                    // first): the marker then, and nothing after it, as on
                    // every route.
                    if !self.end_marker_from_observed(out) {
                        out.data(&frame.data);
                    }
                } else {
                    self.encode_pending(out);
                }
            }
            self.framer.recycle(frame);
        }
        frames.clear();
        self.frames = frames;
        if self.passthrough {
            // What a frame that failed to decode left is not written, but
            // for the end marker of a run it ended before its fault (an
            // AG-Kit frame after interrupts): the run did end.
            if self.sealed {
                self.observe_pending(out.spans().len());
            } else {
                self.end_marker_from_observed(out);
            }
        }
        self.encode_pending(out);
        result
    }

    /// [`drain_frames`](Self::drain_frames) for binary input.
    fn drain_messages(&mut self, out: &mut Sink) -> Result<(), TranslateError> {
        let Some(mut b) = self.binary.take() else {
            return Ok(());
        };
        let mut result = Ok(());
        let mut messages = std::mem::take(&mut b.messages);
        for message in messages.drain(..) {
            b.index += 1;
            self.frames_read += 1;
            if let Err(mut e) = self.decoder.decode_binary(&message, &mut self.events) {
                // Messages have no lines: the 1-based message index.
                e.line = b.index;
                result = Err(e.into());
                break;
            }
            if self.passthrough {
                if self.decoder.frame_passes() && self.events.iter().all(|e| self.encoder.passes(e))
                {
                    self.observe_pending(out.spans().len());
                    out.message(&message);
                } else {
                    self.encode_pending(out);
                }
            }
            b.framer.recycle(message);
        }
        messages.clear();
        b.messages = messages;
        self.binary = Some(b);
        if self.passthrough {
            self.observe_pending(out.spans().len());
        }
        self.encode_pending(out);
        result
    }

    fn encode_pending(&mut self, out: &mut Sink) {
        // By reference: events are large, moving each out costs (the
        // journal writes each from the borrowed event).
        let mut events = std::mem::take(&mut self.events);
        for ev in &events {
            self.shape_and_deliver(ev, out);
        }
        events.clear();
        self.events = events;
    }

    /// One decoded event through the shape stage to the encoder.
    fn shape_and_deliver(&mut self, ev: &Event, out: &mut Sink) {
        self.events_translated += 1;
        if self.drop_raw && !self.passthrough && matches!(ev.kind, EventKind::Raw { .. }) {
            return;
        }
        let Some(shaper) = &mut self.shaper else {
            return self.deliver(ev, out);
        };
        let mut before = std::mem::take(&mut self.shaped);
        let keep = shaper.shape(ev, &mut before);
        for e in before.drain(..) {
            self.deliver(&e, out);
        }
        self.shaped = before;
        match keep {
            Keep::Event => self.deliver(ev, out),
            Keep::Replaced(e) => self.deliver(&e, out),
            Keep::Drop => {}
        }
    }

    /// Passthrough: the encoder sees the pending events, its bytes dropped
    /// but for the end marker, when it ends the stream with one (then
    /// nothing follows). Whether it did.
    fn end_marker_from_observed(&mut self, out: &mut Sink) -> bool {
        let ended = self.observe_pending(out.spans().len());
        if ended {
            out.done();
            self.sealed = true;
        }
        ended
    }

    /// Passthrough: the encoder sees the pending events, its bytes dropped;
    /// `at`: the index of the next span of the caller's sink. Whether the
    /// encoder ended the stream with its end marker on them.
    fn observe_pending(&mut self, at: usize) -> bool {
        let mut scratch = std::mem::take(&mut self.scratch);
        self.observe_at = Some(at);
        self.encode_pending(&mut scratch);
        self.observe_at = None;
        let ended = scratch.bytes().ends_with(DONE);
        scratch.clear();
        self.scratch = scratch;
        ended
    }

    /// One shaped event to the encoder (and the assembler), and to the
    /// journal, when it is kept.
    fn deliver(&mut self, e: &Event, out: &mut Sink) {
        let before = out.spans().len();
        self.encoder.encode_to(e, out);
        if e.kind.is_terminal() {
            self.run_ended = true;
        }
        if let Some(a) = &mut self.assembler {
            a.observe(e);
        }
        self.note(|j, span| j.push_event(e, span), before, out);
    }

    fn on_error(
        &mut self,
        r: Result<(), TranslateError>,
        out: &mut Sink,
    ) -> Result<(), TranslateError> {
        match &r {
            Err(e @ TranslateError::TooCostly { .. }) => self.fail_to(
                &format!("upstream event refused: {e}"),
                Some("upstream_event_too_large"),
                out,
            ),
            Err(e) => self.fail_to(
                &format!("upstream stream is malformed: {e}"),
                Some("upstream_malformed"),
                out,
            ),
            Ok(()) => {}
        }
        r
    }
}

/// The binary transport's side of the input.
struct BinaryInput {
    framer: LengthFramer,
    messages: Vec<Vec<u8>>,
    /// Messages read so far, for error messages.
    index: u64,
}

/// Runs `write` on an untracked sink over `out`'s allocation (no copy).
fn with_buffer<T>(out: &mut Vec<u8>, write: impl FnOnce(&mut Sink) -> T) -> T {
    Sink::appending(out, write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;
    use crate::event::EventKind;

    /// Frames `{"t": "..."}` become text deltas, `{"end":1}` ends the run.
    struct Lines;
    impl Decoder for Lines {
        fn dialect(&self) -> Dialect {
            Dialect::AgUi
        }
        fn decode(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError> {
            let v: serde_json::Value =
                serde_json::from_str(&frame.data).map_err(|e| DecodeError::json(&e))?;
            if v.get("end").is_some() {
                out.push(Event::new(EventKind::RunFinished {
                    thread_id: None,
                    run_id: None,
                    message_id: None,
                    result: None,
                    outcome: Default::default(),
                    finish_reason: None,
                    usage: None,
                }));
            } else {
                let t = v["t"]
                    .as_str()
                    .ok_or_else(|| DecodeError::field("line", "t"))?;
                out.push(Event::new(EventKind::TextDelta {
                    message_id: "m".into(),
                    delta: t.into(),
                }));
            }
            Ok(())
        }
    }

    /// Writes `[kind]` per event, `<err:..>` for errors and `.` at finish.
    #[derive(Default)]
    struct Marks {
        finished: bool,
    }
    impl Encoder for Marks {
        fn dialect(&self) -> Dialect {
            Dialect::AgUi
        }
        fn encode_to(&mut self, event: &Event, out: &mut Sink) {
            let text = match &event.kind {
                EventKind::RunError { message, .. } => format!("<err:{message}>"),
                k => format!("[{}]", k.name()),
            };
            out.event(|out| out.extend_from_slice(text.as_bytes()));
        }
        fn finish_to(&mut self, out: &mut Sink) {
            if !self.finished {
                self.finished = true;
                out.event(|out| out.push(b'.'));
            }
        }
    }

    fn tr() -> Translator {
        Translator::new(
            SseFramer::new(64),
            Box::new(Lines),
            Box::new(Marks::default()),
        )
    }

    fn text(b: &[u8]) -> &str {
        std::str::from_utf8(b).unwrap()
    }

    #[test]
    fn translates_incrementally_and_finishes_once() {
        let mut t = tr();
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\ndata: {\"t\"", &mut out)
            .unwrap();
        assert_eq!(text(&out), "[run_started][text_start][text_delta]");
        t.push(b":\"b\"}\n\ndata: {\"end\":1}\n\n", &mut out)
            .unwrap();
        t.finish(&mut out).unwrap();
        t.finish(&mut out).unwrap();
        assert_eq!(
            text(&out),
            "[run_started][text_start][text_delta][text_delta][text_end][run_finished]."
        );
        assert_eq!(t.events_translated, 3);
    }

    #[test]
    fn letting_the_buffers_go_between_reads_changes_nothing() {
        let input: &[u8] = b"data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\"}\n\ndata: {\"end\":1}\n\n";
        let mut whole = Vec::new();
        let mut t = tr();
        t.push(input, &mut whole).unwrap();
        t.finish(&mut whole).unwrap();
        for cut in 0..=input.len() {
            let mut t = tr();
            let mut out = Vec::new();
            t.push(&input[..cut], &mut out).unwrap();
            t.release_idle();
            assert!(t.frames.capacity() == 0 && t.events.capacity() == 0);
            t.push(&input[cut..], &mut out).unwrap();
            t.release_idle();
            t.finish(&mut out).unwrap();
            assert_eq!(text(&out), text(&whole), "cut at {cut}");
        }
    }

    #[test]
    fn input_that_ends_before_the_run_is_a_failure_not_a_finish() {
        let mut t = tr();
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\n", &mut out).unwrap();
        assert_eq!(t.finish(&mut out), Err(TranslateError::Truncated));
        assert_eq!(
            text(&out),
            "[run_started][text_start][text_delta]<err:the upstream closed the stream before the run finished>.",
            "the dialect's error, never a made-up finish"
        );
        // Once failed, finishing again writes nothing and is not an error.
        t.finish(&mut out).unwrap();
        assert!(text(&out).ends_with('.'));
        let mut t = tr();
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\n", &mut out).unwrap();
        assert_eq!(t.finish_live(&mut out), Ok(false));
    }

    #[test]
    fn a_bad_frame_names_its_line_and_closes_the_output_in_dialect() {
        let mut t = tr();
        let mut out = Vec::new();
        let err = t
            .push(
                b"data: {\"t\":\"a\"}\n\ndata: {oops\n\ndata: {\"t\":\"c\"}\n\n",
                &mut out,
            )
            .unwrap_err();
        assert_eq!(err.line(), 3);
        assert!(err.to_string().starts_with("line 3: invalid JSON"), "{err}");
        let s = text(&out);
        assert!(
            s.starts_with(
                "[run_started][text_start][text_delta]<err:upstream stream is malformed: line 3"
            ),
            "{s}"
        );
        assert!(s.ends_with('.'), "{s}");
        // nothing more is accepted, nothing more is written
        let before = out.len();
        t.push(b"data: {\"t\":\"d\"}\n\n", &mut out).unwrap();
        t.finish(&mut out).unwrap();
        assert_eq!(out.len(), before);
    }

    #[test]
    fn an_oversized_event_fails_cleanly() {
        let mut t = tr();
        let mut out = Vec::new();
        let err = t.push(&[b'x'; 100], &mut out).unwrap_err();
        assert!(matches!(
            err,
            TranslateError::Frame(FrameError::EventTooLarge { .. })
        ));
        assert!(text(&out).contains("larger than the 64-byte limit"));
    }

    #[test]
    fn a_live_stream_cut_before_the_run_ended_is_an_error() {
        let mut t = tr();
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\n", &mut out).unwrap();
        assert!(!t.finish_live(&mut out).unwrap());
        assert_eq!(
            text(&out),
            "[run_started][text_start][text_delta]<err:the upstream closed the stream before the run finished>."
        );

        let mut t = tr();
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\ndata: {\"end\":1}", &mut out)
            .unwrap();
        assert!(
            t.finish_live(&mut out).unwrap(),
            "last event without blank line still counts"
        );
        assert_eq!(
            text(&out),
            "[run_started][text_start][text_delta][text_end][run_finished]."
        );
    }

    #[test]
    fn the_same_dialect_passes_frames_through_and_the_encoder_only_observes() {
        let mut t = Translator::passthrough(
            SseFramer::new(64),
            Box::new(Lines),
            Box::new(Marks::default()),
        );
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\",\"x\":1}\n\ndata: [DONE]\n\n", &mut out)
            .unwrap_err();
        // the frame as it came (extra field included), no shaping; `[DONE]`
        // is not a line-frame here, so it fails the decoder and is not written
        assert!(
            text(&out).starts_with("data: {\"t\":\"a\",\"x\":1}\n\n<err:"),
            "{}",
            text(&out)
        );

        let mut t = Translator::passthrough(
            SseFramer::new(64),
            Box::new(Lines),
            Box::new(Marks::default()),
        );
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\ndata: {\"end\":1}\n\n", &mut out)
            .unwrap();
        assert!(t.finish_live(&mut out).unwrap());
        assert_eq!(
            text(&out),
            "data: {\"t\":\"a\"}\n\ndata: {\"end\":1}\n\n.",
            "the encoder's own bytes for observed events are dropped; finish is its own"
        );
        assert_eq!(t.events_translated, 2);
    }

    #[test]
    fn a_sink_gets_the_same_bytes_with_spans_that_tile_them() {
        let input = b"data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\"}\n\ndata: {\"end\":1}\n\n";
        let mut t = tr();
        let mut sink = Sink::new();
        t.push_to(input, &mut sink).unwrap();
        t.finish_to(&mut sink).unwrap();
        let mut plain = tr();
        let mut out = Vec::new();
        plain.push(input, &mut out).unwrap();
        plain.finish(&mut out).unwrap();
        assert_eq!(sink.bytes(), &out[..]);
        let mut at = 0;
        for s in sink.spans() {
            assert_eq!(s.range.start, at);
            at = s.range.end;
        }
        assert_eq!(at, out.len());
    }

    #[test]
    fn the_journal_notes_each_step_with_the_span_it_ended_in() {
        let kinds = |j: &Journal| -> Vec<(String, usize)> {
            j.steps()
                .unwrap()
                .iter()
                .map(|n| {
                    let k = match &n.step {
                        Step::Begin(_) => "begin".into(),
                        Step::Event(e) => e.kind.name().to_string(),
                        Step::Finish => "finish".into(),
                        Step::Fail { .. } => "fail".into(),
                    };
                    (k, n.span)
                })
                .collect()
        };
        let mut t = tr();
        let mut sink = Sink::new();
        t.push_to(b"data: {\"t\":\"a\"}\n\n", &mut sink).unwrap();
        assert!(t.take_journal().is_empty(), "off unless asked for");
        t.keep_journal();
        t.push_to(b"data: {\"t\":\"b\"}\n\n", &mut sink).unwrap();
        t.fail_to("gone", Some("x"), &mut sink);
        let spans = sink.spans().len();
        assert_eq!(
            kinds(&t.take_journal()),
            [
                ("text_delta".to_string(), 3),
                ("fail".to_string(), spans - 1)
            ]
        );
        assert!(t.take_journal().is_empty());

        // Same dialect: the encoder only observes; each event belongs to
        // the frame written after it.
        let mut t = Translator::passthrough(
            SseFramer::new(64),
            Box::new(Lines),
            Box::new(Marks::default()),
        );
        t.keep_journal();
        let mut sink = Sink::new();
        t.push_to(b"data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\"}\n\n", &mut sink)
            .unwrap();
        assert_eq!(sink.spans().len(), 2);
        assert_eq!(
            kinds(&t.take_journal()),
            [("text_delta".to_string(), 0), ("text_delta".to_string(), 1)]
        );
    }

    /// A journal handed back keeps its room for the next chunk, holds none
    /// of the old steps, and lets the room go while the stream waits.
    #[test]
    fn a_journal_handed_back_is_reused_empty_and_released_when_idle() {
        let mut t = tr();
        t.keep_journal();
        let mut sink = Sink::new();
        t.push_to(b"data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\"}\n\n", &mut sink)
            .unwrap();
        let taken = t.take_journal();
        assert!(!taken.is_empty());
        let room = taken.capacity();
        t.give_back_journal(taken);
        assert!(t.take_journal().is_empty(), "no old step comes back");
        let mut steps = Journal::default();
        while steps.capacity() <= room {
            steps.push(&Step::Finish, 0);
        }
        let room = steps.capacity();
        t.give_back_journal(steps);
        t.push_to(b"data: {\"t\":\"c\"}\n\n", &mut sink).unwrap();
        let again = t.take_journal();
        assert!(!again.is_empty());
        assert!(
            !again
                .steps()
                .unwrap()
                .iter()
                .any(|n| n.step == Step::Finish),
            "cleared before reuse"
        );
        assert!(again.capacity() >= room, "its room kept");
        t.give_back_journal(again);
        t.release_idle();
        assert_eq!(t.take_journal().capacity(), 0, "let go while idle");
    }
}
