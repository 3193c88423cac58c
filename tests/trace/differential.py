#!/usr/bin/env python3
"""Tracing differential test: the tools of examples/trace/ run on the same
command (examples/trace/workload.c) in the kernel (ktrace, libbpf) and in
bpfjet (`bpfjet trace`), and must report the same thing.

What is compared is what both must see identically: the workload's own
calls. The kernel's probes also see the dynamic loader's system calls,
which run before any in-process tracer exists, so system-call counts are
compared for calls the loader does not make (getppid, sched_yield, write)
and events for the workload's descriptors (100-103). bpfjet runs each tool
on its interpreter and on its JIT.

  BPFJET=target/release/bpfjet tests/trace/differential.py
Needs root (the kernel side). Prints `SKIPPED: ...` and exits 0 only when a
kernel facility is missing; any difference fails.
"""

import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build", "examples", "trace")
BPFJET = os.environ.get("BPFJET", os.path.join(ROOT, "target", "release", "bpfjet"))
ROUNDS = "200"
# Paces the workload so the kernel's consumer (woken per record) keeps up
# with 4 KiB records in rw-tracer-all's 256 KiB ring.
PACE_US = "300"
SYS_WRITE, SYS_SCHED_YIELD, SYS_GETPPID = 1, 24, 110
WORKLOAD_FDS = range(100, 104)
EVENT = struct.Struct("<QQIIIIqQQqII16s64s")  # struct rw_event, 152 bytes

failures = []


def shown(v, limit=600):
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + f"... ({len(s)} characters)"


def check(what, kernel, bpfjet):
    if kernel == bpfjet:
        print(f"ok   {what}")
        return
    # Event lists run to megabytes: name the first difference, cut the rest.
    if isinstance(kernel, list) and isinstance(bpfjet, list):
        first = next((i for i, (a, b) in enumerate(zip(kernel, bpfjet)) if a != b),
                     min(len(kernel), len(bpfjet)))
        print(f"FAIL {what}: {len(kernel)} vs {len(bpfjet)} items, first difference at {first}:"
              f"\n  kernel: {shown(kernel[first:first + 3])}\n  bpfjet: {shown(bpfjet[first:first + 3])}")
    else:
        print(f"FAIL {what}:\n  kernel: {shown(kernel)}\n  bpfjet: {shown(bpfjet)}")
    failures.append(what)


def trace(tracer, tool, tmp):
    events = os.path.join(tmp, f"{tool}.{os.path.basename(tracer[0])}.events")
    argv = tracer + ["--json", "--events", events, os.path.join(BUILD, f"{tool}.o"), "--",
                     os.path.join(tmp, "workload"), ROUNDS, PACE_US]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL {' '.join(argv)}: exit {p.returncode}\n{p.stderr[-2000:]}")
        failures.append(f"{tool} run")
        return None, []
    report = json.loads(p.stdout.strip().splitlines()[-1])
    return report, read_events(events)


def read_events(path):
    """Records as the tracers write them: u32 length, then the bytes."""
    out = []
    if not os.path.exists(path):
        return out
    data = open(path, "rb").read()
    i = 0
    while i + 4 <= len(data):
        (n,) = struct.unpack_from("<I", data, i)
        out.append(data[i + 4:i + 4 + n])
        i += 4 + n
    return out


def u64s(entries):
    """{key int: summed u64 value} of a JSON map dump."""
    out = {}
    for e in entries:
        k = int.from_bytes(bytes.fromhex(e["key"].replace(" ", "")), "little")
        vals = e.get("values") or [e["value"]]
        out[k] = sum(int.from_bytes(bytes.fromhex(v.replace(" ", ""))[:8], "little") for v in vals)
    return out


def workload_events(records):
    """(op, fd, count, ret, data) of the events on the workload's fds."""
    out = []
    for r in records:
        ts, lat, pid, tid, uid, op, fd, buf, count, ret, data_len, cpu, comm, _ = EVENT.unpack_from(r)
        if fd in WORKLOAD_FDS:
            out.append((op, fd, count, ret, r[EVENT.size:EVENT.size + data_len]))
    return out


def compare(label, tool, k, ke, b, be):
    """One tool's kernel report (k, events ke) against bpfjet's (b, be)."""
    if tool in ("syscount", "syscount_tp"):
        kc, bc = u64s(k["maps"]["counts"]), u64s(b["maps"]["counts"])
        for nr in (SYS_GETPPID, SYS_SCHED_YIELD, SYS_WRITE):
            check(f"{label}: calls of syscall {nr}", kc.get(nr), bc.get(nr))
        if tool == "syscount_tp":
            # The workload's failing writes (ENOSPC, EBADF), seen at
            # raw_syscalls:sys_exit; the loader makes no failing write.
            kf, bf = u64s(k["maps"]["failures"]), u64s(b["maps"]["failures"])
            check(f"{label}: failed calls of syscall {SYS_WRITE}", kf.get(SYS_WRITE),
                  bf.get(SYS_WRITE))
        check(f"{label}: exit code", k["exit_code"], b["exit_code"])
    elif tool in ("rw_tracer", "rw_tracer_all", "rw_tracer_dyn"):
        kw, bw = workload_events(ke), workload_events(be)
        check(f"{label}: {len(kw)} events on the workload's fds (op, fd, count, ret, data)", kw, bw)
        if tool == "rw_tracer_dyn":
            # Dynptr reservations: each record as long as its data.
            def sized(recs):
                return all(len(r) == EVENT.size + EVENT.unpack_from(r)[10] for r in recs)
            check(f"{label}: every record is the event and its data", (True, True),
                  (sized(ke), sized(be)))
        check(f"{label}: nothing dropped", u64s(k["maps"]["rb_stats"]).get(1),
              u64s(b["maps"]["rb_stats"]).get(1))
    elif tool == "fsdist":
        # Latencies differ run to run; the number of write calls may not.
        kh, bh = u64s(k["maps"]["hist"]), u64s(b["maps"]["hist"])
        check(f"{label}: write calls in the histogram", sum(v for s, v in kh.items() if s >= 32),
              sum(v for s, v in bh.items() if s >= 32))
    elif tool == "funclatency":
        check(f"{label}: libc read() calls in the histogram",
              sum(u64s(k["maps"]["hist"]).values()), sum(u64s(b["maps"]["hist"]).values()))
    elif tool == "bytes_per_call":
        check(f"{label}: sizes asked/returned", u64s(k["maps"]["sizes"]), u64s(b["maps"]["sizes"]))
        check(f"{label}: short/failed writes", u64s(k["maps"]["outcomes"]), u64s(b["maps"]["outcomes"]))


def fusion_detection(tmp):
    """Pairwise fusion on the tools (bpfjet only: the kernel has no such
    thing): funclatency and bytes_per_call hand their entry value over in a
    map only their pair uses; fsdist's and rw_tracer's maps are shared by
    the read and the write pairs, every use keyed by the thread in its
    pair's role, so both pairs internalise them. What is fusable runs fused
    (the same list in "fused"); the comparisons against the kernel above
    ran these fused runs."""
    want = {
        "funclatency": [{"entry": "funclatency_entry", "exit": "funclatency_exit",
                         "internalised": ["starts"]}],
        "bytes_per_call": [{"entry": "bytes_entry", "exit": "bytes_exit",
                            "internalised": ["asked"]}],
        "fsdist": [{"entry": "fsdist_enter_read", "exit": "fsdist_exit_read",
                    "internalised": ["starts"]},
                   {"entry": "fsdist_enter_write", "exit": "fsdist_exit_write",
                    "internalised": ["starts"]}],
        "rw_tracer": [{"entry": "rw_enter_read", "exit": "rw_exit_read",
                       "internalised": ["inflight"]},
                      {"entry": "rw_enter_write", "exit": "rw_exit_write",
                       "internalised": ["inflight"]}],
    }
    for tool, fusable in want.items():
        argv = [BPFJET, "trace", "--json", "--explain", os.path.join(BUILD, f"{tool}.o"), "--",
                os.path.join(tmp, "workload"), "1"]
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL {' '.join(argv)}: exit {p.returncode}\n{p.stderr[-2000:]}")
            failures.append(f"{tool} --explain run")
            continue
        report = json.loads(p.stdout.strip().splitlines()[-1])
        check(f"{tool}: fusable pairs", fusable, report.get("fusable"))
        ran = report.get("fused") or []
        check(f"{tool}: what is fusable runs fused", fusable,
              [{k: v for k, v in p.items() if k not in ("steps", "call_through")} for p in ran])
        # The interpreter (the default engine) folds nothing and runs the
        # slot operations as calls; the system-call pairs run through the
        # libc wrappers' call-through stubs.
        syscall_pairs = tool in ("fsdist", "rw_tracer")
        steps = (["inline-call-through"] if syscall_pairs else []) + ["internalise", "slot-calls"]
        check(f"{tool}: the steps each pair ran with",
              [steps] * len(fusable), [p.get("steps") for p in ran])
        check(f"{tool}: --explain says which map is kept per thread", True,
              "kept per thread" in p.stderr)
    argv = [BPFJET, "trace", "--json", "--no-fuse", os.path.join(BUILD, "funclatency.o"), "--",
            os.path.join(tmp, "workload"), "1"]
    p = subprocess.run(argv, capture_output=True, text=True)
    report = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
    check("funclatency --no-fuse: nothing analysed", [], report.get("fusable"))
    check("funclatency --no-fuse: nothing runs fused", [], report.get("fused"))


def skip(why):
    """`SKIPPED: why` on stdout and in make test's list of skips."""
    line = f"SKIPPED: {why}"
    print(line)
    log = os.environ.get("BPFJET_SKIP_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"[tests/trace/differential.py] {line}\n")


def main():
    if os.geteuid() != 0:
        skip("tracing differential: needs root for the kernel side")
        return 0
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        skip("tracing differential: kernel has no BTF (/sys/kernel/btf/vmlinux)")
        return 0
    if not os.path.isdir("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"])
    if not os.path.isdir("/sys/kernel/tracing/events/syscalls"):
        skip("tracing differential: no syscall tracepoints (tracefs)")
        return 0
    subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "examples"), "trace"], check=True)
    kernel = [os.path.join(BUILD, "ktrace")]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["cc", "-O2", "-Wall", "-o", os.path.join(tmp, "workload"),
                        os.path.join(ROOT, "examples", "trace", "workload.c")], check=True)

        # The kernel once per tool; bpfjet on the interpreter and the JIT.
        tools = ("syscount", "syscount_tp", "rw_tracer", "rw_tracer_all", "rw_tracer_dyn", "fsdist",
                 "funclatency", "bytes_per_call")
        kernel_runs = {tool: trace(kernel, tool, tmp) for tool in tools}
        for engine in ("interp", "jit"):
            bpfjet = [BPFJET, "trace", "--engine", engine]
            for tool in tools:
                (k, ke), (b, be) = kernel_runs[tool], trace(bpfjet, tool, tmp)
                if k and b:
                    compare(f"{engine}: {tool}", tool, k, ke, b, be)

        # Backpressure (bpfjet only, opt-in per ring): the same events as
        # the kernel's, and the ring itself dropped nothing.
        k, ke = kernel_runs["rw_tracer_all"]
        b, be = trace([BPFJET, "trace", "--engine", "jit", "--ringbuf-backpressure", "events=5000"],
                      "rw_tracer_all", tmp)
        if k and b:
            compare("jit --ringbuf-backpressure: rw_tracer_all", "rw_tracer_all", k, ke, b, be)
            check("jit --ringbuf-backpressure: rw_tracer_all: ring dropped nothing", 0,
                  b["ringbufs"]["events"]["dropped"])

        fusion_detection(tmp)

    if failures:
        print(f"tracing differential: {len(failures)} FAILED: {', '.join(failures)}")
        return 1
    print("tracing differential: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
