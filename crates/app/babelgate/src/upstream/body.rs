//! A response body read by the gateway's own HTTP/1.1 client: a stream of
//! the body's bytes, read from the socket by whoever polls it (the stream's
//! pump), with no task or channel of its own.
//!
//! Memory: the read buffer is let go whenever all it held has been handed
//! on, so an open stream waiting for its next event holds no buffer; a read
//! takes [`READ_SIZE`], more (up to [`MAX_READ_SIZE`]) after reads that
//! filled it.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use tokio::net::TcpStream;

use babelgate_http1::{BodyDecoder, BodyLength, ChunkedError, Incomplete};

/// What a read asks room for at first.
pub const READ_SIZE: usize = 4096;
/// What a read asks room for at most (after reads that filled their room).
pub const MAX_READ_SIZE: usize = 64 * 1024;

/// Why a body could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("reading the upstream's body: {0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Chunked(#[from] ChunkedError),
    #[error("the upstream closed the connection {0} bytes before the end its content-length gave")]
    ShortLength(u64),
    #[error("the upstream closed the connection before the body's last chunk")]
    ShortChunked,
}

/// A response body being read.
pub struct Body {
    io: Option<TcpStream>,
    /// Read but not yet handed on.
    buf: BytesMut,
    decoder: BodyDecoder,
    read_size: usize,
    /// Reads that found nothing although the socket looked readable (each a
    /// wasted syscall); kept for the tests.
    empty_reads: u64,
}

impl Body {
    /// The body of a response whose head was read from `io`; `buf` holds
    /// what was read after the head.
    pub fn new(io: TcpStream, buf: BytesMut, length: BodyLength) -> Body {
        let decoder = BodyDecoder::new(length);
        Body {
            io: (!decoder.is_done()).then_some(io),
            buf,
            decoder,
            read_size: READ_SIZE,
            empty_reads: 0,
        }
    }

    /// Reads that found nothing although the socket looked readable.
    pub fn empty_reads(&self) -> u64 {
        self.empty_reads
    }

    /// The room the read buffer holds (none while a stream waits).
    pub fn buffered_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Ends the body after `e`: nothing more is read or handed on.
    fn fail(&mut self, e: BodyError) -> BodyError {
        self.io = None;
        self.buf = BytesMut::new();
        self.decoder = BodyDecoder::new(BodyLength::Empty);
        e
    }

    /// Reads more from the socket into the buffer: the bytes read (0 at the
    /// end of the connection).
    ///
    /// The read goes through tokio's `poll_read`, which takes a read that
    /// did not fill its room as proof that the socket is drained (epoll is
    /// edge-triggered): the next poll waits for the next event instead of
    /// asking the kernel once more only to hear `EAGAIN`. Most upstream
    /// reads are one event, shorter than the room, so that is a syscall
    /// saved per event.
    fn poll_fill(
        io: &mut TcpStream,
        buf: &mut BytesMut,
        size: &mut usize,
        empty_reads: &mut u64,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        if io.poll_read_ready(cx)?.is_pending() {
            if buf.is_empty() {
                // Waiting: let the buffer go (what was handed on keeps its
                // part); room is taken again when there is something to read.
                *buf = BytesMut::new();
            }
            return Poll::Pending;
        }
        if buf.capacity() - buf.len() < *size / 2 {
            buf.reserve(*size);
        }
        let room = buf.capacity() - buf.len();
        match tokio_util::io::poll_read_buf(Pin::new(io), cx, buf) {
            Poll::Ready(Ok(n)) => {
                if n == room && *size < MAX_READ_SIZE {
                    *size *= 2;
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                // The socket looked readable and was not: one syscall
                // answered `EAGAIN`.
                *empty_reads += 1;
                if buf.is_empty() {
                    *buf = BytesMut::new();
                }
                Poll::Pending
            }
        }
    }
}

impl Stream for Body {
    type Item = Result<Bytes, BodyError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match this.decoder.decode(&mut this.buf) {
                Ok(Some(data)) => return Poll::Ready(Some(Ok(data))),
                Ok(None) => {}
                Err(e) => return Poll::Ready(Some(Err(this.fail(e.into())))),
            }
            if this.decoder.is_done() {
                // Nothing more is read; the connection closes with the body.
                this.io = None;
                return Poll::Ready(None);
            }
            let Some(io) = this.io.as_mut() else {
                return Poll::Ready(None);
            };
            match ready!(Self::poll_fill(
                io,
                &mut this.buf,
                &mut this.read_size,
                &mut this.empty_reads,
                cx
            )) {
                Ok(0) => {
                    this.io = None;
                    return Poll::Ready(match this.decoder.at_close() {
                        Ok(()) => None,
                        Err(Incomplete::Length(left)) => Some(Err(BodyError::ShortLength(left))),
                        Err(Incomplete::Chunked) => Some(Err(BodyError::ShortChunked)),
                    });
                }
                Ok(_) => {}
                Err(e) => return Poll::Ready(Some(Err(this.fail(e.into())))),
            }
        }
    }
}
