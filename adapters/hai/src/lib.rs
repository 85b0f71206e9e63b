//! HAI adapter (stub: being written).
#![forbid(unsafe_code)]

use babelgate_core::{
    DecodeError, Decoder, Dialect, EncodeContext, Encoder, Event, Frame, RequestError,
    RequestTranslator, RunRequest,
};

pub struct HaiDecoder;

impl HaiDecoder {
    pub fn new() -> Self {
        HaiDecoder
    }
}

impl Default for HaiDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder for HaiDecoder {
    fn dialect(&self) -> Dialect {
        Dialect::Hai
    }
    fn decode(&mut self, _frame: &Frame, _out: &mut Vec<Event>) -> Result<(), DecodeError> {
        Err(DecodeError::new("not implemented"))
    }
}

pub struct HaiEncoder {
    _ctx: EncodeContext,
}

impl HaiEncoder {
    pub fn new(ctx: EncodeContext) -> Self {
        HaiEncoder { _ctx: ctx }
    }
}

impl Encoder for HaiEncoder {
    fn dialect(&self) -> Dialect {
        Dialect::Hai
    }
    fn encode(&mut self, _event: &Event, _out: &mut Vec<u8>) {}
    fn finish(&mut self, _out: &mut Vec<u8>) {}
}

#[derive(Debug, Default, Clone, Copy)]
pub struct HaiRequests;

impl RequestTranslator for HaiRequests {
    fn dialect(&self) -> Dialect {
        Dialect::Hai
    }
    fn parse_request(&self, _body: &[u8]) -> Result<RunRequest, RequestError> {
        Err(RequestError::new("not implemented"))
    }
    fn build_request(&self, _request: &RunRequest) -> Result<serde_json::Value, RequestError> {
        Err(RequestError::new("not implemented"))
    }
}
