#!/usr/bin/env node
// A check of the lean bridge (server-lean.mjs) against the runAgent one
// (server.mjs); not part of the test suite, run by hand:
//
//   node crates/tools/bench/node/check-lean.mjs
//
// It serves AG-UI streams from a small upstream of its own (the fixtures of
// tests/fixtures/ag-ui and a loadgen-like text stream with `@<µs>;` marks),
// starts both bridges in front of it and, for each stream:
// - both bridges pass the x-bench header upstream;
// - both answer with the same headers and the same response body, ids aside
//   (the `start` chunk's generated messageId, the marks' times);
// - the real `ai` client reads the lean bridge's answer: DefaultChatTransport
//   (what useChat sends and parses with) into readUIMessageStream, with
//   terminateOnError, and the message it builds is the same as from server.mjs.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = path.join(here, '..', '..', '..', '..', 'tests', 'fixtures', 'ag-ui');

// Streams both bridges must answer alike (EXTRA: printed, not held).
const SAME = ['chat', 'server_tool', 'frontend_tool', 'parallel_tools', 'hitl_confirm', 'state', 'reasoning', 'run_error', 'unknown_events', 'cut_mid_message', 'marks'];
const EXTRA = [];

function marks(n) {
  let s = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\ndata: {"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}\n\n';
  for (let i = 0; i < n; i++) {
    s += `data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"@${Date.now() * 1000 + i};xxxxxxxx é \\"q\\"\\n"}\n\n`;
  }
  return s + 'data: {"type":"TEXT_MESSAGE_END","messageId":"m1"}\n\ndata: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n';
}
const body = (name) => (name === 'marks' ? marks(500) : fs.readFileSync(path.join(fixtures, `${name}.sse`), 'utf8'));

const seen = []; // x-bench headers the upstream got
const upstream = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    const name = new URL(req.url, 'http://x').searchParams.get('s');
    seen.push(req.headers['x-bench']);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // in small pieces, cut anywhere, so parsing across reads is exercised
    const b = Buffer.from(body(name));
    let i = 0;
    const next = () => {
      if (i >= b.length) return res.end();
      res.write(b.subarray(i, i + 97));
      i += 97;
      setImmediate(next);
    };
    next();
  });
});
await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
const up = `http://127.0.0.1:${upstream.address().port}`;

const free = () =>
  new Promise((r) => {
    const s = http.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => r(p));
    });
  });
const children = [];
async function bridge(file, stream) {
  const port = await free();
  const c = spawn(process.execPath, [path.join(here, file), '--port', String(port), '--upstream', `${up}/agent?s=${stream}`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(c);
  await new Promise((r) => c.stdout.once('data', r));
  return { port, child: c };
}
const stop = (b) => new Promise((r) => { b.child.once('exit', r); b.child.kill('SIGTERM'); });

const req = { id: 'bench', trigger: 'submit-message', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] };
async function raw(port) {
  const r = await fetch(`http://127.0.0.1:${port}/api/chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-bench': 'events=7;rate=0;pad=1' },
    body: JSON.stringify(req),
  });
  const h = ['content-type', 'cache-control', 'x-vercel-ai-ui-message-stream', 'x-accel-buffering'].map((k) => `${k}: ${r.headers.get(k)}`);
  return { status: r.status, headers: h.join('\n'), text: await r.text() };
}
const norm = (t) => t.replace(/"messageId":"[^"]*"/, '"messageId":"ID"').replace(/@\d+;/g, '@T;');

async function viaClient(port) {
  const transport = new DefaultChatTransport({ api: `http://127.0.0.1:${port}/api/chat`, headers: { 'x-bench': 'events=7' } });
  const stream = await transport.sendMessages({ chatId: 'c1', messages: req.messages, trigger: 'submit-message', messageId: undefined });
  let last;
  let updates = 0;
  for await (const m of readUIMessageStream({ stream, terminateOnError: true })) {
    last = m;
    updates += 1;
  }
  return { message: last, updates };
}
const strip = (m) => m && norm(JSON.stringify({ ...m, id: 'ID' }));
// run_error ends in an `error` chunk: with terminateOnError the client throws
// it; both bridges must make it throw the same.
async function client(port) {
  try {
    return await viaClient(port);
  } catch (e) {
    return { error: String(e?.message ?? e) };
  }
}

let failed = 0;
for (const name of [...SAME, ...EXTRA]) {
  const held = SAME.includes(name);
  const [a, b] = [await bridge('server.mjs', name), await bridge('server-lean.mjs', name)];
  try {
    seen.length = 0;
    const [ra, rb] = [await raw(a.port), await raw(b.port)];
    const problems = [];
    if (seen.length !== 2 || seen.some((h) => h !== 'events=7;rate=0;pad=1')) problems.push(`x-bench upstream: ${JSON.stringify(seen)}`);
    if (ra.status !== rb.status || ra.headers !== rb.headers) problems.push(`status/headers differ:\n${ra.status}\n${ra.headers}\n--\n${rb.status}\n${rb.headers}`);
    if (norm(ra.text) !== norm(rb.text)) problems.push(`bodies differ:\n--- server.mjs\n${norm(ra.text).slice(0, 1500)}\n--- server-lean.mjs\n${norm(rb.text).slice(0, 1500)}`);
    let said = '';
    {
      const [ca, cb] = [await client(a.port), await client(b.port)];
      if (cb.error !== undefined || ca.error !== undefined) {
        if (ca.error !== cb.error) problems.push(`the ai client failed: ${cb.error} (server.mjs: ${ca.error})`);
        said = `threw "${cb.error}", as from server.mjs`;
      } else if (!cb.message) problems.push('the ai client built no message from the lean bridge');
      else if (strip(ca.message) !== strip(cb.message)) problems.push('the ai client built different messages');
      else said = `${cb.updates} updates, parts ${cb.message.parts.map((p) => p.type).join(',')}`;
    }
    const chunks = rb.text.split('\n\n').filter(Boolean).length;
    if (problems.length === 0) console.log(`ok   ${name}: ${chunks} SSE chunks, same as server.mjs; ai client: ${said}`);
    else {
      console.log(`${held ? 'FAIL' : 'note'} ${name}: ${problems.join('\n  ')}`);
      if (held) failed += 1;
    }
  } finally {
    await stop(a);
    await stop(b);
  }
}
upstream.close();
console.log(failed ? `${failed} failed` : 'all held streams: same output, read by the ai client');
process.exit(failed ? 1 : 0);
