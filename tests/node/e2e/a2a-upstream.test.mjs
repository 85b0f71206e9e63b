// Chat clients -> babelgate serve -> an A2A agent built with the official
// `a2a-sdk` (tests/python/a2a_agent.py, a scripted AgentExecutor behind the
// SDK's own JSON-RPC app). The clients are the real ones: the `ai`
// package's transport and readUIMessageStream, and @ag-ui/client's
// HttpAgent. The agent's own log says what each request carried.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { HttpAgent } from '@ag-ui/client';
import { runUseChatPath } from '../lib/vercel-client.mjs';
import { uiText } from './lib/expect.mjs';
import { BABELGATE, PYTHON, REPO_ROOT, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';

const HANG_GUARD = { timeout: 60_000 };
// What the scripted agent streams for plain text: three artifact chunks,
// one holding U+2028 (which the Python SDK writes unescaped).
const HELLO = 'Hello \u2028world';
let procs = [];
let gateway;
let agentBase;

before(async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'a2a-upstream');
  fs.rmSync(logDir, { recursive: true, force: true });
  fs.mkdirSync(logDir, { recursive: true });
  const [agentPort, gatewayPort, downPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const agent = launch('a2a-agent', PYTHON, [path.join(REPO_ROOT, 'tests/python/a2a_agent.py'), String(agentPort)], logDir);
  procs.push(agent);
  agentBase = `http://127.0.0.1:${agentPort}`;
  const route = (p, client, extra = '') => `
[[routes]]
path = "${p}"
client = "${client}"
upstream = "${agentBase}/"
upstream_protocol = "a2a"
idle_timeout_ms = 60000
${extra}`;
  const config = path.join(logDir, 'gateway.toml');
  fs.writeFileSync(config, [`[server]\nlisten = "127.0.0.1:${gatewayPort}"`, route('/vercel', 'vercel'), route('/agui', 'ag-ui'), route('/agui-keep', 'ag-ui', 'on_disconnect = "keep"'), route('/a2a', 'a2a'), `[[routes]]\npath = "/a2a-down"\nclient = "a2a"\nupstream = "http://127.0.0.1:${downPort}/"\nupstream_protocol = "a2a"\n`].join('\n'));
  const gw = launch('babelgate', BABELGATE, ['serve', '--config', config], logDir);
  procs.push(gw);
  gateway = `http://127.0.0.1:${gatewayPort}`;
  await Promise.all([waitReady(agent, `${agentBase}/.well-known/agent-card.json`), waitReady(gw, `${gateway}/healthz`)]);
});

after(async () => {
  await Promise.all(procs.map(stopProc));
});

async function seen() {
  const res = await fetch(`${agentBase}/seen`);
  return res.json();
}

test('vercel client: artifact chunks arrive verbatim as one text, the chat id is the contextId', HANG_GUARD, async () => {
  const chatId = `chat-${randomUUID()}`;
  const { message, error } = await runUseChatPath({ api: `${gateway}/vercel`, chatId, text: 'hello' });
  assert.equal(error, undefined, `the client failed: ${error}`);
  assert.equal(uiText(message), HELLO);
  const last = (await seen()).at(-1);
  assert.equal(last.text, 'hello');
  assert.equal(last.contextId, chatId);
  assert.equal(last.parts, 1);
});

test('vercel client: a failed task is the client error, with its status message', HANG_GUARD, async () => {
  const { message, error } = await runUseChatPath({ api: `${gateway}/vercel`, chatId: `chat-${randomUUID()}`, text: 'please fail' });
  assert.ok(error, 'the client saw no error');
  assert.match(String(error?.message ?? error), /the tool broke/);
  assert.equal(uiText(message), 'Trying');
});

test('vercel client: a rejected task is the client error too', HANG_GUARD, async () => {
  const { error } = await runUseChatPath({ api: `${gateway}/vercel`, chatId: `chat-${randomUUID()}`, text: 'reject this' });
  assert.match(String(error?.message ?? error), /not my job/);
});

test('vercel client: data artifacts are data parts beside the text', HANG_GUARD, async () => {
  const { message, error } = await runUseChatPath({ api: `${gateway}/vercel`, chatId: `chat-${randomUUID()}`, text: 'data please' });
  assert.equal(error, undefined, `the client failed: ${error}`);
  assert.equal(uiText(message), 'Sunny.');
  const data = message.parts.filter((p) => p.type.startsWith('data-'));
  assert.equal(data.length, 1, JSON.stringify(message.parts));
  assert.deepEqual(data[0].data, { city: 'Paris', temp: 21 });
});

/** HttpAgent.runAgent, with what the run ended with. */
async function runAgui(agent, params = {}, more = {}) {
  const ended = { finished: null, error: null };
  const lines = [];
  const saved = { warn: console.warn, error: console.error };
  console.warn = (...a) => lines.push(`console.warn: ${a.map(String).join(' ')}`);
  console.error = (...a) => lines.push(`console.error: ${a.map(String).join(' ')}`);
  try {
    await agent.runAgent({ runId: `run-${randomUUID()}`, ...params }, {
      onRunFinishedEvent: ({ event }) => {
        ended.finished = event;
      },
      onRunErrorEvent: ({ event }) => {
        ended.error = event;
      },
      ...more,
    });
  } catch (e) {
    ended.rejected = e;
  } finally {
    Object.assign(console, saved);
  }
  assert.deepEqual(lines, [], 'the client rejected or dropped part of the stream');
  return ended;
}

const assistantText = (agent) => agent.messages.filter((m) => m.role === 'assistant').map((m) => m.content ?? '').join('');

test('ag-ui client: the answer is the assistant message, the thread is the contextId', HANG_GUARD, async () => {
  const threadId = `thread-${randomUUID()}`;
  const agent = new HttpAgent({ url: `${gateway}/agui`, threadId });
  agent.addMessage({ id: `u-${randomUUID()}`, role: 'user', content: 'hello' });
  const ended = await runAgui(agent);
  assert.equal(ended.error, null, JSON.stringify(ended.error));
  assert.ok(ended.finished, 'no RUN_FINISHED');
  assert.equal(assistantText(agent), HELLO);
  const last = (await seen()).at(-1);
  assert.equal(last.contextId, threadId);
});

test('ag-ui client: a failed task is RUN_ERROR with its status message', HANG_GUARD, async () => {
  const agent = new HttpAgent({ url: `${gateway}/agui`, threadId: `thread-${randomUUID()}` });
  agent.addMessage({ id: `u-${randomUUID()}`, role: 'user', content: 'fail now' });
  const ended = await runAgui(agent);
  assert.ok(ended.error, 'no RUN_ERROR');
  assert.match(ended.error.message, /the tool broke/);
});

test('ag-ui client: input-required is an interrupt; its answer continues the same task', HANG_GUARD, async () => {
  const agent = new HttpAgent({ url: `${gateway}/agui`, threadId: `thread-${randomUUID()}` });
  agent.addMessage({ id: `u-${randomUUID()}`, role: 'user', content: 'approve the plan' });
  const first = await runAgui(agent);
  assert.equal(first.error, null, JSON.stringify(first.error));
  const outcome = first.finished?.outcome;
  assert.equal(outcome?.type, 'interrupt', JSON.stringify(first.finished));
  const [interrupt] = outcome.interrupts;
  assert.equal(interrupt.message, 'Proceed? (yes/no)');
  const asked = (await seen()).at(-1);
  assert.equal(interrupt.id, asked.taskId, 'the interrupt is the task');

  const second = await runAgui(agent, { resume: [{ interruptId: interrupt.id, status: 'resolved', payload: 'yes' }] });
  assert.equal(second.error, null, JSON.stringify(second.error));
  assert.ok(second.finished, 'no RUN_FINISHED');
  const answered = (await seen()).at(-1);
  assert.equal(answered.taskId, asked.taskId, 'the answer went to another task');
  assert.equal(answered.continued, true);
  assert.equal(answered.text, 'yes');
  assert.match(assistantText(agent), /You said: yes$/);
});

/** The agent's own view of task `id` (GetTask on the agent, not through the gateway). */
async function agentTask(id) {
  const res = await fetch(`${agentBase}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'get', method: 'GetTask', params: { id } }),
  });
  const body = await res.json();
  assert.equal(body.error, undefined, JSON.stringify(body.error));
  return body.result;
}

/** The task the agent ran for context `contextId`, once it started. */
async function taskOf(contextId) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const found = (await seen()).find((s) => s.contextId === contextId);
    if (found || Date.now() > deadline) return found?.taskId;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The state task `id` settles in: polled until it leaves `working`, within a generous deadline. */
async function settledState(id) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const state = (await agentTask(id)).status?.state;
    if (state !== 'TASK_STATE_WORKING' || Date.now() > deadline) return state;
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('a vercel client that leaves makes the gateway cancel the agent\'s task', HANG_GUARD, async () => {
  const chatId = `chat-${randomUUID()}`;
  const controller = new AbortController();
  const transport = new DefaultChatTransport({ api: `${gateway}/vercel` });
  const stream = await transport.sendMessages({
    chatId, trigger: 'submit-message', messageId: undefined,
    messages: [{ id: `u-${randomUUID()}`, role: 'user', parts: [{ type: 'text', text: 'slow' }] }],
    abortSignal: controller.signal,
  });
  const tapped = stream.pipeThrough(new TransformStream({
    transform(c, ctl) {
      ctl.enqueue(c);
      if (c.type === 'text-delta') controller.abort();
    },
  }));
  try {
    for await (const _ of readUIMessageStream({ stream: tapped }));
  } catch {
    // the abort
  }
  assert.ok(controller.signal.aborted, 'the stream ended before any text');
  const taskId = await taskOf(chatId);
  assert.ok(taskId, 'the agent saw no task for the chat');
  // The SDK server goes on with a task whose stream closed: only a
  // CancelTask from the gateway ends it so (300 ticks otherwise, then completed).
  assert.equal(await settledState(taskId), 'TASK_STATE_CANCELED');
});

test('a stop of a kept run (POST {path}/{id}/stop) cancels the agent\'s task', HANG_GUARD, async () => {
  const threadId = `thread-${randomUUID()}`;
  const agent = new HttpAgent({ url: `${gateway}/agui-keep`, threadId });
  agent.addMessage({ id: `u-${randomUUID()}`, role: 'user', content: 'slow' });
  let stopped = null;
  const ended = await runAgui(agent, {}, {
    onTextMessageContentEvent: () => {
      stopped ??= fetch(`${gateway}/agui-keep/${threadId}/stop`, { method: 'POST' }).then((r) => r.status);
    },
  });
  assert.equal(await stopped, 202);
  assert.equal(ended.error?.code, 'stopped', JSON.stringify(ended));
  const taskId = await taskOf(threadId);
  assert.ok(taskId, 'the agent saw no task for the thread');
  assert.equal(await settledState(taskId), 'TASK_STATE_CANCELED');
});

test('a2a-sdk client on an A2A route in front of the A2A agent: the gateway\'s task, U+2028 whole', HANG_GUARD, async () => {
  const contextId = `ctx-${randomUUID()}`;
  const { stdout } = await promisify(execFile)(PYTHON, [path.join(REPO_ROOT, 'tests/python/a2a_client.py'), `${gateway}/a2a`, 'hello', contextId], { timeout: 60_000 });
  const got = JSON.parse(stdout.trim().split('\n').at(-1));
  // The agent writes U+2028 raw; the Python client splits lines on it.
  assert.equal(got.error, undefined, got.error);
  assert.equal(got.text, HELLO);
  assert.equal(got.state, 'TASK_STATE_COMPLETED');
  assert.equal(got.contextId, contextId);
  // The task the client was told of is the gateway's (the run's), not the agent's.
  const agentTask = (await seen()).find((s) => s.contextId === contextId).taskId;
  assert.notEqual(got.taskId, agentTask);
  const res = await fetch(`${gateway}/a2a`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'GetTask', params: { id: got.taskId } }),
  });
  const body = await res.json();
  assert.equal(body.id, 7);
  assert.equal(body.result?.status?.state, 'TASK_STATE_COMPLETED', JSON.stringify(body));
});

test('an upstream that cannot be reached is a JSON-RPC error naming the request, below HTTP 500', HANG_GUARD, async () => {
  const res = await fetch(`${gateway}/a2a-down`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify({
      jsonrpc: '2.0', id: 11, method: 'SendStreamingMessage',
      params: { message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'hello' }] } },
    }),
  });
  assert.ok(res.status < 500, `HTTP ${res.status}`);
  const body = await res.json();
  assert.equal(body.id, 11, JSON.stringify(body));
  assert.equal(body.error?.code, -32603, JSON.stringify(body));
});
