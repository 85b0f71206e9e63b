// A page on another origin, in headless Chromium, calls the gateway with
// `credentials: 'include'` (what a cookie session needs): the route's
// `allow_credentials` lets the browser hand it the stream, and a typo in
// the path comes back as a readable 404, not as a CORS failure.

import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { startGateway, toml } from './lib/adversary.mjs';
import { freePort, stopProc } from './lib/stack.mjs';
import { launchChromium } from './lib/chromium.mjs';

let gw;
let site;
let browser;

before(async () => {
  site = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>app</title>');
  });
  await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${site.address().port}`;
  const agent = await freePort();
  gw = await startGateway('cors-credentials', (port) => [
    `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}`,
    `[demo_agent]\nlisten = ${toml(`127.0.0.1:${agent}`)}\nprotocol = "ag-ui"\ndelay_ms = 0`,
    `[[routes]]\npath = "/agui"\nclient = "ag-ui"\nupstream = ${toml(`http://127.0.0.1:${agent}/agent`)}\nupstream_protocol = "ag-ui"`,
    `[routes.cors]\nallow_origins = [${toml(origin)}]\nallow_credentials = true`,
  ].join('\n') + '\n');
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  if (gw) await stopProc(gw.proc);
  await new Promise((resolve) => (site ? site.close(resolve) : resolve()));
});

test('a credentialed cross-origin fetch streams, and an unknown path reads as 404', async () => {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${site.address().port}/`);
  const call = (path) => page.evaluate(async ({ url }) => {
    try {
      const r = await fetch(url, {
        method: 'POST',
        credentials: 'include',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ threadId: 't-cors', runId: 'r-cors', messages: [{ id: 'm1', role: 'user', content: 'hi' }], tools: [], context: [], state: {}, forwardedProps: {} }),
      });
      return { status: r.status, text: await r.text() };
    } catch (e) {
      return { failed: String(e) };
    }
  }, { url: `${gw.base}${path}` });
  const ok = await call('/agui');
  assert.equal(ok.failed, undefined, `the browser refused the credentialed fetch: ${ok.failed}`);
  assert.equal(ok.status, 200);
  assert.match(ok.text, /RUN_FINISHED/);
  const missing = await call('/agiu');
  assert.equal(missing.failed, undefined, `the browser hid the 404 behind a CORS failure: ${missing.failed}`);
  assert.equal(missing.status, 404);
  assert.equal(JSON.parse(missing.text).error.code, 'no_route');
  await page.close();
});
