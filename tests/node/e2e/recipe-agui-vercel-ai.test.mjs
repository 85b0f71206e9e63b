// Recipe examples/agui-vercel-ai, run as its README says, in headless
// Chromium: an @ag-ui/client page served from its own origin, the recipe's
// gateway.toml, the `ai` route handler (streamText with a mock model). The
// page's own tool reaches the model through the body's `tools` field, which
// the handler reads; a run that declares no tool offers the model none.

import assert from 'node:assert/strict';
import http from 'node:http';
import { Readable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { HttpAgent } from '@ag-ui/client';
import { Recipe, answered, ask, openChat, settledBackground } from './lib/recipe.mjs';
import { freePort, waitReady } from './lib/stack.mjs';

const GUARD = { timeout: 60_000 };

const recipe = new Recipe('agui-vercel-ai');
let gateway;
let browser;
// What reached the route handler: the gateway's upstream is a hop that
// records each body and passes it on.
const bodies = [];
let hop;

before(async () => {
  const [serverPort, gwPort] = await Promise.all([freePort(), freePort()]);
  const server = recipe.launchNode('route-handler', 'server.mjs', ['--port', String(serverPort)]);
  hop = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    bodies.push(JSON.parse(body.toString('utf8')));
    const up = await fetch(`http://127.0.0.1:${serverPort}${req.url}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    res.writeHead(up.status, Object.fromEntries(up.headers));
    Readable.fromWeb(up.body).pipe(res);
  });
  await new Promise((resolve) => hop.listen(0, '127.0.0.1', resolve));
  const origin = await recipe.servePage('page.mjs');
  gateway = await recipe.startGateway('babelgate', [
    ['127.0.0.1:3001', `127.0.0.1:${hop.address().port}`], ['127.0.0.1:8080', `127.0.0.1:${gwPort}`], ['http://localhost:3000', origin],
  ]);
  await waitReady(server, `http://127.0.0.1:${serverPort}/healthz`);
  browser = await recipe.browser();
}, { timeout: 120_000 });

after(async () => {
  await recipe.close();
  await new Promise((resolve) => (hop ? hop.close(resolve) : resolve()));
});

test('the page asks; the route handler runs its server tool and the page runs its own tool', GUARD, async () => {
  const page = await openChat(browser, recipe, gateway.url);
  await ask(page, 'what is the weather in Paris?');
  await answered(page, 'Done: sunny in Paris, 22 C');
  // The page's tool: declared in the run, offered to the model by the
  // handler, called, run on the page, its result sent in the next run.
  await ask(page, 'a blue background, please');
  await answered(page, 'Done: background set to #bae6fd');
  assert.equal(await settledBackground(page, 'rgb(186, 230, 253)'), 'rgb(186, 230, 253)');
  const calls = await page.$$eval('.tool', (ts) => ts.map((t) => t.textContent));
  assert.deepEqual(calls, ['get_weather({"city":"Paris"}) → sunny in Paris, 22 C', 'change_background({"color":"#bae6fd"}) → background set to #bae6fd']);
  assert.deepEqual(await page.$$('[role=alert]'), []);
  // Each run's body carried the page's declaration, in AG-UI's shape, as `tools`.
  assert.equal(bodies.length, 3, 'weather; background; background with the page\'s result');
  for (const b of bodies) {
    assert.deepEqual(b.tools?.map((t) => [t.name, Object.keys(t).sort()]), [['change_background', ['description', 'name', 'parameters']]]);
  }
  assert.deepEqual(page.errors, []);
  await recipe.screenshot(page);
  await page.close();
});

test('the model is offered exactly the tools the run declares: none, and it cannot call the page', GUARD, async () => {
  const agent = new HttpAgent({ url: `${gateway.url}/agent`, threadId: randomUUID() });
  agent.addMessage({ id: randomUUID(), role: 'user', content: 'a blue background, please' });
  await agent.runAgent({ tools: [] });
  const answer = agent.messages.at(-1);
  assert.equal(answer.role, 'assistant');
  assert.equal(answer.content, 'No change_background tool was offered.');
  assert.equal(answer.toolCalls, undefined);
});
