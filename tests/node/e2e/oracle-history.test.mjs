// Oracle test, second part: histories and aborts, against pydantic-ai's own
// adapters (tests/python/oracle_agent.py). oracle.test.mjs compares what the
// clients assemble from fresh runs; this one compares
// - what the model receives from a rich conversation (multi-part user
//   messages, reasoning, text around tool calls, a failed call, several
//   steps) sent by each real client's wire format, natively in its own
//   dialect and through babelgate to the other dialect's adapter;
// - a client that aborts mid-answer: the partial message it keeps, and that
//   the agent's run is cancelled, natively and through babelgate.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { HttpAgent } from '@ag-ui/client';
import { BABELGATE, PYTHON, REPO_ROOT, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';
import { diff, normalize } from '../oracle/capture.mjs';
import { deliberateFor } from '../oracle/deliberate.mjs';

// Differences in the model's history that are not faults: the
// `pydantic-ai-history` entries of tests/node/oracle/deliberate.mjs, each
// explained in docs/mapping.md ("Deliberate differences"). One is message
// ids: one Vercel UI message is several AG-UI messages, so pydantic-ai's
// note of each model message's UI message id cannot agree.

const WEATHER = { city: '北京', temperature: 22, condition: 'sunny' };

// The conversation as `ai`'s useChat holds it (ai 7 UIMessage parts).
const VERCEL_HISTORY = [
  { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'First part.' }, { type: 'text', text: 'Second part, 你好\u2028next line.' }] },
  {
    id: 'a1',
    role: 'assistant',
    parts: [
      { type: 'step-start' },
      { type: 'reasoning', text: 'The user wants the weather.' },
      { type: 'text', text: 'Let me check.' },
      { type: 'tool-get_weather', toolCallId: 'call_h1', state: 'output-available', input: { city: '北京' }, output: WEATHER },
      { type: 'step-start' },
      { type: 'text', text: 'It is sunny. Now the flaky one.' },
      { type: 'tool-flaky', toolCallId: 'call_h2', state: 'output-error', input: { n: 1 }, errorText: 'n=1 is wrong, use n=2' },
      { type: 'step-start' },
      { type: 'text', text: 'Done.' },
    ],
  },
  { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'scenario history: and now?' }] },
];

// The same conversation as @ag-ui/client holds it (AG-UI 1.0 messages).
const AGUI_HISTORY = [
  { id: 'u1', role: 'user', content: [{ type: 'text', text: 'First part.' }, { type: 'text', text: 'Second part, 你好\u2028next line.' }] },
  { id: 'r1', role: 'reasoning', content: 'The user wants the weather.' },
  {
    id: 'a1', role: 'assistant', content: 'Let me check.',
    toolCalls: [{ id: 'call_h1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"北京"}' } }],
  },
  { id: 't1', role: 'tool', toolCallId: 'call_h1', content: JSON.stringify(WEATHER) },
  {
    id: 'a2', role: 'assistant', content: 'It is sunny. Now the flaky one.',
    toolCalls: [{ id: 'call_h2', type: 'function', function: { name: 'flaky', arguments: '{"n":1}' } }],
  },
  { id: 't2', role: 'tool', toolCallId: 'call_h2', content: 'n=1 is wrong, use n=2', error: 'n=1 is wrong, use n=2' },
  { id: 'a3', role: 'assistant', content: 'Done.' },
  { id: 'u2', role: 'user', content: 'scenario history: and now?' },
];

let oracle;
let gateway;
let ORACLE;
let GATEWAY;
let runSeq = 0;

const aguiBody = (messages) => ({
  threadId: 'conv-history', runId: `run-h${++runSeq}`, state: {}, messages, tools: [], context: [], forwardedProps: {},
});
const vercelBody = (messages) => ({ id: 'conv-history', messages, trigger: 'submit-message' });

async function historySince(n) {
  return (await (await fetch(`${ORACLE}/history?since=${n}`)).json());
}
async function historyLength() {
  return (await historySince(0)).length;
}

/** POSTs a run and returns the model histories it caused. */
async function modelHistory(url, body) {
  const before = await historyLength();
  const r = await fetch(url, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(body),
  });
  const text = await r.text();
  assert.equal(r.status, 200, `${url}: ${text.slice(0, 500)}`);
  const h = (await historySince(before)).filter((e) => e.messages);
  assert.ok(h.length > 0, `${url}: the model was called`);
  return h;
}

/** Waits (bounded, only for a failure) until the agent logged `n` cancelled runs since `before`. */
async function cancelledSince(before, n) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const c = (await historySince(before)).filter((e) => e.cancelled).length;
    if (c >= n || Date.now() > deadline) return c;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `ai`'s transport against a live URL; aborts after the first text delta. */
async function vercelAbort(url) {
  const controller = new AbortController();
  const transport = new DefaultChatTransport({ api: url });
  const stream = await transport.sendMessages({
    chatId: 'conv-abort', trigger: 'submit-message', messageId: undefined,
    messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'scenario abort' }] }],
    abortSignal: controller.signal,
  });
  const tapped = stream.pipeThrough(new TransformStream({
    transform(c, ctl) {
      ctl.enqueue(c);
      if (c.type === 'text-delta') controller.abort();
    },
  }));
  let message = null;
  let error = null;
  try {
    for await (const m of readUIMessageStream({ stream: tapped })) message = structuredClone(m);
  } catch (e) {
    error = e?.name ?? String(e);
  }
  return { message, aborted: controller.signal.aborted, error };
}

/** @ag-ui/client's HttpAgent against a live URL; abortRun() after the first text content. */
async function aguiAbort(url) {
  const agent = new HttpAgent({ url, threadId: 'conv-abort' });
  agent.messages = [{ id: 'u1', role: 'user', content: 'scenario abort' }];
  let aborted = false;
  let failure = null;
  try {
    await agent.runAgent({ runId: `run-a${++runSeq}` }, {
      onTextMessageContentEvent: () => {
        if (!aborted) {
          aborted = true;
          agent.abortRun();
        }
      },
    });
  } catch (e) {
    failure = String(e?.message ?? e);
  }
  return { messages: structuredClone(agent.messages), aborted, failure };
}

before(async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'oracle-history');
  fs.rmSync(logDir, { recursive: true, force: true });
  fs.mkdirSync(logDir, { recursive: true });
  const oraclePort = await freePort();
  const gatewayPort = await freePort();
  ORACLE = `http://127.0.0.1:${oraclePort}`;
  GATEWAY = `http://127.0.0.1:${gatewayPort}`;
  oracle = launch('oracle', PYTHON, [path.join(REPO_ROOT, 'tests', 'python', 'oracle_agent.py'), '--port', String(oraclePort)], logDir);
  await waitReady(oracle, `${ORACLE}/healthz`);
  const cfg = path.join(logDir, 'gateway.toml');
  fs.writeFileSync(cfg, `[server]
listen = "127.0.0.1:${gatewayPort}"

[[routes]]
path = "/v-from-agui"
client = "vercel"
upstream = "${ORACLE}/agui"
upstream_protocol = "ag-ui"

[[routes]]
path = "/a-from-vercel"
client = "ag-ui"
upstream = "${ORACLE}/vercel"
upstream_protocol = "vercel"
`);
  gateway = launch('babelgate', BABELGATE, ['serve', '--config', cfg], logDir);
  await waitReady(gateway, `${GATEWAY}/healthz`);
}, { timeout: 60_000 });
after(async () => {
  if (gateway) await stopProc(gateway);
  if (oracle) await stopProc(oracle);
});

// `client` names the run: 'vercel-client' or 'agui-client'.
const left = (client, d) => d.filter((x) => !deliberateFor('pydantic-ai-history', { scenario: client, turn: 'turn1', aspect: 'history' }, x));

/** The model gets the same history from `body` natively and through the gateway. */
async function sameModelHistory(client, nativeUrl, gatewayUrl, body) {
  const native = await modelHistory(nativeUrl, body);
  const gw = await modelHistory(gatewayUrl, body);
  const all = diff(normalize(native), normalize(gw));
  if (process.env.ORACLE_DEBUG) console.log(JSON.stringify(all, null, 1));
  const d = left(client, all);
  assert.deepEqual(d, [], JSON.stringify(d, null, 1).slice(0, 3000));
  // Each allowance can fail: garbled next to what it allows, the history is reported.
  const garbled = [
    ['a user text', (h) => { h[0].messages[0].parts[0].content = 'garbled'; }],
    ['metadata beside the id', (h) => { h[0].messages[1].metadata = { __pydantic_ai__: { ui_message_id: 'x' }, other: 1 }; }],
    ['arguments of the same form but another value', (h) => { const p = h[0].messages[1].parts.find((x) => x.args); p.args = typeof p.args === 'string' ? '{"city":"x"}' : { city: 'x' }; }],
  ];
  for (const [what, garble] of garbled) {
    const g = normalize(gw);
    garble(g);
    assert.ok(left(client, diff(normalize(native), g)).length > 0, `${client}: ${what} garbled was not reported`);
  }
  // Not vacuous: the model saw both user parts, the reasoning, both calls and the failure.
  const seen = JSON.stringify(gw);
  for (const s of ['First part.', 'Second part', 'The user wants the weather.', 'call_h1', 'call_h2', 'n=1 is wrong', 'Done.']) {
    assert.ok(seen.includes(s), `model history lacks ${s}`);
  }
}

/**
 * The message without the upstream message ids babelgate puts on its parts
 * (`upstream-ids` in docs/mapping.md, "Deliberate differences"); only
 * metadata that holds nothing else is taken out.
 */
function withoutUpstreamIds(message) {
  if (!message) return message;
  const parts = message.parts.map((p) => {
    const q = { ...p };
    for (const k of ['providerMetadata', 'callProviderMetadata', 'resultProviderMetadata']) {
      if (q[k] && Object.keys(q[k]).length === 1 && q[k].babelgate) delete q[k];
    }
    return q;
  });
  return { ...message, parts };
}

describe('pydantic-ai natively vs through babelgate: histories and aborts', () => {
  test('a Vercel client\'s rich history reaches the model the same through an AG-UI agent', async () => {
    await sameModelHistory('vercel-client', `${ORACLE}/vercel`, `${GATEWAY}/v-from-agui`, vercelBody(VERCEL_HISTORY));
  });

  test('an AG-UI client\'s rich history reaches the model the same through a Vercel agent', async () => {
    await sameModelHistory('agui-client', `${ORACLE}/agui`, `${GATEWAY}/a-from-vercel`, aguiBody(AGUI_HISTORY));
  });

  test('a Vercel client that aborts keeps the same partial message, and the run is cancelled', async () => {
    const before = await historyLength();
    const native = await vercelAbort(`${ORACLE}/vercel`);
    const gw = await vercelAbort(`${GATEWAY}/v-from-agui`);
    assert.ok(native.aborted && gw.aborted);
    assert.ok(gw.message?.parts?.some((p) => p.type === 'text' && p.text.startsWith('Partial answer')), JSON.stringify(gw));
    assert.deepEqual(normalize(withoutUpstreamIds(gw.message)), normalize(native.message));
    assert.equal(gw.error, native.error);
    assert.equal(await cancelledSince(before, 2), 2, 'both runs (native, and the AG-UI run behind the gateway) were cancelled');
  });

  test('an AG-UI client that aborts keeps the same partial message, and the run is cancelled', async () => {
    const before = await historyLength();
    const native = await aguiAbort(`${ORACLE}/agui`);
    const gw = await aguiAbort(`${GATEWAY}/a-from-vercel`);
    assert.ok(native.aborted && gw.aborted);
    assert.equal(gw.failure, native.failure);
    assert.ok(gw.messages.some((m) => m.role === 'assistant' && String(m.content).startsWith('Partial answer')), JSON.stringify(gw));
    assert.deepEqual(normalize(gw.messages), normalize(native.messages));
    assert.equal(await cancelledSince(before, 2), 2, 'both runs (native, and the Vercel run behind the gateway) were cancelled');
  });
});
