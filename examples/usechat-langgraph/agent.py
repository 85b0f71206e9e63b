#!/usr/bin/env python3
"""A LangGraph agent served by ag-ui-langgraph, with a scripted offline model.

    python agent.py --port PORT [--no-raw]

The graph is the usual chat loop (model node, ToolNode, back to the model)
with a MemorySaver checkpointer, so a thread keeps its history and merges
what a client sends by message id, as a deployed LangGraph agent does.
Instead of a provider the model node runs `ScriptedModel`, which answers by a
keyword in the last user message:

    text      a plain answer
    weather   one server tool call (get_weather), then an answer quoting it
    two       two server tool calls in one model step, then an answer
    flaky     a tool that fails; ToolNode turns the error into a tool
              message with status "error", the model answers after it
    explode   a tool that raises an error ToolNode does not handle: the run fails
    modelerr  the model itself raises: the run fails
    background a call to the client's front-end tool `change_background`
              (the graph stops; the client runs it and sends the result)
    approve   a server tool (`delete_file`) that asks a human first
              (LangGraph `interrupt`); the run resumes with the answer
    counter   a node that updates the graph state (`counter`), then an answer

Beside the AG-UI endpoint:

    GET    /requests  what the model was given on each call: the messages
                      (id, type, content, tool calls, tool_call_id) per thread
    DELETE /requests  forget them
    GET    /healthz   readiness
"""

from __future__ import annotations

import argparse
import json
from typing import Any, AsyncIterator, Dict, List, Optional, Sequence

import uvicorn
from fastapi import FastAPI
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint

# What the model saw, call by call (read by the tests through /requests).
SEEN: List[Dict[str, Any]] = []


class ToolFailed(ValueError):
    """A tool error ToolNode reports to the model as an error tool message."""


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 C"


@tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return f"12:00 in {city}"


@tool
def flaky(n: int) -> str:
    """A tool that fails."""
    raise ToolFailed(f"flaky({n}) failed")


@tool
def explode() -> str:
    """A tool that raises an error nothing handles."""
    raise RuntimeError("explode: the tool crashed")


@tool
def delete_file(path: str) -> str:
    """Deletes a file, after a human approves."""
    answer = interrupt({"question": f"Delete {path}?", "path": path})
    if isinstance(answer, dict) and answer.get("approved"):
        return f"deleted {path}"
    return f"kept {path}"


SERVER_TOOLS = [get_weather, get_time, flaky, explode, delete_file]
SERVER_TOOL_NAMES = {t.name for t in SERVER_TOOLS}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _record(messages: Sequence[BaseMessage], thread_id: Optional[str]) -> None:
    rows = []
    for m in messages:
        row: Dict[str, Any] = {"id": m.id, "type": m.type, "content": _text(m.content)}
        if isinstance(m, AIMessage) and m.tool_calls:
            row["tool_calls"] = [
                {"id": c["id"], "name": c["name"], "args": c["args"]} for c in m.tool_calls
            ]
        if isinstance(m, ToolMessage):
            row["tool_call_id"] = m.tool_call_id
            row["status"] = m.status
        rows.append(row)
    SEEN.append({"thread_id": thread_id, "messages": rows})


def _call(name: str, args: Dict[str, Any], n: int) -> Dict[str, Any]:
    return {"id": f"call_{name}_{n}", "name": name, "args": args, "type": "tool_call"}


class ScriptedModel(BaseChatModel):
    """Answers by keyword, with tool calls, like a provider would."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages))])

    def _answer(self, messages: List[BaseMessage]) -> AIMessage:
        humans = [m for m in messages if isinstance(m, HumanMessage)]
        said = _text(humans[-1].content).lower() if humans else ""
        turn = len(humans)
        last = messages[-1] if messages else None
        if isinstance(last, ToolMessage):
            # After tools: an answer quoting every result of the last step.
            results = []
            for m in reversed(messages):
                if not isinstance(m, ToolMessage):
                    break
                results.insert(0, f"{m.name or 'tool'}: {_text(m.content)}")
            return AIMessage(content="Done. " + "; ".join(results))
        if "modelerr" in said:
            raise RuntimeError("modelerr: the model failed")
        if "weather" in said:
            return AIMessage(content="Let me look.", tool_calls=[_call("get_weather", {"city": "Paris"}, turn)])
        if "two" in said:
            return AIMessage(
                content="",
                tool_calls=[_call("get_weather", {"city": "Oslo"}, turn), _call("get_time", {"city": "Oslo"}, turn)],
            )
        if "flaky" in said:
            return AIMessage(content="", tool_calls=[_call("flaky", {"n": turn}, turn)])
        if "explode" in said:
            return AIMessage(content="", tool_calls=[_call("explode", {}, turn)])
        if "background" in said:
            return AIMessage(content="Changing it.", tool_calls=[_call("change_background", {"color": "teal"}, turn)])
        if "approve" in said:
            return AIMessage(content="", tool_calls=[_call("delete_file", {"path": "/tmp/x"}, turn)])
        return AIMessage(content=f"You said: {said} (turn {turn})")

    async def _agenerate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return self._generate(messages, stop, run_manager, **kwargs)

    async def _astream(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        # Streamed in pieces, as a provider streams: the text in two deltas,
        # each call's name, then its arguments.
        answer = self._answer(messages)
        text = _text(answer.content)
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            if piece:
                yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        for i, c in enumerate(answer.tool_calls):
            head = tool_call_chunk(name=c["name"], args="", id=c["id"], index=i)
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[head]))
            args = tool_call_chunk(name=None, args=json.dumps(c["args"]), id=None, index=i)
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[args]))


MODEL = ScriptedModel()


class State(MessagesState):
    counter: int


async def model_node(state: State, config: RunnableConfig) -> Dict[str, Any]:
    _record(state["messages"], (config.get("configurable") or {}).get("thread_id"))
    return {"messages": [await MODEL.ainvoke(state["messages"], config)]}


async def counter_node(state: State) -> Dict[str, Any]:
    return {"counter": (state.get("counter") or 0) + 1}


def after_model(state: State) -> str:
    last = state["messages"][-1]
    calls = getattr(last, "tool_calls", None) or []
    if calls and all(c["name"] in SERVER_TOOL_NAMES for c in calls):
        return "tools"
    # No calls, or a front-end tool's call: the client answers it.
    return END


def route_start(state: State) -> str:
    humans = [m for m in state["messages"] if isinstance(m, HumanMessage)]
    last = state["messages"][-1] if state["messages"] else None
    if humans and isinstance(last, HumanMessage) and "counter" in _text(humans[-1].content).lower():
        return "counter"
    return "model"


def build_graph():
    g = StateGraph(State)
    g.add_node("model", model_node)
    g.add_node("counter", counter_node)
    # Only ToolFailed becomes an error tool message; anything else fails the run.
    g.add_node("tools", ToolNode(SERVER_TOOLS, handle_tool_errors=(ToolFailed,)))
    g.add_conditional_edges(START, route_start, ["model", "counter"])
    g.add_edge("counter", "model")
    g.add_conditional_edges("model", after_model, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=MemorySaver())


def make_app(emit_raw: bool) -> FastAPI:
    app = FastAPI()
    agent = LangGraphAgent(
        name="scripted",
        graph=build_graph(),
        emit_raw_events=emit_raw,
        emit_interrupt_outcome=True,
    )
    add_langgraph_fastapi_endpoint(app, agent, "/agent")

    @app.get("/healthz")
    async def healthz() -> Dict[str, str]:
        return {"status": "ok"}

    @app.get("/requests")
    async def requests_list() -> List[Dict[str, Any]]:
        return SEEN

    @app.delete("/requests")
    async def requests_clear() -> Dict[str, int]:
        n = len(SEEN)
        SEEN.clear()
        return {"cleared": n}

    return app


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--no-raw", action="store_true", help="emit no RAW events")
    args = ap.parse_args()
    uvicorn.run(make_app(not args.no_raw), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
