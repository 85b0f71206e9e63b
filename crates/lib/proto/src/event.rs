//! One AG-UI event: its JSON form (camelCase, as @ag-ui/core defines it) to
//! and from the protobuf `ag_ui.Event` envelope, with @ag-ui/proto 1.0.0's
//! mapping (its `encode`/`decode` in src/proto.ts). The README lists each rule.

use serde_json::{Map, Value};

use crate::wire::{self, camel, schema};
use crate::Error;

const ENVELOPE: &str = ".ag_ui.Event";

/// The envelope's oneof member for an event type: `TEXT_MESSAGE_START` ->
/// `textMessageStart` (the reference's `toCamelCase`).
fn arm_name(event_type: &str) -> String {
    camel(&event_type.to_ascii_lowercase())
}

/// The envelope's field number for an event type.
pub(crate) fn arm_number(event_type: &str) -> Option<u32> {
    arm_field(event_type).map(|f| f.number() as u32)
}

fn arm_field(event_type: &str) -> Option<&'static prost_types::FieldDescriptorProto> {
    arms().by_type.get(event_type).copied()
}

/// The envelope's arms by event type, and event types by arm name, once.
struct Arms {
    by_type: foldhash::HashMap<&'static str, &'static prost_types::FieldDescriptorProto>,
    types_by_arm: foldhash::HashMap<&'static str, &'static str>,
}

fn arms() -> &'static Arms {
    static ARMS: std::sync::OnceLock<Arms> = std::sync::OnceLock::new();
    ARMS.get_or_init(|| {
        let s = schema();
        let envelope = s.message(ENVELOPE);
        let mut by_type = foldhash::HashMap::default();
        let mut types_by_arm = foldhash::HashMap::default();
        for t in s.event_types.keys() {
            let name = arm_name(t);
            if let Some(f) = envelope.field.iter().find(|f| camel(f.name()) == name) {
                by_type.insert(t.as_str(), f);
                types_by_arm.insert(wire::key(f), t.as_str());
            }
        }
        Arms {
            by_type,
            types_by_arm,
        }
    })
}

fn as_array(v: Option<&Value>) -> Vec<Value> {
    match v {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    }
}

/// Metadata travels only as an object; anything else is dropped, as the
/// reference's `normalizeMetadata` does.
fn object_or_none(v: Option<&Value>) -> Option<Value> {
    v.filter(|v| v.is_object()).cloned()
}

fn patch_ops(ops: &mut Value) -> Result<(), Error> {
    let Value::Array(items) = ops else {
        return Ok(());
    };
    for op in items {
        let Some(o) = op.as_object_mut() else {
            continue;
        };
        let name = o
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_uppercase();
        let n = *schema()
            .patch_ops
            .get(&name)
            .ok_or_else(|| Error::field("op", "a JSON Patch operation"))?;
        o.insert("op".into(), n.into());
    }
    Ok(())
}

fn to_wire_part(part: &Value) -> Option<Value> {
    let p = part.as_object()?;
    let source = |s: Option<&Value>| -> Option<Value> {
        let s = s?.as_object()?;
        let arm = match s.get("type")?.as_str()? {
            "data" => "data",
            "url" => "url",
            "file" => "file",
            _ => return None,
        };
        let mut inner = Map::new();
        for k in ["value", "provider", "mimeType"] {
            if arm == "file" || k != "provider" {
                if let Some(v) = s.get(k) {
                    inner.insert(k.into(), v.clone());
                }
            }
        }
        Some(serde_json::json!({ arm: inner }))
    };
    let mut inner = Map::new();
    let kind = p.get("type")?.as_str()?;
    match kind {
        "text" => {
            for k in ["id", "text", "metadata"] {
                if let Some(v) = p.get(k) {
                    inner.insert(k.into(), v.clone());
                }
            }
        }
        "image" | "audio" | "video" | "document" => {
            for k in ["id", "metadata"] {
                if let Some(v) = p.get(k) {
                    inner.insert(k.into(), v.clone());
                }
            }
            if let Some(s) = source(p.get("source")) {
                inner.insert("source".into(), s);
            }
        }
        "binary" => {
            // The legacy binary part becomes a document part.
            let mime = p.get("mimeType").cloned().unwrap_or(Value::Null);
            let s = if let Some(d) = p.get("data").filter(|v| truthy(v)) {
                serde_json::json!({"data": {"value": d, "mimeType": mime}})
            } else if let Some(u) = p.get("url").filter(|v| truthy(v)) {
                serde_json::json!({"url": {"value": u, "mimeType": mime}})
            } else if let Some(i) = p.get("id").filter(|v| truthy(v)) {
                serde_json::json!({"url": {"value": i, "mimeType": mime}})
            } else {
                return None;
            };
            let mut meta = Map::new();
            meta.insert("legacyBinary".into(), true.into());
            for k in ["filename", "id"] {
                if let Some(v) = p.get(k) {
                    meta.insert(k.into(), v.clone());
                }
            }
            inner.insert("source".into(), s);
            inner.insert("metadata".into(), Value::Object(meta));
            return Some(serde_json::json!({ "document": inner }));
        }
        _ => return None,
    }
    Some(serde_json::json!({ kind: inner }))
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        _ => true,
    }
}

fn to_wire_message(m: &Value) -> Value {
    let mut wire = m.as_object().cloned().unwrap_or_default();
    wire.insert("contentParts".into(), Value::Array(Vec::new()));
    match object_or_none(m.get("metadata")) {
        Some(v) => wire.insert("metadata".into(), v),
        None => wire.shift_remove("metadata"),
    };
    let calls: Vec<Value> = as_array(m.get("toolCalls"))
        .into_iter()
        .map(|mut c| {
            if let Some(o) = c.as_object_mut() {
                if !o.get("metadata").is_some_and(Value::is_object) {
                    o.shift_remove("metadata");
                }
            }
            c
        })
        .collect();
    wire.insert("toolCalls".into(), Value::Array(calls));
    if let Some(Value::Array(parts)) = m.get("content") {
        let parts = parts.iter().filter_map(to_wire_part).collect();
        wire.insert("contentParts".into(), Value::Array(parts));
        wire.shift_remove("content");
    } else if m.get("role").and_then(Value::as_str) == Some("activity") {
        let content = object_or_none(m.get("content")).unwrap_or_else(|| Value::Object(Map::new()));
        wire.insert("activityContent".into(), content);
        wire.shift_remove("content");
    }
    Value::Object(wire)
}

/// Encodes one AG-UI event (its JSON object) as an `ag_ui.Event` message.
///
/// An event type the schema has no message for is an error here; the
/// reference writes an empty message for it, which no decoder accepts.
pub fn encode_event(event: &Value) -> Result<Vec<u8>, Error> {
    if let Some(obj) = event.as_object() {
        let mut flat = Vec::new();
        if crate::flat::encode(obj, &mut flat).is_some()
            || crate::flat::state_delta::encode(obj, &mut flat).is_some()
        {
            return Ok(flat);
        }
    }
    encode_event_general(event)
}

/// [`encode_event`] without its fast path for flat events: the reference
/// that path is tested against.
#[doc(hidden)]
pub fn encode_event_general(event: &Value) -> Result<Vec<u8>, Error> {
    let obj = event.as_object().ok_or(Error::NotAnObject)?;
    let event_type = obj
        .get("type")
        .and_then(Value::as_str)
        .ok_or(Error::NoType)?;
    let (Some(arm), Some(&type_number)) =
        (arm_field(event_type), schema().event_types.get(event_type))
    else {
        return Err(Error::UnknownEventType(event_type.to_string()));
    };
    let mut rest = Map::new();
    for (k, v) in obj {
        if !matches!(k.as_str(), "type" | "timestamp" | "rawEvent" | "metadata") {
            rest.insert(k.clone(), v.clone());
        }
    }
    match event_type {
        "MESSAGES_SNAPSHOT" => {
            if let Some(Value::Array(ms)) = rest.get("messages") {
                let ms = ms.iter().map(to_wire_message).collect();
                rest.insert("messages".into(), Value::Array(ms));
            }
        }
        "RUN_FINISHED" => {
            let outcome = rest.get("outcome").cloned();
            let mut pending = Value::Array(Vec::new());
            let mut interrupts = Value::Array(Vec::new());
            let wire_outcome = match &outcome {
                None | Some(Value::Null) => String::new(),
                Some(o) => {
                    let t = o.get("type").and_then(Value::as_str).unwrap_or("");
                    match t {
                        "success" => pending = Value::Array(as_array(o.get("pendingToolCallIds"))),
                        "interrupt" => interrupts = Value::Array(as_array(o.get("interrupts"))),
                        _ => {}
                    }
                    t.to_string()
                }
            };
            rest.insert("outcome".into(), wire_outcome.into());
            rest.insert("interrupts".into(), interrupts);
            rest.insert("pendingToolCallIds".into(), pending);
        }
        "SUBAGENT_FINISHED" => {
            let outcome = rest.get("outcome").cloned();
            let mut ids = Value::Array(Vec::new());
            let wire_outcome = match &outcome {
                None | Some(Value::Null) => String::new(),
                Some(o) => {
                    let t = o.get("type").and_then(Value::as_str).unwrap_or("");
                    if t == "suspended" {
                        ids = Value::Array(as_array(o.get("interruptIds")));
                    }
                    t.to_string()
                }
            };
            rest.insert("outcome".into(), wire_outcome.into());
            rest.insert("interruptIds".into(), ids);
        }
        "STATE_DELTA" => {
            if let Some(d) = rest.get_mut("delta") {
                patch_ops(d)?;
            }
        }
        "ACTIVITY_DELTA" => {
            if let Some(d) = rest.get_mut("patch") {
                patch_ops(d)?;
            }
        }
        "TOOL_CALL_RESULT" => {
            if let Some(Value::Array(parts)) = rest.get("content") {
                let parts = parts.iter().filter_map(to_wire_part).collect();
                rest.insert("contentParts".into(), Value::Array(parts));
                rest.shift_remove("content");
            }
        }
        "RUN_STARTED" => {
            if let Some(Value::Object(input)) = rest.get("input") {
                let mut wire = input.clone();
                let ms = as_array(input.get("messages"))
                    .iter()
                    .map(to_wire_message)
                    .collect();
                wire.insert("messages".into(), Value::Array(ms));
                for k in ["tools", "resume"] {
                    let items = as_array(input.get(k))
                        .into_iter()
                        .map(|mut item| {
                            if let Some(o) = item.as_object_mut() {
                                if !o.get("metadata").is_some_and(Value::is_object) {
                                    o.shift_remove("metadata");
                                }
                            }
                            item
                        })
                        .collect();
                    wire.insert(k.into(), Value::Array(items));
                }
                rest.insert("input".into(), Value::Object(wire));
            }
        }
        _ => {}
    }
    let mut base = Map::new();
    base.insert("type".into(), type_number.into());
    for k in ["timestamp", "rawEvent"] {
        if let Some(v) = obj.get(k) {
            base.insert(k.into(), v.clone());
        }
    }
    if let Some(m) = object_or_none(obj.get("metadata")) {
        base.insert("metadata".into(), m);
    }
    rest.insert("baseEvent".into(), Value::Object(base));

    let mut body = Vec::new();
    wire::encode_message(arm.type_name(), &rest, 1, &mut body)?;
    let mut out = Vec::with_capacity(body.len() + 6);
    prost::encoding::encode_key(
        arm.number() as u32,
        prost::encoding::WireType::LengthDelimited,
        &mut out,
    );
    prost::encoding::encode_varint(body.len() as u64, &mut out);
    out.extend_from_slice(&body);
    Ok(out)
}

/// Same as [`encode_event`], from the event's JSON text.
pub fn encode_event_json(text: &str) -> Result<Vec<u8>, Error> {
    let v: Value = serde_json::from_str(text).map_err(|_| Error::NotAnObject)?;
    encode_event(&v)
}

/// Appends a flat event (a text or argument delta, a start, an end) from its
/// JSON text as one message, unframed, with no JSON value built: the bytes
/// of [`encode_event`] of the parsed text, and
/// for `encode_event_as` with any prefix (a dialect's own events are never
/// flat). `false`, with nothing written, for any other text.
pub fn write_flat_event_json(out: &mut Vec<u8>, text: &str) -> bool {
    crate::flat::encode_json(text, out).is_some()
}

fn from_wire_part(part: &Value) -> Result<Option<Value>, Error> {
    let Some(p) = part.as_object() else {
        return Ok(None);
    };
    let arms: Vec<&str> = ["text", "image", "audio", "video", "document"]
        .into_iter()
        .filter(|k| p.contains_key(*k))
        .collect();
    if arms.len() > 1 {
        return Err(Error::Malformed("content part carries more than one arm"));
    }
    let Some(&kind) = arms.first() else {
        return Ok(None);
    };
    let inner = p[kind].as_object().cloned().unwrap_or_default();
    let mut out = Map::new();
    out.insert("type".into(), kind.into());
    if let Some(id) = inner.get("id") {
        out.insert("id".into(), id.clone());
    }
    if kind == "text" {
        out.insert(
            "text".into(),
            inner.get("text").cloned().unwrap_or_else(|| "".into()),
        );
    } else if let Some(s) = inner.get("source") {
        let s = s.as_object().cloned().unwrap_or_default();
        let arms: Vec<&str> = ["data", "url", "file"]
            .into_iter()
            .filter(|k| s.contains_key(*k))
            .collect();
        if arms.len() > 1 {
            return Err(Error::Malformed("source carries more than one arm"));
        }
        let Some(&arm) = arms.first() else {
            // A source the reference cannot read drops the part.
            return Ok(None);
        };
        let mut src = s[arm].as_object().cloned().unwrap_or_default();
        src.insert("type".into(), arm.into());
        let mut ordered = Map::new();
        for k in ["type", "value", "provider", "mimeType"] {
            if let Some(v) = src.shift_remove(k) {
                ordered.insert(k.into(), v);
            }
        }
        out.insert("source".into(), Value::Object(ordered));
    }
    if let Some(m) = inner.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    Ok(Some(Value::Object(out)))
}

fn parts_from_wire(v: Option<&Value>) -> Result<Value, Error> {
    let mut out = Vec::new();
    for p in as_array(v) {
        if let Some(p) = from_wire_part(&p)? {
            out.push(p);
        }
    }
    Ok(Value::Array(out))
}

fn from_wire_message(wire: &Value) -> Result<Value, Error> {
    let mut m = wire.as_object().cloned().unwrap_or_default();
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let known = matches!(
        role.as_str(),
        "developer" | "system" | "assistant" | "user" | "tool" | "activity" | "reasoning"
    );
    let parts = as_array(m.get("contentParts"));
    let has_content = m.contains_key("content");
    let has_activity = m.contains_key("activityContent");
    let uses_parts = if known {
        matches!(role.as_str(), "user" | "tool")
    } else {
        !parts.is_empty()
    };
    let uses_map = if known {
        role == "activity"
    } else {
        !uses_parts && has_activity
    };
    if !known
        && usize::from(has_content) + usize::from(!parts.is_empty()) + usize::from(has_activity) > 1
    {
        return Err(Error::Malformed(
            "message carries more than one content form",
        ));
    }
    if known {
        if !uses_parts && !parts.is_empty() {
            return Err(Error::Malformed("content parts on a role that has none"));
        }
        if has_activity && !uses_map {
            return Err(Error::Malformed("activity content on a non-activity role"));
        }
        if uses_map && has_content {
            return Err(Error::Malformed(
                "activity content with another content form",
            ));
        }
        if uses_parts && has_content && !parts.is_empty() {
            return Err(Error::Malformed("both string content and content parts"));
        }
    }
    if uses_parts && !has_content {
        m.insert("content".into(), parts_from_wire(m.get("contentParts"))?);
    }
    if uses_map {
        if let Some(a) = m.get("activityContent").cloned() {
            m.insert("content".into(), a);
        }
    }
    m.shift_remove("activityContent");
    m.shift_remove("contentParts");
    if as_array(m.get("toolCalls")).is_empty() {
        m.shift_remove("toolCalls");
    }
    Ok(Value::Object(declaration_order(".ag_ui.Message", m, &[])))
}

fn pending_and_interrupts(pending: &[Value], interrupts: &[Value], out: &mut Map<String, Value>) {
    if !pending.is_empty() {
        out.insert("pendingToolCallIds".into(), Value::Array(pending.to_vec()));
    }
    if !interrupts.is_empty() {
        out.insert("interrupts".into(), Value::Array(interrupts.to_vec()));
    }
}

/// Keys in the order the reference's object has them: a field of the message
/// keeps its declared place (ts-proto lays every field out, absent ones as
/// `undefined`), even when the mapping fills it in later; keys the reference
/// deletes and adds again (`late`), and keys that are no field, follow in the
/// order they were added.
fn declaration_order(
    type_name: &str,
    mut m: Map<String, Value>,
    late: &[&str],
) -> Map<String, Value> {
    let mut out = Map::new();
    for f in &schema().message(type_name).field {
        let key = wire::key(f);
        if late.contains(&key) {
            continue;
        }
        if let Some((k, v)) = m.shift_remove_entry(key) {
            out.insert(k, v);
        }
    }
    out.extend(m);
    out
}

/// Decodes one `ag_ui.Event` message to the AG-UI event's JSON object, as the
/// reference's `decode` returns it.
pub fn decode_event(bytes: &[u8]) -> Result<Value, Error> {
    if let Some(flat) = crate::flat::read(bytes) {
        return Ok(flat.to_json());
    }
    if let Some((ops, timestamp)) = crate::flat::state_delta::read(bytes) {
        return Ok(crate::flat::state_delta::to_json(ops, timestamp));
    }
    decode_event_general(bytes)
}

/// [`decode_event`] without its fast path for flat events.
#[doc(hidden)]
pub fn decode_event_general(bytes: &[u8]) -> Result<Value, Error> {
    let envelope = wire::decode_message(ENVELOPE, bytes, 0)?;
    if envelope.len() != 1 {
        // No arm (an empty message, or only arms this schema does not know), or
        // several different ones.
        return Err(if envelope.is_empty() {
            Error::NoEvent
        } else {
            Error::Malformed("several event arms")
        });
    }
    let (arm, decoded) = envelope.into_iter().next().ok_or(Error::NoEvent)?;
    let Value::Object(mut decoded) = decoded else {
        return Err(Error::NoEvent);
    };
    let entry_type = arms()
        .types_by_arm
        .get(arm.as_str())
        .map(|t| t.to_string())
        .ok_or(Error::NoEvent)?;
    let Some(Value::Object(base)) = decoded.shift_remove("baseEvent") else {
        return Err(Error::Malformed("event without its base event"));
    };
    let declared = base.get("type").and_then(Value::as_i64).unwrap_or(0);
    if schema().event_type_names.get(&(declared as i32)) != Some(&entry_type) {
        return Err(Error::Malformed(
            "envelope and base event disagree on the type",
        ));
    }
    decoded.insert("type".into(), entry_type.clone().into());
    for k in ["timestamp", "rawEvent", "metadata"] {
        if let Some(v) = base.get(k) {
            decoded.insert(k.into(), v.clone());
        }
    }
    match entry_type.as_str() {
        "MESSAGES_SNAPSHOT" => {
            let ms = as_array(decoded.get("messages"))
                .iter()
                .map(from_wire_message)
                .collect::<Result<Vec<_>, _>>()?;
            decoded.insert("messages".into(), Value::Array(ms));
        }
        "RUN_FINISHED" => run_finished_from_wire(&mut decoded),
        "SUBAGENT_FINISHED" => subagent_finished_from_wire(&mut decoded),
        "STATE_DELTA" => patch_ops_from_wire(&mut decoded, "delta"),
        "ACTIVITY_DELTA" => patch_ops_from_wire(&mut decoded, "patch"),
        "TOOL_CALL_RESULT" => {
            let parts = as_array(decoded.get("contentParts"));
            if decoded.contains_key("content") && !parts.is_empty() {
                return Err(Error::Malformed("both string content and content parts"));
            }
            if !decoded.contains_key("content") {
                let c = parts_from_wire(decoded.get("contentParts"))?;
                decoded.insert("content".into(), c);
            }
            decoded.shift_remove("contentParts");
        }
        "RUN_STARTED" => run_input_from_wire(&mut decoded)?,
        _ => {}
    }
    if matches!(entry_type.as_str(), "RUN_FINISHED" | "RUN_ERROR")
        && as_array(decoded.get("usage")).is_empty()
    {
        decoded.shift_remove("usage");
    }
    let late: &[&str] = match entry_type.as_str() {
        "RUN_FINISHED" => &["outcome", "pendingToolCallIds", "interrupts"],
        "SUBAGENT_FINISHED" => &["outcome", "interruptIds"],
        _ => &[],
    };
    let arm_type = arm_field(&entry_type)
        .map(|f| f.type_name())
        .ok_or(Error::NoEvent)?;
    Ok(Value::Object(declaration_order(arm_type, decoded, late)))
}

/// `RUN_FINISHED`'s outcome, pending calls and interrupts in their JSON form.
fn run_finished_from_wire(decoded: &mut Map<String, Value>) {
    let wire_outcome = decoded
        .shift_remove("outcome")
        .and_then(|v| v.as_str().map(str::to_string));
    let pending = as_array(decoded.shift_remove("pendingToolCallIds").as_ref());
    let interrupts = as_array(decoded.shift_remove("interrupts").as_ref());
    match wire_outcome.as_deref() {
        None | Some("") => pending_and_interrupts(&pending, &interrupts, decoded),
        Some(t) => {
            let mut o = Map::new();
            o.insert("type".into(), t.into());
            if t == "interrupt" {
                o.insert("interrupts".into(), Value::Array(interrupts));
                pending_and_interrupts(&pending, &[], &mut o);
            } else {
                pending_and_interrupts(&pending, &interrupts, &mut o);
            }
            decoded.insert("outcome".into(), Value::Object(o));
        }
    }
}

/// `SUBAGENT_FINISHED`'s outcome and interrupt ids in their JSON form.
fn subagent_finished_from_wire(decoded: &mut Map<String, Value>) {
    let wire_outcome = decoded
        .shift_remove("outcome")
        .and_then(|v| v.as_str().map(str::to_string));
    let ids = as_array(decoded.shift_remove("interruptIds").as_ref());
    let mut target = Map::new();
    if !ids.is_empty() {
        target.insert("interruptIds".into(), Value::Array(ids));
    }
    match wire_outcome.as_deref() {
        None | Some("") => decoded.extend(target),
        Some(t) => {
            let mut o = Map::new();
            o.insert("type".into(), t.into());
            o.extend(target);
            decoded.insert("outcome".into(), Value::Object(o));
        }
    }
}

/// A patch's ops by name (the schema numbers them).
fn patch_ops_from_wire(decoded: &mut Map<String, Value>, key: &str) {
    if let Some(Value::Array(ops)) = decoded.get_mut(key) {
        for op in ops {
            if let Some(o) = op.as_object_mut() {
                let n = o.get("op").and_then(Value::as_i64).unwrap_or(0);
                let name = schema()
                    .patch_op_names
                    .get(&(n as i32))
                    .map_or_else(|| n.to_string(), |s| s.to_ascii_lowercase());
                o.insert("op".into(), name.into());
            }
        }
    }
}

/// `RUN_STARTED`'s input as the run's JSON input.
fn run_input_from_wire(decoded: &mut Map<String, Value>) -> Result<(), Error> {
    let Some(Value::Object(input)) = decoded.get("input").cloned() else {
        return Ok(());
    };
    let mut out = Map::new();
    for k in [
        "threadId",
        "runId",
        "protocolVersion",
        "parentRunId",
        "state",
    ] {
        if let Some(v) = input.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    let ms = as_array(input.get("messages"))
        .iter()
        .map(from_wire_message)
        .collect::<Result<Vec<_>, _>>()?;
    out.insert("messages".into(), Value::Array(ms));
    out.insert("tools".into(), Value::Array(as_array(input.get("tools"))));
    out.insert(
        "context".into(),
        Value::Array(as_array(input.get("context"))),
    );
    if let Some(v) = input.get("forwardedProps") {
        out.insert("forwardedProps".into(), v.clone());
    }
    out.insert("resume".into(), Value::Array(as_array(input.get("resume"))));
    decoded.insert("input".into(), Value::Object(out));
    Ok(())
}
