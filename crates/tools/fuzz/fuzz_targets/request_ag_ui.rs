#![no_main]
//! An arbitrary AG-UI request body, parsed and built for every dialect: see
//! `babelgate_fuzz::check_request`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("request_ag_ui", data));
