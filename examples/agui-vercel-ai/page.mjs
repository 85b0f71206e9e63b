// An AG-UI page (@ag-ui/client's HttpAgent, what CopilotKit runs on) talking
// to babelgate's /agent route, which speaks AG-UI here and the Vercel UI
// message stream to the `ai` route handler (server.mjs).
import { HttpAgent } from '@ag-ui/client';

const GATEWAY = new URLSearchParams(location.search).get('gateway') ?? 'http://127.0.0.1:8080';
const agent = new HttpAgent({ url: `${GATEWAY}/agent`, threadId: crypto.randomUUID() });

// Declared by the page and sent with every run (RunAgentInput.tools).
const TOOLS = [{
  name: 'change_background',
  description: 'Change the page background colour.',
  parameters: { type: 'object', properties: { color: { type: 'string', description: 'A CSS colour' } }, required: ['color'] },
}];
function runTool(call) {
  const { color } = JSON.parse(call.function.arguments);
  document.body.style.background = color;
  return `background set to ${color}`;
}

const main = document.querySelector('main');
const list = document.querySelector('#messages');
function render() {
  const results = new Map(agent.messages.filter((m) => m.role === 'tool').map((m) => [m.toolCallId, m.content]));
  list.replaceChildren(...agent.messages.filter((m) => m.role === 'user' || m.role === 'assistant').map((m) => {
    const div = document.createElement('div');
    div.className = 'msg';
    div.dataset.role = m.role;
    div.append(m.content ?? '');
    for (const c of m.toolCalls ?? []) {
      const t = document.createElement('div');
      t.className = 'tool';
      t.textContent = `${c.function.name}(${c.function.arguments}) → ${results.get(c.id) ?? 'running'}`;
      div.append(t);
    }
    return div;
  }));
}
agent.subscribe({ onMessagesChanged: render });

async function send(text) {
  main.dataset.status = 'streaming';
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: text });
  try {
    // A run that ends with calls of the page's tools: run them, send the
    // results in a new run so the agent can answer.
    let open;
    do {
      await agent.runAgent({ tools: TOOLS });
      const done = new Set(agent.messages.filter((m) => m.role === 'tool').map((m) => m.toolCallId));
      open = (agent.messages.at(-1)?.toolCalls ?? []).filter((c) => !done.has(c.id) && TOOLS.some((t) => t.name === c.function.name));
      for (const call of open) agent.addMessage({ id: crypto.randomUUID(), role: 'tool', toolCallId: call.id, content: runTool(call) });
    } while (open.length);
  } catch (e) {
    main.append(Object.assign(document.createElement('p'), { role: 'alert', textContent: String(e?.message ?? e) }));
  }
  render();
  main.dataset.status = 'ready';
}

document.querySelector('form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = e.target.querySelector('input');
  send(input.value);
  input.value = '';
});
