#!/usr/bin/env node
// Write Vercel AI SDK UI-message-stream fixtures with the `ai` package itself.
//
//   node make-fixtures.mjs OUTDIR            write OUTDIR/<scenario>.sse
//   node make-fixtures.mjs OUTDIR --check    regenerate in memory, fail on any difference
//
// Chunks go through createUIMessageStream + writer.write() and the bytes come
// from createUIMessageStreamResponse's body, i.e. exactly what a Next.js route
// returning that Response would put on the wire (JSON.stringify framing and the
// closing `data: [DONE]`). Ids are fixed so the output is deterministic.
// Two fixtures are edited after generation, on purpose and only there:
// cut_mid_message (bytes truncated) and unknown_events (one made-up chunk).

import { createUIMessageStream, createUIMessageStreamResponse } from 'ai';
import fs from 'node:fs';
import path from 'node:path';

// Same text, same delta boundaries as CHAT_DELTAS in tests/python/make_fixtures.py.
const CHAT_DELTAS = [
  '你好，世界',
  '! 🎉👍',
  '🏽 He said "hi" and C:\\temp\\',
  'new\nline two\u2028after LS',
  '\n\ndone.',
];

const text = (id, deltas) => [
  { type: 'text-start', id },
  ...deltas.map((delta) => ({ type: 'text-delta', id, delta })),
  { type: 'text-end', id },
];

const toolInput = (toolCallId, toolName, deltas, input) => [
  { type: 'tool-input-start', toolCallId, toolName },
  ...deltas.map((inputTextDelta) => ({ type: 'tool-input-delta', toolCallId, inputTextDelta })),
  { type: 'tool-input-available', toolCallId, toolName, input },
];

const start = { type: 'start', messageId: 'msg-1' };
const startStep = { type: 'start-step' };
const finishStep = { type: 'finish-step' };
const finish = (finishReason) => ({ type: 'finish', finishReason });

// Each scenario: the chunks to write, plus an optional edit of the produced text.
const SCENARIOS = {
  chat: {
    chunks: [start, startStep, ...text('txt-1', CHAT_DELTAS), finishStep, finish('stop')],
  },
  // No tool output: the browser runs change_background (onToolCall / addToolOutput).
  frontend_tool: {
    chunks: [
      start, startStep,
      ...text('txt-1', ['Sure, changing the background to red.']),
      ...toolInput('tc-1', 'change_background', ['{"col', 'or":"#ff', '0000"}'], { color: '#ff0000' }),
      finishStep, finish('tool-calls'),
    ],
  },
  server_tool: {
    chunks: [
      start, startStep,
      ...toolInput('tc-1', 'get_weather', ['{"city":', '"北京"}'], { city: '北京' }),
      { type: 'tool-output-available', toolCallId: 'tc-1', output: { city: '北京', temperature: 22, condition: 'sunny' } },
      finishStep, startStep,
      ...text('txt-1', ['北京今天晴，', '气温 22°C。']),
      finishStep, finish('stop'),
    ],
  },
  hitl_confirm: {
    chunks: [
      start, startStep,
      ...toolInput('tc-1', 'confirm_action', ['{"action":"delete_file",', '"path":"/tmp/report.txt"}'],
        { action: 'delete_file', path: '/tmp/report.txt' }),
      { type: 'tool-approval-request', approvalId: 'appr-1', toolCallId: 'tc-1' },
      finishStep, finish('tool-calls'),
    ],
  },
  // An approval the agent's own policy answers (streamText's `toolApproval`,
  // 'approved'): request and answer in one stream, and the run goes on.
  // The chunks are the ones streamText writes for it.
  auto_approval: {
    chunks: [
      start, startStep,
      ...toolInput('tc-1', 'get_weather', ['{"city":"北京"}'], { city: '北京' }),
      { type: 'tool-approval-request', approvalId: 'appr-1', toolCallId: 'tc-1', isAutomatic: true },
      { type: 'tool-approval-response', approvalId: 'appr-1', approved: true },
      { type: 'tool-output-available', toolCallId: 'tc-1', output: { city: '北京', temperature: 22 } },
      finishStep, startStep,
      ...text('txt-1', ['北京今天晴。']),
      finishStep, finish('stop'),
    ],
  },
  // A generator tool (execute: async function*): each yield is a
  // `preliminary` output, the last one the call's output. The chunks are
  // the ones streamText writes for it.
  preliminary_output: {
    chunks: [
      start, startStep,
      ...toolInput('tc-1', 'get_weather', ['{"city":"北京"}'], { city: '北京' }),
      { type: 'tool-output-available', toolCallId: 'tc-1', output: { status: 'loading' }, preliminary: true },
      { type: 'tool-output-available', toolCallId: 'tc-1', output: { city: '北京', temperature: 22 }, preliminary: true },
      { type: 'tool-output-available', toolCallId: 'tc-1', output: { city: '北京', temperature: 22 } },
      finishStep, startStep,
      ...text('txt-1', ['北京今天晴。']),
      finishStep, finish('stop'),
    ],
  },
  // A tool call whose input does not parse, and a tool that throws: the
  // chunks streamText writes for them (reasoning sent), then the answer.
  tool_errors: {
    chunks: [
      start, startStep,
      { type: 'reasoning-start', id: 'r1' },
      { type: 'reasoning-delta', id: 'r1', delta: 'Looking it up.' },
      { type: 'reasoning-end', id: 'r1' },
      { type: 'tool-input-start', toolCallId: 'tc-1', toolName: 'get_weather' },
      { type: 'tool-input-delta', toolCallId: 'tc-1', inputTextDelta: '{"city":' },
      {
        type: 'tool-input-error', toolCallId: 'tc-1', toolName: 'get_weather', input: '{"city":',
        errorText: 'AI_InvalidToolInputError: Invalid input for tool get_weather: AI_JSONParseError: JSON parsing failed: Text: {"city":.\nError message: SyntaxError: Unexpected end of JSON input',
      },
      { type: 'tool-input-available', toolCallId: 'tc-2', toolName: 'boom', input: {} },
      { type: 'tool-output-error', toolCallId: 'tc-2', errorText: 'Error: kaboom' },
      finishStep, startStep,
      ...text('txt-1', ['Sorry, that did not work.']),
      finishStep, finish('stop'),
    ],
  },
  // The request's AbortSignal fired mid-answer: streamText writes `abort`,
  // closing nothing, then the stream ends.
  aborted: {
    chunks: [
      start, startStep,
      { type: 'text-start', id: 'txt-1' },
      { type: 'text-delta', id: 'txt-1', delta: 'Hello ' },
      { type: 'abort', reason: 'AbortError: This operation was aborted' },
    ],
  },
  parallel_tools: {
    chunks: [
      start, startStep,
      { type: 'tool-input-start', toolCallId: 'tc-1', toolName: 'get_weather' },
      { type: 'tool-input-start', toolCallId: 'tc-2', toolName: 'get_time' },
      { type: 'tool-input-delta', toolCallId: 'tc-1', inputTextDelta: '{"city":' },
      { type: 'tool-input-delta', toolCallId: 'tc-2', inputTextDelta: '{"timezone":' },
      { type: 'tool-input-delta', toolCallId: 'tc-1', inputTextDelta: '"Paris"}' },
      { type: 'tool-input-delta', toolCallId: 'tc-2', inputTextDelta: '"Europe/Paris"}' },
      { type: 'tool-input-available', toolCallId: 'tc-1', toolName: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool-input-available', toolCallId: 'tc-2', toolName: 'get_time', input: { timezone: 'Europe/Paris' } },
      { type: 'tool-output-available', toolCallId: 'tc-1', output: { temperature: 18 } },
      { type: 'tool-output-available', toolCallId: 'tc-2', output: { time: '14:05' } },
      finishStep, finish('stop'),
    ],
  },
  // Vercel has no state channel; state travels as data-state parts (one
  // snapshot, one RFC 6902 patch), mirroring the AG-UI `state` fixture.
  state: {
    chunks: [
      start, startStep,
      { type: 'data-state', data: { type: 'snapshot', snapshot: { counter: 0, items: ['a'], user: { name: 'Ada', draft: true } } } },
      {
        type: 'data-state',
        data: {
          type: 'delta',
          delta: [
            { op: 'add', path: '/items/-', value: 'b' },
            { op: 'replace', path: '/counter', value: 1 },
            { op: 'remove', path: '/user/draft' },
          ],
        },
      },
      ...text('txt-1', ['State updated.']),
      finishStep, finish('stop'),
    ],
  },
  reasoning: {
    chunks: [
      start, startStep,
      { type: 'reasoning-start', id: 'rsn-1' },
      ...['The user wants ', 'a greeting; ', 'answer briefly.'].map((delta) => ({ type: 'reasoning-delta', id: 'rsn-1', delta })),
      { type: 'reasoning-end', id: 'rsn-1' },
      ...text('txt-1', ['Hello!']),
      finishStep, finish('stop'),
    ],
  },
  run_error: {
    chunks: [start, startStep, ...text('txt-1', ['Let me look that up', '...']), { type: 'error', errorText: 'upstream model timed out' }, finishStep, finish('error')],
  },
  // The server dies mid-message: the package would still close the stream
  // with [DONE], so the tail is cut off by hand.
  cut_mid_message: {
    chunks: [
      start, startStep,
      { type: 'text-start', id: 'txt-1' },
      { type: 'text-delta', id: 'txt-1', delta: 'This answer is cut ' },
      { type: 'text-delta', id: 'txt-1', delta: 'off in the mid' },
    ],
    edit: (sse) => {
      const done = 'data: [DONE]\n\n';
      if (!sse.endsWith(done)) throw new Error('cut_mid_message: expected the stream to end with [DONE]');
      return sse.slice(0, -done.length);
    },
  },
  unknown_events: {
    chunks: [
      start, startStep,
      { type: 'data-custom', data: { name: 'progress', value: { percent: 50, label: 'halfway' } }, transient: true },
      { type: 'message-metadata', messageMetadata: { model: 'acme-1', step: 'compose' } },
      { type: 'source-url', sourceId: 'src-1', url: 'https://example.com/doc', title: 'Example doc' },
      ...text('txt-1', ['Chunked ', 'hello', '!']),
      finishStep, finish('stop'),
    ],
    // A chunk type from some future protocol version; the package cannot
    // write one, so the frame is spliced in by hand after the source-url.
    edit: (sse) => {
      const anchor = sse.indexOf('data: {"type":"source-url"');
      const cut = sse.indexOf('\n\n', anchor) + 2;
      if (anchor < 0 || cut < 2) throw new Error('unknown_events: source-url frame not found');
      return sse.slice(0, cut) + 'data: {"type":"future-chunk"}\n\n' + sse.slice(cut);
    },
  },
};

async function render({ chunks, edit }) {
  const stream = createUIMessageStream({
    execute: ({ writer }) => {
      for (const chunk of chunks) writer.write(chunk);
    },
    generateId: () => 'unused-generated-id', // never written: every start carries messageId
  });
  const response = createUIMessageStreamResponse({ stream });
  const sse = new TextDecoder().decode(await response.arrayBuffer());
  return edit ? edit(sse) : sse;
}

async function main() {
  const args = process.argv.slice(2);
  const check = args.includes('--check');
  const dirs = args.filter((a) => a !== '--check');
  if (dirs.length !== 1) {
    console.error('usage: node make-fixtures.mjs OUTDIR [--check]');
    process.exit(2);
  }
  const outdir = dirs[0];
  const problems = [];
  if (!check) fs.mkdirSync(outdir, { recursive: true });

  for (const [name, scenario] of Object.entries(SCENARIOS)) {
    const bytes = Buffer.from(await render(scenario), 'utf8');
    const file = path.join(outdir, `${name}.sse`);
    if (!check) {
      fs.writeFileSync(file, bytes);
    } else if (!fs.existsSync(file)) {
      problems.push(`missing ${file}`);
    } else if (!fs.readFileSync(file).equals(bytes)) {
      problems.push(`${file} differs from what the ai package writes now`);
    }
  }
  if (check) {
    for (const f of fs.readdirSync(outdir)) {
      if (f.endsWith('.sse') && !(path.basename(f, '.sse') in SCENARIOS)) problems.push(`unexpected fixture ${path.join(outdir, f)}`);
    }
  }
  if (problems.length) {
    for (const p of problems) console.error(p);
    console.error(`regenerate with: node tests/node/make-fixtures.mjs ${outdir}`);
    process.exit(1);
  }
}

await main();
