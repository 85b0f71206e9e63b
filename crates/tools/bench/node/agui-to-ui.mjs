// AG-UI events (as @ag-ui/client parses them) to `ai` UI message chunks: the
// mapping an application writes by hand when it puts a Vercel AI SDK UI in
// front of an AG-UI agent. It keeps the same state as babelgate does for the
// same stream (open step, tool call names and arguments, the agent state) so
// that both sides do comparable work.
import jsonPatch from 'fast-json-patch';

export class AgUiToUi {
  constructor(writer) {
    this.writer = writer;
    this.stepOpen = false;
    this.calls = new Map();
    this.state = {};
  }

  step() {
    if (!this.stepOpen) {
      this.writer.write({ type: 'start-step' });
      this.stepOpen = true;
    }
  }

  event(e) {
    const w = this.writer;
    switch (e.type) {
      case 'RUN_STARTED':
        w.write({ type: 'start' });
        break;
      case 'TEXT_MESSAGE_START':
        this.step();
        w.write({ type: 'text-start', id: e.messageId });
        break;
      case 'TEXT_MESSAGE_CONTENT':
        w.write({ type: 'text-delta', id: e.messageId, delta: e.delta });
        break;
      case 'TEXT_MESSAGE_END':
        w.write({ type: 'text-end', id: e.messageId });
        break;
      case 'TOOL_CALL_START':
        this.step();
        this.calls.set(e.toolCallId, { name: e.toolCallName, args: '' });
        w.write({ type: 'tool-input-start', toolCallId: e.toolCallId, toolName: e.toolCallName });
        break;
      case 'TOOL_CALL_ARGS': {
        const call = this.calls.get(e.toolCallId);
        if (call) call.args += e.delta;
        w.write({ type: 'tool-input-delta', toolCallId: e.toolCallId, inputTextDelta: e.delta });
        break;
      }
      case 'TOOL_CALL_END': {
        const call = this.calls.get(e.toolCallId);
        let input = {};
        try {
          input = JSON.parse(call?.args || '{}');
        } catch {
          // keep {} for unparsable arguments
        }
        w.write({ type: 'tool-input-available', toolCallId: e.toolCallId, toolName: call?.name ?? 'tool', input });
        break;
      }
      case 'TOOL_CALL_RESULT': {
        let output = e.content;
        try {
          output = JSON.parse(e.content);
        } catch {
          // plain text result
        }
        w.write({ type: 'tool-output-available', toolCallId: e.toolCallId, output });
        // Content after tool results goes into a new step, as streamText does.
        w.write({ type: 'finish-step' });
        this.stepOpen = false;
        break;
      }
      case 'STATE_SNAPSHOT':
        this.step();
        this.state = e.snapshot;
        w.write({ type: 'data-state', id: 'state', data: this.state });
        break;
      case 'STATE_DELTA':
        this.state = jsonPatch.applyPatch(this.state, e.delta, false, false).newDocument;
        w.write({ type: 'data-state', id: 'state', data: this.state });
        break;
      case 'RUN_FINISHED':
        if (this.stepOpen) w.write({ type: 'finish-step' });
        this.stepOpen = false;
        w.write({ type: 'finish', finishReason: 'stop' });
        break;
      case 'RUN_ERROR':
        w.write({ type: 'error', errorText: e.message });
        break;
      default:
        break;
    }
  }
}
