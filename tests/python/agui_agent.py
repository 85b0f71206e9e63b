#!/usr/bin/env python3
"""A real AG-UI agent for the end-to-end tests (tests/node/e2e/).

    python agui_agent.py --port PORT

Built with the official SDK (ag-ui-protocol): requests are parsed with
ag_ui.core.RunAgentInput (a request the SDK refuses gets 422 with pydantic's
errors, so a bad translation by the gateway fails loudly), and every answer
is ag_ui.core events written by ag_ui.encoder.EventEncoder.

    POST /agent       RunAgentInput -> SSE events, by scenario (see `script`)
    GET  /requests    every request received: its body and the events sent back
    DELETE /requests  forget them
    GET  /healthz     readiness

The scenario is picked by a keyword in the last user message: "weather"
(server tool with TOOL_CALL_RESULT, then text), "background" (front-end tool
call, no result), "confirm" (tool call, then RUN_FINISHED with an interrupt
outcome), "think" (reasoning, then text), "state" (STATE_SNAPSHOT and
STATE_DELTA), "error" (RUN_ERROR); anything else is echoed with CJK and emoji.
A run whose last message is a tool message quotes the tool's content (and if
the user's message said "stray", ends by asking approval for a call it never
streamed, a slip the gateway must not pass on to a client that would throw);
a run with `resume` answers the interrupt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from typing import Any, Dict, List

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from ag_ui.core import (
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

# The texts the tests compare against (tests/node/e2e/lib/expect.mjs keeps
# the same strings). The echo's delta boundaries are deliberate: one falls
# between 👍 and its skin-tone modifier.
ECHO_DELTAS = ["你好，世界", "! 🎉👍", "🏽 You said: "]
WEATHER_ARGS = ['{"city":', '"北京"}']
WEATHER_RESULT = '{"city":"北京","temperature":22,"condition":"sunny"}'
WEATHER_TEXT = ["北京今天晴，", "气温 22°C。"]
BACKGROUND_ARGS = ['{"col', 'or":"#ff', '0000"}']
CONFIRM_ARGS = ['{"action":"delete_file",', '"path":"/tmp/report.txt"}']
REASONING = ["Let me think. ", "The answer is 42."]
THINK_TEXT = ["Thought about it: 42."]
STATE_SNAPSHOT = {"counter": 0, "items": ["a"]}
STATE_DELTA = [
    {"op": "add", "path": "/items/-", "value": "b"},
    {"op": "replace", "path": "/counter", "value": 1},
]
STATE_TEXT = ["State updated."]
ERROR_TEXT = ["Working on it"]
ERROR_MESSAGE = "the agent failed on purpose"
STRAY_CALL_ID = "call-never-streamed"

app = FastAPI()
# What the gateway sent us and what we answered, in arrival order.
RECORDED: List[Dict[str, Any]] = []


def now_ms() -> int:
    return int(time.time() * 1000)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def text_of(content: Any) -> str:
    """A message's text, whether its content is a string or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(getattr(p, "text", "") or "" for p in content)


def script(run: RunAgentInput) -> List[Any]:
    """The events one run answers with, in order."""
    events: List[Any] = [RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id)]
    add = events.append

    def text(deltas: List[str]) -> None:
        mid = new_id("msg")
        add(TextMessageStartEvent(message_id=mid, role="assistant"))
        for d in deltas:
            add(TextMessageContentEvent(message_id=mid, delta=d))
        add(TextMessageEndEvent(message_id=mid))

    def tool_call(name: str, deltas: List[str]) -> str:
        call = new_id("call")
        add(ToolCallStartEvent(tool_call_id=call, tool_call_name=name, parent_message_id=new_id("msg")))
        for d in deltas:
            add(ToolCallArgsEvent(tool_call_id=call, delta=d))
        add(ToolCallEndEvent(tool_call_id=call))
        return call

    finished = RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id)

    def asking(message: str, call: str) -> RunFinishedEvent:
        """The run's end, asking a human about `call` first."""
        return RunFinishedEvent(
            thread_id=run.thread_id,
            run_id=run.run_id,
            outcome=RunFinishedInterruptOutcome(
                interrupts=[Interrupt(id=new_id("int"), reason="confirmation", message=message, tool_call_id=call)]
            ),
        )

    last = run.messages[-1] if run.messages else None
    users = [m for m in run.messages if m.role == "user"]
    said = text_of(users[-1].content) if users else ""
    lower = said.lower()

    if run.resume:
        answer = run.resume[0]
        refused = answer.status != "resolved" or answer.payload is False or (
            isinstance(answer.payload, dict) and answer.payload.get("approved") is False
        )
        text(["Cancelled: nothing was done."] if refused else ["Confirmed: the action was carried out."])
    elif last is not None and last.role == "tool":
        text(["The tool said: ", text_of(last.content), ". Anything else?"])
        if "stray" in lower:
            finished = asking("Go on?", STRAY_CALL_ID)
    elif "weather" in lower:
        call = tool_call("get_weather", WEATHER_ARGS)
        add(ToolCallResultEvent(message_id=new_id("result"), tool_call_id=call, content=WEATHER_RESULT, role="tool"))
        text(WEATHER_TEXT)
    elif "background" in lower:
        tool_call("change_background", BACKGROUND_ARGS)
    elif "confirm" in lower:
        call = tool_call("confirm_action", CONFIRM_ARGS)
        finished = asking("Delete /tmp/report.txt?", call)
    elif "think" in lower:
        span, rid = new_id("rsn-span"), new_id("rsn")
        add(ReasoningStartEvent(message_id=span))
        add(ReasoningMessageStartEvent(message_id=rid, role="reasoning"))
        for d in REASONING:
            add(ReasoningMessageContentEvent(message_id=rid, delta=d))
        add(ReasoningMessageEndEvent(message_id=rid))
        add(ReasoningEndEvent(message_id=span))
        text(THINK_TEXT)
    elif "state" in lower:
        add(StateSnapshotEvent(snapshot=STATE_SNAPSHOT))
        add(StateDeltaEvent(delta=STATE_DELTA))
        text(STATE_TEXT)
    elif "error" in lower:
        text(ERROR_TEXT)
        add(RunErrorEvent(message=ERROR_MESSAGE, code="agent_error"))
        return events  # nothing may follow RUN_ERROR
    else:
        text(ECHO_DELTAS + [said])
    add(finished)
    return events


@app.get("/healthz")
async def healthz() -> Dict[str, str]:
    return {"status": "ok"}


@app.get("/requests")
async def requests_list() -> JSONResponse:
    return JSONResponse(RECORDED)


@app.delete("/requests")
async def requests_clear() -> Dict[str, int]:
    n = len(RECORDED)
    RECORDED.clear()
    return {"deleted": n}


@app.post("/agent")
async def agent(request: Request):
    raw = await request.body()
    entry: Dict[str, Any] = {
        "path": request.url.path,
        "accept": request.headers.get("accept"),
        "contentType": request.headers.get("content-type"),
    }
    RECORDED.append(entry)
    try:
        entry["body"] = json.loads(raw)
    except ValueError as e:
        entry["raw"] = raw.decode("utf-8", "replace")
        entry["error"] = f"invalid JSON: {e}"
        print(f"422 {entry['error']}", file=sys.stderr, flush=True)
        return JSONResponse(status_code=422, content={"detail": entry["error"]})
    try:
        run = RunAgentInput.model_validate(entry["body"])
    except ValidationError as e:
        # Loud on purpose: the test reports these errors with the body.
        entry["error"] = json.loads(e.json(include_url=False))
        print(f"422 RunAgentInput refused: {e}", file=sys.stderr, flush=True)
        return JSONResponse(status_code=422, content={"detail": entry["error"]})

    encoder = EventEncoder(accept=request.headers.get("accept"))
    events = script(run)
    entry["events"] = []

    async def stream():
        for ev in events:
            ev.timestamp = now_ms()
            frame = encoder.encode(ev)
            entry["events"].append(json.loads(frame[len("data: "):]))
            yield frame
            # Let each event leave as its own chunk, like a model streaming.
            await asyncio.sleep(0.002)

    return StreamingResponse(stream(), media_type=encoder.get_content_type())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
