//! babelgate's one HTTP/1.1 codec (RFC 9112), for both of the gateway's
//! roles: the server fast path (a first request answered without hyper) and
//! the client of plain-HTTP upstreams. It reads and writes heads, decides
//! how a body is delimited, and frames and unframes bodies; it does no I/O,
//! so the gateway's socket code only moves bytes.
//!
//! The rules are hyper's (the server and client the gateway uses for
//! everything else), and `tests/differential.rs` holds them to it. Where this
//! codec is stricter, it says so here.
//!
//! Limits, each an error when passed:
//! - a head (request or response) of [`MAX_HEAD`] bytes, with at most
//!   [`MAX_HEADERS`] fields (hyper's default number; hyper's buffer lets a
//!   head grow to about 400 KiB, this codec keeps a stream's memory small);
//! - a chunk size line, its extensions included, of [`MAX_LINE`] bytes
//!   (hyper bounds extensions over the whole body at 16 KiB instead);
//! - chunked trailers of [`MAX_TRAILERS`] bytes and [`MAX_HEADERS`] fields
//!   (hyper's).

mod body;
mod chunked;
mod head;
mod server;
mod write;

pub use body::{BodyDecoder, BodyEncoder, BodyLength, FramingError, Incomplete, TooLong};
pub use chunked::{Chunked, ChunkedError, Decoded};
pub use head::{
    parse_request, parse_response, HeadError, RequestHead, ResponseHead, ResponseReader,
};
pub use server::{whole_request, WholeRequest};
pub use write::{
    chunk_size_line, connection_has, is_own, request_bytes, response_head, LAST_CHUNK,
};

/// The most header fields a head (or a body's trailers) may have: hyper's
/// default.
pub const MAX_HEADERS: usize = 100;
/// The longest head read, request or response.
pub const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk size line (its extensions included) or trailer line.
pub const MAX_LINE: usize = 4096;
/// The most trailer bytes after a chunked body's last chunk (hyper's).
pub const MAX_TRAILERS: usize = 16 * 1024;
