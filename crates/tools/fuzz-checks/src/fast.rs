//! Differential checks of the hand-written fast paths against serde_json,
//! for the `fast_ag_ui` and `fast_json` targets.
//!
//! - [`check_fast_ag_ui`]: AG-UI frames decoded by the decoder (with its fast
//!   paths) and by its general path, which reads every frame with
//!   serde_json: the same events or the same error, frame after frame; then
//!   the frames as a stream through [`crate::check_decode`].
//! - [`check_fast_json`]: strings written by `babelgate_core::json` and by
//!   the Vercel encoder's direct writing are the bytes serde_json writes.
//!
//! Input: a first byte picking the form, then either text (one frame, or one
//! string, per line: readable seeds and regression cases) or bytes that
//! `arbitrary` turns into structured frames or strings.

use arbitrary::{Arbitrary, Unstructured};
use babelgate_ag_ui::AgUiDecoder;
use babelgate_core::{Decoder, Dialect, EncodeContext, Encoder, Event, EventKind, Frame};
use babelgate_vercel::VercelEncoder;
use serde_json::{json, Value};

// ---- structured AG-UI frames -----------------------------------------------

/// Field names of the events the fast paths take, and some they leave.
const KEYS: [&str; 15] = [
    "type",
    "messageId",
    "toolCallId",
    "toolCallName",
    "parentMessageId",
    "role",
    "name",
    "delta",
    "content",
    "timestamp",
    "rawEvent",
    "subagentRunId",
    "threadId",
    "runId",
    "future",
];

const TYPES: [&str; 12] = [
    "TEXT_MESSAGE_CONTENT",
    "TOOL_CALL_ARGS",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "STATE_DELTA",
    "TEXT_MESSAGE_CHUNK",
    "RUN_STARTED",
    "REASONING_MESSAGE_CONTENT",
    "THINKING_TEXT_MESSAGE_CONTENT",
];

const ESCAPES: [&str; 13] = [
    r#"\""#,
    r"\\",
    r"\/",
    r"\b",
    r"\f",
    r"\n",
    r"\r",
    r"\t",
    r"\ud83d\ude00",
    r"\uD83D\uDE00",
    r"\u00e9",
    r"\u0000",
    r"\u20AC",
];

/// Escapes serde_json refuses (a lone surrogate, a bad escape, a cut one),
/// and a raw quote.
const BAD_ESCAPES: [&str; 10] = [
    r"\ud83d",
    r"\ude00",
    r"\ud83d\u0041",
    r"\ud83d\ud83d",
    r"\ud83d\",
    r"\u12",
    r"\uZZZZ",
    r"\x",
    r"\",
    "\"",
];

const LITERALS: [&str; 20] = [
    "null",
    "true",
    "false",
    "0",
    "-0",
    "1.0",
    "1e2",
    "1E+2",
    "-1.5e-3",
    "01",
    "1.",
    "-",
    "9007199254740993",
    "1e400",
    "[]",
    "{}",
    r#"["a",1]"#,
    r#"{"a":"b"}"#,
    r#"[{"op":"add","path":"/a","value":1}]"#,
    "nul",
];

const WHITESPACE: [&str; 6] = ["", "", "", " ", "\n", "\t\r\n "];
/// Whitespace JSON does not allow.
const BAD_WHITESPACE: [&str; 3] = ["\u{c}", "\u{a0}", "\u{b}"];
const ROLES: [&str; 5] = ["assistant", "user", "tool", "robot", ""];
const MULTIBYTE: [&str; 6] = ["é", "北", "🎉", "\u{2028}", "\u{7f}", "\u{a0}"];

fn pick<'a>(list: &[&'a str], i: u8) -> &'a str {
    list.get(usize::from(i) % list.len()).copied().unwrap_or("")
}

/// A piece of string content, as JSON text.
#[derive(Arbitrary, Debug)]
enum Piece {
    Ascii(u8),
    Multibyte(u8),
    Escape(u8),
    Plain(String),
    BadEscape(u8),
    Unicode(u16),
    BackslashBefore(char),
    Control(u8),
}

#[derive(Arbitrary, Debug)]
struct Str(Vec<Piece>);

impl Str {
    fn render(&self, out: &mut String) {
        out.push('"');
        for p in &self.0 {
            match p {
                // Raw text: quotes, backslashes and control characters in
                // it are what they are (often invalid JSON).
                Piece::Plain(s) => out.push_str(s),
                // Printable ASCII but `"` and `\\`.
                Piece::Ascii(b) => out.push(match char::from(0x20 + b % 0x5f) {
                    '"' | '\\' => 'q',
                    c => c,
                }),
                Piece::BadEscape(i) => out.push_str(pick(&BAD_ESCAPES, *i)),
                Piece::Multibyte(i) => out.push_str(pick(&MULTIBYTE, *i)),
                Piece::Escape(i) => out.push_str(pick(&ESCAPES, *i)),
                Piece::Unicode(u) => out.push_str(&format!("\\u{u:04x}")),
                Piece::BackslashBefore(c) => {
                    out.push('\\');
                    out.push(*c);
                }
                Piece::Control(b) => out.push(char::from(b % 0x20)),
            }
        }
        out.push('"');
    }
}

#[derive(Arbitrary, Debug)]
enum Val {
    Str(Str),
    Type(u8),
    Role(u8),
    Literal(u8),
    /// A JSON patch holding a string, as STATE_DELTA carries.
    Patch(Str),
}

impl Val {
    fn render(&self, out: &mut String) {
        match self {
            Val::Str(s) => s.render(out),
            Val::Type(i) => out.push_str(&format!("\"{}\"", pick(&TYPES, *i))),
            Val::Role(i) => out.push_str(&format!("\"{}\"", pick(&ROLES, *i))),
            Val::Literal(i) => out.push_str(pick(&LITERALS, *i)),
            Val::Patch(s) => {
                out.push_str(r#"[{"op":"add","path":"/a","value":"#);
                s.render(out);
                out.push_str("}]");
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Key {
    Known(u8),
    EscapedType,
    Str(Str),
}

#[derive(Arbitrary, Debug)]
enum Tail {
    Cut(u16),
    Junk,
    Comma,
}

/// The fields an event of each type has (the fast paths' types first).
fn natural_keys(ty: &str) -> &'static [&'static str] {
    match ty {
        "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_CHUNK" | "REASONING_MESSAGE_CONTENT" => {
            &["messageId", "delta"]
        }
        "TOOL_CALL_ARGS" => &["toolCallId", "delta"],
        "TEXT_MESSAGE_START" => &["messageId", "role", "name"],
        "TEXT_MESSAGE_END" => &["messageId"],
        "TOOL_CALL_START" => &["toolCallId", "toolCallName", "parentMessageId"],
        "TOOL_CALL_END" => &["toolCallId"],
        "TOOL_CALL_RESULT" => &["messageId", "toolCallId", "content", "role"],
        "STATE_DELTA" => &["delta"],
        "RUN_STARTED" => &["threadId", "runId"],
        "THINKING_TEXT_MESSAGE_CONTENT" => &["delta"],
        _ => &[],
    }
}

/// One event object: its type and the fields that type has, each a string
/// (a role a role, a STATE_DELTA's delta a patch) unless `odd` puts another
/// value in one, maybe one field left out and one more added; the type at
/// any place, whitespace between tokens, and how it ends.
#[derive(Arbitrary, Debug)]
struct Obj {
    /// Mostly one of [`TYPES`] (with the fields an event of it has), else an
    /// escaped type or `other_type`.
    ty: u8,
    other_type: Val,
    values: Vec<Str>,
    role: u8,
    odd: Option<(u8, Val)>,
    missing: Option<u8>,
    extra: Option<(Key, Val)>,
    type_at: u8,
    ws: Vec<u8>,
    bad_ws: Option<u8>,
    tail: Option<Tail>,
}

impl Obj {
    fn render(&self) -> String {
        let mut ws = self.ws.iter().cycle();
        let mut w = |out: &mut String| {
            if let Some(i) = ws.next() {
                out.push_str(pick(&WHITESPACE, *i));
            }
        };
        let ty = match self.ty {
            0..224 => pick(&TYPES, self.ty),
            _ => "",
        };
        let mut fields: Vec<(String, String)> = Vec::new();
        let mut values = self.values.iter();
        for (n, key) in natural_keys(ty).iter().enumerate() {
            let mut v = String::new();
            match (*key, ty) {
                ("role", _) => v.push_str(&format!("\"{}\"", pick(&ROLES, self.role))),
                ("delta", "STATE_DELTA") => Val::Patch(Str(Vec::new())).render(&mut v),
                _ => match values.next() {
                    Some(s) => s.render(&mut v),
                    None => v.push_str("\"a\""),
                },
            }
            if let Some((at, odd)) = &self.odd {
                if usize::from(*at) % 4 == n {
                    v.clear();
                    odd.render(&mut v);
                }
            }
            if self.missing.is_some_and(|m| usize::from(m) % 4 == n) {
                continue;
            }
            fields.push((format!("\"{key}\""), v));
        }
        if let Some((k, v)) = &self.extra {
            let mut key = String::new();
            match k {
                Key::Known(i) => key.push_str(&format!("\"{}\"", pick(&KEYS, *i))),
                Key::EscapedType => key.push_str(r#""typ\u0065""#),
                Key::Str(s) => s.render(&mut key),
            }
            let mut val = String::new();
            v.render(&mut val);
            fields.push((key, val));
        }
        let mut tv = String::new();
        match self.ty {
            0..224 => tv.push_str(&format!("\"{ty}\"")),
            224..240 => tv.push_str(r#""TEXT_\u004dESSAGE_END""#),
            _ => self.other_type.render(&mut tv),
        }
        let type_at = usize::from(self.type_at) % (fields.len() + 1);
        fields.insert(type_at, ("\"type\"".into(), tv));

        let mut out = String::new();
        w(&mut out);
        out.push('{');
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            w(&mut out);
            out.push_str(k);
            w(&mut out);
            out.push(':');
            w(&mut out);
            out.push_str(v);
            w(&mut out);
        }
        if let Some(i) = self.bad_ws {
            out.push_str(pick(&BAD_WHITESPACE, i));
        }
        out.push('}');
        w(&mut out);
        match self.tail {
            None => {}
            Some(Tail::Cut(at)) => {
                let mut cut = usize::from(at) % (out.len() + 1);
                while !out.is_char_boundary(cut) {
                    cut -= 1;
                }
                out.truncate(cut);
            }
            Some(Tail::Junk) => out.push_str(" x"),
            Some(Tail::Comma) => out.push(','),
        }
        out
    }
}

#[derive(Arbitrary, Debug)]
struct Frames {
    lane_open: bool,
    frames: Vec<Obj>,
}

/// The frames in `data`: its text lines after the first byte when that is
/// odd, else structured frames made by `arbitrary`.
fn ag_ui_frames(data: &[u8]) -> Option<(bool, Vec<String>)> {
    let (first, rest) = data.split_first()?;
    if first % 2 == 1 {
        let text = String::from_utf8_lossy(rest);
        let lines = text.split('\n').map(str::to_string).collect();
        return Some((first % 4 == 3, lines));
    }
    let f = Frames::arbitrary_take_rest(Unstructured::new(rest)).ok()?;
    Some((
        f.lane_open,
        f.frames.iter().take(8).map(Obj::render).collect(),
    ))
}

fn frame(data: &str) -> Frame {
    Frame {
        data: data.to_string(),
        ..Default::default()
    }
}

pub fn check_fast_ag_ui(data: &[u8]) {
    let Some((lane_open, frames)) = ag_ui_frames(data) else {
        return;
    };
    let mut fast = AgUiDecoder::new();
    let mut reference = AgUiDecoder::new();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    if lane_open {
        // A chunk lane open, which the next event may close.
        let open = frame(r#"{"type":"TEXT_MESSAGE_CHUNK","messageId":"x","delta":"a"}"#);
        fast.decode(&open, &mut got).expect("a valid chunk");
        reference
            .decode_without_fast_paths(&open, &mut want)
            .expect("a valid chunk");
    }
    for data in &frames {
        let f = frame(data);
        let r_fast = fast.decode(&f, &mut got);
        let r_reference = reference.decode_without_fast_paths(&f, &mut want);
        assert_eq!(r_fast, r_reference, "frame {data:?}");
        assert_eq!(got, want, "frame {data:?}");
        if r_fast.is_err() {
            break;
        }
    }
    // The same frames as an upstream stream, through every translation.
    let stream: String = frames
        .iter()
        .map(|d| format!("data: {}\n\n", d.replace(['\r', '\n'], " ")))
        .collect();
    crate::check_decode(Dialect::AgUi, stream.as_bytes());
}

// ---- direct JSON writing ----------------------------------------------------

/// A character chosen to need escaping more often than not.
#[derive(Arbitrary, Debug)]
enum Ch {
    Quote,
    Backslash,
    Control(u8),
    Multibyte(u8),
    Any(char),
}

#[derive(Arbitrary, Debug)]
struct Strings {
    from: u8,
    strings: Vec<Vec<Ch>>,
}

fn render_chars(chars: &[Ch]) -> String {
    let mut s = String::new();
    for c in chars {
        match c {
            Ch::Quote => s.push('"'),
            Ch::Backslash => s.push('\\'),
            Ch::Control(b) => s.push(char::from(b % 0x20)),
            Ch::Multibyte(i) => s.push_str(pick(&MULTIBYTE, *i)),
            Ch::Any(c) => s.push(*c),
        }
    }
    s
}

/// The strings in `data`: its text lines after the first byte when that is
/// odd, else strings made by `arbitrary`; and an offset for `plain_run`.
fn strings(data: &[u8]) -> Option<(usize, Vec<String>)> {
    let (first, rest) = data.split_first()?;
    if first % 2 == 1 {
        let text = String::from_utf8_lossy(rest);
        let lines = text.split('\n').map(str::to_string).collect();
        return Some((usize::from(first / 2), lines));
    }
    let s = Strings::arbitrary_take_rest(Unstructured::new(rest)).ok()?;
    let strings = s.strings.iter().take(8).map(|c| render_chars(c)).collect();
    Some((usize::from(s.from), strings))
}

pub fn check_fast_json(data: &[u8]) {
    let Some((from, strings)) = strings(data) else {
        return;
    };
    for s in &strings {
        let mut out = Vec::new();
        babelgate_core::json::write_str(&mut out, s);
        assert_eq!(out, serde_json::to_vec(s).expect("a string"), "{s:?}");

        let b = s.as_bytes();
        let from = from.min(b.len());
        let want = b
            .iter()
            .skip(from)
            .position(|&c| c < 0x20 || c == b'"' || c == b'\\')
            .map_or(b.len(), |i| from + i);
        assert_eq!(
            babelgate_core::json::plain_run(b, from),
            want,
            "{s:?} from {from}"
        );

        let ev = Event::new(EventKind::text_delta("m", s.clone()));
        assert_eq!(
            babelgate_core::testing::check_fast_write(&babelgate_vercel::wire::FAST, &ev),
            Ok(true),
            "{s:?}"
        );
    }
    check_vercel_direct(&strings);
}

/// The Vercel encoder's directly written chunks (text, reasoning and
/// tool-input deltas, the state part) are serde_json's bytes for what they
/// parse to, and carry the strings given.
fn check_vercel_direct(deltas: &[String]) {
    let ids = ["text", "reasoning", "tool"]
        .map(|k| format!("{k}{}", deltas.first().map(String::as_str).unwrap_or("")));
    let [text, reasoning, tool] = ids.clone();
    let mut events = vec![EventKind::RunStarted {
        thread_id: Some("t".into()),
        run_id: Some("r".into()),
        parent_run_id: None,
        message_id: None,
        input: None,
    }];
    events.push(EventKind::ReasoningStart {
        message_id: reasoning.clone(),
    });
    events.extend(deltas.iter().map(|d| EventKind::ReasoningDelta {
        message_id: reasoning.clone(),
        delta: d.clone(),
    }));
    events.push(EventKind::ReasoningEnd {
        message_id: reasoning.clone(),
    });
    events.push(EventKind::text_start(text.clone()));
    events.extend(deltas.iter().map(|d| EventKind::TextDelta {
        message_id: text.clone(),
        delta: d.clone(),
    }));
    events.push(EventKind::text_end(text.clone()));
    events.push(EventKind::ToolCallStart {
        tool_call_id: tool.clone(),
        tool_name: "f".into(),
        parent_message_id: None,
    });
    events.extend(deltas.iter().map(|d| EventKind::ToolCallArgs {
        tool_call_id: tool.clone(),
        delta: d.clone(),
    }));
    events.push(EventKind::StateSnapshot {
        snapshot: json!({"s": ""}),
    });
    events.extend(deltas.iter().map(|d| EventKind::StateDelta {
        patch: json!([{"op": "replace", "path": "/s", "value": d}]),
    }));

    let mut enc = VercelEncoder::new(EncodeContext::deterministic());
    let mut out = Vec::new();
    for k in events {
        enc.encode(&Event::new(k), &mut out);
    }
    enc.finish(&mut out);
    let out = String::from_utf8(out).expect("the encoder writes UTF-8");

    let mut chunks: Vec<Value> = Vec::new();
    for event in out.trim_end_matches('\n').split("\n\n") {
        let data = event.strip_prefix("data: ").expect("one data line");
        assert!(!data.contains('\n'), "{event:?}");
        if data == "[DONE]" {
            continue;
        }
        let v: Value = serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data:?}"));
        assert_eq!(serde_json::to_string(&v).expect("a value"), data);
        chunks.push(v);
    }
    let all = |ty: &str, key: &str, id_key: &str, id: &str| -> Vec<String> {
        chunks
            .iter()
            .filter(|v| v["type"] == ty && v[id_key] == id)
            .map(|v| v[key].as_str().expect("a string").to_string())
            .collect()
    };
    assert_eq!(all("text-delta", "delta", "id", &text), deltas);
    assert_eq!(all("reasoning-delta", "delta", "id", &reasoning), deltas);
    assert_eq!(
        all("tool-input-delta", "inputTextDelta", "toolCallId", &tool),
        deltas
    );
    let state = chunks
        .iter()
        .filter(|v| v["type"] == "data-state")
        .map(|v| &v["data"]["s"])
        .next_back();
    let want = json!(deltas.last().map(String::as_str).unwrap_or(""));
    assert_eq!(state, Some(&want));
}
