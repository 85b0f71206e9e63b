#!/usr/bin/env python3
"""Whole-process AG-UI -> Vercel translation with the AG-UI Python SDK, the
comparison for `babelgate translate --from ag-ui --to vercel FILE`:

    python crates/tools/bench/python/translate.py FILE > out.sse

Every payload is validated into the SDK's pydantic event models, mapped by
agui_to_ui.py, and written with json.dumps, as a FastAPI handler would.
"""

import sys

from agui_to_ui import AgUiToUi, parse_event, sse, sse_payloads


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: translate.py FILE", file=sys.stderr)
        return 2
    mapper = AgUiToUi()
    out = sys.stdout
    with open(sys.argv[1], "rb") as f:
        chunks = iter(lambda: f.read(64 * 1024), b"")
        parts = []
        for payload in sse_payloads(chunks):
            for chunk in mapper.event(parse_event(payload)):
                parts.append(sse(chunk))
            if len(parts) >= 512:
                out.write("".join(parts))
                parts.clear()
        parts.append("data: [DONE]\n\n")
        out.write("".join(parts))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
