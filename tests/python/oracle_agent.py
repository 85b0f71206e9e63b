#!/usr/bin/env python3
"""Oracle agent: ONE pydantic-ai Agent served natively by two real adapters.

    python oracle_agent.py --port PORT [--history-log FILE]

Needs the venv from tests/python/oracle-requirements.txt (pydantic-ai-slim with
the ag-ui extra; see docs/oracle-findings.md). No network: the model is a
scripted pydantic-ai FunctionModel.

    POST /agui      pydantic_ai.ui.ag_ui.AGUIAdapter.dispatch_request
    POST /vercel    pydantic_ai.ui.vercel_ai.VercelAIAdapter.dispatch_request (sdk_version=7)
    GET  /history   every model call so far: the message history the model
                    received, as pydantic-ai's own JSON (ModelMessagesTypeAdapter)
    DELETE /history forget them
    GET  /healthz   readiness

The scenario is picked by a marker word in the last user message (the first
marker found wins, so "error_after" must be tested before "error"):

    plain          plain text in three deltas
    unicode        CJK, emoji with a split skin-tone modifier, U+2028 and U+2029
    tool           server tool get_weather(city) with a result, then text
    retry          server tool flaky(n) raises ModelRetry for n != 2; the model
                   calls it again with n=2, then text
    error_before   the model raises before any output
    error_during   the model calls a server tool that raises RuntimeError
    error_after    tool call + result, then the second model call streams some
                   text and raises
    client_tool    the model calls change_background(color), a front-end tool:
                   on /agui it is the client's (RunAgentInput.tools), on
                   /vercel the agent declares it as an ExternalToolset; either
                   way the run ends with the call deferred to the client. A
                   continuation request whose history holds the tool's result
                   gets a text answer quoting it.
    think          a thinking part, then text
    history        one text answer; the point is the history the model got
                   (tests/node/e2e/oracle-history.test.mjs sends a rich one)
    abort          one text delta, then waits; a client that goes away
                   cancels the run, which /history records as
                   {"scenario": "abort", "cancelled": true} (whether the
                   cancellation finds it sending the text or waiting)
    (anything else) like plain
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from typing import Any, AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pydantic_ai import Agent, DeferredToolRequests, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    RetryPromptPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingPart,
    DeltaToolCall,
    FunctionModel,
)
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset
from pydantic_ai.ui.ag_ui import AGUIAdapter
from pydantic_ai.ui.vercel_ai import VercelAIAdapter

MARKERS = [
    "history",
    "abort",
    "error_before",
    "error_during",
    "error_after",
    "client_tool",
    "unicode",
    "retry",
    "think",
    "tool",
    "plain",
]

PLAIN = ["Hello ", "from the ", "oracle."]
UNICODE = ["你好，世界", "! 🎉👍", "🏽 line\u2028separator\u2029paragraph ", "é—ü"]
WEATHER_ARGS = ['{"city":', '"北京"}']
WEATHER_TEXT = ["北京今天晴，", "气温 22°C。"]
RETRY_TEXT = ["flaky(2) worked."]
ERROR_AFTER_TEXT = ["Partial answer "]
THINK = ["Let me think. ", "The answer is 42."]
THINK_TEXT = ["Thought about it: 42."]
HISTORY_TEXT = ["History received."]
ABORT_TEXT = ["Partial answer, then silence"]
# How long an abort run waits for its client to leave: far longer than any
# test takes to abort, short enough not to hold a stray process.
ABORT_WAIT_S = 60
CLIENT_TOOL = "change_background"
CLIENT_TOOL_ARGS = ['{"col', 'or":"#ff', '0000"}']
CLIENT_TOOL_SCHEMA = {
    "type": "object",
    "properties": {"color": {"type": "string", "description": "A CSS colour"}},
    "required": ["color"],
}

# --- history log -----------------------------------------------------------

_history: list[dict[str, Any]] = []
_history_lock = threading.Lock()
_history_file: str | None = None


def log_event(entry: dict[str, Any]) -> None:
    with _history_lock:
        entry["seq"] = len(_history)
        _history.append(entry)
        if _history_file:
            with open(_history_file, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")


def log_history(scenario: str, messages: list[ModelMessage]) -> None:
    log_event({
        "scenario": scenario,
        "messages": json.loads(ModelMessagesTypeAdapter.dump_json(messages)),
    })


# --- the scripted model ----------------------------------------------------


def last_user_text(messages: list[ModelMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, ModelRequest):
            for p in reversed(m.parts):
                if isinstance(p, UserPromptPart):
                    c = p.content
                    return c if isinstance(c, str) else " ".join(x for x in c if isinstance(x, str))
    return ""


def scenario_of(messages: list[ModelMessage]) -> str:
    text = last_user_text(messages)
    for m in MARKERS:
        if m in text:
            return m
    return "plain"


def last_request_parts(messages: list[ModelMessage]) -> list[Any]:
    if messages and isinstance(messages[-1], ModelRequest):
        return list(messages[-1].parts)
    return []


async def tool_call(name: str, args: list[str], call_id: str) -> AsyncIterator[dict[int, DeltaToolCall]]:
    yield {0: DeltaToolCall(name=name, tool_call_id=call_id)}
    for a in args:
        yield {0: DeltaToolCall(json_args=a)}


async def script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    scenario = scenario_of(messages)
    log_history(scenario, messages)
    parts = last_request_parts(messages)
    returns = [p for p in parts if isinstance(p, ToolReturnPart)]
    retries = [p for p in parts if isinstance(p, RetryPromptPart)]

    if scenario == "unicode":
        for d in UNICODE:
            yield d
    elif scenario == "tool":
        if returns:
            for d in WEATHER_TEXT:
                yield d
        else:
            async for d in tool_call("get_weather", WEATHER_ARGS, "call_weather_1"):
                yield d
    elif scenario == "retry":
        if returns:
            for d in RETRY_TEXT:
                yield d
        elif retries:
            async for d in tool_call("flaky", ['{"n":2}'], "call_flaky_2"):
                yield d
        else:
            async for d in tool_call("flaky", ['{"n":1}'], "call_flaky_1"):
                yield d
    elif scenario == "error_before":
        raise RuntimeError("oracle: model failed before any output")
    elif scenario == "error_during":
        async for d in tool_call("explode", ['{}'], "call_explode_1"):
            yield d
    elif scenario == "error_after":
        if returns:
            for d in ERROR_AFTER_TEXT:
                yield d
            raise RuntimeError("oracle: model failed after the tool result")
        async for d in tool_call("get_weather", WEATHER_ARGS, "call_weather_1"):
            yield d
    elif scenario == "client_tool":
        if returns:
            yield f"Background changed: {returns[0].model_response_str()}"
        elif any(t.name == CLIENT_TOOL for t in info.function_tools):
            async for d in tool_call(CLIENT_TOOL, CLIENT_TOOL_ARGS, "call_bg_1"):
                yield d
        else:
            yield "No client tool was offered."
    elif scenario == "history":
        for d in HISTORY_TEXT:
            yield d
    elif scenario == "abort":
        # The client's leaving cancels the run's task wherever it is, which is
        # not always the sleep: pydantic-ai hands events to the response through
        # a zero-buffer stream, so while the text is still on its way out this
        # generator waits at `yield`, and a cancellation then closes it there
        # (GeneratorExit in a cancelling task) instead of raising CancelledError
        # in the sleep. Both are the run being cancelled; a close by anything
        # else (no cancellation) is not recorded as one.
        try:
            for d in ABORT_TEXT:
                yield d
            await asyncio.sleep(ABORT_WAIT_S)
        except asyncio.CancelledError:
            log_event({"scenario": "abort", "cancelled": True})
            raise
        except GeneratorExit:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                log_event({"scenario": "abort", "cancelled": True})
            raise
        yield " (nobody left)"
    elif scenario == "think":
        for d in THINK:
            yield {0: DeltaThinkingPart(content=d)}
        for d in THINK_TEXT:
            yield d
    else:
        for d in PLAIN:
            yield d


agent: Agent[None, str | DeferredToolRequests] = Agent(
    FunctionModel(stream_function=script, model_name="oracle-script"),
    output_type=[str, DeferredToolRequests],
    name="oracle",
)


@agent.tool_plain
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "temperature": 22, "condition": "sunny"}


@agent.tool_plain(retries=2)
def flaky(n: int) -> str:
    """Works only for n == 2."""
    if n != 2:
        raise ModelRetry(f"n={n} is wrong, use n=2")
    return f"flaky({n}) ok"


@agent.tool_plain
def explode() -> str:
    """Always fails."""
    raise RuntimeError("oracle: tool failed during the call")


# Vercel requests carry no tool definitions, so /vercel declares the front-end
# tool itself; /agui gets it from RunAgentInput.tools like any AG-UI client.
VERCEL_CLIENT_TOOLS = ExternalToolset(
    [ToolDefinition(name=CLIENT_TOOL, description="Change the page background colour.", parameters_json_schema=CLIENT_TOOL_SCHEMA)]
)


async def agui(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=agent)


async def vercel(request: Request) -> Response:
    return await VercelAIAdapter.dispatch_request(
        request, agent=agent, toolsets=[VERCEL_CLIENT_TOOLS], sdk_version=7
    )


async def get_history(request: Request) -> Response:
    since = int(request.query_params.get("since", "0"))
    with _history_lock:
        return JSONResponse(_history[since:])


async def delete_history(request: Request) -> Response:
    with _history_lock:
        _history.clear()
    return JSONResponse({"ok": True})


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


app = Starlette(
    routes=[
        Route("/agui", agui, methods=["POST"]),
        Route("/vercel", vercel, methods=["POST"]),
        Route("/history", get_history, methods=["GET"]),
        Route("/history", delete_history, methods=["DELETE"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
)


def main() -> None:
    global _history_file
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--history-log", default=None, help="append each model call's history as JSON lines")
    a = ap.parse_args()
    _history_file = a.history_log
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
