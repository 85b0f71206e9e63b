// DNS rebinding, in a real browser: headless Chromium resolves
// rebind.attacker.example to 127.0.0.1 (--host-resolver-rules), as a victim's
// browser does once an attacker's DNS has rebound the name of the page it
// loaded. That page is then same-origin with the gateway on loopback, so its
// fetch and WebSocket reach it from 127.0.0.1 while naming the attacker's
// host. babelgate, with the inspector on and no auth anywhere (as the shipped
// gateway.toml), must give it neither the inspector's runs nor a route; the
// same page by a loopback name gets both.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { BABELGATE, REPO_ROOT, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';
import { launchChromium } from './lib/chromium.mjs';

const HANG_GUARD = { timeout: 90_000 };
const REBOUND = 'rebind.attacker.example';

let gatewayProc;
let browser;
let port;

before(async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'rebinding');
  fs.mkdirSync(logDir, { recursive: true });
  const [gwPort, demoPort] = [await freePort(), await freePort()];
  port = gwPort;
  const config = path.join(logDir, 'rebinding.gateway.toml');
  fs.writeFileSync(
    config,
    `[server]\nlisten = "127.0.0.1:${gwPort}"\n\n[demo_agent]\nlisten = "127.0.0.1:${demoPort}"\nprotocol = "ag-ui"\ndelay_ms = 0\n\n[inspector]\n\n` +
      `[[routes]]\npath = "/ag-ui"\nclient = "ag-ui"\nupstream = "http://127.0.0.1:${demoPort}/agent"\nupstream_protocol = "ag-ui"\n`,
  );
  gatewayProc = launch('babelgate', BABELGATE, ['serve', '--config', config], logDir);
  await waitReady(gatewayProc, `http://127.0.0.1:${gwPort}/healthz`);
  browser = await launchChromium([`--host-resolver-rules=MAP ${REBOUND} 127.0.0.1`]);
});

after(async () => {
  await browser?.close();
  await stopProc(gatewayProc);
});

/** What a page on `host` gets from the gateway by its own origin: the
 *  inspector's run list, a run on the route, and a WebSocket on it. */
async function fromPageOn(host) {
  const page = await browser.newPage();
  try {
    // Any document of that origin will do (the gateway answers / with 404).
    await page.goto(`http://${host}:${port}/`);
    return await page.evaluate(async () => {
      const runs = await fetch('/inspector/api/runs');
      const body = JSON.stringify({
        threadId: `t-${Math.random()}`,
        runId: 'r-1',
        messages: [{ id: 'u1', role: 'user', content: 'hi' }],
        tools: [],
        context: [],
        state: {},
        forwardedProps: {},
      });
      const run = await fetch('/ag-ui', { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body });
      const runText = await run.text();
      const ws = await new Promise((resolve) => {
        const sock = new WebSocket(`ws://${location.host}/ag-ui`);
        sock.onopen = () => {
          sock.close();
          resolve('open');
        };
        sock.onerror = () => resolve('refused');
      });
      return { runs: runs.status, runsText: await runs.text(), run: run.status, runText, ws };
    });
  } finally {
    await page.close();
  }
}

test('a page on a rebound name gets neither the inspector nor a route', HANG_GUARD, async () => {
  const got = await fromPageOn(REBOUND);
  assert.equal(got.runs, 403, got.runsText);
  assert.equal(JSON.parse(got.runsText).error.code, 'host_not_allowed');
  assert.ok(!got.runsText.includes('"runs"'), got.runsText);
  assert.equal(got.run, 403, got.runText);
  assert.equal(JSON.parse(got.runText).error.code, 'origin_not_allowed');
  assert.equal(got.ws, 'refused');
});

test('the same page by a loopback name gets both', HANG_GUARD, async () => {
  for (const host of ['127.0.0.1', 'localhost']) {
    const got = await fromPageOn(host);
    assert.equal(got.runs, 200, `${host}: ${got.runsText}`);
    assert.ok(Array.isArray(JSON.parse(got.runsText).runs));
    assert.equal(got.run, 200, `${host}: ${got.runText}`);
    assert.match(got.runText, /RUN_FINISHED/);
    assert.equal(got.ws, 'open', host);
  }
});
