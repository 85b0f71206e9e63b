// AG-Kit legacy and HAI clients -> babelgate -> Python AG-UI agent.
//
// AG-Kit: @cloudbase/agent-ui-web 0.0.24 cannot be installed (its
// dependencies @ag-kit/zod-to-json-schema and @cloudbase/agent-shared are not
// on the npm registry) and is a React hook anyway, so its requests are made
// here byte for byte as its useChat builds them (JSON.stringify of
// {messages, tools, conversationId} with `tools` undefined when the widget
// has none, Content-Type + Accept headers) and its stream is read the same
// way (eventsource-parser's EventSourceParserStream, stop at [DONE], skip
// frames that do not parse). Frames it would skip are counted here and fail
// the test, since skipping means data lost.
//
// HAI: the RunAgentInput request seed 004 specifies (path /awp there), SSE
// read frame by frame.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach, test } from 'node:test';
import { aguiText, pyEcho } from './lib/expect.mjs';
import { postSse, withEvidence } from './lib/http.mjs';
import { startStack } from './lib/stack.mjs';

const HANG_GUARD = { timeout: 60_000 };
let stack;

before(async () => {
  stack = await startStack('agkit-hai-client');
});
after(async () => {
  await stack?.stop();
});
beforeEach(async () => {
  await stack.agui.clear();
});

/** One AG-Kit widget turn: POST and assemble the answer like the widget does. */
async function agkitTurn(conversationId, text) {
  const body = JSON.stringify({ messages: [{ role: 'user', content: text }], tools: undefined, conversationId });
  const res = await postSse(`${stack.gateway}/agkit-to-agui`, body);
  const unparsable = [];
  let answer = '';
  for (const data of res.frames) {
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      unparsable.push(data);
      continue;
    }
    if (event?.type === 'text') answer += event.content;
  }
  return { ...res, answer, unparsable };
}

test('AG-Kit: two turns, the agent gets the full history on the second', HANG_GUARD, async () => {
  const conversationId = randomUUID(); // the widget's default threadId is a uuid v4
  const responses = [];
  await withEvidence({ exchanges: responses, agent: stack.agui }, async () => {
    const first = await agkitTurn(conversationId, 'first question 你好');
    responses.push(first);
    assert.equal(first.status, 200);
    assert.ok(first.done, 'the stream must end with data: [DONE]');
    assert.deepEqual(first.unparsable, [], 'frames the widget would skip');
    assert.equal(first.answer, pyEcho('first question 你好'));

    const second = await agkitTurn(conversationId, 'second question 🎉');
    responses.push(second);
    assert.equal(second.status, 200);
    assert.ok(second.done, 'the stream must end with data: [DONE]');
    assert.equal(second.answer, pyEcho('second question 🎉'));

    const reqs = await stack.agui.requests();
    assert.equal(reqs.length, 2);
    for (const r of reqs) assert.equal(r.error, undefined, `the agent refused a request: ${JSON.stringify(r.error)}`);
    const [run1, run2] = reqs.map((r) => r.body);
    assert.equal(run2.threadId, run1.threadId, 'one conversation, one thread');
    assert.deepEqual(
      run2.messages.map((m) => [m.role, aguiText(m.content)]),
      [
        ['user', 'first question 你好'],
        ['assistant', first.answer],
        ['user', 'second question 🎉'],
      ],
    );
    // Ids are the gateway's to mint, but they must be there and distinct.
    assert.equal(new Set(run2.messages.map((m) => m.id)).size, 3);
  });
});

test('HAI: BUSINESS_DATA_* carry the text, RUN_STARTED/RUN_FINISHED carry messageId, role, timestamp', HANG_GUARD, async () => {
  const said = 'hello HAI 你好 🎉';
  const input = {
    threadId: `thread-${randomUUID()}`,
    runId: `run-${randomUUID()}`,
    messages: [{ id: `u-${randomUUID()}`, role: 'user', content: said }],
    tools: [],
    context: [],
  };
  const responses = [];
  await withEvidence({ exchanges: responses, agent: stack.agui }, async () => {
    const res = await postSse(`${stack.gateway}/hai-to-agui`, input);
    responses.push(res);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = res.frames.map((d) => JSON.parse(d));
    const types = events.map((e) => e.type);
    assert.equal(types[0], 'RUN_STARTED');
    assert.equal(types.at(-1), 'RUN_FINISHED');
    assert.ok(!types.some((t) => t.startsWith('TEXT_MESSAGE_')), 'HAI has no TEXT_MESSAGE_* events');
    for (const e of [events[0], events.at(-1)]) {
      assert.equal(typeof e.messageId, 'string', `${e.type}.messageId`);
      assert.equal(typeof e.role, 'string', `${e.type}.role`);
      assert.ok(Number.isInteger(e.timestamp), `${e.type}.timestamp must be epoch ms`);
    }

    const start = events.findIndex((e) => e.type === 'BUSINESS_DATA_START');
    const end = events.findIndex((e) => e.type === 'BUSINESS_DATA_END');
    assert.ok(start > 0 && end > start, `BUSINESS_DATA_START ... END in ${types.join(' ')}`);
    const id = events[start].messageId;
    assert.equal(typeof id, 'string');
    assert.equal(events[end].messageId, id);
    let text = '';
    for (const e of events.slice(start + 1, end)) {
      assert.equal(e.type, 'BUSINESS_DATA_CONTENT');
      assert.equal(e.messageId, id);
      assert.ok(Number.isInteger(e.timestamp), 'BUSINESS_DATA_CONTENT.timestamp');
      // A plain string, or one {output:{type:"text",content}} object per event.
      if (typeof e.delta === 'string') text += e.delta;
      else {
        assert.equal(e.delta?.output?.type, 'text', `delta: ${JSON.stringify(e.delta)}`);
        text += e.delta.output.content;
      }
    }
    assert.equal(text, pyEcho(said));

    const reqs = await stack.agui.requests();
    assert.equal(reqs.length, 1);
    assert.equal(reqs[0].error, undefined, `the agent refused the request: ${JSON.stringify(reqs[0].error)}`);
    assert.equal(reqs[0].body.threadId, input.threadId);
    assert.deepEqual(reqs[0].body.messages.map((m) => aguiText(m.content)), [said]);
  });
});
