//! The neutral event model.
//!
//! One [`Event`] is one thing an agent said, whatever its dialect. The variants
//! are the union of what AG-UI, HAI, Vercel UI message stream v1 and AG-Kit can
//! express; anything a decoder does not understand travels as
//! [`EventKind::Unknown`] with its raw JSON, so nothing is dropped silently.
//!
//! Invariants decoders uphold (so encoders can rely on them):
//! - a `TextDelta`/`TextEnd` follows a `TextStart` with the same id, likewise
//!   reasoning and tool-call argument deltas: decoders of shorthand dialects
//!   (AG-UI CHUNK events, AG-Kit `text`, HAI string deltas) synthesize the starts;
//! - interrupts travel inside `RunFinished` (its [`Outcome`]), the way AG-UI 1.0
//!   ends a run that waits for a human.
//!
//! Encoders still treat their input defensively (see [`crate::track`]): a stream
//! that ends early or skips a start must still come out well formed.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::dialect::Dialect;

/// Fields a decoder read but the model has no slot for (AG-UI `rawEvent`,
/// `metadata`, `subagentRunId`, HAI `blockId`/`style`, Vercel `providerMetadata`...),
/// keyed by their wire name in the source dialect. An encoder of the same
/// dialect writes them back; others may ignore them (see docs/mapping.md).
pub type Extra = Map<String, Value>;

/// The first character of a private note's key in [`Event::extra`]: the
/// wire structure a decoder keeps for the encoder of its own dialect where
/// no core field means the same for every dialect and the frame does not
/// stand as received (AG-UI's chunk lanes, HAI's business messages,
/// Vercel's two forms of one event; see docs/design.md). No dialect here starts a field name with it, and no
/// encoder writes a note to its wire. What any dialect's encoder may use
/// is a typed field (as [`Event::synthesized`]).
pub const NOTE_PREFIX: char = '$';

/// Whether an [`Extra`] key is a private note rather than a wire field.
pub fn is_note(key: &str) -> bool {
    key.starts_with(NOTE_PREFIX)
}

/// One neutral event plus what travels beside every event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    #[serde(flatten)]
    pub kind: EventKind,
    /// Milliseconds since the Unix epoch, when the source said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// The dialect that produced `extra` (and an `Unknown` payload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Dialect>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Extra,
    /// The decoder put its frame in other terms (a deprecated form read as
    /// the current one), so the frame cannot stand for this event on a
    /// same-dialect route: the encoder's mapping is written instead (see
    /// `Translator::same_dialect`). Never sent, never logged.
    #[serde(skip)]
    pub restated: bool,
    /// No frame of the source stood for this event: its decoder made it up,
    /// from what the wire implied (a start before a bare end or a
    /// complete-input frame, the end of arguments an input error cut) or
    /// from a field of another frame (message metadata inside a run's
    /// start). An encoder whose wire implies the event the same way writes
    /// nothing for it and only keeps its state; a resumed stream needs it
    /// as much as a live one, so the journal keeps it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub synthesized: bool,
}

impl Event {
    pub fn new(kind: EventKind) -> Self {
        Event {
            kind,
            timestamp: None,
            origin: None,
            extra: Map::new(),
            restated: false,
            synthesized: false,
        }
    }

    pub fn with_timestamp(mut self, ts: Option<i64>) -> Self {
        self.timestamp = ts;
        self
    }

    pub fn with_origin(mut self, origin: Dialect) -> Self {
        self.origin = Some(origin);
        self
    }

    pub fn with_extra(mut self, extra: Extra) -> Self {
        self.extra = extra;
        self
    }

    /// Marks the event as made up by its decoder (see
    /// [`Event::synthesized`]).
    pub fn mark_synthesized(mut self) -> Self {
        self.synthesized = true;
        self
    }

    /// Whether `dialect`'s decoder made this event up: what its own
    /// encoder, whose wire implies it, does not write.
    pub fn synthesized_by(&self, dialect: Dialect) -> bool {
        self.synthesized && self.origin == Some(dialect)
    }

    /// A private note (see [`NOTE_PREFIX`]) the decoder of `dialect` left on
    /// this event.
    pub fn note(&self, dialect: Dialect, key: &str) -> Option<&Value> {
        debug_assert!(is_note(key), "{key} is not a note key");
        self.extra_from(dialect)?.get(key)
    }

    /// Extra fields, but only when they came from `dialect` (an encoder only
    /// writes back fields whose meaning it knows).
    pub fn extra_from(&self, dialect: Dialect) -> Option<&Extra> {
        (self.origin == Some(dialect) && !self.extra.is_empty()).then_some(&self.extra)
    }
}

impl From<EventKind> for Event {
    fn from(kind: EventKind) -> Self {
        Event::new(kind)
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    Assistant,
    User,
    System,
    Developer,
    Tool,
    Reasoning,
    Activity,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Assistant => "assistant",
            Role::User => "user",
            Role::System => "system",
            Role::Developer => "developer",
            Role::Tool => "tool",
            Role::Reasoning => "reasoning",
            Role::Activity => "activity",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "assistant" => Role::Assistant,
            "user" => Role::User,
            "system" => Role::System,
            "developer" => Role::Developer,
            "tool" => Role::Tool,
            "reasoning" => Role::Reasoning,
            "activity" => Role::Activity,
            _ => return None,
        })
    }
}

/// A question the run stopped to ask a human (AG-UI interrupt, AG-Kit
/// `interrupt`, Vercel `tool-approval-request`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interrupt {
    pub id: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Set when the interrupt asks about one tool call (approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// What the human is shown or asked to fill in (AG-Kit `payload`,
    /// AG-UI `responseSchema`), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Extra,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Outcome {
    /// The source did not say (most dialects never do).
    #[default]
    Unspecified,
    Success {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pending_tool_call_ids: Vec<String>,
    },
    /// The run waits for a human; the next request resumes it.
    Interrupt { interrupts: Vec<Interrupt> },
    /// Stopped on purpose (Vercel `abort`, AG-UI `cancelled`).
    Cancelled {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// What kind of source a `Source` event cites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Url,
    Document,
}

/// Everything an agent can say, across the four dialects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    // ---- run lifecycle -------------------------------------------------
    RunStarted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_run_id: Option<String>,
        /// The assistant message this run writes (Vercel `start.messageId`,
        /// HAI `RUN_STARTED.messageId`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// AG-UI `RUN_STARTED.input`, verbatim.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
    },
    RunFinished {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default)]
        outcome: Outcome,
        /// Vercel finishReason (stop, length, content-filter, tool-calls, error,
        /// interrupted, other) when the source gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finish_reason: Option<String>,
        /// Token usage as the source wrote it (AG-UI `usage`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Value>,
    },
    RunError {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    StepStarted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    StepFinished {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },

    // ---- text ----------------------------------------------------------
    TextStart {
        message_id: String,
        #[serde(default)]
        role: Role,
        /// Display name of the author (AG-UI `name`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    TextDelta {
        message_id: String,
        delta: String,
    },
    TextEnd {
        message_id: String,
    },

    // ---- reasoning -----------------------------------------------------
    /// Opens a reasoning phase that may hold several reasoning messages
    /// (AG-UI `REASONING_START`). Dialects without phases skip it.
    ReasoningPhaseStart {
        message_id: String,
    },
    ReasoningPhaseEnd {
        message_id: String,
    },
    ReasoningStart {
        message_id: String,
    },
    ReasoningDelta {
        message_id: String,
        delta: String,
    },
    ReasoningEnd {
        message_id: String,
    },
    /// An opaque provider artefact (AG-UI `REASONING_ENCRYPTED_VALUE`).
    ReasoningEncrypted {
        subtype: String,
        entity_id: String,
        value: String,
    },

    // ---- tool calls ----------------------------------------------------
    ToolCallStart {
        tool_call_id: String,
        tool_name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    },
    /// A fragment of the JSON argument text.
    ToolCallArgs {
        tool_call_id: String,
        delta: String,
    },
    ToolCallEnd {
        tool_call_id: String,
    },
    /// What a tool returned: a string or AG-UI content parts, or any JSON a
    /// Vercel `output` holds.
    ToolCallResult {
        tool_call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        content: Value,
    },
    /// The tool failed (Vercel `tool-output-error`, or `tool-input-error` when
    /// `input_invalid`).
    ToolCallError {
        tool_call_id: String,
        error: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        input_invalid: bool,
    },
    /// The human refused the call (Vercel `tool-output-denied`).
    ToolCallDenied {
        tool_call_id: String,
    },

    // ---- state and snapshots -------------------------------------------
    StateSnapshot {
        snapshot: Value,
    },
    /// An RFC 6902 patch (a JSON array of operations).
    StateDelta {
        patch: Value,
    },
    /// The whole conversation, as AG-UI `MESSAGES_SNAPSHOT` / HAI
    /// `MESSAGE_SNAPSHOT` carry it.
    MessagesSnapshot {
        messages: Vec<crate::request::Message>,
    },
    ActivitySnapshot {
        message_id: String,
        activity_type: String,
        content: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replace: Option<bool>,
    },
    ActivityDelta {
        message_id: String,
        activity_type: String,
        patch: Value,
    },

    // ---- content beside text -------------------------------------------
    Source {
        source_kind: SourceKind,
        source_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
    File {
        url: String,
        media_type: String,
    },
    /// Structured content that belongs to the message being written: a HAI
    /// business-data widget (`{type, data}` output), a Vercel `data-<name>` part.
    Data {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The message it belongs to, when the source said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        data: Value,
        /// Shown live but not kept in the message (Vercel `transient`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        transient: bool,
    },
    /// An application event outside the message (AG-UI/HAI `CUSTOM`).
    Custom {
        name: String,
        value: Value,
    },
    /// Metadata about the message being written (Vercel `message-metadata`,
    /// `start`/`finish` `messageMetadata`).
    MessageMetadata {
        metadata: Value,
    },

    // ---- multi-agent ---------------------------------------------------
    /// HAI `AGENT_COLLABORATIVE_MESSAGE_START`.
    CollabStart {
        message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<String>,
    },
    /// HAI `AGENT_COLLABORATIVE_MESSAGE_CONTENT` (its `delta`, e.g. `{task:{id,name}}`).
    CollabContent {
        message_id: String,
        delta: Value,
    },
    CollabEnd {
        message_id: String,
    },
    SubagentStarted {
        subagent_run_id: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    SubagentFinished {
        subagent_run_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Value>,
    },
    SubagentError {
        subagent_run_id: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },

    // ---- passthrough ---------------------------------------------------
    /// An explicit raw provider event (AG-UI/HAI `RAW`).
    Raw {
        event: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    /// Something the decoder did not recognise, kept whole. `Event::origin`
    /// names the dialect it came from.
    Unknown {
        raw: Value,
    },
}

/// The kinds most often built bare (a decoder's synthesized start or end,
/// the shape stage's repairs, the demo agent, tests): only what names them
/// is set.
impl EventKind {
    pub fn run_started() -> Self {
        EventKind::RunStarted {
            thread_id: None,
            run_id: None,
            parent_run_id: None,
            message_id: None,
            input: None,
        }
    }

    pub fn run_finished(outcome: Outcome) -> Self {
        EventKind::RunFinished {
            thread_id: None,
            run_id: None,
            message_id: None,
            result: None,
            outcome,
            finish_reason: None,
            usage: None,
        }
    }

    /// An assistant message's start.
    pub fn text_start(message_id: impl Into<String>) -> Self {
        EventKind::TextStart {
            message_id: message_id.into(),
            role: Role::Assistant,
            name: None,
        }
    }

    pub fn text_delta(message_id: impl Into<String>, delta: impl Into<String>) -> Self {
        EventKind::TextDelta {
            message_id: message_id.into(),
            delta: delta.into(),
        }
    }

    pub fn text_end(message_id: impl Into<String>) -> Self {
        EventKind::TextEnd {
            message_id: message_id.into(),
        }
    }
}

impl EventKind {
    /// Every kind's [`name`](Self::name), in declaration order (docs and tests
    /// check that each dialect documents all of them).
    pub const NAMES: [&'static str; 38] = [
        "run_started",
        "run_finished",
        "run_error",
        "step_started",
        "step_finished",
        "text_start",
        "text_delta",
        "text_end",
        "reasoning_phase_start",
        "reasoning_phase_end",
        "reasoning_start",
        "reasoning_delta",
        "reasoning_end",
        "reasoning_encrypted",
        "tool_call_start",
        "tool_call_args",
        "tool_call_end",
        "tool_call_result",
        "tool_call_error",
        "tool_call_denied",
        "state_snapshot",
        "state_delta",
        "messages_snapshot",
        "activity_snapshot",
        "activity_delta",
        "source",
        "file",
        "data",
        "custom",
        "message_metadata",
        "collab_start",
        "collab_content",
        "collab_end",
        "subagent_started",
        "subagent_finished",
        "subagent_error",
        "raw",
        "unknown",
    ];

    /// A short stable name, for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::RunStarted { .. } => "run_started",
            EventKind::RunFinished { .. } => "run_finished",
            EventKind::RunError { .. } => "run_error",
            EventKind::StepStarted { .. } => "step_started",
            EventKind::StepFinished { .. } => "step_finished",
            EventKind::TextStart { .. } => "text_start",
            EventKind::TextDelta { .. } => "text_delta",
            EventKind::TextEnd { .. } => "text_end",
            EventKind::ReasoningPhaseStart { .. } => "reasoning_phase_start",
            EventKind::ReasoningPhaseEnd { .. } => "reasoning_phase_end",
            EventKind::ReasoningStart { .. } => "reasoning_start",
            EventKind::ReasoningDelta { .. } => "reasoning_delta",
            EventKind::ReasoningEnd { .. } => "reasoning_end",
            EventKind::ReasoningEncrypted { .. } => "reasoning_encrypted",
            EventKind::ToolCallStart { .. } => "tool_call_start",
            EventKind::ToolCallArgs { .. } => "tool_call_args",
            EventKind::ToolCallEnd { .. } => "tool_call_end",
            EventKind::ToolCallResult { .. } => "tool_call_result",
            EventKind::ToolCallError { .. } => "tool_call_error",
            EventKind::ToolCallDenied { .. } => "tool_call_denied",
            EventKind::StateSnapshot { .. } => "state_snapshot",
            EventKind::StateDelta { .. } => "state_delta",
            EventKind::MessagesSnapshot { .. } => "messages_snapshot",
            EventKind::ActivitySnapshot { .. } => "activity_snapshot",
            EventKind::ActivityDelta { .. } => "activity_delta",
            EventKind::Source { .. } => "source",
            EventKind::File { .. } => "file",
            EventKind::Data { .. } => "data",
            EventKind::Custom { .. } => "custom",
            EventKind::MessageMetadata { .. } => "message_metadata",
            EventKind::CollabStart { .. } => "collab_start",
            EventKind::CollabContent { .. } => "collab_content",
            EventKind::CollabEnd { .. } => "collab_end",
            EventKind::SubagentStarted { .. } => "subagent_started",
            EventKind::SubagentFinished { .. } => "subagent_finished",
            EventKind::SubagentError { .. } => "subagent_error",
            EventKind::Raw { .. } => "raw",
            EventKind::Unknown { .. } => "unknown",
        }
    }

    /// Whether this event ends the run (nothing but a new run may follow).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            EventKind::RunFinished { .. } | EventKind::RunError { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_serializes_flat_and_back() {
        let ev = Event::new(EventKind::TextDelta {
            message_id: "m1".into(),
            delta: "hi".into(),
        })
        .with_timestamp(Some(5));
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            v,
            json!({"kind":"text_delta","message_id":"m1","delta":"hi","timestamp":5})
        );
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, ev);
    }

    #[test]
    fn names_are_unique_and_match_serde_tags() {
        let mut seen = std::collections::HashSet::new();
        for n in EventKind::NAMES {
            assert!(seen.insert(n), "duplicate {n}");
        }
        // The serde tag is the same name, so logs, docs and JSON agree.
        let k = EventKind::ToolCallDenied {
            tool_call_id: "t".into(),
        };
        assert_eq!(serde_json::to_value(&k).unwrap()["kind"], k.name());
        assert!(EventKind::NAMES.contains(&k.name()));
    }

    #[test]
    fn extra_only_for_its_origin() {
        let mut extra = Extra::new();
        extra.insert("blockId".into(), json!("b1"));
        let ev = Event::new(EventKind::TextEnd {
            message_id: "m".into(),
        })
        .with_origin(Dialect::Hai)
        .with_extra(extra);
        assert!(ev.extra_from(Dialect::Hai).is_some());
        assert!(ev.extra_from(Dialect::AgUi).is_none());
    }
}
