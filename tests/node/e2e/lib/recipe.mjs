// Runs a recipe of examples/<name>/ as its README says: the recipe's own
// gateway.toml (on this run's ports, its CORS origin the test page's), its
// page bundled by esbuild the way the README's command does (`--bundle
// --jsx=automatic`) and served as static files from another origin than the
// gateway, and its agent. Packages resolve from tests/node/node_modules.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { launchChromium } from './chromium.mjs';
import { BABELGATE, REPO_ROOT, launch, stopProc, waitReady } from './stack.mjs';

const NODE_MODULES = path.join(REPO_ROOT, 'tests', 'node', 'node_modules');
const RESOLVE = path.join(REPO_ROOT, 'tests', 'node', 'e2e', 'lib', 'resolve-tests-node.mjs');

export class Recipe {
  constructor(name) {
    this.name = name;
    this.dir = path.join(REPO_ROOT, 'examples', name);
    this.logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', `recipe-${name}`);
    this.artifacts = path.join(REPO_ROOT, 'target', 'e2e-artifacts', `recipe-${name}`);
    fs.rmSync(this.logDir, { recursive: true, force: true });
    fs.mkdirSync(this.logDir, { recursive: true });
    fs.mkdirSync(this.artifacts, { recursive: true });
    this.procs = [];
  }

  /** Serves the recipe's index.html and its page bundled as bundle.js; returns the origin. */
  async servePage(entry) {
    const built = await esbuild.build({
      entryPoints: [path.join(this.dir, entry)],
      bundle: true,
      jsx: 'automatic',
      nodePaths: [NODE_MODULES],
      write: false,
      logLevel: 'silent',
    });
    const files = {
      '/': ['text/html; charset=utf-8', fs.readFileSync(path.join(this.dir, 'index.html'))],
      '/bundle.js': ['text/javascript; charset=utf-8', built.outputFiles[0].contents],
    };
    this.site = http.createServer((req, res) => {
      const file = files[new URL(req.url, 'http://x').pathname];
      if (file) res.writeHead(200, { 'content-type': file[0] }).end(file[1]);
      else res.writeHead(req.url === '/favicon.ico' ? 204 : 404).end();
    });
    await new Promise((resolve) => this.site.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${this.site.address().port}`;
    return this.origin;
  }

  /**
   * `babelgate serve` on the recipe's gateway.toml, with each `from` string
   * replaced by its `to` (ports, the page's origin) and `edit` applied.
   */
  async startGateway(label, replacements, edit = (t) => t) {
    let text = fs.readFileSync(path.join(this.dir, 'gateway.toml'), 'utf8');
    for (const [from, to] of replacements) {
      if (!text.includes(from)) throw new Error(`examples/${this.name}/gateway.toml has no ${from}`);
      text = text.replaceAll(from, to);
    }
    const edited = edit(text);
    const config = path.join(this.logDir, `${label}.gateway.toml`);
    fs.writeFileSync(config, edited);
    const listen = edited.match(/^listen = "([^"]+)"/m)[1];
    const gw = this.launch(label, BABELGATE, ['serve', '--config', config]);
    await waitReady(gw, `http://${listen}/healthz`);
    return { proc: gw, url: `http://${listen}` };
  }

  /** A process of the recipe (stopped by close()). */
  launch(label, cmd, args) {
    const proc = launch(label, cmd, args, this.logDir);
    this.procs.push(proc);
    return proc;
  }

  /** `node <recipe>/<file>`, its packages resolved from tests/node (resolve-tests-node.mjs). */
  launchNode(label, file, args) {
    return this.launch(label, process.execPath, ['--import', RESOLVE, path.join(this.dir, file), ...args]);
  }

  async browser() {
    this.chromium = await launchChromium();
    return this.chromium;
  }

  /** A screenshot under target/e2e-artifacts; with UPDATE_SCREENSHOTS=1 also the recipe's screenshot.png. */
  async screenshot(page) {
    const file = path.join(this.artifacts, 'screenshot.png');
    await page.screenshot({ path: file, fullPage: true });
    if (process.env.UPDATE_SCREENSHOTS === '1') fs.copyFileSync(file, path.join(this.dir, 'screenshot.png'));
  }

  async close() {
    await this.chromium?.close();
    await new Promise((resolve) => (this.site ? this.site.close(resolve) : resolve()));
    await Promise.all(this.procs.map(stopProc));
  }
}

/** A new page whose errors (uncaught, console.error) are collected in `page.errors`. */
async function newPage(browser) {
  const page = await browser.newPage({ viewport: { width: 800, height: 600 } });
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') page.errors.push(`console.error: ${m.text()}`);
  });
  return page;
}

// The recipes' pages share one markup: <main data-status> ("ready" when the
// chat is idle), one [data-role=user|assistant] element per message, one
// input and one button.

/** Opens the recipe's page on `gateway` and waits for the chat to be idle. */
export async function openChat(browser, recipe, gateway) {
  const page = await newPage(browser);
  await page.goto(`${recipe.origin}/?gateway=${encodeURIComponent(gateway)}`);
  await page.waitForSelector('main[data-status=ready]');
  return page;
}

export async function ask(page, text) {
  await page.fill('input', text);
  await page.click('button');
}

/** Waits until an assistant message holds `text` and the chat is idle. */
export async function answered(page, text) {
  await page.waitForFunction((t) => document.querySelector('main')?.dataset.status === 'ready'
    && [...document.querySelectorAll('[data-role=assistant]')].some((m) => m.textContent.includes(t)), text);
}

/** The text of each message of `role` on the page. */
export const texts = (page, role) => page.$$eval(`[data-role=${role}]`, (ms) => ms.map((m) => m.textContent));

/**
 * Asks `prompt`, reloads the page once the answer shows `shown` (and before
 * it shows `end`), and returns the response to the reloaded page's resume
 * request (`GET {route}/{chatId}/stream`) once it has ended and the chat is idle.
 */
export async function reloadMidAnswer(page, { prompt, shown, end, route }) {
  await ask(page, prompt);
  await page.waitForFunction((t) => document.querySelector('[data-role=assistant]')?.textContent.includes(t), shown);
  const before = (await texts(page, 'assistant'))[0];
  if (before.includes(end)) throw new Error('the answer was complete before the reload: make it longer');
  const chatId = new URL(page.url()).searchParams.get('chat');
  const resumed = page.waitForResponse((r) => r.url().endsWith(`${route}/${chatId}/stream`));
  await page.reload();
  const res = await resumed;
  await res.finished();
  await page.waitForSelector('main[data-status=ready]');
  return res;
}

/** The page's background once its colour has settled: the recipes' pages
 * fade it in over 0.2 s, which a loaded machine can catch halfway. Waits up
 * to 5 s for `want`, then returns what the page shows either way. */
export async function settledBackground(page, want) {
  const shown = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await page.waitForFunction((c) => getComputedStyle(document.body).backgroundColor === c, want, { timeout: 5000 }).catch(() => {});
  return shown();
}
