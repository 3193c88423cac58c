# bpfjet — the two commands a new user needs: `make demo` and `make test`.
CARGO ?= cargo
CONFORMANCE ?= ../shared/conformance/tests
BPFJET := target/release/bpfjet
export PATH := $(HOME)/.cargo/bin:$(PATH)
# Every test that skips a check writes a line here (see
# scripts/report-skips.sh); `make test` empties it first and prints it last.
export BPFJET_SKIP_LOG ?= $(CURDIR)/target/test-skips.log

.PHONY: all setup build examples test test-skips-reset test-rust test-netns test-preload test-trace bench-control-plane bench-preload bench-trace bench-fusion bench-fusion-percall bench-uprobe bench-trace-percall bench-usdt bench-trace-pid bench-wrappers lint conformance demo clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	$(CARGO) build --release --bin bpfjet
	$(CARGO) build --release -p bpfjet-preload
	$(CARGO) build --release -p bpfjet-trace-agent

examples: setup
	$(MAKE) -s -C examples

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test-rust: setup examples build
	$(CARGO) test --workspace --release --no-fail-fast

conformance: build
	@test -d $(CONFORMANCE) || { echo "conformance vectors not found at $(CONFORMANCE)"; exit 1; }
	$(BPFJET) conformance --engine interp $(CONFORMANCE)
	$(BPFJET) conformance --engine jit $(CONFORMANCE)

test: test-skips-reset lint test-rust conformance test-netns test-preload test-trace
	@bash scripts/report-skips.sh "$(BPFJET_SKIP_LOG)"

test-skips-reset:
	@mkdir -p $(dir $(BPFJET_SKIP_LOG)) && : > $(BPFJET_SKIP_LOG)

# Unmodified control planes (bpftool, a libbpf program, xdp-tools in network
# namespaces) under `bpfjet exec`, compared with the kernel (root). `build`
# builds libbpfjet.so next to bpfjet. ringbuf.sh: libbpf's
# ring_buffer__poll on a bpfjet ring buffer. user_ringbuf.sh: libbpf's
# user_ring_buffer__* producer and bpf_user_ringbuf_drain. timer.sh: bpf_timer
# per-flow expiry and a ticker through libbpf. xdp_multiprog.sh: libxdp's
# multi-program dispatcher (freplace) through xdp-loader and libxdp's API;
# freplace.sh: libbpf's freplace API; tail_calls.sh: program fds in
# PROG_ARRAY. devmap_egress.sh: program fds in devmap entries, egress
# programs and BPF_F_BROADCAST on veths. skeleton.sh: one libbpf skeleton application (globals, hash
# updates while traffic runs, a ring buffer, a bpf_link; then killed), the
# same binary against the kernel and under exec. lifetimes.sh: a map held
# through fork and SCM_RIGHTS.
test-preload: build
	BPFJET=$(BPFJET) timeout 600 bash tests/preload/control_planes.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/xdp_tools.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/xdp_events.sh
	BPFJET=$(BPFJET) timeout 120 bash tests/preload/xdpdump.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/xdp_multiprog.sh
	BPFJET=$(BPFJET) timeout 120 bash tests/preload/freplace.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/tail_calls.sh
	BPFJET=$(BPFJET) timeout 180 bash tests/preload/devmap_egress.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/ringbuf.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/user_ringbuf.sh
	BPFJET=$(BPFJET) timeout 120 bash tests/preload/timer.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/skeleton.sh
	BPFJET=$(BPFJET) timeout 120 bash tests/preload/lifetimes.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/tracer.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/bpftrace.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/preload/libbpf_tools.sh
	BPFJET=$(BPFJET) timeout 120 bash tests/preload/uprobe_multi.sh
	BPFJET=$(BPFJET) timeout 120 bash tests/preload/kernel_objects.sh

# Map update + lookup through the interposed bpf() vs the kernel's, side by
# side in one process (docs/PERFORMANCE.md).
bench-preload: build
	@mkdir -p build
	cc -O2 -Wall -o build/map_bench examples/control_plane/map_bench.c -lbpf
	i=bench$$$$; BPFJET_RUN_DIR=build/run $(BPFJET) exec --instance $$i -- build/map_bench 1000000; \
		rc=$$?; rm -rf build/run/$$i /dev/shm/bpfjet.$$i.*; exit $$rc

# Per-hit cost of bpftrace's own program: bpftrace on the kernel's uprobes
# vs the same bpftrace under bpfjet exec with bpfjet trace --instance (root).
bench-control-plane: build
	BPFJET=$(BPFJET) sh scripts/bench-control-plane.sh

# Per-hit uprobe cost: untraced / kernel uprobe / bpfjet trace (interp, JIT)
# on one tight loop, side by side (docs/PERFORMANCE.md, "Tracing"; root).
bench-uprobe: build examples
	BPFJET=$(BPFJET) sh scripts/bench-trace-uprobe.sh

# `bpfjet trace --pid` with system-call tracepoints: how long the process
# is stopped at the attach (uprobe-only vs system calls) and its getpid cost
# before / attached / after the detach, interleaved rounds (docs/TRACING.md).
bench-trace-pid: build
	python3 scripts/bench-trace-pid.py --bpfjet $(BPFJET)

# Per traced system call by call (read, getppid, fstat, poll, raw
# syscall): syscount untraced / kernel / bpfjet, interleaved rounds; set
# BPFJET_BEFORE=path/to/bpfjet to compare with another build (root).
bench-wrappers: build examples
	BPFJET=$(BPFJET) bash scripts/bench-trace-wrappers.sh

# Per-hit USDT cost: kernel USDT uprobes vs bpfjet's jump and int3 patches.
bench-usdt: build
	BPFJET=$(BPFJET) sh scripts/bench-trace-usdt.sh

# The tracing tools of examples/trace/ on one workload in the kernel
# (libbpf) and under `bpfjet trace`: same maps and events (root).
test-trace: build examples
	BPFJET=$(BPFJET) timeout 600 python3 tests/trace/differential.py

# The eBPF-libraries study side by side: fio untraced, traced in the kernel
# (libbpf), by bpftrace and by bpfjet (docs/PERFORMANCE.md, "Tracing").
bench-trace: build examples
	python3 scripts/bench-trace.py --bpfjet $(BPFJET) --interleave --markdown build/bench-trace.md --svg docs/bench-trace.svg

# Pairwise fusion (docs/PERFORMANCE.md, "Pairwise fusion"): fsdist on fio
# random reads/writes untraced, under Syscall User Dispatch alone (the SUD
# floor, scripts/sud-floor.c), in the kernel, bpfjet unfused (without and
# with .rodata folding) and each step of the fusion ladder (every --fuse
# level the binary offers). The differential test of fused
# execution is the cargo test crates/cli/tests/trace_fusion.rs (make test-rust).
bench-fusion: build examples
	python3 scripts/bench-fusion.py --bpfjet $(BPFJET) --markdown build/bench-fusion.md --svg docs/bench-fusion.svg

# The same pair's cost per system call without fio (a read/write loop),
# wall clock and CPU, the same ladder and the SUD floor.
bench-fusion-percall: build examples
	BPFJET=$(BPFJET) scripts/bench-fusion-percall.sh

# Per system call, without fio: syscount, rw_tracer, rw_tracer_all, fsdist
# in the kernel (ktrace) and under bpfjet's JIT, interleaved rounds
# (docs/PERFORMANCE.md, "The generic per-hit path"); BPFJET_BEFORE=path
# adds another bpfjet build.
bench-trace-percall: build examples
	BPFJET=$(BPFJET) bash scripts/bench-trace-percall.sh

# AF_XDP end to end in network namespaces (root): TX, DROP, REDIRECT, PASS via TAP.
test-netns: build examples
	BPFJET=$(BPFJET) timeout 900 bash tests/netns/afxdp_e2e.sh
	BPFJET=$(BPFJET) timeout 300 bash tests/netns/afxdp_multibuf.sh

demo: build examples
	@bash scripts/demo.sh

clean:
	$(CARGO) clean
	rm -rf build
