//! Shared pieces of the adapters' differential tests (a fast path held to
//! its general path): hostile JSON values to put in frames, events dressed
//! with the parts fast paths must respect, and an encoder's whole output
//! with its spans. Not for production code.

use serde_json::Value;

use crate::codec::{DecodeError, Decoder, Encoder};
use crate::event::{Event, EventKind};
use crate::sink::{Framing, Sink, Span};
use crate::sse::Frame;
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
