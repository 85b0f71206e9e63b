#![no_main]
//! The HTTP/1.1 codec on arbitrary bytes: see `babelgate_fuzz::http1::check_http1`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("http1_codec", data));
