// Real clients -> babelgate on a same-dialect route -> scripted upstreams
// whose streams the client refuses when it reads them straight:
// @ag-ui/client's HttpAgent on an AG-UI route to an AG-UI upstream, and the
// `ai` client path of useChat (DefaultChatTransport, readUIMessageStream) on
// a Vercel route to a Vercel upstream. On such a route the gateway passes
// frames as received, except those the client refuses even from its own
// upstream (`Encoder::passes`, `Decoder::frame_passes`): it writes those as
// mapped, so that every one of these runs reaches the client accepted and
// ended.
//
// Each scenario is also fed to the same client straight, without the
// gateway, and must be refused there: so each test shows the gateway
// repairing something, not a stream that needed nothing.
//
// And a repair must lose nothing: what the client saw (its events) and
// assembled (its messages) must say what the upstream sent, by content
// (lib/content.mjs: text per message, reasoning, tool calls with their
// arguments parsed, tool results, custom events, state, the outcome, event
// by event), with the exceptions each scenario documents.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { HttpAgent } from '@ag-ui/client';
import { runUseChatPath, serving } from '../lib/vercel-client.mjs';
import { aguiAssembled, aguiContent, contentOf, vercelAssembled, vercelContent } from './lib/content.mjs';
import { SSE_HEAD, chunk, frame, hostileUpstream, startGateway, toml } from './lib/adversary.mjs';
import { stopProc } from './lib/stack.mjs';

// The client reports what it dropped or converted only when this is unset.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

const T = { timeout: 60_000 }; // per test: only fires when something hangs
const endChunked = (sock) => sock.end('0\r\n\r\n');

const started = (req) => ({ type: 'RUN_STARTED', threadId: req.json?.threadId ?? 't', runId: req.json?.runId ?? 'r' });
const finished = (req) => ({ type: 'RUN_FINISHED', threadId: req.json?.threadId ?? 't', runId: req.json?.runId ?? 'r' });
const text = [
  { type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'hello' },
  { type: 'TEXT_MESSAGE_END', messageId: 'm1' },
];
const thinking = [
  { type: 'THINKING_START', title: 'plan' },
  { type: 'THINKING_TEXT_MESSAGE_START' },
  { type: 'THINKING_TEXT_MESSAGE_CONTENT', delta: 'thinking it over' },
  { type: 'THINKING_TEXT_MESSAGE_END' },
  { type: 'THINKING_END' },
];

/**
 * What each upstream sends: its events, and whether it then ends its body
 * (`cut: false`) or closes the connection mid-run (`cut: true`). `ends`:
 * what the client must see last through the gateway.
 */
const SCENARIOS = {
  // An agent of the deprecated THINKING_* events (pre-1.0 integrations).
  // The client upgrades them itself, with a warning per event, which a
  // gateway that passes them on leaves it to print.
  thinking: { events: (req) => [started(req), ...thinking, ...text, finished(req)], ends: 'RUN_FINISHED' },
  // The same, cut while it reasons: the reasoning the gateway closes must be
  // the reasoning the client has open.
  'thinking-cut': { events: (req) => [started(req), ...thinking.slice(0, 3)], cut: true, ends: 'RUN_ERROR' },
  // Reasoning content with no THINKING opener before it.
  'thinking-no-opener': { events: (req) => [started(req), thinking[2], finished(req)], ends: 'RUN_FINISHED' },
  // A run that ends with a message and a step still open.
  'open-at-finish': {
    events: (req) => [started(req), text[0], text[1], { type: 'STEP_STARTED', stepName: 'search' }, finished(req)],
    ends: 'RUN_FINISHED',
  },
  // Content of a message never started, and a message ended twice.
  'content-no-start': {
    events: (req) => [started(req), { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm0', delta: 'orphan' }, ...text, finished(req)],
    ends: 'RUN_FINISHED',
  },
  'ended-twice': { events: (req) => [started(req), ...text, text[2], finished(req)], ends: 'RUN_FINISHED' },
  'started-twice': { events: (req) => [started(req), text[0], ...text, finished(req)], ends: 'RUN_FINISHED' },
  // Content of the parent's message tagged with a subagent's run id.
  'wrong-subagent-tag': {
    events: (req) => [
      started(req),
      { type: 'SUBAGENT_STARTED', subagentRunId: 's1', name: 'helper' },
      text[0],
      { ...text[1], subagentRunId: 's1' },
      text[2],
      { type: 'SUBAGENT_FINISHED', subagentRunId: 's1' },
      finished(req),
    ],
    ends: 'RUN_FINISHED',
  },
  // Every kind of content behind deprecated THINKING_* events (which make
  // the client warn straight): a tool call streamed in two pieces, its
  // result, a custom event, state, then text in two deltas.
  'thinking-then-everything': {
    events: (req) => [
      started(req),
      ...thinking,
      { type: 'TOOL_CALL_START', toolCallId: 'call-1', toolCallName: 'get_weather', parentMessageId: 'm0' },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call-1', delta: '{"city":' },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call-1', delta: '"北京"}' },
      { type: 'TOOL_CALL_END', toolCallId: 'call-1' },
      { type: 'TOOL_CALL_RESULT', messageId: 'res-1', toolCallId: 'call-1', content: '{"temperature":22}', role: 'tool' },
      { type: 'CUSTOM', name: 'progress', value: { done: 1, of: 2 } },
      { type: 'STATE_SNAPSHOT', snapshot: { counter: 0, items: [] } },
      { type: 'STATE_DELTA', delta: [{ op: 'replace', path: '/counter', value: 1 }] },
      text[0],
      { ...text[1], delta: 'sunny, ' },
      { ...text[1], delta: '22 °C' },
      text[2],
      finished(req),
    ],
    ends: 'RUN_FINISHED',
    state: { counter: 1, items: [] },
  },
  // No RUN_STARTED at all.
  'no-run-started': { events: (req) => [...text, finished(req)], ends: 'RUN_FINISHED' },
  // A chunk-built message, then an explicit end of it, which the client's
  // chunk lane also writes.
  'chunk-then-end': {
    events: (req) => [
      started(req),
      { type: 'TEXT_MESSAGE_CHUNK', messageId: 'c1', delta: 'chunked' },
      { type: 'TEXT_MESSAGE_END', messageId: 'c1' },
      finished(req),
    ],
    ends: 'RUN_FINISHED',
  },
};

/** Vercel UI message streams the `ai` client throws on, as SCENARIOS. */
const VERCEL_SCENARIOS = {
  // Text with no text-start before it.
  'text-no-start': {
    events: () => [{ type: 'start' }, { type: 'text-delta', id: 't1', delta: 'hello' }, { type: 'finish' }],
    ends: 'finish',
  },
  // Reasoning with no reasoning-start, then its end.
  'reasoning-no-start': {
    events: () => [
      { type: 'start' },
      { type: 'reasoning-delta', id: 'r1', delta: 'hmm' },
      { type: 'reasoning-end', id: 'r1' },
      { type: 'text-start', id: 't1' },
      { type: 'text-delta', id: 't1', delta: 'hello' },
      { type: 'text-end', id: 't1' },
      { type: 'finish' },
    ],
    ends: 'finish',
  },
  // A call, its result and a data part, then text with no text-start.
  'everything-then-text-no-start': {
    events: () => [
      { type: 'start' },
      { type: 'start-step' },
      { type: 'tool-input-start', toolCallId: 'c1', toolName: 'get_weather' },
      { type: 'tool-input-delta', toolCallId: 'c1', inputTextDelta: '{"city":' },
      { type: 'tool-input-delta', toolCallId: 'c1', inputTextDelta: '"北京"}' },
      { type: 'tool-input-available', toolCallId: 'c1', toolName: 'get_weather', input: { city: '北京' } },
      { type: 'tool-output-available', toolCallId: 'c1', output: { temperature: 22 } },
      { type: 'data-weather', id: 'd1', data: { city: '北京', temperature: 22 } },
      { type: 'finish-step' },
      { type: 'start-step' },
      { type: 'text-delta', id: 't1', delta: 'sunny, ' },
      { type: 'text-delta', id: 't1', delta: '22 °C' },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'stop' },
    ],
    ends: 'finish',
  },
  // A text part ended twice.
  'text-ended-twice': {
    events: () => [
      { type: 'start' },
      { type: 'text-start', id: 't1' },
      { type: 'text-delta', id: 't1', delta: 'hello' },
      { type: 'text-end', id: 't1' },
      { type: 'text-end', id: 't1' },
      { type: 'finish' },
    ],
    ends: 'finish',
  },
  // Tool input of a call never announced.
  'tool-input-no-start': {
    events: () => [{ type: 'start' }, { type: 'tool-input-delta', toolCallId: 'c1', inputTextDelta: '{"q":1}' }, { type: 'finish' }],
    ends: 'finish',
  },
  // An output of a call the message does not hold (the request continues
  // no message here).
  'output-of-an-unknown-call': {
    events: () => [{ type: 'start' }, { type: 'tool-output-available', toolCallId: 'c9', output: { text: 'sunny' } }, { type: 'finish' }],
    ends: 'finish',
  },
  // An approval request for a call the message does not hold ("No tool
  // invocation found"): the run waits on it, so the request must arrive.
  'approval-of-an-unknown-call': {
    events: () => [
      { type: 'start' },
      { type: 'start-step' },
      { type: 'tool-approval-request', approvalId: 'ap-7', toolCallId: 'c7' },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'tool-calls' },
    ],
    ends: 'finish',
    has: ['"approval-requested"', '"ap-7"'],
  },
};

const serve = (sc) => async (sock, req) => {
  sock.write(SSE_HEAD);
  const body = sc.events(req).map(frame).join('') + (sc.done ? 'data: [DONE]\n\n' : '');
  await chunk(sock, body);
  if (sc.cut) sock.destroy();
  else endChunked(sock);
};
for (const sc of Object.values(VERCEL_SCENARIOS)) sc.done = true;

const upstreamScenarios = {
  ...Object.fromEntries(Object.entries(SCENARIOS).map(([name, sc]) => [name, serve(sc)])),
  ...Object.fromEntries(Object.entries(VERCEL_SCENARIOS).map(([name, sc]) => [`vercel/${name}`, serve(sc)])),
};

let upstream;
let gw;

const route = (path, dialect, scenario) => `
[[routes]]
path = ${toml(path)}
client = ${toml(dialect)}
upstream = ${toml(`http://127.0.0.1:${upstream.port}/${scenario}`)}
upstream_protocol = ${toml(dialect)}
heartbeat_ms = 0
`;

before(async () => {
  upstream = await hostileUpstream(upstreamScenarios);
  gw = await startGateway('same-dialect', (port) =>
    [
      `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\nshutdown_grace_ms = 500\n`,
      ...Object.keys(SCENARIOS).map((name) => route(`/ag-ui/${name}`, 'ag-ui', name)),
      ...Object.keys(VERCEL_SCENARIOS).map((name) => route(`/vercel/${name}`, 'vercel', `vercel/${name}`)),
    ].join('\n'),
  );
});

after(async () => {
  if (gw) await stopProc(gw.proc);
  await upstream?.close();
});

/**
 * runAgent with console output captured: what the run ended with, every
 * warning or error the client printed, and whether runAgent rejected.
 */
async function run(agent) {
  const seen = { last: null, events: [], all: [], lines: [], rejected: null };
  const saved = { warn: console.warn, error: console.error };
  console.warn = (...a) => seen.lines.push(`console.warn: ${a.map(String).join(' ')}`);
  console.error = (...a) => seen.lines.push(`console.error: ${a.map(String).join(' ')}`);
  try {
    await agent.runAgent({ runId: `run-${randomBytes(4).toString('hex')}` }, {
      onEvent: ({ event }) => {
        seen.events.push(event.type);
        seen.all.push(event);
        seen.last = event.type;
      },
    });
  } catch (e) {
    seen.rejected = e?.message ?? String(e);
  } finally {
    Object.assign(console, saved);
  }
  return seen;
}

/** The upstream's bytes, fed to the client straight (no gateway). */
function straightAgent(name) {
  const sc = SCENARIOS[name];
  const req = { json: { threadId: 't', runId: 'r' } };
  const body = sc.events(req).map(frame).join('');
  return new HttpAgent({
    url: 'http://upstream.invalid/agent',
    fetch: async () => new Response(body, { headers: { 'content-type': 'text/event-stream' } }),
  });
}

describe('an AG-UI route to an AG-UI upstream: streams the client refuses straight reach it accepted', () => {
  for (const [name, sc] of Object.entries(SCENARIOS)) {
    test(name, T, async () => {
      const straight = await run(straightAgent(name));
      assert.ok(
        straight.rejected !== null || straight.lines.length > 0,
        `the client took this stream straight without a word; the scenario shows nothing: ${JSON.stringify(straight)}`,
      );

      const agent = new HttpAgent({ url: `${gw.base}/ag-ui/${name}`, threadId: `thread-${randomBytes(4).toString('hex')}` });
      const seen = await run(agent);
      assert.deepEqual(seen.lines, [], `the client printed warnings or errors: ${JSON.stringify(seen)}`);
      if (sc.ends === 'RUN_ERROR') {
        // The client rethrows a RUN_ERROR as runAgent's rejection; the error
        // must be the gateway's, not the client's own verification.
        assert.equal(seen.last, 'RUN_ERROR', JSON.stringify(seen));
      } else {
        assert.equal(seen.rejected, null, JSON.stringify(seen));
        assert.equal(seen.last, 'RUN_FINISHED', JSON.stringify(seen));
      }
      assert.ok(!seen.events.some((t) => t.startsWith('THINKING')), JSON.stringify(seen));
      // What the upstream said reached the client, event by event and in
      // its messages. The one documented exception: an upstream cut mid-run
      // said no end; the client must see the gateway's upstream error.
      const up = aguiContent(sc.events({ json: { threadId: 't', runId: 'r' } }));
      const got = aguiContent(seen.all);
      const expected = contentOf(up);
      if (sc.cut) {
        assert.equal(got.outcome?.code, 'upstream_disconnected', JSON.stringify(got.outcome));
        expected.seq.push(['end', null, got.outcome]);
        expected.outcome = got.outcome;
      }
      assert.deepEqual(contentOf(got), expected, 'the events the client saw');
      const { seq, outcome, ...assembled } = expected;
      assert.deepEqual(aguiAssembled(agent.messages, got), assembled, `the client's messages: ${JSON.stringify(agent.messages)}`);
      if (sc.state) assert.deepEqual(agent.state, sc.state);
    });
  }
});

/**
 * The documented exception on Vercel routes: the `ai` client holds no part
 * for a call never announced (no tool-input-start), so the gateway opens it
 * as `unknown`, with input {} when no input was streamed (only its output
 * or an approval request came). Its streamed arguments, never made
 * available by the upstream, are made available once they end (at the
 * run's end here), as on every route. `c` is the upstream's content;
 * returns what the client must see.
 */
function withCallOpeners(c) {
  const out = contentOf(c);
  const announced = new Set(c.seq.filter(([k]) => k === 'tool-call').map(([, id]) => id));
  const seq = [];
  for (const t of c.seq) {
    const [kind, id] = t;
    if (id?.startsWith?.('call#') && !announced.has(id)) {
      announced.add(id);
      seq.push(['tool-call', id, 'unknown']);
      const streamed = kind === 'tool-args';
      if (!streamed) seq.push(['tool-input-available', id, {}]);
      out.calls[id] = { name: 'unknown', args: streamed ? c.calls[id].args : {} };
    }
    seq.push(t);
  }
  for (const id of Object.keys(out.calls)) {
    const available = seq.some(([k, i]) => k === 'tool-input-available' && i === id);
    const last = seq.findLastIndex(([k, i]) => k === 'tool-args' && i === id);
    if (!available && last >= 0) seq.splice(last + 1, 0, ['tool-input-available', id, out.calls[id].args]);
  }
  out.seq = seq;
  return out;
}

/** useChat's client path against `url`, or against `body` served straight. */
const runVercel = ({ url, body }) =>
  runUseChatPath(url ? { api: url, chatId: `chat-${randomBytes(4).toString('hex')}` } : { fetch: serving(body) });

describe('a Vercel route to a Vercel upstream: streams the ai client throws on straight reach it accepted', () => {
  for (const [name, sc] of Object.entries(VERCEL_SCENARIOS)) {
    test(name, T, async () => {
      const body = sc.events({}).map(frame).join('') + 'data: [DONE]\n\n';
      const straight = await runVercel({ body });
      assert.ok(straight.error, `the client took this stream straight; the scenario shows nothing: ${JSON.stringify(straight.chunks)}`);

      const seen = await runVercel({ url: `${gw.base}/vercel/${name}` });
      assert.equal(seen.error, undefined, `${seen.error}\n${JSON.stringify(seen.chunks)}`);
      assert.equal(seen.chunks.at(-1)?.type, sc.ends, JSON.stringify(seen.chunks));
      // What the upstream said reached the client, chunk by chunk and in
      // its message (one text part per text id, tool parts by call).
      const parts = JSON.stringify(seen.message?.parts ?? []);
      for (const h of sc.has ?? []) assert.ok(parts.includes(h), `${h} is not in the message: ${parts}`);
      const got = vercelContent(seen.chunks);
      const expected = withCallOpeners(vercelContent(sc.events({})));
      assert.deepEqual(contentOf(got), expected, 'the chunks the client saw');
      const { calls, ...assembled } = vercelAssembled(seen.message, got);
      assert.deepEqual(
        { ...assembled, calls: Object.fromEntries(Object.entries(calls).map(([id, { state, ...c }]) => [id, c])) },
        { text: Object.values(expected.text), reasoning: Object.values(expected.reasoning), calls: expected.calls, results: expected.results, data: expected.data },
        `the client's message: ${parts}`,
      );
    });
  }
});
