//! Length-delimited framing, the binary transports' counterpart of [`crate::sse`]:
//! each message preceded by its length as a 4-byte big-endian unsigned integer
//! (AG-UI 1.1's `application/vnd.ag-ui.event+proto`). Framing only: what a
//! message holds is the dialect's business (its decoder's `decode_binary`).
//!
//! [`LengthFramer`] is incremental like the SSE framer: bytes may arrive cut
//! anywhere, the result never depends on where. Limits: a message may hold at
//! most [`LengthFramer::max_message_bytes`] bytes; a larger length prefix fails
//! as soon as its four bytes are in, before any of the message is buffered.
//! Input that ends inside a prefix or a message fails at [`LengthFramer::finish`].

/// Default cap for one message, the same as the SSE framer's for one event.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("message {index}: length {len} is over the {limit}-byte limit")]
    TooLarge { index: u64, len: u64, limit: usize },
    #[error("message {index}: input ended {have} bytes into a {want}-byte {what}")]
    Truncated {
        index: u64,
        what: &'static str,
        have: usize,
        want: usize,
    },
    #[error("the framer failed before")]
    Failed,
}

/// Incremental reader of length-prefixed messages: push bytes as they arrive,
/// collect whole messages.
#[derive(Debug)]
pub struct LengthFramer {
    max_message_bytes: usize,
    /// The prefix read so far (fewer than 4 bytes while reading it).
    prefix: [u8; 4],
    prefix_len: usize,
    /// The message being read, once its prefix is known.
    want: Option<usize>,
    body: Vec<u8>,
    /// Messages dispatched so far (0-based index of the one being read).
    index: u64,
    failed: bool,
    /// Buffers of dispatched messages handed back ([`LengthFramer::recycle`]).
    spare: Vec<Vec<u8>>,
}

impl Default for LengthFramer {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_MESSAGE_BYTES)
    }
}

impl LengthFramer {
    pub fn new(max_message_bytes: usize) -> Self {
        LengthFramer {
            max_message_bytes,
            prefix: [0; 4],
            prefix_len: 0,
            want: None,
            body: Vec::new(),
            index: 0,
            failed: false,
            spare: Vec::new(),
        }
    }

    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// Bytes of the message not yet complete, held until it is.
    pub fn buffered_bytes(&self) -> usize {
        self.body.len()
    }

    /// Feeds bytes; every message they complete is appended to `out`. After an
    /// error the framer stays failed and dispatches nothing more.
    pub fn push(&mut self, mut input: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), FramingError> {
        if self.failed {
            return Err(FramingError::Failed);
        }
        while !input.is_empty() {
            match self.want {
                None => {
                    let n = (4 - self.prefix_len).min(input.len());
                    let (head, tail) = input.split_at(n);
                    for (slot, b) in self.prefix.iter_mut().skip(self.prefix_len).zip(head) {
                        *slot = *b;
                    }
                    self.prefix_len += n;
                    input = tail;
                    if self.prefix_len == 4 {
                        let len = u32::from_be_bytes(self.prefix);
                        if u64::from(len) > self.max_message_bytes as u64 {
                            self.failed = true;
                            return Err(FramingError::TooLarge {
                                index: self.index,
                                len: u64::from(len),
                                limit: self.max_message_bytes,
                            });
                        }
                        self.want = Some(len as usize);
                    }
                }
                Some(want) => {
                    let n = (want - self.body.len()).min(input.len());
                    let (head, tail) = input.split_at(n);
                    self.body.extend_from_slice(head);
                    input = tail;
                }
            }
            if let Some(want) = self.want {
                if self.body.len() == want {
                    let next = self.spare.pop().unwrap_or_default();
                    out.push(std::mem::replace(&mut self.body, next));
                    self.want = None;
                    self.prefix_len = 0;
                    self.index += 1;
                }
            }
        }
        Ok(())
    }

    /// Takes back a dispatched message's buffer for the next message (a
    /// few are kept: the framer's memory stays bounded).
    pub fn recycle(&mut self, mut message: Vec<u8>) {
        if self.spare.len() < 4 && message.capacity() <= 64 * 1024 {
            message.clear();
            self.spare.push(message);
        }
    }

    /// An empty buffer, recycled when one is kept, for a caller that has a
    /// message whole (a message transport's), which no framer needs to cut.
    pub fn spare(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// Ends the input: an error when it stopped inside a prefix or a message.
    pub fn finish(&mut self) -> Result<(), FramingError> {
        if self.failed {
            return Err(FramingError::Failed);
        }
        let err = match self.want {
            Some(want) => Some(FramingError::Truncated {
                index: self.index,
                what: "message",
                have: self.body.len(),
                want,
            }),
            None if self.prefix_len > 0 => Some(FramingError::Truncated {
                index: self.index,
                what: "length prefix",
                have: self.prefix_len,
                want: 4,
            }),
            None => None,
        };
        match err {
            Some(e) => {
                self.failed = true;
                Err(e)
            }
            None => Ok(()),
        }
    }
}

/// Appends one message behind its length prefix. A message over `u32::MAX`
/// bytes has no prefix to say so and is refused.
pub fn write_frame(out: &mut Vec<u8>, message: &[u8]) -> Result<(), FramingError> {
    let at = begin_frame(out);
    out.extend_from_slice(message);
    end_frame(out, at)
}

/// Opens a message written in place: room for its prefix, filled in by
/// [`end_frame`] once the message is written after it (no copy of it).
/// Where the frame starts.
pub(crate) fn begin_frame(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    at
}

/// Ends the message opened at `at`: its length into its prefix. One over
/// `u32::MAX` bytes is taken out again and refused.
pub(crate) fn end_frame(out: &mut Vec<u8>, at: usize) -> Result<(), FramingError> {
    let len = out.len().saturating_sub(at + 4);
    let prefix = u32::try_from(len).ok().zip(out.get_mut(at..at + 4));
    let Some((len, prefix)) = prefix else {
        out.truncate(at);
        return Err(FramingError::TooLarge {
            index: 0,
            len: len as u64,
            limit: u32::MAX as usize,
        });
    };
    prefix.copy_from_slice(&len.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three messages, one of them empty (a zero length is a valid frame).
    fn stream() -> (Vec<u8>, Vec<Vec<u8>>, Vec<usize>) {
        let messages = vec![b"first message".to_vec(), Vec::new(), vec![0xff; 300]];
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for m in &messages {
            write_frame(&mut bytes, m).unwrap();
            ends.push(bytes.len());
        }
        (bytes, messages, ends)
    }

    #[test]
    fn same_messages_at_every_split_offset() {
        let (bytes, want, _) = stream();
        for cut in 0..=bytes.len() {
            let mut f = LengthFramer::default();
            let mut out = Vec::new();
            f.push(&bytes[..cut], &mut out).unwrap();
            f.push(&bytes[cut..], &mut out).unwrap();
            f.finish().unwrap();
            assert_eq!(out, want, "cut at {cut}");
        }
        let mut f = LengthFramer::default();
        let mut out = Vec::new();
        for b in &bytes {
            f.push(std::slice::from_ref(b), &mut out).unwrap();
        }
        f.finish().unwrap();
        assert_eq!(out, want, "byte by byte");
    }

    #[test]
    fn input_ending_inside_a_frame_is_an_error() {
        let (bytes, _, ends) = stream();
        for cut in 1..bytes.len() {
            let mut f = LengthFramer::default();
            let mut out = Vec::new();
            f.push(&bytes[..cut], &mut out).unwrap();
            let result = f.finish();
            if ends.contains(&cut) {
                assert_eq!(result, Ok(()), "cut at {cut}");
            } else {
                assert!(
                    matches!(result, Err(FramingError::Truncated { .. })),
                    "cut at {cut}: {result:?}"
                );
            }
        }
    }

    #[test]
    fn a_prefix_over_the_limit_fails_before_its_message_is_buffered() {
        let mut f = LengthFramer::new(16);
        let mut out = Vec::new();
        let mut bytes = Vec::new();
        write_frame(&mut bytes, &[1; 16]).unwrap();
        f.push(&bytes, &mut out).unwrap();
        assert_eq!(out.len(), 1, "a message of exactly the limit passes");
        // Only the prefix of a 17-byte message: refused at once, nothing kept.
        let err = f.push(&17u32.to_be_bytes(), &mut out).unwrap_err();
        assert_eq!(
            err,
            FramingError::TooLarge {
                index: 1,
                len: 17,
                limit: 16
            }
        );
        assert!(f.body.capacity() == 0);
        // A failed framer stays failed.
        assert_eq!(f.push(&[0, 0, 0, 0], &mut out), Err(FramingError::Failed));
        assert_eq!(f.finish(), Err(FramingError::Failed));
        assert_eq!(out.len(), 1);
        // The largest prefix there is, with the default limit.
        let mut f = LengthFramer::default();
        assert!(matches!(
            f.push(&[0xff; 4], &mut out),
            Err(FramingError::TooLarge { .. })
        ));
    }
}
