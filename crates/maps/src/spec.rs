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
    /// Whether a map of spec `candidate` may sit in a map-in-map slot
    /// whose inner template is `self` (the kernel's `map_meta_equal`): the
    /// same type, key and value sizes and flags, and for a plain array the
    /// same entry count unless the template is a `BPF_F_INNER_MAP` array
    /// (PERCPU_ARRAY has the plain rule). Programs are verified against the
    /// template, so a map that does not fit must never be reached through
    /// the slot.
    pub fn fits_inner_template(&self, candidate: &MapSpec) -> bool {
        let same = self.map_type == candidate.map_type
            && self.key_size == candidate.key_size
            && self.value_size == candidate.value_size
            && self.flags == candidate.flags;
        same && (self.map_type != MapType::Array
            || self.flags & flags::INNER_MAP != 0
            || self.max_entries == candidate.max_entries)
    }

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

#[cfg(test)]
mod inner_template_tests {
    use super::*;

    #[test]
    fn inner_maps_fit_their_template_as_the_kernel_says() {
        let t = MapSpec::new("t", MapType::Array, 4, 8, 4);
        let mut more = t.clone();
        more.max_entries = 8;
        // A plain array's entry count must match...
        assert!(t.fits_inner_template(&t));
        assert!(!t.fits_inner_template(&more));
        // ...unless the template is a BPF_F_INNER_MAP array.
        let mut inner_map = t.clone();
        inner_map.flags = flags::INNER_MAP;
        let mut more_inner = more.clone();
        more_inner.flags = flags::INNER_MAP;
        assert!(inner_map.fits_inner_template(&more_inner));
        // Per-CPU arrays and hashes: any entry count.
        let p = MapSpec::new("p", MapType::PercpuArray, 4, 8, 4);
        let mut p8 = p.clone();
        p8.max_entries = 8;
        assert!(p.fits_inner_template(&p8));
        let h = MapSpec::new("h", MapType::Hash, 4, 8, 4);
        let mut h8 = h.clone();
        h8.max_entries = 8;
        assert!(h.fits_inner_template(&h8));
        // Type, sizes and flags always.
        let mut v4 = h.clone();
        v4.value_size = 4;
        assert!(!h.fits_inner_template(&v4));
        let lru = MapSpec::new("l", MapType::LruHash, 4, 8, 4);
        assert!(!h.fits_inner_template(&lru));
        let mut np = h.clone();
        np.flags = flags::NO_PREALLOC;
        assert!(!h.fits_inner_template(&np));
    }
}
