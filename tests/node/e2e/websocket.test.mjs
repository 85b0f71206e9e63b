// The WebSocket transport (docs/transports.md) with the real `ws` package:
// as a client of every client dialect in front of the demo agent (the same
// events as over SSE), as an upstream of every dialect (replaying the
// fixtures, one event a message) behind an SSE and a WebSocket client, a
// client close that cancels the upstream, and the bad-input cases.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { decode } from '@ag-ui/proto';
import { runBody, sseData } from './lib/adversary.mjs';
import { aguiContent, contentOf } from './lib/content.mjs';
import { BABELGATE, REPO_ROOT, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';

const HANG_GUARD = { timeout: 60_000 };
const DIALECTS = ['ag-ui', 'hai', 'vercel', 'agkit'];
// The dialect each upstream's events are translated into (a real
// translation, not a passthrough).
const CLIENT_OF = { 'ag-ui': 'vercel', hai: 'ag-ui', vercel: 'ag-ui', agkit: 'ag-ui' };
const MAX_BODY = 4096;

let gatewayProc;
let demoProc;
let gateway;
let wsGateway;
let upstream; // the Node ws + HTTP fixture server
let mute; // a TCP server that never answers
let demoUrl; // the demo AG-UI agent, asked straight for what it says
const seen = { closes: [], requests: [] };

const fixture = (dialect) =>
  sseData(fs.readFileSync(path.join(REPO_ROOT, 'tests/fixtures', dialect, 'chat.sse'), 'utf8'));

/** One server, two faces: `/ws/<dialect>` replays a fixture one event a
 *  message; `/sse/<dialect>` answers the same fixture as SSE; `/ws/slow`
 *  sends one event and waits; `/ws/binary` sends a binary message. */
async function startUpstream() {
  const server = http.createServer((req, res) => {
    const m = /^\/sse\/([a-z-]+)$/.exec(req.url);
    if (!m) return res.writeHead(404).end();
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(fixture(m[1]).map((d) => `data: ${d}\n\n`).join(''));
    });
  });
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    if (req.url === '/ws/refuse') return socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  wss.on('connection', (sock, req) => {
    const name = req.url.replace(/^\/ws\//, '');
    sock.once('message', (data, isBinary) => {
      seen.requests.push({ name, isBinary, body: data.toString(), headers: req.headers });
      if (name === 'abort') {
        sock.send(fixture('ag-ui')[0]);
        sock.close(4000, 'gave up');
        return;
      }
      if (name === 'slow') {
        sock.send(fixture('ag-ui')[0]);
        // Tagged with the run's thread: each test waits for its own close.
        const thread = JSON.parse(data.toString()).threadId;
        sock.on('close', (code) => seen.closes.push({ name, code, thread }));
        return;
      }
      if (name === 'binary') {
        sock.send(fixture('ag-ui')[0]);
        sock.send(Buffer.from([0, 0, 0, 1, 8]), { binary: true });
        return;
      }
      if (name === 'cut') {
        // Two events, then a normal close: the run never finished.
        for (const d of fixture('ag-ui').slice(0, 2)) sock.send(d);
        sock.close(1000);
        return;
      }
      for (const d of fixture(name)) sock.send(d);
      sock.close(1000);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, wss, base: `127.0.0.1:${server.address().port}` };
}

const toml = (s) => JSON.stringify(s);
const route = (p, client, up, upProto, extra = '') =>
  `[[routes]]\npath = ${toml(p)}\nclient = ${toml(client)}\nupstream = ${toml(up)}\nupstream_protocol = ${toml(upProto)}\nidle_timeout_ms = 60000\n${extra}\n`;

before(async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'websocket');
  fs.mkdirSync(logDir, { recursive: true });
  upstream = await startUpstream();
  const [gwPort, demoPort] = [await freePort(), await freePort()];
  demoProc = launch('demo-agent', BABELGATE, ['demo-agent', '--protocol', 'ag-ui', '--listen', `127.0.0.1:${demoPort}`, '--delay-ms', '1'], logDir);
  const demo = `http://127.0.0.1:${demoPort}/agent`;
  demoUrl = demo;
  const routes = [];
  for (const d of DIALECTS) routes.push(route(`/demo/${d}`, d, demo, 'ag-ui'));
  for (const d of DIALECTS) {
    routes.push(route(`/ws-up/${d}`, CLIENT_OF[d], `ws://${upstream.base}/ws/${d}`, d));
    routes.push(route(`/sse-up/${d}`, CLIENT_OF[d], `http://${upstream.base}/sse/${d}`, d));
  }
  for (const n of ['slow', 'binary', 'cut', 'abort', 'refuse']) routes.push(route(`/ws-up/${n}`, 'ag-ui', `ws://${upstream.base}/ws/${n}`, 'ag-ui'));
  routes.push(route('/ws-up/down', 'ag-ui', `ws://127.0.0.1:${await freePort()}/ws`, 'ag-ui'));
  // Accepts and never answers the handshake.
  mute = net.createServer((sock) => sock.on('error', () => {}));
  await new Promise((r) => mute.listen(0, '127.0.0.1', r));
  routes.push(route('/ws-up/mute', 'ag-ui', `ws://127.0.0.1:${mute.address().port}/ws`, 'ag-ui', 'connect_timeout_ms = 200\nresponse_timeout_ms = 300'));
  routes.push(route('/ws-up/headers', 'ag-ui', `ws://${upstream.base}/ws/ag-ui`, 'ag-ui', 'upstream_headers = { x-up = "yes" }\nforward_headers = ["x-user-id"]'));
  routes.push(route('/beat', 'ag-ui', `ws://${upstream.base}/ws/slow`, 'ag-ui', 'heartbeat_ms = 200'));
  process.env.BABELGATE_WS_TEST_KEY = 'k-ws-test';
  routes.push(route('/auth', 'ag-ui', demo, 'ag-ui', '[routes.auth]\nbearer_env = ["BABELGATE_WS_TEST_KEY"]'));
  routes.push(route('/small', 'ag-ui', demo, 'ag-ui', `max_body_bytes = ${MAX_BODY}`));
  routes.push(route('/cors', 'ag-ui', demo, 'ag-ui', '[routes.cors]\nallow_origins = ["https://app.example"]'));
  const config = path.join(logDir, 'websocket.gateway.toml');
  fs.writeFileSync(config, `[server]\nlisten = ${toml(`127.0.0.1:${gwPort}`)}\nrequest_read_timeout_ms = 1500\n\n${routes.join('\n')}`);
  gatewayProc = launch('babelgate', BABELGATE, ['serve', '--config', config], logDir);
  gateway = `http://127.0.0.1:${gwPort}`;
  wsGateway = `ws://127.0.0.1:${gwPort}`;
  await waitReady(gatewayProc, `${gateway}/healthz`);
  // The demo agent answers only POST: any HTTP answer means it is up.
  for (let up = false; !up; ) {
    if (demoProc.exited) throw new Error(`demo agent exited: ${JSON.stringify(demoProc.exited)}`);
    up = await fetch(demo).then(() => true, () => false);
    if (!up) await new Promise((r) => setTimeout(r, 50));
  }
});

after(async () => {
  if (gatewayProc) await stopProc(gatewayProc);
  if (demoProc) await stopProc(demoProc);
  upstream?.wss.close();
  upstream?.server.close();
  mute?.close();
});

/** The upstream's close of the run on thread `t` (event-driven; the test's
 *  guard bounds the wait). */
async function upstreamClose(t) {
  for (;;) {
    const c = seen.closes.find((x) => x.thread === t);
    if (c) return c;
    await new Promise((res) => setTimeout(res, 20));
  }
}

/** Opens a socket, sends `first` (unless undefined) once open, and
 *  collects every message until the close. */
function wsRun(pathName, first, { protocols, onMessage, onOpen, binary = false, headers, base, origin } = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base ?? wsGateway}${pathName}`, protocols, { headers, origin });
    onOpen?.(ws);
    const messages = [];
    ws.on('open', () => {
      if (first !== undefined) ws.send(first, { binary });
    });
    ws.on('message', (data, isBinary) => {
      messages.push({ text: data.toString(), isBinary, raw: Buffer.from(data) });
      onMessage?.(ws, messages);
    });
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString(), messages, protocol: ws.protocol }));
    ws.on('error', reject);
  });
}

async function sseRun(pathName, body, extraHeaders = {}) {
  const res = await fetch(`${gateway}${pathName}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...extraHeaders },
    body,
  });
  assert.equal(res.status, 200, `POST ${pathName}`);
  return sseData(await res.text());
}

/** Ids and timestamps differ between two runs: each distinct value becomes
 *  its rank of first appearance. */
function normalize(events) {
  const names = new Map();
  const walk = (v, key) => {
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]));
    if (typeof v === 'string' && /(id|stepName)$/i.test(key ?? '')) {
      if (!names.has(v)) names.set(v, `#${names.size}`);
      return names.get(v);
    }
    if (key === 'timestamp') return 0;
    return v;
  };
  return events.map((d) => {
    try {
      return walk(JSON.parse(d));
    } catch {
      return d;
    }
  });
}

for (const d of DIALECTS) {
  test(`${d} client over WebSocket gets the events it gets over SSE (demo agent)`, HANG_GUARD, async () => {
    const body = JSON.stringify(runBody(d, `t-ws-${d}`));
    const overSse = await sseRun(`/demo/${d}`, body);
    const r = await wsRun(`/demo/${d}`, body);
    assert.equal(r.code, 1000, `normal close: ${r.reason}`);
    assert.ok(r.messages.every((m) => !m.isBinary), 'text messages');
    assert.ok(overSse.length > 3, `a real stream: ${overSse.length} events`);
    assert.deepEqual(normalize(r.messages.map((m) => m.text)), normalize(overSse));
  });
}

for (const d of DIALECTS) {
  test(`${d} upstream over WebSocket: SSE and WebSocket clients get what an SSE upstream gives`, HANG_GUARD, async () => {
    const client = CLIENT_OF[d];
    const body = JSON.stringify(runBody(client, `t-up-${d}`));
    const viaHttp = await sseRun(`/sse-up/${d}`, body);
    const viaWs = await sseRun(`/ws-up/${d}`, body);
    assert.ok(viaHttp.length > 3, `a real stream: ${viaHttp.length}`);
    assert.doesNotMatch(viaWs.join('\n'), /upstream_(closed|disconnected|malformed)/);
    assert.deepEqual(normalize(viaWs), normalize(viaHttp));
    const both = await wsRun(`/ws-up/${d}`, body);
    assert.equal(both.code, 1000, both.reason);
    assert.deepEqual(normalize(both.messages.map((m) => m.text)), normalize(viaHttp));
    const req = seen.requests.filter((x) => x.name === d).at(-1);
    assert.equal(req.isBinary, false, 'the request went up as a text message');
    assert.doesNotThrow(() => JSON.parse(req.body), 'the first upstream message is the JSON request');
  });
}

// Same-dialect routes (AG-UI client, AG-UI upstream) must carry what the
// upstream said, by content (lib/content.mjs), over every client transport:
// the demo agent asked straight is the reference.
test('same dialect: what the AG-UI upstream said reaches the AG-UI client over SSE, WebSocket and ag-ui.proto', HANG_GUARD, async () => {
  const body = JSON.stringify(runBody('ag-ui', 't-same', 'what is the weather in Paris?'));
  const straight = await fetch(demoUrl, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body });
  const expected = contentOf(aguiContent(sseData(await straight.text()).map((d) => JSON.parse(d))));
  assert.ok(Object.keys(expected.calls).length === 1 && Object.keys(expected.results).length === 1, `a tool call and its result: ${JSON.stringify(expected)}`);
  const overSse = (await sseRun('/demo/ag-ui', body)).map((d) => JSON.parse(d));
  assert.deepEqual(contentOf(aguiContent(overSse)), expected, 'SSE');
  const ws = await wsRun('/demo/ag-ui', body);
  assert.deepEqual(contentOf(aguiContent(ws.messages.map((m) => JSON.parse(m.text)))), expected, 'WebSocket');
  const bin = await wsRun('/demo/ag-ui', body, { protocols: ['ag-ui.proto'] });
  assert.deepEqual(contentOf(aguiContent(bin.messages.map((m) => decode(new Uint8Array(m.raw))))), expected, 'ag-ui.proto');
});

test('same dialect: the AG-UI fixture over an AG-UI WebSocket upstream reaches the AG-UI client whole', HANG_GUARD, async () => {
  const expected = contentOf(aguiContent(fixture('ag-ui').map((d) => JSON.parse(d))));
  assert.ok(expected.seq.length > 3, JSON.stringify(expected));
  const events = (await sseRun('/ws-up/headers', JSON.stringify(runBody('ag-ui', 't-same-ws')))).map((d) => JSON.parse(d));
  assert.deepEqual(contentOf(aguiContent(events)), expected);
});

test('a client close mid-run closes the upstream WebSocket', HANG_GUARD, async () => {
  const r = await wsRun('/ws-up/slow', JSON.stringify(runBody('ag-ui', 't-cancel')), {
    onMessage: (ws) => ws.close(1000),
  });
  assert.ok(r.messages.length >= 1);
  assert.equal(r.code, 1000, 'the gateway answered the close handshake');
  assert.equal((await upstreamClose('t-cancel')).name, 'slow');
});

test('an SSE client leaving closes the upstream WebSocket too', HANG_GUARD, async () => {
  const ac = new AbortController();
  const res = await fetch(`${gateway}/ws-up/slow`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(runBody('ag-ui', 't-cancel-sse')),
    signal: ac.signal,
  });
  const reader = res.body.getReader();
  await reader.read();
  ac.abort();
  await upstreamClose('t-cancel-sse');
});

test('an upstream binary message: upstream_malformed in the client dialect', HANG_GUARD, async () => {
  const events = await sseRun('/ws-up/binary', JSON.stringify(runBody('ag-ui', 't-bin')));
  const last = JSON.parse(events.at(-1));
  assert.equal(last.type, 'RUN_ERROR');
  assert.equal(last.code, 'upstream_malformed');
  assert.match(last.message, /binary/);
});

test('an upstream closing normally before the run ends: upstream_closed', HANG_GUARD, async () => {
  const events = await sseRun('/ws-up/cut', JSON.stringify(runBody('ag-ui', 't-cut')));
  const last = JSON.parse(events.at(-1));
  assert.equal(last.type, 'RUN_ERROR');
  assert.equal(last.code, 'upstream_closed');
});

test('a binary first message: closed 1003, told why', HANG_GUARD, async () => {
  const r = await wsRun('/demo/ag-ui', Buffer.from(JSON.stringify(runBody('ag-ui', 't-b'))), { binary: true });
  assert.equal(r.code, 1003);
  assert.match(r.reason, /text/);
});

test('a second message before the stream ends: closed 1008', HANG_GUARD, async () => {
  const r = await wsRun('/ws-up/slow', JSON.stringify(runBody('ag-ui', 't-second')), {
    onMessage: (ws, msgs) => {
      if (msgs.length === 1) ws.send('{"again":true}');
    },
  });
  assert.equal(r.code, 1008);
  assert.match(r.reason, /one request/);
});

test('a first message over max_body_bytes: closed 1009', HANG_GUARD, async () => {
  const big = JSON.stringify({ ...runBody('ag-ui', 't-big'), forwardedProps: { pad: 'p'.repeat(MAX_BODY * 3) } });
  const r = await wsRun('/small', big);
  assert.equal(r.code, 1009);
  assert.match(r.reason, /request_too_large/);
});

test('no first message within the request read timeout: closed 1008', HANG_GUARD, async () => {
  const r = await wsRun('/demo/ag-ui', undefined);
  assert.equal(r.code, 1008);
  assert.match(r.reason, /request_timeout/);
});

test('an invalid request: its JSON error as a message, then a close naming the code', HANG_GUARD, async () => {
  const r = await wsRun('/demo/vercel', '{"not":"a request"');
  assert.equal(r.messages.length, 1);
  const { error } = JSON.parse(r.messages[0].text);
  assert.equal(error.type, 'client');
  assert.equal(r.code, 1008);
  assert.equal(r.reason, error.code);
});

test('subprotocols: the known one is chosen; only unknown ones: 400', HANG_GUARD, async () => {
  const r = await wsRun('/demo/ag-ui', JSON.stringify(runBody('ag-ui', 't-sp')), { protocols: ['x-unknown', 'ag-ui.json'] });
  assert.equal(r.protocol, 'ag-ui.json');
  assert.equal(r.code, 1000);
  await assert.rejects(wsRun('/demo/ag-ui', '{}', { protocols: ['x-unknown'] }), /400/);
});

test('a failure after the start: the dialect error event, then 1000', HANG_GUARD, async () => {
  const r = await wsRun('/ws-up/binary', JSON.stringify(runBody('ag-ui', 't-bin-ws')));
  assert.equal(r.code, 1000);
  const last = JSON.parse(r.messages.at(-1).text);
  assert.equal(last.type, 'RUN_ERROR');
  assert.equal(last.code, 'upstream_malformed');
});

test('an upstream closing with another code: upstream_disconnected', HANG_GUARD, async () => {
  const events = await sseRun('/ws-up/abort', JSON.stringify(runBody('ag-ui', 't-abort')));
  const last = JSON.parse(events.at(-1));
  assert.equal(last.type, 'RUN_ERROR');
  assert.equal(last.code, 'upstream_disconnected');
});

test('upstream handshake refused: 502 upstream_status; nothing listening: 502 upstream_unreachable', HANG_GUARD, async () => {
  for (const [p, code] of [['/ws-up/refuse', 'upstream_status'], ['/ws-up/down', 'upstream_unreachable']]) {
    const res = await fetch(`${gateway}${p}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(runBody('ag-ui', 't-x')) });
    assert.equal(res.status, 502, p);
    assert.equal((await res.json()).error.code, code, p);
  }
});

test('the upstream handshake carries upstream_headers, forwarded headers and x-request-id', HANG_GUARD, async () => {
  await sseRun('/ws-up/headers', JSON.stringify(runBody('ag-ui', 't-h')), { 'x-user-id': 'u-7', 'x-request-id': 'req-ws-1' });
  const { headers } = seen.requests.at(-1);
  assert.equal(headers['x-up'], 'yes');
  assert.equal(headers['x-user-id'], 'u-7');
  assert.equal(headers['x-request-id'], 'req-ws-1');
});

test('the client close reaches the upstream as 1001', HANG_GUARD, async () => {
  await wsRun('/ws-up/slow', JSON.stringify(runBody('ag-ui', 't-1001')), { onMessage: (ws) => ws.close(1000) });
  assert.equal((await upstreamClose('t-1001')).code, 1001);
});

test('pings every heartbeat_ms; a client ping is answered', HANG_GUARD, async () => {
  let pinged = false;
  let ponged = false;
  await wsRun('/beat', JSON.stringify(runBody('ag-ui', 't-beat')), {
    onOpen: (ws) => {
      ws.on('ping', () => {
        pinged = true;
        ws.ping();
      });
      ws.on('pong', () => {
        ponged = true;
        ws.close(1000);
      });
    },
  });
  assert.ok(pinged, 'the gateway pinged');
  assert.ok(ponged, 'the gateway answered a ping');
});

test('the upgrade goes through the route auth: 401 without a key, a stream with it', HANG_GUARD, async () => {
  await assert.rejects(wsRun('/auth', '{}'), /401/);
  const r = await wsRun('/auth', JSON.stringify(runBody('ag-ui', 't-auth')), { headers: { authorization: 'Bearer k-ws-test' } });
  assert.equal(r.code, 1000, r.reason);
  assert.equal(JSON.parse(r.messages.at(-1).text).type, 'RUN_FINISHED');
});

test('an open WebSocket counts against max_connections', HANG_GUARD, async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'websocket');
  const port = await freePort();
  const config = path.join(logDir, 'websocket-one.gateway.toml');
  fs.writeFileSync(config, `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\nmax_connections = 1\n\n${route('/slow', 'ag-ui', `ws://${upstream.base}/ws/slow`, 'ag-ui')}`);
  const gw = launch('babelgate-one', BABELGATE, ['serve', '--config', config], logDir);
  try {
    // Each probe on its own connection, closed after (no pool keeps one).
    const probe = () =>
      new Promise((res) => {
        http
          .get(`http://127.0.0.1:${port}/healthz`, { agent: false, headers: { connection: 'close' } }, (r) => {
            r.resume();
            r.on('end', () => res(r.statusCode));
          })
          .on('error', () => res(0));
      });
    let status = 0;
    while (status !== 200) {
      if (gw.exited) throw new Error(`gateway exited: ${JSON.stringify(gw.exited)}`);
      status = await probe();
      if (status !== 200) await new Promise((res) => setTimeout(res, 50));
    }
    // The probe's connection may not be closed on the gateway's side yet:
    // a 503 then is retried (the slot is freed when that task ends).
    let ws;
    for (;;) {
      ws = new WebSocket(`ws://127.0.0.1:${port}/slow`);
      const opened = await new Promise((res) => {
        ws.once('open', () => res(true));
        ws.once('error', () => res(false));
      });
      if (opened) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    const firstEvent = new Promise((res) => ws.once('message', res));
    ws.send(JSON.stringify(runBody('ag-ui', 't-one')));
    await firstEvent;
    // A fresh connection (no keep-alive pool) while the socket is open.
    assert.equal(await probe(), 503, 'the WebSocket holds the only connection');
    const closed = new Promise((res) => ws.once('close', res));
    ws.close(1000);
    await closed;
    // Freed once the session ends (event-driven: polls until it is).
    status = 0;
    while (status !== 200) {
      status = await probe();
      if (status !== 200) await new Promise((res) => setTimeout(res, 50));
    }
  } finally {
    await stopProc(gw);
  }
});

test('ag-ui.proto for an AG-UI client: one protobuf event a binary message, the same events as JSON text', HANG_GUARD, async () => {
  const text = await wsRun('/demo/ag-ui', JSON.stringify(runBody('ag-ui', 't-proto-json')), { protocols: ['ag-ui.json'] });
  const bin = await wsRun('/demo/ag-ui', JSON.stringify(runBody('ag-ui', 't-proto-bin')), { protocols: ['ag-ui.proto'] });
  assert.equal(bin.protocol, 'ag-ui.proto');
  assert.equal(bin.code, 1000, bin.reason);
  assert.ok(bin.messages.length > 3 && bin.messages.every((m) => m.isBinary), 'binary messages');
  // @ag-ui/proto's own decoder reads each message as one event.
  const decoded = bin.messages.map((m) => decode(new Uint8Array(m.raw)));
  const fromText = text.messages.map((m) => JSON.parse(m.text));
  const shape = (events) => events.map((e) => [e.type, e.delta ?? null]);
  assert.deepEqual(shape(decoded), shape(fromText));
  assert.equal(decoded.at(-1).type, 'RUN_FINISHED');
});

test('ag-ui.proto where the answer is SSE: text messages, as a fallback', HANG_GUARD, async () => {
  const body = JSON.stringify(runBody('vercel', 't-proto-fallback'));
  const r = await wsRun('/demo/vercel', body, { protocols: ['ag-ui.proto'] });
  assert.equal(r.protocol, 'ag-ui.proto');
  assert.equal(r.code, 1000, r.reason);
  assert.ok(r.messages.length > 3 && r.messages.every((m) => !m.isBinary), 'text messages');
  assert.equal(r.messages.at(-1).text, '[DONE]');
});

test('shutdown mid-run: the dialect error, then a normal close', HANG_GUARD, async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'websocket');
  const port = await freePort();
  const config = path.join(logDir, 'websocket-shutdown.gateway.toml');
  fs.writeFileSync(config, `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\nshutdown_grace_ms = 100\n\n${route('/slow', 'ag-ui', `ws://${upstream.base}/ws/slow`, 'ag-ui')}`);
  const gw = launch('babelgate-shutdown', BABELGATE, ['serve', '--config', config], logDir);
  try {
    await waitReady(gw, `http://127.0.0.1:${port}/healthz`);
    const r = await wsRun('/slow', JSON.stringify(runBody('ag-ui', 't-shutdown')), {
      base: `ws://127.0.0.1:${port}`,
      onMessage: (_ws, msgs) => {
        if (msgs.length === 1) gw.child.kill('SIGTERM');
      },
    });
    assert.equal(r.code, 1000, `close ${r.code} ${r.reason}`);
    const last = JSON.parse(r.messages.at(-1).text);
    assert.equal(last.type, 'RUN_ERROR', JSON.stringify(last));
  } finally {
    await stopProc(gw);
  }
});

test('a browser upgrade (Origin) from another origin: 403 unless the route CORS allows it', HANG_GUARD, async () => {
  const body = JSON.stringify(runBody('ag-ui', 't-origin'));
  await assert.rejects(wsRun('/demo/ag-ui', body, { origin: 'https://evil.example' }), /403/);
  await assert.rejects(wsRun('/cors', body, { origin: 'https://evil.example' }), /403/);
  const own = await wsRun('/demo/ag-ui', body, { origin: gateway });
  assert.equal(own.code, 1000, `the gateway's own origin: ${own.reason}`);
  const allowed = await wsRun('/cors', JSON.stringify(runBody('ag-ui', 't-origin-2')), { origin: 'https://app.example' });
  assert.equal(allowed.code, 1000, allowed.reason);
});

test('an upstream that never answers the handshake: 504 upstream_timeout', HANG_GUARD, async () => {
  const res = await fetch(`${gateway}/ws-up/mute`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(runBody('ag-ui', 't-mute')) });
  assert.equal(res.status, 504);
  assert.equal((await res.json()).error.code, 'upstream_timeout');
});
