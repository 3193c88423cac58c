//! `struct bpf_{prog,map,btf}_info` as `BPF_OBJ_GET_INFO_BY_FD` fills them.
//! The byte layouts are the UAPI header's.

/// `struct bpf_map_info` (88 bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapInfo {
    pub map_type: u32,
    pub id: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub name: String,
    pub btf_id: u32,
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
    pub map_extra: u64,
}

/// `struct bpf_prog_info` (232 bytes); arrays the caller asked for are
/// copied by the backend, this holds the scalar fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgInfo {
    pub prog_type: u32,
    pub id: u32,
    pub tag: [u8; 8],
    pub jited_prog_len: u32,
    pub xlated_prog_len: u32,
    pub load_time: u64,
    pub created_by_uid: u32,
    pub nr_map_ids: u32,
    pub name: String,
    pub gpl_compatible: bool,
    pub btf_id: u32,
    pub run_time_ns: u64,
    pub run_cnt: u64,
    pub verified_insns: u32,
}

/// `struct bpf_btf_info` (32 bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BtfInfo {
    pub btf_size: u32,
    pub id: u32,
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}
fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}
fn put_name(b: &mut [u8], off: usize, name: &str) {
    let n = name.len().min(15);
    b[off..off + n].copy_from_slice(&name.as_bytes()[..n]);
}

fn get32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}

impl MapInfo {
    pub const SIZE: usize = 88;

    /// The fields a kernel's `BPF_OBJ_GET_INFO_BY_FD` wrote into `b`
    /// ([`Self::SIZE`] bytes).
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> MapInfo {
        let name = &b[24..40];
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        MapInfo {
            map_type: get32(b, 0),
            id: get32(b, 4),
            key_size: get32(b, 8),
            value_size: get32(b, 12),
            max_entries: get32(b, 16),
            map_flags: get32(b, 20),
            name: String::from_utf8_lossy(&name[..end]).into_owned(),
            btf_id: get32(b, 64),
            btf_key_type_id: get32(b, 68),
            btf_value_type_id: get32(b, 72),
            map_extra: u64::from_ne_bytes(b[80..88].try_into().unwrap()),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::SIZE];
        put32(&mut b, 0, self.map_type);
        put32(&mut b, 4, self.id);
        put32(&mut b, 8, self.key_size);
        put32(&mut b, 12, self.value_size);
        put32(&mut b, 16, self.max_entries);
        put32(&mut b, 20, self.map_flags);
        put_name(&mut b, 24, &self.name);
        put32(&mut b, 64, self.btf_id);
        put32(&mut b, 68, self.btf_key_type_id);
        put32(&mut b, 72, self.btf_value_type_id);
        put64(&mut b, 80, self.map_extra);
        b
    }
}

impl ProgInfo {
    pub const SIZE: usize = 232;
    /// Offsets of the caller-provided arrays: `xlated_prog_insns` (u64
    /// address) with `xlated_prog_len`, `map_ids` with `nr_map_ids`.
    pub const XLATED_LEN_OFF: usize = 20;
    pub const XLATED_INSNS_OFF: usize = 32;
    pub const NR_MAP_IDS_OFF: usize = 52;
    pub const MAP_IDS_OFF: usize = 56;
    pub const JITED_LEN_OFF: usize = 16;
    /// `func_info_rec_size`, `func_info` (u64 address), `nr_func_info`.
    pub const FUNC_INFO_REC_SIZE_OFF: usize = 132;
    pub const FUNC_INFO_OFF: usize = 136;
    pub const NR_FUNC_INFO_OFF: usize = 144;
    pub const ATTACH_BTF_OBJ_ID_OFF: usize = 220;
    pub const ATTACH_BTF_ID_OFF: usize = 224;

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::SIZE];
        put32(&mut b, 0, self.prog_type);
        put32(&mut b, 4, self.id);
        b[8..16].copy_from_slice(&self.tag);
        put32(&mut b, 16, self.jited_prog_len);
        put32(&mut b, 20, self.xlated_prog_len);
        put64(&mut b, 40, self.load_time);
        put32(&mut b, 48, self.created_by_uid);
        put32(&mut b, 52, self.nr_map_ids);
        put_name(&mut b, 64, &self.name);
        // `gpl_compatible:1` is the first bit of the word after ifindex.
        put32(&mut b, 84, u32::from(self.gpl_compatible));
        put32(&mut b, 128, self.btf_id);
        put64(&mut b, 192, self.run_time_ns);
        put64(&mut b, 200, self.run_cnt);
        put32(&mut b, 216, self.verified_insns);
        b
    }
}

impl BtfInfo {
    pub const SIZE: usize = 32;
    pub const BTF_OFF: usize = 0;
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::SIZE];
        put32(&mut b, 8, self.btf_size);
        put32(&mut b, 12, self.id);
        b
    }
}
