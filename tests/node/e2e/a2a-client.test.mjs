// A2A clients -> babelgate serve (`client = "a2a"`) -> the gateway's demo
// agent (AG-UI). The A2A clients are the official SDKs' own: `a2a-sdk` 1.x
// in Python (tests/python/a2a_client.py) and `@a2a-js/sdk` 1.3.0's
// ClientFactory client; what they read is compared with what the agent's
// native client, @ag-ui/client's HttpAgent, gets on an AG-UI route in front
// of the same agent. Both clients also build themselves from the card the
// route serves, get, follow and cancel a task, and meet each JSON-RPC error.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { HttpAgent } from '@ag-ui/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
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
    // A pause between the agent's events: a "long" run (200 pieces) is
    // still going while the clients get, follow and cancel it.
    `[demo_agent]\nlisten = "127.0.0.1:${demoPort}"\nprotocol = "ag-ui"\ndelay_ms = 40`,
    route('/a2a', 'a2a') + `agent_name = "Demo"\nagent_description = "The gateway's demo agent"\n`
      + `[[routes.agent_skills]]\nid = "weather"\nname = "Weather"\ndescription = "Says the weather"\ntags = ["demo"]\n`,
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

const CARD = '/.well-known/agent-card.json';

test('the agent card: the route\'s URL as its client sees it, streaming, v1.0, the configured skills', HANG_GUARD, async () => {
  const res = await fetch(`${gateway}/a2a${CARD}`);
  assert.equal(res.status, 200);
  const card = await res.json();
  assert.equal(card.name, 'Demo');
  assert.equal(card.description, "The gateway's demo agent");
  assert.equal(card.capabilities.streaming, true);
  assert.match(card.protocolVersion, /^1\./);
  assert.deepEqual(card.skills.map((s) => [s.id, s.name, s.tags]), [['weather', 'Weather', ['demo']]]);
  assert.deepEqual(card.supportedInterfaces, [{ url: `${gateway}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }]);
  // A peer that is no trusted proxy does not get to say where the route is.
  const forged = await (await fetch(`${gateway}/a2a${CARD}`, {
    headers: { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' },
  })).json();
  assert.equal(forged.supportedInterfaces[0].url, `${gateway}/a2a`);
});

test('both SDK clients build themselves from the card URL and stream a task', HANG_GUARD, async () => {
  const py = await a2aClient(`${gateway}/a2a${CARD}`, 'What is the weather?', `ctx-${randomUUID()}`);
  assert.equal(py.error, undefined, py.error);
  assert.equal(py.state, 'TASK_STATE_COMPLETED');
  const native = await nativeClient('What is the weather?');
  assert.equal(py.text, native.said);

  const client = await new ClientFactory().createFromUrl(`${gateway}/a2a${CARD}`, '');
  const got = await readStream(client.sendMessageStream(sendParams('What is the weather?', `ctx-${randomUUID()}`)));
  assert.equal(got.text, native.said);
  assert.equal(got.states.at(-1), TaskState.TASK_STATE_COMPLETED);
});

function sendParams(text, contextId) {
  return {
    tenant: '', configuration: undefined, metadata: undefined,
    message: {
      messageId: `m-${randomUUID()}`, role: Role.ROLE_USER, contextId, taskId: '',
      parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
      metadata: undefined, extensions: [], referenceTaskIds: [],
    },
  };
}

/** Reads a stream of the JS client to its end, or `stopAfter` responses
 * and leaves it open (a client that closed it would have left: the
 * route's runs are cancelled then). */
async function readStream(stream, stopAfter = Infinity) {
  const got = { text: '', kinds: [], states: [], taskId: null };
  while (got.kinds.length < stopAfter) {
    const { value: r, done } = await stream.next();
    if (done) break;
    const { $case, value } = r.payload;
    got.kinds.push($case);
    if ($case === 'task') got.taskId = value.id;
    if ($case === 'artifactUpdate') got.text += value.artifact.parts.map((p) => p.content?.value ?? '').join('');
    if ($case === 'statusUpdate') got.states.push(value.status.state);
  }
  return got;
}

const taskText = (task) => task.artifacts.flatMap((a) => a.parts).map((p) => p.content?.value ?? '').join('');
const errorName = (p) => p.then(() => null, (e) => e.name);

test('a2a-sdk client: get, follow and cancel a running task; the task errors', HANG_GUARD, async () => {
  const { stdout } = await run(PYTHON, [path.join(REPO_ROOT, 'tests/python/a2a_tasks.py'), `${gateway}/a2a`, 'a long one please'], { timeout: 80_000 });
  const got = JSON.parse(stdout.trim().split('\n').at(-1));
  assert.equal(got.first[0], 'task');
  assert.equal(got.got.id, got.taskId);
  assert.equal(got.got.contextId, 'ctx-tasks', 'GetTask keeps the contextId sent');
  assert.equal(got.got.state, 'TASK_STATE_WORKING');
  assert.match(got.got.text, /^0 /, 'the artifact text so far');
  assert.equal(got.followed[0], 'task', 'a subscription starts with the task');
  assert.equal(got.followed.length, 3);
  assert.equal(got.canceled.state, 'TASK_STATE_CANCELED');
  assert.equal(got.end, 'TASK_STATE_CANCELED', 'the live stream ends canceled');
  assert.equal(got.after.state, 'TASK_STATE_CANCELED');
  assert.ok(got.after.text.length >= got.got.text.length);
  assert.equal(got.unknown, 'TaskNotFoundError');
  assert.equal(got.again, 'TaskNotCancelableError');
  assert.equal(got.resubscribe_ended, 'UnsupportedOperationError');
});

// The SDK's v0.3 compatibility layer, for a v0.3 card.
const legacy = { legacyCompat: { enabled: true } };
const legacyFactory = () => new ClientFactory({
  transports: [new JsonRpcTransportFactory(legacy)],
  cardResolver: new DefaultAgentCardResolver(legacy),
});

for (const [label, card, factory] of [
  ['v1.0', (url) => ({
    name: 'gateway', description: '', version: '1',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [], securitySchemes: {}, securityRequirements: [], signatures: [],
  }), () => new ClientFactory()],
  // A v0.3 card: the SDK's compatibility layer speaks the v0.3 method names
  // and reads v0.3 shapes (`kind`, lowercase states).
  ['v0.3', (url) => ({
    name: 'gateway', description: '', version: '1', protocolVersion: '0.3.0', url, preferredTransport: 'JSONRPC',
    capabilities: { streaming: true }, defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'], skills: [],
  }), legacyFactory],
]) {
  test(`@a2a-js/sdk client (${label}): get, follow and cancel a running task; the task errors`, HANG_GUARD, async () => {
    const client = await factory().createFromAgentCard(card(`${gateway}/a2a`));
    const contextId = `ctx-${randomUUID()}`;
    const live = client.sendMessageStream(sendParams('a long one please', contextId));
    const first = await readStream(live, 4);
    assert.equal(first.kinds[0], 'task');
    const id = first.taskId;
    const got = await client.getTask({ tenant: '', id, historyLength: undefined });
    assert.equal(got.id, id);
    assert.equal(got.contextId, contextId);
    assert.equal(got.status.state, TaskState.TASK_STATE_WORKING);
    assert.match(taskText(got), /^0 /);
    const following = client.resubscribeTask({ tenant: '', id });
    const followed = await readStream(following, 3);
    await following.return();
    assert.equal(followed.kinds[0], 'task');
    assert.equal(followed.kinds.length, 3);
    const canceled = await client.cancelTask({ tenant: '', id, metadata: undefined });
    assert.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED);
    const rest = await readStream(live);
    assert.equal(rest.states.at(-1), TaskState.TASK_STATE_CANCELED, 'the live stream ends canceled');
    const after = await client.getTask({ tenant: '', id, historyLength: undefined });
    assert.equal(after.status.state, TaskState.TASK_STATE_CANCELED);
    assert.equal(await errorName(client.getTask({ tenant: '', id: '0123abcd.00ff', historyLength: undefined })), 'TaskNotFoundError');
    assert.equal(await errorName(client.cancelTask({ tenant: '', id, metadata: undefined })), 'TaskNotCancelableError');
    // The answers come in the spelling of the method names the client used.
    const method = label === 'v1.0' ? 'GetTask' : 'tasks/get';
    const raw = await rpc(JSON.stringify({ jsonrpc: '2.0', id: 'g', method, params: { id } }));
    assert.equal(raw.body.id, 'g');
    if (label === 'v1.0') {
      assert.equal(raw.body.result.status.state, 'TASK_STATE_CANCELED');
    } else {
      assert.equal(raw.body.result.kind, 'task');
      assert.equal(raw.body.result.status.state, 'canceled');
    }
  });
}

/** Posts `body` (a string) to the A2A route as a JSON-RPC client would. */
async function rpc(body) {
  const res = await fetch(`${gateway}/a2a`, {
    method: 'POST', body,
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'a2a-version': '1.0' },
  });
  return { status: res.status, contentType: res.headers.get('content-type'), body: await res.json() };
}

test('JSON-RPC errors: each its code, with the request id (null when unreadable), at HTTP 200', HANG_GUARD, async () => {
  const cases = [
    ['{"jsonrpc":"2.0","id":1,', -32700, null],
    ['[{"jsonrpc":"2.0","id":2,"method":"GetTask"}]', -32600, null],
    ['{"jsonrpc":"1.0","id":3,"method":"GetTask","params":{"id":"x"}}', -32600, 3],
    ['{"jsonrpc":"2.0","id":"four","params":{}}', -32600, 'four'],
    ['{"jsonrpc":"2.0","id":5,"method":"ListTasks","params":{}}', -32601, 5],
    ['{"jsonrpc":"2.0","id":6,"method":"SendStreamingMessage","params":{"message":{"parts":"no"}}}', -32602, 6],
    ['{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{}}', -32602, 7],
    ['{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"0123abcd.00ff"}}', -32001, 8],
    ['{"jsonrpc":"2.0","id":9,"method":"CancelTask","params":{"id":"not-a-task"}}', -32001, 9],
    ['{"jsonrpc":"2.0","id":10,"method":"tasks/get","params":{"id":"0123abcd.00ff"}}', -32001, 10],
    // The card declares no push notifications and no extended card: the
    // spec's errors for their methods.
    ['{"jsonrpc":"2.0","id":11,"method":"CreateTaskPushNotificationConfig","params":{}}', -32003, 11],
    ['{"jsonrpc":"2.0","id":12,"method":"tasks/pushNotificationConfig/set","params":{}}', -32003, 12],
    ['{"jsonrpc":"2.0","id":13,"method":"GetExtendedAgentCard","params":{}}', -32004, 13],
  ];
  for (const [body, code, id] of cases) {
    const got = await rpc(body);
    // 200, as the SDK servers answer errors: the Python SDK client reads
    // the code only then.
    assert.equal(got.status, 200, `${body}: ${got.status}`);
    assert.equal(got.body.jsonrpc, '2.0', body);
    assert.equal(got.body.error?.code, code, `${body}: ${JSON.stringify(got.body)}`);
    assert.equal(got.body.id, id, body);
    assert.equal(typeof got.body.error.message, 'string');
  }
});

test('a2a-sdk client: GetTask keeps the historyLength most recent messages of the task (0: none), refuses a negative one', HANG_GUARD, async () => {
  // The weather run's tool call and result are the task's working
  // statuses, each given way to the next: its history.
  const { stdout } = await run(PYTHON, [path.join(REPO_ROOT, 'tests/python/a2a_history.py'), `${gateway}/a2a`, 'What is the weather?'], { timeout: 60_000 });
  const got = JSON.parse(stdout.trim().split('\n').at(-1));
  const keys = (h) => h.map((m) => m.parts.map((p) => Object.keys(p.data ?? {})).flat().join(','));
  assert.deepEqual(keys(got.unset), ['toolCall', 'toolResult'], JSON.stringify(got.unset));
  assert.ok(got.unset.every((m) => m.role === 'ROLE_AGENT'));
  assert.deepEqual(got.zero, []);
  assert.deepEqual(keys(got.one), ['toolResult']);
  assert.ok(got.negative.error, JSON.stringify(got.negative));
  assert.match(got.negative.message, /historyLength/);
});

test('a2a-sdk client without streaming (SendMessage): one answer, the task with the native client\'s text', HANG_GUARD, async () => {
  const args = [path.join(REPO_ROOT, 'tests/python/a2a_client.py'), `${gateway}/a2a`, 'What is the weather?'];
  const { stdout } = await run(PYTHON, args, { timeout: 60_000, env: { ...process.env, A2A_STREAMING: '0' } });
  const got = JSON.parse(stdout.trim().split('\n').at(-1));
  assert.equal(got.error, undefined, got.error);
  assert.deepEqual(got.kinds, ['task'], 'one answer, a task');
  assert.equal(got.state, 'TASK_STATE_COMPLETED');
  const native = await nativeClient('What is the weather?');
  assert.equal(got.text, native.said);
  // v0.3's name, v0.3's shape: the task itself, with its kind.
  const res = await rpc(JSON.stringify({ jsonrpc: '2.0', id: 'v03', method: 'message/send', params: { message: { kind: 'message', messageId: 'm-v03', role: 'user', parts: [{ kind: 'text', text: 'hello' }] } } }));
  assert.equal(res.status, 200);
  assert.match(String(res.contentType), /^application\/json/);
  assert.equal(res.body.id, 'v03');
  assert.equal(res.body.result.kind, 'task', JSON.stringify(res.body));
  assert.equal(res.body.result.status.state, 'completed');
});
