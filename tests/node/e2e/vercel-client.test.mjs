// Vercel AI SDK client -> babelgate (/vercel-to-agui) -> Python AG-UI agent.
// The client is the `ai` package's own chat: AbstractChat (what useChat
// wraps) with DefaultChatTransport, run headless with an in-memory state.
// Every assertion failure carries the raw bytes of the exchange and the
// RunAgentInput bodies the agent received.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach, test } from 'node:test';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';
import jsonPatch from 'fast-json-patch';
import { Chat } from './lib/chat.mjs';
import {
  PY_BACKGROUND_INPUT, PY_CONFIRM_INPUT, PY_CONFIRMED, PY_ERROR_MESSAGE, PY_ERROR_TEXT, PY_FINAL_STATE, PY_REASONING,
  PY_STATE_TEXT, PY_STRAY_CALL_ID, PY_THINK_TEXT, PY_WEATHER_INPUT, PY_WEATHER_RESULT, PY_WEATHER_TEXT, aguiText, pyEcho, pyToolAnswer, uiText,
} from './lib/expect.mjs';
import { recordingFetch, withEvidence } from './lib/http.mjs';
import { startStack } from './lib/stack.mjs';

const HANG_GUARD = { timeout: 60_000 };
let stack;

before(async () => {
  stack = await startStack('vercel-client');
});
after(async () => {
  await stack?.stop();
});
beforeEach(async () => {
  await stack.agui.clear();
});

/** A chat against the gateway, recording the raw exchanges. */
function newChat(options = {}) {
  const exchanges = [];
  const chat = new Chat({
    id: `chat-${randomUUID()}`,
    transport: new DefaultChatTransport({ api: `${stack.gateway}/vercel-to-agui`, fetch: recordingFetch(exchanges) }),
    ...options,
  });
  return { chat, exchanges, evidence: { exchanges, agent: stack.agui } };
}

const toolPart = (message, name) =>
  message.parts.find((p) => p.type === `tool-${name}` || (p.type === 'dynamic-tool' && p.toolName === name));
const asJson = (v) => (typeof v === 'string' ? JSON.parse(v) : v);

function assertReady(chat) {
  assert.equal(chat.status, 'ready', `the chat ended in status ${chat.status}: ${chat.error?.message}`);
}

/** The one assistant answer after one user message. */
function onlyAnswer(chat) {
  assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant'], 'one user message and one assistant answer');
  return chat.messages[1];
}

async function agentRequests(n) {
  const reqs = await stack.agui.requests();
  assert.equal(reqs.length, n, `the agent received ${reqs.length} requests, expected ${n}`);
  for (const r of reqs) assert.equal(r.error, undefined, `the agent refused a request: ${JSON.stringify(r.error)}`);
  return reqs.map((r) => r.body);
}

test('plain text: CJK and emoji arrive intact, the request is a valid RunAgentInput', HANG_GUARD, async () => {
  const { chat, exchanges, evidence } = newChat();
  const said = 'hello 世界 👋🏽';
  await withEvidence(evidence, async () => {
    await chat.sendMessage({ text: said });
    assertReady(chat);
    assert.equal(uiText(onlyAnswer(chat)), pyEcho(said));

    const [run] = await agentRequests(1);
    assert.equal(run.threadId, chat.id, 'the Vercel chat id is the AG-UI thread (crates/lib/core/src/request.rs)');
    assert.deepEqual(run.messages.map((m) => [m.role, aguiText(m.content)]), [['user', said]]);
    assert.ok(run.tools?.some((t) => t.name === 'change_background'), 'the route\'s client_tools reach the agent');

    const { headers } = exchanges[0];
    assert.match(headers['content-type'] ?? '', /^text\/event-stream/);
    assert.equal(headers['x-vercel-ai-ui-message-stream'], 'v1');
    assert.ok((await exchanges[0].text).endsWith('data: [DONE]\n\n'), 'the stream ends with data: [DONE]');
  });
});

test('server tool: the tool part is output-available with the result, and no automatic resend follows', HANG_GUARD, async () => {
  // sendAutomaticallyWhen as an app with front-end tools sets it: a server
  // tool must not make the chat post again.
  const { chat, exchanges, evidence } = newChat({ sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
  await withEvidence(evidence, async () => {
    await chat.sendMessage({ text: "What's the weather in Beijing?" });
    assertReady(chat);
    assert.equal(exchanges.length, 1, 'the chat posted again after a server tool');
    const answer = onlyAnswer(chat);
    const part = toolPart(answer, 'get_weather');
    assert.ok(part, `no get_weather tool part in ${JSON.stringify(answer.parts)}`);
    assert.equal(part.state, 'output-available');
    assert.deepEqual(part.input, PY_WEATHER_INPUT);
    assert.deepEqual(asJson(part.output), PY_WEATHER_RESULT);
    assert.equal(uiText(answer), PY_WEATHER_TEXT);
    await agentRequests(1);
  });
});

test('front-end tool round trip: output goes back as AG-UI tool message, the answer continues the same message', HANG_GUARD, async () => {
  const { chat, exchanges, evidence } = newChat();
  await withEvidence(evidence, async () => {
    await chat.sendMessage({ text: 'make the background red' });
    assertReady(chat);
    const first = onlyAnswer(chat);
    const part = toolPart(first, 'change_background');
    assert.ok(part, `no change_background tool part in ${JSON.stringify(first.parts)}`);
    assert.equal(part.state, 'input-available', 'the client is to run the tool');
    assert.deepEqual(part.input, PY_BACKGROUND_INPUT);
    const { toolCallId } = part;

    // What the browser does after running it (addToolOutput), then the
    // follow-up post useChat makes: trigger submit-message, messageId = the
    // assistant message being continued.
    const output = { ok: true, color: '#ff0000' };
    await chat.addToolOutput({ tool: 'change_background', toolCallId, output });
    await chat.sendMessage();
    assertReady(chat);
    assert.equal(exchanges.length, 2);
    assert.equal(exchanges[1].body.trigger, 'submit-message');
    assert.equal(exchanges[1].body.messageId, first.id);

    const [, run2] = await agentRequests(2);
    const assistant = run2.messages.find((m) => m.role === 'assistant' && m.toolCalls?.length);
    assert.ok(assistant, `no assistant message with toolCalls in ${JSON.stringify(run2.messages)}`);
    assert.equal(assistant.toolCalls[0].id, toolCallId);
    assert.equal(assistant.toolCalls[0].function.name, 'change_background');
    assert.deepEqual(JSON.parse(assistant.toolCalls[0].function.arguments), PY_BACKGROUND_INPUT);
    const toolMsg = run2.messages.find((m) => m.role === 'tool');
    assert.ok(toolMsg, `no tool message in ${JSON.stringify(run2.messages)}`);
    assert.equal(toolMsg.toolCallId, toolCallId);
    assert.deepEqual(JSON.parse(aguiText(toolMsg.content)), output);
    assert.equal(run2.messages.at(-1), toolMsg, 'the tool message is the last one');
    assert.equal(run2.threadId, exchanges[0].body.id, 'same chat, same thread');

    // One assistant message, same id, a new step holding the answer.
    const answer = onlyAnswer(chat);
    assert.equal(answer.id, first.id, 'the continuation must keep the assistant message id');
    const steps = answer.parts.filter((p) => p.type === 'step-start').length;
    assert.ok(steps >= 2, `the continuation must open a new step (step-start parts: ${steps})`);
    const lastStep = answer.parts.slice(answer.parts.findLastIndex((p) => p.type === 'step-start'));
    assert.equal(uiText({ parts: lastStep }), pyToolAnswer(aguiText(toolMsg.content)));
    assert.equal(toolPart(answer, 'change_background').state, 'output-available');
  });
});

// The client looks an approval request's call up in the message it
// continues and fails the whole answer when the call is not there. An agent
// that, continuing, asks approval for a call it never streamed must not
// bring the chat down: the gateway announces the call first, as it does in a
// new answer, and leaves the calls the message holds alone.
test('continuation: an interrupt on a call the continued message lacks still reaches a working chat', HANG_GUARD, async () => {
  const { chat, exchanges, evidence } = newChat();
  await withEvidence(evidence, async () => {
    await chat.sendMessage({ text: 'make the background red, then a stray question' });
    assertReady(chat);
    const first = onlyAnswer(chat);
    const { toolCallId } = toolPart(first, 'change_background');
    await chat.addToolOutput({ tool: 'change_background', toolCallId, output: { ok: true } });
    await chat.sendMessage();
    assertReady(chat);
    assert.equal(exchanges[1].body.messageId, first.id);

    const [, run2] = await agentRequests(2);
    assert.equal(run2.messages.at(-1).role, 'tool', 'the agent was continuing');
    const reqs = await stack.agui.requests();
    const interrupt = reqs[1].events.at(-1).outcome.interrupts[0];
    assert.equal(interrupt.toolCallId, PY_STRAY_CALL_ID);

    const answer = onlyAnswer(chat);
    assert.equal(answer.id, first.id, 'the continuation keeps the message');
    const stray = answer.parts.find((p) => p.toolCallId === PY_STRAY_CALL_ID);
    assert.ok(stray, `no part for the stray call in ${JSON.stringify(answer.parts)}`);
    assert.equal(stray.state, 'approval-requested');
    assert.equal(typeof stray.approval?.id, 'string');
    // The call the message held is still one part, with its output.
    const held = answer.parts.filter((p) => p.toolCallId === toolCallId);
    assert.equal(held.length, 1, `the held call was announced again: ${JSON.stringify(answer.parts)}`);
    assert.equal(held[0].state, 'output-available');
    assert.equal(uiText({ parts: answer.parts.slice(answer.parts.findLastIndex((p) => p.type === 'step-start')) }), pyToolAnswer('{"ok":true}'));
  });
});

// docs/mapping/vercel.md did not exist when this was written; the shape used
// is the one the ai package has for it and tests/fixtures/vercel/hitl_confirm.sse
// shows: tool-approval-request on the interrupted tool call.
test('HITL confirm: the AG-UI interrupt reaches the chat as a tool approval request', HANG_GUARD, async () => {
  const { chat, evidence } = newChat();
  await withEvidence(evidence, async () => {
    await chat.sendMessage({ text: 'please confirm the deletion' });
    assertReady(chat);
    const answer = onlyAnswer(chat);
    const part = toolPart(answer, 'confirm_action');
    assert.ok(part, `no confirm_action tool part in ${JSON.stringify(answer.parts)}`);
    assert.deepEqual(part.input, PY_CONFIRM_INPUT);
    assert.equal(part.state, 'approval-requested');
    assert.equal(typeof part.approval?.id, 'string');
  });
});

test('HITL confirm: the approval goes back to the agent as RunAgentInput.resume', HANG_GUARD, async () => {
  const { chat, evidence } = newChat();
  await withEvidence(evidence, async () => {
    await chat.sendMessage({ text: 'please confirm the deletion' });
    assertReady(chat);
    const part = toolPart(onlyAnswer(chat), 'confirm_action');
    assert.equal(part?.state, 'approval-requested', `no approval request: ${JSON.stringify(chat.messages.at(-1).parts)}`);
    await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
    await chat.sendMessage();
    assertReady(chat);

    const reqs = await stack.agui.requests();
    const interrupt = reqs[0].events.at(-1).outcome.interrupts[0];
    const [, run2] = await agentRequests(2);
    assert.equal(run2.resume?.length, 1, `RunAgentInput.resume: ${JSON.stringify(run2.resume)}`);
    assert.equal(run2.resume[0].interruptId, interrupt.id);
    assert.equal(run2.resume[0].status, 'resolved');
    assert.equal(uiText(chat.messages.at(-1)), PY_CONFIRMED);
  });
});

test('reasoning: a reasoning part, then the text', HANG_GUARD, async () => {
  const { chat, evidence } = newChat();
  await withEvidence(evidence, async () => {
    await chat.sendMessage({ text: 'think about it' });
    assertReady(chat);
    const answer = onlyAnswer(chat);
    const reasoning = answer.parts.filter((p) => p.type === 'reasoning').map((p) => p.text).join('');
    assert.equal(reasoning, PY_REASONING);
    assert.equal(uiText(answer), PY_THINK_TEXT);
  });
});

test('state: data-state parts carry the final state', HANG_GUARD, async () => {
  const { chat, evidence } = newChat();
  await withEvidence(evidence, async () => {
    await chat.sendMessage({ text: 'show me the state' });
    assertReady(chat);
    const answer = onlyAnswer(chat);
    const parts = answer.parts.filter((p) => p.type === 'data-state');
    assert.ok(parts.length > 0, `no data-state part in ${JSON.stringify(answer.parts)}`);
    // Replay them as an app would: a snapshot replaces, a delta patches
    // (RFC 6902), anything else is taken as the whole state.
    let state;
    for (const { data } of parts) {
      if (data?.type === 'snapshot') state = structuredClone(data.snapshot);
      else if (data?.type === 'delta') state = jsonPatch.applyPatch(state, data.delta, true, false).newDocument;
      else state = structuredClone(data);
    }
    assert.deepEqual(state, PY_FINAL_STATE);
    assert.equal(uiText(answer), PY_STATE_TEXT);
  });
});

test('run error: the chat surfaces the agent\'s error text', HANG_GUARD, async () => {
  const errors = [];
  const { chat, exchanges, evidence } = newChat({ onError: (e) => errors.push(e) });
  await withEvidence(evidence, async () => {
    await chat.sendMessage({ text: 'trigger an error' });
    assert.equal(chat.status, 'error');
    assert.equal(exchanges[0].status, 200, 'the error came after the stream started');
    assert.ok(chat.error?.message.includes(PY_ERROR_MESSAGE), `chat.error: ${chat.error?.message}`);
    assert.equal(errors.length, 1);
    assert.equal(uiText(chat.messages.at(-1)), PY_ERROR_TEXT, 'what came before the error is kept');
    assert.ok((await exchanges[0].text).endsWith('data: [DONE]\n\n'), 'an error chunk is still followed by data: [DONE]');
  });
});
