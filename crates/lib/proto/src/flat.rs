//! The events that make most of a stream (text and argument deltas, starts,
//! ends), encoded and read without the descriptor walk or a JSON value in
//! between: an event is *flat* when its message holds the base event and
//! string fields only. Which events are flat, and their fields' numbers and
//! order, come from the schema's descriptors once, so this path can never
//! disagree with the schema; what it gives is byte for byte what the general
//! codec gives (`tests/flat.rs` holds them to each other). Anything else (a
//! `rawEvent`, `metadata`, a field this event does not have, a value that is
//! not a string, a duplicate field) is left to the general codec.

use std::sync::OnceLock;

use foldhash::HashMap;

use prost::encoding::{decode_varint, encoded_len_varint};

use crate::wire::encode_varint;
use prost_types::field_descriptor_proto::{Label, Type};
use serde_json::{Map, Value};

use crate::wire::{camel, schema};

/// JavaScript's largest safe integer.
const MAX_SAFE: i64 = 9_007_199_254_740_991;
const BASE_EVENT: &str = ".ag_ui.BaseEvent";
/// No flat event of the schema has more string fields than this.
const MAX_FIELDS: usize = 8;

/// One flat event type.
#[derive(Debug)]
pub struct Shape {
    /// The AG-UI event type, `TEXT_MESSAGE_CONTENT`.
    pub event_type: &'static str,
    /// The envelope's oneof field number for it.
    arm: u32,
    /// `EventType`'s number for it.
    type_number: i32,
    /// Its string fields in declaration order: (JSON name, number, optional).
    fields: Vec<(&'static str, u32, bool)>,
    /// Repeated fields the flat form requires absent (`TOOL_CALL_RESULT`'s
    /// content parts: the general codec turns their absence into nothing
    /// only when the string content is there, so that one is required).
    absent: Vec<u32>,
    required: Option<usize>,
}

struct Shapes {
    shapes: Vec<Shape>,
    by_type: HashMap<&'static str, usize>,
    /// Indexed by the envelope's arm number.
    by_arm: Vec<Option<usize>>,
}

/// The one event with a repeated field whose flat form is still read and
/// written in place, and its field that must then be present.
const RESULT: (&str, &str) = ("TOOL_CALL_RESULT", "content");

fn shapes() -> &'static Shapes {
    static SHAPES: OnceLock<Shapes> = OnceLock::new();
    SHAPES.get_or_init(|| {
        let s = schema();
        let mut shapes = Vec::new();
        let mut by_type = HashMap::default();
        let mut by_arm = Vec::new();
        for arm in &s.message(".ag_ui.Event").field {
            let arm_name = camel(arm.name());
            let Some(event_type) = s
                .event_types
                .keys()
                .find(|t| camel(&t.to_ascii_lowercase()) == arm_name)
            else {
                continue;
            };
            let desc = s.message(arm.type_name());
            let mut fields = Vec::new();
            let mut absent = Vec::new();
            let mut flat = desc
                .field
                .first()
                .is_some_and(|f| f.type_name() == BASE_EVENT);
            for f in desc.field.iter().skip(1) {
                if f.label() == Label::Repeated && event_type == RESULT.0 {
                    absent.push(f.number() as u32);
                    continue;
                }
                if f.r#type() != Type::String || f.label() == Label::Repeated {
                    flat = false;
                    break;
                }
                let optional = f.proto3_optional.unwrap_or(false) || f.oneof_index.is_some();
                let name: &'static str = Box::leak(camel(f.name()).into_boxed_str());
                fields.push((name, f.number() as u32, optional));
            }
            if !flat || fields.len() > MAX_FIELDS {
                continue;
            }
            // Leaked once per flat type, for the process's life: the schema's
            // names as `&'static str`, so lookups borrow nothing.
            let event_type: &'static str = Box::leak(event_type.clone().into_boxed_str());
            let required = (event_type == RESULT.0)
                .then(|| fields.iter().position(|(n, ..)| *n == RESULT.1))
                .flatten();
            let shape = Shape {
                event_type,
                arm: arm.number() as u32,
                type_number: s.event_types[event_type],
                fields,
                absent,
                required,
            };
            let arm = shape.arm as usize;
            if by_arm.len() <= arm {
                by_arm.resize(arm + 1, None);
            }
            by_arm[arm] = Some(shapes.len());
            by_type.insert(event_type, shapes.len());
            shapes.push(shape);
        }
        Shapes {
            shapes,
            by_type,
            by_arm,
        }
    })
}

/// Whether events of `event_type` are flat.
pub fn is_flat(event_type: &str) -> bool {
    shapes().by_type.contains_key(event_type)
}

fn by_type(event_type: &str) -> Option<&'static Shape> {
    let s = shapes();
    s.shapes.get(*s.by_type.get(event_type)?)
}

fn by_arm(arm: u32) -> Option<&'static Shape> {
    let s = shapes();
    s.shapes.get((*s.by_arm.get(arm as usize)?)?)
}

fn key_len(number: u32) -> usize {
    encoded_len_varint(u64::from(number) << 3)
}

fn put_key(number: u32, wire: u8, out: &mut Vec<u8>) {
    put_varint((u64::from(number) << 3) | u64::from(wire), out);
}

/// A varint; most here (keys, short lengths) are one byte.
#[inline]
fn put_varint(v: u64, out: &mut Vec<u8>) {
    if v < 0x80 {
        out.push(v as u8);
    } else {
        encode_varint(v, out);
    }
}

/// Appends `event` (an AG-UI event's JSON object) as one `ag_ui.Event`
/// message when it is flat;
/// `None`, with nothing written, when it is not.
pub(crate) fn encode(obj: &Map<String, Value>, out: &mut Vec<u8>) -> Option<()> {
    // By iteration, not `get`: a map lookup hashes the key with SipHash,
    // which costs more than the few comparisons (`type` comes first).
    let ty = obj.iter().find(|(k, _)| k.as_str() == "type")?.1.as_str()?;
    let fields = obj.iter().map(|(k, v)| {
        let v = match v {
            Value::String(s) => Scalar::Str(s),
            v => v.as_i64().map_or(Scalar::Other, Scalar::Int),
        };
        (k.as_str(), v)
    });
    encode_fields(ty, fields, out)
}

/// A field's value as the flat form takes it.
enum Scalar<'a> {
    Str(&'a str),
    Int(i64),
    Other,
}

/// [`encode`] from the event's JSON text, with no JSON value built (the
/// gateway's own encoders write the text; a binary client gets it as
/// protobuf). `None`, with nothing written, where `encode` would be `None`
/// for the parsed object, and also where the text is anything but one object
/// of strings and integers with no key twice: the general codec decides then.
pub(crate) fn encode_json(text: &str, out: &mut Vec<u8>) -> Option<()> {
    let mut de = serde_json::Deserializer::from_str(text);
    let json::Entries(entries) = serde::Deserialize::deserialize(&mut de).ok()?;
    de.end().ok()?;
    // A repeated key is the last one's in a parsed object: left to it.
    for (i, (k, _)) in entries.iter().enumerate() {
        if entries.iter().take(i).any(|(x, _)| x == k) {
            return None;
        }
    }
    let ty = entries.iter().find_map(|(k, v)| match v {
        json::Scalar::Str(s) if k == "type" => Some(s.as_ref()),
        _ => None,
    })?;
    let fields = entries.iter().map(|(k, v)| {
        let v = match v {
            json::Scalar::Str(s) => Scalar::Str(s),
            // A dialect's prefix reads the message back, which refuses an
            // integer JavaScript cannot hold: left to the general codec.
            json::Scalar::Int(i) if (-MAX_SAFE..=MAX_SAFE).contains(i) => Scalar::Int(*i),
            json::Scalar::Int(_) => Scalar::Other,
        };
        (k.as_ref(), v)
    });
    encode_fields(ty, fields, out)
}

/// A flat event's JSON read without a JSON value: its keys and its string
/// and integer values, borrowed from the text where nothing was escaped.
mod json {
    use std::borrow::Cow;
    use std::fmt;

    use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};

    use super::{by_type, Shape, MAX_FIELDS};

    pub(super) enum Scalar<'a> {
        Str(Cow<'a, str>),
        Int(i64),
    }

    pub(super) struct Entries<'a>(pub(super) Vec<(Cow<'a, str>, Scalar<'a>)>);

    struct Key<'a>(Cow<'a, str>);

    struct Text;

    impl<'de> Visitor<'de> for Text {
        type Value = Cow<'de, str>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Cow::Borrowed(v))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Cow::Owned(v.to_owned()))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Cow::Owned(v))
        }
    }

    impl<'de> Deserialize<'de> for Key<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_str(Text).map(Key)
        }
    }

    struct ScalarVisitor;

    impl<'de> Visitor<'de> for ScalarVisitor {
        type Value = Scalar<'de>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string or an integer")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Scalar::Str(Cow::Borrowed(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Scalar::Str(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Scalar::Str(Cow::Owned(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Scalar::Int(v))
        }
        // Past i64 a parsed number is no `as_i64` either: not flat.
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            i64::try_from(v)
                .map(Scalar::Int)
                .map_err(|_| E::custom("past i64"))
        }
    }

    impl<'de> Deserialize<'de> for Scalar<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(ScalarVisitor)
        }
    }

    struct EntriesVisitor;

    impl<'de> Visitor<'de> for EntriesVisitor {
        type Value = Entries<'de>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            // `type`, `timestamp` and the fields: more is not flat.
            let mut entries = Vec::with_capacity(4);
            // Known once `type` is read (it comes first from the encoders):
            // an event that is not flat stops being read there, and the
            // general codec parses it without this one's parse before it.
            let mut shape: Option<&'static Shape> = None;
            let not_flat = || de::Error::custom("not flat");
            while let Some(Key(k)) = map.next_key()? {
                if entries.len() == MAX_FIELDS + 2 {
                    return Err(not_flat());
                }
                let v: Scalar = map.next_value()?;
                match (k.as_ref(), &v) {
                    ("type", Scalar::Str(t)) => shape = Some(by_type(t).ok_or_else(not_flat)?),
                    ("type", _) => return Err(not_flat()),
                    ("timestamp", _) => {}
                    (k, _) => {
                        if shape.is_some_and(|s| !s.fields.iter().any(|(n, ..)| *n == k)) {
                            return Err(not_flat());
                        }
                    }
                }
                entries.push((k, v));
            }
            Ok(Entries(entries))
        }
    }

    impl<'de> Deserialize<'de> for Entries<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(EntriesVisitor)
        }
    }
}

fn encode_fields<'a>(
    ty: &str,
    fields: impl Iterator<Item = (&'a str, Scalar<'a>)>,
    out: &mut Vec<u8>,
) -> Option<()> {
    let shape = by_type(ty)?;
    let mut values: [Option<&str>; MAX_FIELDS] = [None; MAX_FIELDS];
    let mut timestamp = None;
    for (k, v) in fields {
        match (k, v) {
            ("type", _) => {}
            ("timestamp", Scalar::Int(t)) => timestamp = Some(t),
            ("timestamp", _) => return None,
            (k, Scalar::Str(s)) => {
                let i = shape.fields.iter().position(|(name, ..)| *name == k)?;
                *values.get_mut(i)? = Some(s);
            }
            _ => return None,
        }
    }
    // ts-proto's rules: a plain field holding "" and an enum holding its
    // first value are not written; an optional one is when present.
    let written = |i: usize, optional: bool| -> Option<&str> {
        values
            .get(i)
            .copied()
            .flatten()
            .filter(|s| optional || !s.is_empty())
    };
    let type_number = shape.type_number as u64;
    let mut base_len = 0;
    if type_number != 0 {
        base_len += 1 + encoded_len_varint(type_number);
    }
    if let Some(t) = timestamp {
        base_len += 1 + encoded_len_varint(t as u64);
    }
    let mut body_len = 1 + encoded_len_varint(base_len as u64) + base_len;
    for (i, (_, number, optional)) in shape.fields.iter().enumerate() {
        if let Some(s) = written(i, *optional) {
            body_len += key_len(*number) + encoded_len_varint(s.len() as u64) + s.len();
        }
    }
    let total = key_len(shape.arm) + encoded_len_varint(body_len as u64) + body_len;
    out.reserve(total);
    put_key(shape.arm, 2, out);
    put_varint(body_len as u64, out);
    out.push(0x0a);
    put_varint(base_len as u64, out);
    if type_number != 0 {
        out.push(0x08);
        put_varint(type_number, out);
    }
    if let Some(t) = timestamp {
        out.push(0x10);
        put_varint(t as u64, out);
    }
    for (i, (_, number, optional)) in shape.fields.iter().enumerate() {
        if let Some(s) = written(i, *optional) {
            put_key(*number, 2, out);
            put_varint(s.len() as u64, out);
            out.extend_from_slice(s.as_bytes());
        }
    }
    Some(())
}

/// A flat event read in place: its strings borrow the message.
#[derive(Debug)]
pub struct Flat<'a> {
    shape: &'static Shape,
    pub timestamp: Option<i64>,
    values: [Option<&'a str>; MAX_FIELDS],
}

impl<'a> Flat<'a> {
    pub fn event_type(&self) -> &'static str {
        self.shape.event_type
    }

    /// A field as the general decoder gives it: what the message holds; for
    /// an absent plain field its default, `""`; for an absent optional one
    /// (or a name this event does not have) nothing.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        let i = self.shape.fields.iter().position(|(n, ..)| *n == name)?;
        let optional = self.shape.fields.get(i)?.2;
        match self.values.get(i).copied().flatten() {
            Some(v) => Some(v),
            None if optional => None,
            None => Some(""),
        }
    }

    /// Whether every field the message holds, and every plain field (the
    /// general decoder gives those even when absent), is one of `names`.
    pub fn has_only(&self, names: &[&str]) -> bool {
        self.shape
            .fields
            .iter()
            .zip(&self.values)
            .all(|((n, _, optional), v)| names.contains(n) || (*optional && v.is_none()))
    }

    /// The event's JSON object, as [`crate::decode_event`] gives it.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        for (name, ..) in &self.shape.fields {
            if let Some(v) = self.get(name) {
                o.insert((*name).to_string(), v.into());
            }
        }
        o.insert("type".into(), self.shape.event_type.into());
        if let Some(t) = self.timestamp {
            o.insert("timestamp".into(), t.into());
        }
        Value::Object(o)
    }
}

fn field(buf: &mut &[u8]) -> Option<(u32, u8)> {
    let key = decode_varint(buf).ok()?;
    let number = u32::try_from(key >> 3).ok().filter(|n| *n != 0)?;
    Some((number, (key & 7) as u8))
}

fn bytes<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = usize::try_from(decode_varint(buf).ok()?).ok()?;
    if n > buf.len() {
        return None;
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Some(head)
}

/// Reads one `ag_ui.Event` message when it holds a flat event in the plain
/// form (each field once, base event first or anywhere, nothing unknown);
/// `None` leaves it to [`crate::decode_event`], which also says what is
/// wrong with a malformed one.
pub fn read(message: &[u8]) -> Option<Flat<'_>> {
    let (arm, mut body) = envelope(message)?;
    let shape = by_arm(arm)?;
    let mut values: [Option<&str>; MAX_FIELDS] = [None; MAX_FIELDS];
    let mut base: Option<(u64, Option<i64>)> = None;
    while !body.is_empty() {
        let (number, wire) = field(&mut body)?;
        if wire != 2 {
            return None;
        }
        let payload = bytes(&mut body)?;
        if number == 1 {
            if base.is_some() {
                return None;
            }
            base = Some(read_base(payload)?);
            continue;
        }
        if shape.absent.contains(&number) {
            return None;
        }
        let i = shape.fields.iter().position(|(_, n, _)| *n == number)?;
        let slot = values.get_mut(i)?;
        if slot.is_some() {
            return None;
        }
        *slot = Some(std::str::from_utf8(payload).ok()?);
    }
    let (declared, timestamp) = base?;
    if declared != shape.type_number as u64 {
        return None;
    }
    if let Some(i) = shape.required {
        values.get(i).copied().flatten()?;
    }
    Some(Flat {
        shape,
        timestamp,
        values,
    })
}

/// The `ag_ui.Event` envelope: its one arm's number and body (nothing after).
fn envelope(message: &[u8]) -> Option<(u32, &[u8])> {
    let mut buf = message;
    let (arm, wire) = field(&mut buf)?;
    if wire != 2 {
        return None;
    }
    let body = bytes(&mut buf)?;
    buf.is_empty().then_some((arm, body))
}

/// A base event with a type and a timestamp only.
fn read_base(mut buf: &[u8]) -> Option<(u64, Option<i64>)> {
    let mut ty = None;
    let mut timestamp = None;
    while !buf.is_empty() {
        let (number, wire) = field(&mut buf)?;
        if wire != 0 {
            return None;
        }
        let v = decode_varint(&mut buf).ok()?;
        let slot = match number {
            1 => &mut ty,
            2 => &mut timestamp,
            _ => return None,
        };
        if slot.replace(v).is_some() {
            return None;
        }
    }
    // Past JavaScript's safe integers the general decoder refuses it.
    let timestamp = match timestamp.map(|t| t as i64) {
        Some(t) if !(-MAX_SAFE..=MAX_SAFE).contains(&t) => return None,
        t => t,
    };
    Some((ty.unwrap_or(0), timestamp))
}

/// The envelope's arm number and `EventType`'s number of `STATE_DELTA` and
/// `CUSTOM`, looked up once (every such event needs them).
fn numbers_of(event_type: &str) -> Option<(u32, u64)> {
    static NUMBERS: OnceLock<[Option<(u32, u64)>; 2]> = OnceLock::new();
    let lookup = |t: &str| -> Option<(u32, u64)> {
        let arm = super::event::arm_number(t)?;
        let ty = *schema().event_types.get(t)?;
        Some((arm, ty as u64))
    };
    let numbers = NUMBERS.get_or_init(|| [lookup("STATE_DELTA"), lookup("CUSTOM")]);
    match event_type {
        "STATE_DELTA" => numbers[0],
        "CUSTOM" => numbers[1],
        other => lookup(other),
    }
}

/// `STATE_DELTA` (`{type, delta, timestamp?}`, nothing else) in place: its
/// operations written from the JSON objects and read back into them, each
/// value through the codec's `google.protobuf.Value` routines. The general
/// codec gives the same bytes and the same JSON (`tests/flat.rs`).
pub mod state_delta {
    use prost::encoding::{decode_varint, encoded_len_varint};

    use crate::wire::encode_varint;
    use serde_json::{Map, Value};

    use super::{bytes, field, key_len, put_key, MAX_SAFE};
    use crate::wire::{encode_value, len_delimited, schema};

    const TYPE: &str = "STATE_DELTA";

    /// The envelope's arm and `EventType`'s number for `STATE_DELTA`.
    fn numbers() -> Option<(u32, u64)> {
        super::numbers_of(TYPE)
    }

    /// Appends the event as one message, or `None` with nothing written.
    pub(crate) fn encode(obj: &Map<String, Value>, out: &mut Vec<u8>) -> Option<()> {
        if obj.get("type")?.as_str()? != TYPE {
            return None;
        }
        let mut timestamp = None;
        let mut delta = None;
        for (k, v) in obj {
            match k.as_str() {
                "type" => {}
                "timestamp" => timestamp = Some(v.as_i64()?),
                "delta" => delta = Some(v.as_array()?),
                _ => return None,
            }
        }
        let (arm, type_number) = numbers()?;
        // Each operation's body, in one buffer: (end offset) per operation.
        let mut ops = Vec::new();
        let mut ends = Vec::new();
        for op in delta.map(Vec::as_slice).unwrap_or_default() {
            operation(op.as_object()?, &mut ops)?;
            ends.push(ops.len());
        }
        let mut base_len = 1 + encoded_len_varint(type_number);
        if let Some(t) = timestamp {
            base_len += 1 + encoded_len_varint(t as u64);
        }
        let mut body_len = 1 + encoded_len_varint(base_len as u64) + base_len;
        let mut start = 0;
        for &end in &ends {
            body_len += 1 + encoded_len_varint((end - start) as u64) + (end - start);
            start = end;
        }
        let total = key_len(arm) + encoded_len_varint(body_len as u64) + body_len;
        out.reserve(total);
        put_key(arm, 2, out);
        encode_varint(body_len as u64, out);
        out.push(0x0a);
        encode_varint(base_len as u64, out);
        out.push(0x08);
        encode_varint(type_number, out);
        if let Some(t) = timestamp {
            out.push(0x10);
            encode_varint(t as u64, out);
        }
        let mut start = 0;
        for &end in &ends {
            out.push(0x12);
            encode_varint((end - start) as u64, out);
            out.extend_from_slice(ops.get(start..end)?);
            start = end;
        }
        Some(())
    }

    /// One `JsonPatchOperation`'s body: `op` (not written when `add`, the
    /// enum's first value), `path` (not when empty), `from` and `value`
    /// when present (a JSON `null` value is `NullValue`).
    fn operation(o: &Map<String, Value>, out: &mut Vec<u8>) -> Option<()> {
        let (mut op, mut path, mut from, mut value) = (None, None, None, None);
        for (k, v) in o {
            match k.as_str() {
                "op" => op = Some(v.as_str()?),
                "path" => path = Some(v.as_str()?),
                "from" => from = Some(v.as_str()?),
                "value" => value = Some(v),
                _ => return None,
            }
        }
        let n = *schema()
            .patch_ops
            .get(&op.unwrap_or("").to_ascii_uppercase())?;
        if n != 0 {
            out.push(0x08);
            encode_varint(n as u64, out);
        }
        for (number, s) in [(2, path.filter(|p| !p.is_empty())), (3, from)] {
            if let Some(s) = s {
                put_key(number, 2, out);
                encode_varint(s.len() as u64, out);
                out.extend_from_slice(s.as_bytes());
            }
        }
        if let Some(v) = value {
            // The depth the general codec writes a patch value at.
            len_delimited(out, 4, |out| encode_value(v, 3, out)).ok()?;
        }
        Some(())
    }

    /// Reads a `STATE_DELTA` message in the plain form: the operations (as
    /// the general decoder gives them) and the timestamp; `None` leaves it
    /// to the general decoder.
    pub fn read(message: &[u8]) -> Option<(Vec<Value>, Option<i64>)> {
        let (arm_number, type_number) = numbers()?;
        let (arm, mut body) = super::envelope(message)?;
        if arm != arm_number {
            return None;
        }
        // Never more than the general decoder would allow: its budget, less
        // what it spends on the envelope, the event and the base event.
        let mut budget = babelgate_core::cost::value_budget(message.len()).checked_sub(64)?;
        let mut ops = Vec::new();
        let mut base = None;
        while !body.is_empty() {
            let (number, wire) = field(&mut body)?;
            if wire != 2 {
                return None;
            }
            let payload = bytes(&mut body)?;
            match number {
                1 if base.is_none() => base = Some(super::read_base(payload)?),
                2 => {
                    budget = budget.checked_sub(8)?;
                    ops.push(Value::Object(read_operation(payload, &mut budget)?));
                }
                _ => return None,
            }
        }
        let (declared, timestamp) = base?;
        if declared != type_number {
            return None;
        }
        if timestamp.is_some_and(|t| !(-MAX_SAFE..=MAX_SAFE).contains(&t)) {
            return None;
        }
        Some((ops, timestamp))
    }

    fn read_operation(mut buf: &[u8], budget: &mut usize) -> Option<Map<String, Value>> {
        let (mut op, mut path, mut from, mut value) = (None, None, None, None);
        while !buf.is_empty() {
            let (number, wire) = field(&mut buf)?;
            match (number, wire) {
                (1, 0) if op.is_none() => op = Some(decode_varint(&mut buf).ok()?),
                (2, 2) if path.is_none() => {
                    path = Some(std::str::from_utf8(bytes(&mut buf)?).ok()?)
                }
                (3, 2) if from.is_none() => {
                    from = Some(std::str::from_utf8(bytes(&mut buf)?).ok()?)
                }
                (4, 2) if value.is_none() => {
                    value = Some(super::value::read(bytes(&mut buf)?, 3, budget)??);
                }
                _ => return None,
            }
        }
        let n = i32::try_from(op.unwrap_or(0)).ok()?;
        let name = schema().patch_op_names.get(&n)?.to_ascii_lowercase();
        let mut o = Map::new();
        o.insert("op".into(), name.into());
        o.insert("path".into(), path.unwrap_or("").into());
        if let Some(f) = from {
            o.insert("from".into(), f.into());
        }
        if let Some(v) = value {
            o.insert("value".into(), v);
        }
        Some(o)
    }

    /// The event's JSON object, as [`crate::decode_event`] gives it.
    pub fn to_json(ops: Vec<Value>, timestamp: Option<i64>) -> Value {
        let mut o = Map::new();
        o.insert("delta".into(), Value::Array(ops));
        o.insert("type".into(), TYPE.into());
        if let Some(t) = timestamp {
            o.insert("timestamp".into(), t.into());
        }
        Value::Object(o)
    }
}

/// A dialect's own event (one the schema has no message for) as the AG-UI
/// `CUSTOM` event that carries it (see [`crate::encode_event_as`]), written
/// from the event's object and read back into it in place: `name` is
/// `<prefix>:<TYPE>`, `value` the event's other fields as a Struct.
pub mod custom {
    use serde_json::{Map, Value};

    use super::{bytes, field, put_key, put_varint, MAX_SAFE};
    use crate::wire::{encode_entries, len_delimited, schema};

    const TYPE: &str = "CUSTOM";

    fn numbers() -> Option<(u32, u64)> {
        super::numbers_of(TYPE)
    }

    /// Appends the event as one message, or `None` with nothing written.
    pub(crate) fn encode(obj: &Map<String, Value>, prefix: &str, out: &mut Vec<u8>) -> Option<()> {
        let ty = obj.iter().find(|(k, _)| k.as_str() == "type")?.1.as_str()?;
        if schema().event_types.contains_key(ty) {
            return None;
        }
        let timestamp = match obj.iter().find(|(k, _)| k.as_str() == "timestamp") {
            Some((_, t)) => Some(t.as_i64()?),
            None => None,
        };
        let rest = obj
            .iter()
            .filter(|(k, _)| k.as_str() != "type" && k.as_str() != "timestamp")
            .map(|(k, v)| (k.as_str(), v));
        encode_parts(ty, rest, timestamp, prefix, out)
    }

    /// The same from its parts: the event's type, its fields but `type` and
    /// `timestamp` (in the object's order), and its timestamp. What an
    /// encoder calls that has the fields at hand, without building the
    /// object ([`crate::write_own_event`]).
    pub(crate) fn encode_parts<'a>(
        ty: &str,
        rest: impl Iterator<Item = (&'a str, &'a Value)> + Clone,
        timestamp: Option<i64>,
        prefix: &str,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        let (arm, type_number) = numbers()?;
        let start = out.len();
        let written = len_delimited(out, arm as i32, |out| {
            len_delimited(out, 1, |out| {
                if type_number != 0 {
                    out.push(0x08);
                    put_varint(type_number, out);
                }
                if let Some(t) = timestamp {
                    out.push(0x10);
                    put_varint(t as u64, out);
                }
                Ok(())
            })?;
            put_key(2, 2, out);
            put_varint((prefix.len() + 1 + ty.len()) as u64, out);
            out.extend_from_slice(prefix.as_bytes());
            out.push(b':');
            out.extend_from_slice(ty.as_bytes());
            // The value: a Struct of the other fields, at the depths the
            // general codec writes it.
            len_delimited(out, 3, |out| {
                len_delimited(out, 5, |out| encode_entries(rest, 3, out))
            })
        });
        if written.is_err() {
            out.truncate(start);
            return None;
        }
        Some(())
    }

    /// Reads a `CUSTOM` message named `<prefix>:<TYPE>` whose value is an
    /// object, in the plain form, as the dialect's event
    /// ([`crate::decode_event_as`] gives the same); `None` leaves it to the
    /// general decoder.
    pub fn read(message: &[u8], prefix: &str) -> Option<Value> {
        let (arm_number, type_number) = numbers()?;
        let (arm, mut body) = super::envelope(message)?;
        if arm != arm_number {
            return None;
        }
        // Never more than the general decoder would allow (see state_delta).
        let mut budget = babelgate_core::cost::value_budget(message.len()).checked_sub(64)?;
        // The event is built as it is read: `type` first (from the name,
        // which the reference writes before the value), then the value's
        // fields but its own `type`, then the timestamp (in the place of the
        // value's own, if it had one), as `restore` builds it.
        let (mut base, mut out) = (None, None::<Map<String, Value>>);
        let mut seen_value = false;
        while !body.is_empty() {
            let (number, wire) = field(&mut body)?;
            if wire != 2 {
                return None;
            }
            let payload = bytes(&mut body)?;
            match number {
                1 if base.is_none() => base = Some(super::read_base(payload)?),
                2 if out.is_none() && !seen_value => {
                    let kind = std::str::from_utf8(payload)
                        .ok()?
                        .strip_prefix(prefix)?
                        .strip_prefix(':')
                        .filter(|k| !k.is_empty())?;
                    let mut o = Map::new();
                    o.insert("type".into(), kind.into());
                    out = Some(o);
                }
                3 if !seen_value => {
                    seen_value = true;
                    // A Value holding a Struct: spent as the general decoder
                    // spends on the Value, read at the Struct's depth.
                    super::value::spend(&mut budget, 1)?;
                    let (&0x2a, mut rest) = payload.split_first()? else {
                        return None;
                    };
                    let fields = bytes(&mut rest)?;
                    if !rest.is_empty() {
                        return None;
                    }
                    super::value::read_struct_into(
                        fields,
                        3,
                        &mut budget,
                        out.as_mut()?,
                        Some("type"),
                    )?;
                }
                _ => return None,
            }
        }
        let (declared, timestamp) = base?;
        if declared != type_number
            || !seen_value
            || timestamp.is_some_and(|t| !(-MAX_SAFE..=MAX_SAFE).contains(&t))
        {
            return None;
        }
        let mut out = out?;
        if let Some(t) = timestamp {
            out.insert("timestamp".into(), t.into());
        }
        Some(Value::Object(out))
    }
}

/// `google.protobuf.Value` read in the one plain form the reference writes
/// (each Value one field, each Struct entry its key then its value, one-byte
/// tags), with the general decoder's results, limits and budget; anything
/// else is `None`, and the caller leaves the message to the general decoder.
/// A dialect's own events are Struct values, and this is most of reading them.
mod value {
    use serde_json::{Map, Number, Value};

    use super::bytes;
    use crate::wire::MAX_DEPTH;

    pub(super) fn spend(budget: &mut usize, n: usize) -> Option<()> {
        *budget = budget.checked_sub(n)?;
        Some(())
    }

    fn text(b: &[u8]) -> String {
        // Invalid UTF-8 is the general decoder's (lossy) business.
        match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(b).into_owned(),
        }
    }

    /// A Value body: `Ok(None)` when it has no kind (an empty body).
    pub(super) fn read(buf: &[u8], depth: usize, budget: &mut usize) -> Option<Option<Value>> {
        if depth > MAX_DEPTH {
            return None;
        }
        spend(budget, 1)?;
        let Some((&tag, mut rest)) = buf.split_first() else {
            return Some(None);
        };
        let v = match tag {
            // null_value and bool_value: a one-byte varint.
            0x08 | 0x20 => {
                let (&b, tail) = rest.split_first()?;
                if b >= 0x80 {
                    return None;
                }
                rest = tail;
                if tag == 0x08 {
                    Value::Null
                } else {
                    Value::Bool(b != 0)
                }
            }
            0x11 => {
                let (raw, tail) = rest.split_first_chunk::<8>()?;
                rest = tail;
                let x = f64::from_le_bytes(*raw);
                // As the general decoder: integers as integers, NaN and
                // infinities as null.
                Number::from_f64(x).map_or(Value::Null, |n| {
                    if x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 {
                        Value::Number((x as i64).into())
                    } else {
                        Value::Number(n)
                    }
                })
            }
            0x1a => Value::String(text(bytes(&mut rest)?)),
            0x2a => Value::Object(read_struct(bytes(&mut rest)?, depth + 1, budget)?),
            0x32 => {
                let mut list = bytes(&mut rest)?;
                let mut items = Vec::new();
                while let Some((&0x0a, tail)) = list.split_first() {
                    list = tail;
                    // At the depth the general decoder reads them (the
                    // list's own level counts).
                    items.push(read(bytes(&mut list)?, depth + 2, budget)?.unwrap_or(Value::Null));
                }
                if !list.is_empty() {
                    return None;
                }
                Value::Array(items)
            }
            _ => return None,
        };
        // One field only: a second one (a merge, an unknown field) is left
        // to the general decoder.
        rest.is_empty().then_some(Some(v))
    }

    /// A Struct body.
    pub(super) fn read_struct(
        buf: &[u8],
        depth: usize,
        budget: &mut usize,
    ) -> Option<Map<String, Value>> {
        let mut map = Map::new();
        read_struct_into(buf, depth, budget, &mut map, None)?;
        Some(map)
    }

    /// A Struct body's entries into `map`, but those named `skip` (read and
    /// counted all the same).
    pub(super) fn read_struct_into(
        mut buf: &[u8],
        depth: usize,
        budget: &mut usize,
        map: &mut Map<String, Value>,
        skip: Option<&str>,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        while let Some((&0x0a, tail)) = buf.split_first() {
            buf = tail;
            let mut entry = bytes(&mut buf)?;
            let key = match entry.split_first() {
                Some((&0x0a, tail)) => {
                    entry = tail;
                    text(bytes(&mut entry)?)
                }
                _ => String::new(),
            };
            let (&0x12, tail) = entry.split_first()? else {
                return None;
            };
            entry = tail;
            let value = read(bytes(&mut entry)?, depth + 1, budget)?;
            if !entry.is_empty() {
                return None;
            }
            if let Some(v) = value {
                spend(budget, 1)?;
                if skip != Some(key.as_str()) {
                    map.insert(key, v);
                }
            }
        }
        buf.is_empty().then_some(())
    }
}
