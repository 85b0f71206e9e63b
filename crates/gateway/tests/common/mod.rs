//! Helpers shared by the gateway's integration tests (each test file that
//! needs them says `mod common;`).

use babelgate_core::sse::SseFramer;
use serde_json::Value;

/// (id, data) of each SSE event in a body: data as JSON when it is JSON,
/// else as a string (`[DONE]`); comments and empty events left out.
pub fn sse_events(bytes: &[u8]) -> Vec<(Option<String>, Value)> {
    let mut framer = SseFramer::new(1 << 20);
    let mut frames = Vec::new();
    framer.push(bytes, &mut frames).unwrap();
    framer.finish(&mut frames).unwrap();
    frames
        .into_iter()
        .filter(|f| !f.data.is_empty())
        .map(|f| {
            let v = serde_json::from_str(&f.data).unwrap_or(Value::String(f.data.clone()));
            (f.id.clone(), v)
        })
        .collect()
}
