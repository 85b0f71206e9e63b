// Oracle test, second framework: one Mastra agent
// (tests/node/oracle2/mastra-agent.mjs, a scripted offline model) served
// natively in AG-UI by AG-UI's own Mastra integration (@ag-ui/mastra) and in
// the Vercel UI message stream by Mastra's own @mastra/ai-sdk, and through
// babelgate in the other dialect. What the real clients assemble (`ai`'s
// readUIMessageStream, @ag-ui/client), how runs end, and the history the
// model receives must be the same both ways, up to the differences below,
// each with its reason (docs/oracle-findings.md, docs/mapping.md).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BABELGATE, freePort } from './lib/stack.mjs';

const SCENARIOS = ['plain', 'unicode', 'tool', 'retry', 'error_before', 'error_during', 'error_after', 'client_tool', 'think'];

// Differences that are not faults of the translation, by path.
const DELIBERATE = [
  // Event and chunk sequences differ by construction (babelgate adds Vercel
  // steps as AG-UI STEP_* events; @ag-ui/mastra sends TEXT_MESSAGE_CHUNK,
  // which the client expands): compared is what the clients assemble.
  [/^\$\.(eventTypes|chunkTypes)\b/, 'the wire sequence, not what the client assembles'],
];

// Where Mastra's two adapters differ from each other by construction, the
// native side is brought to what the other dialect's adapter can say, and
// everything else is still compared (see adjust below):
// - Error text: @mastra/ai-sdk sends the error serialised as JSON (with a
//   stack), @ag-ui/mastra's run fails with `String(error)`; babelgate passes
//   each upstream's text as it is. Compared: the scripted message in it.
// - Failed tool calls (retry, error_during): @ag-ui/mastra drops Mastra's
//   `tool-error` chunk, so its AG-UI stream has no result for a failed call:
//   a Vercel client behind babelgate sees the call still `input-available`
//   (natively `output-error`), and natively @ag-ui/client counts the failed
//   call as pending, where babelgate (from @mastra/ai-sdk's
//   `tool-output-error`) gives it a tool message marked `metadata.error`.
// - A string tool result: @ag-ui/mastra sends it JSON-encoded; babelgate
//   parses only objects and arrays into a Vercel `output`.
// - error_before: the AG-UI upstream fails before any step, so the Vercel
//   client behind babelgate gets `start`,`error` and no assistant message;
//   @mastra/ai-sdk sends a `start-step` first, which opens an empty one.
const ORACLE_ERROR = /oracle: [a-z ]+/;
function errorText(t) {
  return typeof t === 'string' ? (t.match(ORACLE_ERROR)?.[0] ?? t) : t;
}
export function adjust(scenario, _turn, c) {
  // @ag-ui/mastra sends every tool result as JSON text, a string result too
  // ('"flaky(2) ok"'); babelgate parses only JSON objects and arrays into a
  // Vercel `output` (a text result that happens to be valid JSON, "42", must
  // stay text), so the Vercel client behind it shows the quoted string.
  for (const p of c.cvG?.message?.parts ?? []) {
    if (typeof p.output !== 'string') continue;
    p.output = jsonString(p.output);
  }
  // The other way, the same: a string `output` from @mastra/ai-sdk is sent as
  // the tool message's content as it is, @ag-ui/mastra sends it JSON-encoded.
  for (const m of c.caN?.messages ?? []) if (m.role === 'tool') m.content = jsonString(m.content);
  for (const k of ['cvN', 'cvG']) if (c[k]) c[k].error = errorText(c[k].error);
  for (const k of ['caN', 'caG']) if (c[k]?.runError) c[k].runError.message = errorText(c[k].runError.message);
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
    const failed = (c.caG?.messages ?? []).filter((m) => m.role === 'tool' && m.metadata?.error === true);
    if (c.caG) c.caG.messages = c.caG.messages.filter((m) => !failed.includes(m));
    const ids = new Set(failed.map((m) => m.toolCallId));
    const pending = c.caN?.finished?.pendingToolCallIds;
    if (pending) {
      c.caN.finished.pendingToolCallIds = pending.filter((id) => !ids.has(id));
    }
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

const ASPECTS = ['vercel_client', 'agui_client', 'history_via_v_from_agui_vs_native_agui', 'history_via_a_from_vercel_vs_native_vercel'];

let report;
let stopAll = () => {};
before(async () => {
  process.env.BABELGATE = BABELGATE;
  process.env.ORACLE_PORT = String(await freePort());
  process.env.GATEWAY_PORT = String(await freePort());
  const m = await import('../oracle/capture.mjs');
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
  for (const scenario of SCENARIOS) {
    test(scenario, () => {
      for (const [turn, r] of Object.entries(report[scenario])) {
        for (const aspect of ASPECTS) {
          const left = (r[aspect] ?? []).filter((d) => !DELIBERATE.some(([re]) => re.test(d.path)));
          assert.deepEqual(left, [], `${scenario} ${turn} ${aspect}: ${JSON.stringify(left).slice(0, 1500)}`);
        }
      }
    });
  }
});
