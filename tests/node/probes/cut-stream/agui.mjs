#!/usr/bin/env node
// Cut-stream probe for AG-UI: the real @ag-ui/client 1.0.0 HttpAgent (its
// SSE parser, verifyEvents and apply pipeline) against crafted bodies served
// over HTTP. Prints one JSON line per variant: whether runAgent resolved or
// rejected, which subscriber callbacks fired (onRunFinishedEvent,
// onRunErrorEvent, onRunFailed, onRunFinalized), the messages kept, and
// whether the agent still says it is running.
//
//   node tests/node/probes/cut-stream/agui.mjs

import { HttpAgent } from '@ag-ui/client';
import { describe, printTable, timeout, withServer } from './lib.mjs';

const START = [
  { type: 'RUN_STARTED', threadId: 'thread-1', runId: 'run-1' },
  { type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'partial answer' },
];
const END_MSG = { type: 'TEXT_MESSAGE_END', messageId: 'm1' };
const FINISHED = { type: 'RUN_FINISHED', threadId: 'thread-1', runId: 'run-1' };
const RUN_ERROR = { type: 'RUN_ERROR', message: 'upstream cut', code: 'upstream_cut' };

const VARIANTS = {
  'complete (control)': { frames: [...START, END_MSG, FINISHED] },
  'clean end, no terminal, message open': { frames: [...START] },
  'clean end, no terminal, message closed': { frames: [...START, END_MSG] },
  'RUN_ERROR (message open), clean end': { frames: [...START, RUN_ERROR] },
  'RUN_ERROR (message closed), clean end': { frames: [...START, END_MSG, RUN_ERROR] },
  'RUN_FINISHED outcome {type:cancelled}': { frames: [...START, END_MSG, { ...FINISHED, outcome: { type: 'cancelled' } }] },
  'body destroyed mid-stream (FIN, no chunked terminator)': { frames: [...START], end: 'destroy' },
  'body reset mid-stream (RST)': { frames: [...START], end: 'reset' },
  'RUN_ERROR, then body destroyed (FIN)': { frames: [...START, RUN_ERROR], end: 'destroy' },
  'HTTP 502 before the stream': { status: 502 },
};

// The client's reader teardown (`reader.cancel().catch(e => { if (e?.name
// !== 'AbortError') throw e })`) rethrows a broken body's error from a
// promise nobody awaits: in Node that is an unhandled rejection, which ends
// the process by default. Record it instead.
let unhandled = [];
process.on('unhandledRejection', (e) => unhandled.push(describe(e)));

export async function run(url) {
  unhandled = [];
  const agent = new HttpAgent({ url, threadId: 'thread-1' });
  const fired = [];
  const subscriber = {
    onRunFinishedEvent: () => { fired.push('onRunFinishedEvent'); },
    onRunErrorEvent: ({ event }) => { fired.push(`onRunErrorEvent(${event.message})`); },
    onRunFailed: ({ error }) => { fired.push(`onRunFailed(${describe(error)})`); },
    onRunFinalized: () => { fired.push('onRunFinalized'); },
  };
  const consoleLines = [];
  const saved = { warn: console.warn, error: console.error };
  console.warn = (...a) => consoleLines.push(`warn: ${a.map(String).join(' ').slice(0, 160)}`);
  console.error = (...a) => consoleLines.push(`error: ${a.map(String).join(' ').slice(0, 160)}`);
  let outcome;
  try {
    const r = await agent.runAgent({ runId: 'run-1' }, subscriber);
    outcome = { resolved: { result: r.result ?? null, newMessages: r.newMessages.length } };
  } catch (e) {
    outcome = { rejected: describe(e) };
  } finally {
    Object.assign(console, saved);
  }
  return {
    ...outcome,
    fired,
    isRunning: agent.isRunning,
    messagesKept: agent.messages.map((m) => `${m.role}:${m.content ?? ''}`),
    console: consoleLines,
    unhandledRejections: await new Promise((r) => setTimeout(() => r(unhandled), 100)),
  };
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const rows = [];
  for (const [name, v] of Object.entries(VARIANTS)) rows.push({ variant: name, client: await timeout(withServer(v, run)) });
  printTable('ag-ui (@ag-ui/client 1.0.0 HttpAgent)', rows);
}
