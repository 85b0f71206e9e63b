"""The official `a2a-sdk` (1.x) client, for the gateway's A2A tests: sends
one message over JSON-RPC streaming to URL and prints, as one JSON line,
what the client read: the text of the artifact chunks (in order), the
agent messages' text, the last task state, the task and context ids, the
kinds of stream responses, or the client's error.

Usage: python a2a_client.py URL TEXT [CONTEXT_ID]
With A2A_STREAMING=0 in the environment the client does not stream: it
sends SendMessage and reads the one answer.
With URL ending in `/.well-known/agent-card.json` the client is built from
the card the URL serves; otherwise from a card naming URL as its JSON-RPC
interface.
"""

import asyncio
import json
import os
import sys

import httpx
from a2a.client import ClientConfig, create_client
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)


async def main(url: str, text: str, context_id: str | None) -> dict:
    out = {"text": "", "messages": [], "kinds": [], "state": None, "taskId": None, "contextId": None}
    async with httpx.AsyncClient(timeout=30) as http:
        config = ClientConfig(streaming=os.environ.get("A2A_STREAMING") != "0", httpx_client=http)
        if url.endswith("/.well-known/agent-card.json"):
            base = url[: -len("/.well-known/agent-card.json")]
            client = await create_client(base, client_config=config)
        else:
            card = AgentCard(
                name="gateway",
                description="",
                version="1",
                supported_interfaces=[
                    AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
                ],
                capabilities=AgentCapabilities(streaming=True),
                default_input_modes=["text/plain"],
                default_output_modes=["text/plain"],
            )
            client = await create_client(card, client_config=config)
        message = Message(
            message_id="m-1", role=Role.ROLE_USER, parts=[Part(text=text)], context_id=context_id or ""
        )
        try:
            async for response in client.send_message(SendMessageRequest(message=message)):
                kind = response.WhichOneof("payload")
                out["kinds"].append(kind)
                if kind == "task":
                    out["taskId"] = response.task.id
                    out["contextId"] = response.task.context_id
                    out["state"] = TaskState.Name(response.task.status.state)
                    # A whole task (the non-streaming answer) holds the text.
                    for a in response.task.artifacts:
                        out["text"] += "".join(p.text for p in a.parts)
                elif kind == "artifact_update":
                    for p in response.artifact_update.artifact.parts:
                        out["text"] += p.text
                elif kind == "status_update":
                    st = response.status_update.status
                    out["state"] = TaskState.Name(st.state)
                    if st.message.parts:
                        out["messages"].append("".join(p.text for p in st.message.parts))
                elif kind == "message":
                    out["messages"].append("".join(p.text for p in response.message.parts))
        except Exception as e:  # the test reports what the client refused
            out["error"] = f"{type(e).__name__}: {e}"
    return out


if __name__ == "__main__":
    ctx = sys.argv[3] if len(sys.argv) > 3 else None
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], ctx))))
