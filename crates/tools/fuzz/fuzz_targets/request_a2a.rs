#![no_main]
//! An arbitrary A2A JSON-RPC request body, parsed and built for every
//! dialect: see `babelgate_fuzz::check_request`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("request_a2a", data));
