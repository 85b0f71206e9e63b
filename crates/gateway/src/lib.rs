//! The babelgate gateway: routes, server, store and the `babelgate` CLI.
#![forbid(unsafe_code)]

pub mod access;
pub mod config;
pub mod conn;
pub mod demo;
pub mod error;
pub mod limits;
pub mod metrics;
pub mod registry;
pub mod resume;
pub mod server;
pub mod service;
pub mod tls;
