"""The official `a2a-sdk` (1.x) client asking a gateway route for a task's
history: it runs one message to its end (streaming), then asks for the task
(GetTask) without a history length, with 0, with 1 and with a negative one.
Prints one JSON line: for each ask, the history's messages (role and the
keys of their data parts) or the error the client raised.

Usage: python a2a_history.py BASE_URL TEXT
"""

import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict


def history_of(task) -> list:
    out = []
    for m in task.history:
        parts = [MessageToDict(p) for p in m.parts]
        out.append({"role": Role.Name(m.role), "parts": parts})
    return out


async def main(base: str, text: str) -> dict:
    out: dict = {}
    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(base, client_config=ClientConfig(streaming=True, httpx_client=http))
        message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text=text)])
        task_id = None
        async for r in client.send_message(SendMessageRequest(message=message)):
            if r.WhichOneof("payload") == "task":
                task_id = r.task.id
        for name, length in [("unset", None), ("zero", 0), ("one", 1), ("negative", -1)]:
            ask = GetTaskRequest(id=task_id) if length is None else GetTaskRequest(id=task_id, history_length=length)
            try:
                out[name] = history_of(await client.get_task(ask))
            except Exception as e:  # the test compares what the client raised
                out[name] = {"error": type(e).__name__, "message": str(e)}
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
