// Shared by the cut-stream probes: a local HTTP server that answers one
// request with a crafted body and ends it in one of four ways, so that the
// REAL client packages (not babelgate's decoders) can be run against it.
//
//   end: 'clean'   every frame written, then res.end() (a clean end of body)
//   end: 'destroy' frames written, then socket.destroy() before the chunked
//                  terminator (the connection closes, FIN, mid-body)
//   end: 'reset'   frames written, then socket.resetAndDestroy() (TCP RST)
//   status: N      answer N with a JSON error body before any stream
//
// Frames are SSE `data:` payloads (strings); an object is JSON-encoded.

import http from 'node:http';

export const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
};

export async function withServer({ frames = [], end = 'clean', status = 200, headers = SSE_HEADERS }, fn) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      if (status >= 400) {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'upstream failed' }));
        return;
      }
      res.writeHead(200, headers);
      for (const f of frames) res.write(`data: ${typeof f === 'string' ? f : JSON.stringify(f)}\n\n`);
      if (end === 'clean') {
        res.end();
        return;
      }
      // Let the frames reach the client before the connection goes.
      await new Promise((r) => setTimeout(r, 50));
      if (end === 'destroy') req.socket.destroy();
      else if (end === 'reset') req.socket.resetAndDestroy();
      else throw new Error(`unknown end ${end}`);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/`;
  try {
    return await fn(url);
  } finally {
    server.closeAllConnections?.();
    await new Promise((r) => server.close(r));
  }
}

/** Error → short text (name, message, cause). */
export function describe(err) {
  if (err == null) return null;
  if (!(err instanceof Error)) return typeof err === 'string' ? err : JSON.stringify(err);
  let s = `${err.name}: ${err.message}`;
  if (err.cause) s += ` (cause: ${describe(err.cause)})`;
  return s.slice(0, 200);
}

/** Run a variant with a timeout so a client that never settles is recorded as such. */
export function timeout(promise, ms = 5000) {
  return Promise.race([promise, new Promise((r) => setTimeout(() => r({ hung: `did not settle in ${ms} ms` }), ms))]);
}

export function printTable(dialect, rows) {
  console.log(`# ${dialect}`);
  for (const r of rows) console.log(JSON.stringify(r));
}
