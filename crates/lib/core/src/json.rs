//! Writing JSON straight into an output buffer, for encoders' hot paths:
//! the same bytes serde_json writes, without building a `Value` first.

/// Bytes that need an escape: control characters, `"` and `\`.
// Indexed at compile time only: an index out of bounds fails the build.
#[allow(clippy::indexing_slicing)]
const ESCAPED: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Whether `b` needs an escape (a look-up the compiler knows is in bounds).
#[inline]
fn needs_escape(b: u8) -> bool {
    ESCAPED.get(usize::from(b)).copied().unwrap_or(true)
}

/// The index of the first byte at or after `from` that a JSON string cannot
/// hold as it is (see [`needs_escape`]), or `bytes.len()`: where a run of plain
/// string content ends, for writers and scanners alike. Eight bytes at a
/// time, then a byte at a time: strings here are short, so there is
/// no SIMD set-up to pay for.
#[inline]
pub fn plain_run(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The zero bytes of `x`, as their high bits; exact up to the first one
    // (a borrow only leaves a zero byte), which is all the lowest bit needs.
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut j = from;
    while let Some(chunk) = bytes
        .get(j..j + 8)
        .and_then(|c| <[u8; 8]>::try_from(c).ok())
    {
        let w = u64::from_le_bytes(chunk);
        // `"`, `\\`, and bytes below 0x20 (`!w` keeps bytes of multi-byte
        // characters, all 0x80 and up, out of that last test).
        let stop = zero(w ^ (ONES * u64::from(b'"')))
            | zero(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH);
        if stop != 0 {
            return j + (stop.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while bytes.get(j).is_some_and(|&b| !needs_escape(b)) {
        j += 1;
    }
    j
}

/// Appends `s` as a JSON string, quoted and escaped exactly as serde_json
/// escapes it (`\"`, `\\`, the short forms `\b \f \n \r \t`, other control
/// characters as `\u00xx`; everything else as is).
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    loop {
        let i = plain_run(bytes, start);
        // `start <= i <= len`: the fallback is never taken.
        out.extend_from_slice(bytes.get(start..i).unwrap_or_default());
        let Some(&b) = bytes.get(i) else { break };
        start = i + 1;
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.extend(HEX.get(usize::from(b >> 4)));
                out.extend(HEX.get(usize::from(b & 0xf)));
            }
        }
    }
    out.push(b'"');
}

// ---- reading --------------------------------------------------------------
//
// The pieces of a borrowing scanner for decoders' hot paths: they read a
// frame's JSON in place and leave anything they do not take to serde_json.

/// The index of the first byte at or after `i` that is not JSON whitespace.
#[inline]
pub fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// The JSON string starting at `i`: its content's byte range, whether it has
/// escapes, and the index after its closing quote. `None` if there is no
/// string there, or it holds a raw control character (invalid JSON). The
/// escapes themselves are checked by [`unescape`].
#[inline]
pub fn string_at(b: &[u8], i: usize) -> Option<((usize, usize), bool, usize)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    let mut escaped = false;
    loop {
        j = plain_run(b, j);
        match *b.get(j)? {
            b'"' => return Some(((i + 1, j), escaped, j + 1)),
            b'\\' => {
                escaped = true;
                // An escape is two bytes at least; `unescape` checks the rest.
                j += 2;
            }
            c if c < 0x20 => return None,
            _ => j += 1,
        }
    }
}

/// The content of a JSON string (between its quotes) with its escapes
/// resolved, as serde_json reads it; `None` where serde_json would fail (an
/// invalid escape, a lone surrogate).
pub fn unescape(inner: &str) -> Option<String> {
    let mut out = String::with_capacity(inner.len());
    let mut rest = inner;
    while let Some((plain, tail)) = rest.split_once('\\') {
        out.push_str(plain);
        let mut chars = tail.chars();
        let esc = chars.next()?;
        rest = chars.as_str();
        let c = match esc {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let (hi, after) = hex4(rest)?;
                rest = after;
                if (0xD800..0xDC00).contains(&hi) {
                    let (lo, after) = hex4(rest.strip_prefix("\\u")?)?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return None;
                    }
                    rest = after;
                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                } else {
                    // A lone low surrogate is no `char`: `None`, as serde_json errs.
                    char::from_u32(hi)?
                }
            }
            _ => return None,
        };
        out.push(c);
    }
    out.push_str(rest);
    Some(out)
}

/// Four hex digits opening `s`, and what follows them.
fn hex4(s: &str) -> Option<(u32, &str)> {
    let (h, rest) = s.split_at_checked(4)?;
    if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((u32::from_str_radix(h, 16).ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The word-at-a-time scan stops where a byte loop does, whatever
        /// the bytes (stops, multi-byte characters, 0x7f-0xff) and offsets.
        #[test]
        fn plain_run_agrees_with_the_byte_loop(
            b in proptest::collection::vec(
                prop_oneof![
                    Just(b'"'), Just(b'\\'), 0u8..0x20, 0x20u8..0x80, 0x80u8..=0xff,
                    Just(b'a'), Just(b'a'), Just(b'a'),
                ],
                0..40,
            ),
            at in 0usize..40,
        ) {
            let from = at.min(b.len());
            let mut want = from;
            while want < b.len() && !needs_escape(b[want]) {
                want += 1;
            }
            prop_assert_eq!(plain_run(&b, from), want);
        }
    }

    fn serde(s: &str) -> Vec<u8> {
        serde_json::to_vec(s).unwrap()
    }

    #[test]
    fn escapes_like_serde_json() {
        let all: String = (0u32..0x80).filter_map(char::from_u32).collect();
        for s in [
            "",
            "plain",
            "a\"b\\c",
            "\u{2028}北🎉",
            &all,
            "\u{7f}\u{1f}\u{0}",
        ] {
            let mut out = Vec::new();
            write_str(&mut out, s);
            assert_eq!(out, serde(s), "{s:?}");
        }
    }

    proptest! {
        #[test]
        fn any_string_escapes_like_serde_json(s in any::<String>()) {
            let mut out = Vec::new();
            write_str(&mut out, &s);
            prop_assert_eq!(out, serde(&s));
        }
    }

    proptest! {
        /// A string the scanner finds and unescapes is what serde_json
        /// reads there, and one serde_json reads is found (escapes of every
        /// kind, surrogates, control characters, non-ASCII).
        #[test]
        fn scanned_strings_read_like_serde_json(
            parts in proptest::collection::vec(
                prop_oneof![
                    any::<String>(),
                    Just("\\\"".to_string()), Just("\\\\".to_string()), Just("\\n".to_string()),
                    Just("\\u00e9".to_string()), Just("\\ud83c\\udf89".to_string()),
                    Just("\\ud83c".to_string()), Just("\\udf89".to_string()), Just("\\x".to_string()),
                    Just("\\/".to_string()), Just("\u{2028}".to_string()), Just("\n".to_string()),
                    Just("\\".to_string()), Just("\"".to_string()),
                ],
                0..6,
            ),
        ) {
            let text = format!("\"{}\"", parts.concat());
            let b = text.as_bytes();
            let want: Option<String> = serde_json::from_str(&text).ok();
            let got = string_at(b, 0).and_then(|((s, e), escaped, next)| {
                if next != b.len() {
                    return None;
                }
                let inner = text.get(s..e)?;
                if escaped { unescape(inner) } else { Some(inner.to_string()) }
            });
            prop_assert_eq!(got, want);
        }
    }
}
