#!/usr/bin/env python3
"""Pairwise fusion, measured as "Pairwise BPF programs should be optimized
together" (eBPF'25) measures it: fio doing 4 KiB random reads and random
writes (sync engine, one job) on a tmpfs file, side by side in one run,

  untraced        fio alone;
  SUD floor       fio with Syscall User Dispatch on in every thread and the
                  selector always ALLOW, nothing attached
                  (scripts/sud-floor.c): what SUD alone costs per system
                  call, which no bpfjet change removes for the calls that go
                  through it;
  kernel          the tool's entry/exit pair in the kernel's syscall
                  tracepoints (examples/trace/ktrace.c, libbpf);
  bpfjet unfused -rodata  `--no-fuse --no-fold-rodata`: not even .rodata
                  folded by the JIT;
  bpfjet unfused  `bpfjet trace --no-fuse`: the pair hands its value over in
                  the hash map;
  bpfjet MODE     `bpfjet trace --fuse MODE` for each step of the fusion
                  ladder the binary offers (`bpfjet trace --help`): inline
                  (the pair on libc's read/write through one call-through
                  stub), fold (+ attach-site constants), internalise-calls (+ hand-off
                  maps per thread, slot operations as calls), internalise
                  (+ slot operations compiled in), compile (+ each pair
                  compiled into one native function around the wrapper's
                  call); `all` is left out when it equals the top rung. A binary without `--fuse` runs its
                  default (fused) once as "bpfjet fused".

Each bpfjet run's report says which pairs actually ran fused and which maps
were internalised; the table shows it. Reported: fio IOPS (median of
--repeat runs), throughput overhead against untraced (median, min..max),
and the per-call cost of tracing in ns (1e9/IOPS traced - 1e9/IOPS
untraced: one read or write system call per fio I/O, so this is the cost
of one entry + exit pair), and the same from CPU time: fio's job thread's
CPU time per I/O minus untraced (robust on a shared machine, where a
thread waiting for a CPU lowers throughput but not CPU time). The paper's figures for fsdist are printed next
to ours: 28.13% (random read) / 26.97% (random write) unfused, 8.98% /
8.60% fused by hand.

Usage: scripts/bench-fusion.py [--runtime 5] [--size-mb 256] [--repeat 3]
         [--tools fsdist] [--workloads randread,randwrite]
         [--bpfjet target/release/bpfjet] [--engine jit|interp]
         [--fuse-modes inline,fold,internalise-calls,internalise,compile] [--no-sud-floor]
         [--markdown FILE] [--svg FILE] [--json FILE]
Root is needed for the kernel setup (skipped with a SKIPPED line otherwise).
"""

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build", "examples", "trace")
# The paper's Table/Figure 6 numbers for fsdist (throughput overhead, %).
PAPER = {
    ("fsdist", "randread"): {"unfused": 28.13, "fused by hand": 8.98},
    ("fsdist", "randwrite"): {"unfused": 26.97, "fused by hand": 8.60},
}

_spec = importlib.util.spec_from_file_location(
    "bench_trace", os.path.join(ROOT, "scripts", "bench-trace.py"))
bt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bt)


def fuse_modes(bpfjet):
    """The `--fuse` values `bpfjet trace` accepts, in its help's order;
    [] when it has no such option."""
    text = subprocess.run([bpfjet, "trace", "--help"], capture_output=True,
                          text=True).stdout
    m = re.search(r"--fuse <[^>]*>.*?\[possible values: ([^\]]+)\]", text, re.S)
    if not m:
        return []
    return [v.strip() for v in m.group(1).split(",") if v.strip()]


def setups_for(bpfjet, kernel_ok, sud_floor, only=None):
    """(label, argv prefix before OBJ -- CMD) of every setup to run; `only`
    restricts the `--fuse` modes. The SUD floor's prefix is an `env`
    setting LD_PRELOAD, run without OBJ."""
    out = [("untraced", None)]
    if sud_floor:
        out.append(("SUD floor", ["env", f"LD_PRELOAD={sud_floor}"]))
    if kernel_ok:
        out.append(("kernel", [os.path.join(BUILD, "ktrace"), "--json"]))
    offered = fuse_modes(bpfjet)
    help_text = subprocess.run([bpfjet, "trace", "--help"], capture_output=True,
                               text=True).stdout
    if "--no-fold-rodata" in help_text and (not only or "unfused-rodata" in only):
        out.append(("bpfjet unfused -rodata",
                    [bpfjet, "trace", "--json", "--no-fuse", "--no-fold-rodata"]))
    out.append(("bpfjet unfused", [bpfjet, "trace", "--json", "--no-fuse"]))
    modes = [m for m in offered if m not in ("none", "off")]
    # `all` is the top rung: `compile` where offered, else `internalise`.
    if "all" in modes and ("compile" in modes or "internalise" in modes):
        modes.remove("all")
    if only:
        modes = [m for m in modes if m in only]
    if modes:
        for m in modes:
            out.append((f"bpfjet {m}", [bpfjet, "trace", "--json", f"--fuse={m}"]))
    else:
        out.append(("bpfjet fused", [bpfjet, "trace", "--json"]))
    return out


def build_sud_floor(tmp):
    """scripts/sud-floor.c as a preload library in `tmp`, or None."""
    so = os.path.join(tmp, "sud-floor.so")
    r = subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so,
                        os.path.join(ROOT, "scripts", "sud-floor.c"), "-ldl", "-lpthread"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"SKIPPED: setup SUD floor: cc failed: {r.stderr[-400:]}", file=sys.stderr)
        return None
    return so


def one_run(prefix, tool, workload, args, tmp):
    fio_out = os.path.join(tmp, "fio.json")
    out = os.path.join(tmp, "tracer.out")
    err = os.path.join(tmp, "tracer.err")
    fio = bt.fio_argv(workload, args.runtime, args.size_mb, fio_out)
    if prefix is None:
        argv = fio
    elif prefix[0] == "env":
        argv = prefix + fio
    else:
        argv = prefix + [os.path.join(BUILD, f"{tool}.o"), "--"] + fio
    if prefix is not None and prefix[0] == args.bpfjet:
        argv = argv[:2] + ["--engine", args.engine] + argv[2:]
    code, usage = bt.run(argv, out, err)
    if code != 0:
        tail = open(err, errors="replace").read()[-800:]
        raise RuntimeError(f"{' '.join(argv[:6])} ...: exit {code}: {tail}")
    if prefix is not None and prefix[0] == "env":
        said = open(err, errors="replace").read()
        if "sud-floor: on in 0 threads" in said or "sud-floor: on in" not in said:
            raise RuntimeError(f"the SUD floor was not switched on: {said[-400:]}")
    r = bt.fio_summary(fio_out)
    r["cpu_s"] = usage.ru_utime + usage.ru_stime
    r["fused"] = None
    if prefix is not None and prefix[0] == args.bpfjet:
        report = bt.last_json(out)
        r["fused"] = [
            f"{p['entry']}+{p['exit']}: {'+'.join(p.get('steps', []))} "
            f"[{','.join(p.get('internalised', []))}]"
            for p in report.get("fused", [])
        ]
    return r


def svg_chart(rows, path):
    """Grouped horizontal bars: overhead (%) per workload and setup, the
    paper's numbers in grey next to ours."""
    bars = []
    for (tool, workload), setups in rows.items():
        for label, ov in setups:
            bars.append((f"{tool} {workload}: {label}", ov, "#55a868" if "bpfjet" in label
                         else "#4c72b0" if label == "kernel" else "#999"))
        for label, v in PAPER.get((tool, workload), {}).items():
            bars.append((f"{tool} {workload}: paper {label}", v, "#ccc"))
    if not bars:
        return
    width, bar_h, left = 820, 16, 330
    top = max(1.0, max(abs(v) for _, v, _ in bars))
    scale = (width - left - 70) / top
    h = 30 + len(bars) * (bar_h + 4)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="14">fio 4 KiB throughput lost to tracing (%, median; '
           f'grey: the paper)</text>']
    for i, (label, v, color) in enumerate(bars):
        y = 24 + i * (bar_h + 4)
        w = max(1.0, abs(v) * scale)
        out.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{label}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}"/>')
        out.append(f'<text x="{left + w + 4:.1f}" y="{y + 12}">{v:.2f}%</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runtime", type=int, default=5)
    p.add_argument("--size-mb", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tools", default="fsdist")
    p.add_argument("--workloads", default="randread,randwrite")
    p.add_argument("--bpfjet", default=os.path.join(ROOT, "target", "release", "bpfjet"))
    p.add_argument("--engine", default="jit", choices=["interp", "jit"])
    p.add_argument("--fuse-modes", help="comma-separated --fuse modes to run (default: all "
                   "offered; 'unfused-rodata' selects the row without .rodata folding)")
    p.add_argument("--no-sud-floor", action="store_true", help="leave out the SUD floor row")
    p.add_argument("--markdown")
    p.add_argument("--svg")
    p.add_argument("--json", help="raw results (every run) as JSON")
    args = p.parse_args()

    if not os.access(args.bpfjet, os.X_OK):
        sys.exit(f"{args.bpfjet} is not built (make build)")
    subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "examples"), "trace"], check=True)
    kernel_ok = os.geteuid() == 0
    if not kernel_ok:
        print("SKIPPED: setup kernel: needs root", file=sys.stderr)
    elif not os.path.isdir("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"])
    only = args.fuse_modes.split(",") if args.fuse_modes else None

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        sud_floor = build_sud_floor(tmp) if not args.no_sud_floor else None
        setups = setups_for(args.bpfjet, kernel_ok, sud_floor, only)
        for workload in args.workloads.split(","):
            bt.run(bt.fio_argv(workload, 1, args.size_mb, os.path.join(tmp, "warm.json")))
            for tool in args.tools.split(","):
                runs = {label: [] for label, _ in setups}
                # Rounds interleave the setups, so a drift of the machine
                # (other load, frequency) spreads over all of them.
                for _ in range(args.repeat):
                    for label, prefix in setups:
                        runs[label].append(one_run(prefix, tool, workload, args, tmp))
                for label, _ in setups:
                    print(f"{tool} {workload} {label}: "
                          f"{statistics.median(r['iops'] for r in runs[label]):,.0f} IOPS",
                          file=sys.stderr)
                results[(tool, workload)] = runs

    lines = [
        f"fio 4 KiB random I/O (sync engine, 1 job) on tmpfs, {args.runtime} s per run, "
        f"median of {args.repeat} interleaved rounds (min..max); bpfjet on the {args.engine} "
        f"engine. Per-call cost: 1e9/IOPS traced - 1e9/IOPS untraced.",
        "",
        "| tool | workload | setup | IOPS | throughput overhead | per call (ns) | CPU per I/O (ns) | CPU per call (ns) | CPU overhead | ran fused (pair: steps [internalised maps]) | paper |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = {}
    for (tool, workload), runs in results.items():
        base = statistics.median(r["iops"] for r in runs["untraced"])
        base_cpu = statistics.median(r["cpu_per_io_ns"] for r in runs["untraced"])
        rows[(tool, workload)] = []
        for label, _ in setups:
            rs = runs[label]
            iops = statistics.median(r["iops"] for r in rs)
            over = [100.0 * (base - r["iops"]) / base for r in rs]
            m, lo, hi = statistics.median(over), min(over), max(over)
            per_call = 1e9 / iops - 1e9 / base
            cpu = statistics.median(r["cpu_per_io_ns"] for r in rs)
            # fio's CPU per I/O against untraced, in percent: the overhead
            # measure a shared machine's waiting for a CPU does not blur
            # (the untraced row's own spread is the noise).
            cpu_over = [100.0 * (r["cpu_per_io_ns"] - base_cpu) / base_cpu for r in rs]
            cpu_txt = (f"{statistics.median(cpu_over):+.2f}% "
                       f"({min(cpu_over):+.2f}..{max(cpu_over):+.2f})")
            fused = rs[-1]["fused"]
            fused_txt = "-" if fused is None else ("; ".join(fused) or "nothing")
            paper = PAPER.get((tool, workload), {})
            paper_txt = "-"
            if label == "bpfjet unfused" and "unfused" in paper:
                paper_txt = f"{paper['unfused']:.2f}% unfused"
            elif label.startswith("bpfjet") and not label.startswith("bpfjet unfused") and paper:
                paper_txt = f"{paper['fused by hand']:.2f}% fused by hand"
            if label == "untraced":
                lines.append(f"| {tool} | {workload} | untraced | {iops:,.0f} | - | - | {cpu:,.0f} "
                             f"| - | {cpu_txt} | - | - |")
                continue
            rows[(tool, workload)].append((label, m))
            lines.append(f"| {tool} | {workload} | {label} | {iops:,.0f} | "
                         f"{m:+.2f}% ({lo:+.2f}..{hi:+.2f}) | {per_call:,.0f} | {cpu:,.0f} | "
                         f"{cpu - base_cpu:,.0f} | {cpu_txt} | {fused_txt} | "
                         f"{paper_txt} |")
    # The setups run interleaved, so round k of two setups saw the same
    # machine: the per-round difference resolves what fusion saves better
    # than two medians over a noisy machine.
    lines.append("")
    for (tool, workload), runs in results.items():
        for label, _ in setups:
            if not label.startswith("bpfjet") or label == "bpfjet unfused":
                continue
            diffs = [u["cpu_per_io_ns"] - f["cpu_per_io_ns"]
                     for u, f in zip(runs["bpfjet unfused"], runs[label])]
            lines.append(f"- {tool} {workload}: CPU per I/O, unfused minus {label}, per round: "
                         f"median {statistics.median(diffs):,.0f} ns "
                         f"({sum(d > 0 for d in diffs)} of {len(diffs)} rounds positive)")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.markdown:
        open(args.markdown, "w").write(table)
    if args.svg:
        svg_chart(rows, args.svg)
    if args.json:
        json.dump({f"{t} {w}": runs for (t, w), runs in results.items()},
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
