#!/usr/bin/env python3
"""Whether translated SSE outputs carry the same content, chunk by chunk.

    python crates/tools/bench/same_content.py A.sse B.sse [C.sse ...]

crates/tools/bench/run.sh gives it the three whole-process outputs (babelgate, the Node
SDKs, the Python SDK): a matching byte count says little, so each output's
`data:` payloads are parsed as JSON and compared in order, as values (key
order aside). Left out: the `start` chunk's messageId, which each
translator makes up per run or leaves out (it is optional), and
`providerMetadata`, where babelgate carries the upstream's own message id
(the SDK pipelines carry none). Other ids are
compared by where each first appeared in its own output, not by their
text: two outputs that use one id where the other uses two still differ.
Where outputs differ, every stretch that differs is listed (a diff of the
chunk sequences), not only the first. Prints one JSON object; exits 1 when
the outputs differ.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

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
        if isinstance(v, dict):
            v.pop("providerMetadata", None)
            if v.get("type") == "start":
                v.pop("messageId", None)
        chunks.append(walk(v))
    return chunks


def diff(a: list[str], b: list[str], window: int = 64):
    """The stretches where `a` and `b` differ, as (index in a, only in a,
    only in b): a walk of both that, at a mismatch, looks up to `window`
    chunks ahead on each side for where they agree again (the outputs are
    long and nearly equal, which a general diff is slow on)."""
    i = j = 0
    out = []
    while i < len(a) or j < len(b):
        if i < len(a) and j < len(b) and a[i] == b[j]:
            i, j = i + 1, j + 1
            continue
        best = None
        for d in range(1, 2 * window + 1):
            for di in range(max(0, d - window), min(d, window) + 1):
                dj = d - di
                if i + di <= len(a) and j + dj <= len(b) and (
                    (i + di == len(a) and j + dj == len(b)) or (i + di < len(a) and j + dj < len(b) and a[i + di] == b[j + dj])
                ):
                    best = (di, dj)
                    break
            if best:
                break
        di, dj = best or (len(a) - i, len(b) - j)
        out.append((i, a[i : i + di], b[j : j + dj]))
        i, j = i + di, j + dj
    return out


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
    key = lambda c: json.dumps(c, sort_keys=True, ensure_ascii=False)
    base_keys = [key(c) for c in base]
    for f, o in zip(files[1:], outs[1:]):
        if o == base:
            continue
        report["same"] = False
        stretches = diff(base_keys, [key(c) for c in o])
        kind = lambda x: json.loads(x).get("type", "?") if x.startswith("{") else x
        count = lambda side: dict(Counter(kind(x) for st in stretches for x in st[side]))
        report["differences"].append(
            {
                "file": f,
                "stretches": len(stretches),
                "only_in_first_by_type": count(1),
                "only_in_this_by_type": count(2),
                "first_at_chunk": stretches[0][0],
                "context_in_first": base[max(0, stretches[0][0] - 2) : stretches[0][0] + 4],
            }
        )
    print(json.dumps(report))
    return 0 if report["same"] else 1


if __name__ == "__main__":
    sys.exit(main())
