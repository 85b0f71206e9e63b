// The public AG-UI conformance validator (`ag-ui-validate`, pinned in
// tests/python/requirements.txt) live against every route whose client is
// AG-UI: it posts its own RunAgentInput and checks the stream it gets (the
// transport rules too). No error and no warning. The routes: the test
// stack's (a Vercel agent written with `ai`'s helpers), the shipped
// gateway.toml's, and one per upstream dialect in front of the built-in demo
// agent speaking it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import fs from 'node:fs';
import { BABELGATE, PYTHON, REPO_ROOT, freePort, launch, startStack, stopProc } from './lib/stack.mjs';

const DIALECTS = ['ag-ui', 'hai', 'vercel', 'agkit'];

const VALIDATE = path.join(path.dirname(PYTHON), 'ag-ui-validate');
let stack;
const procs = [];
let demoGateway;
let shippedGateway;

/** Polls until something answers HTTP at `url` (any status); bounded, for failures only. */
async function answering(proc, url) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exited) throw new Error(`${proc.name} exited: ${JSON.stringify(proc.exited)}`);
    try {
      await fetch(url, { signal: AbortSignal.timeout(2000) });
      return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`${proc.name} not answering at ${url}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  stack = await startStack('agui-validate');
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'agui-validate-demo');
  fs.rmSync(logDir, { recursive: true, force: true });
  fs.mkdirSync(logDir, { recursive: true });
  // One demo agent per dialect, an AG-UI client route to each.
  const routes = [];
  for (const d of DIALECTS) {
    const port = await freePort();
    const p = launch(`demo-${d}`, BABELGATE, ['demo-agent', '--protocol', d, '--listen', `127.0.0.1:${port}`, '--delay-ms', '0'], logDir);
    procs.push(p);
    await answering(p, `http://127.0.0.1:${port}/agent`);
    routes.push(`[[routes]]\npath = "/agui-from-${d}"\nclient = "ag-ui"\nupstream = "http://127.0.0.1:${port}/agent"\nupstream_protocol = "${d}"\n`);
  }
  const gwPort = await freePort();
  const cfg = path.join(logDir, 'gateway.toml');
  fs.writeFileSync(cfg, `[server]\nlisten = "127.0.0.1:${gwPort}"\n\n${routes.join('\n')}`);
  const gw = launch('babelgate-demo', BABELGATE, ['serve', '--config', cfg], logDir);
  procs.push(gw);
  await answering(gw, `http://127.0.0.1:${gwPort}/healthz`);
  demoGateway = `http://127.0.0.1:${gwPort}`;
  // The shipped gateway.toml, on free ports (its demo agent built in).
  const [mainPort, demoPort] = [await freePort(), await freePort()];
  const shipped = fs.readFileSync(path.join(REPO_ROOT, 'gateway.toml'), 'utf8')
    .replaceAll('127.0.0.1:8080', `127.0.0.1:${mainPort}`)
    .replaceAll('127.0.0.1:9000', `127.0.0.1:${demoPort}`);
  assert.notEqual(shipped, fs.readFileSync(path.join(REPO_ROOT, 'gateway.toml'), 'utf8'), 'the shipped ports moved');
  const shippedCfg = path.join(logDir, 'shipped.toml');
  fs.writeFileSync(shippedCfg, shipped);
  const sg = launch('babelgate-shipped', BABELGATE, ['serve', '--config', shippedCfg], logDir);
  procs.push(sg);
  await answering(sg, `http://127.0.0.1:${mainPort}/healthz`);
  await answering(sg, `http://127.0.0.1:${demoPort}/agent`);
  shippedGateway = `http://127.0.0.1:${mainPort}`;
}, { timeout: 120_000 });
after(async () => {
  await stack?.stop();
  for (const p of procs.reverse()) await stopProc(p);
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

for (const d of DIALECTS) {
  test(`AG-UI client of the demo agent speaking ${d}: conformant, live`, () => {
    const r = validate(`${demoGateway}/agui-from-${d}`);
    assert.deepEqual(r.found, [], JSON.stringify(r.found, null, 2));
    assert.ok(r.events > 2, `only ${r.events} events`);
    assert.equal(r.status, 0);
  });
}

test('the shipped gateway.toml\'s AG-UI route: conformant, live', () => {
  const shipped = fs.readFileSync(path.join(REPO_ROOT, 'gateway.toml'), 'utf8');
  const agui = [...shipped.matchAll(/\[\[routes\]\]\s*\npath = "([^"]+)"\s*\nclient = "ag-ui"/g)].map((m) => m[1]);
  assert.ok(agui.length > 0, 'the shipped config has an AG-UI route');
  for (const p of agui) {
    const r = validate(`${shippedGateway}${p}`);
    assert.deepEqual(r.found, [], `${p}: ${JSON.stringify(r.found, null, 2)}`);
    assert.ok(r.events > 2, `${p}: only ${r.events} events`);
    assert.equal(r.status, 0);
  }
});

test('the shipped gateway.toml\'s inspector lists the runs it carried', async () => {
  const page = await fetch(`${shippedGateway}/inspector/`);
  assert.equal(page.status, 200);
  assert.match(await page.text(), /<html/i);
  const { runs } = await (await fetch(`${shippedGateway}/inspector/api/runs`)).json();
  assert.ok(runs.some((r) => r.route === '/ag-ui' && r.status === 'completed'), JSON.stringify(runs));
});
