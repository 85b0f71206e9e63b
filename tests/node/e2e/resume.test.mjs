// Resumable streams and shared state across two gateway processes on one
// Redis (Debian's redis-server, installed by tests/run.sh):
// - a Vercel chat (the `ai` package's AbstractChat + DefaultChatTransport,
//   its own resume path) starts a long answer through instance A, drops it,
//   resumes through instance B: every event once, the whole message;
// - an AG-UI client does the same with Last-Event-ID, and without it gets a
//   snapshot that @ag-ui/client's verification accepts;
// - an AG-Kit conversation's first turn goes through A, its second through B,
//   and the agent (official Python SDK) receives the full history;
// - A killed mid-run: B's reader gets the dialect's error within the lease;
// - Redis stopped and restarted: 503 and /readyz failing while it is down,
//   the running stream unharmed, service back when Redis is.
// - a stop asked of B ends the stream A proxies;
// - nginx (Debian's, with the configuration of docs/deploy.md) in front of
//   A and B, round robin: a Vercel chat sent, dropped and resumed through
//   it, whichever instance each request lands on.
// resume-cluster.test.mjs runs all of it again on a Redis Cluster (three
// primaries, three replicas; backend = "redis-cluster").

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DefaultChatTransport } from 'ai';
import { HttpAgent } from '@ag-ui/client';
import { Chat } from './lib/chat.mjs';
import { redisCli, startRedis as startRedis1 } from './lib/redis.mjs';
import { Agent, BABELGATE, PYTHON, REPO_ROOT, canListen, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';

delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

const HANG_GUARD = { timeout: 90_000 };
const LEASE_MS = 1500;
// The demo agent's "long" answer: 200 deltas "0 " .. "199 ".
const LONG_TEXT = Array.from({ length: 200 }, (_, i) => `${i} `).join('');

const CLUSTER = process.env.BABELGATE_E2E_STORE === 'redis-cluster';
const s = {};
const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', CLUSTER ? 'resume-cluster' : 'resume');

const cli = (port, ...args) => redisCli(port, args);

/** A port whose cluster bus port (+10000) is free too. */
async function clusterPort() {
  for (;;) {
    const port = await freePort();
    if (port < 55_000 && await canListen(port + 10_000)) return port;
  }
}

/** One Redis, or six cluster nodes (created once; started again from their nodes.conf, data empty). */
async function startRedis() {
  if (!CLUSTER) {
    // The first start chooses the port; a restart takes the same one back.
    const { port, proc } = await startRedis1({ logDir, port: s.redisPorts[0] });
    s.redisPorts = [port];
    s.redis = [proc];
    return;
  }
  s.redis = [];
  for (const port of s.redisPorts) {
    const dir = path.join(logDir, `node-${port}`);
    fs.mkdirSync(dir, { recursive: true });
    const args = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1000', '--dir', dir];
    s.redis.push((await startRedis1({ logDir, name: `redis-${port}`, port, args })).proc);
  }
  if (!s.clusterCreated) {
    execFileSync('redis-cli', ['--cluster', 'create', ...s.redisPorts.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'], { stdio: 'pipe', timeout: 60_000 });
    s.clusterCreated = true;
  }
  for (let i = 0; i < 300; i++) {
    if (s.redisPorts.every((p) => { try { return cli(p, 'cluster', 'info').includes('cluster_state:ok'); } catch { return false; } })) return;
    await sleep(100);
  }
  throw new Error('the cluster did not reach cluster_state:ok');
}

const stopRedis = () => Promise.all((s.redis ?? []).map(stopProc));

function nginxPath() {
  for (const p of ['/usr/sbin/nginx', '/usr/local/sbin/nginx']) if (fs.existsSync(p)) return p;
  throw new Error('nginx is not installed: run ./tests/run.sh, which installs it with apt-get');
}

/** nginx with docs/deploy.md's configuration, its ports replaced: `listen` ours, the two servers A and B. */
async function startNginx() {
  const doc = fs.readFileSync(path.join(REPO_ROOT, 'docs', 'deploy.md'), 'utf8');
  const block = doc.match(/```nginx\n([\s\S]*?)```/);
  assert.ok(block, 'docs/deploy.md has an nginx block');
  const port = await freePort();
  const servers = [s.a, s.b].map((g) => new URL(g.base).port);
  let n = 0;
  const conf = block[1]
    .replace(/listen 127\.0\.0\.1:\d+;/, `listen 127.0.0.1:${port};`)
    .replace(/server 127\.0\.0\.1:\d+;/g, () => `server 127.0.0.1:${servers[n++]};`);
  assert.equal(n, 2, 'two upstream servers in the example');
  const dir = path.join(logDir, 'nginx');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'nginx.conf');
  fs.writeFileSync(file, conf);
  s.nginx = launch('nginx', nginxPath(), ['-p', dir, '-c', file, '-e', path.join(dir, 'error.log'), '-g', `daemon off; pid ${path.join(dir, 'nginx.pid')};`], logDir);
  s.lb = `http://127.0.0.1:${port}`;
  await waitReady(s.nginx, `${s.lb}/readyz`);
}

function gatewayToml(port) {
  const route = (p, client, upstream, extra = '') =>
    `[[routes]]\npath = "${p}"\nclient = "${client}"\nupstream = "${upstream}"\nupstream_protocol = "ag-ui"\non_disconnect = "keep"\nidle_timeout_ms = 60000\n${extra}\n`;
  return [
    `[server]\nlisten = "127.0.0.1:${port}"\nshutdown_grace_ms = 500\n`,
    CLUSTER
      // Seeds: a subset of the nodes; the client finds the rest.
      ? `[store]\nbackend = "redis-cluster"\nurls = [${s.redisPorts.slice(0, 2).map((p) => `"redis://127.0.0.1:${p}"`).join(', ')}]\nlease_ms = ${LEASE_MS}\n`
      : `[store]\nbackend = "redis"\nurl = "redis://127.0.0.1:${s.redisPorts[0]}"\nlease_ms = ${LEASE_MS}\n`,
    route('/chat', 'vercel', s.demo.url),
    route('/agui', 'ag-ui', s.demo.url),
    route('/agkit', 'agkit', s.py.url),
  ].join('\n');
}

async function startGateway(name) {
  const port = await freePort();
  const config = path.join(REPO_ROOT, 'target', 'e2e', `resume${CLUSTER ? '-cluster' : ''}-${name}.gateway.toml`);
  fs.writeFileSync(config, gatewayToml(port));
  const proc = launch(`babelgate-${name}`, BABELGATE, ['serve', '--config', config], logDir);
  const base = `http://127.0.0.1:${port}`;
  await waitReady(proc, `${base}/readyz`);
  return { proc, base };
}

before(async () => {
  fs.rmSync(logDir, { recursive: true, force: true });
  fs.mkdirSync(logDir, { recursive: true });
  fs.mkdirSync(path.join(REPO_ROOT, 'target', 'e2e'), { recursive: true });
  const [demoPort, pyPort] = await Promise.all([freePort(), freePort()]);
  s.redisPorts = [];
  if (CLUSTER) for (let i = 0; i < 6; i++) s.redisPorts.push(await clusterPort());
  await startRedis();
  // A scripted upstream slow enough to interrupt (20 ms between events).
  const demo = launch('demo-agent', BABELGATE, ['demo-agent', '--protocol', 'ag-ui', '--listen', `127.0.0.1:${demoPort}`, '--delay-ms', '20'], logDir);
  const py = launch('agui-agent', PYTHON, [path.join(REPO_ROOT, 'tests/python/agui_agent.py'), '--port', String(pyPort)], logDir);
  s.procs = [demo, py];
  s.demo = new Agent(`http://127.0.0.1:${demoPort}`);
  s.py = new Agent(`http://127.0.0.1:${pyPort}`);
  // The demo agent answers POSTs only: wait for its port with a POST.
  await waitPost(`${s.demo.url}`);
  await waitReady(py, `${s.py.base}/healthz`);
  s.a = await startGateway('a');
  s.b = await startGateway('b');
  await startNginx();
});

after(async () => {
  if (s.nginx) await stopProc(s.nginx);
  await Promise.all([s.a, s.b].filter(Boolean).map((g) => stopProc(g.proc)));
  await Promise.all((s.procs ?? []).map(stopProc));
  await stopRedis();
});

async function waitPost(url) {
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(url, { method: 'POST', body: '{}' });
      await r.body?.cancel();
      return;
    } catch {
      await sleep(50);
    }
  }
  throw new Error(`${url} never answered`);
}

/** SSE events of a byte stream: [{ id, data }]. */
function sseEvents(text) {
  return text
    .split('\n\n')
    .filter((block) => block.trim() && !block.startsWith(':'))
    .map((block) => {
      const ev = { id: undefined, data: '' };
      for (const line of block.split('\n')) {
        if (line.startsWith('id:')) ev.id = line.slice(3).trim();
        if (line.startsWith('data:')) ev.data += line.slice(5).trim();
      }
      return ev;
    });
}

/** Reads a response body until `enough(textSoFar)` holds, then drops it. */
async function readUntil(res, enough) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  while (!enough(text)) {
    const { done, value } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
  }
  await reader.cancel();
  // Whole events only.
  return text.slice(0, text.lastIndexOf('\n\n') + 2);
}

function runInput(threadId, text) {
  return {
    threadId, runId: randomUUID(), state: {}, tools: [], context: [], forwardedProps: {},
    messages: [{ id: randomUUID(), role: 'user', content: text }],
  };
}

const post = (url, body) => fetch(url, {
  method: 'POST',
  headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
  body: JSON.stringify(body),
});

/** An HttpAgent that reconnects with GET `{route}/{threadId}/stream`. */
class ReconnectingAgent extends HttpAgent {
  constructor(opts, lastEventId) {
    super(opts);
    this.lastEventId = lastEventId;
  }

  requestInit() {
    const headers = { accept: 'text/event-stream' };
    if (this.lastEventId) headers['last-event-id'] = this.lastEventId;
    return { method: 'GET', headers, signal: this.abortController.signal };
  }
}

async function runClient(agent) {
  const warnings = [];
  const saved = console.warn;
  console.warn = (...a) => warnings.push(a.map(String).join(' '));
  const seen = { events: [] };
  try {
    await agent.runAgent({}, {
      onEvent: ({ event }) => seen.events.push(event),
      onRunErrorEvent: ({ event }) => { seen.runError = event; },
    });
  } catch (e) {
    seen.failure = e;
  } finally {
    console.warn = saved;
  }
  return { ...seen, warnings };
}

test('Vercel: a long answer started through A, dropped, resumed through B arrives whole, each event once', HANG_GUARD, async () => {
  const id = `chat-${randomUUID()}`;
  const chatA = new Chat({ id, transport: new DefaultChatTransport({ api: `${s.a.base}/chat` }) });
  const sending = chatA.sendMessage({ text: 'a long answer please' });
  // Let some of the answer arrive, then close the tab.
  for (let i = 0; i < 400; i++) {
    const last = chatA.messages.at(-1);
    if (last?.role === 'assistant' && last.parts.some((p) => p.type === 'text' && p.text.length > 40)) break;
    await sleep(10);
  }
  const partial = chatA.messages.at(-1).parts.find((p) => p.type === 'text')?.text ?? '';
  assert.ok(partial.length > 0 && partial.length < LONG_TEXT.length, `partial: ${partial.length}`);
  await chatA.stop();
  await sending.catch(() => {});

  // A new page on the other instance: the user message is what was persisted.
  const chatB = new Chat({ id, messages: [chatA.messages[0]], transport: new DefaultChatTransport({ api: `${s.b.base}/chat` }) });
  await chatB.resumeStream();
  assert.equal(chatB.status, 'ready', String(chatB.error));
  const answer = chatB.messages.at(-1);
  assert.equal(answer.role, 'assistant');
  const text = answer.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  assert.equal(text, LONG_TEXT, 'the whole message, every delta once');
  // Nothing runs any more: the next page load gets 204 and changes nothing.
  const chatC = new Chat({ id, messages: chatB.messages, transport: new DefaultChatTransport({ api: `${s.a.base}/chat` }) });
  await chatC.resumeStream();
  assert.equal(chatC.messages.length, 2);
});

test('AG-UI: Last-Event-ID on the other instance gives exactly the missed events; the whole run passes @ag-ui/client', HANG_GUARD, async () => {
  const threadId = randomUUID();
  const first = await readUntil(await post(`${s.a.base}/agui`, runInput(threadId, 'long one')), (t) => (t.match(/TEXT_MESSAGE_CONTENT/g) ?? []).length >= 30);
  const head = sseEvents(first);
  const lastId = head.at(-1).id;
  assert.ok(lastId, 'events carry ids');
  await sleep(300);
  const res = await fetch(`${s.b.base}/agui/${threadId}/stream`, { headers: { 'last-event-id': lastId, accept: 'text/event-stream' } });
  assert.equal(res.status, 200);
  const rest = await res.text();
  const tail = sseEvents(rest);
  const ids = [...head, ...tail].map((e) => e.id);
  assert.equal(new Set(ids).size, ids.length, 'no event twice');
  // The two halves make one run the real client accepts and assembles.
  const agent = new HttpAgent({
    url: 'http://gateway.invalid/agui',
    threadId,
    fetch: async () => new Response(first + rest, { status: 200, headers: { 'content-type': 'text/event-stream' } }),
  });
  const r = await runClient(agent);
  assert.equal(r.failure, undefined, String(r.failure));
  assert.deepEqual(r.warnings, []);
  assert.equal(agent.messages.at(-1).content, LONG_TEXT);
});

test('AG-UI: reconnecting without Last-Event-ID gets a snapshot and the tail, which @ag-ui/client verifies', HANG_GUARD, async () => {
  const threadId = randomUUID();
  await readUntil(await post(`${s.a.base}/agui`, runInput(threadId, 'long one')), (t) => (t.match(/TEXT_MESSAGE_CONTENT/g) ?? []).length >= 20);
  const agent = new ReconnectingAgent({ url: `${s.b.base}/agui/${threadId}/stream`, threadId });
  const r = await runClient(agent);
  assert.equal(r.failure, undefined, String(r.failure?.stack ?? r.failure));
  assert.deepEqual(r.warnings, []);
  const types = r.events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 3), ['RUN_STARTED', 'MESSAGES_SNAPSHOT', 'TEXT_MESSAGE_START']);
  assert.equal(types.at(-1), 'RUN_FINISHED');
  const [user, answer] = agent.messages;
  assert.equal(user.role, 'user');
  assert.equal(user.content, 'long one');
  assert.equal(answer.content, LONG_TEXT);
});

test('AG-Kit: the first turn through A, the second through B; the agent gets the full history', HANG_GUARD, async () => {
  await s.py.clear();
  const conversationId = randomUUID();
  const turn = async (base, content) => {
    const res = await post(`${base}/agkit`, { messages: [{ role: 'user', content }], conversationId });
    assert.equal(res.status, 200);
    return res.text();
  };
  await turn(s.a.base, 'first question');
  await turn(s.b.base, 'second question');
  const requests = await s.py.requests();
  assert.equal(requests.length, 2);
  const second = requests[1].body.messages.map((m) => [m.role, typeof m.content === 'string' ? m.content : JSON.stringify(m.content)]);
  assert.deepEqual(second.map(([role]) => role), ['user', 'assistant', 'user'], JSON.stringify(second));
  assert.equal(second[0][1], 'first question');
  assert.equal(second[2][1], 'second question');
  assert.ok(second[1][1].length > 0, 'the assistant answer is in the history');
});

test('A killed mid-run: readers on B get the error within the lease', HANG_GUARD, async () => {
  const victim = await startGateway('victim');
  const threadId = randomUUID();
  const first = await readUntil(await post(`${victim.base}/agui`, runInput(threadId, 'long one')), (t) => t.includes('TEXT_MESSAGE_CONTENT'));
  const lastId = sseEvents(first).at(-1).id;
  const following = fetch(`${s.b.base}/agui/${threadId}/stream`, { headers: { 'last-event-id': lastId } }).then((r) => r.text());
  await sleep(200);
  victim.proc.child.kill('SIGKILL');
  const killedAt = Date.now();
  const text = await following;
  const waited = Date.now() - killedAt;
  const last = JSON.parse(sseEvents(text).at(-1).data);
  assert.equal(last.type, 'RUN_ERROR', text.slice(-300));
  assert.equal(last.code, 'run_lost');
  // Generous bound (2-core CI): the point is that it ends, not how fast.
  assert.ok(waited < LEASE_MS * 10, `ended after ${waited} ms`);
});

test('Redis stopped and restarted: 503 while down, the running stream unharmed, service back after', HANG_GUARD, async () => {
  const threadId = randomUUID();
  const running = await post(`${s.a.base}/agui`, runInput(threadId, 'long one'));
  const reader = running.text();
  await sleep(200);
  await stopRedis();

  // Noticed at the latest when the dead connection is next used.
  let down = 0;
  for (let i = 0; i < 50 && down !== 503; i++) {
    down = (await fetch(`${s.a.base}/readyz`)).status;
    if (down !== 503) await sleep(100);
  }
  assert.equal(down, 503, '/readyz fails while Redis is down');
  // Routes that need the store answer 503 store_unavailable within 5 s
  // (bounded retries, never a wait on the dead nodes): an AG-Kit turn (its
  // history) and a resume.
  let t = Date.now();
  const agkit = await post(`${s.a.base}/agkit`, { messages: [{ role: 'user', content: 'hi' }], conversationId: randomUUID() });
  const agkitMs = Date.now() - t;
  assert.equal(agkit.status, 503);
  const body = await agkit.json();
  assert.equal(body.error.code, 'store_unavailable');
  t = Date.now();
  const resume = await fetch(`${s.b.base}/agui/${threadId}/stream`, { headers: { 'last-event-id': '1-0' } });
  const resumeMs = Date.now() - t;
  assert.equal(resume.status, 503);
  assert.equal((await resume.json()).error.code, 'store_unavailable');
  console.log(`store down: AG-Kit 503 in ${agkitMs} ms, resume 503 in ${resumeMs} ms`);
  assert.ok(agkitMs < 5000 && resumeMs < 5000, `${agkitMs} ms, ${resumeMs} ms`);

  // The stream that was running when Redis went away still arrives whole.
  const text = await reader;
  const events = sseEvents(text).map((e) => JSON.parse(e.data));
  assert.equal(events.at(-1).type, 'RUN_FINISHED');
  assert.equal(events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join(''), LONG_TEXT);

  const back = Date.now();
  await startRedis();
  // Each instance is ready again once its connection is back (a load
  // balancer sends traffic by /readyz), without a restart, within 15 s of
  // the store's return (on Cluster: the nodes from their nodes.conf, data
  // empty).
  for (const gw of [s.a, s.b]) {
    let status = 0;
    while (status !== 200 && Date.now() - back < 15_000) {
      status = (await fetch(`${gw.base}/readyz`)).status;
      if (status !== 200) await sleep(100);
    }
    assert.equal(status, 200, 'ready again');
  }
  const again = await post(`${s.b.base}/agkit`, { messages: [{ role: 'user', content: 'hi' }], conversationId: randomUUID() });
  assert.equal(again.status, 200);
  await again.text();
  console.log(`store back: both instances ready and serving ${Date.now() - back} ms after it`);
  assert.ok(Date.now() - back < 15_000, `${Date.now() - back} ms`);
});

test('A stop asked of B ends the stream A proxies with the dialect\'s error', HANG_GUARD, async () => {
  const threadId = randomUUID();
  const res = await post(`${s.a.base}/agui`, runInput(threadId, 'long one'));
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  while (!text.includes('TEXT_MESSAGE_CONTENT')) {
    const { done, value } = await reader.read();
    assert.ok(!done, 'the stream ended before any text');
    text += dec.decode(value, { stream: true });
  }
  const stop = await fetch(`${s.b.base}/agui/${threadId}/stop`, { method: 'POST' });
  assert.equal(stop.status, 202);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
  }
  const events = sseEvents(text).map((e) => JSON.parse(e.data));
  const last = events.at(-1);
  assert.equal(last.type, 'RUN_ERROR', JSON.stringify(last));
  assert.equal(last.code, 'stopped');
  const deltas = events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join('');
  assert.ok(deltas.length < LONG_TEXT.length, 'stopped before the end of the answer');
});

test('Through nginx (docs/deploy.md): a Vercel chat sent, dropped and resumed through the balancer arrives whole', HANG_GUARD, async () => {
  const id = `chat-${randomUUID()}`;
  const transport = () => new DefaultChatTransport({ api: `${s.lb}/chat` });
  const chatA = new Chat({ id, transport: transport() });
  const sending = chatA.sendMessage({ text: 'a long answer please' });
  // Unbuffered: part of the answer arrives while it is still being written.
  for (let i = 0; i < 400; i++) {
    const last = chatA.messages.at(-1);
    if (last?.role === 'assistant' && last.parts.some((p) => p.type === 'text' && p.text.length > 40)) break;
    await sleep(10);
  }
  const partial = chatA.messages.at(-1).parts.find((p) => p.type === 'text')?.text ?? '';
  assert.ok(partial.length > 0 && partial.length < LONG_TEXT.length, `partial: ${partial.length}`);
  await chatA.stop();
  await sending.catch(() => {});
  // Round robin sends the next requests to either instance: no stickiness.
  const chatB = new Chat({ id, messages: [chatA.messages[0]], transport: transport() });
  await chatB.resumeStream();
  assert.equal(chatB.status, 'ready', String(chatB.error));
  const text = chatB.messages.at(-1).parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  assert.equal(text, LONG_TEXT, 'the whole message, every delta once');
});
