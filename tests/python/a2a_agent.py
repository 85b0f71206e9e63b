"""An A2A agent built with the official `a2a-sdk` (1.x): a scripted,
offline AgentExecutor behind the SDK's own JSON-RPC app, for the gateway's
A2A tests. What it does depends on the user's text:

- `fail`: works, then fails with a status message;
- `reject`: rejected with a status message;
- `approve`: asks for input (input-required); the answer in the same task
  completes it with the answer quoted;
- `data`: a data artifact, then text;
- `slow`: streams a chunk every 0.2 s for a minute (for cancel tests);
  the SDK cancels `execute` on CancelTask, and this agent records that
  under GET /cancelled;
- anything else: "Hello" streamed as three artifact chunks, then
  completed.

Usage: python a2a_agent.py PORT
"""

import asyncio
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.helpers.proto_helpers import (
    new_data_part,
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)

CANCELLED: list[str] = []
# What each request carried, for the tests that check the translation.
SEEN: list[dict] = []


class Scripted(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        SEEN.append(
            {
                "text": text,
                "taskId": context.task_id,
                "contextId": context.context_id,
                "parts": len(context.message.parts) if context.message else 0,
                "continued": context.current_task is not None,
            }
        )
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        task = context.current_task
        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await up.add_artifact(
                [new_text_part(f"You said: {text}")], artifact_id="answer", last_chunk=True
            )
            await up.complete()
            return
        if task is None:
            # The SDK wants the task announced before its first update.
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        await up.start_work()
        if "fail" in text:
            await up.add_artifact([new_text_part("Trying")], artifact_id="a1")
            await up.failed(
                new_text_message("the tool broke", context_id=context.context_id, task_id=context.task_id)
            )
            return
        if "reject" in text:
            await up.add_artifact([new_text_part("Let me see.")], artifact_id="a1", last_chunk=True)
            await up.reject(new_text_message("not my job", context_id=context.context_id, task_id=context.task_id))
            return
        if "approve" in text:
            await up.requires_input(
                new_text_message(
                "Proceed? (yes/no)", context_id=context.context_id, task_id=context.task_id
            )
            )
            return
        if "data" in text:
            await up.add_artifact(
                [new_data_part({"city": "Paris", "temp": 21})], artifact_id="d1", name="weather"
            )
            await up.add_artifact([new_text_part("Sunny.")], artifact_id="a1", last_chunk=True)
            await up.complete()
            return
        if "slow" in text:
            try:
                for i in range(300):
                    await up.add_artifact(
                        [new_text_part(f"tick {i} ")], artifact_id="a1", append=i > 0
                    )
                    await asyncio.sleep(0.2)
            except asyncio.CancelledError:
                CANCELLED.append(context.task_id)
                raise
            await up.complete()
            return
        chunks = ["Hel", "lo \u2028", "world"]
        for i, c in enumerate(chunks):
            await up.add_artifact(
                [new_text_part(c)],
                artifact_id="a1",
                name="answer",
                append=i > 0,
                last_chunk=i == len(chunks) - 1,
            )
        await up.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        CANCELLED.append(context.task_id)
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        await up.cancel()


def app(port: int) -> Starlette:
    card = AgentCard(
        name="scripted",
        description="A scripted A2A agent for babelgate's tests",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"http://127.0.0.1:{port}/",
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="says hello", tags=["test"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=Scripted(), task_store=InMemoryTaskStore(), agent_card=card
    )

    async def cancelled(_request):
        return JSONResponse(CANCELLED)

    async def seen(_request):
        return JSONResponse(SEEN)

    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
        Route("/cancelled", cancelled, methods=["GET"]),
        Route("/seen", seen, methods=["GET"]),
    ]
    return Starlette(routes=routes)


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(app(port), host="127.0.0.1", port=port, log_level="warning")
