//! The neutral run request: what a client asks an agent to do, whatever the
//! dialect. Client-side translators parse their body into a [`RunRequest`];
//! upstream-side translators build their body from one.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::event::{Extra, Role};

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunRequest {
    /// The conversation (AG-UI `threadId`, Vercel chat `id`, AG-Kit
    /// `conversationId`). The same chat always maps to the same thread.
    pub thread_id: String,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The full history as far as the client sent it (AG-Kit sends only the
    /// new messages; the gateway's store completes the history).
    #[serde(default)]
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub context: Vec<Context>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded_props: Option<Value>,
    /// Answers to the interrupts the previous run ended with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resume: Vec<ResumeEntry>,
    /// Vercel `trigger`: a regenerate drops the last assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// The assistant message this run continues (Vercel `messageId` after a
    /// front-end tool ran), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_message_id: Option<String>,
    /// What the continued message already holds, as the client sent it.
    #[serde(default, skip_serializing_if = "Continued::is_empty")]
    pub continued: Continued,
    /// What the client's request asks every answer to carry back (a JSON-RPC
    /// request's `id`), as the dialect's parser read it; the gateway hands it
    /// to the encoder ([`crate::EncodeContext::reply_to`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Value>,
    /// Request fields the dialect parser did not model, kept for a same-dialect
    /// upstream (e.g. AG-UI `protocolVersion`, extra Vercel body fields).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Extra,
}

/// The tool calls and approval requests of the assistant message a run
/// continues. A Vercel client looks a result or an approval up in that
/// message and throws when it is not there, so the encoder announces any
/// other call before referring to it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Continued {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<String>,
}

impl Continued {
    pub fn is_empty(&self) -> bool {
        self.tool_calls.is_empty() && self.approvals.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    SubmitMessage,
    RegenerateMessage,
}

/// One message of the history.
///
/// An assistant message keeps its text, reasoning and tool calls as parts of
/// one ordered `content`: "text, call, more text" stays in that order, and
/// each request translator splits it the way its dialect needs (AG-UI: an
/// assistant message per run of text and calls, a reasoning message per
/// reasoning part, as pydantic-ai's `AGUIAdapter.dump_messages` does).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(from = "MessageRepr")]
pub struct Message {
    pub id: String,
    pub role: Role,
    /// Text, reasoning, media and tool calls, in order. Assistant text is one
    /// `Text` part per block.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Part>,
    /// Whether `content` was a list of parts in the source (AG-UI user
    /// messages may be a string or parts; a Vercel message with more than one
    /// part is parts). Kept so a same-dialect round trip is exact.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub content_is_parts: bool,
    /// For a tool message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a tool message: the tool failed with this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Activity messages: their type (AG-UI `activityType`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_type: Option<String>,
    /// Fields not modelled here, by wire name of the source dialect.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Extra,
}

/// What a stored [`Message`] may look like: histories written before tool
/// calls became parts have a separate `tool_calls` list, read as calls after
/// the content (where those builders put them).
#[derive(Deserialize)]
struct MessageRepr {
    id: String,
    role: Role,
    #[serde(default)]
    content: Vec<Part>,
    #[serde(default)]
    content_is_parts: bool,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    activity_type: Option<String>,
    #[serde(default)]
    extra: Extra,
}

impl From<MessageRepr> for Message {
    fn from(r: MessageRepr) -> Self {
        let mut content = r.content;
        content.extend(r.tool_calls.into_iter().map(Part::ToolCall));
        Message {
            id: r.id,
            role: r.role,
            content,
            content_is_parts: r.content_is_parts,
            tool_call_id: r.tool_call_id,
            error: r.error,
            name: r.name,
            activity_type: r.activity_type,
            extra: r.extra,
        }
    }
}

impl Message {
    /// All text parts joined, the way dialects with string content want it.
    pub fn text(&self) -> String {
        self.text_joined("")
    }

    /// The text parts joined with `sep` (a string-only dialect given several
    /// user text parts keeps them apart with a newline, as pydantic-ai joins
    /// system prompts).
    pub fn text_joined(&self, sep: &str) -> String {
        let mut out = String::new();
        let mut first = true;
        for p in &self.content {
            if let Part::Text { text } = p {
                if !first {
                    out.push_str(sep);
                }
                out.push_str(text);
                first = false;
            }
        }
        out
    }

    pub fn text_message(id: impl Into<String>, role: Role, text: impl Into<String>) -> Self {
        Message {
            id: id.into(),
            role,
            content: vec![Part::Text { text: text.into() }],
            ..Default::default()
        }
    }

    /// The tool calls of an assistant message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    pub fn tool_calls_mut(&mut self) -> impl Iterator<Item = &mut ToolCall> {
        self.content.iter_mut().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    pub fn has_tool_calls(&self) -> bool {
        self.content.iter().any(|p| matches!(p, Part::ToolCall(_)))
    }

    /// Content other than tool calls (text, reasoning, media, foreign parts).
    pub fn has_body(&self) -> bool {
        self.content.iter().any(|p| !matches!(p, Part::ToolCall(_)))
    }

    /// An assistant message as the messages a dialect with separate
    /// assistant (text + calls) and reasoning messages writes, in order.
    /// The rules are pydantic-ai's `AGUIAdapter` (`_dump_response_parts`):
    /// text after a tool call starts a new assistant message; a reasoning
    /// part ends the message before it and is a message of its own; adjacent
    /// text parts run together, text parts with another part between them
    /// (a file, a data part) are joined by a newline. Parts with no place in
    /// such a message (media, foreign parts) are left out. The first piece
    /// keeps the message's id, the others get `{id}:p{n}` ([`piece_id`]).
    pub fn assistant_pieces(&self) -> Vec<Piece<'_>> {
        let mut pieces: Vec<Piece<'_>> = Vec::new();
        let mut texts: Vec<String> = Vec::new();
        let mut calls: Vec<&ToolCall> = Vec::new();
        let mut prev_was_text = false;
        fn push_reply<'a>(
            pieces: &mut Vec<Piece<'a>>,
            texts: &mut Vec<String>,
            calls: &mut Vec<&'a ToolCall>,
        ) {
            if texts.is_empty() && calls.is_empty() {
                return;
            }
            let text = (!texts.is_empty()).then(|| texts.join("\n"));
            pieces.push(Piece::Reply {
                text,
                tool_calls: std::mem::take(calls),
            });
            texts.clear();
        }
        for p in &self.content {
            match p {
                Part::Text { text } => {
                    if !calls.is_empty() {
                        push_reply(&mut pieces, &mut texts, &mut calls);
                    }
                    match texts.last_mut() {
                        Some(last) if prev_was_text => last.push_str(text),
                        _ => texts.push(text.clone()),
                    }
                    prev_was_text = true;
                    continue;
                }
                Part::Reasoning { text } => {
                    push_reply(&mut pieces, &mut texts, &mut calls);
                    pieces.push(Piece::Reasoning { text: text.clone() });
                }
                Part::ToolCall(c) => calls.push(c),
                Part::Media { .. } | Part::Other { .. } => {}
            }
            prev_was_text = false;
        }
        push_reply(&mut pieces, &mut texts, &mut calls);
        pieces
    }
}

/// The id of the `n`-th (0-based) message an assistant message `id` is split
/// into: `id` itself, then `{id}:p2`, `{id}:p3`...
pub fn piece_id(id: &str, n: usize) -> String {
    if n == 0 {
        id.to_string()
    } else {
        format!("{id}:p{}", n + 1)
    }
}

/// Which piece of a split assistant message carries the message's kept
/// fields: the first reply, or the first piece when there is none.
pub fn extra_piece(pieces: &[Piece<'_>]) -> usize {
    pieces
        .iter()
        .position(|p| matches!(p, Piece::Reply { .. }))
        .unwrap_or(0)
}

/// Whether `id` names a piece (not the first) of a split assistant message.
pub fn is_piece_id(id: &str) -> bool {
    id.rsplit_once(":p")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// One message of a split assistant message ([`Message::assistant_pieces`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Piece<'a> {
    Reasoning {
        text: String,
    },
    /// Text (absent when there is none) and the calls after it.
    Reply {
        text: Option<String>,
        tool_calls: Vec<&'a ToolCall>,
    },
}

/// One part of a message body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    /// An image, audio, video, document or other file.
    Media {
        media: MediaKind,
        source: MediaSource,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
    Reasoning {
        text: String,
    },
    /// A call an assistant message made, where it made it.
    ToolCall(ToolCall),
    /// A part no other dialect can carry (a Vercel `data-*` or `source-url`
    /// part in history), verbatim.
    Other {
        value: Value,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    Image,
    Audio,
    Video,
    Document,
    /// A file whose kind only its media type tells.
    File,
}

impl MediaKind {
    /// The kind a media type suggests (Vercel `file` parts carry only that).
    pub fn from_media_type(mime: &str) -> MediaKind {
        if mime.starts_with("image/") {
            MediaKind::Image
        } else if mime.starts_with("audio/") {
            MediaKind::Audio
        } else if mime.starts_with("video/") {
            MediaKind::Video
        } else if mime == "application/pdf" || mime.starts_with("text/") {
            MediaKind::Document
        } else {
            MediaKind::File
        }
    }
}

/// Where a media part's bytes are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MediaSource {
    /// Inline base64.
    Data { value: String, media_type: String },
    Url {
        url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
    },
    /// A provider-issued handle.
    Handle {
        value: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
    },
}

impl MediaSource {
    pub fn media_type(&self) -> Option<&str> {
        match self {
            MediaSource::Data { media_type, .. } => Some(media_type),
            MediaSource::Url { media_type, .. } | MediaSource::Handle { media_type, .. } => {
                media_type.as_deref()
            }
        }
    }

    /// As a URL: `data:` URLs for inline bytes (Vercel `file` parts want one).
    pub fn to_url(&self) -> String {
        match self {
            MediaSource::Data { value, media_type } => format!("data:{media_type};base64,{value}"),
            MediaSource::Url { url, .. } => url.clone(),
            MediaSource::Handle { value, .. } => value.clone(),
        }
    }

    /// From a URL, unpacking `data:...;base64,` into inline bytes.
    pub fn from_url(url: &str, media_type: Option<&str>) -> MediaSource {
        if let Some(rest) = url.strip_prefix("data:") {
            if let Some((head, data)) = rest.split_once(',') {
                if let Some(mime) = head.strip_suffix(";base64") {
                    let mime = if mime.is_empty() {
                        media_type.unwrap_or("application/octet-stream")
                    } else {
                        mime
                    };
                    return MediaSource::Data {
                        value: data.to_string(),
                        media_type: mime.to_string(),
                    };
                }
            }
        }
        MediaSource::Url {
            url: url.to_string(),
            media_type: media_type.map(str::to_string),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// JSON text, kept as written (a model may emit invalid JSON).
    pub arguments: String,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema (a parsed value even where the dialect sends a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    pub description: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResumeEntry {
    pub interrupt_id: String,
    /// `resolved` or `cancelled`.
    #[serde(default = "resolved")]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

fn resolved() -> String {
    "resolved".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_round_trip() {
        let s = MediaSource::from_url("data:image/png;base64,AAAA", None);
        assert_eq!(
            s,
            MediaSource::Data {
                value: "AAAA".into(),
                media_type: "image/png".into()
            }
        );
        assert_eq!(s.to_url(), "data:image/png;base64,AAAA");
        let u = MediaSource::from_url("https://x/y.png", Some("image/png"));
        assert_eq!(u.media_type(), Some("image/png"));
        assert_eq!(u.to_url(), "https://x/y.png");
    }

    fn call(id: &str) -> Part {
        Part::ToolCall(ToolCall {
            id: id.into(),
            name: "f".into(),
            arguments: "{}".into(),
            extra: Map::new(),
        })
    }

    fn text(t: &str) -> Part {
        Part::Text { text: t.into() }
    }

    #[test]
    fn assistant_pieces_follow_pydantic_ai() {
        let m = Message {
            id: "a".into(),
            role: Role::Assistant,
            content: vec![
                Part::Reasoning { text: "r1".into() },
                text("x"),
                text("y"),
                Part::Other {
                    value: serde_json::json!({"type": "data-x"}),
                },
                text("z"),
                call("c1"),
                call("c2"),
                text("after"),
                Part::Reasoning { text: "r2".into() },
            ],
            ..Default::default()
        };
        let pieces = m.assistant_pieces();
        let ids: Vec<_> = m
            .content
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall(c) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(
            pieces,
            vec![
                Piece::Reasoning { text: "r1".into() },
                Piece::Reply {
                    text: Some("xy\nz".into()),
                    tool_calls: ids.clone()
                },
                Piece::Reply {
                    text: Some("after".into()),
                    tool_calls: vec![]
                },
                Piece::Reasoning { text: "r2".into() },
            ]
        );
        assert_eq!(piece_id("a", 0), "a");
        assert_eq!(piece_id("a", 2), "a:p3");
        assert!(is_piece_id("a:p3") && !is_piece_id("a:2") && !is_piece_id("a"));
        assert!(Message::default().assistant_pieces().is_empty());
    }

    #[test]
    fn stored_messages_with_a_tool_calls_list_still_read() {
        let v = serde_json::json!({"id": "a", "role": "assistant",
            "content": [{"type": "text", "text": "hi"}],
            "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}]});
        let m: Message = serde_json::from_value(v).unwrap();
        assert_eq!(m.content, vec![text("hi"), call("c1")]);
        let again: Message = serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(again, m);
    }

    #[test]
    fn text_joins_text_parts_only() {
        let mut m = Message::text_message("1", Role::User, "a");
        m.content.push(Part::Reasoning { text: "x".into() });
        m.content.push(Part::Text { text: "b".into() });
        assert_eq!(m.text(), "ab");
        assert_eq!(m.text_joined("\n"), "a\nb");
    }
}
