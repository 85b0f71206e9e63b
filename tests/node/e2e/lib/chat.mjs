// `Chat` for plain JavaScript: the `ai` package's own AbstractChat (the class
// useChat wraps) with a minimal in-memory ChatState, the way @ai-sdk/react's
// Chat is built, minus React. Used headless in Node and bundled into the
// browser page, so both run the package's real request loop (onToolCall,
// addToolOutput, sendAutomaticallyWhen).

import { AbstractChat } from 'ai';

class MemoryChatState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }

  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }

  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }

  // Snapshots like the framework states do: the streaming state keeps
  // mutating the message object it hands over.
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  }

  snapshot(value) {
    return structuredClone(value);
  }
}

export class Chat extends AbstractChat {
  constructor({ messages, ...init } = {}) {
    super({ ...init, state: new MemoryChatState(messages) });
  }
}
