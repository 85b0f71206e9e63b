#!/usr/bin/env python3
"""Write AG-UI SSE fixtures with the official Python SDK (ag-ui-protocol).

    python make_fixtures.py OUTDIR          write OUTDIR/<scenario>.sse
    python make_fixtures.py --check DIR     regenerate into a temp dir and fail
                                            if anything differs from DIR

The events are built with ag_ui.core classes and serialized with
ag_ui.encoder.EventEncoder, so the files are real producer bytes (raw UTF-8,
raw U+2028 inside JSON strings, optional fields omitted rather than null).
Everything is deterministic: fixed ids and fixed integer millisecond
timestamps, so CI can prove the committed fixtures still come from the SDK.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List

from ag_ui.core import (
    CustomEvent,
    RawEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.types import Interrupt
from ag_ui.encoder import EventEncoder

THREAD_ID = "thread-1"
RUN_ID = "run-1"
BASE_TS = 1767225600000  # 2026-01-01T00:00:00Z, in ms

# The tricky text of the `chat` scenario. Kept identical to CHAT_DELTAS in
# tests/node/make-fixtures.mjs so both dialects carry the same message.
# Boundaries are deliberate: one falls between 👍 and its skin-tone modifier,
# one between a backslash and the letter after it.
CHAT_DELTAS = [
    "你好，世界",
    "! 🎉👍",
    '🏽 He said "hi" and C:\\temp\\',
    "new\nline two\u2028after LS",
    "\n\ndone.",
]


class Stream:
    """Collects encoded events; stamps each SDK-built event with a fixed timestamp."""

    def __init__(self) -> None:
        self.encoder = EventEncoder()
        self.parts: List[str] = []

    def add(self, event) -> None:
        event.timestamp = BASE_TS + 100 * len(self.parts)
        self.parts.append(self.encoder.encode(event))

    def raw(self, frame: str) -> None:
        self.parts.append(frame)

    def text(self) -> str:
        return "".join(self.parts)

    # small helpers for the shapes that repeat across scenarios

    def run_started(self) -> None:
        self.add(RunStartedEvent(thread_id=THREAD_ID, run_id=RUN_ID))

    def run_finished(self, **kw) -> None:
        self.add(RunFinishedEvent(thread_id=THREAD_ID, run_id=RUN_ID, **kw))

    def text_message(self, message_id: str, deltas: List[str]) -> None:
        self.add(TextMessageStartEvent(message_id=message_id, role="assistant"))
        for delta in deltas:
            self.add(TextMessageContentEvent(message_id=message_id, delta=delta))
        self.add(TextMessageEndEvent(message_id=message_id))

    def tool_call(self, call_id: str, name: str, arg_deltas: List[str], parent: str) -> None:
        self.add(ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=parent))
        for delta in arg_deltas:
            self.add(ToolCallArgsEvent(tool_call_id=call_id, delta=delta))
        self.add(ToolCallEndEvent(tool_call_id=call_id))


def chat(s: Stream) -> None:
    s.run_started()
    s.text_message("msg-1", CHAT_DELTAS)
    s.run_finished()


def frontend_tool(s: Stream) -> None:
    # No TOOL_CALL_RESULT: the browser runs change_background and posts the
    # result in its next request.
    s.run_started()
    s.text_message("msg-1", ["Sure, changing the background to red."])
    s.tool_call("tc-1", "change_background", ['{"col', 'or":"#ff', '0000"}'], parent="msg-1")
    s.run_finished()


def server_tool(s: Stream) -> None:
    s.run_started()
    s.tool_call("tc-1", "get_weather", ['{"city":', '"北京"}'], parent="msg-1")
    s.add(
        ToolCallResultEvent(
            message_id="msg-tool-1",
            tool_call_id="tc-1",
            content='{"city":"北京","temperature":22,"condition":"sunny"}',
            role="tool",
        )
    )
    s.text_message("msg-2", ["北京今天晴，", "气温 22°C。"])
    s.run_finished()


def hitl_confirm(s: Stream) -> None:
    s.run_started()
    s.tool_call(
        "tc-1",
        "confirm_action",
        ['{"action":"delete_file",', '"path":"/tmp/report.txt"}'],
        parent="msg-1",
    )
    s.run_finished(
        outcome=RunFinishedInterruptOutcome(
            interrupts=[
                Interrupt(
                    id="int-1",
                    reason="confirmation",
                    message="Delete /tmp/report.txt?",
                    tool_call_id="tc-1",
                )
            ]
        )
    )


def parallel_tools(s: Stream) -> None:
    s.run_started()
    s.add(ToolCallStartEvent(tool_call_id="tc-1", tool_call_name="get_weather", parent_message_id="msg-1"))
    s.add(ToolCallStartEvent(tool_call_id="tc-2", tool_call_name="get_time", parent_message_id="msg-1"))
    for call_id, delta in [
        ("tc-1", '{"city":'),
        ("tc-2", '{"timezone":'),
        ("tc-1", '"Paris"}'),
        ("tc-2", '"Europe/Paris"}'),
    ]:
        s.add(ToolCallArgsEvent(tool_call_id=call_id, delta=delta))
    s.add(ToolCallEndEvent(tool_call_id="tc-1"))
    s.add(ToolCallEndEvent(tool_call_id="tc-2"))
    s.add(ToolCallResultEvent(message_id="msg-tool-1", tool_call_id="tc-1", content='{"temperature":18}', role="tool"))
    s.add(ToolCallResultEvent(message_id="msg-tool-2", tool_call_id="tc-2", content='{"time":"14:05"}', role="tool"))
    s.run_finished()


def state(s: Stream) -> None:
    s.run_started()
    s.add(StateSnapshotEvent(snapshot={"counter": 0, "items": ["a"], "user": {"name": "Ada", "draft": True}}))
    s.add(
        StateDeltaEvent(
            delta=[
                {"op": "add", "path": "/items/-", "value": "b"},
                {"op": "replace", "path": "/counter", "value": 1},
                {"op": "remove", "path": "/user/draft"},
            ]
        )
    )
    s.text_message("msg-1", ["State updated."])
    s.run_finished()


def reasoning(s: Stream) -> None:
    # The span and the message inside it have different ids on purpose:
    # decoders must not assume they are the same.
    s.run_started()
    s.add(ReasoningStartEvent(message_id="rsn-span-1"))
    s.add(ReasoningMessageStartEvent(message_id="rsn-1", role="reasoning"))
    for delta in ["The user wants ", "a greeting; ", "answer briefly."]:
        s.add(ReasoningMessageContentEvent(message_id="rsn-1", delta=delta))
    s.add(ReasoningMessageEndEvent(message_id="rsn-1"))
    s.add(ReasoningEndEvent(message_id="rsn-span-1"))
    s.text_message("msg-1", ["Hello!"])
    s.run_finished()


def run_error(s: Stream) -> None:
    s.run_started()
    s.text_message("msg-1", ["Let me look that up", "..."])
    s.add(RunErrorEvent(message="upstream model timed out", code="UPSTREAM_TIMEOUT"))


def cut_mid_message(s: Stream) -> None:
    # The producer dies mid-message: no TEXT_MESSAGE_END, no RUN_FINISHED.
    s.run_started()
    s.add(TextMessageStartEvent(message_id="msg-1", role="assistant"))
    s.add(TextMessageContentEvent(message_id="msg-1", delta="This answer is cut "))
    s.add(TextMessageContentEvent(message_id="msg-1", delta="off in the mid"))


def unknown_events(s: Stream) -> None:
    s.run_started()
    s.add(CustomEvent(name="progress", value={"percent": 50, "label": "halfway"}))
    s.add(RawEvent(event={"provider": "acme", "kind": "ping", "seq": 7}, source="acme-llm"))
    s.add(StepStartedEvent(step_name="compose"))
    # Chunk shorthand: the first chunk opens the message (id + role), the
    # following ones only continue it.
    s.add(TextMessageChunkEvent(message_id="msg-1", role="assistant", delta="Chunked "))
    s.add(TextMessageChunkEvent(delta="hello"))
    s.add(TextMessageChunkEvent(delta="!"))
    s.add(StepFinishedEvent(step_name="compose"))
    # Hand-written: the SDK has no class for an event type from a future
    # protocol version, so this frame is appended as raw text.
    s.raw('data: {"type":"FUTURE_EVENT","x":1}\n\n')
    s.run_finished()


SCENARIOS: Dict[str, Callable[[Stream], None]] = {
    "chat": chat,
    "frontend_tool": frontend_tool,
    "server_tool": server_tool,
    "hitl_confirm": hitl_confirm,
    "parallel_tools": parallel_tools,
    "state": state,
    "reasoning": reasoning,
    "run_error": run_error,
    "cut_mid_message": cut_mid_message,
    "unknown_events": unknown_events,
}


def generate(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    for name, build in SCENARIOS.items():
        s = Stream()
        build(s)
        # newline="" and explicit UTF-8: the bytes must not depend on the platform.
        with open(outdir / f"{name}.sse", "w", encoding="utf-8", newline="") as f:
            f.write(s.text())


def check(expected_dir: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        problems = []
        for name in SCENARIOS:
            want = fresh / f"{name}.sse"
            have = expected_dir / f"{name}.sse"
            if not have.exists():
                problems.append(f"missing {have}")
                continue
            if have.read_bytes() != want.read_bytes():
                diff = difflib.unified_diff(
                    # split on LF only: str.splitlines() would also split on U+2028
                    have.read_text(encoding="utf-8").split("\n"),
                    want.read_text(encoding="utf-8").split("\n"),
                    str(have),
                    "regenerated",
                    lineterm="",
                )
                problems.append("\n".join(list(diff)[:40]))
        extra = sorted(p.name for p in expected_dir.glob("*.sse") if p.stem not in SCENARIOS)
        problems += [f"unexpected fixture {expected_dir / n}" for n in extra]
    if problems:
        print("AG-UI fixtures differ from what ag-ui-protocol writes now:", file=sys.stderr)
        for p in problems:
            print(p, file=sys.stderr)
        print(f"regenerate with: python {Path(__file__).name} {expected_dir}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    if args.check:
        return check(args.dir)
    generate(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
