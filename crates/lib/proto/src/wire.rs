//! The protobuf wire, driven by the schema's descriptors: JSON objects in,
//! message bytes out, and back.
//!
//! Why not the prost structs: the reference encoder writes a
//! `google.protobuf.Struct`'s entries in the JavaScript object's key order,
//! and prost-types keeps a Struct in a `BTreeMap` (sorted), so bytes made from
//! prost structs differ from @ag-ui/proto's whenever an object's keys are not
//! sorted. Walking the descriptor with the JSON object in hand keeps the order
//! and follows ts-proto's rules field by field:
//! - fields go out in declaration order;
//! - a plain (non-`optional`) scalar is written unless it holds its default
//!   (`""`, `0`, `false`, the enum's first value);
//! - an `optional` scalar and a message field are written when present;
//! - a repeated field writes each element;
//! - JSON `null` counts as absent (the reference drops optional nulls before
//!   encoding), except inside a `Value`, where it is `NullValue`.

// The codec looks names up for every event: a fast hash (the keys are the
// schema's own names, never input).
use foldhash::HashMap;
use std::sync::OnceLock;

use prost::encoding::decode_varint;
use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorSet};
use serde_json::{Map, Number, Value};

use crate::Error;

pub(crate) const DESCRIPTOR: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ag_ui_descriptor.bin"));

/// Nesting allowed in a message being decoded (and in JSON being encoded):
/// deep enough for any real state document, shallow enough that a hostile
/// input cannot exhaust the stack.
pub const MAX_DEPTH: usize = 64;

pub(crate) struct Schema {
    messages: HashMap<String, DescriptorProto>,
    /// EventType enum: name -> number, and back.
    pub event_types: HashMap<String, i32>,
    pub event_type_names: HashMap<i32, String>,
    pub patch_ops: HashMap<String, i32>,
    pub patch_op_names: HashMap<i32, String>,
}

pub(crate) fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        // The bytes are the build script's own output: failing to read them is a
        // build defect, not an input error.
        let set = FileDescriptorSet::decode(DESCRIPTOR).expect("descriptor set from build.rs");
        let mut messages = HashMap::default();
        let mut event_types = HashMap::default();
        let mut patch_ops = HashMap::default();
        fn walk(prefix: &str, m: &DescriptorProto, out: &mut HashMap<String, DescriptorProto>) {
            let name = format!("{prefix}.{}", m.name());
            for n in &m.nested_type {
                walk(&name, n, out);
            }
            out.insert(name, m.clone());
        }
        for file in &set.file {
            let prefix = format!(".{}", file.package());
            for m in &file.message_type {
                walk(&prefix, m, &mut messages);
            }
            for e in &file.enum_type {
                let target = match e.name() {
                    "EventType" => &mut event_types,
                    "JsonPatchOperationType" => &mut patch_ops,
                    _ => continue,
                };
                for v in &e.value {
                    target.insert(v.name().to_string(), v.number());
                }
            }
        }
        let flip = |m: &HashMap<String, i32>| m.iter().map(|(k, v)| (*v, k.clone())).collect();
        Schema {
            event_type_names: flip(&event_types),
            patch_op_names: flip(&patch_ops),
            messages,
            event_types,
            patch_ops,
        }
    })
}

impl Schema {
    pub fn message(&self, name: &str) -> &DescriptorProto {
        // Names come from the schema itself (field type names) or from this crate.
        &self.messages[name]
    }
}

/// The JSON key of a schema field (its [`camel`] name), computed once per
/// name: the codec looks it up for every field of every message.
pub(crate) fn key(f: &FieldDescriptorProto) -> &'static str {
    static KEYS: OnceLock<foldhash::HashMap<String, &'static str>> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        let mut keys = foldhash::HashMap::default();
        for m in schema().messages.values() {
            for f in &m.field {
                keys.entry(f.name().to_string()).or_insert_with(|| {
                    // Leaked once per field name of the schema (a few hundred
                    // bytes), for the process's life.
                    &*Box::leak(camel(f.name()).into_boxed_str())
                });
            }
        }
        keys
    });
    match keys.get(f.name()) {
        Some(k) => k,
        // Every field this codec sees is the schema's.
        None => "",
    }
}

/// ts-proto's property name for a field: `tool_call_id` -> `toolCallId`.
pub(crate) fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

const VALUE: &str = ".google.protobuf.Value";
const STRUCT: &str = ".google.protobuf.Struct";
const LIST: &str = ".google.protobuf.ListValue";

/// A varint, written straight into the buffer (prost's generic writer goes
/// through `BufMut` a byte at a time).
#[inline]
pub(crate) fn encode_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_tag(out: &mut Vec<u8>, number: i32, wire: u8) {
    encode_varint(((number as u64) << 3) | u64::from(wire), out);
}

fn put_len(out: &mut Vec<u8>, number: i32, body: &[u8]) {
    put_tag(out, number, 2);
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// The array index a key is to JavaScript, if it is one.
fn array_index(key: &str) -> Option<u32> {
    if key == "0" {
        return Some(0);
    }
    if key.starts_with('0') || key.is_empty() || !key.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    key.parse::<u32>().ok().filter(|n| *n != u32::MAX)
}

/// The order JavaScript gives an object's keys: array-index keys first,
/// ascending, then the rest as inserted. The reference writes Struct entries
/// (and so every free-form JSON object) in that order.
pub(crate) fn js_order<'a>(
    entries: impl Iterator<Item = (&'a str, &'a Value)>,
) -> Vec<(&'a str, &'a Value)> {
    let mut indexed: Vec<(u32, (&str, &Value))> = Vec::new();
    let mut rest = Vec::new();
    for (k, v) in entries {
        match array_index(k) {
            Some(n) => indexed.push((n, (k, v))),
            None => rest.push((k, v)),
        }
    }
    indexed.sort_by_key(|(n, _)| *n);
    indexed.into_iter().map(|(_, kv)| kv).chain(rest).collect()
}

/// Writes a length-delimited field: its key, then what `body` writes, its
/// length put in front afterwards. One byte is set aside for the length (most
/// bodies here are shorter than 128 bytes); a longer body is moved up to make
/// room. So nested values are written in one pass into one buffer, with no
/// buffer per level and no length computed twice.
pub(crate) fn len_delimited(
    out: &mut Vec<u8>,
    number: i32,
    body: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
) -> Result<(), Error> {
    put_tag(out, number, 2);
    let at = out.len();
    out.push(0);
    body(out)?;
    let len = out.len() - at - 1;
    if len < 0x80 {
        if let Some(b) = out.get_mut(at) {
            *b = len as u8;
        }
    } else {
        let mut varint = Vec::with_capacity(10);
        encode_varint(len as u64, &mut varint);
        out.splice(at..at + 1, varint);
    }
    Ok(())
}

/// Writes a JSON value as `google.protobuf.Value` (its body, no tag).
pub(crate) fn encode_value(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep);
    }
    match v {
        Value::Null => {
            put_tag(out, 1, 0);
            encode_varint(0, out);
        }
        Value::Number(n) => {
            put_tag(out, 2, 1);
            out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_le_bytes());
        }
        Value::String(s) => put_len(out, 3, s.as_bytes()),
        Value::Bool(b) => {
            put_tag(out, 4, 0);
            encode_varint(u64::from(*b), out);
        }
        Value::Object(map) => {
            len_delimited(out, 5, |out| encode_struct(map, depth + 1, out))?;
        }
        Value::Array(items) => {
            len_delimited(out, 6, |out| {
                for item in items {
                    len_delimited(out, 1, |out| encode_value(item, depth + 1, out))?;
                }
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// Writes a JSON object as `google.protobuf.Struct` (its body, no tag).
pub(crate) fn encode_struct(
    map: &Map<String, Value>,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    encode_entries(map.iter().map(|(k, v)| (k.as_str(), v)), depth, out)
}

/// [`encode_struct`] of some entries of an object.
pub(crate) fn encode_entries<'a>(
    entries: impl Iterator<Item = (&'a str, &'a Value)> + Clone,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let entry = |out: &mut Vec<u8>, k: &str, v: &Value| {
        len_delimited(out, 1, |out| {
            // ts-proto leaves a key equal to its default out of the entry.
            if !k.is_empty() {
                put_len(out, 1, k.as_bytes());
            }
            len_delimited(out, 2, |out| encode_value(v, depth + 1, out))
        })
    };
    // JavaScript's order differs from insertion order only when a key is an
    // array index: the common case needs no sorted copy.
    if entries.clone().any(|(k, _)| array_index(k).is_some()) {
        for (k, v) in js_order(entries) {
            entry(out, k, v)?;
        }
    } else {
        for (k, v) in entries {
            entry(out, k, v)?;
        }
    }
    Ok(())
}

fn is_optional(f: &FieldDescriptorProto) -> bool {
    f.proto3_optional.unwrap_or(false) || f.oneof_index.is_some()
}

/// Writes `obj` as message `type_name` (its body, no tag).
pub(crate) fn encode_message(
    type_name: &str,
    obj: &Map<String, Value>,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep);
    }
    let desc = schema().message(type_name);
    for f in &desc.field {
        // null is absent, except for a Value, where it is NullValue (the
        // reference drops optional nulls first, and Value.wrap(null) is null).
        let Some(v) = obj
            .get(key(f))
            .filter(|v| !v.is_null() || (f.type_name() == VALUE && f.label() != Label::Repeated))
        else {
            continue;
        };
        if f.label() == Label::Repeated {
            let Value::Array(items) = v else {
                return Err(Error::field(f.name(), "an array"));
            };
            for item in items {
                encode_field(f, item, true, depth, out)?;
            }
        } else {
            encode_field(f, v, is_optional(f), depth, out)?;
        }
    }
    Ok(())
}

fn encode_field(
    f: &FieldDescriptorProto,
    v: &Value,
    always: bool,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let n = f.number();
    match f.r#type() {
        Type::String => {
            let Value::String(s) = v else {
                return Err(Error::field(f.name(), "a string"));
            };
            if always || !s.is_empty() {
                put_len(out, n, s.as_bytes());
            }
        }
        Type::Int64 | Type::Int32 | Type::Enum => {
            let i = v
                .as_i64()
                .or_else(|| v.as_f64().filter(|x| x.fract() == 0.0).map(|x| x as i64))
                .ok_or_else(|| Error::field(f.name(), "an integer"))?;
            if always || i != 0 {
                put_tag(out, n, 0);
                encode_varint(i as u64, out);
            }
        }
        Type::Bool => {
            let Value::Bool(b) = v else {
                return Err(Error::field(f.name(), "a boolean"));
            };
            if always || *b {
                put_tag(out, n, 0);
                encode_varint(u64::from(*b), out);
            }
        }
        Type::Double => {
            let x = v
                .as_f64()
                .ok_or_else(|| Error::field(f.name(), "a number"))?;
            if always || x != 0.0 {
                put_tag(out, n, 1);
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        Type::Message => {
            let mut body = Vec::new();
            match f.type_name() {
                VALUE => encode_value(v, depth + 1, &mut body)?,
                STRUCT => {
                    let Value::Object(map) = v else {
                        return Err(Error::field(f.name(), "an object"));
                    };
                    encode_struct(map, depth + 1, &mut body)?;
                }
                name => {
                    let Value::Object(map) = v else {
                        return Err(Error::field(f.name(), "an object"));
                    };
                    encode_message(name, map, depth + 1, &mut body)?;
                }
            }
            put_len(out, n, &body);
        }
        // The schema uses no other scalar types.
        _ => return Err(Error::field(f.name(), "a type this codec knows")),
    }
    Ok(())
}

/// A cursor over message bytes.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, Error> {
        // Most varints here (keys, short lengths) are one byte.
        if let Some((&b, rest)) = self.buf.split_first() {
            if b < 0x80 {
                self.buf = rest;
                return Ok(u64::from(b));
            }
        }
        decode_varint(&mut self.buf).map_err(|_| Error::Malformed("bad varint"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if n > self.buf.len() {
            return Err(Error::Malformed("field runs past the end"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn len_delimited(&mut self) -> Result<&'a [u8], Error> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| Error::Malformed("length"))?;
        self.take(n)
    }

    /// Next field: number, wire type, and for length-delimited the payload,
    /// for varint the value, for fixed64 the raw 8 bytes.
    fn field(&mut self) -> Result<(u32, Raw<'a>), Error> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| Error::Malformed("field number"))?;
        if number == 0 {
            return Err(Error::Malformed("field number 0"));
        }
        let raw = match key & 7 {
            0 => Raw::Varint(self.varint()?),
            1 => Raw::Fixed64(self.take(8)?),
            2 => Raw::Bytes(self.len_delimited()?),
            5 => Raw::Fixed32,
            _ => return Err(Error::Malformed("unsupported wire type")),
        };
        if let Raw::Fixed32 = raw {
            self.take(4)?;
        }
        Ok((number, raw))
    }
}

enum Raw<'a> {
    Varint(u64),
    Fixed64(&'a [u8]),
    Bytes(&'a [u8]),
    Fixed32,
}

fn spend(budget: &mut usize, n: usize) -> Result<(), Error> {
    *budget = budget.checked_sub(n).ok_or(Error::TooLarge)?;
    Ok(())
}

/// The largest integer a JavaScript number holds exactly; the reference turns
/// an int64 into a number and refuses one above this.
const MAX_SAFE: i64 = (1 << 53) - 1;

fn decoded_string(b: &[u8]) -> Value {
    Value::String(lossy(b))
}

/// The reference reads strings with a non-fatal TextDecoder: invalid UTF-8
/// becomes U+FFFD. Valid text (nearly all) takes the fast check.
fn lossy(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(b).into_owned(),
    }
}

/// Reads a `google.protobuf.Value` body; `None` when no kind is set (the
/// reference unwraps that to `undefined`).
pub(crate) fn decode_value(
    buf: &[u8],
    depth: usize,
    budget: &mut usize,
) -> Result<Option<Value>, Error> {
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep);
    }
    spend(budget, 1)?;
    let mut r = Reader { buf };
    let mut kind: Option<Value> = None;
    while !r.buf.is_empty() {
        let (n, raw) = r.field()?;
        kind = match (n, raw) {
            (1, Raw::Varint(_)) => Some(Value::Null),
            (2, Raw::Fixed64(b)) => {
                let x = f64::from_le_bytes(b.try_into().map_err(|_| Error::Malformed("double"))?);
                // JSON has no NaN or infinity; the reference's JSON.stringify would
                // write null for them.
                Some(Number::from_f64(x).map_or(Value::Null, |n| {
                    if x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 {
                        Value::Number((x as i64).into())
                    } else {
                        Value::Number(n)
                    }
                }))
            }
            (3, Raw::Bytes(b)) => Some(decoded_string(b)),
            (4, Raw::Varint(v)) => Some(Value::Bool(v != 0)),
            (5, Raw::Bytes(b)) => {
                // A repeated arm merges, as protobuf does.
                let mut map = match kind {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                decode_struct_into(b, depth + 1, budget, &mut map)?;
                Some(Value::Object(map))
            }
            (6, Raw::Bytes(b)) => {
                let mut items = match kind {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                };
                decode_list_into(b, depth + 1, budget, &mut items)?;
                Some(Value::Array(items))
            }
            _ => kind,
        };
    }
    Ok(kind)
}

fn decode_list_into(
    buf: &[u8],
    depth: usize,
    budget: &mut usize,
    items: &mut Vec<Value>,
) -> Result<(), Error> {
    let mut r = Reader { buf };
    while !r.buf.is_empty() {
        if let (1, Raw::Bytes(b)) = r.field()? {
            // A kindless Value in a list is `undefined`, which JSON writes as null.
            items.push(decode_value(b, depth + 1, budget)?.unwrap_or(Value::Null));
        }
    }
    Ok(())
}

pub(crate) fn decode_struct_into(
    buf: &[u8],
    depth: usize,
    budget: &mut usize,
    map: &mut Map<String, Value>,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep);
    }
    let mut r = Reader { buf };
    while !r.buf.is_empty() {
        let (1, Raw::Bytes(entry)) = r.field()? else {
            continue;
        };
        let mut e = Reader { buf: entry };
        let mut key = String::new();
        let mut value = None;
        while !e.buf.is_empty() {
            match e.field()? {
                (1, Raw::Bytes(b)) => key = lossy(b),
                (2, Raw::Bytes(b)) => value = decode_value(b, depth + 1, budget)?,
                _ => {}
            }
        }
        if let Some(v) = value {
            spend(budget, 1)?;
            map.insert(key, v);
        }
    }
    Ok(())
}

/// What a field decodes to before ts-proto's defaults: `None` for a field
/// absent from the bytes.
pub(crate) fn decode_message(
    type_name: &str,
    buf: &[u8],
    depth: usize,
) -> Result<Map<String, Value>, Error> {
    let mut obj = Map::new();
    // The values a JSON text of this size may make (the core's rule for what
    // an event may cost parsed); every message object spends its default
    // fields too.
    let mut budget = babelgate_core::cost::value_budget(buf.len());
    decode_message_into(type_name, buf, depth, &mut budget, &mut obj)?;
    Ok(obj)
}

/// Reads message `type_name` into `obj`, which starts as ts-proto's
/// `createBase…()`: every plain scalar at its default, every repeated field
/// empty, in declaration order; optional and message fields appear only when
/// present. Unknown fields and fields of the wrong wire type are skipped, as
/// ts-proto does.
fn decode_message_into(
    type_name: &str,
    buf: &[u8],
    depth: usize,
    budget: &mut usize,
    obj: &mut Map<String, Value>,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep);
    }
    let desc = schema().message(type_name);
    spend(budget, desc.field.len() + 1)?;
    if obj.is_empty() {
        for f in &desc.field {
            let default = if f.label() == Label::Repeated {
                Value::Array(Vec::new())
            } else if is_optional(f) || f.r#type() == Type::Message {
                continue;
            } else {
                match f.r#type() {
                    Type::String => Value::String(String::new()),
                    Type::Bool => Value::Bool(false),
                    _ => Value::Number(0.into()),
                }
            };
            obj.insert(key(f).to_string(), default);
        }
    }
    let mut r = Reader { buf };
    while !r.buf.is_empty() {
        let (n, raw) = r.field()?;
        let Some(f) = desc.field.iter().find(|f| f.number() == n as i32) else {
            continue;
        };
        let key = key(f);
        let value = match (f.r#type(), raw) {
            (Type::String, Raw::Bytes(b)) => decoded_string(b),
            (Type::Int64 | Type::Int32 | Type::Enum, Raw::Varint(v)) => {
                let i = if f.r#type() == Type::Int64 {
                    v as i64
                } else {
                    i64::from(v as i32)
                };
                if !(-MAX_SAFE..=MAX_SAFE).contains(&i) {
                    return Err(Error::Malformed("int64 beyond a JavaScript number"));
                }
                Value::Number(i.into())
            }
            (Type::Bool, Raw::Varint(v)) => Value::Bool(v != 0),
            (Type::Double, Raw::Fixed64(b)) => {
                let x = f64::from_le_bytes(b.try_into().map_err(|_| Error::Malformed("double"))?);
                Number::from_f64(x).map_or(Value::Null, Value::Number)
            }
            (Type::Message, Raw::Bytes(b)) => match f.type_name() {
                VALUE => match decode_value(b, depth + 1, budget)? {
                    Some(v) => v,
                    None => continue,
                },
                STRUCT => {
                    let mut map = match obj.get_mut(key) {
                        Some(Value::Object(m)) if f.label() != Label::Repeated => std::mem::take(m),
                        _ => Map::new(),
                    };
                    decode_struct_into(b, depth + 1, budget, &mut map)?;
                    Value::Object(map)
                }
                LIST => {
                    let mut items = Vec::new();
                    decode_list_into(b, depth + 1, budget, &mut items)?;
                    Value::Array(items)
                }
                name => {
                    // A singular message field seen twice merges (protobuf's rule,
                    // which the reference applies before decoding).
                    let mut inner = match obj.get_mut(key) {
                        Some(Value::Object(m)) if f.label() != Label::Repeated => std::mem::take(m),
                        _ => Map::new(),
                    };
                    decode_message_into(name, b, depth + 1, budget, &mut inner)?;
                    Value::Object(inner)
                }
            },
            _ => continue,
        };
        if f.label() == Label::Repeated {
            if let Some(Value::Array(items)) = obj.get_mut(key) {
                items.push(value);
            }
        } else {
            obj.insert(key.to_string(), value);
        }
    }
    // Keys in declaration order, as ts-proto's createBase lays them out
    // (absent optional fields hold `undefined` there, which JSON drops).
    let mut ordered = Map::new();
    for f in &desc.field {
        if let Some((k, v)) = obj.shift_remove_entry(key(f)) {
            ordered.insert(k, v);
        }
    }
    *obj = ordered;
    Ok(())
}
