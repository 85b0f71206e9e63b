//! The one place that knows every adapter: builds a dialect's decoder,
//! encoder and request translator by name, for the gateway, the benches and
//! the fuzz targets alike. Adapters never see each other.
#![forbid(unsafe_code)]
// Input from clients and upstreams reaches this crate: nothing it does may panic.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::string_slice,
        clippy::unwrap_used,
        clippy::expect_used
    )
)]

use babelgate_core::{
    Decoder, Dialect, EncodeContext, Encoder, Policy, RequestTranslator, SseFramer, Translator,
};

pub fn decoder(dialect: Dialect) -> Box<dyn Decoder> {
    match dialect {
        Dialect::AgUi => Box::new(babelgate_ag_ui::AgUiDecoder::new()),
        Dialect::Hai => Box::new(babelgate_hai::HaiDecoder::new()),
        Dialect::Vercel => Box::new(babelgate_vercel::VercelDecoder::new()),
        Dialect::AgKit => Box::new(babelgate_agkit::AgKitDecoder::new()),
    }
}

pub fn encoder(dialect: Dialect, ctx: EncodeContext) -> Box<dyn Encoder> {
    match dialect {
        Dialect::AgUi => Box::new(babelgate_ag_ui::AgUiEncoder::new(ctx)),
        Dialect::Hai => Box::new(babelgate_hai::HaiEncoder::new(ctx)),
        Dialect::Vercel => Box::new(babelgate_vercel::VercelEncoder::new(ctx)),
        Dialect::AgKit => Box::new(babelgate_agkit::AgKitEncoder::new(ctx)),
    }
}

pub fn requests(dialect: Dialect) -> &'static dyn RequestTranslator {
    match dialect {
        Dialect::AgUi => &babelgate_ag_ui::AgUiRequests,
        Dialect::Hai => &babelgate_hai::HaiRequests,
        Dialect::Vercel => &babelgate_vercel::VercelRequests,
        Dialect::AgKit => &babelgate_agkit::AgKitRequests,
    }
}

/// What the gateway does for `dialect` beyond translating it, as its
/// adapter declares.
pub fn policy(dialect: Dialect) -> Policy {
    match dialect {
        Dialect::AgUi => babelgate_ag_ui::POLICY,
        Dialect::Hai => babelgate_hai::POLICY,
        Dialect::Vercel => babelgate_vercel::POLICY,
        Dialect::AgKit => babelgate_agkit::POLICY,
    }
}

/// A translator from `from` (upstream) to `to` (client).
pub fn translator(
    from: Dialect,
    to: Dialect,
    ctx: EncodeContext,
    max_event_bytes: usize,
) -> Translator {
    Translator::new(
        SseFramer::new(max_event_bytes),
        decoder(from),
        encoder(to, ctx),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelgate_core::Resume;

    /// The policies the adapters declare are the behaviour the gateway's
    /// tests hold it to (resume.rs, gateway.rs): pinned here so that a
    /// change to one is a deliberate one.
    #[test]
    fn each_dialect_declares_its_policy() {
        let p = policy(Dialect::AgKit);
        assert!(p.gateway_keeps_history && p.upstream_keeps_history);
        assert_eq!(p.resume, Resume::AfterOrFromStart);
        let p = policy(Dialect::Vercel);
        assert!(!p.gateway_keeps_history && !p.upstream_keeps_history);
        assert_eq!(p.resume, Resume::RunningFromStart);
        for d in [Dialect::AgUi, Dialect::Hai] {
            let p = policy(d);
            assert!(!p.gateway_keeps_history && !p.upstream_keeps_history);
            assert!(p.keeps_input(), "{d}: snapshots start with the input");
        }
    }
}
