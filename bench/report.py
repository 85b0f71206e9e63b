#!/usr/bin/env python3
"""Turn one bench/run.sh run (target/bench/*.json) into the results section of
docs/benchmarks.md and the plot docs/benchmarks.png.

    python bench/report.py target/bench
    python bench/report.py --print target/bench   # print the tables, write nothing

Only the part of docs/benchmarks.md between the `results:begin` and
`results:end` markers is replaced; the prose around it stays.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
PNG = ROOT / "docs" / "benchmarks.png"
BEGIN = "<!-- results:begin (written by bench/report.py) -->"
END = "<!-- results:end -->"
TARGETS = ["upstream", "nginx", "babelgate", "node", "node-lean", "python"]
TARGET_NAMES = {
    "upstream": "(a) upstream direct",
    "nginx": "(b) nginx pass-through",
    "babelgate": "(c) babelgate AG-UI→Vercel",
    "node": "(d) Node @ag-ui/client HttpAgent.runAgent + ai",
    "node-lean": "(d2) Node lean: transformHttpEventStream + ai",
    "python": "(e) Python FastAPI + ag-ui-protocol",
}
# The binary transport and WebSocket rows: babelgate with the same upstream
# and workloads, each on a fresh process. In the tables they follow (c).
WIRE_TARGETS = [
    "babelgate-agui",
    "babelgate-bin",
    "babelgate-ws",
    "babelgate-wsbin",
    "babelgate-hai",
    "babelgate-haibin",
    "babelgate-binup",
    "babelgate-wsup",
    "babelgate-wsbinup",
]
TARGET_NAMES.update(
    {
        "babelgate-agui": "(c-agui) babelgate AG-UI→AG-UI, SSE both sides (frames passed through)",
        "babelgate-bin": "(c-bin) babelgate AG-UI→AG-UI, protobuf client",
        "babelgate-ws": "(c-ws) babelgate AG-UI→AG-UI, WebSocket client (JSON)",
        "babelgate-wsbin": "(c-wsbin) babelgate AG-UI→AG-UI, WebSocket client (ag-ui.proto)",
        "babelgate-hai": "(c-hai) babelgate AG-UI→HAI, SSE client",
        "babelgate-haibin": "(c-haibin) babelgate AG-UI→HAI, protobuf client",
        "babelgate-binup": "(c-binup) babelgate AG-UI→Vercel, protobuf upstream",
        "babelgate-wsup": "(c-wsup) babelgate AG-UI→Vercel, WebSocket upstream (JSON)",
        "babelgate-wsbinup": "(c-wsbinup) babelgate AG-UI→Vercel, WebSocket upstream (ag-ui.proto)",
    }
)
# Each transport row against the row it differs from only in that transport.
WIRE_BASELINES = [
    ("protobuf client (passthrough route: converted at the edge)", "babelgate-bin", "babelgate-agui"),
    ("WebSocket client, JSON", "babelgate-ws", "babelgate-agui"),
    ("WebSocket client, ag-ui.proto", "babelgate-wsbin", "babelgate-agui"),
    ("protobuf client (translating route: the encoder writes binary)", "babelgate-haibin", "babelgate-hai"),
    ("protobuf upstream", "babelgate-binup", "babelgate"),
    ("WebSocket upstream, JSON", "babelgate-wsup", "babelgate"),
    ("WebSocket upstream, ag-ui.proto", "babelgate-wsbinup", "babelgate"),
]


def table_rows():
    i = TARGETS.index("babelgate") + 1
    return TARGETS[:i] + WIRE_TARGETS + TARGETS[i:]


def lines(path: Path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []


def fmt(x, digits=0):
    if x is None or x != x:
        return "–"
    return f"{x:,.{digits}f}"


def ms(us):
    return None if us is None else us / 1000.0


def main() -> int:
    args = sys.argv[1:]
    print_only = "--print" in args
    args = [a for a in args if a != "--print"]
    out = Path(args[0] if args else ROOT / "target" / "bench")
    machine = json.loads((out / "machine.json").read_text())
    after = json.loads((out / "machine-after.json").read_text()) if (out / "machine-after.json").exists() else {}
    core = json.loads((out / "core.json").read_text()) if (out / "core.json").exists() else []
    trans = {r["name"]: r for r in lines(out / "translate.jsonl")}
    load = {r["label"]: r for r in lines(out / "load.jsonl")}

    md = []
    md.append(
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['mem_gib']} GiB; Linux {machine['kernel']}; "
        f"{machine['rustc']}; Node {machine['node']}; Python {machine['python']}; nginx {machine['nginx']}. "
        f"Load average before / after the run: {machine['load_before']} / {after.get('load_after', '?')} "
        "(the machine is shared: other work ran at the same time)."
    )
    if machine.get("quick"):
        md.append("\n**QUICK=1 smoke run: small sizes, the numbers mean nothing.**")

    if core:
        md.append("\n### Translation core (core-bench, one thread, mixed stream)\n")
        md.append("| benchmark | events | events/s | input MB/s | output MB/s |")
        md.append("|---|---:|---:|---:|---:|")
    for r in core:
        md.append(
            f"| {r['name']} | {r['events']:,} | {fmt(r['events_per_sec'])} | "
            f"{fmt(r['bytes_in_per_sec'] / 1e6, 1)} | {fmt(r['bytes_out_per_sec'] / 1e6, 1)} |"
        )

    if trans:
        md.append("\n### Whole process: AG-UI stream (Python SDK) to Vercel, best of 3\n")
        md.append("| translator | wall s | user s | max RSS MiB | output bytes | babelgate is faster by |")
        md.append("|---|---:|---:|---:|---:|---:|")
        bg = trans.get("babelgate", {}).get("wall_s")
        names = {
            "babelgate": "`babelgate translate --from ag-ui --to vercel`",
            "node": "Node: `transformHttpEventStream` → `createUIMessageStream` → `JsonToSseTransformStream`",
            "python": "Python: ag-ui-protocol pydantic models + `json.dumps`",
        }
        for name in ["babelgate", "node", "python"]:
            r = trans.get(name)
            if not r:
                continue
            ratio = "–" if name == "babelgate" or not bg else f"{r['wall_s'] / bg:.1f}x"
            md.append(
                f"| {names[name]} | {r['wall_s']:.2f} | {r['user_s']:.2f} | {r['max_rss_kib'] / 1024:.0f} | "
                f"{r['out_bytes']:,} | {ratio} |"
            )

    def load_table(scenario: str, title: str):
        rows = [(t, load.get(f"{scenario}/{t}")) for t in table_rows()]
        rows = [(t, r) for t, r in rows if r]
        if not rows:
            return
        r0 = rows[0][1]
        md.append(
            f"\n### {title}: {r0['streams']:,} streams × {r0['events_per_stream']:,} events"
            + (f" at {r0['rate_per_stream']:g}/s each" if r0["rate_per_stream"] else ", as fast as possible")
            + "\n"
        )
        md.append(
            "| system | delivered | failed streams | events/s | added latency p50 / p99 / p99.9 ms | "
            "TTFB p50 / p99 ms | CPU s (% of a core) | peak RSS MiB |"
        )
        md.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for t, r in rows:
            lat = r["latency_us"]
            tt = r["ttfb_us"]
            cpu = "–" if r["sut_cpu_s"] is None else f"{r['sut_cpu_s']:.1f} ({r['sut_cpu_pct']:.0f}%)"
            rss = "–" if r["sut_rss_peak_mib"] is None else f"{r['sut_rss_peak_mib']:.0f}"
            md.append(
                f"| {TARGET_NAMES[t]} | {r['delivered_events']:,} / {r['expected_events']:,} | {r['failed_streams']} | "
                f"{fmt(r['events_per_s'])} | {fmt(ms(lat['p50']), 2)} / {fmt(ms(lat['p99']), 2)} / {fmt(ms(lat['p999']), 2)} | "
                f"{fmt(ms(tt['p50']), 2)} / {fmt(ms(tt['p99']), 2)} | {cpu} | {rss} |"
            )

    load_table("saturation", "Through the network at saturation")
    load_table("latency", "Added latency under load")
    opens = sorted(
        (r for k, r in load.items() if k.startswith("open") and k.endswith("/babelgate")),
        key=lambda r: r["events_per_stream"],
    )
    if opens:
        md.append("\n### Concurrent open streams (babelgate, a fresh process each)\n")
        md.append(
            "| streams | events per stream (1/s) | delivered | failed | peak RSS MiB | RSS before MiB | "
            "added latency p99 ms | TTFB p99 ms |"
        )
        md.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for o in opens:
            md.append(
                f"| {o['streams']:,} | {o['events_per_stream']} | {o['delivered_events']:,} / {o['expected_events']:,} | "
                f"{o['failed_streams']} | {o['sut_rss_peak_mib']:.0f} | {o['sut_rss_start_mib']:.0f} | "
                f"{fmt(ms(o['latency_us']['p99']), 2)} | {fmt(ms(o['ttfb_us']['p99']), 2)} |"
            )
            if o.get("first_error"):
                md.append(f"\nFirst error ({o['events_per_stream']} events): `{o['first_error']}`.")

    # ---- targets, as ratios from this run
    md.append("\n### Targets (ratios from this run)\n")
    md.append("| target | measured | met |")
    md.append("|---|---:|:---:|")

    def target(name, value, ok, unit=""):
        md.append(f"| {name} | {value}{unit} | {'yes' if ok else 'no'} |")

    av = next((r for r in core if r["name"] == "translate/ag-ui-vercel"), None)
    if av:
        target("core ≥ 2,000,000 events/s per core (mixed stream, ag-ui→vercel)", fmt(av["events_per_sec"]), av["events_per_sec"] >= 2e6, " events/s")
    if "babelgate" in trans:
        bg = trans["babelgate"]["wall_s"]
        if "node" in trans:
            r = trans["node"]["wall_s"] / bg
            target("`translate` ≥ 25x faster than Node SDKs", f"{r:.1f}x", r >= 25)
        if "python" in trans:
            r = trans["python"]["wall_s"] / bg
            target("`translate` ≥ 20x faster than Python SDK", f"{r:.1f}x", r >= 20)
    sb, sn, sl, sp = (load.get(f"saturation/{t}") for t in ("babelgate", "node", "node-lean", "python"))
    if sb and sn:
        r = sb["events_per_s"] / max(sn["events_per_s"], 1e-9)
        target("network saturation ≥ 10x events/s of (d) Node runAgent", f"{r:.1f}x", r >= 10)
    if sb and sl:
        r = sb["events_per_s"] / max(sl["events_per_s"], 1e-9)
        target("network saturation ≥ 10x events/s of (d2) Node lean", f"{r:.1f}x", r >= 10)
    if sb and sp:
        r = sb["events_per_s"] / max(sp["events_per_s"], 1e-9)
        target("network saturation ≥ 15x events/s of (e) Python", f"{r:.1f}x", r >= 15)
    lb, ln = load.get("latency/babelgate"), load.get("latency/nginx")
    if lb and ln and lb["latency_us"]["p99"] is not None and ln["latency_us"]["p99"] is not None:
        r = lb["latency_us"]["p99"] / max(ln["latency_us"]["p99"], 1e-9)
        target("1,000 × 20 events/s: babelgate p99 ≤ 1.2x nginx p99", f"{r:.2f}x", r <= 1.2)
    for o in opens:
        ok = o["sut_rss_peak_mib"] <= 300 and o["failed_streams"] == 0 and o["streams"] >= 10000
        target(
            f"10,000 open streams, RSS ≤ 300 MiB (ran {o['streams']:,}, {o['events_per_stream']} events each)",
            f"{o['sut_rss_peak_mib']:.0f} MiB",
            ok,
        )

    wire_summary(md, load)

    section = "\n".join(md)
    if print_only:
        print(section)
        return 0
    text = DOC.read_text() if DOC.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{BEGIN}\n{section}\n\n![benchmarks](benchmarks.png)\n{END}{tail}")
    print(section)

    # ---- the plot
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(3, 2, figsize=(13, 13))
    colors = {"upstream": "#999999", "nginx": "#4c72b0", "babelgate": "#dd8452", "node": "#55a868", "node-lean": "#8fd19e", "python": "#c44e52"}

    a = ax[0][0]
    names = [n for n in ["babelgate", "node", "python"] if n in trans]
    a.bar(names, [trans[n]["wall_s"] for n in names], color=[colors[n] for n in names])
    a.set_title("translate AG-UI→Vercel, whole process (s, lower is better)")
    for i, n in enumerate(names):
        a.text(i, trans[n]["wall_s"], f"{trans[n]['wall_s']:.2f}s", ha="center", va="bottom")

    a = ax[0][1]
    ts = [t for t in TARGETS if f"saturation/{t}" in load]
    vals = [load[f"saturation/{t}"]["events_per_s"] for t in ts]
    a.bar(ts, vals, color=[colors[t] for t in ts])
    a.set_title("events/s delivered at saturation (higher is better)")
    a.set_yscale("log")
    for i, v in enumerate(vals):
        a.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=8)

    a = ax[1][0]
    ts = [t for t in TARGETS if f"latency/{t}" in load]
    width = 0.27
    for j, p in enumerate(["p50", "p99", "p999"]):
        v = [load[f"latency/{t}"]["latency_us"][p] / 1000 for t in ts]
        a.bar([i + (j - 1) * width for i in range(len(ts))], v, width, label=p)
    a.set_xticks(range(len(ts)), ts)
    a.set_yscale("log")
    if ts:
        r0 = load[f"latency/{ts[0]}"]
        a.set_title(f"added latency per event, ms ({r0['streams']:,} streams × {r0['rate_per_stream']:g} events/s)")
    a.legend()

    a = ax[1][1]
    pairs = [r for r in core if r["name"].startswith("translate/")]
    a.barh([r["name"].split("/", 1)[1] for r in pairs], [r["events_per_sec"] / 1e6 for r in pairs], color="#dd8452")
    a.axvline(2.0, color="black", linestyle="--", linewidth=1)
    a.set_title("translation core, million events/s (one thread)")
    a.invert_yaxis()

    wire_plot(ax[2][0], ax[2][1], load)

    fig.suptitle("babelgate benchmarks (one run of bench/run.sh)")
    fig.tight_layout()
    fig.savefig(PNG, dpi=90)
    print(f"wrote {DOC.relative_to(ROOT)} and {PNG.relative_to(ROOT)}")
    return 0


def cpu_us_per_event(r):
    if r.get("sut_cpu_s") is None or not r["delivered_events"]:
        return None
    return 1e6 * r["sut_cpu_s"] / r["delivered_events"]


def wire_summary(md, load):
    """One line per transport: its row against the same route over SSE."""
    lines = []
    streams = None
    for what, row, base in WIRE_BASELINES:
        s, sb = load.get(f"saturation/{row}"), load.get(f"saturation/{base}")
        l, lb = load.get(f"latency/{row}"), load.get(f"latency/{base}")
        if not ((s and sb) or (l and lb)):
            continue
        eps = cpu = lcpu = p99 = "–"
        if s and sb:
            eps = f"{s['events_per_s'] / max(sb['events_per_s'], 1e-9):.2f}x"
            c, cb = cpu_us_per_event(s), cpu_us_per_event(sb)
            if c is not None and cb:
                cpu = f"{c:.2f} / {cb:.2f} µs ({c / cb:.2f}x)"
        if l and lb:
            c, cb = cpu_us_per_event(l), cpu_us_per_event(lb)
            if c is not None and cb:
                lcpu = f"{c:.1f} / {cb:.1f} µs ({c / cb:.2f}x)"
        if l and lb and l["latency_us"]["p99"] is not None and lb["latency_us"]["p99"]:
            streams = l["streams"]
            p99 = f"{l['latency_us']['p99'] / 1000:.2f} / {lb['latency_us']['p99'] / 1000:.2f} ms"
        base_name = TARGET_NAMES[base].split(" ", 1)[0]
        lines.append(f"| {what} | {base_name} | {eps} | {cpu} | {lcpu} | {p99} |")
    if not lines:
        return
    md.append("\n### Transports against SSE (ratios from this run)\n")
    md.append(
        "| transport | against | events/s at saturation | CPU per event at saturation (its row / SSE row) | "
        "CPU per event under the latency workload | added latency p99"
        + (f" at {streams:,} streams" if streams else "")
        + " (its row / SSE row) |"
    )
    md.append("|---|---|---:|---:|---:|---:|")
    md.extend(lines)


def wire_plot(left, right, load):
    """The transport rows beside (c): saturation events/s and CPU per event,
    and added latency under load."""
    rows = ["babelgate"] + WIRE_TARGETS
    short = lambda t: "c" if t == "babelgate" else "c-" + t.split("-", 1)[1]
    ts = [t for t in rows if f"saturation/{t}" in load]
    vals = [load[f"saturation/{t}"]["events_per_s"] / 1e6 for t in ts]
    left.bar([short(t) for t in ts], vals, color="#dd8452")
    for i, v in enumerate(vals):
        left.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
    cpu = [cpu_us_per_event(load[f"saturation/{t}"]) for t in ts]
    if any(c is not None for c in cpu):
        twin = left.twinx()
        twin.plot(range(len(ts)), [c if c is not None else float("nan") for c in cpu], "ko", label="CPU µs/event")
        twin.set_ylabel("CPU µs per event (dots)")
        twin.set_ylim(bottom=0)
    left.set_title("transports at saturation: million events/s (bars)", fontsize=10)
    left.tick_params(axis="x", labelrotation=45, labelsize=8)

    ts = [t for t in rows if f"latency/{t}" in load]
    width = 0.27
    for j, p in enumerate(["p50", "p99", "p999"]):
        v = [load[f"latency/{t}"]["latency_us"][p] / 1000 for t in ts]
        right.bar([i + (j - 1) * width for i in range(len(ts))], v, width, label=p)
    right.set_xticks(range(len(ts)), [short(t) for t in ts])
    right.tick_params(axis="x", labelrotation=45, labelsize=8)
    right.set_yscale("log")
    right.set_title("transports: added latency per event, ms (latency workload)", fontsize=10)
    if ts:
        bottom, top = right.get_ylim()
        right.set_ylim(bottom, top * 10)
        right.legend(fontsize=8, ncol=3, loc="upper center")


if __name__ == "__main__":
    sys.exit(main())
