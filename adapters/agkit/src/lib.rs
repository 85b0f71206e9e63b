//! babelgate adapter for the AG-Kit legacy send-message dialect, as spoken by
//! npm `@cloudbase/agent-ui-web` 0.0.24 (client) and PyPI
//! `cloudbase-agent-server` 0.1.1 (server): `data: {json}` frames with a
//! `type`, shorthand text without ids, `data: [DONE]` at the end, and a
//! request body keyed by `conversationId`. See docs/mapping/agkit.md.
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

pub use decoder::AgKitDecoder;
pub use encoder::AgKitEncoder;
pub use request::AgKitRequests;

/// What the gateway does for this dialect beyond translating it. The legacy client sends only its new message, and AG-Kit servers keep their own history: the gateway keeps it for AG-Kit clients and sends AG-Kit upstreams only what is new.
pub const POLICY: babelgate_core::Policy = babelgate_core::Policy {
    gateway_keeps_history: true,
    upstream_keeps_history: true,
    resume: babelgate_core::Resume::AfterOrFromStart,
    extension_frames: true,
    binary: false,
    binary_custom_prefix: None,
    clock_timestamps: false,
};

#[cfg(test)]
mod tests;
