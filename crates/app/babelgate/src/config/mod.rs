//! gateway.toml: parsed raw (unknown keys rejected), then compiled into the
//! runtime [`Config`], collecting every error with its line and column so that
//! `babelgate check` can print them all at once.

pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// `client_stall_timeout_ms` of a route that does not set it; also the
/// deadline of answers that are not a route's (health, errors, inspector).
pub const DEFAULT_CLIENT_STALL_TIMEOUT_MS: u64 = 30_000;

mod auth;
mod compile;
mod error;
mod model;
mod raw;
mod route;

pub use error::{ConfigError, ConfigErrors};
pub use model::*;
pub use raw::schema;

#[cfg(test)]
mod tests;
