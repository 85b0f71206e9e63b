#!/usr/bin/env python3
"""Non-test code lines and long functions of Rust sources, for the size
targets of the redesign issues (38, 39).

  crates/tools/bench/code_size.py [--over N] DIR...

Counts, per DIR, the lines of `src/**/*.rs` that are neither blank nor only
a comment, outside `#[cfg(test)]` items (the `mod tests` blocks); `tests/`,
`benches/` and `examples/` are left out, and so is a `src/**/tests.rs`
(a test module in a file of its own). Lists every function whose body
spans more than N lines (default 150), test code aside; a function's lines
run from its `fn` line, its signature included. Reads the files as
text: braces in strings, raw strings (on one line) and chars are
skipped, which is enough for this
code base (checked against `cargo fmt` output, one item per line).
"""

import argparse
import pathlib
import re
import sys

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")


def strip(line: str) -> str:
    """The line without string and char literals and `//` comments."""
    out = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "/" and line.startswith("//", i):
            break
        if c == "r" and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
            # A raw string, `r"…"` or `r#"…"#`: no escapes inside.
            j = i + 1
            while j < n and line[j] == "#":
                j += 1
            if j < n and line[j] == '"':
                close = '"' + "#" * (j - i - 1)
                end = line.find(close, j + 1)
                i = n if end < 0 else end + len(close)
                continue
        if c == '"':
            i += 1
            while i < n and line[i] != '"':
                i += 2 if line[i] == "\\" else 1
            i += 1
            continue
        if c == "'" and i + 2 < n and (line[i + 2] == "'" or line[i + 1] == "\\"):
            j = line.find("'", i + 2)
            i = j + 1 if j > 0 else i + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def scan(path: pathlib.Path, over: int, long_fns: list) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    code = 0
    depth = 0
    skip_until = None  # depth at which a test item ends
    pending_test = False
    fn_stack = []  # (name, start line, depth at its opening)
    pending_fn = None  # a signature over several lines, until its `{`
    for no, raw in enumerate(lines, 1):
        s = raw.strip()
        text = strip(raw)
        if skip_until is None and s.startswith("#[cfg(test)]"):
            pending_test = True
            continue
        in_test = skip_until is not None or pending_test
        m = FN.match(raw)
        if m and not in_test:
            pending_fn = (m.group(6), no)
        if pending_fn and "{" in text:
            fn_stack.append((pending_fn[0], pending_fn[1], depth))
            pending_fn = None
        elif pending_fn and text.rstrip().endswith(";"):
            pending_fn = None  # a declaration without a body
        opens, closes = text.count("{"), text.count("}")
        if pending_test and opens:
            skip_until = depth
            pending_test = False
        elif pending_test and s.endswith(";"):
            pending_test = False  # a `#[cfg(test)] use ...;`
        depth += opens - closes
        if not in_test and s and not s.startswith("//"):
            code += 1
        while fn_stack and depth <= fn_stack[-1][2] and closes:
            name, start, _ = fn_stack.pop()
            if no - start + 1 > over:
                long_fns.append((no - start + 1, f"{path}:{start}", name))
        if skip_until is not None and depth <= skip_until and closes:
            skip_until = None
    return code


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--over", type=int, default=150)
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    total = 0
    long_fns: list = []
    for d in a.dirs:
        # A `tests.rs` is a module declared under `#[cfg(test)]`: test code.
        files = sorted(f for f in pathlib.Path(d).glob("src/**/*.rs") if f.name != "tests.rs")
        n = sum(scan(f, a.over, long_fns) for f in files)
        total += n
        print(f"{n:7d}  {d}")
    print(f"{total:7d}  total non-test code lines")
    print(f"functions over {a.over} lines: {len(long_fns)}")
    for length, where, name in sorted(long_fns, reverse=True):
        print(f"  {length:5d}  {name}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
