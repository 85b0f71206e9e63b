#!/usr/bin/env node
// A real Vercel AI SDK agent for the end-to-end tests (tests/node/e2e/): the
// answer is written with the `ai` package's own UI message stream helpers
// (createUIMessageStream + pipeUIMessageStreamToResponse), exactly as a
// Next.js or node:http route using the SDK would put it on the wire.
//
//   node vercel-agent.mjs --port PORT
//
//   POST /agent       {id, messages, trigger, messageId?} -> UI message stream
//   GET  /requests    every request received: its body and the chunks sent
//   DELETE /requests  forget them
//   GET  /healthz     readiness
//
// Requests are checked with the package's validateUIMessages, so a bad
// translation by the gateway is refused with 400 and the reason.
// Scenarios, by the last user message: "weather" (server tool: tool-input-*
// then tool-output-available, then text in a new step), "background"
// (front-end tool: input only, finish "tool-calls"); anything else is echoed.
// When the last message is an assistant message whose last tool part has an
// output (the client ran a front-end tool), the answer quotes that output.

import http from 'node:http';
import { pathToFileURL } from 'node:url';
import { createUIMessageStream, pipeUIMessageStreamToResponse, safeValidateUIMessages } from 'ai';

// Kept in step with tests/node/e2e/lib/expect.mjs.
export const ECHO_PREFIX = 'Hello from ai! 你好 🌏👋 You said: ';
export const WEATHER_INPUT = { city: '北京' };
export const WEATHER_OUTPUT = { city: '北京', temperature: 22, condition: 'sunny' };
export const WEATHER_TEXT = '北京今天晴，气温 22°C。';
export const BACKGROUND_INPUT = { color: '#ff0000' };

const recorded = [];
let nextId = 0;
const id = (prefix) => `${prefix}-${process.pid}-${++nextId}`;

function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      try {
        resolve({ text, json: JSON.parse(text) });
      } catch (e) {
        resolve({ text, error: `invalid JSON: ${e.message}` });
      }
    });
    req.on('error', reject);
  });
}

function sendJson(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

/** Why the body is not a DefaultChatTransport request, or null. */
async function problem(body) {
  if (body === null || typeof body !== 'object') return 'the body is not a JSON object';
  if (typeof body.id !== 'string') return '`id` (the chat id) must be a string';
  if (!['submit-message', 'regenerate-message'].includes(body.trigger)) return `unknown trigger ${JSON.stringify(body.trigger)}`;
  if (body.messageId !== undefined && typeof body.messageId !== 'string') return '`messageId` must be a string';
  const v = await safeValidateUIMessages({ messages: body.messages });
  return v.success ? null : `messages: ${v.error.message}`;
}

const textOf = (message) => (message?.parts ?? []).filter((p) => p.type === 'text').map((p) => p.text).join('');
const isToolPart = (p) => p.type.startsWith('tool-') || p.type === 'dynamic-tool';

/** The chunks one request is answered with, in order. */
function script(messages) {
  const last = messages.at(-1);
  const chunks = [{ type: 'start' }, { type: 'start-step' }];
  const text = (t) => {
    const tid = id('txt');
    chunks.push({ type: 'text-start', id: tid }, { type: 'text-delta', id: tid, delta: t }, { type: 'text-end', id: tid });
  };
  const toolInput = (toolName, input) => {
    const toolCallId = id('call');
    const json = JSON.stringify(input);
    const cut = Math.floor(json.length / 2);
    chunks.push(
      { type: 'tool-input-start', toolCallId, toolName },
      { type: 'tool-input-delta', toolCallId, inputTextDelta: json.slice(0, cut) },
      { type: 'tool-input-delta', toolCallId, inputTextDelta: json.slice(cut) },
      { type: 'tool-input-available', toolCallId, toolName, input },
    );
    return toolCallId;
  };

  let finishReason = 'stop';
  const answered = last?.role === 'assistant' ? last.parts.filter(isToolPart).at(-1) : undefined;
  if (answered && answered.state === 'output-available') {
    const out = typeof answered.output === 'string' ? answered.output : JSON.stringify(answered.output);
    text(`The tool said: ${out}. Anything else?`);
  } else {
    const said = textOf(messages.findLast((m) => m.role === 'user'));
    const lower = said.toLowerCase();
    if (lower.includes('weather')) {
      const toolCallId = toolInput('get_weather', WEATHER_INPUT);
      chunks.push({ type: 'tool-output-available', toolCallId, output: WEATHER_OUTPUT });
      chunks.push({ type: 'finish-step' }, { type: 'start-step' });
      text(WEATHER_TEXT);
    } else if (lower.includes('background')) {
      toolInput('change_background', BACKGROUND_INPUT);
      finishReason = 'tool-calls';
    } else {
      text(ECHO_PREFIX + said);
    }
  }
  chunks.push({ type: 'finish-step' }, { type: 'finish', finishReason });
  return chunks;
}

async function handle(req, res) {
  const path = new URL(req.url, 'http://x').pathname;
  if (req.method === 'GET' && path === '/healthz') return sendJson(res, 200, { status: 'ok' });
  if (req.method === 'GET' && path === '/requests') return sendJson(res, 200, recorded);
  if (req.method === 'DELETE' && path === '/requests') return sendJson(res, 200, { deleted: recorded.splice(0).length });
  if (req.method !== 'POST') return sendJson(res, 405, { error: 'POST a chat request' });

  const { text, json, error } = await readJson(req);
  const entry = { path, accept: req.headers.accept ?? null, contentType: req.headers['content-type'] ?? null };
  recorded.push(entry);
  if (error) {
    Object.assign(entry, { raw: text, error });
    console.error(`400 ${error}`);
    return sendJson(res, 400, { error });
  }
  entry.body = json;
  const bad = await problem(json);
  if (bad) {
    // Loud on purpose: the tests report this with the body.
    entry.error = bad;
    console.error(`400 ${bad}`);
    return sendJson(res, 400, { error: bad });
  }

  const chunks = script(json.messages);
  entry.chunks = [];
  const stream = createUIMessageStream({
    // Lets the helper put the continued assistant message's id on `start`.
    originalMessages: json.messages,
    generateId: () => id('msg'),
    async execute({ writer }) {
      for (const chunk of chunks) {
        writer.write(chunk);
        // Let each chunk leave on its own, like a model streaming.
        await new Promise((r) => setImmediate(r));
      }
    },
  });
  // Record what actually went out (after the helper filled in the id).
  const tapped = stream.pipeThrough(new TransformStream({
    transform(chunk, controller) {
      entry.chunks.push(chunk);
      controller.enqueue(chunk);
    },
  }));
  pipeUIMessageStreamToResponse({ response: res, stream: tapped });
}

// Run only as a program: the tests import the constants above.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const portArg = process.argv.indexOf('--port');
  const port = portArg > 0 ? Number(process.argv[portArg + 1]) : NaN;
  if (!Number.isInteger(port)) {
    console.error('usage: node vercel-agent.mjs --port PORT');
    process.exit(2);
  }
  const server = http.createServer(handle);
  server.listen(port, '127.0.0.1', () => console.log(`vercel agent on http://127.0.0.1:${port}/agent`));
  const shutdown = () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}
