// Small HTTP helpers for the end-to-end tests: a fetch that keeps the raw
// bytes of every exchange (so a failure can show them), and the SSE reading
// the AG-Kit and HAI clients do.

import { EventSourceParserStream } from 'eventsource-parser/stream';

/**
 * Read `stream` into entry.raw as it arrives (a failure report can show what
 * came so far without waiting for the end); entry.text resolves to the whole.
 */
export function keepText(entry, stream) {
  entry.raw = '';
  entry.complete = false;
  entry.text = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) entry.raw += decoder.decode(chunk, { stream: true });
    entry.raw += decoder.decode();
    entry.complete = true;
    return entry.raw;
  })();
}

/**
 * A fetch for a client under test that records every exchange:
 * { url, body (parsed), status, headers, raw, text: Promise<whole response> }.
 */
export function recordingFetch(exchanges, { maxRequests = 4 } = {}) {
  return async (url, init = {}) => {
    const entry = { url: String(url), body: init.body ? JSON.parse(init.body) : undefined };
    exchanges.push(entry);
    // A client stuck re-posting fails fast here instead of at the hang guard.
    if (exchanges.length > maxRequests) throw new Error(`request loop: the client posted ${exchanges.length} times`);
    const res = await fetch(url, init);
    entry.status = res.status;
    entry.headers = Object.fromEntries(res.headers);
    if (!res.body) {
      Object.assign(entry, { raw: '', complete: true, text: Promise.resolve('') });
      return res;
    }
    const [forClient, forLog] = res.body.tee();
    keepText(entry, forLog);
    return new Response(forClient, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** The exchanges as text for an assertion message (raw bytes included). */
export function dump(exchanges) {
  const parts = [];
  for (const [i, e] of exchanges.entries()) {
    if (e.body !== undefined) parts.push(`--- request #${i + 1} ${e.url ?? ''}\n${JSON.stringify(e.body)}`);
    parts.push(`--- response #${i + 1} (HTTP ${e.status})\n${e.raw ?? ''}${e.complete === false ? '\n(the response had not ended)' : ''}`);
  }
  return parts.join('\n');
}

/** The agent's request log as text for an assertion message. */
export const dumpRequests = (reqs) => reqs.map((r, i) => `agent request #${i + 1}: ${JSON.stringify(r.body ?? r.raw)}${r.error ? `\n  refused by the agent: ${JSON.stringify(r.error)}` : ''}`).join('\n');

/**
 * POST JSON and read the SSE answer the way @cloudbase/agent-ui-web 0.0.24
 * does (eventsource-parser's EventSourceParserStream over a TextDecoderStream,
 * stop at `[DONE]`). Returns { status, headers, raw, frames: [data strings], done }.
 */
export async function postSse(url, body, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const [forParser, forLog] = res.body.tee();
  const rawPromise = new Response(forLog).text();
  const frames = [];
  let done = false;
  if (res.ok) {
    const reader = forParser.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
    for (;;) {
      const { done: end, value } = await reader.read();
      if (end) break;
      if (value.data === '[DONE]') {
        done = true;
        break;
      }
      frames.push(value.data);
    }
    reader.releaseLock();
  }
  return { status: res.status, headers: res.headers, raw: await rawPromise, frames, done };
}

/**
 * Run `fn`; if it throws, add the evidence to the error: the raw bytes of the
 * client's exchanges with the gateway and what the agent received.
 */
export async function withEvidence({ exchanges = [], agent }, fn) {
  try {
    return await fn();
  } catch (e) {
    let seen;
    try {
      seen = dumpRequests(await agent.requests());
    } catch (err) {
      seen = `(cannot read the agent's requests: ${err.message})`;
    }
    const evidence = `\n=== client <-> gateway (raw) ===\n${dump(exchanges)}\n=== what the agent received ===\n${seen || '(nothing)'}`;
    if (e instanceof Error) e.message += evidence;
    throw e;
  }
}
