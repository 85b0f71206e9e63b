//! Generates the Rust types from the vendored AG-UI schema in `proto/`.
//! protox parses the files (no `protoc` on the machine); prost-build writes the code.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/events.proto",
        "proto/types.proto",
        "proto/patch.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    // The descriptor set is also kept for tests/schema.rs, which checks the
    // field layout against what @ag-ui/proto 1.0.0's generated code writes.
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let mut set = Vec::new();
    prost::Message::encode(&descriptors, &mut set)?;
    std::fs::write(out.join("ag_ui_descriptor.bin"), set)?;
    prost_build::Config::new().compile_fds(descriptors)?; // Struct/Value come from prost-types (the default)
    Ok(())
}
