//! Constants and small helpers of the UI message stream v1 wire format, as the
//! `ai` package (7.x) defines it in `uiMessageChunkSchema` and
//! `UI_MESSAGE_STREAM_HEADERS`.

use babelgate_core::fast::{Kind, Row, Slot, Table};
#[cfg(test)]
use babelgate_core::Extra;
use babelgate_core::{Dialect, EventKind};
use serde_json::{Map, Value};

/// The chunks that make most of a stream, read and written by the core's
/// fast path (`babelgate_core::fast`): each key and the core field it fills,
/// then each type with exactly the string fields the general path models.
#[rustfmt::skip]
pub static FAST: Table<6> = {
    const K: &[(&str, Slot); 6] = &[
        ("type", Slot::Type), ("id", Slot::MessageId), ("delta", Slot::Delta),
        ("toolCallId", Slot::ToolCallId), ("toolName", Slot::ToolName),
        ("inputTextDelta", Slot::Delta),
    ];
    const ROWS: [Row; 10] = [
        Row::new(K, "text-delta", Kind::TextDelta, &["id", "delta"]),
        Row::new(K, "reasoning-delta", Kind::ReasoningDelta, &["id", "delta"]),
        Row::new(K, "text-start", Kind::TextStart, &["id"]),
        Row::new(K, "text-end", Kind::TextEnd, &["id"]),
        Row::new(K, "reasoning-start", Kind::ReasoningStart, &["id"]),
        Row::new(K, "reasoning-end", Kind::ReasoningEnd, &["id"]),
        Row::new(K, "tool-input-delta", Kind::ToolCallArgs, &["toolCallId", "inputTextDelta"]),
        Row::new(K, "tool-input-start", Kind::ToolCallStart, &["toolCallId", "toolName"]),
        Row::new(K, "start-step", Kind::StepStarted, &[]),
        Row::new(K, "finish-step", Kind::StepFinished, &[]),
    ];
    Table { dialect: Dialect::Vercel, keys: *K, rows: &ROWS, wrap: None }
};

/// Response headers of a UI message stream besides the content type
/// (`UI_MESSAGE_STREAM_HEADERS`).
pub const HEADERS: &[(&str, &str)] = &[
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-accel-buffering", "no"),
];

/// The only `finish.finishReason` values the client's schema accepts.
pub const FINISH_REASONS: [&str; 7] = [
    "stop",
    "length",
    "content-filter",
    "tool-calls",
    "error",
    "interrupted",
    "other",
];

/// A finish reason the client accepts: unknown ones become `other`.
pub fn finish_reason(reason: &str) -> &str {
    if FINISH_REASONS.contains(&reason) {
        reason
    } else {
        "other"
    }
}

/// Chunk types that newer (7.x) clients know but the core has no event for:
/// the decoder keeps them as `Unknown` and the encoder writes them back as
/// they came when they came from a Vercel upstream and
/// [`client_accepts`] them.
pub const PASSTHROUGH_TYPES: [&str; 4] = [
    "custom",
    "tool-approval-response",
    "reset-step",
    "steering-message",
];

/// Whether a chunk of type `ty` is one the core keeps whole as `Unknown`
/// and the encoder may write back as it came: one of [`PASSTHROUGH_TYPES`],
/// an approval request (one the stream answers itself is kept so), or a
/// [preliminary](is_preliminary) output.
pub fn is_kept_whole(ty: &str, raw: &Value) -> bool {
    PASSTHROUGH_TYPES.contains(&ty)
        || ty == "tool-approval-request"
        || (ty == "tool-output-available" && is_preliminary(raw))
}

/// Whether `chunks`, in order, keep the part order the `ai` client's
/// `processUIMessageStream` throws on breaking: a text or reasoning delta or
/// end whose part was not started (or has ended), tool input of a call
/// whose `tool-input-start` did not come, an output, error or denial of a
/// call the message does not hold, an approval request for such a call.
/// For checks of the encoder's output (its tests, the fuzz targets). The
/// error names the first chunk that breaks it.
pub fn parts_in_order(chunks: &[Value]) -> Result<(), String> {
    use std::collections::HashSet;
    let (mut text, mut reasoning, mut calls) = (HashSet::new(), HashSet::new(), HashSet::new());
    for c in chunks {
        let id = || c["id"].as_str().unwrap_or_default().to_string();
        let call = || c["toolCallId"].as_str().unwrap_or_default().to_string();
        let ok = match c["type"].as_str().unwrap_or_default() {
            "text-start" => {
                text.insert(id());
                true
            }
            "reasoning-start" => {
                reasoning.insert(id());
                true
            }
            "text-delta" => text.contains(&id()),
            "reasoning-delta" => reasoning.contains(&id()),
            "text-end" => text.remove(&id()),
            "reasoning-end" => reasoning.remove(&id()),
            "tool-input-start" | "tool-input-available" | "tool-input-error" => {
                calls.insert(call());
                true
            }
            "tool-input-delta"
            | "tool-output-available"
            | "tool-output-error"
            | "tool-output-denied"
            | "tool-approval-request" => calls.contains(&call()),
            _ => true,
        };
        if !ok {
            return Err(format!("{c} names a part or call that is not open"));
        }
    }
    Ok(())
}

/// Whether `raw`, a chunk [kept whole](is_kept_whole), has the fields the 7.x client's chunk schema asks of its type. The client
/// rejects the whole stream at the first chunk that fails, and a chunk kept
/// unknown may come from anywhere (an AG-Kit `unknown` envelope can carry any
/// JSON), so one that fails goes to the client inside `data-unknown` instead.
pub fn client_accepts(raw: &Value) -> bool {
    let Some(c) = Fields::of(raw) else {
        return false;
    };
    match c.ty() {
        Some("custom") => c.string("kind") && c.metadata(),
        Some("reset-step") => true,
        Some("tool-approval-request") => {
            c.string("approvalId")
                && c.string("toolCallId")
                && c.opt("reason", Value::is_string)
                && c.opt("isAutomatic", Value::is_boolean)
                && c.opt("signature", Value::is_string)
        }
        Some("tool-approval-response") => {
            c.string("approvalId")
                && c.0.get("approved").is_some_and(Value::is_boolean)
                && c.opt("reason", Value::is_string)
                && c.opt("providerExecuted", Value::is_boolean)
                && c.metadata()
        }
        Some("tool-output-available") => {
            c.string("toolCallId")
                && c.opt("providerExecuted", Value::is_boolean)
                && c.metadata()
                && c.opt("toolMetadata", Value::is_object)
                && c.opt("dynamic", Value::is_boolean)
                && c.opt("preliminary", Value::is_boolean)
        }
        Some("steering-message") => {
            c.string("id")
                && c.0
                    .get("parts")
                    .and_then(Value::as_array)
                    .is_some_and(|parts| parts.iter().all(steering_part))
        }
        _ => false,
    }
}

/// A `tool-output-available` that says it is `preliminary`: a generator
/// tool's progress, which the core keeps whole (its final output is the
/// call's result).
fn is_preliminary(raw: &Value) -> bool {
    raw.get("preliminary") == Some(&Value::Bool(true))
}

/// One part of a `steering-message`: text, or a file.
fn steering_part(p: &Value) -> bool {
    let Some(p) = Fields::of(p) else {
        return false;
    };
    match p.ty() {
        Some("text") => p.string("text") && p.metadata(),
        Some("file") => {
            p.string("mediaType")
                && p.string("url")
                && p.opt("filename", Value::is_string)
                && p.opt("providerReference", |r| {
                    r.as_object()
                        .is_some_and(|r| r.values().all(Value::is_string))
                })
                && p.metadata()
        }
        _ => false,
    }
}

/// The fields of a JSON object, checked as the client's zod schemas do.
struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn of(v: &'a Value) -> Option<Self> {
        v.as_object().map(Fields)
    }

    fn ty(&self) -> Option<&'a str> {
        self.0.get("type").and_then(Value::as_str)
    }

    fn string(&self, key: &str) -> bool {
        self.0.get(key).is_some_and(Value::is_string)
    }

    /// zod's `optional()` takes a missing key, never a null.
    fn opt(&self, key: &str, ok: fn(&Value) -> bool) -> bool {
        self.0.get(key).is_none_or(ok)
    }

    /// `providerMetadata`, when given: an object of objects (of any JSON).
    fn metadata(&self) -> bool {
        self.opt("providerMetadata", |m| {
            m.as_object()
                .is_some_and(|m| m.values().all(Value::is_object))
        })
    }
}

/// Tool name used when a tool call has to be shown to the client but no event
/// ever named its tool.
pub const UNKNOWN_TOOL_NAME: &str = "unknown";

/// The id of the one `data-state` part that holds the current state.
pub const STATE_PART_ID: &str = "state";

/// The `providerMetadata` key under which a part carries the upstream's id
/// of the message it belongs to (`{"babelgate": {"messageId": ...}}`): the
/// client keeps it on the part (text and reasoning `providerMetadata`, tool
/// `callProviderMetadata`/`resultProviderMetadata`) and sends it back with
/// the history, so an upstream that merges its history by id gets its own
/// ids back, one message per upstream message.
pub const IDS_KEY: &str = "babelgate";

/// `providerMetadata` naming the upstream message `id`.
pub fn id_metadata(id: &str) -> serde_json::Value {
    serde_json::json!({ IDS_KEY: { "messageId": id } })
}

/// The upstream message id a part's metadata names (see [`IDS_KEY`]).
pub fn metadata_id(metadata: Option<&serde_json::Value>) -> Option<&str> {
    metadata?.get(IDS_KEY)?.get("messageId")?.as_str()
}

/// Keys of `Event::extra` that are not wire fields but notes the decoder
/// leaves for the encoder of its own dialect: the form a chunk came in where
/// the UI message stream has two for one core event and the core keeps
/// none, so that a stream re-encoded from the journal (a resume) writes
/// them as they came; a live same-dialect frame stands as received anyway.
/// They start with `$` (`babelgate_core::event::NOTE_PREFIX`) and are never
/// written to the wire.
pub mod marker {
    /// A `data-state` part in the `{type: "snapshot"|"delta", ...}` envelope.
    pub const FORM: &str = "$form";
    /// `reasoning-file` (value `"reasoning-file"`), read as a `File`.
    pub const TYPE: &str = "$type";
}

/// Whether `key` is one of the decoder's notes rather than a wire field.
pub fn is_marker(key: &str) -> bool {
    babelgate_core::event::is_note(key)
}

/// An extra map holding one field (for tests).
#[cfg(test)]
pub fn marked(key: &str, value: Value) -> Extra {
    let mut m = Extra::new();
    m.insert(key.to_string(), value);
    m
}

/// Core kinds with no chunk of their own travel as `data-<name>` parts whose
/// `data` holds the event's fields (snake_case, as the core serializes them).
/// These are the part names, paired with the core kind names.
pub const KIND_PARTS: [(&str, &str); 10] = [
    ("reasoning-encrypted", "reasoning_encrypted"),
    ("activity-snapshot", "activity_snapshot"),
    ("activity-delta", "activity_delta"),
    ("collab-start", "collab_start"),
    ("collab-content", "collab_content"),
    ("collab-end", "collab_end"),
    ("subagent-started", "subagent_started"),
    ("subagent-finished", "subagent_finished"),
    ("subagent-error", "subagent_error"),
    ("raw", "raw"),
];

/// The `data-<name>` part name for a core kind carried whole.
pub fn kind_part_name(kind: &EventKind) -> Option<&'static str> {
    let name = kind.name();
    KIND_PARTS
        .iter()
        .find(|(_, k)| *k == name)
        .map(|(part, _)| *part)
}

/// The event's fields without the `kind` tag.
pub fn kind_fields(kind: &EventKind) -> Value {
    match serde_json::to_value(kind) {
        Ok(Value::Object(mut m)) => {
            // shift, not swap: the fields keep their order
            m.shift_remove("kind");
            Value::Object(m)
        }
        // EventKind always serializes to an object; keep the value if not.
        Ok(other) => other,
        Err(_) => Value::Null,
    }
}

/// Reads a `data-<part>` payload back into the core kind it carries, when the
/// part name is one of [`KIND_PARTS`] and the data has that kind's shape.
pub fn kind_from_part(part: &str, data: &Value) -> Option<EventKind> {
    let (_, kind) = KIND_PARTS.iter().find(|(p, _)| *p == part)?;
    let mut obj: Map<String, Value> = data.as_object()?.clone();
    obj.insert("kind".into(), Value::String((*kind).to_string()));
    serde_json::from_value(Value::Object(obj)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_finish_reasons_become_other() {
        assert_eq!(finish_reason("tool-calls"), "tool-calls");
        assert_eq!(finish_reason("end_turn"), "other");
    }

    #[test]
    fn kind_parts_round_trip() {
        let k = EventKind::CollabStart {
            message_id: "c1".into(),
            from: Some("a".into()),
            to: None,
        };
        assert_eq!(kind_part_name(&k), Some("collab-start"));
        let data = kind_fields(&k);
        assert_eq!(data, json!({"message_id": "c1", "from": "a"}));
        assert_eq!(kind_from_part("collab-start", &data), Some(k));
        assert_eq!(kind_from_part("collab-start", &json!({"x": 1})), None);
        assert_eq!(kind_from_part("weather", &data), None);
        assert_eq!(kind_part_name(&EventKind::text_end("m")), None);
    }
}
