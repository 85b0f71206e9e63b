// A real client that stops reading (issue 37, part C): the `ai` package's
// DefaultChatTransport reads a few chunks of a long answer and then reads no
// more. Node's fetch stops taking bytes once its buffers are full, so the
// gateway's writes stall; after the route's `client_stall_timeout_ms` the
// gateway gives up on it as on a client that left: the upstream request is
// cancelled and `babelgate_client_stalls_total{reason="socket"}` counts it.
// The raw-socket, WebSocket, HTTP/2 and TLS cases are in
// crates/app/babelgate/tests/client_stall.rs.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { DefaultChatTransport } from 'ai';
import { BABELGATE, REPO_ROOT, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';

const HANG_GUARD = { timeout: 90_000 };
const toml = (s) => JSON.stringify(s);

let gatewayProc;
let gateway;
let upstream;
const seen = { requests: 0, cancelled: 0 };

/** An AG-UI agent with an endless answer, written as fast as it is taken
 *  (it waits for `drain`, so it holds nothing the gateway does not take). */
async function startUpstream() {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      seen.requests++;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const ev = (e) => `data: ${JSON.stringify(e)}\n\n`;
      res.write(ev({ type: 'RUN_STARTED', threadId: 't', runId: 'r' }));
      res.write(ev({ type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' }));
      const delta = ev({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'x'.repeat(4096) });
      let closed = false;
      let wake = () => {};
      res.on('drain', () => wake());
      res.on('close', () => {
        closed = true;
        seen.cancelled++;
        wake();
      });
      while (!closed) {
        if (!res.write(delta)) await new Promise((r) => (wake = r));
      }
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, base: `127.0.0.1:${server.address().port}` };
}

before(async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'client-stall');
  fs.mkdirSync(logDir, { recursive: true });
  upstream = await startUpstream();
  const port = await freePort();
  const config = path.join(logDir, 'client-stall.gateway.toml');
  fs.writeFileSync(
    config,
    `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\n\n[[routes]]\npath = "/chat"\nclient = "vercel"\n` +
      `upstream = ${toml(`http://${upstream.base}/agent`)}\nupstream_protocol = "ag-ui"\nresume = false\n` +
      `client_stall_timeout_ms = 300\n`,
  );
  gatewayProc = launch('babelgate', BABELGATE, ['serve', '--config', config], logDir);
  gateway = `http://127.0.0.1:${port}`;
  await waitReady(gatewayProc, `${gateway}/healthz`);
});

after(async () => {
  if (gatewayProc) await stopProc(gatewayProc);
  upstream?.server.closeAllConnections();
  upstream?.server.close();
});

/** Polls until `cond()` holds; the bound only matters when it never does. */
async function eventually(what, cond, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    assert.ok(Date.now() < deadline, `not within ${ms / 1000} s: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('an ai-package client that stops reading is given up on, its upstream cancelled', HANG_GUARD, async () => {
  const transport = new DefaultChatTransport({ api: `${gateway}/chat` });
  const stream = await transport.sendMessages({
    chatId: 'conv-stall',
    trigger: 'submit-message',
    messageId: undefined,
    messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'a very long answer please' }] }],
    abortSignal: undefined,
  });
  const reader = stream.getReader();
  const got = [];
  while (got.length < 5) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the stream ended early');
    got.push(value.type);
  }
  assert.deepEqual(got.slice(0, 2), ['start', 'start-step']);
  // The client now reads nothing (the reader is kept, not cancelled).
  await eventually('the upstream request is cancelled', () => seen.cancelled === 1);
  const metrics = await (await fetch(`${gateway}/metrics`)).text();
  assert.match(metrics, /babelgate_client_stalls_total\{reason="socket"\} 1\b/);
  assert.match(metrics, /babelgate_requests_total\{route="\/chat",status="499"\} 1\b/);
  // What was buffered can still be read; then the stream ends, cut (no
  // `finish`): the client sees a failure, not a complete answer.
  const types = new Set();
  let failed = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      types.add(value.type);
    }
  } catch {
    failed = true;
  }
  assert.ok(failed || !types.has('finish'), `the stream ended as complete: ${[...types]}`);
  assert.equal(seen.requests, 1);
});
