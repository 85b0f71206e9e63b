// Errors the gateway answers before any stream starts: an HTTP status with
// the JSON body docs/errors.md documents,
// {"error": {"type": "client"|"upstream"|"internal", "code", "message", "field"?}}.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { startStack } from './lib/stack.mjs';

const HANG_GUARD = { timeout: 60_000 };
let stack;

before(async () => {
  stack = await startStack('gateway-errors');
});
after(async () => {
  await stack?.stop();
});

async function post(path, body) {
  const res = await fetch(`${stack.gateway}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body,
  });
  const text = await res.text();
  return { status: res.status, contentType: res.headers.get('content-type'), text };
}

/** The documented error body, or an assertion failure showing the bytes. */
function errorBody(res, { status, type }) {
  const where = `HTTP ${res.status} ${res.contentType}: ${res.text}`;
  assert.equal(res.status, status, where);
  assert.match(res.contentType ?? '', /^application\/json/, where);
  const { error } = JSON.parse(res.text);
  assert.equal(error?.type, type, where);
  assert.equal(typeof error.code, 'string', where);
  assert.equal(typeof error.message, 'string', where);
  return error;
}

const RUN_INPUT = JSON.stringify({
  threadId: 't-errors',
  runId: 'r-errors',
  messages: [{ id: 'u1', role: 'user', content: 'hello' }],
  tools: [],
  context: [],
  state: {},
  forwardedProps: {},
});

test('unknown path: 404 with a JSON error', HANG_GUARD, async () => {
  const res = await post(`/no-such-route-${randomUUID()}`, RUN_INPUT);
  const error = errorBody(res, { status: 404, type: 'client' });
  assert.match(error.message, /no-such-route/, 'the message names the path');
});

test('invalid JSON body: 400 with a JSON error naming the problem', HANG_GUARD, async () => {
  const truncated = '{"id":"chat-1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[';
  const res = await post('/vercel-to-agui', truncated);
  const error = errorBody(res, { status: 400, type: 'client' });
  // A serde_json-style "EOF while parsing ... at line 1 column 87" or any
  // message that says what is wrong with the JSON.
  assert.match(error.message, /json|eof|expected|syntax|parse/i, `the message must say the body is not valid JSON: ${error.message}`);
  assert.doesNotMatch(error.message, /not implemented/i);
});

test('upstream down: 502 with a JSON error', HANG_GUARD, async () => {
  const res = await post('/agui-to-closed-port', RUN_INPUT);
  const error = errorBody(res, { status: 502, type: 'upstream' });
  assert.match(error.message, /connect|refused|reach/i, error.message);
});
