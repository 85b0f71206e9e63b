#!/usr/bin/env node
// Cut-stream probe for the AG-Kit legacy send-message dialect: the real
// useChat().sendMessage loop of npm @cloudbase/agent-ui-web 0.0.24 (run the
// way validate-agkit.mjs runs it, with the stand-ins in tests/node/shims),
// fetching crafted bodies from a local HTTP server with the platform fetch.
// Prints one JSON line per variant: the hook's final state (error flag,
// streaming flag, messages kept) and what it printed.
//
//   node tests/node/probes/cut-stream/agkit.mjs

import { useChat } from '@cloudbase/agent-ui-web';
import { slots } from '../../shims/react/index.mjs';
import { describe, printTable, timeout, withServer } from './lib.mjs';

// useChat's useState slots, in the order the hook declares them (as in validate-agkit.mjs).
const SLOTS = ['messages', 'delta', 'loading', 'streaming', 'pendingInterrupt', 'resolveInterrupt', 'uiToolCalls', 'currentRound', 'error'];

const TEXT = [{ type: 'text', content: 'partial ' }, { type: 'text', content: 'answer' }];
const ERROR = { type: 'error', error: 'upstream cut', code: 'upstream_cut' };

const VARIANTS = {
  'complete (control)': { frames: [...TEXT, '[DONE]'] },
  'no [DONE], clean end': { frames: [...TEXT] },
  'error frame, [DONE]': { frames: [...TEXT, ERROR, '[DONE]'] },
  'error frame, clean end (no [DONE])': { frames: [...TEXT, ERROR] },
  'type-less {error,details} frame, clean end (0.1.1 server\'s startup failure)': {
    frames: [...TEXT, { error: 'Server error', details: 'upstream cut' }],
  },
  'body destroyed mid-stream (FIN, no chunked terminator)': { frames: [...TEXT], end: 'destroy' },
  'body reset mid-stream (RST)': { frames: [...TEXT], end: 'reset' },
  'error frame, then body destroyed (FIN)': { frames: [...TEXT, ERROR], end: 'destroy' },
  'HTTP 502 before the stream': { status: 502 },
};

export async function run(url) {
  const consoleLines = [];
  const saved = { log: console.log, warn: console.warn, error: console.error };
  for (const level of ['log', 'warn', 'error']) {
    console[level] = (...a) => consoleLines.push(`${level}: ${a.map((x) => describe(x) ?? String(x)).join(' ').slice(0, 160)}`);
  }
  slots.length = 0;
  let threw = null;
  try {
    const chat = useChat({ url, fetch: globalThis.fetch, threadId: 'conversation-1' });
    await chat.sendMessage('hi');
  } catch (e) {
    threw = describe(e);
  } finally {
    Object.assign(console, saved);
  }
  const s = Object.fromEntries(SLOTS.map((n, i) => [n, slots[i]]));
  return {
    sendMessageThrew: threw,
    error: s.error ? describe(s.error) : null,
    streaming: s.streaming,
    messagesKept: (s.messages ?? []).map((m) => `${m.role}:${m.content ?? ''}`),
    console: consoleLines,
  };
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const rows = [];
  for (const [name, v] of Object.entries(VARIANTS)) rows.push({ variant: name, client: await timeout(withServer(v, run)) });
  printTable('agkit (@cloudbase/agent-ui-web 0.0.24 useChat)', rows);
}
