// useChat (@ai-sdk/react) talking to babelgate's /chat route, which speaks
// the Vercel UI message stream to this page and AG-UI to the LangGraph graph
// (agent.py, served by ag-ui-langgraph).
import { useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';

const GATEWAY = new URLSearchParams(location.search).get('gateway') ?? 'http://127.0.0.1:8080';

function Call({ name, part }) {
  const shown = part.state === 'output-available' ? JSON.stringify(part.output)
    : part.state === 'output-error' ? `error: ${part.errorText}` : part.state;
  return <div className="tool">{name}({JSON.stringify(part.input)}) → {shown}</div>;
}

// A LangGraph `interrupt()` arrives as a `data-interrupt` part; the page
// answers it with `resume` in the next request's body. ag-ui-langgraph puts
// the value given to `interrupt()` (here agent.py's {question, path}) in the
// interrupt's metadata, which the part carries under `extra`.
function Interrupt({ part, open, answer }) {
  const value = part.data?.extra?.metadata?.langgraph?.raw;
  const question = part.data?.message ?? value?.question ?? JSON.stringify(value);
  return (
    <div className="interrupt">
      {question}{' '}
      {open ? (
        <>
          <button type="button" onClick={() => answer(part.id, true)}>Approve</button>{' '}
          <button type="button" onClick={() => answer(part.id, false)}>Reject</button>
        </>
      ) : <em>answered</em>}
    </div>
  );
}

function Part({ part, open, answer }) {
  if (part.type === 'text') return <span>{part.text}</span>;
  // The gateway knows no schema of the graph's tools: a call may come as a dynamic tool.
  if (part.type === 'dynamic-tool') return <Call name={part.toolName} part={part} />;
  if (part.type.startsWith('tool-')) return <Call name={part.type.slice(5)} part={part} />;
  if (part.type === 'data-interrupt') return <Interrupt part={part} open={open} answer={answer} />;
  return null;
}

function App() {
  const [input, setInput] = useState('');
  const [answered, setAnswered] = useState(() => new Set());
  const { messages, sendMessage, status, error, addToolOutput } = useChat({
    transport: new DefaultChatTransport({ api: `${GATEWAY}/chat` }),
    // The page's tool result goes back to the graph on its own.
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall({ toolCall }) {
      if (toolCall.toolName === 'change_background') {
        document.body.style.background = toolCall.input.color;
        addToolOutput({ tool: 'change_background', toolCallId: toolCall.toolCallId, output: `background set to ${toolCall.input.color}` });
      }
    },
  });
  const answer = (interruptId, approved) => {
    setAnswered((s) => new Set(s).add(interruptId));
    sendMessage(undefined, { body: { resume: [{ interruptId, status: 'resolved', payload: { approved } }] } });
  };
  return (
    <main data-status={status}>
      <h1>useChat → babelgate → LangGraph</h1>
      {messages.map((m) => (
        <div key={m.id} className="msg" data-role={m.role}>
          {m.parts.map((p, i) => <Part key={i} part={p} open={status === 'ready' && !answered.has(p.id)} answer={answer} />)}
        </div>
      ))}
      {error && <p role="alert">{error.message}</p>}
      <form onSubmit={(e) => { e.preventDefault(); sendMessage({ text: input }); setInput(''); }}>
        <input value={input} onChange={(e) => setInput(e.target.value)} placeholder="try: weather, background, approve, flaky" />
        <button disabled={status !== 'ready'}>Send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById('root')).render(<App />);
