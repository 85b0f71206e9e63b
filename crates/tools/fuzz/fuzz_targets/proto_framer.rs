#![no_main]
//! The AG-UI protobuf transport on arbitrary bytes: see `babelgate_fuzz::proto::check_proto`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| babelgate_fuzz::run("proto_framer", data));
