// Oracle test: one pydantic-ai agent (tests/python/oracle_agent.py, a
// scripted offline model) served natively in AG-UI and in Vercel by
// pydantic-ai's own adapters, and through babelgate in the other dialect.
// What the real clients assemble (`ai`'s readUIMessageStream, @ag-ui/client)
// and the history the model receives must be the same both ways, up to the
// differences listed below, each with its reason (docs/oracle-findings.md).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BABELGATE, PYTHON, freePort } from './lib/stack.mjs';
import { isDeliberate } from '../oracle/deliberate.mjs';

// Differences that are not faults of the translation: the `pydantic-ai`
// entries of tests/node/oracle/deliberate.mjs, each explained in
// docs/mapping.md ("Deliberate differences"). Among them a failed tool call
// in `retry` and `error_during`: AG-UI 1.0 has no field on TOOL_CALL_RESULT
// that says a call failed, and pydantic-ai says it only in its own opaque
// REASONING_ENCRYPTED_VALUE, which a gateway must neither read nor forge.

const ASPECTS = ['vercel_client', 'agui_client', 'history_via_v_from_agui_vs_native_agui', 'history_via_a_from_vercel_vs_native_vercel'];

let report;
let stopAll = () => {};
before(async () => {
  process.env.ORACLE_PY = PYTHON;
  process.env.BABELGATE = BABELGATE;
  process.env.ORACLE_PORT = String(await freePort());
  process.env.GATEWAY_PORT = String(await freePort());
  const m = await import('../oracle/capture.mjs');
  stopAll = m.stopAll;
  report = await m.compareAll({ writeFixtures: false });
}, { timeout: 240_000 });
after(() => stopAll());

describe('pydantic-ai natively vs through babelgate: what the real clients and the model see', () => {
  test('every scenario ran, both turns where there are two', () => {
    assert.deepEqual(Object.keys(report).sort(), ['client_tool', 'error_after', 'error_before', 'error_during', 'plain', 'retry', 'think', 'tool', 'unicode']);
    assert.ok(report.tool.turn2 && report.client_tool.turn2 && report.error_during.turn2, 'follow-up turns');
    assert.deepEqual(report.error_during.turn2.missing, []);
    assert.deepEqual(report.tool.turn2.missing, []);
    assert.deepEqual(report.client_tool.turn2.missing, []);
  });
  for (const scenario of ['plain', 'unicode', 'tool', 'retry', 'error_before', 'error_during', 'error_after', 'client_tool', 'think']) {
    test(scenario, () => {
      for (const [turn, r] of Object.entries(report[scenario])) {
        for (const aspect of ASPECTS) {
          const left = (r[aspect] ?? []).filter((d) => !isDeliberate('pydantic-ai', { path: d.path, scenario, aspect }));
          assert.deepEqual(left, [], `${scenario} ${turn} ${aspect}: ${JSON.stringify(left).slice(0, 1500)}`);
        }
      }
    });
  }
});
