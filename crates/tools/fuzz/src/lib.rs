//! The checks live in `crates/tools/fuzz-checks` (a member of the main workspace),
//! so that `cargo test` replays every regression seed with the very code the
//! fuzz targets run; this crate only re-exports them to the targets.
pub use babelgate_fuzz_checks::*;
