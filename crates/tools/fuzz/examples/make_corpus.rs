//! Writes the seed corpus `crates/tools/fuzz/corpus/<target>/` anew, from the fixtures
//! (`tests/fixtures/<dialect>/*.sse`), the bodies `ai`'s chat client sent
//! (`adapters/vercel/testdata/client_requests.json`) and the request bodies
//! below. Run from `crates/tools/fuzz/`: `cargo run --example make_corpus`.
//!
//! - `sse_framer`: two control bytes (size limit, cut point) then a stream:
//!   hand-made edge cases and a few fixtures.
//! - `decode_<dialect>`: the dialect's fixtures, and some fixtures of the other
//!   dialects translated into it.
//! - `request_<dialect>`: request bodies of the dialect, and the bodies of the
//!   other dialects translated into it (parse there, build here).
//! - `fast_ag_ui`, `fast_json`: AG-UI fixture frames and hand-made strings as
//!   text, a few fixed byte strings for the structured form.
//! - `proto_framer`: @ag-ui/encoder's proto stream and the reference byte
//!   corpus (`crates/lib/proto/testdata/`), framed, and edge cases.
//! - `http1_codec`: a cut byte, then requests and responses, plain and in
//!   the shapes requests are smuggled with.
//! - every crash found, in its target's directory ([`REGRESSIONS`]).

use std::fs;
use std::path::{Path, PathBuf};

use babelgate_core::Dialect;
use babelgate_fuzz::{decoder, encoder, requests};
use serde_json::{json, Value};

/// Fixtures of other dialects that are also translated into each dialect.
const CROSS_SCENARIOS: [&str; 5] = [
    "parallel_tools",
    "hitl_confirm",
    "reasoning",
    "state",
    "unknown_events",
];

fn main() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = fuzz
        .ancestors()
        .nth(3)
        .expect("crates/tools/fuzz/ is inside the repository");
    let corpus = fuzz.join("corpus");
    let fixtures = repo.join("tests/fixtures");

    let mut framer = Vec::new();
    framer_seeds(&mut framer);
    for (i, d) in [Dialect::AgUi, Dialect::Vercel].into_iter().enumerate() {
        for (j, scenario) in ["chat", "unknown_events"].into_iter().enumerate() {
            let mut seed = vec![(4 * i + j) as u8 * 4 + 3, 100 + 40 * j as u8];
            seed.extend(read(&fixture(&fixtures, d, scenario)));
            framer.push((format!("fixture-{d}-{scenario}"), seed));
        }
    }
    write_dir(&corpus.join("sse_framer"), &framer);
    write_dir(&corpus.join("proto_framer"), &proto_seeds(repo));
    write_dir(&corpus.join("http1_codec"), &http1_seeds());

    for d in Dialect::ALL {
        let mut seeds = Vec::new();
        for path in sse_files(&fixtures.join(d.as_str())) {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            seeds.push((format!("fixture-{name}.sse"), read(&path)));
        }
        for from in Dialect::ALL.into_iter().filter(|&f| f != d) {
            for scenario in CROSS_SCENARIOS {
                // A2A's fixtures are its own scenarios (the SDK agent's).
                let path = fixture(&fixtures, from, scenario);
                if !path.exists() {
                    continue;
                }
                let input = read(&path);
                seeds.push((
                    format!("from-{from}-{scenario}.sse"),
                    translate(from, d, &input),
                ));
            }
        }
        let target = format!("decode_{}", target_name(d));
        for (_, name, bytes) in REGRESSIONS.iter().filter(|(t, ..)| *t == target) {
            seeds.push((name.to_string(), bytes.to_vec()));
        }
        write_dir(&corpus.join(target), &seeds);
    }

    let vercel_client: Value = serde_json::from_slice(&read(
        &repo.join("adapters/vercel/testdata/client_requests.json"),
    ))
    .expect("client_requests.json is JSON");
    let mut bodies: Vec<(Dialect, String, Value)> = request_bodies();
    for (name, body) in vercel_client.as_object().expect("an object of bodies") {
        bodies.push((Dialect::Vercel, format!("ai-client-{name}"), body.clone()));
    }
    for d in Dialect::ALL {
        let mut seeds = Vec::new();
        for (from, name, body) in &bodies {
            if *from == d {
                seeds.push((format!("{name}.json"), pretty(body)));
                continue;
            }
            let Ok(mut request) = requests(*from).parse_request(&pretty(body)) else {
                continue;
            };
            babelgate_fuzz::complete(&mut request);
            if let Ok(built) = requests(d).build_request(&request) {
                seeds.push((format!("from-{from}-{name}.json"), pretty(&built)));
            }
        }
        write_dir(&corpus.join(format!("request_{}", target_name(d))), &seeds);
    }

    fast_seeds(&corpus, &fixtures);
}

/// Crash inputs found by fuzzing, kept as seeds (and each a unit test where
/// it was fixed): (target, file name, input).
const REGRESSIONS: &[(&str, &str, &[u8])] = &[
    // An AG-Kit `unknown` envelope carrying an AG-UI STEP_STARTED without
    // its `stepName` was written back to AG-UI clients as it came (adapters/
    // ag-ui encoder test `an_own_unknown_event_of_a_defined_type_goes_out_as_raw`).
    (
        "decode_agkit",
        "regression-own-unknown-of-a-defined-type.sse",
        "data: {\"type\":\"text\",\"content\":\"hi\"}\n\n\
         data: {\"type\":\"unknown\",\"dialect\":\"ag-ui\",\"event\":{\"type\":\"STEP_STARTED\",\"x\":1}}\n\n\
         data: [DONE]\n\n"
            .as_bytes(),
    ),
    // The same for HAI: a TEXT_MESSAGE_CONTENT without its fields went back
    // to HAI clients as it came (adapters/hai encoder test
    // `own_unknown_events_that_are_not_typed_objects_travel_in_raw`).
    (
        "decode_agkit",
        "regression-own-hai-unknown-of-a-known-type.sse",
        "data: {\"type\":\"text\",\"content\":\"hi\"}\n\n\
         data: {\"type\":\"unknown\",\"dialect\":\"hai\",\"event\":{\"type\":\"TEXT_MESSAGE_CONTENT\",\"x\":1}}\n\n\
         data: [DONE]\n\n"
            .as_bytes(),
    ),
    // A backslash before a multi-byte character panicked the AG-UI decoder's
    // fast path (adapters/ag-ui decoder test
    // `a_backslash_before_a_multibyte_character_is_an_error`).
    (
        "decode_ag_ui",
        "regression-backslash-before-multibyte.sse",
        "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
         data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
         data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"\\é\"}\n\n"
            .as_bytes(),
    ),
    (
        "fast_ag_ui",
        "regression-backslash-before-multibyte",
        "\u{1}{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"\\é\"}".as_bytes(),
    ),
    // A subagent's chunk, then an untagged end of what it opened: the AG-UI
    // encoder wrote the end, and the client's lane ended the item again at
    // the run's end, so the run's end went out rejected (adapters/ag-ui test
    // `an_untagged_end_of_what_a_subagents_chunk_holds_is_left_to_the_lane`).
    (
        "decode_ag_ui",
        "regression-untagged-end-of-a-subagent-chunk.sse",
        "data: {\"type\":\"TEXT_MESSAGE_CHUNK\",\"messageId\":\"a\",\"delta\":\"x\",\"subagentRunId\":\"s\"}\n\n\
         data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"a\"}\n\n"
            .as_bytes(),
    ),
    (
        "fast_ag_ui",
        "regression-untagged-end-of-a-subagent-chunk",
        "\u{1}{\"type\":\"TEXT_MESSAGE_CHUNK\",\"messageId\":\"a\",\"delta\":\"x\",\"subagentRunId\":\"s\"}\n{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"a\"}"
            .as_bytes(),
    ),
    // A same-dialect route (the gateway's passthrough translator) passed a
    // deprecated THINKING_TEXT_MESSAGE_CONTENT as received, then closed the
    // reasoning its decoder had minted, which the client never saw: the
    // client refused the end (adapters/ag-ui test
    // `deprecated_thinking_events_reach_a_same_dialect_client_as_reasoning`).
    (
        "decode_ag_ui",
        "regression-same-dialect-thinking-content.sse",
        "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"a\",\"runId\":\"a\"}\n\n\
         data: {\"type\":\"THINKING_TEXT_MESSAGE_CONTENT\",\"delta\":\"a\"}\n\n"
            .as_bytes(),
    ),
    (
        "fast_ag_ui",
        "regression-same-dialect-thinking-content",
        "\u{1}{\"type\":\"RUN_STARTED\",\"threadId\":\"a\",\"runId\":\"a\"}\n{\"type\":\"THINKING_TEXT_MESSAGE_CONTENT\",\"delta\":\"a\"}"
            .as_bytes(),
    ),
    // A Vercel upstream's text part ended twice passed a same-dialect route
    // as received, and the `ai` client throws on the second end (adapters/
    // vercel test
    // `a_same_dialect_upstreams_orphan_parts_are_started_and_stray_ends_dropped`).
    (
        "decode_vercel",
        "regression-same-dialect-text-ended-twice.sse",
        "data: {\"type\":\"start\"}\n\n\
         data: {\"type\":\"text-start\",\"id\":\"t1\"}\n\n\
         data: {\"type\":\"text-delta\",\"id\":\"t1\",\"delta\":\"hi\"}\n\n\
         data: {\"type\":\"text-end\",\"id\":\"t1\"}\n\n\
         data: {\"type\":\"text-end\",\"id\":\"t1\"}\n\n\
         data: {\"type\":\"finish\"}\n\n\
         data: [DONE]\n\n"
            .as_bytes(),
    ),
    // After a Vercel upstream's `error`, a same-dialect route passed what
    // followed as received (a new step, a text start), so the stream no
    // longer ended at the error, where every other route ends it (adapters/
    // vercel test `a_same_dialect_upstreams_failed_run_ends_at_its_error`).
    (
        "decode_vercel",
        "regression-same-dialect-content-after-error.sse",
        "data: {\"type\":\"start\"}\n\n\
         data: {\"type\":\"error\",\"errorText\":\"boom\"}\n\n\
         data: {\"type\":\"start-step\"}\n\n\
         data: [DONE]\n\n"
            .as_bytes(),
    ),
    // A same-dialect AG-UI route passed a TOOL_CALL_RESULT that came before
    // its call's TOOL_CALL_END as received, while the encoder ended the call
    // there: the upstream's end then went out as nothing and the client
    // refused RUN_FINISHED (adapters/ag-ui test
    // `a_same_dialect_result_before_its_calls_end_ends_the_call_first`).
    (
        "decode_ag_ui",
        "regression-same-dialect-result-before-end.sse",
        "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
         data: {\"type\":\"TOOL_CALL_START\",\"toolCallId\":\"c\",\"toolCallName\":\"f\"}\n\n\
         data: {\"type\":\"TOOL_CALL_RESULT\",\"messageId\":\"m\",\"toolCallId\":\"c\",\"content\":\"ok\"}\n\n\
         data: {\"type\":\"TOOL_CALL_END\",\"toolCallId\":\"c\"}\n\n\
         data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n"
            .as_bytes(),
    ),
    // A same-dialect AG-Kit route passed a frame after an interrupt as
    // received, though it ends the interrupt's run: the upstream's `[DONE]`
    // then found the run over, and the client got none (adapters/agkit test
    // `a_same_dialect_frame_after_interrupts_ends_the_stream_there`).
    (
        "decode_agkit",
        "regression-same-dialect-frame-after-interrupt.sse",
        "data: {\"type\":\"interrupt\",\"id\":\"a\",\"reason\":\"r\",\"payload\":{}}\n\n\
         data: {\"type\":\"tool-call-end\",\"toolCallId\":\"c\"}\n\n\
         data: [DONE]\n\n"
            .as_bytes(),
    ),
    // The same with that frame malformed: what it left was not written, the
    // end marker of the run it ended included (fuzz, decode_agkit).
    (
        "decode_agkit",
        "regression-same-dialect-malformed-frame-after-interrupt.sse",
        "data: {\"type\":\"interrupt\",\"id\":\"a\",\"reason\":\"r\",\"payload\":{}}\n\n\
         data: {\"type\":\"tool-call-end\",\"tooltoolsCallId\":\"c\"}\n\n\
         data: [DONE]\n\n"
            .as_bytes(),
    ),
    // A frame after an upstream `error` frame: the run had failed, so it is
    // dropped, not passed (adapters/agkit `a_same_dialect_frame_after_an_
    // error_is_not_passed`; fuzz, decode_agkit).
    (
        "decode_agkit",
        "regression-same-dialect-frame-after-error.sse",
        "data: {\"type\":\"error\",\"error\":\"e\"}\n\n\
         data: {\"type\":\"text\",\"content\":\"late\"}\n\n"
            .as_bytes(),
    ),
    // A held BUSINESS_DATA_START passed as received after the run finished,
    // then a malformed frame: the encoder sees the start before the failure
    // (adapters/hai `a_same_dialect_failure_after_a_held_start_ends_what_
    // the_client_saw`; fuzz, decode_hai).
    (
        "decode_hai",
        "regression-same-dialect-failure-after-held-start.sse",
        "data: {\"type\":\"RUN_STARTED\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n\
         data: {\"type\":\"RUN_FINISHED\"}\n\n\
         data: {\"type\":\"BUSINESS_DATA_START\",\"messageId\":\"m2\",\"role\":\"assistant\"}\n\n\
         data: {\"type\":\"BUSINESS_DATA_CONTENT\",\"messageId\":\"m2\"}\n\n"
            .as_bytes(),
    ),
    // Tool input `555…5` (39 digits) left the Vercel encoder one unit off
    // (serde_json parsed numbers approximately; now `float_roundtrip`):
    // adapters/vercel/tests/direct_writing.rs
    // `tool_input_numbers_reach_the_client_as_json_parse_reads_them`.
    (
        "fast_json",
        "regression-float-roundtrip",
        b"5555555555555555555555555555555555555555",
    ),
];

/// `fast_ag_ui` and `fast_json`: text seeds (a first byte of 1, then one
/// frame or string per line) from the AG-UI fixtures and hand-made strings,
/// a few byte strings for the structured form (a first byte of 0), and the
/// regression cases.
fn fast_seeds(corpus: &Path, fixtures: &Path) {
    let mut ag_ui = Vec::new();
    for path in sse_files(&fixtures.join("ag-ui")) {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = String::from_utf8(read(&path)).expect("fixtures are UTF-8");
        let frames: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect();
        ag_ui.push((
            format!("fixture-{name}"),
            [b"\x01", frames.join("\n").as_bytes()].concat(),
        ));
    }
    let mut json = vec![(
        "strings".to_string(),
        "\u{1}plain\na\"b\\c\n\u{0}\u{1f}\u{7f}\n\u{2028}北🎉\n\\é"
            .as_bytes()
            .to_vec(),
    )];
    // Structured seeds: fixed bytes that `arbitrary` reads as frames.
    let mut x: u32 = 0x9e37_79b9;
    for i in 0..8 {
        let bytes: Vec<u8> = (0..64 + 32 * i)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 24) as u8
            })
            .collect();
        let seed = [&[0u8][..], &bytes].concat();
        ag_ui.push((format!("structured-{i}"), seed.clone()));
        json.push((format!("structured-{i}"), seed));
    }
    for (target, name, bytes) in REGRESSIONS {
        let seeds = match *target {
            "fast_ag_ui" => &mut ag_ui,
            "fast_json" => &mut json,
            _ => continue,
        };
        seeds.push((name.to_string(), bytes.to_vec()));
    }
    write_dir(&corpus.join("fast_ag_ui"), &ag_ui);
    write_dir(&corpus.join("fast_json"), &json);
}

/// `proto_framer`: two control bytes (size limit, cut point) then a stream of
/// length-prefixed messages: @ag-ui/encoder's own stream, every event of the
/// reference byte corpus framed one by one and all together, and edge cases.
/// Requests and responses for the HTTP/1.1 codec, each after a cut byte.
fn http1_seeds() -> Vec<(String, Vec<u8>)> {
    let messages: [(&str, &[u8]); 8] = [
        ("post", b"POST /api/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"),
        ("post-cl-te", b"POST /a HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("post-two-lengths", b"POST /a HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 1, 1\r\n\r\na"),
        ("sse-chunked", b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n9;x=y\r\ndata: a\n\n\r\n0\r\nx-t: 1\r\n\r\n"),
        ("interim-then-length", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\nok"),
        ("until-close", b"HTTP/1.0 200 OK\n\ndata: x\n\n"),
        ("te-not-chunked-last", b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\ncontent-length: 3\r\n\r\nabcdef"),
        ("bad-chunk", b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5 x\r\nhello\r\n"),
    ];
    messages
        .iter()
        .enumerate()
        .map(|(i, (name, wire))| {
            let mut seed = vec![(i * 37 % 256) as u8];
            seed.extend_from_slice(wire);
            (name.to_string(), seed)
        })
        .collect()
}

fn proto_seeds(repo: &Path) -> Vec<(String, Vec<u8>)> {
    let testdata = repo.join("crates/lib/proto/testdata");
    let with = |pick: u8, cut: u8, body: &[u8]| [&[pick, cut][..], body].concat();
    let mut seeds = vec![(
        "encoder-stream".to_string(),
        with(3, 128, &read(&testdata.join("stream.bin"))),
    )];
    let corpus = String::from_utf8(read(&testdata.join("corpus.jsonl"))).expect("UTF-8");
    let mut all = Vec::new();
    for (i, line) in corpus.lines().enumerate() {
        let v: Value = serde_json::from_str(line).expect("corpus lines are JSON");
        let hex = v["bytes"].as_str().unwrap_or("");
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|j| u8::from_str_radix(&hex[j..j + 2], 16).expect("hex"))
            .collect();
        let mut framed = (bytes.len() as u32).to_be_bytes().to_vec();
        framed.extend(&bytes);
        all.extend(&framed);
        // One seed per event type is plenty: the first of each.
        let kind = serde_json::from_str::<Value>(v["json"].as_str().unwrap_or("{}"))
            .ok()
            .and_then(|e| e["type"].as_str().map(str::to_string))
            .unwrap_or_default();
        if !seeds.iter().any(|(n, _)| n.ends_with(&format!("-{kind}"))) {
            seeds.push((format!("event-{i}-{kind}"), with(0, 7, &framed)));
        }
    }
    seeds.push(("all-events".into(), with(0, 200, &all)));
    seeds.push(("empty-message".into(), with(0, 0, &[0, 0, 0, 0])));
    seeds.push(("over-limit".into(), with(1, 1, &[0, 0, 0, 9, 1, 2, 3])));
    seeds.push(("huge-prefix".into(), with(0, 2, &[0xff, 0xff, 0xff, 0xff])));
    seeds.push(("truncated".into(), with(0, 3, &[0, 0, 0, 5, 0x0a])));
    seeds.push(("half-prefix".into(), with(0, 3, &[0, 0])));
    seeds
}

fn target_name(d: Dialect) -> String {
    d.as_str().replace('-', "_")
}

fn fixture(fixtures: &Path, d: Dialect, scenario: &str) -> PathBuf {
    fixtures.join(d.as_str()).join(format!("{scenario}.sse"))
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sse_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "sse"))
        .collect();
    files.sort();
    files
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(v).expect("JSON values serialize");
    bytes.push(b'\n');
    bytes
}

fn write_dir(dir: &Path, seeds: &[(String, Vec<u8>)]) {
    if dir.exists() {
        fs::remove_dir_all(dir).expect("remove the old corpus");
    }
    fs::create_dir_all(dir).expect("create the corpus directory");
    for (name, bytes) in seeds {
        fs::write(dir.join(name), bytes).expect("write a seed");
    }
    println!("{}: {} seeds", dir.display(), seeds.len());
}

/// What `babelgate translate --deterministic` writes.
fn translate(from: Dialect, to: Dialect, input: &[u8]) -> Vec<u8> {
    let mut t = babelgate_core::Translator::new(
        babelgate_core::SseFramer::default(),
        decoder(from),
        encoder(to, babelgate_core::EncodeContext::deterministic()),
    );
    let mut out = Vec::new();
    t.push(input, &mut out).expect("fixtures translate");
    t.finish(&mut out).expect("fixtures translate");
    out
}

/// Streams for the framer, each after its two control bytes: the first picks
/// the size limit (`% 4`: 0 default, 1 tiny, 2 small, 3 4 KiB), the second
/// where the input is cut.
fn framer_seeds(seeds: &mut Vec<(String, Vec<u8>)>) {
    let streams: [(&str, u8, &[u8]); 12] = [
        ("lf", 0, b"data: one\n\ndata: two\n\n"),
        ("cr", 0, b"data: one\r\rdata: two\r\r"),
        ("crlf-cut-between", 3, b"data: one\r\n\r\ndata: two\r\n\r\n"),
        ("mixed-ends", 2, b"data: a\r\n\rdata: b\n\r\ndata: c\r\r"),
        ("bom", 0, b"\xEF\xBB\xBFdata: after a BOM\n\n"),
        (
            "fields",
            3,
            b": heartbeat\n\nevent: delta\nid: 42\nretry: 3000\ndata: {\"a\":\ndata: 1}\n\n",
        ),
        (
            "id-with-nul",
            0,
            b"id: a\0b\ndata: x\n\nid: 7\n\nretry: 10\n\n",
        ),
        (
            "unicode",
            3,
            "data: {\"t\":\"雪\u{2028}🎈\u{2029}é\"}\n\n".as_bytes(),
        ),
        (
            "done-and-spaces",
            2,
            b"data:[DONE]\n\ndata:  two\n\ndata\n\n",
        ),
        ("no-final-newline", 0, b"data: a\n\ndata: b"),
        ("invalid-utf8", 0, b"data: ok\n\ndata: \xC3\x28\n\n"),
        (
            "over-a-small-limit",
            1 + 4 * 6,
            b"data: 0123456789\ndata: 0123456789\n\nunknown-field-with-a-long-name: v\n\n",
        ),
    ];
    for (i, (name, pick, stream)) in streams.into_iter().enumerate() {
        let mut seed = vec![pick, (37 * i % 256) as u8];
        seed.extend_from_slice(stream);
        seeds.push((name.to_string(), seed));
    }
}

/// Request bodies of each dialect, in the shapes their clients send.
fn request_bodies() -> Vec<(Dialect, String, Value)> {
    let ag_ui = [
        (
            "http-agent",
            json!({
                "threadId": "thread-7",
                "runId": "run-3",
                "protocolVersion": "1.0",
                "state": {"step": 2, "items": ["a"]},
                "tools": [{"name": "set_theme", "description": "Switch the page theme",
                           "parameters": {"type": "object", "properties": {"theme": {"type": "string"}}}}],
                "context": [{"description": "timezone", "value": "Europe/Paris"}],
                "forwardedProps": {"tenant": "acme"},
                "messages": [
                    {"id": "sys-1", "role": "system", "content": "Answer briefly."},
                    {"id": "dev-1", "role": "developer", "content": "No markdown.", "name": "ops"},
                    {"id": "usr-1", "role": "user", "content": "Make it dark, s'il vous plaît"},
                    {"id": "ast-1", "role": "assistant", "content": "Switching.", "toolCalls": [
                        {"id": "call-9", "type": "function",
                         "function": {"name": "set_theme", "arguments": "{\"theme\":\"dark\"}"}}
                    ]},
                    {"id": "tool-1", "role": "tool", "toolCallId": "call-9", "content": "{\"ok\":true}"},
                    {"id": "rsn-1", "role": "reasoning", "content": "the user wants dark"},
                    {"id": "act-1", "role": "activity", "activityType": "progress", "content": {"done": 3}}
                ]
            }),
        ),
        (
            "media-parts",
            json!({
                "threadId": "thread-8",
                "runId": "run-1",
                "messages": [{"id": "usr-1", "role": "user", "content": [
                    {"type": "text", "text": "compare these"},
                    {"type": "image", "source": {"type": "url", "value": "https://example.test/cat.jpg", "mimeType": "image/jpeg"}},
                    {"type": "document", "source": {"type": "data", "value": "JVBERi0=", "mimeType": "application/pdf"},
                     "metadata": {"filename": "spec.pdf"}},
                    {"type": "audio", "source": {"type": "file", "value": "file-abc", "provider": "openai"}},
                    {"type": "binary", "mimeType": "image/png", "data": "iVBORw0KGgo="}
                ]}],
                "tools": [],
                "context": []
            }),
        ),
        (
            "resume",
            json!({
                "threadId": "thread-9",
                "runId": "run-2",
                "parentRunId": "run-1",
                "messages": [{"id": "usr-1", "role": "user", "content": "delete it"}],
                "resume": [
                    {"interruptId": "int-4", "status": "resolved", "payload": {"approved": true}},
                    {"interruptId": "int-5", "status": "cancelled"}
                ]
            }),
        ),
        (
            "minimal",
            json!({"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": [],
                   "state": {}, "forwardedProps": {}}),
        ),
        (
            "bad-role",
            json!({"threadId": "t", "runId": "r", "messages": [{"id": "x", "role": "robot"}]}),
        ),
    ];
    let hai = [
        (
            "spec",
            json!({
                "threadId": "thread-h1",
                "runId": "run-h1",
                "messages": [
                    {"id": "m1", "role": "user", "content": "查一下天气", "timestamp": 1_700_000_000_000_i64,
                     "extra": {"channel": "app"}},
                    {"id": "m2", "role": "assistant", "content": "", "toolCalls": [
                        {"id": "tc-4", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"}}
                    ]},
                    {"id": "m3", "role": "tool", "toolCallId": "tc-4", "content": "sunny"},
                    {"id": "m4", "role": "user", "content": [
                        {"type": "text", "text": "and this picture?"},
                        {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}}
                    ]}
                ],
                "tools": [{"name": "get_weather", "description": "Weather by city",
                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
                "context": [{"description": "units", "value": "metric"}],
                "forwardedProps": {},
                "state": {"widgets": []}
            }),
        ),
        (
            "resume",
            json!({
                "threadId": "thread-h2",
                "runId": "run-h2",
                "messages": [],
                "resume": [{"interruptId": "int-1", "status": "resolved", "payload": "yes"}]
            }),
        ),
        (
            "minimal",
            json!({"threadId": "t", "runId": "r", "messages": []}),
        ),
    ];
    let vercel = [
        (
            "continuation",
            json!({
                "id": "chat-5",
                "trigger": "submit-message",
                "messageId": "ast-1",
                "messages": [
                    {"id": "usr-1", "role": "user", "parts": [
                        {"type": "text", "text": "what's in the file?"},
                        {"type": "file", "mediaType": "text/plain", "url": "data:text/plain;base64,aGk=", "filename": "hi.txt"}
                    ]},
                    {"id": "ast-1", "role": "assistant", "metadata": {"model": "small"}, "parts": [
                        {"type": "step-start"},
                        {"type": "reasoning", "text": "read it first", "state": "done"},
                        {"type": "tool-read_file", "toolCallId": "tc-1", "state": "output-available",
                         "input": {"name": "hi.txt"}, "output": "hi"},
                        {"type": "dynamic-tool", "toolName": "search", "toolCallId": "tc-2",
                         "state": "output-error", "input": {"q": "hi"}, "errorText": "offline"},
                        {"type": "step-start"},
                        {"type": "text", "text": "It says hi.", "state": "done"},
                        {"type": "source-url", "sourceId": "src-1", "url": "https://example.test"},
                        {"type": "data-state", "data": {"type": "snapshot", "snapshot": {"n": 1}}},
                        {"type": "data-state", "data": {"type": "delta",
                         "delta": [{"op": "replace", "path": "/n", "value": 2}]}}
                    ]}
                ]
            }),
        ),
        (
            "regenerate",
            json!({
                "id": "chat-6",
                "trigger": "regenerate-message",
                "messageId": "ast-2",
                "messages": [
                    {"id": "usr-1", "role": "user", "parts": [{"type": "text", "text": "a haiku"}]},
                    {"id": "ast-2", "role": "assistant", "parts": [{"type": "text", "text": "old one"}]}
                ]
            }),
        ),
        (
            "tools-and-state",
            json!({
                "id": "chat-7",
                "messages": [{"id": "usr-1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
                "tools": [{"name": "navigate", "description": "Open a page", "parameters": {"type": "object"}}],
                "context": [{"description": "page", "value": "/home"}],
                "state": {"route": "/home"},
                "clientHint": true
            }),
        ),
    ];
    let agkit = [
        (
            "client",
            json!({
                "conversationId": "conv-1",
                "messages": [
                    {"role": "user", "content": "换成蓝色"},
                    {"role": "tool", "content": "done", "toolCallId": "call_3"}
                ],
                "tools": [{"name": "set_color", "description": "Set the color.",
                           "parameters": "{\"type\":\"object\",\"properties\":{\"color\":{\"type\":\"string\"}}}"}]
            }),
        ),
        (
            "snake-case",
            json!({
                "conversationId": "conv-2",
                "messages": [
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_4", "function": {"name": "f", "arguments": {"x": [1, 2]}}}
                    ]},
                    {"role": "tool", "content": "ok", "tool_call_id": "call_4"}
                ],
                "tools": [{"name": "f", "parameters": {"type": "object"}}],
                "appField": {"kept": true}
            }),
        ),
        (
            "resume",
            json!({
                "conversationId": "conv-3",
                "resume": {"interruptId": "interrupt_1", "payload": "{\"approved\":false}"}
            }),
        ),
        ("minimal", json!({"conversationId": "c", "messages": []})),
    ];
    // A2A JSON-RPC requests, v1.0 and v0.3 names and parts.
    let a2a = [
        (
            "stream-v1",
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {
                "messageId": "m1", "role": "ROLE_USER", "contextId": "c1",
                "parts": [{"text": "hi"}, {"url": "https://x/y.png", "mediaType": "image/png"}, {"data": {"a": 1}}]
            }}}),
        ),
        (
            "send-v03-answer",
            json!({"jsonrpc": "2.0", "id": "x", "method": "message/send", "params": {"message": {
                "kind": "message", "messageId": "m2", "role": "user", "taskId": "t1",
                "parts": [{"kind": "text", "text": "yes"}, {"kind": "file", "file": {"bytes": "AAAA", "mimeType": "image/png"}}]
            }}}),
        ),
    ];
    let mut all = Vec::new();
    for (d, list) in [
        (Dialect::AgUi, &ag_ui[..]),
        (Dialect::Hai, &hai[..]),
        (Dialect::Vercel, &vercel[..]),
        (Dialect::AgKit, &agkit[..]),
        (Dialect::A2a, &a2a[..]),
    ] {
        for (name, body) in list {
            all.push((d, name.to_string(), body.clone()));
        }
    }
    all
}
