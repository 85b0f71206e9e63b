#![no_main]
//! AG-UI frames, structured or as text, through the decoder's fast paths and
//! its serde_json path: see `babelgate_fuzz::fast::check_fast_ag_ui`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("fast_ag_ui", data));
