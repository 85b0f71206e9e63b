// useChat (@ai-sdk/react) talking to babelgate's /chat route, which speaks
// the Vercel UI message stream to this page and AG-UI to the agent.
import { useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';

const params = new URLSearchParams(location.search);
const GATEWAY = params.get('gateway') ?? 'http://127.0.0.1:8080';
// The chat id lives in the URL so that a reload asks to resume this chat.
if (!params.has('chat')) {
  params.set('chat', crypto.randomUUID());
  history.replaceState(null, '', `?${params}`);
}
const CHAT_ID = params.get('chat');

// Finished turns and the question being answered are kept across a reload
// (an app keeps them in its own store); an answer still streaming is not:
// the resumed stream brings all of it again.
const SAVED = `chat:${CHAT_ID}`;
function save(messages, status) {
  const busy = status === 'submitted' || status === 'streaming';
  const done = busy && messages.at(-1)?.role === 'assistant' ? messages.slice(0, -1) : messages;
  sessionStorage.setItem(SAVED, JSON.stringify(done));
}

function Part({ part }) {
  if (part.type === 'text') return <span>{part.text}</span>;
  if (part.type.startsWith('tool-')) {
    return <div className="tool">{part.type.slice(5)}({JSON.stringify(part.input)}) → {part.state === 'output-available' ? JSON.stringify(part.output) : part.state}</div>;
  }
  return null;
}

function App() {
  const [input, setInput] = useState('');
  const { messages, sendMessage, status, error, addToolOutput } = useChat({
    id: CHAT_ID,
    messages: JSON.parse(sessionStorage.getItem(SAVED) ?? '[]'),
    // On load, GET /chat/{id}/stream: an answer still running continues here.
    resume: true,
    transport: new DefaultChatTransport({ api: `${GATEWAY}/chat` }),
    // The page's tool result goes back to the agent on its own.
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall({ toolCall }) {
      if (toolCall.toolName === 'change_background') {
        document.body.style.background = toolCall.input.color;
        addToolOutput({ tool: 'change_background', toolCallId: toolCall.toolCallId, output: `background set to ${toolCall.input.color}` });
      }
    },
  });
  useEffect(() => save(messages, status), [messages, status]);
  return (
    <main data-status={status}>
      <h1>useChat → babelgate → pydantic-ai</h1>
      {messages.map((m) => (
        <div key={m.id} className="msg" data-role={m.role}>
          {m.parts.map((p, i) => <Part key={i} part={p} />)}
        </div>
      ))}
      {error && <p role="alert">{error.message}</p>}
      <form onSubmit={(e) => { e.preventDefault(); sendMessage({ text: input }); setInput(''); }}>
        <input value={input} onChange={(e) => setInput(e.target.value)} placeholder="try: weather, background, story" />
        <button disabled={status !== 'ready'}>Send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById('root')).render(<App />);
