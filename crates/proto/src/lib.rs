#![forbid(unsafe_code)]
//! AG-UI's protobuf binary format.

/// The types prost generates from `proto/*.proto` (package `ag_ui`).
#[allow(clippy::all, missing_docs)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/ag_ui.rs"));
}
