//! Creation rules per map type, with the errno the kernel returns for each
//! violation (`*_map_alloc_check` in kernel/bpf/*.c).

use crate::error::MapError;
use crate::spec::{flags as f, MapSpec, MapType};

/// The kernel's KMALLOC_MAX_SIZE on x86-64 (order-10 pages).
pub(crate) const KMALLOC_MAX_SIZE: u64 = 1 << 22;
/// Per-CPU allocations are limited to the smallest per-CPU unit.
pub(crate) const PCPU_MIN_UNIT_SIZE: u32 = 32 << 10;
/// CONFIG_NR_CPUS of distribution kernels, where the running kernel does
/// not say its own.
const NR_CPUS_DEFAULT: u32 = 8192;

/// The running kernel's CONFIG_NR_CPUS (`/sys/devices/system/cpu/kernel_max`
/// + 1): the CPUMAP max_entries limit, which varies between builds.
pub(crate) fn nr_cpus() -> u32 {
    static NR: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *NR.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/kernel_max")
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .map_or(NR_CPUS_DEFAULT, |max| max + 1)
    })
}
pub(crate) const LPM_DATA_SIZE_MAX: u32 = 256;
/// `sizeof(struct htab_elem)` in kernel 6.18 (x86-64), as its size
/// checks use it (found with bpftool there: the largest value accepted).
const HTAB_ELEM_HEADER: u64 = 48;
/// The LPM trie node header in the same check (`LPM_VAL_SIZE_MAX`).
const LPM_NODE_HEADER: u64 = 24;
/// Largest ring buffer: record headers keep a 32-bit page offset.
const RINGBUF_MAX_DATA_SZ: u64 = (u32::MAX as u64 - 4096) * 4096;

const ACCESS_MASK: u32 = f::RDONLY | f::RDONLY_PROG | f::WRONLY | f::WRONLY_PROG;
const ARRAY_CREATE_MASK: u32 =
    f::NUMA_NODE | f::MMAPABLE | ACCESS_MASK | f::PRESERVE_ELEMS | f::INNER_MAP;
const HTAB_CREATE_MASK: u32 =
    f::NO_PREALLOC | f::NO_COMMON_LRU | f::NUMA_NODE | ACCESS_MASK | f::ZERO_SEED;
const LPM_CREATE_MASK: u32 = f::NO_PREALLOC | f::NUMA_NODE | ACCESS_MASK;
const QUEUE_STACK_CREATE_MASK: u32 = f::NUMA_NODE | ACCESS_MASK;
const BLOOM_CREATE_MASK: u32 = f::NUMA_NODE | f::ZERO_SEED | ACCESS_MASK;
/// No program access flags: the kernel makes a devmap read-only for
/// programs itself.
const DEV_CREATE_MASK: u32 = f::NUMA_NODE | f::RDONLY | f::WRONLY;

fn einval(why: &'static str) -> MapError {
    MapError::Invalid(why)
}

/// Program access flags must not say read-only and write-only at once.
fn access_ok(flags: u32) -> bool {
    flags & (f::RDONLY_PROG | f::WRONLY_PROG) != (f::RDONLY_PROG | f::WRONLY_PROG)
        && flags & (f::RDONLY | f::WRONLY) != (f::RDONLY | f::WRONLY)
}

/// Check `spec` like the kernel's map creation and return the spec as the
/// map will really be (the kernel adjusts max_entries of per-CPU LRU maps).
/// Whether the kernel would create a map of `spec` (on a machine with
/// `ncpus` CPUs), without creating it: the error names the rule broken.
pub fn check_creatable(spec: &MapSpec, ncpus: u32) -> Result<(), MapError> {
    validate(spec, ncpus.max(1), None, crate::shm::page_size()).map(|_| ())
}

pub(crate) fn validate(
    spec: &MapSpec,
    ncpus: u32,
    lock: Option<u32>,
    page: usize,
) -> Result<MapSpec, MapError> {
    use MapType::*;
    let mut out = spec.clone();
    let (k, v, n, fl) = (spec.key_size, spec.value_size, spec.max_entries, spec.flags);
    // The kernel's map_create, before any type's rule: map_extra is for
    // bloom filters (and arenas) only. bpfjet's ring buffers take their
    // backpressure setting there too (an object's or the CLI's; a control
    // plane's BPF_MAP_CREATE is refused as by the kernel).
    if spec.map_extra != 0 && !matches!(spec.map_type, BloomFilter | Ringbuf) {
        return Err(einval("map_extra is only for bloom filters"));
    }
    if !access_ok(fl) {
        return Err(einval("conflicting access flags"));
    }
    // Every map type bpfjet has refuses it in its `*_map_alloc_check`; an
    // object leaves it 0 for its loader to set (libbpf's
    // `bpf_map__set_max_entries`), which `--max-entries MAP=N` does.
    // An LRU map without preallocation is ENOTSUPP before its sizes are
    // looked at (htab_map_alloc_check); that rule is the type's, below.
    let lru_unpreallocated =
        matches!(spec.map_type, LruHash | LruPercpuHash) && fl & f::NO_PREALLOC != 0;
    if n == 0 && !lru_unpreallocated {
        return Err(einval(
            "max_entries is 0, which the kernel refuses for this map type; \
             set it with --max-entries MAP=N (a loader's bpf_map__set_max_entries)",
        ));
    }
    // The same for a value size left to the loader (libbpf's
    // `bpf_map__set_value_size`; libbpf-tools size their stack maps so).
    if v == 0 && matches!(spec.map_type, StackTrace) {
        return Err(einval(
            "value_size is 0, which the kernel refuses for this map type; \
             set it with --value-size MAP=BYTES (a loader's bpf_map__set_value_size)",
        ));
    }
    match spec.map_type {
        Array | PercpuArray | ProgArray | PerfEventArray | ArrayOfMaps | CgroupArray => {
            let percpu = spec.map_type == PercpuArray;
            if n == 0 || k != 4 || v == 0 || fl & !ARRAY_CREATE_MASK != 0 {
                return Err(einval("array: key_size 4, value_size > 0, max_entries > 0"));
            }
            if percpu && fl & f::NUMA_NODE != 0 {
                return Err(einval("per-CPU array: no NUMA node"));
            }
            // array_map_alloc_check: mmapable and inner-map arrays are
            // plain arrays.
            if spec.map_type != Array && fl & (f::MMAPABLE | f::INNER_MAP) != 0 {
                return Err(einval("only a plain array can be mmapable or an inner map"));
            }
            if fl & f::PRESERVE_ELEMS != 0 && spec.map_type != PerfEventArray {
                return Err(einval("BPF_F_PRESERVE_ELEMS is for perf event arrays"));
            }
            if matches!(
                spec.map_type,
                ProgArray | PerfEventArray | ArrayOfMaps | CgroupArray
            ) {
                if v != 4 {
                    return Err(einval("fd array: value_size must be 4"));
                }
                if fl & (f::RDONLY_PROG | f::WRONLY_PROG) != 0 {
                    return Err(einval("fd array: no program access flags"));
                }
            }
            if spec.map_type == ArrayOfMaps && spec.inner.is_none() {
                return Err(einval("array of maps needs an inner map template"));
            }
            if percpu && v > PCPU_MIN_UNIT_SIZE {
                return Err(MapError::SizeLimit(
                    "per-CPU array: value_size over 32 KiB (PCPU_MIN_UNIT_SIZE)",
                ));
            }
            // Kernel 6.18's array_map_alloc_check: only INT_MAX (the
            // elements are vmalloc'ed, not kmalloc'ed; a 5.6 MB value, as
            // eNetSTL's control-plane cuckoo table declares, is created).
            if v > i32::MAX as u32 {
                return Err(MapError::SizeLimit("array: value_size over INT_MAX"));
            }
        }
        StackTrace => {
            // stack_map_alloc: u32 stack ids, values a whole number of u64
            // instruction pointers, at most the kernel's default
            // `perf_event_max_stack` (127) of them; build-id stacks are not
            // supported (there are no kernel build ids in user space).
            if fl & !(f::NUMA_NODE | f::RDONLY | f::WRONLY) != 0 {
                return Err(einval(
                    "stack trace: only BPF_F_NUMA_NODE and access flags are supported",
                ));
            }
            if k != 4 || v < 8 || v % 8 != 0 {
                return Err(einval(
                    "stack trace: key_size 4, value_size a multiple of 8",
                ));
            }
            if v / 8 > 127 {
                return Err(einval(
                    "stack trace: at most 127 frames (perf_event_max_stack)",
                ));
            }
        }
        Hash | PercpuHash | LruHash | LruPercpuHash | HashOfMaps => {
            let lru = matches!(spec.map_type, LruHash | LruPercpuHash);
            let percpu = matches!(spec.map_type, PercpuHash | LruPercpuHash);
            let prealloc = fl & f::NO_PREALLOC == 0;
            let percpu_lru = fl & f::NO_COMMON_LRU != 0;
            if fl & !HTAB_CREATE_MASK != 0 {
                return Err(einval("hash: unknown map flags"));
            }
            if !lru && percpu_lru {
                return Err(einval("BPF_F_NO_COMMON_LRU needs an LRU map"));
            }
            if lru && !prealloc {
                return Err(MapError::KernelNotSupported);
            }
            if fl & f::NUMA_NODE != 0 && (percpu || percpu_lru) {
                return Err(einval("hash: NUMA node with per-CPU"));
            }
            if n == 0 || k == 0 || v == 0 {
                return Err(einval(
                    "hash: key_size, value_size, max_entries must be > 0",
                ));
            }
            // Kernel 6.18's htab_map_alloc_check: key and value together
            // under KMALLOC_MAX_SIZE less the element header (no limit of
            // the key alone: a key in a map value may be longer than the
            // stack). Measured there with bpftool: key 4 takes values up
            // to 4,194,251 bytes.
            if k as u64 + v as u64 >= KMALLOC_MAX_SIZE - HTAB_ELEM_HEADER
                || (percpu && v > PCPU_MIN_UNIT_SIZE)
            {
                return Err(MapError::SizeLimit(
                    "hash: key_size + value_size + 48 reach 4 MiB (KMALLOC_MAX_SIZE)",
                ));
            }
            if spec.map_type == HashOfMaps {
                if v != 4 {
                    return Err(einval("hash of maps: value_size must be 4"));
                }
                if spec.inner.is_none() {
                    return Err(einval("hash of maps needs an inner map template"));
                }
            }
            if percpu_lru {
                // Every CPU gets an equal share of the elements.
                let c = ncpus.max(1);
                let up = (n as u64).div_ceil(c as u64) * c as u64;
                out.max_entries = if up > u32::MAX as u64 {
                    n / c * c
                } else {
                    up as u32
                };
                if out.max_entries == 0 {
                    return Err(einval("hash: max_entries"));
                }
            }
        }
        LpmTrie => {
            if n == 0
                || fl & f::NO_PREALLOC == 0
                || fl & !LPM_CREATE_MASK != 0
                || !(4 + 1..=4 + LPM_DATA_SIZE_MAX).contains(&k)
                || v < 1
                || v as u64 > KMALLOC_MAX_SIZE - LPM_DATA_SIZE_MAX as u64 - LPM_NODE_HEADER
            {
                return Err(einval(
                    "lpm: needs BPF_F_NO_PREALLOC, key 4+1..4+256 bytes, value > 0",
                ));
            }
        }
        Queue | Stack => {
            if k != 0 || v == 0 || n == 0 || fl & !QUEUE_STACK_CREATE_MASK != 0 {
                return Err(einval("queue/stack: key_size 0, value_size > 0"));
            }
            if v as u64 > KMALLOC_MAX_SIZE {
                return Err(MapError::SizeLimit(
                    "queue/stack: value_size over 4 MiB (KMALLOC_MAX_SIZE)",
                ));
            }
        }
        BloomFilter => {
            if k != 0
                || v == 0
                || n == 0
                || fl & !BLOOM_CREATE_MASK != 0
                || spec.map_extra & !0xf != 0
            {
                return Err(einval("bloom: key_size 0, value_size > 0, map_extra <= 15"));
            }
        }
        Ringbuf | UserRingbuf => {
            if fl & !f::NUMA_NODE != 0
                || k != 0
                || v != 0
                || !n.is_power_of_two()
                || !(n as usize).is_multiple_of(page)
            {
                return Err(einval(
                    "ringbuf: max_entries a power of 2 and page multiple",
                ));
            }
            if n as u64 > RINGBUF_MAX_DATA_SZ {
                return Err(MapError::SizeLimit("ringbuf: over 16 TiB of data"));
            }
            if spec.map_type == UserRingbuf {
                // The kernel's map_create: map_extra only for bloom
                // filters and arenas.
                if spec.map_extra != 0 {
                    return Err(einval("user ringbuf: map_extra must be 0"));
                }
            } else {
                // bpfjet's own bits (backpressure); the kernel refuses any.
                crate::ringbuf::Backpressure::from_map_extra(spec.map_extra)?;
            }
        }
        Devmap | DevmapHash => {
            if n == 0 || k != 4 || (v != 4 && v != 8) || fl & !DEV_CREATE_MASK != 0 {
                return Err(einval("devmap: key_size 4, value_size 4 or 8"));
            }
        }
        Cpumap => {
            if n == 0 || k != 4 || (v != 4 && v != 8) || fl & !f::NUMA_NODE != 0 {
                return Err(einval("cpumap: key_size 4, value_size 4 or 8"));
            }
            if n > nr_cpus() {
                return Err(MapError::SizeLimit(
                    "cpumap: max_entries over the kernel's NR_CPUS",
                ));
            }
        }
        Xskmap => {
            if n == 0 || k != 4 || v != 4 || fl & !(f::NUMA_NODE | f::RDONLY | f::WRONLY) != 0 {
                return Err(einval("xskmap: key_size 4, value_size 4"));
            }
        }
    }
    if let Some(off) = lock {
        // bpf_spin_lock is allowed in hash and array values only.
        if !matches!(spec.map_type, Hash | Array) {
            return Err(MapError::NotSupported);
        }
        if off % 4 != 0 || off as u64 + 4 > v as u64 {
            return Err(einval("bpf_spin_lock offset outside the value"));
        }
    }
    Ok(out)
}
