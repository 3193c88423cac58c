//! What a map is: type, sizes, flags. Produced by the object loader, consumed
//! by the map implementations, the verifier and the JIT.

use std::fmt;

/// Map types, numbered as in the kernel's `enum bpf_map_type` so that values
/// read from ELF objects and BTF map definitions carry over unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MapType {
    Hash = 1,
    Array = 2,
    ProgArray = 3,
    PerfEventArray = 4,
    PercpuHash = 5,
    /// `BPF_MAP_TYPE_STACK_TRACE`: stack ids (u32 keys) to arrays of
    /// instruction pointers, filled by `bpf_get_stackid`.
    StackTrace = 7,
    PercpuArray = 6,
    /// `BPF_MAP_TYPE_CGROUP_ARRAY`: cgroups by index, for
    /// `bpf_current_task_under_cgroup`. A control plane fills it with
    /// cgroup fds, which bpfjet cannot take (updates are refused), so its
    /// slots stay empty (libbpf-tools declare it for a filter that is off
    /// unless asked for).
    CgroupArray = 8,
    LruHash = 9,
    LruPercpuHash = 10,
    LpmTrie = 11,
    ArrayOfMaps = 12,
    HashOfMaps = 13,
    Devmap = 14,
    Xskmap = 17,
    Cpumap = 16,
    DevmapHash = 25,
    Queue = 22,
    Stack = 23,
    Ringbuf = 27,
    BloomFilter = 30,
    /// `BPF_MAP_TYPE_USER_RINGBUF`: the RINGBUF layout with the roles
    /// swapped: userspace produces (libbpf's `user_ring_buffer`), programs
    /// consume with `bpf_user_ringbuf_drain`.
    UserRingbuf = 31,
}

impl MapType {
    /// From the kernel's numeric map type; `None` for types bpfjet does not support.
    pub fn from_kernel(t: u32) -> Option<MapType> {
        use MapType::*;
        Some(match t {
            1 => Hash,
            2 => Array,
            3 => ProgArray,
            4 => PerfEventArray,
            5 => PercpuHash,
            6 => PercpuArray,
            7 => StackTrace,
            8 => CgroupArray,
            9 => LruHash,
            10 => LruPercpuHash,
            11 => LpmTrie,
            12 => ArrayOfMaps,
            13 => HashOfMaps,
            14 => Devmap,
            16 => Cpumap,
            17 => Xskmap,
            22 => Queue,
            23 => Stack,
            25 => DevmapHash,
            27 => Ringbuf,
            30 => BloomFilter,
            31 => UserRingbuf,
            _ => return None,
        })
    }

    /// The name bpftool uses (`bpftool map show` "type" column); also the
    /// spelling accepted in STATE.json `inner.type`.
    pub fn name(self) -> &'static str {
        use MapType::*;
        match self {
            Hash => "hash",
            Array => "array",
            ProgArray => "prog_array",
            PerfEventArray => "perf_event_array",
            PercpuHash => "percpu_hash",
            PercpuArray => "percpu_array",
            StackTrace => "stack_trace",
            CgroupArray => "cgroup_array",
            LruHash => "lru_hash",
            LruPercpuHash => "lru_percpu_hash",
            LpmTrie => "lpm_trie",
            ArrayOfMaps => "array_of_maps",
            HashOfMaps => "hash_of_maps",
            Devmap => "devmap",
            Cpumap => "cpumap",
            Xskmap => "xskmap",
            DevmapHash => "devmap_hash",
            Queue => "queue",
            Stack => "stack",
            Ringbuf => "ringbuf",
            BloomFilter => "bloom_filter",
            UserRingbuf => "user_ringbuf",
        }
    }

    pub fn from_name(name: &str) -> Option<MapType> {
        (0..64)
            .filter_map(MapType::from_kernel)
            .find(|t| t.name() == name)
    }

    pub fn is_per_cpu(self) -> bool {
        matches!(
            self,
            MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
        )
    }
}

impl fmt::Display for MapType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Map flags (`map_flags`), kernel values.
pub mod flags {
    pub const NO_PREALLOC: u32 = 1 << 0;
    pub const NO_COMMON_LRU: u32 = 1 << 1;
    pub const NUMA_NODE: u32 = 1 << 2;
    pub const RDONLY: u32 = 1 << 3;
    pub const WRONLY: u32 = 1 << 4;
    pub const STACK_BUILD_ID: u32 = 1 << 5;
    pub const ZERO_SEED: u32 = 1 << 6;
    pub const RDONLY_PROG: u32 = 1 << 7;
    pub const WRONLY_PROG: u32 = 1 << 8;
    pub const CLONE: u32 = 1 << 9;
    pub const MMAPABLE: u32 = 1 << 10;
    pub const PRESERVE_ELEMS: u32 = 1 << 11;
    pub const INNER_MAP: u32 = 1 << 12;
}

/// Update flags (`BPF_ANY`, ...), kernel values.
pub mod update {
    pub const ANY: u64 = 0;
    pub const NOEXIST: u64 = 1;
    pub const EXIST: u64 = 2;
    pub const F_LOCK: u64 = 4;
}

/// Pinning as declared with `__uint(pinning, LIBBPF_PIN_BY_NAME)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pinning {
    #[default]
    None,
    ByName,
}

/// Everything needed to create a map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapSpec {
    pub name: String,
    pub map_type: MapType,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// Bloom filter: number of hash functions (`map_extra`).
    pub map_extra: u64,
    /// ARRAY_OF_MAPS / HASH_OF_MAPS: the inner map template.
    pub inner: Option<Box<MapSpec>>,
    pub pinning: Pinning,
    /// Global data maps (.rodata/.data/.bss): the initial value image.
    pub initial_data: Option<Vec<u8>>,
    /// `.rodata`-style maps are frozen after initialisation (read-only for
    /// programs and control planes alike), which lets the JIT constant-fold them.
    pub frozen: bool,
}

impl MapSpec {
    pub fn new(
        name: &str,
        map_type: MapType,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    ) -> Self {
        MapSpec {
            name: name.to_string(),
            map_type,
            key_size,
            value_size,
            max_entries,
            flags: 0,
            map_extra: 0,
            inner: None,
            pinning: Pinning::None,
            initial_data: None,
            frozen: false,
        }
    }
}
