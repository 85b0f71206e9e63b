#!/usr/bin/env node
// Oracle capture and comparison: pydantic-ai's own adapters are the reference.
//
//   node tests/node/oracle/capture.mjs [--no-gateway] [--mastra]
//
// Env: ORACLE_PY (default target/oracle-venv/bin/python), BABELGATE (default
// target/debug/babelgate, else /work/main/target/debug/babelgate),
// ORACLE_PORT (18765), GATEWAY_PORT (18766).
//
// 1. Starts tests/python/oracle_agent.py (one Agent, POST /agui and /vercel).
// 2. Per scenario, posts a real request to each native endpoint and saves the
//    raw SSE bytes as tests/fixtures/oracle/<scenario>.{ag-ui,vercel}.sse and
//    the model histories it received as <scenario>.{ag-ui,vercel}.history.json.
// 3. Unless --no-gateway: starts babelgate with two routes
//      /v-from-agui  client vercel, upstream oracle /agui   (AG-UI -> Vercel)
//      /a-from-vercel client ag-ui, upstream oracle /vercel (Vercel -> AG-UI)
//    sends the same requests through it, saves the output under
//    target/oracle/, and feeds native and gateway bytes through the real
//    clients (ai's readUIMessageStream; @ag-ui/client HttpAgent). Writes every
//    difference of the assembled result to target/oracle/report.json and
//    prints it.
//
// Follow-up turns test history fidelity: `tool` and `error_during` (a failed
// call) are continued with the client-assembled messages plus a new "plain"
// user message, and
// `client_tool` is continued with the front-end tool's output (the way each
// client sends it), through each path.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runUseChatPath, serving } from '../lib/vercel-client.mjs';
import { HttpAgent } from '@ag-ui/client';
import { diff } from './diff.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..', '..');
const FIXTURES = path.join(ROOT, 'tests', 'fixtures', 'oracle');
const OUTPUT = path.join(ROOT, 'target', 'oracle');
const ORACLE_PORT = Number(process.env.ORACLE_PORT ?? 18765);
const GATEWAY_PORT = Number(process.env.GATEWAY_PORT ?? 18766);
const ORACLE = `http://127.0.0.1:${ORACLE_PORT}`;
const GATEWAY = `http://127.0.0.1:${GATEWAY_PORT}`;
const noGateway = process.argv.includes('--no-gateway');

export const SCENARIOS = [
  'plain', 'unicode', 'tool', 'retry', 'error_before', 'error_during', 'error_after', 'client_tool', 'think',
];
const PROMPT = (s) => `scenario ${s}`;

const CLIENT_TOOL = {
  name: 'change_background',
  description: 'Change the page background colour.',
  parameters: { type: 'object', properties: { color: { type: 'string', description: 'A CSS colour' } }, required: ['color'] },
};

function firstExisting(...c) {
  return c.find((p) => p && fs.existsSync(p));
}
const PY = process.env.ORACLE_PY ?? path.join(ROOT, 'target', 'oracle-venv', 'bin', 'python');
const BABELGATE = firstExisting(
  process.env.BABELGATE, path.join(ROOT, 'target', 'debug', 'babelgate'), '/work/main/target/debug/babelgate',
);

// --- processes ----------------------------------------------------------------

const children = [];
function start(cmd, args, name) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d) => { log += d; });
  child.stderr.on('data', (d) => { log += d; });
  child.on('exit', (code) => { if (code && !child.killedByUs) console.error(`${name} exited ${code}\n${log}`); });
  children.push(child);
  return child;
}
function stopAll() {
  for (const c of children) { c.killedByUs = true; c.kill('SIGTERM'); }
}
process.on('exit', stopAll);
export { stopAll };

async function waitFor(url, ms = 20000) {
  const t0 = Date.now();
  for (;;) {
    try {
      const r = await fetch(url);
      if (r.status < 500) return;
    } catch {}
    if (Date.now() - t0 > ms) throw new Error(`not up: ${url}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

// --- requests -------------------------------------------------------------------

let runSeq = 0;
function aguiBody(messages) {
  runSeq += 1;
  return {
    threadId: 'conv-oracle',
    runId: `run-${runSeq}`,
    state: {},
    messages,
    tools: [CLIENT_TOOL],
    context: [],
    forwardedProps: {},
  };
}
function vercelBody(messages, messageId) {
  const b = { id: 'conv-oracle', messages, trigger: 'submit-message' };
  if (messageId) b.messageId = messageId;
  return b;
}

async function post(url, body, accept = 'text/event-stream') {
  const before = (await (await fetch(`${ORACLE}/history`)).json()).length;
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept },
    body: JSON.stringify(body),
  });
  const bytes = Buffer.from(await r.arrayBuffer());
  const history = await (await fetch(`${ORACLE}/history?since=${before}`)).json();
  return { status: r.status, headers: Object.fromEntries(r.headers), bytes, history };
}

// --- the real clients -----------------------------------------------------------

export async function vercelClient(bytes) {
  const { message, chunks, error } = await runUseChatPath({
    api: 'http://oracle.invalid/api/chat', fetch: serving(bytes), chatId: 'conv-oracle', text: 'x',
  });
  return {
    message: message ? structuredClone(message) : null,
    error: error ? String(error?.message ?? error) : null,
    chunkTypes: chunks.map((c) => c.type),
  };
}

export async function aguiClient(bytes) {
  delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;
  const agent = new HttpAgent({
    url: 'http://oracle.invalid/agent', threadId: 'conv-oracle',
    fetch: async () => new Response(bytes, { status: 200, headers: { 'content-type': 'text/event-stream' } }),
  });
  const seen = { finished: null, runError: null, eventTypes: [] };
  const consoleLines = [];
  const saved = { warn: console.warn, error: console.error };
  console.warn = (...a) => consoleLines.push(`warn: ${a.map(String).join(' ')}`);
  console.error = (...a) => consoleLines.push(`error: ${a.map(String).join(' ')}`);
  let failure = null;
  try {
    await agent.runAgent({ runId: 'run-client' }, {
      onEvent: ({ event }) => { seen.eventTypes.push(event.type); },
      onRunFinishedEvent: (p) => { seen.finished = { outcome: p.outcome, result: p.result, pendingToolCallIds: p.pendingToolCallIds }; },
      onRunErrorEvent: ({ event }) => { seen.runError = { message: event.message, code: event.code }; },
    });
  } catch (e) {
    failure = String(e?.message ?? e);
  } finally {
    Object.assign(console, saved);
  }
  return { messages: structuredClone(agent.messages), state: agent.state, ...seen, failure, consoleLines };
}

// --- normalisation and diff ---------------------------------------------------

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
export function normalize(v) {
  const ids = new Map();
  const idOf = (s) => {
    if (!ids.has(s)) ids.set(s, `<id${ids.size + 1}>`);
    return ids.get(s);
  };
  const walk = (x, key) => {
    if (typeof x === 'string') {
      if (/^(timestamp)$/i.test(key ?? '')) return '<ts>';
      if (/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/.test(x)) return '<ts>';
      if (/^(id|messageId|parentMessageId|runId)$/.test(key ?? '')) return idOf(x);
      return x.replace(UUID, (m) => idOf(m));
    }
    if (typeof x === 'number' && /timestamp|^createdAt$/i.test(key ?? '')) return '<ts>';
    if (Array.isArray(x)) return x.map((e) => walk(e, key));
    if (x && typeof x === 'object') {
      const o = {};
      for (const k of Object.keys(x).sort()) if (x[k] !== undefined && k !== 'seq') o[k] = walk(x[k], k);
      return o;
    }
    return x;
  };
  return walk(v);
}

// Each side numbered on its own, so that equal shapes get equal ids.
const normalizeEach = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, normalize(v)]));

export { diff };

// --- main -------------------------------------------------------------------------

function save(file, data) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, data);
}
const historyJson = (h) => JSON.stringify(h, null, 2) + '\n';

// Turn a Vercel client's assembled assistant message into the next request's
// history; for client_tool, fill in the front-end tool's output the way
// addToolOutput does.
function vercelFollowUp(scenario, first, assistant) {
  if (!assistant) return null;
  if (scenario === 'tool' || scenario === 'error_during') {
    return vercelBody([first, assistant, { id: 'user-2', role: 'user', parts: [{ type: 'text', text: PROMPT('plain') + ' again' }] }]);
  }
  if (scenario === 'client_tool') {
    const a = structuredClone(assistant);
    for (const p of a.parts) {
      if (p.type === 'tool-change_background' || (p.type === 'dynamic-tool' && p.toolName === 'change_background')) {
        p.state = 'output-available';
        p.output = { ok: true, color: '#ff0000' };
      }
    }
    return vercelBody([first, a], a.id);
  }
  return null;
}
function aguiFollowUp(scenario, first, messages) {
  if (!messages) return null;
  const history = messages.filter((m) => m.role !== 'user' || m.id !== first.id);
  if (scenario === 'tool' || scenario === 'error_during') {
    return aguiBody([first, ...history, { id: 'user-2', role: 'user', content: PROMPT('plain') + ' again' }]);
  }
  if (scenario === 'client_tool') {
    const call = history.flatMap((m) => m.toolCalls ?? []).find((c) => c.function.name === 'change_background');
    if (!call) return null;
    return aguiBody([first, ...history, {
      id: 'tool-result-1', role: 'tool', toolCallId: call.id, content: JSON.stringify({ ok: true, color: '#ff0000' }),
    }]);
  }
  return null;
}

/**
 * Starts the oracle agent and (unless --no-gateway) babelgate, runs every
 * scenario natively and through the gateway, and returns the report of
 * differences. `writeFixtures: false` (the test) leaves tests/fixtures alone.
 */
export async function compareAll({
  writeFixtures = true,
  fixtures: FIX = FIXTURES,
  out: OUT = OUTPUT,
  agent = [PY, path.join(ROOT, 'tests', 'python', 'oracle_agent.py')],
  scenarios = SCENARIOS,
  // (scenario, turn, {cvN, cvG, caN, caG}) -> the same, normalised: where a
  // framework's two adapters differ by construction, the caller says how,
  // and everything else is still compared.
  adjust = (_s, _t, c) => c,
} = {}) {
  const saveFixture = writeFixtures ? save : () => {};
  fs.mkdirSync(FIX, { recursive: true });
  fs.mkdirSync(OUT, { recursive: true });
  start(agent[0], [...agent.slice(1), '--port', String(ORACLE_PORT)], 'oracle');
  await waitFor(`${ORACLE}/healthz`);
  if (!noGateway) {
    const toml = `[server]
listen = "127.0.0.1:${GATEWAY_PORT}"

[[routes]]
path = "/v-from-agui"
client = "vercel"
upstream = "${ORACLE}/agui"
upstream_protocol = "ag-ui"

[[routes.client_tools]]
name = "change_background"
description = "Change the page background colour."
parameters = { type = "object", properties = { color = { type = "string", description = "A CSS colour" } }, required = ["color"] }

[[routes]]
path = "/a-from-vercel"
client = "ag-ui"
upstream = "${ORACLE}/vercel"
upstream_protocol = "vercel"
`;
    const cfg = path.join(OUT, 'gateway.toml');
    save(cfg, toml);
    start(BABELGATE, ['serve', '--config', cfg], 'babelgate');
    await waitFor(`${GATEWAY}/`);
  }

  const report = {};
  for (const s of scenarios) {
    const vUser = { id: 'user-1', role: 'user', parts: [{ type: 'text', text: PROMPT(s) }] };
    const aUser = { id: 'user-1', role: 'user', content: PROMPT(s) };
    const turns = {};

    // Native captures.
    const nA = await post(`${ORACLE}/agui`, aguiBody([aUser]));
    const nV = await post(`${ORACLE}/vercel`, vercelBody([vUser]));
    saveFixture(path.join(FIX, `${s}.ag-ui.sse`), nA.bytes);
    saveFixture(path.join(FIX, `${s}.vercel.sse`), nV.bytes);
    saveFixture(path.join(FIX, `${s}.ag-ui.history.json`), historyJson(nA.history));
    saveFixture(path.join(FIX, `${s}.vercel.history.json`), historyJson(nV.history));
    if (noGateway) continue;

    // Through the gateway.
    const gV = await post(`${GATEWAY}/v-from-agui`, vercelBody([vUser]));
    const gA = await post(`${GATEWAY}/a-from-vercel`, aguiBody([aUser]));
    save(path.join(OUT, `${s}.gw-ag-ui-to-vercel.sse`), gV.bytes);
    save(path.join(OUT, `${s}.gw-vercel-to-ag-ui.sse`), gA.bytes);
    save(path.join(OUT, `${s}.gw-ag-ui-to-vercel.history.json`), historyJson(gV.history));
    save(path.join(OUT, `${s}.gw-vercel-to-ag-ui.history.json`), historyJson(gA.history));

    // Vercel client: native /vercel vs gateway(AG-UI upstream). AG-UI client:
    // native /agui vs gateway(Vercel upstream).
    const cvN = await vercelClient(nV.bytes);
    const cvG = await vercelClient(gV.bytes);
    const caN = await aguiClient(nA.bytes);
    const caG = await aguiClient(gA.bytes);
    const raw1 = normalizeEach({ cvN, cvG, caN, caG });
    const a1 = adjust(s, 'turn1', structuredClone(raw1));
    turns.turn1 = {
      status: { nV: nV.status, gV: gV.status, nA: nA.status, gA: gA.status },
      vercel_client: diff(a1.cvN, a1.cvG),
      agui_client: diff(a1.caN, a1.caG),
      // What the model saw: gateway route to /agui vs native /agui request, etc.
      history_via_v_from_agui_vs_native_agui: diff(normalize(nA.history), normalize(gV.history)),
      history_via_a_from_vercel_vs_native_vercel: diff(normalize(nV.history), normalize(gA.history)),
      // What the differences above were taken from (before and after
      // `adjust`), for the tests to judge (tests/node/oracle/deliberate.mjs)
      // and to garble (tests/node/oracle/garble.mjs).
      raw: raw1,
      clients: a1,
      histories: { nA: normalize(nA.history), gV: normalize(gV.history), nV: normalize(nV.history), gA: normalize(gA.history) },
    };
    save(path.join(OUT, `${s}.clients.json`), JSON.stringify(normalize({ cvN, cvG, caN, caG }), null, 2) + '\n');

    // Follow-up turn (history fidelity).
    const fvN = vercelFollowUp(s, vUser, cvN.message);
    const fvG = vercelFollowUp(s, vUser, cvG.message);
    const faN = aguiFollowUp(s, aUser, caN.messages);
    const faG = aguiFollowUp(s, aUser, caG.messages);
    if (fvN || fvG || faN || faG) {
      const r = {};
      const t2 = {};
      if (fvN) r.nV = await post(`${ORACLE}/vercel`, fvN);
      if (fvG) r.gV = await post(`${GATEWAY}/v-from-agui`, fvG);
      if (faN) r.nA = await post(`${ORACLE}/agui`, faN);
      if (faG) r.gA = await post(`${GATEWAY}/a-from-vercel`, faG);
      for (const [k, v] of Object.entries(r)) {
        const name = { nV: 'vercel', gV: 'gw-ag-ui-to-vercel', nA: 'ag-ui', gA: 'gw-vercel-to-ag-ui' }[k];
        const put = k.startsWith('n') ? saveFixture : save;
        const dir = k.startsWith('n') ? FIX : OUT;
        put(path.join(dir, `${s}.turn2.${name}.sse`), v.bytes);
        put(path.join(dir, `${s}.turn2.${name}.history.json`), historyJson(v.history));
      }
      save(path.join(OUT, `${s}.turn2.requests.json`), JSON.stringify({ fvN, fvG, faN, faG }, null, 2) + '\n');
      const c = {};
      if (r.nV) c.cvN = await vercelClient(r.nV.bytes);
      if (r.gV) c.cvG = await vercelClient(r.gV.bytes);
      if (r.nA) c.caN = await aguiClient(r.nA.bytes);
      if (r.gA) c.caG = await aguiClient(r.gA.bytes);
      t2.missing = Object.entries({ fvN, fvG, faN, faG }).filter(([, v]) => !v).map(([k]) => k);
      t2.status = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v.status]));
      t2.raw = normalizeEach({ cvN: c.cvN ?? null, cvG: c.cvG ?? null, caN: c.caN ?? null, caG: c.caG ?? null });
      const a2 = adjust(s, 'turn2', structuredClone(t2.raw));
      t2.vercel_client = diff(a2.cvN, a2.cvG);
      t2.agui_client = diff(a2.caN, a2.caG);
      t2.history_via_v_from_agui_vs_native_agui = diff(normalize(r.nA?.history ?? null), normalize(r.gV?.history ?? null));
      t2.history_via_a_from_vercel_vs_native_vercel = diff(normalize(r.nV?.history ?? null), normalize(r.gA?.history ?? null));
      t2.clients = a2;
      t2.histories = Object.fromEntries(['nA', 'gV', 'nV', 'gA'].map((k) => [k, normalize(r[k]?.history ?? null)]));
      save(path.join(OUT, `${s}.turn2.clients.json`), JSON.stringify(normalize(c), null, 2) + '\n');
      turns.turn2 = t2;
    }
    report[s] = turns;
  }
  if (!noGateway) {
    save(path.join(OUT, 'report.json'), JSON.stringify(report, null, 2) + '\n');
    for (const [s, turns] of Object.entries(report)) {
      for (const [t, r] of Object.entries(turns)) {
        for (const k of ['vercel_client', 'agui_client', 'history_via_v_from_agui_vs_native_agui', 'history_via_a_from_vercel_vs_native_vercel']) {
          const n = r[k]?.length ?? 0;
          console.log(`${s} ${t} ${k}: ${n ? `${n} difference(s)` : 'same'}`);
        }
      }
    }
    console.log(`report: ${path.relative(ROOT, path.join(OUT, 'report.json'))}`);
  }
  console.log(`native captures: ${path.relative(ROOT, FIX)}`);
  return report;
}

// The second framework (tests/node/oracle/mastra-agent.mjs): same scenarios,
// same comparison; its captures go to tests/fixtures/oracle-mastra/.
export const MASTRA = {
  fixtures: path.join(ROOT, 'tests', 'fixtures', 'oracle-mastra'),
  out: path.join(ROOT, 'target', 'oracle-mastra'),
  agent: [process.execPath, path.join(ROOT, 'tests', 'node', 'oracle', 'mastra-agent.mjs')],
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  compareAll(process.argv.includes('--mastra') ? MASTRA : {}).then(() => { stopAll(); process.exit(0); }, (e) => { console.error(e); stopAll(); process.exit(1); });
}

// For tests that send their own requests to the agent and the gateway that
// compareAll started (same ports).
export { post, aguiBody, vercelBody, ORACLE, GATEWAY };
