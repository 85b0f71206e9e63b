// The @ag-ui/client and ai validators fail a broken stream in --dump mode
// (the mode tests/run.sh uses for the adapters' dumps).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lineFor, runValidator, sse } from './lib.mjs';

test('validate-agui.mjs --dump: a stream with no end and an out-of-order one fail', () => {
  const started = { type: 'RUN_STARTED', threadId: 't', runId: 'r' };
  const r = runValidator('validate-agui.mjs', ['--dump', '$DIR'], {
    'good.sse': sse(started, { type: 'RUN_FINISHED', threadId: 't', runId: 'r' }),
    'no-end.sse': sse(started, { type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant' }),
    'content-first.sse': sse(started, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'x' }, { type: 'RUN_FINISHED', threadId: 't', runId: 'r' }),
  });
  assert.equal(r.status, 1, r.lines.join('\n'));
  assert.match(lineFor(r.lines, 'good'), /^ok /);
  assert.match(lineFor(r.lines, 'no-end'), /^FAIL /);
  assert.match(lineFor(r.lines, 'content-first'), /^FAIL /);
});

test('validate-vercel.mjs --dump: no [DONE] and an unknown chunk fail', () => {
  const r = runValidator('validate-vercel.mjs', ['--dump', '$DIR'], {
    'good.sse': sse({ type: 'start' }, { type: 'text-start', id: 'a' }, { type: 'text-delta', id: 'a', delta: 'x' }, { type: 'text-end', id: 'a' }, { type: 'finish' }, '[DONE]'),
    'no-done.sse': sse({ type: 'start' }, { type: 'finish' }),
    'unknown.sse': sse({ type: 'start' }, { type: 'future-chunk' }, { type: 'finish' }, '[DONE]'),
  });
  assert.equal(r.status, 1, r.lines.join('\n'));
  assert.match(lineFor(r.lines, 'good'), /^ok /);
  assert.match(lineFor(r.lines, 'no-done'), /^FAIL /);
  assert.match(lineFor(r.lines, 'unknown'), /^FAIL /);
});
