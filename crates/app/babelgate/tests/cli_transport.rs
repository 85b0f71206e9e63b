//! `babelgate translate --from-transport / --to-transport`: AG-UI's binary
//! transport in and out of the CLI.

use crate::common;

use common::proto_events;

fn babelgate(args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>, String) {
    common::run_cli(args, stdin)
}

const AGUI: &str = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n\
data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n\
data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";

#[test]
fn sse_to_proto_and_back() {
    let args = [
        "translate",
        "--from",
        "ag-ui",
        "--to",
        "ag-ui",
        "--to-transport",
        "proto",
    ];
    let (code, bin, err) = babelgate(&args, AGUI.as_bytes());
    assert_eq!(code, 0, "{err}");
    let events = proto_events(&bin, None);
    let types: Vec<_> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    // Binary AG-UI in, SSE Vercel out.
    let args = [
        "translate",
        "--from",
        "ag-ui",
        "--to",
        "vercel",
        "--from-transport",
        "proto",
    ];
    let (code, out, err) = babelgate(&args, &bin);
    assert_eq!(code, 0, "{err}");
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("\"delta\":\"hi\""), "{out}");
    assert!(out.ends_with("data: [DONE]\n\n"), "{out}");
}

#[test]
fn hai_events_cross_the_binary_form_as_hai_custom_events() {
    let hai = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tests/fixtures/hai/chat.sse"
    ))
    .unwrap();
    let args = [
        "translate",
        "--from",
        "hai",
        "--to",
        "hai",
        "--to-transport",
        "proto",
    ];
    let (code, bin, err) = babelgate(&args, &hai);
    assert_eq!(code, 0, "{err}");
    let plain = proto_events(&bin, None);
    assert!(
        plain
            .iter()
            .any(|e| e["name"] == "hai:BUSINESS_DATA_CONTENT"),
        "{plain:?}"
    );
    let args = [
        "translate",
        "--from",
        "hai",
        "--to",
        "hai",
        "--from-transport",
        "proto",
    ];
    let (code, out, err) = babelgate(&args, &bin);
    assert_eq!(code, 0, "{err}");
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("\"type\":\"BUSINESS_DATA_CONTENT\""), "{out}");
    assert!(out.contains("你好，世界"), "{out}");
}

#[test]
fn bad_binary_input_fails_with_the_dialect_error() {
    let mut bin = Vec::new();
    babelgate_proto::write_event(
        &mut bin,
        &serde_json::json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
    )
    .unwrap();
    for (what, tail) in [
        ("truncated", vec![0, 0, 0, 9, 1]),
        ("not protobuf", vec![0, 0, 0, 2, 0xff, 0xff]),
        ("over the limit", vec![0xff, 0xff, 0xff, 0xff]),
    ] {
        let mut input = bin.clone();
        input.extend_from_slice(&tail);
        let args = [
            "translate",
            "--from",
            "ag-ui",
            "--to",
            "ag-ui",
            "--from-transport",
            "proto",
        ];
        let (code, out, err) = babelgate(&args, &input);
        assert_eq!(code, 1, "{what}: {err}");
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("RUN_STARTED"), "{what}: {out}");
        assert!(
            out.contains("\"code\":\"upstream_malformed\""),
            "{what}: {out}"
        );
    }
}

#[test]
fn dialects_without_a_binary_form_are_usage_errors() {
    for args in [
        [
            "translate",
            "--from",
            "vercel",
            "--to",
            "ag-ui",
            "--from-transport",
            "proto",
        ],
        [
            "translate",
            "--from",
            "ag-ui",
            "--to",
            "agkit",
            "--to-transport",
            "proto",
        ],
    ] {
        let (code, _, err) = babelgate(&args, b"");
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("no binary transport"), "{err}");
    }
}
