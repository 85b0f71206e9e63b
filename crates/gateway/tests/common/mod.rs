//! Helpers shared by the gateway's integration tests (each test file that
//! needs them says `mod common;`; not every file uses every helper).
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Stdio};

use babelgate_core::sse::SseFramer;
use serde_json::Value;

/// (id, data) of each SSE event in a body: data as JSON when it is JSON,
/// else as a string (`[DONE]`); comments and empty events left out.
pub fn sse_events(bytes: &[u8]) -> Vec<(Option<String>, Value)> {
    let mut framer = SseFramer::new(1 << 20);
    let mut frames = Vec::new();
    framer.push(bytes, &mut frames).unwrap();
    framer.finish(&mut frames).unwrap();
    frames
        .into_iter()
        .filter(|f| !f.data.is_empty())
        .map(|f| {
            let v = serde_json::from_str(&f.data).unwrap_or(Value::String(f.data.clone()));
            (f.id.clone(), v)
        })
        .collect()
}

/// Runs the `babelgate` binary with `args` and `stdin`: (exit code, stdout,
/// stderr).
pub fn run_cli(args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_babelgate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8(out.stderr).unwrap(),
    )
}
