// A2A clients -> babelgate serve (`client = "a2a"`) -> the gateway's demo
// agent (AG-UI). The A2A clients are the official SDKs' own: `a2a-sdk` 1.x
// in Python (tests/python/a2a_client.py) and `@a2a-js/sdk` 1.3.0's
// ClientFactory client; what they read is compared with what the agent's
// native client, @ag-ui/client's HttpAgent, gets on an AG-UI route in front
// of the same agent.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { HttpAgent } from '@ag-ui/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { BABELGATE, PYTHON, REPO_ROOT, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';

const run = promisify(execFile);
const HANG_GUARD = { timeout: 90_000 };
let procs = [];
let gateway;

before(async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'a2a-client');
  fs.rmSync(logDir, { recursive: true, force: true });
  fs.mkdirSync(logDir, { recursive: true });
  const [demoPort, gatewayPort] = await Promise.all([freePort(), freePort()]);
  const demo = `http://127.0.0.1:${demoPort}/agent`;
  const route = (p, client) => `
[[routes]]
path = "${p}"
client = "${client}"
upstream = "${demo}"
upstream_protocol = "ag-ui"
idle_timeout_ms = 60000
`;
  const config = path.join(logDir, 'gateway.toml');
  fs.writeFileSync(config, [
    `[server]\nlisten = "127.0.0.1:${gatewayPort}"`,
    `[demo_agent]\nlisten = "127.0.0.1:${demoPort}"\nprotocol = "ag-ui"\ndelay_ms = 0`,
    route('/a2a', 'a2a'),
    route('/agui', 'ag-ui'),
  ].join('\n'));
  const gw = launch('babelgate', BABELGATE, ['serve', '--config', config], logDir);
  procs.push(gw);
  gateway = `http://127.0.0.1:${gatewayPort}`;
  await waitReady(gw, `${gateway}/healthz`);
});

after(async () => {
  await Promise.all(procs.map(stopProc));
});

/** What the a2a-sdk client read from `url`. */
async function a2aClient(url, text, contextId) {
  const args = [path.join(REPO_ROOT, 'tests/python/a2a_client.py'), url, text];
  if (contextId) args.push(contextId);
  const { stdout } = await run(PYTHON, args, { timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').at(-1));
}

/** The assistant text and end @ag-ui/client's HttpAgent gets on the AG-UI route. */
async function nativeClient(text) {
  const agent = new HttpAgent({ url: `${gateway}/agui`, threadId: `thread-${randomUUID()}` });
  agent.addMessage({ id: `u-${randomUUID()}`, role: 'user', content: text });
  let error = null;
  await agent.runAgent({ runId: `run-${randomUUID()}` }, {
    onRunErrorEvent: ({ event }) => {
      error = event;
    },
  }).catch((e) => {
    error ??= { message: e.message };
  });
  const said = agent.messages.filter((m) => m.role === 'assistant').map((m) => m.content ?? '').join('');
  return { said, error };
}

test('a2a-sdk client: a run is a task whose artifact text is the native client\'s text', HANG_GUARD, async () => {
  const contextId = `ctx-${randomUUID()}`;
  const got = await a2aClient(`${gateway}/a2a`, 'What is the weather?', contextId);
  assert.equal(got.error, undefined, got.error);
  assert.equal(got.kinds[0], 'task', 'a run is a task, not a bare message');
  assert.equal(got.state, 'TASK_STATE_COMPLETED');
  assert.equal(got.contextId, contextId, 'the contextId sent is kept');
  const native = await nativeClient('What is the weather?');
  assert.equal(native.error, null);
  assert.ok(native.said.length > 0);
  assert.equal(got.text, native.said, 'each piece of text once, as the native client has it');
  // The text is not sent again in a status message.
  assert.ok(!got.messages.some((m) => m.includes(native.said)), JSON.stringify(got.messages));
});

test('a2a-sdk client: an agent error is a failed task with the message', HANG_GUARD, async () => {
  const got = await a2aClient(`${gateway}/a2a`, 'error please');
  assert.equal(got.error, undefined, got.error);
  assert.equal(got.state, 'TASK_STATE_FAILED');
  const native = await nativeClient('error please');
  assert.ok(native.error, 'the native client saw the error');
  assert.ok(got.messages.includes(native.error.message), `${JSON.stringify(got.messages)} vs ${native.error.message}`);
});

test('a2a-sdk client: text with U+2028/U+2029/U+0085 reaches the Python client whole', HANG_GUARD, async () => {
  // The demo agent echoes the user's text in its plain answer.
  const said = 'a\u2028b\u2029c\u0085d';
  const got = await a2aClient(`${gateway}/a2a`, said);
  assert.equal(got.error, undefined, got.error);
  assert.ok(got.text.includes(said), JSON.stringify(got.text));
});

/** What the @a2a-js/sdk client reads from the route: text, states, kinds. */
async function jsClient(url, text, contextId) {
  // A card naming the route as its JSON-RPC interface (the gateway serves
  // no card yet: docs/mapping/a2a.md).
  const card = {
    name: 'gateway', description: '', version: '1',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [], securitySchemes: {}, securityRequirements: [], signatures: [],
  };
  const client = await new ClientFactory().createFromAgentCard(card);
  const got = { text: '', kinds: [], states: [], messages: [], contextId: null };
  const message = {
    messageId: `m-${randomUUID()}`, role: Role.ROLE_USER, contextId, taskId: '',
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata: undefined, extensions: [], referenceTaskIds: [],
  };
  for await (const r of client.sendMessageStream({ tenant: '', message, configuration: undefined, metadata: undefined })) {
    const { $case, value } = r.payload;
    got.kinds.push($case);
    if ($case === 'task') got.contextId = value.contextId;
    if ($case === 'artifactUpdate') got.text += value.artifact.parts.map((p) => p.content?.value ?? '').join('');
    if ($case === 'statusUpdate') {
      got.states.push(value.status.state);
      const m = value.status.message;
      if (m) got.messages.push(m.parts.map((p) => p.content?.value ?? '').join(''));
    }
  }
  return got;
}

test('@a2a-js/sdk client: the same task, text and outcome', HANG_GUARD, async () => {
  const contextId = `ctx-${randomUUID()}`;
  const got = await jsClient(`${gateway}/a2a`, 'What is the weather?', contextId);
  const native = await nativeClient('What is the weather?');
  assert.equal(got.kinds[0], 'task');
  assert.equal(got.contextId, contextId);
  assert.equal(got.text, native.said);
  assert.equal(got.states.at(-1), TaskState.TASK_STATE_COMPLETED);

  const failed = await jsClient(`${gateway}/a2a`, 'error please', `ctx-${randomUUID()}`);
  assert.equal(failed.states.at(-1), TaskState.TASK_STATE_FAILED);
  const nativeError = await nativeClient('error please');
  assert.ok(failed.messages.includes(nativeError.error.message), JSON.stringify(failed.messages));
});
