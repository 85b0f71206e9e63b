#!/usr/bin/env node
// Check HAI streams against the HAI rules written from the spec
// (lib/hai-rules.mjs: event order, required fields, message/tool call
// pairing, one JSON object per CONTENT delta, epoch-ms timestamps).
//
//   node validate-hai.mjs DIR          every DIR/<scenario>.<from>-hai.sse
//   node validate-hai.mjs --fixtures   self-check on tests/fixtures/hai
//
// On top of the rules: a RUN_ERROR only where the scenario may fail, and
// required for run_error.

import fs from 'node:fs';
import { haiEnding, haiViolations } from './lib/hai-rules.mjs';
import { ERROR_ALLOWED, ERROR_REQUIRED, collectFiles, listFiles, runAll } from './lib/common.mjs';

// --fixtures only: what the hand-made HAI fixtures are expected to do.
const FIXTURE_EXPECTATIONS = {
  // FUTURE_EVENT, and a message streamed without its START: proves the rules
  // can fail.
  unknown_events: { rejected: /unknown event type FUTURE_EVENT|not open/ },
  cut_mid_message: { cut: true },
};

// target/golden only, by `<scenario>.<from>-<to>`.
const GOLDEN_EXPECTATIONS = {
  // HAI to itself gives back the same events, the fixture's rule breaking
  // included (identity beats repair, as for AG-UI).
  'unknown_events.hai-hai': { rejected: /not open/ },
};

async function check({ file, name }) {
  const text = fs.readFileSync(file, 'utf8');
  const expect = (fixtures ? FIXTURE_EXPECTATIONS[name.scenario] : GOLDEN_EXPECTATIONS[name.base]) ?? {};
  const problems = haiViolations(text, { cut: expect.cut });
  if (expect.rejected) {
    if (!problems.length) return { reason: 'expected a violation, but the stream follows every rule' };
    if (!problems.some((p) => expect.rejected.test(p))) return { reason: `rejected for an unexpected reason: ${problems[0]}` };
    return { note: `rejected as expected: ${problems[0].slice(0, 140)}` };
  }
  if (problems.length) return { reason: `${problems.length} violation(s): ${problems.slice(0, 3).join('; ')}` };
  const ending = haiEnding(text);
  if (ending === 'error' && !ERROR_ALLOWED.has(name.scenario)) return { reason: 'unexpected RUN_ERROR' };
  if (ending !== 'error' && ERROR_REQUIRED.has(name.scenario)) return { reason: 'expected the run to end with RUN_ERROR' };
  return { note: ending === 'error' ? 'ends with RUN_ERROR' : undefined };
}

const { dir, fixtures, cleanup } = collectFiles(process.argv, {
  to: 'hai', fixtureDir: 'hai', selfName: 'hai', usage: 'usage: node validate-hai.mjs DIR | --fixtures',
});
await runAll(listFiles(dir, 'hai'), check, cleanup);
