//! Reading the flat JSON objects that make most of a stream (a type and a
//! few string fields) without building a `serde_json::Value`: for decoders'
//! fast paths. What this does not read exactly as serde_json would (an
//! unknown or escaped key, a duplicate, a value that is not a string, a raw
//! control character, bad syntax, a bad escape) it refuses, and the decoder
//! reads the frame the general way.

use crate::json::{skip_ws, string_at, unescape};

/// A flat JSON object whose keys are all in `keys` (each at most once) and
/// whose values are all strings, borrowed from the frame with their quotes.
pub struct Flat<'a, const N: usize> {
    /// Each value with its quotes, and whether it holds an escape.
    slots: [Option<(&'a str, bool)>; N],
}

impl<const N: usize> Default for Flat<'_, N> {
    fn default() -> Self {
        Flat { slots: [None; N] }
    }
}

impl<'a, const N: usize> Flat<'a, N> {
    /// Reads `data`, an object of these `keys`; `None` when it is anything
    /// else.
    pub fn parse(keys: &'static [&'static str; N], data: &'a str) -> Option<Self> {
        let mut f = Flat::new();
        f.read(keys, data)?;
        Some(f)
    }

    /// An empty `Flat`, for [`read`](Self::read).
    #[inline(always)]
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads `data`, an object of these `keys`, into this empty `Flat`, in
    /// place (a decoder's hot loop:
    /// returning a `Flat` by value costs a copy per event). Always inlined,
    /// so that the caller's constant keys are compared as constants (8% of
    /// AG-UI decoding otherwise, by callgrind).
    #[inline(always)]
    pub fn read(&mut self, keys: &'static [&'static str; N], data: &'a str) -> Option<()> {
        let b = data.as_bytes();
        let mut i = skip_ws(b, 0);
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i = skip_ws(b, i + 1);
        if b.get(i) == Some(&b'}') {
            return (skip_ws(b, i + 1) == b.len()).then_some(());
        }
        loop {
            let (key, escaped, next) = string_at(b, i)?;
            if escaped {
                return None;
            }
            let key = b.get(key.0..key.1)?;
            let at = keys.iter().position(|k| k.as_bytes() == key)?;
            let slot = self.slots.get_mut(at)?;
            if slot.is_some() {
                return None;
            }
            i = skip_ws(b, next);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
            let (_, escaped, end) = string_at(b, i)?;
            *slot = Some((data.get(i..end)?, escaped));
            i = skip_ws(b, end);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b'}') => break,
                _ => return None,
            }
        }
        (skip_ws(b, i + 1) == b.len()).then_some(())
    }

    /// Whether the field of `keys[slot]` is there.
    pub fn has(&self, slot: usize) -> bool {
        self.slots.get(slot).is_some_and(Option::is_some)
    }

    /// The field's value as written between its quotes, when it has no
    /// escape (a type compared as it is written, say).
    pub fn plain(&self, slot: usize) -> Option<&'a str> {
        match *self.slots.get(slot)? {
            Some((raw, false)) => unquote(raw),
            _ => None,
        }
    }

    /// The field's value, unescaped; `None` when absent or a bad string.
    pub fn string(&self, slot: usize) -> Option<String> {
        let (raw, escaped) = (*self.slots.get(slot)?)?;
        let inner = unquote(raw)?;
        if escaped {
            unescape(inner)
        } else {
            Some(inner.to_string())
        }
    }

    /// The value in `slot` as it is written, quotes and escapes included,
    /// and whether it holds an escape.
    pub fn raw(&self, slot: usize) -> Option<(&'a str, bool)> {
        *self.slots.get(slot)?
    }

    /// An optional field: absent is `Some(None)`, a bad string `None`.
    pub fn opt_string(&self, slot: usize) -> Option<Option<String>> {
        match self.has(slot) {
            false => Some(None),
            true => self.string(slot).map(Some),
        }
    }

    /// Whether no field but these is there.
    pub fn has_only(&self, allowed: &[usize]) -> bool {
        self.slots
            .iter()
            .enumerate()
            .all(|(i, v)| v.is_none() || allowed.contains(&i))
    }
}

/// A string value without its quotes.
#[inline]
pub fn unquote(raw: &str) -> Option<&str> {
    raw.strip_prefix('"')?.strip_suffix('"')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    const KEYS: [&str; 3] = ["type", "id", "delta"];

    /// What serde_json makes of `data`, when it is an object of `KEYS` with
    /// string values (the last of a duplicate key wins there).
    fn general(data: &str) -> Option<Map<String, Value>> {
        let v: Value = serde_json::from_str(data).ok()?;
        let o = v.as_object()?.clone();
        o.iter()
            .all(|(k, v)| KEYS.contains(&k.as_str()) && v.is_string())
            .then_some(o)
    }

    fn check(data: &str) -> Result<(), TestCaseError> {
        let Some(f) = Flat::parse(&KEYS, data) else {
            return Ok(());
        };
        let mut got = Vec::new();
        for i in 0..KEYS.len() {
            match (f.has(i), f.string(i)) {
                (false, _) => got.push(None),
                (true, Some(s)) => got.push(Some(s)),
                // A bad escape: the caller reads the frame the general way.
                (true, None) => return Ok(()),
            }
        }
        // Whatever the scan takes, serde_json takes the same way.
        let g = general(data);
        prop_assert!(g.is_some(), "accepted what serde_json refuses: {:?}", data);
        let g = g.unwrap_or_default();
        for (i, k) in KEYS.iter().enumerate() {
            let want = g.get(*k).and_then(Value::as_str).map(str::to_string);
            prop_assert_eq!(
                got.get(i).cloned().flatten(),
                want,
                "key {} of {:?}",
                k,
                data
            );
        }
        Ok(())
    }

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("{".to_string()),
            Just("}".to_string()),
            Just(",".to_string()),
            Just(":".to_string()),
            Just(" ".to_string()),
            Just("\"type\"".to_string()),
            Just("\"id\"".to_string()),
            Just("\"delta\"".to_string()),
            Just("\"other\"".to_string()),
            Just("\"t\\u0079pe\"".to_string()),
            Just("1".to_string()),
            Just("null".to_string()),
            Just("[\"x\"]".to_string()),
            Just("\"\\ud800\"".to_string()),
            Just("\"\\ud83c\\udf89\"".to_string()),
            Just("\"\\udc00\"".to_string()),
            Just("\"\\q\"".to_string()),
            Just("\"\\é\"".to_string()),
            Just("\"\u{1}\"".to_string()),
            Just("\"\\u2028\u{2028}\"".to_string()),
            any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap_or_default()),
            "\"[^\"]{0,6}\"".prop_map(|s| s),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// Arbitrary objects of the keys, hostile strings included: read as
        /// serde_json reads them.
        #[test]
        fn well_formed_objects_read_as_serde_json_reads_them(
            fields in prop::collection::vec((prop::sample::select(vec!["type", "id", "delta", "x", "t\\u0079pe"]), any::<String>(), any::<bool>()), 0..5),
            ws in prop::sample::select(vec!["", " ", "\n\t "]),
        ) {
            let body: Vec<String> = fields
                .iter()
                .map(|(k, v, raw)| {
                    // Raw: written with serde_json's escaping; otherwise with
                    // every non-ASCII character as `\u` escapes.
                    let v = if *raw { serde_json::to_string(v).unwrap_or_default() } else {
                        let mut s = String::from("\"");
                        for u in v.encode_utf16() { s.push_str(&format!("\\u{u:04x}")); }
                        s.push('"');
                        s
                    };
                    format!("{ws}\"{k}\"{ws}:{ws}{v}{ws}")
                })
                .collect();
            check(&format!("{ws}{{{}}}{ws}", body.join(",")))?;
        }

        /// Arbitrary token soup: never accepted where serde_json refuses or
        /// reads otherwise.
        #[test]
        fn token_soup_never_reads_otherwise(pieces in prop::collection::vec(piece(), 0..12)) {
            check(&pieces.concat())?;
        }
    }

    #[test]
    fn reads_the_frequent_shape() {
        let f = Flat::parse(&KEYS, r#"{"type":"text-delta","id":"m","delta":"a\"b"}"#).unwrap();
        assert_eq!(f.plain(0), Some("text-delta"));
        assert_eq!(f.string(2).as_deref(), Some("a\"b"));
        assert!(f.has_only(&[0, 1, 2]));
        assert!(Flat::parse(&KEYS, r#"{"type":"a","type":"b"}"#).is_none());
        assert!(Flat::parse(&KEYS, r#"{"type":"a","x":"b"}"#).is_none());
        assert!(Flat::parse(&KEYS, r#"{"type":1}"#).is_none());
        assert!(Flat::parse(&KEYS, r#"{"type":"a"} x"#).is_none());
    }
}
