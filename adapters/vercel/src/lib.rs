//! Vercel AI SDK UI message stream v1 adapter: the stream `useChat` reads
//! (`x-vercel-ai-ui-message-stream: v1`) and the body its
//! `DefaultChatTransport` posts. What maps to what: docs/mapping/vercel.md.
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

pub use decoder::VercelDecoder;
pub use encoder::VercelEncoder;
pub use request::VercelRequests;

/// What the gateway does for this dialect beyond translating it. `useChat` sends the whole history and asks to resume on every page load: only a running answer, from its `start`.
pub const POLICY: babelgate_core::Policy = babelgate_core::Policy {
    gateway_keeps_history: false,
    upstream_keeps_history: false,
    resume: babelgate_core::Resume::RunningFromStart,
    extension_frames: false,
    binary: false,
    binary_custom_prefix: None,
    clock_timestamps: false,
};

#[cfg(test)]
mod tests;
