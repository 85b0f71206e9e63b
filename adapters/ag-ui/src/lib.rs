//! AG-UI adapter (stub: being written).
#![forbid(unsafe_code)]

use babelgate_core::{
    DecodeError, Decoder, Dialect, EncodeContext, Encoder, Event, Frame, RequestError,
    RequestTranslator, RunRequest,
};

pub struct AgUiDecoder;

impl AgUiDecoder {
    pub fn new() -> Self {
        AgUiDecoder
    }
}

impl Default for AgUiDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder for AgUiDecoder {
    fn dialect(&self) -> Dialect {
        Dialect::AgUi
    }
    fn decode(&mut self, _frame: &Frame, _out: &mut Vec<Event>) -> Result<(), DecodeError> {
        Err(DecodeError::new("not implemented"))
    }
}

pub struct AgUiEncoder {
    _ctx: EncodeContext,
}

impl AgUiEncoder {
    pub fn new(ctx: EncodeContext) -> Self {
        AgUiEncoder { _ctx: ctx }
    }
}

impl Encoder for AgUiEncoder {
    fn dialect(&self) -> Dialect {
        Dialect::AgUi
    }
    fn encode(&mut self, _event: &Event, _out: &mut Vec<u8>) {}
    fn finish(&mut self, _out: &mut Vec<u8>) {}
}

#[derive(Debug, Default, Clone, Copy)]
pub struct AgUiRequests;

impl RequestTranslator for AgUiRequests {
    fn dialect(&self) -> Dialect {
        Dialect::AgUi
    }
    fn parse_request(&self, _body: &[u8]) -> Result<RunRequest, RequestError> {
        Err(RequestError::new("not implemented"))
    }
    fn build_request(&self, _request: &RunRequest) -> Result<serde_json::Value, RequestError> {
        Err(RequestError::new("not implemented"))
    }
}
