"""AG-UI events (ag_ui.core pydantic models) to Vercel AI SDK UI message chunks.

The mapping an application writes by hand to put a Vercel AI SDK UI in front of
an AG-UI agent in Python: events validated by the SDK's own models, chunks
serialized with json.dumps. It keeps the same state babelgate keeps (open
step, tool call names and arguments, the agent state), as crates/tools/bench/node does.
"""

from __future__ import annotations

import copy
import json
from typing import Iterator, List

from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

EVENT = TypeAdapter(Event)


def parse_event(data: bytes):
    """One SSE `data:` payload to the SDK's event model."""
    return EVENT.validate_json(data)


def sse_payloads(chunks) -> Iterator[bytes]:
    """Cuts an SSE byte stream into its `data:` payloads (one line each here)."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                yield line[5:].lstrip(b" ")
    if buf.startswith(b"data:"):
        yield buf[5:].lstrip(b" ")


def apply_patch(doc, ops):
    """The JSON Patch subset agents send in STATE_DELTA (add, replace, remove)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        # The SDK validates patch operations into models of their own.
        if not isinstance(op, dict):
            op = op.model_dump()
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1] if parts else None
        kind = op["op"]
        if last is None:
            doc = op.get("value")
        elif isinstance(parent, list):
            if kind == "remove":
                parent.pop(int(last))
            elif last == "-":
                parent.append(op["value"])
            elif kind == "add":
                parent.insert(int(last), op["value"])
            else:
                parent[int(last)] = op["value"]
        elif kind == "remove":
            parent.pop(last, None)
        else:
            parent[last] = op["value"]
    return doc


class AgUiToUi:
    def __init__(self) -> None:
        self.step_open = False
        self.calls = {}
        self.state = {}

    def _step(self, out: List[dict]) -> None:
        if not self.step_open:
            out.append({"type": "start-step"})
            self.step_open = True

    def event(self, e) -> List[dict]:
        out: List[dict] = []
        t = e.type
        if t == EventType.RUN_STARTED:
            out.append({"type": "start"})
        elif t == EventType.TEXT_MESSAGE_START:
            self._step(out)
            out.append({"type": "text-start", "id": e.message_id})
        elif t == EventType.TEXT_MESSAGE_CONTENT:
            out.append({"type": "text-delta", "id": e.message_id, "delta": e.delta})
        elif t == EventType.TEXT_MESSAGE_END:
            out.append({"type": "text-end", "id": e.message_id})
        elif t == EventType.TOOL_CALL_START:
            self._step(out)
            self.calls[e.tool_call_id] = [e.tool_call_name, ""]
            out.append({"type": "tool-input-start", "toolCallId": e.tool_call_id, "toolName": e.tool_call_name})
        elif t == EventType.TOOL_CALL_ARGS:
            call = self.calls.get(e.tool_call_id)
            if call:
                call[1] += e.delta
            out.append({"type": "tool-input-delta", "toolCallId": e.tool_call_id, "inputTextDelta": e.delta})
        elif t == EventType.TOOL_CALL_END:
            name, args = self.calls.get(e.tool_call_id, ["tool", ""])
            try:
                inp = json.loads(args or "{}")
            except ValueError:
                inp = {}
            out.append({"type": "tool-input-available", "toolCallId": e.tool_call_id, "toolName": name, "input": inp})
        elif t == EventType.TOOL_CALL_RESULT:
            try:
                output = json.loads(e.content)
            except ValueError:
                output = e.content
            out.append({"type": "tool-output-available", "toolCallId": e.tool_call_id, "output": output})
            out.append({"type": "finish-step"})
            self.step_open = False
        elif t == EventType.STATE_SNAPSHOT:
            self._step(out)
            self.state = e.snapshot
            out.append({"type": "data-state", "id": "state", "data": self.state})
        elif t == EventType.STATE_DELTA:
            self.state = apply_patch(self.state, e.delta)
            out.append({"type": "data-state", "id": "state", "data": self.state})
        elif t == EventType.RUN_FINISHED:
            if self.step_open:
                out.append({"type": "finish-step"})
            self.step_open = False
            out.append({"type": "finish", "finishReason": "stop"})
        elif t == EventType.RUN_ERROR:
            out.append({"type": "error", "errorText": e.message})
        return out


def sse(chunk: dict) -> str:
    """One chunk as the `ai` package frames it."""
    return "data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")) + "\n\n"
