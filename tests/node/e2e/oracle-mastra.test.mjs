// Oracle test, second framework: one Mastra agent
// (tests/node/oracle/mastra-agent.mjs, a scripted offline model) served
// natively in AG-UI by AG-UI's own Mastra integration (@ag-ui/mastra) and in
// the Vercel UI message stream by Mastra's own @mastra/ai-sdk, and through
// babelgate in the other dialect. What the real clients assemble (`ai`'s
// readUIMessageStream, @ag-ui/client), how runs end, and the history the
// model receives must be the same both ways, up to the differences below,
// each with its reason (docs/oracle-findings.md, docs/mapping.md).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { HttpAgent } from '@ag-ui/client';
import { BABELGATE, freePort } from './lib/stack.mjs';
import { DELIBERATE, unexplained } from '../oracle/deliberate.mjs';
import { garbles } from '../oracle/garble.mjs';

const SCENARIOS = ['plain', 'unicode', 'tool', 'retry', 'error_before', 'error_during', 'error_after', 'client_tool', 'think'];

// Differences that are not faults of the translation: the `mastra` entries
// of tests/node/oracle/deliberate.mjs, each explained in docs/mapping.md
// ("Deliberate differences"): the wire sequence (babelgate adds Vercel steps
// as AG-UI STEP_* events; @ag-ui/mastra sends TEXT_MESSAGE_CHUNK, which the
// client expands); compared is what the clients assemble.

// Where Mastra's two adapters differ from each other by construction, the
// native side is brought to what the other dialect's adapter can say, and
// everything else is still compared (see adjust below). Each is a row of
// docs/mapping.md's deliberate differences, by the id in backquotes:
// - Error text (`upstream-error-text`): @mastra/ai-sdk sends the error serialised as JSON (its
//   fields), @ag-ui/mastra's run fails with `String(error)`; babelgate passes
//   each upstream's text as it is. Compared: the scripted message in it.
// - Failed tool calls (retry, error_during; `unsaid-tool-failure`): @ag-ui/mastra drops Mastra's
//   `tool-error` chunk, so its AG-UI stream has no result for a failed call:
//   a Vercel client behind babelgate sees the call still `input-available`
//   (natively `output-error`), and natively @ag-ui/client counts the failed
//   call as pending, where babelgate (from @mastra/ai-sdk's
//   `tool-output-error`) gives it a tool message marked `metadata.error`.
// - A string tool result (`json-string-result`): @ag-ui/mastra sends it JSON-encoded; babelgate
//   parses only objects and arrays into a Vercel `output`.
// - error_before (`error-before-step`): the AG-UI upstream fails before any step, so the Vercel
//   client behind babelgate gets `start`,`error` and no assistant message;
//   @mastra/ai-sdk sends a `start-step` first, which opens an empty one.
const ORACLE_ERROR = /oracle: [a-z ]+/;
function errorText(t) {
  return typeof t === 'string' ? (t.match(ORACLE_ERROR)?.[0] ?? t) : t;
}
const ERROR_SCENARIOS = ['error_before', 'error_during', 'error_after'];
const isToolPart = (p) => p.type?.startsWith('tool-') || p.type === 'dynamic-tool';
export function adjust(scenario, _turn, c) {
  // @ag-ui/mastra sends every tool result as JSON text, a string result too
  // ('"flaky(2) ok"'); babelgate parses only JSON objects and arrays into a
  // Vercel `output` (a text result that happens to be valid JSON, "42", must
  // stay text), so the Vercel client behind it shows the quoted string.
  for (const p of c.cvG?.message?.parts ?? []) {
    if (!isToolPart(p) || typeof p.output !== 'string') continue;
    p.output = jsonString(p.output);
  }
  // The other way, the same: a string `output` from @mastra/ai-sdk is sent as
  // the tool message's content as it is, @ag-ui/mastra sends it JSON-encoded.
  for (const m of c.caN?.messages ?? []) if (m.role === 'tool') m.content = jsonString(m.content);
  if (ERROR_SCENARIOS.includes(scenario)) {
    for (const k of ['cvN', 'cvG']) if (c[k]) c[k].error = errorText(c[k].error);
    for (const k of ['caN', 'caG']) if (c[k]?.runError) c[k].runError.message = errorText(c[k].runError.message);
  }
  if (scenario === 'retry' || scenario === 'error_during') {
    const parts = c.cvN?.message?.parts ?? [];
    for (let i = 0; i < parts.length; i += 1) {
      const p = parts[i];
      if (p.state !== 'output-error') continue;
      p.state = 'input-available';
      delete p.errorText;
      // Nor can it tell that the model was called again after the failure:
      // the next call comes in the same step.
      if (parts[i + 1]?.type === 'step-start') parts.splice(i + 1, 1);
    }
    // Taken out only when babelgate says it failed, with its error text, and
    // natively that same call is left unanswered (pending, or the run failed
    // with no result for it): the failure shows through the gateway, natively
    // the call is only unfinished.
    const pending = c.caN?.finished?.pendingToolCallIds ?? [];
    const unanswered = (id) => pending.includes(id)
      || (c.caN?.runError && !c.caN.messages.some((m) => m.role === 'tool' && m.toolCallId === id));
    const failed = (c.caG?.messages ?? []).filter((m) => m.role === 'tool' && m.metadata?.error === true
      && typeof m.content === 'string' && m.content !== '' && unanswered(m.toolCallId));
    if (c.caG) c.caG.messages = c.caG.messages.filter((m) => !failed.includes(m));
    const ids = new Set(failed.map((m) => m.toolCallId));
    if (c.caN?.finished?.pendingToolCallIds) c.caN.finished.pendingToolCallIds = pending.filter((id) => !ids.has(id));
  }
  if (scenario === 'error_before' && c.cvN?.message?.parts?.length === 0 && c.cvG?.message === null) c.cvN.message = null;
  // Ids were numbered before messages were taken out: number them again.
  return Object.fromEntries(Object.entries(c).map(([k, v]) => [k, renumber(v)]));
}
function jsonString(t) {
  try {
    const v = JSON.parse(t);
    return typeof v === 'string' ? v : t;
  } catch {
    return t;
  }
}
function renumber(v) {
  const ids = new Map();
  return JSON.parse(JSON.stringify(v ?? null).replace(/<id\d+>/g, (m) => {
    if (!ids.has(m)) ids.set(m, `<id${ids.size + 1}>`);
    return ids.get(m);
  }));
}

// Multi-part and interleaved history, the same conversation in each
// dialect: a user message of two text parts (one with U+2028), an assistant
// message with reasoning, text, a tool call with its result and more text,
// then a new user message.
const HISTORY_VERCEL = [
  { id: 'h-u1', role: 'user', parts: [{ type: 'text', text: 'scenario tool, first part' }, { type: 'text', text: 'second part: 你好\u2028!' }] },
  {
    id: 'h-a1',
    role: 'assistant',
    parts: [
      { type: 'step-start' },
      { type: 'reasoning', text: 'Weather needs a tool.', state: 'done' },
      { type: 'text', text: 'Let me look.', state: 'done' },
      { type: 'tool-get_weather', toolCallId: 'call_h_1', state: 'output-available', input: { city: '北京' }, output: { city: '北京', temperature: 22, condition: 'sunny' } },
      { type: 'step-start' },
      { type: 'text', text: 'It is sunny.', state: 'done' },
    ],
  },
  { id: 'h-u2', role: 'user', parts: [{ type: 'text', text: 'scenario plain again' }] },
];
const HISTORY_AGUI = [
  { id: 'h-u1', role: 'user', content: [{ type: 'text', text: 'scenario tool, first part' }, { type: 'text', text: 'second part: 你好\u2028!' }] },
  { id: 'h-r1', role: 'reasoning', content: 'Weather needs a tool.' },
  { id: 'h-a1', role: 'assistant', content: 'Let me look.', toolCalls: [{ id: 'call_h_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"北京"}' } }] },
  { id: 'h-t1', role: 'tool', toolCallId: 'call_h_1', content: '{"city":"北京","temperature":22,"condition":"sunny"}' },
  { id: 'h-a2', role: 'assistant', content: 'It is sunny.' },
  { id: 'h-u2', role: 'user', content: 'scenario plain again' },
];

// Aborts: the model streams some text and then waits for its abort signal.
// The client aborts once it has shown that text.
const ABORT_PROMPT = 'scenario abort';
async function aborted(m, since) {
  // Event-driven: the model records the abort when its signal fires; the
  // bound only matters when it never does.
  for (let i = 0; i < 400; i += 1) {
    const h = (await (await fetch(`${m.ORACLE}/history?since=${since}`)).json()).filter((e) => e.scenario === 'abort');
    if (h.length && h[0].aborted !== false) return h[0].aborted;
    await new Promise((r) => setTimeout(r, 50));
  }
  return 'never';
}
async function vercelAbort(url, chatId) {
  const ac = new AbortController();
  const stream = await new DefaultChatTransport({ api: url }).sendMessages({
    chatId, trigger: 'submit-message', messageId: undefined, abortSignal: ac.signal,
    messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: ABORT_PROMPT }] }],
  });
  let message = null;
  let error = null;
  try {
    for await (const msg of readUIMessageStream({ stream, onError: (e) => { error = e?.name ?? String(e); } })) {
      message = structuredClone(msg);
      if (msg.parts.some((p) => p.type === 'text' && p.text)) ac.abort();
    }
  } catch (e) {
    error = e?.name ?? String(e);
  }
  return { text: message?.parts.filter((p) => p.type === 'text').map((p) => p.text), error };
}
async function aguiAbort(url, threadId) {
  const agent = new HttpAgent({ url, threadId });
  agent.messages = [{ id: 'u1', role: 'user', content: ABORT_PROMPT }];
  let failure = null;
  let finished = false;
  try {
    await agent.runAgent({ runId: `run-${threadId}` }, {
      onTextMessageContentEvent: () => agent.abortRun(),
      onRunFinishedEvent: () => { finished = true; },
    });
  } catch (e) {
    failure = e?.name ?? String(e);
  }
  return { text: agent.messages.filter((x) => x.role === 'assistant').map((x) => x.content), failure, finished };
}

let report;
let capture;
let stopAll = () => {};
before(async () => {
  process.env.BABELGATE = BABELGATE;
  process.env.ORACLE_PORT = String(await freePort());
  process.env.GATEWAY_PORT = String(await freePort());
  const m = await import('../oracle/capture.mjs');
  capture = m;
  stopAll = m.stopAll;
  report = await m.compareAll({ ...m.MASTRA, writeFixtures: false, scenarios: SCENARIOS, adjust });
}, { timeout: 240_000 });
after(() => stopAll());

describe('Mastra natively vs through babelgate: what the real clients and the model see', () => {
  test('every scenario ran, both turns where there are two', () => {
    assert.deepEqual(Object.keys(report).sort(), [...SCENARIOS].sort());
    assert.ok(report.tool.turn2 && report.client_tool.turn2, 'follow-up turns');
    assert.deepEqual(report.tool.turn2.missing, []);
    assert.deepEqual(report.client_tool.turn2.missing, []);
  });
  test('multi-part, interleaved and reasoning history reaches the model as natively', async () => {
    const m = capture;
    const nA = await m.post(`${m.ORACLE}/agui`, m.aguiBody(HISTORY_AGUI));
    const gV = await m.post(`${m.GATEWAY}/v-from-agui`, m.vercelBody(HISTORY_VERCEL));
    const nV = await m.post(`${m.ORACLE}/vercel`, m.vercelBody(HISTORY_VERCEL));
    const gA = await m.post(`${m.GATEWAY}/a-from-vercel`, m.aguiBody(HISTORY_AGUI));
    assert.deepEqual([nA.status, gV.status, nV.status, gA.status], [200, 200, 200, 200]);
    for (const r of [nA, gV, nV, gA]) assert.equal(r.history.length, 1, 'one model call each');
    // Not vacuous: the model saw the whole conversation, interleaved.
    const roles = (h) => h[0].prompt.map((x) => `${x.role}:${Array.isArray(x.content) ? x.content.map((p) => p.type).join('+') : 'text'}`);
    assert.deepEqual(roles(nV.history), ['system:text', 'user:text+text', 'assistant:reasoning+text+tool-call', 'tool:tool-result', 'assistant:text', 'user:text']);
    // @ag-ui/mastra gives the model no AG-UI reasoning message (it converts
    // user, assistant and tool messages only), natively as through babelgate.
    assert.deepEqual(roles(nA.history), ['system:text', 'user:text+text', 'assistant:text+tool-call', 'tool:tool-result', 'assistant:text', 'user:text']);
    assert.deepEqual(m.diff(m.normalize(nA.history), m.normalize(gV.history)), [], 'AG-UI agent: Vercel history through babelgate vs AG-UI history natively');
    assert.deepEqual(m.diff(m.normalize(nV.history), m.normalize(gA.history)), [], 'Vercel agent: AG-UI history through babelgate vs Vercel history natively');
  });

  test('abort: the client shows the same text, and the Vercel agent\'s model is aborted through babelgate as natively', async () => {
    const m = capture;
    const since = async () => (await (await fetch(`${m.ORACLE}/history`)).json()).length;
    const release = () => fetch(`${m.ORACLE}/release`);
    // Vercel upstream: native Vercel client vs AG-UI client through babelgate.
    let s0 = await since();
    const cvN = await vercelAbort(`${m.ORACLE}/vercel`, 'abort-1');
    const abortedN = await aborted(m, s0);
    await release();
    s0 = await since();
    const caG = await aguiAbort(`${m.GATEWAY}/a-from-vercel`, 'abort-2');
    const abortedG = await aborted(m, s0);
    await release();
    assert.equal(abortedN, true, 'natively, @mastra/ai-sdk passes the abort to the model');
    assert.equal(abortedG, true, 'through babelgate, the abort reaches the Vercel agent\'s model too');
    // AG-UI upstream: native AG-UI client vs Vercel client through babelgate.
    // @ag-ui/mastra does not pass a client's abort to the model (its run has
    // no teardown), so only what the clients show is compared; /release
    // ends the model calls left waiting.
    const caN = await aguiAbort(`${m.ORACLE}/agui`, 'abort-3');
    await release();
    const cvG = await vercelAbort(`${m.GATEWAY}/v-from-agui`, 'abort-4');
    await release();
    const want = ['Streaming until aborted'];
    assert.deepEqual(cvN, { text: want, error: 'AbortError' });
    assert.deepEqual(cvG, cvN, 'Vercel client: through babelgate as natively');
    assert.deepEqual(caN, { text: want, failure: null, finished: false });
    assert.deepEqual(caG, caN, 'AG-UI client: through babelgate as natively');
  });

  for (const scenario of SCENARIOS) {
    test(scenario, () => {
      for (const [turn, r] of Object.entries(report[scenario])) {
        const { left } = unexplained('mastra', scenario, turn, r);
        assert.deepEqual(left, [], `${scenario} ${turn}: ${JSON.stringify(left).slice(0, 1500)}`);
      }
    });
  }
  test('every allowance is needed: each allows a difference these runs really show', () => {
    const used = new Set();
    for (const [scenario, turns] of Object.entries(report)) {
      for (const [turn, r] of Object.entries(turns)) unexplained('mastra', scenario, turn, r).used.forEach((e) => used.add(e));
    }
    const idle = DELIBERATE.filter((e) => e.test === 'mastra' && !used.has(e));
    assert.deepEqual(idle.map((e) => `${e.id} ${e.aspect} ${e.path ?? e.side}`), []);
  });
});

describe('each Mastra allowance and adjustment is only as wide as its row: a garbled run is reported', () => {
  for (const g of garbles('mastra')) {
    test(`${g.id}: ${g.what}`, () => {
      const run = structuredClone(report[g.scenario][g.turn]);
      run.clients = run.raw;
      g.garble(run);
      run.clients = adjust(g.as ?? g.scenario, g.turn, run.clients);
      const { left } = unexplained('mastra', g.as ?? g.scenario, g.turn, run);
      if (g.allowed) assert.deepEqual(left, [], JSON.stringify(left).slice(0, 1500));
      else assert.ok(left.length > 0, 'the garbled run was not reported');
    });
  }
  test('every allowance has a garble it must report', () => {
    const bare = DELIBERATE.filter((e) => e.test === 'mastra' && !garbles('mastra').some((g) => !g.allowed
      && g.id === e.id && g.aspect === e.aspect && g.kind === (e.path ? 'path' : 'sequence')));
    assert.deepEqual(bare.map((e) => `${e.id} ${e.aspect}`), []);
  });
});
