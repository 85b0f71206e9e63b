#!/usr/bin/env python3
"""The public AG-UI conformance validator (`ag-ui-validate`, PyPI, pinned in
requirements.txt) over every AG-UI stream given: no error and no warning.

    python tests/python/agui_conformance.py DIR_OR_FILE...

Directories contribute their `*.sse` files whose name says the stream is
AG-UI output (`<scenario>.<from>-ag-ui.sse`) or that are AG-UI captures
(`*.ag-ui.sse`, `tests/fixtures/ag-ui/*.sse`). Each file is validated on its
own, with the features its scenario exercises declared. Exit 1 on any
finding, on a stream expected to be refused that is not, or on zero files.
"""
import glob
import json
import os
import subprocess
import sys

CLI = os.path.join(os.path.dirname(sys.executable), "ag-ui-validate")

# Scenarios whose stream exercises a declarable feature (ag-ui-validate
# --features): shared state enables AGUI305 (a snapshot must be sent).
FEATURES = {"state": ["shared-state"]}

# Streams that must be refused, and by which rule: the fixture's hand-added
# event of a type no SDK knows, passed through unchanged on an AG-UI to AG-UI
# route (a same-dialect client gets the upstream's events as sent). Proves
# the validator can fail here.
# The cut fixture (an input, cut by hand) must be refused for its missing end
# (and may be for what it leaves open).
# A model's tool input that does not parse (the Vercel fixture tool_errors,
# as streamText writes it: tool-input-delta, then tool-input-error) went out
# as TOOL_CALL_ARGS while it streamed, as AG-UI clients show arguments live;
# no later delta could make it parse without making input up, and the
# call's TOOL_CALL_RESULT says the input was invalid. AGUI204 refuses the
# unparsed arguments, which is the stream telling the truth.
REFUSED = {
    "unknown_events.ag-ui-ag-ui": "AGUI503",
    "unknown_events": "AGUI503",
    "cut_mid_message": "AGUI003",
    "tool_errors.vercel-ag-ui": "AGUI204",
}

# Upstream dialects that cannot carry a feature: the AG-Kit server drops
# state, so an AG-Kit upstream's `state` scenario has none to send.
CANNOT_CARRY = {"shared-state": ["agkit"]}


def files(args):
    out = []
    for a in args:
        if os.path.isdir(a):
            for f in sorted(glob.glob(os.path.join(a, "*.sse"))):
                name = os.path.basename(f)
                if name.endswith("-ag-ui.sse") or name.endswith(".ag-ui.sse") or "fixtures/ag-ui" in f:
                    out.append(f)
        else:
            out.append(a)
    return out


def scenario(path):
    name = os.path.basename(path)[: -len(".sse")]
    return name, name.split(".")[0]


def validate(path):
    name, sc = scenario(path)
    source = name.split(".")[1].split("-")[0] if "." in name else "ag-ui"
    features = [f for f in FEATURES.get(sc, []) if source not in CANNOT_CARRY.get(f, [])]
    cmd = [CLI, "--json", "--fail-on", "warning", path]
    if features:
        cmd[1:1] = ["--features", ",".join(features)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        return f"tool failure (exit {p.returncode}): {(p.stdout + p.stderr).strip()[:300]}"
    found = [d for d in rep.get("diagnostics", []) if d.get("severity") in ("error", "warning")]
    rules = sorted({d.get("rule") for d in found})
    if rep.get("internalErrors"):
        return f"validator internal errors: {rep['internalErrors']}"
    want = REFUSED.get(name)
    if want is not None:
        if want not in rules:
            return f"expected {want}, got {rules or 'nothing'}"
        return None
    if found:
        d = found[0]
        return f"{len(found)} finding(s): {d.get('rule')} {d.get('severity')}: {d.get('message')}"
    return None


def main():
    todo = files(sys.argv[1:])
    if not todo:
        print("ag-ui-validate: no AG-UI streams given")
        return 1
    failed = 0
    for f in todo:
        why = validate(f)
        name = scenario(f)[0]
        if why:
            failed += 1
            print(f"FAIL {name}: {why}")
        else:
            print(f"ok {name}")
    print(f"{len(todo) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
