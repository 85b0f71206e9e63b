// A Mastra agent served the way Mastra serves useChat: @mastra/ai-sdk's
// handleChatStream (what its chatRoute runs) answering in the AI SDK UI
// message stream, here on node:http instead of Mastra's server:
//
//   node agent.mjs --port 4111      POST /chat, GET /healthz
//
// The model is the `ai` package's MockLanguageModelV3 playing a script, so
// it runs offline; give the Agent a real model (`openai('gpt-4o')`) instead.
// It answers by a word in the last user message:
//   weather     calls the Mastra tool get_weather, then quotes its result
//   story       a long answer streamed word by word, to reload the page in
//               the middle of it
//   (anything)  repeats what was said
import http from 'node:http';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { Mastra } from '@mastra/core';
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { handleChatStream } from '@mastra/ai-sdk';
import { createUIMessageStreamResponse } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

const STORY = [...Array.from({ length: 120 }, (_, i) => `word${i + 1} `), 'The end.'];
// Between two words of the story: the whole answer takes a few seconds.
const STORY_PAUSE_MS = 40;

function plan(prompt) {
  const last = prompt.at(-1);
  if (last?.role === 'tool') {
    const o = last.content.find((p) => p.type === 'tool-result').output;
    return { text: [`Done: ${typeof o.value === 'string' ? o.value : JSON.stringify(o.value)}`] };
  }
  const user = prompt.findLast((m) => m.role === 'user');
  const said = (user?.content ?? []).filter((p) => p.type === 'text').map((p) => p.text).join(' ').toLowerCase();
  if (said.includes('weather')) return { call: ['get_weather', { city: 'Paris' }] };
  if (said.includes('story')) return { text: STORY, pause: STORY_PAUSE_MS };
  return { text: [`You said: ${said}`] };
}

let seq = 0;
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const model = new MockLanguageModelV3({
  doStream: async ({ prompt }) => {
    const p = plan(prompt);
    const id = `p${(seq += 1)}`;
    const reason = p.call ? 'tool-calls' : 'stop';
    async function* parts() {
      yield { type: 'stream-start', warnings: [] };
      if (p.call) {
        yield { type: 'tool-call', toolCallId: `call_${id}`, toolName: p.call[0], input: JSON.stringify(p.call[1]) };
      } else {
        yield { type: 'text-start', id };
        for (const delta of p.text) {
          yield { type: 'text-delta', id, delta };
          if (p.pause) await sleep(p.pause);
        }
        yield { type: 'text-end', id };
      }
      yield { type: 'finish', finishReason: { unified: reason, raw: reason }, usage };
    }
    return { stream: ReadableStream.from(parts()) };
  },
});

const assistant = new Agent({
  id: 'assistant',
  name: 'assistant',
  instructions: 'You are a helpful assistant.',
  model,
  tools: {
    get_weather: createTool({
      id: 'get_weather',
      description: 'Current weather for a city.',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => `sunny in ${city}, 22 C`,
    }),
  },
});
const mastra = new Mastra({ agents: { assistant }, logger: false });

async function chat(req, res) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const params = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const stream = await handleChatStream({ mastra, agentId: 'assistant', version: 'v7', params });
  const r = createUIMessageStreamResponse({ stream });
  res.writeHead(r.status, Object.fromEntries(r.headers));
  Readable.fromWeb(r.body).pipe(res);
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/healthz') return res.writeHead(200).end('ok');
  if (req.method !== 'POST' || req.url !== '/chat') return res.writeHead(404).end();
  chat(req, res).catch((e) => {
    if (!res.headersSent) res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: String(e?.message ?? e) }));
  });
});
const at = process.argv.indexOf('--port');
server.listen(at > 0 ? Number(process.argv[at + 1]) : 4111, '127.0.0.1');
