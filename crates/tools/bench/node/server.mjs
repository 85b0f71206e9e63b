#!/usr/bin/env node
// Comparison (d) of crates/tools/bench/run.sh: what an application writes today to put a
// Vercel AI SDK UI (useChat) in front of an AG-UI agent, without babelgate.
// @ag-ui/client's HttpAgent runs the agent; every event goes through the
// hand mapping (agui-to-ui.mjs) into createUIMessageStream's writer; the
// response is pipeUIMessageStreamToResponse's.
//
//   node crates/tools/bench/node/server.mjs --port 8082 --upstream http://127.0.0.1:9100/agent
import http from 'node:http';
import { HttpAgent } from '@ag-ui/client';
import { createUIMessageStream, pipeUIMessageStreamToResponse } from 'ai';
import { AgUiToUi } from './agui-to-ui.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const port = Number(arg('port', '8082'));
const upstream = arg('upstream', 'http://127.0.0.1:9100/agent');

// The agent's own warnings about unknown fields are not what is measured.
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = 'true';

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
  const headers = {};
  if (req.headers['x-bench']) headers['x-bench'] = req.headers['x-bench'];
  const agent = new HttpAgent({ url: upstream, headers, threadId: `t-${runs}` });
  agent.messages = messages.map((m) => ({
    id: m.id,
    role: m.role,
    content: (m.parts ?? []).filter((p) => p.type === 'text').map((p) => p.text).join(''),
  }));
  const stream = createUIMessageStream({
    async execute({ writer }) {
      const map = new AgUiToUi(writer);
      await agent.runAgent({ runId: `r-${runs}` }, { onEvent: ({ event }) => map.event(event) });
    },
    onError: (e) => String(e?.message ?? e),
  });
  pipeUIMessageStreamToResponse({ response: res, stream });
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    if (!res.headersSent) res.writeHead(500);
    res.end(String(e));
  });
});
server.keepAliveTimeout = 0;
server.listen(port, '127.0.0.1', 4096, () => console.log(`node comparison on http://127.0.0.1:${port}/api/chat`));
process.on('SIGTERM', () => process.exit(0));
