//! The agent card a route serves at `{path}/.well-known/agent-card.json`:
//! what the SDK clients' card resolvers read to build a client. v1.0
//! declares the JSON-RPC interface in `supportedInterfaces`; the v0.3 fields
//! (`url`, `preferredTransport`, `protocolVersion`) say the same for
//! resolvers that read those (`a2a-sdk` drops them when the v1.0 list is
//! there; `@a2a-js/sdk` takes a card for v0.3 only when `protocolVersion`
//! is a 0.x one).

use babelgate_core::AgentAbout;
use serde_json::{json, Value};

/// Where below its interface an A2A agent's card is (the SDKs' constant).
pub const WELL_KNOWN_PATH: &str = "/.well-known/agent-card.json";

/// The protocol version the route speaks.
const PROTOCOL_VERSION: &str = "1.0";

pub fn agent_card(about: &AgentAbout) -> Value {
    let skills: Vec<Value> = about
        .skills
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "name": s.name,
                "description": s.description,
                "tags": s.tags,
                "examples": s.examples,
            })
        })
        .collect();
    json!({
        "name": about.name,
        "description": about.description,
        "version": about.version,
        "protocolVersion": PROTOCOL_VERSION,
        "url": about.url,
        "preferredTransport": "JSONRPC",
        "supportedInterfaces": [{
            "url": about.url,
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        // The SDK clients stream only when the card says so.
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": skills,
    })
}
