#!/usr/bin/env python3
"""Turn one crates/tools/bench/run.sh run (target/bench/*.json) into the results section of
docs/benchmarks.md and the plot docs/benchmarks.png.

    python crates/tools/bench/report.py target/bench
    python crates/tools/bench/report.py --print target/bench   # print the tables, write nothing

Only the parts of docs/benchmarks.md between the `targets:begin` and
`targets:end` markers (every target of every round, at the top) and between
`results:begin` and `results:end` are replaced; the prose around them stays.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "benchmarks.md"
PNG = ROOT / "docs" / "benchmarks.png"
BEGIN = "<!-- results:begin (written by crates/tools/bench/report.py) -->"
END = "<!-- results:end -->"
TBEGIN = "<!-- targets:begin (written by crates/tools/bench/report.py) -->"
TEND = "<!-- targets:end -->"
TARGETS = ["upstream", "nginx", "babelgate", "babelgate-nolog", "node", "node-lean", "python"]
TARGET_NAMES = {
    "upstream": "(a) upstream direct",
    "nginx": "(b) nginx pass-through",
    "babelgate": "(c) babelgate AG-UI→Vercel",
    "babelgate-nolog": "(c-nolog) babelgate AG-UI→Vercel, resume = false (no run log)",
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
    i = TARGETS.index("babelgate-nolog") + 1
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
    startup = {r["name"].removeprefix("startup-"): r for r in lines(out / "startup.jsonl")}
    same = json.loads((out / "same-content.json").read_text()) if (out / "same-content.json").exists() else None
    core_same = {r["label"]: r for r in lines(out / "core-same.jsonl")}
    shapes = shape_rows(out / "shapes.txt")
    load = {r["label"]: r for r in lines(out / "load.jsonl")}
    alias_latency_runs(load)
    date = machine.get("date", "?")

    md = []
    md.append(
        f"Run of {date} at {machine.get('commit', '?')}. "
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['mem_gib']} GiB; Linux {machine['kernel']}; "
        f"{machine['rustc']}; Node {machine['node']}; Python {machine['python']}; nginx {machine['nginx']}. "
        f"Load average before / after the run: {machine['load_before']} / {after.get('load_after', '?')} "
        "(the machine is shared: other work ran at the same time; each load table gives the 1-minute load "
        "average at the start of each run, which counts the benchmark's own 2-3 busy processes)."
    )
    if machine.get("quick"):
        md.append("\n**QUICK=1 smoke run: small sizes, the numbers mean nothing.**")

    if core:
        md.append("\n### Translation core (core-bench, one thread, mixed stream)\n")
        md.append("| benchmark | events | events/s | input MB/s | output MB/s | CPU µs/event |")
        md.append("|---|---:|---:|---:|---:|---:|")
    for r in core:
        md.append(
            f"| {r['name']} | {r['events']:,} | {fmt(r['events_per_sec'])} | "
            f"{fmt(r['bytes_in_per_sec'] / 1e6, 1)} | {fmt(r['bytes_out_per_sec'] / 1e6, 1)} | "
            f"{fmt(r.get('cpu_us_per_event'), 3)} |"
        )

    if trans:
        md.append("\n### Whole process: AG-UI stream (Python SDK) to Vercel, best of 3\n")
        md.append(
            "| translator | wall s | user s | max RSS MiB | output bytes | chunks | babelgate is faster by | "
            "start-up s (100 events) | start-up's share of the run |"
        )
        md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        chunks = {Path(o["file"]).name.removeprefix("translate-").removesuffix(".out"): o["chunks"] for o in (same or {}).get("outputs", [])}
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
            st = startup.get(name)
            md.append(
                f"| {names[name]} | {r['wall_s']:.2f} | {r['user_s']:.2f} | {r['max_rss_kib'] / 1024:.0f} | "
                f"{r['out_bytes']:,} | {fmt(chunks.get(name))} | {ratio} | {fmt(st and st['wall_s'], 2)} | "
                f"{'–' if not st else format(st['wall_s'] / r['wall_s'], '.0%')} |"
            )
        if same:
            if same["same"]:
                md.append(
                    "\nThe three outputs carry the same content: `crates/tools/bench/same_content.py` parsed every `data:` payload "
                    f"of each ({', '.join(str(o['chunks']) for o in same['outputs'])} chunks) and found them equal in order, "
                    "as JSON values, ids compared by where each first appears, the `start` chunk's optional messageId (made up per run, or left out) aside."
                )
            else:
                cells = []
                for d in same["differences"]:
                    by = lambda m: ", ".join(f"{n} `{t}`" for t, n in m.items()) or "nothing"
                    cells.append(
                        f"{Path(d['file']).name}: {d['stretches']:,} stretches differ; only in babelgate's: "
                        f"{by(d['only_in_first_by_type'])}; only in this one: {by(d['only_in_this_by_type'])} "
                        f"(first at chunk {d['first_at_chunk']:,})"
                    )
                md.append(
                    "\n**The outputs are not chunk for chunk the same.** `crates/tools/bench/same_content.py` parsed every `data:` payload "
                    f"of each ({', '.join(str(o['chunks']) for o in same['outputs'])} chunks) and compared them in order as JSON "
                    "values (ids by where each first appears; the `start` chunk's optional messageId and babelgate's "
                    "`providerMetadata` aside): " + "; ".join(cells) + "."
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
    md.extend(cpu_table(load, core_same))
    md.extend(saturation_rounds_table(load))
    load_table("latency", "Added latency under load")
    opens = open_rows(load)
    if opens:
        md.append("\n### Concurrent open streams (a fresh babelgate each)\n")
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

    md.extend(round_two_tables(load, lines(out / "store.jsonl")))

    md.extend(shapes_table(shapes))
    wire_summary(md, load)
    rows = targets(core, trans, load, core_same, shapes, lines(out / "store.jsonl"))
    glance = glance_table(rows, date)

    section = "\n".join(md)
    if print_only:
        print(glance + "\n\n" + section)
        return 0
    text = DOC.read_text() if DOC.exists() else f"# Benchmarks\n\n{TBEGIN}\n{TEND}\n\n{BEGIN}\n{END}\n"
    text = replace_between(text, BEGIN, END, f"{section}\n\n![benchmarks](benchmarks.png)")
    text = replace_between(text, TBEGIN, TEND, glance)
    DOC.write_text(text)
    print(glance + "\n\n" + section)

    # ---- the plot
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(6, 2, figsize=(13, 29))
    colors = {
        "upstream": "#999999",
        "nginx": "#4c72b0",
        "babelgate": "#dd8452",
        "babelgate-nolog": "#f2b880",
        "node": "#55a868",
        "node-lean": "#8fd19e",
        "python": "#c44e52",
    }

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
    # Issue 14's targets: every pair 1.5 M, AG-UI→Vercel 3 M.
    a.axvline(1.5, color="black", linestyle="--", linewidth=1)
    a.axvline(3.0, color="black", linestyle=":", linewidth=1)
    a.set_title("translation core, million events/s (one thread; targets 1.5 and 3)")
    a.invert_yaxis()

    plot_round_two(ax, load, lines(out / "store.jsonl"), colors)
    wire_plot(ax[5][0], ax[5][1], load)

    fig.suptitle("babelgate benchmarks (one run of crates/tools/bench/run.sh)")
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    fig.savefig(PNG, dpi=90)
    print(f"wrote {DOC.relative_to(ROOT)} and {PNG.relative_to(ROOT)}")
    return 0


def replace_between(text, begin, end, body):
    """`text` with what lies between the markers `begin` and `end` replaced
    (the markers added at the end when missing)."""
    if begin not in text:
        text += f"\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def shape_rows(path: Path):
    """The memory test's table rows: (input, shape, bytes MiB, peak MiB, outcome)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5:
            continue
        num = lambda c: float(c.split()[0])
        try:
            out.append((cells[0], cells[1], num(cells[2]), num(cells[3]), cells[4]))
        except ValueError:
            continue
    return out


# The memory test's own bound (crates/app/babelgate/tests/memory.rs): 8x the
# input's bytes plus 6 MiB (the runtime, buffers and the client's copy).
SHAPE_CONSTANT_MIB = 6.0


def shapes_table(shapes):
    """Peak heap per request and per upstream event, by shape: the worst
    input of each kind (over client dialects) for each shape."""
    if not shapes:
        return []
    kinds = {}
    for inp, shape, size, peak, outcome in shapes:
        kind = inp.split(",")[0] + (" (WebSocket)" if "WebSocket" in inp else "") + (" protobuf" if " proto " in inp else "")
        kind = {"request": "request body (HTTP)", "event": "upstream event (SSE)"}.get(kind, kind)
        kind = {"request (WebSocket)": "request (WebSocket)", "event protobuf": "upstream event (protobuf)"}.get(kind, kind)
        k = (kind, shape)
        worst = kinds.get(k)
        if worst is None or peak > worst[2]:
            kinds[k] = (inp, size, peak, outcome)
    md = [
        "\n### Peak memory per request and per upstream event, by shape (issue 37)\n",
        "`cargo test -p babelgate --test memory` (debug build, as [memory.md](memory.md)): the most heap allocated at once "
        "while one request runs, counted by the test binary's allocator, over what was allocated before. The worst client "
        "dialect of each row; the rule is 8x the input's bytes plus 6 MiB (what the test holds every case to).\n",
        "| input | shape | bytes MiB | peak heap MiB | peak / bytes | worst of | outcome |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for (kind, shape), (inp, size, peak, outcome) in kinds.items():
        md.append(f"| {kind} | {shape} | {size:.1f} | {peak:.1f} | {peak / size:.1f}x | {inp} | {outcome} |")
    return md


# Targets run.sh does not measure: (round, target, last measured, met, date).
STATIC_TARGETS = [
    (
        "scale-out (41)",
        "1, 2, 4 instances behind nginx per store: throughput, CPU per event, the ceiling (`crates/tools/bench/scale.sh`)",
        "flat with N on 2 cores; one Redis the ceiling (about 200,000 events/s at saturation)",
        "measured (no target)",
        "2026-11-29",
    ),
]


# What an earlier run measured, shown when this run did not measure it (a
# part-only or cut run): (a substring of the target rows it stands for,
# round, target, last measured, met, date).
EARLIER = [
    ("≤ 16 KiB per open stream", "two (14)", "≤ 16 KiB per open stream (9,900 open)", "14.0 KiB at 15 events, 15.8 at 30 (no log: 11.0, 11.0)", "yes", "2026-11-28"),
    (
        "RSS back within 2 MiB or 15%",
        "three (43)",
        "RSS back within 2 MiB or 15% of idle after the streams close",
        "the 2026-11-28 run's RSS under this bound: 14.6 and 14.5 MiB against idle 13.3 and 13.0 (no log: 14.1, 13.6 against 13.0, 12.6)",
        "yes",
        "2026-11-28",
    ),
    ("RSS within 10% of idle", "two (14)", "RSS within 10% of idle 30 s after the streams close", "+10.2% and +11.9% (no log: +8%, +8%)", "replaced (43): 2 MiB or 15%", "2026-11-28"),
    ("the Redis store", "two (14)", "the Redis store: run-log events/s of one Redis, and its cost per event", "454,493 events/s in batches of 16; +2.2 µs CPU per event at saturation", "measured (no target)", "2026-11-28"),
    ("10,000 concurrent open streams", "one (6)", "10,000 concurrent open streams with RSS ≤ 300 MiB (9,900 here: the file limit)", "180 MiB peak at 9,900", "yes", "2026-11-28"),
    (
        "peak memory of a request",
        "hostile two (37)",
        "peak memory of a request or an upstream event ≤ 8x its bytes + 6 MiB, every shape, dialect and transport",
        "worst 9.7 MiB for a 1.9 MiB event of long strings ([memory.md](memory.md), debug build)",
        "yes",
        "2026-11-29",
    ),
]


def targets(core, trans, load, core_same, shapes, store):
    """Every target of every round this run measured, as
    (round, target, measured, met); met is "yes", "no" or a word on a
    target that later rounds retired or replaced."""
    rows = []

    def add(rnd, name, value, ok):
        rows.append((rnd, name, value, ok if isinstance(ok, str) else ("yes" if ok else "no")))

    # ---- round three (issue 43)
    rounds = cpu_rounds(load, core_same)
    got = lambda k: [r[k] for r in rounds if r[k] is not None]
    if got("log_ratio"):
        m = median(got("log_ratio"))
        add(
            "three (43)",
            f"CPU per event relayed, run log on / off ≤ 1.15x (median of {len(got('log_ratio'))} rounds)",
            f"{m:.2f}x ({fmt(median(got('babelgate')), 3)} / {fmt(median(got('nolog')), 3)} µs; rounds "
            + ", ".join(f"{x:.2f}" for x in got("log_ratio"))
            + ")",
            m <= 1.15,
        )
    if got("nolog_ratio"):
        m = median(got("nolog_ratio"))
        add(
            "three (43)",
            f"CPU per event relayed without the log ≤ 1.2x the translation alone (core-bench, same stream; median of {len(got('nolog_ratio'))} rounds)",
            f"{m:.2f}x ({fmt(median(got('nolog')), 3)} / {fmt(median(got('core')), 3)} µs; rounds "
            + ", ".join(f"{x:.2f}" for x in got("nolog_ratio"))
            + ")",
            m <= 1.2,
        )
    if got("nginx"):
        add("three (43)", "CPU per event of nginx pass-through, the same rounds (the floor; no target)", f"{median(got('nginx')):.3f} µs", "measured (no target)")
    for streams, runs in latency_sizes(load).items():
        if streams != 1000:
            continue
        for system in BABELGATES:
            ratios = [r for r in p99_ratios(runs, system) if r is not None]
            if not ratios:
                continue
            m = median(ratios)
            add(
                "three (43)",
                f"1,000 streams × 20 events/s: p99 ≤ 1.1x nginx's, median of {len(ratios)} rounds ({system})",
                f"{m:.2f}x (rounds " + ", ".join(f"{x:.2f}" for x in ratios) + f"; spread {min(ratios):.2f}–{max(ratios):.2f})",
                m <= 1.1,
            )
    for o in open_rows(load):
        m = o.get("memory")
        if not m or m.get("bound_mib") is None:
            continue
        rec, idle = m["recovered_mib"], m["idle_mib"]
        add(
            "three (43)",
            f"RSS back within 2 MiB or 15% of idle after the streams close ({o['system']}, {o['events_per_stream']} events each)",
            f"idle {fmt(idle, 1)}, peak {fmt(o['sut_rss_peak_mib'], 1)}, after {m['recover_s']:g} s {fmt(rec, 1)} MiB (bound {fmt(m['bound_mib'], 1)})",
            rec is not None and rec <= m["bound_mib"],
        )
    sb, sn, sl, sp = (load.get(f"saturation/{t}") for t in ("babelgate", "node", "node-lean", "python"))
    if sb and sl:
        r = sb["events_per_s"] / max(sl["events_per_s"], 1e-9)
        add("two (14), the Node headline (43)", "saturation ≥ 10x the events/s of the lean Node bridge (what a Node user would write)", f"{r:.1f}x", r >= 10)
    if shapes:
        worst = max(shapes, key=lambda x: x[3] / max(x[2], 1e-9))
        over = [x for x in shapes if x[3] > 8 * x[2] + SHAPE_CONSTANT_MIB]
        add(
            "hostile two (37)",
            "peak memory of a request or an upstream event ≤ 8x its bytes + 6 MiB, every shape, dialect and transport",
            f"{len(shapes)} cases; worst {worst[3]:.1f} MiB for {worst[2]:.1f} MiB ({worst[0]}, {worst[1]})",
            not over,
        )

    # ---- round two (issue 14)
    # "On one core": events per second of the process's own CPU time, which
    # other work on the machine does not take away (wall events/s beside it).
    per_core = lambda r: 1e6 / r["cpu_us_per_event"] if r.get("cpu_us_per_event") else r["events_per_sec"]
    core_cell = lambda r: f"{fmt(per_core(r))} events per CPU second (wall: {fmt(r['events_per_sec'])} events/s)"
    av = next((r for r in core if r["name"] == "translate/ag-ui-vercel"), None)
    if av:
        add("two (14)", "core: AG-UI→Vercel ≥ 3,000,000 events/s on one core (mixed stream)", core_cell(av), per_core(av) >= 3e6)
    # Issue 14's 16 pairs are those of its four dialects; A2A came later.
    pairs = [r for r in core if r["name"].startswith("translate/") and "a2a" not in r["name"]]
    if pairs:
        slow = min(pairs, key=per_core)
        add(
            "two (14)",
            f"core: every one of the {len(pairs)} pairs of AG-UI, HAI, Vercel, AG-Kit ≥ 1,500,000 events/s",
            f"slowest ({slow['name'].split('/', 1)[1]}) {core_cell(slow)}",
            per_core(slow) >= 1.5e6,
        )
    a2a = [r for r in core if r["name"].startswith("translate/") and "a2a" in r["name"]]
    if a2a:
        slow = min(a2a, key=per_core)
        add("A2A (40)", f"core: the {len(a2a)} pairs with A2A (no target)", f"slowest ({slow['name'].split('/', 1)[1]}) {core_cell(slow)}", "measured (no target)")
    for row, which, system in ((sb, "", "babelgate"), (load.get("saturation/babelgate-nolog"), ", resume = false", "babelgate-nolog")):
        ratios = saturation_ratios(load, system)
        if ratios:
            add(
                "two (14)",
                f"saturation ≥ 0.8x nginx's events/s{which} (median of {len(ratios)} rounds)",
                f"{median(ratios):.2f}x",
                "retired (43): CPU per event instead",
            )
        vs_python = saturation_events(load, system)
        if vs_python and sp:
            per = median([x / max(sp["events_per_s"], 1e-9) for x in vs_python])
            add("one (6), two (14)", f"saturation ≥ 15x the Python bridge's events/s{which} (median of {len(vs_python)} rounds)", f"{per:.1f}x", per >= 15)
    for streams, runs in latency_sizes(load).items():
        for system in BABELGATES:
            ratios = p99_ratios(runs, system)
            if all(r is None for r in ratios):
                continue
            add(
                "two (14)",
                f"{streams:,} streams: {system} p99 ≤ nginx's in three runs in a row",
                ", ".join("–" if r is None else f"{r:.2f}x" for r in ratios) + (" (three in a row: yes)" if in_a_row(ratios) else ""),
                "retired (43): median of 5 rounds instead",
            )
    for o in open_rows(load):
        m = o.get("memory")
        if not m:
            continue
        kib = m["kib_per_open_stream"]
        add(
            "two (14)",
            f"≤ 16 KiB per open stream ({o['system']}, {m['max_open_at_once']:,} open, {o['events_per_stream']} events each)",
            f"{fmt(kib, 1)} KiB",
            kib is not None and kib <= 16 and o["failed_streams"] == 0,
        )
        rec, idle = m["recovered_mib"], m["idle_mib"]
        add(
            "two (14)",
            f"RSS within 10% of idle after the streams close ({o['system']}, {o['events_per_stream']} events each)",
            f"{fmt(rec, 1)} against {fmt(idle, 1)} MiB ({(rec / idle - 1) * 100:+.0f}%)" if rec and idle else "–",
            "replaced (43): 2 MiB or 15%",
        )
    if store:
        b16 = next((r for r in store if r["backend"] == "redis" and r["batch"] == 16), None)
        if b16:
            add("two (14)", "the Redis store: run-log events/s of one Redis, and its cost per event", f"{fmt(b16['events_per_s'])} events/s in batches of 16", "measured (no target)")

    # ---- round one (issue 6)
    if av:
        add("one (6)", "core: AG-UI→Vercel ≥ 2,000,000 events/s on one core", core_cell(av), per_core(av) >= 2e6)
    if "babelgate" in trans:
        bg = trans["babelgate"]
        cpu = lambda r: r["user_s"] + r["sys_s"]
        for name, who, goal in (("node", "the Node SDKs", 25), ("python", "the Python SDK", 20)):
            if name not in trans:
                continue
            wall = trans[name]["wall_s"] / bg["wall_s"]
            by_cpu = cpu(trans[name]) / max(cpu(bg), 1e-9)
            add(
                "one (6)",
                f"`translate` ≥ {goal}x faster than {who} (whole process, 200,000 events; wall, best of 3)",
                f"{wall:.1f}x (CPU time: {by_cpu:.1f}x)",
                wall >= goal,
            )
    if sb and sn:
        r = sb["events_per_s"] / max(sn["events_per_s"], 1e-9)
        add("one (6)", "saturation ≥ 10x the Node bridge with `runAgent`", f"{r:.1f}x", r >= 10)
    for streams, runs in latency_sizes(load).items():
        if streams != 1000:
            continue
        ratios = [r for r in p99_ratios(runs, "babelgate") if r is not None]
        if ratios:
            m = median(ratios)
            add("one (6)", f"1,000 streams × 20 events/s: p99 ≤ 1.2x nginx's (median of {len(ratios)} rounds)", f"{m:.2f}x", m <= 1.2)
    peaks = [o for o in open_rows(load) if o["system"] == "babelgate" and o.get("sut_rss_peak_mib")]
    if peaks:
        worst = max(peaks, key=lambda o: o["sut_rss_peak_mib"])
        add(
            "one (6)",
            "10,000 concurrent open streams with RSS ≤ 300 MiB (9,900 here: the file limit)",
            f"{worst['sut_rss_peak_mib']:.0f} MiB peak at {worst['streams']:,}",
            worst["sut_rss_peak_mib"] <= 300 and worst["failed_streams"] == 0,
        )
    return rows


def glance_table(rows, date):
    md = [
        f"Every target of every round, from the last `crates/tools/bench/run.sh` ({date}); a row marked \"not in this run\" gives "
        "the run that last measured it, with its date; "
        "written by `crates/tools/bench/report.py`. Medians are of rounds run side by side; the tables under \"Results\" give every round.\n",
        "| round (issue) | target | last measured | met | date |",
        "| --- | --- | --- | :---: | --- |",
    ]
    for rnd, name, value, ok in rows:
        md.append(f"| {rnd} | {name} | {value} | {ok} | {date} |")
    for key, rnd, name, value, ok, when in EARLIER:
        if not any(key in r[1] for r in rows):
            md.append(f"| {rnd} | {name} (not in this run) | {value} | {ok} | {when} |")
    for rnd, name, value, ok, when in STATIC_TARGETS:
        md.append(f"| {rnd} | {name} | {value} | {ok} | {when} |")
    return "\n".join(md)


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


# ---- issue 14 (round two): latency runs at two sizes, memory of open
# streams, the run-log store. Kept apart from the tables above.

LAT3 = ["upstream", "nginx", "babelgate", "babelgate-nolog"]
# The rows held to nginx's p99.
BABELGATES = ["babelgate", "babelgate-nolog"]


def latency_sizes(load):
    """{streams: {run: {system: row}}} of the `latency-<streams>-r<run>/<system>` rows."""
    sizes = {}
    for label, r in load.items():
        head, _, system = label.partition("/")
        parts = head.split("-")
        if len(parts) == 3 and parts[0] == "latency" and parts[2][:1] == "r" and parts[1].isdigit():
            sizes.setdefault(int(parts[1]), {}).setdefault(int(parts[2][1:]), {})[system] = r
    return {k: dict(sorted(v.items())) for k, v in sorted(sizes.items())}


def saturation_rounds(load):
    """{run: {system: row}} of the `saturation-r<run>/<system>` rows."""
    rounds = {}
    for label, r in load.items():
        head, _, system = label.partition("/")
        if head.startswith("saturation-r") and head[len("saturation-r"):].isdigit():
            rounds.setdefault(int(head[len("saturation-r"):]), {})[system] = r
    return dict(sorted(rounds.items()))


def saturation_events(load, system):
    """Each round's events/s of `system`."""
    return [row[system]["events_per_s"] for row in saturation_rounds(load).values() if row.get(system)]


def saturation_ratios(load, system):
    """Each round's events/s of `system` over nginx's in the same round."""
    out = []
    for row in saturation_rounds(load).values():
        b, n = row.get(system), row.get("nginx")
        if b and n and n["events_per_s"] > 0:
            out.append(b["events_per_s"] / n["events_per_s"])
    return out


def median(xs):
    xs = sorted(xs)
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else (xs[k - 1] + xs[k]) / 2


def steady_us(row):
    """CPU µs per event of the system over its steady window, or None."""
    st = (row or {}).get("steady") or {}
    return st.get("cpu_us_per_event")


def cpu_rounds(load, core_same):
    """Per saturation round: core-bench's CPU per event on the upstream's
    stream, each system's over its steady window, and the two ratios."""
    out = []
    for run, row in saturation_rounds(load).items():
        c = core_same.get(f"core-r{run}", {}).get("cpu_us_per_event")
        n, b, nl = (steady_us(row.get(t)) for t in ("nginx", "babelgate", "babelgate-nolog"))
        out.append(
            {
                "run": run,
                "core": c,
                "nginx": n,
                "babelgate": b,
                "nolog": nl,
                "log_ratio": b / nl if b and nl else None,
                "nolog_ratio": nl / c if nl and c else None,
                "rows": row,
                "core_row": core_same.get(f"core-r{run}"),
            }
        )
    return out


def cpu_table(load, core_same):
    rounds = cpu_rounds(load, core_same)
    if not rounds:
        return []
    md = [
        f"\n### CPU per event relayed (issue 43): {len(rounds)} rounds, core-bench and (b), (c), (c-nolog) in turn\n",
        "Each round: `core-bench` translating the load generator's own stream AG-UI→Vercel (one thread, CPU time of "
        "its process per event, about 2 s), then nginx, babelgate with the run log and babelgate with `resume = false`, "
        "20 streams as fast as they go. Each system's CPU is its processes' user+system clock ticks from "
        "`/proc/<pid>/stat` (all threads; nginx's master and workers), read by loadgen every 50 ms; the steady window "
        "runs from the first to the last sample with all streams open, and the CPU per event is the ticks between "
        "those two samples over the events the clients read between them. The load generator's own CPU (`/proc/self`) "
        "and the upstream's are read over the same window and given apart: they are not in any system's figure.\n",
        "| round | load avg | core-bench µs/event | (b) nginx µs/event | (c) babelgate µs/event | (c-nolog) µs/event | "
        "(c) / (c-nolog) | (c-nolog) / core-bench | steady window s, ticks: (b) / (c) / (c-nolog) | "
        "loadgen + upstream µs/event: (b) / (c) / (c-nolog) | cores busy, all three processes: (b) / (c) / (c-nolog) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rounds:
        rows = r["rows"]
        win = " / ".join(
            f"{rows[t]['steady']['s']:.1f}, {rows[t]['steady']['ticks']}" if (rows.get(t) or {}).get("steady") else "–"
            for t in ("nginx", "babelgate", "babelgate-nolog")
        )
        rest = " / ".join(
            f"{rows[t]['steady']['loadgen_cpu_us_per_event']:.2f} + {rows[t]['steady']['others_cpu_us_per_event'] or 0:.2f}"
            if (rows.get(t) or {}).get("steady")
            else "–"
            for t in ("nginx", "babelgate", "babelgate-nolog")
        )
        # The three processes' CPU over the window, in cores: at most the
        # machine's 2 if every tick was counted once.
        busy = " / ".join(
            f"{(st['cpu_us_per_event'] + st['loadgen_cpu_us_per_event'] + (st['others_cpu_us_per_event'] or 0)) * st['events_per_s'] / 1e6:.2f}"
            if (st := (rows.get(t) or {}).get("steady"))
            else "–"
            for t in ("nginx", "babelgate", "babelgate-nolog")
        )
        la = (r["core_row"] or {}).get("loadavg") or ((rows.get("nginx") or {}).get("loadavg") or ["?"])[0]
        md.append(
            f"| {r['run']} | {la} | {fmt(r['core'], 3)} | {fmt(r['nginx'], 3)} | {fmt(r['babelgate'], 3)} | {fmt(r['nolog'], 3)} | "
            f"{fmt(r['log_ratio'], 2)}x | {fmt(r['nolog_ratio'], 2)}x | {win} | {rest} | {busy} |"
        )
    med = lambda k: median([r[k] for r in rounds if r[k] is not None]) if any(r[k] is not None for r in rounds) else None
    md.append(
        f"| median | | {fmt(med('core'), 3)} | {fmt(med('nginx'), 3)} | {fmt(med('babelgate'), 3)} | {fmt(med('nolog'), 3)} | "
        f"{fmt(med('log_ratio'), 2)}x | {fmt(med('nolog_ratio'), 2)}x | | | |"
    )
    return md


def saturation_rounds_table(load):
    rounds = saturation_rounds(load)
    if not rounds:
        return []
    rows = [r for row in rounds.values() for r in row.values()]
    per_round = max((r.get("delivered_events", 0) for r in rows), default=0)
    walls = [r["wall_s"] for r in rows if r.get("wall_s")]
    burst = [load[f"saturation/{t}"]["wall_s"] for t in ("nginx", *BABELGATES) if f"saturation/{t}" in load]
    md = [
        f"\n### Saturation, {len(rounds)} rounds side by side: (b), (c) and (c-nolog) alternating\n",
        f"Each round {per_round:,} events through each system, a run of {min(walls, default=0):.2f}–{max(walls, default=0):.2f} s "
        f"(the run above lasts {1e3 * min(burst, default=0):.0f}–{1e3 * max(burst, default=0):.0f} ms of these systems: "
        "a cold burst whose ratio moves a lot). The targets take the median of these rounds' ratios, "
        "to nginx in the same round and to the Python bridge's run above.\n",
        "| round | (b) nginx events/s | (c) babelgate events/s | against nginx | (c-nolog) events/s | against nginx |",
        "|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(row, system):
        r, n = row.get(system), row.get("nginx")
        if not r:
            return "– | –"
        ratio = "–" if not n else f"{r['events_per_s'] / max(n['events_per_s'], 1e-9):.2f}x"
        return f"{fmt(r['events_per_s'])} | {ratio}"

    for run, row in rounds.items():
        n = row.get("nginx")
        md.append(f"| {run} | {fmt(n['events_per_s']) if n else '–'} | {cell(row, 'babelgate')} | {cell(row, 'babelgate-nolog')} |")
    meds = {s: saturation_ratios(load, s) for s in BABELGATES}
    md.append(
        "| median | | | "
        + (f"{median(meds['babelgate']):.2f}x" if meds["babelgate"] else "–")
        + " | | "
        + (f"{median(meds['babelgate-nolog']):.2f}x" if meds["babelgate-nolog"] else "–")
        + " |"
    )
    return md


def alias_latency_runs(load):
    """Run 1 at the smallest size stands for (a), (b), (c) in the one-run latency table."""
    sizes = latency_sizes(load)
    if sizes:
        runs = next(iter(sizes.values()))
        for system, r in runs[min(runs)].items():
            load.setdefault(f"latency/{system}", r)


def p3(d, base=None):
    """p50 / p99 / p99.9 in ms, or their differences to `base` (same percentile)."""
    keys = ["p50", "p99", "p999"]
    if base is None:
        return " / ".join(fmt(ms(d.get(k)), 2) for k in keys)
    return " / ".join(fmt(ms(d[k] - base[k]) if d.get(k) is not None and base.get(k) is not None else None, 2) for k in keys)


def p99_ratios(runs, system="babelgate"):
    """`system`'s p99 / nginx p99 of each run (None where a row is missing)."""
    out = []
    for _, rows in sorted(runs.items()):
        b, n = rows.get(system), rows.get("nginx")
        ok = b and n and b["latency_us"]["p99"] is not None and n["latency_us"]["p99"]
        out.append(b["latency_us"]["p99"] / n["latency_us"]["p99"] if ok else None)
    return out


def in_a_row(ratios, n=3):
    """Whether n runs in a row have babelgate's p99 no worse than nginx's."""
    streak = best = 0
    for r in ratios:
        streak = streak + 1 if r is not None and r <= 1.0 else 0
        best = max(best, streak)
    return best >= n


def round_two_tables(load, store):
    md = []
    for streams, runs in latency_sizes(load).items():
        r0 = next(iter(next(iter(runs.values())).values()))
        md.append(
            f"\n### Latency, {streams:,} streams × {r0['events_per_stream']:,} events at {r0['rate_per_stream']:g}/s each: "
            f"{len(runs)} rounds, the systems alternating\n"
        )
        md.append(
            "Added = the system's percentile minus the same percentile of (a) (or of (b) nginx) in the same run. "
            "Time to first event: request written to the first event's mark read.\n"
        )
        md.append(
            "| round | system | load avg | delivered | failed | latency p50 / p99 / p99.9 ms | added vs direct | added vs nginx | "
            "first event p50 / p99 / p99.9 ms | added vs direct | added vs nginx | CPU s (% of a core) | steady CPU µs/event |"
        )
        md.append("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for run, rows in runs.items():
            up, ng = rows.get("upstream"), rows.get("nginx")
            for t in LAT3:
                r = rows.get(t)
                if not r:
                    continue
                lat, tfe = r["latency_us"], r.get("ttfe_us") or {}
                cpu = "–" if r["sut_cpu_s"] is None else f"{r['sut_cpu_s']:.1f} ({r['sut_cpu_pct']:.0f}%)"
                vs = lambda base, key: p3(r.get(key) or {}, base.get(key) or {}) if base and t != "upstream" and base is not r else "–"
                md.append(
                    f"| {run} | {TARGET_NAMES[t]} | {(r.get('loadavg') or ['?'])[0]} | {r['delivered_events']:,} / {r['expected_events']:,} | {r['failed_streams']} | "
                    f"{p3(lat)} | {vs(up, 'latency_us')} | {vs(ng, 'latency_us') if t in BABELGATES else '–'} | "
                    f"{p3(tfe)} | {vs(up, 'ttfe_us')} | {vs(ng, 'ttfe_us') if t in BABELGATES else '–'} | {cpu} | {fmt(steady_us(r), 1)} |"
                )
        for system in BABELGATES:
            ratios = p99_ratios(runs, system)
            if all(r is None for r in ratios):
                continue
            cells = []
            for (run, rows), ratio in zip(runs.items(), ratios):
                b, n = rows.get(system), rows.get("nginx")
                cells.append(
                    f"run {run}: {fmt(ms(b['latency_us']['p99']), 2)} / {fmt(ms(n['latency_us']['p99']), 2)} ms = {ratio:.2f}x"
                    if ratio is not None else f"run {run}: –"
                )
            got = [r for r in ratios if r is not None]
            md.append(
                f"\n{system} p99 / nginx p99: {'; '.join(cells)}. Median of the {len(got)} ratios **{median(got):.2f}x**, "
                f"spread {min(got):.2f}–{max(got):.2f}x (issue 43's target: median ≤ 1.1x)."
            )
        nps = [rows["nginx"]["latency_us"]["p99"] / 1000 for rows in runs.values() if rows.get("nginx")]
        if nps:
            md.append(f"\nnginx's own p99 over the rounds: {min(nps):.2f}–{max(nps):.2f} ms.")
    opens = [r for r in open_rows(load) if r.get("memory")]
    if opens:
        md.append("\n### Memory of open streams: idle, steady, recovered (a fresh babelgate each)\n")
        md.append(
            "Idle: before the first stream, after a warm-up (4 streams × 200 events) and 15 s of quiet, so that idle is a "
            "gateway that has served (its code read in) and what the warm-up freed has been handed back. Steady: the median of the samples (every 100 ms) taken while the most streams were "
            "open at once. KiB per open stream = (steady − idle) / streams open at once. Recovered: RSS sampled after the last "
            "stream closed, the value at the end and when it first came back within issue 43's bound (idle plus 2 MiB or 15% of "
            "idle, whichever is larger). Anonymous: the same without file "
            "pages (`RssAnon`: the heap, stacks; not the executable's code), idle and at the end.\n"
        )
        md.append(
            "| system | streams | events per stream (1/s) | open at once | idle RSS MiB | steady RSS MiB | peak RSS MiB | "
            "KiB per open stream | recovered RSS MiB (after s) | bound MiB | back within it after s | anonymous MiB, idle → recovered |"
        )
        md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for o in opens:
            m = o["memory"]
            md.append(
                f"| {o['system']} | {o['streams']:,} | {o['events_per_stream']} | {m['max_open_at_once']:,} | {fmt(m['idle_mib'], 1)} | "
                f"{fmt(m['steady_mib'], 1)} | {fmt(o['sut_rss_peak_mib'], 1)} | {fmt(m['kib_per_open_stream'], 1)} | "
                f"{fmt(m['recovered_mib'], 1)} ({m['recover_s']:g}) | "
                f"{fmt(m.get('bound_mib'), 1)} | "
                f"{'not within ' + format(m['recover_s'], 'g') if m.get('within_bound_after_s') is None else fmt(m['within_bound_after_s'], 1)} | "
                f"{fmt(m.get('idle_anon_mib'), 1)} → {fmt(m.get('recovered_anon_mib'), 1)} |"
            )
    if store:
        md.append("\n### Run logs in one Redis (store-bench, pipelined batches) and in memory\n")
        md.append(
            "N runs at once, each appending batches of entries (a text delta's SSE event and its core part) as fast as the "
            "store answers, every batch awaited before the next; Redis answers a batch in one round trip, one call of its append script.\n"
        )
        md.append(
            "| backend | runs at once | batch | events | bytes per entry | events/s | client CPU µs/event | "
            "Redis CPU µs/event | one append call p50 / p99 ms |"
        )
        md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in store:
            md.append(
                f"| {r['backend']} | {r['runs']} | {r['batch']} | {r['events']:,} | {r['entry_bytes']} | {fmt(r['events_per_s'])} | "
                f"{fmt(r['client_cpu_us_per_event'], 2)} | {fmt(r['redis_cpu_us_per_event'], 2)} | "
                f"{fmt(ms(r['append_call_us']['p50']), 3)} / {fmt(ms(r['append_call_us']['p99']), 3)} |"
            )
    srows = [(k, r) for k, r in load.items() if k.startswith("store-")]
    if srows:
        md.append("\n### What the Redis store adds to a stream (babelgate AG-UI→Vercel, memory store against Redis store)\n")
        md.append(
            "The same workload through two babelgate processes, one with each store, alternating. CPU per million events: "
            "babelgate's, and redis-server's for the Redis store.\n"
        )
        md.append(
            "| workload | store | delivered | events/s | latency p99 ms | babelgate CPU s / M events | Redis CPU s / M events | "
            "total CPU s / M events | Redis against memory |"
        )
        md.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for k, r in srows:
            head, _, who = k.partition("/")
            cpu = [c["cpu_s"] for c in r.get("sut_cpu_by_pid") or []]
            per_m = lambda c: c * 1e6 / max(r["delivered_events"], 1)
            bg = per_m(cpu[0]) if cpu else None
            red = per_m(cpu[1]) if len(cpu) > 1 else None
            total = (bg or 0) + (red or 0)
            vs = "–"
            if who.endswith("redis"):
                mem = load.get(f"{head}/babelgate-memory")
                mcpu = [c["cpu_s"] for c in (mem or {}).get("sut_cpu_by_pid") or []]
                if mem and mcpu:
                    mtotal = mcpu[0] * 1e6 / max(mem["delivered_events"], 1)
                    vs = (
                        f"{r['events_per_s'] / max(mem['events_per_s'], 1e-9):.2f}x events/s, "
                        f"+{(total - mtotal):.2f} µs CPU/event"
                    )
            md.append(
                f"| {head.removeprefix('store-')} | {who.removeprefix('babelgate-')} | {r['delivered_events']:,} / {r['expected_events']:,} | "
                f"{fmt(r['events_per_s'])} | {fmt(ms(r['latency_us']['p99']), 2)} | {fmt(bg, 2)} | {fmt(red, 2)} | {fmt(total, 2)} | {vs} |"
            )
    return md


def open_rows(load):
    """The open-streams runs (each with its `system`), fewest events first, the logged route first."""
    rows = [
        dict(r, system=k.partition("/")[2])
        for k, r in load.items()
        if k.startswith("open") and k.partition("/")[2] in BABELGATES
    ]
    return sorted(rows, key=lambda r: (r["events_per_stream"], BABELGATES.index(r["system"])))


def plot_round_two(ax, load, store, colors):
    """Rows 3 to 5 of the plot: every row of the round-two tables."""
    sizes = latency_sizes(load)
    for a, key, title in [
        (ax[2][0], "latency_us", "inter-event latency, ms: bar p99, ▼ p99.9, – p50"),
        (ax[2][1], "ttfe_us", "time to first event, ms: bar p99, ▼ p99.9, – p50"),
    ]:
        groups = [(n, run, rows) for n, runs in sizes.items() for run, rows in runs.items()]
        width = 0.27
        for j, t in enumerate(LAT3):
            xs, p50, p99, p999 = [], [], [], []
            for i, (_, _, rows) in enumerate(groups):
                r = rows.get(t)
                if r and r.get(key):
                    xs.append(i + (j - 1) * width)
                    p50.append(r[key]["p50"] / 1000)
                    p99.append(r[key]["p99"] / 1000)
                    p999.append(r[key]["p999"] / 1000)
            a.bar(xs, p99, width, color=colors[t], label=t)
            a.scatter(xs, p999, marker="v", color="black", s=12)
            a.scatter(xs, p50, marker="_", color="black", s=40)
        a.set_xticks(range(len(groups)), [f"{n:,}\nrun {run}" for n, run, _ in groups])
        a.set_yscale("log")
        a.set_title(title)
        a.legend(fontsize=8)

    opens = [r for r in open_rows(load) if r.get("memory")]
    a = ax[3][0]
    width = 0.2
    for j, (what, key) in enumerate([("idle", "idle_mib"), ("steady", "steady_mib"), ("peak", None), ("recovered", "recovered_mib")]):
        vals = [(o["sut_rss_peak_mib"] if key is None else o["memory"][key]) or 0 for o in opens]
        a.bar([i + (j - 1.5) * width for i in range(len(opens))], vals, width, label=what)
    for i, o in enumerate(opens):
        a.text(i, (o["memory"]["steady_mib"] or 0), f"{fmt(o['memory']['kib_per_open_stream'], 1)} KiB/stream", ha="center", va="bottom", fontsize=8)
    a.set_xticks(
        range(len(opens)),
        [f"{o['system'].removeprefix('babelgate')[1:] or 'logged'}\n{o['memory']['max_open_at_once']:,} open\n{o['events_per_stream']} events" for o in opens],
    )
    a.set_title("babelgate RSS with open streams, MiB")
    a.legend(fontsize=8)

    a = ax[3][1]
    for o in opens:
        series = o["memory"]["recovery_series_mib"]
        a.plot([p[0] for p in series], [p[1] for p in series], marker=".", label=f"{o['system']}, {o['events_per_stream']} events each")
        a.axhline(o["memory"].get("bound_mib") or o["memory"]["idle_mib"] * 1.15, color="gray", linestyle="--", linewidth=1)
    a.set_title("RSS after the last stream closed, MiB (dashed: idle + max(2 MiB, 15%))")
    a.set_xlabel("s")
    if opens:
        a.legend(fontsize=8)

    a = ax[4][0]
    srows = [(k, r) for k, r in load.items() if k.startswith("store-")]
    names = [f"{r['backend']} batch {r['batch']}" for r in store] + [k.removeprefix("store-").replace("/babelgate-", "\n") for k, _ in srows]
    vals = [r["events_per_s"] for r in store] + [r["events_per_s"] for _, r in srows]
    cols = ["#c44e52" if r["backend"] == "redis" else "#999999" for r in store] + [
        "#c44e52" if k.endswith("redis") else "#dd8452" for k, _ in srows
    ]
    a.bar(range(len(vals)), vals, color=cols)
    for i, v in enumerate(vals):
        a.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=7, rotation=90)
    a.set_xticks(range(len(vals)), names, fontsize=7, rotation=60)
    a.set_yscale("log")
    a.set_title("run log: store-bench, and babelgate with each store, events/s")

    a = ax[4][1]
    client = [r["client_cpu_us_per_event"] for r in store]
    redis = [r["redis_cpu_us_per_event"] or 0 for r in store]
    for _, r in srows:
        cpu = [c["cpu_s"] * 1e6 / max(r["delivered_events"], 1) for c in r.get("sut_cpu_by_pid") or []]
        client.append(cpu[0] if cpu else 0)
        redis.append(cpu[1] if len(cpu) > 1 else 0)
    a.bar(range(len(client)), client, color="#dd8452", label="store-bench / babelgate")
    a.bar(range(len(redis)), redis, bottom=client, color="#c44e52", label="redis-server")
    a.set_xticks(range(len(names)), names, fontsize=7, rotation=60)
    a.set_title("CPU µs per event")
    a.legend(fontsize=8)


if __name__ == "__main__":
    sys.exit(main())
