//! The registry is the one place that knows every adapter: outside it and the
//! adapters themselves, no code names a dialect, so a fifth dialect adds an
//! adapter crate, a `Dialect` variant and its registry arms, and touches no
//! core or gateway code. What differs between dialects around their streams
//! is each adapter's `POLICY`, read through `registry::policy`.

use std::path::{Path, PathBuf};

const VARIANTS: [&str; 5] = [
    "Dialect::AgUi",
    "Dialect::Hai",
    "Dialect::Vercel",
    "Dialect::AgKit",
    "Dialect::A2a",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") && !path.ends_with("tests.rs") {
            // A `tests.rs` is a test module in a file of its own (declared
            // `#[cfg(test)] mod tests;`, last in its parent): test code.
            out.push(path);
        }
    }
}

/// The code of a file before its unit tests (tests may name dialects).
fn code_before_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

#[test]
fn no_code_outside_the_registry_and_the_adapters_names_a_dialect() {
    let root = repo_root();
    let mut files = Vec::new();
    for dir in [
        "crates/lib/core/src",
        "crates/app/babelgate/src",
        "crates/lib/store/src",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "{} files", files.len());
    let mut named = Vec::new();
    for file in &files {
        // The enum itself: its variants, names and list.
        if file.ends_with("crates/lib/core/src/dialect.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in code_before_tests(&text).lines().enumerate() {
            if VARIANTS.iter().any(|v| line.contains(v)) {
                named.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        named.is_empty(),
        "dialects named outside the registry:\n{}",
        named.join("\n")
    );
}

#[test]
fn the_scan_sees_a_dialect_where_one_is_named() {
    let text = "fn f(d: Dialect) -> bool { d == Dialect::AgKit }\n#[cfg(test)]\nmod tests { Dialect::Hai }";
    let code = code_before_tests(text);
    assert!(VARIANTS.iter().any(|v| code.contains(v)));
    assert!(!code.contains("Dialect::Hai"));
}

/// The fifth dialect, A2A, came as an adapter crate, its variant and its
/// registry arms: outside those, no code names it in any spelling (its
/// needs beyond translating go through the adapter interface the gateway
/// calls for every dialect: the protocol version header its upstreams
/// require, the classification of a request as a run or as a get, follow
/// or stop of a run by id (`RequestTranslator::classify`), the answer
/// about a run (`Encoder::state_answer`), the dialect's refusals
/// (`RequestTranslator::refusal`) and its description of the agent
/// (`RequestTranslator::describe`)).
#[test]
fn no_code_outside_its_adapter_and_the_registry_names_a2a() {
    let root = repo_root();
    let mut files = Vec::new();
    for dir in [
        "crates/lib/core/src",
        "crates/app/babelgate/src",
        "crates/lib/store/src",
        "crates/lib/proto/src",
        "adapters/ag-ui/src",
        "adapters/hai/src",
        "adapters/vercel/src",
        "adapters/agkit/src",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut named = Vec::new();
    for file in &files {
        if file.ends_with("crates/lib/core/src/dialect.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in code_before_tests(&text).lines().enumerate() {
            if line.to_ascii_lowercase().contains("a2a") {
                named.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        named.is_empty(),
        "A2A named outside its adapter and the registry:\n{}",
        named.join("\n")
    );
}
