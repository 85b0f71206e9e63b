// useChat in front of LangGraph (examples/usechat-langgraph): one LangGraph
// graph served by ag-ui-langgraph (a scripted offline model, a MemorySaver
// checkpointer that keeps each thread's history and merges what a client
// sends by message id). Each scenario runs twice on fresh threads: natively
// with @ag-ui/client's HttpAgent, and with the `ai` package's Chat (what
// useChat wraps, with sendAutomaticallyWhen) through `babelgate serve`.
// Compared: the conversation each client ends with (texts, tool calls,
// results, errors) and what the model was given on every call (the agent
// records it), ids included: an id is compared by where it first appeared,
// so a message sent back under a new id, or twice, shows as a difference.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { HttpAgent } from '@ag-ui/client';
import { Chat } from './lib/chat.mjs';
import { BABELGATE, PYTHON, REPO_ROOT, freePort, launch, stopProc, waitReady } from './lib/stack.mjs';

const RUN_GUARD = { timeout: 120_000 };
const AGENT = path.join(REPO_ROOT, 'examples/usechat-langgraph/agent.py');
const BACKGROUND = {
  name: 'change_background',
  description: 'Change the page background colour.',
  parameters: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
};
const BACKGROUND_OUTPUT = { ok: true };

let procs = [];
let agentBase;
let gateway;
before(async () => {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', 'langgraph');
  fs.rmSync(logDir, { recursive: true, force: true });
  fs.mkdirSync(logDir, { recursive: true });
  const [agentPort, gwPort] = await Promise.all([freePort(), freePort()]);
  agentBase = `http://127.0.0.1:${agentPort}`;
  gateway = `http://127.0.0.1:${gwPort}`;
  // The recipe's own config, on this run's ports.
  const recipe = fs.readFileSync(path.join(REPO_ROOT, 'examples/usechat-langgraph/gateway.toml'), 'utf8');
  const config = path.join(logDir, 'gateway.toml');
  fs.writeFileSync(config, recipe.replaceAll('127.0.0.1:8000', `127.0.0.1:${agentPort}`).replaceAll('127.0.0.1:8080', `127.0.0.1:${gwPort}`));
  const agent = launch('langgraph-agent', PYTHON, [AGENT, '--port', String(agentPort)], logDir);
  const gw = launch('babelgate', BABELGATE, ['serve', '--config', config], logDir);
  procs = [agent, gw];
  await Promise.all([waitReady(agent, `${agentBase}/healthz`), waitReady(gw, `${gateway}/healthz`)]);
}, { timeout: 120_000 });
after(async () => {
  await Promise.all(procs.map(stopProc));
});

// ---- the native side: HttpAgent -------------------------------------------

async function nativeTurns(turns) {
  const threadId = `native-${randomUUID()}`;
  const agent = new HttpAgent({ url: `${agentBase}/agent`, threadId });
  const errors = [];
  let n = 0;
  const run = async (extra = {}) => {
    let outcome;
    try {
      const r = await agent.runAgent({ runId: `run-${++n}`, tools: [BACKGROUND], ...extra }, {
        onRunErrorEvent: ({ event }) => {
          errors.push(event.message);
        },
        onRunFinishedEvent: ({ event }) => {
          outcome = event.outcome;
        },
      });
      return { outcome, result: r };
    } catch (e) {
      if (!errors.length) errors.push(String(e?.message ?? e));
      return { outcome };
    }
  };
  for (const text of turns) {
    agent.addMessage({ id: randomUUID(), role: 'user', content: text });
    let { outcome } = await run();
    for (let guard = 0; guard < 3; guard++) {
      // A front-end call left for the client: run it, send the result.
      const last = agent.messages.at(-1);
      const answered = new Set(agent.messages.filter((m) => m.role === 'tool').map((m) => m.toolCallId));
      const open = (last?.toolCalls ?? []).filter((c) => c.function.name === BACKGROUND.name && !answered.has(c.id));
      if (open.length) {
        for (const c of open) agent.addMessage({ id: randomUUID(), role: 'tool', toolCallId: c.id, content: JSON.stringify(BACKGROUND_OUTPUT) });
        ({ outcome } = await run());
        continue;
      }
      if (outcome?.type === 'interrupt' || outcome?.interrupts) {
        const resume = (outcome.interrupts ?? []).map((i) => ({ interruptId: i.id, status: 'resolved', payload: { approved: true } }));
        ({ outcome } = await run({ resume }));
        continue;
      }
      break;
    }
  }
  return { threadId, messages: agent.messages, errors };
}

/**
 * The conversation HttpAgent holds, as a flat list of what was said; a
 * call carries its result (where a tool message sits in the list is the
 * client's bookkeeping, not the conversation).
 */
function flatNative(messages) {
  const results = new Map(messages.filter((m) => m.role === 'tool').map((m) => [m.toolCallId, m.error ? { error: m.content } : { result: m.content }]));
  const out = [];
  for (const m of messages) {
    if (m.role === 'user') out.push(['user', typeof m.content === 'string' ? m.content : JSON.stringify(m.content)]);
    else if (m.role === 'assistant') {
      if (m.content) out.push(['text', m.content]);
      for (const c of m.toolCalls ?? []) out.push(['call', c.id, c.function.name, JSON.parse(c.function.arguments || '{}'), results.get(c.id) ?? null]);
    }
  }
  return out;
}

// ---- the gateway side: ai's Chat through babelgate -------------------------

async function gatewayTurns(turns) {
  const chatId = `vercel-${randomUUID()}`;
  const bodies = [];
  const responses = [];
  const recording = async (url, init) => {
    bodies.push(JSON.parse(init.body));
    if (bodies.length > 12) throw new Error('the chat kept posting (more than 12 requests)');
    const res = await fetch(url, init);
    // A copy of the stream the chat reads, for what reached the browser.
    responses.push(res.clone().text());
    return res;
  };
  let chat;
  chat = new Chat({
    id: chatId,
    transport: new DefaultChatTransport({ api: `${gateway}/chat`, fetch: recording }),
    sendAutomaticallyWhen: (o) => lastAssistantMessageIsCompleteWithToolCalls(o) || lastAssistantMessageIsCompleteWithApprovalResponses(o),
    onToolCall: async ({ toolCall }) => {
      if (toolCall.toolName === BACKGROUND.name) {
        chat.addToolOutput({ tool: BACKGROUND.name, toolCallId: toolCall.toolCallId, output: BACKGROUND_OUTPUT });
      }
    },
  });
  const errors = [];
  const settle = async () => {
    // sendAutomaticallyWhen posts on its own: wait until the chat is idle.
    for (let i = 0; i < 600 && chat.status !== 'ready' && chat.status !== 'error'; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  for (const text of turns) {
    await chat.sendMessage({ text });
    await settle();
    if (chat.status === 'error') {
      errors.push(chat.error?.message);
      chat.clearError();
    }
    const answered = new Set();
    for (let guard = 0; guard < 3; guard++) {
      const last = chat.messages.at(-1);
      const asking = last?.parts.filter((p) => p.state === 'approval-requested') ?? [];
      // An interrupt that is no tool approval (LangGraph's `interrupt()`):
      // a `data-interrupt` part, answered with `resume` in the body.
      const interrupts = (last?.parts ?? []).filter((p) => p.type === 'data-interrupt' && !answered.has(p.id));
      if (asking.length) {
        for (const p of asking) await chat.addToolApprovalResponse({ id: p.approval.id, approved: true });
      } else if (interrupts.length) {
        for (const p of interrupts) answered.add(p.id);
        const resume = interrupts.map((p) => ({ interruptId: p.id, status: 'resolved', payload: { approved: true } }));
        await chat.sendMessage(undefined, { body: { resume } });
      } else {
        break;
      }
      await settle();
      if (chat.status === 'error') {
        errors.push(chat.error?.message);
        chat.clearError();
      }
    }
  }
  return { chatId, messages: chat.messages, errors, bodies, responses: await Promise.all(responses) };
}

/** The same of a Vercel chat. */
function flatVercel(messages) {
  const out = [];
  for (const m of messages) {
    for (const p of m.parts) {
      if (p.type === 'text') {
        if (p.text) out.push([m.role === 'user' ? 'user' : 'text', p.text]);
      } else if (p.type.startsWith('tool-') || p.type === 'dynamic-tool') {
        const name = p.type === 'dynamic-tool' ? p.toolName : p.type.slice(5);
        const output = typeof p.output === 'string' ? p.output : JSON.stringify(p.output);
        const settled = p.state === 'output-available' ? { result: output } : p.state === 'output-error' ? { error: p.errorText } : null;
        out.push(['call', p.toolCallId, name, p.input, settled]);
      }
    }
  }
  return out;
}

// ---- what the model was given ----------------------------------------------

/** The model's inputs on one thread, ids replaced by their order of first appearance. */
function modelInputs(seen, threadId) {
  const ids = new Map();
  const id = (v) => {
    if (v == null) return v;
    if (!ids.has(v)) ids.set(v, `#${ids.size + 1}`);
    return ids.get(v);
  };
  return seen.filter((s) => s.thread_id === threadId).map((s) => s.messages.map((m) => ({
    ...m,
    id: id(m.id),
    ...(m.tool_calls ? { tool_calls: m.tool_calls.map((c) => ({ ...c, id: id(c.id) })) } : {}),
    ...(m.tool_call_id ? { tool_call_id: id(m.tool_call_id) } : {}),
  })));
}

async function seen() {
  const res = await fetch(`${agentBase}/requests`);
  return res.json();
}

async function compare(turns) {
  const [native, viaGateway] = await Promise.all([nativeTurns(turns), gatewayTurns(turns)]);
  const all = await seen();
  return {
    native,
    viaGateway,
    conversation: { native: flatNative(native.messages), gateway: flatVercel(viaGateway.messages) },
    model: { native: modelInputs(all, native.threadId), gateway: modelInputs(all, viaGateway.chatId) },
  };
}

function assertSame(r) {
  const evidence = () => `\nnative messages: ${JSON.stringify(r.native.messages)}\nvercel messages: ${JSON.stringify(r.viaGateway.messages)}\nvercel requests: ${JSON.stringify(r.viaGateway.bodies).slice(0, 6000)}`;
  assert.deepEqual(r.conversation.gateway, r.conversation.native, `the conversation differs${evidence()}`);
  assert.deepEqual(r.model.gateway, r.model.native, `the model was given a different history${evidence()}`);
  assert.deepEqual(r.viaGateway.errors.length, r.native.errors.length, `errors: ${JSON.stringify(r.viaGateway.errors)} vs ${JSON.stringify(r.native.errors)}`);
}

describe('LangGraph (ag-ui-langgraph) natively vs useChat through babelgate', () => {
  test('text, then a second turn: the history comes back once, with its ids', RUN_GUARD, async () => {
    assertSame(await compare(['text please', 'and again']));
  });
  test('a server tool, then a second turn', RUN_GUARD, async () => {
    const r = await compare(['weather please', 'thanks']);
    assertSame(r);
    assert.ok(r.conversation.native.some((x) => x[0] === 'call' && x[4]?.result), 'the native run has the tool result');
  });
  test('two tools in one model step, then a second turn', RUN_GUARD, async () => {
    assertSame(await compare(['two please', 'thanks']));
  });
  test('a tool error the graph handles (said only in MESSAGES_SNAPSHOT), then a second turn', RUN_GUARD, async () => {
    const r = await compare(['flaky please', 'thanks']);
    assertSame(r);
    assert.ok(r.conversation.gateway.some((x) => x[0] === 'call' && x[4]?.error), 'the Vercel part is output-error');
  });
  test('a tool error that fails the run, then a second turn', RUN_GUARD, async () => {
    const r = await compare(['explode please', 'and now?']);
    assertSame(r);
    assert.equal(r.native.errors.length, 1);
  });
  test('a model error, then a second turn', RUN_GUARD, async () => {
    const r = await compare(['modelerr please', 'and now?']);
    assertSame(r);
    assert.equal(r.native.errors.length, 1);
  });
  test('a front-end tool: sendAutomaticallyWhen sends its result, the graph answers; then a second turn', RUN_GUARD, async () => {
    const r = await compare(['background please', 'thanks']);
    assertSame(r);
    assert.ok(r.conversation.gateway.some((x) => x[0] === 'call' && x[2] === BACKGROUND.name && x[4]?.result), 'the front-end result is in');
    assert.equal(r.viaGateway.bodies.length, 3, 'turn 1, its continuation with the result, turn 2');
  });
  test('an interrupt in a server tool, approved and resumed, then a second turn', RUN_GUARD, async () => {
    const r = await compare(['approve please', 'thanks']);
    assertSame(r);
    const call = r.conversation.gateway.find((x) => x[0] === 'call' && x[2] === 'delete_file');
    assert.deepEqual(call?.[4], { result: 'deleted /tmp/x' }, 'the resumed call has its result, once');
    assert.equal(r.conversation.gateway.filter((x) => x[0] === 'call').length, 1, 'the call shows once');
  });
  test('state updates, then a second turn', RUN_GUARD, async () => {
    assertSame(await compare(['counter please', 'counter again']));
  });
  test('three turns with and without tools', RUN_GUARD, async () => {
    const r = await compare(['weather please', 'text please', 'two please']);
    assertSame(r);
    // Traffic: the recipe's route sets drop_raw, so none of
    // ag-ui-langgraph's RAW events reach the browser; the state part is
    // one per answer (replaced in place, its latest kept).
    const streamed = r.viaGateway.responses.join('');
    assert.ok(streamed.includes('"type":"data-state"'), 'the state reaches the client');
    assert.ok(!streamed.includes('"type":"data-raw"'), 'no RAW event reaches the client');
    for (const m of r.viaGateway.messages) {
      assert.ok(m.parts.filter((p) => p.type === 'data-state').length <= 1, `one state part per message: ${JSON.stringify(m.parts.map((p) => p.type))}`);
    }
    console.log(`# traffic: ${r.viaGateway.responses.length} streams, ${Buffer.byteLength(streamed)} bytes to the browser; last request ${Buffer.byteLength(JSON.stringify(r.viaGateway.bodies.at(-1)))} bytes`);
  });
});
