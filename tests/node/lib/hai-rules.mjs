// HAI stream rules, written from the protocol's own spec (ZTE "Human Agent
// Interaction Protocol", /work/shared/protocols/seeds/004_*.txt, and the
// wire notes in the protocols README) and from nothing in babelgate: no
// decoder of ours is used. HAI has no published client package to run, so
// this is the independent reader for HAI output.
//
// haiViolations(text, { cut }) returns the list of violations of one SSE body.

import { createParser } from 'eventsource-parser';

const isStr = (v) => typeof v === 'string';
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const any = () => true;
const opt = (check) => (v) => v === undefined || check(v);
// Epoch milliseconds (spec: "Timestamps are epoch ms"): an integer between
// 2001-09-09 (1e12) and 2286 (1e13); seconds or microseconds fall outside.
const isEpochMs = (v) => Number.isInteger(v) && v >= 1e12 && v < 1e13;
const ROLES = new Set(['user', 'assistant', 'system', 'tool', 'developer']);
const isRole = (v) => ROLES.has(v);

// Required (and optional) fields per event type. `timestamp` is checked for
// every event that carries one; it is required where the spec's builders
// always set it.
const SHAPES = {
  // Lifecycle: {messageId, role, timestamp} (the spec's build_run_started /
  // build_run_finished); RUN_ERROR as in AG-UI: {message, code?}.
  RUN_STARTED: { messageId: isStr, role: isRole, timestamp: isEpochMs },
  RUN_FINISHED: { messageId: isStr, role: isRole, timestamp: isEpochMs },
  RUN_ERROR: { message: isStr, code: opt(isStr) },
  STEP_STARTED: { stepName: isStr },
  STEP_FINISHED: { stepName: isStr },
  // Business data: START{messageId, role, timestamp}, CONTENT{messageId,
  // delta, blockId?, style?, timestamp}, END{messageId, timestamp}.
  BUSINESS_DATA_START: { messageId: isStr, role: isRole, timestamp: isEpochMs },
  BUSINESS_DATA_CONTENT: { messageId: isStr, delta: any, blockId: opt(isStr), style: opt(isObj), timestamp: isEpochMs },
  BUSINESS_DATA_END: { messageId: isStr, timestamp: isEpochMs },
  AGENT_COLLABORATIVE_MESSAGE_START: { from: isStr, to: isStr, messageId: isStr },
  AGENT_COLLABORATIVE_MESSAGE_CONTENT: { messageId: isStr, delta: (d) => isObj(d) && isObj(d.task) },
  AGENT_COLLABORATIVE_MESSAGE_END: { messageId: isStr },
  TOOL_CALL_START: { toolCallId: isStr, toolCallName: isStr, parentMessageId: opt(isStr) },
  TOOL_CALL_ARGS: { toolCallId: isStr, delta: isStr },
  TOOL_CALL_END: { toolCallId: isStr },
  TOOL_CALL_RESULT: { messageId: isStr, toolCallId: isStr, content: isStr, role: opt((r) => r === 'tool') },
  STATE_SNAPSHOT: { snapshot: any },
  // Ops always carry `from` (the spec's build_state_delta, default "").
  STATE_DELTA: {
    delta: (d) => Array.isArray(d) && d.every((op) => isObj(op) && isStr(op.op) && isStr(op.path) && isStr(op.from)),
  },
  MESSAGE_SNAPSHOT: {
    messages: (m) => Array.isArray(m) && m.every((x) => isObj(x) && isStr(x.id) && isRole(x.role) && opt(isStr)(x.content)),
  },
  RAW: { event: any },
  CUSTOM: { name: isStr, value: any },
};

/** Why a BUSINESS_DATA_CONTENT delta is malformed, or null. */
function deltaProblem(delta) {
  if (isStr(delta)) return null;
  if (!isObj(delta)) return 'delta is neither a string nor one JSON object';
  const { output, layout } = delta;
  if (!isObj(output) || !isStr(output.type)) return 'an object delta needs output: {type, ...}';
  if (layout !== undefined && !isObj(layout)) return 'layout is not an object';
  switch (output.type) {
    case 'text':
      return isStr(output.content) ? null : 'text output without a string content';
    case 'thinking': {
      const d = output.data;
      const ok = isObj(d) && isStr(d.content) && typeof d.elapsed === 'number'
        && typeof d.thinking === 'boolean' && typeof d.collapse === 'boolean';
      return ok ? null : 'thinking output needs data: {content, elapsed, thinking, collapse}';
    }
    case 'fold': {
      const d = output.data;
      const ok = isObj(d) && isStr(d.title) && typeof d.fold === 'boolean' && (d.position === 'start' || d.position === 'end');
      return ok ? null : 'fold output needs data: {title, fold, position: start|end}';
    }
    default:
      return 'data' in output ? null : `${output.type} output without data`;
  }
}

// The spec's client (section 4.1, parseJsonString) joins a message's object
// deltas as JSON text and splits them again on "}{": what it gets back must
// be exactly what was sent, one object per CONTENT event.
function clientReading(objects) {
  const joined = objects.map((o) => JSON.stringify(o)).join('');
  try {
    return JSON.parse(`[${joined.replace(/}{/g, '},{')}]`);
  } catch {
    return null;
  }
}

export function haiViolations(text, { cut = false } = {}) {
  const out = [];
  const frames = [];
  const parser = createParser({ onEvent: (e) => frames.push(e.data) });
  parser.feed(text);
  if (frames.length === 0) return ['no events'];

  let runState = 'before'; // before | running | finished | errored
  const business = new Map(); // messageId -> { open, kind: 'string' | 'object', objects }
  const collab = new Map(); // messageId -> open
  const calls = new Map(); // toolCallId -> 'open' | 'ended' | 'result'
  const steps = new Map(); // stepName -> open count

  frames.forEach((data, i) => {
    const at = `event #${i + 1}`;
    let ev;
    try {
      ev = JSON.parse(data);
    } catch {
      out.push(`${at}: data is not JSON: ${JSON.stringify(data.slice(0, 60))}`);
      return;
    }
    if (!isObj(ev) || !isStr(ev.type)) {
      out.push(`${at}: not an object with a string type`);
      return;
    }
    const { type } = ev;
    const shape = SHAPES[type];
    if (!shape) {
      out.push(`${at}: unknown event type ${type}`);
      return;
    }
    for (const [k, ok] of Object.entries(shape)) {
      if (!ok(ev[k])) out.push(`${at} (${type}): missing or invalid ${k}: ${JSON.stringify(ev[k])}`);
    }
    if (ev.timestamp !== undefined) {
      // Not required to increase: events passed through carry the
      // upstream's clock, the ones the gateway adds its own.
      if (!isEpochMs(ev.timestamp)) out.push(`${at} (${type}): timestamp ${ev.timestamp} is not epoch ms`);
    }

    // Run lifecycle: RUN_STARTED first, then nothing after RUN_FINISHED or
    // RUN_ERROR.
    if (runState === 'finished' || runState === 'errored') {
      out.push(`${at} (${type}): after ${runState === 'finished' ? 'RUN_FINISHED' : 'RUN_ERROR'}`);
      return;
    }
    if (type === 'RUN_STARTED') {
      if (runState !== 'before') out.push(`${at}: a second RUN_STARTED`);
      runState = 'running';
      return;
    }
    if (runState === 'before') {
      if (type !== 'RUN_ERROR') out.push(`${at} (${type}): before RUN_STARTED`);
    }
    const id = ev.messageId;
    switch (type) {
      case 'RUN_FINISHED': {
        const open = [
          ...[...business].filter(([, m]) => m.open).map(([k]) => `message ${k}`),
          ...[...collab].filter(([, o]) => o).map(([k]) => `collaborative message ${k}`),
          ...[...calls].filter(([, s]) => s === 'open').map(([k]) => `tool call ${k}`),
        ];
        if (open.length) out.push(`${at}: RUN_FINISHED with ${open.join(', ')} still open`);
        runState = 'finished';
        break;
      }
      case 'RUN_ERROR':
        runState = 'errored';
        break;
      case 'STEP_STARTED':
        steps.set(ev.stepName, (steps.get(ev.stepName) ?? 0) + 1);
        break;
      case 'STEP_FINISHED':
        if (!steps.get(ev.stepName)) out.push(`${at}: STEP_FINISHED ${ev.stepName} was never started`);
        else steps.set(ev.stepName, steps.get(ev.stepName) - 1);
        break;
      case 'BUSINESS_DATA_START':
        if (business.get(id)?.open) out.push(`${at}: BUSINESS_DATA_START ${id} while it is open`);
        else if (business.has(id)) out.push(`${at}: BUSINESS_DATA_START ${id} again after its END`);
        business.set(id, { open: true, kind: null, objects: [] });
        break;
      case 'BUSINESS_DATA_CONTENT': {
        const m = business.get(id);
        if (!m?.open) {
          out.push(`${at}: BUSINESS_DATA_CONTENT for ${id}, which is not open (START ... END)`);
          break;
        }
        const why = deltaProblem(ev.delta);
        if (why) {
          out.push(`${at}: ${why}`);
          break;
        }
        const kind = isStr(ev.delta) ? 'string' : 'object';
        if (m.kind && m.kind !== kind) out.push(`${at}: message ${id} mixes string and object deltas (the client cannot join them)`);
        m.kind = kind;
        if (kind === 'object') m.objects.push(ev.delta);
        break;
      }
      case 'BUSINESS_DATA_END': {
        const m = business.get(id);
        if (!m?.open) {
          out.push(`${at}: BUSINESS_DATA_END for ${id}, which is not open`);
          break;
        }
        m.open = false;
        if (m.objects.length) {
          const read = clientReading(m.objects);
          if (read === null || JSON.stringify(read) !== JSON.stringify(m.objects)) {
            out.push(`${at}: the client's join-and-split of message ${id}'s object deltas does not give them back`);
          }
        }
        break;
      }
      case 'AGENT_COLLABORATIVE_MESSAGE_START':
        if (collab.get(id)) out.push(`${at}: AGENT_COLLABORATIVE_MESSAGE_START ${id} while it is open`);
        collab.set(id, true);
        break;
      case 'AGENT_COLLABORATIVE_MESSAGE_CONTENT':
      case 'AGENT_COLLABORATIVE_MESSAGE_END':
        if (!collab.get(id)) out.push(`${at}: ${type} for ${id}, which is not open`);
        if (type.endsWith('_END')) collab.set(id, false);
        break;
      case 'TOOL_CALL_START':
        if (calls.has(ev.toolCallId)) out.push(`${at}: TOOL_CALL_START ${ev.toolCallId} again`);
        calls.set(ev.toolCallId, 'open');
        break;
      case 'TOOL_CALL_ARGS':
      case 'TOOL_CALL_END':
        if (calls.get(ev.toolCallId) !== 'open') out.push(`${at}: ${type} for ${ev.toolCallId}, which is not open`);
        else if (type === 'TOOL_CALL_END') calls.set(ev.toolCallId, 'ended');
        break;
      case 'TOOL_CALL_RESULT':
        if (calls.get(ev.toolCallId) !== 'ended') {
          out.push(`${at}: TOOL_CALL_RESULT for ${ev.toolCallId}, which was not started and ended in this stream`);
        } else calls.set(ev.toolCallId, 'result');
        break;
      default:
        break;
    }
  });
  if (!cut && runState !== 'finished' && runState !== 'errored') {
    out.push(`the stream must end with RUN_FINISHED or RUN_ERROR (it ends ${runState === 'before' ? 'before any run' : 'mid-run'})`);
  }
  return out;
}

/** The run's outcome for the scenario rules: 'finished' | 'error' | 'cut'. */
export function haiEnding(text) {
  const frames = [];
  createParser({ onEvent: (e) => frames.push(e.data) }).feed(text);
  for (const data of frames.reverse()) {
    try {
      const t = JSON.parse(data)?.type;
      if (t === 'RUN_ERROR') return 'error';
      if (t === 'RUN_FINISHED') return 'finished';
    } catch { /* counted by haiViolations */ }
  }
  return 'cut';
}
