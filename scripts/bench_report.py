#!/usr/bin/python3
"""Turns the raw records of `make bench` (scripts/bench.sh) into results.json, results.md and plots.

Input, under OUT: pairs.jsonl (the pairs booted, one line each), host-load.tsv (host load while they ran) and, per
guest, bench-PAIR-{a,b}/bench/: runs.jsonl (one record per run and role), ID.ROLE.out (the tool's
output) and ID.ROLE.tsv (0.1 s samples: wall time, eth0 rx+tx bytes, busy and total CPU jiffies).

Every bandwidth figure is perftest's (or iperf3's) own, cross-checked against the payload divided
by the transfer window seen in the client's eth0 byte counter (wall clock of the guest): perftest
converts CPU cycles with /proc/cpuinfo's MHz, which under TCG need not match the real clock. A
figure whose two values disagree by more than CHECK_TOLERANCE is flagged in the table and JSON.
Each figure is the median of the repetitions, with min and max.
"""
import argparse
import json
import math
import os
import re
import statistics
import sys
import time

CHECK_TOLERANCE = 0.25
USER_HZ = 100
PAIR_LABEL = {
    "metaroce": "MetaRoCE RoCEv2 (release kernel)",
    "rxe": "rdma_rxe (baseline kernel)",
    "rxe-debian": "rdma_rxe (Debian kernel)",
}
SIZES = [64, 4096, 65536, 1048576]


def size_label(n):
    if n >= 1 << 20:
        return f"{n >> 20} MiB"
    if n >= 1 << 10:
        return f"{n >> 10} KiB"
    return f"{n} B"


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


def read_samples(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) == 4:
                    rows.append((float(p[0]), int(p[1]), int(p[2]), int(p[3])))
    except FileNotFoundError:
        pass
    return rows


def window(samples):
    """The transfer window in a sample series: from the last quiet sample before eth0's byte count
    starts to move to the first sample at its final level, each edge taken at the midpoint of its
    0.1 s sampling interval. Returns (seconds, busy CPU seconds in the window, total CPU seconds)."""
    if len(samples) < 3:
        return None
    b0, bn = samples[0][1], samples[-1][1]
    total = bn - b0
    if total <= 0:
        return None
    # Small enough to see a latency test's traffic, large enough to skip perftest's TCP handshake.
    thresh = max(1024, min(16384, total // 50))
    i = next((k for k, s in enumerate(samples) if s[1] - b0 > thresh), None)
    j = next((k for k, s in enumerate(samples) if s[1] >= bn - thresh), None)
    if i is None or j is None or i == 0 or j < i:
        return None
    start = (samples[i - 1][0] + samples[i][0]) / 2
    end = (samples[j - 1][0] + samples[j][0]) / 2 if j > 0 else samples[j][0]
    dt = end - start
    if dt <= 0:
        return None
    busy = (samples[j][2] - samples[i - 1][2]) / USER_HZ
    tot = (samples[j][3] - samples[i - 1][3]) / USER_HZ
    return dt, busy, tot


ROW_BW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
ROW_LAT = re.compile(r"^\s*(\d+)\s+(\d+)" + r"\s+([\d.]+|-?inf|-?nan)" * 7 + r"\s*$")


def parse_perftest(kind, text):
    for line in text.splitlines():
        if kind == "lat":
            m = ROW_LAT.match(line)
            if m:
                v = [float(x) for x in m.groups()]
                return {"size": int(v[0]), "iters": int(v[1]), "t_min_us": v[2], "t_max_us": v[3],
                        "t_typical_us": v[4], "t_avg_us": v[5], "t_stdev_us": v[6], "p99_us": v[7], "p999_us": v[8]}
        else:
            m = ROW_BW.match(line)
            if m:
                v = m.groups()
                return {"size": int(v[0]), "iters": int(v[1]), "bw_peak_gbps": float(v[2]),
                        "bw_avg_gbps": float(v[3]), "msgrate_mpps": float(v[4])}
    return None


def parse_iperf(text):
    try:
        j = json.loads(text[text.index("{"):])
        end = j["end"]
        return {"bytes": end["sum_received"]["bytes"], "bw_gbps": end["sum_received"]["bits_per_second"] / 1e9,
                "seconds": end["sum_received"]["seconds"], "retransmits": end["sum_sent"].get("retransmits")}
    except (ValueError, KeyError, TypeError):
        return None


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


CLOCK_TOLERANCE = 0.05


def clock_rate(rec, d, rid, role):
    """Guest seconds per host second over one run (None when the run is too short to tell)."""
    try:
        h0 = os.stat(os.path.join(d, f"{rid}.{role}.t0")).st_mtime_ns / 1e9
        h1 = os.stat(os.path.join(d, f"{rid}.{role}.t1")).st_mtime_ns / 1e9
    except FileNotFoundError:
        return None
    if h1 - h0 < 0.5:
        return None
    return round((rec["t1"] - rec["t0"]) / (h1 - h0), 4)


def load_pair(out, pair):
    """Per-run results of one pair: the client's figure, the wall-clock check, CPU of both guests."""
    runs = {}
    for role in "ab":
        d = os.path.join(out, f"bench-{pair}-{role}", "bench")
        for r in read_jsonl(os.path.join(d, "runs.jsonl")):
            runs.setdefault(r["id"], {})[role] = (r, d)
    results = []
    for rid, sides in runs.items():
        meta = dict((sides.get("b") or sides.get("a"))[0])
        res = {k: meta[k] for k in ("id", "kind", "op", "size", "qps", "loss", "rep", "tool", "args", "kernel") if k in meta}
        res["pair"] = pair
        res["rc"] = {role: sides[role][0]["rc"] for role in sides}
        res["ok"] = all(sides[role][0]["rc"] == 0 for role in sides) and set(sides) == {"a", "b"}
        if "b" in sides:
            text = read_text(os.path.join(sides["b"][1], f"{rid}.b.out"))
            parsed = parse_iperf(text) if meta["tool"] == "iperf3" else parse_perftest(meta["kind"], text)
            if parsed is None:
                res["ok"] = False
                last = (text.strip().splitlines() or ["no output"])[-1].strip()[:160]
                res["error"] = f"client exit {sides['b'][0]['rc']}, no result" + ("" if last.startswith("#bytes") else f" ({last})")
            else:
                res.update(parsed)
        if not res["ok"]:
            results.append(res)
            continue
        if meta["kind"] == "lat" and not all(map(math.isfinite, (res["t_typical_us"], res["t_avg_us"], res["p99_us"]))):
            # perftest printed inf/nan on the client (seen with rdma_rxe's ib_send_lat): take the
            # server's row, which measures the same round trips, and say so.
            srv = parse_perftest("lat", read_text(os.path.join(sides["a"][1], f"{rid}.a.out"))) if "a" in sides else None
            if srv and all(map(math.isfinite, (srv["t_typical_us"], srv["t_avg_us"], srv["p99_us"]))):
                res.update(srv)
                res["note"] = "client printed inf: server's figures"
            else:
                res["ok"] = False
                res["error"] = "perftest printed inf/nan on both sides"
                results.append(res)
                continue
        if meta["tool"] == "iperf3":
            payload = res["bytes"]
        else:
            payload = res["size"] * res["iters"]
        res["payload_bytes"] = payload
        busy = 0.0
        cpu_ok = True
        for role in "ab":
            w = window(read_samples(os.path.join(sides[role][1], f"{rid}.{role}.tsv")))
            if w is None:
                cpu_ok = False
                continue
            res[f"window_s_{role}"] = round(w[0], 3)
            res[f"cpu_busy_s_{role}"] = round(w[1], 2)
            busy += w[1]
        # The guest's clock against the host's: the host stamped the marker files the client wrote at
        # t0 and t1. Windows are converted to host seconds with that rate.
        rate = clock_rate(sides["b"][0], sides["b"][1], rid, "b")
        res["guest_clock_rate"] = rate
        wa = res.get("window_s_b")
        if wa and rate:
            wa = wa / rate
            res["window_host_s_b"] = round(wa, 3)
        if wa:
            if meta["kind"] == "lat":
                # One-way latency: each iteration is a round trip.
                res["wall_avg_us"] = wa / res["iters"] / 2 * 1e6
                claim, wall = res["t_avg_us"], res["wall_avg_us"]
            else:
                res["wall_gbps"] = payload * 8 / wa / 1e9
                claim = res["bw_gbps"] if meta["tool"] == "iperf3" else res["bw_avg_gbps"]
                wall = res["wall_gbps"]
            res["check_ratio"] = round(claim / wall, 3) if wall > 0 else None
            res["check_ok"] = wall > 0 and abs(claim / wall - 1) <= CHECK_TOLERANCE
        res["clock_ok"] = rate is not None and abs(rate - 1) <= CLOCK_TOLERANCE
        if cpu_ok and payload > 0 and meta["kind"] != "lat":
            res["cpu_s_per_gb"] = busy / (payload / 1e9)
        results.append(res)
    return results


def summarize(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v), "values": v}


def figures(results):
    """Groups the runs of all repetitions into figures: one per (pair, kind, op, size, qps, loss)."""
    groups = {}
    for r in results:
        key = (r["pair"], r["kind"], r["op"], r["size"], r["qps"], r["loss"])
        groups.setdefault(key, []).append(r)
    figs = []
    for (pair, kind, op, size, qps, loss), rs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        ok = [r for r in rs if r["ok"]]
        f = {"pair": pair, "kind": kind, "op": op, "size": size, "qps": qps, "loss": loss,
             "runs": len(rs), "ok_runs": len(ok), "errors": [r.get("error", f"exit {r['rc']}") for r in rs if not r["ok"]]}
        if kind == "lat":
            f["median_us"] = summarize([r["t_typical_us"] for r in ok])
            f["p99_us"] = summarize([r["p99_us"] for r in ok])
            f["wall_avg_us"] = summarize([r.get("wall_avg_us") for r in ok])
        elif op == "tcp":
            f["gbps"] = summarize([r["bw_gbps"] for r in ok])
            f["wall_gbps"] = summarize([r.get("wall_gbps") for r in ok])
        else:
            f["gbps"] = summarize([r["bw_avg_gbps"] for r in ok])
            f["mpps"] = summarize([r["msgrate_mpps"] for r in ok])
            f["wall_gbps"] = summarize([r.get("wall_gbps") for r in ok])
        f["cpu_s_per_gb"] = summarize([r.get("cpu_s_per_gb") for r in ok])
        f["clock_disagrees"] = [r["rep"] for r in ok if r.get("check_ok") is False]
        f["clock_unchecked"] = [r["rep"] for r in ok if "check_ok" not in r]
        f["notes"] = sorted({r["note"] for r in ok if r.get("note")})
        f["guest_clock_off"] = [r["rep"] for r in ok if r.get("guest_clock_rate") is not None and not r["clock_ok"]]
        f["guest_clock_rate"] = summarize([r.get("guest_clock_rate") for r in ok])
        figs.append(f)
    return figs


def host_contention(out, pairs):
    """Per pair: max load average, and whether other guests or compilers ran beside it."""
    rows = []
    try:
        with open(os.path.join(out, "host-load.tsv")) as f:
            for line in f:
                p = line.split()
                if len(p) == 4:
                    rows.append((int(p[0]), float(p[1]), int(p[2]), int(p[3])))
    except FileNotFoundError:
        pass
    res = {}
    for p in pairs:
        rs = [r for r in rows if p["start"] <= r[0] <= p["end"]]
        if not rs:
            res[p["name"]] = {"samples": 0}
            continue
        other_q = sum(1 for r in rs if r[2] > 0) / len(rs)
        comp = sum(1 for r in rs if r[3] > 0) / len(rs)
        res[p["name"]] = {"samples": len(rs), "load1_max": max(r[1] for r in rs),
                          "load1_median": statistics.median(r[1] for r in rs),
                          "share_with_other_guests": round(other_q, 2), "share_with_compilers": round(comp, 2),
                          "contended": other_q > 0.05 or comp > 0.05}
    return res


def find(figs, pair, kind, op, size=None, qps=1, loss=0):
    for f in figs:
        if f["pair"] == pair and f["kind"] == kind and f["op"] == op and (size is None or f["size"] == size) \
                and f["qps"] == qps and f["loss"] == loss:
            return f
    return None


def num(v, digits=3):
    """Three significant digits without exponents (latencies are tens of thousands of µs here)."""
    if abs(v) >= 10 ** digits:
        return f"{v:.0f}"
    return f"{v:.{digits}g}" if abs(v) >= 1e-4 or v == 0 else f"{v:.2e}"


def fmt(s, key="median", digits=3):
    if not s:
        return "—"
    if s["n"] == 1:
        return num(s[key], digits)
    return f"{num(s['median'], digits)} ({num(s['min'], digits)}–{num(s['max'], digits)})"


def ratio(a, b):
    if not a or not b or not b["median"]:
        return None
    return a["median"] / b["median"]


def fmt_ratio(x):
    if x is None:
        return "—"
    return f"**{x:.2f}**" if x >= 0.1 else f"**{x:.2g}**"


def check_note(f):
    if f is None:
        return ""
    notes = []
    if f["errors"]:
        notes.append(f"{len(f['errors'])} of {f['runs']} runs failed: {f['errors'][0]}")
    if f["clock_disagrees"]:
        w = f.get("wall_gbps") or f.get("wall_avg_us")
        notes.append(f"the tool's own figure disagrees with wall time (rep {','.join(map(str, f['clock_disagrees']))}; wall {fmt(w)})")
    notes += f.get("notes", [])
    if f["guest_clock_off"]:
        notes.append(f"guest clock off the host's (rate {fmt(f['guest_clock_rate'])})")
    if f["clock_unchecked"]:
        notes.append("not cross-checked (no transfer window)")
    return "; ".join(notes)


def write_md(path, meta, figs, cont):
    pairs = [p["name"] for p in meta["pairs"]]
    L = []
    L.append(f"# MetaRoCE benchmarks — {meta['date']}, commit {meta['commit']}")
    L.append("")
    L.append(f"{meta['reps']} repetition(s) per figure{' (quick mode)' if meta['quick'] else ''}; each cell: median "
             "(min–max). Pairs of TCG guests (1 vCPU each) joined by QEMU's socket link, one pair at a time. "
             "Ratios compare figures of the same run. Bandwidth: perftest's average (Gb/s); every figure is "
             f"cross-checked against payload ÷ transfer window on the client's eth0 (flagged when off by more than "
             f"{int(CHECK_TOLERANCE * 100)} %). The window is converted to host seconds: the client stamps files on the host (9p) "
             f"at the start and end of each run, which also checks the guest's clock against the host's (flagged when off "
             f"by more than {int(CLOCK_TOLERANCE * 100)} %).")
    L.append("")
    L.append("| pair | kernel | result | host during the run |")
    L.append("| --- | --- | --- | --- |")
    for p in meta["pairs"]:
        c = cont.get(p["name"], {})
        host = "no samples" if not c.get("samples") else (
            f"load1 median {c['load1_median']:.1f}, max {c['load1_max']:.1f}; other guests {int(c['share_with_other_guests'] * 100)} %, "
            f"compilers {int(c['share_with_compilers'] * 100)} % of the time" + (" — **contended**" if c["contended"] else " — quiet"))
        L.append(f"| {PAIR_LABEL.get(p['name'], p['name'])} | {p['kernel']} | {'all runs ok' if p['rc'] == 0 else 'some runs failed'} "
                 f"({p['end'] - p['start']} s) | {host} |")
    L.append("")
    mr, rx, deb = "metaroce", "rxe", "rxe-debian"
    tcp1 = find(figs, mr, "tcp", "tcp", qps=1)
    hdr = "| figure | MetaRoCE RoCEv2 | MetaRoCE native | rdma_rxe (baseline) |"
    sep = "| --- | --- | --- | --- |"
    if deb in pairs:
        hdr += " rdma_rxe (Debian) |"
        sep += " --- |"
    hdr += " TCP 1 stream | MetaRoCE ÷ rxe | MetaRoCE ÷ TCP | ÷ rxe, each ÷ its pair's TCP | notes |"
    sep += " --- | --- | --- | --- | --- |"
    tcp_rx = find(figs, rx, "tcp", "tcp", qps=1)
    L.append("## Bandwidth (Gb/s) and message rate")
    L.append("")
    L.append(hdr)
    L.append(sep)

    def row(label, a, c, d, unit_key, tcp=None, lower_better=False):
        cells = [label, fmt(a and a.get(unit_key)), "not yet", fmt(c and c.get(unit_key))]
        if deb in pairs:
            cells.append(fmt(d and d.get(unit_key)))
        cells.append(fmt(tcp and tcp.get("gbps")) if tcp else "")
        cells.append(fmt_ratio(ratio(a and a.get(unit_key), c and c.get(unit_key))))
        cells.append(fmt_ratio(ratio(a and a.get(unit_key), tcp.get("gbps"))) if tcp else "")
        # The pairs run one after the other on a shared host: each pair's own TCP figure measures
        # the link it had, so this ratio takes out a change of load between the pairs.
        r1, r2 = ratio(a and a.get(unit_key), tcp and tcp.get("gbps")), ratio(c and c.get(unit_key), tcp_rx and tcp_rx.get("gbps"))
        cells.append(fmt_ratio(r1 / r2) if tcp and r1 and r2 else "")
        notes = "; ".join(x for x in (f"{PAIR_LABEL[p]}: {check_note(f)}" for p, f in ((mr, a), (rx, c), (deb, d)) if check_note(f)))
        cells.append(notes)
        L.append("| " + " | ".join(cells) + " |")

    for op in ("write", "read", "send"):
        for size in SIZES:
            a = find(figs, mr, "bw", op, size)
            c = find(figs, rx, "bw", op, size)
            d = find(figs, deb, "bw", op, size)
            if a or c or d:
                row(f"ib_{op}_bw {size_label(size)}", a, c, d, "gbps", tcp1)
    for q in (1, 8):
        a, c, d = (find(figs, p, "rate", "write", 64, qps=q) for p in (mr, rx, deb))
        if a or c or d:
            row(f"message rate, WRITE 64 B, {q} QP{'s' if q > 1 else ''} (Mpps)", a, c, d, "mpps")
    L.append("")
    L.append("## Latency, 8 B (µs, perftest's t_typical = median, and 99th percentile)")
    L.append("")
    L.append(hdr.replace(" TCP 1 stream |", "").replace(" MetaRoCE ÷ TCP |", "").replace(" ÷ rxe, each ÷ its pair's TCP |", ""))
    L.append(sep[:-len(" --- | --- | --- | --- | --- |")] + " --- | --- |")
    for op in ("send", "write"):
        a, c, d = (find(figs, p, "lat", op, 8) for p in (mr, rx, deb))
        for key, what in (("median_us", "median"), ("p99_us", "p99")):
            cells = [f"ib_{op}_lat {what}", fmt(a and a.get(key)), "not yet", fmt(c and c.get(key))]
            if deb in pairs:
                cells.append(fmt(d and d.get(key)))
            cells.append(fmt_ratio(ratio(a and a.get(key), c and c.get(key))))
            cells.append("; ".join(f"{PAIR_LABEL[p]}: {check_note(f)}" for p, f in ((mr, a), (rx, c), (deb, d)) if check_note(f)))
            L.append("| " + " | ".join(cells) + " |")
    L.append("")
    L.append("## CPU per GB (busy CPU seconds of both guests per GB of payload, within the transfer window)")
    L.append("")
    L.append("| workload | " + " | ".join(PAIR_LABEL.get(p, p) for p in pairs) + " |")
    L.append("| --- |" + " --- |" * len(pairs))
    cpu_rows = [(f"ib_write_bw {size_label(s)}", "bw", "write", s, 1) for s in SIZES] + \
               [("message rate WRITE 64 B, 1 QP", "rate", "write", 64, 1), ("message rate WRITE 64 B, 8 QPs", "rate", "write", 64, 8),
                ("TCP, 1 stream", "tcp", "tcp", 0, 1), ("TCP, 4 streams", "tcp", "tcp", 0, 4)]
    for label, kind, op, size, q in cpu_rows:
        fs = [find(figs, p, kind, op, size, qps=q) for p in pairs]
        if any(fs):
            L.append(f"| {label} | " + " | ".join(fmt(f and f.get("cpu_s_per_gb")) for f in fs) + " |")
    L.append("")
    L.append("## TCP (iperf3) on each pair's link (Gb/s)")
    L.append("")
    L.append("| streams | " + " | ".join(PAIR_LABEL.get(p, p) for p in pairs) + " |")
    L.append("| --- |" + " --- |" * len(pairs))
    for q in (1, 4):
        fs = [find(figs, p, "tcp", "tcp", qps=q) for p in pairs]
        L.append(f"| {q} | " + " | ".join(fmt(f and f.get("gbps")) + (f" ({check_note(f)})" if check_note(f) else "") for f in fs) + " |")
    L.append("")
    L.append("## Goodput under loss (netem on both guests' egress), ib_write_bw 64 KiB and TCP 1 stream (Gb/s)")
    L.append("")
    L.append("| loss % | MetaRoCE RoCEv2 | MetaRoCE native | rdma_rxe (baseline) | MetaRoCE ÷ rxe | MetaRoCE share of its lossless | rxe share of its lossless | TCP (MetaRoCE pair) | notes |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    losses = sorted({f["loss"] for f in figs if f["kind"] == "loss"})
    a0 = find(figs, mr, "loss", "write", 65536, loss=0)
    c0 = find(figs, rx, "loss", "write", 65536, loss=0)
    for loss in losses:
        a = find(figs, mr, "loss", "write", 65536, loss=loss)
        c = find(figs, rx, "loss", "write", 65536, loss=loss)
        t = find(figs, mr, "loss", "tcp", 0, loss=loss)
        share = lambda x, x0: "—" if not (x and x0 and x.get("gbps") and x0.get("gbps")) else f"{100 * x['gbps']['median'] / x0['gbps']['median']:.0f} %"
        notes = "; ".join(f"{PAIR_LABEL[p]}: {check_note(f)}" for p, f in ((mr, a), (rx, c)) if check_note(f))
        if check_note(t):
            notes += ("; " if notes else "") + f"TCP: {check_note(t)}"
        L.append(f"| {loss:g} | {fmt(a and a.get('gbps'))} | not yet | {fmt(c and c.get('gbps'))} | "
                 f"{fmt_ratio(ratio(a and a.get('gbps'), c and c.get('gbps')))} | {share(a, a0)} | {share(c, c0)} | "
                 f"{fmt(t and t.get('gbps'))} | {notes} |")
    L.append("")
    L.append("MetaRoCE native mode: not yet in the kernel (only the simulator has it), so no figure.")
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


def plots(out, figs, pairs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colours = {"metaroce": "tab:blue", "rxe": "tab:orange", "rxe-debian": "tab:green"}
    made = []
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    for ax, op in zip(axes, ("write", "read", "send")):
        for p in pairs:
            pts = [(s, find(figs, p, "bw", op, s)) for s in SIZES]
            pts = [(s, f["gbps"]) for s, f in pts if f and f.get("gbps")]
            if not pts:
                continue
            xs = [s for s, _ in pts]
            ys = [g["median"] for _, g in pts]
            err = [[g["median"] - g["min"] for _, g in pts], [g["max"] - g["median"] for _, g in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=PAIR_LABEL.get(p, p), color=colours.get(p))
        t = find(figs, "metaroce", "tcp", "tcp", qps=1)
        if t and t.get("gbps"):
            ax.axhline(t["gbps"]["median"], color="grey", linestyle="--", label="TCP, 1 stream (MetaRoCE pair)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(SIZES, [size_label(s) for s in SIZES])
        ax.set_ylim(bottom=0)
        ax.set_title(f"ib_{op}_bw")
        ax.set_xlabel("message size")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("Gb/s (median, min–max)")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    fig.suptitle("Bandwidth vs message size (TCG guests, QEMU socket link)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bandwidth_vs_size.png"), dpi=80)
    plt.close(fig)
    made.append("bandwidth_vs_size.png")

    fig, ax = plt.subplots(figsize=(6.5, 4))
    any_pts = False
    for p in pairs:
        for op, style, label in (("write", "-", "ib_write_bw 64 KiB"), ("tcp", ":", "TCP 1 stream")):
            pts = [f for f in figs if f["pair"] == p and f["kind"] == "loss" and f["op"] == op and f.get("gbps")]
            pts.sort(key=lambda f: f["loss"])
            if not pts:
                continue
            any_pts = True
            # Loss 0 is drawn at 0.01 % on the log axis.
            xs = [f["loss"] if f["loss"] > 0 else 0.01 for f in pts]
            ys = [f["gbps"]["median"] for f in pts]
            err = [[f["gbps"]["median"] - f["gbps"]["min"] for f in pts], [f["gbps"]["max"] - f["gbps"]["median"] for f in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", linestyle=style, capsize=3, color=colours.get(p),
                        label=f"{PAIR_LABEL.get(p, p)}: {label}")
    if any_pts:
        ax.set_xscale("log")
        ax.set_xlabel("netem loss each way, % (0 drawn at 0.01)")
        ax.set_ylabel("goodput, Gb/s (median, min–max)")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=6)
        ax.set_title("Goodput vs loss (TCG guests)")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "goodput_vs_loss.png"), dpi=80)
        made.append("goodput_vs_loss.png")
    plt.close(fig)
    return made


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    pairs = read_jsonl(os.path.join(a.out, "pairs.jsonl"))
    results = []
    setups = {}
    for p in pairs:
        results += load_pair(a.out, p["name"])
        for role in "ab":
            try:
                with open(os.path.join(a.out, f"bench-{p['name']}-{role}", "bench", f"setup.{role}.json")) as f:
                    setups[f"{p['name']}-{role}"] = json.load(f)
            except (FileNotFoundError, ValueError):
                pass
    figs = figures(results)
    cont = host_contention(a.out, pairs)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": a.commit, "reps": a.reps,
            "quick": a.quick, "pairs": pairs, "guests": setups, "host": cont, "check_tolerance": CHECK_TOLERANCE,
            "native_mode": "not yet in the kernel: no figures"}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "figures": figs, "runs": results}, f, indent=1)
    write_md(os.path.join(a.out, "results.md"), meta, figs, cont)
    made = plots(a.out, figs, [p["name"] for p in pairs])
    ok = sum(1 for r in results if r["ok"])
    print(f"bench report: {len(results)} runs ({ok} ok), {len(figs)} figures, plots: {', '.join(made) or 'none'}")
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
