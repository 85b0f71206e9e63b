// useChat (@ai-sdk/react) talking to babelgate's /chat route, in front of
// the Mastra agent (agent.mjs); both sides speak the AI SDK UI message stream.
import { useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';

const params = new URLSearchParams(location.search);
const GATEWAY = params.get('gateway') ?? 'http://127.0.0.1:8080';
// The chat id lives in the URL so that a reload asks to resume this chat.
if (!params.has('chat')) {
  params.set('chat', crypto.randomUUID());
  history.replaceState(null, '', `?${params}`);
}
const CHAT_ID = params.get('chat');

// Finished turns and the question being answered survive a reload (an app
// keeps them in its own store); an answer still streaming does not: the
// resumed stream brings all of it again.
const SAVED = `chat:${CHAT_ID}`;
function save(messages, status) {
  const busy = status === 'submitted' || status === 'streaming';
  const kept = busy && messages.at(-1)?.role === 'assistant' ? messages.slice(0, -1) : messages;
  sessionStorage.setItem(SAVED, JSON.stringify(kept));
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
  const { messages, sendMessage, status, error } = useChat({
    id: CHAT_ID,
    messages: JSON.parse(sessionStorage.getItem(SAVED) ?? '[]'),
    // On load, GET /chat/{id}/stream: an answer still running continues here.
    resume: true,
    transport: new DefaultChatTransport({ api: `${GATEWAY}/chat` }),
  });
  useEffect(() => save(messages, status), [messages, status]);
  return (
    <main data-status={status}>
      <h1>useChat → babelgate → Mastra</h1>
      {messages.map((m) => (
        <div key={m.id} className="msg" data-role={m.role}>
          {m.parts.map((p, i) => <Part key={i} part={p} />)}
        </div>
      ))}
      {error && <p role="alert">{error.message}</p>}
      <form onSubmit={(e) => { e.preventDefault(); sendMessage({ text: input }); setInput(''); }}>
        <input value={input} onChange={(e) => setInput(e.target.value)} placeholder="try: weather, story" />
        <button disabled={status !== 'ready'}>Send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById('root')).render(<App />);
