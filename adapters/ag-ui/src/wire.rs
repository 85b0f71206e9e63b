//! The AG-UI 1.0 wire format: event type names, the private extra key this
//! adapter uses between its decoder and encoder, and validators for the values
//! the `@ag-ui/core` zod schemas check (the client treats a malformed known
//! field as fatal, so the encoder never writes one).

use babelgate_core::fast::{Kind, Row, Slot, Table};
use babelgate_core::Dialect;
use serde_json::{Map, Value};

pub const RUN_STARTED: &str = "RUN_STARTED";
pub const RUN_FINISHED: &str = "RUN_FINISHED";
pub const RUN_ERROR: &str = "RUN_ERROR";
pub const STEP_STARTED: &str = "STEP_STARTED";
pub const STEP_FINISHED: &str = "STEP_FINISHED";
pub const TEXT_MESSAGE_START: &str = "TEXT_MESSAGE_START";
pub const TEXT_MESSAGE_CONTENT: &str = "TEXT_MESSAGE_CONTENT";
pub const TEXT_MESSAGE_END: &str = "TEXT_MESSAGE_END";
pub const TEXT_MESSAGE_CHUNK: &str = "TEXT_MESSAGE_CHUNK";
pub const TOOL_CALL_START: &str = "TOOL_CALL_START";
pub const TOOL_CALL_ARGS: &str = "TOOL_CALL_ARGS";
pub const TOOL_CALL_END: &str = "TOOL_CALL_END";
pub const TOOL_CALL_CHUNK: &str = "TOOL_CALL_CHUNK";
pub const TOOL_CALL_RESULT: &str = "TOOL_CALL_RESULT";
pub const STATE_SNAPSHOT: &str = "STATE_SNAPSHOT";
pub const STATE_DELTA: &str = "STATE_DELTA";
pub const MESSAGES_SNAPSHOT: &str = "MESSAGES_SNAPSHOT";
pub const ACTIVITY_SNAPSHOT: &str = "ACTIVITY_SNAPSHOT";
pub const ACTIVITY_DELTA: &str = "ACTIVITY_DELTA";
pub const RAW: &str = "RAW";
pub const CUSTOM: &str = "CUSTOM";
pub const REASONING_START: &str = "REASONING_START";
pub const REASONING_MESSAGE_START: &str = "REASONING_MESSAGE_START";
pub const REASONING_MESSAGE_CONTENT: &str = "REASONING_MESSAGE_CONTENT";
pub const REASONING_MESSAGE_END: &str = "REASONING_MESSAGE_END";
pub const REASONING_MESSAGE_CHUNK: &str = "REASONING_MESSAGE_CHUNK";
pub const REASONING_END: &str = "REASONING_END";
pub const REASONING_ENCRYPTED_VALUE: &str = "REASONING_ENCRYPTED_VALUE";
pub const SUBAGENT_STARTED: &str = "SUBAGENT_STARTED";
pub const SUBAGENT_FINISHED: &str = "SUBAGENT_FINISHED";
pub const SUBAGENT_ERROR: &str = "SUBAGENT_ERROR";

/// Pre-1.0 names the client's compatibility boundary still upgrades.
pub const THINKING_START: &str = "THINKING_START";
pub const THINKING_END: &str = "THINKING_END";
pub const THINKING_TEXT_MESSAGE_START: &str = "THINKING_TEXT_MESSAGE_START";
pub const THINKING_TEXT_MESSAGE_CONTENT: &str = "THINKING_TEXT_MESSAGE_CONTENT";
pub const THINKING_TEXT_MESSAGE_END: &str = "THINKING_TEXT_MESSAGE_END";

/// The events that make most of a stream, read and written by the core's
/// fast path (`babelgate_core::fast`): each key and the core field it fills,
/// then each event type with its keys in the order written (`?`: optional).
/// A result's `role` has no core field and stays in extra.
#[rustfmt::skip]
pub static FAST: Table<10> = {
    const K: &[(&str, Slot); 10] = &[
        ("type", Slot::Type), ("timestamp", Slot::Timestamp), ("messageId", Slot::MessageId),
        ("toolCallId", Slot::ToolCallId), ("toolCallName", Slot::ToolName),
        ("parentMessageId", Slot::ParentMessageId), ("role", Slot::Role), ("name", Slot::Name),
        ("delta", Slot::Delta), ("content", Slot::Content),
    ];
    const ROWS: [Row; 10] = [
        Row::new(K, TEXT_MESSAGE_CONTENT, Kind::TextDelta, &["?timestamp", "messageId", "delta"]),
        Row::new(K, TOOL_CALL_ARGS, Kind::ToolCallArgs, &["?timestamp", "toolCallId", "delta"]),
        Row::new(K, TEXT_MESSAGE_START, Kind::TextStart, &["?timestamp", "messageId", "role", "?name"]),
        Row::new(K, TEXT_MESSAGE_END, Kind::TextEnd, &["?timestamp", "messageId"]),
        Row::new(K, TOOL_CALL_START, Kind::ToolCallStart, &["?timestamp", "toolCallId", "toolCallName", "?parentMessageId"]),
        Row::new(K, TOOL_CALL_END, Kind::ToolCallEnd, &["?timestamp", "toolCallId"]),
        Row::new(K, TOOL_CALL_RESULT, Kind::ToolCallResult, &["?timestamp", "?messageId", "toolCallId", "content", "?role"]),
        Row::new(K, REASONING_MESSAGE_START, Kind::ReasoningStart, &["?timestamp", "messageId"]).with_consts(&[("role", "reasoning")]),
        Row::new(K, REASONING_MESSAGE_CONTENT, Kind::ReasoningDelta, &["?timestamp", "messageId", "delta"]),
        Row::new(K, REASONING_MESSAGE_END, Kind::ReasoningEnd, &["?timestamp", "messageId"]),
    ];
    Table { dialect: Dialect::AgUi, keys: *K, rows: &ROWS, wrap: None }
};

/// Every 1.0 event type (`EventType` in `@ag-ui/core`).
pub const EVENT_TYPES: [&str; 31] = [
    TEXT_MESSAGE_START,
    TEXT_MESSAGE_CONTENT,
    TEXT_MESSAGE_END,
    TEXT_MESSAGE_CHUNK,
    TOOL_CALL_START,
    TOOL_CALL_ARGS,
    TOOL_CALL_END,
    TOOL_CALL_CHUNK,
    TOOL_CALL_RESULT,
    STATE_SNAPSHOT,
    STATE_DELTA,
    MESSAGES_SNAPSHOT,
    ACTIVITY_SNAPSHOT,
    ACTIVITY_DELTA,
    RAW,
    CUSTOM,
    RUN_STARTED,
    RUN_FINISHED,
    RUN_ERROR,
    STEP_STARTED,
    STEP_FINISHED,
    REASONING_START,
    REASONING_MESSAGE_START,
    REASONING_MESSAGE_CONTENT,
    REASONING_MESSAGE_END,
    REASONING_MESSAGE_CHUNK,
    REASONING_END,
    REASONING_ENCRYPTED_VALUE,
    SUBAGENT_STARTED,
    SUBAGENT_FINISHED,
    SUBAGENT_ERROR,
];

/// The deprecated `THINKING_*` types, still read (as reasoning).
pub const DEPRECATED: [&str; 5] = [
    THINKING_START,
    THINKING_END,
    THINKING_TEXT_MESSAGE_START,
    THINKING_TEXT_MESSAGE_CONTENT,
    THINKING_TEXT_MESSAGE_END,
];

/// A type AG-UI defines (now or deprecated): an event of it must carry that
/// type's fields, so only other types are kept whole as unknown events.
pub fn is_known_type(ty: &str) -> bool {
    EVENT_TYPES.contains(&ty) || DEPRECATED.contains(&ty)
}

/// The private note (`babelgate_core::event::NOTE_PREFIX`) the decoder
/// leaves for its own encoder, so that it knows what an AG-UI client saw:
/// the shorthand chunk verbatim, on the first core event made from it (the
/// content after a start it opens is `Event::synthesized`). Never written
/// to the wire.
pub const NOTE_CHUNK: &str = "$chunk";

/// JSON numbers survive a round trip up to 2^53 - 1; the schemas bound
/// timestamps and counts to that.
pub const MAX_SAFE: i64 = 9_007_199_254_740_991;

pub fn safe_int(v: &Value) -> bool {
    v.as_i64()
        .is_some_and(|n| (-MAX_SAFE..=MAX_SAFE).contains(&n))
        || v.as_u64().is_some_and(|n| n <= MAX_SAFE as u64)
}

fn non_negative_safe_int(v: &Value) -> bool {
    v.as_u64().is_some_and(|n| n <= MAX_SAFE as u64)
}

fn opt_str(o: &Map<String, Value>, key: &str) -> bool {
    o.get(key).is_none_or(Value::is_string)
}

/// A JSON Pointer (RFC 6901), as `JsonPointerSchema` checks it.
pub fn json_pointer(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    if !s.starts_with('/') {
        return false;
    }
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return false;
        }
    }
    true
}

/// An RFC 6902 patch document as `JsonPatchSchema` checks it.
pub fn json_patch(v: &Value) -> bool {
    let Some(ops) = v.as_array() else {
        return false;
    };
    ops.iter().all(|op| {
        let Some(o) = op.as_object() else {
            return false;
        };
        let ptr = |k: &str| o.get(k).and_then(Value::as_str).is_some_and(json_pointer);
        match o.get("op").and_then(Value::as_str) {
            Some("add" | "replace" | "test") => ptr("path") && o.contains_key("value"),
            Some("remove") => ptr("path"),
            Some("move" | "copy") => ptr("path") && ptr("from"),
            _ => false,
        }
    })
}

/// A media part's `source` (`PartSourceSchema`).
fn part_source(v: &Value) -> bool {
    let Some(o) = v.as_object() else {
        return false;
    };
    let value = o.get("value").is_some_and(Value::is_string);
    match o.get("type").and_then(Value::as_str) {
        Some("data") => value && o.get("mimeType").is_some_and(Value::is_string),
        Some("url") => value && opt_str(o, "mimeType"),
        Some("file") => value && opt_str(o, "mimeType") && opt_str(o, "provider"),
        _ => false,
    }
}

/// One content part (`ContentPartSchema`).
pub fn content_part(v: &Value) -> bool {
    let Some(o) = v.as_object() else {
        return false;
    };
    let meta_ok = !matches!(o.get("metadata"), Some(Value::Null));
    let id_ok = opt_str(o, "id");
    match o.get("type").and_then(Value::as_str) {
        Some("text") => o.get("text").is_some_and(Value::is_string) && id_ok && meta_ok,
        Some("image" | "audio" | "video" | "document") => {
            o.get("source").is_some_and(part_source) && id_ok && meta_ok
        }
        _ => false,
    }
}

/// A tool result or tool message body: a string or content parts.
pub fn tool_content(v: &Value) -> bool {
    match v {
        Value::String(_) => true,
        Value::Array(parts) => parts.iter().all(content_part),
        _ => false,
    }
}

/// `usage` on RUN_FINISHED / RUN_ERROR (an array of `TokenUsage`). Only the
/// described keys may appear: anything else would be stripped with a warning.
pub fn token_usage(v: &Value) -> bool {
    const COUNTS: [&str; 6] = [
        "inputTokens",
        "outputTokens",
        "totalTokens",
        "reasoningTokens",
        "cachedInputTokens",
        "cacheWriteInputTokens",
    ];
    let Some(entries) = v.as_array() else {
        return false;
    };
    entries.iter().all(|e| {
        e.as_object().is_some_and(|o| {
            o.iter().all(|(k, v)| match k.as_str() {
                "provider" | "model" => v.is_string(),
                k if COUNTS.contains(&k) => non_negative_safe_int(v),
                _ => false,
            })
        })
    })
}

/// Whether an extra field may be written back onto an event: the fields the
/// schemas describe are checked (a bad value is fatal in the client), unknown
/// ones pass (the client strips them with a warning, which keeps a
/// same-dialect round trip exact).
pub fn extra_field_ok(key: &str, v: &Value) -> bool {
    match key {
        k if babelgate_core::event::is_note(k) => false,
        "type" | "timestamp" => false,
        "rawEvent" | "result" | "payload" => !v.is_null(),
        "metadata" | "responseSchema" => v.is_object(),
        "subagentRunId"
        | "parentSubagentRunId"
        | "parentToolCallId"
        | "parentMessageId"
        | "protocolVersion"
        | "expiresAt"
        | "encryptedValue"
        | "name"
        | "description" => v.is_string(),
        "role" => v.is_string(),
        "usage" => token_usage(v),
        // A union member the client does not know is stripped (with a
        // warning); anything but an object with a type is fatal.
        "outcome" => v.get("type").is_some_and(Value::is_string),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_and_patches() {
        assert!(json_pointer("") && json_pointer("/a/~0b/~1c/-"));
        assert!(!json_pointer("a") && !json_pointer("/a~2") && !json_pointer("/~"));
        assert!(json_patch(&json!([])));
        assert!(json_patch(&json!([
            {"op":"add","path":"/items/-","value":"b"},
            {"op":"remove","path":"/x","value":1},
            {"op":"move","from":"","path":"/y"}
        ])));
        assert!(!json_patch(&json!({"op":"add"})));
        assert!(!json_patch(&json!([{"op":"add","path":"/a"}])));
        assert!(!json_patch(&json!([{"op":"copy","path":"/a"}])));
        assert!(!json_patch(&json!([{"op":"nope","path":"/a"}])));
    }

    #[test]
    fn content_parts_and_usage() {
        assert!(tool_content(&json!("x")));
        assert!(tool_content(&json!([{"type":"text","text":"a"},
            {"type":"image","source":{"type":"url","value":"https://x"}},
            {"type":"document","source":{"type":"data","value":"AA==","mimeType":"application/pdf"}},
            {"type":"audio","source":{"type":"file","value":"file-1","provider":"openai"}}])));
        assert!(!tool_content(&json!({"a":1})));
        assert!(!tool_content(
            &json!([{"type":"image","source":{"type":"data","value":"x"}}])
        ));
        assert!(!tool_content(
            &json!([{"type":"binary","mimeType":"image/png"}])
        ));
        assert!(token_usage(&json!([{"provider":"openai","inputTokens":3}])));
        assert!(!token_usage(&json!([{"inputTokens":-1}])));
        assert!(!token_usage(&json!({"inputTokens":1})));
        assert!(!token_usage(&json!([{"prompt_tokens":1}])));
    }

    #[test]
    fn safe_ints_and_extras() {
        assert!(safe_int(&json!(1_700_000_000_000_i64)));
        assert!(!safe_int(&json!(1.5)));
        assert!(!safe_int(&json!(9_007_199_254_740_992_i64)));
        assert!(!extra_field_ok("rawEvent", &Value::Null));
        assert!(!extra_field_ok("metadata", &json!("x")));
        assert!(extra_field_ok("futureField", &Value::Null));
        assert!(!extra_field_ok(NOTE_CHUNK, &json!({})));
        assert!(extra_field_ok("outcome", &json!({"type": "later"})));
        assert!(!extra_field_ok("outcome", &json!("later")));
    }
}
