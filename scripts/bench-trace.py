#!/usr/bin/env python3
"""The eBPF-libraries study ("No two snowflakes are alike", eBPF'25), side by
side in one run: fio doing 4 KiB reads / writes / both on a tmpfs file,
untraced and traced by the tools of examples/trace/ in

  kernel    the tool loaded into the kernel by examples/trace/ktrace.c
            (libbpf, ring buffers consumed with ring_buffer__poll);
  bpftrace  the same tool written for Debian's bpftrace (the study's
            reference; examples/trace/bpftrace/*.bt);
  bpfjet    the same object under `bpfjet trace` (the programs run inside
            fio);
  bpfjet-ring  bpfjet with the ring-buffer tools' ring sized for the rate
            (`--ringbuf-size events=BYTES`, --ring-bytes, 4 MiB by default;
            the issue's "size the ring and the consumer"): rw_tracer* only;
  sud-floor no tool: fio with Syscall User Dispatch switched on in every
            thread and nothing attached (scripts/sud-floor.c preloaded),
            the floor of any tracer built on it; one row per workload.

It reports the study's three axes per tool, workload and setup: fio
throughput and mean latency (and the overhead against untraced, median of
--repeat runs with the min-max spread), events captured against the read and
write calls fio made, and CPU time and peak memory of the whole setup
(tracer + fio, from wait4). Writes a Markdown table (stdout, --markdown) and
an SVG bar chart of the throughput overhead (--svg).

Usage: scripts/bench-trace.py [--runtime 5] [--size-mb 256] [--repeat 3]
         [--tools syscount,rw_tracer,rw_tracer_all,fsdist]
         [--workloads read,write,rw] [--setups none,sud-floor,kernel,bpftrace,bpfjet,bpfjet-ring]
         [--ring-bytes 4194304]
         [--bpfjet target/release/bpfjet] [--bpfjet-engine jit|interp]
         [--bpfjet-before OTHER/bpfjet] [--interleave]
         [--markdown FILE] [--svg FILE]
Root is needed for the kernel and bpftrace setups. With --bpfjet-before,
setup `before` runs that other build of bpfjet (its libbpfjet_trace.so next
to it) as setup `bpfjet` runs --bpfjet. --interleave runs the setups in
rounds (untraced, then each setup once, --repeat times) instead of all runs
of one setup in a row, so slow drifts of the machine hit every setup alike.
The untraced row's spread is the untraced runs' own, against their median:
fio's round-to-round noise.
"""

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build", "examples", "trace")
FIO_FILE = "/dev/shm/bpfjet-trace-study"

# Tools whose records are the study's events (one per read/write call).
EVENT_TOOLS = {"rw_tracer", "rw_tracer_all"}
# bpftrace has no way to copy 4 KiB of a buffer into an event (its strings
# and buf() are capped far below), so the study's rw-tracer-all has no
# bpftrace form.
BPFTRACE_TOOLS = {"syscount", "rw_tracer", "fsdist"}


def run(argv, stdout_path=None, stderr_path=None, env=None):
    """Runs argv to completion; returns (exit status, rusage of its tree)."""
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    err = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
    proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for f in (out, err):
        if f is not subprocess.DEVNULL:
            f.close()
    return proc.returncode, usage


def fio_argv(workload, runtime, size_mb, output):
    return [
        "fio", "--name=study", f"--filename={FIO_FILE}", f"--size={size_mb}M",
        "--bs=4k", f"--rw={workload}", "--ioengine=sync", "--thread",
        "--time_based", f"--runtime={runtime}", "--output-format=json",
        f"--output={output}",
    ]


def fio_summary(path):
    job = json.load(open(path))["jobs"][0]
    ios = iops = 0.0
    lat = []
    for side in ("read", "write"):
        s = job[side]
        ios += s["total_ios"]
        iops += s["iops"]
        if s["total_ios"]:
            lat.append((s["clat_ns"]["mean"], s["total_ios"]))
    mean_lat = sum(l * n for l, n in lat) / max(1, sum(n for _, n in lat))
    # CPU time of fio's job thread per I/O: the programs run inline on that
    # thread, and unlike throughput it does not count the time the thread
    # waits for a CPU (the machine may be shared); the tracer's start-up
    # (load, verify, JIT) runs before the job and is not in it.
    busy_ns = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * job["job_runtime"] * 1e6
    return {"ios": int(ios), "iops": iops, "lat_ns": mean_lat,
            "cpu_per_io_ns": busy_ns / max(1, ios)}


def sum_hex_values(entries):
    """Sum of the u64 values of a map dump (per-CPU values summed)."""
    total = []
    for e in entries:
        vals = e.get("values") or [e.get("value", "")]
        n = 0
        for v in vals:
            b = bytes.fromhex(v.replace(" ", ""))
            n += int.from_bytes(b[:8], "little")
        total.append(n)
    return total


def tracer_events(report):
    """(captured, dropped) from a ktrace / bpfjet trace JSON report."""
    captured = sum(r.get("consumed", 0) for r in report.get("ringbufs", {}).values())
    dropped = 0
    stats = report.get("maps", {}).get("rb_stats")
    if stats:
        per_key = sum_hex_values(stats)
        if len(per_key) > 1:
            dropped = per_key[1]
    return captured, dropped


def last_json(path):
    """The tracer's JSON report: the last line of its stdout that parses."""
    for line in reversed(open(path, errors="replace").read().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise RuntimeError(f"{path}: no JSON report")


def one_run(setup, tool, workload, args, tmp):
    fio_out = os.path.join(tmp, "fio.json")
    out = os.path.join(tmp, "tracer.out")
    err = os.path.join(tmp, "tracer.err")
    fio = fio_argv(workload, args.runtime, args.size_mb, fio_out)
    obj = os.path.join(BUILD, f"{tool}.o")
    env = None
    if setup == "none":
        argv = fio
    elif setup == "sud-floor":
        # fio with Syscall User Dispatch on in every thread and nothing
        # attached (scripts/sud-floor.c): what the kernel's dispatch slow
        # path alone costs the workload, the floor of any tracer built on it.
        argv = fio
        env = dict(os.environ, LD_PRELOAD=os.path.join(tmp, "sud-floor.so"))
    elif setup == "kernel":
        argv = [os.path.join(BUILD, "ktrace"), "--json", obj, "--"] + fio
    elif setup == "bpftrace":
        script = os.path.join(ROOT, "examples", "trace", "bpftrace", f"{tool}.bt")
        fio[0] = subprocess.check_output(["which", "fio"], text=True).strip()
        argv = ["bpftrace", script, "-c", shlex.join(fio)]
    elif setup in ("bpfjet", "before", "bpfjet-ring"):
        binary = args.bpfjet_before if setup == "before" else args.bpfjet
        extra = []
        if tool.startswith("rw_tracer"):
            # The ring-buffer tools' ring (`events`); the others have none.
            for spec in args.bpfjet_ringbuf_size:
                extra += ["--ringbuf-size", spec]
            if setup == "bpfjet-ring":
                extra += ["--ringbuf-size", f"events={args.ring_bytes}"]
        argv = ([binary, "trace", "--engine", args.bpfjet_engine, "--json"] + extra
                + [obj, "--"] + fio)
    code, usage = run(argv, out, err, env)
    if code != 0:
        tail = open(err, errors="replace").read()[-600:]
        raise RuntimeError(f"{setup}/{tool}/{workload}: exit {code}: {tail}")
    if setup == "sud-floor":
        m = re.search(r"sud-floor: on in (\d+) threads", open(err, errors="replace").read())
        if not m or int(m.group(1)) < 2:
            raise RuntimeError(f"sud-floor/{workload}: dispatch was not on in fio's threads")
    r = fio_summary(fio_out)
    r["cpu_s"] = usage.ru_utime + usage.ru_stime
    r["max_rss_mb"] = usage.ru_maxrss / 1024
    r["captured"] = r["dropped"] = None
    if tool in EVENT_TOOLS and setup in ("kernel", "bpfjet", "before", "bpfjet-ring"):
        r["captured"], r["dropped"] = tracer_events(last_json(out))
    elif tool in EVENT_TOOLS and setup == "bpftrace":
        text = open(out, errors="replace").read()
        r["captured"] = sum(1 for l in text.splitlines() if re.match(r"^\d+ \d+ ", l))
        lost = [int(m) for m in re.findall(r"Lost (\d+) events", text + open(err).read())]
        r["dropped"] = sum(lost)
    return r


def available(setup, args):
    if setup in ("bpfjet", "before", "bpfjet-ring"):
        binary = args.bpfjet_before if setup == "before" else args.bpfjet
        if not binary:
            return False, "no --bpfjet-before"
        if not os.access(binary, os.X_OK):
            return False, f"{binary} is not built (cargo build --release)"
        ok = subprocess.run([binary, "trace", "--help"], capture_output=True).returncode == 0
        return ok, f"{binary} has no `trace` command"
    if setup == "bpftrace":
        ok = subprocess.run(["which", "bpftrace"], capture_output=True).returncode == 0
        return ok, "bpftrace is not installed"
    if setup == "kernel":
        return os.geteuid() == 0, "the kernel setup needs root"
    if setup == "sud-floor":
        ok = subprocess.run(["cc", "--version"], capture_output=True).returncode == 0
        return ok, "no C compiler for scripts/sud-floor.c"
    return True, ""


def median_spread(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt_pct(m, lo, hi):
    return f"{m:+.1f}% ({lo:+.1f}..{hi:+.1f})"


def svg_chart(rows, path):
    """Horizontal bars: throughput overhead (%) per tool/workload/setup."""
    bars = [(f"{t} {w} {s}", r["overhead"][0]) for (t, w, s), r in rows.items() if s != "none"]
    if not bars:
        return
    width, bar_h, left = 760, 16, 260
    top = max(1.0, max(abs(v) for _, v in bars))
    scale = (width - left - 60) / top
    h = 30 + len(bars) * (bar_h + 4)
    colors = {"kernel": "#4c72b0", "bpftrace": "#dd8452", "bpfjet": "#55a868", "bpfjet-ring": "#2f6b3c",
              "before": "#8c8c8c"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="14">fio throughput lost to tracing (%, median)</text>']
    for i, (label, v) in enumerate(bars):
        y = 24 + i * (bar_h + 4)
        c = colors.get(label.split()[-1], "#888")
        out.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{label}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{max(1, abs(v) * scale):.1f}" height="{bar_h}" fill="{c}"/>')
        out.append(f'<text x="{left + abs(v) * scale + 4:.1f}" y="{y + 12}">{v:.1f}%</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runtime", type=int, default=5)
    p.add_argument("--size-mb", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tools", default="syscount,rw_tracer,rw_tracer_all,fsdist")
    p.add_argument("--workloads", default="read,write,rw")
    p.add_argument("--setups", default="none,sud-floor,kernel,bpftrace,bpfjet,bpfjet-ring")
    p.add_argument("--bpfjet", default=os.path.join(ROOT, "target", "release", "bpfjet"))
    p.add_argument("--bpfjet-engine", default="jit", choices=["interp", "jit"])
    p.add_argument("--bpfjet-before", default="")
    p.add_argument("--interleave", action="store_true")
    p.add_argument("--bpfjet-ringbuf-size", action="append", default=[], metavar="MAP=BYTES",
                   help="passed to bpfjet trace --ringbuf-size for the ring-buffer tools "
                        "(rw_tracer*, whose ring is `events`); repeatable")
    p.add_argument("--ring-bytes", type=int, default=4 << 20,
                   help="the ring of setup bpfjet-ring (rw_tracer*'s `events`), bytes")
    p.add_argument("--markdown")
    p.add_argument("--svg")
    args = p.parse_args()

    subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "examples"), "trace"], check=True)
    # libbpf attaches tracepoints through tracefs; mount it where a minimal
    # system has not.
    if not os.path.isdir("/sys/kernel/tracing/events") and os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"])
    setups = []
    for s in args.setups.split(","):
        ok, why = available(s, args)
        if ok:
            setups.append(s)
        else:
            print(f"SKIPPED: setup {s}: {why}", file=sys.stderr)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "sud-floor" in setups:
            subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", os.path.join(tmp, "sud-floor.so"),
                            os.path.join(ROOT, "scripts", "sud-floor.c"), "-ldl", "-lpthread"],
                           check=True)
        for workload in args.workloads.split(","):
            # Lay the file out once, untimed.
            run(fio_argv(workload, 1, args.size_mb, os.path.join(tmp, "warm.json")))
            traced = [(tool, setup) for tool in args.tools.split(",") for setup in setups
                      if setup not in ("none", "sud-floor")
                      and not (setup == "bpftrace" and tool not in BPFTRACE_TOOLS)
                      and not (setup == "bpfjet-ring" and tool not in EVENT_TOOLS)]
            # The dispatch floor is the same whatever the tool: one row.
            if "sud-floor" in setups:
                traced.insert(0, ("-", "sud-floor"))
            base = results.setdefault(("-", workload, "none"), [])
            for tool, setup in traced:
                results[(tool, workload, setup)] = []
            # Interleaved: one run of each setup per round; else every
            # run of one setup in a row.
            rounds = [[None] + traced] * args.repeat if args.interleave else \
                [[None]] * args.repeat + [[t] for t in traced for _ in range(args.repeat)]
            for cells in rounds:
                for cell in cells:
                    if cell is None:
                        base.append(one_run("none", None, workload, args, tmp))
                        continue
                    tool, setup = cell
                    r = one_run(setup, tool, workload, args, tmp)
                    results[(tool, workload, setup)].append(r)
                    print(f"{tool} {workload} {setup}: {r['iops']:.0f} IOPS", file=sys.stderr)

    rows = {}
    lines = [
        f"fio 4 KiB sync I/O on tmpfs, {args.runtime} s per run, median of {args.repeat} runs (min..max); "
        f"bpfjet on the {args.bpfjet_engine} engine.",
        "",
        "| tool | workload | setup | IOPS | throughput overhead | fio CPU per I/O (ns) | CPU overhead | mean latency (µs) | events captured / calls | dropped | CPU s (tracer+fio) | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (tool, workload, setup), runs in results.items():
        base = results[("-", workload, "none")]
        base_iops = statistics.median(r["iops"] for r in base)
        over = [100.0 * (base_iops - r["iops"]) / base_iops for r in runs]
        rows[(tool, workload, setup)] = {"overhead": median_spread(over)}
        # The same against fio's own CPU time per I/O: on a shared machine
        # its untraced spread (the "none" row) is the noise to compare with.
        base_cpu = statistics.median(r["cpu_per_io_ns"] for r in base)
        cpu_over = [100.0 * (r["cpu_per_io_ns"] - base_cpu) / base_cpu for r in runs]
        cpu_io = statistics.median(r["cpu_per_io_ns"] for r in runs)
        iops = statistics.median(r["iops"] for r in runs)
        lat = statistics.median(r["lat_ns"] for r in runs) / 1000
        cpu = statistics.median(r["cpu_s"] for r in runs)
        rss = max(r["max_rss_mb"] for r in runs)
        if runs[0]["captured"] is not None:
            cap = statistics.median(r["captured"] for r in runs)
            calls = statistics.median(r["ios"] for r in runs)
            events = f"{cap:,.0f} / {calls:,.0f} ({100.0 * cap / max(1, calls):.1f}%)"
            dropped = f"{statistics.median(r['dropped'] for r in runs):,.0f}"
        else:
            events = dropped = "-"
        ov = fmt_pct(*median_spread(over))
        cov = fmt_pct(*median_spread(cpu_over))
        lines.append(f"| {tool} | {workload} | {setup} | {iops:,.0f} | {ov} | {cpu_io:,.0f} | {cov} | {lat:.2f} | {events} | {dropped} | {cpu:.2f} | {rss:.0f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.markdown:
        open(args.markdown, "w").write(table)
    if args.svg:
        svg_chart(rows, args.svg)


if __name__ == "__main__":
    main()
