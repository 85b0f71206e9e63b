#!/usr/bin/env node
// Live cut-stream probe: `babelgate serve` in front of a tiny AG-UI upstream
// that cuts its stream, one route per client dialect. For each route and
// each way of cutting, it records the gateway's raw answer (status, body,
// whether the body ended cleanly or with a transport error) and runs the
// real client (ai Chat, @ag-ui/client HttpAgent, AG-Kit useChat; HAI has no
// client package, so tests/node/lib/hai-rules.mjs reads its body).
//
//   node tests/node/probes/cut-stream/serve.mjs [path/to/babelgate]
//
// Upstream paths: /clean (frames, then a clean end without RUN_FINISHED or
// RUN_ERROR), /destroy (frames, then socket.destroy()), /reset (frames, then
// a TCP reset), /error (frames, then RUN_ERROR and a clean end: the control).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { haiEnding, haiViolations } from '../../lib/hai-rules.mjs';
import { describe } from './lib.mjs';
import { run as runAgui } from './agui.mjs';
import { run as runAgkit } from './agkit.mjs';
import { runChat } from './vercel.mjs';

const BABELGATE = process.argv[2] ?? '/work/main/target/debug/babelgate';
const MODES = ['clean', 'destroy', 'reset', 'error'];

const upstream = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (d) => { raw += d; });
  req.on('end', async () => {
    let input = {};
    try { input = JSON.parse(raw); } catch { /* keep defaults */ }
    const threadId = input.threadId ?? 'thread-1';
    const runId = input.runId ?? 'run-1';
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (e) => res.write(`data: ${JSON.stringify(e)}\n\n`);
    send({ type: 'RUN_STARTED', threadId, runId });
    send({ type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' });
    send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'partial answer' });
    const mode = req.url.slice(1);
    if (mode === 'error') {
      send({ type: 'RUN_ERROR', message: 'agent failed', code: 'agent_failed' });
      return res.end();
    }
    if (mode === 'clean') return res.end();
    await new Promise((r) => setTimeout(r, 50));
    if (mode === 'destroy') req.socket.destroy();
    else req.socket.resetAndDestroy();
  });
});

const listen = (srv) => new Promise((r) => srv.listen(0, '127.0.0.1', () => r(srv.address().port)));
const freePort = async () => { const s = http.createServer(); const p = await listen(s); await new Promise((r) => s.close(r)); return p; };

const upPort = await listen(upstream);
const gwPort = await freePort();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cut-stream-'));
const config = path.join(dir, 'gateway.toml');
const routes = [];
for (const client of ['vercel', 'ag-ui', 'agkit', 'hai']) {
  for (const mode of MODES) {
    routes.push(`[[routes]]\npath = "/${client}/${mode}"\nclient = "${client}"\nupstream = "http://127.0.0.1:${upPort}/${mode}"\nupstream_protocol = "ag-ui"\n`);
  }
}
fs.writeFileSync(config, `[server]\nlisten = "127.0.0.1:${gwPort}"\n\n${routes.join('\n')}`);
const gwLog = fs.openSync(path.join(dir, 'babelgate.log'), 'w');
const gw = spawn(BABELGATE, ['serve', '--config', config], { stdio: ['ignore', gwLog, gwLog] });
const base = `http://127.0.0.1:${gwPort}`;
for (let i = 0; ; i++) {
  try { if ((await fetch(`${base}/healthz`)).ok) break; } catch { /* not yet */ }
  if (i > 100) throw new Error(`babelgate did not start: ${fs.readFileSync(path.join(dir, 'babelgate.log'), 'utf8')}`);
  await new Promise((r) => setTimeout(r, 100));
}

const REQUESTS = {
  vercel: { id: 'chat-1', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }], trigger: 'submit-message' },
  'ag-ui': { threadId: 'thread-1', runId: 'run-1', state: {}, messages: [{ id: 'u1', role: 'user', content: 'hi' }], tools: [], context: [], forwardedProps: {} },
  hai: { threadId: 'thread-1', runId: 'run-1', state: {}, messages: [{ id: 'u1', role: 'user', content: 'hi' }], tools: [], context: [], forwardedProps: {} },
  agkit: { messages: [{ role: 'user', content: 'hi' }], conversationId: 'conversation-1' },
};

/** The gateway's raw answer, and how its body ended. */
async function raw(client, url) {
  const res = await fetch(url, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(REQUESTS[client]),
  });
  const chunks = [];
  let bodyEnd = 'clean end';
  try {
    for await (const c of res.body) chunks.push(Buffer.from(c));
  } catch (e) {
    bodyEnd = `transport error: ${describe(e)}`;
  }
  const body = Buffer.concat(chunks).toString('utf8');
  // The data lines only (the gateway also writes `id:` lines).
  const frames = body.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim());
  return { status: res.status, bodyEnd, frames, body };
}

const rows = [];
try {
  for (const client of ['vercel', 'ag-ui', 'agkit', 'hai']) {
    for (const mode of MODES) {
      const url = `${base}/${client}/${mode}`;
      const row = { client, upstream: mode, gateway: await raw(client, url) };
      if (client === 'vercel') row.realClient = await runChat(url);
      else if (client === 'ag-ui') row.realClient = await runAgui(url);
      else if (client === 'agkit') row.realClient = await runAgkit(url);
      else {
        const text = row.gateway.body;
        row.haiRules = { ending: haiEnding(text), violations: haiViolations(text) };
      }
      delete row.gateway.body;
      rows.push(row);
    }
  }
} finally {
  gw.kill('SIGTERM');
  upstream.closeAllConnections();
  upstream.close();
}
console.log(`# babelgate serve (${BABELGATE}), AG-UI upstream cut four ways`);
for (const r of rows) console.log(JSON.stringify(r));
