//! The babelgate gateway: routes, server, store and the `babelgate` CLI.
#![forbid(unsafe_code)]

pub mod registry;
