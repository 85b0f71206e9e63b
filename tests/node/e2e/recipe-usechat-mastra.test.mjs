// Recipe examples/usechat-mastra, run as its README says, in headless
// Chromium: a React useChat page (@ai-sdk/react) served from its own origin,
// the recipe's gateway.toml, the Mastra agent served by @mastra/ai-sdk. The
// page sees the Mastra tool's call and result, and a page reloaded in the
// middle of an answer gets the whole answer by resuming.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Recipe, answered, ask, openChat, reloadMidAnswer, texts } from './lib/recipe.mjs';
import { freePort, waitReady } from './lib/stack.mjs';

const GUARD = { timeout: 60_000 };
const STORY = `${Array.from({ length: 120 }, (_, i) => `word${i + 1} `).join('')}The end.`;

const recipe = new Recipe('usechat-mastra');
let gateway;
let browser;

before(async () => {
  const [agentPort, gwPort] = await Promise.all([freePort(), freePort()]);
  const agent = recipe.launchNode('mastra-agent', 'agent.mjs', ['--port', String(agentPort)]);
  const origin = await recipe.servePage('page.jsx');
  gateway = await recipe.startGateway('babelgate', [
    ['127.0.0.1:4111', `127.0.0.1:${agentPort}`], ['127.0.0.1:8080', `127.0.0.1:${gwPort}`], ['http://localhost:3000', origin],
  ]);
  await waitReady(agent, `http://127.0.0.1:${agentPort}/healthz`);
  browser = await recipe.browser();
}, { timeout: 120_000 });

after(() => recipe.close());

test('the page asks; the Mastra agent runs its tool and answers', GUARD, async () => {
  const page = await openChat(browser, recipe, gateway.url);
  await ask(page, 'what is the weather in Paris?');
  await answered(page, 'Done: sunny in Paris, 22 C');
  await ask(page, 'hello Mastra');
  await answered(page, 'You said: hello mastra');
  const calls = await page.$$eval('.tool', (ts) => ts.map((t) => t.textContent));
  assert.deepEqual(calls, ['get_weather({"city":"Paris"}) → "sunny in Paris, 22 C"']);
  assert.deepEqual(await texts(page, 'user'), ['what is the weather in Paris?', 'hello Mastra']);
  assert.equal((await texts(page, 'assistant')).length, 2, 'one assistant message per question');
  assert.deepEqual(page.errors, []);
  await recipe.screenshot(page);
  await page.close();
});

test('a page reloaded in the middle of an answer resumes it to the end (on_disconnect = "keep")', GUARD, async () => {
  const page = await openChat(browser, recipe, gateway.url);
  const res = await reloadMidAnswer(page, { prompt: 'tell me a story', shown: 'word3 ', end: 'The end.', route: '/chat' });
  assert.equal(res.status(), 200, 'the resume finds the run going on');
  await answered(page, 'The end.');
  assert.deepEqual(await texts(page, 'user'), ['tell me a story']);
  assert.deepEqual(await texts(page, 'assistant'), [STORY], 'the whole answer, once');
  assert.deepEqual(page.errors, []);
  await page.close();
});
