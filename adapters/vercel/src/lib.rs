//! Vercel AI SDK UI message stream v1 adapter (stub: being written).
#![forbid(unsafe_code)]

use babelgate_core::{
    DecodeError, Decoder, Dialect, EncodeContext, Encoder, Event, Frame, RequestError,
    RequestTranslator, RunRequest,
};

pub struct VercelDecoder;

impl VercelDecoder {
    pub fn new() -> Self {
        VercelDecoder
    }
}

impl Default for VercelDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder for VercelDecoder {
    fn dialect(&self) -> Dialect {
        Dialect::Vercel
    }
    fn decode(&mut self, _frame: &Frame, _out: &mut Vec<Event>) -> Result<(), DecodeError> {
        Err(DecodeError::new("not implemented"))
    }
}

pub struct VercelEncoder {
    _ctx: EncodeContext,
}

impl VercelEncoder {
    pub fn new(ctx: EncodeContext) -> Self {
        VercelEncoder { _ctx: ctx }
    }
}

impl Encoder for VercelEncoder {
    fn dialect(&self) -> Dialect {
        Dialect::Vercel
    }
    fn encode(&mut self, _event: &Event, _out: &mut Vec<u8>) {}
    fn finish(&mut self, _out: &mut Vec<u8>) {}
}

#[derive(Debug, Default, Clone, Copy)]
pub struct VercelRequests;

impl RequestTranslator for VercelRequests {
    fn dialect(&self) -> Dialect {
        Dialect::Vercel
    }
    fn parse_request(&self, _body: &[u8]) -> Result<RunRequest, RequestError> {
        Err(RequestError::new("not implemented"))
    }
    fn build_request(&self, _request: &RunRequest) -> Result<serde_json::Value, RequestError> {
        Err(RequestError::new("not implemented"))
    }
}
