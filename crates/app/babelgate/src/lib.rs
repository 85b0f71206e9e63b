//! The babelgate gateway: routes, server, store and the `babelgate` CLI.
// Nothing reachable from input may panic: no indexing, slicing, unwrap or
// expect outside tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::string_slice,
        clippy::unwrap_used,
        clippy::expect_used
    )
)]
#![forbid(unsafe_code)]

pub mod access;
pub mod body;
pub mod config;
pub mod conn;
pub mod demo;
pub mod error;
pub mod host;
pub mod inflight;
pub mod inspector;
pub mod limits;
pub mod metrics;
pub mod process;
pub mod registry;
pub mod resume;
pub mod server;
pub mod service;
pub mod shutdown;
pub mod telemetry;
pub mod tls;
pub mod transport;
pub mod upstream;
pub mod wake;
pub mod ws;
