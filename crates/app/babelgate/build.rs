//! The translation's fingerprint: a hash of the sources that decide what a
//! run's record makes again (the core, the protobuf codec, the adapters,
//! the registry, and the gateway's record and transports), given to the
//! crate as `BABELGATE_TRANSLATION`. A run log names it (`resume.rs`,
//! `RECORD_VERSION`): a follower built from other sources does not continue
//! after an id of it, since its bytes could differ. Outside this workspace
//! (no such sources) it is `unknown`, and the package version alone tells.

use std::path::{Path, PathBuf};

/// Paths from the workspace's root.
const SOURCES: [&str; 6] = [
    "crates/lib/core/src",
    "crates/lib/proto",
    "crates/app/registry/src",
    "adapters",
    "crates/app/babelgate/src/resume.rs",
    "crates/app/babelgate/src/transport.rs",
];

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let mut files = Vec::new();
    for source in SOURCES {
        let path = root.join(source);
        println!("cargo:rerun-if-changed={}", path.display());
        collect(&path, &mut files);
    }
    files.sort();
    // FNV-1a: a hash whose value no toolchain changes.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for file in &files {
        let name = file.strip_prefix(&root).unwrap_or(file);
        feed(name.to_string_lossy().as_bytes());
        feed(&std::fs::read(file).unwrap_or_default());
    }
    let fingerprint = match files.is_empty() {
        true => "unknown".to_string(),
        false => format!("{hash:016x}"),
    };
    println!("cargo:rustc-env=BABELGATE_TRANSLATION={fingerprint}");
}

/// The `.rs` and `.proto` files at or under `path`.
fn collect(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            // Build outputs and installed packages are not sources.
            let name = entry.file_name();
            if name == "target" || name == "node_modules" {
                continue;
            }
            collect(&p, files);
        }
    } else if path.extension().is_some_and(|e| e == "rs" || e == "proto") {
        files.push(path.to_path_buf());
    }
}
