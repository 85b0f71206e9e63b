//! What every fuzz target checks, shared so that the nine targets stay one
//! line each. A panic anywhere in here (an assertion or a panic inside the
//! code under test) is a crash that libFuzzer reports and saves.
//!
//! - [`check_framer`]: the SSE framer gives the same frames (or the same
//!   error) wherever the input is cut, never a frame over its size limit, stays
//!   failed after an error, and what it frames survives the SSE writer.
//! - [`check_decode`]: a stream of one dialect, translated to each of the five
//!   dialects, gives the same bytes whatever the chunking, and the output
//!   re-frames cleanly, decodes with the target's own decoder and ends the way
//!   the target dialect's clients need (for AG-UI and Vercel, in an order
//!   their clients take); through the gateway's same-dialect translator, an
//!   input the client takes reaches it taken and ended.
//! - [`fast::check_fast_ag_ui`], [`fast::check_fast_json`]: the hand-written
//!   fast paths (the AG-UI decoder's, the JSON writers') agree with
//!   serde_json; [`decoders::check_fast_decoders`]: the Vercel, AG-Kit and
//!   HAI decoders' fast paths agree with their general paths.
//! - [`http1::check_http1`]: the HTTP/1.1 codec reads a response the same
//!   however it arrives, and a request it takes whole writes back the same.
//! - [`check_request`]: a request body that parses builds into every
//!   dialect's upstream body without panicking, and what a same-dialect build
//!   gives back parses again.

use babelgate_ag_ui::verify::RunPhase;
use babelgate_core::assemble::MessageAssembler;
use babelgate_core::sse::{self, DEFAULT_MAX_EVENT_BYTES};
use babelgate_core::{
    Dialect, EncodeContext, EventKind, Frame, FrameError, Framing, RunRequest, Sink, SseFramer,
    Translator,
};
use serde_json::Value;

pub use babelgate_registry::{decoder, encoder, requests};

pub mod proto;

pub mod decoders;
pub mod fast;
pub mod http1;

// ---- SSE framer ---------------------------------------------------------------

type Framed = Result<Vec<Frame>, FrameError>;

/// Frames `pieces` pushed one after the other, then finishes. After an error
/// the framer must stay failed with that same error and add nothing.
fn frame_pieces<'a>(limit: usize, pieces: impl IntoIterator<Item = &'a [u8]>) -> Framed {
    let mut framer = SseFramer::new(limit);
    let mut out = Vec::new();
    let mut result = Ok(());
    for p in pieces {
        result = framer.push(p, &mut out);
        if result.is_err() {
            break;
        }
    }
    let result = result.and_then(|_| framer.finish(&mut out));
    if let Err(err) = &result {
        let before = out.len();
        assert_eq!(framer.push(b"data: x\n\n", &mut out).as_ref(), Err(err));
        assert_eq!(framer.finish(&mut out).as_ref(), Err(err));
        assert_eq!(out.len(), before, "a failed framer must not dispatch");
    }
    result.map(|_| out)
}

/// Input: one byte picking the size limit, one byte picking where to cut,
/// then the stream.
pub fn check_framer(data: &[u8]) {
    let [pick, cut, input @ ..] = data else {
        return;
    };
    let limit = match pick % 4 {
        0 => DEFAULT_MAX_EVENT_BYTES,
        1 => 1 + usize::from(pick >> 2),
        2 => 64 + 16 * usize::from(pick >> 2),
        _ => 4096,
    };
    let cut = usize::from(*cut) * input.len() / 255;

    let whole = frame_pieces(limit, [input]);
    let split = frame_pieces(limit, [&input[..cut], &input[cut..]]);
    assert_eq!(split, whole, "cut at {cut}");
    let size = 1 + cut % 7;
    assert_eq!(
        frame_pieces(limit, input.chunks(size)),
        whole,
        "pieces of {size}"
    );
    if input.len() <= 512 {
        let bytes = input.chunks(1);
        assert_eq!(frame_pieces(limit, bytes), whole, "byte by byte");
    }

    let Ok(frames) = whole else {
        return;
    };
    let mut last_line = 0;
    for f in &frames {
        assert!(f.line > last_line, "line numbers go forward: {frames:?}");
        last_line = f.line;
        assert!(f.data.len() <= limit, "a frame over the {limit}-byte limit");
        assert!(!f.data.contains('\r'), "CR ends a line, it is never data");
        let field_bytes =
            f.event.as_ref().map_or(0, String::len) + f.id.as_ref().map_or(0, String::len);
        assert!(field_bytes <= limit);
    }

    // What was framed survives the writer (the SSE sink's): data (any
    // text) and ids, and a JSON string carrying the data.
    let mut written = Vec::new();
    for f in &frames {
        if let Some(id) = &f.id {
            sse::write_id(&mut written, id);
        }
        Sink::appending(&mut written, Framing::Sse, |sink| {
            sink.data(&f.data);
            sink.json(&Value::String(f.data.clone()));
        });
    }
    let again =
        frame_pieces(DEFAULT_MAX_EVENT_BYTES, [written.as_slice()]).expect("writer output frames");
    assert_eq!(again.len(), 2 * frames.len());
    for (f, pair) in frames.iter().zip(again.chunks(2)) {
        assert_eq!(pair[0].data, f.data);
        assert_eq!(pair[0].id, f.id);
        let back: Value = serde_json::from_str(&pair[1].data).expect("write_json gives JSON");
        assert_eq!(back.as_str(), Some(f.data.as_str()));
    }
}

// ---- decoders and translators -----------------------------------------------

/// Small enough that the fuzzer reaches the size limit, far above any event of
/// the seed corpus.
const DECODE_LIMIT: usize = 2048;

/// How a translation is driven.
#[derive(Clone, Copy)]
enum Drive {
    /// `finish` at the end, as `babelgate translate` does.
    Offline,
    /// `finish_live` with a message assembler, as the gateway does.
    Live,
}

struct Translated {
    out: Vec<u8>,
    messages: Vec<babelgate_core::request::Message>,
}

/// Which translator a pair gets.
#[derive(Clone, Copy)]
enum Build {
    /// Decoded and encoded, whatever the pair (what `translate` gives a
    /// same-dialect pair too).
    Mapped,
    /// What the gateway builds ([`babelgate_registry::translator`]): a
    /// same-dialect pair passes the upstream's frames as received.
    Gateway,
}

fn translate(from: Dialect, to: Dialect, pieces: &[&[u8]], drive: Drive) -> Translated {
    translate_with(Build::Mapped, from, to, pieces, drive)
}

fn translate_with(
    build: Build,
    from: Dialect,
    to: Dialect,
    pieces: &[&[u8]],
    drive: Drive,
) -> Translated {
    let mut ctx = EncodeContext::deterministic();
    if let Drive::Live = drive {
        ctx.thread_id = Some("thread-1".into());
        ctx.run_id = Some("run-1".into());
    }
    let mut t = match build {
        Build::Mapped => Translator::new(
            SseFramer::new(DECODE_LIMIT),
            decoder(from),
            encoder(to, ctx),
        ),
        Build::Gateway => babelgate_registry::translator(from, to, ctx, DECODE_LIMIT),
    };
    if let Drive::Live = drive {
        t = t.with_assembler(MessageAssembler::new(Some("asst-1".into())));
    }
    let mut out = Vec::new();
    let mut failed = false;
    for p in pieces {
        if t.push(p, &mut out).is_err() {
            failed = true;
            // Nothing more is accepted, nothing more is written.
            let before = out.len();
            let _ = t.push(b"data: {}\n\n", &mut out);
            assert_eq!(out.len(), before, "output after a failure");
            break;
        }
    }
    match drive {
        Drive::Offline => {
            let r = t.finish(&mut out);
            assert!(!failed || r.is_ok(), "finish after a failure is a no-op");
        }
        Drive::Live => {
            let _ = t.finish_live(&mut out);
        }
    }
    let before = out.len();
    let _ = t.finish(&mut out);
    assert_eq!(out.len(), before, "finish twice writes once");
    Translated {
        messages: t.take_messages(),
        out,
    }
}

/// A cheap, stable hash: the cut point moves whenever the input changes.
fn cut_point(input: &[u8]) -> usize {
    let h = input.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    h as usize % (input.len() + 1)
}

/// Input: an upstream stream in `from`'s dialect.
pub fn check_decode(from: Dialect, input: &[u8]) {
    let cut = cut_point(input);
    for to in Dialect::ALL {
        let whole = translate(from, to, &[input], Drive::Offline);
        check_output(to, &whole.out);
        let split = translate(from, to, &[&input[..cut], &input[cut..]], Drive::Offline);
        assert!(
            split.out == whole.out,
            "{from} -> {to}: output depends on the cut at {cut}\nwhole:\n{}\nsplit:\n{}",
            String::from_utf8_lossy(&whole.out),
            String::from_utf8_lossy(&split.out)
        );
        let live = translate(from, to, &[input], Drive::Live);
        check_output(to, &live.out);
        // The gateway keeps what the run said as history, and builds the
        // next upstream request from it.
        let request = RunRequest {
            thread_id: "thread-1".into(),
            run_id: "run-2".into(),
            messages: live.messages,
            ..Default::default()
        };
        for d in Dialect::ALL {
            let _ = requests(d).build_request(&request);
        }
    }
    check_same_dialect_route(from, input, cut);
}

/// A same-dialect route, as the gateway builds it: the upstream's frames
/// pass as received, so an input the client refuses may reach it refused.
/// What must hold: the output does not depend on the chunking, re-frames
/// cleanly, and an input that the dialect's client accepts (as far as it
/// goes: a cut stream included) reaches it accepted and ended. For AG-UI
/// that is `@ag-ui/client`'s rules ([`babelgate_ag_ui::verify`]); the other
/// dialects' clients read any typed JSON event, so there every event of the
/// input must be one.
fn check_same_dialect_route(dialect: Dialect, input: &[u8], cut: usize) {
    for drive in [Drive::Offline, Drive::Live] {
        let whole = translate_with(Build::Gateway, dialect, dialect, &[input], drive);
        let split = translate_with(
            Build::Gateway,
            dialect,
            dialect,
            &[&input[..cut], &input[cut..]],
            drive,
        );
        assert!(
            split.out == whole.out,
            "{dialect} passthrough: output depends on the cut at {cut}\nwhole:\n{}\nsplit:\n{}",
            String::from_utf8_lossy(&whole.out),
            String::from_utf8_lossy(&split.out)
        );
        let text = String::from_utf8_lossy(&whole.out);
        frame_pieces(DEFAULT_MAX_EVENT_BYTES, [whole.out.as_slice()])
            .unwrap_or_else(|e| panic!("{dialect} passthrough output does not frame: {e}\n{text}"));
        if client_accepts_input(dialect, input) {
            check_output(dialect, &whole.out);
        }
    }
}

/// Whether `input` frames within the fuzz limit and every event is one the
/// dialect's client takes: a typed JSON object (the `[DONE]` marker last,
/// for the dialects that have one), and for AG-UI a stream that
/// `@ag-ui/client` accepts so far, for Vercel one whose chunks the `ai`
/// client's schema takes.
fn client_accepts_input(dialect: Dialect, input: &[u8]) -> bool {
    let Ok(frames) = frame_pieces(DECODE_LIMIT, [input]) else {
        return false;
    };
    let mut values = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        if f.is_done() && i + 1 == frames.len() && dialect != Dialect::AgUi {
            continue;
        }
        match serde_json::from_str::<Value>(&f.data) {
            Ok(v) if is_typed_in(dialect, &v) => values.push(v),
            _ => return false,
        }
    }
    match dialect {
        Dialect::AgUi => babelgate_ag_ui::verify::verify_stream(&values).is_ok(),
        Dialect::Vercel => {
            use babelgate_vercel::wire::{client_accepts, is_kept_whole};
            values.iter().all(|v| {
                !is_kept_whole(v["type"].as_str().unwrap_or_default(), v) || client_accepts(v)
            })
        }
        _ => true,
    }
}

/// An object with a string `type` (what the dialects' decoders require; an
/// unknown type, even an empty one, is still passed back to its dialect).
fn is_typed(v: &Value) -> bool {
    v.get("type").is_some_and(Value::is_string)
}

/// [`is_typed`], for A2A: a JSON-RPC response, its `result` or `error` an
/// object (A2A events have no `type`; the kind is the result's key).
fn is_typed_in(dialect: Dialect, v: &Value) -> bool {
    match dialect {
        Dialect::A2a => {
            v.get("result").is_some_and(Value::is_object)
                || v.get("error").is_some_and(Value::is_object)
        }
        _ => is_typed(v),
    }
}

/// The output of an encoder: frames cleanly, every event is a JSON object
/// with a type (or the `[DONE]` marker, last), the target's own decoder reads
/// it back, and it ends the way the dialect's clients need: the last event
/// the decoder understood ends the run. AG-Kit is exempt from typed objects:
/// it writes its own unknown frames back verbatim, whatever they hold, as its
/// client skips what it cannot parse.
fn check_output(to: Dialect, out: &[u8]) {
    let text = String::from_utf8_lossy(out);
    let frames = frame_pieces(DEFAULT_MAX_EVENT_BYTES, [out])
        .unwrap_or_else(|e| panic!("{to} output does not frame: {e}\n{text}"));
    let (events, done) = match frames.split_last() {
        Some((l, rest)) if l.is_done() => (rest, true),
        Some(_) => (frames.as_slice(), false),
        None => panic!("{to} output is empty"),
    };
    let mut values: Vec<Value> = Vec::new();
    for f in events {
        match serde_json::from_str::<Value>(&f.data) {
            Ok(v) if is_typed_in(to, &v) => values.push(v),
            _ if to == Dialect::AgKit => {}
            _ => panic!(
                "{to} output event is not a typed JSON object: {:?}\n{text}",
                f.data
            ),
        }
    }

    let mut d = decoder(to);
    let mut decoded = Vec::new();
    for f in &frames {
        if let Err(e) = d.decode(f, &mut decoded) {
            panic!("{to} output does not decode with its own decoder: {e}\n{text}");
        }
    }
    if let Err(e) = d.finish(&mut decoded) {
        panic!("{to} output does not finish decoding: {e}\n{text}");
    }
    let last = decoded
        .iter()
        .rev()
        .find(|e| !matches!(e.kind, EventKind::Unknown { .. }));
    assert!(
        last.is_some_and(|e| e.kind.is_terminal()),
        "{to} output does not end its run (last event read back: {:?})\n{text}",
        last.map(|e| e.kind.name())
    );

    match to {
        Dialect::AgUi => {
            assert!(!done, "AG-UI has no [DONE] marker\n{text}");
            match babelgate_ag_ui::verify::verify_stream(&values) {
                Ok(view) => assert!(
                    matches!(view.phase, RunPhase::Finished | RunPhase::Errored),
                    "@ag-ui/client sees the run still open\n{text}"
                ),
                Err(e) => panic!("@ag-ui/client would reject the output: {e}\n{text}"),
            }
        }
        Dialect::Hai => assert!(!done, "HAI has no [DONE] marker\n{text}"),
        Dialect::Vercel => {
            assert!(done, "{to} output ends without [DONE]\n{text}");
            // Chunks the encoder may write as they came: the client's
            // schema refuses the whole stream at one with a bad field.
            use babelgate_vercel::wire::{client_accepts, is_kept_whole};
            for v in &values {
                if is_kept_whole(v["type"].as_str().unwrap_or_default(), v) {
                    assert!(client_accepts(v), "the ai client would reject {v}\n{text}");
                }
            }
            if let Err(e) = babelgate_vercel::wire::parts_in_order(&values) {
                panic!("the ai client would throw: {e}\n{text}");
            }
        }
        // A failed AG-Kit run ends with its error frame and no [DONE] (the
        // legacy client would take [DONE] for success; the gateway breaks
        // the body off instead); any other run ends with [DONE].
        Dialect::AgKit => {
            let failed = last.is_some_and(|e| matches!(e.kind, EventKind::RunError { .. }));
            assert_eq!(
                done, !failed,
                "AG-Kit: [DONE] after a failed run, or missing\n{text}"
            )
        }
        // A task's stream: no marker; its last status is terminal (checked
        // above through the decoder), and nothing follows it.
        Dialect::A2a => assert!(!done, "A2A has no [DONE] marker\n{text}"),
    }
}

// ---- request parsers ----------------------------------------------------------

/// Fills in what the gateway assigns before it builds an upstream request:
/// a run id, a thread id, message ids.
pub fn complete(request: &mut RunRequest) {
    if request.run_id.is_empty() {
        request.run_id = "run-1".into();
    }
    if request.thread_id.is_empty() {
        request.thread_id = "thread-1".into();
    }
    for (i, m) in request.messages.iter_mut().enumerate() {
        if m.id.is_empty() {
            m.id = format!("msg-{i}");
        }
    }
}

/// Input: a request body in `from`'s dialect.
pub fn check_request(from: Dialect, body: &[u8]) {
    let Ok(mut request) = requests(from).parse_request(body) else {
        return;
    };
    // Building may refuse what a dialect cannot carry, never panic; first
    // as parsed, then as the gateway completes it.
    for to in Dialect::ALL {
        let _ = requests(to).build_request(&request);
    }
    complete(&mut request);
    for to in Dialect::ALL {
        let Ok(built) = requests(to).build_request(&request) else {
            continue;
        };
        let bytes = serde_json::to_vec(&built).expect("JSON values serialize");
        let again = requests(to).parse_request(&bytes);
        if to == from {
            // A same-dialect upstream gets back a body its own parser takes.
            if let Err(e) = &again {
                panic!(
                    "{to}: the built body does not parse again: {e}\n{}",
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
    }
}

// ---- the targets ----------------------------------------------------------------

/// A fuzz target's check: panics when the input breaks a property.
pub type Check = fn(&[u8]);

/// Every fuzz target by name, with the check it runs. The one-line targets in
/// `crates/tools/fuzz/fuzz_targets/` call [`run`] with their own name, and this crate's
/// tests replay each target's regression seeds through the same entry, so the
/// fuzzer and `cargo test` cannot check different things.
pub const TARGETS: &[(&str, Check)] = &[
    ("sse_framer", check_framer),
    ("decode_ag_ui", |d| check_decode(Dialect::AgUi, d)),
    ("decode_hai", |d| check_decode(Dialect::Hai, d)),
    ("decode_vercel", |d| check_decode(Dialect::Vercel, d)),
    ("decode_agkit", |d| check_decode(Dialect::AgKit, d)),
    ("decode_a2a", |d| check_decode(Dialect::A2a, d)),
    ("request_ag_ui", |d| check_request(Dialect::AgUi, d)),
    ("request_hai", |d| check_request(Dialect::Hai, d)),
    ("request_vercel", |d| check_request(Dialect::Vercel, d)),
    ("request_agkit", |d| check_request(Dialect::AgKit, d)),
    ("request_a2a", |d| check_request(Dialect::A2a, d)),
    ("fast_ag_ui", fast::check_fast_ag_ui),
    ("fast_json", fast::check_fast_json),
    ("fast_decoders", decoders::check_fast_decoders),
    ("proto_framer", proto::check_proto),
    ("http1_codec", http1::check_http1),
];

/// Runs fuzz target `target`'s check on `data`; panics on an unknown name.
pub fn run(target: &str, data: &[u8]) {
    let (_, check) = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no fuzz target named {target}"));
    check(data);
}
