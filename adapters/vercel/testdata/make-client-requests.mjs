#!/usr/bin/env node
// Records the request bodies the `ai` package's chat client sends, for the
// request translator tests (src/request.rs):
//   node adapters/vercel/testdata/make-client-requests.mjs adapters/vercel/testdata/client_requests.json
// (1) the resubmit after a front-end tool ran (sendAutomaticallyWhen),
// (2) the resubmit after an approval was answered, (3) a regenerate.
// Responses are the Vercel fixtures; the chat state deep-copies messages as
// React's does.
import fs from 'node:fs';
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls, lastAssistantMessageIsCompleteWithApprovalResponses } from '../../../tests/node/node_modules/ai/dist/index.js';
const fx = new URL('../../../tests/fixtures/vercel', import.meta.url).pathname;
class State {
  status = 'ready'; error = undefined; messages = [];
  pushMessage = (m) => { this.messages = [...this.messages, structuredClone(m)]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = [...this.messages.slice(0, i), structuredClone(m), ...this.messages.slice(i + 1)]; };
  snapshot = (x) => structuredClone(x);
}
class Chat extends AbstractChat {}
async function run(first, opts, act) {
  const bodies = [];
  const transport = new DefaultChatTransport({
    api: 'http://x.invalid/api/chat', body: { sessionId: 's-1' },
    fetch: async (url, init) => {
      bodies.push(JSON.parse(init.body));
      const f = bodies.length === 1 ? `${fx}/${first}.sse` : `${fx}/chat.sse`;
      return new Response(fs.readFileSync(f), { status: 200, headers: { 'content-type': 'text/event-stream' } });
    },
  });
  let n = 0;
  const chat = new Chat({ id: 'chat-1', transport, state: new State(), generateId: () => `gen-${++n}`, ...opts(() => chat) });
  await chat.sendMessage({ text: 'hello' });
  await new Promise((r) => setTimeout(r, 100));
  if (act) { await act(chat); await new Promise((r) => setTimeout(r, 200)); }
  return bodies;
}
const out = {};
out.frontend = (await run('frontend_tool', (c) => ({
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  onToolCall: async ({ toolCall }) => { c().addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: { ok: true } }); },
}))).at(-1);
out.approval = (await run('hitl_confirm', () => ({ sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses }),
  async (chat) => { await chat.addToolApprovalResponse({ id: 'appr-1', approved: false, reason: 'not that file' }); })).at(-1);
out.regenerate = (await run('server_tool', () => ({}), async (chat) => { await chat.regenerate(); })).at(-1);
fs.writeFileSync(process.argv[2], JSON.stringify(out, null, 1) + '\n');
console.log(Object.entries(out).map(([k, b]) => `${k}: trigger=${b.trigger} messageId=${b.messageId} messages=${b.messages.length}`).join('\n'));
