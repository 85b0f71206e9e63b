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
    /// Request fields the dialect parser did not model, kept for a same-dialect
    /// upstream (e.g. AG-UI `protocolVersion`, extra Vercel body fields).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Extra,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    SubmitMessage,
    RegenerateMessage,
}

/// One message of the history.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub role: Role,
    /// Text and media, in order. Assistant text is one `Text` part per block.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Part>,
    /// Whether `content` was a plain string in the source (AG-UI user
    /// messages may be either; kept so a same-dialect round trip is exact).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub content_is_parts: bool,
    /// Calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
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

impl Message {
    /// All text parts joined, the way dialects with string content want it.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for p in &self.content {
            if let Part::Text { text } = p {
                out.push_str(text);
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

    #[test]
    fn text_joins_text_parts_only() {
        let mut m = Message::text_message("1", Role::User, "a");
        m.content.push(Part::Reasoning { text: "x".into() });
        m.content.push(Part::Text { text: "b".into() });
        assert_eq!(m.text(), "ab");
    }
}
