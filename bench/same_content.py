#!/usr/bin/env python3
"""Whether translated SSE outputs carry the same content, chunk by chunk.

    python bench/same_content.py A.sse B.sse [C.sse ...]

bench/run.sh gives it the three whole-process outputs (babelgate, the Node
SDKs, the Python SDK): a matching byte count says little, so each output's
`data:` payloads are parsed as JSON and compared in order, as values (key
order aside). The `start` chunk's messageId is left out: each translator
makes one up per run or leaves it out (it is optional). Other ids are
compared by where each first appeared in its own output, not by their
text: two outputs that use one id where the other uses two still differ.
Prints one JSON object; exits 1 when the outputs differ.
"""

from __future__ import annotations

import json
import sys

ID_KEYS = {"id", "messageId", "toolCallId"}


def payloads(path: str) -> list[str]:
    out, data = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif line == "" and data:
                out.append("\n".join(data))
                data = []
    if data:
        out.append("\n".join(data))
    return out


def normalised(path: str) -> list:
    ids: dict[str, str] = {}

    def walk(v):
        if isinstance(v, dict):
            return {k: (ids.setdefault(x, f"<id {len(ids)}>") if k in ID_KEYS and isinstance(x, str) else walk(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    chunks = []
    for p in payloads(path):
        if p == "[DONE]":
            chunks.append(p)
            continue
        v = json.loads(p)
        if isinstance(v, dict) and v.get("type") == "start":
            v.pop("messageId", None)
        chunks.append(walk(v))
    return chunks


def main() -> int:
    files = sys.argv[1:]
    if len(files) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    outs = [normalised(f) for f in files]
    base = outs[0]
    report = {
        "outputs": [{"file": f, "chunks": len(o)} for f, o in zip(files, outs)],
        "same": True,
        "differences": [],
    }
    for f, o in zip(files[1:], outs[1:]):
        if o == base:
            continue
        report["same"] = False
        at = next((i for i, (a, b) in enumerate(zip(base, o)) if a != b), min(len(base), len(o)))
        report["differences"].append(
            {
                "file": f,
                "first_chunk": at,
                "expected": base[at] if at < len(base) else None,
                "got": o[at] if at < len(o) else None,
            }
        )
    print(json.dumps(report))
    return 0 if report["same"] else 1


if __name__ == "__main__":
    sys.exit(main())
