// WebSocket upstreams in binary (docs/transports.md, "WebSocket upstreams"):
// a Node `ws` server that accepts the `ag-ui.proto` subprotocol and answers
// one protobuf event a binary message, encoded by the real packages
// (@ag-ui/proto's `encode`, and @ag-ui/encoder's EventEncoder.encodeBinary
// without the 4-byte length it puts in front), behind a client of every
// dialect; an undecodable message ending each client's stream with its own
// error, code upstream_malformed; a server that does not negotiate read as
// JSON; and a route on `sse` still refusing binary messages. Each client's
// content (lib/content.mjs: text, tool call, result, outcome) must be what
// the upstream said, not only a stream that ended well.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { HttpAgent } from '@ag-ui/client';
import { EventEncoder } from '@ag-ui/encoder';
import { decode, encode } from '@ag-ui/proto';
import { DefaultChatTransport } from 'ai';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { Chat } from './lib/chat.mjs';
import { uiText } from './lib/expect.mjs';
import { runBody, sseData } from './lib/adversary.mjs';
import { BABELGATE, REPO_ROOT, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';
import { haiViolations } from '../lib/hai-rules.mjs';
import { aguiAssembled, aguiContent, contentOf, vercelContent } from './lib/content.mjs';

const HANG_GUARD = { timeout: 60_000 };
const PROTO = 'application/vnd.ag-ui.event+proto';
const TEXT = 'binary over a WebSocket 你好 🎉';
const CLIENTS = ['ag-ui', 'hai', 'vercel', 'agkit'];
// What each upstream flavour writes a binary message with.
const WRITERS = {
  // @ag-ui/proto: one ag_ui.Event message, as the binding wants.
  proto: (e) => encode(e),
  // @ag-ui/encoder frames for HTTP: a 4-byte big-endian length, then the
  // message (the same @ag-ui/proto bytes); a WebSocket message carries none.
  encoder: (e) => {
    const framed = new EventEncoder({ accept: PROTO }).encodeBinary(e);
    const len = new DataView(framed.buffer, framed.byteOffset, 4).getUint32(0, false);
    assert.equal(len, framed.length - 4, '@ag-ui/encoder puts the length first');
    return framed.subarray(4);
  },
};

let upstream;
let gatewayProc;
let gateway;
const handshakes = [];

function events(threadId, runId) {
  return [
    { type: 'RUN_STARTED', threadId, runId },
    { type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' },
    { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: TEXT.slice(0, 9) },
    { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: TEXT.slice(9) },
    { type: 'TEXT_MESSAGE_END', messageId: 'm1' },
    { type: 'TOOL_CALL_START', toolCallId: 'c1', toolCallName: 'get_weather', parentMessageId: 'm1' },
    { type: 'TOOL_CALL_ARGS', toolCallId: 'c1', delta: '{"city":' },
    { type: 'TOOL_CALL_ARGS', toolCallId: 'c1', delta: '"Paris ☀"}' },
    { type: 'TOOL_CALL_END', toolCallId: 'c1' },
    { type: 'TOOL_CALL_RESULT', messageId: 'r1', toolCallId: 'c1', content: '{"tempC":21}', role: 'tool' },
    { type: 'RUN_FINISHED', threadId, runId },
  ];
}

/** What every AG-UI client must get: the content of the upstream's events. */
const EXPECTED = contentOf(aguiContent(events('t', 'r')));

/** `/proto`, `/encoder`: binary events by that writer. `/broken`: a
 *  RUN_STARTED, then a message that is not protobuf. `/plain`: a server
 *  that negotiates nothing and sends JSON text. */
async function startUpstream() {
  const server = http.createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({
    server,
    // Called only when something is offered.
    handleProtocols: (offered, req) => {
      if (req.url === '/plain') return false;
      return offered.has('ag-ui.proto') ? 'ag-ui.proto' : false;
    },
  });
  wss.on('connection', (sock, req) => {
    const offered = req.headers['sec-websocket-protocol'];
    handshakes.push({ url: req.url, offered: offered ? offered.split(',').map((x) => x.trim()) : [] });
    sock.once('message', (data) => {
      const run = JSON.parse(data.toString());
      const evs = events(run.threadId, run.runId);
      const name = req.url.slice(1);
      if (name === 'plain') {
        for (const e of evs) sock.send(JSON.stringify(e));
      } else if (name === 'broken') {
        sock.send(encode(evs[0]), { binary: true });
        sock.send(Buffer.from([0xff, 0xff, 0xff]), { binary: true });
      } else {
        for (const e of evs) sock.send(WRITERS[name](e), { binary: true });
      }
      sock.close(1000);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, wss, base: `ws://127.0.0.1:${server.address().port}` };
}

const route = (p, client, up, transport) =>
  `[[routes]]\npath = "${p}"\nclient = "${client}"\nupstream = "${up}"\nupstream_protocol = "ag-ui"\n${transport ? `upstream_transport = "${transport}"\n` : ''}`;

before(async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'websocket-proto');
  fs.mkdirSync(logDir, { recursive: true });
  upstream = await startUpstream();
  const routes = [];
  for (const c of CLIENTS) {
    for (const t of ['proto', 'auto']) {
      for (const w of Object.keys(WRITERS)) routes.push(route(`/${c}/${w}/${t}`, c, `${upstream.base}/${w}`, t));
    }
    routes.push(route(`/${c}/broken`, c, `${upstream.base}/broken`, 'proto'));
  }
  routes.push(route('/ag-ui/plain', 'ag-ui', `${upstream.base}/plain`, 'auto'));
  routes.push(route('/ag-ui/sse-route', 'ag-ui', `${upstream.base}/proto`));
  const port = await freePort();
  const config = path.join(logDir, 'gateway.toml');
  fs.writeFileSync(config, `[server]\nlisten = "127.0.0.1:${port}"\n\n${routes.join('\n')}`);
  gatewayProc = launch('babelgate', BABELGATE, ['serve', '--config', config], logDir);
  gateway = `http://127.0.0.1:${port}`;
  await waitReady(gatewayProc, `${gateway}/healthz`);
});

after(async () => {
  if (gatewayProc) await stopProc(gatewayProc);
  upstream?.wss.close();
  upstream?.server.close();
});

/** @ag-ui/client's HttpAgent: the events it read, the messages it
 *  assembled, how the run ended. */
async function aguiClient(p) {
  const agent = new HttpAgent({ url: `${gateway}${p}`, threadId: `thread-${randomUUID()}` });
  agent.addMessage({ id: 'u1', role: 'user', content: 'hi' });
  const ended = { error: null, finished: false };
  const events = [];
  await agent
    .runAgent({ runId: `run-${randomUUID()}` }, {
      onEvent: ({ event }) => { events.push(event); },
      onRunErrorEvent: ({ event }) => { ended.error = event; },
      onRunFinishedEvent: () => { ended.finished = true; },
    })
    .catch(() => {}); // a RUN_ERROR also rejects; `ended` says what came
  const text = agent.messages.filter((m) => m.role === 'assistant').map((m) => m.content ?? '').join('');
  return { text, ended, events, messages: agent.messages };
}

/** The content an AG-UI client got, checked against the upstream's: the
 *  events in order, and the messages HttpAgent assembled from them. */
function assertAguiContent(r, what) {
  const got = aguiContent(r.events);
  assert.deepEqual(contentOf(got), EXPECTED, `${what}: the events' content`);
  const { text, reasoning, calls, results } = EXPECTED;
  assert.deepEqual(aguiAssembled(r.messages, got), { text, reasoning, calls, results }, `${what}: the messages`);
}

/** A WebSocket client of the gateway (the `ws` package): the events of its
 *  messages, text or `ag-ui.proto` binary. */
function wsClient(p, protocols) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${gateway.replace('http', 'ws')}${p}`, protocols);
    const events = [];
    ws.on('open', () => ws.send(JSON.stringify(runBody('ag-ui', `t-${randomUUID()}`))));
    ws.on('message', (data, isBinary) => {
      events.push(isBinary ? decode(new Uint8Array(data)) : JSON.parse(data.toString()));
    });
    ws.on('close', (code) => resolve({ code, events }));
    ws.on('error', reject);
  });
}

/** The `ai` package's Chat (what useChat wraps). */
async function vercelClient(p) {
  const chat = new Chat({ id: `chat-${randomUUID()}`, transport: new DefaultChatTransport({ api: `${gateway}${p}` }) });
  await chat.sendMessage({ text: 'hi' });
  const answer = chat.messages.find((m) => m.role === 'assistant');
  return { status: chat.status, error: chat.error, text: answer ? uiText(answer) : '' };
}

/** A POST read to its end or until the body breaks off; the SSE data as
 *  eventsource-parser (what the HAI and AG-Kit clients use) gives it. */
async function sseClient(p, body) {
  const res = await fetch(`${gateway}${p}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  const frames = [];
  let raw = '';
  let brokeOff = false;
  const [forParser, forRaw] = res.body.tee();
  const rawDone = (async () => {
    const dec = new TextDecoder();
    try {
      for await (const c of forRaw) raw += dec.decode(c, { stream: true });
    } catch {
      brokeOff = true;
    }
  })();
  try {
    const reader = forParser.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      frames.push(value.data);
    }
  } catch {
    brokeOff = true;
  }
  await rawDone;
  return { frames, raw, brokeOff };
}

/** HAI: the text of its BUSINESS_DATA_CONTENT events and the last event. */
async function haiClient(p) {
  const r = await sseClient(p, runBody('hai', `t-${randomUUID()}`));
  const evs = r.frames.map((d) => JSON.parse(d));
  let text = '';
  for (const e of evs.filter((x) => x.type === 'BUSINESS_DATA_CONTENT')) {
    text += typeof e.delta === 'string' ? e.delta : e.delta.output.content;
  }
  return { text, last: evs.at(-1), violations: haiViolations(r.raw), brokeOff: r.brokeOff };
}

/** AG-Kit, read as its widget does: `text` frames, `[DONE]` for success. */
async function agkitClient(p) {
  const r = await sseClient(p, runBody('agkit', `c-${randomUUID()}`));
  let text = '';
  let done = false;
  let error = null;
  for (const d of r.frames) {
    if (d === '[DONE]') {
      done = true;
      continue;
    }
    const e = JSON.parse(d);
    if (e.type === 'text') text += e.content;
    if (e.type === 'error') error = e;
  }
  return { text, done, error, brokeOff: r.brokeOff };
}

for (const t of ['proto', 'auto']) {
  for (const w of Object.keys(WRITERS)) {
    test(`a ws:// upstream answering binary (${w}, upstream_transport = ${t}) behind every client`, HANG_GUARD, async () => {
      const before = handshakes.length;
      const agui = await aguiClient(`/ag-ui/${w}/${t}`);
      assert.equal(agui.ended.error, null, JSON.stringify(agui.ended.error));
      assert.ok(agui.ended.finished);
      assert.equal(agui.text, TEXT);
      assertAguiContent(agui, 'HttpAgent');

      const hai = await haiClient(`/hai/${w}/${t}`);
      assert.deepEqual(hai.violations, []);
      assert.equal(hai.last.type, 'RUN_FINISHED');
      assert.equal(hai.text, TEXT);

      const vercel = await vercelClient(`/vercel/${w}/${t}`);
      assert.equal(vercel.status, 'ready', vercel.error?.message);
      assert.equal(vercel.text, TEXT);
      // What the Chat read, chunk by chunk: the same text, call and result.
      const wire = await sseClient(`/vercel/${w}/${t}`, runBody('vercel', `t-${randomUUID()}`));
      const chunks = wire.frames.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
      const vc = vercelContent(chunks);
      assert.deepEqual(
        { text: vc.text, calls: vc.calls, results: vc.results, outcome: vc.outcome?.end },
        { text: EXPECTED.text, calls: EXPECTED.calls, results: EXPECTED.results, outcome: 'finish' },
      );

      const agkit = await agkitClient(`/agkit/${w}/${t}`);
      assert.equal(agkit.error, null, JSON.stringify(agkit.error));
      assert.ok(agkit.done && !agkit.brokeOff, 'a clean end: [DONE]');
      assert.equal(agkit.text, TEXT);

      // The gateway's own WebSocket clients: one message per event, JSON
      // or protobuf, with the upstream's content.
      for (const protocols of [[], ['ag-ui.proto']]) {
        const ws = await wsClient(`/ag-ui/${w}/${t}`, protocols);
        assert.equal(ws.code, 1000);
        assert.deepEqual(contentOf(aguiContent(ws.events)), EXPECTED, `WebSocket ${protocols}`);
      }

      const mine = handshakes.slice(before);
      assert.equal(mine.length, 7, 'one handshake per run');
      for (const h of mine) assert.deepEqual(h.offered, ['ag-ui.proto', 'ag-ui.json']);
    });
  }
}

test('an undecodable binary message: each client dialect ends with its error, upstream_malformed', HANG_GUARD, async () => {
  const agui = await aguiClient('/ag-ui/broken');
  assert.equal(agui.ended.error?.code, 'upstream_malformed', JSON.stringify(agui.ended));

  const hai = await haiClient('/hai/broken');
  assert.deepEqual(hai.violations, []);
  assert.equal(hai.last.type, 'RUN_ERROR');
  assert.equal(hai.last.code, 'upstream_malformed');

  // The `ai` Chat sees the error chunk; its code is on the wire.
  const vercel = await vercelClient('/vercel/broken');
  assert.equal(vercel.status, 'error');
  assert.match(vercel.error.message, /malformed/);
  const wire = await sseClient('/vercel/broken', runBody('vercel', `t-${randomUUID()}`));
  const err = sseData(wire.raw).map((d) => (d === '[DONE]' ? d : JSON.parse(d))).find((e) => e.type === 'error');
  assert.equal(err.code, 'upstream_malformed');

  // AG-Kit: the error frame and no [DONE]; the body breaks off.
  const agkit = await agkitClient('/agkit/broken');
  assert.equal(agkit.error?.code, 'upstream_malformed', JSON.stringify(agkit));
  assert.ok(!agkit.done && agkit.brokeOff);
});

test('a server that accepts no subprotocol is read as JSON text', HANG_GUARD, async () => {
  const before = handshakes.length;
  const r = await aguiClient('/ag-ui/plain');
  assert.equal(r.ended.error, null, JSON.stringify(r.ended.error));
  assert.equal(r.text, TEXT);
  assertAguiContent(r, 'JSON text');
  // Offered both, was refused none: connected again offering none.
  assert.deepEqual(handshakes.slice(before).map((h) => h.offered), [['ag-ui.proto', 'ag-ui.json'], []]);
});

test('a route on upstream_transport = "sse" offers no subprotocol and refuses binary', HANG_GUARD, async () => {
  const before = handshakes.length;
  const r = await aguiClient('/ag-ui/sse-route');
  assert.equal(r.ended.error?.code, 'upstream_malformed');
  assert.match(r.ended.error.message, /binary/);
  assert.deepEqual(handshakes.slice(before).map((h) => h.offered), [[]]);
});
