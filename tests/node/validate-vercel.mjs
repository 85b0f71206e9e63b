#!/usr/bin/env node
// Feed UI-message-stream files to the real `ai` client path and snapshot the
// message it assembles.
//
//   node validate-vercel.mjs DIR          every DIR/<scenario>.<from>-vercel.sse
//   node validate-vercel.mjs --fixtures   self-check on tests/fixtures/vercel
//   node validate-vercel.mjs --dump DIR   every DIR/*.sse (adapter test dumps:
//                                         the client rules only, no snapshots)
//
// The path is the one useChat takes: DefaultChatTransport.sendMessages (SSE
// parsing + the strict chunk schema) and then readUIMessageStream (the same
// processUIMessageStream state machine the Chat class runs). Like the Chat
// class, the first error ends the stream (terminateOnError). An `error` chunk
// is the server speaking, not the client rejecting: it is allowed only for the
// scenarios in ERROR_ALLOWED and recorded in the snapshot.
//
// Besides what the client checks, gateway output must end the way the README
// says a server must: a terminal chunk (finish / error / abort), then
// `data: [DONE]` (LF framing), with a single `start` chunk. The client itself does not care: a stream that just stops
// leaves a text part in state "streaming" and no error at all (see the
// cut_mid_message snapshot), which is why the gateway has to say it.

import fs from 'node:fs';
import { runUseChatPath, serving } from './lib/vercel-client.mjs';
import {
  ERROR_ALLOWED, ERROR_REQUIRED, checkSnapshot, collectFiles, describeError, listFiles, normalizeIds, runAll,
} from './lib/common.mjs';

// --fixtures only: what the real producer's fixtures are expected to do.
const FIXTURE_EXPECTATIONS = {
  // The hand-added `future-chunk` line must be refused by the chunk schema;
  // this proves the validator can fail at all.
  unknown_events: { rejected: /AI_TypeValidationError.*future-chunk/s },
  // Cut by hand: no finish and no [DONE], so the gateway rules do not apply.
  cut_mid_message: { cut: true },
};

const runClient = (bytes) => runUseChatPath({ fetch: serving(bytes) });

async function check({ file, name }) {
  const bytes = fs.readFileSync(file);
  const expect = FIXTURE_EXPECTATIONS_ACTIVE[name.scenario] ?? {};
  const { message, chunks, error } = await runClient(bytes);

  const last = chunks.at(-1);
  const errorChunk = error && last?.type === 'error' && error.message === last.errorText ? last : undefined;

  if (expect.rejected) {
    if (!error || errorChunk) return { reason: 'expected the client to reject this stream, but it was accepted' };
    if (!expect.rejected.test(describeError(error))) return { reason: `rejected for an unexpected reason: ${describeError(error)}` };
    return { note: `rejected as expected: ${describeError(error).slice(0, 120)}` };
  }
  if (error && !errorChunk) return { reason: `client rejected the stream after ${chunks.length} chunks: ${describeError(error)}` };
  // Dumps are made-up streams: an error chunk may end any of them.
  if (!dump && errorChunk && !ERROR_ALLOWED.has(name.scenario)) return { reason: `unexpected error chunk: ${errorChunk.errorText}` };
  if (!dump && !errorChunk && ERROR_REQUIRED.has(name.scenario)) return { reason: 'expected the stream to surface an error chunk' };

  if (!expect.cut) {
    const text = bytes.toString('utf8');
    if (!text.endsWith('data: [DONE]\n\n')) return { reason: 'gateway rule: the stream must end with "data: [DONE]\\n\\n"' };
    if (!chunks.some((c) => ['finish', 'error', 'abort'].includes(c.type))) {
      return { reason: 'gateway rule: no terminal chunk (finish, error or abort)' };
    }
    // readUIMessageStream starts over on a new messageId while useChat's Chat
    // renames the message in place, so a second `start` is ambiguous.
    if (chunks.filter((c) => c.type === 'start').length > 1) return { reason: 'gateway rule: more than one start chunk' };
  }
  // Some dumps say nothing on purpose (the `empty` corpus stream).
  if (dump) return { note: errorChunk ? `error chunk surfaced: ${errorChunk.errorText}` : undefined };
  if (!message) return { reason: 'the client assembled no message' };

  const finish = chunks.find((c) => c.type === 'finish');
  const snapshot = normalizeIds({
    message,
    finishReason: finish ? (finish.finishReason ?? 'unspecified') : null,
    ...(errorChunk ? { error: errorChunk.errorText } : {}),
  });
  const reason = checkSnapshot(SNAPSHOT_KIND, name.base, snapshot);
  return reason ? { reason } : { note: errorChunk ? `error chunk surfaced: ${errorChunk.errorText}` : undefined };
}

const { dir, fixtures, dump, cleanup } = collectFiles(process.argv, {
  to: 'vercel',
  fixtureDir: 'vercel',
  selfName: 'vercel',
  usage: 'usage: node validate-vercel.mjs DIR | --fixtures | --dump DIR',
});
const FIXTURE_EXPECTATIONS_ACTIVE = fixtures ? FIXTURE_EXPECTATIONS : {};
// The fixtures' own results are kept apart: a golden file can have the same
// name (vercel-vercel) and legitimately differ (cut or unknown input is closed
// or wrapped by the gateway).
const SNAPSHOT_KIND = fixtures ? 'vercel/fixtures' : 'vercel';
await runAll(listFiles(dir, 'vercel', { dump }), check, cleanup);
