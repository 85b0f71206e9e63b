#!/usr/bin/env node
// Serve a captured body (for example babelgate's output) to a real client,
// through the same server as the probes, and print what the client ends in.
//
//   node tests/node/probes/cut-stream/replay.mjs vercel|ag-ui|agkit FILE [clean|destroy|reset]

import fs from 'node:fs';
import http from 'node:http';
import { describe } from './lib.mjs';

const [dialect, file, end = 'clean'] = process.argv.slice(2);
const body = fs.readFileSync(file);

const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', async () => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-vercel-ai-ui-message-stream': 'v1' });
    res.write(body);
    if (end === 'clean') return res.end();
    await new Promise((r) => setTimeout(r, 50));
    if (end === 'destroy') req.socket.destroy();
    else req.socket.resetAndDestroy();
  });
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/`;
let out;
try {
  if (dialect === 'vercel') {
    const m = await import('./vercel.mjs');
    out = { chat: await m.runChat(url), readUIMessageStream: await m.runReader(url) };
  } else if (dialect === 'ag-ui') out = await (await import('./agui.mjs')).run(url);
  else if (dialect === 'agkit') out = await (await import('./agkit.mjs')).run(url);
  else throw new Error(`unknown dialect ${dialect}`);
} catch (e) {
  out = { probeFailed: describe(e) };
}
server.closeAllConnections();
server.close();
console.log(JSON.stringify({ dialect, file, end, ...out }));
