//! babelgate adapter for A2A, the Agent2Agent protocol v1.0, as the official
//! SDKs speak it (PyPI `a2a-sdk` 1.3.0, npm `@a2a-js/sdk` 1.3.0): JSON-RPC 2.0
//! requests (`SendStreamingMessage`), answered by an SSE stream of JSON-RPC
//! responses whose `result` is a `task`, a `message`, a `statusUpdate` or an
//! `artifactUpdate`. A run is one task; the conversation is its `contextId`.
//! The v0.3 shapes (`kind` discriminators, lowercase states) are read too.
//! See docs/mapping/a2a.md.
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

pub mod card;
pub mod decoder;
pub mod encoder;
pub mod request;
pub mod rpc;
pub mod task;
pub mod wire;

pub use decoder::A2aDecoder;
pub use encoder::A2aEncoder;
pub use request::A2aRequests;

/// What the gateway does for this dialect beyond translating it. An A2A
/// client sends only its new message and an A2A agent keeps the context's
/// history itself: the gateway keeps the history for A2A clients and sends
/// A2A agents only what is new.
pub const POLICY: babelgate_core::Policy = babelgate_core::Policy {
    gateway_keeps_history: true,
    upstream_keeps_history: true,
    resume: babelgate_core::Resume::AfterOrFromStart,
    extension_frames: false,
    binary: false,
    binary_custom_prefix: None,
    clock_timestamps: false,
};

#[cfg(test)]
mod tests {
    //! Whole streams: the SDK's own bytes (tests/fixtures/a2a) decoded, and
    //! the encoder's tasks read back.
    use super::*;
    use babelgate_core::testing::{decode_sse, encode_events, fixture_dir, sse_frames, text_of};
    use babelgate_core::{EncodeContext, Encoder, Event, EventKind, Outcome, SseFramer};
    use serde_json::Value;

    fn decode(bytes: &[u8]) -> Vec<Event> {
        decode_sse(&mut A2aDecoder::new(), bytes)
    }

    fn fixture(name: &str) -> Vec<u8> {
        let path = fixture_dir("a2a").join(format!("{name}.sse"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn last(events: &[Event]) -> &EventKind {
        &events.last().unwrap().kind
    }

    #[test]
    fn artifact_chunks_are_the_text_verbatim_in_both_versions() {
        for name in ["chat", "chat_v03"] {
            let events = decode(&fixture(name));
            assert_eq!(text_of(&events), "Hello \u{2028}world", "{name}");
            match &events[0].kind {
                EventKind::RunStarted {
                    thread_id, run_id, ..
                } => {
                    assert_eq!(thread_id.as_deref(), Some("ctx-1"));
                    assert!(run_id.is_some());
                }
                other => panic!("{name}: {other:?}"),
            }
            assert!(
                matches!(
                    last(&events),
                    EventKind::RunFinished {
                        outcome: Outcome::Success { .. },
                        ..
                    }
                ),
                "{name}: {:?}",
                last(&events)
            );
            let opened = events
                .iter()
                .filter(|e| matches!(e.kind, EventKind::TextStart { .. }))
                .count();
            assert_eq!(opened, 1, "{name}: one message for the artifact");
        }
    }

    #[test]
    fn failed_and_rejected_tasks_are_errors_with_their_status_text() {
        let events = decode(&fixture("run_error"));
        assert_eq!(text_of(&events), "Trying");
        assert_eq!(
            last(&events),
            &EventKind::RunError {
                message: "the tool broke".into(),
                code: Some("failed".into())
            }
        );
        let events = decode(&fixture("rejected"));
        assert!(
            matches!(last(&events), EventKind::RunError { message, .. } if message == "not my job")
        );
    }

    #[test]
    fn input_required_is_an_interrupt_named_for_the_task() {
        let events = decode(&fixture("input_required"));
        let EventKind::RunStarted { run_id, .. } = &events[0].kind else {
            panic!("{:?}", events[0]);
        };
        let EventKind::RunFinished {
            outcome: Outcome::Interrupt { interrupts },
            ..
        } = last(&events)
        else {
            panic!("{:?}", last(&events));
        };
        assert_eq!(Some(&interrupts[0].id), run_id.as_ref());
        assert_eq!(interrupts[0].message.as_deref(), Some("Proceed? (yes/no)"));
        assert_eq!(interrupts[0].reason, "input_required");
    }

    #[test]
    fn data_artifacts_are_data_events() {
        let events = decode(&fixture("data"));
        let data: Vec<_> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Data { name, data, .. } => Some((name.as_str(), data)),
                _ => None,
            })
            .collect();
        assert_eq!(data.len(), 1);
        assert_eq!(data[0].0, "weather");
        assert_eq!(data[0].1["city"], "Paris");
        assert_eq!(text_of(&events), "Sunny.");
    }

    #[test]
    fn the_stream_names_the_task_a_stop_cancels() {
        let mut t = babelgate_core::Translator::new(
            SseFramer::default(),
            Box::new(A2aDecoder::new()),
            Box::new(A2aEncoder::new(EncodeContext::deterministic())),
        );
        assert_eq!(t.upstream_run_id(), None);
        let mut out = Vec::new();
        t.push(&fixture("chat"), &mut out).unwrap();
        let task = "804c6a87-a71f-45ab-a53c-96d742f7ca4d";
        assert_eq!(t.upstream_run_id(), Some(task));
        let stop = babelgate_core::RequestTranslator::stop_request(&A2aRequests)
            .expect("A2A stops a task with CancelTask");
        let body = stop(task);
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["method"], "CancelTask");
        assert_eq!(body["params"]["id"], task);
        assert!(body["id"].is_string());
    }

    fn encode(events: &[Event]) -> Vec<u8> {
        encode_events(&mut A2aEncoder::new(EncodeContext::deterministic()), events)
    }

    fn results(bytes: &[u8]) -> Vec<Value> {
        sse_frames(bytes)
            .iter()
            .map(|f| serde_json::from_str::<Value>(&f.data).unwrap()["result"].clone())
            .collect()
    }

    #[test]
    fn a_run_is_a_task_whose_text_is_sent_once_and_escaped() {
        let said = "a\u{2028}b\u{2029}c\u{85}d";
        let events: Vec<Event> = vec![
            EventKind::TextStart {
                message_id: "m".into(),
                role: babelgate_core::Role::Assistant,
                name: None,
            }
            .into(),
            EventKind::text_delta("m", &said[..4]).into(),
            EventKind::text_delta("m", &said[4..]).into(),
            EventKind::text_end("m").into(),
            EventKind::run_finished(Outcome::Unspecified).into(),
        ];
        let out = encode(&events);
        let raw = String::from_utf8(out.clone()).unwrap();
        assert!(
            !raw.contains(['\u{2028}', '\u{2029}', '\u{85}']),
            "raw separators in {raw}"
        );
        let rs = results(&out);
        assert!(rs[0].get("task").is_some(), "{raw}");
        let texts: String = rs
            .iter()
            .filter_map(|r| r.get("artifactUpdate"))
            .flat_map(|a| a["artifact"]["parts"].as_array().unwrap().clone())
            .map(|p| p["text"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(texts, said, "each piece once");
        let final_status = rs.last().unwrap()["statusUpdate"]["status"].clone();
        assert_eq!(final_status["state"], "TASK_STATE_COMPLETED");
        assert!(
            final_status.get("message").is_none(),
            "no text again in the status"
        );
        assert_eq!(text_of(&decode(&out)), said);
    }

    #[test]
    fn errors_fail_the_task_with_their_message_and_stops_cancel_it() {
        let mut e = A2aEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        e.fail("upstream broke", None, &mut out);
        let rs = results(&out);
        let status = &rs.last().unwrap()["statusUpdate"]["status"];
        assert_eq!(status["state"], "TASK_STATE_FAILED");
        assert_eq!(status["message"]["parts"][0]["text"], "upstream broke");
        assert!(
            matches!(last(&decode(&out)), EventKind::RunError { message, .. } if message == "upstream broke")
        );

        let cancelled =
            encode(&[EventKind::run_finished(Outcome::Cancelled { reason: None }).into()]);
        let rs = results(&cancelled);
        assert_eq!(
            rs.last().unwrap()["statusUpdate"]["status"]["state"],
            "TASK_STATE_CANCELED"
        );
    }

    #[test]
    fn the_state_answer_is_the_task_so_far_in_the_spelling_asked() {
        let text = |delta: &str| -> Event { EventKind::text_delta("m", delta).into() };
        for version in [rpc::Version::V1, rpc::Version::V03] {
            let ctx = EncodeContext {
                run_id: Some("t1".into()),
                thread_id: Some("c1".into()),
                reply_to: Some(rpc::reply_to(&serde_json::json!(5), version)),
                ..EncodeContext::deterministic()
            };
            let mut e = A2aEncoder::new(ctx);
            let mut out = Vec::new();
            for ev in [text("Hel"), text("lo")] {
                e.encode(&ev, &mut out);
            }
            let answer = e.state_answer().unwrap();
            assert_eq!(answer["id"], 5);
            let task = &answer["result"];
            assert_eq!(task["id"], "t1");
            assert_eq!(task["contextId"], "c1");
            let streamed = results(&out);
            match version {
                rpc::Version::V1 => {
                    assert_eq!(task["status"]["state"], "TASK_STATE_WORKING");
                    assert_eq!(
                        task["artifacts"][0]["parts"],
                        serde_json::json!([{"text": "Hello"}])
                    );
                    assert!(streamed[0].get("task").is_some());
                }
                rpc::Version::V03 => {
                    assert_eq!(task["kind"], "task");
                    assert_eq!(task["status"]["state"], "working");
                    assert_eq!(
                        task["artifacts"][0]["parts"],
                        serde_json::json!([{"kind": "text", "text": "Hello"}])
                    );
                    assert_eq!(streamed[0]["kind"], "task");
                    assert_eq!(streamed[1]["kind"], "status-update");
                }
            }
        }
    }
}
