#!/usr/bin/env python3
"""Summary of a `make cluster` run (scripts/cluster.sh): results.md and results.json in OUT and,
where matplotlib is installed (make bench-deps), allreduce.png (bus bandwidth against size) and
alltoall_flows.png (the all-to-all flows' rates).

Usage: cluster_report.py OUT SHAPE... (SHAPE clu: MetaRoCE's modes roce, tcp, native and the
lossy native-loss, tcp-loss from node 1's mpi-MODE.txt; rxe: the baseline kernel's rdma_rxe).
Exits 1 if no job left a result.
"""
import json
import re
import sys
from pathlib import Path

ROW = re.compile(r"^(allreduce|alltoall|bcast)\s+(\d+) B x\s*(\d+):\s+([\d.]+) us/op, bus ([\d.]+) Mb/s, (\w+)")
BARRIER = re.compile(r"^barrier\s+x 100: ([\d.]+) us/op")
FLOWS = re.compile(r"^flows\s+(\d+) B x\s*(\d+):((?: [\d.]+)+) Mb/s, min [\d.]+, max [\d.]+, jain ([\d.]+), (\w+)")
MODES = {"clu": ["roce", "native", "tcp", "native-loss", "tcp-loss"], "rxe": ["rxe"]}
LABEL = {"roce": "MetaRoCE RoCEv2", "native": "MetaRoCE native", "tcp": "TCP (Open MPI tcp btl)",
         "rxe": "rdma_rxe", "native-loss": "MetaRoCE native, 1 % loss",
         "tcp-loss": "TCP, 1 % loss"}


def parse(path):
    """The rows of one mpi_coll report (bus bandwidth in Mb/s as mpi_coll computed it)."""
    rows, barrier, flows = {}, None, None
    for line in path.read_text(errors="replace").splitlines():
        m = ROW.match(line)
        if m:
            rows[(m[1], int(m[2]))] = {"iters": int(m[3]), "us": float(m[4]), "bus_mbps": float(m[5]),
                                       "checked": m[6] == "checked"}
        m = BARRIER.match(line)
        if m:
            barrier = float(m[1])
        m = FLOWS.match(line)
        if m:
            flows = {"bytes": int(m[1]), "msgs": int(m[2]), "flows_mbps": [float(x) for x in m[3].split()],
                     "jain": float(m[4]), "checked": m[5] == "checked"}
    return {"rows": rows, "barrier_us": barrier, "flows": flows}


def main():
    out = Path(sys.argv[1])
    res = {}
    for shape in sys.argv[2:]:
        for mode in MODES.get(shape, []):
            f = out / f"{shape}-1" / f"mpi-{mode}.txt"
            if f.exists():
                res[mode] = parse(f)
    if not any(r["rows"] for r in res.values()):
        print("cluster_report: no results", file=sys.stderr)
        return 1
    modes = [m for m in ["native", "roce", "rxe", "tcp", "native-loss", "tcp-loss"] if m in res]
    keys = sorted({k for r in res.values() for k in r["rows"]}, key=lambda k: (k[0], k[1]))
    lines = ["| op | bytes | " + " | ".join(LABEL[m] + " Mb/s" for m in modes) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in modes) + " |"]
    for op, size in keys:
        cells = []
        for m in modes:
            r = res[m]["rows"].get((op, size))
            cells.append("-" if r is None else f"{r['bus_mbps']:.2f}" + ("" if r["checked"] else " WRONG"))
        lines.append(f"| {op} | {size} | " + " | ".join(cells) + " |")
    lines.append("| barrier | us/op | " + " | ".join(
        "-" if res[m]["barrier_us"] is None else f"{res[m]['barrier_us']:.0f}" for m in modes) + " |")

    def bus(mode, size):
        r = res.get(mode, {}).get("rows", {}).get(("allreduce", size))
        return r["bus_mbps"] if r else None
    size = max((k[1] for k in keys if k[0] == "allreduce" and k[1] <= 1 << 20), default=None)
    ratios = []
    for a, b in [("native", "rxe"), ("native", "tcp"), ("roce", "rxe"), ("native", "roce"),
                 ("native-loss", "native"), ("tcp-loss", "tcp")]:
        x, y = bus(a, size), bus(b, size)
        if x is not None and y:
            ratios.append(f"{LABEL[a]} / {LABEL[b]}: {x / y:.2f}x")
    text = "\n".join(lines) + "\n"
    if ratios:
        text += f"\nAllreduce bus bandwidth at {size} B: " + "; ".join(ratios) + ".\n"
    fl = [m for m in modes if res[m]["flows"]]
    if fl:
        text += ("\nAll-to-all fairness: every rank sends 16 messages of 64 KiB to every other rank at once; "
                 "each flow's rate is its bytes over the time its last message took to arrive. Jain's index over "
                 "the n(n-1) flows (1.0: equal shares).\n\n| mode | flows | min Mb/s | median Mb/s | max Mb/s | Jain |\n"
                 "| --- | ---: | ---: | ---: | ---: | ---: |\n")
        for m in fl:
            f = res[m]["flows"]
            x = sorted(f["flows_mbps"])
            text += (f"| {LABEL[m]} | {len(x)} | {x[0]:.2f} | {x[len(x) // 2]:.2f} | {x[-1]:.2f} | "
                     f"{f['jain']:.3f}{'' if f['checked'] else ' WRONG'} |\n")
    (out / "results.md").write_text(text)
    (out / "results.json").write_text(json.dumps(
        {m: {"barrier_us": r["barrier_us"], "flows": r["flows"],
             "rows": [{"op": k[0], "bytes": k[1], **v} for k, v in sorted(r["rows"].items())]}
         for m, r in res.items()}, indent=1))
    print(text, end="")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("cluster_report: no matplotlib (make bench-deps): no plot")
        return 0
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for m in modes:
        pts = sorted((k[1], v["bus_mbps"]) for k, v in res[m]["rows"].items() if k[0] == "allreduce")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=LABEL[m],
                linestyle="--" if m.endswith("-loss") else "-")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size per rank (bytes)")
    ax.set_ylabel("allreduce bus bandwidth (Mb/s)")
    ax.set_title("MPI_Allreduce, 4 guests on one segment (TCG)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "allreduce.png", dpi=110)
    print(f"cluster_report: plot {out / 'allreduce.png'}")
    if fl:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for m in fl:
            x = sorted(res[m]["flows"]["flows_mbps"])
            ax.plot(range(1, len(x) + 1), x, marker="o", label=f"{LABEL[m]} (Jain {res[m]['flows']['jain']:.3f})",
                    linestyle="--" if m.endswith("-loss") else "-")
        ax.set_xlabel("flow (sorted by rate)")
        ax.set_ylabel("flow rate (Mb/s)")
        ax.set_title("All-to-all flows, 16 x 64 KiB between every pair, 4 guests (TCG)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "alltoall_flows.png", dpi=110)
        print(f"cluster_report: plot {out / 'alltoall_flows.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
