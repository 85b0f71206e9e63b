//! What `@ag-ui/client` 1.0 makes of a stream: its chunk expansion
//! ([`crate::chunks`]) followed by `verifyEvents`, the state machine that
//! rejects a run whose events come out of order. The encoder feeds every event
//! it writes through a [`ClientView`], so it always knows what the client has
//! open, and refuses (rewrites) anything the client would reject. Tests use it
//! as a fast stand-in for the real client (tests/node runs the real one).
//!
//! Rules mirrored from `verify/verify.ts`: the first event is RUN_STARTED (or
//! RUN_ERROR); nothing but RUN_STARTED follows RUN_ERROR; only RUN_ERROR or
//! RUN_STARTED follows RUN_FINISHED; RUN_STARTED is refused while a run is
//! active; a text message, tool call, reasoning message or reasoning span
//! cannot start twice while open, and its content/end needs it open;
//! STEP_FINISHED needs the same step (per subagent) started; RUN_FINISHED is
//! refused while steps, text messages, reasoning messages or spans, tool calls
//! or subagents are open; SUBAGENT_STARTED needs a new id (never reused in the
//! run) and a started parent; SUBAGENT_FINISHED/ERROR need it active; a
//! `subagentRunId` tag must agree with the owner of what it continues, and is
//! never null.

use std::collections::HashMap;

use babelgate_core::OpenList;
use imbl::HashSet;
use serde_json::{Map, Value};

use crate::chunks::{lane_effect, Chunk, ChunkKind, Lanes, Pending};
use crate::wire::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunPhase {
    /// Nothing seen yet: the first event must be RUN_STARTED or RUN_ERROR.
    #[default]
    NotStarted,
    Running,
    Finished,
    Errored,
}

type Owner = Option<String>;

/// Who opened each id the run has seen (the parent agent or a subagent),
/// by kind. It only grows, so rather than be copied before a change that
/// may be undone (see [`ClientView::accept`]) it keeps a journal of what
/// that change did to it while one is under way.
#[derive(Debug, Clone, Default)]
struct Owners {
    message: HashMap<String, Owner>,
    tool_call: HashMap<String, Owner>,
    activity: HashMap<String, Owner>,
    reasoning: HashMap<String, Owner>,
    /// While a change may be undone: each id set, with what it had before.
    journal: Option<Vec<(Bucket, String, Option<Owner>)>>,
}

#[derive(Debug, Clone, Copy)]
enum Bucket {
    Message,
    ToolCall,
    Activity,
    Reasoning,
}

impl Owners {
    fn map(&mut self, b: Bucket) -> &mut HashMap<String, Owner> {
        match b {
            Bucket::Message => &mut self.message,
            Bucket::ToolCall => &mut self.tool_call,
            Bucket::Activity => &mut self.activity,
            Bucket::Reasoning => &mut self.reasoning,
        }
    }

    fn set(&mut self, b: Bucket, id: &str, owner: Owner) {
        let before = self.map(b).insert(id.to_string(), owner);
        if let Some(j) = &mut self.journal {
            j.push((b, id.to_string(), before));
        }
    }

    /// Sets `id`'s owner unless it has one.
    fn set_first(&mut self, b: Bucket, id: &str, owner: Owner) {
        if !self.map(b).contains_key(id) {
            self.set(b, id, owner);
        }
    }

    fn begin(&mut self) {
        self.journal = Some(Vec::new());
    }

    fn commit(&mut self) {
        self.journal = None;
    }

    /// Undoes what was set since [`begin`](Self::begin), newest first.
    fn roll_back(&mut self) {
        for (b, id, before) in self.journal.take().unwrap_or_default().into_iter().rev() {
            match before {
                Some(o) => self.map(b).insert(id, o),
                None => self.map(b).remove(&id),
            };
        }
    }
}

/// An event [`ClientView::accept_plain`] takes, by its type and ids.
#[derive(Debug, Clone, Copy)]
pub enum Plain<'a> {
    TextStart(&'a str),
    TextContent(&'a str),
    TextEnd(&'a str),
    ToolStart {
        id: &'a str,
        parent: Option<&'a str>,
    },
    ToolArgs(&'a str),
    ToolEnd(&'a str),
    ToolResult {
        message_id: &'a str,
    },
    ReasoningStart(&'a str),
    ReasoningContent(&'a str),
    ReasoningEnd(&'a str),
    /// STATE_DELTA or STATE_SNAPSHOT: nothing to check or change.
    State,
}

/// The client's state after every event written so far.
#[derive(Debug, Clone, Default)]
pub struct ClientView {
    pub lanes: Lanes,
    pub phase: RunPhase,
    texts: OpenList<()>,
    tools: OpenList<()>,
    reasoning: OpenList<()>,
    spans: OpenList<()>,
    /// By [`step_key`]: the owner and the name.
    steps: OpenList<(Owner, String)>,
    subagents: OpenList<()>,
    closed_subagents: HashSet<String>,
    owners: Owners,
}

/// A string field of `o`, "" when absent or not a string.
pub(crate) fn s<'a>(o: &'a Map<String, Value>, k: &str) -> &'a str {
    o.get(k).and_then(Value::as_str).unwrap_or("")
}

fn tag(o: &Map<String, Value>) -> Owner {
    o.get("subagentRunId")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn tag_error(
    ty: &str,
    tag: &Owner,
    owner: Option<&Owner>,
    kind: &str,
    id: &str,
) -> Result<(), String> {
    match (tag, owner) {
        (Some(t), Some(o)) if o.as_deref() != Some(t.as_str()) => Err(format!(
            "Cannot send '{ty}': subagentRunId '{t}' does not match the {kind} '{id}' opener's subagent '{}'.",
            o.as_deref().unwrap_or("(the parent agent)")
        )),
        _ => Ok(()),
    }
}

fn remove(list: &mut OpenList<()>, id: &str) {
    list.remove_all(id);
}

/// A step's id in [`ClientView::steps`]: its name, per owner (one that
/// cannot be mistaken for another owner's).
fn step_key(owner: &Owner, name: &str) -> String {
    match owner {
        None => format!("-{name}"),
        Some(o) => format!("{}:{o}{name}", o.len()),
    }
}

impl ClientView {
    pub fn text_open(&self, id: &str) -> bool {
        self.texts.contains(id)
    }
    pub fn tool_open(&self, id: &str) -> bool {
        self.tools.contains(id)
    }
    /// Whether an event tagged `tag` (a `subagentRunId`, or none) may
    /// continue the text message, tool call or reasoning message `id`: an
    /// untagged one continues anything, a tagged one only its own subagent's.
    pub fn tag_fits(&self, kind: ChunkKind, id: &str, tag: &Owner) -> bool {
        let owners = match kind {
            ChunkKind::Text => &self.owners.message,
            ChunkKind::Tool => &self.owners.tool_call,
            ChunkKind::Reasoning => &self.owners.reasoning,
        };
        tag_error("", tag, owners.get(id), "", id).is_ok()
    }
    pub fn reasoning_open(&self, id: &str) -> bool {
        self.reasoning.contains(id)
    }
    pub fn span_open(&self, id: &str) -> bool {
        self.spans.contains(id)
    }
    pub fn step_open(&self, owner: &Owner, name: &str) -> bool {
        self.steps.contains(&step_key(owner, name))
    }
    /// The most recent open step of `owner`.
    pub fn last_step(&self, owner: &Owner) -> Option<&str> {
        self.steps
            .iter()
            .rev()
            .find(|(_, (o, _))| o == owner)
            .map(|(_, (_, n))| n.as_str())
    }
    pub fn subagent_active(&self, id: &str) -> bool {
        self.subagents.contains(id)
    }
    pub fn subagent_known(&self, id: &str) -> bool {
        self.subagent_active(id) || self.closed_subagents.contains(id)
    }

    /// Open items, in opening order, for closing: (texts, reasoning messages,
    /// spans, tool calls, steps, subagents).
    pub fn open_texts(&self) -> Vec<String> {
        self.texts.ids().map(str::to_string).collect()
    }
    pub fn open_reasoning(&self) -> Vec<String> {
        self.reasoning.ids().map(str::to_string).collect()
    }
    pub fn open_spans(&self) -> Vec<String> {
        self.spans.ids().map(str::to_string).collect()
    }
    pub fn open_tools(&self) -> Vec<String> {
        self.tools.ids().map(str::to_string).collect()
    }
    pub fn open_steps(&self) -> Vec<(Owner, String)> {
        self.steps.iter().map(|(_, v)| v.clone()).collect()
    }
    pub fn open_subagents(&self) -> Vec<String> {
        self.subagents.ids().map(str::to_string).collect()
    }

    /// Feeds one written event through chunk expansion and verification. On
    /// error nothing changes.
    pub fn accept(&mut self, ev: &Map<String, Value>) -> Result<(), String> {
        let ty = s(ev, "type");
        // Hot path without a copy: no lane to close, and `verify` checks
        // before it changes anything for every type but these two.
        if self.phase != RunPhase::NotStarted
            && self.lanes.is_empty()
            && ChunkKind::of_chunk_type(ty).is_none()
            && ty != RUN_STARTED
            && ty != MESSAGES_SNAPSHOT
        {
            return self.accept_in_place(ev);
        }
        // The view but its owners is small (a persistent list past a few
        // open items), so it is copied; the owners keep a journal instead.
        let owners = std::mem::take(&mut self.owners);
        let saved = self.clone();
        self.owners = owners;
        self.owners.begin();
        match self.accept_in_place(ev) {
            Ok(()) => {
                self.owners.commit();
                Ok(())
            }
            Err(e) => {
                let mut owners = std::mem::take(&mut self.owners);
                owners.roll_back();
                *self = saved;
                self.owners = owners;
                Err(e)
            }
        }
    }

    fn accept_in_place(&mut self, ev: &Map<String, Value>) -> Result<(), String> {
        let ty = s(ev, "type");
        if !EVENT_TYPES.contains(&ty) {
            // Dropped (with a warning) before chunk expansion and verification.
            return Ok(());
        }
        if let Some(kind) = ChunkKind::of_chunk_type(ty) {
            let chunk = Chunk::read(kind, ev)?;
            let exp = self.lanes.expand(kind, &chunk)?;
            for p in &exp.closed {
                self.verify(&end_event(p))?;
            }
            if let Some(p) = &exp.opened {
                self.verify(&start_event(p))?;
            }
            if let Some((id, _, owner)) = &exp.content {
                let mut m = Map::new();
                let t = match kind {
                    ChunkKind::Text => TEXT_MESSAGE_CONTENT,
                    ChunkKind::Tool => TOOL_CALL_ARGS,
                    ChunkKind::Reasoning => REASONING_MESSAGE_CONTENT,
                };
                m.insert("type".into(), t.into());
                let key = if kind == ChunkKind::Tool {
                    "toolCallId"
                } else {
                    "messageId"
                };
                m.insert(key.into(), id.clone().into());
                if let Some(o) = owner {
                    m.insert("subagentRunId".into(), o.clone().into());
                }
                self.verify(&m)?;
            }
            return Ok(());
        }
        for p in self.lanes.apply(&lane_effect(ty, ev)) {
            self.verify(&end_event(&p))?;
        }
        self.verify(ev)
    }

    /// `accept` of one of the encoder's written-in-place events: no
    /// `subagentRunId`, a run running, no chunk lane open. The checks and
    /// changes `verify` makes for such an event, without building its map
    /// (held to `accept` by the encoder's property test). `false`, with
    /// nothing changed, where the precondition fails or `accept` would refuse.
    pub fn accept_plain(&mut self, ev: Plain<'_>) -> bool {
        if self.phase != RunPhase::Running || !self.lanes.is_empty() {
            return false;
        }
        match ev {
            Plain::TextStart(id) => {
                if self.text_open(id) {
                    return false;
                }
                self.texts.push(id.to_string(), ());
                self.owners.set_first(Bucket::Message, id, None);
            }
            Plain::TextContent(id) => return self.text_open(id),
            Plain::TextEnd(id) => {
                if !self.text_open(id) {
                    return false;
                }
                remove(&mut self.texts, id);
            }
            Plain::ToolStart { id, parent } => {
                if self.tool_open(id) {
                    return false;
                }
                let inherited = parent.and_then(|p| self.owners.message.get(p)).cloned();
                if let Some(existing) = self.owners.tool_call.get(id) {
                    if inherited.as_ref().is_some_and(|i| i != existing) {
                        return false;
                    }
                }
                self.tools.push(id.to_string(), ());
                let owner = inherited.unwrap_or(None);
                self.owners.set_first(Bucket::ToolCall, id, owner);
            }
            Plain::ToolArgs(id) => return self.tool_open(id),
            Plain::ToolEnd(id) => {
                if !self.tool_open(id) {
                    return false;
                }
                remove(&mut self.tools, id);
            }
            Plain::ToolResult { message_id } => {
                self.owners.set(Bucket::Message, message_id, None);
            }
            Plain::ReasoningStart(id) => {
                if self.reasoning_open(id) {
                    return false;
                }
                self.reasoning.push(id.to_string(), ());
                self.owners.set_first(Bucket::Reasoning, id, None);
            }
            Plain::ReasoningContent(id) => return self.reasoning_open(id),
            Plain::ReasoningEnd(id) => {
                if !self.reasoning_open(id) {
                    return false;
                }
                remove(&mut self.reasoning, id);
            }
            Plain::State => {}
        }
        true
    }

    /// Closes a lane the way the client will when the next event reaches it.
    pub fn close_lane(&mut self, owner: &Owner) {
        if let Some(p) = self.lanes.close(owner) {
            // The synthesized end of an open stream always verifies.
            let _ = self.verify(&end_event(&p));
        }
    }

    pub fn close_all_lanes(&mut self) {
        for p in self.lanes.close_all() {
            let _ = self.verify(&end_event(&p));
        }
    }

    fn reset_run(&mut self) {
        let lanes = std::mem::take(&mut self.lanes);
        *self = ClientView {
            lanes,
            ..Default::default()
        };
    }

    fn seed_owners(&mut self, messages: Option<&Value>, authoritative: bool) -> Result<(), String> {
        let Some(list) = messages.and_then(Value::as_array) else {
            return Ok(());
        };
        for m in list {
            let Some(o) = m.as_object() else { continue };
            let Some(id) = o.get("id").and_then(Value::as_str) else {
                continue;
            };
            if matches!(o.get("subagentRunId"), Some(Value::Null)) {
                return Err(format!(
                    "Cannot send a message (id '{id}') with 'subagentRunId: null'."
                ));
            }
            let owner = tag(o);
            let bucket = match s(o, "role") {
                "reasoning" => Bucket::Reasoning,
                "activity" => Bucket::Activity,
                _ => Bucket::Message,
            };
            if authoritative {
                self.owners.set(bucket, id, owner.clone());
            } else {
                self.owners.set_first(bucket, id, owner.clone());
            }
            for tc in o
                .get("toolCalls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(tid) = tc.get("id").and_then(Value::as_str) {
                    if authoritative {
                        self.owners.set(Bucket::ToolCall, tid, owner.clone());
                    } else {
                        self.owners.set_first(Bucket::ToolCall, tid, owner.clone());
                    }
                }
            }
        }
        Ok(())
    }

    /// One event after chunk expansion. Every branch checks before it changes
    /// anything (except RUN_STARTED and MESSAGES_SNAPSHOT): `accept` relies on it.
    fn verify(&mut self, ev: &Map<String, Value>) -> Result<(), String> {
        let ty = s(ev, "type");
        if matches!(ev.get("subagentRunId"), Some(Value::Null)) {
            return Err(format!("Cannot send '{ty}' with 'subagentRunId: null'."));
        }
        if ty == SUBAGENT_FINISHED {
            if let Some(out) = ev.get("outcome") {
                let t = out.get("type").and_then(Value::as_str);
                if !matches!(t, Some("success" | "suspended")) {
                    return Err("SUBAGENT_FINISHED outcome must be success or suspended".into());
                }
            }
        }
        if self.phase == RunPhase::Errored && ty != RUN_STARTED {
            return Err(format!(
                "Cannot send event type '{ty}': The run has already errored with 'RUN_ERROR'."
            ));
        }
        if self.phase == RunPhase::Finished && ty != RUN_ERROR && ty != RUN_STARTED {
            return Err(format!(
                "Cannot send event type '{ty}': The run has already finished with 'RUN_FINISHED'."
            ));
        }
        if self.phase == RunPhase::NotStarted {
            // Only RUN_STARTED and RUN_ERROR leave it (see `verify_run`).
            if ty != RUN_STARTED && ty != RUN_ERROR {
                return Err("First event must be 'RUN_STARTED'".into());
            }
        } else if ty == RUN_STARTED {
            if self.phase == RunPhase::Running {
                return Err("Cannot send 'RUN_STARTED' while a run is still active.".into());
            }
            if matches!(self.phase, RunPhase::Finished | RunPhase::Errored) {
                self.reset_run();
            }
        }
        let t = tag(ev);
        match ty {
            TEXT_MESSAGE_START | TEXT_MESSAGE_CONTENT | TEXT_MESSAGE_END => {
                self.verify_text(ty, ev, t)
            }
            TOOL_CALL_START | TOOL_CALL_ARGS | TOOL_CALL_END => self.verify_tool(ty, ev, t),
            STEP_STARTED | STEP_FINISHED => self.verify_step(ty, ev, t),
            ACTIVITY_SNAPSHOT | ACTIVITY_DELTA | TOOL_CALL_RESULT => self.verify_owned(ty, ev, t),
            REASONING_START
            | REASONING_MESSAGE_START
            | REASONING_MESSAGE_CONTENT
            | REASONING_MESSAGE_END
            | REASONING_END
            | REASONING_ENCRYPTED_VALUE => self.verify_reasoning(ty, ev, t),
            SUBAGENT_STARTED | SUBAGENT_FINISHED | SUBAGENT_ERROR => self.verify_subagent(ty, ev),
            MESSAGES_SNAPSHOT | RUN_STARTED | RUN_FINISHED | RUN_ERROR => self.verify_run(ty, ev),
            _ => Ok(()),
        }
    }

    /// TEXT_MESSAGE_START, _CONTENT and _END.
    fn verify_text(&mut self, ty: &str, ev: &Map<String, Value>, t: Owner) -> Result<(), String> {
        match ty {
            TEXT_MESSAGE_START => {
                let id = s(ev, "messageId");
                if self.text_open(id) {
                    return Err(format!(
                        "A text message with ID '{id}' is already in progress."
                    ));
                }
                let existing = self.owners.message.get(id).cloned();
                tag_error(ty, &t, existing.as_ref(), "message", id)?;
                self.texts.push(id.to_string(), ());
                self.owners.set_first(Bucket::Message, id, t);
            }
            TEXT_MESSAGE_CONTENT | TEXT_MESSAGE_END => {
                let id = s(ev, "messageId");
                if !self.text_open(id) {
                    return Err(format!(
                        "'{ty}': No active text message found with ID '{id}'."
                    ));
                }
                tag_error(ty, &t, self.owners.message.get(id), "message", id)?;
                if ty == TEXT_MESSAGE_END {
                    remove(&mut self.texts, id);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// TOOL_CALL_START, _ARGS and _END.
    fn verify_tool(&mut self, ty: &str, ev: &Map<String, Value>, t: Owner) -> Result<(), String> {
        match ty {
            TOOL_CALL_START => {
                let id = s(ev, "toolCallId");
                if self.tool_open(id) {
                    return Err(format!(
                        "A tool call with ID '{id}' is already in progress."
                    ));
                }
                let mut inherited = None;
                if let Some(parent) = ev.get("parentMessageId").and_then(Value::as_str) {
                    if let Some(po) = self.owners.message.get(parent) {
                        if t.is_some() && &t != po {
                            return Err(format!(
                                "TOOL_CALL_START: subagentRunId does not match its parent message '{parent}' owner."
                            ));
                        }
                        inherited = Some(po.clone());
                    }
                }
                if let Some(existing) = self.owners.tool_call.get(id) {
                    tag_error(ty, &t, Some(existing), "tool call", id)?;
                    if t.is_none() && inherited.as_ref().is_some_and(|i| i != existing) {
                        return Err(format!(
                            "TOOL_CALL_START: tool call '{id}' and its parent message have different owners."
                        ));
                    }
                }
                self.tools.push(id.to_string(), ());
                let owner = if t.is_some() {
                    t
                } else {
                    inherited.unwrap_or(None)
                };
                self.owners.set_first(Bucket::ToolCall, id, owner);
            }
            TOOL_CALL_ARGS | TOOL_CALL_END => {
                let id = s(ev, "toolCallId");
                if !self.tool_open(id) {
                    return Err(format!("'{ty}': No active tool call found with ID '{id}'."));
                }
                tag_error(ty, &t, self.owners.tool_call.get(id), "tool call", id)?;
                if ty == TOOL_CALL_END {
                    remove(&mut self.tools, id);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// STEP_STARTED and STEP_FINISHED.
    fn verify_step(&mut self, ty: &str, ev: &Map<String, Value>, t: Owner) -> Result<(), String> {
        match ty {
            STEP_STARTED => {
                let name = s(ev, "stepName");
                if self.step_open(&t, name) {
                    return Err(format!(
                        "Step \"{name}\" is already active for 'STEP_STARTED'"
                    ));
                }
                self.steps.push(step_key(&t, name), (t, name.to_string()));
            }
            STEP_FINISHED => {
                let name = s(ev, "stepName");
                if !self.step_open(&t, name) {
                    return Err(format!(
                        "Cannot send 'STEP_FINISHED' for step \"{name}\" that was not started"
                    ));
                }
                self.steps.remove_all(&step_key(&t, name));
            }
            _ => {}
        }
        Ok(())
    }

    /// ACTIVITY_SNAPSHOT, ACTIVITY_DELTA and TOOL_CALL_RESULT: owners only.
    fn verify_owned(&mut self, ty: &str, ev: &Map<String, Value>, t: Owner) -> Result<(), String> {
        match ty {
            ACTIVITY_SNAPSHOT => {
                let id = s(ev, "messageId");
                let is_new = !self.owners.activity.contains_key(id);
                if is_new || ev.get("replace") != Some(&Value::Bool(false)) {
                    self.owners.set(Bucket::Activity, id, t);
                }
            }
            ACTIVITY_DELTA => {
                let id = s(ev, "messageId");
                tag_error(ty, &t, self.owners.activity.get(id), "activity", id)?;
            }
            TOOL_CALL_RESULT => {
                if let Some(id) = ev.get("messageId").and_then(Value::as_str) {
                    self.owners.set(Bucket::Message, id, t);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Reasoning spans and messages, and encrypted values.
    fn verify_reasoning(
        &mut self,
        ty: &str,
        ev: &Map<String, Value>,
        t: Owner,
    ) -> Result<(), String> {
        match ty {
            REASONING_START | REASONING_MESSAGE_START => {
                let id = s(ev, "messageId");
                let span = ty == REASONING_START;
                let open = if span { &self.spans } else { &self.reasoning };
                if open.contains(id) {
                    return Err(format!("'{ty}': '{id}' is already in progress."));
                }
                let existing = self.owners.reasoning.get(id).cloned();
                tag_error(ty, &t, existing.as_ref(), "reasoning message", id)?;
                if span {
                    self.spans.push(id.to_string(), ());
                } else {
                    self.reasoning.push(id.to_string(), ());
                }
                self.owners.set_first(Bucket::Reasoning, id, t);
            }
            REASONING_MESSAGE_CONTENT | REASONING_MESSAGE_END | REASONING_END => {
                let id = s(ev, "messageId");
                let span = ty == REASONING_END;
                let open = if span { &self.spans } else { &self.reasoning };
                if !open.contains(id) {
                    return Err(format!(
                        "'{ty}': no active reasoning entity with ID '{id}'."
                    ));
                }
                tag_error(
                    ty,
                    &t,
                    self.owners.reasoning.get(id),
                    "reasoning message",
                    id,
                )?;
                if span {
                    remove(&mut self.spans, id);
                } else if ty == REASONING_MESSAGE_END {
                    remove(&mut self.reasoning, id);
                }
            }
            REASONING_ENCRYPTED_VALUE => {
                let id = s(ev, "entityId");
                let owner = match s(ev, "subtype") {
                    "tool-call" => self.owners.tool_call.get(id),
                    "message" => self
                        .owners
                        .message
                        .get(id)
                        .or(self.owners.reasoning.get(id)),
                    _ => self.owners.reasoning.get(id),
                };
                tag_error(ty, &t, owner, "entity", id)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// SUBAGENT_STARTED, _FINISHED and _ERROR.
    fn verify_subagent(&mut self, ty: &str, ev: &Map<String, Value>) -> Result<(), String> {
        match ty {
            SUBAGENT_STARTED => {
                let Some(id) = ev.get("subagentRunId").and_then(Value::as_str) else {
                    return Err("Cannot send 'SUBAGENT_STARTED' without a 'subagentRunId'.".into());
                };
                if !ev.get("name").is_some_and(Value::is_string) {
                    return Err("Cannot send 'SUBAGENT_STARTED' without a 'name'.".into());
                }
                if self.subagent_active(id) || self.closed_subagents.contains(id) {
                    return Err(format!(
                        "Cannot send 'SUBAGENT_STARTED': subagent '{id}' was already started."
                    ));
                }
                if let Some(parent) = ev.get("parentSubagentRunId").and_then(Value::as_str) {
                    if !self.subagent_known(parent) {
                        return Err(format!(
                            "parentSubagentRunId '{parent}' has not been started in this run."
                        ));
                    }
                }
                self.subagents.push(id.to_string(), ());
            }
            SUBAGENT_FINISHED | SUBAGENT_ERROR => {
                let Some(id) = ev.get("subagentRunId").and_then(Value::as_str) else {
                    return Err(format!("Cannot send '{ty}' without a 'subagentRunId'."));
                };
                if ty == SUBAGENT_ERROR && !ev.get("message").is_some_and(Value::is_string) {
                    return Err("Cannot send 'SUBAGENT_ERROR' without a 'message'.".into());
                }
                if !self.subagent_active(id) {
                    return Err(format!(
                        "Cannot send '{ty}': no active subagent found with ID '{id}'."
                    ));
                }
                remove(&mut self.subagents, id);
                self.closed_subagents.insert(id.to_string());
            }
            _ => {}
        }
        Ok(())
    }

    /// The run's start and end, and MESSAGES_SNAPSHOT.
    fn verify_run(&mut self, ty: &str, ev: &Map<String, Value>) -> Result<(), String> {
        match ty {
            MESSAGES_SNAPSHOT => self.seed_owners(ev.get("messages"), true)?,
            RUN_STARTED => {
                self.phase = RunPhase::Running;
                self.seed_owners(ev.get("input").and_then(|i| i.get("messages")), false)?;
            }
            RUN_FINISHED => {
                let open = [
                    ("steps", self.steps.len()),
                    ("text messages", self.texts.len()),
                    ("reasoning messages", self.reasoning.len()),
                    ("reasoning spans", self.spans.len()),
                    ("tool calls", self.tools.len()),
                    ("subagents", self.subagents.len()),
                ];
                if let Some((what, _)) = open.iter().find(|(_, n)| *n > 0) {
                    return Err(format!(
                        "Cannot send 'RUN_FINISHED' while {what} are still active"
                    ));
                }
                self.phase = RunPhase::Finished;
            }
            RUN_ERROR => self.phase = RunPhase::Errored,
            _ => {}
        }
        Ok(())
    }
}

/// The END the client synthesizes when a lane closes.
fn end_event(p: &Pending) -> Map<String, Value> {
    let mut m = Map::new();
    let (ty, key) = match p.kind {
        ChunkKind::Text => (TEXT_MESSAGE_END, "messageId"),
        ChunkKind::Tool => (TOOL_CALL_END, "toolCallId"),
        ChunkKind::Reasoning => (REASONING_MESSAGE_END, "messageId"),
    };
    m.insert("type".into(), ty.into());
    m.insert(key.into(), p.id.clone().into());
    if let Some(t) = &p.subagent_run_id {
        m.insert("subagentRunId".into(), t.clone().into());
    }
    m
}

/// The START the client synthesizes for an opening chunk.
fn start_event(p: &Pending) -> Map<String, Value> {
    let mut m = Map::new();
    match p.kind {
        ChunkKind::Text => {
            m.insert("type".into(), TEXT_MESSAGE_START.into());
            m.insert("messageId".into(), p.id.clone().into());
        }
        ChunkKind::Tool => {
            m.insert("type".into(), TOOL_CALL_START.into());
            m.insert("toolCallId".into(), p.id.clone().into());
            if let Some(pm) = &p.parent_message_id {
                m.insert("parentMessageId".into(), pm.clone().into());
            }
        }
        ChunkKind::Reasoning => {
            m.insert("type".into(), REASONING_MESSAGE_START.into());
            m.insert("messageId".into(), p.id.clone().into());
        }
    }
    if let Some(t) = &p.subagent_run_id {
        m.insert("subagentRunId".into(), t.clone().into());
    }
    m
}

/// Runs a whole stream of wire events through a fresh view (tests).
pub fn verify_stream<'a>(
    events: impl IntoIterator<Item = &'a Value>,
) -> Result<ClientView, String> {
    let mut v = ClientView::default();
    for (i, e) in events.into_iter().enumerate() {
        let o = e
            .as_object()
            .ok_or_else(|| format!("event #{} is not an object", i + 1))?;
        v.accept(o)
            .map_err(|err| format!("event #{} ({}): {err}", i + 1, s(o, "type")))?;
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(events: Value) -> Result<ClientView, String> {
        verify_stream(events.as_array().unwrap())
    }

    #[test]
    fn ordering_rules() {
        assert!(run(json!([{"type":"TEXT_MESSAGE_START","messageId":"m"}]))
            .unwrap_err()
            .contains("First event"));
        assert!(run(json!([{"type":"RUN_ERROR","message":"x"}])).is_ok());
        let ok = run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"TEXT_MESSAGE_START","messageId":"m"},
            {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"},
            {"type":"TEXT_MESSAGE_END","messageId":"m"},
            {"type":"RUN_FINISHED","threadId":"t","runId":"r"},
            {"type":"RUN_ERROR","message":"late"},
            {"type":"RUN_STARTED","threadId":"t","runId":"r2"},
        ]))
        .unwrap();
        assert_eq!(ok.phase, RunPhase::Running);
        let err = run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"},
            {"type":"RUN_FINISHED","threadId":"t","runId":"r"},
        ]))
        .unwrap_err();
        assert!(err.contains("tool calls are still active"), "{err}");
        let err = run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"RUN_ERROR","message":"x"},
            {"type":"CUSTOM","name":"n","value":1},
        ]))
        .unwrap_err();
        assert!(err.contains("already errored"), "{err}");
    }

    #[test]
    fn chunks_close_at_run_finished_and_other_events() {
        run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"},
            {"type":"TEXT_MESSAGE_CHUNK","delta":"b"},
            {"type":"RAW","event":{}},
            {"type":"TEXT_MESSAGE_CHUNK","delta":"c"},
            {"type":"CUSTOM","name":"x","value":null},
            {"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"d"},
            {"type":"RUN_FINISHED","threadId":"t","runId":"r"},
        ]))
        .unwrap();
        // an explicit END after a chunk-opened message is one END too many
        let err = run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"},
            {"type":"TEXT_MESSAGE_END","messageId":"m"},
        ]))
        .unwrap_err();
        assert!(err.contains("No active text message"), "{err}");
    }

    #[test]
    fn a_refused_event_changes_nothing() {
        let mut v = run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"},
        ]))
        .unwrap();
        for bad in [
            json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"x","delta":""}),
            json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        ] {
            assert!(v.accept(bad.as_object().unwrap()).is_err(), "{bad}");
            assert!(v.text_open("m") && !v.lanes.is_empty(), "{bad}");
        }
        v.close_all_lanes();
        let bad = json!({"type":"TOOL_CALL_END","toolCallId":"x"});
        assert!(v.accept(bad.as_object().unwrap()).is_err());
        assert!(!v.text_open("m") && v.phase == RunPhase::Running);
    }

    #[test]
    fn steps_subagents_and_reasoning() {
        run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"STEP_STARTED","stepName":"a"},
            {"type":"STEP_STARTED","stepName":"a","subagentRunId":"s"},
            {"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"},
            {"type":"REASONING_MESSAGE_START","messageId":"r1","role":"reasoning"},
            {"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"x"},
            {"type":"REASONING_MESSAGE_END","messageId":"r1"},
            {"type":"STEP_FINISHED","stepName":"a","subagentRunId":"s"},
            {"type":"SUBAGENT_FINISHED","subagentRunId":"s"},
            {"type":"STEP_FINISHED","stepName":"a"},
            {"type":"RUN_FINISHED","threadId":"t","runId":"r"},
        ]))
        .unwrap();
        let err = run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"},
            {"type":"SUBAGENT_FINISHED","subagentRunId":"s"},
            {"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"},
        ]))
        .unwrap_err();
        assert!(err.contains("already started"), "{err}");
        let err = run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"TEXT_MESSAGE_START","messageId":"m"},
            {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","subagentRunId":"s"},
        ]))
        .unwrap_err();
        assert!(err.contains("does not match"), "{err}");
    }

    /// A refused event changes nothing, owners included: they are not
    /// copied before the change but journaled, and the journal undone.
    #[test]
    fn a_refused_event_leaves_the_owners_as_they_were() {
        let mut v = run(json!([
            {"type":"RUN_STARTED","threadId":"t","runId":"r"},
            {"type":"TEXT_MESSAGE_START","messageId":"a","role":"assistant"},
            {"type":"TEXT_MESSAGE_END","messageId":"a"},
        ]))
        .unwrap();
        let accept = |v: &mut ClientView, e: Value| v.accept(e.as_object().unwrap());
        // Sets a's owner to s1, then meets a null tag: refused.
        let err = accept(
            &mut v,
            json!({"type":"MESSAGES_SNAPSHOT","messages":[
                {"id":"a","role":"assistant","content":"","subagentRunId":"s1"},
                {"id":"b","role":"assistant","content":"","subagentRunId":null},
            ]}),
        )
        .unwrap_err();
        assert!(err.contains("subagentRunId: null"), "{err}");
        // a is still the parent's: a call under it is too, and s1 cannot
        // continue it.
        accept(
            &mut v,
            json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"a"}),
        )
        .unwrap();
        let err = accept(
            &mut v,
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}","subagentRunId":"s1"}),
        )
        .unwrap_err();
        assert!(err.contains("does not match"), "{err}");
        accept(
            &mut v,
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}),
        )
        .unwrap();
    }
}
