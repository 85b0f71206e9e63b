// AG-UI's binary transport (application/vnd.ag-ui.event+proto) through the
// gateway, with the real packages: @ag-ui/client's HttpAgent asking for it
// (its own proto parser reads the stream), @ag-ui/encoder's EventEncoder as
// an upstream that answers it when asked (behind AG-UI, Vercel, HAI and
// AG-Kit clients), @ag-ui/proto's decode for resumed streams and for a HAI
// client's binary stream, and hand-written upstreams that send broken
// binary streams.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpAgent } from '@ag-ui/client';
import { EventEncoder } from '@ag-ui/encoder';
import { decode } from '@ag-ui/proto';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { haiViolations } from '../lib/hai-rules.mjs';
import { aguiAssembled, aguiContent, contentOf } from './lib/content.mjs';
import { BABELGATE, REPO_ROOT, freePort, launch, stopProc } from './lib/stack.mjs';

const PROTO = 'application/vnd.ag-ui.event+proto';
const DIALECTS = ['ag-ui', 'hai', 'vercel', 'agkit'];
const HANG_GUARD = { timeout: 60_000 };
const ENCODER_TEXT = 'hello from @ag-ui/encoder';

/** HttpAgent sends `Accept: text/event-stream`; this one asks for protobuf. */
class ProtoHttpAgent extends HttpAgent {
  requestInit(input) {
    const init = super.requestInit(input);
    return { ...init, headers: { ...init.headers, Accept: PROTO } };
  }
}

let procs = [];
let servers = [];
let gateway;
const demoUrls = {}; // each demo agent, asked straight for what it says
const encoderSeen = [];

function listen(handler) {
  const srv = http.createServer(handler);
  servers.push(srv);
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${srv.address().port}`)));
}

/** What the @ag-ui/encoder upstream says, in two deltas. */
const ENCODER_EVENTS = [
  { type: 'RUN_STARTED', threadId: 't', runId: 'r' },
  { type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: ENCODER_TEXT.slice(0, 10) },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: ENCODER_TEXT.slice(10) },
  { type: 'TEXT_MESSAGE_END', messageId: 'm1' },
  { type: 'RUN_FINISHED', threadId: 't', runId: 'r' },
];

/** An AG-UI agent written with @ag-ui/encoder: it answers what was asked for. */
async function encoderUpstream() {
  return listen(async (req, res) => {
    for await (const _ of req); // the request body
    const encoder = new EventEncoder({ accept: req.headers.accept });
    encoderSeen.push({ accept: req.headers.accept, contentType: encoder.getContentType() });
    res.writeHead(200, { 'content-type': encoder.getContentType() });
    for (const e of ENCODER_EVENTS) res.write(encoder.encodeBinary(e));
    res.end();
  });
}

/** Binary streams that break: a valid RUN_STARTED, then the fault. */
async function badUpstream() {
  const started = new EventEncoder({ accept: PROTO }).encodeBinary({ type: 'RUN_STARTED', threadId: 't', runId: 'r' });
  const faults = {
    'over-limit': Buffer.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3]),
    truncated: Buffer.from([0, 0, 0, 50, 1, 2, 3]),
    garbage: Buffer.from([0, 0, 0, 3, 0xff, 0xff, 0xff]),
  };
  return listen(async (req, res) => {
    for await (const _ of req);
    const kind = new URL(req.url, 'http://x').pathname.slice(1);
    res.writeHead(200, { 'content-type': PROTO });
    res.write(started);
    res.end(faults[kind]);
  });
}

async function waitListening(proc, url) {
  for (let i = 0; i < 200; i++) {
    if (proc.exited) throw new Error(`${proc.name} exited: ${fs.readFileSync(proc.err, 'utf8')}`);
    try {
      await fetch(url, { signal: AbortSignal.timeout(2000) });
      return;
    } catch {
      await sleep(50); // readiness polling, not an assertion
    }
  }
  throw new Error(`${proc.name} did not listen at ${url}`);
}

function route(p, client, upstream, protocol, extra = '') {
  return `[[routes]]\npath = "${p}"\nclient = "${client}"\nupstream = "${upstream}"\nupstream_protocol = "${protocol}"\n${extra}\n`;
}

before(async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'proto');
  fs.rmSync(logDir, { recursive: true, force: true });
  fs.mkdirSync(logDir, { recursive: true });
  let toml = '';
  const waits = [];
  for (const d of DIALECTS) {
    const port = await freePort();
    const p = launch(`demo-${d}`, BABELGATE, ['demo-agent', '--protocol', d, '--listen', `127.0.0.1:${port}`, '--delay-ms', '0'], logDir);
    procs.push(p);
    waits.push(waitListening(p, `http://127.0.0.1:${port}/agent`));
    demoUrls[d] = `http://127.0.0.1:${port}/agent`;
    toml += route(`/agui-${d}`, 'ag-ui', `http://127.0.0.1:${port}/agent`, d);
  }
  const slowPort = await freePort();
  const slow = launch('demo-slow', BABELGATE, ['demo-agent', '--protocol', 'ag-ui', '--listen', `127.0.0.1:${slowPort}`, '--delay-ms', '10'], logDir);
  procs.push(slow);
  waits.push(waitListening(slow, `http://127.0.0.1:${slowPort}/agent`));
  toml += route('/slow', 'ag-ui', `http://127.0.0.1:${slowPort}/agent`, 'ag-ui');
  const enc = await encoderUpstream();
  for (const t of ['proto', 'auto']) {
    toml += route(`/enc-agui-${t}`, 'ag-ui', `${enc}/agent`, 'ag-ui', `upstream_transport = "${t}"`);
    toml += route(`/enc-vercel-${t}`, 'vercel', `${enc}/agent`, 'ag-ui', `upstream_transport = "${t}"`);
    toml += route(`/enc-hai-${t}`, 'hai', `${enc}/agent`, 'ag-ui', `upstream_transport = "${t}"`);
    toml += route(`/enc-agkit-${t}`, 'agkit', `${enc}/agent`, 'ag-ui', `upstream_transport = "${t}"`);
  }
  const bad = await badUpstream();
  for (const kind of ['over-limit', 'truncated', 'garbage']) {
    toml += route(`/bad-${kind}`, 'ag-ui', `${bad}/${kind}`, 'ag-ui', 'upstream_transport = "proto"');
  }
  const gwPort = await freePort();
  const config = path.join(logDir, 'gateway.toml');
  fs.writeFileSync(config, `[server]\nlisten = "127.0.0.1:${gwPort}"\n\n${toml}`);
  const gw = launch('babelgate', BABELGATE, ['serve', '--config', config], logDir);
  procs.push(gw);
  gateway = `http://127.0.0.1:${gwPort}`;
  waits.push(waitListening(gw, `${gateway}/healthz`));
  await Promise.all(waits);
});

after(async () => {
  await Promise.all(procs.map(stopProc));
  for (const s of servers) s.close();
});

/** A fetch that notes each response's content type. */
function notingFetch(seen) {
  return async (url, init) => {
    const res = await fetch(url, init);
    seen.push(res.headers.get('content-type'));
    return res;
  };
}

/** Runs `Agent` on `p`; the messages it assembled and how the run ended. */
async function runWith(Agent, p, text = 'hello there') {
  const seen = [];
  const agent = new Agent({ url: `${gateway}${p}`, threadId: `thread-${randomUUID()}`, fetch: notingFetch(seen) });
  agent.addMessage({ id: 'u1', role: 'user', content: text });
  const ended = { error: null, finished: false };
  let rejected = null;
  const events = [];
  try {
    await agent.runAgent({ runId: `run-${randomUUID()}` }, {
      onEvent: ({ event }) => {
        events.push(event);
      },
      onRunErrorEvent: ({ event }) => { ended.error = event; },
      onRunFinishedEvent: () => { ended.finished = true; },
    });
  } catch (e) {
    rejected = e;
  }
  return { messages: agent.messages, events, contentTypes: seen, ended, rejected };
}

/** Messages without their generated ids, for comparing two runs. */
function shape(messages) {
  return messages.map((m) => ({
    role: m.role,
    content: m.content,
    toolCalls: m.toolCalls?.map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
  }));
}

for (const d of DIALECTS) {
  test(`HttpAgent over proto assembles what it does over SSE (ag-ui client, ${d} upstream)`, HANG_GUARD, async () => {
    for (const text of ['hello there', 'what is the weather in Paris?']) {
      const sse = await runWith(HttpAgent, `/agui-${d}`, text);
      const bin = await runWith(ProtoHttpAgent, `/agui-${d}`, text);
      assert.deepEqual(sse.contentTypes, ['text/event-stream']);
      assert.deepEqual(bin.contentTypes, [PROTO]);
      for (const r of [sse, bin]) {
        assert.equal(r.rejected, null, String(r.rejected));
        assert.equal(r.ended.error, null, JSON.stringify(r.ended.error));
        assert.ok(r.ended.finished);
      }
      assert.ok(bin.messages.length >= 2, JSON.stringify(bin.messages));
      assert.deepEqual(shape(bin.messages), shape(sse.messages));
      if (d === 'ag-ui') await sameContent(text, [sse, bin]);
    }
  });
}

/**
 * A same-dialect route: what HttpAgent saw and assembled, over SSE and over
 * proto, says what the demo agent says when asked straight, by content
 * (lib/content.mjs).
 */
async function sameContent(text, runs) {
  const res = await fetch(demoUrls['ag-ui'], {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ threadId: 't', runId: 'r', messages: [{ id: 'u1', role: 'user', content: text }], tools: [], context: [], state: {}, forwardedProps: {} }),
  });
  const straight = (await res.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
  const expected = contentOf(aguiContent(straight));
  assert.ok(expected.seq.length > 2, JSON.stringify(expected));
  const { seq, outcome, ...assembled } = expected;
  for (const r of runs) {
    const got = aguiContent(r.events);
    assert.deepEqual(contentOf(got), expected, `the events HttpAgent saw (${r.contentTypes})`);
    assert.deepEqual(aguiAssembled(r.messages, got), assembled, `HttpAgent's messages (${r.contentTypes})`);
  }
}

for (const t of ['proto', 'auto']) {
  test(`an @ag-ui/encoder upstream answers protobuf (upstream_transport = ${t})`, HANG_GUARD, async () => {
    encoderSeen.length = 0;
    for (const Agent of [HttpAgent, ProtoHttpAgent]) {
      const r = await runWith(Agent, `/enc-agui-${t}`);
      assert.equal(r.rejected, null, String(r.rejected));
      assert.ok(r.ended.finished);
      const last = r.messages.at(-1);
      assert.equal(last.role, 'assistant');
      assert.equal(last.content, ENCODER_TEXT);
      // A same-dialect route: the encoder's events, by content.
      assert.deepEqual(contentOf(aguiContent(r.events)), contentOf(aguiContent(ENCODER_EVENTS)), `events (${Agent === HttpAgent ? 'SSE' : 'proto'})`);
    }
    // A Vercel client behind it.
    const res = await fetch(`${gateway}/enc-vercel-${t}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'c1', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] }),
    });
    assert.equal(res.status, 200);
    const body = await res.text();
    const deltas = body.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)))
      .filter((e) => e.type === 'text-delta').map((e) => e.delta).join('');
    assert.equal(deltas, ENCODER_TEXT);
    assert.equal(encoderSeen.length, 3);
    for (const s of encoderSeen) assert.equal(s.contentType, PROTO, JSON.stringify(s));
  });
}

/** The events of a binary body, decoded by @ag-ui/proto. */
function protoEvents(bytes) {
  const events = [];
  let at = 0;
  while (at < bytes.length) {
    const len = new DataView(bytes.buffer, bytes.byteOffset + at, 4).getUint32(0, false);
    events.push(decode(bytes.subarray(at + 4, at + 4 + len)));
    at += 4 + len;
  }
  assert.equal(at, bytes.length, 'the body ends on a frame boundary');
  return events;
}

test('a running run resumes over proto: a snapshot, then the tail', HANG_GUARD, async () => {
  const thread = `thread-${randomUUID()}`;
  const first = await fetch(`${gateway}/slow`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: PROTO },
    body: JSON.stringify({ threadId: thread, runId: 'r1', messages: [{ id: 'u1', role: 'user', content: 'a long answer please' }], tools: [], context: [], state: {}, forwardedProps: {} }),
  });
  assert.equal(first.headers.get('content-type'), PROTO);
  const reader = first.body.getReader();
  let got = 0;
  while (got < 200) got += (await reader.read()).value.length;
  const again = await fetch(`${gateway}/slow/${thread}/stream`, { headers: { accept: PROTO } });
  assert.equal(again.status, 200);
  assert.equal(again.headers.get('content-type'), PROTO);
  const events = protoEvents(new Uint8Array(await again.arrayBuffer()));
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'RUN_STARTED');
  assert.ok(types.includes('MESSAGES_SNAPSHOT'), types.join());
  assert.equal(types.at(-1), 'RUN_FINISHED');
  await reader.cancel();
});

for (const kind of ['over-limit', 'truncated', 'garbage']) {
  test(`a broken binary upstream (${kind}) ends with RUN_ERROR upstream_malformed`, HANG_GUARD, async () => {
    for (const Agent of [HttpAgent, ProtoHttpAgent]) {
      const r = await runWith(Agent, `/bad-${kind}`);
      assert.ok(r.ended.error, `no RUN_ERROR (${Agent.name}): ${r.rejected}`);
      assert.equal(r.ended.error.code, 'upstream_malformed');
    }
  });
}

/** The SSE `data` of a POST, read with eventsource-parser as the HAI and
 *  AG-Kit clients do (tests/node/e2e/lib/http.mjs), and the raw text. */
async function sseFrames(p, body) {
  const res = await fetch(`${gateway}${p}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const [forParser, forRaw] = res.body.tee();
  const raw = new Response(forRaw).text();
  const frames = [];
  const reader = forParser.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    frames.push(value.data);
  }
  return { frames, raw: await raw };
}

const haiInput = () => ({
  threadId: `thread-${randomUUID()}`,
  runId: `run-${randomUUID()}`,
  messages: [{ id: 'u1', role: 'user', content: 'hi' }],
  tools: [],
  context: [],
});

/** HAI's answer text: its BUSINESS_DATA_CONTENT deltas (a string, or
 *  {output: {type: "text", content}}). */
const haiText = (events) =>
  events
    .filter((e) => e.type === 'BUSINESS_DATA_CONTENT')
    .map((e) => (typeof e.delta === 'string' ? e.delta : e.delta.output.content))
    .join('');

for (const t of ['proto', 'auto']) {
  test(`HAI and AG-Kit clients behind the @ag-ui/encoder upstream (upstream_transport = ${t})`, HANG_GUARD, async () => {
    encoderSeen.length = 0;
    // HAI over SSE: the HAI rules hold, the text is whole, the run finished.
    const hai = await sseFrames(`/enc-hai-${t}`, haiInput());
    const haiEvents = hai.frames.map((d) => JSON.parse(d));
    assert.deepEqual(haiViolations(hai.raw), []);
    assert.equal(haiEvents[0].type, 'RUN_STARTED');
    assert.equal(haiEvents.at(-1).type, 'RUN_FINISHED');
    assert.equal(haiText(haiEvents), ENCODER_TEXT);

    // AG-Kit, read as its widget reads: `text` frames, then [DONE].
    const agkit = await sseFrames(`/enc-agkit-${t}`, { conversationId: randomUUID(), messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(agkit.frames.at(-1), '[DONE]', 'a clean end');
    const frames = agkit.frames.slice(0, -1).map((d) => JSON.parse(d));
    assert.ok(!frames.some((f) => f.type === 'error'), JSON.stringify(frames));
    assert.equal(frames.filter((f) => f.type === 'text').map((f) => f.content).join(''), ENCODER_TEXT);

    assert.equal(encoderSeen.length, 2);
    for (const s of encoderSeen) assert.equal(s.contentType, PROTO, JSON.stringify(s));
  });
}

/** A HAI event from its binary form (docs/transports.md, "HAI's own
 *  events"): a `hai:<TYPE>` CUSTOM is {type, ...value, timestamp}; any
 *  other event keeps its type, with its `metadata.hai` fields on top. */
function haiFromBinary(e) {
  if (e.type === 'CUSTOM' && e.name.startsWith('hai:')) {
    return { type: e.name.slice(4), ...e.value, ...(e.timestamp !== undefined ? { timestamp: Number(e.timestamp) } : {}) };
  }
  const { metadata, ...rest } = e;
  const out = { ...rest, ...(metadata?.hai ?? {}) };
  if (out.timestamp !== undefined) out.timestamp = Number(out.timestamp);
  return out;
}

for (const t of ['proto', 'auto']) {
  test(`a HAI client asking for protobuf gets hai: CUSTOM events (@ag-ui/encoder upstream, ${t})`, HANG_GUARD, async () => {
    const res = await fetch(`${gateway}/enc-hai-${t}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: PROTO },
      body: JSON.stringify(haiInput()),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), PROTO);
    // @ag-ui/proto's own decoder reads every message.
    const agui = protoEvents(new Uint8Array(await res.arrayBuffer()));
    const customs = agui.filter((e) => e.type === 'CUSTOM').map((e) => e.name);
    assert.ok(customs.includes('hai:BUSINESS_DATA_START') && customs.includes('hai:BUSINESS_DATA_CONTENT') && customs.includes('hai:BUSINESS_DATA_END'), customs.join());
    assert.ok(customs.every((n) => n.startsWith('hai:')), customs.join());
    assert.ok(!agui.some((e) => e.type.startsWith('TEXT_MESSAGE_')), 'HAI has no TEXT_MESSAGE_* events');
    // Read back by the convention, it is a HAI stream by HAI's own rules.
    const events = agui.map(haiFromBinary);
    const asSse = events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('');
    assert.deepEqual(haiViolations(asSse), []);
    assert.equal(events[0].type, 'RUN_STARTED');
    assert.equal(events.at(-1).type, 'RUN_FINISHED');
    assert.equal(haiText(events), ENCODER_TEXT);
  });
}
