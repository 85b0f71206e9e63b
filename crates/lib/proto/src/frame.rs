//! The binary transport's framing is the core's length-delimited framing
//! (`babelgate_core::length`); what this crate adds is the event inside.

use serde_json::{Map, Value};

pub use babelgate_core::length::{
    write_frame, FramingError, LengthFramer as ProtoFramer, DEFAULT_MAX_MESSAGE_BYTES,
};

/// Encodes one AG-UI event and appends it as a frame.
pub fn write_event(out: &mut Vec<u8>, event: &Value) -> Result<(), crate::Error> {
    let message = crate::encode_event(event)?;
    write_frame(out, &message).map_err(|_| crate::Error::Malformed("message too large to frame"))
}

/// Encodes one event of an AG-UI dialect (`prefix`: see
/// [`crate::encode_event_as`]) and appends the message, unframed: what an
/// encoder writing the binary form calls for each event's body (its sink
/// frames it). The events that make most of a stream go straight from the
/// object to the bytes.
pub fn write_object(
    out: &mut Vec<u8>,
    event: Map<String, Value>,
    prefix: Option<&str>,
) -> Result<(), crate::Error> {
    // One fast path per event type, chosen once.
    let fast = match event.iter().find(|(k, _)| k.as_str() == "type") {
        Some((_, Value::String(t))) if t == "STATE_DELTA" => {
            crate::flat::state_delta::encode(&event, out)
        }
        Some((_, Value::String(t))) if crate::flat::is_flat(t) => crate::flat::encode(&event, out),
        Some(_) => prefix.and_then(|p| crate::flat::custom::encode(&event, p, out)),
        None => None,
    };
    if fast.is_some() {
        return Ok(());
    }
    let message = crate::encode_event_as(&Value::Object(event), prefix)?;
    out.extend_from_slice(&message);
    Ok(())
}

/// Appends a dialect's own event (a type the schema has no message for) as
/// the `<prefix>:<TYPE>` CUSTOM message that carries it, unframed (as
/// [`write_object`]), from its parts: what [`write_object`] writes for the object
/// `{type, ...fields, timestamp}`, without the object. `None`, with nothing
/// written, when the event is not one of the dialect's own or a field
/// cannot be written (the caller then builds the object).
pub fn write_own_event(
    out: &mut Vec<u8>,
    prefix: &str,
    event_type: &str,
    fields: &[(&str, Value)],
    timestamp: Option<i64>,
) -> Option<()> {
    if !crate::is_own_type(event_type)
        || fields.iter().enumerate().any(|(i, (k, _))| {
            matches!(*k, "type" | "timestamp") || fields[..i].iter().any(|(j, _)| j == k)
        })
    {
        return None;
    }
    let rest = fields.iter().map(|(k, v)| (*k, v));
    crate::flat::custom::encode_parts(event_type, rest, timestamp, prefix, out)
}
