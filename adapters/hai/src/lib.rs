//! babelgate adapter for HAI, ZTE's Human Agent Interaction Protocol (an AG-UI
//! derivative; wire reference in /work/shared/protocols, mapping in
//! docs/mapping/hai.md).
//!
//! - [`HaiDecoder`]: HAI SSE frames -> core events (`BUSINESS_DATA_*` split into
//!   text, reasoning and data events);
//! - [`HaiEncoder`]: any core event sequence -> a stream a HAI client accepts;
//! - [`HaiRequests`]: the `RunAgentInput` body a HAI `HttpAgent` posts to `/awp`.
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

pub mod decoder;
pub mod encoder;
pub mod request;
pub mod wire;

pub use decoder::HaiDecoder;
pub use encoder::HaiEncoder;
pub use request::HaiRequests;

/// What the gateway does for this dialect beyond translating it. HAI clients send the whole history; a reconnect gets the events after `Last-Event-ID`, or a snapshot (the spec has the agent send `MESSAGE_SNAPSHOT`).
pub const POLICY: babelgate_core::Policy = babelgate_core::Policy {
    gateway_keeps_history: false,
    upstream_keeps_history: false,
    resume: babelgate_core::Resume::AfterOrSnapshot,
    extension_frames: false,
    binary: true,
    binary_custom_prefix: Some("hai"),
    clock_timestamps: true,
};

#[cfg(test)]
mod tests;
