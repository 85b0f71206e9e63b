#!/usr/bin/env node
// Writes the byte corpus of AG-UI's protobuf format with the reference package
// itself, @ag-ui/proto 1.0.0 (and @ag-ui/encoder 1.0.0 for the framed stream).
//
//   node proto-corpus.mjs OUTDIR            write OUTDIR/{corpus.jsonl,stream.bin,stream.jsonl,dist-fields.txt}
//   node proto-corpus.mjs OUTDIR --check    regenerate in memory, fail on any difference
//
// corpus.jsonl: one line per distinct AG-UI event of tests/fixtures/ag-ui/*.sse and
// tests/fixtures/oracle*/*.ag-ui.sse: the event's JSON text as the fixture has it,
// encode()'s bytes (hex), and what decode() gives back for those bytes.
// stream.bin: every event of tests/fixtures/ag-ui/chat.sse and reasoning.sse through
// EventEncoder's proto mode (4-byte big-endian length, then the message);
// stream.jsonl: decode() of each of those messages, in order.
// dist-fields.txt: every field (message, number, wire type) the package's generated
// code writes, read from its source map, so crates/lib/proto can check its vendored
// .proto against what 1.0.0 was really built from.

import { encode, decode } from '@ag-ui/proto';
import { EventEncoder } from '@ag-ui/encoder';
import { createParser } from 'eventsource-parser';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const [outDir, mode] = process.argv.slice(2);
if (!outDir) throw new Error('usage: proto-corpus.mjs OUTDIR [--check]');
// The package warns on stderr about events its schema rejects; the corpus keeps them.
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = '1';
console.warn = () => {};

const hex = (bytes) => Buffer.from(bytes).toString('hex');

/** One corpus line: the event's JSON, the reference's bytes and its decoding of them. */
function corpusLine(source, event, data) {
  const line = { source, json: data };
  try {
    const bytes = encode(event);
    line.bytes = hex(bytes);
    try { line.decoded = decode(bytes); } catch (err) { line.decodeError = String(err.message ?? err); }
  } catch (err) {
    line.encodeError = String(err.message ?? err);
  }
  return JSON.stringify(line);
}

function sseEvents(file) {
  const out = [];
  const parser = createParser({ onEvent: (e) => out.push(e.data) });
  parser.feed(fs.readFileSync(file, 'utf8'));
  return out;
}

function fixtures() {
  const files = [];
  const dirs = fs.readdirSync(path.join(root, 'tests/fixtures')).filter((d) => d === 'ag-ui' || d.startsWith('oracle')).sort();
  for (const dir of dirs) {
    for (const f of fs.readdirSync(path.join(root, 'tests/fixtures', dir)).sort()) {
      if (dir === 'ag-ui' ? f.endsWith('.sse') : f.endsWith('.ag-ui.sse')) files.push(`tests/fixtures/${dir}/${f}`);
    }
  }
  return files;
}

const files = {};
const seen = new Set();
const lines = [];
for (const file of fixtures()) {
  for (const data of sseEvents(path.join(root, file))) {
    let event;
    try { event = JSON.parse(data); } catch { continue; } // cut_mid_message's last frame
    if (!event || typeof event !== 'object' || typeof event.type !== 'string') continue;
    if (seen.has(data)) continue;
    seen.add(data);
    lines.push(corpusLine(file, event, data));
  }
}
// Events the fixtures have none of, so the mappings the reference applies to
// them are in the corpus too (source: this script).
const EXTRA = [
  { type: 'MESSAGES_SNAPSHOT', messages: [
    { id: 'd1', role: 'developer', content: 'be brief' },
    { id: 's1', role: 'system', content: 'sys', name: 'policy' },
    { id: 'u1', role: 'user', content: [{ type: 'text', text: 'hi' },
      { type: 'image', source: { type: 'url', value: 'https://x/y.png', mimeType: 'image/png' } },
      { type: 'document', source: { type: 'data', value: 'aGk=', mimeType: 'text/plain' }, metadata: { b: 1, a: 2 } }] },
    { id: 'u2', role: 'user', content: 'plain' },
    { id: 'a1', role: 'assistant', content: 'ok', toolCalls: [
      { id: 'c1', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }] },
    { id: 't1', role: 'tool', content: '42', toolCallId: 'c1' },
    { id: 'r1', role: 'reasoning', content: 'thinking' },
    { id: 'act1', role: 'activity', activityType: 'plan', content: { steps: ['a', 'b'] } }] },
  { type: 'ACTIVITY_SNAPSHOT', messageId: 'act1', activityType: 'plan', content: { z: 1, a: [1, 'two', null, false] } },
  { type: 'ACTIVITY_DELTA', messageId: 'act1', activityType: 'plan',
    patch: [{ op: 'replace', path: '/z', value: 2 }, { op: 'move', from: '/a', path: '/b' }, { op: 'test', path: '/b', value: [] }] },
  { type: 'CUSTOM', name: 'n', value: { 2: 0, k: 'v', 1: 0, nested: { y: 1.5, x: -3 } }, metadata: { trace: 't', n: null } },
  { type: 'CUSTOM', name: 'only-name' },
  { type: 'CUSTOM', name: 'null-value', value: null },
  { type: 'RAW', event: 'a string', source: 's', rawEvent: { original: true } },
  { type: 'RUN_FINISHED', threadId: 't', runId: 'r', result: { answer: 42 },
    outcome: { type: 'success', pendingToolCallIds: ['c1', 'c2'] },
    usage: [{ provider: 'p', model: 'm', inputTokens: 10, outputTokens: 5, totalTokens: 15 }] },
  { type: 'RUN_FINISHED', threadId: 't', runId: 'r', outcome: { type: 'cancelled' } },
  { type: 'RUN_ERROR', message: 'boom', code: 'E1', usage: [{ inputTokens: 1 }] },
  { type: 'RUN_STARTED', threadId: 't', runId: 'r', parentRunId: 'p',
    input: { threadId: 't', runId: 'r', state: { s: 1 }, messages: [{ id: 'u1', role: 'user', content: 'hi' }],
      tools: [{ name: 'f', description: 'does f', parameters: { type: 'object' } }], context: [{ description: 'd', value: 'v' }],
      forwardedProps: { fp: true } } },
  { type: 'TOOL_CALL_RESULT', messageId: 'm', toolCallId: 'c', content: [{ type: 'text', text: 'part' }] },
  { type: 'TOOL_CALL_CHUNK', toolCallId: 'c', toolCallName: 'f', parentMessageId: 'm', delta: '{' },
  { type: 'REASONING_MESSAGE_CHUNK', messageId: 'r', delta: 'hm' },
  { type: 'STATE_SNAPSHOT', snapshot: { big: 9007199254740991, neg: -0.5, s: 'é\u2028', list: [[], {}] }, timestamp: 1 },
  { type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant', metadata: { k: [1, 2] }, timestamp: 0 },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: '', delta: '' },
];
for (const event of EXTRA) {
  const data = JSON.stringify(event);
  lines.push(corpusLine('tests/node/proto-corpus.mjs', event, data));
}
files['corpus.jsonl'] = lines.join('\n') + '\n';

const encoder = new EventEncoder({ accept: 'application/vnd.ag-ui.event+proto' });
if (encoder.getContentType() !== 'application/vnd.ag-ui.event+proto') throw new Error('encoder did not pick proto');
const chunks = [];
const streamDecoded = [];
for (const f of ['tests/fixtures/ag-ui/chat.sse', 'tests/fixtures/ag-ui/reasoning.sse']) {
  for (const data of sseEvents(path.join(root, f))) {
    const framed = encoder.encodeBinary(JSON.parse(data));
    chunks.push(Buffer.from(framed));
    streamDecoded.push(JSON.stringify(decode(framed.subarray(4))));
  }
}
files['stream.bin'] = Buffer.concat(chunks);
files['stream.jsonl'] = streamDecoded.join('\n') + '\n';

// Field layout from the generated code in the source map (ts-proto writes each
// field as `writer.uint32(tag)` under a guard naming the field).
const require = createRequire(import.meta.url);
const dist = path.dirname(require.resolve('@ag-ui/proto'));
const map = JSON.parse(fs.readFileSync(path.join(dist, 'index.mjs.map'), 'utf8'));
const fields = [];
map.sources.forEach((source, i) => {
  if (!source.includes('/generated/')) return;
  const src = map.sourcesContent[i];
  const pkg = source.includes('google/protobuf') ? 'google.protobuf.' : '';
  const re = /export const (\w+): MessageFns<\w+>(?: & \w+)? = \{\s*encode\(message: \w+, writer[^{]*\{([\s\S]*?)\n {2}\},\s*decode/g;
  let m;
  while ((m = re.exec(src))) {
    let cur = null;
    for (const l of m[2].split('\n')) {
      let x;
      if ((x = l.match(/for \(const v of message\.(\w+)\)/))) cur = x[1];
      else if ((x = l.match(/if \(message\.(\w+) !== .*\) \{/))) cur = x[1];
      else if ((x = l.match(/Object\.entries\(message\.(\w+)\)/))) cur = x[1];
      if ((x = l.match(/writer\.uint32\((\d+)\)/)) && cur) {
        fields.push(`${pkg}${m[1].replace('_', '.')} ${cur} ${x[1] >> 3} ${x[1] & 7}`);
      }
    }
  }
});
files['dist-fields.txt'] = fields.sort().join('\n') + '\n';

let failed = false;
for (const [name, content] of Object.entries(files)) {
  const target = path.join(outDir, name);
  if (mode === '--check') {
    const have = fs.existsSync(target) ? fs.readFileSync(target) : Buffer.alloc(0);
    if (!have.equals(Buffer.from(content))) { console.error(`differs: ${target}`); failed = true; }
  } else {
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(target, content);
  }
}
if (failed) process.exit(1);
console.log(`${lines.length} events, ${chunks.length} framed`);
