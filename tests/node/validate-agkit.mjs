#!/usr/bin/env node
// Feed AG-Kit legacy send-message streams to the real AG-Kit client loop
// (`useChat().sendMessage` of npm @cloudbase/agent-ui-web 0.0.24, installed
// unchanged; shims/README.md says what stands in for its unpublished imports)
// and snapshot what the client ends up holding.
//
//   node validate-agkit.mjs DIR          every DIR/<scenario>.<from>-agkit.sse
//   node validate-agkit.mjs --fixtures   self-check on tests/fixtures/agkit
//   node validate-agkit.mjs --dump DIR   every DIR/*.sse (adapter dumps), no snapshots
//
// The client is lenient: it drops every frame its schema refuses without a
// word, ignores `error` frames and stops at `[DONE]`. For a gateway that is
// data loss, so each of these fails the file:
//  - a frame the schema refuses (the strict server shapes, see shims/);
//  - the client ending in its error state, or printing anything;
//  - a state the loop corrupted silently: a tool call update for an id it
//    never saw leaves an entry without id or name;
//  - gateway rules: `data: [DONE]` is the last frame, once (frames after it
//    are never read); an `error` frame only in scenarios that may fail.
//    A failed run is the exception: the client ignores `error` frames and
//    takes `[DONE]` for success, so the gateway ends it with the error frame
//    and then breaks the body off (docs/cut-streams.md). Such a stream must
//    have its error frame last and no `[DONE]`; it is replayed with the body
//    breaking off at its end, and the client must end in its error state.

import fs from 'node:fs';
import { onRejected } from '@cloudbase/agent-shared';
import { useChat } from '@cloudbase/agent-ui-web';
import { slots } from './shims/react/index.mjs';
import { createParser } from 'eventsource-parser';
import * as z from 'zod';
import {
  ERROR_ALLOWED, ERROR_REQUIRED, checkSnapshot, collectFiles, describeError, listFiles, normalizeIds, runAll,
} from './lib/common.mjs';

// useChat's useState slots, in the order the hook declares them.
const SLOTS = ['messages', 'delta', 'loading', 'streaming', 'pendingInterrupt', 'resolveInterrupt', 'uiToolCalls', 'currentRound', 'error'];

// Frames the gateway writes for what AG-Kit cannot say (docs/mapping/agkit.md,
// "extension frames"); the client's schema refuses them and it reads on, as
// documented. A refused frame of any other type, or of the client's own
// types, is data the client lost.
const EXTENSIONS = new Set([
  'reasoning', 'reasoning-phase-start', 'reasoning-phase-end', 'reasoning-encrypted', 'step-started',
  'step-finished', 'state-snapshot', 'state-delta', 'messages-snapshot', 'activity-snapshot', 'activity-delta',
  'source', 'file', 'data', 'custom', 'message-metadata', 'collab-start', 'collab-content', 'collab-end',
  'subagent-started', 'subagent-finished', 'subagent-error', 'raw', 'unknown',
]);

// target/golden only, by `<scenario>.<from>-<to>`.
const GOLDEN_EXPECTATIONS = {
  // AG-Kit to itself gives back the fixture's frames, the hand-added `text`
  // with an extra key included (identity beats the client, as for AG-UI).
  'unknown_events.agkit-agkit': { rejected: /unknown key index/ },
};

// --dump only, by file name.
const DUMP_EXPECTATIONS = {
  // A result for a call of an earlier response: a real client holds that
  // call from before, this one-response harness cannot, so the client's
  // update of a call it does not hold is not counted here.
  orphans: { earlierCalls: true },
};

// --fixtures only: what the real producer's fixtures are expected to do.
const FIXTURE_EXPECTATIONS = {
  // Hand-added frames of unknown types (and a `text` with an extra key):
  // the schema refuses them. Proves the validator can fail.
  unknown_events: { rejected: /unknown (type|key)/ },
  // Cut by hand: no [DONE].
  cut_mid_message: { cut: true },
};

/** The frames' data fields, read by the same SSE parser the client uses. */
function frameData(bytes) {
  const data = [];
  const parser = createParser({ onEvent: (e) => data.push(e.data) });
  parser.feed(bytes.toString('utf8'));
  return data;
}

async function runClient(bytes, { breakOff = false } = {}) {
  const rejected = [];
  const extensions = [];
  const stopListening = onRejected((value, why) => {
    if (EXTENSIONS.has(value?.type) && why.startsWith('unknown type')) extensions.push(value.type);
    else rejected.push(`${why}: ${JSON.stringify(value)?.slice(0, 120)}`);
  });
  const consoleLines = [];
  const saved = { log: console.log, warn: console.warn, error: console.error };
  for (const level of ['log', 'warn', 'error']) {
    console[level] = (...a) => consoleLines.push(`${level}: ${a.map((x) => describeError(x)).join(' ')}`);
  }
  slots.length = 0;
  try {
    // Cut in 7-byte pieces so frames and UTF-8 sequences straddle reads.
    let at = 0;
    const fetch = async () => new Response(new ReadableStream({
      // One piece per pull: an error() would discard what is still queued.
      pull(c) {
        if (at < bytes.length) {
          c.enqueue(bytes.subarray(at, at + 7));
          at += 7;
        } else if (breakOff) {
          // As the gateway's body breaks off: what fetch gives on a cut body.
          c.error(new TypeError('terminated'));
        } else {
          c.close();
        }
      },
    }), { status: 200, headers: { 'content-type': 'text/event-stream' } });
    const chat = useChat({
      fetch,
      threadId: 'conversation-1',
      clientTools: [{
        name: 'change_background',
        description: 'Change the background colour',
        parameters: z.object({ color: z.string() }),
        handler: () => 'ok',
      }],
    });
    await chat.sendMessage('hi');
  } finally {
    Object.assign(console, saved);
    stopListening();
  }
  const state = Object.fromEntries(SLOTS.map((n, i) => [n, slots[i]]));
  return { state, rejected, extensions, consoleLines };
}

function corruption(state) {
  for (const call of state.uiToolCalls ?? []) {
    if (typeof call?.id !== 'string' || typeof call?.name !== 'string') {
      return `the client holds a tool call it never saw start: ${JSON.stringify(call)}`;
    }
  }
  for (const m of state.messages ?? []) {
    for (const call of m.toolCalls ?? []) {
      if (typeof call?.id !== 'string' || typeof call?.function?.name !== 'string') {
        return `a message holds a broken tool call: ${JSON.stringify(call)}`;
      }
    }
  }
  return null;
}

async function check({ file, name }) {
  const bytes = fs.readFileSync(file);
  const table = { fixtures: FIXTURE_EXPECTATIONS, golden: GOLDEN_EXPECTATIONS, dump: DUMP_EXPECTATIONS }[mode];
  const expect = table[mode === 'fixtures' ? name.scenario : name.base] ?? {};
  const data = frameData(bytes);
  const errors = data.map((d) => { try { return JSON.parse(d); } catch { return null; } }).filter((v) => v?.type === 'error');
  // The real server's own bytes (--fixtures) end an error with [DONE].
  const failed = mode !== 'fixtures' && errors.length > 0;
  if (failed) {
    if (data.includes('[DONE]')) return { reason: 'gateway rule: a failed run must not carry "data: [DONE]" (the client would show success)' };
    if (JSON.parse(data.at(-1))?.type !== 'error') return { reason: 'gateway rule: the error frame must be the last frame of a failed run' };
  }
  const { state, rejected, extensions, consoleLines } = await runClient(bytes, { breakOff: failed });

  let reason = null;
  if (failed && !state.error) reason = 'a failed run whose body broke off left the client without an error';
  else if (state.error && !failed) reason = `the client ended in its error state: ${describeError(state.error)}`;
  else if (rejected.length) reason = `the client's schema refused ${rejected.length} frame(s), dropped silently: ${rejected[0]}`;
  else {
    // A failed run's client logs the broken-off body (and nothing else).
    const printed = consoleLines.filter((l) => !(failed && l.includes('TypeError: terminated')));
    if (printed.length) reason = `the client printed ${printed[0]}`;
  }
  if (!reason && !expect.earlierCalls) reason = corruption(state);

  if (expect.rejected) {
    if (!reason) return { reason: 'expected the client to refuse part of this stream, but it took all of it' };
    if (!expect.rejected.test(reason)) return { reason: `refused for an unexpected reason: ${reason}` };
    return { note: `refused as expected: ${reason.slice(0, 140)}` };
  }
  if (reason) return { reason };

  const done = data.filter((d) => d === '[DONE]').length;
  if (!expect.cut && !failed) {
    if (data.at(-1) !== '[DONE]' || done !== 1) {
      return { reason: `gateway rule: the stream must end with one "data: [DONE]" (last frame ${JSON.stringify(data.at(-1))}, ${done} [DONE])` };
    }
  }
  if (mode !== 'dump') {
    if (errors.length && !ERROR_ALLOWED.has(name.scenario)) return { reason: `unexpected error frame: ${errors[0].error}` };
    if (!errors.length && ERROR_REQUIRED.has(name.scenario)) return { reason: 'expected an error frame' };
  }
  if (errors.length > 1) return { reason: `${errors.length} error frames` };
  if (mode === 'dump') return { note: errors.length ? `error frame: ${errors[0].error}` : undefined };

  const snapshot = normalizeIds({
    messages: state.messages,
    uiToolCalls: state.uiToolCalls,
    pendingInterrupt: state.pendingInterrupt,
    ...(errors.length ? { error: errors[0] } : {}),
    // What the client still shows of a failed run: its streaming text.
    ...(failed ? { clientError: describeError(state.error), delta: state.delta } : {}),
    ...(extensions.length ? { extensionFramesIgnored: [...new Set(extensions)].sort() } : {}),
  });
  const snapReason = checkSnapshot(mode === 'fixtures' ? 'agkit/fixtures' : 'agkit', name.base, snapshot);
  return snapReason ? { reason: snapReason } : { note: errors.length ? `error frame: ${errors[0].error}` : undefined };
}

const c = collectFiles(process.argv, {
  to: 'agkit', fixtureDir: 'agkit', selfName: 'agkit', usage: 'usage: node validate-agkit.mjs DIR | --fixtures | --dump DIR',
});
const mode = c.dump ? 'dump' : c.fixtures ? 'fixtures' : 'golden';
await runAll(listFiles(c.dir, 'agkit', { dump: c.dump }), check, c.cleanup);
