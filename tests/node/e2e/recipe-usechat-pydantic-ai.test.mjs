// Recipe examples/usechat-pydantic-ai, run as its README says, in headless
// Chromium: a React useChat page (@ai-sdk/react) served from its own origin,
// the recipe's gateway.toml, the pydantic-ai AG-UI agent. The page runs a
// server tool and its own tool, and a page reloaded in the middle of an
// answer gets the whole answer by resuming; without `on_disconnect = "keep"`
// it does not.

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Recipe, answered, ask, openChat, reloadMidAnswer, texts, settledBackground } from './lib/recipe.mjs';
import { PYTHON, freePort, waitReady } from './lib/stack.mjs';

const GUARD = { timeout: 60_000 };
const STORY = `${Array.from({ length: 120 }, (_, i) => `word${i + 1} `).join('')}The end.`;

const recipe = new Recipe('usechat-pydantic-ai');
let keep;
let cancel;
let browser;

before(async () => {
  const [agentPort, keepPort, cancelPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const agent = recipe.launch('agent', PYTHON, [path.join(recipe.dir, 'agent.py'), '--port', String(agentPort)]);
  const origin = await recipe.servePage('page.jsx');
  const ports = (gw) => [['127.0.0.1:8000', `127.0.0.1:${agentPort}`], ['127.0.0.1:8080', `127.0.0.1:${gw}`], ['http://localhost:3000', origin]];
  keep = await recipe.startGateway('babelgate', ports(keepPort));
  // The same config without the key: a reload cancels the run.
  const withoutKeep = (t) => {
    const out = t.replace(/^on_disconnect = "keep"\n/m, '');
    assert.notEqual(out, t, 'the recipe sets on_disconnect = "keep"');
    return out;
  };
  cancel = await recipe.startGateway('babelgate-cancel', ports(cancelPort), withoutKeep);
  await waitReady(agent, `http://127.0.0.1:${agentPort}/healthz`);
  browser = await recipe.browser();
}, { timeout: 120_000 });

after(() => recipe.close());

test('the page asks; the agent runs its server tool and the page runs change_background', GUARD, async () => {
  const page = await openChat(browser, recipe, keep.url);
  await ask(page, 'what is the weather in Paris?');
  await answered(page, 'Done: sunny in Paris, 22 C');
  await ask(page, 'a yellow background, please');
  // The call reached the page (the route's client_tools told the agent of
  // the tool), the page ran it and useChat sent the result back.
  await answered(page, 'Done: background set to #fde68a');
  assert.equal(await settledBackground(page, 'rgb(253, 230, 138)'), 'rgb(253, 230, 138)');
  assert.deepEqual(await texts(page, 'user'), ['what is the weather in Paris?', 'a yellow background, please']);
  assert.equal((await texts(page, 'assistant')).length, 2, 'one assistant message per question');
  assert.deepEqual(page.errors, []);
  await recipe.screenshot(page);
  await page.close();
});

const STORY_TURN = { prompt: 'tell me a story', shown: 'word3 ', end: 'The end.', route: '/chat' };

test('a page reloaded in the middle of an answer resumes it to the end (on_disconnect = "keep")', GUARD, async () => {
  const page = await openChat(browser, recipe, keep.url);
  const res = await reloadMidAnswer(page, STORY_TURN);
  assert.equal(res.status(), 200, 'the resume finds the run going on');
  await answered(page, 'The end.');
  assert.deepEqual(await texts(page, 'user'), ['tell me a story']);
  assert.deepEqual(await texts(page, 'assistant'), [STORY], 'the whole answer, once');
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('without on_disconnect = "keep" the reload cancels the run: the answer never completes', GUARD, async () => {
  const page = await openChat(browser, recipe, cancel.url);
  const res = await reloadMidAnswer(page, STORY_TURN);
  // The resume has come back (204: nothing runs; or the run's log up to its
  // cancellation) and the chat is idle: nothing more is coming.
  const shown = await texts(page, 'assistant');
  assert.ok(!shown.some((t) => t.includes('The end.')), `the answer is not complete (resume: HTTP ${res.status()}): ${JSON.stringify(shown)}`);
  await page.close();
});
