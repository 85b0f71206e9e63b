#![no_main]
//! An arbitrary A2A JSON-RPC request body, parsed and built for every
//! dialect: see `babelgate_fuzz::check_request`.
use babelgate_core::Dialect;
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::check_request(Dialect::A2a, data));
