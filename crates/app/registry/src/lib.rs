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
        Dialect::A2a => Box::new(babelgate_a2a::A2aDecoder::new()),
    }
}

pub fn encoder(dialect: Dialect, ctx: EncodeContext) -> Box<dyn Encoder> {
    match dialect {
        Dialect::AgUi => Box::new(babelgate_ag_ui::AgUiEncoder::new(ctx)),
        Dialect::Hai => Box::new(babelgate_hai::HaiEncoder::new(ctx)),
        Dialect::Vercel => Box::new(babelgate_vercel::VercelEncoder::new(ctx)),
        Dialect::AgKit => Box::new(babelgate_agkit::AgKitEncoder::new(ctx)),
        Dialect::A2a => Box::new(babelgate_a2a::A2aEncoder::new(ctx)),
    }
}

pub fn requests(dialect: Dialect) -> &'static dyn RequestTranslator {
    match dialect {
        Dialect::AgUi => &babelgate_ag_ui::AgUiRequests,
        Dialect::Hai => &babelgate_hai::HaiRequests,
        Dialect::Vercel => &babelgate_vercel::VercelRequests,
        Dialect::AgKit => &babelgate_agkit::AgKitRequests,
        Dialect::A2a => &babelgate_a2a::A2aRequests,
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
        Dialect::A2a => babelgate_a2a::POLICY,
    }
}

/// A translator from `from` (upstream) to `to` (client). The same dialect on
/// both sides writes what comes through unchanged as received (see
/// [`Translator::same_dialect`]).
pub fn translator(
    from: Dialect,
    to: Dialect,
    ctx: EncodeContext,
    max_event_bytes: usize,
) -> Translator {
    let framer = SseFramer::new(max_event_bytes);
    let drop_raw = ctx.drop_raw;
    let mut t = if from == to {
        Translator::same_dialect(framer, decoder(from), encoder(to, ctx))
    } else {
        Translator::new(framer, decoder(from), encoder(to, ctx))
    };
    if drop_raw {
        t.drop_raw();
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn run(from: Dialect, to: Dialect, input: &str) -> String {
        let mut t = translator(from, to, EncodeContext::deterministic(), 1 << 20);
        let mut out = Vec::new();
        t.push(input.as_bytes(), &mut out).unwrap();
        // a cut input is a failed run (TranslateError::Truncated), said in the output
        let _ = t.finish(&mut out);
        String::from_utf8(out).unwrap()
    }

    fn payloads(s: &str) -> Vec<Value> {
        s.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap_or(Value::String(d.into())))
            .collect()
    }

    fn types(s: &str) -> Vec<String> {
        payloads(s)
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                v => v["type"].as_str().unwrap_or("?").to_string(),
            })
            .collect()
    }

    /// `drop_raw` (a route key): the upstream's RAW events reach no client
    /// of a translated route; without it they come as the dialect carries
    /// them (a Vercel client: transient `data-raw`).
    #[test]
    fn drop_raw_leaves_raw_events_out() {
        let input = concat!(
            "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
            "data: {\"type\":\"RAW\",\"event\":{\"event\":\"on_chain_start\",\"data\":{\"big\":\"x\"}}}\n\n",
            "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n",
            "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n",
            "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n",
            "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
        );
        let with = |drop_raw: bool, to: Dialect| {
            let ctx = EncodeContext {
                drop_raw,
                ..EncodeContext::deterministic()
            };
            let mut t = translator(Dialect::AgUi, to, ctx, 1 << 20);
            let mut out = Vec::new();
            t.push(input.as_bytes(), &mut out).unwrap();
            t.finish(&mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert!(types(&with(false, Dialect::Vercel)).contains(&"data-raw".to_string()));
        let dropped = with(true, Dialect::Vercel);
        assert!(!dropped.contains("on_chain_start"), "{dropped}");
        assert!(
            types(&dropped).contains(&"text-delta".to_string()),
            "{dropped}"
        );
        let hai = with(true, Dialect::Hai);
        assert!(!hai.contains("on_chain_start"), "{hai}");
        // a same-dialect route too: the rest as it came
        let raw_line = input
            .lines()
            .find(|l| l.contains("on_chain_start"))
            .unwrap();
        assert_eq!(
            with(true, Dialect::AgUi),
            input.replace(&format!("{raw_line}\n\n"), "")
        );
        assert_eq!(with(false, Dialect::AgUi), input);
    }

    /// An AG-UI client of an AG-UI upstream hears the upstream as it spoke
    /// (unknown events and extra fields kept; spacing too, where the frame
    /// stands as received), with the shape stage's rules held as on every
    /// route: the text still open gets its TEXT_MESSAGE_END before the
    /// RUN_ERROR. A text start waits for its first content (an empty
    /// message reaches no client), so it is written as mapped: JSON-equal.
    #[test]
    fn same_dialect_routes_write_what_comes_through_unchanged_as_received() {
        let start = "data: {\"type\": \"RUN_STARTED\", \"threadId\": \"t\", \"runId\": \"r\", \"vendor\": {\"x\": 1.50}}\n\n";
        let text_start = "data: {\"type\": \"TEXT_MESSAGE_START\", \"messageId\": \"m\", \"role\": \"assistant\", \"vendor\": {\"x\": 1}}\n\n";
        let rest = concat!(
            "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n",
            "data: {\"type\":\"SOMETHING_NEW\",\"a\":[1,2]}\n\n",
        );
        let error = "data: {\"type\":\"RUN_ERROR\",\"message\":\"boom\"}\n\n";
        let out = run(
            Dialect::AgUi,
            Dialect::AgUi,
            &format!("{start}{text_start}{rest}{error}"),
        );
        assert!(out.starts_with(start), "as received: {out}");
        assert_eq!(
            payloads(&out),
            payloads(&format!(
                "{start}{text_start}{rest}data: {{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}}\n\n{error}"
            ))
        );
        assert!(
            out.ends_with(&format!(
                "{rest}data: {{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}}\n\n{error}"
            )),
            "{out}"
        );

        // HAI likewise; a cut stream gets what the encoder closes, and its
        // error. A message starts with its first content, as on every route.
        let first =
            "data: {\"type\": \"RUN_STARTED\", \"messageId\": \"m\", \"role\": \"assistant\"}\n\n";
        let start = "data: {\"type\": \"BUSINESS_DATA_START\", \"messageId\": \"m\", \"role\": \"assistant\"}\n\n";
        let content = "data: {\"type\": \"BUSINESS_DATA_CONTENT\", \"messageId\": \"m\", \"delta\": \"x\"}\n\n";
        let out = run(Dialect::Hai, Dialect::Hai, &format!("{first}{start}"));
        assert!(out.starts_with(first), "{out}");
        assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"], "{out}");
        let out = run(
            Dialect::Hai,
            Dialect::Hai,
            &format!("{first}{start}{content}"),
        );
        assert_eq!(
            types(&out),
            [
                "RUN_STARTED",
                "BUSINESS_DATA_START",
                "BUSINESS_DATA_CONTENT",
                "BUSINESS_DATA_END",
                "RUN_ERROR"
            ]
        );

        // Vercel: one `[DONE]`, the upstream's.
        let input = concat!(
            "data: {\"type\":\"start\"}\n\n",
            "data: {\"type\":\"start-step\"}\n\n",
            "data: {\"type\":\"finish-step\"}\n\n",
            "data: {\"type\":\"finish\"}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(run(Dialect::Vercel, Dialect::Vercel, input), input);
    }

    /// pydantic-ai's AGUIAdapter opens and closes an empty text message as
    /// the parent of its tool calls: a Vercel client gets no empty text part.
    #[test]
    fn an_empty_parent_text_message_is_no_vercel_text_part() {
        let input = concat!(
            "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
            "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n",
            "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n",
            "data: {\"type\":\"TOOL_CALL_START\",\"toolCallId\":\"c\",\"toolCallName\":\"f\",\"parentMessageId\":\"m\"}\n\n",
            "data: {\"type\":\"TOOL_CALL_ARGS\",\"toolCallId\":\"c\",\"delta\":\"{}\"}\n\n",
            "data: {\"type\":\"TOOL_CALL_END\",\"toolCallId\":\"c\"}\n\n",
            "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
        );
        let out = run(Dialect::AgUi, Dialect::Vercel, input);
        assert!(!out.contains("text-start"), "{out}");
        assert_eq!(
            types(&out),
            [
                "start",
                "start-step",
                "tool-input-start",
                "tool-input-delta",
                "tool-input-available",
                "finish-step",
                "finish",
                "[DONE]"
            ]
        );
    }

    /// A front-end tool call left for the client: the AG-UI run finishes
    /// with a success outcome naming it (AG-UI 1.1, @ag-ui/core 1.0.0).
    #[test]
    fn a_call_left_for_the_client_is_pending_in_run_finished() {
        let input = concat!(
            "data: {\"type\":\"start\",\"messageId\":\"m\"}\n\n",
            "data: {\"type\":\"start-step\"}\n\n",
            "data: {\"type\":\"tool-input-start\",\"toolCallId\":\"c\",\"toolName\":\"f\"}\n\n",
            "data: {\"type\":\"tool-input-available\",\"toolCallId\":\"c\",\"toolName\":\"f\",\"input\":{}}\n\n",
            "data: {\"type\":\"tool-input-start\",\"toolCallId\":\"s\",\"toolName\":\"g\"}\n\n",
            "data: {\"type\":\"tool-input-available\",\"toolCallId\":\"s\",\"toolName\":\"g\",\"input\":{}}\n\n",
            "data: {\"type\":\"tool-output-available\",\"toolCallId\":\"s\",\"output\":1}\n\n",
            "data: {\"type\":\"finish-step\"}\n\n",
            "data: {\"type\":\"finish\",\"finishReason\":\"tool-calls\"}\n\n",
            "data: [DONE]\n\n",
        );
        let out = run(Dialect::Vercel, Dialect::AgUi, input);
        let last = payloads(&out).pop().unwrap();
        assert_eq!(last["type"], "RUN_FINISHED", "{out}");
        assert_eq!(
            last["outcome"],
            serde_json::json!({"type": "success", "pendingToolCallIds": ["c"]}),
            "{out}"
        );
    }
}

#[cfg(test)]
mod policy_tests {
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
