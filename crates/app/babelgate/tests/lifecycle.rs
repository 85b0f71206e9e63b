//! The `babelgate serve` process: reload on SIGHUP and on file change without
//! dropping streams, bad configs refused, graceful shutdown, JSON logs.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use common::free_port;

struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
    agent: u16,
}

impl Server {
    /// `babelgate serve` on a config with the demo agent (`delay_ms` between
    /// its events) and `routes`.
    async fn start(
        name: &str,
        server_extra: &str,
        routes: &str,
        delay_ms: u64,
        json: bool,
    ) -> Server {
        let dir = std::env::temp_dir().join(format!("babelgate-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (port, agent) = (free_port(), free_port());
        let s = Server {
            child: Command::new("true").spawn().unwrap(),
            dir,
            port,
            agent,
        };
        s.write_config(server_extra, routes, delay_ms);
        let log = std::fs::File::create(s.dir.join("log")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_babelgate"));
        cmd.arg("serve")
            .arg("--config")
            .arg(s.dir.join("gateway.toml"));
        if json {
            cmd.arg("--log-json");
        }
        let child = cmd
            .env("BABELGATE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        let mut s = s;
        s.child = child;
        for _ in 0..200 {
            if let Ok(r) = reqwest::get(s.url("/healthz")).await {
                if r.status() == 200 {
                    return s;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the gateway did not start: {}", s.log());
    }

    fn write_config(&self, server_extra: &str, routes: &str, delay_ms: u64) {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:{}\"\n{server_extra}\n[demo_agent]\nlisten = \"127.0.0.1:{}\"\nprotocol = \"ag-ui\"\ndelay_ms = {delay_ms}\n\n{}",
            self.port,
            self.agent,
            routes.replace("AGENT", &format!("http://127.0.0.1:{}/agent", self.agent))
        );
        // Write then rename, as editors do, so the watcher never reads half a file.
        let tmp = self.dir.join("gateway.toml.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.dir.join("gateway.toml")).unwrap();
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    }

    async fn wait_log(&self, needle: &str) {
        for _ in 0..300 {
            if self.log().contains(needle) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("`{needle}` never logged:\n{}", self.log());
    }

    async fn status_of(&self, path: &str) -> u16 {
        post(self.url(path), "hi").await.status().as_u16()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn post(url: String, text: &str) -> reqwest::Response {
    let body = serde_json::json!({
        "threadId": "t", "runId": "r", "state": {}, "tools": [], "context": [], "forwardedProps": {},
        "messages": [{"id": "u1", "role": "user", "content": text}],
    });
    reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn route(path: &str) -> String {
    format!("[[routes]]\npath = \"{path}\"\nclient = \"ag-ui\"\nupstream = \"AGENT\"\nupstream_protocol = \"ag-ui\"\n\n")
}

fn last_event(body: &[u8]) -> Value {
    let text = String::from_utf8_lossy(body);
    let line = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no events: {text}"));
    serde_json::from_str(line).unwrap()
}

async fn poll_until(mut f: impl AsyncFnMut() -> bool, what: &str) {
    for _ in 0..200 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}");
}

#[tokio::test]
async fn a_changed_file_is_reloaded_without_dropping_streams_and_a_bad_one_is_refused() {
    // 200 deltas 10 ms apart: the stream outlives the reload.
    let s = Server::start("reload", "", &route("/a"), 10, false).await;
    let long = tokio::spawn(post(s.url("/a"), "something long please"));
    tokio::time::sleep(Duration::from_millis(300)).await;

    s.write_config("", &route("/b"), 10);
    poll_until(
        async || s.status_of("/b").await == 200,
        "the new route never answered",
    )
    .await;
    assert_eq!(
        s.status_of("/a").await,
        404,
        "the old route is gone for new streams"
    );
    let body = long.await.unwrap().bytes().await.unwrap();
    assert_eq!(
        last_event(&body)["type"],
        "RUN_FINISHED",
        "the running stream finished"
    );
    assert!(
        String::from_utf8_lossy(&body).contains("\"199 \""),
        "every delta arrived"
    );

    s.write_config("", "[[routes]]\npath = \"no-slash\"\n", 10);
    s.wait_log("reload refused").await;
    assert!(s.log().contains("line"), "{}", s.log());
    assert_eq!(s.status_of("/b").await, 200, "the old routes stay");
}

#[tokio::test]
async fn sighup_reloads() {
    let s = Server::start("sighup", "", &route("/a"), 0, false).await;
    // Same content on disk with a new route: only the signal asks for it
    // before the watcher's next look (either way the route must appear).
    s.write_config("", &(route("/a") + &route("/c")), 0);
    s.signal("HUP");
    s.wait_log("SIGHUP").await;
    poll_until(async || s.status_of("/c").await == 200, "/c never answered").await;
}

#[tokio::test]
async fn shutdown_lets_streams_finish_within_the_grace_period() {
    let mut s = Server::start("drain", "shutdown_grace_ms = 20000", &route("/a"), 5, false).await;
    let stream = tokio::spawn(post(s.url("/a"), "long"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.signal("TERM");
    s.wait_log("shutdown requested").await;
    // No new connections once it has stopped accepting.
    poll_until(
        async || {
            tokio::net::TcpStream::connect(("127.0.0.1", s.port))
                .await
                .is_err()
        },
        "still accepting after SIGTERM",
    )
    .await;
    let body = stream.await.unwrap().bytes().await.unwrap();
    assert_eq!(last_event(&body)["type"], "RUN_FINISHED");
    let status = wait_exit(&mut s.child).await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn shutdown_ends_streams_past_the_grace_period_with_their_dialects_error() {
    let mut s = Server::start("grace", "shutdown_grace_ms = 300", &route("/a"), 50, true).await;
    let stream = tokio::spawn(post(s.url("/a"), "long"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.signal("TERM");
    let body = stream.await.unwrap().bytes().await.unwrap();
    let last = last_event(&body);
    assert_eq!(last["type"], "RUN_ERROR", "{last}");
    assert_eq!(last["code"], "shutdown");
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("TEXT_MESSAGE_END"),
        "the open message is closed first: {text}"
    );
    let status = wait_exit(&mut s.child).await;
    assert!(status.success(), "{status:?}");
    // --log-json: every line is a JSON object.
    let log = s.log();
    assert!(!log.trim().is_empty());
    for line in log.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string(), "{line}");
    }
}

async fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    for _ in 0..400 {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the gateway did not exit");
}

#[test]
fn paths_in_the_config_are_relative_to_its_file() {
    // `babelgate check` on a file elsewhere resolves its key file next to it.
    let dir = std::env::temp_dir().join(format!("babelgate-rel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("keys.txt"), "k1\n").unwrap();
    std::fs::write(
        dir.join("g.toml"),
        "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:1/\"\nupstream_protocol = \"ag-ui\"\n[routes.auth]\nbearer_files = [\"keys.txt\"]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_babelgate"))
        .args(["check", "--config"])
        .arg(dir.join("g.toml"))
        .current_dir(Path::new("/"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A number from `/proc/<pid>/status` (`FDSize`) or `/proc/self/limits`.
#[cfg(target_os = "linux")]
fn proc_number(file: &str, key: &str, column: usize) -> u64 {
    let text = std::fs::read_to_string(file).unwrap();
    let line = text.lines().find(|l| l.starts_with(key)).unwrap();
    let words: Vec<&str> = line[key.len()..].split_whitespace().collect();
    words[column].parse().unwrap_or(u64::MAX) // "unlimited"
}

/// The descriptor table is grown at start for every connection allowed
/// (two descriptors each), not doubling as streams arrive: each growth in a
/// process of several threads held the worker that opened the descriptor
/// for an RCU grace period, 4 to 32 ms on this machine.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_descriptor_table_is_grown_for_max_connections_at_start() {
    let s = Server::start("fds", "max_connections = 3000", &route("/a"), 0, false).await;
    let size = proc_number(&format!("/proc/{}/status", s.child.id()), "FDSize:", 0);
    // The child inherits this process's soft limit.
    let limit = proc_number("/proc/self/limits", "Max open files", 0);
    let want = limit.min(2 * 3000 + 64);
    assert!(size >= want, "FDSize {size}, wanted {want} (limit {limit})");
}

/// A reload that raises `max_connections` grows the table as a start with
/// it would have, not as the new connections arrive.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_reload_that_raises_max_connections_grows_the_descriptor_table() {
    let s = Server::start("fds-reload", "max_connections = 20", &route("/a"), 0, false).await;
    let status = format!("/proc/{}/status", s.child.id());
    let limit = proc_number("/proc/self/limits", "Max open files", 0);
    let want = limit.min(2 * 3000 + 64);
    let before = proc_number(&status, "FDSize:", 0);
    assert!(before < want, "FDSize {before} at start, already {want}");
    s.write_config("max_connections = 3000", &route("/a"), 0);
    s.signal("HUP");
    s.wait_log("configuration reloaded").await;
    poll_until(
        async || proc_number(&status, "FDSize:", 0) >= want,
        "the table did not grow after the reload",
    )
    .await;
}

#[tokio::test]
async fn a_refused_reload_logs_a_few_hundred_bytes_of_a_huge_value() {
    let s = Server::start("reload-huge", "", &route("/a"), 0, false).await;
    let before = s.log().len();
    let huge = "y".repeat(10 << 20);
    // A route path without its `/`: the message quotes the path.
    s.write_config("", &route(&huge), 0);
    s.wait_log("reload refused").await;
    let logged = s.log().len() - before;
    assert!(logged < 4096, "{logged} bytes logged for the refusal");
    assert_eq!(s.status_of("/a").await, 200, "the old routes stay");
}
