// validate-agkit.mjs (the real @cloudbase/agent-ui-web loop) must catch each
// kind of broken AG-Kit stream, and pass good ones.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lineFor, runValidator, sse } from './lib.mjs';

const t = (content) => ({ type: 'text', content });
const start = { type: 'tool-call-start', toolCallId: 'c', toolCallName: 'change_background' };
const args = { type: 'tool-call-args', toolCallId: 'c', delta: '{"color":"red"}' };
const end = { type: 'tool-call-end', toolCallId: 'c' };
const result = { type: 'tool-result', toolCallId: 'c', result: 'ok' };

const good = {
  'text.sse': sse(t('Hello'), t(' world'), '[DONE]'),
  'tool.sse': sse(t('Calling.'), start, args, end, result, t('Done.'), '[DONE]'),
  'extension.sse': sse({ type: 'step-started', name: 's' }, t('x'), { type: 'state-snapshot', snapshot: {} }, '[DONE]'),
  // A failed run: the error frame last, no [DONE] (the body breaks off).
  'error.sse': sse(t('x'), { type: 'error', error: 'the run was stopped', code: 'stopped' }),
};
const broken = {
  'extra-key.sse': [sse({ ...t('lost'), index: 0 }, '[DONE]'), /unknown key index/],
  'wrong-field.sse': [sse({ type: 'text', text: 'lost' }, '[DONE]'), /missing or invalid content/],
  'unknown-type.sse': [sse({ type: 'usage', tokens: 3 }, t('x'), '[DONE]'), /unknown type "usage"/],
  'result-between-start-and-args.sse': [sse(start, result, args, end, '[DONE]'), /error state/],
  // The client updates entry -1 without a word: caught on its state.
  'end-of-an-unknown-call.sse': [sse(start, args, { ...end, toolCallId: 'nobody' }, '[DONE]'), /never saw start/],
  'result-of-an-unknown-call.sse': [sse(start, args, end, { ...result, toolCallId: 'nobody' }, '[DONE]'), /never saw start/],
  'args-with-no-call.sse': [sse(t('x'), { ...args, toolCallId: 'nobody' }, '[DONE]'), /error state/],
  'no-done.sse': [sse(t('x')), /\[DONE\]/],
  'after-done.sse': [sse(t('x'), '[DONE]', t('never read')), /\[DONE\]/],
  'not-json.sse': [sse(t('x'), 'keep-alive', '[DONE]'), /not a JSON object/],
  // The client takes [DONE] for success and ignores the error frame.
  'error-then-done.sse': [sse(t('x'), { type: 'error', error: 'e' }, '[DONE]'), /must not carry "data: \[DONE\]"/],
  'error-not-last.sse': [sse({ type: 'error', error: 'e' }, t('x')), /error frame must be the last/],
};

test('validate-agkit.mjs passes good streams and fails each broken one', () => {
  const files = { ...good, ...Object.fromEntries(Object.entries(broken).map(([k, [body]]) => [k, body])) };
  const r = runValidator('validate-agkit.mjs', ['--dump', '$DIR'], files);
  assert.equal(r.status, 1, r.lines.join('\n') + r.stderr);
  for (const name of Object.keys(good)) {
    assert.match(lineFor(r.lines, name.replace('.sse', '')) ?? '', /^ok /, name);
  }
  for (const [name, [, why]] of Object.entries(broken)) {
    const line = lineFor(r.lines, name.replace('.sse', '')) ?? '';
    assert.match(line, /^FAIL /, name);
    assert.match(line, why, name);
  }
  assert.equal(r.lines.at(-1), `${Object.keys(good).length} passed, ${Object.keys(broken).length} failed`);
});

test('validate-agkit.mjs fails when it sees no files', () => {
  const r = runValidator('validate-agkit.mjs', ['--dump', '$DIR'], {});
  assert.equal(r.status, 1);
  assert.equal(r.lines.at(-1), '0 passed, 1 failed');
});
