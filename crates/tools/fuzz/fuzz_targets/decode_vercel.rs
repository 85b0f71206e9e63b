#![no_main]
//! An arbitrary Vercel upstream stream, framed, decoded and translated to
//! every dialect: see `babelgate_fuzz::check_decode`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("decode_vercel", data));
