//! A private Redis Cluster per test (or one shared by a test binary): six
//! `redis-server --cluster-enabled yes` on free loopback ports, joined by
//! `redis-cli --cluster create ... --cluster-replicas 1` into three primaries
//! with a replica each. Every wait is bounded. A node runs under a shell
//! that kills it when its stdin closes, so that nodes go with the test
//! process however it ends (a shared cluster is never dropped).
#![allow(dead_code)] // each test binary uses a part

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Node timeout of the test cluster: a dead primary is failed over within
/// a few seconds of it.
pub const NODE_TIMEOUT_MS: u64 = 1000;
const START_BOUND: Duration = Duration::from_secs(60);

struct Node {
    port: u16,
    dir: tempfile::TempDir,
    /// The shell and its stdin (closing it stops the node), and the node's pid.
    running: Option<(Child, ChildStdin, u32)>,
}

impl Node {
    fn start(&mut self) {
        self.stop();
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(r#"redis-server "$@" >/dev/null & p=$!; exec 2>/dev/null; echo $p; read _; kill -9 $p 2>/dev/null; wait $p"#)
            .arg("sh")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", "nodes.conf"])
            .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--daemonize", "no"])
            .args(["--loglevel", "warning"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => panic!("cannot start sh for redis-server: {e}"),
        };
        let stdin = child.stdin.take().expect("piped stdin");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("the node's pid");
        let pid: u32 = line.trim().parse().expect("a pid");
        self.running = Some((child, stdin, pid));
        let deadline = Instant::now() + Duration::from_secs(10);
        while cli(self.port, &["PING"]).as_deref() != Some("PONG") {
            assert!(
                Instant::now() < deadline,
                "redis-server (cluster node) did not answer on port {} within 10 s; \
                 is redis-server (7.0 or later) installed?",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: the node dies as in a crash.
    fn stop(&mut self) {
        if let Some((mut child, stdin, pid)) = self.running.take() {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// `redis-cli -p <port> <args>`, its output trimmed; `None` when it failed.
pub fn cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.starts_with("Could not connect")).then_some(text)
}

/// Ports `p` with `p` and its cluster bus port `p + 10000` free.
fn free_ports(n: usize) -> Vec<u16> {
    let mut ports = Vec::new();
    let mut held = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while ports.len() < n {
        assert!(Instant::now() < deadline, "no free port pairs");
        let l = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let p = l.local_addr().expect("its address").port();
        if p >= 55_000 {
            continue;
        }
        if let Ok(bus) = TcpListener::bind(("127.0.0.1", p + 10_000)) {
            ports.push(p);
            held.push((l, bus));
        }
    }
    ports
}

/// The cluster of this test binary, started by the first test that needs
/// it; tests on it keep apart by key prefix.
pub fn shared() -> &'static RedisCluster {
    static CLUSTER: std::sync::OnceLock<RedisCluster> = std::sync::OnceLock::new();
    CLUSTER.get_or_init(RedisCluster::start)
}

pub struct RedisCluster {
    nodes: Mutex<Vec<Node>>,
    ports: Vec<u16>,
}

impl RedisCluster {
    /// Three primaries with a replica each, every slot covered, every
    /// replica in sync.
    pub fn start() -> Self {
        let ports = free_ports(6);
        let mut nodes: Vec<Node> = ports
            .iter()
            .map(|&port| Node {
                port,
                dir: tempfile::tempdir().expect("a temporary directory"),
                running: None,
            })
            .collect();
        for n in &mut nodes {
            n.start();
        }
        let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let mut create = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("redis-cli --cluster create");
        let deadline = Instant::now() + START_BOUND;
        loop {
            if let Some(status) = create.try_wait().expect("redis-cli") {
                assert!(status.success(), "redis-cli --cluster create: {status}");
                break;
            }
            if Instant::now() > deadline {
                let _ = create.kill();
                panic!("redis-cli --cluster create did not finish within {START_BOUND:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let cluster = RedisCluster {
            nodes: Mutex::new(nodes),
            ports,
        };
        cluster.wait_settled(START_BOUND);
        cluster
    }

    /// Every node's URL (the seed list a store gets).
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Waits until every running node says `cluster_state:ok`, three
    /// primaries cover the slots and every replica's link is up.
    pub fn wait_settled(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        loop {
            if self.settled() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not settle within {bound:?}: {:?}",
                self.ports
                    .iter()
                    .map(|&p| cli(p, &["CLUSTER", "INFO"]).unwrap_or_default())
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn settled(&self) -> bool {
        let running = self.running_ports();
        running
            .iter()
            .all(|&p| cli(p, &["CLUSTER", "INFO"]).is_some_and(|i| i.contains("cluster_state:ok")))
            && running.iter().all(|&p| {
                let Some(info) = cli(p, &["INFO", "replication"]) else {
                    return false;
                };
                !info.contains("role:slave") || info.contains("master_link_status:up")
            })
    }

    fn running_ports(&self) -> Vec<u16> {
        self.lock()
            .iter()
            .filter(|n| n.running.is_some())
            .map(|n| n.port)
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Node>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The port of the primary that serves `key` (asked of a running node).
    pub fn primary_of(&self, key: &str) -> u16 {
        let slot: u16 = self
            .running_ports()
            .iter()
            .find_map(|&p| cli(p, &["CLUSTER", "KEYSLOT", key]))
            .and_then(|s| s.parse().ok())
            .expect("a slot");
        self.owner_of_slot(slot)
    }

    /// The port of the primary that serves `slot`, per `CLUSTER SHARDS`
    /// flattened by redis-cli: taken from `CLUSTER NODES` instead (one line
    /// per node: id addr flags master ... slots).
    pub fn owner_of_slot(&self, slot: u16) -> u16 {
        for p in self.running_ports() {
            let Some(nodes) = cli(p, &["CLUSTER", "NODES"]) else {
                continue;
            };
            for line in nodes.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() < 8 || !f[2].contains("master") || f[2].contains("fail") {
                    continue;
                }
                let owns = f[8..].iter().any(|r| match r.split_once('-') {
                    Some((a, b)) => {
                        a.parse::<u16>().is_ok_and(|a| a <= slot)
                            && b.parse::<u16>().is_ok_and(|b| slot <= b)
                    }
                    None => r.parse::<u16>().is_ok_and(|s| s == slot),
                });
                if owns {
                    let addr = f[1].split('@').next().unwrap_or_default();
                    if let Some(port) = addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()) {
                        return port;
                    }
                }
            }
            break;
        }
        panic!("no primary serves slot {slot}")
    }

    /// The replica of the primary on `port`.
    pub fn replica_of(&self, port: u16) -> u16 {
        for p in self.running_ports() {
            let Some(info) = cli(p, &["INFO", "replication"]) else {
                continue;
            };
            if info.contains("role:slave") && info.contains(&format!("master_port:{port}")) {
                return p;
            }
        }
        panic!("no replica of {port}")
    }

    /// Kills the node on `port` (SIGKILL, as a crash).
    pub fn kill(&self, port: u16) {
        if let Some(n) = self.lock().iter_mut().find(|n| n.port == port) {
            n.stop();
        }
    }

    /// Starts the node on `port` again, from its `nodes.conf` (data empty).
    pub fn restart(&self, port: u16) {
        if let Some(n) = self.lock().iter_mut().find(|n| n.port == port) {
            n.start();
        }
    }

    pub fn kill_all(&self) {
        for n in self.lock().iter_mut() {
            n.stop();
        }
    }

    pub fn restart_all(&self) {
        for n in self.lock().iter_mut() {
            n.start();
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}
