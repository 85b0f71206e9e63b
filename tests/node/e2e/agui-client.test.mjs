// AG-UI client -> babelgate (/agui-to-vercel) -> `ai` helper agent.
// The client is @ag-ui/client's HttpAgent.runAgent with its full pipeline
// (SSE parsing, schema enforcement, event order verification, message
// assembly). Its console warnings mean it dropped something, so they fail
// the test like a thrown verification error does.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach, test } from 'node:test';
import { HttpAgent } from '@ag-ui/client';
import {
  VERCEL_BACKGROUND_INPUT, VERCEL_ECHO_PREFIX, VERCEL_WEATHER_INPUT, VERCEL_WEATHER_OUTPUT, VERCEL_WEATHER_TEXT, uiText,
} from './lib/expect.mjs';
import { recordingFetch, withEvidence } from './lib/http.mjs';
import { startStack } from './lib/stack.mjs';

// The client reports dropped events and fields only when this is unset.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

const HANG_GUARD = { timeout: 60_000 };
const CHANGE_BACKGROUND = {
  name: 'change_background',
  description: 'Change the page background colour.',
  parameters: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
};
let stack;

before(async () => {
  stack = await startStack('agui-client');
});
after(async () => {
  await stack?.stop();
});
beforeEach(async () => {
  await stack.vercel.clear();
});

function newAgent() {
  const exchanges = [];
  const agent = new HttpAgent({
    url: `${stack.gateway}/agui-to-vercel`,
    threadId: `thread-${randomUUID()}`,
    fetch: recordingFetch(exchanges),
  });
  return { agent, exchanges, evidence: { exchanges, agent: stack.vercel } };
}

/** runAgent with console.warn/error captured; returns what the run ended with. */
async function run(agent, params = {}) {
  const seen = { finished: null, runError: null };
  const subscriber = {
    onRunFinishedEvent: (p) => {
      seen.finished = { outcome: p.outcome, interrupts: p.interrupts, pendingToolCallIds: p.pendingToolCallIds };
    },
    onRunErrorEvent: ({ event }) => {
      seen.runError = event;
    },
  };
  const lines = [];
  const saved = { warn: console.warn, error: console.error };
  console.warn = (...a) => lines.push(`console.warn: ${a.map(String).join(' ')}`);
  console.error = (...a) => lines.push(`console.error: ${a.map(String).join(' ')}`);
  try {
    await agent.runAgent({ runId: `run-${randomUUID()}`, ...params }, subscriber);
  } catch (e) {
    lines.push(`runAgent rejected: ${e?.message ?? e}`);
  } finally {
    Object.assign(console, saved);
  }
  assert.deepEqual(lines, [], 'the client rejected or dropped part of the stream');
  assert.equal(seen.runError, null, `RUN_ERROR: ${JSON.stringify(seen.runError)}`);
  assert.ok(seen.finished, 'the run must end with RUN_FINISHED');
  return seen;
}

async function agentRequests(n) {
  const reqs = await stack.vercel.requests();
  assert.equal(reqs.length, n, `the agent received ${reqs.length} requests, expected ${n}`);
  for (const r of reqs) assert.equal(r.error, undefined, `the agent refused a request: ${r.error}`);
  return reqs.map((r) => r.body);
}

test('text: agent.messages holds the answer, the agent got a valid useChat request', HANG_GUARD, async () => {
  const { agent, evidence } = newAgent();
  const said = 'hello 世界 👋🏽';
  await withEvidence(evidence, async () => {
    agent.addMessage({ id: `u-${randomUUID()}`, role: 'user', content: said });
    const { finished } = await run(agent);
    assert.equal(finished.outcome, 'success');
    assert.deepEqual(agent.messages.map((m) => m.role), ['user', 'assistant']);
    assert.equal(agent.messages[1].content, VERCEL_ECHO_PREFIX + said);

    const [req] = await agentRequests(1);
    assert.equal(req.trigger, 'submit-message');
    assert.deepEqual(req.messages.map((m) => [m.role, uiText(m)]), [['user', said]]);
  });
});

test('server tool: assistant tool call, tool result message, then the text', HANG_GUARD, async () => {
  const { agent, evidence } = newAgent();
  await withEvidence(evidence, async () => {
    agent.addMessage({ id: `u-${randomUUID()}`, role: 'user', content: "What's the weather in Beijing?" });
    await run(agent);
    const msgs = agent.messages;
    const withCall = msgs.find((m) => m.role === 'assistant' && m.toolCalls?.length);
    assert.ok(withCall, `no assistant message with toolCalls in ${JSON.stringify(msgs)}`);
    const [call] = withCall.toolCalls;
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), VERCEL_WEATHER_INPUT);
    const result = msgs.find((m) => m.role === 'tool');
    assert.ok(result, `no tool message in ${JSON.stringify(msgs)}`);
    assert.equal(result.toolCallId, call.id);
    assert.deepEqual(JSON.parse(result.content), VERCEL_WEATHER_OUTPUT);
    assert.equal(msgs.at(-1).role, 'assistant');
    assert.equal(msgs.at(-1).content, VERCEL_WEATHER_TEXT);
    assert.ok(msgs.indexOf(result) < msgs.length - 1, 'the text comes after the tool result');
    await agentRequests(1);
  });
});

test('front-end tool round trip: the tool message goes back as an output-available tool part', HANG_GUARD, async () => {
  const { agent, evidence } = newAgent();
  await withEvidence(evidence, async () => {
    agent.addMessage({ id: `u-${randomUUID()}`, role: 'user', content: 'make the background red' });
    await run(agent, { tools: [CHANGE_BACKGROUND] });
    const withCall = agent.messages.find((m) => m.role === 'assistant' && m.toolCalls?.length);
    assert.ok(withCall, `no assistant message with toolCalls in ${JSON.stringify(agent.messages)}`);
    const [call] = withCall.toolCalls;
    assert.equal(call.function.name, 'change_background');
    assert.deepEqual(JSON.parse(call.function.arguments), VERCEL_BACKGROUND_INPUT);
    assert.ok(!agent.messages.some((m) => m.role === 'tool'), 'the client runs this tool: no result yet');

    const output = 'background set to #ff0000';
    agent.addMessage({ id: `t-${randomUUID()}`, role: 'tool', toolCallId: call.id, content: output });
    await run(agent, { tools: [CHANGE_BACKGROUND] });
    assert.equal(agent.messages.at(-1).role, 'assistant');
    assert.equal(agent.messages.at(-1).content, `The tool said: ${output}. Anything else?`);

    const [req1, req2] = await agentRequests(2);
    assert.equal(req2.id, req1.id, 'same thread, same chat id');
    const last = req2.messages.at(-1);
    assert.equal(last.role, 'assistant', 'useChat continues the assistant message that made the call');
    const part = last.parts.find((p) => p.toolCallId === call.id);
    assert.ok(part, `no tool part for ${call.id} in ${JSON.stringify(last.parts)}`);
    assert.equal(part.type, 'tool-change_background');
    assert.equal(part.state, 'output-available');
    assert.deepEqual(part.input, VERCEL_BACKGROUND_INPUT);
    assert.equal(part.output, output);
  });
});
