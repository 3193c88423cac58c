#!/usr/bin/env python3
"""What `bpfjet trace OBJ --pid PID` costs a running process with
system-call tracepoints (docs/TRACING.md, "System calls of a running
process"), in interleaved rounds on one target each:

- how long the process is stopped at the attach (bpfjet's "attached" line):
  a uprobe-only object (uprobe on libc's getpid: dlopen + patching) against
  the system-call object (crates/cli/tests/trace/pid_syscount.bpf.c: the
  same, plus every thread enabling dispatch through an injected call);
- a getpid() loop of the target's main thread (CPU ns per call) before the
  attach, while attached (libc's getpid wrapper is on the fast path since
  the wrapper table grew to 106 entries, so this is the fast path, the
  programs run) and after the detach (dispatch off again: the untraced
  cost is expected back), each next to the same loop in a control
  target that is never traced (the machine's drift between the two).

Usage: scripts/bench-trace-pid.py [--rounds 5] [--calls 200000]
  [--engine jit] [--bpfjet target/release/bpfjet]
Needs root (ptrace of a child is enough with ptrace_scope 0/1 as root),
clang-19, and a build of bpfjet and its agent:
  cargo build --release -p bpfjet-cli -p bpfjet-trace-agent
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "crates/cli/tests/trace")

UPROBE = r'''
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
__u64 hits;
SEC("uprobe/libc.so.6:getpid")
int on_getpid(void *ctx)
{
	__sync_fetch_and_add(&hits, 1);
	return 0;
}
char LICENSE[] SEC("license") = "GPL";
'''


def run(cmd):
    subprocess.run(cmd, check=True)


class Target:
    def __init__(self, exe):
        self.p = subprocess.Popen([exe], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self.line() == "ready"

    def line(self):
        return self.p.stdout.readline().strip()

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.line()

    def bench(self, calls):
        l = self.send(f"bench {calls}")
        assert l.startswith("ns "), l
        # The thread's CPU time per call: preemption by other processes on
        # a shared machine is not counted (the signal handler's is).
        return float(l.split()[2])

    def exit(self):
        assert self.send("exit") == "bye"
        assert self.p.wait() == 7


def attach(bpfjet, obj, pid, engine):
    """Starts `bpfjet trace OBJ --pid PID`; returns it and the stopped ms."""
    t = subprocess.Popen([bpfjet, "trace", obj, "--json", "--pid", str(pid),
                          "--engine", engine],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while True:
        l = t.stderr.readline()
        if not l:
            sys.exit(f"bpfjet did not attach: {t.communicate()}")
        m = re.search(r"stopped for ([0-9.]+) ms", l)
        if m:
            d = re.search(r"dispatched in \d+ threads in ([0-9.]+) ms", l)
            return t, float(m.group(1)), float(d.group(1)) if d else None


def detach(t):
    t.send_signal(signal.SIGINT)
    out, err = t.communicate(timeout=60)
    if t.returncode != 0:
        sys.exit(f"bpfjet trace failed: {err}")


def summary(name, xs, unit):
    return (f"{name:<44} median {statistics.median(xs):9.1f} {unit}  "
            f"min..max {min(xs):.1f}..{max(xs):.1f}  (n={len(xs)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--engine", default="jit")
    ap.add_argument("--bpfjet", default=os.path.join(ROOT, "target/release/bpfjet"))
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bpfjet-pid-bench.")
    exe = os.path.join(d, "pid_sys_target")
    run(["cc", "-O2", "-pthread", "-o", exe, os.path.join(SRC, "pid_sys_target.c")])
    sysobj = os.path.join(d, "pid_syscount.o")
    run(["clang-19", "-O2", "-g", "-target", "bpf", "-c",
         os.path.join(SRC, "pid_syscount.bpf.c"), "-o", sysobj])
    with open(os.path.join(d, "getpid.bpf.c"), "w") as f:
        f.write(UPROBE)
    upobj = os.path.join(d, "getpid.o")
    run(["clang-19", "-O2", "-g", "-target", "bpf", "-c",
         os.path.join(d, "getpid.bpf.c"), "-o", upobj])
    stop_up, stop_sys, per_thread, before, during, after = [], [], [], [], [], []
    ctl_before, ctl_after = [], []
    control = Target(exe)
    for r in range(a.rounds):
        # Uprobe-only attach: the stop without per-thread calls.
        t = Target(exe)
        tr, ms, _ = attach(a.bpfjet, upobj, t.p.pid, a.engine)
        stop_up.append(ms)
        detach(tr)
        t.exit()
        # System calls: the stop, then getpid before / during / after.
        t = Target(exe)
        t.send("go 10")  # threads warmed up
        t.bench(a.calls)  # warm-up
        before.append(t.bench(a.calls))
        ctl_before.append(control.bench(a.calls))
        tr, ms, calls = attach(a.bpfjet, sysobj, t.p.pid, a.engine)
        stop_sys.append(ms)
        per_thread.append(calls)
        during.append(t.bench(a.calls // 10))
        detach(tr)
        t.bench(a.calls)  # warm-up
        after.append(t.bench(a.calls))
        ctl_after.append(control.bench(a.calls))
        t.exit()
        print(f"round {r + 1}: stopped uprobe {stop_up[-1]:.1f} ms, syscalls "
              f"{stop_sys[-1]:.1f} ms (enable calls {per_thread[-1]:.1f} ms); getpid ns before {before[-1]:.1f} during "
              f"{during[-1]:.1f} after {after[-1]:.1f}; control {ctl_before[-1]:.1f} "
              f"{ctl_after[-1]:.1f}", file=sys.stderr)
    print(f"bpfjet trace --pid, engine {a.engine}, {a.bpfjet}")
    print(summary("stopped at attach, uprobe only (4 threads)", stop_up, "ms"))
    print(summary("stopped at attach, system calls (4 threads)", stop_sys, "ms"))
    print(summary("  of which the 4 per-thread enable calls", per_thread, "ms"))
    print(summary("getpid before the attach (CPU)", before, "ns"))
    print(summary("getpid attached (wrapper fast path, programs run)", during, "ns"))
    print(summary("getpid after the detach (CPU)", after, "ns"))
    print(summary("control, next to 'before' (CPU)", ctl_before, "ns"))
    print(summary("control, next to 'after' (CPU)", ctl_after, "ns"))
    control.exit()
    subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    main()
