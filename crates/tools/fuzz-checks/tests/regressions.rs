//! Replays every fuzz regression seed through its target's check, so that a
//! crash once found fails `cargo test`, not only a fuzz run: the corpus files
//! named `regression-*` (crates/tools/fuzz/README.md, "Seed corpus") and every input
//! libFuzzer saved under `crates/tools/fuzz/artifacts/<target>/` (crash, timeout, OOM).
//!
//! The targets are found on disk, so a new target, a new regression seed or a
//! new artifact is replayed without touching this file; a target with no entry
//! in `TARGETS` fails instead of being skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use babelgate_fuzz_checks::{run, TARGETS};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Names of the entries of `dir` (empty when it does not exist).
fn entries(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = read
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn known() -> BTreeSet<&'static str> {
    TARGETS.iter().map(|(name, _)| *name).collect()
}

/// Each file in fuzz_targets/ is a target that runs its own name through
/// `run`, each has a corpus directory, and each is in `TARGETS`, and back.
#[test]
fn every_fuzz_target_is_known_here() {
    let fuzz = fuzz_dir();
    let mut on_disk = BTreeSet::new();
    for file in entries(&fuzz.join("fuzz_targets")) {
        let name = file
            .strip_suffix(".rs")
            .expect("only .rs files")
            .to_string();
        let text = std::fs::read_to_string(fuzz.join("fuzz_targets").join(&file)).unwrap();
        assert!(
            text.contains(&format!("babelgate_fuzz::run(\"{name}\", data)")),
            "fuzz_targets/{file} must call babelgate_fuzz::run(\"{name}\", data)"
        );
        on_disk.insert(name);
    }
    let known: BTreeSet<String> = known().into_iter().map(String::from).collect();
    assert_eq!(
        on_disk, known,
        "fuzz_targets/ and TARGETS name different targets"
    );
    let corpora: BTreeSet<String> = entries(&fuzz.join("corpus")).into_iter().collect();
    assert_eq!(
        corpora, known,
        "crates/tools/fuzz/corpus/ and TARGETS name different targets"
    );
    for dir in entries(&fuzz.join("artifacts")) {
        assert!(
            known.contains(&dir),
            "crates/tools/fuzz/artifacts/{dir}: no such target"
        );
    }
}

/// The regression seeds and saved artifacts of every target, each through the
/// target's check; all are run and the failures listed together.
#[test]
fn every_regression_seed_and_artifact_passes_its_target() {
    let fuzz = fuzz_dir();
    let mut replayed = 0;
    let mut failed = Vec::new();
    for target in known() {
        let seeds = entries(&fuzz.join("corpus").join(target))
            .into_iter()
            .filter(|f| f.starts_with("regression-"))
            .map(|f| fuzz.join("corpus").join(target).join(f));
        let artifacts = entries(&fuzz.join("artifacts").join(target))
            .into_iter()
            .map(|f| fuzz.join("artifacts").join(target).join(f));
        for file in seeds.chain(artifacts) {
            let data = std::fs::read(&file).unwrap();
            replayed += 1;
            if std::panic::catch_unwind(|| run(target, &data)).is_err() {
                failed.push(format!("{target}: {}", file.display()));
            }
        }
    }
    // Not vacuous: the checked-in corpus holds regression seeds.
    assert!(replayed >= 10, "only {replayed} seeds found");
    assert!(failed.is_empty(), "failing seeds:\n{}", failed.join("\n"));
}

#[test]
#[should_panic(expected = "no fuzz target named")]
fn an_unknown_target_is_refused() {
    run("no_such_target", b"");
}
