//! Writing JSON straight into an output buffer, for encoders' hot paths:
//! the same bytes serde_json writes, without building a `Value` first.

/// Bytes that need an escape: control characters, `"` and `\`.
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

/// Appends `s` as a JSON string, quoted and escaped exactly as serde_json
/// escapes it (`\"`, `\\`, the short forms `\b \f \n \r \t`, other control
/// characters as `\u00xx`; everything else as is).
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !ESCAPED[usize::from(b)] {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
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
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
        }
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends one SSE event `data: {"type":ty,"k1":"v1",...}\n\n` whose values
/// are all strings: the bytes `write_json` gives for the same object. The
/// keys and `ty` are the encoder's own constants and are written as they are
/// (they must need no escaping); only the values are escaped.
pub fn write_string_event(out: &mut Vec<u8>, ty_key: &str, ty: &str, fields: &[(&str, &str)]) {
    debug_assert!(!ty
        .bytes()
        .chain(ty_key.bytes())
        .any(|b| ESCAPED[usize::from(b)]));
    out.extend_from_slice(b"data: {\"");
    out.extend_from_slice(ty_key.as_bytes());
    out.extend_from_slice(b"\":\"");
    out.extend_from_slice(ty.as_bytes());
    out.push(b'"');
    for (k, v) in fields {
        debug_assert!(!k.bytes().any(|b| ESCAPED[usize::from(b)]));
        out.extend_from_slice(b",\"");
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b"\":");
        write_str(out, v);
    }
    out.extend_from_slice(b"}\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    #[test]
    fn string_events_match_write_json() {
        let mut out = Vec::new();
        write_string_event(
            &mut out,
            "type",
            "text-delta",
            &[("id", "m"), ("delta", "a\n")],
        );
        let mut want = Vec::new();
        crate::sse::write_json(
            &mut want,
            &serde_json::json!({"type": "text-delta", "id": "m", "delta": "a\n"}),
        );
        assert_eq!(out, want);
    }

    proptest! {
        #[test]
        fn any_string_escapes_like_serde_json(s in any::<String>()) {
            let mut out = Vec::new();
            write_str(&mut out, &s);
            prop_assert_eq!(out, serde(&s));
        }
    }
}
