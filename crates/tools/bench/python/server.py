#!/usr/bin/env python3
"""Comparison (e) of crates/tools/bench/run.sh: the same bridge as crates/tools/bench/node/server.mjs in
Python. FastAPI receives the chat request, httpx streams the AG-UI agent,
every event is validated into the AG-UI SDK's (ag-ui-protocol) pydantic
models, mapped by agui_to_ui.py and written as the UI message stream.

    python crates/tools/bench/python/server.py --port 8083 --upstream http://127.0.0.1:9100/agent
"""

import argparse

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from agui_to_ui import AgUiToUi, parse_event, sse

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=8083)
ap.add_argument("--upstream", default="http://127.0.0.1:9100/agent")
args = ap.parse_args()

app = FastAPI()
client = httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=None, max_keepalive_connections=0))


@app.post("/api/chat")
async def chat(request: Request):
    body = await request.json()
    messages = [
        {
            "id": m.get("id", "u"),
            "role": m.get("role", "user"),
            "content": "".join(p.get("text", "") for p in m.get("parts", []) if p.get("type") == "text"),
        }
        for m in body.get("messages", [])
    ]
    run_input = {
        "threadId": "t",
        "runId": "r",
        "messages": messages,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    headers = {"accept": "text/event-stream"}
    if "x-bench" in request.headers:
        headers["x-bench"] = request.headers["x-bench"]

    async def chunks():
        mapper = AgUiToUi()
        async with client.stream("POST", args.upstream, json=run_input, headers=headers) as resp:
            buf = b""
            async for data in resp.aiter_bytes():
                buf += data
                *lines, buf = buf.split(b"\n")
                out = []
                for line in lines:
                    if line.startswith(b"data:"):
                        for chunk in mapper.event(parse_event(line[5:].lstrip(b" "))):
                            out.append(sse(chunk))
                if out:
                    yield "".join(out)
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        chunks(),
        media_type="text/event-stream",
        headers={"x-vercel-ai-ui-message-stream": "v1", "cache-control": "no-cache"},
    )


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", backlog=4096)
