//! The Redis backend (data layout in the crate documentation).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::{self, BoxStream, StreamExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster::{ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::streams::StreamReadReply;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ErrorKind, RedisError, RedisFuture, Script,
    ServerErrorKind, Value,
};
use tokio::sync::oneshot;

use crate::flag::Flag;
use crate::{
    ConversationStore, Entry, EventId, LogItem, Message, RedisConfig, RunInfo, RunLog, RunOutcome,
    RunStatus, StoreError, MIN_RETENTION,
};

/// Entries a reader takes per `XREAD`.
const READ_BATCH: usize = 256;
/// Bounds of one `XREAD BLOCK` (a third of the lease in between).
const MIN_BLOCK: Duration = Duration::from_millis(50);
const MAX_BLOCK: Duration = Duration::from_secs(2);
/// Redirections a reader follows in a row before it gives up.
const MAX_REDIRECTS: u32 = 5;
/// Pause of a reader between attempts while a cluster node is down.
const RETRY_DELAY: Duration = Duration::from_millis(200);
/// Runs whose last written id a store remembers (runs it writes at once).
const MAX_WRITTEN: usize = 100_000;
/// First and longest pause between tries of a write retried while the
/// store is unavailable (a failover: the promoted replica takes its slots
/// over within about a second of the election).
const WRITE_RETRY_FIRST: Duration = Duration::from_millis(50);
const WRITE_RETRY_MAX: Duration = Duration::from_millis(400);

/// Lua shared by the scripts. `lost` records a running run whose lease ran
/// out as lost: state, marker entry for readers, expiry.
const PRELUDE: &str = r#"
local function extend(key, keep_ms)
  local ttl = redis.call('PTTL', key)
  if ttl >= 0 and ttl < tonumber(keep_ms) then redis.call('PEXPIRE', key, keep_ms) end
end
local function lost(log, meta, keep_ms)
  redis.call('HSET', meta, 'state', 'lost')
  redis.call('XADD', log, '*', 'l', '1')
  redis.call('PEXPIRE', log, keep_ms)
  redis.call('PEXPIRE', meta, keep_ms)
end
-- Cluster: the pointers of a tag's conversations are one hash (key ->
-- run id), so that a run's scripts name it in KEYS; its expiry only grows,
-- as other keys with the same tag may point there too.
local function point(latest, key, run_id, keep_ms)
  redis.call('HSET', latest, key, run_id)
  extend(latest, keep_ms)
end
-- Cluster: the pointer of the run's key keeps at least `keep_ms` while it
-- names the run (run_id, meta as KEYS).
local function keep_pointer(latest, meta, run_id, keep_ms)
  local key = redis.call('HGET', meta, 'key')
  if key and redis.call('HGET', latest, key) == run_id then extend(latest, keep_ms) end
end
-- The log's last entry is not the writer's last (`written`): either an
-- earlier try of this very batch was applied and its answer lost (a
-- failover, a timeout), and the entries after `written` are the batch, or
-- the log lost entries. The batch's ids ({2, id...}) in the first case, else
-- false. Data and core of entry i are ARGV[at + 2i - 1], ARGV[at + 2i].
local function landed_batch(log, written, cores, at)
  if #redis.call('XRANGE', log, written, written) == 0 then return false end
  local count = string.len(cores)
  local after = redis.call('XRANGE', log, '(' .. written, '+', 'COUNT', count + 1)
  if #after ~= count then return false end
  local out = {2}
  for i = 1, count do
    local f = after[i][2]
    if f[1] ~= 'd' or f[2] ~= ARGV[at + 2 * i - 1] then return false end
    if string.byte(cores, i) == 49 then
      if f[3] ~= 'c' or f[4] ~= ARGV[at + 2 * i] then return false end
    elseif f[3] then
      return false
    end
    out[i + 1] = after[i][1]
  end
  return out
end
-- The state of the run after applying its lease: false when unknown.
local function settle(log, meta, lease, keep_ms)
  local st = redis.call('HGET', meta, 'state')
  if st == 'running' and redis.call('EXISTS', lease) == 0 then
    lost(log, meta, keep_ms)
    st = 'lost'
  end
  return st
end
"#;

/// KEYS log meta lease [latest]; ARGV run_id key owner lease_ms keep_ms
/// layout. `latest` is the key's pointer: a string (layout `s`, one Redis)
/// or the hash of its tag (layout `h`, Cluster); without it (an id not
/// minted for its key: another slot) the caller points it in a second call.
const BEGIN: &str = r#"
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[2], 'key', ARGV[2], 'owner', ARGV[3], 'state', 'running',
  'lease_ms', ARGV[4], 'entries', 0, 'bytes', 0)
local id = redis.call('XADD', KEYS[1], '*', 'b', '1')
redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[4])
if KEYS[4] then
  if ARGV[6] == 'h' then
    point(KEYS[4], ARGV[2], ARGV[1], ARGV[5])
  else
    redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[5])
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return id
"#;

/// KEYS latest (a tag's hash); ARGV key run_id keep_ms. The pointer of an
/// id whose tag is not its key's (Cluster only).
const POINT: &str = r#"
point(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
return 1
"#;

/// KEYS log meta lease; ARGV max_entries max_bytes lost_ms cores written,
/// then each entry's data and core (`cores` has a `1` for each entry with a
/// core part, `0` for one without, whose core argument is empty). Returns
/// {0} unknown, {1} not running, {2, id...}. `written` is the id this
/// writer last added (or empty), which must be the log's last entry: when
/// the log no longer holds it, a failover promoted a replica that missed
/// it, and the run is lost rather than go on with a hole that readers
/// resuming before it would skip; when entries follow it that are this
/// batch, an earlier try of this call was applied (its answer lost) and
/// their ids are the answer, so a retried append never adds a batch twice.
/// An entry's size is its data and its core part together. A batch is one call: Lua's per-call cost, not the
/// entries, was most of Redis's time on a stream (about 7 µs an event).
const APPEND: &str = r#"
local st = settle(KEYS[1], KEYS[2], KEYS[3], ARGV[3])
if not st then return {0} end
if st ~= 'running' then return {1} end
local cores = ARGV[4]
local count = string.len(cores)
local written = ARGV[5]
if written ~= '' then
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
  if not last or last[1] ~= written then
    local landed = landed_batch(KEYS[1], written, cores, 5)
    if landed then return landed end
    lost(KEYS[1], KEYS[2], ARGV[3])
    return {1}
  end
end
local out = {2}
local size = 0
for i = 1, count do
  local data = ARGV[4 + 2 * i]
  local id
  if string.byte(cores, i) == 49 then
    local core = ARGV[5 + 2 * i]
    id = redis.call('XADD', KEYS[1], '*', 'd', data, 'c', core)
    size = size + string.len(data) + string.len(core)
  else
    id = redis.call('XADD', KEYS[1], '*', 'd', data)
    size = size + string.len(data)
  end
  out[i + 1] = id
end
local n = redis.call('HINCRBY', KEYS[2], 'entries', count)
local b = redis.call('HINCRBY', KEYS[2], 'bytes', size)
local max_n = tonumber(ARGV[1])
local max_b = tonumber(ARGV[2])
local trimmed = false
while n > 1 and (n > max_n or b > max_b) do
  local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
  if not first then break end
  redis.call('XDEL', KEYS[1], first[1])
  local fields = first[2]
  if fields[1] == 'd' then
    n = n - 1
    for i = 2, #fields, 2 do
      b = b - string.len(fields[i])
    end
    trimmed = first[1]
  end
end
if trimmed then
  redis.call('HSET', KEYS[2], 'entries', n, 'bytes', b, 'trimmed', trimmed)
end
return out
"#;

/// KEYS log meta lease [latest]; ARGV owner lease_ms keep_ms run_id prefix
/// lost_ms. Returns 0 unknown, 1 not running (or not the owner), 2 renewed.
/// With `latest` (Cluster) the pointer is that hash; else a string named
/// from the meta hash.
const RENEW: &str = r#"
local st = settle(KEYS[1], KEYS[2], KEYS[3], ARGV[6])
if not st then return 0 end
if st ~= 'running' or redis.call('GET', KEYS[3]) ~= ARGV[1] then return 1 end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'lease_ms', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if KEYS[4] then
  keep_pointer(KEYS[4], KEYS[2], ARGV[4], ARGV[3])
  return 2
end
local latest = ARGV[5] .. ':latest2:' .. redis.call('HGET', KEYS[2], 'key')
if redis.call('GET', latest) == ARGV[4] then redis.call('PEXPIRE', latest, ARGV[3]) end
return 2
"#;

/// KEYS log meta lease [latest]; ARGV outcome retention_ms run_id prefix
/// lost_ms written. Returns 0 unknown, 1 not running, 2 ended. `latest` as
/// for RENEW. `written` as for APPEND: a run whose log lost the writer's
/// last entry ends lost, never complete with a hole.
const END: &str = r#"
local st = settle(KEYS[1], KEYS[2], KEYS[3], ARGV[5])
if not st then return 0 end
if st ~= 'running' then return 1 end
local written = ARGV[6]
if written ~= '' then
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
  if not last or last[1] ~= written then
    lost(KEYS[1], KEYS[2], ARGV[5])
    return 1
  end
end
redis.call('HSET', KEYS[2], 'state', 'ended', 'outcome', ARGV[1])
redis.call('XADD', KEYS[1], '*', 'e', ARGV[1])
redis.call('DEL', KEYS[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if KEYS[4] then
  keep_pointer(KEYS[4], KEYS[2], ARGV[3], ARGV[2])
  return 2
end
local latest = ARGV[4] .. ':latest2:' .. redis.call('HGET', KEYS[2], 'key')
if redis.call('GET', latest) == ARGV[3] then redis.call('PEXPIRE', latest, ARGV[2]) end
return 2
"#;

/// KEYS log meta lease; ARGV lost_ms.
/// Returns nil when unknown, else {state, key, owner, outcome, lease_ms, trimmed}.
const STATUS: &str = r#"
local st = settle(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
if not st then return false end
local f = redis.call('HMGET', KEYS[2], 'key', 'owner', 'outcome', 'lease_ms', 'trimmed')
return {st, f[1] or '', f[2] or '', f[3] or '', f[4] or '', f[5] or ''}
"#;

/// KEYS log meta lease; ARGV lost_ms channel run_id. Returns 1 when
/// recorded; the owner's store hears of it on the channel.
const STOP: &str = r#"
if settle(KEYS[1], KEYS[2], KEYS[3], ARGV[1]) ~= 'running' then return 0 end
redis.call('HSET', KEYS[2], 'stop', '1')
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
"#;

/// KEYS meta; ARGV input. Returns 0 unknown, 2 kept (in the meta hash, so
/// it expires with the run).
const KEEP_INPUT: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'input', ARGV[1])
return 2
"#;

/// KEYS conv; ARGV max_messages max_bytes ttl_ms message... Appends, then
/// drops the oldest messages past either cap, then refreshes the expiry.
const APPEND_HISTORY: &str = r#"
for i = 4, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[1]), -1)
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local total = 0
for _, m in ipairs(items) do total = total + string.len(m) end
local max_b = tonumber(ARGV[2])
local drop = 0
while total > max_b and drop < #items do
  drop = drop + 1
  total = total - string.len(items[drop])
end
if drop > 0 then redis.call('LTRIM', KEYS[1], drop, -1) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"#;

/// After the stop subscription broke, wait this long before subscribing
/// again (and between attempts while Redis is down).
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(250);
/// The subscription is pinged this often, so that a connection that died
/// silently is noticed and replaced.
const SUBSCRIPTION_PING: Duration = Duration::from_secs(15);

/// Conversation histories and run logs in Redis; cheap to clone, every clone
/// shares one connection (which reconnects by itself).
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: RedisConfig,
    link: Link,
    conn: Conn,
    scripts: Scripts,
    stops: Arc<StopHub>,
    /// Run -> the id this store last added to its log (runs it writes),
    /// which the next append checks is still there.
    written: std::sync::Mutex<HashMap<String, String>>,
}

/// The runs of this store waiting for a stop, fed by one subscription to
/// `<p>:stop` (started on the first wait, ended when the store is dropped).
#[derive(Default)]
struct StopHub {
    /// Run id -> its waiters; an entry goes with its last waiter.
    waiting: std::sync::Mutex<HashMap<String, Arc<Flag>>>,
    /// Set once the subscriber runs; dropping it (with the hub) ends it.
    closer: std::sync::Mutex<Option<oneshot::Sender<()>>>,
    /// How many times the subscription was established.
    subscriptions: AtomicU64,
}

impl StopHub {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Flag>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn follow(self: &Arc<Self>, run_id: &str) -> StopWait {
        let flag = self
            .waiting()
            .entry(run_id.to_string())
            .or_default()
            .clone();
        StopWait {
            hub: self.clone(),
            run_id: run_id.to_string(),
            flag: Some(flag),
        }
    }

    fn fire(&self, run_id: &str) {
        if let Some(flag) = self.waiting().get(run_id) {
            flag.set();
        }
    }

    fn followed(&self) -> Vec<String> {
        self.waiting().keys().cloned().collect()
    }
}

/// One waiter of [`StopHub`]; leaves the map when dropped.
struct StopWait {
    hub: Arc<StopHub>,
    run_id: String,
    flag: Option<Arc<Flag>>,
}

impl Drop for StopWait {
    fn drop(&mut self) {
        drop(self.flag.take());
        let mut waiting = self.hub.waiting();
        // The map's own count is the last: no waiter is left (a new one
        // would take this lock to clone it).
        if waiting
            .get(&self.run_id)
            .is_some_and(|f| Arc::strong_count(f) == 1)
        {
            waiting.remove(&self.run_id);
        }
    }
}

struct Scripts {
    begin: Script,
    point: Script,
    append: Script,
    renew: Script,
    end: Script,
    status: Script,
    stop: Script,
    keep_input: Script,
    append_history: Script,
}

impl Scripts {
    fn new() -> Self {
        let s = |body: &str| Script::new(&format!("{PRELUDE}\n{body}"));
        Scripts {
            begin: s(BEGIN),
            point: s(POINT),
            append: s(APPEND),
            renew: s(RENEW),
            end: s(END),
            status: s(STATUS),
            stop: s(STOP),
            keep_input: s(KEEP_INPUT),
            append_history: s(APPEND_HISTORY),
        }
    }
}

/// A run as the status script reports it.
struct Status {
    state: String,
    key: String,
    owner: String,
    outcome: String,
    lease: Duration,
    trimmed: Option<EventId>,
}

impl Status {
    fn run_status(&self) -> Result<RunStatus, StoreError> {
        match self.state.as_str() {
            "running" => Ok(RunStatus::Running),
            "lost" => Ok(RunStatus::Lost),
            "ended" => Ok(RunStatus::Ended(self.outcome()?)),
            other => Err(StoreError::Corrupt(format!("run state {other:?}"))),
        }
    }

    fn outcome(&self) -> Result<RunOutcome, StoreError> {
        RunOutcome::parse(&self.outcome)
            .ok_or_else(|| StoreError::Corrupt(format!("run outcome {:?}", self.outcome)))
    }
}

fn ms(d: Duration) -> u64 {
    (d.as_millis() as u64).max(1)
}

/// What `backend = "redis"` on a cluster node is told (no host named).
const CLUSTER_NODE: &str = "store.url is a Redis Cluster node: keys of other slots answer MOVED \
     and scripts CROSSSLOT; use backend = \"redis-cluster\" with urls = [...]";

/// A Redis error as the store's; `cluster` when it came from the cluster
/// client, where a redirection left over is a slot still on the move (a
/// failover, a resharding), an outage for this call.
fn map_err(e: RedisError, cluster: bool) -> StoreError {
    match e.kind() {
        // One Redis that is a cluster node: an outage for this call, named
        // as what it is.
        ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::CrossSlot) if !cluster => {
            StoreError::Unavailable(format!("{CLUSTER_NODE} ({})", e.code().unwrap_or("")))
        }
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => StoreError::Corrupt(e.to_string()),
        _ if e.code() == Some("WRONGTYPE") => StoreError::Corrupt(e.to_string()),
        _ => StoreError::Unavailable(e.to_string()),
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The connection every call but blocking reads and the stop subscription
/// goes through: a connection manager on one server, or on Cluster the
/// `redis` crate's cluster connection, which routes each command (a script
/// by its first key) to the slot's owner, follows `MOVED`/`ASK` and
/// refreshes its slot map when the topology changes.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl redis::aio::ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The servers a store talks to: one, or the seed nodes of a cluster (a
/// client each, for the connections of their own: blocking reads and the
/// stop subscription).
#[derive(Clone)]
pub(crate) struct Link {
    seeds: Vec<redis::Client>,
    cluster: bool,
}

impl Link {
    /// A client of the node at `host:port` (from a `MOVED`), with the seed
    /// nodes' credentials and TLS settings.
    fn node(&self, addr: &str) -> Option<redis::Client> {
        let (host, port) = addr.rsplit_once(':')?;
        let port: u16 = port.parse().ok()?;
        let seed = self.seeds.first()?.get_connection_info().clone();
        let addr = match seed.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host.to_string(), port),
        };
        redis::Client::open(seed.set_addr(addr)).ok()
    }
}

/// The clients of `cfg` (`url`, or the seed nodes of `cluster`) and a
/// shared connection that connects on first use, each exchange bounded by
/// the config's timeouts.
pub(crate) fn lazy_connection(cfg: &RedisConfig) -> Result<(Link, Conn), StoreError> {
    if cfg.cluster.is_empty() {
        let client = redis::Client::open(cfg.url.as_str())
            // The URL may hold a password: never in an error.
            .map_err(|e| StoreError::Config(format!("store.url: {e}")))?;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(cfg.connect_timeout))
            .set_response_timeout(Some(cfg.op_timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), manager)
            .map_err(|e| StoreError::Config(e.to_string()))?;
        let link = Link {
            seeds: vec![client],
            cluster: false,
        };
        return Ok((link, Conn::Single(conn)));
    }
    let seeds = cfg
        .cluster
        .iter()
        .enumerate()
        .map(|(i, url)| {
            redis::Client::open(url.as_str())
                .map_err(|e| StoreError::Config(format!("store.urls[{i}]: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Retries (a MOVED, a failover) wait 50 ms to 0.5 s: within the op
    // timeout that bounds every call, not the crate's default of seconds.
    let client = ClusterClientBuilder::new(cfg.cluster.iter().map(String::as_str))
        .connection_timeout(cfg.connect_timeout)
        .response_timeout(cfg.op_timeout)
        .retries(6)
        .min_retry_wait(50)
        .max_retry_wait(500)
        .build()
        .map_err(|e| StoreError::Config(format!("store.urls: {:?}", e.kind())))?;
    // Connects in the background: the store opens while the cluster is down.
    let conn = client.get_pending_async_connection_with_config(
        ClusterConfig::new()
            .set_connection_timeout(cfg.connect_timeout)
            .set_response_timeout(cfg.op_timeout),
    );
    let link = Link {
        seeds,
        cluster: true,
    };
    Ok((link, Conn::Cluster(conn)))
}

/// A run id's hash tag: the part before the first dot (ids from
/// [`crate::run_id`], tagged by their conversation), else the whole id.
fn run_tag(run_id: &str) -> (&str, Option<&str>) {
    match run_id.split_once('.') {
        Some((tag, rest)) => (tag, Some(rest)),
        None => (run_id, None),
    }
}

/// A run's log, meta and lease keys. On Cluster `<p>:run2:{<tag>}.<rest>:...`,
/// in its conversation's slot (an id without a dot: `<p>:run2:{<id>}:...`).
/// On one Redis, where slots do not matter, `<p>:run2:{<id>}:...`, whatever
/// the id.
///
/// `run2`: the second form of what a log holds (the gateway logs what came
/// in from the upstream, not what went out). Instances of the form before
/// read `run:` keys and `latest:` pointers, so during an upgrade neither
/// form's instances ever read a log of the other form: they find no run.
fn run_keys(prefix: &str, run_id: &str, cluster: bool) -> [String; 3] {
    let name = match run_tag(run_id) {
        (tag, Some(rest)) if cluster => format!("{prefix}:run2:{{{tag}}}.{rest}"),
        _ => format!("{prefix}:run2:{{{run_id}}}"),
    };
    [
        format!("{name}:log"),
        format!("{name}:meta"),
        format!("{name}:lease"),
    ]
}

fn parse_id(s: &str) -> Result<EventId, StoreError> {
    s.parse()
        .map_err(|_| StoreError::Corrupt(format!("stream id {s:?}")))
}

impl RedisStore {
    /// A store on `cfg.url`. Does not connect (the first call does), so it
    /// succeeds while Redis is down; fails only on a malformed URL. Must be
    /// called within a Tokio runtime.
    pub async fn open(cfg: RedisConfig) -> Result<Self, StoreError> {
        let (link, conn) = lazy_connection(&cfg)?;
        Ok(RedisStore {
            inner: Arc::new(Inner {
                cfg,
                link,
                conn,
                scripts: Scripts::new(),
                stops: Arc::default(),
                written: Default::default(),
            }),
        })
    }

    /// How many times this store's stop subscription was established
    /// (once, plus once per reconnection).
    pub fn stop_subscriptions(&self) -> u64 {
        self.inner.stops.subscriptions.load(Ordering::Relaxed)
    }
}

impl Inner {
    fn run_keys(&self, run_id: &str) -> [String; 3] {
        run_keys(&self.cfg.prefix, run_id, self.link.cluster)
    }

    /// The key's latest pointer: a string on one Redis, on Cluster the hash
    /// of the key's tag (a field per key).
    fn latest_key(&self, key: &str) -> String {
        if self.link.cluster {
            format!("{}:latest2:{{{}}}", self.cfg.prefix, crate::key_tag(key))
        } else {
            format!("{}:latest2:{key}", self.cfg.prefix)
        }
    }

    /// Cluster: the pointer hash in the run's slot (its tag's), which the
    /// run's scripts name as their fourth key.
    fn run_latest(&self, run_id: &str) -> Option<String> {
        self.link
            .cluster
            .then(|| format!("{}:latest2:{{{}}}", self.cfg.prefix, run_tag(run_id).0))
    }

    fn conv_key(&self, thread: &str) -> String {
        format!("{}:conv:{{{thread}}}", self.cfg.prefix)
    }

    fn written(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the id last added to `run_id`'s log by this store; `None`
    /// forgets the run (ended, lost, unknown).
    fn note_written(&self, run_id: &str, id: Option<String>) {
        let mut written = self.written();
        match id {
            // Bounded: past it, runs begun go unchecked.
            Some(id) if written.len() < MAX_WRITTEN || written.contains_key(run_id) => {
                written.insert(run_id.to_string(), id);
            }
            Some(_) => {}
            None => {
                written.remove(run_id);
            }
        }
    }

    fn lost_ms(&self) -> u64 {
        ms(self.cfg.lost_retention)
    }

    /// Runs one exchange with Redis, bounded by `op_timeout`.
    async fn call<T>(
        &self,
        fut: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        self.exchange(fut)
            .await?
            .map_err(|e| map_err(e, self.link.cluster))
    }

    /// As [`call`](Inner::call), but Redis's own error is the caller's to
    /// look at; only a timeout is turned into [`StoreError::Unavailable`].
    async fn exchange<T>(
        &self,
        fut: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<Result<T, RedisError>, StoreError> {
        tokio::time::timeout(self.cfg.op_timeout, fut)
            .await
            .map_err(|_| {
                StoreError::Unavailable(format!(
                    "redis did not answer within {:?}",
                    self.cfg.op_timeout
                ))
            })
    }

    /// A write of a run in flight (`op`, given the try's number), tried
    /// again while the store is unavailable, within `op_timeout` in all: a
    /// failover that promotes a replica within it (`op_timeout` above the
    /// cluster's failover time) is ridden through, the stream keeps its
    /// log. Only for the append and end scripts, which recognise a try that
    /// was applied though its answer was lost.
    async fn retried<T, F, Fut>(&self, mut op: F) -> Result<T, StoreError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let deadline = tokio::time::Instant::now() + self.cfg.op_timeout;
        let mut delay = WRITE_RETRY_FIRST;
        let mut attempt = 0;
        loop {
            let r = tokio::time::timeout_at(deadline, op(attempt))
                .await
                .unwrap_or_else(|_| {
                    Err(StoreError::Unavailable(format!(
                        "redis did not answer within {:?}",
                        self.cfg.op_timeout
                    )))
                });
            match r {
                Err(StoreError::Unavailable(m))
                    // A `redis` backend on a cluster node stays one.
                    if !m.starts_with(CLUSTER_NODE)
                        && tokio::time::Instant::now() + delay < deadline =>
                {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(WRITE_RETRY_MAX);
                    attempt += 1;
                }
                r => return r,
            }
        }
    }

    async fn script<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<T, StoreError> {
        let mut con = self.conn.clone();
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(*k);
        }
        for a in args {
            inv.arg(*a);
        }
        self.call(async { inv.invoke_async(&mut con).await }).await
    }

    async fn status(&self, run_id: &str) -> Result<Option<Status>, StoreError> {
        let [log, meta, lease] = self.run_keys(run_id);
        let v: Value = self
            .script(
                &self.scripts.status,
                &[&log, &meta, &lease],
                &[self.lost_ms().to_string().as_bytes()],
            )
            .await?;
        let fields = match v {
            Value::Nil => return Ok(None),
            Value::Array(items) => items.iter().map(text).collect::<Option<Vec<_>>>(),
            _ => None,
        };
        let Some([state, key, owner, outcome, lease_ms, trimmed]) =
            fields.and_then(|f| <[String; 6]>::try_from(f).ok())
        else {
            return Err(StoreError::Corrupt(format!("run {run_id} meta")));
        };
        let lease = Duration::from_millis(lease_ms.parse().unwrap_or(0));
        let trimmed = match trimmed.as_str() {
            "" => None,
            id => Some(parse_id(id)?),
        };
        Ok(Some(Status {
            state,
            key,
            owner,
            outcome,
            lease,
            trimmed,
        }))
    }

    async fn info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        let Some(st) = self.status(run_id).await? else {
            return Ok(None);
        };
        Ok(Some(RunInfo {
            run_id: run_id.to_string(),
            status: st.run_status()?,
            key: st.key,
            owner: st.owner,
        }))
    }

    fn stop_channel(&self) -> String {
        format!("{}:stop", self.cfg.prefix)
    }

    /// Starts the stop subscriber, once.
    fn start_stop_subscriber(&self) {
        let mut closer = self.stops.closer.lock().unwrap_or_else(|e| e.into_inner());
        if closer.is_some() {
            return;
        }
        let (tx, rx) = oneshot::channel();
        *closer = Some(tx);
        tokio::spawn(stop_subscriber(
            Arc::downgrade(&self.stops),
            rx,
            self.link.clone(),
            self.conn.clone(),
            self.cfg.clone(),
        ));
    }

    async fn stop_flag(&self, run_id: &str) -> Result<bool, StoreError> {
        let [_, meta, _] = self.run_keys(run_id);
        let mut con = self.conn.clone();
        let stop: Option<String> = self
            .call(
                redis::cmd("HGET")
                    .arg(&meta)
                    .arg("stop")
                    .query_async(&mut con),
            )
            .await?;
        Ok(stop.is_some())
    }

    /// A connection of a reader's own, for `XREAD BLOCK`: to the server, or
    /// on Cluster to `node` (the slot's owner, from a `MOVED`) when given
    /// and up, else to the first seed node that answers (which redirects).
    async fn blocking_connection(
        &self,
        node: Option<&str>,
    ) -> Result<MultiplexedConnection, StoreError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.cfg.connect_timeout))
            .set_response_timeout(Some(MAX_BLOCK + self.cfg.op_timeout));
        let hinted = node.and_then(|n| self.link.node(n));
        let mut last = None;
        for client in hinted.iter().chain(&self.link.seeds) {
            match self
                .call(client.get_multiplexed_async_connection_with_config(&config))
                .await
            {
                Ok(conn) => return Ok(conn),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| StoreError::Config("no redis node configured".into())))
    }
}

/// Turns a script's 0 / 1 / 2 answer into the run errors.
fn verdict(code: i64, run_id: &str) -> Result<(), StoreError> {
    match code {
        0 => Err(StoreError::UnknownRun(run_id.to_string())),
        1 => Err(StoreError::NotRunning(run_id.to_string())),
        _ => Ok(()),
    }
}

#[async_trait]
impl ConversationStore for RedisStore {
    async fn history(&self, thread: &str) -> Result<Vec<Message>, StoreError> {
        let inner = &self.inner;
        let key = inner.conv_key(thread);
        let mut con = inner.conn.clone();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("LRANGE")
            .arg(&key)
            .arg(0)
            .arg(-1)
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(ms(inner.cfg.history_ttl))
            .ignore();
        let (items,): (Vec<Vec<u8>>,) = inner.call(pipe.query_async(&mut con)).await?;
        items
            .iter()
            .map(|raw| {
                serde_json::from_slice(raw)
                    .map_err(|e| StoreError::Corrupt(format!("history of {thread:?}: {e}")))
            })
            .collect()
    }

    async fn append(&self, thread: &str, messages: Vec<Message>) -> Result<(), StoreError> {
        let inner = &self.inner;
        let key = inner.conv_key(thread);
        let max_messages = inner.cfg.max_messages.max(1).to_string();
        let max_bytes = inner.cfg.max_history_bytes.to_string();
        let ttl = ms(inner.cfg.history_ttl).to_string();
        let encoded = crate::encode_messages(&messages)?;
        let mut args: Vec<&[u8]> = vec![
            max_messages.as_bytes(),
            max_bytes.as_bytes(),
            ttl.as_bytes(),
        ];
        args.extend(encoded.iter().map(Vec::as_slice));
        let _: i64 = inner
            .script(&inner.scripts.append_history, &[&key], &args)
            .await?;
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        RunLog::ping(self).await
    }
}

#[async_trait]
impl RunLog for RedisStore {
    async fn begin(
        &self,
        key: &str,
        run_id: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<Option<RunInfo>, StoreError> {
        let inner = &self.inner;
        let previous = match RunLog::latest(self, key).await? {
            Some(prev) if prev.is_running() && prev.run_id != run_id => Some(prev),
            _ => None,
        };
        let [log, meta, lease_key] = inner.run_keys(run_id);
        let latest = inner.latest_key(key);
        let lease_ms = ms(lease).to_string();
        let keep_ms = (ms(lease) + inner.lost_ms()).to_string();
        // On Cluster one script only when the id carries its key's tag (ids
        // from `run_id`): else the pointer is in another slot and follows.
        let cluster = inner.link.cluster;
        let one_slot = !cluster || run_tag(run_id).0 == crate::key_tag(key);
        let mut keys = vec![log.as_str(), meta.as_str(), lease_key.as_str()];
        if one_slot {
            keys.push(&latest);
        }
        let layout: &[u8] = if cluster { b"h" } else { b"s" };
        let begun: String = inner
            .script(
                &inner.scripts.begin,
                &keys,
                &[
                    run_id.as_bytes(),
                    key.as_bytes(),
                    owner.as_bytes(),
                    lease_ms.as_bytes(),
                    keep_ms.as_bytes(),
                    layout,
                ],
            )
            .await?;
        if !one_slot {
            let _: i64 = inner
                .script(
                    &inner.scripts.point,
                    &[&latest],
                    &[key.as_bytes(), run_id.as_bytes(), keep_ms.as_bytes()],
                )
                .await?;
        }
        inner.note_written(run_id, Some(begun));
        Ok(previous)
    }

    /// One round trip and one script call for the batch: atomic on the
    /// server, trimmed to the caps once at its end (which keeps what
    /// trimming after each entry would: the newest entries that fit).
    async fn append_entries(
        &self,
        run_id: &str,
        data: Vec<Entry>,
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        if data.is_empty() {
            return Ok(());
        }
        let inner = &self.inner;
        let [log, meta, lease] = inner.run_keys(run_id);
        let max_entries = inner.cfg.max_run_entries.max(1).to_string();
        let max_bytes = inner.cfg.max_run_bytes.max(1).to_string();
        let lost_ms = inner.lost_ms().to_string();
        let cores: Vec<u8> = data
            .iter()
            .map(|d| if d.core_bytes().is_some() { b'1' } else { b'0' })
            .collect();
        let written = inner.written().get(run_id).cloned().unwrap_or_default();
        let mut args: Vec<&[u8]> = Vec::with_capacity(5 + 2 * data.len());
        args.extend([
            max_entries.as_bytes(),
            max_bytes.as_bytes(),
            lost_ms.as_bytes(),
            &cores[..],
            written.as_bytes(),
        ]);
        for d in &data {
            args.push(d.event_bytes());
            args.push(d.core_bytes().unwrap_or_default());
        }
        let keys = [log.as_str(), meta.as_str(), lease.as_str()];
        let answer: Value = inner
            .retried(|_| inner.script(&inner.scripts.append, &keys, &args))
            .await?;
        match answer {
            Value::Array(items) => match items.split_first() {
                Some((Value::Int(2), got)) if got.len() == data.len() => {
                    let mut last = None;
                    for id in got {
                        let id = text(id).ok_or_else(|| StoreError::Corrupt("XADD id".into()))?;
                        ids.push(parse_id(&id)?);
                        last = Some(id);
                    }
                    if last.is_some() {
                        inner.note_written(run_id, last);
                    }
                    Ok(())
                }
                Some((Value::Int(code), [])) => {
                    inner.note_written(run_id, None);
                    verdict(*code, run_id)
                }
                _ => Err(StoreError::Corrupt("append answer".into())),
            },
            _ => Err(StoreError::Corrupt("append answer".into())),
        }
    }

    async fn keep_input(&self, run_id: &str, messages: &[Message]) -> Result<(), StoreError> {
        let inner = &self.inner;
        let input = crate::encode_input(messages, inner.cfg.max_input_bytes)?;
        let [_, meta, _] = inner.run_keys(run_id);
        let code: i64 = inner
            .script(&inner.scripts.keep_input, &[&meta], &[&input])
            .await?;
        verdict(code, run_id)
    }

    async fn input(&self, run_id: &str) -> Result<Vec<Message>, StoreError> {
        let inner = &self.inner;
        let [_, meta, _] = inner.run_keys(run_id);
        let mut con = inner.conn.clone();
        let input: Option<Vec<u8>> = inner
            .call(
                redis::cmd("HGET")
                    .arg(&meta)
                    .arg("input")
                    .query_async(&mut con),
            )
            .await?;
        match input {
            Some(bytes) => crate::decode_input(run_id, &bytes),
            None => Ok(Vec::new()),
        }
    }

    async fn renew(&self, run_id: &str, owner: &str, lease: Duration) -> Result<(), StoreError> {
        let inner = &self.inner;
        let [log, meta, lease_key] = inner.run_keys(run_id);
        let lease_ms = ms(lease).to_string();
        let keep_ms = (ms(lease) + inner.lost_ms()).to_string();
        let lost_ms = inner.lost_ms().to_string();
        let pointer = inner.run_latest(run_id);
        let mut keys = vec![log.as_str(), meta.as_str(), lease_key.as_str()];
        keys.extend(pointer.as_deref());
        let code: i64 = inner
            .script(
                &inner.scripts.renew,
                &keys,
                &[
                    owner.as_bytes(),
                    lease_ms.as_bytes(),
                    keep_ms.as_bytes(),
                    run_id.as_bytes(),
                    inner.cfg.prefix.as_bytes(),
                    lost_ms.as_bytes(),
                ],
            )
            .await?;
        verdict(code, run_id)
    }

    async fn end(
        &self,
        run_id: &str,
        outcome: RunOutcome,
        retention: Duration,
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        let [log, meta, lease] = inner.run_keys(run_id);
        let retention_ms = ms(retention.max(MIN_RETENTION)).to_string();
        let lost_ms = inner.lost_ms().to_string();
        let pointer = inner.run_latest(run_id);
        let mut keys = vec![log.as_str(), meta.as_str(), lease.as_str()];
        keys.extend(pointer.as_deref());
        let written = inner.written().get(run_id).cloned().unwrap_or_default();
        let args: [&[u8]; 6] = [
            outcome.as_str().as_bytes(),
            retention_ms.as_bytes(),
            run_id.as_bytes(),
            inner.cfg.prefix.as_bytes(),
            lost_ms.as_bytes(),
            written.as_bytes(),
        ];
        let (attempt, code) = inner
            .retried(|attempt| {
                let end = inner.script::<i64>(&inner.scripts.end, &keys, &args);
                async move { end.await.map(|code| (attempt, code)) }
            })
            .await?;
        inner.note_written(run_id, None);
        if code == 1 && attempt > 0 {
            // An earlier try may have ended it, its answer lost: done if so.
            if let Some(st) = inner.status(run_id).await? {
                if st.state == "ended" && st.outcome == outcome.as_str() {
                    return Ok(());
                }
            }
        }
        verdict(code, run_id)
    }

    async fn latest(&self, key: &str) -> Result<Option<RunInfo>, StoreError> {
        let inner = &self.inner;
        let mut con = inner.conn.clone();
        let latest = inner.latest_key(key);
        let lookup = if inner.link.cluster {
            redis::cmd("HGET").arg(&latest).arg(key).to_owned()
        } else {
            redis::cmd("GET").arg(&latest).to_owned()
        };
        let run_id: Option<String> = inner.call(lookup.query_async(&mut con)).await?;
        match run_id {
            Some(run_id) => inner.info(&run_id).await,
            None => Ok(None),
        }
    }

    async fn info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        self.inner.info(run_id).await
    }

    async fn last_id(&self, run_id: &str) -> Result<Option<EventId>, StoreError> {
        let inner = &self.inner;
        let [log, _, _] = inner.run_keys(run_id);
        let mut con = inner.conn.clone();
        // The newest entries, newest first; markers (begin, end, lost) carry
        // no `d` field and are skipped.
        let entries: redis::streams::StreamRangeReply = inner
            .call(
                redis::cmd("XREVRANGE")
                    .arg(&log)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(4)
                    .query_async(&mut con),
            )
            .await?;
        for entry in entries.ids {
            if entry.map.contains_key("d") {
                let id = entry
                    .id
                    .parse::<EventId>()
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    fn read(
        &self,
        run_id: &str,
        after: Option<EventId>,
    ) -> BoxStream<'static, Result<LogItem, StoreError>> {
        let reader = Reader {
            inner: self.inner.clone(),
            run_id: run_id.to_string(),
            after,
            cursor: after.unwrap_or(EventId::ZERO).to_string(),
            checked: false,
            conn: None,
            node: None,
            asking: false,
            redirects: 0,
            read_any: false,
            verify: false,
            failing_since: None,
            block: MIN_BLOCK,
            finished: None,
            pending: VecDeque::new(),
            done: false,
        };
        stream::unfold(reader, |mut r| async move {
            loop {
                if let Some(item) = r.pending.pop_front() {
                    return Some((item, r));
                }
                if r.done {
                    return None;
                }
                match r.fill().await {
                    Ok(()) => {}
                    Err(e) if r.retry(&e).await => {}
                    Err(e) => {
                        r.pending.push_back(Err(e));
                        r.done = true;
                    }
                }
            }
        })
        .boxed()
    }

    async fn request_stop(&self, run_id: &str) -> Result<bool, StoreError> {
        let inner = &self.inner;
        let [log, meta, lease] = inner.run_keys(run_id);
        let code: i64 = inner
            .script(
                &inner.scripts.stop,
                &[&log, &meta, &lease],
                &[
                    inner.lost_ms().to_string().as_bytes(),
                    inner.stop_channel().as_bytes(),
                    run_id.as_bytes(),
                ],
            )
            .await?;
        Ok(code == 1)
    }

    async fn stop_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        self.inner.stop_flag(run_id).await
    }

    async fn wait_stop(&self, run_id: &str) {
        let inner = &self.inner;
        // Follow first, then read the flag: a stop published before we
        // followed is in the flag, one after reaches us on the channel.
        let wait = inner.stops.follow(run_id);
        inner.start_stop_subscriber();
        let Some(flag) = wait.flag.as_ref() else {
            return;
        };
        let check = async {
            let mut delay = Duration::from_millis(100);
            loop {
                match inner.stop_flag(run_id).await {
                    Ok(true) => return,
                    Ok(false) => std::future::pending::<()>().await,
                    // Only while Redis fails; the subscriber re-checks too
                    // once it is back.
                    Err(_) => {
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(5));
                    }
                }
            }
        };
        tokio::select! {
            () = check => {}
            () = flag.wait() => {}
        }
    }

    /// One Redis: answers, and is not a cluster node (where most keys
    /// would answer `MOVED`). Cluster: a node answers and says the cluster
    /// is whole (`cluster_state:ok`: every slot has an owner that is up);
    /// while some slots have none, not ready.
    async fn ping(&self) -> Result<(), StoreError> {
        let inner = &self.inner;
        let mut con = inner.conn.clone();
        if inner.link.cluster {
            let info: String = inner
                .call(redis::cmd("CLUSTER").arg("INFO").query_async(&mut con))
                .await?;
            return match info.lines().find_map(|l| l.strip_prefix("cluster_state:")) {
                Some("ok") => Ok(()),
                _ => Err(StoreError::Unavailable(
                    "redis cluster: some slots have no owner that is up (cluster_state is not ok)"
                        .into(),
                )),
            };
        }
        let info: String = inner
            .call(redis::cmd("INFO").arg("cluster").query_async(&mut con))
            .await?;
        if info.lines().any(|l| l.trim() == "cluster_enabled:1") {
            return Err(StoreError::Config(CLUSTER_NODE.into()));
        }
        Ok(())
    }
}

/// The one subscription of a store to `<p>:stop`: wakes the runs named in
/// its messages; on every (re)subscription first re-reads the `stop` flag of
/// every run waiting, since stops published while it was away reached no
/// one. Ends when the store is dropped (`closed`).
async fn stop_subscriber(
    hub: Weak<StopHub>,
    mut closed: oneshot::Receiver<()>,
    link: Link,
    conn: Conn,
    cfg: RedisConfig,
) {
    let channel = format!("{}:stop", cfg.prefix);
    // On Cluster a `PUBLISH` reaches every node: any seed serves, the next
    // one after a failure.
    let mut attempt = 0usize;
    loop {
        let client = link.seeds.get(attempt % link.seeds.len().max(1)).cloned();
        attempt = attempt.wrapping_add(1);
        let session = async {
            let client = client?;
            let bound = cfg.connect_timeout + cfg.op_timeout;
            let mut pubsub = tokio::time::timeout(bound, client.get_async_pubsub())
                .await
                .ok()?
                .ok()?;
            tokio::time::timeout(cfg.op_timeout, pubsub.subscribe(&channel))
                .await
                .ok()?
                .ok()?;
            Some(pubsub)
        };
        let pubsub = tokio::select! {
            p = session => p,
            _ = &mut closed => return,
        };
        if let Some(pubsub) = pubsub {
            let Some(h) = hub.upgrade() else { return };
            h.subscriptions.fetch_add(1, Ordering::Relaxed);
            let runs = h.followed();
            drop(h);
            if recheck(&hub, &runs, &conn, &cfg).await {
                let (mut sink, mut messages) = pubsub.split();
                loop {
                    tokio::select! {
                        msg = messages.next() => {
                            let Some(msg) = msg else { break };
                            let Some(h) = hub.upgrade() else { return };
                            if let Ok(run_id) = msg.get_payload::<String>() {
                                h.fire(&run_id);
                            }
                        }
                        () = tokio::time::sleep(SUBSCRIPTION_PING) => {
                            let pong = tokio::time::timeout(cfg.op_timeout, sink.ping::<Value>()).await;
                            if !matches!(pong, Ok(Ok(_))) {
                                break;
                            }
                        }
                        _ = &mut closed => return,
                    }
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(RESUBSCRIBE_DELAY) => {}
            _ = &mut closed => return,
        }
    }
}

/// Reads the `stop` flag of `runs` in one round trip and wakes those
/// stopped; false when Redis did not answer (subscribe again).
async fn recheck(hub: &Weak<StopHub>, runs: &[String], conn: &Conn, cfg: &RedisConfig) -> bool {
    if runs.is_empty() {
        return true;
    }
    let mut con = conn.clone();
    let flags: Vec<Option<String>> = if matches!(conn, Conn::Cluster(_)) {
        // The runs' meta keys are in many slots: one read each, together.
        let reads = runs.iter().map(|run_id| {
            let [_, meta, _] = run_keys(&cfg.prefix, run_id, true);
            let mut con = con.clone();
            async move {
                redis::cmd("HGET")
                    .arg(meta)
                    .arg("stop")
                    .query_async(&mut con)
                    .await
            }
        });
        let all = futures_util::future::try_join_all(reads);
        match tokio::time::timeout(cfg.op_timeout, all).await {
            Ok(Ok(flags)) => flags,
            _ => return false,
        }
    } else {
        let mut pipe = redis::pipe();
        for run_id in runs {
            let [_, meta, _] = run_keys(&cfg.prefix, run_id, false);
            pipe.cmd("HGET").arg(meta).arg("stop");
        }
        match tokio::time::timeout(cfg.op_timeout, pipe.query_async(&mut con)).await {
            Ok(Ok(flags)) => flags,
            _ => return false,
        }
    };
    let Some(h) = hub.upgrade() else { return true };
    for (run_id, flag) in runs.iter().zip(flags) {
        if flag.is_some() {
            h.fire(run_id);
        }
    }
    true
}

struct Reader {
    inner: Arc<Inner>,
    run_id: String,
    after: Option<EventId>,
    /// The last stream id read (or asked to start after).
    cursor: String,
    /// Whether the run was looked at (the first fill).
    checked: bool,
    /// Opened on the first fill, again after a redirection or a failure.
    conn: Option<MultiplexedConnection>,
    /// Cluster: the node that owns the run's slot, as a `MOVED` or `ASK`
    /// named it.
    node: Option<String>,
    /// The next read follows an `ASK` (a slot being migrated).
    asking: bool,
    /// Redirections since the last answer, bounded.
    redirects: u32,
    /// The cursor is an entry this reader read (not the id it was asked
    /// to start after).
    read_any: bool,
    /// Reconnected since the last read: check the log still holds the
    /// cursor before reading on.
    verify: bool,
    /// Cluster: since when reads have failed (a node down, a failover).
    failing_since: Option<tokio::time::Instant>,
    block: Duration,
    /// Set once the run was seen ended or lost: one more non-blocking read
    /// drains what came before the marker, then this is reported.
    finished: Option<LogItem>,
    pending: VecDeque<Result<LogItem, StoreError>>,
    done: bool,
}

impl Reader {
    /// Checks the run and adopts its lease; on the first call also reports
    /// truncation.
    async fn check(&mut self, first: bool) -> Result<(), StoreError> {
        let Some(st) = self.inner.status(&self.run_id).await? else {
            return Err(StoreError::UnknownRun(self.run_id.clone()));
        };
        self.block = (st.lease / 3).clamp(MIN_BLOCK, MAX_BLOCK);
        if first {
            let asked_for_dropped = match (st.trimmed, self.after) {
                (Some(t), Some(a)) => t > a,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if asked_for_dropped {
                self.pending.push_back(Ok(LogItem::Truncated));
            }
        }
        match st.run_status()? {
            RunStatus::Running => {}
            RunStatus::Ended(o) => self.finished = Some(LogItem::End(o)),
            RunStatus::Lost => self.finished = Some(LogItem::Lost),
        }
        Ok(())
    }

    /// On Cluster, whether to try again after `e`: while a node is down
    /// or its slots move to a promoted replica, for about four leases (a
    /// block is a third of one), from the last id read, on a new
    /// connection. Ids survive the move, so nothing is lost or repeated.
    async fn retry(&mut self, e: &StoreError) -> bool {
        if !self.inner.link.cluster || !e.is_unavailable() {
            return false;
        }
        let now = tokio::time::Instant::now();
        let since = *self.failing_since.get_or_insert(now);
        let window = (self.block * 12).max(self.inner.cfg.op_timeout);
        if now.duration_since(since) >= window {
            return false;
        }
        self.conn = None;
        self.node = None;
        // A new try: the slot may have an owner since (the redirections
        // counted are those of one try, not of the whole outage).
        self.redirects = 0;
        self.verify = self.read_any;
        tokio::time::sleep(RETRY_DELAY).await;
        true
    }

    /// Sends `cmd` on the reader's connection (to the slot's owner, once a
    /// redirection named it): `None` when redirected (send again).
    async fn send<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
        bound: Duration,
    ) -> Result<Option<T>, StoreError> {
        if self.conn.is_none() {
            let node = self.node.as_deref();
            self.conn = Some(self.inner.blocking_connection(node).await?);
        }
        let Some(conn) = self.conn.as_mut() else {
            return Ok(None);
        };
        let asking = std::mem::take(&mut self.asking);
        let sent = async {
            if asking {
                redis::cmd("ASKING").query_async::<()>(conn).await?;
            }
            cmd.query_async(conn).await
        };
        match tokio::time::timeout(bound, sent).await {
            Ok(Ok(r)) => Ok(Some(r)),
            Ok(Err(e)) => match e.redirect_node() {
                // Cluster: the slot is served elsewhere (failover,
                // resharding): read there from the same id.
                Some((node, _)) if self.redirects < MAX_REDIRECTS => {
                    self.redirects += 1;
                    self.asking = e.kind() == ErrorKind::Server(ServerErrorKind::Ask);
                    self.node = Some(node.to_string());
                    self.conn = None;
                    // A slot on the move (ASK) has its keys whole on
                    // either node; the next command must be the read.
                    self.verify = self.read_any && !self.asking;
                    Ok(None)
                }
                _ => Err(map_err(e, self.inner.link.cluster)),
            },
            Err(_) => Err(StoreError::Unavailable(format!(
                "redis did not answer within {bound:?}"
            ))),
        }
    }

    /// After a reconnection: whether the log still holds the last entry
    /// this reader got. A failover that promoted a replica which missed
    /// entries the reader had read from the old primary leaves a log
    /// without them; a writer's retried batch would then come again under
    /// new ids, a repeat for this reader and a different stream from what a
    /// client resuming gets. `None` when redirected.
    async fn cursor_kept(&mut self, log: &str) -> Result<Option<bool>, StoreError> {
        let mut cmd = redis::cmd("XREVRANGE");
        cmd.arg(log).arg(&self.cursor).arg("-").arg("COUNT").arg(1);
        let bound = self.inner.cfg.op_timeout;
        let Some(reply) = self
            .send::<redis::streams::StreamRangeReply>(&cmd, bound)
            .await?
        else {
            return Ok(None);
        };
        // The newest entry at or before the cursor: the cursor itself, or
        // nothing at all (trimmed away, the reader being behind the caps),
        // else it is gone from the middle of the log.
        Ok(Some(reply.ids.first().is_none_or(|e| e.id == self.cursor)))
    }

    /// Queues what is there to yield; at most one blocking read.
    async fn fill(&mut self) -> Result<(), StoreError> {
        if !self.checked {
            self.check(true).await?;
            self.checked = true;
        }
        let [log, _, _] = self.inner.run_keys(&self.run_id);
        if self.verify {
            match self.cursor_kept(&log).await? {
                None => return Ok(()),
                Some(true) => self.verify = false,
                Some(false) => {
                    self.pending.push_back(Ok(LogItem::Lost));
                    self.done = true;
                    return Ok(());
                }
            }
        }
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(READ_BATCH);
        let blocking = self.finished.is_none();
        if blocking {
            cmd.arg("BLOCK").arg(self.block.as_millis() as u64);
        }
        cmd.arg("STREAMS").arg(&log).arg(&self.cursor);
        let bound = self.block + self.inner.cfg.op_timeout;
        let Some(reply) = self.send::<Option<StreamReadReply>>(&cmd, bound).await? else {
            return Ok(());
        };
        self.redirects = 0;
        self.failing_since = None;
        let entries: Vec<_> = reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .collect();
        if entries.is_empty() {
            if let Some(item) = self.finished.take() {
                // Drained: the marker itself was dropped or never written.
                self.pending.push_back(Ok(item));
                self.done = true;
                return Ok(());
            }
            // A quiet block: the lease decides whether to keep waiting.
            return self.check(false).await;
        }
        for entry in entries {
            let id = parse_id(&entry.id)?;
            self.cursor = entry.id.clone();
            self.read_any = true;
            if let Some(v) = entry.map.get("d") {
                let bytes = |v: &Value| match v {
                    Value::BulkString(b) => Ok(Bytes::from(b.clone())),
                    _ => Err(StoreError::Corrupt(format!("entry {id}"))),
                };
                let data = bytes(v)?;
                let core = entry.map.get("c").map(bytes).transpose()?;
                self.pending
                    .push_back(Ok(LogItem::Event { id, data, core }));
            } else if let Some(v) = entry.map.get("e") {
                let outcome = text(v)
                    .as_deref()
                    .and_then(RunOutcome::parse)
                    .ok_or_else(|| StoreError::Corrupt(format!("end marker {id}")))?;
                self.pending.push_back(Ok(LogItem::End(outcome)));
                self.done = true;
                return Ok(());
            } else if entry.map.contains_key("l") {
                self.pending.push_back(Ok(LogItem::Lost));
                self.done = true;
                return Ok(());
            }
        }
        Ok(())
    }
}
