//! The `babelgate` binary as a user runs it.

use crate::common;

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
        "/../../../tests/fixtures/a2a/run_error.sse"
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
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../gateway.toml");
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

/// Every recipe under examples/ ships a config `babelgate check` accepts.
#[test]
fn check_accepts_every_example_config() {
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(examples).unwrap() {
        let config = entry.unwrap().path().join("gateway.toml");
        if !config.exists() {
            continue;
        }
        let (code, out, err) = babelgate(&["check", "--config", config.to_str().unwrap()], b"");
        assert_eq!(code, 0, "{}: {err}", config.display());
        assert!(out.contains("ok"), "{out}");
        checked += 1;
    }
    assert!(checked > 0, "no example config found under {examples}");
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

/// `check` on `text`, written to a file of its own: (exit code, stderr).
fn check_text(name: &str, text: &str) -> (i32, String) {
    let dir = std::env::temp_dir().join(format!("babelgate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.toml");
    std::fs::write(&file, text).unwrap();
    let (code, _, err) = babelgate(&["check", "--config", file.to_str().unwrap()], b"");
    std::fs::remove_dir_all(&dir).unwrap();
    (code, err)
}

#[test]
fn check_refuses_a_route_path_no_request_can_name_at_its_line() {
    for path in ["/a/../b", "/a/./b", "/..", "/a?x=1"] {
        let (code, err) = check_text(
            "check-dots",
            &format!("[[routes]]\npath = \"{path}\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n"),
        );
        assert_eq!(code, 1, "{path}: {err}");
        assert!(
            err.contains("gateway.toml:2:8: routes.path"),
            "{path}: {err}"
        );
    }
    let (code, err) = check_text(
        "check-dots-inspector",
        "[inspector]\npath = \"/x/../inspect\"\n",
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("gateway.toml:2:8: inspector.path"), "{err}");
}

#[test]
fn check_quotes_at_most_a_few_hundred_bytes_of_a_huge_value() {
    let huge = "x".repeat(10 << 20);
    for (what, text) in [
        // Refused by the compiler (a route path without `/`) ...
        (
            "path",
            format!("[[routes]]\npath = \"{huge}\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n"),
        ),
        // ... by a dialect name ...
        (
            "client",
            format!("[[routes]]\npath = \"/a\"\nclient = \"{huge}\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n"),
        ),
        // ... and by the TOML reader (a string where a number goes).
        (
            "type",
            format!("[server]\nmax_connections = \"{huge}\"\n"),
        ),
        ("key", format!("[server]\n{huge} = 1\n")),
    ] {
        let (code, err) = check_text("check-huge", &text);
        assert_eq!(code, 1, "{what}");
        assert!(err.contains("gateway.toml:"), "{what}: located: {}", &err[..err.len().min(500)]);
        assert!(err.len() < 2048, "{what}: {} bytes of output", err.len());
    }
}

#[test]
fn completions_are_printed_for_each_shell_and_bash_parses_its_script() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, out, err) = babelgate(&["completions", shell], b"");
        assert_eq!(code, 0, "{shell}: {err}");
        for word in ["serve", "check", "translate", "completions"] {
            assert!(out.contains(word), "{shell} completes {word}");
        }
    }
    let (_, script, _) = babelgate(&["completions", "bash"], b"");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("babelgate.bash");
    std::fs::write(&file, &script).unwrap();
    // Sourced, the script registers its completion function for `babelgate`.
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p babelgate",
            file.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("babelgate"));
    let (code, _, err) = babelgate(&["completions", "tcsh"], b"");
    assert_eq!(code, 2, "an unknown shell is a usage error: {err}");
    assert!(err.contains("tcsh"), "{err}");
}

#[test]
fn the_man_page_is_roff_naming_every_command() {
    let (code, out, err) = babelgate(&["man"], b"");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(".TH babelgate 1"), "{out}");
    for cmd in [
        "serve",
        "check",
        "demo-agent",
        "translate",
        "completions",
        "man",
    ] {
        let listed = format!(r"babelgate\-{}(1)", cmd.replace('-', r"\-"));
        assert!(out.contains(&listed), "{listed} in {out}");
    }
    assert!(out.contains(".SH SUBCOMMANDS"), "{out}");
}
