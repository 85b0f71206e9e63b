#![no_main]
//! An arbitrary A2A upstream stream (JSON-RPC results on SSE), framed,
//! decoded and translated to every dialect: see `babelgate_fuzz::check_decode`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("decode_a2a", data));
