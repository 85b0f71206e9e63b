//! The HAI wire format: event type names, the business-data output types, and
//! the private `extra` keys this adapter uses to make HAI -> HAI an identity.
//!
//! HAI (ZTE's Human Agent Interaction Protocol, seed 004) is AG-UI with the
//! `TEXT_MESSAGE_*` events replaced by `BUSINESS_DATA_*`, plus
//! `AGENT_COLLABORATIVE_MESSAGE_*` and a singular `MESSAGE_SNAPSHOT`. Events the
//! spec lists without fields take their AG-UI 1.0 shapes. Framing is
//! `data: {json}\n\n`, with no end marker besides `RUN_FINISHED`/`RUN_ERROR`.

use babelgate_core::fast::{Kind, Row, Slot, Table, Wrap};
use babelgate_core::Dialect;
use serde_json::{Map, Value};

// ---- event types ------------------------------------------------------------

pub const RUN_STARTED: &str = "RUN_STARTED";
pub const RUN_FINISHED: &str = "RUN_FINISHED";
pub const RUN_ERROR: &str = "RUN_ERROR";
pub const STEP_STARTED: &str = "STEP_STARTED";
pub const STEP_FINISHED: &str = "STEP_FINISHED";
pub const BUSINESS_DATA_START: &str = "BUSINESS_DATA_START";
pub const BUSINESS_DATA_CONTENT: &str = "BUSINESS_DATA_CONTENT";
pub const BUSINESS_DATA_END: &str = "BUSINESS_DATA_END";
pub const COLLAB_START: &str = "AGENT_COLLABORATIVE_MESSAGE_START";
pub const COLLAB_CONTENT: &str = "AGENT_COLLABORATIVE_MESSAGE_CONTENT";
pub const COLLAB_END: &str = "AGENT_COLLABORATIVE_MESSAGE_END";
pub const TOOL_CALL_START: &str = "TOOL_CALL_START";
pub const TOOL_CALL_ARGS: &str = "TOOL_CALL_ARGS";
pub const TOOL_CALL_END: &str = "TOOL_CALL_END";
pub const TOOL_CALL_RESULT: &str = "TOOL_CALL_RESULT";
pub const STATE_SNAPSHOT: &str = "STATE_SNAPSHOT";
pub const STATE_DELTA: &str = "STATE_DELTA";
/// HAI's reconnect snapshot (singular, unlike AG-UI's `MESSAGES_SNAPSHOT`).
pub const MESSAGE_SNAPSHOT: &str = "MESSAGE_SNAPSHOT";
pub const RAW: &str = "RAW";
pub const CUSTOM: &str = "CUSTOM";

/// AG-UI spellings a HAI agent may still send; read, never written.
pub mod agui {
    pub const TEXT_MESSAGE_START: &str = "TEXT_MESSAGE_START";
    pub const TEXT_MESSAGE_CONTENT: &str = "TEXT_MESSAGE_CONTENT";
    pub const TEXT_MESSAGE_END: &str = "TEXT_MESSAGE_END";
    pub const TEXT_MESSAGE_CHUNK: &str = "TEXT_MESSAGE_CHUNK";
    pub const TOOL_CALL_CHUNK: &str = "TOOL_CALL_CHUNK";
    pub const MESSAGES_SNAPSHOT: &str = "MESSAGES_SNAPSHOT";
    pub const REASONING_START: &str = "REASONING_START";
    pub const REASONING_END: &str = "REASONING_END";
    pub const REASONING_MESSAGE_START: &str = "REASONING_MESSAGE_START";
    pub const REASONING_MESSAGE_CONTENT: &str = "REASONING_MESSAGE_CONTENT";
    pub const REASONING_MESSAGE_END: &str = "REASONING_MESSAGE_END";
}

/// Every type the decoder reads (`HaiDecoder::decode_object`); others it
/// keeps whole, as `Unknown`.
const KNOWN: [&str; 31] = [
    RUN_STARTED,
    RUN_FINISHED,
    RUN_ERROR,
    STEP_STARTED,
    STEP_FINISHED,
    BUSINESS_DATA_START,
    BUSINESS_DATA_CONTENT,
    BUSINESS_DATA_END,
    COLLAB_START,
    COLLAB_CONTENT,
    COLLAB_END,
    TOOL_CALL_START,
    TOOL_CALL_ARGS,
    TOOL_CALL_END,
    TOOL_CALL_RESULT,
    STATE_SNAPSHOT,
    STATE_DELTA,
    MESSAGE_SNAPSHOT,
    agui::MESSAGES_SNAPSHOT,
    RAW,
    CUSTOM,
    agui::TEXT_MESSAGE_START,
    agui::TEXT_MESSAGE_CONTENT,
    agui::TEXT_MESSAGE_END,
    agui::TEXT_MESSAGE_CHUNK,
    agui::TOOL_CALL_CHUNK,
    agui::REASONING_START,
    agui::REASONING_END,
    agui::REASONING_MESSAGE_START,
    agui::REASONING_MESSAGE_CONTENT,
    agui::REASONING_MESSAGE_END,
];

/// Whether HAI's decoder reads `ty`: one it keeps unknown is not, so the
/// encoder writes a HAI-origin unknown event of a known type (an AG-Kit
/// `unknown` envelope may claim anything is HAI's) as RAW, never as that
/// type without its fields.
pub fn is_known_type(ty: &str) -> bool {
    KNOWN.contains(&ty)
}

// ---- business-data outputs --------------------------------------------------

/// `{output:{type:"text", content}}`
pub const OUTPUT_TEXT: &str = "text";
/// `{output:{type:"thinking", data:{content, elapsed, thinking, collapse}}}`
pub const OUTPUT_THINKING: &str = "thinking";

// ---- private extra keys -----------------------------------------------------
//
// Keys starting with `$` are never HAI wire names: they are notes from the HAI
// decoder to the HAI encoder about structure the core model has no slot for.
// Other encoders ignore them (they only read extras of their own origin).

/// The `BUSINESS_DATA_START` frame (without `type`) that a reasoning or data
/// event opens, when the HAI message started with thinking or a widget.
pub const X_START: &str = "$start";
/// The HAI message id of a business message that had no `BUSINESS_DATA_START`
/// (a bare `BUSINESS_DATA_CONTENT`), on the event that opens it.
pub const X_IMPLICIT: &str = "$implicit";
/// The `BUSINESS_DATA_END` frame (without `type`) on a `ReasoningEnd` that
/// closes a HAI message which ended while thinking.
pub const X_END: &str = "$end";
/// On a widget `Data`: the output's fields sat beside `type` instead of under
/// `data`, so `data` holds them and they go back inline.
pub const X_INLINE: &str = "$inline";
/// On content events: the `delta` as it came, with the streamed payload cut
/// out (`output.content` for text, `output.data.content` for thinking,
/// `output.data` for widgets). A JSON string (`""`) means the delta was a
/// plain string. The encoder fills the payload back in. Absent on text in
/// the standard form `{"output":{"type":"text","content"}}`, which the
/// encoder writes without a template.
pub const X_DELTA: &str = "delta";

/// `Data.name` for a business-data delta that is not an `{output}` object
/// (`data` is the delta; no template, see [`X_DELTA`]).
pub const RAW_DELTA_NAME: &str = "hai-delta";

/// A frame object with its `type` first, then `fields`.
pub fn frame(ty: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), Value::String(ty.into()));
    m
}

/// Whether `key` is one of this adapter's private notes rather than a wire
/// field.
pub fn is_private(key: &str) -> bool {
    babelgate_core::event::is_note(key)
}

// ---- the fast path ------------------------------------------------------------

/// Most of a HAI stream: business-data text, tool-call arguments, and the
/// starts and ends around them, read by the core's fast path
/// (`babelgate_core::fast`): each key and the core field it fills, then each
/// type with its keys (`?`: optional). A text delta is a plain string or
/// HAI's standard form, `{"output":{"type":"text","content":"..."}}`, as
/// producers write it (any other spacing takes the general path); a
/// result's `role` has no core field and stays in extra.
#[rustfmt::skip]
pub static FAST: Table<9> = {
    const K: &[(&str, Slot); 9] = &[
        ("type", Slot::Type), ("messageId", Slot::MessageId), ("delta", Slot::Delta),
        ("timestamp", Slot::Timestamp), ("toolCallId", Slot::ToolCallId),
        ("toolCallName", Slot::ToolName), ("parentMessageId", Slot::ParentMessageId),
        ("role", Slot::Role), ("content", Slot::Content),
    ];
    const ROWS: [Row; 7] = [
        Row::new(K, BUSINESS_DATA_CONTENT, Kind::TextDelta, &["messageId", "delta", "?timestamp"]).wrapping(),
        Row::new(K, TOOL_CALL_ARGS, Kind::ToolCallArgs, &["toolCallId", "delta", "?timestamp"]),
        Row::new(K, BUSINESS_DATA_START, Kind::TextStart, &["messageId", "?role", "?timestamp"]),
        Row::new(K, BUSINESS_DATA_END, Kind::TextEnd, &["messageId", "?timestamp"]),
        Row::new(K, TOOL_CALL_START, Kind::ToolCallStart, &["toolCallId", "toolCallName", "?parentMessageId", "?timestamp"]),
        Row::new(K, TOOL_CALL_END, Kind::ToolCallEnd, &["toolCallId", "?timestamp"]),
        Row::new(K, TOOL_CALL_RESULT, Kind::ToolCallResult, &["?messageId", "toolCallId", "content", "?role", "?timestamp"]),
    ];
    let wrap = Wrap { open: r#"{"output":{"type":"text","content":"#, close: "}}" };
    Table { dialect: Dialect::Hai, keys: *K, rows: &ROWS, wrap: Some(wrap) }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_keys_are_not_wire_names() {
        for k in [X_START, X_IMPLICIT, X_END, X_INLINE] {
            assert!(is_private(k), "{k}");
        }
        // the delta template travels under its wire name
        assert!(!is_private(X_DELTA));
        assert_eq!(frame(RUN_STARTED)["type"], RUN_STARTED);
    }
}
