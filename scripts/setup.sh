#!/usr/bin/env bash
# Installs every system package bpfjet needs on a fresh Debian (bookworm) machine.
# Idempotent: installs only what is missing, so `make test` can call it every time.
set -euo pipefail

PACKAGES=(
  clang-19 llvm-19 llvm-19-dev libclang-19-dev libpolly-19-dev  # BPF C compiler; LLVM 19 for the JIT crate
  libbpf-dev linux-libc-dev gcc-multilib     # bpf_helpers.h, linux/bpf.h, asm/types.h
  bpftool                                    # kernel-side inspection in tests
  libelf-dev zlib1g-dev libzstd-dev pkg-config make  # libbpf (vendored by libbpf-sys) build deps
  iproute2                                   # network namespaces and veth for end-to-end tests
  python3                                    # fixture generators in examples/tools
  libxdp1 libxdp-dev xdp-tools               # real compiled BPF objects (/usr/lib/x86_64-linux-gnu/bpf) and unmodified control-plane tools
  bpftrace fio                               # unmodified tracer and workload for the tracing comparisons
  libbpf-tools                               # bcc's libbpf-tools as Debian builds them: unmodified tracers as control planes
  golang-github-cilium-ebpf-dev              # cilium/ebpf's test objects (clang 7-14, both endians): a loader corpus nobody here compiled
  g++ libc6-dev                              # bpfjet trace tests: C/C++ targets (a -static one, a C++ exception one)
  systemtap-sdt-dev                          # <sys/sdt.h>: USDT probes in the bpfjet trace tests
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The kernel's file systems: bpftrace and libbpf find tracepoints
# and their formats there, and the differential tracing tests run the same
# tools on the kernel. A fresh machine may not have them mounted; as root,
# mount what is missing (nothing to do when they are there).
if [ "$(id -u)" -eq 0 ]; then
  if [ -d /sys/kernel/tracing ] && [ ! -e /sys/kernel/tracing/events ]; then
    mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null \
      && echo "setup: mounted tracefs on /sys/kernel/tracing" \
      || echo "setup: could not mount tracefs on /sys/kernel/tracing (the kernel-side tracing tests will say so)" >&2
  fi
  # bpffs: the kernel-side differential tests pin programs and maps there.
  if [ -d /sys/fs/bpf ] && ! mountpoint -q /sys/fs/bpf; then
    mount -t bpf bpf /sys/fs/bpf 2>/dev/null \
      && echo "setup: mounted bpffs on /sys/fs/bpf" \
      || echo "setup: could not mount bpffs on /sys/fs/bpf (the kernel-side tests that pin will say so)" >&2
  fi
  if [ -d /sys/kernel/debug ] && [ ! -e /sys/kernel/debug/tracing ] && ! mountpoint -q /sys/kernel/debug; then
    mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null \
      && echo "setup: mounted debugfs on /sys/kernel/debug" \
      || echo "setup: could not mount debugfs on /sys/kernel/debug" >&2
  fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust (rustup) first" >&2
  exit 1
fi
echo "setup: ok"
