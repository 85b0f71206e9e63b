//! Every adapter by dialect name (see `babelgate-registry`).

pub use babelgate_registry::{decoder, encoder, policy, requests, translator};
