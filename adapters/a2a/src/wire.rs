//! A2A wire forms shared by the decoder, encoder and request translator.

use serde_json::{Map, Value};

/// The header an A2A v1.0 request carries: the SDK servers take a request
/// without it for v0.3 and refuse the v1.0 method names.
pub const VERSION_HEADER: (&str, &str) = ("a2a-version", "1.0");

/// A task's state, from either the v1.0 (`TASK_STATE_INPUT_REQUIRED`) or
/// the v0.3 (`input-required`) spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Failed,
    Rejected,
    Canceled,
    Unknown,
}

impl State {
    pub fn parse(s: &str) -> State {
        let s = s.strip_prefix("TASK_STATE_").unwrap_or(s);
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "submitted" => State::Submitted,
            "working" => State::Working,
            "input-required" => State::InputRequired,
            "auth-required" => State::AuthRequired,
            "completed" => State::Completed,
            "failed" => State::Failed,
            "rejected" => State::Rejected,
            "canceled" | "cancelled" => State::Canceled,
            _ => State::Unknown,
        }
    }

    /// The v1.0 name.
    pub fn v1(self) -> &'static str {
        match self {
            State::Submitted => "TASK_STATE_SUBMITTED",
            State::Working => "TASK_STATE_WORKING",
            State::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            State::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
            State::Completed => "TASK_STATE_COMPLETED",
            State::Failed => "TASK_STATE_FAILED",
            State::Rejected => "TASK_STATE_REJECTED",
            State::Canceled => "TASK_STATE_CANCELED",
            State::Unknown => "TASK_STATE_UNSPECIFIED",
        }
    }

    /// The v0.3 name.
    pub fn v03(self) -> &'static str {
        match self {
            State::Submitted => "submitted",
            State::Working => "working",
            State::InputRequired => "input-required",
            State::AuthRequired => "auth-required",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Rejected => "rejected",
            State::Canceled => "canceled",
            State::Unknown => "unknown",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Completed | State::Failed | State::Rejected | State::Canceled
        )
    }
}

/// What a streamed `result` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Task,
    Message,
    StatusUpdate,
    ArtifactUpdate,
}

/// The kind and body of a `result`: v1.0 wraps the body in a key named for
/// its kind (`{"statusUpdate": {...}}`), v0.3 says it in `kind`.
pub fn result_kind(result: &Map<String, Value>) -> Option<(Kind, &Map<String, Value>)> {
    for (key, kind) in [
        ("task", Kind::Task),
        ("message", Kind::Message),
        ("statusUpdate", Kind::StatusUpdate),
        ("artifactUpdate", Kind::ArtifactUpdate),
    ] {
        if let Some(body) = result.get(key).and_then(Value::as_object) {
            return Some((kind, body));
        }
    }
    let kind = match result.get("kind").and_then(Value::as_str)? {
        "task" => Kind::Task,
        "message" => Kind::Message,
        "status-update" => Kind::StatusUpdate,
        "artifact-update" => Kind::ArtifactUpdate,
        _ => return None,
    };
    Some((kind, result))
}

/// One part of a message or artifact, either spelling: v1.0 says what it is
/// by which field it has (`text`, `data`, `url`, `raw`), v0.3 by `kind`
/// (`text`, `data`, `file` with `file.uri` / `file.bytes`).
#[derive(Debug, Clone, PartialEq)]
pub enum PartRef<'a> {
    Text(&'a str),
    Data(&'a Value),
    File {
        /// A URL, or a `data:` URL for inline bytes.
        url: String,
        media_type: String,
        filename: Option<&'a str>,
    },
    Other,
}

pub fn part(p: &Value) -> PartRef<'_> {
    let Some(o) = p.as_object() else {
        return PartRef::Other;
    };
    if let Some(t) = o.get("text").and_then(Value::as_str) {
        return PartRef::Text(t);
    }
    if let Some(d) = o.get("data") {
        return PartRef::Data(d);
    }
    let (file, mime_key) = match o.get("file").and_then(Value::as_object) {
        Some(f) => (f, "mimeType"),
        None => (o, "mediaType"),
    };
    let media_type = file
        .get(mime_key)
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .unwrap_or("application/octet-stream")
        .to_string();
    let filename = file
        .get("filename")
        .or_else(|| file.get("name"))
        .and_then(Value::as_str);
    if let Some(u) = file
        .get("url")
        .or_else(|| file.get("uri"))
        .and_then(Value::as_str)
    {
        return PartRef::File {
            url: u.to_string(),
            media_type,
            filename,
        };
    }
    if let Some(b) = file
        .get("raw")
        .or_else(|| file.get("bytes"))
        .and_then(Value::as_str)
    {
        return PartRef::File {
            url: format!("data:{media_type};base64,{b}"),
            media_type,
            filename,
        };
    }
    PartRef::Other
}

/// The text parts of a message, joined as the SDKs' `get_message_text` does.
pub fn message_text(message: &Map<String, Value>) -> String {
    let mut out: Vec<&str> = Vec::new();
    if let Some(parts) = message.get("parts").and_then(Value::as_array) {
        for p in parts {
            if let PartRef::Text(t) = part(p) {
                out.push(t);
            }
        }
    }
    out.join("\n")
}

/// JSON for an SSE `data:` line: serde_json leaves U+2028, U+2029 and U+0085
/// as they are, and the Python SDK client splits lines on them
/// (`str.splitlines`), so they are written escaped. They can only stand in
/// strings, where the escape means the same character.
pub fn to_sse_json(value: &Value) -> String {
    let s = value.to_string();
    if !s.contains(['\u{2028}', '\u{2029}', '\u{85}']) {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 12);
    for c in s.chars() {
        match c {
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            '\u{85}' => out.push_str("\\u0085"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn states_read_in_both_spellings() {
        assert_eq!(
            State::parse("TASK_STATE_INPUT_REQUIRED"),
            State::InputRequired
        );
        assert_eq!(State::parse("input-required"), State::InputRequired);
        assert_eq!(State::parse("canceled"), State::Canceled);
        assert_eq!(State::parse("what"), State::Unknown);
    }

    #[test]
    fn line_separators_are_escaped() {
        let s = to_sse_json(&json!({"t": "a\u{2028}b\u{2029}c\u{85}d"}));
        assert_eq!(s, r#"{"t":"a\u2028b\u2029c\u0085d"}"#);
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["t"], "a\u{2028}b\u{2029}c\u{85}d");
    }

    #[test]
    fn parts_read_in_both_spellings() {
        assert_eq!(part(&json!({"text": "hi"})), PartRef::Text("hi"));
        assert_eq!(
            part(&json!({"kind": "text", "text": "hi"})),
            PartRef::Text("hi")
        );
        assert_eq!(
            part(
                &json!({"kind": "file", "file": {"uri": "https://x/y.png", "mimeType": "image/png"}})
            ),
            PartRef::File {
                url: "https://x/y.png".into(),
                media_type: "image/png".into(),
                filename: None
            }
        );
        assert_eq!(
            part(&json!({"raw": "AAAA", "mediaType": "image/png", "filename": "a.png"})),
            PartRef::File {
                url: "data:image/png;base64,AAAA".into(),
                media_type: "image/png".into(),
                filename: Some("a.png")
            }
        );
    }
}
