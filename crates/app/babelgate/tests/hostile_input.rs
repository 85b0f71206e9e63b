//! `babelgate translate` on upstream frames that once crashed a decoder's
//! fast path: each must end in the target dialect's error event, with the
//! bad line named on standard error, never in a panic (exit 101) with the
//! output cut off.

use crate::common;

use serde_json::Value;

fn translate(from: &str, to: &str, stdin: &[u8]) -> (i32, String, String) {
    let args = ["translate", "--from", from, "--to", to, "--deterministic"];
    let (code, out, err) = common::run_cli(&args, stdin);
    (code, String::from_utf8(out).unwrap(), err)
}

const DIALECTS: [&str; 4] = ["ag-ui", "hai", "vercel", "agkit"];

/// The type of each dialect's error event, and what must follow it (the
/// stream's own closing frames, in this order; those before the last may be
/// left out when there is nothing for them to close).
fn error_event(dialect: &str) -> (&'static str, &'static [&'static str]) {
    match dialect {
        "ag-ui" | "hai" => ("RUN_ERROR", &[]),
        "vercel" => ("error", &["finish-step", "finish", "[DONE]"]),
        // No `[DONE]`: the legacy client would take it for success.
        "agkit" => ("error", &[]),
        other => panic!("no dialect {other}"),
    }
}

/// Checks that `out` is a well-formed SSE stream of `dialect` (every event
/// one `data:` line holding a JSON object with a string `type`, or
/// `[DONE]`) that ends in its error event, and returns the error event.
fn ends_in_error_event(dialect: &str, out: &str) -> Value {
    assert!(out.ends_with("\n\n"), "the stream is cut: {out:?}");
    let mut types = Vec::new();
    let mut objects = Vec::new();
    for event in out.trim_end_matches('\n').split("\n\n") {
        let data = event
            .strip_prefix("data: ")
            .filter(|d| !d.contains('\n'))
            .unwrap_or_else(|| panic!("not one data line: {event:?} in {out}"));
        if data == "[DONE]" {
            types.push("[DONE]".to_string());
            objects.push(Value::Null);
            continue;
        }
        let v: Value = serde_json::from_str(data)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {data:?} in {out}"));
        let ty = v["type"]
            .as_str()
            .unwrap_or_else(|| panic!("no string type: {data} in {out}"))
            .to_string();
        types.push(ty);
        objects.push(v);
    }
    let (error, after) = error_event(dialect);
    let at = types
        .iter()
        .rposition(|t| t == error)
        .unwrap_or_else(|| panic!("no {error} event in {out}"));
    let tail: Vec<&str> = types[at + 1..].iter().map(String::as_str).collect();
    let mut closers = after.iter();
    assert!(
        tail.iter().all(|t| closers.any(|c| c == t)) && tail.last() == after.last(),
        "after the error event, {tail:?} is not {after:?}: {out}"
    );
    objects.swap_remove(at)
}

/// A run that starts well, then the frame under test on line 5.
fn ag_ui_stream(frame: &str) -> String {
    format!(
        "data: {{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}}\n\n\
         data: {{\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}}\n\n\
         data: {frame}\n\n"
    )
}

/// Every frame that crashed a decoder (see the unit tests named in each
/// comment for the decoder-level regression).
const AG_UI_CRASHES: &[&str] = &[
    // The issue's case: a backslash before a two-byte character
    // (adapters/ag-ui decoder, `a_backslash_before_a_multibyte_character_is_an_error`).
    r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\é"}"#,
    // The same before three- and four-byte characters, in other fields and
    // event types of the fast path.
    r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"ok \北"}"#,
    r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"\🎉","delta":"a"}"#,
    r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x\é"}"#,
    r#"{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant","name":"\é"}"#,
    r#"{"type":"TOOL_CALL_RESULT","toolCallId":"c","content":"\é","role":"tool"}"#,
];

#[test]
fn ag_ui_frames_that_crashed_the_fast_path_end_in_an_error_event() {
    for frame in AG_UI_CRASHES {
        let input = ag_ui_stream(frame);
        for to in DIALECTS {
            let (code, out, err) = translate("ag-ui", to, input.as_bytes());
            assert_ne!(code, 101, "panicked, ag-ui -> {to} on {frame}: {err}");
            assert_eq!(code, 1, "ag-ui -> {to} on {frame}: {err}");
            assert!(
                err.contains("line 5"),
                "stderr names the line, ag-ui -> {to} on {frame}: {err}"
            );
            let error = ends_in_error_event(to, &out);
            assert!(
                error.to_string().contains("upstream_malformed"),
                "ag-ui -> {to} on {frame}: {error}"
            );
        }
    }
}

/// A capture that stops between two events, without its terminal event, is
/// a failed run in every target (AG-UI 1.1: a consumer must not synthesize
/// `RUN_FINISHED` for a truncated run): the target's error event with code
/// `upstream_closed`, no success marker, and exit status 1.
#[test]
fn a_cut_capture_translates_to_a_failure_in_every_dialect() {
    let cut = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
               data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
               data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"half an ans\"}\n\n";
    for to in DIALECTS {
        let (code, out, err) = translate("ag-ui", to, cut.as_bytes());
        assert_eq!(code, 1, "ag-ui -> {to}: {err}");
        assert!(
            err.contains("before the run finished"),
            "ag-ui -> {to}: {err}"
        );
        let error = ends_in_error_event(to, &out);
        assert_eq!(error["code"], "upstream_closed", "ag-ui -> {to}: {error}");
        for success in ["RUN_FINISHED", "\"finishReason\":\"stop\"", "interrupted"] {
            assert!(!out.contains(success), "ag-ui -> {to}: {success} in {out}");
        }
    }
}

/// A Vercel upstream's 7.x chunk that the core keeps whole (and a Vercel
/// client gets as it came, verbatim on a same-dialect route) with a field
/// the `ai` client's chunk schema refuses: every target ends in its error
/// event, the bad line named, and the broken chunk never reaches a client.
#[test]
fn a_kept_vercel_chunk_the_client_would_refuse_ends_in_an_error_event() {
    let frames = [
        r#"{"type":"custom"}"#,
        r#"{"type":"custom","kind":"k","providerMetadata":{"p":1}}"#,
        r#"{"type":"steering-message","id":"s","parts":[{"type":"text"}]}"#,
        r#"{"type":"tool-approval-response","approvalId":"a","approved":"yes"}"#,
        r#"{"type":"tool-approval-request","approvalId":"a","toolCallId":"c","reason":null}"#,
    ];
    for frame in frames {
        let input = format!(
            "data: {{\"type\":\"start\"}}\n\n\
             data: {{\"type\":\"start-step\"}}\n\n\
             data: {frame}\n\n\
             data: {{\"type\":\"finish-step\"}}\n\n\
             data: {{\"type\":\"finish\",\"finishReason\":\"stop\"}}\n\n\
             data: [DONE]\n\n"
        );
        for to in DIALECTS {
            let (code, out, err) = translate("vercel", to, input.as_bytes());
            assert_eq!(code, 1, "vercel -> {to} on {frame}: {err}");
            assert!(err.contains("line 5"), "vercel -> {to} on {frame}: {err}");
            let error = ends_in_error_event(to, &out);
            assert!(
                error.to_string().contains("upstream_malformed"),
                "vercel -> {to} on {frame}: {error}"
            );
            assert!(!out.contains(frame), "vercel -> {to}: {frame} in {out}");
        }
    }
}
