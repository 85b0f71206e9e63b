// The inspector, end to end, in a real browser: headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core) opens the page babelgate
// serves under [inspector] path, while a real Vercel client (the `ai`
// package's chat with DefaultChatTransport) talks to a vercel <- ag-ui route.
// The AG-UI upstream is a node:http server in this file that holds its stream
// half-way until the test lets it go, so the test can see the list update
// while the run streams, then end, with no reload. Then the run's detail must
// show what the Vercel encoder dropped and what it made up, and the three
// downloads must replay with `babelgate translate` to the client's bytes.
// Screenshots go to target/e2e-artifacts/inspector/ (and docs/inspector/
// with UPDATE_SCREENSHOTS=1, for the README).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { DefaultChatTransport } from 'ai';
import { chromium } from 'playwright-core';
import { Chat } from './lib/chat.mjs';
import { uiText } from './lib/expect.mjs';
import { dump, recordingFetch } from './lib/http.mjs';
import { BABELGATE, REPO_ROOT, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';

const execFileP = promisify(execFile);
const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic',
];
const SUITE = 'inspector';
const LOG_DIR = path.join(REPO_ROOT, 'target', 'e2e-logs', SUITE);
const ARTIFACTS = path.join(REPO_ROOT, 'target', 'e2e-artifacts', SUITE);
const DOCS_SHOTS = path.join(REPO_ROOT, 'docs', 'inspector');
// Upper bounds for event-driven waits: they only matter when something is broken.
const WAIT = { timeout: 30_000 };
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

// Sent by the client; the inspector must show it redacted, never in clear.
const SECRET = `Bearer secret-${randomUUID()}`;
const BEFORE_HOLD = 'Hello, ';
const AFTER_HOLD = 'inspector!';
// The event the Vercel side cannot carry: AG-UI REASONING_START decodes to the
// core's reasoning_phase_start, and adapters/vercel/src/encoder.rs writes
// nothing for it ("Vercel has no reasoning phases": the
// `ReasoningPhaseStart | ReasoningPhaseEnd => {}` arm; docs/mapping.md,
// REASONING_START row: Vercel "nothing"). So its row must be marked dropped.
const DROPPED_TYPE = 'REASONING_START';

let upstream;
let gateway;
let gw;
let browser;
const upstreamRequests = [];
let release; // lets the upstream finish its held stream
const held = new Promise((resolve) => {
  release = resolve;
});

/** An AG-UI agent over SSE that stops after three events until `held` resolves. */
function startUpstream() {
  const server = http.createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/agent') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch (e) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(`not JSON: ${e.message}`);
        return;
      }
      upstreamRequests.push({ headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const send = (event) => res.write(`data: ${JSON.stringify(event)}\n\n`);
      const { threadId, runId } = body;
      send({ type: 'RUN_STARTED', threadId, runId });
      send({ type: 'TEXT_MESSAGE_START', messageId: 'msg-1', role: 'assistant' });
      send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'msg-1', delta: BEFORE_HOLD });
      await held;
      send({ type: DROPPED_TYPE, messageId: 'reasoning-1' });
      send({ type: 'REASONING_END', messageId: 'reasoning-1' });
      send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'msg-1', delta: AFTER_HOLD });
      send({ type: 'TEXT_MESSAGE_END', messageId: 'msg-1' });
      send({ type: 'RUN_FINISHED', threadId, runId });
      res.end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const toml = (s) => JSON.stringify(s); // JSON strings are valid TOML basic strings

before(async () => {
  fs.rmSync(LOG_DIR, { recursive: true, force: true });
  fs.mkdirSync(LOG_DIR, { recursive: true });
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  upstream = await startUpstream();
  const port = await freePort();
  gateway = `http://127.0.0.1:${port}`;
  const config = path.join(LOG_DIR, 'gateway.toml');
  fs.writeFileSync(config, [
    '# Generated by tests/node/e2e/inspector.test.mjs; do not edit.',
    `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}`,
    '',
    '[inspector]\npath = "/inspector"',
    '',
    '[[routes]]',
    'path = "/chat"',
    'client = "vercel"',
    `upstream = ${toml(`http://127.0.0.1:${upstream.address().port}/agent`)}`,
    'upstream_protocol = "ag-ui"',
    'idle_timeout_ms = 120000',
    '',
  ].join('\n'));
  gw = launch('babelgate', BABELGATE, ['serve', '--config', config], LOG_DIR);
  await waitReady(gw, `${gateway}/healthz`);
});

after(async () => {
  release(); // never leave the upstream's response open
  await browser?.close();
  if (gw) await stopProc(gw);
  await new Promise((resolve) => (upstream ? upstream.close(resolve) : resolve()));
});

async function launchChromium() {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium (tests/run.sh does, through APT_PACKAGES)`);
  }
  try {
    return await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
  } catch (e) {
    throw new Error(`headless Chromium (${CHROMIUM}) could not be launched: ${e.message}`);
  }
}

async function screenshot(page, name, fullPage) {
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage });
  if (process.env.UPDATE_SCREENSHOTS === '1') {
    fs.mkdirSync(DOCS_SHOTS, { recursive: true });
    fs.copyFileSync(file, path.join(DOCS_SHOTS, `${name}.png`));
  }
}

/** The page does not scroll sideways (a table or a long text would make it). */
async function assertNoSideScroll(page, where) {
  const { scrollWidth, innerWidth } = await page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
  }));
  assert.ok(scrollWidth <= innerWidth, `${where}: the page scrolls sideways (${scrollWidth}px wide in a ${innerWidth}px window)`);
}

/** What the detail shows, row by row, as the page rendered it. */
function traceRows(page) {
  return page.$$eval('#run .trace-row', (rows) => rows.map((row) => {
    const events = (cell) => [...row.querySelectorAll(`.cell.${cell} details.ev`)].map((d) => ({
      type: d.querySelector('.ev-type')?.textContent ?? '',
      text: d.querySelector('pre')?.textContent ?? '',
    }));
    return {
      marks: (row.dataset.marks ?? '').split(' ').filter(Boolean),
      upstream: events('upstream'),
      core: events('core'),
      client: events('client'),
    };
  }));
}

async function download(page, which, dir) {
  const [dl] = await Promise.all([page.waitForEvent('download', WAIT), page.click(`#download-${which}`)]);
  const failure = await dl.failure();
  assert.equal(failure, null, `the ${which} download failed: ${failure}`);
  const name = dl.suggestedFilename();
  const file = path.join(dir, name);
  await dl.saveAs(file);
  return { name, file, bytes: fs.readFileSync(file) };
}

// SSE comment frames (`: ...`): the heartbeats the client may have got while
// the upstream was held, and the `id:` lines the run log gives each event
// (for Last-Event-ID). The client capture is the translation's output: it
// leaves both out.
const withoutComments = (sse) => sse.replace(/^(?::[^\n]*\n)+\n/gm, '').replace(/^id: [^\n]*\n/gm, '');

test('inspector: the list follows a streaming run live, the detail shows what Vercel dropped and added, the downloads replay', { timeout: 240_000 }, async () => {
  browser = await launchChromium();
  const context = await browser.newContext({ viewport: DESKTOP, acceptDownloads: true });
  const page = await context.newPage();
  const origin = new URL(gateway).origin;
  const problems = [];
  const outside = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console.error: ${m.text()}`);
  });
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.protocol !== 'data:' && u.origin !== origin) outside.push(r.url());
  });

  const exchanges = [];
  const evidence = async (e) => {
    let gwErr = '';
    try {
      gwErr = fs.readFileSync(gw.err, 'utf8').split('\n').slice(-40).join('\n');
    } catch {
      gwErr = '(no log)';
    }
    if (e instanceof Error) {
      e.message += `\n=== client <-> gateway (raw) ===\n${dump(exchanges)}\n=== upstream requests ===\n${JSON.stringify(upstreamRequests)}`
        + `\n=== page problems ===\n${problems.join('\n') || '(none)'}\n=== gateway stderr (tail) ===\n${gwErr}`;
    }
    return e;
  };

  try {
    // The page, served by the gateway under a strict CSP, before any run.
    const res = await page.goto(`${gateway}/inspector/`);
    assert.equal(res.status(), 200);
    assert.match(res.headers()['content-security-policy'] ?? '', /default-src 'self'/);
    await page.waitForSelector('#runs', WAIT);
    // Gone if the page reloads: the list must update in place.
    await page.evaluate(() => {
      window.inspectorTestMark = 'same page';
    });
    const samePage = async () => assert.equal(await page.evaluate(() => window.inspectorTestMark), 'same page', 'the page was reloaded');

    // A real Vercel client sends; the upstream holds after three events.
    const chat = new Chat({
      id: `chat-${randomUUID()}`,
      transport: new DefaultChatTransport({ api: `${gateway}/chat`, headers: { authorization: SECRET }, fetch: recordingFetch(exchanges) }),
    });
    const sent = chat.sendMessage({ text: 'show me in the inspector' });

    const streaming = await page.waitForFunction(() => {
      for (const row of document.querySelectorAll('#runs [data-run-id][data-status="streaming"]')) {
        if (Number(row.querySelector('.events-in')?.textContent) >= 3) return row.dataset.runId;
      }
      return false;
    }, null, WAIT);
    const id = await streaming.jsonValue();
    const row = `#runs [data-run-id="${id}"]`;
    assert.match(await page.textContent(`${row} .route`), /\/chat/);
    assert.match(await page.textContent(`${row} .pair`), /ag-ui\s*→\s*vercel/);
    await samePage();
    await screenshot(page, 'list', false);

    // Let the upstream finish: the same row turns completed, still no reload.
    release();
    await page.waitForSelector(`${row}[data-status="completed"]`, WAIT);
    await samePage();
    await sent;
    assert.equal(chat.status, 'ready', `the chat ended in status ${chat.status}: ${chat.error?.message}`);
    const answer = chat.messages.at(-1);
    assert.equal(answer.role, 'assistant');
    assert.equal(uiText(answer), BEFORE_HOLD + AFTER_HOLD);
    assert.equal(upstreamRequests.length, 1, 'one request reached the upstream');
    assert.equal(Number(await page.textContent(`${row} .events-in`)), 8, 'the upstream sent 8 events');
    assert.ok(Number(await page.textContent(`${row} .events-out`)) > 0);

    // The detail: a click on the row (not on its link) opens it.
    await page.click(`${row} td.pair`);
    await page.waitForSelector('#run .trace-row', WAIT);
    assert.equal(new URL(page.url()).hash, `#/runs/${encodeURIComponent(id)}`);
    await samePage();
    const rows = await traceRows(page);
    const where = `rows: ${JSON.stringify(rows, null, 1)}`;

    const dropped = rows.find((r) => r.marks.includes('dropped') && r.upstream.some((e) => e.type === DROPPED_TYPE));
    assert.ok(dropped, `a row marked dropped holds the upstream's ${DROPPED_TYPE}; ${where}`);
    assert.match(dropped.upstream[0].text, new RegExp(`"type":\\s*"${DROPPED_TYPE}"`), 'its raw text is the frame the upstream sent');
    assert.deepEqual(dropped.client, [], 'nothing reached the client for it');

    // What the Vercel encoder writes with no upstream event behind it: the
    // `data: [DONE]` it ends every stream with (Encoder::finish_to, after
    // the upstream's input ended).
    // (Rows with an upstream event can be marked too: Vercel's step
    // markers are the encoder's own.)
    const synthesized = rows.find((r) => r.marks.includes('synthesized') && r.upstream.length === 0);
    assert.ok(synthesized, `a row marked synthesized with no upstream event; ${where}`);
    assert.deepEqual(synthesized.upstream, [], 'a synthesized row has no upstream event');
    assert.ok(rows.some((r) => r.marks.includes('synthesized') && r.client.some((e) => e.text.includes('[DONE]'))),
      `the closing [DONE] is shown as synthesized; ${where}`);
    assert.equal(await page.$$eval('.legend .mark-badge', (b) => b.map((x) => x.textContent).sort().join(' ')), 'dropped error merged synthesized');

    // The request as received, its secret redacted, in the page and in the API.
    const received = page.locator('#request-received');
    await received.locator('summary').click();
    assert.match(await received.textContent(), /\/chat/);
    assert.match(await received.locator('tr', { hasText: 'authorization' }).textContent(), /\[redacted\]/);
    assert.ok(!(await page.content()).includes(SECRET), 'the client\'s secret is not in the page');
    const api = await (await fetch(`${gateway}/inspector/api/runs/${encodeURIComponent(id)}`)).text();
    assert.ok(!api.includes(SECRET), 'the client\'s secret is not in the API\'s answer');

    // Unfold the dropped event for the screenshot: its raw text shows.
    const droppedRow = page.locator('#run .trace-row[data-marks~="dropped"]').filter({ hasText: DROPPED_TYPE }).first();
    await droppedRow.locator('.cell.upstream summary').first().click();
    assert.ok(await droppedRow.locator('.cell.upstream pre').first().isVisible(), 'a click unfolds the raw text');
    await assertNoSideScroll(page, 'run, desktop');
    await screenshot(page, 'run', true);

    // The downloads, and the command shown next to them.
    const dir = fs.mkdtempSync(path.join(ARTIFACTS, 'downloads-'));
    const up = await download(page, 'upstream', dir);
    const client = await download(page, 'client', dir);
    const setup = await download(page, 'setup', dir);
    assert.equal(up.name, `${id}.upstream.sse`);
    assert.equal(client.name, `${id}.client.sse`);
    assert.equal(setup.name, `${id}.setup.json`);
    JSON.parse(setup.bytes.toString('utf8')); // the setup is JSON
    assert.match(up.bytes.toString('utf8'), new RegExp(`"type":\\s*"${DROPPED_TYPE}"`), 'the upstream capture holds the dropped event');

    const command = (await page.textContent('#replay-command')).trim().split(/\s+/);
    assert.deepEqual(command, ['babelgate', 'translate', '--from', 'ag-ui', '--to', 'vercel', '--setup', setup.name, up.name]);
    assert.match(await page.textContent('.replay-verdict'), /same bytes/, 'the gateway checked its replay');

    // The command, run as shown in the directory the files were saved to,
    // prints the client capture byte for byte.
    const replay = await execFileP(BABELGATE, command.slice(1), { cwd: dir, encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 });
    assert.equal(Buffer.compare(replay.stdout, client.bytes), 0,
      `babelgate translate printed:\n${replay.stdout}\nthe client capture is:\n${client.bytes}\nstderr: ${replay.stderr}`);

    // And the client capture is what the real client received.
    const got = await exchanges[0].text;
    assert.equal(client.bytes.toString('utf8'), withoutComments(got), 'the client capture is the bytes the client got');
    const deltas = client.bytes.toString('utf8').split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)))
      .filter((c) => c.type === 'text-delta')
      .map((c) => c.delta)
      .join('');
    assert.equal(deltas, uiText(answer), 'the text the `ai` client assembled');

    // A phone: the list as cards, the detail's columns stacked, no sideways scroll.
    await page.setViewportSize(PHONE);
    await page.goto(`${gateway}/inspector/#/`);
    await page.waitForSelector(`${row}[data-status="completed"]`, WAIT);
    await assertNoSideScroll(page, 'list, phone');
    await screenshot(page, 'list-phone', true);
    await page.click(`${row} .route-link`);
    await page.waitForSelector('#run .trace-row', WAIT);
    await assertNoSideScroll(page, 'run, phone');
    const stacked = await page.$eval('#run .trace-row', (r) => {
      const box = (c) => r.querySelector(`.cell.${c}`).getBoundingClientRect();
      const [u, k, c] = [box('upstream'), box('core'), box('client')];
      return u.bottom <= k.top + 1 && k.bottom <= c.top + 1;
    });
    assert.ok(stacked, 'on a phone a row shows upstream, then core, then client, one under the other');
    await screenshot(page, 'run-phone', true);

    assert.deepEqual(outside, [], 'the page asks nothing of any other origin');
    assert.deepEqual(problems, [], 'no console error, no page error');
  } catch (e) {
    throw await evidence(e);
  }
});
