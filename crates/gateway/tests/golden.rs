//! Golden files: every fixture of every dialect, translated into all four
//! dialects (16 pairs), snapshotted as `<scenario>.<from>-<to>.snap` under
//! tests/snapshots. The outputs are also written to `$BABELGATE_GOLDEN_OUT`
//! so that tests/node feeds them to the real client packages.

use std::path::{Path, PathBuf};

use babelgate::registry;
use babelgate_core::sse::{Frame, SseFramer};
use babelgate_core::{Dialect, EncodeContext};
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// All fixtures as (dialect, scenario, bytes), sorted.
fn fixtures() -> Vec<(Dialect, String, Vec<u8>)> {
    let mut out = Vec::new();
    for d in Dialect::ALL {
        let dir = repo_root().join("tests/fixtures").join(d.as_str());
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "sse"))
            .collect();
        files.sort();
        for f in files {
            let scenario = f.file_stem().unwrap().to_string_lossy().into_owned();
            out.push((d, scenario, std::fs::read(&f).unwrap()));
        }
    }
    out
}

/// Translates `input` fed in pieces of `chunk` bytes; returns the output and
/// the error text, if any.
fn translate(from: Dialect, to: Dialect, input: &[u8], chunk: usize) -> (Vec<u8>, Option<String>) {
    let mut tr = registry::translator(from, to, EncodeContext::deterministic(), 1 << 20);
    let mut out = Vec::new();
    let mut err = None;
    for piece in input.chunks(chunk.max(1)) {
        if let Err(e) = tr.push(piece, &mut out) {
            err = Some(e.to_string());
            break;
        }
    }
    if err.is_none() {
        if let Err(e) = tr.finish(&mut out) {
            err = Some(e.to_string());
        }
    }
    (out, err)
}

fn frames(bytes: &[u8]) -> Vec<Frame> {
    let mut f = SseFramer::default();
    let mut out = Vec::new();
    f.push(bytes, &mut out).unwrap();
    f.finish(&mut out).unwrap();
    out
}

/// Frame payloads as JSON values (or the raw text for non-JSON like [DONE]).
fn payloads(bytes: &[u8]) -> Vec<Value> {
    frames(bytes)
        .into_iter()
        .map(|f| serde_json::from_str(&f.data).unwrap_or(Value::String(f.data)))
        .collect()
}

#[test]
fn all_pairs_match_golden_snapshots() {
    let fixtures = fixtures();
    assert!(
        fixtures.len() >= 10,
        "expected the scenario corpus under tests/fixtures, found {} files",
        fixtures.len()
    );
    let golden_out = std::env::var_os("BABELGATE_GOLDEN_OUT").map(PathBuf::from);
    if let Some(dir) = &golden_out {
        // Only this run's outputs may be checked as current: a directory
        // that already holds files is someone else's.
        let stale = std::fs::read_dir(dir).map_or(0, |d| d.count());
        assert_eq!(
            stale,
            0,
            "BABELGATE_GOLDEN_OUT={} is not empty: give a fresh directory",
            dir.display()
        );
        std::fs::create_dir_all(dir).unwrap();
    }
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(repo_root().join("tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        for (from, scenario, input) in &fixtures {
            for to in Dialect::ALL {
                let (out, err) = translate(*from, to, input, usize::MAX);
                // Chunking must never change the result (hyper-style split test,
                // cheap enough at these sizes: byte by byte and odd pieces).
                for chunk in [1, 7, 64] {
                    let (again, err2) = translate(*from, to, input, chunk);
                    assert_eq!(
                        again, out,
                        "{scenario}.{from}-{to}: differs when fed in {chunk}-byte pieces"
                    );
                    assert_eq!(err2, err);
                }
                let name = format!("{scenario}.{from}-{to}");
                if let Some(dir) = &golden_out {
                    std::fs::write(dir.join(format!("{name}.sse")), &out).unwrap();
                }
                let text = String::from_utf8(out).expect("output is UTF-8");
                let shown = match &err {
                    Some(e) => format!("error: {e}\n---\n{text}"),
                    None => text,
                };
                insta::assert_snapshot!(name, shown);
            }
        }
    });
}

/// A dialect translated to itself gives back the same events, field order and
/// whitespace aside. A cut stream comes back whole-prefixed and then failed.
#[test]
fn same_dialect_is_identity() {
    for (d, scenario, input) in fixtures() {
        let (out, err) = translate(d, d, &input, usize::MAX);
        let mut want = payloads(&input);
        let got = payloads(&out);
        if scenario == "cut_mid_message" {
            assert_eq!(
                err.as_deref(),
                Some("the input ended before the run finished"),
                "{scenario}.{d}"
            );
        } else {
            assert_eq!(err, None, "{scenario}.{d}");
        }
        if d == Dialect::AgKit && scenario == "run_error" {
            // A failed run: no `[DONE]` after the error frame (the legacy
            // client takes `[DONE]` for success; docs/cut-streams.md).
            assert_eq!(want.pop(), Some(Value::String("[DONE]".into())));
        }
        if scenario == "cut_mid_message" {
            assert!(
                got.len() > want.len() && got[..want.len()] == want[..],
                "{scenario}.{d}: input must come back unchanged before the closing events\nwant {want:#?}\ngot {got:#?}"
            );
        } else if d == Dialect::Vercel && scenario == "unknown_events" {
            // The `ai` client rejects unknown chunk types, so the Vercel encoder
            // wraps them in a transient data part (docs/mapping/vercel.md): the
            // other frames are identical, the unknown one is carried inside.
            assert_eq!(got.len(), want.len(), "{scenario}.{d}");
            for (w, g) in want.iter().zip(&got) {
                if w != g {
                    assert_eq!(g["type"], "data-unknown", "{scenario}.{d}: {w} became {g}");
                    assert_eq!(&g["data"], w, "{scenario}.{d}: the raw chunk is kept");
                }
            }
        } else {
            assert_eq!(got, want, "{scenario}.{d}");
        }
    }
}

/// Every output of every pair reads back with the target's own decoder
/// without error (the real clients check them again in tests/node).
#[test]
fn every_output_decodes_in_its_dialect() {
    for (from, scenario, input) in fixtures() {
        for to in Dialect::ALL {
            let (out, _) = translate(from, to, &input, usize::MAX);
            let (_, err) = translate(to, to, &out, usize::MAX);
            assert_eq!(err, None, "{scenario}.{from}-{to}: output does not decode");
        }
    }
}

/// docs/mapping/<dialect>.md lists what the encoder does with every core event
/// kind: a new kind without a documented mapping fails here.
#[test]
fn mapping_docs_cover_every_event_kind() {
    for d in Dialect::ALL {
        let path = repo_root().join(format!("docs/mapping/{d}.md"));
        let doc =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let missing: Vec<_> = babelgate_core::event::EventKind::NAMES
            .iter()
            .filter(|n| !doc.contains(&format!("`{n}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "{}: no row for {missing:?}",
            path.display()
        );
    }
}
