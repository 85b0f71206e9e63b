//! What the registry's integration tests share.

use babelgate_core::{testing, Dialect};

/// The fixtures of the golden tests (`tests/fixtures/<dialect>/*.sse`) and
/// the oracle captures (`tests/fixtures/oracle/<scenario>.<dialect>.sse`).
pub fn fixtures() -> Vec<(Dialect, String, Vec<u8>)> {
    let mut out = Vec::new();
    for d in Dialect::ALL {
        for (name, bytes) in testing::fixtures(d.as_str()) {
            out.push((d, name, bytes));
        }
    }
    for (stem, bytes) in testing::fixtures("oracle") {
        let dialect = stem
            .rsplit('.')
            .next()
            .and_then(|d| d.parse::<Dialect>().ok());
        if let Some(d) = dialect {
            out.push((d, format!("oracle/{stem}"), bytes));
        }
    }
    assert!(out.len() >= 40, "the fixture corpus: {} files", out.len());
    out
}
