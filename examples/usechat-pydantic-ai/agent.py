#!/usr/bin/env python3
"""A pydantic-ai agent served in AG-UI (pydantic_ai.ui.ag_ui.AGUIAdapter).

    python agent.py --port 8000

The model is a scripted pydantic-ai FunctionModel, so the recipe runs
offline; swap it for a real one (`Agent("openai:gpt-4o", ...)`) and nothing
else changes. It answers by a word in the last user message:

    weather     calls the server tool get_weather(city), then quotes it
    background  calls change_background(color), a tool the page runs: the
                agent gets it from the request's `tools` (babelgate adds it
                from the route's [[routes.client_tools]]); after the page
                sends the result, the model quotes it
    story       a long answer streamed slowly (word by word), to reload the
                page in the middle of it
    (anything)  repeats what was said

    POST /agent    AG-UI (RunAgentInput in, AG-UI events out)
    GET  /healthz  readiness
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter

STORY = [f"word{i} " for i in range(1, 121)] + ["The end."]
# Between two words of the story: the whole answer takes a few seconds,
# long enough to reload the page in the middle of it.
STORY_PAUSE_S = 0.04


def last_user_text(messages: list[ModelMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart):
                    return p.content if isinstance(p.content, str) else " ".join(str(c) for c in p.content)
    return ""


async def call(name: str, args: str, call_id: str) -> AsyncIterator[dict[int, DeltaToolCall]]:
    yield {0: DeltaToolCall(name=name, json_args=args, tool_call_id=call_id)}


async def script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    said = last_user_text(messages).lower()
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if returns:
        # Called back after a tool ran (on the server or on the page).
        yield f"Done: {returns[0].model_response_str()}"
    elif "weather" in said:
        async for d in call("get_weather", '{"city": "Paris"}', "call_weather"):
            yield d
    elif "background" in said:
        if any(t.name == "change_background" for t in info.function_tools):
            async for d in call("change_background", '{"color": "#fde68a"}', "call_background"):
                yield d
        else:
            yield "No change_background tool was offered."
    elif "story" in said:
        for word in STORY:
            yield word
            await asyncio.sleep(STORY_PAUSE_S)
    else:
        yield f"You said: {said}"


# DeferredToolRequests: a call of a tool the client declared ends the run
# with the call left for the client, as AG-UI expects.
agent: Agent[None, str | DeferredToolRequests] = Agent(
    FunctionModel(stream_function=script, model_name="scripted"),
    output_type=[str, DeferredToolRequests],
)


@agent.tool_plain
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}, 22 C"


async def run(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=agent)


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


app = Starlette(routes=[Route("/agent", run, methods=["POST"]), Route("/healthz", healthz)])

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    uvicorn.run(app, host="127.0.0.1", port=ap.parse_args().port, log_level="warning")
