// Recipe examples/usechat-langgraph, run as its README says, in headless
// Chromium: a React useChat page (@ai-sdk/react) served from its own origin,
// the recipe's gateway.toml, the LangGraph graph served by ag-ui-langgraph
// (agent.py; a MemorySaver checkpointer keeps each thread's history and
// merges what a client sends by message id). The page shows a server tool,
// runs its own tool, answers an interrupt; and on every turn the graph's
// model is given each earlier message once: the page's history goes back
// under LangGraph's ids. With those ids taken out of the page's requests the
// same check sees the history twice.

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Recipe, answered, ask, openChat, texts, settledBackground } from './lib/recipe.mjs';
import { PYTHON, freePort, waitReady } from './lib/stack.mjs';

const GUARD = { timeout: 60_000 };

const recipe = new Recipe('usechat-langgraph');
let agentBase;
let gateway;
let browser;

before(async () => {
  const [agentPort, gwPort] = await Promise.all([freePort(), freePort()]);
  agentBase = `http://127.0.0.1:${agentPort}`;
  const agent = recipe.launch('agent', PYTHON, [path.join(recipe.dir, 'agent.py'), '--port', String(agentPort)]);
  const origin = await recipe.servePage('page.jsx');
  gateway = await recipe.startGateway('babelgate', [
    ['127.0.0.1:8000', `127.0.0.1:${agentPort}`], ['127.0.0.1:8080', `127.0.0.1:${gwPort}`], ['http://localhost:3000', origin],
  ]);
  await waitReady(agent, `${agentBase}/healthz`);
  browser = await recipe.browser();
}, { timeout: 120_000 });

after(() => recipe.close());

/** Records the bodies the page posts to the gateway's /chat in `page.posts`. */
function recordPosts(page) {
  page.posts = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && new URL(r.url()).pathname === '/chat') page.posts.push(r.postDataJSON());
  });
}

/** What the graph's model was given on each call of `threadId` (agent.py records it). */
async function modelCalls(threadId) {
  const seen = await (await fetch(`${agentBase}/requests`)).json();
  return seen.filter((s) => s.thread_id === threadId).map((s) => s.messages);
}

/**
 * What is wrong with the histories the model was given, call after call:
 * the last call's messages are not of the types `last` lists (a message
 * sent again under a new id is appended by LangGraph, and shows here), a
 * message (by id, or a tool call by its call id) is given twice in one
 * call, or a call's history does not start with the previous call's,
 * message for message (ids included).
 */
function historyProblems(calls, last) {
  const problems = [];
  const types = calls.at(-1)?.map((m) => m.type);
  if (JSON.stringify(types) !== JSON.stringify(last)) problems.push(`the last call's messages are ${JSON.stringify(types)}, not ${JSON.stringify(last)}`);
  calls.forEach((messages, n) => {
    const twice = (keys) => keys.filter((k, i) => k != null && keys.indexOf(k) !== i);
    for (const id of twice(messages.map((m) => m.id))) problems.push(`call ${n + 1}: message ${id} given twice`);
    const callIds = messages.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id));
    for (const id of twice(callIds)) problems.push(`call ${n + 1}: tool call ${id} given twice`);
    const previous = calls[n - 1];
    if (previous && JSON.stringify(messages.slice(0, previous.length)) !== JSON.stringify(previous)) {
      problems.push(`call ${n + 1} does not continue call ${n}'s history: ${JSON.stringify(messages.map((m) => [m.type, m.content]))}`);
    }
  });
  return problems;
}

const WEATHER = { q: 'what is the weather in Paris?', a: 'Done. get_weather: Sunny in Paris, 21 C' };
const BACKGROUND = { q: 'a teal background, please', a: 'Done. tool: background set to teal' };
const THANKS = { q: 'thanks, that is all', a: 'You said: thanks, that is all (turn 3)' };

test('the page shows a server tool and runs change_background; each turn reaches the graph with each earlier message once', GUARD, async () => {
  const page = await openChat(browser, recipe, gateway.url);
  recordPosts(page);
  await ask(page, WEATHER.q);
  await answered(page, WEATHER.a);
  // The model calls the page's tool; the page runs it and
  // sendAutomaticallyWhen posts the result, on which the graph answers.
  await ask(page, BACKGROUND.q);
  await answered(page, BACKGROUND.a);
  assert.equal(await settledBackground(page, 'rgb(0, 128, 128)'), 'rgb(0, 128, 128)');
  // The scripted model counts the questions it is given: "(turn 3)".
  await ask(page, THANKS.q);
  await answered(page, THANKS.a);

  assert.deepEqual(await texts(page, 'user'), [WEATHER.q, BACKGROUND.q, THANKS.q]);
  const assistant = await texts(page, 'assistant');
  assert.equal(assistant.length, 3, `one assistant message per question: ${JSON.stringify(assistant)}`);
  const calls = await page.$$eval('.tool', (ts) => ts.map((t) => t.textContent));
  assert.deepEqual(calls, [
    'get_weather({"city":"Paris"}) → "Sunny in Paris, 21 C"',
    'change_background({"color":"teal"}) → "background set to teal"',
  ]);
  assert.deepEqual(page.errors, []);
  await recipe.screenshot(page);

  // Four posts: three questions and the page tool's result.
  assert.equal(page.posts.length, 4, 'the page posted each question and the tool result');
  const model = await modelCalls(page.posts[0].id);
  // The last call: the whole conversation, each message once.
  assert.deepEqual(historyProblems(model, ['human', 'ai', 'tool', 'ai', 'human', 'ai', 'tool', 'ai', 'human']), []);
  assert.deepEqual(model.at(-1).filter((m) => m.type === 'human').map((m) => m.content), [WEATHER.q, BACKGROUND.q, THANKS.q]);
  await page.close();
});

test('a tool error shows on its call; a LangGraph interrupt shows as a question, Approve and Reject resume the graph', GUARD, async () => {
  const page = await openChat(browser, recipe, gateway.url);
  recordPosts(page);
  await ask(page, 'flaky please');
  await answered(page, 'Done. flaky:');
  const interrupts = () => page.$$eval('.interrupt', (is) => is.map((i) => i.textContent));
  for (const [button, result] of [['Approve', 'deleted /tmp/x'], ['Reject', 'kept /tmp/x']]) {
    await ask(page, 'approve deleting /tmp/x');
    await page.waitForSelector('main[data-status=ready] .interrupt button');
    assert.equal((await interrupts()).at(-1), 'Delete /tmp/x? Approve Reject');
    await page.click(`.interrupt button:text("${button}")`);
    await answered(page, `Done. delete_file: ${result}`);
  }
  assert.deepEqual(await interrupts(), ['Delete /tmp/x? answered', 'Delete /tmp/x? answered']);
  const calls = await page.$$eval('.tool', (ts) => ts.map((t) => t.textContent));
  assert.equal(calls.length, 3, `each call once: ${JSON.stringify(calls)}`);
  assert.match(calls[0], /^flaky\(\{"n":1\}\) → error: .*flaky\(1\) failed/);
  assert.deepEqual(calls.slice(1), ['delete_file({"path":"/tmp/x"}) → "deleted /tmp/x"', 'delete_file({"path":"/tmp/x"}) → "kept /tmp/x"']);
  // A question and a resume per interrupt; the resume carries the answer.
  assert.deepEqual(page.posts.map((p) => p.resume?.map((r) => r.payload) ?? null), [null, null, [{ approved: true }], null, [{ approved: false }]]);
  assert.deepEqual(await texts(page, 'user'), ['flaky please', 'approve deleting /tmp/x', 'approve deleting /tmp/x']);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('the check catches a history sent back without LangGraph\'s ids: the model is given it twice', GUARD, async () => {
  const page = await openChat(browser, recipe, gateway.url);
  recordPosts(page);
  // The ids babelgate gave the page's parts (providerMetadata.babelgate)
  // are taken out of the page's requests on their way to the gateway, as
  // if the gateway had not kept them.
  await page.route(`${gateway.url}/chat`, (route) => {
    const body = route.request().postDataJSON();
    if (!body) return route.continue();
    const strip = (p) => Object.fromEntries(Object.entries(p).filter(([k]) => !/ProviderMetadata$|^providerMetadata$/.test(k)));
    body.messages = body.messages.map((m) => ({ ...m, parts: m.parts.map(strip) }));
    return route.continue({ postData: JSON.stringify(body) });
  });
  await ask(page, WEATHER.q);
  await answered(page, WEATHER.a);
  await ask(page, 'thanks');
  await answered(page, 'You said: thanks');
  // The earlier answer is appended again under the page's ids: the model
  // is given the weather call twice.
  const problems = historyProblems(await modelCalls(page.posts[0].id), ['human', 'ai', 'tool', 'ai', 'human']);
  assert.ok(problems.some((p) => p.startsWith('the last call\'s messages are')), JSON.stringify(problems));
  assert.ok(problems.some((p) => p.includes('tool call call_get_weather_1 given twice')), JSON.stringify(problems));
  console.log(`without the ids: ${problems.join('; ')}`);
  await page.close();
});
