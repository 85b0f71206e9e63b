//! Framer + decoder + encoder: one upstream stream in, one client stream out,
//! incrementally. Used by the CLI's `translate` and by the gateway.

use crate::assemble::MessageAssembler;
use crate::codec::{DecodeError, Decoder, Encoder};
use crate::event::{Event, EventKind};
use crate::journal::{Journal, Setup, Step};
use crate::length::{FramingError, LengthFramer};
use crate::shape::{Keep, Shaper};
use crate::sink::{Framing, Sink};
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
    /// Owns the stream's shape between decoder and encoder, on every route.
    shaper: Shaper,
    /// Same dialect on both sides: a frame whose event comes through
    /// unchanged is written as received (see [`same_dialect`](Self::same_dialect)).
    verbatim: bool,
    /// The events delivered since it was last set came out of the shape
    /// stage as they went in, nothing added, replaced or dropped.
    unchanged: bool,
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
    /// The encoder's context as it was built, the journal's first step.
    setup: Option<Setup>,
    /// `Raw` events are left out (`EncodeContext::drop_raw`).
    drop_raw: bool,
    /// The run id the upstream's stream gave its run (its first decoded
    /// `RunStarted` with one), as the upstream knows it.
    upstream_run_id: Option<String>,
}

impl Translator {
    pub fn new(framer: SseFramer, decoder: Box<dyn Decoder>, encoder: Box<dyn Encoder>) -> Self {
        Translator {
            framer,
            binary: None,
            decoder,
            encoder,
            shaper: Shaper::new(),
            verbatim: false,
            unchanged: true,
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
            setup: None,
            drop_raw: false,
            upstream_run_id: None,
        }
    }

    /// Leaves `Raw` events out of the stream.
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

    /// Stops noting steps (what [`keep_journal`](Self::keep_journal)
    /// began), the journal dropped.
    pub fn stop_journal(&mut self) {
        self.journal = None;
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
        let after = out.spans().len();
        let span = if after > before { after - 1 } else { after };
        write(journal, span);
    }

    /// A translator between an upstream and a client of the same dialect.
    /// It is a translated route like any other (decoder, shape stage,
    /// encoder), with one shortcut: a frame (or binary message) that decodes
    /// to one event which the decoder did not restate, the shape stage
    /// passes unchanged, the encoder agrees to ([`Encoder::verbatim`]) and
    /// writes as one event, is written as received in place of the
    /// encoder's bytes, so that what the upstream said (field order, number
    /// forms, fields with no slot in the model) reaches the client as it
    /// came, when it came in the form the encoder writes (SSE or the binary
    /// transport, [`Encoder::writes_binary`]). Anything else is written as
    /// mapped: what reaches the client is
    /// then JSON-equal to the upstream's frame, or the repair the shape
    /// stage made, as on every route.
    pub fn same_dialect(
        framer: SseFramer,
        decoder: Box<dyn Decoder>,
        encoder: Box<dyn Encoder>,
    ) -> Self {
        let mut t = Translator::new(framer, decoder, encoder);
        t.verbatim = true;
        t
    }

    /// Reads the input as the dialect's binary transport: length-prefixed
    /// messages (at most `max_message_bytes` each), each mapped by the
    /// decoder's `decode_binary`. On a same-dialect route a message may be
    /// written as received, so the client must take the binary form too.
    pub fn with_binary_input(mut self, max_message_bytes: usize) -> Self {
        self.binary = Some(BinaryInput {
            framer: LengthFramer::new(max_message_bytes),
            messages: Vec::new(),
            index: 0,
        });
        self
    }

    /// Whether the input is read as the binary transport's messages.
    pub fn reads_binary(&self) -> bool {
        self.binary.is_some()
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

    /// The id the upstream's stream named its run by, once decoded: what a
    /// stop request to that upstream names (`RequestTranslator::stop_request`).
    pub fn upstream_run_id(&self) -> Option<&str> {
        self.upstream_run_id.as_deref()
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

    /// How the plain-buffer APIs frame the client's events: as a byte
    /// stream of the encoder's form (length-delimited binary, or SSE).
    fn framing(&self) -> Framing {
        Framing::stream(self.encoder.writes_binary())
    }

    /// [`push_to`](Self::push_to), appending to a plain buffer.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), TranslateError> {
        with_buffer(out, self.framing(), |sink| self.push_to(bytes, sink))
    }

    /// [`finish_to`](Self::finish_to), appending to a plain buffer.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), TranslateError> {
        with_buffer(out, self.framing(), |sink| self.finish_to(sink))
    }

    /// [`finish_live_to`](Self::finish_live_to), appending to a plain buffer.
    pub fn finish_live(&mut self, out: &mut Vec<u8>) -> Result<bool, TranslateError> {
        with_buffer(out, self.framing(), |sink| self.finish_live_to(sink))
    }

    /// [`fail_to`](Self::fail_to), appending to a plain buffer.
    pub fn fail(&mut self, message: &str, code: Option<&str>, out: &mut Vec<u8>) {
        with_buffer(out, self.framing(), |sink| {
            self.fail_to(message, code, sink)
        })
    }

    pub fn encoder(&self) -> &dyn Encoder {
        self.encoder.as_ref()
    }

    /// The time what follows is stamped with (see [`Encoder::set_now`]).
    pub fn set_now(&mut self, ms: i64) {
        self.encoder.set_now(ms);
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

    /// Feeds one message of a message transport (a WebSocket's). A message
    /// is a whole upstream event, neither cut nor joined, so it is its own
    /// frame: no framer reads it, and the decoder maps it as it maps an SSE
    /// frame's data (a text message) or, with
    /// [`with_binary_input`](Self::with_binary_input), a length-delimited
    /// message. The limits are the framers': at most `max_event_bytes` (the
    /// binary one's for a binary message), and text is UTF-8. Errors as in
    /// [`push_to`](Self::push_to).
    pub fn push_message_to(
        &mut self,
        message: &[u8],
        out: &mut Sink,
    ) -> Result<(), TranslateError> {
        if self.done {
            return Ok(());
        }
        // Messages have no lines: the 1-based message index.
        let index = self.frames_read + 1;
        let r = match &mut self.binary {
            Some(b) if message.len() > b.framer.max_message_bytes() => {
                Err(TranslateError::Framing(FramingError::TooLarge {
                    index: index - 1,
                    len: message.len() as u64,
                    limit: b.framer.max_message_bytes(),
                }))
            }
            Some(b) => {
                let mut m = b.framer.spare();
                m.extend_from_slice(message);
                b.messages.push(m);
                self.drain_messages(out)
            }
            None if message.len() > self.framer.max_event_bytes() => {
                Err(TranslateError::Frame(FrameError::EventTooLarge {
                    line: index,
                    limit: self.framer.max_event_bytes(),
                }))
            }
            None => match std::str::from_utf8(message) {
                Ok(text) => {
                    let mut frame = self.framer.spare_frame();
                    frame.data.push_str(text);
                    frame.line = index;
                    self.frames.push(frame);
                    self.drain_frames(out)
                }
                Err(_) => Err(TranslateError::Frame(FrameError::InvalidUtf8 {
                    line: index,
                })),
            },
        };
        self.on_error(r, out)
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
        let before = out.spans().len();
        self.encoder.finish_to(out);
        self.note(|j, span| j.push(&Step::Finish, span), before, out);
        self.done = true;
        Ok(())
    }

    /// Ends the client stream with an error that is not the upstream bytes'
    /// fault (a timeout, a dropped connection), in the client's dialect.
    pub fn fail_to(&mut self, message: &str, code: Option<&str>, out: &mut Sink) {
        if !self.done {
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
        self.encode_pending(out);
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
            if self.verbatim && !self.encoder.writes_binary() {
                self.encode_frame(out, |out| out.data(&frame.data));
            }
            self.framer.recycle(frame);
        }
        frames.clear();
        self.frames = frames;
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
            if self.verbatim && self.encoder.writes_binary() {
                self.encode_frame(out, |out| out.data(&message));
            }
            b.framer.recycle(message);
        }
        messages.clear();
        b.messages = messages;
        self.binary = Some(b);
        self.encode_pending(out);
        result
    }

    /// Same dialect: the events of one frame to the encoder, and the frame
    /// as received (`as_received`) in place of the encoder's one event when
    /// the shortcut holds (see [`same_dialect`](Self::same_dialect)).
    fn encode_frame(&mut self, out: &mut Sink, as_received: impl FnOnce(&mut Sink)) {
        let stands = match self.events.as_slice() {
            [e] => !e.restated && self.encoder.verbatim(e),
            _ => false,
        };
        let written = out.events_written();
        self.unchanged = true;
        self.encode_pending(out);
        if stands && self.unchanged && out.events_written() == written + 1 {
            // Not replaced (bytes after the event): the mapping stands.
            let _ = out.replace_last_event(as_received);
        }
    }

    fn encode_pending(&mut self, out: &mut Sink) {
        // By reference: events are large, moving each out costs (the
        // journal writes each from the borrowed event).
        let mut events = std::mem::take(&mut self.events);
        for ev in &events {
            if self.upstream_run_id.is_none() {
                if let EventKind::RunStarted {
                    run_id: Some(id), ..
                } = &ev.kind
                {
                    self.upstream_run_id = Some(id.clone());
                }
            }
            self.shape_and_deliver(ev, out);
        }
        events.clear();
        self.events = events;
    }

    /// One decoded event through the shape stage to the encoder.
    fn shape_and_deliver(&mut self, ev: &Event, out: &mut Sink) {
        self.events_translated += 1;
        if self.drop_raw && matches!(ev.kind, EventKind::Raw { .. }) {
            self.unchanged = false;
            return;
        }
        let mut before = std::mem::take(&mut self.shaped);
        let keep = self.shaper.shape(ev, &mut before);
        if !before.is_empty() || !matches!(keep, Keep::Event) {
            self.unchanged = false;
        }
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
fn with_buffer<T>(out: &mut Vec<u8>, framing: Framing, write: impl FnOnce(&mut Sink) -> T) -> T {
    Sink::appending(out, framing, write)
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
                out.push(Event::new(EventKind::run_finished(Default::default())));
            } else {
                let t = v["t"]
                    .as_str()
                    .ok_or_else(|| DecodeError::field("line", "t"))?;
                let mut ev = Event::new(EventKind::text_delta("m", t));
                ev.restated = v.get("r").is_some();
                out.push(ev);
            }
            Ok(())
        }
    }

    /// Writes `[kind]` per event, `<err:..>` for errors and `.` at finish;
    /// says it writes the binary form when `binary`.
    #[derive(Default)]
    struct Marks {
        finished: bool,
        binary: bool,
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
        fn verbatim(&self, event: &Event) -> bool {
            !matches!(&event.kind, EventKind::TextDelta { delta, .. } if delta == "v")
        }
        fn writes_binary(&self) -> bool {
            self.binary
        }
    }

    fn tr() -> Translator {
        Translator::new(
            SseFramer::new(64),
            Box::new(Lines),
            Box::new(Marks::default()),
        )
    }

    /// The bodies of the events in `b`, joined: `b` as the plain-buffer
    /// APIs frame it (SSE; length-delimited when it starts with a prefix,
    /// as the binary form's does), or a sink of messages' bare bodies.
    fn text(b: &[u8]) -> String {
        if b.starts_with(b"data: ") {
            let mut frames = Vec::new();
            let mut framer = SseFramer::default();
            framer.push(b, &mut frames).unwrap();
            return frames.iter().map(|f| f.data.as_str()).collect();
        }
        if b.first() == Some(&0) {
            let mut messages = Vec::new();
            crate::length::LengthFramer::default()
                .push(b, &mut messages)
                .unwrap();
            return messages.iter().map(|m| text(m)).collect();
        }
        String::from_utf8(b.to_vec()).unwrap()
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

    /// A message transport's message is one frame as it is: no `data:`
    /// field, a line break inside it is the event's own, and what would
    /// end an SSE event ends nothing. Its errors name the message.
    #[test]
    fn each_message_is_one_frame_without_a_framer() {
        let mut t = tr();
        let mut out = Sink::untracked(Framing::Message, Vec::new());
        t.push_message_to(b"{\"t\":\n\"a\"}", &mut out).unwrap();
        t.push_message_to(b"{\"x\":\"data: y\",\n\n\"t\":\"b\"}", &mut out)
            .unwrap();
        t.push_message_to(b"{\"end\":1}", &mut out).unwrap();
        t.finish_to(&mut out).unwrap();
        assert_eq!(
            text(out.bytes()),
            "[run_started][text_start][text_delta][text_delta][text_end][run_finished]."
        );
        assert_eq!(t.frames_read, 3);

        for (bad, why) in [
            (&b"{oops"[..], "line 2: invalid JSON"),
            (&b"\xff"[..], "line 2: not valid UTF-8"),
            (
                &[b' '; 65][..],
                "line 2: event larger than the 64-byte limit",
            ),
        ] {
            let mut t = tr();
            let mut out = Sink::untracked(Framing::Message, Vec::new());
            t.push_message_to(b"{\"t\":\"a\"}", &mut out).unwrap();
            let err = t.push_message_to(bad, &mut out).unwrap_err();
            assert!(err.to_string().starts_with(why), "{err}");
            let s = text(out.bytes());
            assert!(
                s.contains("<err:upstream stream is malformed: line 2"),
                "{s}"
            );
            let before = out.bytes().len();
            t.push_message_to(b"{\"t\":\"c\"}", &mut out).unwrap();
            assert_eq!(out.bytes().len(), before, "nothing after the error");
        }
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

    fn same() -> Translator {
        Translator::same_dialect(
            SseFramer::new(64),
            Box::new(Lines),
            Box::new(Marks::default()),
        )
    }

    /// Same dialect: shaped and encoded as on every route; a frame whose one
    /// event comes through unchanged (not restated, the encoder agreeing,
    /// one event written) is written as received instead.
    #[test]
    fn the_same_dialect_writes_a_frame_as_received_only_when_it_came_through_unchanged() {
        let mut t = same();
        let mut out = Vec::new();
        t.push(
            b"data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\", \"x\":1}\n\ndata: {\"t\":\"c\",\"r\":1}\n\ndata: {\"t\":\"v\"}\n\ndata: {\"end\":1}\n\n",
            &mut out,
        )
        .unwrap();
        assert!(t.finish_live(&mut out).unwrap());
        assert_eq!(
            text(&out),
            concat!(
                // the shape stage added the run and the start: mapped
                "[run_started][text_start][text_delta]",
                // unchanged: as received, spacing and the extra field kept
                "{\"t\":\"b\", \"x\":1}",
                // restated by the decoder; vetoed by the encoder: mapped
                "[text_delta][text_delta]",
                // the shape stage closed the text first: mapped; the end is
                // the encoder's
                "[text_end][run_finished]."
            )
        );
        assert_eq!(t.events_translated, 5);

        // An encoder writing the binary form: no SSE frame stands for its
        // events, all are mapped.
        let mut t = Translator::same_dialect(
            SseFramer::new(64),
            Box::new(Lines),
            Box::new(Marks {
                binary: true,
                ..Marks::default()
            }),
        );
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\"}\n\n", &mut out)
            .unwrap();
        assert_eq!(
            text(&out),
            "[run_started][text_start][text_delta][text_delta]"
        );

        // A frame that fails to decode writes nothing but the failure.
        let mut t = same();
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\ndata: [DONE]\n\n", &mut out)
            .unwrap_err();
        assert!(
            text(&out).starts_with("[run_started][text_start][text_delta]<err:"),
            "{}",
            text(&out)
        );
    }

    #[test]
    fn a_sink_gets_the_same_bytes_with_spans_that_tile_them() {
        let input = b"data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\"}\n\ndata: {\"end\":1}\n\n";
        let mut t = tr();
        let mut sink = Sink::new(Framing::Sse);
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
        let mut sink = Sink::new(Framing::Sse);
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

        // Same dialect: a frame written as received keeps its event's span.
        let mut t = same();
        t.keep_journal();
        let mut sink = Sink::new(Framing::Sse);
        t.push_to(b"data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\"}\n\n", &mut sink)
            .unwrap();
        assert_eq!(sink.spans().len(), 4);
        assert_eq!(sink.events().last().unwrap(), b"data: {\"t\":\"b\"}\n\n");
        assert_eq!(
            kinds(&t.take_journal()),
            [
                ("run_started".to_string(), 0),
                ("text_start".to_string(), 1),
                ("text_delta".to_string(), 2),
                ("text_delta".to_string(), 3)
            ]
        );
    }

    /// A journal handed back keeps its room for the next chunk, holds none
    /// of the old steps, and lets the room go while the stream waits.
    #[test]
    fn a_journal_handed_back_is_reused_empty_and_released_when_idle() {
        let mut t = tr();
        t.keep_journal();
        let mut sink = Sink::new(Framing::Sse);
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
