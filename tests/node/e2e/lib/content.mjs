// What a stream says, apart from how it is framed: the yardstick of the
// same-dialect end-to-end checks (issue 38). A same-dialect route may write
// a frame JSON-equal rather than byte-equal to the upstream's, close what is
// still open before an end and drop an empty text message, so what is
// compared is content, event by event:
//
// - `seq`: the content-bearing events in order, as (kind, id, payload)
//   tuples. Opening and closing events (TEXT_MESSAGE_START/END,
//   REASONING_*_START/END, TOOL_CALL_END, STEP_*, RUN_STARTED; Vercel's
//   *-start/*-end, start, start-step, finish-step) are left out: those are
//   exactly what the gateway may add or close. Empty deltas carry nothing
//   and are left out too.
// - ids become ranks of first appearance per kind (`msg#0`, `call#1`...): a
//   gateway may name what the upstream left unnamed (THINKING_* events have
//   no id), and two runs of the same agent need not reuse ids.
// - per id: the text concatenated, a tool call's name and its arguments
//   parsed as JSON, a tool result parsed when it is JSON.
// - `outcome`: how the run ended (RUN_FINISHED and its outcome, RUN_ERROR
//   and its code; Vercel's finish and its reason, error, abort).

const parsed = (s) => {
  if (typeof s !== 'string') return s;
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
};

function ranks() {
  const maps = new Map();
  const rank = (kind, id) => {
    if (!maps.has(kind)) maps.set(kind, new Map());
    const m = maps.get(kind);
    if (!m.has(id)) m.set(id, `${kind}#${m.size}`);
    return m.get(id);
  };
  rank.of = (kind, id) => maps.get(kind)?.get(id);
  return rank;
}

/** An AG-UI event stream (objects) -> its content. */
export function aguiContent(events) {
  const rank = ranks();
  const c = { seq: [], text: {}, reasoning: {}, calls: {}, results: {}, outcome: null, rank };
  let thinking = 0; // THINKING_* have no id: each THINKING_TEXT_MESSAGE_START is the next one
  let lastText;
  let lastCall;
  const add = (bag, id, s) => (bag[id] = (bag[id] ?? '') + s);
  const call = (rawId, name) => {
    const id = rank('call', rawId);
    c.calls[id] ??= { name, args: '' };
    if (name !== undefined) c.calls[id].name = name;
    return id;
  };
  for (const e of events) {
    switch (e.type) {
      case 'TEXT_MESSAGE_CONTENT':
      case 'TEXT_MESSAGE_CHUNK': {
        lastText = e.messageId ?? lastText; // a chunk without an id continues the last one
        if (!e.delta) break;
        const id = rank('msg', lastText);
        c.seq.push(['text', id, e.delta]);
        add(c.text, id, e.delta);
        break;
      }
      case 'THINKING_TEXT_MESSAGE_START':
        thinking++;
        break;
      case 'THINKING_TEXT_MESSAGE_CONTENT':
      case 'REASONING_MESSAGE_CONTENT':
      case 'REASONING_MESSAGE_CHUNK': {
        if (!e.delta) break;
        const id = rank('reasoning', e.messageId ?? `thinking-${thinking}`);
        c.seq.push(['reasoning', id, e.delta]);
        add(c.reasoning, id, e.delta);
        break;
      }
      case 'TOOL_CALL_START': {
        const id = call(e.toolCallId, e.toolCallName);
        c.seq.push(['tool-call', id, e.toolCallName]);
        break;
      }
      case 'TOOL_CALL_ARGS':
      case 'TOOL_CALL_CHUNK': {
        lastCall = e.toolCallId ?? lastCall;
        const id = call(lastCall, e.toolCallName);
        if (e.type === 'TOOL_CALL_CHUNK' && e.toolCallName) c.seq.push(['tool-call', id, e.toolCallName]);
        if (!e.delta) break;
        c.seq.push(['tool-args', id, e.delta]);
        c.calls[id].args += e.delta;
        break;
      }
      case 'TOOL_CALL_RESULT': {
        const id = call(e.toolCallId);
        c.seq.push(['tool-result', id, parsed(e.content)]);
        c.results[id] = parsed(e.content);
        break;
      }
      case 'CUSTOM':
        c.seq.push(['custom', e.name, e.value]);
        break;
      case 'RAW':
        c.seq.push(['raw', e.source ?? null, e.event]);
        break;
      case 'STATE_SNAPSHOT':
        c.seq.push(['state', null, e.snapshot]);
        break;
      case 'STATE_DELTA':
        c.seq.push(['state-delta', null, e.delta]);
        break;
      case 'MESSAGES_SNAPSHOT':
        c.seq.push(['messages', null, e.messages]);
        break;
      case 'ACTIVITY_SNAPSHOT':
      case 'ACTIVITY_DELTA':
        c.seq.push([e.type.toLowerCase(), rank('activity', e.messageId), e.content ?? e.patch]);
        break;
      case 'RUN_FINISHED':
        c.outcome = { end: 'finished', outcome: e.outcome ?? null, result: e.result ?? null };
        c.seq.push(['end', null, c.outcome]);
        break;
      case 'RUN_ERROR':
        c.outcome = { end: 'error', code: e.code ?? null, message: e.message };
        c.seq.push(['end', null, c.outcome]);
        break;
      default:
        break;
    }
  }
  for (const v of Object.values(c.calls)) v.args = parsed(v.args);
  return c;
}

/**
 * What @ag-ui/client's HttpAgent assembled (`agent.messages` after a run),
 * keyed by the ranks of `content` (the aguiContent of the events the same
 * client saw): assistant text, reasoning, tool calls and tool results.
 * Messages the run did not make (the user's) are left out.
 */
export function aguiAssembled(messages, content) {
  const { rank } = content;
  const out = { text: {}, reasoning: {}, calls: {}, results: {} };
  for (const m of messages) {
    const text = typeof m.content === 'string' ? m.content : (m.content ?? []).map((p) => p.text ?? '').join('');
    if (m.role === 'assistant' && rank.of('msg', m.id) && text) out.text[rank.of('msg', m.id)] = text;
    if (m.role === 'reasoning' && rank.of('reasoning', m.id) && text) out.reasoning[rank.of('reasoning', m.id)] = text;
    for (const tc of m.toolCalls ?? []) {
      const id = rank.of('call', tc.id) ?? `unknown:${tc.id}`;
      out.calls[id] = { name: tc.function.name, args: parsed(tc.function.arguments) };
    }
    if (m.role === 'tool') out.results[rank.of('call', m.toolCallId) ?? `unknown:${m.toolCallId}`] = parsed(m.content);
  }
  return out;
}

/** The parts of `c` that name what was said, for deepEqual. */
export const contentOf = (c) => ({
  seq: c.seq,
  text: c.text,
  reasoning: c.reasoning,
  calls: c.calls,
  results: c.results,
  ...(c.data ? { data: c.data } : {}),
  outcome: c.outcome,
});

/** A Vercel UI message stream (chunk objects, `[DONE]` left out) -> its content. */
export function vercelContent(chunks) {
  const rank = ranks();
  const c = { seq: [], text: {}, reasoning: {}, calls: {}, results: {}, data: [], outcome: null, rank };
  const add = (bag, id, s) => (bag[id] = (bag[id] ?? '') + s);
  const call = (rawId) => {
    const id = rank('call', rawId);
    c.calls[id] ??= { name: undefined, args: '' };
    return id;
  };
  for (const e of chunks) {
    const t = e.type;
    if (t === 'text-delta' || t === 'reasoning-delta') {
      if (!e.delta) continue;
      const kind = t === 'text-delta' ? 'text' : 'reasoning';
      const id = rank(kind === 'text' ? 'msg' : 'reasoning', e.id);
      c.seq.push([kind, id, e.delta]);
      add(c[kind], id, e.delta);
    } else if (t === 'tool-input-start') {
      const id = call(e.toolCallId);
      c.calls[id].name = e.toolName;
      c.seq.push(['tool-call', id, e.toolName]);
    } else if (t === 'tool-input-delta') {
      const id = call(e.toolCallId);
      if (!e.inputTextDelta) continue;
      c.calls[id].args += e.inputTextDelta;
      c.seq.push(['tool-args', id, e.inputTextDelta]);
    } else if (t === 'tool-input-available' || t === 'tool-input-error') {
      const id = call(e.toolCallId);
      c.calls[id] = { name: e.toolName, args: e.input };
      c.seq.push([t, id, e.input]);
    } else if (t === 'tool-output-available') {
      const id = call(e.toolCallId);
      c.results[id] = e.output;
      c.seq.push(['tool-result', id, e.output]);
    } else if (t === 'tool-output-error') {
      const id = call(e.toolCallId);
      c.results[id] = { errorText: e.errorText };
      c.seq.push(['tool-error', id, e.errorText]);
    } else if (t === 'tool-approval-request') {
      c.seq.push(['approval', rank('call', e.toolCallId), e.approvalId]);
    } else if (t.startsWith('data-') || t === 'source-url' || t === 'source-document' || t === 'file' || t === 'message-metadata') {
      const { type, ...rest } = e;
      c.data.push([type, rest]);
      c.seq.push([type, e.id ?? null, rest]);
    } else if (t === 'finish' || t === 'error' || t === 'abort') {
      c.outcome = t === 'finish' ? { end: 'finish', reason: e.finishReason ?? null } : t === 'error' ? { end: 'error', errorText: e.errorText } : { end: 'abort' };
      c.seq.push(['end', null, c.outcome]);
    }
  }
  for (const v of Object.values(c.calls)) if (typeof v.args === 'string') v.args = parsed(v.args);
  return c;
}

/**
 * What readUIMessageStream assembled (the `ai` client's UIMessage): text and
 * reasoning parts in order, tool parts by call (keyed by the ranks of
 * `content`, the vercelContent of the chunks the same client saw), data parts.
 */
export function vercelAssembled(message, content) {
  const out = { text: [], reasoning: [], calls: {}, results: {}, data: [] };
  for (const p of message?.parts ?? []) {
    if (p.type === 'text') out.text.push(p.text);
    else if (p.type === 'reasoning') out.reasoning.push(p.text);
    else if (p.type === 'dynamic-tool' || p.type.startsWith('tool-')) {
      const id = content.rank.of('call', p.toolCallId) ?? `unknown:${p.toolCallId}`;
      out.calls[id] = { name: p.toolName ?? p.type.slice(5), args: p.input, state: p.state };
      if (p.state === 'output-available') out.results[id] = p.output;
      if (p.state === 'output-error') out.results[id] = { errorText: p.errorText };
    } else if (p.type.startsWith('data-')) out.data.push([p.type, { id: p.id, data: p.data }]);
  }
  return out;
}
