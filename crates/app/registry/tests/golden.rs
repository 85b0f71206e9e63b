//! Golden files: every fixture of every dialect, translated into all four
//! dialects (16 pairs), snapshotted as `<scenario>.<from>-<to>.snap` under
//! crates/app/registry/tests/snapshots. The outputs are also written to `$BABELGATE_GOLDEN_OUT`
//! so that tests/node feeds them to the real client packages.

use std::path::{Path, PathBuf};

use babelgate_core::sse::{Frame, SseFramer};
use babelgate_core::testing::{self, sse_payloads as payloads};
use babelgate_core::{Dialect, EncodeContext};
use babelgate_registry as registry;
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// All fixtures as (dialect, scenario, bytes), sorted.
fn fixtures() -> Vec<(Dialect, String, Vec<u8>)> {
    Dialect::ALL
        .into_iter()
        .flat_map(|d| {
            testing::fixtures(d.as_str())
                .into_iter()
                .map(move |(s, b)| (d, s, b))
        })
        .collect()
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
    settings.set_snapshot_path(repo_root().join("crates/app/registry/tests/snapshots"));
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

/// The type of a payload, for the rules below.
fn ty(v: &Value) -> &str {
    v["type"].as_str().unwrap_or("")
}

/// The events of `input` as the shape stage has them on every route, the
/// same-dialect ones included: an empty text message (a parent of tool
/// calls) reaches no client, and a step's close for a step never opened is
/// dropped. (What it adds is left to `same_dialect_is_identity`.)
fn shaped_input(d: Dialect, mut want: Vec<Value>) -> Vec<Value> {
    let (start, end, id) = match d {
        Dialect::AgUi => ("TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "messageId"),
        Dialect::Hai => ("BUSINESS_DATA_START", "BUSINESS_DATA_END", "messageId"),
        Dialect::Vercel => ("text-start", "text-end", "id"),
        _ => return want,
    };
    let mut i = 0;
    while i + 1 < want.len() {
        if ty(&want[i]) == start && ty(&want[i + 1]) == end && want[i][id] == want[i + 1][id] {
            want.drain(i..i + 2);
        } else {
            i += 1;
        }
    }
    if d == Dialect::Vercel {
        let mut open = false;
        want.retain(|v| match ty(v) {
            "start-step" => {
                open = true;
                true
            }
            "finish-step" => std::mem::replace(&mut open, false),
            _ => true,
        });
    }
    want
}

/// What the shape stage adds on every route: an end for the text still
/// open before a run's error, and the calls left for the client on an
/// AG-UI or HAI `RUN_FINISHED` (`outcome.pendingToolCallIds`). Taken out of
/// `got` where `want` has none of it.
fn without_added(d: Dialect, want: &[Value], mut got: Vec<Value>) -> Vec<Value> {
    let (end, error) = match d {
        Dialect::AgUi => ("TEXT_MESSAGE_END", "RUN_ERROR"),
        Dialect::Hai => ("BUSINESS_DATA_END", "RUN_ERROR"),
        _ => return got,
    };
    if let Some(e) = got.iter().position(|v| ty(v) == error) {
        if e > 0 && ty(&got[e - 1]) == end && !want.iter().any(|v| v == &got[e - 1]) {
            got.remove(e - 1);
        }
    }
    for v in got.iter_mut().filter(|v| ty(v) == "RUN_FINISHED") {
        if v["outcome"]["pendingToolCallIds"].is_array()
            && !want
                .iter()
                .any(|w| ty(w) == "RUN_FINISHED" && w.get("outcome").is_some())
        {
            v.as_object_mut().unwrap().remove("outcome");
        }
    }
    got
}

/// The text an A2A stream carries, read by the A2A decoder.
fn a2a_text(bytes: &[u8]) -> String {
    let mut framer = SseFramer::new(1 << 20);
    let mut frames: Vec<Frame> = Vec::new();
    framer.push(bytes, &mut frames).unwrap();
    framer.finish(&mut frames).unwrap();
    let mut d = registry::decoder(Dialect::A2a);
    let mut events = Vec::new();
    for f in &frames {
        d.decode(f, &mut events).unwrap();
    }
    events
        .iter()
        .filter_map(|e| match &e.kind {
            babelgate_core::EventKind::TextDelta { delta, .. } => Some(delta.clone()),
            _ => None,
        })
        .collect()
}

/// A dialect translated to itself gives back the same events (field order
/// and whitespace aside), but for the shape stage's rules, which hold on
/// every route (`shaped_input`, `without_added`). A cut stream comes back
/// whole-prefixed and then failed. An A2A client is answered with the
/// gateway's own task (its ids), the upstream's content in it.
#[test]
fn same_dialect_is_identity() {
    for (d, scenario, input) in fixtures() {
        let (out, err) = translate(d, d, &input, usize::MAX);
        if d == Dialect::A2a {
            assert_eq!(a2a_text(&out), a2a_text(&input), "{scenario}.{d}");
            continue;
        }
        let mut want = shaped_input(d, payloads(&input));
        let got = without_added(d, &want, payloads(&out));
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
