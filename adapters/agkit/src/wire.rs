//! The AG-Kit legacy send-message wire format: event `type` names and the
//! small helpers that build and read frames.
//!
//! Native types are the ones PyPI `cloudbase-agent-server` 0.1.1 declares
//! (`SendMessageEvent`) and npm `@cloudbase/agent-ui-web` 0.0.24 acts on.
//! Extension types are ours: the real client acts only on the native types it
//! compares `data.type` against and ignores every other frame, so the encoder
//! writes what AG-Kit cannot say as frames of these clearly named types rather
//! than drop it, and the decoder reads them back.

use babelgate_core::fast::{Kind, Row, Slot, Table};
use babelgate_core::Dialect;
use serde_json::{Map, Value};

// ---- native ------------------------------------------------------------
pub const TEXT: &str = "text";
pub const TOOL_CALL_START: &str = "tool-call-start";
pub const TOOL_CALL_ARGS: &str = "tool-call-args";
pub const TOOL_CALL_END: &str = "tool-call-end";
pub const TOOL_RESULT: &str = "tool-result";
pub const INTERRUPT: &str = "interrupt";
/// Declared by the server (`ErrorEvent`); the 0.0.24 client ignores it.
pub const ERROR: &str = "error";

// ---- extensions (babelgate) ---------------------------------------------
pub const REASONING: &str = "reasoning";
pub const REASONING_PHASE_START: &str = "reasoning-phase-start";
pub const REASONING_PHASE_END: &str = "reasoning-phase-end";
pub const REASONING_ENCRYPTED: &str = "reasoning-encrypted";
pub const STEP_STARTED: &str = "step-started";
pub const STEP_FINISHED: &str = "step-finished";
pub const STATE_SNAPSHOT: &str = "state-snapshot";
pub const STATE_DELTA: &str = "state-delta";
pub const MESSAGES_SNAPSHOT: &str = "messages-snapshot";
pub const ACTIVITY_SNAPSHOT: &str = "activity-snapshot";
pub const ACTIVITY_DELTA: &str = "activity-delta";
pub const SOURCE: &str = "source";
pub const FILE: &str = "file";
pub const DATA: &str = "data";
pub const CUSTOM: &str = "custom";
pub const MESSAGE_METADATA: &str = "message-metadata";
pub const COLLAB_START: &str = "collab-start";
pub const COLLAB_CONTENT: &str = "collab-content";
pub const COLLAB_END: &str = "collab-end";
pub const SUBAGENT_STARTED: &str = "subagent-started";
pub const SUBAGENT_FINISHED: &str = "subagent-finished";
pub const SUBAGENT_ERROR: &str = "subagent-error";
pub const RAW: &str = "raw";
/// An event another dialect's decoder did not recognise: `{dialect, event}`.
pub const UNKNOWN: &str = "unknown";

/// The frames that make most of a stream, read and written by the core's
/// fast path (`babelgate_core::fast`): each key and the core field it fills,
/// then each type with exactly its keys. Text and reasoning carry no id: the
/// decoder gives them their message's.
#[rustfmt::skip]
pub static FAST: Table<6> = {
    const K: &[(&str, Slot); 6] = &[
        ("type", Slot::Type), ("content", Slot::Delta), ("toolCallId", Slot::ToolCallId),
        ("toolCallName", Slot::ToolName), ("delta", Slot::Delta), ("result", Slot::Content),
    ];
    const ROWS: [Row; 6] = [
        Row::new(K, TEXT, Kind::TextDelta, &["content"]),
        Row::new(K, REASONING, Kind::ReasoningDelta, &["content"]),
        Row::new(K, TOOL_CALL_ARGS, Kind::ToolCallArgs, &["toolCallId", "delta"]),
        Row::new(K, TOOL_CALL_START, Kind::ToolCallStart, &["toolCallId", "toolCallName"]),
        Row::new(K, TOOL_CALL_END, Kind::ToolCallEnd, &["toolCallId"]),
        Row::new(K, TOOL_RESULT, Kind::ToolCallResult, &["toolCallId", "result"]),
    ];
    Table { dialect: Dialect::AgKit, keys: *K, rows: &ROWS, wrap: None }
};

/// What the client's own tool runner writes when a tool throws
/// (`Tool call failed with info: ...`); used for core tool errors.
pub const TOOL_FAILED_PREFIX: &str = "Tool call failed with info: ";
/// The result written for a call the human refused.
pub const TOOL_DENIED_RESULT: &str = "Tool call was denied by the user.";

/// A frame object with `type` first, as the Python server orders its fields.
pub fn frame(ty: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), Value::String(ty.into()));
    m
}

/// Inserts `value` under `key` when present.
pub fn put_opt<T: Into<Value>>(m: &mut Map<String, Value>, key: &str, value: Option<T>) {
    if let Some(v) = value {
        m.insert(key.into(), v.into());
    }
}

/// A field is there but has the wrong JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongType;

/// Reads fields out of a frame object; what is left at the end is the
/// frame's unmodelled fields (its extras).
pub struct Fields {
    obj: Map<String, Value>,
}

impl Fields {
    pub fn new(mut obj: Map<String, Value>) -> Self {
        obj.remove("type");
        Fields { obj }
    }

    /// A required string.
    pub fn string(&mut self, key: &str) -> Option<String> {
        match self.obj.get(key) {
            Some(Value::String(_)) => match self.obj.remove(key) {
                Some(Value::String(s)) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }

    /// An optional string: absent or null is `Ok(None)`.
    pub fn opt_string(&mut self, key: &str) -> Result<Option<String>, WrongType> {
        match self.obj.get(key) {
            None | Some(Value::Null) => {
                self.obj.remove(key);
                Ok(None)
            }
            Some(Value::String(_)) => Ok(self.string(key)),
            Some(_) => Err(WrongType),
        }
    }

    /// An optional bool: absent or null is `Ok(None)`.
    pub fn opt_bool(&mut self, key: &str) -> Result<Option<bool>, WrongType> {
        match self.obj.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(_) => Err(WrongType),
        }
    }

    /// Any JSON value, null included, if the field is there.
    pub fn value(&mut self, key: &str) -> Option<Value> {
        self.obj.remove(key)
    }

    pub fn is_empty(&self) -> bool {
        self.obj.is_empty()
    }

    /// The fields nobody read.
    pub fn extra(self) -> Map<String, Value> {
        self.obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_take_what_they_know_and_leave_the_rest() {
        let Value::Object(obj) = json!({"type":"x","a":"s","b":null,"c":true,"d":[1],"e":5}) else {
            unreachable!()
        };
        let mut f = Fields::new(obj);
        assert_eq!(f.string("a").as_deref(), Some("s"));
        assert_eq!(f.string("e"), None, "a number is not a string");
        assert_eq!(f.opt_string("b"), Ok(None));
        assert_eq!(f.opt_bool("c"), Ok(Some(true)));
        assert_eq!(f.value("d"), Some(json!([1])));
        assert_eq!(f.opt_string("e"), Err(WrongType));
        assert_eq!(Value::Object(f.extra()), json!({"e":5}));
    }

    #[test]
    fn frames_start_with_their_type() {
        let mut m = frame(TEXT);
        m.insert("content".into(), json!("hi"));
        put_opt(&mut m, "code", None::<String>);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"type":"text","content":"hi"}"#
        );
    }
}
