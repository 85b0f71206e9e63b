//! One test binary for the gateway's integration tests that share nothing
//! process-wide: each file is a module here, kept at its path (the docs
//! name them), so that `cargo test` builds and links the gateway's
//! generic code into one binary instead of one per file. The files that
//! set environment variables, a global allocator or a global log
//! subscriber stay binaries of their own (`Cargo.toml`, `[[test]]`).

mod common;

#[path = "axum_mount.rs"]
mod axum_mount;
#[path = "binary_drops.rs"]
mod binary_drops;
#[path = "bounds.rs"]
mod bounds;
#[path = "cli.rs"]
mod cli;
#[path = "cli_transport.rs"]
mod cli_transport;
#[path = "client_stall.rs"]
mod client_stall;
#[path = "cluster.rs"]
mod cluster;
#[path = "config_reference.rs"]
mod config_reference;
#[path = "doc_blocks.rs"]
mod doc_blocks;
#[path = "docs_index.rs"]
mod docs_index;
#[path = "frontend.rs"]
mod frontend;
#[path = "gateway.rs"]
mod gateway;
#[path = "hostile_input.rs"]
mod hostile_input;
#[path = "lifecycle.rs"]
mod lifecycle;
#[path = "mapping_doc.rs"]
mod mapping_doc;
#[path = "metrics.rs"]
mod metrics;
#[path = "otel.rs"]
mod otel;
#[path = "production.rs"]
mod production;
#[path = "resume.rs"]
mod resume;
#[path = "resume_follow.rs"]
mod resume_follow;
#[path = "transport.rs"]
mod transport;
#[path = "upstream_tls.rs"]
mod upstream_tls;
#[path = "ws_binary_upstream.rs"]
mod ws_binary_upstream;

/// With `autotests = false` a new file in `tests/` would run nowhere
/// unless it is named here or in `Cargo.toml`: each one is, once.
#[test]
fn every_test_file_runs_in_one_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let all = std::fs::read_to_string(dir.join("tests/all.rs")).unwrap();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(dir.join("tests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs") && n != "all.rs")
        .collect();
    files.sort();
    assert!(files.len() > 20, "{files:?}");
    for f in files {
        let here = all.matches(&format!("#[path = \"{f}\"]")).count();
        let alone = manifest.matches(&format!("path = \"tests/{f}\"")).count();
        assert_eq!(
            here + alone,
            1,
            "tests/{f}: in all.rs {here}, in Cargo.toml {alone}"
        );
    }
}
