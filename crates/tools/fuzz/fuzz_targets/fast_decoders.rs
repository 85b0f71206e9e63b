#![no_main]
//! Frames, one per line, through the Vercel, AG-Kit and HAI decoders' fast
//! paths and their general paths: see `babelgate_fuzz::decoders`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("fast_decoders", data));
