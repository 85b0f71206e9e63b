// One real browser: headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core) runs a page whose chat is the `ai` package's, bundled by
// esbuild. The page is served with the bundle by a small node:http server
// that also proxies /api/chat to babelgate's /vercel-to-agui route (same
// origin, as a Next.js app would), which goes to the Python AG-UI agent.
// The chat's onToolCall runs change_background on the page, addToolOutput +
// sendAutomaticallyWhen post the result back, and the loop must stop after
// the agent's answer.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { PY_BACKGROUND_INPUT, aguiText, pyToolAnswer, uiText } from './lib/expect.mjs';
import { withEvidence } from './lib/http.mjs';
import { startStack } from './lib/stack.mjs';
import { launchChromium } from './lib/chromium.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
let stack;
let site;
let browser;
const exchanges = []; // what went through /api/chat, raw

before(async () => {
  stack = await startStack('browser');
  const built = await esbuild.build({
    entryPoints: [path.join(HERE, 'browser', 'page.mjs')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'chrome120',
    write: false,
    logLevel: 'silent',
  });
  const bundle = built.outputFiles[0].contents;
  const html = fs.readFileSync(path.join(HERE, 'browser', 'index.html'));
  site = http.createServer((req, res) => {
    if (req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
    } else if (req.url === '/bundle.js') {
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(bundle);
    } else if (req.url === '/favicon.ico') {
      res.writeHead(204).end(); // keeps the page's console free of a 404
    } else if (req.url === '/api/chat' && req.method === 'POST') {
      proxyToGateway(req, res);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
});

after(async () => {
  await browser?.close();
  await new Promise((resolve) => (site ? site.close(resolve) : resolve()));
  await stack?.stop();
});

/** Stream the request to the gateway and its answer back, keeping a copy. */
function proxyToGateway(req, res) {
  const target = new URL('/vercel-to-agui', stack.gateway);
  const entry = { url: '/api/chat -> /vercel-to-agui', raw: '', complete: false };
  exchanges.push(entry);
  const sent = [];
  req.on('data', (c) => sent.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(sent).toString('utf8');
    try {
      entry.body = JSON.parse(raw);
    } catch {
      entry.body = raw;
    }
  });
  const headers = { ...req.headers, host: target.host };
  const up = http.request(target, { method: 'POST', headers }, (upRes) => {
    entry.status = upRes.statusCode;
    res.writeHead(upRes.statusCode, upRes.headers);
    // The log copy is decoded aside: the bytes piped to the page stay untouched.
    const decoder = new TextDecoder();
    upRes.on('data', (c) => {
      entry.raw += decoder.decode(c, { stream: true });
    });
    upRes.on('end', () => {
      entry.raw += decoder.decode();
      entry.complete = true;
    });
    upRes.pipe(res);
  });
  up.on('error', (e) => {
    Object.assign(entry, { status: 502, raw: `proxy error: ${e.message}`, complete: true });
    res.writeHead(502, { 'content-type': 'text/plain' }).end(`proxy error: ${e.message}`);
  });
  req.pipe(up);
}

test('browser: the ai chat runs change_background, posts the result once, and shows the answer', { timeout: 120_000 }, async () => {
  browser = await launchChromium();
  const page = await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(`console.error: ${m.text()}`);
  });
  await page.goto(`http://127.0.0.1:${site.address().port}/`);
  await page.waitForFunction(() => window.e2e !== undefined, null, { timeout: 30_000 });
  const before = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);

  await withEvidence({ exchanges, agent: stack.agui }, async () => {
    const result = await page.evaluate((text) => window.e2e.send(text), 'make the background red');
    const where = `chat status ${result.status} (${result.error}); page errors: ${JSON.stringify(pageErrors)}; messages: ${JSON.stringify(result.messages)}`;
    assert.equal(result.status, 'ready', where);

    // The tool ran on the page.
    const after = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.notEqual(after, before);
    assert.equal(after, 'rgb(255, 0, 0)', `the agent asked for ${PY_BACKGROUND_INPUT.color}`);

    // One assistant message: the call, its output, then the agent's answer quoting it.
    assert.deepEqual(result.messages.map((m) => m.role), ['user', 'assistant'], where);
    const answer = result.messages[1];
    const part = answer.parts.find((p) => p.type === 'tool-change_background');
    assert.equal(part?.state, 'output-available', where);
    const output = `background set to ${PY_BACKGROUND_INPUT.color}`;
    assert.equal(part.output, output);
    const text = uiText(answer);
    assert.ok(text.includes(output), `the final text must quote the tool output: ${JSON.stringify(text)}`);

    // The loop stopped: the chat decided not to post again, and exactly two
    // requests reached the agent (the question, then the tool result).
    assert.equal(result.wouldSendAgain, false, where);
    assert.equal(result.requests, 2, 'the page posted exactly twice');
    const reqs = await stack.agui.requests();
    assert.equal(reqs.length, 2, 'the agent received exactly 2 requests');
    for (const r of reqs) assert.equal(r.error, undefined, `the agent refused a request: ${JSON.stringify(r.error)}`);
    assert.ok(reqs.every((r) => r.body.threadId === reqs[0].body.threadId), 'one chat, one thread');
    const toolMsg = reqs[1].body.messages.at(-1);
    assert.equal(toolMsg.role, 'tool');
    assert.equal(text, pyToolAnswer(aguiText(toolMsg.content)));
    assert.deepEqual(pageErrors, []);
  });
});
