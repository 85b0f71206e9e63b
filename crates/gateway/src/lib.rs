//! The babelgate gateway: routes, server, store and the `babelgate` CLI.
#![forbid(unsafe_code)]

pub mod config;
pub mod demo;
pub mod error;
pub mod registry;
pub mod server;
pub mod store;
