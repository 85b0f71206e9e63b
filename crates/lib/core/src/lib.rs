//! The protocol-neutral heart of babelgate.
//!
//! Every dialect adapter decodes its upstream stream into [`Event`]s and encodes
//! [`Event`]s into its client stream, so any pair chains through this crate
//! without pairwise code. Nothing here does I/O: bytes go in, bytes come out.
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

pub mod assemble;
pub mod codec;
pub mod cost;
pub mod dialect;
pub mod event;
pub mod fast;
pub mod ids;
pub mod intent;
pub mod journal;
pub mod json;
pub mod length;
pub mod policy;
pub mod request;
pub mod shape;
pub mod sink;
pub mod sse;
#[doc(hidden)]
pub mod testing;
pub mod track;
pub mod translate;

pub use codec::{DecodeError, Decoder, EncodeContext, Encoder, RequestError, RequestTranslator};
pub use dialect::Dialect;
pub use event::{Event, EventKind, Extra, Interrupt, Outcome, Role};
pub use ids::{Clock, IdGen};
pub use intent::{AgentAbout, Intent, Refusal, RequestFault, RunAsk, Skill};
pub use length::{FramingError, LengthFramer};
pub use policy::{Policy, Resume};
pub use request::RunRequest;
pub use shape::Shaper;
pub use sink::{Framing, Sink, Span, SpanKind};
pub use sse::{Frame, FrameError, SseFramer};
pub use track::{OpenList, OpenTracker};
pub use translate::{TranslateError, Translator};
