//! Framer + decoder + encoder: one upstream stream in, one client stream out,
//! incrementally. Used by the CLI's `translate` and by the gateway.

use crate::assemble::MessageAssembler;
use crate::codec::{DecodeError, Decoder, Encoder};
use crate::event::Event;
use crate::sse::{Frame, FrameError, SseFramer};

/// Why a translation stopped early. The output written so far stays well
/// formed: the encoder has already reported the error in its dialect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// The input ended before the run did (no terminal event): the run
    /// failed, and the output says so in its dialect (AG-UI 1.1: a
    /// consumer must not synthesize `RUN_FINISHED` for a truncated run).
    #[error("the input ended before the run finished")]
    Truncated,
}

impl TranslateError {
    /// The input line the error is about.
    pub fn line(&self) -> u64 {
        match self {
            TranslateError::Frame(e) => e.line(),
            TranslateError::Decode(e) => e.line,
            TranslateError::Truncated => 0,
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
    decoder: Box<dyn Decoder>,
    encoder: Box<dyn Encoder>,
    frames: Vec<Frame>,
    events: Vec<Event>,
    /// Events that passed through, for metrics.
    pub events_translated: u64,
    /// Builds the messages the run produced, when the caller keeps history.
    assembler: Option<MessageAssembler>,
    /// A `RunFinished`/`RunError` came through: the upstream ended the run.
    run_ended: bool,
    input_ended: bool,
    done: bool,
}

impl Translator {
    pub fn new(framer: SseFramer, decoder: Box<dyn Decoder>, encoder: Box<dyn Encoder>) -> Self {
        Translator {
            framer,
            decoder,
            encoder,
            frames: Vec::new(),
            events: Vec::new(),
            events_translated: 0,
            assembler: None,
            run_ended: false,
            input_ended: false,
            done: false,
        }
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
    pub fn finish_live(&mut self, out: &mut Vec<u8>) -> Result<bool, TranslateError> {
        match self.finish(out) {
            Ok(()) => Ok(true),
            Err(TranslateError::Truncated) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub fn encoder(&self) -> &dyn Encoder {
        self.encoder.as_ref()
    }

    /// Feeds upstream bytes. On error the client stream is closed with the
    /// dialect's error and the translator accepts nothing more.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), TranslateError> {
        if self.done {
            return Ok(());
        }
        // In pieces, so that the frames of one piece are decoded (and their
        // buffers handed back to the framer) before the next piece is cut:
        // a large read then reuses a few buffers instead of holding many.
        for piece in bytes.chunks(PIECE) {
            let framed = self.framer.push(piece, &mut self.frames);
            let decoded = self.drain_frames(out);
            // Frames cut before a framing error are still delivered first.
            let r = decoded.and(framed.map_err(TranslateError::from));
            self.on_error(r, out)?;
        }
        Ok(())
    }

    /// The upstream ended: flush the last event, close what is open, write the
    /// dialect's end marker. Input that ends before the run did is a failure
    /// (live or offline, whatever the dialect): the output ends with the
    /// dialect's error, code `upstream_closed`, and this returns
    /// [`TranslateError::Truncated`]. A stream that simply stops is success to
    /// some clients (`@ag-ui/client`), so it is never left to them to guess.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), TranslateError> {
        if self.done {
            return Ok(());
        }
        self.end_input(out)?;
        if self.done {
            return Ok(());
        }
        if !self.run_ended {
            self.fail(
                "the upstream closed the stream before the run finished",
                Some("upstream_closed"),
                out,
            );
            return Err(TranslateError::Truncated);
        }
        self.encoder.finish(out);
        self.done = true;
        Ok(())
    }

    /// Ends the client stream with an error that is not the upstream bytes'
    /// fault (a timeout, a dropped connection), in the client's dialect.
    pub fn fail(&mut self, message: &str, code: Option<&str>, out: &mut Vec<u8>) {
        if !self.done {
            self.encode_pending(out);
            self.encoder.fail(message, code, out);
            self.done = true;
        }
    }

    /// Flushes the framer and the decoder, once.
    fn end_input(&mut self, out: &mut Vec<u8>) -> Result<(), TranslateError> {
        if self.input_ended {
            return Ok(());
        }
        self.input_ended = true;
        let r = self
            .framer
            .finish(&mut self.frames)
            .map_err(TranslateError::from)
            .and_then(|_| self.drain_frames(out))
            .and_then(|_| {
                self.decoder
                    .finish(&mut self.events)
                    .map_err(TranslateError::from)
            });
        self.encode_pending(out);
        self.on_error(r, out)
    }

    fn drain_frames(&mut self, out: &mut Vec<u8>) -> Result<(), TranslateError> {
        let mut result = Ok(());
        for frame in self.frames.drain(..) {
            if let Err(mut e) = self.decoder.decode(&frame, &mut self.events) {
                e.line = frame.line;
                result = Err(e.into());
                break;
            }
            self.framer.recycle(frame);
        }
        self.frames.clear();
        self.encode_pending(out);
        result
    }

    fn encode_pending(&mut self, out: &mut Vec<u8>) {
        // By reference, then cleared: events are large, moving each out costs.
        for ev in &self.events {
            self.encoder.encode(ev, out);
            self.events_translated += 1;
            if ev.kind.is_terminal() {
                self.run_ended = true;
            }
            if let Some(a) = &mut self.assembler {
                a.observe(ev);
            }
        }
        self.events.clear();
    }

    fn on_error(
        &mut self,
        r: Result<(), TranslateError>,
        out: &mut Vec<u8>,
    ) -> Result<(), TranslateError> {
        if let Err(e) = &r {
            self.fail(
                &format!("upstream stream is malformed: {e}"),
                Some("upstream_malformed"),
                out,
            );
        }
        r
    }
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
        fn encode(&mut self, event: &Event, out: &mut Vec<u8>) {
            match &event.kind {
                EventKind::RunError { message, .. } => {
                    out.extend_from_slice(format!("<err:{message}>").as_bytes())
                }
                k => out.extend_from_slice(format!("[{}]", k.name()).as_bytes()),
            }
        }
        fn finish(&mut self, out: &mut Vec<u8>) {
            if !self.finished {
                self.finished = true;
                out.push(b'.');
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
        assert_eq!(text(&out), "[text_delta]");
        t.push(b":\"b\"}\n\ndata: {\"end\":1}\n\n", &mut out)
            .unwrap();
        t.finish(&mut out).unwrap();
        t.finish(&mut out).unwrap();
        assert_eq!(text(&out), "[text_delta][text_delta][run_finished].");
        assert_eq!(t.events_translated, 3);
    }

    #[test]
    fn input_that_ends_before_the_run_is_a_failure_not_a_finish() {
        let mut t = tr();
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\n", &mut out).unwrap();
        assert_eq!(t.finish(&mut out), Err(TranslateError::Truncated));
        assert_eq!(
            text(&out),
            "[text_delta]<err:the upstream closed the stream before the run finished>.",
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
            s.starts_with("[text_delta]<err:upstream stream is malformed: line 3"),
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
            "[text_delta]<err:the upstream closed the stream before the run finished>."
        );

        let mut t = tr();
        let mut out = Vec::new();
        t.push(b"data: {\"t\":\"a\"}\n\ndata: {\"end\":1}", &mut out)
            .unwrap();
        assert!(
            t.finish_live(&mut out).unwrap(),
            "last event without blank line still counts"
        );
        assert_eq!(text(&out), "[text_delta][run_finished].");
    }
}
