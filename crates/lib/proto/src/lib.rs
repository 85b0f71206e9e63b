#![forbid(unsafe_code)]
//! AG-UI's protobuf binary format (`application/vnd.ag-ui.event+proto`):
//! - [`encode_event`] / [`decode_event`]: one event's JSON object to and from
//!   an `ag_ui.Event` message, byte for byte as @ag-ui/proto 1.0.0 does;
//! - [`ProtoFramer`] / [`write_frame`]: the transport framing, each message
//!   behind a 4-byte big-endian length.
//!
//! The schema is vendored in `proto/` (see the README for its origin); [`pb`]
//! holds the types prost generates from it.

mod custom;
mod event;
pub mod flat;
mod frame;
mod wire;

pub use custom::{decode_event_as, encode_event_as, encode_event_as_general, restore};
pub use event::{
    decode_event, decode_event_general, encode_event, encode_event_general, encode_event_json,
    write_flat_event_json,
};
pub use frame::{
    write_event, write_frame, write_object, write_own_event, FramingError, ProtoFramer,
    DEFAULT_MAX_MESSAGE_BYTES,
};

/// Whether events of `event_type` are a dialect's own: the schema has no
/// message for them, and they travel as `CUSTOM` events.
pub fn is_own_type(event_type: &str) -> bool {
    !wire::schema().event_types.contains_key(event_type)
}
pub use wire::MAX_DEPTH;

/// The schema's compiled descriptors (a `google.protobuf.FileDescriptorSet`,
/// the vendored files and what they import), for reflection and tests.
pub const DESCRIPTOR_SET: &[u8] = wire::DESCRIPTOR;

/// The media type of the binary transport.
pub const MEDIA_TYPE: &str = "application/vnd.ag-ui.event+proto";

/// The types prost generates from `proto/*.proto` (package `ag_ui`).
#[allow(clippy::all, missing_docs)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/ag_ui.rs"));
}

/// Why an event could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("an AG-UI event must be a JSON object")]
    NotAnObject,
    #[error("the event has no string \"type\"")]
    NoType,
    #[error("event type {0:?} has no message in the AG-UI protobuf schema")]
    UnknownEventType(String),
    #[error("field {field}: expected {expected}")]
    Field {
        field: String,
        expected: &'static str,
    },
    #[error("nested deeper than {} levels", wire::MAX_DEPTH)]
    TooDeep,
    #[error(
        "the message decodes to more JSON values than its size allows (at most {}x its bytes \
         plus {} bytes once parsed)",
        babelgate_core::cost::FACTOR,
        babelgate_core::cost::CONSTANT
    )]
    TooLarge,
    #[error("the message carries no event this schema knows")]
    NoEvent,
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
}

impl Error {
    fn field(field: &str, expected: &'static str) -> Self {
        Error::Field {
            field: field.to_string(),
            expected,
        }
    }
}
