"""The official `a2a-sdk` (1.x) client, built from the card a gateway route
serves, doing what an A2A client does with a task besides sending: it
starts a long run (streaming), reads its first events, asks for the task
(GetTask), follows it from a second subscription (SubscribeToTask), cancels
it (CancelTask) and reads how the first stream ends; then asks for a task
that does not exist and cancels the ended one again. Prints one JSON line
of what the client got, errors as the client raised them.

Usage: python a2a_tasks.py BASE_URL TEXT
"""

import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)


def task_view(task) -> dict:
    text = "".join(p.text for a in task.artifacts for p in a.parts)
    return {
        "id": task.id,
        "contextId": task.context_id,
        "state": TaskState.Name(task.status.state),
        "text": text,
    }


async def error_of(coro) -> str | None:
    try:
        await coro
    except Exception as e:  # the test compares what the client raised
        return type(e).__name__
    return None


async def main(base: str, text: str) -> dict:
    out: dict = {"first": [], "followed": [], "end": None}
    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(base, client_config=ClientConfig(streaming=True, httpx_client=http))
        message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text=text)], context_id="ctx-tasks")
        stream = client.send_message(SendMessageRequest(message=message))
        task_id = None
        async for r in stream:
            kind = r.WhichOneof("payload")
            out["first"].append(kind)
            if kind == "task":
                task_id = r.task.id
            if kind == "artifact_update":
                break  # the run is under way
        out["taskId"] = task_id
        out["got"] = task_view(await client.get_task(GetTaskRequest(id=task_id)))

        followed = client.subscribe(SubscribeToTaskRequest(id=task_id))
        async for r in followed:
            kind = r.WhichOneof("payload")
            out["followed"].append(kind)
            if len(out["followed"]) >= 3:
                break
        await followed.aclose()

        out["canceled"] = task_view(await client.cancel_task(CancelTaskRequest(id=task_id)))
        # The first stream ends with the task canceled.
        async for r in stream:
            if r.WhichOneof("payload") == "status_update":
                out["end"] = TaskState.Name(r.status_update.status.state)
        out["after"] = task_view(await client.get_task(GetTaskRequest(id=task_id)))
        out["unknown"] = await error_of(client.get_task(GetTaskRequest(id="0123abcd.00ff")))
        out["again"] = await error_of(client.cancel_task(CancelTaskRequest(id=task_id)))
        out["resubscribe_ended"] = await error_of(anext(client.subscribe(SubscribeToTaskRequest(id=task_id))))
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
