// useChat's client path, shared by the Vercel validator and the end-to-end
// tests: DefaultChatTransport.sendMessages (SSE parsing and the strict chunk
// schema), then readUIMessageStream (the processUIMessageStream state machine
// the Chat class runs), stopping at the first error as the Chat class does.

import { DefaultChatTransport, readUIMessageStream } from 'ai';

export const UI_STREAM_HEADERS = { 'content-type': 'text/event-stream', 'x-vercel-ai-ui-message-stream': 'v1' };

/**
 * Sends one user message to `api` (with `fetch`, when given: a stand-in
 * server) and reads the answer: the chunks that passed the schema, the
 * message assembled from them, and the first error (an `error` chunk's, or
 * the client's own rejection).
 */
export async function runUseChatPath({ api = 'http://gateway.invalid/api/chat', fetch, chatId = 'chat-1', text = 'hi' } = {}) {
  const transport = new DefaultChatTransport({ api, fetch });
  const stream = await transport.sendMessages({
    chatId,
    trigger: 'submit-message',
    messageId: undefined,
    messages: [{ id: 'user-1', role: 'user', parts: [{ type: 'text', text }] }],
    abortSignal: undefined,
  });

  // Tap the validated chunks so an error can be attributed: an `error` chunk
  // arrives here first, a rejected chunk never does.
  const chunks = [];
  const tapped = stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        chunks.push(chunk);
        controller.enqueue(chunk);
      },
    }),
  );

  const errors = [];
  let message;
  try {
    for await (const m of readUIMessageStream({ stream: tapped, terminateOnError: true, onError: (e) => errors.push(e) })) {
      message = m;
    }
  } catch (e) {
    if (!errors.includes(e)) errors.push(e);
  }
  return { message, chunks, error: errors[0] };
}

/** A fetch that answers every request with `bytes` as a UI message stream. */
export const serving = (bytes) => async () => new Response(bytes, { status: 200, headers: UI_STREAM_HEADERS });
