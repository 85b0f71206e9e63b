#!/usr/bin/env node
// Cut-stream probe for the Vercel AI SDK UI message stream v1: the real `ai`
// package (AbstractChat with DefaultChatTransport, the loop useChat wraps,
// and readUIMessageStream) against crafted bodies. Prints one JSON line per
// variant: the chat's final status/error, onFinish flags, onError calls, and
// whether readUIMessageStream threw.
//
//   node tests/node/probes/cut-stream/vercel.mjs

import { AbstractChat, DefaultChatTransport, readUIMessageStream } from 'ai';
import { describe, printTable, timeout, withServer } from './lib.mjs';

export const HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-vercel-ai-ui-message-stream': 'v1',
};

const START = [
  { type: 'start', messageId: 'm1' },
  { type: 'start-step' },
  { type: 'text-start', id: 't1' },
  { type: 'text-delta', id: 't1', delta: 'partial answer' },
];
const TAIL = [{ type: 'text-end', id: 't1' }, { type: 'finish-step' }];

const VARIANTS = {
  'complete (control)': { frames: [...START, ...TAIL, { type: 'finish' }, '[DONE]'] },
  'finish, no [DONE], clean end': { frames: [...START, ...TAIL, { type: 'finish' }] },
  'no finish, [DONE]': { frames: [...START, '[DONE]'] },
  'no finish, no [DONE], clean end': { frames: [...START] },
  'finish{finishReason:error}, [DONE]': { frames: [...START, ...TAIL, { type: 'finish', finishReason: 'error' }, '[DONE]'] },
  'error chunk, clean end': { frames: [...START, { type: 'error', errorText: 'upstream cut' }] },
  'error chunk, [DONE]': { frames: [...START, { type: 'error', errorText: 'upstream cut' }, '[DONE]'] },
  'error chunk, finish, [DONE]': { frames: [...START, { type: 'error', errorText: 'upstream cut' }, { type: 'finish' }, '[DONE]'] },
  'abort chunk, [DONE]': { frames: [...START, { type: 'abort', reason: 'upstream cut' }, '[DONE]'] },
  'body destroyed mid-stream (FIN, no chunked terminator)': { frames: [...START], end: 'destroy' },
  'body reset mid-stream (RST)': { frames: [...START], end: 'reset' },
  'error chunk, then body destroyed (FIN)': { frames: [...START, { type: 'error', errorText: 'upstream cut' }], end: 'destroy' },
  'HTTP 502 before the stream': { status: 502 },
};

class MemoryState {
  constructor() { this.messages = []; this.status = 'ready'; this.error = undefined; }
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), structuredClone(m), ...this.messages.slice(i + 1)]; }
  snapshot(v) { return structuredClone(v); }
}
class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new MemoryState() }); }
}

const textOf = (m) => m?.parts?.filter((p) => p.type === 'text').map((p) => `${p.text}[${p.state}]`).join('') ?? null;

export async function runChat(url) {
  const onErrorCalls = [];
  let finish = null;
  const chat = new Chat({
    transport: new DefaultChatTransport({ api: url }),
    onError: (e) => onErrorCalls.push(describe(e)),
    onFinish: ({ isAbort, isDisconnect, isError, finishReason, message }) => {
      finish = { isAbort, isDisconnect, isError, finishReason, text: textOf(message) };
    },
  });
  await chat.sendMessage({ text: 'hi' });
  const last = chat.messages.at(-1);
  return {
    status: chat.status,
    error: describe(chat.error),
    onError: onErrorCalls,
    onFinish: finish,
    assistantKept: last?.role === 'assistant' ? textOf(last) : null,
  };
}

export async function runReader(url) {
  const transport = new DefaultChatTransport({ api: url });
  const onErrorCalls = [];
  let last = null;
  let threw = null;
  try {
    const stream = await transport.sendMessages({
      chatId: 'c1', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
      abortSignal: undefined, trigger: 'submit-message', messageId: undefined,
    });
    for await (const m of readUIMessageStream({ stream, onError: (e) => onErrorCalls.push(describe(e)) })) last = m;
  } catch (e) {
    threw = describe(e);
  }
  return { threw, onError: onErrorCalls, lastText: textOf(last) };
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const rows = [];
  for (const [name, v] of Object.entries(VARIANTS)) {
    const spec = { headers: HEADERS, ...v };
    const chat = await timeout(withServer(spec, runChat));
    const reader = await timeout(withServer(spec, runReader));
    rows.push({ variant: name, chat, readUIMessageStream: reader });
  }
  printTable('vercel (ai 7.0.173)', rows);
}
