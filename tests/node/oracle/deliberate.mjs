// The differences from a framework's native output that babelgate makes on
// purpose, as the oracle tests allow them, and the judge that applies them.
// Each entry's `id` is a row of docs/mapping.md, "Deliberate differences from
// the frameworks' own adapters", which says why; crates/app/babelgate/tests/
// mapping_doc.rs holds the two to each other (it reads the ids below).
//
// Every entry is for one oracle test (`test`), one aspect (what is compared:
// `vercel_client`, `agui_client`, a model history) and the runs it occurs in
// (`where`: `scenario/turn`). It is one of:
// - a value difference at a JSON `path` of the assembled values, allowed only
//   when `holds(match, run, d)` says it is the documented one (native and
//   gateway values, and where the row says so, that the content is intact);
// - a rule for the order of events or chunks on one `side` (`native`,
//   `gateway`, or `both`): `drop` types, `replace` one run of types by
//   another, `collapse` repeats of a type into one. The two sides' sequences,
//   after the rules, must be equal.
// HTTP status codes are compared as they are: no entry allows a difference.
import { diff } from './diff.mjs';

const SCENARIOS = ['plain', 'unicode', 'tool', 'retry', 'error_before', 'error_during', 'error_after', 'client_tool', 'think'];
const turn1 = (...s) => s.map((x) => `${x}/turn1`);
const turn2 = (...s) => s.map((x) => `${x}/turn2`);
// Every run in which the agent answers something (error_before fails first).
const ANSWERED = [...turn1(...SCENARIOS.filter((s) => s !== 'error_before')), ...turn2('tool', 'error_during', 'client_tool')];
// pydantic-ai runs that end normally (its Vercel adapter then sends a timestamp).
const FINISHED = [...turn1('plain', 'unicode', 'tool', 'retry', 'client_tool', 'think'), ...turn2('tool', 'error_during', 'client_tool')];
// Runs whose answer opens with tool calls (pydantic-ai's AG-UI adapter sends an
// empty text message first).
const TOOLS_FIRST = turn1('tool', 'retry', 'error_during', 'error_after', 'client_tool');

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// Where a Vercel part carries the upstream's message id (`upstream-ids`):
// that metadata and nothing else, where natively there is none.
const UPSTREAM_IDS = /^\$\.message\.parts\[\d+\]\.(providerMetadata|callProviderMetadata|resultProviderMetadata)$/;
const upstreamId = (_m, _r, d) => d.native === undefined
  && Object.keys(d.gateway ?? {}).join() === 'babelgate'
  && Object.keys(d.gateway.babelgate).join() === 'messageId'
  && /^<id\d+>$/.test(d.gateway.babelgate.messageId);

// A failed call through AG-UI -> Vercel (`tool-failure-agui`): natively
// `output-error` with its text; through babelgate `output-available`, whose
// output must be that same text, so the failure still shows.
function failureAsOutput(m, run) {
  const n = run.clients.cvN?.message?.parts?.[m[1]];
  const g = run.clients.cvG?.message?.parts?.[m[1]];
  return n?.state === 'output-error' && g?.state === 'output-available'
    && typeof n.errorText === 'string' && n.errorText !== ''
    && g.output === n.errorText && n.output === undefined && g.errorText === undefined;
}
// Vercel -> AG-UI: natively pydantic-ai's encrypted outcome, through
// babelgate `metadata: {error: true}` on the same tool message.
function failureMarked(m, run) {
  const n = run.clients.caN?.messages?.[m[1]];
  const g = run.clients.caG?.messages?.[m[1]];
  let outcome;
  try {
    outcome = JSON.parse(n?.encryptedValue).pydantic_ai.outcome;
  } catch {
    return false;
  }
  return n.role === 'tool' && g?.role === 'tool' && ['failed', 'retried'].includes(outcome)
    && n.metadata === undefined && g.encryptedValue === undefined && same(g.metadata, { error: true })
    && typeof g.content === 'string' && g.content !== '' && g.content === n.content;
}
// The follow-up's history: pydantic-ai's AG-UI adapter calls the result a
// success (the Vercel client held it as `output-available`), but the model
// still reads the error text as the result.
function failureTextReachesModel(m, run) {
  const n = run.histories.nA?.[0]?.messages?.[m[1]]?.parts?.[m[2]];
  const g = run.histories.gV?.[0]?.messages?.[m[1]]?.parts?.[m[2]];
  return n?.part_kind === 'tool-return' && n.outcome === 'failed' && g?.outcome === 'success'
    && typeof n.content === 'string' && n.content !== '' && g.content === n.content;
}

export const DELIBERATE = [
  // pydantic-ai (oracle.test.mjs).
  { id: 'wire-sequence', test: 'pydantic-ai', aspect: 'agui_client', where: ANSWERED, side: 'gateway', drop: ['STEP_STARTED', 'STEP_FINISHED'] },
  { id: 'wire-sequence', test: 'pydantic-ai', aspect: 'agui_client', where: turn1('think'), side: 'native', drop: ['REASONING_START', 'REASONING_END'] },
  { id: 'message-metadata-chunk', test: 'pydantic-ai', aspect: 'vercel_client', where: FINISHED, side: 'native', drop: ['message-metadata'] },
  { id: 'message-metadata-chunk', test: 'pydantic-ai', aspect: 'agui_client', where: FINISHED, side: 'gateway', drop: ['CUSTOM'] },
  {
    id: 'message-metadata-chunk', test: 'pydantic-ai', aspect: 'vercel_client', where: FINISHED, path: /^\$\.message\.metadata$/,
    holds: (_m, _r, d) => same(d.native, { pydantic_ai: { timestamp: '<ts>' } }) && d.gateway === undefined,
  },
  {
    id: 'minted-ids', test: 'pydantic-ai', aspect: 'history_via_a_from_vercel_vs_native_vercel', where: turn2('tool', 'error_during', 'client_tool'),
    path: /^\$\[0\]\.messages\[(\d+)\]\.metadata\.__pydantic_ai__\.ui_message_id$/,
    holds: (m, r, d) => r.histories.gA[0].messages[m[1]].kind === 'response' && d.native === '' && /^msg_[0-9a-f]{32}$/.test(d.gateway),
  },
  {
    id: 'history-message-ids', test: 'pydantic-ai', aspect: 'history_via_v_from_agui_vs_native_agui', where: turn2('client_tool'),
    path: /^\$\[0\]\.messages\[(\d+)\]\.metadata\.__pydantic_ai__\.ui_message_id$/,
    holds: (m, r, d) => {
      const ret = r.histories.gV[0].messages[m[1]].parts.filter((p) => p.part_kind === 'tool-return');
      return d.native === 'tool-result-1' && ret.length === 1 && d.gateway === `${ret[0].tool_call_id}-result`;
    },
  },
  { id: 'upstream-ids', test: 'pydantic-ai', aspect: 'vercel_client', where: ANSWERED, path: UPSTREAM_IDS, holds: upstreamId },
  { id: 'tool-only-content', test: 'pydantic-ai', aspect: 'agui_client', where: TOOLS_FIRST, side: 'native', replace: [['TEXT_MESSAGE_START', 'TEXT_MESSAGE_END'], []] },
  {
    id: 'tool-only-content', test: 'pydantic-ai', aspect: 'agui_client', where: TOOLS_FIRST, path: /^\$\.messages\[(\d+)\]\.content$/,
    holds: (m, r, d) => {
      const g = r.clients.caG.messages[m[1]];
      return d.native === '' && d.gateway === undefined && g.role === 'assistant' && g.toolCalls?.length > 0;
    },
  },
  {
    id: 'tool-failure-agui', test: 'pydantic-ai', aspect: 'vercel_client', where: turn1('retry', 'error_during'),
    path: /^\$\.message\.parts\[(\d+)\]\.(state|errorText|output)$/, holds: failureAsOutput,
  },
  { id: 'tool-failure-agui', test: 'pydantic-ai', aspect: 'vercel_client', where: turn1('retry', 'error_during'), side: 'native', replace: [['tool-output-error'], ['tool-output-available']] },
  // The encrypted value pydantic-ai sends after a failed call goes through as a transient data chunk.
  { id: 'tool-failure-agui', test: 'pydantic-ai', aspect: 'vercel_client', where: turn1('retry', 'error_during'), side: 'gateway', replace: [['tool-output-available', 'data-reasoning-encrypted'], ['tool-output-available']] },
  {
    id: 'tool-failure-agui', test: 'pydantic-ai', aspect: 'agui_client', where: turn1('retry', 'error_during'),
    path: /^\$\.messages\[(\d+)\]\.(encryptedValue|metadata)$/, holds: failureMarked,
  },
  { id: 'tool-failure-agui', test: 'pydantic-ai', aspect: 'agui_client', where: turn1('retry', 'error_during'), side: 'native', replace: [['TOOL_CALL_RESULT', 'REASONING_ENCRYPTED_VALUE'], ['TOOL_CALL_RESULT']] },
  {
    id: 'tool-failure-agui', test: 'pydantic-ai', aspect: 'history_via_v_from_agui_vs_native_agui', where: turn2('error_during'),
    path: /^\$\[0\]\.messages\[(\d+)\]\.parts\[(\d+)\]\.outcome$/, holds: failureTextReachesModel,
  },

  // Mastra (oracle-mastra.test.mjs), after its `adjust`.
  { id: 'wire-sequence', test: 'mastra', aspect: 'agui_client', where: [...ANSWERED, 'error_before/turn1'], side: 'gateway', drop: ['STEP_STARTED', 'STEP_FINISHED'] },
  { id: 'wire-sequence', test: 'mastra', aspect: 'agui_client', where: turn1('think'), side: 'native', drop: ['REASONING_START', 'REASONING_END'] },
  // Each upstream cuts tool arguments into deltas its own way; the gateway keeps the cuts.
  { id: 'wire-sequence', test: 'mastra', aspect: 'agui_client', where: turn1('tool', 'error_after'), side: 'both', collapse: ['TOOL_CALL_ARGS'] },
  { id: 'wire-sequence', test: 'mastra', aspect: 'vercel_client', where: turn1('tool', 'error_after'), side: 'both', collapse: ['tool-input-delta'] },
  { id: 'upstream-ids', test: 'mastra', aspect: 'vercel_client', where: ANSWERED, path: UPSTREAM_IDS, holds: upstreamId },
  { id: 'error-before-step', test: 'mastra', aspect: 'vercel_client', where: turn1('error_before'), side: 'native', replace: [['start', 'start-step', 'error'], ['start', 'error']] },
  { id: 'error-before-step', test: 'mastra', aspect: 'vercel_client', where: turn1('error_after'), side: 'native', replace: [['tool-output-available', 'finish-step', 'start-step', 'error'], ['tool-output-available', 'error']] },
  { id: 'unsaid-tool-failure', test: 'mastra', aspect: 'vercel_client', where: turn1('retry', 'error_during'), side: 'native', replace: [['tool-output-error', 'finish-step', 'start-step'], []] },
  { id: 'unsaid-tool-failure', test: 'mastra', aspect: 'agui_client', where: turn1('retry'), side: 'gateway', replace: [['TOOL_CALL_END', 'TOOL_CALL_RESULT', 'TOOL_CALL_START'], ['TOOL_CALL_END', 'TOOL_CALL_START']] },
  { id: 'unsaid-tool-failure', test: 'mastra', aspect: 'agui_client', where: turn1('error_during'), side: 'gateway', replace: [['TOOL_CALL_END', 'TOOL_CALL_RESULT', 'RUN_ERROR'], ['TOOL_CALL_END', 'RUN_ERROR']] },

  // pydantic-ai histories (oracle-history.test.mjs): one run per direction.
  {
    id: 'history-message-ids', test: 'pydantic-ai-history', aspect: 'history', where: ['vercel-client/turn1', 'agui-client/turn1'],
    path: /^\$\[\d+\]\.messages\[\d+\]\.metadata(\.__pydantic_ai__\.ui_message_id)?$/,
    holds: (_m, _r, d) => uiMessageId(d.native) && uiMessageId(d.gateway),
  },
  // Checked, not just allowed: the arguments must parse to the same value.
  {
    id: 'tool-args-form', test: 'pydantic-ai-history', aspect: 'history', where: ['vercel-client/turn1', 'agui-client/turn1'],
    path: /^\$\[\d+\]\.messages\[\d+\]\.parts\[\d+\]\.args$/,
    holds: (_m, _r, d) => same(parsed(d.native), parsed(d.gateway)) && typeof d.native !== typeof d.gateway,
  },
];

// A UI message id pydantic-ai notes on a model message, or none; no other metadata.
function uiMessageId(v) {
  if (v === null || v === undefined) return true;
  if (typeof v === 'string') return v !== '';
  return Object.keys(v).join() === '__pydantic_ai__' && Object.keys(v.__pydantic_ai__).join() === 'ui_message_id'
    && typeof v.__pydantic_ai__.ui_message_id === 'string' && v.__pydantic_ai__.ui_message_id !== '';
}

function parsed(v) {
  try {
    return typeof v === 'string' ? JSON.parse(v) : v;
  } catch {
    return Symbol('unparsable');
  }
}

const applies = (d, test, aspect, scenario, turn) => d.test === test && d.aspect === aspect && d.where.includes(`${scenario}/${turn}`);

/**
 * The entry that allows value difference `d` ({path, native, gateway}) found
 * by oracle test `test` in `aspect` of run `scenario`/`turn`, or undefined.
 * `run` holds what was compared ({clients, histories}) for the checks.
 */
export function deliberateFor(test, { scenario, turn, aspect }, d, run) {
  return DELIBERATE.find((e) => {
    if (!e.path || !applies(e, test, aspect, scenario, turn)) return false;
    const m = e.path.exec(d.path);
    return m && (!e.holds || e.holds(m, run, d));
  });
}

function replaceRun(types, [from, to]) {
  const out = [];
  for (let i = 0; i < types.length;) {
    if (from.every((t, k) => types[i + k] === t)) {
      out.push(...to);
      i += from.length;
    } else {
      out.push(types[i]);
      i += 1;
    }
  }
  return out;
}

/** `types` (one side's event or chunk types) after the order rules that apply; records the entries that changed it in `used`. */
export function wireSequence(test, { scenario, turn, aspect }, side, types, used = new Set()) {
  let out = types;
  for (const e of DELIBERATE) {
    if (e.path || !applies(e, test, aspect, scenario, turn) || (e.side !== side && e.side !== 'both')) continue;
    let next = out;
    if (e.drop) next = out.filter((t) => !e.drop.includes(t));
    if (e.replace) next = replaceRun(out, e.replace);
    if (e.collapse) next = out.filter((t, i) => !(e.collapse.includes(t) && out[i - 1] === t));
    if (!same(next, out)) used.add(e);
    out = next;
  }
  return out;
}

const CLIENTS = [['vercel_client', 'cvN', 'cvG', 'chunkTypes'], ['agui_client', 'caN', 'caG', 'eventTypes']];
const HISTORIES = [['history_via_v_from_agui_vs_native_agui', 'nA', 'gV'], ['history_via_a_from_vercel_vs_native_vercel', 'nV', 'gA']];
// The HTTP status of each client's response: native and through babelgate.
const STATUS = [['vercel', 'nV', 'gV'], ['ag-ui', 'nA', 'gA']];

const withoutSequence = (c, key) => {
  if (!c) return c ?? null;
  const { [key]: _omitted, ...rest } = c;
  return rest;
};

/**
 * What differs between the native run and the run through babelgate that no
 * entry allows: HTTP statuses, the order of events and chunks (after the
 * order rules), what the real clients assembled and the model's histories.
 * `run` is one turn of compareAll's report ({status, clients, histories}).
 * Returns the differences left and the entries that allowed something.
 */
export function unexplained(test, scenario, turn, run) {
  const used = new Set();
  const left = [];
  const where = { scenario, turn };
  for (const [name, n, g] of STATUS) {
    if (run.status[n] !== run.status[g] || run.status[n] === undefined) {
      left.push({ aspect: 'status', path: `$.${name}`, native: run.status[n], gateway: run.status[g] });
    }
  }
  for (const [aspect, n, g, key] of CLIENTS) {
    const at = { ...where, aspect };
    const ns = wireSequence(test, at, 'native', run.clients[n]?.[key] ?? [], used);
    const gs = wireSequence(test, at, 'gateway', run.clients[g]?.[key] ?? [], used);
    if (!same(ns, gs)) left.push({ aspect, path: `$.${key}`, native: ns, gateway: gs });
    for (const d of diff(withoutSequence(run.clients[n], key), withoutSequence(run.clients[g], key))) {
      const e = deliberateFor(test, at, d, run);
      if (e) used.add(e);
      else left.push({ aspect, ...d });
    }
  }
  for (const [aspect, n, g] of HISTORIES) {
    for (const d of diff(run.histories[n], run.histories[g])) {
      const e = deliberateFor(test, { ...where, aspect }, d, run);
      if (e) used.add(e);
      else left.push({ aspect, ...d });
    }
  }
  return { left, used };
}
