#!/usr/bin/env node
// Whole-process AG-UI -> Vercel translation with the official SDKs, the
// comparison for `babelgate translate --from ag-ui --to vercel FILE`:
//
//   node crates/tools/bench/node/translate.mjs FILE > out.sse
//
// The file's bytes go through @ag-ui/client's transformHttpEventStream (the
// client's own SSE parsing and event decoding), each event is mapped by hand
// (agui-to-ui.mjs) into createUIMessageStream's writer, and the chunks are
// serialized by JsonToSseTransformStream, as a route handler would.
import fs from 'node:fs';
import { once } from 'node:events';
import { transformHttpEventStream } from '@ag-ui/client';
import { createUIMessageStream, JsonToSseTransformStream } from 'ai';
import { Subject } from 'rxjs';
import { AgUiToUi } from './agui-to-ui.mjs';

const file = process.argv[2];
if (!file) {
  console.error('usage: node translate.mjs FILE');
  process.exit(2);
}

const stream = createUIMessageStream({
  execute: ({ writer }) =>
    new Promise((resolve, reject) => {
      const map = new AgUiToUi(writer);
      const source = new Subject();
      transformHttpEventStream(source).subscribe({
        next: (e) => map.event(e),
        error: reject,
        complete: resolve,
      });
      source.next({ type: 'headers', status: 200, headers: new Headers({ 'content-type': 'text/event-stream' }) });
      const input = fs.createReadStream(file, { highWaterMark: 64 * 1024 });
      input.on('data', (data) => source.next({ type: 'data', data }));
      input.on('end', () => source.complete());
      input.on('error', (err) => source.error(err));
    }),
});

const out = process.stdout;
for await (const text of stream.pipeThrough(new JsonToSseTransformStream())) {
  if (!out.write(text)) await once(out, 'drain');
}
