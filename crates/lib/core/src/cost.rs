//! What a JSON text costs once parsed, and the one rule that bounds it: a
//! request body or an upstream event may take at most [`FACTOR`] times its
//! bytes plus [`CONSTANT`] as parsed values.
//!
//! Parsed into `serde_json::Value`s, a text of many tiny values costs far
//! more than its bytes (`[0,0,…]`: a `Value` of tens of bytes for every two
//! bytes of text), and every stage after the parse (the request model, the
//! upstream request, the event model, the encoder) holds its own copy. The
//! rule is checked once where text enters (request bodies in the gateway,
//! upstream events in [`Translator`](crate::translate::Translator)) by
//! [`check`], a scan of the raw bytes that allocates nothing; binary
//! (protobuf) events are held to the same number of values by
//! [`value_budget`] while they are read. Text under [`SCAN_FLOOR`] bytes is
//! not scanned: even all of it tiny values stays within the constant.

use serde_json::Value;

/// Parsed bytes allowed per byte of text (see the module doc).
pub const FACTOR: usize = 8;

/// Parsed bytes every text may take whatever its size: room for the
/// fixed part of a small request or event.
pub const CONSTANT: usize = 256 * 1024;

/// What one parsed value holds in place (a `Value`), plus its share of the
/// growth room of the array or map holding it (the vectors double).
const VALUE: usize = std::mem::size_of::<Value>() * 3 / 2;

/// What one object entry adds besides its value: the key's `String`, the
/// hash and the index a `preserve_order` map keeps per entry, with the same
/// growth room.
const ENTRY: usize = (std::mem::size_of::<String>() + 2 * std::mem::size_of::<usize>()) * 3 / 2;

/// The most a single byte of text can cost parsed: two bytes make a value
/// (`0,`).
const WORST_PER_BYTE: usize = VALUE.div_ceil(2) + ENTRY;

/// Texts of at most this many bytes cannot pass the limit, so are not scanned.
pub const SCAN_FLOOR: usize = CONSTANT / WORST_PER_BYTE;

/// The parsed size a text of `len` bytes may take.
pub fn limit(len: usize) -> usize {
    len.saturating_mul(FACTOR).saturating_add(CONSTANT)
}

/// How many parsed values a text of `len` bytes may make (for readers that
/// count values rather than scan text, such as the protobuf one).
pub fn value_budget(len: usize) -> usize {
    limit(len) / VALUE
}

/// A text whose parsed form would pass [`limit`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the JSON of {bytes} bytes would take more than {limit} bytes of memory once parsed \
     ({values} values, {keys} keys): at most {FACTOR}x its size plus {CONSTANT} bytes"
)]
pub struct TooCostly {
    pub bytes: usize,
    pub limit: usize,
    /// Values and keys counted when the scan stopped.
    pub values: usize,
    pub keys: usize,
}

/// Refuses a JSON text whose parsed form would take more than [`limit`] of
/// its size. One pass over the bytes, no allocation; it stops as soon as the
/// estimate passes the limit. It does not validate: malformed text that
/// passes is refused by the parser after it.
pub fn check(bytes: &[u8]) -> Result<(), TooCostly> {
    if bytes.len() <= SCAN_FLOOR {
        return Ok(());
    }
    let limit = limit(bytes.len());
    let (mut cost, mut values, mut keys) = (0usize, 0usize, 0usize);
    let mut i = 0;
    // Whether the next string is an object key (after `{` or a `,` in an
    // object); tracked with the innermost container only, which is all a key
    // needs: `{` and `[` nest, `,` restores what the container expects.
    let mut in_object: Vec<bool> = Vec::new();
    let mut expect_key = false;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                let end = match crate::json::string_at(bytes, i) {
                    Some(((start, end), _, next)) => {
                        i = next;
                        end - start
                    }
                    // Invalid: the parser refuses it.
                    None => return Ok(()),
                };
                // The content, rounded up to the allocator's smallest class.
                cost += end.next_multiple_of(8);
                if expect_key {
                    keys += 1;
                    cost += ENTRY;
                    expect_key = false;
                } else {
                    values += 1;
                    cost += VALUE;
                }
            }
            b'{' | b'[' => {
                values += 1;
                cost += VALUE;
                // Kept as one bool per level: nesting is bounded by the
                // parsers' recursion limits, and a refused text stops here.
                if in_object.len() < 4096 {
                    in_object.push(b == b'{');
                }
                expect_key = b == b'{';
                i += 1;
            }
            b'}' | b']' => {
                in_object.pop();
                expect_key = false;
                i += 1;
            }
            b',' => {
                expect_key = in_object.last() == Some(&true);
                i += 1;
            }
            b':' | b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            _ => {
                // A number or a literal: one value to its end.
                values += 1;
                cost += VALUE;
                i += 1;
                while bytes.get(i).is_some_and(|c| {
                    !matches!(
                        c,
                        b',' | b']'
                            | b'}'
                            | b' '
                            | b'\n'
                            | b'\r'
                            | b'\t'
                            | b':'
                            | b'"'
                            | b'{'
                            | b'['
                    )
                }) {
                    i += 1;
                }
            }
        }
        if cost > limit {
            return Err(TooCostly {
                bytes: bytes.len(),
                limit,
                values,
                keys,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real cost of parsing is not measured here (see the gateway's
    /// `memory` test); these hold the scan to what it counts.
    #[test]
    fn small_texts_pass_unscanned() {
        let tiny = "[".to_string() + &"0,".repeat(SCAN_FLOOR / 2 - 2) + "0]";
        assert!(tiny.len() <= SCAN_FLOOR);
        assert_eq!(check(tiny.as_bytes()), Ok(()));
    }

    #[test]
    fn many_tiny_values_are_refused() {
        for unit in ["0,", "\"\",", "{},", "[],", "null,", "{\"a\":1},"] {
            let body = format!("[{}0]", unit.repeat(400_000));
            let e = check(body.as_bytes()).unwrap_err();
            assert_eq!(e.bytes, body.len(), "{unit}");
            assert!(e.to_string().contains("at most 8x"), "{e}");
        }
        let keys = format!(
            "{{{}\"z\":0}}",
            (0..200_000)
                .map(|i| format!("\"{i}\":0,"))
                .collect::<String>()
        );
        assert!(check(keys.as_bytes()).unwrap_err().keys > 0);
    }

    #[test]
    fn long_strings_and_ordinary_requests_pass() {
        let long = format!("{{\"content\":\"{}\"}}", "x".repeat(4 << 20));
        assert_eq!(check(long.as_bytes()), Ok(()));
        // A long chat: messages of a few hundred bytes of text each.
        let message = format!(
            "{{\"id\":\"msg-1234\",\"role\":\"user\",\"content\":\"{}\"}},",
            "word ".repeat(40)
        );
        let chat = format!("{{\"messages\":[{}{{}}]}}", message.repeat(4000));
        assert!(chat.len() > 900_000);
        assert_eq!(check(chat.as_bytes()), Ok(()));
    }

    #[test]
    fn the_floor_and_arrays_of_short_numbers_are_as_documented() {
        // docs/memory.md states both numbers (64-bit, `preserve_order`).
        assert_eq!(SCAN_FLOOR, 2299);
        let numbers = |n: usize| format!("[{}0]", "0.123456,".repeat(n));
        assert_eq!(check(numbers(48 * 1024 / 9).as_bytes()), Ok(()));
        assert!(check(numbers(96 * 1024 / 9).as_bytes()).is_err());
    }

    #[test]
    fn keys_are_told_from_values() {
        // Strings inside an array inside an object are values, the object's
        // own strings before `:` keys.
        let body = format!("{{\"k\":[{}\"\"],\"j\":1}}", "\"\",".repeat(200_000));
        let e = check(body.as_bytes()).unwrap_err();
        assert!(e.values > e.keys && e.keys <= 1, "{e:?}");
    }
}
