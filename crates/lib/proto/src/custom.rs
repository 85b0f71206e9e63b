//! A dialect whose events are AG-UI's plus its own (HAI) in the binary
//! transport: its own events travel as AG-UI `CUSTOM` events named
//! `<prefix>:<TYPE>`, whose `value` is the event without `type` and
//! `timestamp`; the fields it adds to AG-UI's events, which the schema has no
//! place for, travel in `metadata.<prefix>`. Decoding with the same prefix
//! gives the dialect's events back; without one (an AG-UI reader) they stay
//! `CUSTOM` events, as AG-UI defines them.

use serde_json::{Map, Value};

use crate::{decode_event, encode_event, Error};

/// Encodes one event of a dialect that extends AG-UI; `prefix: None` is
/// [`encode_event`].
pub fn encode_event_as(event: &Value, prefix: Option<&str>) -> Result<Vec<u8>, Error> {
    if let (Some(prefix), Some(obj)) = (prefix, event.as_object()) {
        let mut out = Vec::new();
        if crate::flat::custom::encode(obj, prefix, &mut out).is_some() {
            return Ok(out);
        }
    }
    encode_event_as_general(event, prefix)
}

/// [`encode_event_as`] without its fast path for the dialect's own events.
#[doc(hidden)]
pub fn encode_event_as_general(event: &Value, prefix: Option<&str>) -> Result<Vec<u8>, Error> {
    let Some(prefix) = prefix else {
        return encode_event(event);
    };
    let obj = event.as_object().ok_or(Error::NotAnObject)?;
    match encode_event(event) {
        Err(Error::UnknownEventType(kind)) => {
            let mut value = obj.clone();
            value.shift_remove("type");
            let timestamp = value.shift_remove("timestamp");
            let mut custom = Map::new();
            custom.insert("type".into(), "CUSTOM".into());
            custom.insert("name".into(), format!("{prefix}:{kind}").into());
            custom.insert("value".into(), Value::Object(value));
            if let Some(t) = timestamp {
                custom.insert("timestamp".into(), t);
            }
            encode_event(&Value::Object(custom))
        }
        Err(e) => Err(e),
        Ok(bytes) => {
            // The keys the schema dropped: found by reading the bytes back,
            // so that no list of the schema's fields is kept here.
            let back = decode_event(&bytes)?;
            let back = back.as_object().ok_or(Error::NotAnObject)?;
            let lost: Map<String, Value> = obj
                .iter()
                .filter(|(k, v)| {
                    !matches!(k.as_str(), "type" | "timestamp" | "rawEvent" | "metadata")
                        && !v.is_null()
                        && !back.contains_key(k.as_str())
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if lost.is_empty() {
                return Ok(bytes);
            }
            let mut with = obj.clone();
            for k in lost.keys() {
                with.shift_remove(k);
            }
            let mut metadata = match with.shift_remove("metadata") {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            metadata.insert(prefix.to_string(), Value::Object(lost));
            with.insert("metadata".into(), Value::Object(metadata));
            encode_event(&Value::Object(with))
        }
    }
}

/// Decodes one message as an event of a dialect that extends AG-UI;
/// `prefix: None` is [`decode_event`].
pub fn decode_event_as(bytes: &[u8], prefix: Option<&str>) -> Result<Value, Error> {
    if let Some(own) = prefix.and_then(|p| crate::flat::custom::read(bytes, p)) {
        return Ok(own);
    }
    let event = decode_event(bytes)?;
    match prefix {
        Some(prefix) => Ok(restore(event, prefix)),
        None => Ok(event),
    }
}

/// The dialect's event that `event` (an AG-UI event) carries, if any.
pub fn restore(event: Value, prefix: &str) -> Value {
    let Value::Object(mut obj) = event else {
        return event;
    };
    let own = match (obj.get("type"), obj.get("name"), obj.get("value")) {
        (Some(Value::String(t)), Some(Value::String(name)), Some(Value::Object(_)))
            if t == "CUSTOM" =>
        {
            name.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix(':'))
                .filter(|kind| !kind.is_empty())
                .map(str::to_string)
        }
        _ => None,
    };
    if let (Some(kind), Some(Value::Object(value))) = (own.clone(), obj.get("value")) {
        let mut out = Map::new();
        out.insert("type".into(), kind.into());
        for (k, v) in value {
            if k != "type" {
                out.insert(k.clone(), v.clone());
            }
        }
        if let Some(t) = obj.shift_remove("timestamp") {
            out.insert("timestamp".into(), t);
        }
        return Value::Object(out);
    }
    let extra = match obj.get_mut("metadata") {
        Some(Value::Object(m)) => match m.shift_remove(prefix) {
            Some(Value::Object(extra)) => {
                if m.is_empty() {
                    obj.shift_remove("metadata");
                }
                extra
            }
            Some(other) => {
                m.insert(prefix.to_string(), other);
                Map::new()
            }
            None => Map::new(),
        },
        _ => Map::new(),
    };
    for (k, v) in extra {
        if k != "type" {
            obj.insert(k, v);
        }
    }
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn own_events_travel_as_named_custom_events() {
        let ev = json!({"type": "BUSINESS_DATA_CONTENT", "messageId": "m1",
            "delta": {"output": {"type": "text", "content": "hi"}}, "timestamp": 5});
        let bytes = encode_event_as(&ev, Some("hai")).unwrap();
        let plain = decode_event(&bytes).unwrap();
        assert_eq!(plain["type"], "CUSTOM");
        assert_eq!(plain["name"], "hai:BUSINESS_DATA_CONTENT");
        assert_eq!(
            plain["value"],
            json!({"messageId": "m1", "delta": {"output": {"type": "text", "content": "hi"}}})
        );
        assert_eq!(plain["timestamp"], 5);
        assert_eq!(decode_event_as(&bytes, Some("hai")).unwrap(), ev);
        // An AG-UI reader keeps the CUSTOM event.
        assert_eq!(decode_event_as(&bytes, None).unwrap(), plain);
    }

    #[test]
    fn fields_agui_lacks_travel_in_metadata() {
        let ev = json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r",
            "messageId": "m1", "role": "assistant", "timestamp": 7});
        let bytes = encode_event_as(&ev, Some("hai")).unwrap();
        let plain = decode_event(&bytes).unwrap();
        assert_eq!(
            plain["metadata"],
            json!({"hai": {"messageId": "m1", "role": "assistant"}})
        );
        assert_eq!(decode_event_as(&bytes, Some("hai")).unwrap(), ev);
        // Other metadata stays.
        let ev = json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
            "role": "assistant", "metadata": {"k": 1}});
        let back = decode_event_as(&encode_event_as(&ev, Some("hai")).unwrap(), Some("hai"));
        assert_eq!(back.unwrap(), ev);
    }

    #[test]
    fn without_a_prefix_an_unknown_type_is_refused() {
        let ev = json!({"type": "BUSINESS_DATA_START", "messageId": "m"});
        assert_eq!(
            encode_event_as(&ev, None),
            Err(Error::UnknownEventType("BUSINESS_DATA_START".into()))
        );
    }

    #[test]
    fn a_custom_event_of_another_name_is_left_alone() {
        for ev in [
            json!({"type": "CUSTOM", "name": "other:X", "value": {"a": 1}}),
            json!({"type": "CUSTOM", "name": "hai:X", "value": "not an object"}),
            json!({"type": "CUSTOM", "name": "hai:", "value": {}}),
        ] {
            let bytes = encode_event_as(&ev, Some("hai")).unwrap();
            assert_eq!(
                decode_event_as(&bytes, Some("hai")).unwrap(),
                decode_event(&bytes).unwrap()
            );
        }
    }
}
