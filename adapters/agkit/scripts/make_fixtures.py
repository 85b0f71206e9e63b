#!/usr/bin/env python3
"""Writes tests/fixtures/agkit/*.sse with the real AG-Kit legacy server.

The bytes come from PyPI `cloudbase-agent-server` 0.1.1 (its send-message
adapter, `create_send_message_adapter`) driven by a scripted agent that yields
AG-UI events, the way a LangGraph agent feeds that adapter. Two scenarios need
more than that handler writes, see NOTES below.

Setup (outside the project):
    python3 -m venv /tmp/agkit-venv
    /tmp/agkit-venv/bin/pip install cloudbase-agent-server==0.1.1 httpx
    /tmp/agkit-venv/bin/python adapters/agkit/scripts/make_fixtures.py

NOTES
- The 0.1.1 handler drops every AG-UI event it has no AG-Kit type for
  (STATE_*, REASONING_*, RUN_ERROR, RUN_STARTED/FINISHED...): `state` and
  `reasoning` therefore hold only the text the server really writes.
- `run_error`: the handler swallows RUN_ERROR and ends with [DONE]. The error
  frame is the server package's own declared `ErrorEvent`, serialized the way
  its adapter serializes events, placed where a server that reports errors
  writes it (before [DONE]).
- `cut_mid_message`: the server's output cut before the end of the text (the
  connection dropped): no [DONE].
- `unknown_events`: hand-written (no AG-Kit server emits unknown types): the
  shorthand text form, a text frame with a field the model does not know, an
  unknown type, the gateway's `custom`/`raw` extension frames and a frame that
  is not JSON (the real client skips such frames).
"""

import asyncio
import json
import os
import sys

import httpx
from ag_ui.core.events import (
    CustomEvent,
    EventType,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageChunkEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from cloudbase_agent.server import SendMessageInput, create_send_message_adapter
from cloudbase_agent.server.send_message.models import ErrorEvent
from fastapi import FastAPI

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "..", "..", "tests", "fixtures", "agkit"))


def run_events(thread_id, run_id):
    return RunStartedEvent(type=EventType.RUN_STARTED, thread_id=thread_id, run_id=run_id)


def text(delta, mid="msg_1"):
    return TextMessageChunkEvent(type=EventType.TEXT_MESSAGE_CHUNK, message_id=mid, delta=delta)


def tool_start(cid, name):
    return ToolCallStartEvent(type=EventType.TOOL_CALL_START, tool_call_id=cid, tool_call_name=name)


def tool_args(cid, delta):
    return ToolCallArgsEvent(type=EventType.TOOL_CALL_ARGS, tool_call_id=cid, delta=delta)


def tool_end(cid):
    return ToolCallEndEvent(type=EventType.TOOL_CALL_END, tool_call_id=cid)


def tool_result(cid, content):
    return ToolCallResultEvent(
        type=EventType.TOOL_CALL_RESULT, message_id="msg_tool_" + cid, tool_call_id=cid, content=content
    )


SCENARIOS = {
    "chat": [
        text("你好，世界！"),
        text(" 🎉👍🏽 She said \"double quotes\""),
        text(" and a backslash \\ here.\nSecond line\n\nThird"),
        text(" line\u2028after a line separator."),
    ],
    "frontend_tool": [
        text("好的，我来把背景换成红色。"),
        tool_start("call_bg_1", "change_background"),
        tool_args("call_bg_1", "{\"col"),
        tool_args("call_bg_1", "or\":\"#ff"),
        tool_args("call_bg_1", "0000\"}"),
        tool_end("call_bg_1"),
    ],
    "server_tool": [
        tool_start("call_weather_1", "get_weather"),
        tool_args("call_weather_1", "{\"city\":"),
        tool_args("call_weather_1", "\"北京\"}"),
        tool_end("call_weather_1"),
        tool_result("call_weather_1", "{\"city\":\"北京\",\"temperature\":22,\"condition\":\"晴\"}"),
        text("北京今天晴，"),
        text("气温 22°C。"),
    ],
    "hitl_confirm": [
        text("删除之前需要你确认。"),
        tool_start("call_confirm_1", "confirm_action"),
        tool_args("call_confirm_1", "{\"action\":\"delete_file\","),
        tool_args("call_confirm_1", "\"path\":\"/tmp/report.txt\"}"),
        tool_end("call_confirm_1"),
        CustomEvent(
            type=EventType.CUSTOM,
            name="on_interrupt",
            value=json.dumps(
                {
                    "toolCallId": "call_confirm_1",
                    "question": "确定要删除 /tmp/report.txt 吗？",
                    "options": ["approve", "reject"],
                },
                ensure_ascii=False,
            ),
            raw_event="interrupt_confirm_1",
        ),
    ],
    "parallel_tools": [
        tool_start("call_a", "get_weather"),
        tool_start("call_b", "get_time"),
        tool_args("call_a", "{\"city\":"),
        tool_args("call_b", "{\"timezone\":"),
        tool_args("call_a", "\"Paris\"}"),
        tool_args("call_b", "\"Europe/Paris\"}"),
        tool_end("call_a"),
        tool_end("call_b"),
        tool_result("call_a", "{\"temperature\":18}"),
        tool_result("call_b", "14:05"),
        text("Paris: 18°C, 14:05."),
    ],
    "state": [
        StateSnapshotEvent(type=EventType.STATE_SNAPSHOT, snapshot={"count": 0, "items": []}),
        StateDeltaEvent(
            type=EventType.STATE_DELTA,
            delta=[{"op": "replace", "path": "/count", "value": 1}, {"op": "add", "path": "/items/-", "value": "a"}],
        ),
        text("State updated."),
    ],
    "reasoning": [
        ReasoningStartEvent(type=EventType.REASONING_START, message_id="r_1"),
        ReasoningMessageStartEvent(type=EventType.REASONING_MESSAGE_START, message_id="r_1", role="reasoning"),
        ReasoningMessageContentEvent(type=EventType.REASONING_MESSAGE_CONTENT, message_id="r_1", delta="Let me think"),
        ReasoningMessageContentEvent(type=EventType.REASONING_MESSAGE_CONTENT, message_id="r_1", delta=" about it."),
        ReasoningMessageEndEvent(type=EventType.REASONING_MESSAGE_END, message_id="r_1"),
        ReasoningEndEvent(type=EventType.REASONING_END, message_id="r_1"),
        text("The answer is 42."),
    ],
    "run_error": [
        text("Let me look that up"),
        text(" for you"),
        RunErrorEvent(type=EventType.RUN_ERROR, message="model provider timed out", code="upstream_timeout"),
    ],
    "cut_mid_message": [
        text("This message will be cut "),
        text("in the mid"),
    ],
}


class ScriptedAgent:
    def __init__(self, events):
        self.events = events

    async def run(self, run_input):
        yield run_events(run_input.thread_id, run_input.run_id)
        for ev in self.events:
            yield ev
        yield RunFinishedEvent(type=EventType.RUN_FINISHED, thread_id=run_input.thread_id, run_id=run_input.run_id)


async def capture(events):
    app = FastAPI()

    @app.post("/send-message")
    async def send_message(request: SendMessageInput):
        return await create_send_message_adapter(lambda: {"agent": ScriptedAgent(events)}, request)

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://agkit") as client:
        body = {"conversationId": "conv-fixtures", "messages": [{"role": "user", "content": "hi"}]}
        res = await client.post("/send-message", json=body)
        res.raise_for_status()
        assert res.headers["content-type"].startswith("text/event-stream"), res.headers
        return res.content


def error_frame(message):
    # Serialized exactly as the adapter serializes every event it writes.
    return f"data: {ErrorEvent(error=message).model_dump_json(by_alias=True, ensure_ascii=False)}\n\n".encode()


DONE = b"data: [DONE]\n\n"

UNKNOWN_EVENTS = (
    'data: {"type":"text","content":"Before the unknown frames. "}\n\n'
    'data: {"type":"text","content":"A field we do not model:","index":0}\n\n'
    'data: {"type":"usage","promptTokens":12,"completionTokens":7}\n\n'
    'data: {"type":"custom","name":"progress","value":{"step":2,"of":3}}\n\n'
    'data: {"type":"raw","event":{"provider":"acme","kind":"ping"},"source":"acme"}\n\n'
    "data: keep-alive\n\n"
    'data: {"type":"text","content":"After them."}\n\n'
    "data: [DONE]\n\n"
).encode()


async def main():
    os.makedirs(OUT, exist_ok=True)
    for name, events in SCENARIOS.items():
        data = await capture(events)
        assert data.endswith(DONE), (name, data[-40:])
        if name == "run_error":
            data = data[: -len(DONE)] + error_frame("model provider timed out") + DONE
        elif name == "cut_mid_message":
            data = data[: -len(DONE)]
        with open(os.path.join(OUT, name + ".sse"), "wb") as f:
            f.write(data)
        print(f"{name}.sse: {len(data)} bytes")
    with open(os.path.join(OUT, "unknown_events.sse"), "wb") as f:
        f.write(UNKNOWN_EVENTS)
    print(f"unknown_events.sse: {len(UNKNOWN_EVENTS)} bytes")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
