#!/usr/bin/env python3
"""Write the benchmark's mixed AG-UI stream with the official Python SDK.

    python crates/tools/bench/make_stream.py --events 200000 OUT.sse

Events are ag_ui.core models serialized by ag_ui.encoder.EventEncoder, so the
bytes are what a Python AG-UI agent sends. The shape repeats one cycle of a
tool-using chat turn (see CYCLE below): about three quarters small text
deltas, the rest tool-call argument deltas, state deltas and the starts and
ends around them. crates/tools/bench/src/lib.rs builds the same shape in Rust for
the criterion benches.
"""

from __future__ import annotations

import argparse
import sys

from ag_ui.core import (
    RunFinishedEvent,
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

# Words a model streams, a few tokens each; some non-ASCII and some JSON
# escapes so the string paths are not all plain ASCII.
WORDS = [
    "The ", "weather ", "in ", "Paris ", "is ", "mild", ", ", "around ", "18", "°C",
    " with ", "light ", "rain", ". ", "Bring ", "an ", "umbrella", "! ", "\"quoted\" ",
    "北京", "今天", "晴", " 🌤️ ", "and ", "tomorrow ", "looks ", "better", ".\n",
]
TEXT_DELTAS_PER_MESSAGE = 40
ARG_DELTAS = ['{"city":', ' "Par', 'is", "u', 'nits": "m', 'etric", "days"', ": 3}"]


def cycle(n: int):
    """One turn: a text message, a tool call with its result, two state deltas."""
    msg = f"msg-{n}"
    call = f"call-{n}"
    yield TextMessageStartEvent(message_id=msg, role="assistant")
    for i in range(TEXT_DELTAS_PER_MESSAGE):
        yield TextMessageContentEvent(message_id=msg, delta=WORDS[(n + i) % len(WORDS)])
    yield TextMessageEndEvent(message_id=msg)
    yield ToolCallStartEvent(tool_call_id=call, tool_call_name="get_weather", parent_message_id=msg)
    for d in ARG_DELTAS:
        yield ToolCallArgsEvent(tool_call_id=call, delta=d)
    yield ToolCallEndEvent(tool_call_id=call)
    yield ToolCallResultEvent(
        message_id=f"tool-{n}", tool_call_id=call, content='{"temperature":18,"condition":"rain"}', role="tool"
    )
    yield StateDeltaEvent(delta=[{"op": "replace", "path": "/turn", "value": n}])
    yield StateDeltaEvent(delta=[{"op": "replace", "path": "/status", "value": "step " + str(n)}])


def events(total: int):
    """RUN_STARTED, a state snapshot, cycles, RUN_FINISHED: `total` events."""
    out = [
        RunStartedEvent(thread_id="thread-bench", run_id="run-bench"),
        StateSnapshotEvent(snapshot={"turn": 0, "status": "idle", "city": "Paris"}),
    ]
    n = 0
    while len(out) < total - 1:
        for ev in cycle(n):
            if len(out) == total - 1:
                break
            out.append(ev)
        n += 1
    out.append(RunFinishedEvent(thread_id="thread-bench", run_id="run-bench"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("out")
    args = ap.parse_args()
    enc = EventEncoder()
    with open(args.out, "w", encoding="utf-8", newline="") as f:
        for ev in events(args.events):
            f.write(enc.encode(ev))
    return 0


if __name__ == "__main__":
    sys.exit(main())
