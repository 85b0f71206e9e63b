//! Server-sent events: one incremental framer shared by every decoder, and the
//! writers a [`crate::sink::Sink`] of the SSE framing frames events with.
//!
//! The framer follows the WHATWG event-stream grammar: lines end at CR, LF or
//! CRLF (only those: the AG-UI Python SDK writes raw U+2028 inside JSON strings,
//! which must not split a line), `data:` lines accumulate joined by `\n`, a
//! blank line dispatches, `:` starts a comment, one leading space after the
//! colon is dropped, a leading BOM is skipped. Bytes may arrive cut anywhere,
//! including inside a UTF-8 character or between a CR and its LF; the result
//! never depends on where. Limits: one event (every line of it, field names,
//! comments and one byte per line end included, plus the line being read) may
//! hold at most [`SseFramer::max_event_bytes`] bytes; past that the framer
//! fails with [`FrameError::EventTooLarge`] rather than grow without bound.
//! Whole lines count, not only values, so that a line still being read, which
//! is checked before its end arrives, can never be refused when the same line
//! read in one piece would not be.

/// Default cap for one event: generous for tool results and snapshots, small
/// enough that a runaway upstream cannot exhaust memory.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What [`SseFramer::recycle`] keeps at most: the buffers of a few dozen
/// small events (the translator frames 4 KiB at a time).
const SPARE_BYTES: usize = 8 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    /// The `event:` field, if the event had one.
    pub event: Option<String>,
    /// All `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field of this event, if it had one.
    pub id: Option<String>,
    /// The `retry:` field of this event, if it had a valid one.
    pub retry: Option<u64>,
    /// 1-based line number of the event's first field, for error messages.
    pub line: u64,
}

impl Frame {
    /// The `[DONE]` sentinel that Vercel and AG-Kit streams end with.
    pub fn is_done(&self) -> bool {
        self.data.trim() == "[DONE]"
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("line {line}: event larger than the {limit}-byte limit")]
    EventTooLarge { line: u64, limit: usize },
    #[error("line {line}: not valid UTF-8")]
    InvalidUtf8 { line: u64 },
}

impl FrameError {
    pub fn line(&self) -> u64 {
        match self {
            FrameError::EventTooLarge { line, .. } | FrameError::InvalidUtf8 { line } => *line,
        }
    }
}

/// Incremental SSE framer: push bytes as they arrive, collect [`Frame`]s.
#[derive(Debug)]
pub struct SseFramer {
    max_event_bytes: usize,
    /// Bytes of the line not yet terminated.
    line: Vec<u8>,
    /// The event being assembled.
    pending: Frame,
    has_data: bool,
    /// Bytes of the lines of `pending` so far, each with one for its end.
    pending_bytes: usize,
    /// The last byte seen was a CR: an LF right after it ends nothing.
    after_cr: bool,
    /// Lines completed so far.
    lines_done: u64,
    failed: Option<FrameError>,
    /// Buffers of frames handed back by [`SseFramer::recycle`], reused for the
    /// data of the next ones (no allocation per event in a steady stream).
    spare: Vec<String>,
    /// Capacity held by `spare`.
    spare_bytes: usize,
}

impl Default for SseFramer {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseFramer {
    pub fn new(max_event_bytes: usize) -> Self {
        SseFramer {
            max_event_bytes,
            line: Vec::new(),
            pending: Frame::default(),
            has_data: false,
            pending_bytes: 0,
            after_cr: false,
            lines_done: 0,
            failed: None,
            spare: Vec::new(),
            spare_bytes: 0,
        }
    }

    /// Lets go of the room kept for the next events (the spare buffers, and
    /// those of a line or event not yet begun), for a stream that waits
    /// between reads, perhaps long. Nothing read is lost: a partial line or
    /// event keeps its buffer.
    pub fn release_idle(&mut self) {
        self.spare = Vec::new();
        self.spare_bytes = 0;
        if self.line.is_empty() {
            self.line = Vec::new();
        }
        if self.pending_bytes == 0 && self.pending.data.is_empty() {
            self.pending.data = String::new();
        }
    }

    /// Hands a frame's buffer back once the frame is read, for the next one.
    /// At most [`SPARE_BYTES`] are kept.
    pub fn recycle(&mut self, frame: Frame) {
        let mut data = frame.data;
        let cap = data.capacity();
        if cap > 0 && self.spare_bytes + cap <= SPARE_BYTES {
            data.clear();
            self.spare_bytes += cap;
            self.spare.push(data);
        }
    }

    /// An empty frame on a recycled buffer, for a caller that has an event
    /// whole (a message transport's), which no framer needs to cut.
    pub fn spare_frame(&mut self) -> Frame {
        Frame {
            data: self.take_spare(),
            ..Frame::default()
        }
    }

    fn take_spare(&mut self) -> String {
        let data = self.spare.pop().unwrap_or_default();
        self.spare_bytes -= data.capacity();
        data
    }

    pub fn max_event_bytes(&self) -> usize {
        self.max_event_bytes
    }

    /// Bytes of the event not yet complete, held until it is.
    pub fn buffered_bytes(&self) -> usize {
        self.pending_bytes + self.line.len()
    }

    /// The line being read (1-based), for error messages.
    pub fn current_line(&self) -> u64 {
        self.lines_done + 1
    }

    /// Feeds bytes; complete events are appended to `out`. After an error the
    /// framer stays failed: the stream cannot be trusted past that point.
    pub fn push(&mut self, mut input: &[u8], out: &mut Vec<Frame>) -> Result<(), FrameError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = input.strip_prefix(b"\n") {
                input = rest;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', input) {
            // `pos` is in bounds (memchr found a byte there).
            let Some((line_bytes, [end, rest @ ..])) = input.split_at_checked(pos) else {
                break;
            };
            let is_cr = *end == b'\r';
            let result = if self.line.is_empty() {
                self.process_line(line_bytes, out)
            } else {
                let mut whole = std::mem::take(&mut self.line);
                whole.extend_from_slice(line_bytes);
                let r = self.process_line(&whole, out);
                whole.clear();
                self.line = whole; // keep the allocation
                r
            };
            self.fail_on(result)?;
            input = rest;
            if is_cr {
                match input.split_first() {
                    Some((b'\n', rest)) => input = rest,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(input);
        if self.pending_bytes + self.partial_line_bytes() > self.max_event_bytes {
            let err = FrameError::EventTooLarge {
                line: self.current_line(),
                limit: self.max_event_bytes,
            };
            return self.fail_on(Err(err));
        }
        Ok(())
    }

    /// Input ended: a last line without a terminator and an event without its
    /// blank line are still delivered.
    pub fn finish(&mut self, out: &mut Vec<Frame>) -> Result<(), FrameError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let r = self.process_line(&line, out);
            self.fail_on(r)?;
        }
        self.dispatch(out);
        Ok(())
    }

    /// What the line being read counts so far: never more than it will count
    /// once complete (a first line that may still turn out to open with a
    /// BOM does not count the BOM's bytes).
    fn partial_line_bytes(&self) -> usize {
        let bom = match self.lines_done {
            0 => self
                .line
                .iter()
                .zip(BOM)
                .take_while(|(a, b)| a == b)
                .count(),
            _ => 0,
        };
        self.line.len() - bom
    }

    fn fail_on(&mut self, r: Result<(), FrameError>) -> Result<(), FrameError> {
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<Frame>) -> Result<(), FrameError> {
        // A BOM can only open the first line: CR and LF never occur inside it.
        let line = match self.lines_done {
            0 => line.strip_prefix(BOM).unwrap_or(line),
            _ => line,
        };
        self.lines_done += 1;
        let line_no = self.lines_done;
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        self.pending_bytes += line.len() + 1;
        if self.pending_bytes > self.max_event_bytes {
            return Err(FrameError::EventTooLarge {
                line: line_no,
                limit: self.max_event_bytes,
            });
        }
        if line.first() == Some(&b':') {
            return Ok(()); // comment (heartbeat)
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let (field, v) = line.split_at_checked(i).unwrap_or((line, &[]));
                let v = v.get(1..).unwrap_or_default();
                (field, v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value =
            std::str::from_utf8(value).map_err(|_| FrameError::InvalidUtf8 { line: line_no })?;
        if self.pending.line == 0 {
            self.pending.line = line_no;
        }
        match field {
            b"data" => {
                if self.has_data {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(value);
                self.has_data = true;
            }
            b"event" => self.pending.event = Some(value.to_string()),
            // An id with NUL is ignored, as the grammar says.
            b"id" if !value.contains('\0') => self.pending.id = Some(value.to_string()),
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.pending.retry = value.parse().ok();
            }
            _ => {} // unknown fields are ignored, as the grammar says
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<Frame>) {
        let next = Frame {
            data: self.take_spare(),
            ..Frame::default()
        };
        let frame = std::mem::replace(&mut self.pending, next);
        let had_data = std::mem::replace(&mut self.has_data, false);
        self.pending_bytes = 0;
        // An event without data dispatches nothing, except that `id`/`retry`
        // alone still matter to a proxy; keep those as an empty frame.
        if had_data || frame.id.is_some() || frame.retry.is_some() {
            out.push(frame);
        } else {
            self.recycle(frame);
        }
    }
}

/// What opens an event whose body is one line (JSON: serde escapes CR and
/// LF inside strings), and what ends it (see [`crate::sink::Sink::event`]).
pub(crate) const DATA: &[u8] = b"data: ";
pub(crate) const END: &[u8] = b"\n\n";

/// Appends `body` as one event, one `data:` line per line of it (a line
/// ends at CR, LF or CRLF, as the framer reads them), so that any text
/// survives, not only single-line JSON.
pub fn write_data(out: &mut Vec<u8>, body: &[u8]) {
    let mut rest = body;
    loop {
        out.extend_from_slice(DATA);
        let Some(at) = memchr::memchr2(b'\n', b'\r', rest) else {
            out.extend_from_slice(rest);
            break;
        };
        let (line, tail) = rest.split_at_checked(at).unwrap_or((rest, &[]));
        out.extend_from_slice(line);
        out.push(b'\n');
        rest = match tail {
            [b'\r', b'\n', more @ ..] | [_, more @ ..] => more,
            [] => &[],
        };
    }
    out.extend_from_slice(END);
}

/// Appends an `id:` line; call right before the event it names.
pub fn write_id(out: &mut Vec<u8>, id: &str) {
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.as_bytes());
    out.push(b'\n');
}

/// Appends a comment line (heartbeats: `: ping`).
pub fn write_comment(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b": ");
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(END);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames_whole(input: &[u8]) -> Result<Vec<Frame>, FrameError> {
        let mut f = SseFramer::new(1024);
        let mut out = Vec::new();
        f.push(input, &mut out)?;
        f.finish(&mut out)?;
        Ok(out)
    }

    /// Every split point, and byte by byte: the result never changes.
    fn assert_split_invariant(input: &[u8]) -> Vec<Frame> {
        let whole = frames_whole(input);
        for cut in 0..=input.len() {
            let mut f = SseFramer::new(1024);
            let mut out = Vec::new();
            let r = f
                .push(&input[..cut], &mut out)
                .and_then(|_| f.push(&input[cut..], &mut out))
                .and_then(|_| f.finish(&mut out))
                .map(|_| out);
            assert_eq!(r, whole, "split at {cut}");
        }
        let mut f = SseFramer::new(1024);
        let mut out = Vec::new();
        let mut r = Ok(());
        for b in input {
            r = r.and_then(|_| f.push(std::slice::from_ref(b), &mut out));
        }
        let r = r.and_then(|_| f.finish(&mut out)).map(|_| out);
        assert_eq!(r, whole, "byte by byte");
        // Byte by byte, letting the buffers go after each (a live stream
        // between reads): nothing read is lost.
        let mut f = SseFramer::new(1024);
        let mut out = Vec::new();
        let mut r = Ok(());
        for b in input {
            r = r.and_then(|_| f.push(std::slice::from_ref(b), &mut out));
            f.release_idle();
        }
        let r = r.and_then(|_| f.finish(&mut out)).map(|_| out);
        assert_eq!(r, whole, "byte by byte, released after each");
        whole.unwrap()
    }

    fn data(frames: &[Frame]) -> Vec<&str> {
        frames.iter().map(|f| f.data.as_str()).collect()
    }

    #[test]
    fn lf_cr_and_crlf_all_end_lines() {
        for sep in ["\n", "\r", "\r\n"] {
            let s = format!("data: a{sep}{sep}data: b{sep}{sep}");
            let frames = assert_split_invariant(s.as_bytes());
            assert_eq!(data(&frames), ["a", "b"], "sep {sep:?}");
        }
        // mixed in one stream
        let frames = assert_split_invariant(b"data: a\r\n\rdata: b\n\r\ndata: c\r\r");
        assert_eq!(data(&frames), ["a", "b", "c"]);
    }

    #[test]
    fn multi_line_data_comments_and_fields() {
        let input = b": ping\n\nevent: delta\nid: 7\nretry: 1500\ndata: {\"a\":\ndata:1}\n\n";
        let frames = assert_split_invariant(input);
        assert_eq!(
            frames,
            [Frame {
                event: Some("delta".into()),
                data: "{\"a\":\n1}".into(),
                id: Some("7".into()),
                retry: Some(1500),
                line: 3,
            }]
        );
    }

    #[test]
    fn utf8_cut_anywhere_and_unicode_line_separators_kept() {
        let input = "data: {\"t\":\"你好🎉\u{2028}x\u{2029}\"}\n\n".as_bytes();
        let frames = assert_split_invariant(input);
        assert_eq!(data(&frames), ["{\"t\":\"你好🎉\u{2028}x\u{2029}\"}"]);
    }

    #[test]
    fn last_event_without_blank_line_and_last_line_without_newline() {
        assert_eq!(data(&assert_split_invariant(b"data: a\n")), ["a"]);
        assert_eq!(
            data(&assert_split_invariant(b"data: a\n\ndata: b")),
            ["a", "b"]
        );
    }

    #[test]
    fn done_sentinel_and_space_handling() {
        let frames = assert_split_invariant(b"data:[DONE]\n\ndata:  two\n\ndata\n\n");
        assert!(frames[0].is_done());
        assert_eq!(frames[1].data, " two"); // only one space is eaten
        assert_eq!(frames[2].data, ""); // `data` with no colon: empty data line
    }

    #[test]
    fn bom_skipped_even_when_cut() {
        let frames = assert_split_invariant(b"\xEF\xBB\xBFdata: x\n\n");
        assert_eq!(data(&frames), ["x"]);
    }

    #[test]
    fn events_without_data_are_not_dispatched() {
        let frames = assert_split_invariant(b"event: x\n\n\n\ndata: y\n\n");
        assert_eq!(data(&frames), ["y"]);
        assert_eq!(frames[0].event, None);
    }

    #[test]
    fn event_size_limit_is_enforced_while_reading() {
        let mut f = SseFramer::new(16);
        let mut out = Vec::new();
        // a line that never ends must still be refused
        let err = f.push(&[b'x'; 64], &mut out).unwrap_err();
        assert!(matches!(err, FrameError::EventTooLarge { limit: 16, .. }));
        assert!(f.push(b"\n\n", &mut out).is_err(), "stays failed");

        // whole lines count: 17 bytes for the first, 34 with the second
        let mut f = SseFramer::new(32);
        let err = f
            .push(b"data: 0123456789\ndata: 0123456789\n", &mut out)
            .unwrap_err();
        assert_eq!(err, FrameError::EventTooLarge { line: 2, limit: 32 });
        assert!(err.to_string().contains("line 2"));
    }

    #[test]
    fn invalid_utf8_names_its_line() {
        let err = frames_whole(b"data: ok\n\ndata: \xff\n\n").unwrap_err();
        assert_eq!(err, FrameError::InvalidUtf8 { line: 3 });
    }

    #[test]
    fn writer_output_reframes_exactly() {
        let mut out = Vec::new();
        write_comment(&mut out, "ping");
        write_id(&mut out, "3");
        write_data(&mut out, b"a\nb");
        write_data(&mut out, b"x\r\ny\rz\n");
        write_data(&mut out, b"");
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            ": ping\n\nid: 3\ndata: a\ndata: b\n\ndata: x\ndata: y\ndata: z\ndata: \n\ndata: \n\n"
        );
        let frames = assert_split_invariant(&out);
        assert_eq!(data(&frames), ["a\nb", "x\ny\nz\n", ""]);
        assert_eq!(frames[0].id.as_deref(), Some("3"));
    }

    /// Found by the `sse_framer` fuzz target: the line being read was measured
    /// whole while a complete line counted only its value, so the same stream
    /// failed with `EventTooLarge` or not (or with another error) depending on
    /// where its bytes were cut.
    #[test]
    fn size_limit_does_not_depend_on_where_the_input_is_cut() {
        let inputs: [&[u8]; 4] = [
            b"data: 1\nan-unknown-and-rather-long-field-name: \xff\n\n",
            b"\xEF\xBB\xBFdata: 0123456789\n\ndata: x\n\n",
            b": a heartbeat comment that goes on\n\ndata: x\r\n\r\n",
            b"data:{\"a\":\n\xC5\xCE\x82\n\n",
        ];
        for input in inputs {
            for limit in 1..input.len() + 2 {
                let run = |cut: usize| {
                    let mut f = SseFramer::new(limit);
                    let mut out = Vec::new();
                    f.push(&input[..cut], &mut out)
                        .and_then(|_| f.push(&input[cut..], &mut out))
                        .and_then(|_| f.finish(&mut out))
                        .map(|_| out)
                };
                let whole = run(input.len());
                for cut in 0..=input.len() {
                    assert_eq!(run(cut), whole, "limit {limit}, cut at {cut}: {input:?}");
                }
                if let Ok(frames) = whole {
                    assert!(frames.iter().all(|f| f.data.len() <= limit));
                }
            }
        }
    }

    #[test]
    fn a_framer_between_events_lets_its_buffers_go() {
        let mut f = SseFramer::new(1024);
        let mut out = Vec::new();
        // One's buffer goes to the spares, then to the event after two;
        // two's to the spares.
        for event in [&b"data: one\n\n"[..], b"data: two\n\n"] {
            f.push(event, &mut out).unwrap();
            for frame in out.drain(..) {
                f.recycle(frame);
            }
        }
        assert!(f.spare_bytes > 0 && f.pending.data.capacity() > 0);
        f.release_idle();
        assert_eq!(f.spare_bytes, 0);
        assert!(f.spare.is_empty());
        assert_eq!(f.pending.data.capacity(), 0);
        assert_eq!(f.line.capacity(), 0);
        // Mid-event, what was read stays.
        f.push(b"data: thr", &mut out).unwrap();
        f.release_idle();
        f.push(b"ee\n\n", &mut out).unwrap();
        assert_eq!(data(&out), ["three"]);
    }
}
