#!/usr/bin/env python3
"""Run the corpus fixtures through the Linux kernel (BPF_PROG_TEST_RUN via bpftool)
and check each case's expected action (and expected output bytes, if given).

    kernel_check.py [--build ../build/examples] [--cpu 0] [-v] [NAME ...]
    kernel_check.py --insns            # load every object, print xlated/jited sizes

For every examples/xdp/fixtures/<NAME>/cases.json, for every distinct state a
case uses: load the object with `bpftool prog loadall ... pinmaps`, apply the
STATE.json with one `bpftool batch` (inner maps are created with `bpftool map
create`, PROG_ARRAY slots point at the object's own pinned programs), then run
each case with `bpftool prog run ... repeat N` pinned to one CPU.

Needs root, bpftool and bpffs (mounted if missing); without them it says so and exits 0
with "0 passed, 0 failed, N skipped". Standard library only.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, HERE)
from mkpkt import from_hex  # noqa: E402

ACTIONS = {0: "ABORTED", 1: "DROP", 2: "PASS", 3: "TX", 4: "REDIRECT"}
BPFFS = "/sys/fs/bpf"


def hexbytes(s):
    b = bytes.fromhex(s.replace(" ", ""))
    return " ".join("%02x" % x for x in b)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


class Loaded:
    """One object loaded and pinned under a private bpffs directory."""

    def __init__(self, obj, pin_dir):
        self.pin_dir = pin_dir
        shutil.rmtree(pin_dir, ignore_errors=True)
        run(["bpftool", "prog", "loadall", obj, pin_dir, "type", "xdp", "pinmaps", pin_dir + "/maps"])

    def map_path(self, name):
        return os.path.join(self.pin_dir, "maps", name)

    def apply(self, state):
        lines = []
        for name, entries in state.items():
            for i, e in enumerate(entries):
                target = "pinned " + self.map_path(name)
                key = "key hex " + hexbytes(e["key"])
                if "inner" in e:
                    spec = e["inner"]
                    inner = os.path.join(self.pin_dir, "inner_%s_%d" % (name, i))
                    run(["bpftool", "map", "create", inner, "type", spec["type"],
                         "key", str(spec["key_size"]), "value", str(spec["value_size"]),
                         "entries", str(spec["max_entries"]), "name", "inner%d" % i])
                    lines.append("map update %s %s value pinned %s" % (target, key, inner))
                    for ie in spec.get("entries", []):
                        lines.append("map update pinned %s key hex %s value hex %s"
                                     % (inner, hexbytes(ie["key"]), hexbytes(ie["value"])))
                elif "prog" in e:
                    prog = os.path.join(self.pin_dir, e["prog"])
                    lines.append("map update %s %s value pinned %s" % (target, key, prog))
                elif "values" in e:
                    vals = set(e["values"])
                    if len(vals) != 1:
                        raise SystemExit("%s: distinct per-CPU values are not supported by bpftool" % name)
                    lines.append("map update %s %s value hex %s" % (target, key, hexbytes(vals.pop())))
                else:
                    lines.append("map update %s %s value hex %s" % (target, key, hexbytes(e["value"])))
        if not lines:
            return
        with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as f:
            f.write("\n".join(lines) + "\n")
            batch = f.name
        try:
            run(["bpftool", "batch", "file", batch])
        finally:
            os.unlink(batch)

    def test_run(self, prog, data, repeat, cpu):
        with tempfile.TemporaryDirectory() as tmp:
            din, dout = os.path.join(tmp, "in"), os.path.join(tmp, "out")
            with open(din, "wb") as f:
                f.write(data)
            out = run(["taskset", "-c", str(cpu), "bpftool", "-j", "prog", "run", "pinned",
                       os.path.join(self.pin_dir, prog), "data_in", din, "data_out", dout,
                       "repeat", str(repeat)]).stdout
            with open(dout, "rb") as f:
                data_out = f.read()
        return json.loads(out)["retval"], data_out

    def close(self):
        shutil.rmtree(self.pin_dir, ignore_errors=True)


def resolve_state(fixture_dir, build, ref):
    if not ref:
        return {}
    path = os.path.join(build, ref[len("build:"):]) if ref.startswith("build:") else os.path.join(fixture_dir, ref)
    with open(path) as f:
        return json.load(f)


def unavailable():
    """Why the kernel cannot serve as the oracle here, or None. Mounts bpffs if needed."""
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("bpftool"):
        return "bpftool not found"
    if not os.path.ismount(BPFFS):
        subprocess.run(["mount", "-t", "bpf", "bpf", BPFFS], capture_output=True)
        if not os.path.ismount(BPFFS):
            return "bpffs not mounted at " + BPFFS
    return None


def insn_counts(build, names):
    """Kernel verifier verdict and program sizes for every object in build/xdp."""
    objs = sorted(f for f in os.listdir(os.path.join(build, "xdp")) if f.endswith(".o"))
    rc = 0
    print("%-18s %-16s %8s %8s" % ("object", "program", "xlated", "jited B"))
    for obj in objs:
        if names and obj[:-2] not in names:
            continue
        pin = os.path.join(BPFFS, "bpfjet_insns_" + obj[:-2])
        try:
            loaded = Loaded(os.path.join(build, "xdp", obj), pin)
        except subprocess.CalledProcessError as e:
            print("%-18s REJECTED by the kernel verifier:\n%s" % (obj, e.stderr[-3000:]))
            rc = 1
            continue
        try:
            for prog in sorted(p for p in os.listdir(pin) if p != "maps"):
                info = json.loads(run(["bpftool", "-j", "prog", "show", "pinned", os.path.join(pin, prog)]).stdout)
                print("%-18s %-16s %8d %8d" % (obj, prog, info["bytes_xlated"] // 8, info["bytes_jited"]))
        finally:
            loaded.close()
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build", "examples"))
    ap.add_argument("--fixtures", default=os.path.join(HERE, "..", "xdp", "fixtures"))
    ap.add_argument("--cpu", type=int, default=0)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--insns", action="store_true",
                    help="only load every object and print each program's xlated instruction count")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    why = unavailable()
    if args.insns:
        if why:
            print("kernel_check: SKIPPED (%s)" % why)
            return 0
        return insn_counts(args.build, args.names)

    names = args.names or sorted(d for d in os.listdir(args.fixtures)
                                 if os.path.exists(os.path.join(args.fixtures, d, "cases.json")))
    fixtures = []
    for name in names:
        fdir = os.path.join(args.fixtures, name)
        with open(os.path.join(fdir, "cases.json")) as f:
            fixtures.append((name, fdir, json.load(f)))
    total = sum(len(c["cases"]) for _, _, c in fixtures)

    if why:
        print("kernel_check: SKIPPED (%s): the kernel cannot be used as the oracle" % why)
        print("0 passed, 0 failed, %d skipped" % total)
        return 0

    passed = failed = 0
    for name, fdir, spec in fixtures:
        obj = os.path.join(args.build, "xdp", spec["object"])
        by_state = {}
        for case in spec["cases"]:
            by_state.setdefault(case.get("state"), []).append(case)
        for state_ref, cases in by_state.items():
            state = resolve_state(fdir, args.build, state_ref)
            # A fresh load per case keeps cases independent of each other's map writes.
            for case in cases:
                loaded = Loaded(obj, os.path.join(BPFFS, "bpfjet_check_" + name))
                label = "%s/%s" % (name, case["name"])
                try:
                    loaded.apply(state)
                    with open(os.path.join(fdir, case["packet"])) as f:
                        data = from_hex(f.read())
                    retval, out = loaded.test_run(spec["prog"], data, case.get("repeat", 1), args.cpu)
                except subprocess.CalledProcessError as e:
                    failed += 1
                    print("FAIL %s: %s: %s" % (label, " ".join(e.cmd[:4]), (e.stderr or e.stdout).strip()))
                    continue
                finally:
                    loaded.close()
                got = ACTIONS.get(retval, str(retval))
                problems = []
                if got != case["expected_action"]:
                    problems.append("action %s, expected %s" % (got, case["expected_action"]))
                if "expected_out" in case:
                    with open(os.path.join(fdir, case["expected_out"])) as f:
                        want = from_hex(f.read())
                    if out != want:
                        problems.append("output differs:\n  got  %s\n  want %s" % (out.hex(), want.hex()))
                if problems:
                    failed += 1
                    print("FAIL %s: %s" % (label, "; ".join(problems)))
                else:
                    passed += 1
                    if args.verbose:
                        print("ok   %s: %s (%d bytes out)" % (label, got, len(out)))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
