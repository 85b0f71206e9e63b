#!/usr/bin/env python3
"""Run ag-ui-validate (PyPI ag-ui-validate, see oracle-requirements.txt) over
AG-UI streams and list every error and warning.

    target/oracle-venv/bin/python tests/python/oracle_validate.py [URL...]

Inputs: tests/fixtures/oracle/*ag-ui.sse (native pydantic-ai captures),
target/oracle/*gw-vercel-to-ag-ui.sse (babelgate output from capture.mjs, if
present), the golden AG-UI outputs crates/app/registry/tests/snapshots/*-ag-ui.snap (insta header
and any "error: ...\\n---\\n" prefix stripped into target/oracle/golden-ag-ui/),
and any live URL given (ag-ui-validate POSTs its own minimal RunAgentInput).
Writes target/oracle/validate.json. Exit 0 always: this reports, it does not gate.
"""
import glob, json, os, subprocess, sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "target", "oracle")
CLI = os.path.join(os.path.dirname(sys.executable), "ag-ui-validate")


def golden_files():
    d = os.path.join(OUT, "golden-ag-ui")
    os.makedirs(d, exist_ok=True)
    files = []
    for snap in sorted(glob.glob(os.path.join(ROOT, "crates", "app", "registry", "tests", "snapshots", "*-ag-ui.snap"))):
        text = open(snap, encoding="utf-8").read()
        assert text.startswith("---\n")
        body = text.split("\n---\n", 1)[1]
        if body.startswith("error: "):
            body = body.split("\n---\n", 1)[1]
        # insta trims the trailing blank line of the stored output: put it back.
        body = body.rstrip("\n") + "\n\n"
        f = os.path.join(d, os.path.basename(snap)[:-5] + ".sse")
        with open(f, "w", encoding="utf-8") as fh:
            fh.write(body)
        files.append(f)
    return files


def run(target):
    p = subprocess.run([CLI, "--json", "--timeout", "30", target], capture_output=True, text=True)
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        return {"target": target, "exit": p.returncode, "toolFailure": (p.stdout + p.stderr).strip()[:500]}
    diags = [
        {k: d.get(k) for k in ("rule", "severity", "message", "eventIndex") if k in d}
        for d in rep.get("diagnostics", [])
        if d.get("severity") in ("error", "warning")
    ]
    return {"target": target, "exit": p.returncode, "summary": rep.get("summary"), "eventCount": rep.get("eventCount"),
            "diagnostics": diags, "internalErrors": rep.get("internalErrors")}


def main():
    groups = {
        "native": sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "oracle", "*ag-ui.sse"))),
        "gateway_live_captures": sorted(glob.glob(os.path.join(OUT, "*gw-vercel-to-ag-ui.sse"))),
        "golden": golden_files(),
        "live": sys.argv[1:],
    }
    result = {}
    for g, targets in groups.items():
        result[g] = [run(t) for t in targets]
        for r in result[g]:
            name = os.path.relpath(r["target"], ROOT) if os.path.exists(r["target"]) else r["target"]
            s = r.get("summary") or {}
            print(f"[{g}] {name}: exit {r['exit']}, {s.get('errors', '?')} errors, {s.get('warnings', '?')} warnings"
                  + (f" TOOL FAILURE {r['toolFailure']}" if "toolFailure" in r else ""))
            for d in r.get("diagnostics", []):
                print(f"    {d.get('severity')} {d.get('rule')} @event {d.get('eventIndex')}: {d.get('message')}")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "validate.json"), "w") as f:
        json.dump(result, f, indent=2, ensure_ascii=False)


if __name__ == "__main__":
    main()
