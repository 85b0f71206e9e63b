//! Every fenced code block of README.md and docs/ is checked or run, so an
//! example a reader copies works:
//!
//! - `toml`: written to a file and given to `babelgate check` (the config
//!   compiler), which must accept it;
//! - `sh`: run by bash, `set -euo pipefail`, against a gateway started on the
//!   shipped gateway.toml (its ports moved to free ones, and the blocks'
//!   `localhost:8080` with them), with `babelgate` on the PATH; `curl` fails
//!   on an HTTP error status and gives up after a minute;
//! - `text`: a picture or an output, not code.
//!
//! Anything else, or a block that cannot run here, is preceded by an HTML
//! comment that says why: `<!-- not run: REASON -->`, or
//! `<!-- run by PATH -->` when a test at PATH (which names the page) runs it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_babelgate");
/// Variables the documented files read (`${NAME}`, `*_env` keys).
const DOC_ENV: [&str; 6] = [
    "AGENT_TOKEN",
    "CHAT_KEY",
    "JWT_SECRET",
    "OTLP_TOKEN",
    "INSPECTOR_KEY",
    "REDIS_PASSWORD",
];
/// A block's bound: the demo agent answers in well under a second.
const BLOCK_DEADLINE: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

#[derive(Debug)]
struct Block {
    place: String,
    lang: String,
    /// The HTML comment on the line before the fence, if any.
    marker: Option<String>,
    text: String,
}

fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    for dir in ["docs", "docs/mapping"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        found.sort();
        pages.extend(found);
    }
    pages
}

fn blocks_of(name: &str, doc: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = doc.lines().enumerate();
    let mut previous = "";
    while let Some((n, line)) = lines.next() {
        let Some(lang) = line.trim_start().strip_prefix("```") else {
            if !line.trim().is_empty() {
                previous = line;
            }
            continue;
        };
        let mut text = String::new();
        for (_, l) in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                break;
            }
            text.push_str(l);
            text.push('\n');
        }
        let p = previous.trim();
        out.push(Block {
            place: format!("{name}:{}", n + 1),
            lang: lang.trim().to_string(),
            marker: (p.starts_with("<!--") && p.ends_with("-->")).then(|| {
                p.trim_start_matches("<!--")
                    .trim_end_matches("-->")
                    .trim()
                    .to_string()
            }),
            text,
        });
        previous = "";
    }
    out
}

fn all_blocks() -> Vec<Block> {
    pages()
        .iter()
        .flat_map(|p| {
            let name = p.strip_prefix(root()).unwrap_or(p).display().to_string();
            let name = name.trim_start_matches("./").to_string();
            blocks_of(&name, &std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// What the test does with a block, or why it is a mistake.
#[derive(Debug, PartialEq)]
enum Plan {
    Check,
    Run,
    Skip,
}

fn plan(b: &Block) -> Result<Plan, String> {
    if let Some(m) = &b.marker {
        if let Some(why) = m.strip_prefix("not run:") {
            return if why.trim().is_empty() {
                Err("`not run:` without a reason".into())
            } else {
                Ok(Plan::Skip)
            };
        }
        if let Some(by) = m.strip_prefix("run by ") {
            let path = by.split_whitespace().next().unwrap_or("");
            let page = b.place.split(':').next().unwrap();
            let page = Path::new(page).file_name().unwrap().to_str().unwrap();
            return match std::fs::read_to_string(root().join(path)) {
                Ok(t) if t.contains(page) => Ok(Plan::Skip),
                Ok(_) => Err(format!("{path} does not name {page}")),
                Err(e) => Err(format!("{path}: {e}")),
            };
        }
    }
    match b.lang.as_str() {
        "toml" => Ok(Plan::Check),
        "sh" => Ok(Plan::Run),
        "text" => Ok(Plan::Skip),
        other => Err(format!(
            "a `{other}` block neither checked nor run: precede it with `<!-- not run: why -->`"
        )),
    }
}

/// `babelgate check` on the block, in a directory holding the files the
/// documented configurations name.
fn check(b: &Block, dir: &Path) -> Result<(), String> {
    for f in ["cert.pem", "key.pem", "keys.txt"] {
        std::fs::write(dir.join(f), "doc example\n").unwrap();
    }
    let file = dir.join("block.toml");
    std::fs::write(&file, &b.text).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("check").arg("--config").arg(&file);
    for v in DOC_ENV {
        cmd.env(v, "doc-example");
    }
    let out = cmd.output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr))
    }
}

/// The shipped gateway.toml served on free ports, for the `sh` blocks.
struct Gateway {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    fn start() -> Gateway {
        let (port, agent) = (free_port(), free_port());
        let shipped = std::fs::read_to_string(root().join("gateway.toml")).unwrap();
        assert!(shipped.contains("127.0.0.1:8080") && shipped.contains("127.0.0.1:9000"));
        let config = shipped
            .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"))
            .replace("127.0.0.1:9000", &format!("127.0.0.1:{agent}"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gateway.toml"), config).unwrap();
        std::fs::copy(
            root().join("gateway.schema.json"),
            dir.path().join("gateway.schema.json"),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("gateway.log")).unwrap();
        let child = Command::new(BIN)
            .args(["serve", "--config", "gateway.toml"])
            .current_dir(dir.path())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let g = Gateway { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = Command::new("curl")
                .args(["-sf", "-o", "/dev/null"])
                .arg(format!("http://127.0.0.1:{port}/readyz"))
                .status()
                .unwrap();
            if ready.success() {
                return g;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway never got ready:\n{}",
                g.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gateway.log")).unwrap_or_default()
    }

    /// Runs a block in the gateway's directory; its output on failure.
    fn run(&self, b: &Block) -> Result<(), String> {
        let port = self.port.to_string();
        let script = format!(
            "set -euo pipefail\n\
             curl() {{ command curl --silent --show-error --fail-with-body --max-time 60 \"$@\"; }}\n\
             {}",
            b.text
                .replace("localhost:8080", &format!("localhost:{port}"))
                .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"))
        );
        let bin_dir = Path::new(BIN).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out_file = self.dir.path().join("block.out");
        let out = std::fs::File::create(&out_file).unwrap();
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(self.dir.path())
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + BLOCK_DEADLINE;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let output = std::fs::read_to_string(&out_file).unwrap_or_default();
        match status {
            Some(s) if s.success() => Ok(()),
            Some(s) => Err(format!("{s}\n{output}")),
            None => Err(format!("still running after {BLOCK_DEADLINE:?}\n{output}")),
        }
    }
}

#[test]
fn every_block_is_checked_run_or_says_why_not() {
    let blocks = all_blocks();
    let mut problems = Vec::new();
    let (mut checked, mut ran) = (0, 0);
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = None;
    for b in &blocks {
        let result = match plan(b) {
            Err(e) => Err(e),
            Ok(Plan::Skip) => Ok(()),
            Ok(Plan::Check) => {
                checked += 1;
                check(b, dir.path())
            }
            Ok(Plan::Run) => {
                ran += 1;
                gateway.get_or_insert_with(Gateway::start).run(b)
            }
        };
        if let Err(e) = result {
            problems.push(format!("{} ({}):\n{}\n{e}", b.place, b.lang, b.text));
        }
    }
    if !problems.is_empty() {
        let log = gateway.as_ref().map(Gateway::log).unwrap_or_default();
        panic!(
            "{} of {} blocks fail:\n\n{}\n\ngateway log:\n{log}",
            problems.len(),
            blocks.len(),
            problems.join("\n\n")
        );
    }
    // The README's tour and the configuration page are among them.
    assert!(checked >= 5 && ran >= 3, "checked {checked}, ran {ran}");
}

/// The runner fails on a broken block of each kind: a `sh` block that asks
/// a path no route serves, a `toml` block with a key `check` does not know,
/// a block of another language with no reason not to run it.
#[test]
fn a_broken_block_fails() {
    let tour = all_blocks()
        .into_iter()
        .find(|b| b.place.starts_with("README.md") && b.lang == "sh" && b.marker.is_none())
        .expect("the README has a runnable sh block");
    let broken = Block {
        text: tour.text.replace("/api/chat", "/api/chta"),
        ..tour
    };
    assert_ne!(broken.text, "");
    let g = Gateway::start();
    let err = g
        .run(&broken)
        .expect_err("a request to an unknown path fails its block");
    assert!(err.contains("404"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let toml = Block {
        place: "x.md:1".into(),
        lang: "toml".into(),
        marker: None,
        text: "[[routes]]\npath = \"/a\"\nclient = \"vercel\"\nupstream = \"http://127.0.0.1:1/\"\nupstream_protocol = \"ag-ui\"\nupstream_protcol = \"ag-ui\"\n".into(),
    };
    let err = check(&toml, dir.path()).expect_err("an unknown key fails its block");
    assert!(err.contains("upstream_protcol"), "{err}");

    let js = Block {
        lang: "js".into(),
        text: "fetch('/')\n".into(),
        ..toml
    };
    assert!(plan(&js).is_err());
}
