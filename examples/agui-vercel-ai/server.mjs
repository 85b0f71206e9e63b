// A Vercel `ai` route handler (app/api/chat/route.ts in a Next.js app),
// served here by node:http so the recipe runs without a framework:
//
//   node server.mjs --port 3001      POST /api/chat, GET /healthz
//
// The model is the `ai` package's MockLanguageModelV3 playing a script, so
// it runs offline; put `openai('gpt-4o')` (or any provider) in its place.
// It answers by a word in the last user message:
//   weather     calls the server tool get_weather, then quotes its result
//   background  calls change_background, the page's own tool, if the model
//               was offered it; the page runs it and sends the result, which
//               the model quotes
//   (anything)  repeats what was said
import http from 'node:http';
import { Readable } from 'node:stream';
import { convertToModelMessages, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

// The route handler.
export async function POST(req) {
  // From an AG-UI client (through babelgate) the body also carries the
  // tools the page declared, in AG-UI's shape: [{name, description, parameters}].
  // `streamText` offers the model only the tools it is given, so they are
  // declared here; having no `execute`, a call of one ends the answer and is
  // left to the page.
  const { messages, tools: pageTools = [] } = await req.json();
  const result = streamText({
    model,
    messages: await convertToModelMessages(messages),
    tools: { ...serverTools, ...Object.fromEntries(pageTools.map((t) => [t.name, tool({ description: t.description, inputSchema: jsonSchema(t.parameters) })])) },
    stopWhen: stepCountIs(5),
  });
  return result.toUIMessageStreamResponse();
}

const serverTools = {
  get_weather: tool({
    description: 'Current weather for a city.',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => `sunny in ${city}, 22 C`,
  }),
};

// ---- the scripted model ---------------------------------------------------

function lastUserText(prompt) {
  const m = prompt.findLast((x) => x.role === 'user');
  return (m?.content ?? []).filter((p) => p.type === 'text').map((p) => p.text).join(' ').toLowerCase();
}

function plan(prompt, tools) {
  const last = prompt.at(-1);
  if (last?.role === 'tool') {
    const o = last.content.find((p) => p.type === 'tool-result').output;
    return { text: `Done: ${typeof o.value === 'string' ? o.value : JSON.stringify(o.value)}` };
  }
  const said = lastUserText(prompt);
  if (said.includes('weather')) return { call: ['get_weather', { city: 'Paris' }] };
  if (said.includes('background')) {
    if ((tools ?? []).some((t) => t.name === 'change_background')) return { call: ['change_background', { color: '#bae6fd' }] };
    return { text: 'No change_background tool was offered.' };
  }
  return { text: `You said: ${said}` };
}

let seq = 0;
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const model = new MockLanguageModelV3({
  doStream: async ({ prompt, tools }) => {
    const p = plan(prompt, tools);
    const id = `p${(seq += 1)}`;
    const parts = p.call
      ? [{ type: 'tool-call', toolCallId: `call_${id}`, toolName: p.call[0], input: JSON.stringify(p.call[1]) }]
      : [{ type: 'text-start', id }, { type: 'text-delta', id, delta: p.text }, { type: 'text-end', id }];
    const reason = p.call ? 'tool-calls' : 'stop';
    parts.push({ type: 'finish', finishReason: { unified: reason, raw: reason }, usage });
    return { stream: new ReadableStream({ start(c) { for (const x of parts) c.enqueue(x); c.close(); } }) };
  },
});

// ---- node:http in place of the framework ----------------------------------

const server = http.createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/healthz') return res.writeHead(200).end('ok');
  if (req.method !== 'POST' || req.url !== '/api/chat') return res.writeHead(404).end();
  try {
    const response = await POST(new Request('http://localhost/api/chat', { method: 'POST', headers: req.headers, body: Readable.toWeb(req), duplex: 'half' }));
    res.writeHead(response.status, Object.fromEntries(response.headers));
    Readable.fromWeb(response.body).pipe(res);
  } catch (e) {
    res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(e?.message ?? e) }));
  }
});
const at = process.argv.indexOf('--port');
server.listen(at > 0 ? Number(process.argv[at + 1]) : 3001, '127.0.0.1');
