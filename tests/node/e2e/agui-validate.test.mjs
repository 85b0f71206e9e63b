// The public AG-UI conformance validator (`ag-ui-validate`, pinned in
// tests/python/requirements.txt) live against every route whose client is
// AG-UI: it posts its own RunAgentInput and checks the stream it gets (the
// transport rules too). No error and no warning.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { PYTHON, startStack } from './lib/stack.mjs';

const VALIDATE = path.join(path.dirname(PYTHON), 'ag-ui-validate');
let stack;
before(async () => {
  stack = await startStack('agui-validate');
});
after(async () => {
  await stack?.stop();
});

function validate(url) {
  const r = spawnSync(VALIDATE, ['--json', '--fail-on', 'warning', '--timeout', '30', url], { encoding: 'utf8' });
  let report;
  try {
    report = JSON.parse(r.stdout);
  } catch {
    assert.fail(`ag-ui-validate gave no report (exit ${r.status}): ${r.stdout}${r.stderr}`);
  }
  const found = (report.diagnostics ?? []).filter((d) => d.severity === 'error' || d.severity === 'warning');
  return { status: r.status, found, events: report.eventCount, internal: report.internalErrors };
}

test('AG-UI client of a Vercel (ai helpers) agent: conformant, live', () => {
  const r = validate(`${stack.gateway}/agui-to-vercel`);
  assert.deepEqual(r.found, [], JSON.stringify(r.found, null, 2));
  assert.ok(r.events > 2, `only ${r.events} events`);
  assert.equal(r.status, 0);
});

test('the reference: the Python SDK agent itself, live', () => {
  const r = validate(stack.agui.url);
  assert.deepEqual(r.found, [], JSON.stringify(r.found, null, 2));
  assert.equal(r.status, 0);
});
