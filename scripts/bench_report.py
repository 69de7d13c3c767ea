#!/usr/bin/python3
"""Turns the raw records of `make bench` (scripts/bench.sh) into results.json, results.md and plots.

Input, under OUT: pairs.jsonl (the pairs booted, one line each), host-load.tsv (host load while they ran) and, per
guest, bench-PAIR-{a,b}/bench/: runs.jsonl (one record per run and role), ID.ROLE.out (the tool's
output), ID.ROLE.tsv (0.1 s samples: wall time, eth0 rx+tx bytes, busy and total CPU jiffies) and
ID.ROLE.ctr (the device's `rdma statistic` line before and after the run).

Pairs: metaroce (MetaRoCE in RoCEv2 mode), metaroce-native (MetaRoCE in native mode: RC QPs over the
native transport; the counters say per run which wire carried it), rxe (rdma_rxe, baseline kernel),
rxe-debian (rdma_rxe, Debian's kernel); any of them may be missing or have failed runs.

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
    "metaroce-native": "MetaRoCE native (release kernel)",
    "metaroce-native-auth": "MetaRoCE native, authenticated (release kernel)",
    "metaroce-librxe": "MetaRoCE RoCEv2 through librxe (rxe-abi kernel)",
    "rxe": "rdma_rxe (baseline kernel)",
    "rxe-debian": "rdma_rxe (Debian kernel)",
}
# Column headings, and the order of the columns whatever order the pairs ran in.
PAIR_SHORT = {
    "metaroce": "MetaRoCE RoCEv2",
    "metaroce-native": "MetaRoCE native",
    "metaroce-native-auth": "MetaRoCE native auth",
    "metaroce-librxe": "MetaRoCE RoCEv2, librxe",
    "rxe": "rdma_rxe (baseline)",
    "rxe-debian": "rdma_rxe (Debian)",
}
PAIR_ORDER = ["metaroce", "metaroce-native", "metaroce-native-auth", "metaroce-librxe", "rxe", "rxe-debian"]
# The two MetaRoCE modes, whose figures are divided by rdma_rxe's and TCP's, and the wire each one's
# RC runs are expected on.
MODES = {"metaroce": "RoCEv2", "metaroce-native": "native", "metaroce-native-auth": "native, authenticated"}
EXPECTED_WIRE = {"metaroce": "RoCEv2", "metaroce-native": "native", "metaroce-native-auth": "native",
                 "metaroce-librxe": "RoCEv2"}
COLOURS = {"metaroce": "tab:blue", "metaroce-native": "tab:red", "metaroce-native-auth": "tab:purple",
           "metaroce-librxe": "tab:cyan", "rxe": "tab:orange",
           "rxe-debian": "tab:green"}
RXE = "rxe"
# The user ABI comparison: the same driver in RoCEv2 mode through MetaRoCE's own ABI and provider
# (pair metaroce, libmetaroce) and through rdma_rxe's (pair metaroce-librxe, Debian's librxe).
OWN_ABI, RXE_ABI = "metaroce", "metaroce-librxe"
# The targets as README ("Benchmarks") states them, evaluated for each MetaRoCE mode:
# (id, text, comparison, threshold). The loss target is the native transport's
# (RoCEv2 without PFC is not expected to meet it); both modes are measured against it.
TARGETS = [
    ("write64k_vs_rxe", "ib_write_bw 64 KiB ≥ 2× rdma_rxe", ">=", 2.0),
    ("write64k_vs_tcp", "ib_write_bw 64 KiB ≥ 1× TCP, 1 stream (same pair)", ">=", 1.0),
    ("send_lat_vs_rxe", "ib_send_lat 8 B median ≤ 0.7× rdma_rxe", "<=", 0.7),
    ("cpu_vs_tcp", "CPU per GB, ib_write_bw 64 KiB ≤ TCP's, 1 stream (same pair)", "<=", 1.0),
    ("loss1_share", "ib_write_bw 64 KiB at 1 % loss ≥ 90 % of its lossless goodput", ">=", 0.9),
]
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


def read_counters(path):
    """The snapshots of `rdma statistic show link DEV/1` in an ID.ROLE.ctr file (before and after a
    run): a list of {name: value}. Split on the word "link", so wrapped output reads the same."""
    snaps = []
    words = read_text(path).split()
    for i, w in enumerate(words):
        if w == "link" and i + 1 < len(words) and "/" in words[i + 1]:
            snaps.append({})
        elif snaps and i + 1 < len(words) and re.fullmatch(r"[a-z][a-z0-9_]*", w) and words[i + 1].isdigit():
            snaps[-1][w] = int(words[i + 1])
    return snaps


def counter_deltas(path):
    """What the device counted during a run (after minus before), or None without two snapshots."""
    snaps = read_counters(path)
    if len(snaps) < 2:
        return None
    a, b = snaps[0], snaps[-1]
    return {k: b[k] - a.get(k, 0) for k in b if b[k] - a.get(k, 0)}


def wire(counters):
    """Which wire carried an RDMA run on a MetaRoCE device, from both guests' counter deltas:
    native DATA packets, and the packets sent that were neither native DATA, native ACKs nor
    retransmissions (RoCEv2 ones). Every packet either mode sends is counted in sent_pkts; native
    retransmissions only in retransmits. None when a side's counters are missing."""
    if not counters or set(counters) != {"a", "b"} or any(c is None for c in counters.values()):
        return None
    tot = lambda k: sum(c.get(k, 0) for c in counters.values())
    native_data, native_all = tot("native_data_sent"), tot("native_data_sent") + tot("native_acks_sent") + tot("retransmits")
    roce = max(0, tot("sent_pkts") - native_all)
    if native_data and not roce:
        kind = "native"
    elif roce and not native_data:
        kind = "RoCEv2"
    elif roce and native_data:
        kind = "mixed"
    else:
        kind = "none"
    return {"wire": kind, "native_data": native_data, "native_acks": tot("native_acks_sent"),
            "retransmits": tot("retransmits"), "roce_pkts": roce, "sent_pkts": tot("sent_pkts"),
            "timeouts": tot("native_timeouts"), "silences": tot("native_silences"),
            "duplicates": tot("native_duplicates")}


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
        ctr = {role: counter_deltas(os.path.join(sides[role][1], f"{rid}.{role}.ctr")) for role in sides}
        if any(c is not None for c in ctr.values()):
            res["counters"] = ctr
        if pair in MODES and meta.get("tool") != "iperf3":
            res["wire"] = wire(ctr)
        q = {role: read_qdisc(os.path.join(sides[role][1], f"{rid}.{role}.qdisc")) for role in sides}
        if any(q.values()):
            res["qdisc"] = q
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


def read_qdisc(path):
    """The bottleneck's counters after a run of the link-limited sweep (`tc -s qdisc show dev eth0`
    of bench_qdisc): netem's drops (the loss asked for), RED's CE marks, early drops and tail drops
    (the queue's own), or None without the file."""
    text = read_text(path)
    if not text:
        return None
    out = {}
    m = re.search(r"qdisc netem .*?dropped (\d+)", text, re.S)
    if m:
        out["netem_dropped"] = int(m.group(1))
    m = re.search(r"marked (\d+) early (\d+) pdrop (\d+)", text)
    if m:
        out.update(ce_marked=int(m.group(1)), red_early=int(m.group(2)), red_tail=int(m.group(3)))
    return out or None


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
        if kind == "limited":
            qs = [(r.get("qdisc") or {}).get("b") or {} for r in ok]
            for k in ("netem_dropped", "ce_marked", "red_early", "red_tail"):
                f[k] = summarize([q.get(k) for q in qs])
        f["clock_disagrees"] = [r["rep"] for r in ok if r.get("check_ok") is False]
        f["clock_unchecked"] = [r["rep"] for r in ok if "check_ok" not in r]
        f["notes"] = sorted({r["note"] for r in ok if r.get("note")})
        f["guest_clock_off"] = [r["rep"] for r in ok if r.get("guest_clock_rate") is not None and not r["clock_ok"]]
        f["guest_clock_rate"] = summarize([r.get("guest_clock_rate") for r in ok])
        if pair in MODES and op != "tcp":
            ws = [r.get("wire") for r in ok]
            f["wire"] = {k: sum(1 for w in ws if (w["wire"] if w else "unknown") == k)
                         for k in ("native", "RoCEv2", "mixed", "none", "unknown")}
            f["native_data"] = summarize([w["native_data"] for w in ws if w])
            f["roce_pkts"] = summarize([w["roce_pkts"] for w in ws if w])
            f["retransmits"] = summarize([w["retransmits"] for w in ws if w])
            # Native RTOs at the senders and DATA the receivers got twice (a retransmission of
            # a packet that had arrived: what a spurious RTO or probe costs).
            f["timeouts"] = summarize([w.get("timeouts", 0) for w in ws if w])
            # Timeouts that found the connection silent and probed (transport.rst 5.5.2).
            f["silences"] = summarize([w.get("silences", 0) for w in ws if w])
            f["duplicates"] = summarize([w.get("duplicates", 0) for w in ws if w])
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
    want = EXPECTED_WIRE.get(f["pair"])
    if want and f.get("wire") and f["ok_runs"]:
        w = f["wire"]
        # A RoCEv2-mode device has no native transport: counters missing there leave nothing in doubt.
        off = {k: n for k, n in w.items() if n and k != want and not (k == "unknown" and want == "RoCEv2")}
        if off:
            what = {"native": "native transport", "RoCEv2": "RoCEv2", "mixed": "RoCEv2 and native",
                    "none": "no packets counted", "unknown": "wire not recorded"}
            rp = f.get("roce_pkts")
            notes.append(f"not all on {want}: " + ", ".join(f"{n} of {f['ok_runs']} runs {what[k]}" for k, n in off.items())
                         + (f" (up to {rp['max']:.0f} RoCEv2 packets a run)" if rp and rp["max"] else ""))
    if f["guest_clock_off"]:
        notes.append(f"guest clock off the host's (rate {fmt(f['guest_clock_rate'])})")
    if f["clock_unchecked"]:
        notes.append("not cross-checked (no transfer window)")
    return "; ".join(notes)


def ordered(pairs):
    """Pair names in column order (PAIR_ORDER, then any other in the order they ran)."""
    names = list(dict.fromkeys(pairs))
    return [p for p in PAIR_ORDER if p in names] + [p for p in names if p not in PAIR_ORDER]


def share(x, x0):
    """Goodput under loss as a share of the same pair's lossless goodput (medians), or None."""
    if not (x and x0 and x.get("gbps") and x0.get("gbps") and x0["gbps"]["median"]):
        return None
    return x["gbps"]["median"] / x0["gbps"]["median"]


def targets(figs, pairs):
    """The issue's targets (TARGETS) evaluated for each MetaRoCE mode that ran; rdma_rxe's own value
    is given where the target compares a mode with itself (the loss share). met is None when a
    figure is missing (pair not run, or every run of it failed)."""
    out = []
    for tid, text, op, thr in TARGETS:
        for m in [p for p in ordered(pairs) if p in MODES]:
            w64 = find(figs, m, "bw", "write", 65536)
            flagged = []
            why = None
            if tid == "write64k_vs_rxe":
                x = find(figs, RXE, "bw", "write", 65536)
                v = ratio(w64 and w64.get("gbps"), x and x.get("gbps"))
                flagged, why = [w64, x], None if RXE in pairs else "no rdma_rxe pair"
                t, tx = find(figs, m, "tcp", "tcp", qps=1), find(figs, RXE, "tcp", "tcp", qps=1)
                r1, r2 = ratio(w64 and w64.get("gbps"), t and t.get("gbps")), ratio(x and x.get("gbps"), tx and tx.get("gbps"))
                extra = {"tcp_normalised": r1 / r2 if r1 and r2 else None}
            elif tid == "write64k_vs_tcp":
                t = find(figs, m, "tcp", "tcp", qps=1)
                v, flagged, extra = ratio(w64 and w64.get("gbps"), t and t.get("gbps")), [w64, t], {}
            elif tid == "send_lat_vs_rxe":
                a, x = find(figs, m, "lat", "send", 8), find(figs, RXE, "lat", "send", 8)
                v, flagged, extra = ratio(a and a.get("median_us"), x and x.get("median_us")), [a, x], {}
                why = None if RXE in pairs else "no rdma_rxe pair"
                if v is not None and min(a["median_us"]["median"], x["median_us"]["median"]) >= 1000:
                    extra["caveat"] = ("both medians ≥ 1 ms: the QEMU socket link's delay under TCG sets them, "
                                       "not the stack (README, Benchmarks)")
            elif tid == "cpu_vs_tcp":
                t = find(figs, m, "tcp", "tcp", qps=1)
                v, flagged, extra = ratio(w64 and w64.get("cpu_s_per_gb"), t and t.get("cpu_s_per_gb")), [w64, t], {}
            else:
                l1, l0 = find(figs, m, "loss", "write", 65536, loss=1), find(figs, m, "loss", "write", 65536, loss=0)
                v, flagged = share(l1, l0), [l1, l0]
                x1, x0 = find(figs, RXE, "loss", "write", 65536, loss=1), find(figs, RXE, "loss", "write", 65536, loss=0)
                extra = {"rxe_share": share(x1, x0)} if RXE in pairs else {}
                if l1 is None and not any(f["kind"] == "loss" and f["loss"] == 1 for f in figs):
                    why = "1 % is not in this run's loss sweep"
            met = None if v is None else (v >= thr if op == ">=" else v <= thr)
            failed = [f for f in flagged if f and f["runs"] and not f["ok_runs"]]
            if v is None and why is None:
                why = "every run of a figure it needs failed" if failed else "figure missing (pair not run, or its runs failed)"
            if tid == "loss1_share" and l1 and l1["runs"] and not l1["ok_runs"] and l0 and l0["ok_runs"]:
                # Not one transfer completed at 1 % loss while lossless ones did: that is no goodput.
                met, why = False, ("its run" if l1["runs"] == 1 else f"all {l1['runs']} runs") + " at 1 % loss failed"
            notes = [f"{PAIR_LABEL.get(f['pair'], f['pair'])}: {check_note(f)}" for f in flagged if f and check_note(f)]
            out.append({"id": tid, "target": text, "pair": m, "value": v, "op": op, "threshold": thr, "met": met,
                        "why_unmeasured": why if v is None else None, "flags": notes, **extra})
    return out


# Issue 34's loss targets, native mode on the link-limited path: (loss %, share of lossless).
LIMITED_TARGETS = [(1, 0.95), (2, 0.95), (5, 0.80), (10, 0.60)]
NATIVE = "metaroce-native"


def loss_md(figs, cols, modes, kind, notes_for):
    """A loss sweep's table (kind "loss": netem only; "limited": the link-limited path), with each
    pair's share of its own lossless goodput and, for the limited path, the bottleneck's counters
    and issue 34's targets."""
    losses = sorted({f["loss"] for f in figs if f["kind"] == kind})
    if not losses:
        return []
    have_rxe = RXE in cols
    L = []
    if kind == "loss":
        L += ["## Goodput under loss (netem on both guests' egress), ib_write_bw 64 KiB and TCP 1 stream (Gb/s)", ""]
    else:
        L += ["## Goodput under loss on a link-limited path, ib_write_bw 64 KiB and TCP 1 stream (Gb/s)", "",
              "Each guest's egress: netem drops the given share, tbf shapes the rest to the bench's BENCH_LIMIT "
              "(100 Mbit/s unless the run said otherwise) through one FIFO queue (RED with ECN: CE marks on "
              "ECN-capable packets and early drops of the others from an average queue of 150 KB, tail drops at 450 KB). The rate is below what every "
              "stack moves on the plain link (10-rdma.sh), so the link, not the guests' CPUs, should limit the "
              "transfer and the share of a pair's lossless goodput measure its loss recovery rather than CPU stalls "
              "(issue 34, item 6); a pair whose lossless figure stays well below TCP's here is limited by its own "
              "window or queue handling instead, which the share does not show. Queue counters: the sending "
              "guest's, medians per run.", ""]
    tcp_pair = (modes or cols or [None])[0]
    lh = ["loss %"] + [PAIR_SHORT.get(p, p) for p in cols] + ([f"{MODES[m]} ÷ rxe" for m in modes] if have_rxe else []) + \
         [f"{PAIR_SHORT.get(p, p)}: share of its lossless" for p in cols] + \
         ([f"TCP ({PAIR_SHORT.get(tcp_pair, tcp_pair)} pair)"] if tcp_pair else [])
    if kind == "limited":
        lh += [f"{PAIR_SHORT.get(p, p)}: queue CE marks / drops (early + tail)" for p in cols]
    lh.append("notes")
    L.append("| " + " | ".join(lh) + " |")
    L.append("|" + " --- |" * len(lh))
    zero = {p: find(figs, p, kind, "write", 65536, loss=0) for p in cols}
    for loss in losses:
        fs = {p: find(figs, p, kind, "write", 65536, loss=loss) for p in cols}
        t = find(figs, tcp_pair, kind, "tcp", 0, loss=loss) if tcp_pair else None
        cells = [f"{loss:g}"] + [fmt(fs[p] and fs[p].get("gbps")) for p in cols]
        if have_rxe:
            cells += [fmt_ratio(ratio(fs[m] and fs[m].get("gbps"), fs[RXE] and fs[RXE].get("gbps"))) for m in modes]
        for p in cols:
            sh = share(fs[p], zero[p])
            cells.append("—" if sh is None else f"{100 * sh:.0f} %")
        if tcp_pair:
            cells.append(fmt(t and t.get("gbps")))
        if kind == "limited":
            for p in cols:
                f = fs[p]
                ce, early, tail = (f and f.get(k) and f[k]["median"] for k in ("ce_marked", "red_early", "red_tail"))
                cells.append("—" if not f or f.get("ce_marked") is None else
                             f"{ce or 0:g} / {(early or 0) + (tail or 0):g}")
        notes = notes_for(fs)
        if check_note(t):
            notes += ("; " if notes else "") + f"TCP: {check_note(t)}"
        cells.append(notes)
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    if kind == "loss":
        L.append("The issue's loss target is the native transport's: at 1 % loss it keeps ≥ 90 % of its lossless goodput "
                 "(section \"Targets\"). A run that failed or exceeded the suite's time limit is counted in the notes, never as a figure.")
    else:
        L.append("Issue 34's targets, native mode on this path (share of its own lossless goodput in this run; rdma_rxe "
                 "and TCP beside it):")
        L.append("")
        L.append("| loss % | target | native | met | RoCEv2 mode | rdma_rxe | TCP 1 stream |")
        L.append("| --- | --- | --- | --- | --- | --- | --- |")
        def cell(p, loss, op="write", size=65536):
            """A pair's share of its lossless goodput at `loss`, as a table cell."""
            x = share(find(figs, p, kind, op, size, loss=loss), find(figs, p, kind, op, size, loss=0))
            return "—" if x is None else f"{100 * x:.0f} %"

        for loss, thr in LIMITED_TARGETS:
            v = share(find(figs, NATIVE, kind, "write", 65536, loss=loss), zero.get(NATIVE))
            x = find(figs, NATIVE, kind, "write", 65536, loss=loss)
            if v is not None:
                met = "met" if v >= thr else "**not met**"
            elif x and x["runs"] and not x["ok_runs"]:
                met = "**not met** (every run failed)"
            else:
                met = "not measured"
            tcp = cell(tcp_pair, loss, "tcp", 0) if tcp_pair else "—"
            L.append(f"| {loss:g} | ≥ {100 * thr:.0f} % | {cell(NATIVE, loss)} | {met} | {cell('metaroce', loss)} | "
                     f"{cell(RXE, loss)} | {tcp} |")
    L.append("")
    return L


def fmt_target(t):
    if t["value"] is None:
        return ("**not met**: " if t["met"] is False else "not measured: ") + t["why_unmeasured"]
    v = f"{100 * t['value']:.0f} %" if t["id"] == "loss1_share" else f"{t['value']:.2f}×"
    cell = f"{v}: {'met' if t['met'] else '**not met**'}"
    if t.get("tcp_normalised") is not None:
        cell += f" ({t['tcp_normalised']:.2f}× with each pair's TCP as yardstick)"
    if t.get("caveat"):
        cell += f"; {t['caveat']}"
    if t["flags"]:
        cell += " — figures flagged (see the tables' notes)"
    return cell


def target_reference(figs, tid):
    """rdma_rxe's own value for a target that compares a pair with itself (else None)."""
    w64 = find(figs, RXE, "bw", "write", 65536)
    t = find(figs, RXE, "tcp", "tcp", qps=1)
    if tid == "write64k_vs_tcp":
        v = ratio(w64 and w64.get("gbps"), t and t.get("gbps"))
    elif tid == "cpu_vs_tcp":
        v = ratio(w64 and w64.get("cpu_s_per_gb"), t and t.get("cpu_s_per_gb"))
    elif tid == "loss1_share":
        l1 = find(figs, RXE, "loss", "write", 65536, loss=1)
        v = share(l1, find(figs, RXE, "loss", "write", 65536, loss=0))
        if v is None and l1 and l1["runs"] and not l1["ok_runs"]:
            return "every run at 1 % loss failed"
        return None if v is None else f"{100 * v:.0f} %"
    else:
        return None
    return None if v is None else f"{v:.2f}×"


def write_md(path, meta, figs, cont, results):
    cols = ordered(p["name"] for p in meta["pairs"])
    modes = [p for p in cols if p in MODES]
    have_rxe = RXE in cols
    L = []
    L.append(f"# MetaRoCE benchmarks — {meta['date']}, commit {meta['commit']}")
    L.append("")
    mtus = sorted({str(g.get("mtu")) for g in meta.get("guests", {}).values() if g.get("mtu")})
    if mtus:
        L.append(f"Link MTU: {', '.join(mtus)} (RDMA and TCP alike).")
        L.append("")
    params = sorted({g.get("params") for g in meta.get("guests", {}).values() if g.get("params")})
    if params:
        L.append(f"Module parameters on the guests' kernel command line: {'; '.join(params)} (else the defaults).")
        L.append("")
    L.append(f"{meta['reps']} repetition(s) per figure{' (quick mode)' if meta['quick'] else ''}; each cell: median "
             "(min–max). Pairs of TCG guests (1 vCPU each) joined by QEMU's socket link, one pair at a time. "
             "Ratios compare figures of the same run. Bandwidth: perftest's average (Gb/s); every figure is "
             f"cross-checked against payload ÷ transfer window on the client's eth0 (flagged when off by more than "
             f"{int(CHECK_TOLERANCE * 100)} %). The window is converted to host seconds: the client stamps files on the host (9p) "
             f"at the start and end of each run, which also checks the guest's clock against the host's (flagged when off "
             f"by more than {int(CLOCK_TOLERANCE * 100)} %). MetaRoCE native: the same release kernel and module as RoCEv2 mode, "
             "device type `metaroce-native`; its RC QPs (every workload here) use the native transport on UDP port 19791, "
             "UC/UD would stay RoCEv2; the device's counters say per run which wire carried it (section \"Which wire\").")
    L.append("")
    L.append("| pair | kernel | user space | result | host during the run |")
    L.append("| --- | --- | --- | --- | --- |")
    for p in meta["pairs"]:
        c = cont.get(p["name"], {})
        host = "no samples" if not c.get("samples") else (
            f"load1 median {c['load1_median']:.1f}, max {c['load1_max']:.1f}; other guests {int(c['share_with_other_guests'] * 100)} %, "
            f"compilers {int(c['share_with_compilers'] * 100)} % of the time" + (" — **contended**" if c["contended"] else " — quiet"))
        rs = [r for r in results if r["pair"] == p["name"]]
        nok = sum(1 for r in rs if r["ok"])
        res = ("no runs recorded" if not rs else f"{nok} of {len(rs)} runs ok") + ("" if p["rc"] == 0 else ", **pair failed**")
        g = meta.get("guests", {}).get(f"{p['name']}-b", {})
        up = f"{g['uprov']} (uverbs ABI {g['uabi']})" if g.get("uprov") else "not recorded"
        L.append(f"| {PAIR_LABEL.get(p['name'], p['name'])} | {p['kernel']} | {up} | {res} ({p['end'] - p['start']} s) | {host} |")
    L.append("")
    missing = [p for p in PAIR_ORDER[:3] if p not in cols]
    if missing:
        L.append("Not in this run: " + ", ".join(PAIR_LABEL[p] for p in missing) + " (its columns and ratios are left out).")
        L.append("")

    tcp_of = {m: find(figs, m, "tcp", "tcp", qps=1) for m in modes}
    tcp_rx = find(figs, RXE, "tcp", "tcp", qps=1)

    def notes_for(fs):
        return "; ".join(f"{PAIR_LABEL.get(p, p)}: {check_note(f)}" for p, f in fs.items() if check_note(f))

    hdr = ["figure"] + [PAIR_SHORT.get(p, p) for p in cols] + [f"TCP 1 stream ({MODES[m]} pair)" for m in modes]
    for m in modes:
        hdr += ([f"{MODES[m]} ÷ rxe"] if have_rxe else []) + [f"{MODES[m]} ÷ TCP"] + \
               ([f"{MODES[m]} ÷ rxe, each ÷ its pair's TCP"] if have_rxe else [])
    hdr.append("notes")
    L.append("## Bandwidth (Gb/s) and message rate")
    L.append("")
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + " --- |" * len(hdr))

    def row(label, fs, key, with_tcp):
        cells = [label] + [fmt(fs[p] and fs[p].get(key)) for p in cols]
        cells += [fmt(tcp_of[m] and tcp_of[m].get("gbps")) if with_tcp else "" for m in modes]
        rx = fs.get(RXE)
        for m in modes:
            a, t = fs[m], tcp_of[m]
            if have_rxe:
                cells.append(fmt_ratio(ratio(a and a.get(key), rx and rx.get(key))))
            cells.append(fmt_ratio(ratio(a and a.get(key), t and t.get("gbps"))) if with_tcp else "")
            if have_rxe:
                # The pairs run one after the other on a shared host: each pair's own TCP figure measures
                # the link it had, so this ratio takes out a change of load between the pairs.
                r1 = ratio(a and a.get(key), t and t.get("gbps"))
                r2 = ratio(rx and rx.get(key), tcp_rx and tcp_rx.get("gbps"))
                cells.append(fmt_ratio(r1 / r2) if with_tcp and r1 and r2 else "")
        cells.append(notes_for(fs))
        L.append("| " + " | ".join(cells) + " |")

    for op in ("write", "read", "send"):
        for size in SIZES:
            fs = {p: find(figs, p, "bw", op, size) for p in cols}
            if any(fs.values()):
                row(f"ib_{op}_bw {size_label(size)}", fs, "gbps", True)
    for q in (1, 8):
        fs = {p: find(figs, p, "rate", "write", 64, qps=q) for p in cols}
        if any(fs.values()):
            row(f"message rate, WRITE 64 B, {q} QP{'s' if q > 1 else ''} (Mpps)", fs, "mpps", False)
    L.append("")
    L.append("## Latency, 8 B (µs, perftest's t_typical = median, and 99th percentile)")
    L.append("")
    lh = ["figure"] + [PAIR_SHORT.get(p, p) for p in cols] + ([f"{MODES[m]} ÷ rxe" for m in modes] if have_rxe else []) + ["notes"]
    L.append("| " + " | ".join(lh) + " |")
    L.append("|" + " --- |" * len(lh))
    for op in ("send", "write"):
        fs = {p: find(figs, p, "lat", op, 8) for p in cols}
        if not any(fs.values()):
            continue
        for key, what in (("median_us", "median"), ("p99_us", "p99")):
            cells = [f"ib_{op}_lat {what}"] + [fmt(fs[p] and fs[p].get(key)) for p in cols]
            if have_rxe:
                cells += [fmt_ratio(ratio(fs[m] and fs[m].get(key), fs[RXE] and fs[RXE].get(key))) for m in modes]
            cells.append(notes_for(fs))
            L.append("| " + " | ".join(cells) + " |")
    L.append("")
    L.append("## CPU per GB (busy CPU seconds of both guests per GB of payload, within the transfer window)")
    L.append("")
    L.append("| workload | " + " | ".join(PAIR_LABEL.get(p, p) for p in cols) + " |")
    L.append("| --- |" + " --- |" * len(cols))
    cpu_rows = [(f"ib_write_bw {size_label(s)}", "bw", "write", s, 1) for s in SIZES] + \
               [("message rate WRITE 64 B, 1 QP", "rate", "write", 64, 1), ("message rate WRITE 64 B, 8 QPs", "rate", "write", 64, 8),
                ("TCP, 1 stream", "tcp", "tcp", 0, 1), ("TCP, 4 streams", "tcp", "tcp", 0, 4)]
    for label, kind, op, size, q in cpu_rows:
        fs = [find(figs, p, kind, op, size, qps=q) for p in cols]
        if any(fs):
            L.append(f"| {label} | " + " | ".join(fmt(f and f.get("cpu_s_per_gb")) for f in fs) + " |")
    L.append("")
    L.append("## TCP (iperf3) on each pair's link (Gb/s)")
    L.append("")
    L.append("| streams | " + " | ".join(PAIR_LABEL.get(p, p) for p in cols) + " |")
    L.append("| --- |" + " --- |" * len(cols))
    for q in (1, 4):
        fs = [find(figs, p, "tcp", "tcp", qps=q) for p in cols]
        L.append(f"| {q} | " + " | ".join(fmt(f and f.get("gbps")) + (f" ({check_note(f)})" if check_note(f) else "") for f in fs) + " |")
    L.append("")
    L += loss_md(figs, cols, modes, "loss", notes_for)
    L += loss_md(figs, cols, modes, "limited", notes_for)

    L.append("## Targets (issue 9), each MetaRoCE mode")
    L.append("")
    tg = targets(figs, cols)
    if not modes:
        L.append("No MetaRoCE pair in this run.")
    else:
        th = ["target"] + [PAIR_SHORT[m] for m in modes]
        if have_rxe:
            th.append("rdma_rxe (reference)")
        L.append("| " + " | ".join(th) + " |")
        L.append("|" + " --- |" * len(th))
        for tid, text, *_ in TARGETS:
            ts = {t["pair"]: t for t in tg if t["id"] == tid}
            cells = [text] + [fmt_target(ts[m]) for m in modes]
            if have_rxe:
                cells.append(target_reference(figs, tid) or "")
            L.append("| " + " | ".join(cells) + " |")
        rate = []
        for q in (1, 8):
            for m in modes:
                a, x = find(figs, m, "rate", "write", 64, qps=q), find(figs, RXE, "rate", "write", 64, qps=q)
                r = ratio(a and a.get("mpps"), x and x.get("mpps"))
                if r is not None:
                    rate.append(f"{MODES[m]} {r:.2f}× with {q} QP{'s' if q > 1 else ''}")
        if rate:
            L.append("")
            L.append("64 B WRITE message rate ÷ rdma_rxe (no numeric target): " + ", ".join(rate) + ".")
    L.append("")

    L += abi_md(figs, cols)
    L.append("## Which wire carried the MetaRoCE runs")
    L.append("")
    L.append("From each run's counters on both guests (`rdma statistic`, before and after): native DATA packets "
             "(first transmissions), retransmissions, and RoCEv2 packets (sent_pkts less native DATA, native ACKs and "
             "retransmissions). Expected: RoCEv2 mode all RoCEv2, native mode all native. Medians over the runs; "
             "a figure whose runs went elsewhere says so in the tables' notes as well.")
    L.append("")
    wf = [f for f in figs if f["pair"] in MODES and f.get("wire") and f["ok_runs"]]
    summary = False
    for m in modes:
        ws = [r.get("wire") for r in results if r["pair"] == m and r["ok"] and "wire" in r]
        if not ws:
            continue
        kinds = [{"mixed": "both RoCEv2 and native", "none": "no packets counted"}.get(w["wire"], w["wire"]) if w
                 else "wire not recorded" for w in ws]
        rec = [w for w in ws if w]
        L.append(f"- {PAIR_LABEL[m]}: {len(ws)} RDMA runs ok: " + ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))
                 + (f"; in the {len(rec)} with counters: native DATA packets {sum(w['native_data'] for w in rec)}, RoCEv2 "
                    f"packets {sum(w['roce_pkts'] for w in rec)}, retransmissions {sum(w['retransmits'] for w in rec)}." if rec else "."))
        summary = True
    if summary:
        L.append("")
    # Per workload: every native figure, and any RoCEv2-mode figure with runs off its expected wire.
    wf = [f for f in wf if f["wire"]["unknown"] < f["ok_runs"] and (
        f["pair"].startswith("metaroce-native") or any(n for k, n in f["wire"].items() if k not in (EXPECTED_WIRE[f["pair"]], "unknown")))]
    if not wf:
        L.append("No MetaRoCE RDMA run with counters to detail in this run.")
    else:
        L.append("| pair | workload | runs native / RoCEv2 / both / none / not recorded | native DATA | retransmissions | native RTOs | native silences | native duplicates | RoCEv2 packets |")
        L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for f in sorted(wf, key=lambda f: (PAIR_ORDER.index(f["pair"]), f["kind"], f["op"], f["size"], f["qps"], f["loss"])):
            w = f["wire"]
            what = {"bw": f"ib_{f['op']}_bw {size_label(f['size'])}", "lat": f"ib_{f['op']}_lat {size_label(f['size'])}",
                    "rate": f"message rate {f['op'].upper()} {size_label(f['size'])}, {f['qps']} QP{'s' if f['qps'] > 1 else ''}",
                    "loss": f"ib_{f['op']}_bw {size_label(f['size'])}, {f['loss']:g} % loss",
                    "limited": f"ib_{f['op']}_bw {size_label(f['size'])}, {f['loss']:g} % loss, link-limited"}.get(f["kind"], f["kind"])
            L.append(f"| {PAIR_SHORT[f['pair']]} | {what} | {w['native']} / {w['RoCEv2']} / {w['mixed']} / {w['none']} / {w['unknown']} | "
                     f"{fmt(f.get('native_data'), digits=4)} | {fmt(f.get('retransmits'), digits=4)} | "
                     f"{fmt(f.get('timeouts'), digits=4)} | {fmt(f.get('silences'), digits=4)} | "
                     f"{fmt(f.get('duplicates'), digits=4)} | {fmt(f.get('roce_pkts'), digits=4)} |")
    L.append("")
    L += vethlat_md(meta.get("vethlat", {}), cols)
    L += memory_md(meta.get("memory", {}), cols)
    with open(path, "w") as f:
        f.write("\n".join(L))
    return tg


def abi_md(figs, cols):
    """The user ABI section: the same driver, kernel source and RoCEv2 mode through libmetaroce (MetaRoCE's
    own ABI) and through librxe (rdma_rxe's ABI, rxe-abi kernel), with the ratio of the two."""
    if OWN_ABI not in cols or RXE_ABI not in cols:
        return []
    L = ["## User ABI: libmetaroce against librxe (same driver, RoCEv2 mode)", "",
         "MetaRoCE's own user ABI and provider (pair metaroce) against rdma_rxe's ABI and Debian's librxe over the "
         "same driver (pair metaroce-librxe: the release configuration with CONFIG_RDMA_METAROCE_RXE_ABI). "
         "Bandwidth and message rate: higher is better; latency and CPU per GB: lower is better. The pairs run one "
         "after the other on a shared host: the last column divides each pair's figure by its own TCP figure first, "
         "which takes out a change of load between them.", "",
         "| figure | libmetaroce | librxe | libmetaroce ÷ librxe | the same, each ÷ its pair's TCP | notes |",
         "| --- | --- | --- | --- | --- | --- |"]
    tcp = {p: find(figs, p, "tcp", "tcp", qps=1) for p in (OWN_ABI, RXE_ABI)}
    rows = [(f"ib_{op}_bw {size_label(sz)} (Gb/s)", ("bw", op, sz, 1), "gbps") for op in ("write", "read", "send") for sz in SIZES]
    rows += [(f"message rate, WRITE 64 B, {q} QP{'s' if q > 1 else ''} (Mpps)", ("rate", "write", 64, q), "mpps") for q in (1, 8)]
    rows += [(f"ib_{op}_lat 8 B {what} (µs)", ("lat", op, 8, 1), key) for op in ("send", "write")
             for key, what in (("median_us", "median"), ("p99_us", "p99"))]
    rows += [("CPU per GB, ib_write_bw 64 KiB (s)", ("bw", "write", 65536, 1), "cpu_s_per_gb"),
             ("CPU per GB, message rate 8 QPs (s)", ("rate", "write", 64, 8), "cpu_s_per_gb")]
    for label, (kind, op, size, q), key in rows:
        a, b = find(figs, OWN_ABI, kind, op, size, qps=q), find(figs, RXE_ABI, kind, op, size, qps=q)
        if not (a and a.get(key)) and not (b and b.get(key)):
            continue
        notes = "; ".join(f"{PAIR_SHORT[p]}: {check_note(f)}" for p, f in ((OWN_ABI, a), (RXE_ABI, b)) if check_note(f))
        norm = ""
        if key in ("gbps", "mpps"):
            r1 = ratio(a and a.get(key), tcp[OWN_ABI] and tcp[OWN_ABI].get("gbps"))
            r2 = ratio(b and b.get(key), tcp[RXE_ABI] and tcp[RXE_ABI].get("gbps"))
            norm = fmt_ratio(r1 / r2) if r1 and r2 else ""
        L.append(f"| {label} | {fmt(a and a.get(key))} | {fmt(b and b.get(key))} | "
                 f"{fmt_ratio(ratio(a and a.get(key), b and b.get(key)))} | {norm} | {notes} |")
    L.append("")
    return L


def read_vethlat(out, pair):
    """The veth latency runs of a pair's guest a (the bench collection's 15-veth-lat.sh): per
    operation, the client's parsed perftest rows of the runs that succeeded, and the failed count."""
    d = os.path.join(out, f"bench-{pair}-a", "bench")
    try:
        with open(os.path.join(d, "vethlat.a.json")) as f:
            rec = json.load(f)
    except (FileNotFoundError, ValueError):
        return None
    res = {"iters": rec.get("iters"), "ops": {}}
    for r in rec.get("runs", []):
        o = res["ops"].setdefault(r["op"], {"rows": [], "failed": 0})
        row = parse_perftest("lat", read_text(os.path.join(d, f"{r['id']}.cli"))) if r.get("rc") == 0 else None
        if row:
            o["rows"].append(row)
        else:
            o["failed"] += 1
    return res


def vethlat_md(vl, cols):
    """8 B latency between two namespaces over veth in one guest, each pair's provider."""
    L = ["## Latency over veth, 8 B (µs, median of the runs' t_typical, and their 99th percentile)", ""]
    have = [p for p in cols if vl.get(p)]
    if not have:
        return L + ["Not measured in this run.", ""]
    L.append("Guest a of each pair runs `ib_send_lat -e` (both ends wait for completion events) between two devices of "
             "its provider, each on one end of a veth pair in a namespace of its own (one kernel: MetaRoCE on the "
             "release kernel, rdma_rxe on Debian's): no socket link in the way. Each cell: median (min–max) over the "
             "repetitions.")
    L.append("")
    L.append("| figure | " + " | ".join(PAIR_LABEL.get(p, p) for p in have) + " |")
    L.append("| --- | " + " | ".join("---" for _ in have) + " |")
    med = {}
    ops = [op for op in ("send", "write") if any(op in vl[p]["ops"] for p in have)]
    for op in ops:
        for key, what in (("t_typical_us", "median"), ("p99_us", "p99")):
            cells = []
            for p in have:
                o = vl[p]["ops"].get(op, {"rows": [], "failed": 0})
                v = summarize([r[key] for r in o["rows"]])
                if key == "t_typical_us" and v:
                    med[(p, op)] = v["median"]
                cells.append(fmt(v) + (f" ({o['failed']} failed)" if o["failed"] else ""))
            L.append(f"| ib_{op}_lat {what} | " + " | ".join(cells) + " |")
    L.append("")
    if RXE in have:
        parts = []
        for p in have:
            if p == RXE:
                continue
            for op in ops:
                a, x = med.get((p, op)), med.get((RXE, op))
                if a and x:
                    parts.append(f"{PAIR_LABEL.get(p, p)} ib_{op}_lat {a / x:.2f}× rdma_rxe")
        if parts:
            L.append("Ratios of the medians: " + "; ".join(parts) + " (issue 33's target: ib_send_lat ≤ 0.7×).")
            L.append("")
    return L


def read_memory(out, pair):
    """The mem_probe.py records of a pair's two guests (the bench collection's 40-memory.sh)."""
    recs = []
    for role in "ab":
        try:
            with open(os.path.join(out, f"bench-{pair}-{role}", "bench", f"memory.{role}.json")) as f:
                recs.append(json.load(f))
        except (FileNotFoundError, ValueError):
            pass
    return recs


def memory_md(mem, cols):
    """Kernel memory per RC QP and per connection, each pair's two guests side by side."""
    L = ["## Kernel memory per QP and per connection", ""]
    have = [p for p in cols if mem.get(p)]
    if not have:
        return L + ["Not measured in this run (no memory records).", ""]
    L.append("From `mem_probe.py` in each guest (no traffic): deltas of system-wide counters between phases, divided by "
             "the number of objects. *slab*: /proc/meminfo Slab (slab pages and kmalloc() above 8 KiB, which the page "
             "allocator serves); *vmalloc*: VmallocUsed "
             "(the rings librxe maps); *other pages*: the rest of the kernel's used memory (page-allocator allocations; "
             "per-CPU page lists make it noisy and it can be negative). A QP has 64 send and 64 receive WQEs of one SGE; "
             "*at RTR* adds what moving it to RTR costs; *connection*: what the first QP towards a new address costs beyond "
             "a QP (MetaRoCE native opens a connection there; elsewhere it should be about 0). Figures in bytes, guests a / b.")
    L.append("")
    L.append("| pair | QP created: slab / vmalloc / other | QP at RTR: slab / vmalloc / other | connection: slab / vmalloc / other | left after destroying every QP: slab / vmalloc / other |")
    L.append("| --- | --- | --- | --- | --- |")

    def cell(recs, key):
        return " · ".join(f"{r[key]['slab']} / {r[key]['vmalloc']} / {r[key]['pages']}" for r in recs)
    for p in have:
        recs = mem[p]
        L.append(f"| {PAIR_LABEL.get(p, p)} | {cell(recs, 'qp_created')} | {cell(recs, 'qp_rtr')} | {cell(recs, 'connection')} | "
                 + " · ".join(f"{r['left_after_destroy']['slab']} / {r['left_after_destroy']['vmalloc']} / "
                              f"{r['left_after_destroy']['pages']}" for r in recs) + " |")
    L.append("")
    split = [(p, mem[p][0]["qp_created_by_cache"]) for p in have if mem[p][0].get("qp_created_by_cache")]
    if split:
        L.append("A created QP's slab share by cache (guest a; caches that grew by at least 64 B per QP):")
        L.append("")
        for p, c in split:
            L.append(f"- {PAIR_LABEL.get(p, p)}: " + ", ".join(f"{k} {v} B" for k, v in c.items()))
        L.append("")
    if RXE in have:
        tot = {p: [sum(r["qp_rtr"][k] for k in ("slab", "vmalloc", "pages")) for r in mem[p]] for p in have}
        rx = sorted(tot[RXE])[len(tot[RXE]) // 2] if tot[RXE] else None
        parts = []
        for p in have:
            if p == RXE or not tot[p] or not rx:
                continue
            v = sorted(tot[p])[len(tot[p]) // 2]
            parts.append(f"{PAIR_LABEL.get(p, p)} {v} B ({v / rx:.2f}× rdma_rxe's {rx} B)")
        if parts:
            L.append("Per RC QP at RTR, all three kinds together: " + "; ".join(parts) + ".")
            L.append("")
    return L


def plots(out, figs, pairs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pairs = ordered(pairs)
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
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=PAIR_LABEL.get(p, p), color=COLOURS.get(p))
        for m in [p for p in pairs if p in MODES]:
            t = find(figs, m, "tcp", "tcp", qps=1)
            if t and t.get("gbps"):
                ax.axhline(t["gbps"]["median"], color=COLOURS[m], linestyle="--", alpha=0.6,
                           label=f"TCP, 1 stream ({PAIR_SHORT[m]} pair)")
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

    for kind, name, title, targets in (
            ("loss", "goodput_vs_loss.png", "Goodput under loss (TCG guests, QEMU socket link)",
             [(1, 90, "target (native, 30-loss): 90 % at 1 % loss")]),
            ("limited", "goodput_vs_loss_limited.png",
             "Goodput under loss behind a link-limited bottleneck (tbf + RED/ECN FIFO)",
             [(loss, 100 * thr, f"target (native): {100 * thr:.0f} % at {loss} %") for loss, thr in LIMITED_TARGETS])):
        if loss_plot(out, figs, pairs, kind, name, title, targets):
            made.append(name)
    return made


def loss_plot(out, figs, pairs, kind, name, title, targets):
    """Left: goodput against loss; right: each pair's goodput as a share of its own lossless goodput,
    with the native transport's targets. Loss 0 is drawn at 0.01 % on the log axes."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, axs) = plt.subplots(1, 2, figsize=(12, 4.5))
    any_pts = False
    for p in pairs:
        for op, style, label in (("write", "-", "ib_write_bw 64 KiB"), ("tcp", ":", "TCP 1 stream")):
            pts = [f for f in figs if f["pair"] == p and f["kind"] == kind and f["op"] == op and f.get("gbps")]
            pts.sort(key=lambda f: f["loss"])
            if not pts:
                continue
            any_pts = True
            xs = [f["loss"] if f["loss"] > 0 else 0.01 for f in pts]
            ys = [f["gbps"]["median"] for f in pts]
            err = [[f["gbps"]["median"] - f["gbps"]["min"] for f in pts], [f["gbps"]["max"] - f["gbps"]["median"] for f in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", linestyle=style, capsize=3, color=COLOURS.get(p),
                        label=f"{PAIR_LABEL.get(p, p)}: {label}")
            if op == "write" and pts[0]["loss"] == 0:
                axs.plot(xs, [100 * y / ys[0] for y in ys], marker="o", color=COLOURS.get(p), label=PAIR_LABEL.get(p, p))
                # Loss levels where every run failed (no goodput to draw): a cross at 0 %.
                dead = [f["loss"] for f in figs if f["pair"] == p and f["kind"] == kind and f["op"] == "write"
                        and f["runs"] and not f["ok_runs"] and f["loss"] > 0]
                if dead:
                    axs.scatter(dead, [0] * len(dead), marker="x", s=60, color=COLOURS.get(p),
                                label=f"{PAIR_LABEL.get(p, p)}: every run failed")
    if any_pts:
        ax.set_xscale("log")
        ax.set_xlabel("netem loss each way, % (0 drawn at 0.01)")
        ax.set_ylabel("goodput, Gb/s (median, min–max)")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=6)
        ax.set_title("Goodput vs loss")
        for loss, pct, label in targets:
            axs.scatter([loss], [pct], marker="_", s=300, color="grey", label=label)
        axs.set_xscale("log")
        axs.set_ylim(-5, 110)
        axs.set_xlabel("netem loss each way, % (0 drawn at 0.01)")
        axs.set_ylabel("ib_write_bw 64 KiB, % of the pair's lossless goodput")
        axs.grid(True, alpha=0.3, which="both")
        axs.legend(fontsize=6)
        axs.set_title("Share of lossless goodput")
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=80)
    plt.close(fig)
    return any_pts


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
    memory = {p["name"]: read_memory(a.out, p["name"]) for p in pairs}
    vethlat = {p["name"]: read_vethlat(a.out, p["name"]) for p in pairs}
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": a.commit, "reps": a.reps,
            "quick": a.quick, "pairs": pairs, "guests": setups, "memory": memory, "vethlat": vethlat, "host": cont, "check_tolerance": CHECK_TOLERANCE,
            "modes": {"metaroce": "MetaRoCE, link type metaroce: every QP over RoCEv2",
                      "metaroce-native": "MetaRoCE, link type metaroce-native: RC QPs over the native transport (UDP "
                                         "19791), UC/UD/QP1 over RoCEv2; each run's wire from the device counters",
                      "metaroce-native-auth": "as metaroce-native, with a fabric key (logon key metaroce:eth0): every "
                                              "native packet sealed (transport.rst 13.1)"}}
    tg = write_md(os.path.join(a.out, "results.md"), meta, figs, cont, results)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "targets": tg, "figures": figs, "runs": results}, f, indent=1)
    made = plots(a.out, figs, [p["name"] for p in pairs])
    ok = sum(1 for r in results if r["ok"])
    print(f"bench report: {len(results)} runs ({ok} ok), {len(figs)} figures, plots: {', '.join(made) or 'none'}")
    for m in [p for p in ordered(p["name"] for p in pairs) if p in MODES]:
        ws = [r["wire"]["wire"] if r.get("wire") else "not recorded" for r in results if r["pair"] == m and r["ok"] and "wire" in r]
        if ws:
            print(f"bench report: {PAIR_LABEL[m]}: RDMA runs by wire: "
                  + ", ".join(f"{k} {ws.count(k)}" for k in dict.fromkeys(sorted(ws))))
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
