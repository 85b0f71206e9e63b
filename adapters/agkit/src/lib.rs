//! AG-Kit legacy send-message adapter (stub: being written).
#![forbid(unsafe_code)]

use babelgate_core::{
    DecodeError, Decoder, Dialect, EncodeContext, Encoder, Event, Frame, RequestError,
    RequestTranslator, RunRequest,
};

pub struct AgKitDecoder;

impl AgKitDecoder {
    pub fn new() -> Self {
        AgKitDecoder
    }
}

impl Default for AgKitDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder for AgKitDecoder {
    fn dialect(&self) -> Dialect {
        Dialect::AgKit
    }
    fn decode(&mut self, _frame: &Frame, _out: &mut Vec<Event>) -> Result<(), DecodeError> {
        Err(DecodeError::new("not implemented"))
    }
}

pub struct AgKitEncoder {
    _ctx: EncodeContext,
}

impl AgKitEncoder {
    pub fn new(ctx: EncodeContext) -> Self {
        AgKitEncoder { _ctx: ctx }
    }
}

impl Encoder for AgKitEncoder {
    fn dialect(&self) -> Dialect {
        Dialect::AgKit
    }
    fn encode(&mut self, _event: &Event, _out: &mut Vec<u8>) {}
    fn finish(&mut self, _out: &mut Vec<u8>) {}
}

#[derive(Debug, Default, Clone, Copy)]
pub struct AgKitRequests;

impl RequestTranslator for AgKitRequests {
    fn dialect(&self) -> Dialect {
        Dialect::AgKit
    }
    fn parse_request(&self, _body: &[u8]) -> Result<RunRequest, RequestError> {
        Err(RequestError::new("not implemented"))
    }
    fn build_request(&self, _request: &RunRequest) -> Result<serde_json::Value, RequestError> {
        Err(RequestError::new("not implemented"))
    }
}
