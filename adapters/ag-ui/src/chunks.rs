//! The CHUNK shorthand, exactly as `@ag-ui/client` expands it
//! (`transformChunks`): one "lane" per producer (`subagentRunId`, absent for
//! the parent agent) holds at most one stream assembled from chunks; a chunk
//! without an id continues it, a chunk with another id closes it and opens a
//! new one, and most other events close it (see [`lane_effect`]). The
//! decoder uses this to turn chunks into start/delta/end; the encoder uses the
//! same rules to know what the client will make of what it writes.

use serde_json::{Map, Value};

use crate::wire::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    Text,
    Tool,
    Reasoning,
}

impl ChunkKind {
    pub fn of_chunk_type(ty: &str) -> Option<ChunkKind> {
        match ty {
            TEXT_MESSAGE_CHUNK => Some(ChunkKind::Text),
            TOOL_CALL_CHUNK => Some(ChunkKind::Tool),
            REASONING_MESSAGE_CHUNK => Some(ChunkKind::Reasoning),
            _ => None,
        }
    }

    fn id_key(self) -> &'static str {
        match self {
            ChunkKind::Tool => "toolCallId",
            _ => "messageId",
        }
    }

    fn chunk_type(self) -> &'static str {
        match self {
            ChunkKind::Text => TEXT_MESSAGE_CHUNK,
            ChunkKind::Tool => TOOL_CALL_CHUNK,
            ChunkKind::Reasoning => REASONING_MESSAGE_CHUNK,
        }
    }

    fn entity(self) -> &'static str {
        match self {
            ChunkKind::Text => "text message",
            ChunkKind::Tool => "tool call",
            ChunkKind::Reasoning => "reasoning message",
        }
    }

    /// The fields the chunk schema describes; the rest is "remainder".
    fn described(self, key: &str) -> bool {
        const BASE: [&str; 5] = ["type", "timestamp", "rawEvent", "metadata", "subagentRunId"];
        BASE.contains(&key)
            || match self {
                ChunkKind::Text => matches!(key, "messageId" | "role" | "delta" | "name"),
                ChunkKind::Tool => {
                    matches!(
                        key,
                        "toolCallId" | "toolCallName" | "parentMessageId" | "delta"
                    )
                }
                ChunkKind::Reasoning => matches!(key, "messageId" | "delta"),
            }
    }
}

/// The stream a lane is assembling.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub kind: ChunkKind,
    pub id: String,
    /// Text: the role (defaulted to assistant) and display name.
    pub role: Option<String>,
    pub name: Option<String>,
    /// Tool: name and parent message.
    pub tool_name: Option<String>,
    pub parent_message_id: Option<String>,
    pub subagent_run_id: Option<String>,
}

/// A chunk's fields, read off its JSON.
#[derive(Debug, Clone, Default)]
pub struct Chunk {
    pub id: Option<String>,
    pub role: Option<String>,
    pub name: Option<String>,
    pub tool_name: Option<String>,
    pub parent_message_id: Option<String>,
    pub delta: Option<String>,
    pub raw_event: Option<Value>,
    pub metadata: Option<Value>,
    pub tag: Option<String>,
    /// `subagentRunId: null` (the client still emits a content event for it).
    pub tag_null: bool,
    /// Fields the chunk schema does not describe.
    pub remainder: Map<String, Value>,
}

fn opt_string(o: &Map<String, Value>, key: &str, ty: &str) -> Result<Option<String>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{ty}: field `{key}` must be a string")),
    }
}

impl Chunk {
    pub fn read(kind: ChunkKind, o: &Map<String, Value>) -> Result<Chunk, String> {
        let ty = kind.chunk_type();
        let id = opt_string(o, kind.id_key(), ty)?;
        let mut c = Chunk {
            id,
            delta: opt_string(o, "delta", ty)?,
            raw_event: o.get("rawEvent").filter(|v| !v.is_null()).cloned(),
            metadata: o.get("metadata").cloned(),
            tag: opt_string(o, "subagentRunId", ty)?,
            tag_null: matches!(o.get("subagentRunId"), Some(Value::Null)),
            ..Default::default()
        };
        match kind {
            ChunkKind::Text => {
                c.role = opt_string(o, "role", ty)?;
                c.name = opt_string(o, "name", ty)?;
            }
            ChunkKind::Tool => {
                c.tool_name = opt_string(o, "toolCallName", ty)?;
                c.parent_message_id = opt_string(o, "parentMessageId", ty)?;
            }
            ChunkKind::Reasoning => {}
        }
        for (k, v) in o {
            if !kind.described(k) {
                c.remainder.insert(k.clone(), v.clone());
            }
        }
        Ok(c)
    }
}

/// What one chunk turned into.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    /// The entity the chunk belongs to.
    pub id: String,
    /// Streams the chunk closed first (another id in its lane).
    pub closed: Vec<Pending>,
    /// The stream it opened, if it opened one.
    pub opened: Option<Pending>,
    /// The content event: (entity id, delta, owner tag). The client emits one
    /// when the chunk has a delta or rawEvent, or carries only metadata.
    pub content: Option<(String, String, Option<String>)>,
}

/// How an event other than a chunk affects the lanes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneEffect {
    None,
    Lane(Option<String>),
    All,
}

/// The lane rules of `transformChunks` for every non-chunk event.
pub fn lane_effect(ty: &str, o: &Map<String, Value>) -> LaneEffect {
    let tag = || {
        o.get("subagentRunId")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match ty {
        TEXT_MESSAGE_START
        | TEXT_MESSAGE_CONTENT
        | TEXT_MESSAGE_END
        | TOOL_CALL_START
        | TOOL_CALL_ARGS
        | TOOL_CALL_END
        | TOOL_CALL_RESULT
        | STATE_SNAPSHOT
        | STATE_DELTA
        | CUSTOM
        | STEP_STARTED
        | STEP_FINISHED
        | REASONING_START
        | REASONING_MESSAGE_START
        | REASONING_MESSAGE_CONTENT
        | REASONING_MESSAGE_END
        | REASONING_END => LaneEffect::Lane(tag()),
        // The compatibility boundary turns these into REASONING_* first.
        THINKING_START
        | THINKING_END
        | THINKING_TEXT_MESSAGE_START
        | THINKING_TEXT_MESSAGE_CONTENT
        | THINKING_TEXT_MESSAGE_END => LaneEffect::Lane(tag()),
        RUN_STARTED | RUN_FINISHED | RUN_ERROR | MESSAGES_SNAPSHOT => LaneEffect::All,
        SUBAGENT_FINISHED | SUBAGENT_ERROR => match tag() {
            Some(t) => LaneEffect::Lane(Some(t)),
            None => LaneEffect::None,
        },
        _ => LaneEffect::None,
    }
}

/// The open lanes, in the order they were opened (a JS `Map`).
#[derive(Debug, Clone, Default)]
pub struct Lanes {
    open: Vec<(Option<String>, Pending)>,
}

impl Lanes {
    pub fn get(&self, owner: &Option<String>) -> Option<&Pending> {
        self.open.iter().find(|(o, _)| o == owner).map(|(_, p)| p)
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Whether a lane holds this entity (its end then comes from the client).
    pub fn holds(&self, kind: ChunkKind, id: &str) -> bool {
        self.open.iter().any(|(_, p)| p.kind == kind && p.id == id)
    }

    pub fn close(&mut self, owner: &Option<String>) -> Option<Pending> {
        let i = self.open.iter().position(|(o, _)| o == owner)?;
        Some(self.open.remove(i).1)
    }

    pub fn close_all(&mut self) -> Vec<Pending> {
        self.open.drain(..).map(|(_, p)| p).collect()
    }

    pub fn apply(&mut self, effect: &LaneEffect) -> Vec<Pending> {
        match effect {
            LaneEffect::None => Vec::new(),
            LaneEffect::Lane(owner) => self.close(owner).into_iter().collect(),
            LaneEffect::All => self.close_all(),
        }
    }

    fn resolve(
        &self,
        kind: ChunkKind,
        id: Option<&str>,
        tag: Option<&str>,
    ) -> Result<Option<String>, String> {
        if let Some(id) = id {
            if let Some((owner, _)) = self.open.iter().find(|(_, p)| p.kind == kind && p.id == id) {
                if let Some(t) = tag {
                    if owner.as_deref() != Some(t) {
                        return Err(format!(
                            "Cannot continue {} '{id}': chunk subagentRunId '{t}' does not match the open stream's subagent '{}'.",
                            kind.entity(),
                            owner.as_deref().unwrap_or("(the parent agent)")
                        ));
                    }
                }
                return Ok(owner.clone());
            }
            return Ok(tag.map(str::to_string));
        }
        if let Some(t) = tag {
            return Ok(Some(t.to_string()));
        }
        if self.get(&None).is_some_and(|p| p.kind == kind) {
            return Ok(None);
        }
        let candidates: Vec<_> = self.open.iter().filter(|(_, p)| p.kind == kind).collect();
        match candidates.as_slice() {
            [] => Ok(None),
            [(tag, _)] => Ok((*tag).clone()),
            many => Err(format!(
                "Ambiguous {}: it carries neither a {} nor a subagentRunId, but {} lanes have an open {}.",
                kind.chunk_type(),
                kind.id_key(),
                many.len(),
                kind.entity()
            )),
        }
    }

    /// Expands one chunk, updating the lanes; on error the lanes are unchanged.
    pub fn expand(&mut self, kind: ChunkKind, c: &Chunk) -> Result<Expansion, String> {
        let lane = self.resolve(kind, c.id.as_deref(), c.tag.as_deref())?;
        let continuing = self
            .get(&lane)
            .filter(|p| p.kind == kind && c.id.as_deref().is_none_or(|id| id == p.id))
            .cloned();
        let mut exp = Expansion {
            id: String::new(),
            closed: Vec::new(),
            opened: None,
            content: None,
        };
        let fields = match continuing {
            Some(p) => {
                let agree = |field: &str,
                             incoming: &Option<String>,
                             established: &Option<String>| {
                    match incoming {
                        Some(v) if Some(v) != established.as_ref() => Err(format!(
                            "Cannot continue {} '{}': chunk {field} '{v}' does not match the open stream's {field} {}.",
                            kind.entity(),
                            p.id,
                            established.as_deref().map_or("(absent)".to_string(), |e| format!("'{e}'"))
                        )),
                        _ => Ok(()),
                    }
                };
                match kind {
                    ChunkKind::Text => {
                        agree("role", &c.role, &p.role)?;
                        agree("name", &c.name, &p.name)?;
                    }
                    ChunkKind::Tool => {
                        agree("toolCallName", &c.tool_name, &p.tool_name)?;
                        agree(
                            "parentMessageId",
                            &c.parent_message_id,
                            &p.parent_message_id,
                        )?;
                    }
                    ChunkKind::Reasoning => {}
                }
                p
            }
            None => {
                let Some(id) = c.id.clone() else {
                    return Err(format!(
                        "First {} must have a {}",
                        kind.chunk_type(),
                        kind.id_key()
                    ));
                };
                if kind == ChunkKind::Tool && c.tool_name.is_none() {
                    return Err("First TOOL_CALL_CHUNK must have a toolCallName".to_string());
                }
                exp.closed.extend(self.close(&lane));
                let p = Pending {
                    kind,
                    id,
                    role: (kind == ChunkKind::Text)
                        .then(|| c.role.clone().unwrap_or_else(|| "assistant".to_string())),
                    name: c.name.clone(),
                    tool_name: c.tool_name.clone(),
                    parent_message_id: c.parent_message_id.clone(),
                    subagent_run_id: c.tag.clone(),
                };
                self.open.push((lane, p.clone()));
                exp.opened = Some(p.clone());
                p
            }
        };
        exp.id = fields.id.clone();
        let owner = c.tag.clone().or_else(|| fields.subagent_run_id.clone());
        if c.delta.is_some() || c.raw_event.is_some() {
            exp.content = Some((
                fields.id.clone(),
                c.delta.clone().unwrap_or_default(),
                owner,
            ));
        } else if exp.opened.is_none()
            && (c.metadata.is_some() || c.tag_null || !c.remainder.is_empty())
        {
            exp.content = Some((fields.id.clone(), String::new(), owner));
        }
        Ok(exp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(kind: ChunkKind, v: Value) -> Chunk {
        Chunk::read(kind, v.as_object().unwrap()).unwrap()
    }

    #[test]
    fn first_chunk_opens_then_continues_then_another_id_closes() {
        let mut l = Lanes::default();
        let e = l
            .expand(
                ChunkKind::Text,
                &chunk(ChunkKind::Text, json!({"messageId":"m1","delta":"a"})),
            )
            .unwrap();
        assert_eq!(
            e.opened.as_ref().unwrap().role.as_deref(),
            Some("assistant")
        );
        assert_eq!(e.content, Some(("m1".into(), "a".into(), None)));
        let e = l
            .expand(
                ChunkKind::Text,
                &chunk(ChunkKind::Text, json!({"delta":"b"})),
            )
            .unwrap();
        assert!(e.opened.is_none() && e.closed.is_empty());
        // nothing at all: the client emits nothing for a bare continuation
        let e = l
            .expand(ChunkKind::Text, &chunk(ChunkKind::Text, json!({})))
            .unwrap();
        assert_eq!(e.content, None);
        let e = l
            .expand(
                ChunkKind::Text,
                &chunk(ChunkKind::Text, json!({"messageId":"m2"})),
            )
            .unwrap();
        assert_eq!(e.closed[0].id, "m1");
        assert_eq!(e.content, None);
        // a tool chunk in the same lane closes the text stream
        let e = l
            .expand(
                ChunkKind::Tool,
                &chunk(
                    ChunkKind::Tool,
                    json!({"toolCallId":"t","toolCallName":"f","delta":"{"}),
                ),
            )
            .unwrap();
        assert_eq!(e.closed[0].id, "m2");
        assert!(l.holds(ChunkKind::Tool, "t"));
        assert_eq!(l.apply(&LaneEffect::All).len(), 1);
        assert!(l.is_empty());
    }

    #[test]
    fn errors_match_the_client() {
        let mut l = Lanes::default();
        let err = l
            .expand(
                ChunkKind::Text,
                &chunk(ChunkKind::Text, json!({"delta":"x"})),
            )
            .unwrap_err();
        assert_eq!(err, "First TEXT_MESSAGE_CHUNK must have a messageId");
        let err = l
            .expand(
                ChunkKind::Tool,
                &chunk(ChunkKind::Tool, json!({"toolCallId":"t"})),
            )
            .unwrap_err();
        assert!(err.contains("toolCallName"));
        l.expand(
            ChunkKind::Text,
            &chunk(ChunkKind::Text, json!({"messageId":"m","role":"user"})),
        )
        .unwrap();
        let err = l
            .expand(
                ChunkKind::Text,
                &chunk(ChunkKind::Text, json!({"role":"assistant"})),
            )
            .unwrap_err();
        assert!(err.contains("role 'assistant'"), "{err}");
        l.expand(
            ChunkKind::Text,
            &chunk(
                ChunkKind::Text,
                json!({"messageId":"n","subagentRunId":"s"}),
            ),
        )
        .unwrap();
        let err = l.expand(
            ChunkKind::Text,
            &chunk(ChunkKind::Text, json!({"delta":"x"})),
        );
        assert!(
            err.is_ok(),
            "the parent lane wins when it holds a text stream"
        );
        l.close(&None);
        l.expand(
            ChunkKind::Text,
            &chunk(
                ChunkKind::Text,
                json!({"messageId":"o","subagentRunId":"u"}),
            ),
        )
        .unwrap();
        let err = l
            .expand(
                ChunkKind::Text,
                &chunk(ChunkKind::Text, json!({"delta":"x"})),
            )
            .unwrap_err();
        assert!(err.starts_with("Ambiguous"), "{err}");
    }

    #[test]
    fn lane_effects() {
        let o = json!({"subagentRunId":"s"});
        let o = o.as_object().unwrap();
        assert_eq!(lane_effect(CUSTOM, o), LaneEffect::Lane(Some("s".into())));
        assert_eq!(lane_effect(RAW, o), LaneEffect::None);
        assert_eq!(lane_effect(RUN_FINISHED, o), LaneEffect::All);
        assert_eq!(
            lane_effect(SUBAGENT_FINISHED, &Map::new()),
            LaneEffect::None
        );
        assert_eq!(lane_effect("FUTURE", o), LaneEffect::None);
    }
}
