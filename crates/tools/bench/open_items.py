#!/usr/bin/env python3
"""Streams that open many items and never close them, translated by one or
more `babelgate` binaries side by side: seconds per binary and whether they
wrote the same bytes.

A well-formed stream has one or two messages or calls open at a time; a
broken or hostile upstream can open tens of thousands. Any list of what is
open that is searched per event makes such a stream cost the square of its
length. Not part of the test command (it measures time).

    crates/tools/bench/open_items.py [--items N] BABELGATE [BABELGATE ...]
"""

import argparse
import json
import os
import subprocess
import tempfile
import time


def sse(events):
    return "".join(
        "data: %s\n\n" % (e if isinstance(e, str) else json.dumps(e)) for e in events
    )


def ag_ui(kind, n):
    ev = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    for i in range(n):
        ev += {
            # Started, never ended, never said anything.
            "silent_texts": [
                {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"}
            ],
            "tools": [
                {"type": "TOOL_CALL_START", "toolCallId": f"c{i}", "toolCallName": "f"},
                {"type": "TOOL_CALL_ARGS", "toolCallId": f"c{i}", "delta": "{}"},
            ],
            # Ended, never answered.
            "pending_calls": [
                {"type": "TOOL_CALL_START", "toolCallId": f"c{i}", "toolCallName": "f"},
                {"type": "TOOL_CALL_END", "toolCallId": f"c{i}"},
            ],
            "steps": [{"type": "STEP_STARTED", "stepName": f"s{i}"}],
            "chunks": [
                {"type": "TOOL_CALL_CHUNK", "toolCallId": f"c{i}", "toolCallName": "f", "delta": "{}"}
            ],
        }[kind]
    ev.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return sse(ev)


def vercel(kind, n):
    ev = [{"type": "start", "messageId": "m"}, {"type": "start-step"}]
    for i in range(n):
        ev += [
            {"type": "reasoning-start", "id": f"r{i}"},
            {"type": "reasoning-delta", "id": f"r{i}", "delta": "x"},
        ]
    return sse(ev + [{"type": "finish-step"}, {"type": "finish"}, "[DONE]"])


def hai(kind, n):
    ev = [{"type": "RUN_STARTED", "messageId": "msg-1", "role": "assistant"}]
    for i in range(n):
        ev += [
            {"type": "BUSINESS_DATA_START", "messageId": f"b{i}", "role": "assistant"},
            {
                "type": "BUSINESS_DATA_CONTENT",
                "messageId": f"b{i}",
                "delta": {"output": {"type": "thinking", "data": {"content": "x", "thinking": True}}},
            },
        ]
    ev.append({"type": "RUN_FINISHED", "messageId": "msg-1", "role": "assistant"})
    return sse(ev)


def agkit(kind, n):
    ev = []
    for i in range(n):
        ev += [
            {"type": "tool-call-start", "toolCallId": f"c{i}", "toolCallName": "f"},
            {"type": "tool-call-args", "toolCallId": f"c{i}", "delta": "{"},
        ]
    return sse(ev + ["[DONE]"])


# (from, kind, to, generator): each the worst target measured for its input.
CASES = [
    ("ag-ui", "chunks", "ag-ui", ag_ui),
    ("ag-ui", "steps", "hai", ag_ui),
    ("ag-ui", "tools", "vercel", ag_ui),
    ("ag-ui", "silent_texts", "vercel", ag_ui),
    ("ag-ui", "pending_calls", "hai", ag_ui),
    ("hai", "business_messages", "ag-ui", hai),
    ("agkit", "tools", "ag-ui", agkit),
    ("vercel", "reasoning", "ag-ui", vercel),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=64000)
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for frm, kind, to, gen in CASES:
            path = os.path.join(tmp, f"{frm}.{kind}.sse")
            with open(path, "w") as f:
                f.write(gen(kind, args.items))
            times, outs = [], []
            for b in args.binaries:
                t = time.monotonic()
                r = subprocess.run(
                    [b, "translate", "--deterministic", "--from", frm, "--to", to, path],
                    capture_output=True,
                )
                times.append(time.monotonic() - t)
                outs.append((r.returncode, r.stdout))
            same = all(o == outs[0] for o in outs)
            print(
                f"{frm} {kind} ({os.path.getsize(path)} B) -> {to}: "
                + "  ".join(f"{t:.2f} s" for t in times)
                + f"  exit {outs[0][0]}, same bytes: {same}",
                flush=True,
            )


if __name__ == "__main__":
    main()
