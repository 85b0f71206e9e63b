#!/usr/bin/env node
// Comparison (d2) of crates/tools/bench/run.sh: the same bridge as server.mjs (an AG-UI
// agent behind a Vercel AI SDK UI client), written the cheapest way the
// official packages allow, without HttpAgent.runAgent's message assembly
// (its middleware chain, event verification, message and state bookkeeping
// and subscriber calls on every event):
//
//   fetch(upstream) -> @ag-ui/client's runHttpRequest + transformHttpEventStream
//   (the client's own SSE parsing, as HttpAgent.run uses it) -> transformChunks
//   (the *_CHUNK shorthand expanded, as runAgent does first) -> the same hand
//   mapping (agui-to-ui.mjs) -> createUIMessageStream's writer ->
//   JsonToSseTransformStream -> the Node response, with the headers
//   pipeUIMessageStreamToResponse sets.
//
// The one liberty against pipeUIMessageStreamToResponse: the SSE strings go
// to the socket without a TextEncoderStream hop, and the writes of one event
// loop turn are corked into one syscall (a chunk per write otherwise).
//
//   node crates/tools/bench/node/server-lean.mjs --port 8084 --upstream http://127.0.0.1:9100/agent
import http from 'node:http';
import { runHttpRequest, transformChunks, transformHttpEventStream } from '@ag-ui/client';
import { createUIMessageStream, JsonToSseTransformStream, UI_MESSAGE_STREAM_HEADERS } from 'ai';
import { AgUiToUi } from './agui-to-ui.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const port = Number(arg('port', '8084'));
const upstream = arg('upstream', 'http://127.0.0.1:9100/agent');

let runs = 0;

async function handle(req, res) {
  let body = '';
  for await (const chunk of req) body += chunk;
  let messages = [];
  try {
    messages = JSON.parse(body).messages ?? [];
  } catch {
    res.writeHead(400).end();
    return;
  }
  runs += 1;
  const headers = { 'content-type': 'application/json', accept: 'text/event-stream' };
  if (req.headers['x-bench']) headers['x-bench'] = req.headers['x-bench'];
  // The RunAgentInput HttpAgent would send for the same request.
  const input = JSON.stringify({
    threadId: `t-${runs}`,
    runId: `r-${runs}`,
    tools: [],
    context: [],
    forwardedProps: {},
    state: {},
    messages: messages.map((m) => ({
      id: m.id,
      role: m.role,
      content: (m.parts ?? []).filter((p) => p.type === 'text').map((p) => p.text).join(''),
    })),
  });
  const abort = new AbortController();
  const stream = createUIMessageStream({
    execute: ({ writer }) =>
      new Promise((resolve, reject) => {
        const map = new AgUiToUi(writer);
        const events = transformHttpEventStream(
          runHttpRequest(() => fetch(upstream, { method: 'POST', headers, body: input, signal: abort.signal })),
        ).pipe(transformChunks());
        events.subscribe({ next: (e) => map.event(e), error: reject, complete: resolve });
      }),
    onError: (e) => String(e?.message ?? e),
  }).pipeThrough(new JsonToSseTransformStream());

  res.writeHead(200, UI_MESSAGE_STREAM_HEADERS);
  const reader = stream.getReader();
  res.once('close', () => {
    if (!res.writableFinished) {
      abort.abort();
      reader.cancel(new Error('Client disconnected.')).catch(() => {});
    }
  });
  let corked = false;
  const uncork = () => {
    corked = false;
    res.uncork();
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done || res.destroyed) break;
    if (!corked) {
      corked = true;
      res.cork();
      setImmediate(uncork);
    }
    if (!res.write(value)) {
      uncork();
      await new Promise((resolve) => {
        const go = () => {
          res.off('drain', go);
          res.off('close', go);
          resolve();
        };
        res.on('drain', go);
        res.on('close', go);
      });
    }
  }
  if (!res.destroyed) res.end();
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    if (!res.headersSent) res.writeHead(500);
    res.end(String(e));
  });
});
server.keepAliveTimeout = 0;
server.listen(port, '127.0.0.1', 4096, () => console.log(`node lean comparison on http://127.0.0.1:${port}/api/chat`));
process.on('SIGTERM', () => process.exit(0));
