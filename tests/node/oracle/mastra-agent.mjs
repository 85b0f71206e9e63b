#!/usr/bin/env node
// Oracle agent, second framework: ONE Mastra agent served natively by two
// real adapters, with a scripted offline model.
//
//   node tests/node/oracle/mastra-agent.mjs --port PORT
//
//   POST /agui     @ag-ui/mastra's MastraAgent (AG-UI's own Mastra
//                  integration) run on the RunAgentInput; its events are
//                  written with @ag-ui/encoder, the way an AG-UI server does
//   POST /vercel   @mastra/ai-sdk's handleChatStream (Mastra's own AI SDK UI
//                  message stream, version v7) + ai's createUIMessageStreamResponse
//   GET  /history  every model call so far: the prompt the model received
//                  (LanguageModelV3Prompt), with the scenario
//   GET  /healthz  readiness
//
// The model is ai/test's MockLanguageModelV3 with a doStream that plays a
// script picked by a marker word in the last user message (the same markers
// as tests/python/oracle_agent.py; the first found wins):
//   plain, unicode (CJK, split emoji modifier, U+2028, U+2029), tool
//   (get_weather + result + text), retry (flaky(1) throws, the model calls
//   flaky(2)), error_before (doStream throws), error_during (explode throws,
//   the next model call fails), error_after (tool result, then some text and
//   the model stream errors), client_tool (change_background: AG-UI gets it
//   from RunAgentInput.tools, /vercel declares it as a client tool; the run
//   ends with the call left for the client; the follow-up gets a text
//   quoting the tool's output), think (reasoning then text), abort (some
//   text, then the model waits for its abort signal, recorded as `aborted`
//   in /history; GET /release ends every call still waiting).
import http from 'node:http';
import { Readable } from 'node:stream';
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core';
import { createTool } from '@mastra/core/tools';
import { handleChatStream } from '@mastra/ai-sdk';
import { MastraAgent } from '@ag-ui/mastra';
import { EventEncoder } from '@ag-ui/encoder';
import { EventType } from '@ag-ui/core';
import { createUIMessageStreamResponse } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

const MARKERS = ['abort', 'error_before', 'error_during', 'error_after', 'client_tool', 'unicode', 'retry', 'think', 'tool', 'plain'];
const PLAIN = ['Hello ', 'from the ', 'oracle.'];
const UNICODE = ['你好，世界', '! 🎉👍', '🏽 line\u2028separator\u2029paragraph ', 'é—ü'];
const WEATHER_ARGS = ['{"city":', '"北京"}'];
const WEATHER_TEXT = ['北京今天晴，', '气温 22°C。'];
const THINK = ['Let me think. ', 'The answer is 42.'];
const ABORT = ['Streaming until aborted'];
const THINK_TEXT = ['Thought about it: 42.'];
const CLIENT_TOOL = 'change_background';
const CLIENT_TOOL_ARGS = ['{"col', 'or":"#ff', '0000"}'];
const CLIENT_TOOL_SCHEMA = {
  type: 'object',
  properties: { color: { type: 'string', description: 'A CSS colour' } },
  required: ['color'],
};

const history = [];
const held = new Set();

function lastUserText(prompt) {
  for (let i = prompt.length - 1; i >= 0; i -= 1) {
    const m = prompt[i];
    if (m.role !== 'user') continue;
    return m.content.filter((p) => p.type === 'text').map((p) => p.text).join(' ');
  }
  return '';
}
const scenarioOf = (prompt) => MARKERS.find((m) => lastUserText(prompt).includes(m)) ?? 'plain';
// Tool results of the last message when it is a tool message (the model is
// being called back after a tool ran).
function lastResults(prompt) {
  const m = prompt[prompt.length - 1];
  return m?.role === 'tool' ? m.content.filter((p) => p.type === 'tool-result') : [];
}

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const finish = (unified) => ({ type: 'finish', finishReason: { unified, raw: unified }, usage });
let seq = 0;
function text(deltas) {
  const id = `t${(seq += 1)}`;
  return [{ type: 'text-start', id }, ...deltas.map((delta) => ({ type: 'text-delta', id, delta })), { type: 'text-end', id }];
}
function toolCall(name, args, id) {
  return [
    { type: 'tool-input-start', id, toolName: name },
    ...args.map((delta) => ({ type: 'tool-input-delta', id, delta })),
    { type: 'tool-input-end', id },
    { type: 'tool-call', toolCallId: id, toolName: name, input: args.join('') },
  ];
}

// One model call: the parts to stream, and whether the stream then fails.
function script(prompt, tools) {
  const s = scenarioOf(prompt);
  const results = lastResults(prompt);
  const failed = results.filter((r) => r.output?.type?.startsWith('error'));
  switch (s) {
    case 'unicode': return { parts: [...text(UNICODE), finish('stop')] };
    case 'abort': return { parts: text(ABORT).slice(0, 2), hold: true };
    case 'tool':
      return results.length ? { parts: [...text(WEATHER_TEXT), finish('stop')] }
        : { parts: [...toolCall('get_weather', WEATHER_ARGS, 'call_weather_1'), finish('tool-calls')] };
    case 'retry':
      if (results.length && !failed.length) return { parts: [...text(['flaky(2) worked.']), finish('stop')] };
      if (failed.length) return { parts: [...toolCall('flaky', ['{"n":2}'], 'call_flaky_2'), finish('tool-calls')] };
      return { parts: [...toolCall('flaky', ['{"n":1}'], 'call_flaky_1'), finish('tool-calls')] };
    case 'error_before': return { throws: 'oracle: model failed before any output' };
    case 'error_during':
      if (results.length) return { parts: [], fails: 'oracle: model failed after the tool error' };
      return { parts: [...toolCall('explode', ['{}'], 'call_explode_1'), finish('tool-calls')] };
    case 'error_after':
      if (results.length) return { parts: text(['Partial answer ']).slice(0, 2), fails: 'oracle: model failed after the tool result' };
      return { parts: [...toolCall('get_weather', WEATHER_ARGS, 'call_weather_1'), finish('tool-calls')] };
    case 'client_tool':
      if (results.length) {
        const o = results[0].output;
        return { parts: [...text([`Background changed: ${typeof o.value === 'string' ? o.value : JSON.stringify(o.value)}`]), finish('stop')] };
      }
      if (!(tools ?? []).some((t) => t.name === CLIENT_TOOL)) return { parts: [...text(['No client tool was offered.']), finish('stop')] };
      return { parts: [...toolCall(CLIENT_TOOL, CLIENT_TOOL_ARGS, 'call_bg_1'), finish('tool-calls')] };
    case 'think': {
      const id = `r${(seq += 1)}`;
      return {
        parts: [
          { type: 'reasoning-start', id }, ...THINK.map((delta) => ({ type: 'reasoning-delta', id, delta })), { type: 'reasoning-end', id },
          ...text(THINK_TEXT), finish('stop'),
        ],
      };
    }
    default: return { parts: [...text(PLAIN), finish('stop')] };
  }
}

// An error without a stack: @mastra/ai-sdk sends the error serialised, and a
// stack (this file's paths and lines) would make the captures machine-bound.
function failure(message) {
  const e = new Error(message);
  delete e.stack;
  return e;
}

const model = new MockLanguageModelV3({
  provider: 'oracle',
  modelId: 'oracle-script',
  doStream: async ({ prompt, tools, abortSignal }) => {
    const entry = { seq: history.length, scenario: scenarioOf(prompt), prompt: structuredClone(prompt) };
    history.push(entry);
    const plan = script(prompt, tools);
    if (plan.throws) throw failure(plan.throws);
    const parts = [{ type: 'stream-start', warnings: [] }, ...plan.parts];
    return {
      stream: new ReadableStream({
        start(c) {
          for (const p of parts) c.enqueue(p);
          if (plan.fails) c.error(failure(plan.fails));
          else if (!plan.hold) c.close();
          else {
            // abort: the text stays open until the call's abort signal fires
            // (recorded: what the test asks) or GET /release lets it finish.
            entry.aborted = false;
            const end = (aborted) => {
              if (entry.aborted !== false) return;
              entry.aborted = aborted;
              held.delete(release);
              try {
                if (aborted) c.error(abortSignal.reason ?? failure('aborted'));
                else {
                  c.enqueue({ type: 'text-end', id: parts.find((p) => p.type === 'text-start').id });
                  c.enqueue(finish('stop'));
                  c.close();
                }
              } catch {}
            };
            const release = () => end(null);
            held.add(release);
            if (abortSignal?.aborted) end(true);
            abortSignal?.addEventListener('abort', () => end(true), { once: true });
          }
        },
      }),
    };
  },
});

const agent = new Agent({
  id: 'oracle',
  name: 'oracle',
  instructions: 'You are the oracle.',
  model,
  tools: {
    get_weather: createTool({
      id: 'get_weather',
      description: 'Current weather for a city.',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => ({ city, temperature: 22, condition: 'sunny' }),
    }),
    flaky: createTool({
      id: 'flaky',
      description: 'Works only for n == 2.',
      inputSchema: z.object({ n: z.number() }),
      execute: async ({ n }) => {
        if (n !== 2) throw failure(`n=${n} is wrong, use n=2`);
        return `flaky(${n}) ok`;
      },
    }),
    explode: createTool({
      id: 'explode',
      description: 'Always fails.',
      inputSchema: z.object({}),
      execute: async () => { throw failure('oracle: tool failed during the call'); },
    }),
  },
});
const mastra = new Mastra({ agents: { oracle: agent }, logger: false });

// Vercel requests carry no tool definitions: /vercel declares the front-end
// tool itself (a Mastra client tool: no execute, left for the client).
const VERCEL_CLIENT_TOOLS = {
  [CLIENT_TOOL]: { id: CLIENT_TOOL, description: 'Change the page background colour.', inputSchema: CLIENT_TOOL_SCHEMA },
};

async function readJson(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function agui(req, res) {
  const input = await readJson(req);
  const encoder = new EventEncoder({ accept: req.headers.accept });
  res.writeHead(200, { 'content-type': encoder.getContentType(), 'cache-control': 'no-cache' });
  const runner = new MastraAgent({ agentId: 'oracle', agent: mastra.getAgent('oracle'), resourceId: 'oracle' });
  await new Promise((resolve) => {
    runner.run(input).subscribe({
      next: (e) => res.write(encoder.encode(e)),
      // MastraAgent reports a failed run as an Observable error; an AG-UI
      // server sends it to the client as RUN_ERROR (as @ag-ui/client's own
      // runAgent does for an in-process agent).
      error: (e) => { res.write(encoder.encode({ type: EventType.RUN_ERROR, message: String(e?.message ?? e) })); resolve(); },
      complete: resolve,
    });
  });
  res.end();
}

async function vercel(req, res) {
  const params = await readJson(req);
  // What Mastra's own chatRoute does: the request's abort signal is the run's.
  const gone = new AbortController();
  res.on('close', () => { if (!res.writableFinished) gone.abort(); });
  const stream = await handleChatStream({
    mastra, agentId: 'oracle', version: 'v7', params: { ...params, abortSignal: gone.signal }, sendReasoning: true,
    defaultOptions: { clientTools: VERCEL_CLIENT_TOOLS },
  });
  const r = createUIMessageStreamResponse({ stream });
  res.writeHead(r.status, Object.fromEntries(r.headers));
  Readable.fromWeb(r.body).pipe(res);
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  const fail = (e) => {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: String(e?.stack ?? e) }));
  };
  if (req.method === 'POST' && url.pathname === '/agui') return agui(req, res).catch(fail);
  if (req.method === 'POST' && url.pathname === '/vercel') return vercel(req, res).catch(fail);
  if (req.method === 'GET' && url.pathname === '/history') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify(history.slice(Number(url.searchParams.get('since') ?? 0))));
  }
  if (req.method === 'GET' && url.pathname === '/release') {
    for (const r of [...held]) r();
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end('{"ok":true}');
  }
  if (req.method === 'GET' && url.pathname === '/healthz') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end('{"ok":true}');
  }
  res.writeHead(404).end();
});
const port = Number(process.argv[process.argv.indexOf('--port') + 1] || 18775);
server.listen(port, '127.0.0.1');
