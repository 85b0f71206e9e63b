#![no_main]
//! The SSE framer on arbitrary bytes: see `babelgate_fuzz::check_framer`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("sse_framer", data));
