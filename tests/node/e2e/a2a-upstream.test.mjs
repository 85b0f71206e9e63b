// Chat clients -> babelgate serve -> an A2A agent built with the official
// `a2a-sdk` (tests/python/a2a_agent.py, a scripted AgentExecutor behind the
// SDK's own JSON-RPC app). The clients are the real ones: the `ai`
// package's transport and readUIMessageStream, and @ag-ui/client's
// HttpAgent. The agent's own log says what each request carried.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
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
  const [agentPort, gatewayPort] = await Promise.all([freePort(), freePort()]);
  const agent = launch('a2a-agent', PYTHON, [path.join(REPO_ROOT, 'tests/python/a2a_agent.py'), String(agentPort)], logDir);
  procs.push(agent);
  agentBase = `http://127.0.0.1:${agentPort}`;
  const route = (p, client) => `
[[routes]]
path = "${p}"
client = "${client}"
upstream = "${agentBase}/"
upstream_protocol = "a2a"
idle_timeout_ms = 60000
`;
  const config = path.join(logDir, 'gateway.toml');
  fs.writeFileSync(config, [`[server]\nlisten = "127.0.0.1:${gatewayPort}"`, route('/vercel', 'vercel'), route('/agui', 'ag-ui')].join('\n'));
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
async function runAgui(agent, params = {}) {
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
