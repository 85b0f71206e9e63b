#![no_main]
//! Strings through the direct JSON writers (core and the Vercel encoder),
//! compared with serde_json: see `babelgate_fuzz::fast::check_fast_json`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("fast_json", data));
