//! Shared pieces of the adapters' differential tests (a fast path held to
//! its general path): hostile JSON values to put in frames, events dressed
//! with the parts fast paths must respect, and an encoder's whole output
//! with its spans; the fixtures and SSE helpers the adapters' tests share.
//! Not for production code.
// A test helper that cannot read what it was given fails its test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::codec::{DecodeError, Decoder, Encoder};
use crate::event::{Event, EventKind};
use crate::length::LengthFramer;
use crate::sink::{Framing, Sink, Span};
use crate::sse::{Frame, SseFramer};
use crate::translate::Translator;
use crate::Dialect;

/// Strings that break naive scanning, as text (to be written as JSON).
pub const HOSTILE_TEXT: [&str; 6] = [
    "",
    "你好",
    "🎉\"\\\n",
    "\u{2028}\u{2029}",
    "\u{1}\u{7f}",
    "\\u0041",
];

/// JSON string literals that are escaped oddly or invalid (a lone surrogate,
/// an unknown escape, a raw control character).
pub const ODD_JSON_STRINGS: [&str; 4] = [
    r#""\u00e9\ud83c\udf89\/""#,
    r#""\ud800""#,
    r#""\x""#,
    "\"a\u{1}b\"",
];

/// JSON values of other types than string, for a field that wants one
/// (`id` names one the stream uses, so an array of it is plausible).
pub fn other_types(id: &str) -> Vec<String> {
    vec![
        "1".into(),
        "null".into(),
        "true".into(),
        format!("[\"{id}\"]"),
        "{\"a\":\"b\"}".into(),
    ]
}

/// An event with a time, extras (an object's fields) and an origin, as a
/// decoder would hand it on.
pub fn dressed(
    kind: EventKind,
    timestamp: Option<i64>,
    extra: Option<Value>,
    origin: Option<Dialect>,
) -> Event {
    let mut e = Event::new(kind).with_timestamp(timestamp);
    if let Some(d) = origin {
        e = e.with_origin(d);
    }
    if let Some(Value::Object(x)) = extra {
        e = e.with_extra(x.into_iter().collect());
    }
    e
}

/// Everything `enc` writes for `events` and its end, with the spans.
pub fn encode_all(enc: &mut dyn Encoder, events: &[Event]) -> (Vec<u8>, Vec<Span>) {
    let mut sink = Sink::new(Framing::stream(enc.writes_binary()));
    for ev in events {
        enc.encode_to(ev, &mut sink);
    }
    enc.finish_to(&mut sink);
    (sink.bytes().to_vec(), sink.spans().to_vec())
}

/// The frames of an SSE stream, as the gateway frames it.
pub fn sse_frames(bytes: &[u8]) -> Vec<Frame> {
    let mut framer = SseFramer::default();
    let mut out = Vec::new();
    framer.push(bytes, &mut out).unwrap();
    framer.finish(&mut out).unwrap();
    out
}

/// Each SSE frame's data as JSON, or as a string where it is not JSON
/// (`[DONE]`, AG-Kit's `keep-alive`).
pub fn sse_payloads(bytes: &[u8]) -> Vec<Value> {
    sse_frames(bytes)
        .into_iter()
        .map(|f| serde_json::from_str(&f.data).unwrap_or(Value::String(f.data)))
        .collect()
}

/// The events `d` makes of a whole SSE stream, its end included.
pub fn decode_sse(d: &mut dyn Decoder, bytes: &[u8]) -> Vec<Event> {
    let mut out = Vec::new();
    for f in sse_frames(bytes) {
        d.decode(&f, &mut out).unwrap();
    }
    d.finish(&mut out).unwrap();
    out
}

/// What `e` writes for `events` and its end.
pub fn encode_events(e: &mut dyn Encoder, events: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    for ev in events {
        e.encode(ev, &mut out);
    }
    e.finish(&mut out);
    out
}

/// What a translator from `d` to `e` writes for a whole SSE stream; an
/// error ends it as the translator ends a stream.
pub fn translate_sse(d: Box<dyn Decoder>, e: Box<dyn Encoder>, input: &[u8]) -> Vec<u8> {
    let mut t = Translator::new(SseFramer::default(), d, e);
    let mut out = Vec::new();
    let _ = t.push(input, &mut out);
    let _ = t.finish(&mut out);
    out
}

/// The messages of a length-delimited binary stream.
pub fn length_messages(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut framer = LengthFramer::default();
    let mut out = Vec::new();
    framer.push(bytes, &mut out).unwrap();
    framer.finish().unwrap();
    out
}

/// The text of every text delta in `events`, joined.
pub fn text_of(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

/// The repository's `tests/fixtures/{dialect}` (found above this crate, so
/// moving the crate does not move it).
pub fn fixture_dir(dialect: &str) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here
        .ancestors()
        .find(|d| d.join("tests/fixtures").is_dir())
        .unwrap_or_else(|| panic!("no tests/fixtures above {}", here.display()));
    root.join("tests/fixtures").join(dialect)
}

/// A dialect's `.sse` fixtures as (file stem, bytes), sorted by name; a
/// missing directory fails the test rather than skipping it.
pub fn fixtures(dialect: &str) -> Vec<(String, Vec<u8>)> {
    let dir = fixture_dir(dialect);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut out: Vec<_> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sse"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// A JSON object's text with `"type"` first or last and `fields` as given
/// (keys written as they are, values as JSON text), with `ws` around every
/// token: the frames a differential test throws at a decoder.
pub fn object_text(ty: &str, fields: &[(&str, String)], ws: &str, type_last: bool) -> String {
    let mut parts: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{ws}\"{k}\"{ws}:{ws}{v}"))
        .collect();
    let t = format!("\"type\":\"{ty}\"");
    if type_last {
        parts.push(t);
    } else {
        parts.insert(0, t);
    }
    format!("{ws}{{{}}}{ws}", parts.join(","))
}

/// What `d` makes of each frame's data in turn, then of the end.
pub fn decode_all(d: &mut dyn Decoder, data: &[String]) -> Vec<Result<Vec<Event>, DecodeError>> {
    let mut all: Vec<_> = data
        .iter()
        .map(|c| {
            let mut out = Vec::new();
            let f = Frame {
                data: c.clone(),
                ..Default::default()
            };
            d.decode(&f, &mut out).map(|()| out)
        })
        .collect();
    let mut out = Vec::new();
    all.push(d.finish(&mut out).map(|()| out));
    all
}

// ---- the fast path against serde_json (`crate::fast`) ----------------------
//
// One property per direction, over any table: a frame the reader takes is
// what serde_json reads there by the table's declarations; an event the
// writer writes is serde_json's bytes for the object the row declares. The
// generators build from bytes (proptest's or a fuzzer's alike).

use crate::event::Role;
use crate::fast::{Kind, Slot, Table, MAX_SAFE};
use serde_json::Map;

/// Bytes taken one at a time (zero once used up): a generator's choices.
pub struct Choices<'a>(std::slice::Iter<'a, u8>);

impl<'a> Choices<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Choices(bytes.iter())
    }

    fn next(&mut self) -> u8 {
        self.0.next().copied().unwrap_or(0)
    }

    /// Whether a one-in-`n` chance came up.
    fn one_in(&mut self, n: u8) -> bool {
        self.next().is_multiple_of(n.max(1))
    }

    fn pick<T: Copy + Default>(&mut self, list: &[T]) -> T {
        let i = usize::from(self.next()) % list.len().max(1);
        list.get(i).copied().unwrap_or_default()
    }
}

/// Pieces of a string's content as JSON text: clean, escaped and invalid.
const PIECES: [&str; 24] = [
    "a",
    "m",
    "call-1",
    "assistant",
    "user",
    "",
    "é",
    "北",
    "🎉",
    "\u{2028}",
    "\\\"",
    "\\\\",
    "\\/",
    "\\n",
    "\\u00e9",
    "\\ud83d\\ude00",
    "\\u0000",
    "\\ud83d",
    "\\ude00",
    "\\x",
    "\\é",
    "\u{1}",
    "\"",
    "\\",
];

/// Numbers and other values in the forms a reader must tell apart.
const OTHERS: [&str; 14] = [
    "0",
    "1700000000000",
    "9007199254740991",
    "9007199254740992",
    "01",
    "-1",
    "-0",
    "1.5",
    "1e3",
    "null",
    "true",
    "[]",
    "{}",
    "[\"a\"]",
];

fn json_string(c: &mut Choices) -> String {
    let n = c.next() % 4;
    let mut s = String::from("\"");
    for _ in 0..n {
        // Mostly clean pieces, now and then a hostile one.
        let i = match c.one_in(4) {
            true => usize::from(c.next()) % PIECES.len(),
            false => usize::from(c.next()) % 9,
        };
        s.push_str(PIECES.get(i).copied().unwrap_or_default());
    }
    s.push('"');
    s
}

fn value_text<const N: usize>(c: &mut Choices, table: &Table<N>, slot: Slot) -> String {
    if slot == Slot::Timestamp && !c.one_in(4) {
        return c.pick(&OTHERS[..9]).to_string();
    }
    if c.one_in(8) {
        return c.pick(&OTHERS).to_string();
    }
    match table.wrap {
        Some(w) if slot == Slot::Delta && c.one_in(2) => {
            let space = if c.one_in(8) { " " } else { "" };
            format!("{}{space}{}{}", w.open, json_string(c), w.close)
        }
        _ => json_string(c),
    }
}

/// A frame for `table` from `bytes`: mostly one of its rows, with keys
/// missing, repeated, unknown or escaped, values of every form, any order
/// and spacing, now and then cut short or followed by more.
pub fn fast_frame<const N: usize>(table: &Table<N>, bytes: &[u8]) -> String {
    let mut c = Choices::new(bytes);
    let row = table
        .rows
        .get(usize::from(c.next()) % table.rows.len().max(1));
    let ty = match (row, c.next() % 8) {
        (Some(r), 0) => format!("\"{}\"", r.wire.replacen('_', "\\u005f", 1)),
        (_, 1) => value_text(&mut c, table, Slot::Delta),
        (Some(r), _) => format!("\"{}\"", r.wire),
        (None, _) => "\"x\"".into(),
    };
    let mut fields: Vec<(String, String)> = vec![("\"type\"".into(), ty)];
    let keys: Vec<u8> = row.map(|r| r.keys().to_vec()).unwrap_or_default();
    for k in keys {
        let Some(&(name, slot)) = table.keys.get(usize::from(k)) else {
            continue;
        };
        if !c.one_in(8) {
            fields.push((format!("\"{name}\""), value_text(&mut c, table, slot)));
        }
    }
    if c.one_in(4) {
        let at = usize::from(c.next()) % N.max(1);
        let (name, slot) = table.keys.get(at).copied().unwrap_or(("x", Slot::Delta));
        let key = match c.next() % 4 {
            0 => "\"x\"".to_string(),
            1 => format!("\"{}\"", name.replacen('e', "\\u0065", 1)),
            _ => format!("\"{name}\""),
        };
        fields.push((key, value_text(&mut c, table, slot)));
    }
    for i in (1..fields.len()).rev() {
        let j = usize::from(c.next()) % (i + 1);
        fields.swap(i, j);
    }
    let ws = c.pick(&["", "", "", " ", "\n\t"]);
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{ws}{k}{ws}:{ws}{v}{ws}"))
        .collect();
    let mut text = format!("{ws}{{{}}}{ws}", body.join(","));
    match c.next() % 16 {
        0 => {
            let mut cut = usize::from(c.next()) % (text.len() + 1);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        1 => text.push_str(" x"),
        _ => {}
    }
    text
}

/// What serde_json reads in `data` by `table`'s declarations: the event of
/// the row its type names, when every key is the table's and the row's,
/// each string a string (or in the table's wrap, where the row allows it)
/// and the timestamp an integer from 0 to `MAX_SAFE`; and whether a value
/// came wrapped.
fn read_by_serde<const N: usize>(table: &Table<N>, data: &str) -> Option<(Event, bool)> {
    let v: Value = serde_json::from_str(data).ok()?;
    let obj = v.as_object()?;
    let ty = obj.get("type")?.as_str()?;
    let row = table.rows.iter().find(|r| r.wire == ty)?;
    let template: Option<Value> = table
        .wrap
        .and_then(|w| serde_json::from_str(&format!("{}\"\"{}", w.open, w.close)).ok());
    let mut strings = Map::new();
    let mut timestamp = None;
    let mut wrapped = false;
    for (k, val) in obj {
        let at = table.keys.iter().position(|(name, _)| name == k)?;
        let slot = table.keys.get(at)?.1;
        if !row.keys().contains(&u8::try_from(at).ok()?) && slot != Slot::Type {
            return None;
        }
        match (slot, val) {
            (Slot::Type, _) => {}
            (Slot::Timestamp, v) => {
                timestamp = Some(i64::try_from(v.as_u64().filter(|t| *t <= MAX_SAFE as u64)?).ok()?)
            }
            (_, Value::String(s)) => {
                strings.insert(k.clone(), Value::String(s.clone()));
            }
            (Slot::Delta, v) if row.wraps() => {
                let s = unwrap(template.as_ref()?, v)?;
                wrapped = true;
                strings.insert(k.clone(), Value::String(s));
            }
            _ => return None,
        }
    }
    let event = table.event_of(
        ty,
        timestamp,
        |names| strings.keys().all(|k| names.contains(&k.as_str())),
        |name| strings.get(name).and_then(Value::as_str),
    )?;
    Some((event, wrapped))
}

/// The string `v` holds where `template` holds `""`, when `v` is the
/// template otherwise.
fn unwrap(template: &Value, v: &Value) -> Option<String> {
    match (template, v) {
        (Value::String(t), Value::String(s)) if t.is_empty() => Some(s.clone()),
        (Value::Object(t), Value::Object(o)) if t.len() == o.len() => {
            let mut found = None;
            for (k, tv) in t {
                let ov = o.get(k)?;
                if tv == &Value::String(String::new()) {
                    found = Some(ov.as_str()?.to_string());
                } else if let Some(s) = unwrap(tv, ov) {
                    found = Some(s);
                } else if tv != ov {
                    return None;
                }
            }
            found
        }
        _ => None,
    }
}

/// `Ok(true)` when the table's reader takes `data` and gives what serde_json
/// reads there ([`read_by_serde`]), `Ok(false)` when it leaves it to the
/// general path, `Err` when it reads it otherwise.
pub fn check_fast_read<const N: usize>(table: &Table<N>, data: &str) -> Result<bool, String> {
    let Some(got) = table.read(data) else {
        return Ok(false);
    };
    let Some((want, wrapped)) = read_by_serde(table, data) else {
        return Err(format!("taken, but not so by serde_json: {data:?}"));
    };
    // As JSON too: maps compare equal in any order, their bytes do not.
    let text = |e: &Event| serde_json::to_string(e).unwrap_or_default();
    if got.event != want || text(&got.event) != text(&want) || got.wrapped != wrapped {
        return Err(format!(
            "{data:?}: read {:?}, serde_json {want:?}",
            got.event
        ));
    }
    Ok(true)
}

/// An event of one of `table`'s kinds from `bytes`, hostile strings, absent
/// optional fields, any role and timestamps out of range included.
pub fn fast_event<const N: usize>(table: &Table<N>, bytes: &[u8]) -> Event {
    let mut c = Choices::new(bytes);
    let kind = table
        .rows
        .get(usize::from(c.next()) % table.rows.len().max(1))
        .map_or(Kind::TextEnd, |r| r.kind);
    let mut s = || {
        let t = c.pick(&HOSTILE_TEXT);
        format!("{t}{}", c.next() % 3)
    };
    let (a, b) = (s(), s());
    let mut c = Choices::new(bytes.get(1..).unwrap_or_default());
    let opt = |c: &mut Choices, v: &str| (!c.one_in(3)).then(|| v.to_string());
    use EventKind as K;
    let kind = match kind {
        Kind::TextStart => K::TextStart {
            message_id: a,
            role: c.pick(&[
                Role::Assistant,
                Role::User,
                Role::System,
                Role::Developer,
                Role::Tool,
                Role::Reasoning,
                Role::Activity,
            ]),
            name: opt(&mut c, &b),
        },
        Kind::TextDelta => K::TextDelta {
            message_id: a,
            delta: b,
        },
        Kind::TextEnd => K::TextEnd { message_id: a },
        Kind::ReasoningStart => K::ReasoningStart { message_id: a },
        Kind::ReasoningDelta => K::ReasoningDelta {
            message_id: a,
            delta: b,
        },
        Kind::ReasoningEnd => K::ReasoningEnd { message_id: a },
        Kind::ToolCallStart => K::ToolCallStart {
            tool_call_id: a,
            tool_name: b.clone(),
            parent_message_id: opt(&mut c, &b),
        },
        Kind::ToolCallArgs => K::ToolCallArgs {
            tool_call_id: a,
            delta: b,
        },
        Kind::ToolCallEnd => K::ToolCallEnd { tool_call_id: a },
        Kind::ToolCallResult => K::ToolCallResult {
            tool_call_id: a,
            message_id: opt(&mut c, &b),
            content: match c.one_in(4) {
                true => serde_json::json!({ "a": b }),
                false => Value::String(b),
            },
        },
        Kind::StepStarted => K::StepStarted {
            name: opt(&mut c, &b),
        },
        Kind::StepFinished => K::StepFinished {
            name: opt(&mut c, &b),
        },
    };
    let ts = c.pick(&[
        None,
        None,
        Some(0),
        Some(1_700_000_000_000),
        Some(MAX_SAFE),
        Some(MAX_SAFE + 1),
        Some(-5),
        Some(i64::MIN),
    ]);
    Event::new(kind)
        .with_timestamp(ts)
        .with_origin(table.dialect)
}

/// `Ok(true)` when the table's writer writes `ev` as serde_json writes the
/// object its row declares (type, the row's keys in order with the event's
/// fields by their serde names, a timestamp within ±`MAX_SAFE`, the row's
/// constants), `Ok(false)` when it declines, `Err` when it writes otherwise.
pub fn check_fast_write<const N: usize>(table: &Table<N>, ev: &Event) -> Result<bool, String> {
    let mut got = Vec::new();
    if !table.write(ev, &mut got) {
        return Ok(false);
    }
    let writer = table.writer(ev).ok_or("written without a row")?;
    let row = writer.row();
    let fields = serde_json::to_value(&ev.kind).map_err(|e| e.to_string())?;
    let mut want = Map::new();
    want.insert("type".into(), row.wire.into());
    for &k in row.keys() {
        let (name, slot) = *table.keys.get(usize::from(k)).ok_or("no key")?;
        let field = match slot {
            Slot::Type => continue,
            Slot::Timestamp => {
                if let Some(t) = ev.timestamp.filter(|t| (-MAX_SAFE..=MAX_SAFE).contains(t)) {
                    want.insert(name.into(), t.into());
                }
                continue;
            }
            Slot::MessageId => "message_id",
            Slot::ToolCallId => "tool_call_id",
            Slot::ToolName => "tool_name",
            Slot::ParentMessageId => "parent_message_id",
            Slot::Delta => "delta",
            Slot::Role => "role",
            Slot::Name => "name",
            Slot::Content => "content",
        };
        if let Some(v) = fields.get(field) {
            want.insert(name.into(), v.clone());
        }
    }
    for (k, v) in row.consts() {
        want.insert((*k).into(), (*v).into());
    }
    let bytes = serde_json::to_vec(&want).map_err(|e| e.to_string())?;
    if got != bytes {
        return Err(format!(
            "{ev:?}: wrote {}, serde_json {}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&bytes)
        ));
    }
    Ok(true)
}

/// A sample value for `slot`, or for a field the wrap holds.
fn sample(slot: Slot, escaped: bool) -> &'static str {
    match (slot, escaped) {
        (Slot::Timestamp, _) => "1700000000000",
        (Slot::Role, _) => "\"assistant\"",
        (Slot::Type, _) => "\"\"",
        (_, false) => "\"id-1\"",
        (_, true) => "\"a\\\"\\u00e9\\n北\"",
    }
}

/// Frames of every row of `table`, for an adapter's check that its table
/// declares what its general path does: each row with all its keys, with
/// its required keys only, with escaped strings, and (where the row takes
/// it) with its delta in the table's wrap.
pub fn fast_samples<const N: usize>(table: &Table<N>) -> Vec<String> {
    let mut out = Vec::new();
    for row in table.rows {
        let keys: Vec<(&str, Slot, bool)> = row
            .keys()
            .iter()
            .filter_map(|&k| {
                let (name, slot) = *table.keys.get(usize::from(k))?;
                Some((name, slot, row.required() & (1 << k) != 0))
            })
            .collect();
        for form in 0..4 {
            let fields: Vec<(&str, String)> = keys
                .iter()
                .filter(|(_, _, required)| *required || form != 1)
                .map(|&(name, slot, _)| {
                    let v = match (table.wrap, form, slot) {
                        (Some(w), 3, Slot::Delta) if row.wraps() => {
                            format!("{}{}{}", w.open, sample(slot, false), w.close)
                        }
                        _ => sample(slot, form == 2).to_string(),
                    };
                    (name, v)
                })
                .collect();
            out.push(object_text(row.wire, &fields, "", false));
        }
    }
    out
}

/// Events of every row of `table`, for an adapter's check that its writer
/// writes what its general path does: with every optional field and
/// without, plain and hostile strings, with a timestamp and without.
pub fn fast_sample_events<const N: usize>(table: &Table<N>) -> Vec<Event> {
    let mut out = Vec::new();
    for (i, _) in table.rows.iter().enumerate() {
        for b in 0..4u8 {
            // The row's index first, then the form.
            let bytes = [i as u8, b * 3, b, b + 1, b, b, b, 0];
            out.push(fast_event(table, &bytes));
        }
    }
    out
}

/// What a decoder makes of each frame of a run, then of the end: with its
/// fast paths (`true`) or the general path only.
pub type Run<'a> = dyn FnMut(&[String], bool) -> Vec<Result<Vec<Event>, DecodeError>> + 'a;

/// An adapter's check that its table declares what its general path does:
/// every row's [`fast_samples`] decoded both ways give the same events
/// (compared in order, extras included) and errors, each alone, after the
/// frames of `before` (state the sample meets), and all in a row; and the
/// fast path takes every row's full sample.
pub fn check_table_decodes<const N: usize>(
    table: &Table<N>,
    before: &[&str],
    run: &mut Run<'_>,
) -> Result<(), String> {
    let samples = fast_samples(table);
    for (row, full) in table.rows.iter().zip(samples.iter().step_by(4)) {
        if row.consts().is_empty() && table.read(full).is_none() {
            return Err(format!("the fast path does not take {full}"));
        }
    }
    let mut runs: Vec<Vec<String>> = samples.iter().map(|s| vec![s.clone()]).collect();
    runs.extend(samples.iter().map(|s| {
        let mut r: Vec<String> = before.iter().map(|b| b.to_string()).collect();
        r.push(s.clone());
        r
    }));
    runs.push(samples.clone());
    for frames in runs {
        let (fast, general) = (run(&frames, true), run(&frames, false));
        if format!("{fast:?}") != format!("{general:?}") {
            return Err(format!(
                "{frames:?}\nfast:    {fast:?}\ngeneral: {general:?}"
            ));
        }
    }
    Ok(())
}

/// What an encoder writes for events, with its spans: with its fast paths
/// (`true`) or the general path only.
pub type Encoded<'a> = dyn FnMut(&[Event], bool) -> (Vec<u8>, Vec<Span>) + 'a;

/// An adapter's check that its writer writes what its general path does:
/// `run(events, fast)` encodes with the fast paths or without, and every
/// row's [`fast_sample_events`], each alone and all in a row (with the
/// events of `before` first), come out the same bytes and spans.
pub fn check_table_encodes<const N: usize>(
    table: &Table<N>,
    before: &[Event],
    run: &mut Encoded<'_>,
) -> Result<(), String> {
    let samples = fast_sample_events(table);
    let mut runs: Vec<Vec<Event>> = samples
        .iter()
        .map(|e| before.iter().cloned().chain([e.clone()]).collect())
        .collect();
    runs.push(before.iter().chain(&samples).cloned().collect());
    for events in runs {
        let (fast, general) = (run(&events, true), run(&events, false));
        if fast != general {
            return Err(format!(
                "{events:?}\nfast:    {}\ngeneral: {}",
                String::from_utf8_lossy(&fast.0),
                String::from_utf8_lossy(&general.0)
            ));
        }
    }
    Ok(())
}
