//! The `babelgate` binary as a user runs it.

mod common;

fn babelgate(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let (code, out, err) = common::run_cli(args, stdin);
    (code, String::from_utf8(out).unwrap(), err)
}

const AGUI_OK: &str = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n";

#[test]
fn translate_reads_stdin_and_writes_the_target_dialect() {
    let input = format!(
        "{AGUI_OK}data: {{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}}\n\ndata: {{\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}}\n\n"
    );
    let (code, out, err) = babelgate(
        &["translate", "--from", "ag-ui", "--to", "vercel"],
        input.as_bytes(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"type\":\"text-delta\""), "{out}");
    assert!(out.contains("\"delta\":\"hi\""), "{out}");
    assert!(out.ends_with("data: [DONE]\n\n"), "{out}");
}

/// `translate --from a2a` / `--to a2a` work like the others: an a2a-sdk
/// task that failed (its bytes, tests/fixtures/a2a) is a Vercel error with
/// the status text; an AG-UI run is an A2A task that completes.
#[test]
fn translate_reads_and_writes_a2a() {
    let failed = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/a2a/run_error.sse"
    ))
    .unwrap();
    let (code, out, err) = babelgate(&["translate", "--from", "a2a", "--to", "vercel"], &failed);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"delta\":\"Trying\""), "{out}");
    assert!(out.contains("\"errorText\":\"the tool broke\""), "{out}");
    let input = format!(
        "{AGUI_OK}data: {{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}}\n\ndata: {{\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}}\n\n"
    );
    let (code, out, err) = babelgate(
        &["translate", "--from", "ag-ui", "--to", "a2a"],
        input.as_bytes(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"artifactUpdate\""), "{out}");
    assert!(out.contains("\"text\":\"hi\""), "{out}");
    assert!(out.contains("TASK_STATE_COMPLETED"), "{out}");
}

#[test]
fn bad_input_names_the_line_exits_non_zero_and_keeps_the_good_part() {
    let input = format!("{AGUI_OK}data: {{\"type\": broken\n\n");
    let (code, out, err) = babelgate(
        &["translate", "--from", "ag-ui", "--to", "vercel"],
        input.as_bytes(),
    );
    assert_eq!(code, 1);
    assert!(err.contains("line 7"), "stderr names the line: {err}");
    assert!(
        out.contains("\"delta\":\"hi\""),
        "the well-formed part is kept: {out}"
    );
    assert!(
        out.contains("\"type\":\"error\""),
        "the target dialect's error event: {out}"
    );
    assert!(
        out.ends_with("data: [DONE]\n\n"),
        "and the stream is closed: {out}"
    );
}

#[test]
fn unknown_dialects_and_missing_files_are_usage_errors() {
    let (code, _, err) = babelgate(&["translate", "--from", "grpc", "--to", "vercel"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("unknown dialect `grpc`"), "{err}");
    let (code, _, err) = babelgate(
        &[
            "translate",
            "--from",
            "ag-ui",
            "--to",
            "vercel",
            "/nonexistent/capture.sse",
        ],
        b"",
    );
    assert_eq!(code, 2);
    assert!(err.contains("cannot open"), "{err}");
}

#[test]
fn check_accepts_the_shipped_config_and_reports_every_error_with_its_line() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../gateway.toml");
    let (code, out, err) = babelgate(&["check", "--config", root], b"");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ok"), "{out}");

    let dir = std::env::temp_dir().join(format!("babelgate-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[[routes]]\npath = \"/a\"\nclient = \"nope\"\nupstream = \"http://x\"\nupstream_protocol = \"zzz\"\n",
    )
    .unwrap();
    let (code, _, err) = babelgate(&["check", "--config", bad.to_str().unwrap()], b"");
    assert_eq!(code, 1);
    assert!(err.contains("bad.toml:3:10: routes.client"), "{err}");
    assert!(
        err.contains("bad.toml:5:"),
        "both errors are reported: {err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_reports_a_route_without_resume_that_keeps_its_runs_at_its_line() {
    let dir = std::env::temp_dir().join(format!("babelgate-check-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.toml");
    std::fs::write(
        &file,
        "[[routes]]\npath = \"/a\"\nclient = \"vercel\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\nresume = false\non_disconnect = \"keep\"\n",
    )
    .unwrap();
    let (code, _, err) = babelgate(&["check", "--config", file.to_str().unwrap()], b"");
    assert_eq!(code, 1);
    assert!(
        err.contains("gateway.toml:7:17: routes.on_disconnect: `keep` runs on for its client to resume, but this route has `resume = false` (line 6)"),
        "{err}"
    );
    std::fs::write(
        &file,
        std::fs::read_to_string(&file)
            .unwrap()
            .replace("keep", "cancel"),
    )
    .unwrap();
    let (code, out, err) = babelgate(&["check", "--config", file.to_str().unwrap()], b"");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ok"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
