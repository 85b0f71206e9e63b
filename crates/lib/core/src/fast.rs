//! Fast paths from declarations: one reader and one writer of the flat JSON
//! events that make most of a stream (a type and a few string fields), driven
//! by each dialect's [`Table`], as `babelgate_proto::flat` is driven by the
//! schema. The reader takes a frame into a core [`Event`] without building a
//! `serde_json::Value`; the writer writes an event's SSE frame without
//! building an object map.
//!
//! What a table does not declare, neither does anything with: the reader
//! refuses a frame of another type, with an unknown, escaped or repeated key,
//! a missing required key, a value that is not a string (or not an integer
//! `timestamp`), a raw control character, a bad escape or bad syntax; the
//! writer declines an event whose kind has no row or whose field does not fit.
//! The adapter then takes its general path, which gives the same events and
//! the same bytes for what these take (the property tests here, and each
//! adapter's check of its table against its general path).
//!
//! A row works out at compile time what the hot loop would otherwise look up
//! per frame (which key fills each field, which go to extra, what a writer
//! needs): the reader is then a scan and a few mask tests, as the hand-written
//! readers were.

use std::borrow::Cow;

use serde_json::Value;

use crate::dialect::Dialect;
use crate::event::{Event, EventKind, Extra, Role};
use crate::json::{skip_ws, string_at, unescape, write_str};

/// The largest integer every JSON reader holds exactly (2^53 - 1).
pub const MAX_SAFE: i64 = (1 << 53) - 1;

/// Where a wire key's value goes in the core event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The event type, compared with each row's `wire` (the table's first
    /// key, written first).
    Type,
    /// [`Event::timestamp`]: read when it is an integer from 0 to
    /// [`MAX_SAFE`] with no sign, fraction or exponent; written when within
    /// ±[`MAX_SAFE`].
    Timestamp,
    MessageId,
    ToolCallId,
    ToolName,
    ParentMessageId,
    Delta,
    /// A [`Role`] by its name.
    Role,
    Name,
    /// A tool result's content, as a string.
    Content,
}

/// How many slots there are.
const SLOTS: usize = 10;

/// The core kinds a row can stand for, with the slots each has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    TextStart,
    TextDelta,
    TextEnd,
    ReasoningStart,
    ReasoningDelta,
    ReasoningEnd,
    ToolCallStart,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallResult,
    StepStarted,
    StepFinished,
}

impl Kind {
    /// The kind of `k`, when a table can stand for it.
    pub fn of(k: &EventKind) -> Option<Kind> {
        Some(view(k)?.0)
    }

    /// The slots of the kind's fields, in the order [`view`] gives their
    /// strings.
    const fn fields(self) -> [Option<Slot>; FIELDS] {
        use Kind as K;
        use Slot as S;
        match self {
            K::TextStart => [Some(S::MessageId), Some(S::Role), Some(S::Name)],
            K::TextDelta | K::ReasoningDelta => [Some(S::MessageId), Some(S::Delta), None],
            K::TextEnd | K::ReasoningStart | K::ReasoningEnd => [Some(S::MessageId), None, None],
            K::ToolCallStart => [
                Some(S::ToolCallId),
                Some(S::ToolName),
                Some(S::ParentMessageId),
            ],
            K::ToolCallArgs => [Some(S::ToolCallId), Some(S::Delta), None],
            K::ToolCallEnd => [Some(S::ToolCallId), None, None],
            K::ToolCallResult => [Some(S::ToolCallId), Some(S::MessageId), Some(S::Content)],
            K::StepStarted | K::StepFinished => [Some(S::Name), None, None],
        }
    }

    /// Where the kind's field for `slot` is among its [`fields`](Self::fields),
    /// or [`NONE`] when it has none (a key read for a slot the kind has
    /// none for is kept in extra, under its wire name, as the general paths
    /// keep it).
    // Evaluated at compile time (from `Row::new`).
    #[allow(clippy::indexing_slicing)]
    const fn field(self, slot: Slot) -> u8 {
        let f = self.fields();
        let mut i = 0;
        while i < FIELDS {
            if let Some(s) = f[i] {
                if s as usize == slot as usize {
                    return i as u8;
                }
            }
            i += 1;
        }
        NONE
    }
}

/// The most fields a kind has.
const FIELDS: usize = 3;

/// The most keys a row has.
const ROW_KEYS: usize = 6;

/// No key (in [`Row::by_slot`]).
const NONE: u8 = u8::MAX;

/// A bit of [`Row::needs`] no event has: the row is never written.
const NEVER: u8 = 1 << FIELDS;

/// The timestamp (in [`Row::fields`]).
const TIMESTAMP: u8 = NONE - 1;

/// One wire event type: its core kind and its keys (the type's excepted).
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub wire: &'static str,
    pub kind: Kind,
    /// Indices into the table's keys, in the order they are written.
    keys: [u8; ROW_KEYS],
    /// What the writer writes for each of those keys: the event's field
    /// there (by [`Kind::field`]), [`TIMESTAMP`], or nothing ([`NONE`]).
    /// The writer's loop looks nothing up per key.
    fields: [u8; ROW_KEYS],
    len: u8,
    /// Bit `i`: the table's key `i` may be there, must be there.
    allowed: u32,
    required: u32,
    /// Bit `i`: key `i` may come in the table's [`Wrap`].
    wrappable: u32,
    /// Bit `i`: key `i` has no field in the kind and is kept in extra.
    extra: u32,
    /// The key that fills each slot of the kind (by `Slot as usize`), or
    /// [`NONE`].
    by_slot: [u8; SLOTS],
    /// Bit `i`: the writer needs the event's field `i` (see `view`).
    needs: u8,
    /// Fields written after the keys, always the same (never read: a row
    /// with any is left to the general path when reading).
    consts: &'static [(&'static str, &'static str)],
    /// What the writer writes before the first key (`{"type":"WIRE"`)
    /// and before each key's value (`,"key":`), made at compile time: a few
    /// slices per event, as the hand-written writers wrote them.
    head: Bytes<HEAD>,
    before: [Bytes<KEY>; ROW_KEYS],
}

/// The most bytes of a row's head, and of what goes before a key's value.
const HEAD: usize = 48;
const KEY: usize = 24;

/// Bytes made at compile time.
#[derive(Debug, Clone, Copy)]
struct Bytes<const M: usize> {
    bytes: [u8; M],
    len: u8,
}

impl<const M: usize> Bytes<M> {
    const EMPTY: Self = Bytes {
        bytes: [0; M],
        len: 0,
    };

    /// `parts` one after the other; a part that needs escaping, or too many
    /// bytes, fails the build.
    // Evaluated at compile time: an index out of bounds fails the build.
    #[allow(clippy::indexing_slicing)]
    const fn of(parts: &[&[u8]]) -> Self {
        let mut b = Self::EMPTY;
        let mut n = 0;
        let mut p = 0;
        while p < parts.len() {
            let mut i = 0;
            while i < parts[p].len() {
                b.bytes[n] = parts[p][i];
                n += 1;
                i += 1;
            }
            p += 1;
        }
        assert!(n < 256);
        b.len = n as u8;
        b
    }

    /// Appends them to `out`: all `M` bytes, then cut back (a copy of a
    /// constant size is a few moves; of a variable one, a call of memcpy
    /// per key, by callgrind).
    #[inline(always)]
    fn write(&self, out: &mut Vec<u8>) {
        let end = out.len() + usize::from(self.len);
        out.extend_from_slice(&self.bytes);
        out.truncate(end);
    }
}

/// Whether a key or type can be written between quotes as it is.
#[allow(clippy::indexing_slicing)] // bounds checked by the loop
const fn plain_text(s: &[u8]) -> bool {
    let mut i = 0;
    while i < s.len() {
        if s[i] < 0x20 || s[i] == b'"' || s[i] == b'\\' {
            return false;
        }
        i += 1;
    }
    true
}

impl Row {
    /// A row of `keys` (a table's, the type first): `fields` are key names,
    /// in the order written, optional ones marked with a leading `?`. Meant
    /// for constants: an unknown name, or two keys filling one field, fails
    /// the build.
    // Evaluated at compile time: an index out of bounds fails the build.
    #[allow(clippy::indexing_slicing)]
    pub const fn new<const N: usize>(
        keys: &[(&'static str, Slot); N],
        wire: &'static str,
        kind: Kind,
        fields: &[&str],
    ) -> Row {
        assert!(N <= 32 && fields.len() <= ROW_KEYS);
        let mut row = Row {
            wire,
            kind,
            keys: [0; ROW_KEYS],
            fields: [NONE; ROW_KEYS],
            len: fields.len() as u8,
            allowed: 1,
            required: 1,
            wrappable: 0,
            extra: 0,
            by_slot: [NONE; SLOTS],
            needs: 0,
            consts: &[],
            head: Bytes::EMPTY,
            before: [Bytes::EMPTY; ROW_KEYS],
        };
        let ty = keys[0].0.as_bytes();
        assert!(plain_text(ty) && plain_text(wire.as_bytes()));
        row.head = Bytes::of(&[b"{\"", ty, b"\":\"", wire.as_bytes(), b"\""]);
        let mut f = 0;
        while f < fields.len() {
            let name = fields[f].as_bytes();
            let optional = !name.is_empty() && name[0] == b'?';
            let name = match optional {
                true => name.split_at(1).1,
                false => name,
            };
            let mut k = 0;
            while k < N && !same_bytes(keys[k].0.as_bytes(), name) {
                k += 1;
            }
            assert!(k < N, "a row names a key its table does not have");
            row.keys[f] = k as u8;
            assert!(plain_text(name));
            row.before[f] = Bytes::of(&[b",\"", name, b"\":"]);
            row.allowed |= 1 << k;
            if !optional {
                row.required |= 1 << k;
            }
            let slot = keys[k].1;
            let s = slot as usize;
            let field = kind.field(slot);
            match slot {
                Slot::Type => {}
                // A timestamp the row requires is one the writer cannot
                // promise.
                Slot::Timestamp if optional => row.fields[f] = TIMESTAMP,
                Slot::Timestamp => row.needs |= NEVER,
                _ if field == NONE => {
                    row.extra |= 1 << k;
                    row.needs |= NEVER;
                }
                _ => {
                    assert!(row.by_slot[s] == NONE, "a row names two keys of one field");
                    row.by_slot[s] = k as u8;
                    row.fields[f] = field;
                    // A result's content is written only as a string.
                    if !optional || matches!(slot, Slot::Content) {
                        row.needs |= 1 << field;
                    }
                }
            }
            f += 1;
        }
        row
    }

    /// This row with its `Delta` also read in the table's [`Wrap`].
    // Evaluated at compile time: an index out of bounds fails the build.
    #[allow(clippy::indexing_slicing)]
    pub const fn wrapping(mut self) -> Row {
        let k = self.by_slot[Slot::Delta as usize];
        assert!(k != NONE, "a row that wraps has a delta");
        self.wrappable = 1 << k;
        self
    }

    /// This row writing `consts` after its keys (and never read).
    pub const fn with_consts(mut self, consts: &'static [(&'static str, &'static str)]) -> Row {
        self.consts = consts;
        self
    }

    /// Its keys, as indices into the table's, in the order written.
    pub fn keys(&self) -> &[u8] {
        self.keys.get(..usize::from(self.len)).unwrap_or_default()
    }

    /// Bit `i`: the table's key `i` must be there.
    pub fn required(&self) -> u32 {
        self.required
    }

    /// Whether its `Delta` may come in the table's [`Wrap`].
    pub fn wraps(&self) -> bool {
        self.wrappable != 0
    }

    /// The fields it writes after its keys.
    pub fn consts(&self) -> &'static [(&'static str, &'static str)] {
        self.consts
    }

    /// The key that fills `slot`, when the row has one and it is `present`.
    #[inline(always)]
    fn key_of(&self, slot: Slot, present: u32) -> Option<usize> {
        let k = *self.by_slot.get(slot as usize)?;
        (k != NONE && present & (1 << k) != 0).then_some(usize::from(k))
    }
}

#[allow(clippy::indexing_slicing)] // bounds checked by the loop
const fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A string value that may also come inside a fixed object, written exactly
/// so (HAI's `{"output":{"type":"text","content":"..."}}`): what opens it
/// before the string and what closes it after.
#[derive(Debug, Clone, Copy)]
pub struct Wrap {
    pub open: &'static str,
    pub close: &'static str,
}

/// A dialect's fast path: its keys (the type first), each with the slot it
/// fills, and its rows.
pub struct Table<const N: usize> {
    pub dialect: Dialect,
    pub keys: [(&'static str, Slot); N],
    pub rows: &'static [Row],
    pub wrap: Option<Wrap>,
}

/// A value as it stands in the frame: a string's content between its
/// quotes, and whether it holds an escape.
#[derive(Clone, Copy)]
struct Val<'a> {
    text: &'a str,
    escaped: bool,
}

impl<'a> Val<'a> {
    const EMPTY: Val<'static> = Val {
        text: "",
        escaped: false,
    };

    /// The string it holds; `None` when an escape is bad.
    #[inline(always)]
    fn text(&self) -> Option<Cow<'a, str>> {
        match self.escaped {
            true => unescape(self.text).map(Cow::Owned),
            false => Some(Cow::Borrowed(self.text)),
        }
    }
}

/// What [`Table::scan`] found besides the values.
struct Scan {
    /// Bit `i`: the table's key `i` is there, came in the table's wrap.
    present: u32,
    wrapped: u32,
    /// How many keys.
    len: u8,
    timestamp: Option<i64>,
}

/// What the reader made of a frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    /// The index of the row it matched in the table.
    pub row: usize,
    /// The event: the row's kind with the fields its keys gave (a field the
    /// row has no key for is empty, for the decoder to fill), the
    /// timestamp, the table's dialect as origin, and in extra the keys whose
    /// slot the kind has no field for.
    pub event: Event,
    /// Whether a `Delta` came in the table's [`Wrap`].
    pub wrapped: bool,
    /// The keys of the frame (indices into the table's), as they came.
    order: [u8; ROW_KEYS + 1],
    len: u8,
}

impl Read {
    /// The frame's keys, as indices into the table's, in the frame's order
    /// (for a decoder that keeps fields as they came).
    pub fn order(&self) -> &[u8] {
        self.order.get(..usize::from(self.len)).unwrap_or_default()
    }
}

impl<const N: usize> Table<N> {
    /// Reads `data`, a flat object of one of the rows; `None` when it is
    /// anything else (see the module's comment). Always inlined, so that
    /// the caller's constant keys are compared as constants (8% of AG-UI
    /// decoding otherwise, by callgrind).
    #[inline(always)]
    pub fn read(&self, data: &str) -> Option<Read> {
        let mut vals = [Val::EMPTY; N];
        let mut order = [0u8; ROW_KEYS + 1];
        let (at, s) = self.match_row(data, &mut vals, &mut order)?;
        let event = self.event(self.rows.get(at)?, s.timestamp, s.present, &vals)?;
        Some(Read {
            row: at,
            event,
            wrapped: s.wrapped != 0,
            order,
            len: s.len,
        })
    }

    /// [`read`](Self::read)'s event pushed onto `out`; `false` (nothing
    /// pushed) when the frame is not one of the rows'. The event is built
    /// where `push` takes it: returned, then handed on, it was copied once
    /// more per event (a call of memcpy each, by callgrind).
    #[inline(always)]
    pub fn read_into(&self, data: &str, out: &mut Vec<Event>) -> bool {
        let mut vals = [Val::EMPTY; N];
        let mut order = [0u8; ROW_KEYS + 1];
        let Some((at, s)) = self.match_row(data, &mut vals, &mut order) else {
            return false;
        };
        let Some(row) = self.rows.get(at) else {
            return false;
        };
        match self.event(row, s.timestamp, s.present, &vals) {
            Some(ev) => {
                out.push(ev);
                true
            }
            None => false,
        }
    }

    /// The kind of the frame's event, for a decoder that runs kinds: `None`
    /// also when the frame has more than its kind holds (a timestamp, a key
    /// kept in extra), which the general path then reads. No event is built
    /// around it (its empty map and its moves cost, by callgrind).
    #[inline(always)]
    pub fn read_kind(&self, data: &str) -> Option<EventKind> {
        let mut vals = [Val::EMPTY; N];
        let mut order = [0u8; ROW_KEYS + 1];
        let (at, s) = self.match_row(data, &mut vals, &mut order)?;
        let row = self.rows.get(at)?;
        if s.timestamp.is_some() || row.extra & s.present != 0 {
            return None;
        }
        self.kind(row, s.present, &vals)
    }

    /// Scans `data` and finds the row that takes it, by its index.
    #[inline(always)]
    fn match_row<'a>(
        &self,
        data: &'a str,
        vals: &mut [Val<'a>; N],
        order: &mut [u8; ROW_KEYS + 1],
    ) -> Option<(usize, Scan)> {
        let s = self.scan(data, vals, order)?;
        let ty = vals.first()?;
        // An escaped type is rare: the general path unescapes it.
        if s.present & 1 == 0 || ty.escaped {
            return None;
        }
        let at = self.rows.iter().position(|r| r.wire == ty.text)?;
        let row = self.rows.get(at)?;
        if s.present & !row.allowed != 0
            || s.present & row.required != row.required
            || s.wrapped & !row.wrappable != 0
            || !row.consts.is_empty()
        {
            return None;
        }
        Some((at, s))
    }

    /// The event of the row named `wire` from fields another reader took
    /// (a protobuf message's, say), with the same rules: `only(keys)` says
    /// whether no field but those is there, `get` gives each one's string;
    /// the timestamp comes apart.
    pub fn event_of<'a>(
        &self,
        wire: &str,
        timestamp: Option<i64>,
        only: impl Fn(&[&str]) -> bool,
        get: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<Event> {
        let row = self.rows.iter().find(|r| r.wire == wire)?;
        let mut names = [""; ROW_KEYS];
        let mut n = 0;
        let mut present = 1;
        // The other reader's strings are unescaped already.
        let mut vals = [Val::EMPTY; N];
        for &k in row.keys() {
            let (name, slot) = *self.keys.get(usize::from(k))?;
            match slot {
                Slot::Timestamp => present |= u32::from(timestamp.is_some()) << k,
                _ => {
                    *names.get_mut(n)? = name;
                    n += 1;
                    if let Some(text) = get(name) {
                        present |= 1 << k;
                        *vals.get_mut(usize::from(k))? = Val {
                            text,
                            escaped: false,
                        };
                    }
                }
            }
        }
        if !row.consts.is_empty()
            || !only(names.get(..n)?)
            || present & row.required != row.required
        {
            return None;
        }
        self.event(row, timestamp, present, &vals)
    }

    /// The event of `row` from `vals`, the value of each `present` key.
    #[inline(always)]
    fn event<'v>(
        &self,
        row: &Row,
        timestamp: Option<i64>,
        present: u32,
        vals: &[Val<'v>; N],
    ) -> Option<Event> {
        let mut extra = Extra::new();
        // Rare (an AG-UI result's role): the loop only then.
        if row.extra & present != 0 {
            for &k in row.keys() {
                if row.extra & present & (1 << k) != 0 {
                    let name = self.keys.get(usize::from(k))?.0;
                    let v = vals.get(usize::from(k))?.text()?.into_owned();
                    extra.insert(name.to_string(), Value::String(v));
                }
            }
        }
        Some(Event {
            kind: self.kind(row, present, vals)?,
            timestamp,
            origin: Some(self.dialect),
            extra,
            restated: false,
            synthesized: false,
        })
    }

    /// The kind of `row` from `vals`, the value of each `present` key.
    /// Each field is read straight into the kind (no struct of every field
    /// in between: its moves cost a copy per event, by callgrind), through
    /// macros rather than closures, which were not inlined.
    #[inline(always)]
    fn kind<'v>(&self, row: &Row, present: u32, vals: &[Val<'v>; N]) -> Option<EventKind> {
        // A slot's value when there (`None` from the function when
        // unreadable), and as an owned string.
        macro_rules! get {
            ($slot:expr) => {
                match row.key_of($slot, present) {
                    Some(k) => Some(vals.get(k)?.text()?),
                    None => None,
                }
            };
        }
        macro_rules! string {
            ($slot:expr) => {
                get!($slot).map(Cow::into_owned)
            };
        }
        use EventKind as K;
        Some(match row.kind {
            Kind::TextStart => K::TextStart {
                message_id: string!(Slot::MessageId).unwrap_or_default(),
                role: match get!(Slot::Role) {
                    Some(r) => Role::parse(&r)?,
                    None => Role::default(),
                },
                name: string!(Slot::Name),
            },
            Kind::TextDelta => K::TextDelta {
                message_id: string!(Slot::MessageId).unwrap_or_default(),
                delta: string!(Slot::Delta).unwrap_or_default(),
            },
            Kind::TextEnd => K::TextEnd {
                message_id: string!(Slot::MessageId).unwrap_or_default(),
            },
            Kind::ReasoningStart => K::ReasoningStart {
                message_id: string!(Slot::MessageId).unwrap_or_default(),
            },
            Kind::ReasoningDelta => K::ReasoningDelta {
                message_id: string!(Slot::MessageId).unwrap_or_default(),
                delta: string!(Slot::Delta).unwrap_or_default(),
            },
            Kind::ReasoningEnd => K::ReasoningEnd {
                message_id: string!(Slot::MessageId).unwrap_or_default(),
            },
            Kind::ToolCallStart => K::ToolCallStart {
                tool_call_id: string!(Slot::ToolCallId).unwrap_or_default(),
                tool_name: string!(Slot::ToolName).unwrap_or_default(),
                parent_message_id: string!(Slot::ParentMessageId),
            },
            Kind::ToolCallArgs => K::ToolCallArgs {
                tool_call_id: string!(Slot::ToolCallId).unwrap_or_default(),
                delta: string!(Slot::Delta).unwrap_or_default(),
            },
            Kind::ToolCallEnd => K::ToolCallEnd {
                tool_call_id: string!(Slot::ToolCallId).unwrap_or_default(),
            },
            // A result's message id is optional; every other kind's is not.
            Kind::ToolCallResult => K::ToolCallResult {
                tool_call_id: string!(Slot::ToolCallId).unwrap_or_default(),
                message_id: string!(Slot::MessageId),
                content: Value::String(string!(Slot::Content).unwrap_or_default()),
            },
            Kind::StepStarted => K::StepStarted {
                name: string!(Slot::Name),
            },
            Kind::StepFinished => K::StepFinished {
                name: string!(Slot::Name),
            },
        })
    }

    /// Each key's value, by the key's index, and the keys in the frame's
    /// order; `None` unless `data` is a flat object of this table's keys,
    /// each at most once, of the values their slots take.
    /// Fills the caller's arrays in place (returning them costs a copy per
    /// event).
    #[inline(always)]
    fn scan<'a>(
        &self,
        data: &'a str,
        vals: &mut [Val<'a>; N],
        order: &mut [u8; ROW_KEYS + 1],
    ) -> Option<Scan> {
        let mut s = Scan {
            present: 0,
            wrapped: 0,
            len: 0,
            timestamp: None,
        };
        let b = data.as_bytes();
        let mut i = skip_ws(b, 0);
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i = skip_ws(b, i + 1);
        if b.get(i) == Some(&b'}') {
            return None;
        }
        loop {
            let (key, escaped, next) = string_at(b, i)?;
            if escaped {
                return None;
            }
            let key = b.get(key.0..key.1)?;
            let at = self.keys.iter().position(|(k, _)| k.as_bytes() == key)?;
            let slot = self.keys.get(at)?.1;
            let bit = 1u32 << at;
            if s.present & bit != 0 {
                return None;
            }
            s.present |= bit;
            i = skip_ws(b, next);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
            let end = match slot {
                Slot::Timestamp => {
                    let (t, end) = integer(b, i)?;
                    s.timestamp = Some(t);
                    end
                }
                // Only a delta may come wrapped (see `Row::wrapping`).
                Slot::Delta => {
                    let (v, wrapped, end) = self.string(data, i)?;
                    s.wrapped |= u32::from(wrapped) << at;
                    *vals.get_mut(at)? = v;
                    end
                }
                _ => {
                    let ((from, to), escaped, end) = string_at(b, i)?;
                    let text = data.get(from..to)?;
                    *vals.get_mut(at)? = Val { text, escaped };
                    end
                }
            };
            // More keys than a row has: no row takes the frame.
            *order.get_mut(usize::from(s.len))? = at as u8;
            s.len += 1;
            i = skip_ws(b, end);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b'}') => break,
                _ => return None,
            }
        }
        (skip_ws(b, i + 1) == b.len()).then_some(s)
    }

    /// The string at `i`, or one in the table's [`Wrap`]; whether it was
    /// wrapped, and the index after it.
    #[inline(always)]
    fn string<'a>(&self, data: &'a str, i: usize) -> Option<(Val<'a>, bool, usize)> {
        let b = data.as_bytes();
        let (at, close) = match self.wrap {
            Some(w)
                if b.get(i) == Some(&b'{')
                    && b.get(i..i + w.open.len()) == Some(w.open.as_bytes()) =>
            {
                (i + w.open.len(), Some(w.close))
            }
            _ => (i, None),
        };
        let ((s, e), escaped, mut end) = string_at(b, at)?;
        if let Some(close) = close {
            if b.get(end..end + close.len()) != Some(close.as_bytes()) {
                return None;
            }
            end += close.len();
        }
        let text = data.get(s..e)?;
        Some((Val { text, escaped }, close.is_some(), end))
    }

    /// What writes `ev`: the first row of its kind whose required keys the
    /// event fills, with the event's strings.
    #[inline(always)]
    pub fn writer<'e>(&self, ev: &'e Event) -> Option<Writer<'_, 'e>> {
        let (kind, fields) = view(&ev.kind)?;
        let has = fields
            .iter()
            .enumerate()
            .fold(0, |m, (i, f)| m | u8::from(f.is_some()) << i);
        let row = self
            .rows
            .iter()
            .find(|r| r.kind == kind && r.needs & !has == 0)?;
        Some(Writer {
            row,
            timestamp: ev.timestamp,
            fields,
        })
    }

    /// Appends `ev` as [`Writer::write`] does; `false` (nothing written)
    /// when no row writes it.
    pub fn write(&self, ev: &Event, out: &mut Vec<u8>) -> bool {
        match self.writer(ev) {
            Some(w) => {
                w.write(out);
                true
            }
            None => false,
        }
    }
}

/// An event and the row that writes it (from [`Table::writer`]).
pub struct Writer<'t, 'e> {
    row: &'t Row,
    timestamp: Option<i64>,
    /// The event's strings, by [`Kind::fields`].
    fields: [Option<&'e str>; FIELDS],
}

impl Writer<'_, '_> {
    /// The row.
    pub fn row(&self) -> &Row {
        self.row
    }

    /// Appends the event's body `{...}` (the sink frames it): the type,
    /// then the row's keys in its order (an optional one when the event has
    /// it), then its constants; the bytes serde_json writes for the same
    /// object. Each key's field comes from the row (made at compile time),
    /// nothing looked up per key. Inlined: out of line, the writer's
    /// fields went through memory and its call cost as much as its loop
    /// (AG-UI encoding 1.8% slower, by callgrind).
    #[inline(always)]
    pub fn write(&self, out: &mut Vec<u8>) {
        let row = self.row;
        row.head.write(out);
        let n = usize::from(row.len);
        for (&field, before) in row.fields.iter().zip(&row.before).take(n) {
            if field == TIMESTAMP {
                if let Some(ts) = self
                    .timestamp
                    .filter(|t| (-MAX_SAFE..=MAX_SAFE).contains(t))
                {
                    before.write(out);
                    // Writing a number into a Vec cannot fail.
                    let _ = serde_json::to_writer(&mut *out, &ts);
                }
            } else if let Some(v) = self.fields.get(usize::from(field)).copied().flatten() {
                before.write(out);
                write_str(out, v);
            }
        }
        for (key, value) in row.consts {
            write_key(out, key);
            write_str(out, value);
        }
        out.push(b'}');
    }
}

/// The kind of `k` when a table can stand for it, and its strings by
/// [`Kind::fields`] (a result's content only when it is a string): one
/// match per event.
#[inline(always)]
fn view(k: &EventKind) -> Option<(Kind, [Option<&str>; FIELDS])> {
    use EventKind as K;
    Some(match k {
        K::TextStart {
            message_id,
            role,
            name,
        } => (
            Kind::TextStart,
            [Some(message_id), Some(role.as_str()), name.as_deref()],
        ),
        K::TextDelta { message_id, delta } => {
            (Kind::TextDelta, [Some(message_id), Some(delta), None])
        }
        K::ReasoningDelta { message_id, delta } => {
            (Kind::ReasoningDelta, [Some(message_id), Some(delta), None])
        }
        K::TextEnd { message_id } => (Kind::TextEnd, [Some(message_id), None, None]),
        K::ReasoningStart { message_id } => (Kind::ReasoningStart, [Some(message_id), None, None]),
        K::ReasoningEnd { message_id } => (Kind::ReasoningEnd, [Some(message_id), None, None]),
        K::ToolCallStart {
            tool_call_id,
            tool_name,
            parent_message_id,
        } => (
            Kind::ToolCallStart,
            [
                Some(tool_call_id),
                Some(tool_name),
                parent_message_id.as_deref(),
            ],
        ),
        K::ToolCallArgs {
            tool_call_id,
            delta,
        } => (Kind::ToolCallArgs, [Some(tool_call_id), Some(delta), None]),
        K::ToolCallEnd { tool_call_id } => (Kind::ToolCallEnd, [Some(tool_call_id), None, None]),
        K::ToolCallResult {
            tool_call_id,
            message_id,
            content,
        } => (
            Kind::ToolCallResult,
            [Some(tool_call_id), message_id.as_deref(), content.as_str()],
        ),
        K::StepStarted { name } => (Kind::StepStarted, [name.as_deref(), None, None]),
        K::StepFinished { name } => (Kind::StepFinished, [name.as_deref(), None, None]),
        _ => return None,
    })
}

/// A key or type of a table as it is written: the table's constants need
/// no escape.
fn plain(s: &str) -> &[u8] {
    debug_assert!(!s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\'));
    s.as_bytes()
}

/// `,"key":` (a few slices, not a push per byte: the writer's hot loop).
fn write_key(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(plain(key));
    out.extend_from_slice(b"\":");
}

/// The non-negative integer at `i` (no sign, no leading zero, no fraction
/// or exponent, at most [`MAX_SAFE`]) and the index after it.
fn integer(b: &[u8], i: usize) -> Option<(i64, usize)> {
    let mut j = i;
    let mut n: i64 = 0;
    while let Some(d) = b.get(j).filter(|d| d.is_ascii_digit()) {
        // 16 digits at most keeps the value under 10^16, then compared.
        if j - i == 16 {
            return None;
        }
        n = n * 10 + i64::from(d - b'0');
        j += 1;
    }
    if j == i || (b.get(i) == Some(&b'0') && j > i + 1) {
        return None;
    }
    if matches!(b.get(j), Some(b'.' | b'e' | b'E')) || n > MAX_SAFE {
        return None;
    }
    Some((n, j))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{check_fast_read, check_fast_write, fast_event, fast_frame};
    use proptest::prelude::*;

    const KEYS: [(&str, Slot); 11] = [
        ("type", Slot::Type),
        ("id", Slot::MessageId),
        ("delta", Slot::Delta),
        ("ts", Slot::Timestamp),
        ("callId", Slot::ToolCallId),
        ("tool", Slot::ToolName),
        ("parent", Slot::ParentMessageId),
        ("role", Slot::Role),
        ("name", Slot::Name),
        ("result", Slot::Content),
        ("args", Slot::Delta),
    ];

    /// Every kind, slot and form a table can declare.
    const TABLE: Table<11> = {
        const K: &[(&str, Slot); 11] = &KEYS;
        const ROWS: [Row; 13] = [
            Row::new(
                K,
                "text-start",
                Kind::TextStart,
                &["?ts", "id", "?role", "?name"],
            ),
            Row::new(K, "text", Kind::TextDelta, &["id", "delta", "?ts"]).wrapping(),
            Row::new(K, "text-end", Kind::TextEnd, &["id"]),
            Row::new(K, "think-start", Kind::ReasoningStart, &["id"])
                .with_consts(&[("role", "reasoning")]),
            Row::new(K, "think", Kind::ReasoningDelta, &["id", "delta"]),
            Row::new(K, "think-end", Kind::ReasoningEnd, &["id"]),
            Row::new(
                K,
                "call",
                Kind::ToolCallStart,
                &["callId", "tool", "?parent"],
            ),
            Row::new(K, "args", Kind::ToolCallArgs, &["callId", "args"]),
            Row::new(K, "call-end", Kind::ToolCallEnd, &["callId", "?ts"]),
            Row::new(
                K,
                "result",
                Kind::ToolCallResult,
                &["?id", "callId", "result", "?role"],
            ),
            Row::new(K, "step", Kind::StepStarted, &["?name"]),
            Row::new(K, "step-end", Kind::StepFinished, &[]),
            Row::new(K, "bare", Kind::TextDelta, &["delta"]),
        ];
        Table {
            dialect: Dialect::AgUi,
            keys: KEYS,
            rows: &ROWS,
            wrap: Some(Wrap {
                open: r#"{"out":{"kind":"text","text":"#,
                close: "}}",
            }),
        }
    };

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// A frame the reader takes is what serde_json reads there.
        #[test]
        fn reads_as_serde_json_reads(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
            let data = fast_frame(&TABLE, &bytes);
            check_fast_read(&TABLE, &data).map_err(TestCaseError::fail)?;
        }

        /// Token soup: never taken where serde_json refuses or reads otherwise.
        #[test]
        fn token_soup_never_reads_otherwise(pieces in prop::collection::vec(prop_oneof![
            Just("{"), Just("}"), Just(","), Just(":"), Just(" "), Just("\"type\""),
            Just("\"text\""), Just("\"id\""), Just("\"delta\""), Just("\"ts\""), Just("1"),
            Just("-1"), Just("01"), Just("null"), Just("\"\\ud800\""), Just("\"\\q\""),
            Just("\"\u{1}\""), Just("\"t\\u0079pe\""), Just("\"a\\\"b\""),
            Just(r#"{"out":{"kind":"text","text":"x"}}"#),
        ], 0..14)) {
            check_fast_read(&TABLE, &pieces.concat()).map_err(TestCaseError::fail)?;
        }

        /// An event the writer writes is serde_json's bytes for its row.
        #[test]
        fn writes_as_serde_json_writes(bytes in prop::collection::vec(any::<u8>(), 0..8)) {
            let ev = fast_event(&TABLE, &bytes);
            check_fast_write(&TABLE, &ev).map_err(TestCaseError::fail)?;
        }
    }

    /// The generators reach both paths: a differential test that never
    /// takes the fast one proves nothing.
    #[test]
    fn the_generators_reach_the_fast_paths() {
        let (mut read, mut written) = (0, 0);
        for i in 0..2000u32 {
            let bytes: Vec<u8> = (0..40u32)
                .map(|j| (i.wrapping_mul(2_654_435_761) >> (j % 24)) as u8 ^ j as u8)
                .collect();
            read += usize::from(check_fast_read(&TABLE, &fast_frame(&TABLE, &bytes)) == Ok(true));
            written +=
                usize::from(check_fast_write(&TABLE, &fast_event(&TABLE, &bytes)) == Ok(true));
        }
        assert!(read > 100, "{read} of 2000 frames read");
        assert!(written > 1000, "{written} of 2000 events written");
    }

    #[test]
    fn reads_and_writes_the_frequent_shapes() {
        let r = TABLE
            .read(r#" {"delta" : "a\"b", "type":"text","id":"m","ts":5} "#)
            .unwrap();
        assert_eq!(r.event.kind, EventKind::text_delta("m", "a\"b"));
        assert_eq!((r.event.timestamp, r.wrapped), (Some(5), false));
        let r = TABLE
            .read(r#"{"type":"text","id":"m","delta":{"out":{"kind":"text","text":"x"}}}"#)
            .unwrap();
        assert!(r.wrapped);
        // A key the kind has no field for stays in extra.
        let r = TABLE
            .read(r#"{"type":"result","callId":"c","result":"r","role":"tool"}"#)
            .unwrap();
        assert_eq!(r.event.extra["role"], "tool");
        for refused in [
            r#"{"type":"text","id":"m","delta":"a","delta":"b"}"#,
            r#"{"type":"text","id":"m","delta":"a","x":"b"}"#,
            r#"{"type":"text","id":"m","delta":1}"#,
            r#"{"type":"text","id":"m"}"#,
            r#"{"type":"text-end","id":"m","delta":"a"}"#,
            r#"{"type":"text","id":"m","delta":"a"} x"#,
            r#"{"type":"think-start","id":"m","role":"reasoning"}"#,
            r#"{"type":"args","callId":"c","args":{"out":{"kind":"text","text":"x"}}}"#,
            r#"{"type":"text","id":"m","delta":"a","ts":9007199254740992}"#,
        ] {
            assert!(TABLE.read(refused).is_none(), "{refused}");
        }
        // The event pushed in place is the one read; the kind alone is
        // refused when the frame holds more than its kind.
        let frame = r#"{"type":"text","id":"m","delta":"d","ts":5}"#;
        let mut events = Vec::new();
        assert!(TABLE.read_into(frame, &mut events));
        assert_eq!(events, vec![TABLE.read(frame).unwrap().event]);
        assert!(!TABLE.read_into(r#"{"type":"text","id":"m"}"#, &mut events));
        assert_eq!(events.len(), 1);
        assert_eq!(TABLE.read_kind(frame), None);
        assert_eq!(
            TABLE.read_kind(r#"{"type":"result","callId":"c","result":"r","role":"tool"}"#),
            None
        );
        assert_eq!(
            TABLE.read_kind(r#"{"type":"text","id":"m","delta":"d"}"#),
            Some(EventKind::TextDelta {
                message_id: "m".into(),
                delta: "d".into()
            })
        );
        let mut out = Vec::new();
        let ev = Event::new(EventKind::ReasoningStart {
            message_id: "r".into(),
        });
        assert!(TABLE.write(&ev, &mut out));
        assert_eq!(
            out,
            b"{\"type\":\"think-start\",\"id\":\"r\",\"role\":\"reasoning\"}"
        );
    }
}
