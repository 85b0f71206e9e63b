// validate-hai.mjs / lib/hai-rules.mjs must catch each kind of broken HAI
// stream, and pass a good one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { haiViolations } from '../lib/hai-rules.mjs';
import { lineFor, runValidator, sse } from './lib.mjs';

const T = 1767225600000;
const started = { type: 'RUN_STARTED', messageId: 'r', role: 'assistant', timestamp: T };
const finished = { type: 'RUN_FINISHED', messageId: 'r', role: 'assistant', timestamp: T + 9 };
const bStart = { type: 'BUSINESS_DATA_START', messageId: 'm', role: 'assistant', timestamp: T + 1 };
const text = (content, extra = {}) => ({
  type: 'BUSINESS_DATA_CONTENT', messageId: 'm', delta: { output: { type: 'text', content } }, timestamp: T + 2, ...extra,
});
const bEnd = { type: 'BUSINESS_DATA_END', messageId: 'm', timestamp: T + 3 };
const call = [
  { type: 'TOOL_CALL_START', toolCallId: 'c', toolCallName: 'f', parentMessageId: 'm' },
  { type: 'TOOL_CALL_ARGS', toolCallId: 'c', delta: '{}' },
  { type: 'TOOL_CALL_END', toolCallId: 'c' },
  { type: 'TOOL_CALL_RESULT', messageId: 'tm', toolCallId: 'c', content: 'ok', role: 'tool' },
];
const good = [started, bStart, text('Hello'), text(' world'), bEnd, ...call, finished];

const broken = {
  'content before its START': [started, text('x'), finished],
  'content after its END': [started, bStart, bEnd, text('x'), finished],
  'START twice while open': [started, bStart, bStart, bEnd, finished],
  'RUN_FINISHED with a message open': [started, bStart, text('x'), finished],
  'an event after RUN_FINISHED': [...good, text('late')],
  'an event before RUN_STARTED': [bStart, started, bEnd, finished],
  'no RUN_FINISHED or RUN_ERROR at the end': [started, bStart, bEnd],
  'a second RUN_STARTED': [started, started, finished],
  'RUN_STARTED without role': [{ ...started, role: undefined }, finished],
  'a timestamp in seconds': [started, { ...bStart, timestamp: 1767225600 }, bEnd, finished],
  'a timestamp that is not an integer': [started, { ...bStart, timestamp: '1767225600000' }, bEnd, finished],
  'BUSINESS_DATA_START without timestamp': [started, { ...bStart, timestamp: undefined }, bEnd, finished],
  'a delta that is an array (two objects)': [started, bStart, { ...text('x'), delta: [{ output: { type: 'text', content: 'a' } }, { output: { type: 'text', content: 'b' } }] }, bEnd, finished],
  'object deltas the client cannot split back': [started, bStart, text('a}{b'), bEnd, finished],
  'string and object deltas in one message': [started, bStart, text('a'), { ...text('b'), delta: 'b' }, bEnd, finished],
  'a text output without content': [started, bStart, { ...text('x'), delta: { output: { type: 'text' } } }, bEnd, finished],
  'a fold with a bad position': [started, bStart, { ...text('x'), delta: { output: { type: 'fold', data: { title: 't', fold: true, position: 'middle' } } } }, bEnd, finished],
  'TOOL_CALL_ARGS without START': [started, call[1], finished],
  'TOOL_CALL_END twice': [started, call[0], call[2], call[2], finished],
  'a result for a call never made': [started, call[3], finished],
  'RUN_FINISHED with a tool call open': [started, call[0], finished],
  'a STATE_DELTA op without from': [started, { type: 'STATE_DELTA', delta: [{ op: 'add', path: '/a', value: 1 }] }, finished],
  'an unknown event type': [started, { type: 'TEXT_MESSAGE_START', messageId: 'm' }, finished],
  'a collaborative message never opened': [started, { type: 'AGENT_COLLABORATIVE_MESSAGE_END', messageId: 'x' }, finished],
  'a STEP_FINISHED never started': [started, { type: 'STEP_FINISHED', stepName: 's' }, finished],
  'data that is not JSON': [started, '[DONE]', finished],
};

test('a good HAI stream follows every rule', () => {
  assert.deepEqual(haiViolations(sse(...good)), []);
  assert.deepEqual(haiViolations(sse(started, { type: 'RUN_ERROR', message: 'boom', code: 'stopped' })), []);
});

for (const [what, events] of Object.entries(broken)) {
  test(`a HAI stream with ${what} is a violation`, () => {
    assert.notDeepEqual(haiViolations(sse(...events)), [], what);
  });
}

test('validate-hai.mjs fails a broken file, passes a good one, and fails on no files', () => {
  const r = runValidator('validate-hai.mjs', ['$DIR'], {
    'chat.x-hai.sse': sse(...good),
    'state.x-hai.sse': sse(started, text('x'), finished),
  });
  assert.equal(r.status, 1, r.lines.join('\n'));
  assert.match(lineFor(r.lines, 'chat.x-hai'), /^ok /);
  assert.match(lineFor(r.lines, 'state.x-hai'), /^FAIL .*not open/);
  assert.equal(r.lines.at(-1), '1 passed, 1 failed');
  const none = runValidator('validate-hai.mjs', ['$DIR'], {});
  assert.equal(none.status, 1);
  assert.equal(none.lines.at(-1), '0 passed, 1 failed');
});
