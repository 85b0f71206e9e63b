//! What the registry's integration tests share.

use std::path::{Path, PathBuf};

use babelgate_core::Dialect;

/// The fixtures of the golden tests (`tests/fixtures/<dialect>/*.sse`) and
/// the oracle captures (`tests/fixtures/oracle/<scenario>.<dialect>.sse`).
pub fn fixtures() -> Vec<(Dialect, String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures");
    let sse = |dir: PathBuf| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "sse"))
            .collect();
        files.sort();
        files
    };
    let mut out = Vec::new();
    for d in Dialect::ALL {
        for f in sse(root.join(d.as_str())) {
            let name = f.file_stem().unwrap().to_string_lossy().into_owned();
            out.push((d, name, std::fs::read(&f).unwrap()));
        }
    }
    for f in sse(root.join("oracle")) {
        let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
        let dialect = stem
            .rsplit('.')
            .next()
            .and_then(|d| d.parse::<Dialect>().ok());
        if let Some(d) = dialect {
            out.push((d, format!("oracle/{stem}"), std::fs::read(&f).unwrap()));
        }
    }
    assert!(out.len() >= 40, "the fixture corpus: {} files", out.len());
    out
}
