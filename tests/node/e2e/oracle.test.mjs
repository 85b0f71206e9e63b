// Oracle test: one pydantic-ai agent (tests/python/oracle_agent.py, a
// scripted offline model) served natively in AG-UI and in Vercel by
// pydantic-ai's own adapters, and through babelgate in the other dialect.
// The HTTP status, the order of events and chunks, what the real clients
// assemble (`ai`'s readUIMessageStream, @ag-ui/client) and the history the
// model receives must be the same both ways, up to the differences listed
// below, each with its reason (docs/oracle-findings.md).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BABELGATE, PYTHON, freePort } from './lib/stack.mjs';
import { DELIBERATE, unexplained } from '../oracle/deliberate.mjs';
import { garbles } from '../oracle/garble.mjs';

// Differences that are not faults of the translation: the `pydantic-ai`
// entries of tests/node/oracle/deliberate.mjs, each explained in
// docs/mapping.md ("Deliberate differences"), each for its aspect and runs
// only. Among them a failed tool call in `retry` and `error_during`: AG-UI
// 1.0 has no field on TOOL_CALL_RESULT that says a call failed, and
// pydantic-ai says it only in its own opaque REASONING_ENCRYPTED_VALUE, which
// a gateway must neither read nor forge; the entry holds only while the
// error text still reaches the client and the model.

const SCENARIOS = ['plain', 'unicode', 'tool', 'retry', 'error_before', 'error_during', 'error_after', 'client_tool', 'think'];

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
    assert.deepEqual(Object.keys(report).sort(), [...SCENARIOS].sort());
    assert.ok(report.tool.turn2 && report.client_tool.turn2 && report.error_during.turn2, 'follow-up turns');
    assert.deepEqual(report.error_during.turn2.missing, []);
    assert.deepEqual(report.tool.turn2.missing, []);
    assert.deepEqual(report.client_tool.turn2.missing, []);
  });
  for (const scenario of SCENARIOS) {
    test(scenario, () => {
      for (const [turn, r] of Object.entries(report[scenario])) {
        const { left } = unexplained('pydantic-ai', scenario, turn, r);
        assert.deepEqual(left, [], `${scenario} ${turn}: ${JSON.stringify(left).slice(0, 1500)}`);
      }
    });
  }
  test('every allowance is needed: each allows a difference these runs really show', () => {
    const used = new Set();
    for (const [scenario, turns] of Object.entries(report)) {
      for (const [turn, r] of Object.entries(turns)) unexplained('pydantic-ai', scenario, turn, r).used.forEach((e) => used.add(e));
    }
    const idle = DELIBERATE.filter((e) => e.test === 'pydantic-ai' && !used.has(e));
    assert.deepEqual(idle.map((e) => `${e.id} ${e.aspect} ${e.path ?? e.side}`), []);
  });
});

describe('each pydantic-ai allowance is only as wide as its row: a garbled run is reported', () => {
  for (const g of garbles('pydantic-ai')) {
    test(`${g.id}: ${g.what}`, () => {
      const run = structuredClone(report[g.scenario][g.turn]);
      run.clients = run.raw;
      g.garble(run);
      const { left } = unexplained('pydantic-ai', g.as ?? g.scenario, g.turn, run);
      if (g.allowed) assert.deepEqual(left, [], JSON.stringify(left).slice(0, 1500));
      else assert.ok(left.length > 0, 'the garbled run was not reported');
    });
  }
  test('every allowance has a garble it must report', () => {
    const bare = DELIBERATE.filter((e) => e.test === 'pydantic-ai' && !garbles('pydantic-ai').some((g) => !g.allowed
      && g.id === e.id && g.aspect === e.aspect && g.kind === (e.path ? 'path' : 'sequence')));
    assert.deepEqual(bare.map((e) => `${e.id} ${e.aspect}`), []);
  });
});
