// The browser side of browser.test.mjs, bundled by esbuild: a page using the
// `ai` package's chat exactly as a useChat app with a front-end tool does.
// onToolCall runs change_background on the page and reports the result with
// addToolOutput; sendAutomaticallyWhen posts it back. The test drives it
// through window.e2e.

import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';
import { Chat } from '../lib/chat.mjs';

let requests = 0;
const chat = new Chat({
  id: `browser-chat-${crypto.randomUUID()}`,
  transport: new DefaultChatTransport({
    api: '/api/chat',
    fetch: (url, init) => {
      // A chat stuck re-posting fails fast instead of at the test's hang guard.
      if (++requests > 4) return Promise.reject(new Error(`request loop: the chat posted ${requests} times`));
      return fetch(url, init);
    },
  }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  onToolCall({ toolCall }) {
    if (toolCall.toolName !== 'change_background') return;
    document.body.style.background = toolCall.input.color;
    // Not awaited, as the ai docs say for onToolCall (it would deadlock).
    chat.addToolOutput({
      tool: 'change_background',
      toolCallId: toolCall.toolCallId,
      output: `background set to ${toolCall.input.color}`,
    });
  },
});

window.e2e = {
  // Resolves once the whole request loop (first answer, tool, follow-up) is done.
  async send(text) {
    await chat.sendMessage({ text });
    return {
      status: chat.status,
      error: chat.error?.message ?? null,
      messages: chat.messages,
      requests,
      // The decision the chat takes after each answer: false means no more posts.
      wouldSendAgain: lastAssistantMessageIsCompleteWithToolCalls({ messages: chat.messages }),
    };
  },
};
document.title = 'ready';
