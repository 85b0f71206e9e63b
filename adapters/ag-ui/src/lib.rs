//! babelgate adapter for AG-UI 1.0 (`@ag-ui/core`, `@ag-ui/client`, PyPI
//! `ag-ui-protocol`): decoder, encoder, request translator. See
//! docs/mapping/ag-ui.md for what maps to what.
#![forbid(unsafe_code)]
// Input from clients and upstreams reaches this crate: nothing it does may panic.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::string_slice,
        clippy::unwrap_used,
        clippy::expect_used
    )
)]

pub mod chunks;
pub mod decoder;
pub mod encoder;
pub mod request;
pub mod verify;
pub mod wire;

pub use decoder::AgUiDecoder;
pub use encoder::AgUiEncoder;
pub use request::AgUiRequests;

/// What the gateway does for this dialect beyond translating it. AG-UI clients send the whole history and reconnect with `Last-Event-ID` or for a snapshot (`@ag-ui/client` verifies a stream from its start).
pub const POLICY: babelgate_core::Policy = babelgate_core::Policy {
    gateway_keeps_history: false,
    upstream_keeps_history: false,
    resume: babelgate_core::Resume::AfterOrSnapshot,
    extension_frames: false,
    binary: true,
    binary_custom_prefix: None,
    clock_timestamps: false,
};

#[cfg(test)]
mod tests;
