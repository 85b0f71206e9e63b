#!/usr/bin/env node
// Feed AG-UI SSE files to the real @ag-ui/client and snapshot the messages and
// state it builds.
//
//   node validate-agui.mjs DIR          every DIR/<scenario>.<from>-ag-ui.sse
//   node validate-agui.mjs --fixtures   self-check on tests/fixtures/ag-ui
//   node validate-agui.mjs --dump DIR   every DIR/*.sse (adapter test dumps:
//                                       the client rules only, no snapshots)
//
// Two passes over the same bytes, both with the package's own code:
//  1. parseSSEStream (the client's SSE framing) and, per event, the zod
//     EventSchemas union from @ag-ui/core/schemas. Gives precise per-event
//     errors and catches frames the framing cannot read ([DONE], CRLF, ...).
//  2. HttpAgent.runAgent with a fetch that returns the bytes: the whole
//     client pipeline — transformHttpEventStream, the compatibility boundary,
//     enforceEvents (drops unknown types / strips unknown fields, with a
//     console warning), transformChunks, verifyEvents (ordering rules) and
//     defaultApplyEvents (messages + state).
// Any error, and any console warning or error printed by the client, fails
// the file: the client's "warn and drop" is data loss for a gateway.
//
// Gateway rule on top of the client: the stream must end with RUN_FINISHED or
// RUN_ERROR. The client treats a stream that just stops as a normal end (see
// the cut_mid_message snapshot), so the gateway must say RUN_ERROR itself.

import fs from 'node:fs';
import { HttpAgent, parseSSEStream } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';
import { Subject } from 'rxjs';
import {
  ERROR_ALLOWED, ERROR_REQUIRED, checkSnapshot, collectFiles, describeError, listFiles, normalizeIds, runAll,
} from './lib/common.mjs';

// These warnings are the client reporting what it dropped; they must reach us.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

// --fixtures only: what the real producer's fixtures are expected to do.
const FIXTURE_EXPECTATIONS = {
  // FUTURE_EVENT is hand-added: enforceEvents drops it with a warning, which
  // this validator counts as a failure. Proves the validator can fail.
  unknown_events: { rejected: /FUTURE_EVENT/ },
  // Cut by hand: no RUN_FINISHED/RUN_ERROR, so the gateway rule does not
  // apply. The client itself accepts it silently (see the snapshot).
  cut_mid_message: { cut: true },
};

// target/golden only, by `<scenario>.<from>-<to>`.
const GOLDEN_EXPECTATIONS = {
  // AG-UI to itself gives back the same events, FUTURE_EVENT included
  // (identity beats the client here); the client drops it with a warning.
  'unknown_events.ag-ui-ag-ui': { rejected: /FUTURE_EVENT/ },
};

// --dump only, by file name: the AG-UI adapter's fixture round trips keep
// the hand-added FUTURE_EVENT, which the client drops with a warning.
const DUMP_EXPECTATIONS = {
  'fixture-unknown_events': { rejected: /FUTURE_EVENT/ },
};

// parseSSEStream takes the client's internal HttpEvent stream. It subscribes
// to its source immediately and multicasts, so the bytes are pushed only
// after we have subscribed to its output.
function parseEvents(bytes) {
  return new Promise((resolve, reject) => {
    const source = new Subject();
    const events = [];
    parseSSEStream(source).subscribe({ next: (e) => events.push(e), error: reject, complete: () => resolve(events) });
    source.next({ type: 'headers', status: 200, headers: new Headers({ 'content-type': 'text/event-stream' }) });
    source.next({ type: 'data', data: new Uint8Array(bytes) });
    source.complete();
  });
}

function schemaProblem(events) {
  for (const [i, event] of events.entries()) {
    if (event === null || typeof event !== 'object' || Array.isArray(event)) return `event #${i + 1} is not a JSON object`;
    const r = EventSchemas.safeParse(event);
    if (!r.success) {
      const issue = r.error.issues?.[0];
      const where = issue?.path?.length ? ` at ${issue.path.join('.')}` : '';
      return `event #${i + 1} (${event.type}) fails the @ag-ui/core schema${where}: ${issue?.message ?? r.error.message}`;
    }
  }
  return null;
}

// Run the client with console.warn/error captured; the client reports dropped
// events and fields there.
async function runAgent(bytes) {
  const agent = new HttpAgent({
    url: 'http://gateway.invalid/agent',
    threadId: 'thread-1',
    fetch: async () => new Response(bytes, { status: 200, headers: { 'content-type': 'text/event-stream' } }),
  });
  const seen = { finished: null, runError: null };
  const subscriber = {
    onRunFinishedEvent: (p) => {
      seen.finished =
        p.outcome === 'interrupt' ? { outcome: 'interrupt', interrupts: p.interrupts }
          : p.outcome === 'success' ? { outcome: 'success', result: p.result, pendingToolCallIds: p.pendingToolCallIds }
            : { outcome: p.outcome };
    },
    onRunErrorEvent: ({ event }) => {
      seen.runError = { message: event.message, code: event.code };
    },
  };
  const consoleLines = [];
  const saved = { warn: console.warn, error: console.error };
  console.warn = (...a) => consoleLines.push(`warn: ${a.map(String).join(' ')}`);
  console.error = (...a) => consoleLines.push(`error: ${a.map(String).join(' ')}`);
  let failure;
  try {
    await agent.runAgent({ runId: 'run-1' }, subscriber);
  } catch (e) {
    failure = e;
  } finally {
    Object.assign(console, saved);
  }
  return { agent, seen, failure, consoleLines };
}

async function check({ file, name }) {
  const bytes = fs.readFileSync(file);
  const expect = dump
    ? DUMP_EXPECTATIONS[name.base] ?? {}
    : fixtures
      ? FIXTURE_EXPECTATIONS[name.scenario] ?? {}
      : GOLDEN_EXPECTATIONS[name.base] ?? {};

  let reason;
  let events = [];
  try {
    events = await parseEvents(bytes);
    reason = schemaProblem(events);
  } catch (e) {
    reason = `SSE parse failed: ${describeError(e)}`;
  }
  const { agent, seen, failure, consoleLines } = await runAgent(bytes);
  if (!reason && failure) reason = `client rejected the stream: ${describeError(failure)}`;
  // Dumps are random event sequences: they reuse ids across message kinds
  // and patch state that is not there, and the gateway passes that on as
  // given, so the client's warnings about it are shown, not failed. The
  // schema, the client's ordering rules (an exception) and the end still are.
  if (!reason && consoleLines.length && !dump) reason = `client ${consoleLines[0]}`;
  const warned = dump && consoleLines.length ? `client ${consoleLines[0]}` : undefined;

  if (expect.rejected) {
    if (!reason) return { reason: 'expected the client to reject or drop part of this stream, but it was accepted' };
    if (!expect.rejected.test(reason)) return { reason: `rejected for an unexpected reason: ${reason}` };
    return { note: `rejected as expected: ${reason.slice(0, 140)}` };
  }
  if (reason) return { reason };

  // Dumps are random streams: an error may end any of them.
  if (!dump && seen.runError && !ERROR_ALLOWED.has(name.scenario)) return { reason: `unexpected RUN_ERROR: ${seen.runError.message}` };
  if (!dump && !seen.runError && ERROR_REQUIRED.has(name.scenario)) return { reason: 'expected the run to end with RUN_ERROR' };
  const lastType = events.at(-1)?.type;
  if (!expect.cut && lastType !== 'RUN_FINISHED' && lastType !== 'RUN_ERROR') {
    return { reason: `gateway rule: the stream must end with RUN_FINISHED or RUN_ERROR (last event: ${lastType ?? 'none'})` };
  }
  if (dump) return { note: warned };

  const snapshot = normalizeIds({
    messages: agent.messages,
    state: agent.state,
    finished: seen.finished,
    ...(seen.runError ? { runError: seen.runError } : {}),
  });
  const snapReason = checkSnapshot(SNAPSHOT_KIND, name.base, snapshot);
  return snapReason ? { reason: snapReason } : { note: seen.runError ? `RUN_ERROR surfaced: ${seen.runError.message}` : undefined };
}

const { dir, fixtures, dump, cleanup } = collectFiles(process.argv, {
  to: 'ag-ui',
  fixtureDir: 'ag-ui',
  selfName: 'ag-ui',
  usage: 'usage: node validate-agui.mjs DIR | --fixtures | --dump DIR',
});
// The fixtures' own results are kept apart from golden ones of the same name.
const SNAPSHOT_KIND = fixtures ? 'ag-ui/fixtures' : 'ag-ui';
await runAll(listFiles(dir, 'ag-ui', { dump }), check, cleanup);
